// SPDX-License-Identifier: GPL-2.0

//! The trampolines of hardware counters: a port's counter set, and reading it.

use kernel::prelude::*;

use crate::ib::{
    bindings as b,
    device::data,
    driver::{port_desc, Driver},
    stats::HwStat,
};

/// # Safety
///
/// `ib` is one of `T`'s devices (every device with these ops is), live for the call.
pub(super) unsafe extern "C" fn alloc_hw_port_stats<T: Driver>(
    _ib: *mut b::ib_device,
    _port: u32,
) -> *mut b::rdma_hw_stats {
    let stats = T::HW_STATS;
    let Ok(n) = i32::try_from(stats.len()) else {
        return core::ptr::null_mut();
    };
    // CAST: a small constant (10, in milliseconds), widened.
    let lifespan = b::RDMA_HW_STATS_DEFAULT_LIFESPAN as usize;
    // SAFETY: the descriptors are `'static` (ib_core keeps the pointer for as long as the
    // set lives) and `n` of them; ib_core fails the port's registration on a null return.
    unsafe { b::rdma_alloc_hw_stats_struct(HwStat::as_raw(stats), n, lifespan) }
}

/// # Safety
///
/// See `alloc_hw_port_stats`; `stats` is the set `alloc_hw_port_stats` made for `port`.
pub(super) unsafe extern "C" fn get_hw_stats<T: Driver>(
    ib: *mut b::ib_device,
    stats: *mut b::rdma_hw_stats,
    port: u32,
    _index: i32,
) -> i32 {
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    let d = unsafe { data::<T>(ib) };
    if port_desc(d, port).is_none() {
        return EINVAL.to_errno();
    }
    // SAFETY: ib_core hands the set it had `alloc_hw_port_stats` make for this port, under
    // its lock (or, while the port registers, before anyone else can see it): its `value`
    // has `num_counters` entries, ours to write for the call.
    let (n, values) = unsafe {
        let n = (*stats).num_counters;
        let len = usize::try_from(n).unwrap_or(0);
        (n, (*stats).value.as_mut_slice(len))
    };
    // Every counter at once: ib_core then keeps them for the set's lifespan.
    match d.hw_stats(port, values) {
        Ok(()) => n,
        Err(e) => e.to_errno(),
    }
}
