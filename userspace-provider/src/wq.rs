//! Work queues and posting: the SQ and RQ rings with their indices and `wr_id`s, the
//! WQE encoding (`defs/wqe.rs`), and `post_send`/`post_recv`'s logic, all in user space:
//! WQEs written at `producer mod depth`, [`udma_to_device_barrier`], then one doorbell
//! write for the whole chain (`DB_SQ`/`DB_RQ`, `qpn << 16 | producer mod 2^16`), under the
//! queue's lock as rdma-core's providers do, so doorbells of one queue never go backwards.
//! No system call, no allocation.

use core::ffi::c_int;
use core::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ordma_hw::{
    db_value, RecvWqe, SendWqe, Sge, DB_RQ, DB_SQ, RQ_WQE_BASE, SQ_WQE_BASE, WQE_FLAG_FENCE,
    WQE_FLAG_INLINE, WQE_FLAG_SIGNALED, WQE_FLAG_SOLICITED, WQE_SGE_SIZE, WR_RDMA_READ,
    WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_SEND, WR_SEND_IMM,
};

use crate::barrier::udma_to_device_barrier;
use crate::context::Doorbell;
use crate::dma::DmaMem;
use crate::qp::{Qp, QueueShape};
use crate::sys;

/// The most SGEs one WQE may carry here (a send WQE of 1 KiB holds 62; the WQE's
/// `num_sge` is a u8).
pub(crate) const MAX_WQE_SGES: usize = 64;

/// Takes `m`'s lock. A poisoned lock (a panic while held, which aborts across the FFI
/// boundary anyway) is taken as it is.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One work queue: its ring, the WQEs posted (`head`) and retired (`tail`), both
/// free-running, and each outstanding WQE's `wr_id` by slot (the NIC never sees it).
pub(crate) struct WorkQueue {
    pub(crate) shape: QueueShape,
    pub(crate) ring: DmaMem,
    head: u32,
    tail: u32,
    /// WQEs that may be outstanding: the depth, or less if `ibv_create_qp` reported less.
    limit: u32,
    wr_id: Box<[u64]>,
}

impl WorkQueue {
    /// An empty queue of `shape`, its ring zeroed.
    pub(crate) fn new(shape: QueueShape) -> Result<Self, c_int> {
        let ring = DmaMem::ring(shape.log_depth, shape.log_wqe_size)?;
        Ok(Self {
            shape,
            ring,
            head: 0,
            tail: 0,
            limit: 1 << shape.log_depth,
            wr_id: vec![0; 1usize << shape.log_depth].into_boxed_slice(),
        })
    }

    /// WQEs the ring holds.
    pub(crate) fn depth(&self) -> u32 {
        1 << self.shape.log_depth
    }

    /// Bytes of one WQE.
    pub(crate) fn wqe_size(&self) -> usize {
        1 << self.shape.log_wqe_size
    }

    /// The producer index (WQEs posted since the QP's last RESET), free-running.
    pub(crate) fn head(&self) -> u32 {
        self.head
    }

    /// WQEs posted and not retired.
    pub(crate) fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// Whether `max_*_wr` WQEs are outstanding (at most the depth).
    pub(crate) fn is_full(&self) -> bool {
        self.outstanding() >= self.limit
    }

    /// Lets at most `max_wr` WQEs (no more than the depth) be outstanding; returns that
    /// number.
    pub(crate) fn set_limit(&mut self, max_wr: u32) -> u32 {
        self.limit = max_wr.min(self.depth());
        self.limit
    }

    /// Back to empty, as the NIC's indices after a move to RESET.
    pub(crate) fn reset(&mut self) {
        self.head = 0;
        self.tail = 0;
    }

    /// Writes the next WQE with `write` (given its slot, whose bytes are stale) and, if it
    /// succeeds, records `wr_id` and advances the producer index. `ENOMEM` when the queue
    /// is full ([`Self::is_full`]).
    fn push(
        &mut self,
        wr_id: u64,
        write: impl FnOnce(&mut [u8]) -> Result<(), c_int>,
    ) -> Result<(), c_int> {
        if self.is_full() {
            return Err(libc::ENOMEM);
        }
        let slot = (self.head & (self.depth() - 1)) as usize;
        let size = self.wqe_size();
        // SAFETY: the ring holds `depth` WQEs of `size` bytes (`DmaMem::ring`), `slot` is
        // below `depth`; the slot is not outstanding, so the NIC does not read it, and
        // `&mut self` (the queue's lock) keeps every other writer out.
        let wqe =
            unsafe { core::slice::from_raw_parts_mut(self.ring.as_ptr().add(slot * size), size) };
        write(wqe)?;
        if let Some(w) = self.wr_id.get_mut(slot) {
            *w = wr_id;
        }
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// Retires the oldest outstanding WQE if its index (mod 2^16) is `wqe_index` (a
    /// receive queue completes in order, one WQE per CQE) and returns its `wr_id`; `None`
    /// otherwise.
    pub(crate) fn retire_next(&mut self, wqe_index: u16) -> Option<u64> {
        // CAST: the low 16 bits, as the NIC counts.
        if self.outstanding() == 0 || self.tail as u16 != wqe_index {
            return None;
        }
        self.retire_through(wqe_index)
    }

    /// Retires every outstanding WQE up to and including the one at `wqe_index` (mod
    /// 2^16, as a CQE names it) and returns that WQE's `wr_id`; `None` if no outstanding
    /// WQE has that index.
    pub(crate) fn retire_through(&mut self, wqe_index: u16) -> Option<u64> {
        // CAST: the low 16 bits, as the NIC counts.
        let ahead = u32::from(wqe_index.wrapping_sub(self.tail as u16));
        if ahead >= self.outstanding() {
            return None;
        }
        let index = self.tail.wrapping_add(ahead);
        let wr_id = *self.wr_id.get((index & (self.depth() - 1)) as usize)?;
        self.tail = index.wrapping_add(1);
        Some(wr_id)
    }
}

/// What a QP's queues take, as `ibv_create_qp` reported it (the provider enforces exactly
/// what it reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpCaps {
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
    /// Every send WQE is signaled (`sq_sig_all`).
    pub(crate) sig_all: bool,
}

/// A send WR's payload: its SGEs, or (with `IBV_SEND_INLINE`) the bytes they name.
pub(crate) enum Payload<'a> {
    Sges(&'a [sys::ibv_sge]),
    Inline(&'a [&'a [u8]]),
}

/// Send flags the provider knows.
const SEND_FLAGS: u32 = sys::ibv_send_flags_IBV_SEND_FENCE
    | sys::ibv_send_flags_IBV_SEND_SIGNALED
    | sys::ibv_send_flags_IBV_SEND_SOLICITED
    | sys::ibv_send_flags_IBV_SEND_INLINE;

/// The WQE opcode for a WR opcode (the values are libibverbs' own); `EINVAL` for the
/// others (atomics, local invalidate, bind, send with invalidate, TSO, ...).
fn wr_opcode(op: sys::ibv_wr_opcode) -> Result<u8, c_int> {
    Ok(match op {
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE => WR_RDMA_WRITE,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM => WR_RDMA_WRITE_IMM,
        sys::ibv_wr_opcode_IBV_WR_SEND => WR_SEND,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM => WR_SEND_IMM,
        sys::ibv_wr_opcode_IBV_WR_RDMA_READ => WR_RDMA_READ,
        _ => return Err(libc::EINVAL),
    })
}

/// The bytes of `sges` together, `None` past u64.
fn total_len(sges: &[sys::ibv_sge]) -> Option<u64> {
    sges.iter()
        .try_fold(0u64, |t, s| t.checked_add(u64::from(s.length)))
}

/// Checks a send WR against the QP's capabilities and makes its WQE header: `EINVAL` for
/// an opcode or flag the NIC does not have, more SGEs than `max_send_sge`, inline data on
/// a READ or longer than `max_inline`.
pub(crate) fn send_header(
    wr: &sys::ibv_send_wr,
    sges: &[sys::ibv_sge],
    caps: &QpCaps,
) -> Result<SendWqe, c_int> {
    let opcode = wr_opcode(wr.opcode)?;
    let f = wr.send_flags;
    if f & !SEND_FLAGS != 0 || sges.len() > caps.max_send_sge as usize {
        return Err(libc::EINVAL);
    }
    let mut flags = 0;
    if f & sys::ibv_send_flags_IBV_SEND_SIGNALED != 0 || caps.sig_all {
        flags |= WQE_FLAG_SIGNALED;
    }
    if f & sys::ibv_send_flags_IBV_SEND_SOLICITED != 0 {
        flags |= WQE_FLAG_SOLICITED;
    }
    if f & sys::ibv_send_flags_IBV_SEND_FENCE != 0 {
        flags |= WQE_FLAG_FENCE;
    }
    let (num_sge, inline_len) = if f & sys::ibv_send_flags_IBV_SEND_INLINE != 0 {
        let len = total_len(sges).ok_or(libc::EINVAL)?;
        if opcode == WR_RDMA_READ || len > u64::from(caps.max_inline) {
            return Err(libc::EINVAL);
        }
        flags |= WQE_FLAG_INLINE;
        // CAST: at most `max_inline`, a u32.
        (0, len as u32)
    } else {
        (u8::try_from(sges.len()).map_err(|_| libc::EINVAL)?, 0)
    };
    let imm = if opcode == WR_SEND_IMM || opcode == WR_RDMA_WRITE_IMM {
        // SAFETY: both members of the union are a u32; for these opcodes it is the
        // immediate data, 4 bytes in network order, which the WQE carries as they are.
        u32::from_le_bytes(unsafe { wr.__bindgen_anon_1.imm_data }.to_ne_bytes())
    } else {
        0
    };
    let (remote_addr, rkey) = if matches!(opcode, WR_RDMA_WRITE | WR_RDMA_WRITE_IMM | WR_RDMA_READ)
    {
        // SAFETY: every member of the union starts with plain integers; `rdma` is the
        // one these opcodes use.
        let r = unsafe { wr.wr.rdma };
        (r.remote_addr, r.rkey)
    } else {
        (0, 0)
    };
    Ok(SendWqe {
        opcode,
        flags,
        num_sge,
        imm,
        inline_len,
        remote_addr,
        rkey,
    })
}

/// Writes one SGE as the NIC reads it.
fn put_sge(wqe: &mut [u8], off: usize, s: &sys::ibv_sge) -> Result<(), c_int> {
    let sge = Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    };
    sge.encode_into(wqe, off).then_some(()).ok_or(libc::EINVAL)
}

/// Encodes a send WQE into `wqe` (one ring slot): the header, then the SGEs or the inline
/// bytes. `EINVAL` if they do not fit the slot (the capabilities keep them in).
pub(crate) fn encode_send(
    wqe: &mut [u8],
    hdr: &SendWqe,
    payload: &Payload<'_>,
) -> Result<(), c_int> {
    if !hdr.encode_into(wqe) {
        return Err(libc::EINVAL);
    }
    match payload {
        Payload::Sges(sges) => {
            for (i, s) in sges.iter().enumerate() {
                put_sge(wqe, SendWqe::sge_offset(i), s)?;
            }
        }
        Payload::Inline(bufs) => {
            let mut off = SQ_WQE_BASE as usize;
            for b in bufs.iter() {
                let end = off.checked_add(b.len()).ok_or(libc::EINVAL)?;
                wqe.get_mut(off..end)
                    .ok_or(libc::EINVAL)?
                    .copy_from_slice(b);
                off = end;
            }
        }
    }
    Ok(())
}

/// Encodes a receive WQE: the header and the SGEs. `EINVAL` if they do not fit.
pub(crate) fn encode_recv(wqe: &mut [u8], sges: &[sys::ibv_sge]) -> Result<(), c_int> {
    let num_sge = u8::try_from(sges.len()).map_err(|_| libc::EINVAL)?;
    if !(RecvWqe { num_sge }).encode_into(wqe) {
        return Err(libc::EINVAL);
    }
    for (i, s) in sges.iter().enumerate() {
        put_sge(wqe, RecvWqe::sge_offset(i), s)?;
    }
    Ok(())
}

/// The SGE list of a WR. `EINVAL` for a negative count, more than [`MAX_WQE_SGES`], or
/// a null list with entries.
///
/// # Safety
///
/// `list` is valid for `num` entries (libibverbs' contract for a WR's `sg_list`), for
/// the result's lifetime.
unsafe fn sge_list<'a>(list: *const sys::ibv_sge, num: c_int) -> Result<&'a [sys::ibv_sge], c_int> {
    let n = usize::try_from(num).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if n > MAX_WQE_SGES || list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null and valid for `n` entries (caller).
    Ok(unsafe { core::slice::from_raw_parts(list, n) })
}

/// Whether sends may be posted in QP state `state` (`enum ibv_qp_state`): from RTS on,
/// as rxe (in SQE and ERR they complete flushed).
pub(crate) fn send_allowed(state: u32) -> bool {
    (sys::ibv_qp_state_IBV_QPS_RTS..=sys::ibv_qp_state_IBV_QPS_ERR).contains(&state)
}

/// Whether receives may be posted in `state`: any but RESET.
pub(crate) fn recv_allowed(state: u32) -> bool {
    (sys::ibv_qp_state_IBV_QPS_INIT..=sys::ibv_qp_state_IBV_QPS_ERR).contains(&state)
}

/// Posts one send WR to `sq`.
///
/// # Safety
///
/// `wr.sg_list` is valid for `wr.num_sge` entries and, with `IBV_SEND_INLINE`, each
/// entry's bytes are readable (libibverbs' contract for `ibv_post_send`).
unsafe fn post_one_send(
    sq: &mut WorkQueue,
    caps: &QpCaps,
    wr: &sys::ibv_send_wr,
) -> Result<(), c_int> {
    // SAFETY: the caller's promise.
    let sges = unsafe { sge_list(wr.sg_list, wr.num_sge) }?;
    if sq.is_full() {
        return Err(libc::ENOMEM);
    }
    let hdr = send_header(wr, sges, caps)?;
    let mut bufs: [&[u8]; MAX_WQE_SGES] = [&[]; MAX_WQE_SGES];
    let payload = if hdr.flags & WQE_FLAG_INLINE != 0 {
        for (b, s) in bufs.iter_mut().zip(sges) {
            if s.length > 0 {
                if s.addr == 0 {
                    return Err(libc::EINVAL);
                }
                // SAFETY: the caller's promise: an inline SGE's bytes are readable; its
                // length is at most `max_inline` (checked by `send_header`).
                *b = unsafe { core::slice::from_raw_parts(s.addr as *const u8, s.length as usize) };
            }
        }
        Payload::Inline(bufs.get(..sges.len()).ok_or(libc::EINVAL)?)
    } else {
        Payload::Sges(sges)
    };
    sq.push(wr.wr_id, |wqe| encode_send(wqe, &hdr, &payload))
}

/// Rings a queue's doorbell after the WQEs up to `head` are in memory.
fn ring(db: &impl Doorbell, offset: usize, qpn: u32, head: u32) {
    udma_to_device_barrier();
    // CAST: the NIC counts producer indices mod 2^16.
    db.ring(offset, db_value(qpn, head as u16));
}

/// `ibv_post_send`'s logic: posts the chain from `wr` in order, then rings the SQ's
/// doorbell once for what was posted. On an error, the failing WR and the errno; the WRs
/// before it stay posted.
///
/// # Safety
///
/// `wr` is null or the first of a chain of valid WRs (`next`-linked, null-terminated), as
/// [`post_one_send`] requires of each.
pub(crate) unsafe fn post_send_chain(
    qp: &Qp,
    db: &impl Doorbell,
    mut wr: *mut sys::ibv_send_wr,
) -> Result<(), (c_int, *mut sys::ibv_send_wr)> {
    if wr.is_null() {
        return Ok(());
    }
    if !send_allowed(qp.state()) {
        return Err((libc::EINVAL, wr));
    }
    let mut sq = lock(&qp.sq);
    let start = sq.head();
    let mut result = Ok(());
    while let Some(w) = NonNull::new(wr) {
        // SAFETY: a valid WR of the chain (caller).
        let w = unsafe { w.as_ref() };
        // SAFETY: as above.
        if let Err(e) = unsafe { post_one_send(&mut sq, &qp.caps, w) } {
            result = Err((e, wr));
            break;
        }
        wr = w.next;
    }
    if sq.head() != start {
        ring(db, DB_SQ, qp.qpn, sq.head());
    }
    result
}

/// `ibv_post_recv`'s logic, as [`post_send_chain`] for the RQ: `EINVAL` on a QP without
/// a receive queue or in RESET, or for more SGEs than `max_recv_sge`; `ENOMEM` when full.
///
/// # Safety
///
/// `wr` is null or the first of a chain of valid WRs whose `sg_list`s are valid for
/// `num_sge` entries.
pub(crate) unsafe fn post_recv_chain(
    qp: &Qp,
    db: &impl Doorbell,
    mut wr: *mut sys::ibv_recv_wr,
) -> Result<(), (c_int, *mut sys::ibv_recv_wr)> {
    if wr.is_null() {
        return Ok(());
    }
    let Some(rq) = qp.rq.as_ref() else {
        return Err((libc::EINVAL, wr));
    };
    if !recv_allowed(qp.state()) {
        return Err((libc::EINVAL, wr));
    }
    let mut rq = lock(rq);
    let start = rq.head();
    let mut result = Ok(());
    while let Some(w) = NonNull::new(wr) {
        // SAFETY: a valid WR of the chain (caller).
        let w = unsafe { w.as_ref() };
        // SAFETY: its `sg_list` is valid for `num_sge` entries (caller).
        let r = unsafe { sge_list(w.sg_list, w.num_sge) }.and_then(|sges| {
            if sges.len() > qp.caps.max_recv_sge as usize {
                return Err(libc::EINVAL);
            }
            rq.push(w.wr_id, |wqe| encode_recv(wqe, sges))
        });
        if let Err(e) = r {
            result = Err((e, wr));
            break;
        }
        wr = w.next;
    }
    if rq.head() != start {
        ring(db, DB_RQ, qp.qpn, rq.head());
    }
    result
}

/// The capabilities a send queue of `sq` and a receive queue of `rq` hold.
pub(crate) fn ring_caps(sq: &QueueShape, rq: Option<&QueueShape>) -> QpCaps {
    let sq_bytes = (1u32 << sq.log_wqe_size).saturating_sub(SQ_WQE_BASE);
    let rq_sges = rq.map_or(0, |r| {
        ((1u32 << r.log_wqe_size).saturating_sub(RQ_WQE_BASE)) / WQE_SGE_SIZE
    });
    // CAST: MAX_WQE_SGES is 64.
    let max = MAX_WQE_SGES as u32;
    QpCaps {
        max_send_sge: (sq_bytes / WQE_SGE_SIZE).min(max),
        max_recv_sge: rq_sges.min(max),
        max_inline: sq_bytes,
        sig_all: false,
    }
}

/// Helpers shared by the fast path's tests (here and in `cq`).
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use core::cell::RefCell;
    use core::ptr;

    /// A doorbell page that records every write, in order.
    #[derive(Default)]
    pub(crate) struct RecordingDb(pub(crate) RefCell<Vec<(usize, u32)>>);

    impl Doorbell for RecordingDb {
        fn ring(&self, offset: usize, value: u32) {
            self.0.borrow_mut().push((offset, value));
        }
    }

    impl RecordingDb {
        /// The writes so far, taken.
        pub(crate) fn take(&self) -> Vec<(usize, u32)> {
            self.0.take()
        }
    }

    /// A QP of `cap` (both CQs dangling, set them to test polling), in `state`, with QPN
    /// `qpn`.
    pub(crate) fn qp(cap: sys::ibv_qp_cap, sig_all: bool, state: u32, qpn: u32) -> Box<Qp> {
        let mut qp = crate::qp::new_qp(&sys::ibv_qp_init_attr {
            send_cq: ptr::NonNull::dangling().as_ptr(),
            recv_cq: ptr::NonNull::dangling().as_ptr(),
            cap,
            sq_sig_all: c_int::from(sig_all),
            ..Default::default()
        })
        .expect("a QP");
        qp.qpn = qpn;
        crate::qp::set_state(&qp, state);
        qp
    }

    /// Capabilities asked.
    pub(crate) fn cap(
        send_wr: u32,
        send_sge: u32,
        inline: u32,
        recv_wr: u32,
        recv_sge: u32,
    ) -> sys::ibv_qp_cap {
        sys::ibv_qp_cap {
            max_send_wr: send_wr,
            max_recv_wr: recv_wr,
            max_send_sge: send_sge,
            max_recv_sge: recv_sge,
            max_inline_data: inline,
        }
    }

    /// A send WR (not linked).
    pub(crate) fn send_wr(
        wr_id: u64,
        opcode: sys::ibv_wr_opcode,
        flags: u32,
        sges: &mut [sys::ibv_sge],
    ) -> sys::ibv_send_wr {
        let mut w = sys::ibv_send_wr {
            wr_id,
            opcode,
            send_flags: flags,
            sg_list: sges.as_mut_ptr(),
            num_sge: c_int::try_from(sges.len()).expect("few SGEs"),
            ..Default::default()
        };
        w.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: 0x1122_3344_5566_7788,
            rkey: 0xaabb_ccdd,
        };
        w.__bindgen_anon_1.imm_data = u32::from_ne_bytes([0xde, 0xad, 0xbe, 0xef]);
        w
    }

    /// Links `wrs` into a chain; the first WR.
    pub(crate) fn chain_send(wrs: &mut [sys::ibv_send_wr]) -> *mut sys::ibv_send_wr {
        let p = wrs.as_mut_ptr();
        for i in 1..wrs.len() {
            // SAFETY: both inside `wrs`.
            unsafe { (*p.add(i - 1)).next = p.add(i) };
        }
        p
    }

    /// Links receive WRs likewise.
    pub(crate) fn chain_recv(wrs: &mut [sys::ibv_recv_wr]) -> *mut sys::ibv_recv_wr {
        let p = wrs.as_mut_ptr();
        for i in 1..wrs.len() {
            // SAFETY: both inside `wrs`.
            unsafe { (*p.add(i - 1)).next = p.add(i) };
        }
        p
    }

    /// The bytes of slot `slot` of `wq`'s ring.
    pub(crate) fn slot(wq: &Mutex<WorkQueue>, slot: usize) -> Vec<u8> {
        let wq = lock(wq);
        let size = wq.wqe_size();
        assert!(slot < wq.depth() as usize);
        // SAFETY: inside the ring, which the test owns.
        unsafe { core::slice::from_raw_parts(wq.ring.as_ptr().add(slot * size), size) }.to_vec()
    }

    /// An SGE.
    pub(crate) fn sge(addr: u64, length: u32, lkey: u32) -> sys::ibv_sge {
        sys::ibv_sge { addr, length, lkey }
    }

    /// Posts a send chain.
    pub(crate) fn post_send(
        qp: &Qp,
        db: &RecordingDb,
        wr: *mut sys::ibv_send_wr,
    ) -> Result<(), (c_int, *mut sys::ibv_send_wr)> {
        // SAFETY: the tests' WRs and SGE lists are valid, inline buffers readable.
        unsafe { post_send_chain(qp, db, wr) }
    }

    /// Posts a receive chain.
    pub(crate) fn post_recv(
        qp: &Qp,
        db: &RecordingDb,
        wr: *mut sys::ibv_recv_wr,
    ) -> Result<(), (c_int, *mut sys::ibv_recv_wr)> {
        // SAFETY: as above.
        unsafe { post_recv_chain(qp, db, wr) }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use ordma_hw::DB_RQ;

    const RTS: u32 = sys::ibv_qp_state_IBV_QPS_RTS;
    const SIGNALED: u32 = sys::ibv_send_flags_IBV_SEND_SIGNALED;
    const INLINE: u32 = sys::ibv_send_flags_IBV_SEND_INLINE;

    #[test]
    fn send_wqes_are_byte_exact_per_opcode() {
        let qp = qp(cap(8, 2, 0, 0, 0), false, RTS, 7);
        let db = RecordingDb::default();
        let mut sges = [sge(0x1000, 100, 0x0102), sge(0x2000_0000_0000, 0, 0x0304)];
        let cases = [
            (
                sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
                WR_RDMA_WRITE,
                true,
                false,
            ),
            (
                sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
                WR_RDMA_WRITE_IMM,
                true,
                true,
            ),
            (sys::ibv_wr_opcode_IBV_WR_SEND, WR_SEND, false, false),
            (
                sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM,
                WR_SEND_IMM,
                false,
                true,
            ),
            (
                sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
                WR_RDMA_READ,
                true,
                false,
            ),
        ];
        for (i, &(op, wqe_op, remote, imm)) in cases.iter().enumerate() {
            let flags = SIGNALED
                | sys::ibv_send_flags_IBV_SEND_SOLICITED
                | sys::ibv_send_flags_IBV_SEND_FENCE;
            let mut wr = [send_wr(100 + i as u64, op, flags, &mut sges)];
            assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
            let b = slot(&qp.sq, i);
            // The control segment, by hand.
            let mut want = vec![0u8; 64];
            want[0] = wqe_op;
            want[1] = WQE_FLAG_SIGNALED | WQE_FLAG_SOLICITED | WQE_FLAG_FENCE;
            want[2] = 2;
            if imm {
                want[4..8].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
            }
            if remote {
                want[16..24].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
                want[24..28].copy_from_slice(&0xaabb_ccddu32.to_le_bytes());
            }
            want[32..40].copy_from_slice(&0x1000u64.to_le_bytes());
            want[40..44].copy_from_slice(&100u32.to_le_bytes());
            want[44..48].copy_from_slice(&0x0102u32.to_le_bytes());
            want[48..56].copy_from_slice(&0x2000_0000_0000u64.to_le_bytes());
            want[56..60].copy_from_slice(&0u32.to_le_bytes());
            want[60..64].copy_from_slice(&0x0304u32.to_le_bytes());
            assert_eq!(b, want, "opcode {op}");
            // And as the NIC's model decodes it.
            let hdr = SendWqe::decode(&b).expect("a valid header");
            assert_eq!((hdr.opcode, hdr.num_sge, hdr.inline_len), (wqe_op, 2, 0));
            assert_eq!(
                Sge::decode_from(&b, SendWqe::sge_offset(1)),
                Some(Sge {
                    addr: 0x2000_0000_0000,
                    length: 0,
                    lkey: 0x0304
                })
            );
            // CAST: small.
            assert_eq!(db.take(), vec![(DB_SQ, (7 << 16) | (i as u32 + 1))]);
        }
    }

    #[test]
    fn unsignaled_sends_are_signaled_with_sq_sig_all() {
        let mut sges = [sge(1, 1, 1)];
        for (sig_all, want) in [(false, 0), (true, WQE_FLAG_SIGNALED)] {
            let qp = qp(cap(2, 1, 0, 0, 0), sig_all, RTS, 3);
            let mut wr = [send_wr(1, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut sges)];
            assert_eq!(
                post_send(&qp, &RecordingDb::default(), chain_send(&mut wr)),
                Ok(())
            );
            assert_eq!(slot(&qp.sq, 0)[1], want);
        }
    }

    #[test]
    fn inline_sends_copy_the_bytes_into_the_wqe() {
        // 64 inline bytes: 128-byte WQEs.
        let qp = qp(cap(4, 1, 64, 0, 0), false, RTS, 9);
        assert_eq!(qp.caps.max_inline, 96);
        let db = RecordingDb::default();
        let a: Vec<u8> = (1..=40).collect();
        let b: Vec<u8> = (101..=156).collect();
        let mut sges = [
            sge(a.as_ptr() as u64, 40, 0xdead),
            sge(0, 0, 0),
            sge(b.as_ptr() as u64, 56, 0xbeef),
        ];
        // Three SGEs; max_send_sge is 6 here (128-byte WQEs).
        let mut wr = [send_wr(
            5,
            sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
            INLINE | SIGNALED,
            &mut sges,
        )];
        assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
        let w = slot(&qp.sq, 0);
        let hdr = SendWqe::decode(&w).expect("a valid header");
        assert_eq!(hdr.flags, WQE_FLAG_INLINE | WQE_FLAG_SIGNALED);
        assert_eq!((hdr.num_sge, hdr.inline_len), (0, 96));
        assert_eq!(&w[32..72], &a[..]);
        assert_eq!(&w[72..128], &b[..]);
        assert_eq!(db.take(), vec![(DB_SQ, (9 << 16) | 1)]);

        // One byte more than max_inline, and inline on a READ: EINVAL, nothing posted.
        let c = [0u8; 97];
        let mut long = [sge(c.as_ptr() as u64, 97, 0)];
        let mut wr = [send_wr(
            6,
            sys::ibv_wr_opcode_IBV_WR_SEND,
            INLINE,
            &mut long,
        )];
        let p = chain_send(&mut wr);
        assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
        let mut short = [sge(c.as_ptr() as u64, 8, 0)];
        let mut wr = [send_wr(
            7,
            sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
            INLINE,
            &mut short,
        )];
        let p = chain_send(&mut wr);
        assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
        let mut null = [sge(0, 8, 0)];
        let mut wr = [send_wr(
            8,
            sys::ibv_wr_opcode_IBV_WR_SEND,
            INLINE,
            &mut null,
        )];
        let p = chain_send(&mut wr);
        assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
        assert_eq!(db.take(), vec![]);
        assert_eq!(lock(&qp.sq).head(), 1);
    }

    #[test]
    fn the_send_ring_wraps_across_its_end() {
        let qp = qp(cap(4, 1, 0, 0, 0), false, RTS, 0xffff);
        let db = RecordingDb::default();
        let mut s = [sge(0x10, 1, 2)];
        let mut wrs: Vec<_> = (0..3)
            .map(|i| send_wr(i, sys::ibv_wr_opcode_IBV_WR_SEND, SIGNALED, &mut s))
            .collect();
        assert_eq!(post_send(&qp, &db, chain_send(&mut wrs)), Ok(()));
        assert_eq!(lock(&qp.sq).retire_through(2), Some(2));
        let mut wrs: Vec<_> = (10..13)
            .map(|i| send_wr(i, sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE, SIGNALED, &mut s))
            .collect();
        assert_eq!(post_send(&qp, &db, chain_send(&mut wrs)), Ok(()));
        // WQEs 3, 4, 5 in slots 3, 0, 1.
        assert_eq!(slot(&qp.sq, 3)[0], WR_RDMA_WRITE);
        assert_eq!(slot(&qp.sq, 0)[0], WR_RDMA_WRITE);
        assert_eq!(slot(&qp.sq, 1)[0], WR_RDMA_WRITE);
        assert_eq!(slot(&qp.sq, 2)[0], WR_SEND);
        assert_eq!(db.take(), vec![(DB_SQ, 0xffff_0003), (DB_SQ, 0xffff_0006)]);
        let mut sq = lock(&qp.sq);
        assert_eq!(sq.outstanding(), 3);
        assert_eq!(sq.retire_through(4), Some(11));
        assert_eq!(sq.retire_through(5), Some(12));
        assert_eq!(sq.retire_through(5), None, "already retired");
    }

    #[test]
    fn indices_wrap_past_2_pow_16() {
        let qp = qp(cap(2, 1, 0, 0, 0), false, RTS, 2);
        let db = RecordingDb::default();
        let mut s = [sge(0x10, 1, 2)];
        for i in 0..0x1_0001u32 {
            let mut wr = [send_wr(
                u64::from(i),
                sys::ibv_wr_opcode_IBV_WR_SEND,
                0,
                &mut s,
            )];
            assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
            // CAST: the CQE's index is mod 2^16.
            assert_eq!(lock(&qp.sq).retire_through(i as u16), Some(u64::from(i)));
        }
        assert_eq!(db.take().last(), Some(&(DB_SQ, (2 << 16) | 1)));
    }

    #[test]
    fn a_full_send_queue_is_enomem_at_exactly_depth_outstanding() {
        let qp = qp(cap(3, 1, 0, 0, 0), false, RTS, 4);
        assert_eq!(lock(&qp.sq).depth(), 4);
        let db = RecordingDb::default();
        let mut s = [sge(0x10, 1, 2)];
        let mut wrs: Vec<_> = (0..6)
            .map(|i| send_wr(i, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut s))
            .collect();
        let p = chain_send(&mut wrs);
        // SAFETY: inside `wrs`.
        assert_eq!(
            post_send(&qp, &db, p),
            Err((libc::ENOMEM, unsafe { p.add(4) }))
        );
        assert_eq!(
            db.take(),
            vec![(DB_SQ, (4 << 16) | 4)],
            "one doorbell for the four posted"
        );
        // Full: the next is refused, no doorbell.
        assert_eq!(post_send(&qp, &db, p), Err((libc::ENOMEM, p)));
        assert_eq!(db.take(), vec![]);
        // One retired: one fits.
        assert_eq!(lock(&qp.sq).retire_through(0), Some(0));
        let mut wr = [send_wr(9, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut s)];
        assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
        assert_eq!(db.take(), vec![(DB_SQ, (4 << 16) | 5)]);
    }

    #[test]
    fn bad_send_wrs_are_einval_with_bad_wr_at_them() {
        let qp = qp(cap(8, 2, 0, 0, 0), false, RTS, 5);
        let db = RecordingDb::default();
        let mut s2 = [sge(1, 1, 1), sge(2, 2, 2)];
        let mut s3 = [sge(1, 1, 1), sge(2, 2, 2), sge(3, 3, 3)];
        let ok = |s: &mut [sys::ibv_sge]| send_wr(0, sys::ibv_wr_opcode_IBV_WR_SEND, 0, s);
        let mut bad_cases: Vec<sys::ibv_send_wr> = vec![
            send_wr(
                1,
                sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
                0,
                &mut s2,
            ),
            send_wr(1, sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV, 0, &mut s2),
            send_wr(
                1,
                sys::ibv_wr_opcode_IBV_WR_SEND,
                sys::ibv_send_flags_IBV_SEND_IP_CSUM,
                &mut s2,
            ),
            send_wr(1, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut s3),
        ];
        let mut neg = ok(&mut s2);
        neg.num_sge = -1;
        bad_cases.push(neg);
        let mut null = ok(&mut s2);
        null.sg_list = core::ptr::null_mut();
        bad_cases.push(null);
        let mut posted = 0;
        for bad in bad_cases {
            let mut wrs = [ok(&mut s2), ok(&mut s2), bad, ok(&mut s2)];
            let p = chain_send(&mut wrs);
            // SAFETY: inside `wrs`.
            assert_eq!(
                post_send(&qp, &db, p),
                Err((libc::EINVAL, unsafe { p.add(2) }))
            );
            posted += 2;
            assert_eq!(
                db.take(),
                vec![(DB_SQ, (5 << 16) | posted)],
                "the two before it, one doorbell"
            );
            lock(&qp.sq).retire_through((posted - 1) as u16);
        }
        // Before RTS: EINVAL at the first WR, nothing posted.
        for state in [
            sys::ibv_qp_state_IBV_QPS_RESET,
            sys::ibv_qp_state_IBV_QPS_INIT,
            sys::ibv_qp_state_IBV_QPS_RTR,
        ] {
            crate::qp::set_state(&qp, state);
            let mut wrs = [ok(&mut s2), ok(&mut s2)];
            let p = chain_send(&mut wrs);
            assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
            assert_eq!(db.take(), vec![]);
        }
        // An empty chain posts nothing.
        crate::qp::set_state(&qp, RTS);
        assert_eq!(post_send(&qp, &db, core::ptr::null_mut()), Ok(()));
        assert_eq!(db.take(), vec![]);
    }

    #[test]
    fn receives_are_encoded_and_checked() {
        let qp = qp(cap(1, 1, 0, 2, 3), false, sys::ibv_qp_state_IBV_QPS_INIT, 6);
        let db = RecordingDb::default();
        let rq = qp.rq.as_ref().expect("an RQ");
        let mut s = [
            sge(0xa000, 10, 0x11),
            sge(0xb000, 20, 0x22),
            sge(0xc000, 30, 0x33),
        ];
        let mut s4 = [sge(0, 1, 0); 4];
        let mut wrs = [
            sys::ibv_recv_wr {
                wr_id: 1,
                sg_list: s.as_mut_ptr(),
                num_sge: 3,
                ..Default::default()
            },
            sys::ibv_recv_wr {
                wr_id: 2,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
            sys::ibv_recv_wr {
                wr_id: 3,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
        ];
        let p = chain_recv(&mut wrs);
        // Depth 2: the third is ENOMEM.
        // SAFETY: inside `wrs`.
        assert_eq!(
            post_recv(&qp, &db, p),
            Err((libc::ENOMEM, unsafe { p.add(2) }))
        );
        assert_eq!(db.take(), vec![(DB_RQ, (6 << 16) | 2)]);
        let w = slot(rq, 0);
        let mut want = vec![0u8; 64];
        want[0] = 3;
        for (i, (a, l, k)) in [
            (0xa000u64, 10u32, 0x11u32),
            (0xb000, 20, 0x22),
            (0xc000, 30, 0x33),
        ]
        .iter()
        .enumerate()
        {
            let o = 16 + 16 * i;
            want[o..o + 8].copy_from_slice(&a.to_le_bytes());
            want[o + 8..o + 12].copy_from_slice(&l.to_le_bytes());
            want[o + 12..o + 16].copy_from_slice(&k.to_le_bytes());
        }
        assert_eq!(w, want);
        assert_eq!(RecvWqe::decode(&w), Some(RecvWqe { num_sge: 3 }));
        assert_eq!(lock(rq).retire_through(0), Some(1));
        // Four SGEs, max_recv_sge 3: EINVAL.
        let mut wrs = [sys::ibv_recv_wr {
            wr_id: 4,
            sg_list: s4.as_mut_ptr(),
            num_sge: 4,
            ..Default::default()
        }];
        let p = chain_recv(&mut wrs);
        assert_eq!(post_recv(&qp, &db, p), Err((libc::EINVAL, p)));
        // In RESET: EINVAL, and the indices are back to 0.
        crate::qp::set_state(&qp, sys::ibv_qp_state_IBV_QPS_RESET);
        let mut wrs = [sys::ibv_recv_wr {
            wr_id: 5,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        }];
        let p = chain_recv(&mut wrs);
        assert_eq!(post_recv(&qp, &db, p), Err((libc::EINVAL, p)));
        let (head, outstanding) = {
            let rq = lock(rq);
            (rq.head(), rq.outstanding())
        };
        assert_eq!((head, outstanding), (0, 0));
        assert_eq!(db.take(), vec![]);
        // A QP without an RQ: EINVAL.
        let no_rq = super::testing::qp(cap(1, 1, 0, 0, 0), false, RTS, 8);
        assert_eq!(post_recv(&no_rq, &db, p), Err((libc::EINVAL, p)));
    }

    #[test]
    fn the_capabilities_reported_are_the_ones_enforced() {
        let qp = qp(cap(5, 2, 40, 3, 2), false, RTS, 2);
        // The rings: SQ 8 × 128 B (40 inline + 32), RQ 4 × 64 B.
        assert_eq!(
            qp.caps,
            QpCaps {
                max_send_sge: 6,
                max_recv_sge: 3,
                max_inline: 96,
                sig_all: false
            }
        );
        // What the kernel reports (`uapi.md`: the rings' capacity, capped by max_sge).
        let t = |c: sys::ibv_qp_cap| {
            (
                c.max_send_wr,
                c.max_recv_wr,
                c.max_send_sge,
                c.max_recv_sge,
                c.max_inline_data,
            )
        };
        let mut reported = cap(8, 6, 96, 4, 3);
        let caps = crate::qp::settle_caps(&qp, &mut reported);
        assert_eq!(t(reported), t(cap(8, 6, 96, 4, 3)));
        assert_eq!(caps, qp.caps);
        // A kernel that reports less (a device max_sge of 4) is what is enforced; more than
        // the rings hold is cut down to them.
        let mut reported = cap(9, 4, 200, 1, 16);
        let caps = crate::qp::settle_caps(&qp, &mut reported);
        assert_eq!(t(reported), t(cap(8, 4, 96, 1, 3)));
        // The receive queue holds 4 but was reported as 1: posting takes 1.
        let db = RecordingDb::default();
        let mut s = [sge(1, 1, 1)];
        let mut wrs = [
            sys::ibv_recv_wr {
                wr_id: 1,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
            sys::ibv_recv_wr {
                wr_id: 2,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
        ];
        let p = chain_recv(&mut wrs);
        // SAFETY: inside `wrs`.
        assert_eq!(
            post_recv(&qp, &db, p),
            Err((libc::ENOMEM, unsafe { p.add(1) }))
        );
        assert_eq!(
            caps,
            QpCaps {
                max_send_sge: 4,
                max_recv_sge: 3,
                max_inline: 96,
                sig_all: false
            }
        );
    }
}
