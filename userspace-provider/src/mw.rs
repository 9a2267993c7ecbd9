//! Memory windows (NIC interface 1.9): ALLOC_MW and DEALLOC_MW through the kernel (no
//! driver data either way: the kernel answers with the window's rkey in the core
//! response), and binding: `ibv_bind_mw` (type 1) posts a `WR_BIND_MW` WQE on the QP's send
//! queue, as `ibv_post_send`'s `IBV_WR_BIND_MW` and `ibv_wr_bind_mw` (type 2) do; the
//! three write the same bind segment (`defs/mw.rs`, [`BindSeg`]), made here. The NIC
//! executes a bind in send queue order, without a packet, and checks what needs its
//! tables (the window, the MR, their PDs, the range, the MR's `MW_BIND` access): a bind it
//! refuses completes with `IBV_WC_MW_BIND_ERR` and the QP goes to the error state. A bind
//! completes as
//! `IBV_WC_BIND_MW`, a local invalidate as `IBV_WC_LOCAL_INV` (`cq`).

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, null_mut};

use ordma_hw::{BindSeg, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};

use crate::context::{Context, DbPage, Doorbell};
use crate::qp::Qp;
use crate::wq::post_send_chain;
use crate::{abi, set_errno, sys};

/// What a window may grant (`ibv_mw_bind_info.mw_access_flags`), and the NIC's access bit
/// for each.
const WINDOW_ACCESS: [(u32, u32); 3] = [
    (
        sys::ibv_access_flags_IBV_ACCESS_REMOTE_WRITE,
        ACCESS_REMOTE_WRITE,
    ),
    (
        sys::ibv_access_flags_IBV_ACCESS_REMOTE_READ,
        ACCESS_REMOTE_READ,
    ),
    (
        sys::ibv_access_flags_IBV_ACCESS_REMOTE_ATOMIC,
        ACCESS_REMOTE_ATOMIC,
    ),
];

/// The NIC's access bits for a window's `mw_access_flags`: remote read, write and atomic.
/// Local write is taken and dropped (a window is only ever used remotely; rdma-core's tests
/// ask for it, as mlx5 takes it); `EINVAL` for zero-based windows (as soft-RoCE, the NIC
/// has none) and for any other flag.
pub(crate) fn window_access(flags: u32) -> Result<u32, c_int> {
    let mut known = sys::ibv_access_flags_IBV_ACCESS_LOCAL_WRITE;
    let mut access = 0;
    for (ibv, hw) in WINDOW_ACCESS {
        known |= ibv;
        if flags & ibv != 0 {
            access |= hw;
        }
    }
    if flags & !known != 0 {
        return Err(libc::EINVAL);
    }
    Ok(access)
}

/// The bind segment of a bind of the window whose rkey is `mw_rkey` to `info`, giving it
/// `new_rkey`: the MR's lkey (0 without an MR), the access ([`window_access`]), the range.
/// `EINVAL` for a range without an MR (only an unbind, of length 0, names none).
///
/// # Safety
///
/// `info.mr` is null or a live MR.
pub(crate) unsafe fn bind_segment(
    mw_rkey: u32,
    new_rkey: u32,
    info: &sys::ibv_mw_bind_info,
) -> Result<BindSeg, c_int> {
    let access = window_access(info.mw_access_flags)?;
    let mr_lkey = if info.mr.is_null() {
        if info.addr != 0 || info.length != 0 {
            return Err(libc::EINVAL);
        }
        0
    } else {
        // SAFETY: a live MR (caller).
        unsafe { (*info.mr).lkey }
    };
    Ok(BindSeg {
        mw_rkey,
        new_rkey,
        mr_lkey,
        access,
        addr: info.addr,
        length: info.length,
    })
}

/// The bind segment of an `IBV_WR_BIND_MW` send WR: the window's rkey now
/// (`bind_mw.mw->rkey`), the one it gets (`bind_mw.rkey`) and `bind_mw.bind_info`, as
/// [`bind_segment`]. `EINVAL` for no window.
///
/// # Safety
///
/// `wr.bind_mw.mw` is null or a live MW, `wr.bind_mw.bind_info.mr` null or a live MR.
pub(crate) unsafe fn wr_bind_segment(wr: &sys::ibv_send_wr) -> Result<BindSeg, c_int> {
    // SAFETY: every member of the union is plain integers and pointers; `bind_mw` is the
    // one a bind uses.
    let b = unsafe { wr.__bindgen_anon_2.bind_mw };
    if b.mw.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live MW (caller); its MR null or live (caller).
    unsafe { bind_segment((*b.mw).rkey, b.rkey, &b.bind_info) }
}

/// `ibv_inc_rkey`: `rkey` with its low byte (the consumer's key) one more, mod 2^8.
pub(crate) fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// Whether `t` is a window type the NIC has (`IBV_MW_TYPE_1`, `IBV_MW_TYPE_2`): `EINVAL`
/// otherwise.
pub(crate) fn check_type(t: sys::ibv_mw_type) -> Result<(), c_int> {
    match t {
        sys::ibv_mw_type_IBV_MW_TYPE_1 | sys::ibv_mw_type_IBV_MW_TYPE_2 => Ok(()),
        _ => Err(libc::EINVAL),
    }
}

/// `ibv_alloc_mw`: ALLOC_MW for a window of type `mw_type` on `pd`, unbound; null with
/// `errno` set on failure (`EINVAL` for a type other than 1 and 2, without a system call;
/// `ENOMEM`; the command's errno).
///
/// # Safety
///
/// libibverbs calls this with one of our PDs.
pub(crate) unsafe extern "C" fn alloc_mw(
    pd: *mut sys::ibv_pd,
    mw_type: sys::ibv_mw_type,
) -> *mut sys::ibv_mw {
    if let Err(e) = check_type(mw_type) {
        set_errno(e);
        return null_mut();
    }
    // SAFETY: calloc of a POD struct.
    let mw = unsafe { libc::calloc(1, size_of::<sys::ibv_mw>()) }.cast::<sys::ibv_mw>();
    if mw.is_null() {
        set_errno(libc::ENOMEM);
        return null_mut();
    }
    let mut cmd = abi::IbvAllocMw::default();
    let mut resp = sys::ib_uverbs_alloc_mw_resp::default();
    // SAFETY: `pd` is valid (contract), `mw` ours; the buffers are ours and their sizes
    // are theirs. The command fills the window (context, PD, rkey, handle, type).
    let r = unsafe {
        abi::ibv_cmd_alloc_mw(
            pd,
            mw_type,
            mw,
            &mut cmd,
            size_of::<abi::IbvAllocMw>(),
            &mut resp,
            size_of::<sys::ib_uverbs_alloc_mw_resp>(),
        )
    };
    if r != 0 {
        // SAFETY: `mw` came from calloc and nothing else holds it.
        unsafe { libc::free(mw.cast()) };
        set_errno(r);
        return null_mut();
    }
    mw
}

/// `ibv_dealloc_mw`: DEALLOC_MW (the NIC invalidates a bound window first); 0, or the
/// command's errno with the window kept.
///
/// # Safety
///
/// libibverbs calls this with a window `alloc_mw` returned.
pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut sys::ibv_mw) -> c_int {
    // SAFETY: `mw` is valid (contract).
    let r = unsafe { abi::ibv_cmd_dealloc_mw(mw) };
    if r != 0 {
        return r;
    }
    // SAFETY: `mw` came from calloc in `alloc_mw`; this is its last use.
    unsafe { libc::free(mw.cast()) };
    0
}

/// `ibv_bind_mw`'s logic: binds type 1 window `mw` as `bind` says, or unbinds it (no MR,
/// length 0), by a `WR_BIND_MW` WQE on `qp`'s send queue with the next key
/// (`ibv_inc_rkey`), posted with its doorbell as `ibv_post_send` posts (its errnos:
/// `EINVAL` before RTS, on a UD QP or for a send flag other than SIGNALED, SOLICITED,
/// FENCE; `ENOMEM` when the send queue is full; `EBUSY` while an `ibv_wr_*` batch is
/// open). Once posted, `mw.rkey` is the new key, as libibverbs' contract has it (the
/// application sets it back if the bind completes in error). `EINVAL` for a window of
/// another type, for a range without an MR, for zero-based or unknown access flags
/// ([`window_access`]); `EPERM` for an MR of another PD than the window's (as libibverbs'
/// `ibv_bind_mw` checks before calling us). The QP's PD is not the window's to match (as
/// soft-RoCE: for type 1, the NIC checks the window's PD against the MR's).
///
/// # Safety
///
/// `bind.bind_info.mr` is null or a live MR.
pub(crate) unsafe fn bind_type1(
    qp: &Qp,
    db: &impl Doorbell,
    mw: &mut sys::ibv_mw,
    bind: &sys::ibv_mw_bind,
) -> Result<(), c_int> {
    if mw.type_ != sys::ibv_mw_type_IBV_MW_TYPE_1 {
        return Err(libc::EINVAL);
    }
    let info = &bind.bind_info;
    // SAFETY: a live MR (caller).
    if !info.mr.is_null() && unsafe { (*info.mr).pd } != mw.pd {
        return Err(libc::EPERM);
    }
    let new_rkey = inc_rkey(mw.rkey);
    let mut wr = sys::ibv_send_wr {
        wr_id: bind.wr_id,
        opcode: sys::ibv_wr_opcode_IBV_WR_BIND_MW,
        send_flags: bind.send_flags,
        ..Default::default()
    };
    wr.__bindgen_anon_2.bind_mw = sys::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
        mw: ptr::from_mut(mw),
        rkey: new_rkey,
        bind_info: *info,
    };
    // SAFETY: one WR, ours, with no SGEs; its window is `mw`, live, and its MR null or
    // live (caller).
    unsafe { post_send_chain(qp, db, &mut wr) }.map_err(|(e, _)| e)?;
    mw.rkey = new_rkey;
    Ok(())
}

/// `ibv_bind_mw` (libibverbs has checked the type, the range without an MR and the MR's
/// PD): [`bind_type1`]; 0, or the errno (also set as `errno`).
///
/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned, a window `alloc_mw` returned and a
/// valid `mw_bind` whose MR is null or a live MR of ours.
pub(crate) unsafe extern "C" fn bind_mw(
    ibqp: *mut sys::ibv_qp,
    mw: *mut sys::ibv_mw,
    mw_bind: *mut sys::ibv_mw_bind,
) -> c_int {
    // SAFETY: `ibqp` is the first field of a live `Qp`; its context is one of ours, whose
    // doorbell page stays mapped while it is open; `mw` and `mw_bind` are valid and ours to
    // use during the call, the MR as the contract says.
    let r = unsafe {
        let qp = &*ibqp.cast::<Qp>();
        match DbPage::new((*Context::from_ibv(qp.base().context)).db) {
            Some(db) => bind_type1(qp, &db, &mut *mw, &*mw_bind),
            None => Err(libc::EINVAL),
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            e
        }
    }
}

#[cfg(test)]
#[path = "tests/mw.rs"]
mod tests;
