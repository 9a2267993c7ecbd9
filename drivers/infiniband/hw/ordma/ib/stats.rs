// SPDX-License-Identifier: GPL-2.0

//! Hardware counters: the names a driver gives ib_core for a port's counters
//! (`rdma statistic show link`, sysfs `ports/<n>/hw_counters/`). The driver names them
//! once, in a `static` ([`hw_stats`]), and reads them on request
//! ([`Driver::hw_stats`](super::Driver::hw_stats)).

use core::ptr;

use kernel::{prelude::*, str::as_char_ptr_in_const_context};

use super::bindings as b;

/// One hardware counter's descriptor (`struct rdma_stat_desc`): its name.
#[repr(transparent)]
pub(crate) struct HwStat(b::rdma_stat_desc);

// SAFETY: a descriptor holds a pointer to a `'static` C string and a null `priv`, never
// written after it is made: sharing it between threads shares only that string.
unsafe impl Sync for HwStat {}

impl HwStat {
    /// The counter named `name` (as ib_core shows it).
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self(b::rdma_stat_desc {
            name: as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: ptr::null(),
        })
    }

    /// The descriptors of `stats`, as ib_core reads them.
    pub(super) fn as_raw(stats: &'static [HwStat]) -> *const b::rdma_stat_desc {
        stats.as_ptr().cast()
    }
}

/// The descriptors of the counters `names`, in order: for a driver's `static`.
pub(crate) const fn hw_stats<const N: usize>(names: &[&'static CStr; N]) -> [HwStat; N] {
    let mut stats = [const { HwStat::new(c"") }; N];
    let mut i = 0;
    while i < N {
        stats[i] = HwStat::new(names[i]);
        i += 1;
    }
    stats
}
