// SPDX-License-Identifier: GPL-2.0

//! Completion queues: `struct ib_cq` with the driver's [`Driver::Cq`] inside, and what a
//! driver is told and answers when one is created.

use core::mem::MaybeUninit;

use super::{bindings as b, driver::Driver};

/// A CQ as ib_core allocates it (`size_ib_cq`): the `ib_cq`, the number the driver gave
/// it (its key in the device's event table), then the driver's data, initialised by
/// `create_cq` and dropped by `destroy_cq`.
#[repr(C)]
pub(super) struct IbCq<T: Driver> {
    pub(super) ib: b::ib_cq,
    pub(super) num: u32,
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

/// What the driver answers for a new CQ.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqCreated {
    /// The driver's number for the CQ: events name it ([`EventSink::cq_completion`]);
    /// below [`DeviceAttr::max_cq`].
    ///
    /// [`EventSink::cq_completion`]: super::EventSink::cq_completion
    /// [`DeviceAttr::max_cq`]: super::DeviceAttr::max_cq
    pub(crate) num: u32,
    /// Entries the CQ holds (at least those asked for): the caller's `cqe`.
    pub(crate) cqe: u32,
}
