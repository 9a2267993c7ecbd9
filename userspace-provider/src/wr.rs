//! The `ibv_wr_*` posting API of extended QPs (`ibv_create_qp_ex` with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`), on the fast path: no system call, no allocation.
//!
//! `ibv_wr_start` opens a batch on the send queue. Each operation (`ibv_wr_send`,
//! `ibv_wr_rdma_write`, `ibv_wr_bind_mw`, ...) starts a WQE in the next free slot past the
//! producer index, with the QP's `wr_id` and `wr_flags` of that moment; the setters that
//! follow (`ibv_wr_set_sge(_list)`, `ibv_wr_set_inline_data(_list)`, `ibv_wr_set_ud_addr`)
//! fill it in. The WQEs are encoded exactly as `ibv_post_send`'s (`wq::send_header`,
//! `wq::encode_send`), so the two APIs post the same bytes. `ibv_wr_complete` posts the
//! batch with one doorbell, or, if any call in it failed, posts nothing and returns that
//! call's errno; `ibv_wr_abort` drops it. The NIC reads a slot only once the producer index
//! passes it, so staged WQEs are invisible to it until then.
//!
//! Each call takes the send queue's lock for its own duration (libibverbs' callers may not
//! share one QP's batch between threads). While a batch is open, `ibv_post_send` on the QP
//! fails with `EBUSY`: the batch holds the next slots.

use core::ffi::{c_int, c_void};

use ordma_hw::{
    is_flush_or_atomic_write, is_local, sq_wqe_data, AtomicSeg, FlushSeg, SendWqe, UdSeg,
    QP_TYPE_RC, QP_TYPE_UD, WQE_FLAG_INLINE, WR_ATOMIC_WRITE, WR_FLUSH,
};

use crate::context::{Context, DbPage};
use crate::mw::bind_segment;
use crate::qp::Qp;
use crate::sys;
use crate::wq::{
    encode_send, is_read_or_atomic, lock, ring_sq, send_allowed, send_header, sge_list, ud_segment,
    wqe_flags, Payload, SendHeader, SendQueue,
};

/// An open batch: the WQEs staged past the send queue's producer index.
#[derive(Default)]
pub(crate) struct Batch {
    /// WQEs staged, the one being built among them.
    count: u32,
    /// The WQE being built (the last staged): its header, which each setter changes and
    /// writes again, and its `wr_id`.
    cur: Option<(SendHeader, u64)>,
    /// Whether the WQE being built (on a UD QP) has its address.
    has_addr: bool,
    /// The first error in the batch: `ibv_wr_complete` returns it and posts nothing.
    err: c_int,
}

/// The send operations an extended QP of each type takes (`IBV_QP_EX_WITH_*`), as
/// `ibv_post_send` does: RC all of ordma's (and IBTA 1.5's FLUSH and ATOMIC WRITE, which
/// only this API posts), UC no READ, atomics or SEND with invalidate, UD SENDs. Creation
/// takes IBTA 1.5's and the windows' only from a device that claims them (`qp`).
pub(crate) fn send_ops(qp_type: sys::ibv_qp_type) -> Option<u64> {
    use sys::*;
    let sends = ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND as u64
        | ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM as u64;
    let writes = ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE as u64
        | ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM as u64;
    let reads = ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_READ as u64
        | ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP as u64
        | ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD as u64;
    let iba15 = ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_FLUSH as u64
        | ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_WRITE as u64;
    let local = ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW as u64
        | ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV as u64;
    let send_inv = ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV as u64;
    match qp_type {
        sys::ibv_qp_type_IBV_QPT_RC => Some(sends | writes | reads | iba15 | local | send_inv),
        sys::ibv_qp_type_IBV_QPT_UC => Some(sends | writes | local),
        sys::ibv_qp_type_IBV_QPT_UD => Some(sends),
        _ => None,
    }
}

/// Sets the `ibv_wr_*` functions of `ex` for the operations `ops` asks (the others stay
/// null, as libibverbs' contract has them), the setters and the batch's own.
pub(crate) fn set_functions(ex: &mut sys::ibv_qp_ex, ops: u64) {
    use sys::*;
    let has = |f: u32| ops & u64::from(f) != 0;
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND) {
        ex.wr_send = Some(wr_send);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM) {
        ex.wr_send_imm = Some(wr_send_imm);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE) {
        ex.wr_rdma_write = Some(wr_rdma_write);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) {
        ex.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_READ) {
        ex.wr_rdma_read = Some(wr_rdma_read);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) {
        ex.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) {
        ex.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_FLUSH) {
        ex.wr_flush = Some(wr_flush);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_WRITE) {
        ex.wr_atomic_write = Some(wr_atomic_write);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW) {
        ex.wr_bind_mw = Some(wr_bind_mw);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV) {
        ex.wr_local_inv = Some(wr_local_inv);
    }
    if has(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV) {
        ex.wr_send_inv = Some(wr_send_inv);
    }
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
}

/// The `Qp` around one of our `ibv_qp_ex`s.
///
/// # Safety
///
/// `qpx` is the `ibv_qp_ex` of a live QP `create_qp_ex` returned.
unsafe fn qp_of<'a>(qpx: *mut sys::ibv_qp_ex) -> &'a Qp {
    // SAFETY: the `ibv_qp_ex` is at offset 0 of a `Qp` (its `verbs_qp` head).
    unsafe { &*qpx.cast::<Qp>() }
}

/// Runs `f` on the open batch of `qp`'s send queue, recording its error as the batch's;
/// nothing when no batch is open or the batch has failed already.
fn with_batch(qp: &Qp, f: impl FnOnce(&Qp, &mut SendQueue) -> Result<(), c_int>) {
    let mut sq = lock(&qp.sq);
    if sq.batch.as_ref().is_none_or(|b| b.err != 0) {
        return;
    }
    if let Err(e) = f(qp, &mut sq) {
        if let Some(b) = sq.batch.as_mut() {
            b.err = e;
        }
    }
}

/// Whether the WQE being built is whole: a UD WQE needs its address (`EINVAL`).
fn check_built(qp: &Qp, b: &Batch) -> Result<(), c_int> {
    if b.cur.is_some() && qp.caps.ud && !b.has_addr {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// Starts a WQE for `wr` (an operation with no payload yet) in the next staged slot.
pub(crate) fn begin(qp: &Qp, sq: &mut SendQueue, wr: &sys::ibv_send_wr) -> Result<(), c_int> {
    let hdr = send_header(wr, &[], &qp.caps)?;
    begin_header(qp, sq, hdr, wr.wr_id)
}

/// Starts a WQE of header `hdr` and `wr_id` in the next staged slot.
fn begin_header(qp: &Qp, sq: &mut SendQueue, mut hdr: SendHeader, wr_id: u64) -> Result<(), c_int> {
    let SendQueue { wq, batch } = sq;
    let b = batch.as_mut().ok_or(libc::EINVAL)?;
    check_built(qp, b)?;
    if qp.caps.ud {
        // The address comes with `ibv_wr_set_ud_addr`; the segment's place is kept.
        hdr.ud = Some(UdSeg::default());
    }
    encode_send(wq.stage(b.count, wr_id)?, &hdr, &Payload::Sges(&[]))?;
    b.count += 1;
    b.cur = Some((hdr, wr_id));
    b.has_addr = false;
    Ok(())
}

/// Changes the WQE being built with `change`, then writes its header (and segments) again
/// and, with `payload`, its SGEs or inline bytes.
pub(crate) fn amend(
    sq: &mut SendQueue,
    change: impl FnOnce(&mut SendHeader) -> Result<(), c_int>,
    payload: &Payload<'_>,
) -> Result<(), c_int> {
    let SendQueue { wq, batch } = sq;
    let b = batch.as_mut().ok_or(libc::EINVAL)?;
    let (hdr, wr_id) = b.cur.as_mut().ok_or(libc::EINVAL)?;
    change(hdr)?;
    let slot = wq.stage(b.count.wrapping_sub(1), *wr_id)?;
    encode_send(slot, hdr, payload)
}

/// The send WR an operation of the batch stands for: the QP's `wr_id` and `wr_flags` of
/// the moment (`IBV_SEND_INLINE` aside: the setters decide), and `opcode`.
///
/// # Safety
///
/// `qpx` is valid for reads.
unsafe fn op_wr(qpx: *mut sys::ibv_qp_ex, opcode: sys::ibv_wr_opcode) -> sys::ibv_send_wr {
    // SAFETY: valid (caller).
    let (wr_id, flags) = unsafe { ((*qpx).wr_id, (*qpx).wr_flags) };
    sys::ibv_send_wr {
        wr_id,
        opcode,
        send_flags: flags & !sys::ibv_send_flags_IBV_SEND_INLINE,
        ..Default::default()
    }
}

/// One operation: its WR from `op_wr`, completed by `fill`, begun in the batch.
///
/// # Safety
///
/// libibverbs' caller passes the `ibv_qp_ex` of a live extended QP of ours.
unsafe fn operation(
    qpx: *mut sys::ibv_qp_ex,
    opcode: sys::ibv_wr_opcode,
    fill: impl FnOnce(&mut sys::ibv_send_wr),
) {
    // SAFETY: as the contract.
    let (qp, mut wr) = unsafe { (qp_of(qpx), op_wr(qpx, opcode)) };
    fill(&mut wr);
    with_batch(qp, |qp, sq| begin(qp, sq, &wr));
}

fn rdma(wr: &mut sys::ibv_send_wr, rkey: u32, remote_addr: u64) {
    wr.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
}

fn atomic(wr: &mut sys::ibv_send_wr, rkey: u32, remote_addr: u64, compare_add: u64, swap: u64) {
    wr.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
        remote_addr,
        compare_add,
        swap,
        rkey,
    };
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_send(qpx: *mut sys::ibv_qp_ex) {
    // SAFETY: as the contract.
    unsafe { operation(qpx, sys::ibv_wr_opcode_IBV_WR_SEND, |_| {}) }
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_send_imm(qpx: *mut sys::ibv_qp_ex, imm: u32) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM, |w| {
            w.__bindgen_anon_1.imm_data = imm;
        })
    }
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_rdma_write(qpx: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE, |w| {
            rdma(w, rkey, remote_addr)
        })
    }
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_rdma_write_imm(
    qpx: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm: u32,
) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM, |w| {
            rdma(w, rkey, remote_addr);
            w.__bindgen_anon_1.imm_data = imm;
        })
    }
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_rdma_read(qpx: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_RDMA_READ, |w| {
            rdma(w, rkey, remote_addr)
        })
    }
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_atomic_cmp_swp(
    qpx: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP, |w| {
            atomic(w, rkey, remote_addr, compare, swap)
        })
    }
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_atomic_fetch_add(
    qpx: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD, |w| {
            atomic(w, rkey, remote_addr, add, 0)
        })
    }
}

/// A FLUSH or an ATOMIC WRITE (RC only, as `send_ops` offers them): its header, with the
/// QP's `wr_id` and `wr_flags` of the moment; no SGEs or inline data follow (`EINVAL` if a
/// setter tries).
///
/// # Safety
///
/// As [`operation`].
unsafe fn iba15(qpx: *mut sys::ibv_qp_ex, header: impl FnOnce(u8) -> Result<SendHeader, c_int>) {
    // SAFETY: as the contract.
    let (qp, (wr_id, f)) = unsafe { (qp_of(qpx), ((*qpx).wr_id, (*qpx).wr_flags)) };
    with_batch(qp, |qp, sq| {
        let flags = wqe_flags(f & !sys::ibv_send_flags_IBV_SEND_INLINE, &qp.caps)?;
        begin_header(qp, sq, header(flags)?, wr_id)
    });
}

/// `ibv_wr_atomic_write`: the 8 bytes at `atomic_wr`, as they are in memory, stored at the
/// responder's `remote_addr` as one (`EINVAL` for a null pointer).
///
/// # Safety
///
/// As [`operation`]; `atomic_wr` is null or valid for reads of 8 bytes.
unsafe extern "C" fn wr_atomic_write(
    qpx: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    let value = if atomic_wr.is_null() {
        None
    } else {
        let mut v = [0u8; 8];
        // SAFETY: valid for 8 bytes (contract); `v` is ours; any alignment.
        unsafe { core::ptr::copy_nonoverlapping(atomic_wr.cast::<u8>(), v.as_mut_ptr(), 8) };
        Some(v)
    };
    // SAFETY: as the contract.
    unsafe {
        iba15(qpx, |flags| {
            let v = value.ok_or(libc::EINVAL)?;
            Ok(SendHeader {
                wqe: SendWqe {
                    opcode: WR_ATOMIC_WRITE,
                    flags,
                    remote_addr,
                    rkey,
                    ..Default::default()
                },
                atomic: Some(AtomicSeg {
                    compare_add: u64::from_le_bytes(v),
                    swap: 0,
                }),
                flush: None,
                bind: None,
                ud: None,
            })
        })
    }
}

/// `ibv_wr_flush`: `len` bytes at `remote_addr` (`IBV_FLUSH_RANGE`) or the whole MR of
/// `rkey` (`IBV_FLUSH_MR`) to placement `ptype` (`IBV_FLUSH_GLOBAL`, `IBV_FLUSH_PERSISTENT`:
/// the responder refuses the latter, it has no persistence domain). `EINVAL` for a range's
/// length past 32 bits (the RETH's), no or an unknown placement, an unknown level.
///
/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_flush(
    qpx: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    len: usize,
    ptype: u8,
    level: u8,
) {
    let seg = FlushSeg {
        length: u32::try_from(len).unwrap_or(u32::MAX),
        placement: ptype,
        level,
    };
    let mut probe = [0u8; 64];
    // (The whole MR's FLUSH has no use for the length.)
    let valid = (level == ordma_hw::FLUSH_MR || u32::try_from(len).is_ok())
        && seg.encode_into(&mut probe)
        && FlushSeg::decode_from(&probe) == Some(seg);
    // SAFETY: as the contract.
    unsafe {
        iba15(qpx, |flags| {
            if !valid {
                return Err(libc::EINVAL);
            }
            Ok(SendHeader {
                wqe: SendWqe {
                    opcode: WR_FLUSH,
                    flags,
                    remote_addr,
                    rkey,
                    ..Default::default()
                },
                atomic: None,
                flush: Some(seg),
                bind: None,
                ud: None,
            })
        })
    }
}

/// `ibv_wr_send_inv`: a SEND (its SGEs or inline data set after) that invalidates, at the
/// responder, the window of `invalidate_rkey`.
///
/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_send_inv(qpx: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV, |w| {
            w.__bindgen_anon_1.invalidate_rkey = invalidate_rkey;
        })
    }
}

/// `ibv_wr_local_inv`: invalidates the type 2 window of `invalidate_rkey`, bound on the
/// QP's PD, in send queue order; no SGEs or inline data follow (`EINVAL` if a setter
/// tries).
///
/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_local_inv(qpx: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: as the contract.
    unsafe {
        operation(qpx, sys::ibv_wr_opcode_IBV_WR_LOCAL_INV, |w| {
            w.__bindgen_anon_1.invalidate_rkey = invalidate_rkey;
        })
    }
}

/// `ibv_wr_bind_mw`: binds (type 2) window `mw` to `bind_info`, giving it `rkey` (the
/// window's index, the consumer's key byte: `ibv_inc_rkey` of its rkey). The bind segment
/// is `ibv_post_send`'s for `IBV_WR_BIND_MW` (`mw::bind_segment`); `mw.rkey` is left as it
/// is (the application keeps the new key, as libibverbs' contract has it). `EINVAL` for a
/// null window or `bind_info`, or as `ibv_post_send`; no SGEs or inline data follow.
///
/// # Safety
///
/// As [`operation`]; `mw` is null or a live MW, `bind_info` null or valid, its MR null or
/// live.
unsafe extern "C" fn wr_bind_mw(
    qpx: *mut sys::ibv_qp_ex,
    mw: *mut sys::ibv_mw,
    rkey: u32,
    bind_info: *const sys::ibv_mw_bind_info,
) {
    let seg = if mw.is_null() || bind_info.is_null() {
        Err(libc::EINVAL)
    } else {
        // SAFETY: a live MW and a valid `bind_info` with its MR null or live (contract).
        unsafe { bind_segment((*mw).rkey, rkey, &*bind_info) }
    };
    // SAFETY: as the contract.
    let (qp, wr) = unsafe { (qp_of(qpx), op_wr(qpx, sys::ibv_wr_opcode_IBV_WR_BIND_MW)) };
    with_batch(qp, |qp, sq| {
        let mut hdr = send_header(&wr, &[], &qp.caps)?;
        hdr.bind = Some(seg?);
        begin_header(qp, sq, hdr, wr.wr_id)
    });
}

/// `ibv_wr_set_ud_addr`: the address of the UD WQE being built (`EINVAL` on another QP
/// type, or for an AH that is not one, as `ibv_post_send`'s `ud_segment`).
///
/// # Safety
///
/// As [`operation`]; `ah` is null or a live AH of ours.
unsafe extern "C" fn wr_set_ud_addr(
    qpx: *mut sys::ibv_qp_ex,
    ah: *mut sys::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    let mut wr = sys::ibv_send_wr::default();
    wr.wr.ud = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
        ah,
        remote_qpn,
        remote_qkey,
    };
    with_batch(qp, |qp, sq| {
        if !qp.caps.ud {
            return Err(libc::EINVAL);
        }
        // SAFETY: the AH is null or ours and live (contract).
        let seg = unsafe { ud_segment(&wr) }?;
        amend(
            sq,
            |h| {
                h.ud = Some(seg);
                Ok(())
            },
            &Payload::Sges(&[]),
        )?;
        if let Some(b) = sq.batch.as_mut() {
            b.has_addr = true;
        }
        Ok(())
    });
}

/// Sets the SGEs of the WQE being built: `EINVAL` for more than `max_send_sge` (or than
/// fit behind an atomic's segment), or any on an operation without data (ATOMIC WRITE,
/// FLUSH, a bind, a local invalidate).
fn set_sges(qp: &Qp, sq: &mut SendQueue, sges: &[sys::ibv_sge]) -> Result<(), c_int> {
    if sges.len() > qp.caps.max_send_sge as usize {
        return Err(libc::EINVAL);
    }
    let num_sge = u8::try_from(sges.len()).map_err(|_| libc::EINVAL)?;
    amend(
        sq,
        |h| {
            if (is_flush_or_atomic_write(h.wqe.opcode) || is_local(h.wqe.opcode)) && num_sge > 0 {
                return Err(libc::EINVAL);
            }
            h.wqe.num_sge = num_sge;
            h.wqe.flags &= !WQE_FLAG_INLINE;
            h.wqe.inline_len = 0;
            Ok(())
        },
        &Payload::Sges(sges),
    )
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_set_sge(qpx: *mut sys::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    let sge = sys::ibv_sge { addr, length, lkey };
    with_batch(qp, |qp, sq| set_sges(qp, sq, &[sge]));
}

/// # Safety
///
/// As [`operation`]; `list` is valid for `num` SGEs.
unsafe extern "C" fn wr_set_sge_list(
    qpx: *mut sys::ibv_qp_ex,
    num: usize,
    list: *const sys::ibv_sge,
) {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    with_batch(qp, |qp, sq| {
        let num = c_int::try_from(num).map_err(|_| libc::EINVAL)?;
        // SAFETY: valid for `num` entries (contract), used within this call.
        let sges = unsafe { sge_list(list, num) }?;
        set_sges(qp, sq, sges)
    });
}

/// Makes the WQE being built carry `bufs`' bytes inline: `EINVAL` on a READ, an atomic, a
/// bind or a local invalidate, past `max_inline`, or for a null buffer with bytes.
fn set_inline(qp: &Qp, sq: &mut SendQueue, bufs: &[sys::ibv_data_buf]) -> Result<(), c_int> {
    let total = bufs
        .iter()
        .try_fold(0usize, |t, b| t.checked_add(b.length))
        .ok_or(libc::EINVAL)?;
    let len = u32::try_from(total).map_err(|_| libc::EINVAL)?;
    if len > qp.caps.max_inline || bufs.iter().any(|b| b.addr.is_null() && b.length > 0) {
        return Err(libc::EINVAL);
    }
    amend(
        sq,
        |h| {
            if is_read_or_atomic(h.wqe.opcode) || is_local(h.wqe.opcode) {
                return Err(libc::EINVAL);
            }
            h.wqe.num_sge = 0;
            h.wqe.flags |= WQE_FLAG_INLINE;
            h.wqe.inline_len = len;
            Ok(())
        },
        &Payload::Inline(&[]),
    )?;
    let b = sq.batch.as_ref().ok_or(libc::EINVAL)?;
    let wr_id = b.cur.as_ref().map_or(0, |c| c.1);
    let ahead = b.count.wrapping_sub(1);
    let slot = sq.wq.stage(ahead, wr_id)?;
    let mut off = sq_wqe_data(if qp.caps.ud { QP_TYPE_UD } else { QP_TYPE_RC }) as usize;
    for buf in bufs.iter().filter(|b| b.length > 0) {
        // SAFETY: the caller's buffers are readable for their lengths (libibverbs'
        // contract), non-null (checked), read only during this call.
        let bytes = unsafe { core::slice::from_raw_parts(buf.addr.cast::<u8>(), buf.length) };
        let end = off.checked_add(bytes.len()).ok_or(libc::EINVAL)?;
        slot.get_mut(off..end)
            .ok_or(libc::EINVAL)?
            .copy_from_slice(bytes);
        off = end;
    }
    Ok(())
}

/// # Safety
///
/// As [`operation`]; `addr` is readable for `length` bytes.
unsafe extern "C" fn wr_set_inline_data(
    qpx: *mut sys::ibv_qp_ex,
    addr: *mut c_void,
    length: usize,
) {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    let buf = sys::ibv_data_buf { addr, length };
    with_batch(qp, |qp, sq| set_inline(qp, sq, &[buf]));
}

/// # Safety
///
/// As [`operation`]; `list` is valid for `num` buffers, each readable for its length.
unsafe extern "C" fn wr_set_inline_data_list(
    qpx: *mut sys::ibv_qp_ex,
    num: usize,
    list: *const sys::ibv_data_buf,
) {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    with_batch(qp, |qp, sq| {
        let bufs = if num == 0 {
            &[][..]
        } else if list.is_null() {
            return Err(libc::EINVAL);
        } else {
            // SAFETY: valid for `num` entries (contract), used within this call.
            unsafe { core::slice::from_raw_parts(list, num) }
        };
        set_inline(qp, sq, bufs)
    });
}

/// Opens a batch (dropping one left open).
pub(crate) fn start(sq: &mut SendQueue) {
    sq.batch = Some(Batch::default());
}

/// Closes the batch: posts its WQEs and returns how many, or its first error with nothing
/// posted (`EINVAL` also for no open batch, a UD WQE without its address, or a QP that
/// cannot send in its state).
pub(crate) fn complete(qp: &Qp, sq: &mut SendQueue) -> Result<u32, c_int> {
    let b = sq.batch.take().ok_or(libc::EINVAL)?;
    if b.err != 0 {
        return Err(b.err);
    }
    check_built(qp, &b)?;
    if !send_allowed(qp.state()) {
        return Err(libc::EINVAL);
    }
    sq.post_staged(b.count);
    Ok(b.count)
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_start(qpx: *mut sys::ibv_qp_ex) {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    start(&mut lock(&qp.sq));
}

/// # Safety
///
/// As [`operation`]; the QP's context is open.
unsafe extern "C" fn wr_complete(qpx: *mut sys::ibv_qp_ex) -> c_int {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    // SAFETY: the QP's context is one of ours, whose doorbell page stays mapped while it
    // is open.
    let Some(db) = (unsafe { DbPage::new((*Context::from_ibv(qp.base().context)).db) }) else {
        return libc::EINVAL;
    };
    let mut sq = lock(&qp.sq);
    match complete(qp, &mut sq) {
        Ok(0) => 0,
        Ok(_) => {
            ring_sq(&db, qp.qpn, sq.head());
            0
        }
        Err(e) => e,
    }
}

/// # Safety
///
/// As [`operation`].
unsafe extern "C" fn wr_abort(qpx: *mut sys::ibv_qp_ex) {
    // SAFETY: as the contract.
    let qp = unsafe { qp_of(qpx) };
    lock(&qp.sq).batch = None;
}

#[cfg(test)]
#[path = "tests/wr.rs"]
mod tests;
