// SPDX-License-Identifier: GPL-2.0

//! Memory windows: `struct ib_mw` with the driver's [`Driver::Mw`] inside, and its type as
//! a plain Rust value.
//!
//! Only processes allocate windows in this kernel (uverbs' `ALLOC_MW`; ib_core has no
//! kernel API for them), and ib_core's answer is the window's rkey, which the binding sets
//! from the driver's object ([`MwObject::rkey`](super::MwObject::rkey)). ib_core keeps the
//! window's PD in use while the window lives, so a process's windows are deallocated
//! before its PDs, on `ibv_dealloc_mw` or when it exits.

use core::mem::MaybeUninit;

use kernel::types::Opaque;

use super::{bindings as b, driver::Driver};

/// An MW as ib_core allocates it (`size_ib_mw`): the `ib_mw` (ib_core's: only reached
/// through raw pointers), then the driver's data, initialised in place by `alloc_mw` and
/// dropped by `dealloc_mw`.
#[repr(C)]
pub(super) struct IbMw<T: Driver> {
    pub(super) ib: Opaque<b::ib_mw>,
    pub(super) data: MaybeUninit<T::Mw>,
}

/// A memory window's type (`enum ib_mw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MwType {
    /// Type 1 (`IB_MW_TYPE_1`): bound by `ibv_bind_mw`, usable by any QP of its PD.
    Type1,
    /// Type 2 (`IB_MW_TYPE_2`): bound by a work request; of type 2B
    /// (`IB_DEVICE_MEM_WINDOW_TYPE_2B`), to the QP that posts it, usable by that QP only.
    Type2,
}

impl MwType {
    /// `None` for a type ib_core does not know (uverbs refuses any other before the verb).
    pub(super) fn from_raw(t: b::ib_mw_type) -> Option<Self> {
        match t {
            b::ib_mw_type_IB_MW_TYPE_1 => Some(Self::Type1),
            b::ib_mw_type_IB_MW_TYPE_2 => Some(Self::Type2),
            _ => None,
        }
    }
}
