// SPDX-License-Identifier: GPL-2.0

//! Completion queues: `struct ib_cq` with the driver's [`Driver::Cq`] inside, and what a
//! driver is told when one is created.

use core::{marker::PhantomData, mem::MaybeUninit, ptr::NonNull};

use kernel::{prelude::*, types::Opaque};

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

/// Where ib_core keeps a CQ's size (`ib_cq.cqe`, what uverbs answers after a resize). A
/// driver sets it under the lock that serialises its resizes of the CQ, so that of two
/// resizes at once (uverbs holds only a read lock on the CQ's object) the size left is the
/// ring's.
///
/// # Invariants
///
/// `cq` is a live CQ, for `'a`.
pub(crate) struct CqSize<'a> {
    cq: NonNull<b::ib_cq>,
    _p: PhantomData<&'a b::ib_cq>,
}

impl CqSize<'_> {
    /// # Safety
    ///
    /// `cq` is a live CQ for the value's lifetime.
    pub(super) unsafe fn new(cq: NonNull<b::ib_cq>) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            cq,
            _p: PhantomData,
        }
    }

    /// Sets the CQ's size.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a size beyond `i32`.
    pub(crate) fn set(&self, cqe: u32) -> Result {
        let cqe = i32::try_from(cqe).map_err(|_| EINVAL)?;
        // SAFETY: `cq` is live (invariant); uverbs may read the field at the same time
        // (its response to another resize), hence one volatile store.
        unsafe { (&raw mut (*self.cq.as_ptr()).cqe).write_volatile(cqe) };
        Ok(())
    }
}
