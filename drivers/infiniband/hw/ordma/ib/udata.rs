// SPDX-License-Identifier: GPL-2.0

//! The driver data of uverbs commands (`struct ib_udata`), read and answered by ib_core's
//! own rules (`include/rdma/ib_verbs.h`, "struct ib_udata"), for whatever request and
//! response types the driver's uapi defines ([`Uapi`]).

use core::{marker::PhantomData, mem::size_of, ptr::NonNull};

use kernel::prelude::*;

use super::bindings as b;

/// A driver's uapi struct: a request or response that travels in udata.
///
/// The driver's uapi header defines them (bindgen output, typically); the driver implements
/// this trait for each, and [`Udata::read`] and [`Udata::respond`] move them by ib_core's
/// rules.
///
/// # Safety
///
/// Implementors are `#[repr(C)]` structs of integers only, with no implicit padding (the
/// uapi names every padding byte): any bytes are a valid value, and copying one to
/// userspace discloses nothing but its fields.
pub(crate) unsafe trait Uapi: Default {
    /// The end of the fields of the struct's first ABI version: the shortest request a
    /// provider may send. Requests grow at the end; an older, shorter one is zero-extended.
    const MIN_SIZE: usize;
}

/// The driver data of one uverbs command.
///
/// # Invariants
///
/// `raw` is a valid `ib_udata` for `'a` (the duration of the verb call).
pub(crate) struct Udata<'a> {
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

    /// Reads the request, ib_core's way (`ib_copy_validate_udata_in`): at least
    /// `R::MIN_SIZE` bytes; a shorter struct than `R` (an older provider) is zero-extended;
    /// bytes beyond `R` (a newer provider's) must be zero.
    ///
    /// # Errors
    ///
    /// `EINVAL` for input shorter than `R::MIN_SIZE`, `EOPNOTSUPP` for non-zero bytes beyond
    /// `R`, `EFAULT` if unreadable.
    pub(crate) fn read<R: Uapi>(&self) -> Result<R> {
        let mut req = R::default();
        // SAFETY: `raw` is valid (invariant); `req` is `size_of::<R>()` writable bytes and
        // any bytes are a valid `R` (`Uapi`).
        let ret = unsafe {
            b::_ib_copy_validate_udata_in(
                self.raw.as_ptr(),
                core::ptr::from_mut(&mut req).cast(),
                size_of::<R>(),
                R::MIN_SIZE,
            )
        };
        kernel::error::to_result(ret)?;
        Ok(req)
    }

    /// Bytes of room for the driver's response.
    pub(crate) fn out_len(&self) -> usize {
        // SAFETY: `raw` is valid (invariant).
        unsafe { (*self.raw.as_ptr()).outlen }
    }

    /// Whether the command carries driver data (a provider may send none).
    pub(crate) fn has_input(&self) -> bool {
        // SAFETY: `raw` is valid (invariant).
        unsafe { (*self.raw.as_ptr()).inlen != 0 }
    }

    /// For a command with no driver request (`ib_is_udata_in_empty`): the input must be
    /// absent or all zero.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for non-zero input, `EFAULT` if unreadable.
    pub(crate) fn expect_empty(&self) -> Result {
        // SAFETY: `raw` is valid (invariant); with sizes 0 ib_core writes nothing and only
        // checks that every input byte is zero.
        let ret = unsafe {
            b::_ib_copy_validate_udata_in(self.raw.as_ptr(), core::ptr::null_mut(), 0, 0)
        };
        kernel::error::to_result(ret)
    }

    /// Writes the response (`ib_respond_udata`): truncated to the user's buffer, the rest of
    /// a longer buffer zeroed.
    ///
    /// # Errors
    ///
    /// `EFAULT` if the buffer is not writable.
    pub(crate) fn respond<R: Uapi>(&self, resp: &R) -> Result {
        // SAFETY: `raw` is valid (invariant); `resp` is `size_of::<R>()` readable bytes.
        let ret = unsafe {
            b::_ib_respond_udata(
                self.raw.as_ptr(),
                core::ptr::from_ref(resp).cast(),
                size_of::<R>(),
            )
        };
        kernel::error::to_result(ret)
    }
}

/// Checks a request's `comp_mask` against the bits this driver knows, as
/// `ib_copy_validate_udata_in_cm` does.
///
/// # Errors
///
/// `EOPNOTSUPP` if an unknown bit is set.
pub(crate) fn check_comp_mask(comp_mask: u64, known: u64) -> Result {
    if comp_mask & !known != 0 {
        return Err(EOPNOTSUPP);
    }
    Ok(())
}
