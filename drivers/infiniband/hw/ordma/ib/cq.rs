// SPDX-License-Identifier: GPL-2.0

//! Completion queues: `struct ib_cq` with the driver's [`Driver::Cq`] inside, and what a
//! driver is told when one is created.

use core::mem::MaybeUninit;

use kernel::types::Opaque;

use super::{bindings as b, driver::Driver};

/// A CQ as ib_core allocates it (`size_ib_cq`): the `ib_cq` (ib_core's, which it may
/// change at any time: only reached through raw pointers), then the driver's data,
/// initialised in place by `create_cq` and dropped by `destroy_cq`.
#[repr(C)]
pub(super) struct IbCq<T: Driver> {
    pub(super) ib: Opaque<b::ib_cq>,
    pub(super) data: MaybeUninit<T::Cq>,
}

/// What the creator asks of a new CQ (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqInit {
    /// Entries asked for (at least 1; ib_core checks).
    pub(crate) cqe: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub(crate) flags: u32,
}
