// SPDX-License-Identifier: GPL-2.0

//! Per-QP counters (`rdma statistic qp`): `struct rdma_counter` with the driver's
//! [`Driver::Counter`] inside.
//!
//! ib_core makes a counter when a QP is bound to one (in auto mode, as it moves to `INIT`;
//! or by hand, `rdma statistic qp bind`), binds QPs to it, reads it, unbinds each QP (at
//! the latest when the QP is destroyed, before the driver destroys it) and deallocates it
//! once the last QP is gone, after a last read whose values it keeps as the port's history.
//! Bind, unbind and read run under the counter's own lock (`rdma_counter.lock`), one at a
//! time. The binding claims the QP's `counter` for ib_core before the driver binds (with an
//! atomic exchange: ib_core checks that a QP is unbound without a lock, so two binds of one
//! QP can race; the loser gets `EINVAL`) and clears it once the driver unbinds.
//!
//! What ib_core adds up: `rdma statistic show link` and sysfs `hw_counters/` show the
//! port's values ([`Driver::hw_stats`]) plus every counter's (live ones read again, gone
//! ones as last read). A driver whose NIC counts each event on the port and on the QP
//! therefore answers the port's values less what its counters have reported.
//!
//! One quirk of ib_core: if the first bind of a new counter fails, ib_core frees it
//! without `counter_dealloc`, so the driver's data is forgotten, not dropped. A fresh
//! counter must hold nothing that needs a drop until a bind has succeeded.

use core::mem::MaybeUninit;

use kernel::types::Opaque;

use super::{bindings as b, driver::Driver};

/// A counter as ib_core allocates it (`size_rdma_counter`): the `rdma_counter` (ib_core's:
/// only reached through raw pointers), then the driver's data, initialised in place by
/// `counter_init` and dropped by `counter_dealloc`.
#[repr(C)]
pub(super) struct IbCounter<T: Driver> {
    pub(super) ib: Opaque<b::rdma_counter>,
    pub(super) data: MaybeUninit<T::Counter>,
}
