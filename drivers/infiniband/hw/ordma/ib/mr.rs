// SPDX-License-Identifier: GPL-2.0

//! Memory regions: `struct ib_mr` with the driver's [`Driver::Mr`] inside.
//!
//! Unlike PDs and contexts, ib_core does not allocate MRs (this kernel has no
//! `size_ib_mr`): `reg_user_mr` returns the `ib_mr` it made. The binding allocates an
//! [`IbMr`] (`KBox`), initialises the driver's data in place inside it, returns its
//! `ib_mr` and frees it in `dereg_mr`, after dropping the driver's data.
//!
//! `rereg_user_mr` has the driver re-register the MR in place, with the old registration's
//! parameters where the call changes none; the keys stay (as soft-RoCE's and mlx5's do,
//! and as rdma-core's tests expect), and the driver answers only once the device no longer
//! uses the old translation, access or PD. An MR over a dma-buf is not re-registered
//! (`EOPNOTSUPP`): its file is not kept.

use core::mem::MaybeUninit;

use kernel::types::Opaque;

use super::{bindings as b, driver::Driver};

/// The keys a registered MR answers to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrKeys {
    /// The key local work requests name.
    pub(crate) lkey: u32,
    /// The key remote peers name.
    pub(crate) rkey: u32,
}

/// What an MR was registered with, kept for `rereg_user_mr`.
#[derive(Clone, Copy, Debug)]
pub(super) struct MrReg {
    /// The first user virtual address; `None` for a dma-buf.
    pub(super) start: Option<u64>,
    pub(super) length: u64,
    /// The address the device sees it at.
    pub(super) virt: u64,
    /// `enum ib_access_flags`, as ib_core passed them.
    pub(super) access: i32,
}

/// An MR as the binding allocates it: the `ib_mr` (ib_core's once returned: only reached
/// through raw pointers), then the driver's data, initialised in place by `reg_user_mr`
/// and dropped by `dereg_mr`, and what it was registered with.
#[repr(C)]
pub(super) struct IbMr<T: Driver> {
    pub(super) ib: Opaque<b::ib_mr>,
    pub(super) data: MaybeUninit<T::Mr>,
    pub(super) reg: MrReg,
}
