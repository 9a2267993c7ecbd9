// SPDX-License-Identifier: GPL-2.0

//! Protection domains: `struct ib_pd` with the driver's [`Driver::Pd`] inside.

use core::mem::MaybeUninit;

use kernel::types::Opaque;

use super::{bindings as b, driver::Driver};

/// A PD as ib_core allocates it (`size_ib_pd`): the `ib_pd` (ib_core's: only reached
/// through raw pointers), then the driver's data, initialised in place by `alloc_pd` and
/// dropped by `dealloc_pd`.
#[repr(C)]
pub(super) struct IbPd<T: Driver> {
    pub(super) ib: Opaque<b::ib_pd>,
    pub(super) data: MaybeUninit<T::Pd>,
}
