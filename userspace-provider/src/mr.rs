//! Memory regions: REG_MR (user memory, or a dma-buf), REREG_MR and DEREG_MR through the
//! kernel. No driver data travels either way: the kernel answers with the keys in the core
//! response. A re-registration is a new MR on the NIC in the old one's place (new keys,
//! which `ibv_cmd_rereg_mr` writes into the `ibv_mr`), the old one gone before it returns.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr::{self, null_mut};

use crate::{abi, set_errno, sys};

/// # Safety
///
/// libibverbs calls this with one of our PDs; `addr..addr + length` is the caller's memory.
pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut sys::ibv_mr {
    let vmr = alloc_mr();
    if vmr.is_null() {
        return null_mut();
    }
    let mut cmd = abi::IbvRegMr::default();
    let mut resp = sys::ib_uverbs_reg_mr_resp::default();
    // SAFETY: `pd` is valid (contract), `vmr` ours; the buffers are ours and their sizes
    // are theirs.
    let r = unsafe {
        abi::ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            vmr,
            &mut cmd,
            size_of::<abi::IbvRegMr>(),
            &mut resp,
            size_of::<sys::ib_uverbs_reg_mr_resp>(),
        )
    };
    finish(vmr, r)
}

/// # Safety
///
/// libibverbs calls this with one of our PDs and a dma-buf file descriptor.
pub(crate) unsafe extern "C" fn reg_dmabuf_mr(
    pd: *mut sys::ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut sys::ibv_mr {
    let vmr = alloc_mr();
    if vmr.is_null() {
        return null_mut();
    }
    // SAFETY: `pd` is valid (contract), `vmr` ours; no driver attributes (null).
    let r = unsafe {
        abi::ibv_cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, vmr, null_mut())
    };
    finish(vmr, r)
}

/// A zeroed `verbs_mr`, or null with `errno` set.
fn alloc_mr() -> *mut abi::VerbsMr {
    // SAFETY: calloc of a POD struct.
    let vmr = unsafe { libc::calloc(1, size_of::<abi::VerbsMr>()) }.cast::<abi::VerbsMr>();
    if vmr.is_null() {
        set_errno(libc::ENOMEM);
    }
    vmr
}

/// The registered MR, or null with `errno` set to `r` (and `vmr` freed).
fn finish(vmr: *mut abi::VerbsMr, r: c_int) -> *mut sys::ibv_mr {
    if r != 0 {
        // SAFETY: `vmr` came from calloc and nothing else holds it.
        unsafe { libc::free(vmr.cast()) };
        set_errno(r);
        return null_mut();
    }
    // SAFETY: `vmr` is ours; `ibv_cmd_*` filled its `ibv_mr` (keys, handle, context).
    unsafe { ptr::addr_of_mut!((*vmr).ibv_mr) }
}

/// `ibv_rereg_mr`: REREG_MR for what `flags` changes (translation, PD, access; libibverbs
/// has checked them), the keys answered written into the MR; the errno on failure (also
/// set as `errno`). The old keys do not stay valid.
///
/// # Safety
///
/// libibverbs calls this with an MR `reg_mr` returned, one of our PDs (or, without
/// `IBV_REREG_MR_CHANGE_PD`, what its caller passed, unused) and, with
/// `IBV_REREG_MR_CHANGE_TRANSLATION`, the caller's memory at `addr..addr + length`.
pub(crate) unsafe extern "C" fn rereg_mr(
    vmr: *mut abi::VerbsMr,
    flags: c_int,
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let mut cmd = abi::IbvReregMr::default();
    let mut resp = sys::ib_uverbs_rereg_mr_resp::default();
    // SAFETY: `vmr` and `pd` are valid (contract); the buffers are ours and their sizes
    // are theirs.
    let r = unsafe {
        abi::ibv_cmd_rereg_mr(
            vmr,
            // CAST: a bit mask, reinterpreted.
            flags as u32,
            addr,
            length,
            addr as u64,
            access,
            pd,
            &mut cmd,
            size_of::<abi::IbvReregMr>(),
            &mut resp,
            size_of::<sys::ib_uverbs_rereg_mr_resp>(),
        )
    };
    // libibverbs answers its caller IBV_REREG_MR_ERR_CMD; the errno says why.
    if r != 0 {
        set_errno(r);
    }
    r
}

/// # Safety
///
/// libibverbs calls this with an MR `reg_mr` or `reg_dmabuf_mr` returned.
pub(crate) unsafe extern "C" fn dereg_mr(vmr: *mut abi::VerbsMr) -> c_int {
    // SAFETY: `vmr` is valid (contract).
    let r = unsafe { abi::ibv_cmd_dereg_mr(vmr) };
    if r != 0 {
        return r;
    }
    // SAFETY: `vmr` came from calloc in `alloc_mr`; this is its last use.
    unsafe { libc::free(vmr.cast()) };
    0
}
