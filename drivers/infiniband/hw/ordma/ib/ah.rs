// SPDX-License-Identifier: GPL-2.0

//! Address handles: `struct ib_ah` with the driver's [`Driver::Ah`] inside, and the
//! creator's request (`struct rdma_ah_init_attr`) as a plain Rust value.

use core::mem::MaybeUninit;

use kernel::types::Opaque;

use super::{bindings as b, driver::Driver, qp::AhAttr};

/// An AH as ib_core allocates it (`size_ib_ah`): the `ib_ah` (ib_core's: only reached
/// through raw pointers), then the driver's data, initialised in place by `create_ah` and
/// dropped by `destroy_ah`.
#[repr(C)]
pub(super) struct IbAh<T: Driver> {
    pub(super) ib: Opaque<b::ib_ah>,
    pub(super) data: MaybeUninit<T::Ah>,
}

/// What the creator asks of a new AH (`struct rdma_ah_init_attr`). A kernel caller may
/// create AHs in atomic context (without `RDMA_CREATE_AH_SLEEPABLE`): the driver's
/// `create_ah` does not sleep.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AhInit {
    /// The address.
    pub(crate) attr: AhAttr,
}

impl AhInit {
    /// `None` for an address that is neither of the IB type nor of the RoCE one (OPA), or
    /// missing.
    ///
    /// # Safety
    ///
    /// `a.ah_attr` is null or valid for reads for the call.
    pub(super) unsafe fn from_raw(a: &b::rdma_ah_init_attr) -> Option<Self> {
        // SAFETY: null or valid (the caller's guarantee).
        let attr = unsafe { a.ah_attr.as_ref() }?;
        Some(Self {
            attr: AhAttr::from_raw(attr)?,
        })
    }
}
