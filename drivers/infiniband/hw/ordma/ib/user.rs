// SPDX-License-Identifier: GPL-2.0

//! The objects ib_core allocates for us (user contexts, PDs, mmap entries) and the driver
//! data of uverbs commands (udata), as ordma's uapi defines them.

use core::{marker::PhantomData, mem::size_of, ptr::NonNull};

use kernel::prelude::*;

use super::bindings as b;

/// A user context: ib_core allocates `size_ib_ucontext` bytes and we own what follows
/// the `ib_ucontext`.
#[repr(C)]
pub(super) struct IbUcontext {
    pub(super) ib: b::ib_ucontext,
    /// The context's doorbell page entry; null until `alloc_ucontext` succeeds.
    pub(super) db: *mut DbEntry,
}

/// The mmap entry of a context's doorbell page. It owns the page: `mmap_free` (when the
/// last reference, the context's or a mapping's, goes) returns the page to the driver.
#[repr(C)]
pub(super) struct DbEntry {
    pub(super) rdma: b::rdma_user_mmap_entry,
    /// Page frame of the doorbell page in BAR2.
    pub(super) pfn: u64,
    /// Its index in BAR2.
    pub(super) index: u32,
}

/// A PD: the `ib_pd` and the NIC's PD number.
#[repr(C)]
pub(super) struct IbPd {
    pub(super) ib: b::ib_pd,
    pub(super) pdn: u32,
}

/// A uapi struct (`uapi/rdma/ordma-abi.h`).
///
/// # Safety
///
/// Implementors are `#[repr(C)]` structs of integers only, with no implicit padding (the
/// uapi names every padding byte `reserved_*`): any bytes are a valid value, and copying
/// one to userspace discloses nothing but its fields.
pub(super) unsafe trait Uapi: Default {}

// SAFETY: generated from the uapi header: `__u32` fields only, 8 bytes.
unsafe impl Uapi for b::ordma_ibv_alloc_ucontext_cmd {}
// SAFETY: generated from the uapi header: `__u32`/`__aligned_u64` fields, no padding.
unsafe impl Uapi for b::ordma_ibv_alloc_ucontext_resp {}
// SAFETY: generated from the uapi header: `__u32` fields only, 8 bytes.
unsafe impl Uapi for b::ordma_ibv_alloc_pd_resp {}

/// The driver data of one uverbs command.
///
/// # Invariants
///
/// `raw` is a valid `ib_udata` for `'a` (the duration of the verb call).
pub(super) struct Udata<'a> {
    raw: NonNull<b::ib_udata>,
    _p: PhantomData<&'a b::ib_udata>,
}

impl Udata<'_> {
    /// `None` for a kernel caller (null udata).
    ///
    /// # Safety
    ///
    /// `p` is null or a valid `ib_udata` for the lifetime chosen.
    pub(super) unsafe fn from_raw(p: *mut b::ib_udata) -> Option<Self> {
        // INVARIANT: the caller guarantees validity.
        NonNull::new(p).map(|raw| Self {
            raw,
            _p: PhantomData,
        })
    }

    /// Reads the request: exactly `size_of::<R>()` bytes, or more if the rest is zero.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a shorter input or non-zero bytes beyond `R`, `EFAULT` if unreadable.
    pub(super) fn read<R: Uapi>(&self) -> Result<R> {
        let mut req = R::default();
        // SAFETY: `raw` is valid (invariant); `req` is `size_of::<R>()` writable bytes and
        // any bytes are a valid `R` (`Uapi`).
        let ret = unsafe {
            b::ordma_helper_udata_in(
                self.raw.as_ptr(),
                core::ptr::from_mut(&mut req).cast(),
                size_of::<R>(),
            )
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(req)
    }

    /// For a command with no driver request: the input must be absent or all zero.
    ///
    /// # Errors
    ///
    /// `EINVAL` otherwise.
    pub(super) fn expect_empty(&self) -> Result {
        // SAFETY: `raw` is valid (invariant); with size 0 the helper writes nothing and
        // only checks that every input byte is zero.
        let ret = unsafe { b::ordma_helper_udata_in(self.raw.as_ptr(), core::ptr::null_mut(), 0) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }

    /// Writes the response: truncated to the user's buffer, the rest of a longer buffer
    /// zeroed.
    ///
    /// # Errors
    ///
    /// `EFAULT` if the buffer is not writable.
    pub(super) fn respond<R: Uapi>(&self, resp: &R) -> Result {
        // SAFETY: `raw` is valid (invariant); `resp` is `size_of::<R>()` readable bytes.
        let ret = unsafe {
            b::_ib_respond_udata(
                self.raw.as_ptr(),
                core::ptr::from_ref(resp).cast(),
                size_of::<R>(),
            )
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }
}
