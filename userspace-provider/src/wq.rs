//! Work queues and posting: the SQ and RQ rings with their indices and `wr_id`s, the
//! WQE encoding (`defs/wqe.rs`), and `post_send`/`post_recv`'s logic, all in user space:
//! WQEs written at `producer mod depth`, [`udma_to_device_barrier`], then one doorbell
//! write for the whole chain (`DB_SQ`/`DB_RQ`, `qpn << 16 | producer mod 2^16`), under the
//! queue's lock as rdma-core's providers do, so doorbells of one queue never go backwards.
//! No system call, no allocation.

use core::ffi::c_int;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ordma_hw::{
    db_value, is_atomic, is_local, is_rd_atomic, sq_wqe_data, AtomicSeg, BindSeg, FlushSeg,
    RecvWqe, SendWqe, Sge, UdSeg, DB_RQ, DB_SQ, QP_TYPE_RC, QP_TYPE_UD, RQ_WQE_BASE,
    WQE_FLAG_FENCE, WQE_FLAG_INLINE, WQE_FLAG_SIGNALED, WQE_FLAG_SOLICITED, WQE_SGE_SIZE,
    WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD, WR_BIND_MW, WR_LOCAL_INV, WR_RDMA_READ,
    WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_SEND, WR_SEND_IMM, WR_SEND_WITH_INV,
};

use crate::ah::av_of;
use crate::barrier::udma_to_device_barrier;
use crate::context::Doorbell;
use crate::dma::DmaMem;
use crate::mw::wr_bind_segment;
use crate::qp::{Qp, QueueShape};
use crate::sys;
use crate::wr::Batch;

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
        write(self.stage(0, wr_id)?)?;
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// The slot `ahead` WQEs past the producer index, for a WQE not yet posted, with
    /// `wr_id` recorded for it: `ENOMEM` if the queue cannot hold that many more
    /// ([`Self::is_full`] counting the ones before it).
    pub(crate) fn stage(&mut self, ahead: u32, wr_id: u64) -> Result<&mut [u8], c_int> {
        if self.outstanding().saturating_add(ahead) >= self.limit {
            return Err(libc::ENOMEM);
        }
        let slot = (self.head.wrapping_add(ahead) & (self.depth() - 1)) as usize;
        if let Some(w) = self.wr_id.get_mut(slot) {
            *w = wr_id;
        }
        let size = self.wqe_size();
        // SAFETY: the ring holds `depth` WQEs of `size` bytes (`DmaMem::ring`), `slot` is
        // below `depth`; the slot is not outstanding (fewer than `limit` <= `depth` are,
        // with the ones staged before it), so the NIC does not read it, and `&mut self`
        // (the queue's lock) keeps every other writer out.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.ring.as_ptr().add(slot * size), size) })
    }

    /// Posts the `n` WQEs staged past the producer index ([`Self::stage`]).
    pub(crate) fn post_staged(&mut self, n: u32) {
        self.head = self.head.wrapping_add(n);
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

/// A send queue: its work queue and, between `ibv_wr_start` and `ibv_wr_complete` or
/// `ibv_wr_abort`, the WQEs staged past its producer index (`wr`).
pub(crate) struct SendQueue {
    pub(crate) wq: WorkQueue,
    pub(crate) batch: Option<Batch>,
}

impl SendQueue {
    /// Back to empty, as the NIC's indices after a move to RESET; an open batch is gone
    /// (its `ibv_wr_complete` fails).
    pub(crate) fn reset(&mut self) {
        self.wq.reset();
        self.batch = None;
    }
}

impl Deref for SendQueue {
    type Target = WorkQueue;
    fn deref(&self) -> &WorkQueue {
        &self.wq
    }
}

impl DerefMut for SendQueue {
    fn deref_mut(&mut self) -> &mut WorkQueue {
        &mut self.wq
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
    /// A UC QP: no READ, no atomics (`EINVAL`, as soft-RoCE's provider), no send with
    /// invalidate (RC's alone in IBTA's opcodes); binds and local invalidates are taken.
    pub(crate) uc: bool,
    /// A UD QP: SEND and SEND with immediate only, each WR with its address.
    pub(crate) ud: bool,
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
/// others (masked atomics, TSO, ...; ATOMIC WRITE and FLUSH, which only `ibv_wr_*` posts).
fn wr_opcode(op: sys::ibv_wr_opcode) -> Result<u8, c_int> {
    Ok(match op {
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE => WR_RDMA_WRITE,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM => WR_RDMA_WRITE_IMM,
        sys::ibv_wr_opcode_IBV_WR_SEND => WR_SEND,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM => WR_SEND_IMM,
        sys::ibv_wr_opcode_IBV_WR_RDMA_READ => WR_RDMA_READ,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP => WR_ATOMIC_CMP_AND_SWP,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD => WR_ATOMIC_FETCH_AND_ADD,
        sys::ibv_wr_opcode_IBV_WR_LOCAL_INV => WR_LOCAL_INV,
        sys::ibv_wr_opcode_IBV_WR_BIND_MW => WR_BIND_MW,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV => WR_SEND_WITH_INV,
        _ => return Err(libc::EINVAL),
    })
}

/// Whether WQE opcode `opcode` reads the remote side or acts on it alone (a READ, an
/// atomic, a FLUSH, an ATOMIC WRITE): such a WQE carries no inline data.
pub(crate) fn is_read_or_atomic(opcode: u8) -> bool {
    is_rd_atomic(opcode)
}

/// Whether send opcode `opcode` may be posted on a QP with `caps`: a UD QP takes the SENDs
/// alone; a UC QP neither READs nor atomics, nor SENDs with invalidate (UC has no such
/// packet), but the local operations (`hw::is_local`: binds, as soft-RoCE, and local
/// invalidates, as the NIC: a type 2 window bound through a UC QP is invalidated there).
pub(crate) fn opcode_allowed(opcode: u8, caps: &QpCaps) -> bool {
    if caps.ud {
        return opcode == WR_SEND || opcode == WR_SEND_IMM;
    }
    !(caps.uc && (opcode == WR_RDMA_READ || is_atomic(opcode) || opcode == WR_SEND_WITH_INV))
}

/// The bytes of `sges` together, `None` past u64.
fn total_len(sges: &[sys::ibv_sge]) -> Option<u64> {
    sges.iter()
        .try_fold(0u64, |t, s| t.checked_add(u64::from(s.length)))
}

/// A send WR as the NIC reads it: the WQE header and, for an atomic or an ATOMIC WRITE,
/// its atomic segment, for a FLUSH its flush segment, for a bind its bind segment; for a
/// UD QP's WR, its datagram segment (the address).
pub(crate) struct SendHeader {
    pub(crate) wqe: SendWqe,
    pub(crate) atomic: Option<AtomicSeg>,
    pub(crate) flush: Option<FlushSeg>,
    pub(crate) bind: Option<BindSeg>,
    pub(crate) ud: Option<UdSeg>,
}

/// The WQE flags of send flags `f` (`IBV_SEND_INLINE` aside: the caller's) on a QP with
/// `caps`: `EINVAL` for a flag the NIC does not have.
pub(crate) fn wqe_flags(f: u32, caps: &QpCaps) -> Result<u8, c_int> {
    if f & !SEND_FLAGS != 0 {
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
    Ok(flags)
}

/// Checks a send WR against the QP's capabilities and makes its WQE header: `EINVAL` for
/// an opcode or flag the NIC does not have, an opcode the QP's type does not take
/// ([`opcode_allowed`]; on a UD QP, the SENDs, whose address [`ud_segment`] adds), more
/// SGEs than `max_send_sge`, SGEs on a bind or a local invalidate, inline data on a READ,
/// an atomic, a bind or a local invalidate or longer than `max_inline`. A bind's segment
/// is [`wr_bind_segment`]'s to add. An atomic's remote address and its SGEs' length are
/// the NIC's to check (error completions: `REM_INV_REQ_ERR` for an unaligned address,
/// `LOC_LEN_ERR` for other than 8 bytes), as on mlx5.
pub(crate) fn send_header(
    wr: &sys::ibv_send_wr,
    sges: &[sys::ibv_sge],
    caps: &QpCaps,
) -> Result<SendHeader, c_int> {
    let opcode = wr_opcode(wr.opcode)?;
    if !opcode_allowed(opcode, caps) {
        return Err(libc::EINVAL);
    }
    let f = wr.send_flags;
    if sges.len() > caps.max_send_sge as usize || (is_local(opcode) && !sges.is_empty()) {
        return Err(libc::EINVAL);
    }
    let mut flags = wqe_flags(f, caps)?;
    let (num_sge, inline_len) = if f & sys::ibv_send_flags_IBV_SEND_INLINE != 0 {
        let len = total_len(sges).ok_or(libc::EINVAL)?;
        if is_read_or_atomic(opcode) || is_local(opcode) || len > u64::from(caps.max_inline) {
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
    } else if opcode == WR_LOCAL_INV || opcode == WR_SEND_WITH_INV {
        // SAFETY: as above; for these it is the rkey to invalidate, which the WQE carries
        // as a number (`defs/mw.rs`: host order, not bytes).
        unsafe { wr.__bindgen_anon_1.invalidate_rkey }
    } else {
        0
    };
    let mut atomic = None;
    let (remote_addr, rkey) = if matches!(opcode, WR_RDMA_WRITE | WR_RDMA_WRITE_IMM | WR_RDMA_READ)
    {
        // SAFETY: every member of the union is plain integers; `rdma` is the one these
        // opcodes use.
        let r = unsafe { wr.wr.rdma };
        (r.remote_addr, r.rkey)
    } else if is_atomic(opcode) {
        // SAFETY: as above; `atomic` is the one atomics use.
        let a = unsafe { wr.wr.atomic };
        atomic = Some(AtomicSeg {
            compare_add: a.compare_add,
            // A fetch and add has no swap value: zero, as the NIC wants it.
            swap: if opcode == WR_ATOMIC_CMP_AND_SWP {
                a.swap
            } else {
                0
            },
        });
        (a.remote_addr, a.rkey)
    } else {
        (0, 0)
    };
    Ok(SendHeader {
        wqe: SendWqe {
            opcode,
            flags,
            num_sge,
            imm,
            inline_len,
            remote_addr,
            rkey,
        },
        atomic,
        flush: None,
        bind: None,
        ud: None,
    })
}

/// The datagram segment of UD send WR `wr`: its AH's address vector, the destination QP
/// and Q_Key. `EINVAL` for no AH or a QP number above 24 bits.
///
/// # Safety
///
/// `wr.wr.ud.ah` is null or an AH of ours not yet destroyed (libibverbs' contract for a
/// UD QP's WR).
pub(crate) unsafe fn ud_segment(wr: &sys::ibv_send_wr) -> Result<UdSeg, c_int> {
    // SAFETY: every member of the union is plain integers and pointers; `ud` is the one a
    // UD QP's WRs use.
    let u = unsafe { wr.wr.ud };
    // SAFETY: null or one of our live AHs (caller).
    let av = unsafe { av_of(u.ah) }.ok_or(libc::EINVAL)?;
    if u.remote_qpn >= 1 << 24 {
        return Err(libc::EINVAL);
    }
    Ok(UdSeg {
        remote_qpn: u.remote_qpn,
        remote_qkey: u.remote_qkey,
        av,
    })
}

/// Writes one SGE as the NIC reads it.
pub(crate) fn put_sge(wqe: &mut [u8], off: usize, s: &sys::ibv_sge) -> Result<(), c_int> {
    let sge = Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    };
    sge.encode_into(wqe, off).then_some(()).ok_or(libc::EINVAL)
}

/// Encodes a send WQE into `wqe` (one ring slot): the header, then the SGEs or the inline
/// bytes; an atomic's segment, then its SGEs; a bind's segment alone. `EINVAL` if they do
/// not fit the slot (the capabilities keep them in, but for an atomic's SGEs: one fewer
/// than `max_send_sge` fits behind its segment, at least one), or for a bind without its
/// segment.
pub(crate) fn encode_send(
    wqe: &mut [u8],
    hdr: &SendHeader,
    payload: &Payload<'_>,
) -> Result<(), c_int> {
    if !hdr.wqe.encode_into(wqe) {
        return Err(libc::EINVAL);
    }
    if let Some(a) = &hdr.atomic {
        if !a.encode_into(wqe) {
            return Err(libc::EINVAL);
        }
    }
    if let Some(f) = &hdr.flush {
        if !f.encode_into(wqe) {
            return Err(libc::EINVAL);
        }
    }
    match &hdr.bind {
        Some(b) if !b.encode_into(wqe) => return Err(libc::EINVAL),
        None if hdr.wqe.opcode == WR_BIND_MW => return Err(libc::EINVAL),
        _ => {}
    }
    if let Some(u) = &hdr.ud {
        if !u.encode_into(wqe) {
            return Err(libc::EINVAL);
        }
    }
    let data = sq_wqe_data(if hdr.ud.is_some() {
        QP_TYPE_UD
    } else {
        QP_TYPE_RC
    });
    match payload {
        Payload::Sges(sges) => {
            for (i, s) in sges.iter().enumerate() {
                let off = if hdr.atomic.is_some() {
                    SendWqe::atomic_sge_offset(i)
                } else {
                    SendWqe::sge_offset_from(data, i)
                };
                put_sge(wqe, off, s)?;
            }
        }
        Payload::Inline(bufs) => {
            let mut off = data as usize;
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
pub(crate) unsafe fn sge_list<'a>(
    list: *const sys::ibv_sge,
    num: c_int,
) -> Result<&'a [sys::ibv_sge], c_int> {
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

/// A post's return value: 0, or the errno with `*bad_wr` set to the first WR not posted.
///
/// # Safety
///
/// `bad_wr` is valid for a write (libibverbs' contract for the post verbs).
pub(crate) unsafe fn post_result<W>(r: Result<(), (c_int, *mut W)>, bad_wr: *mut *mut W) -> c_int {
    match r {
        Ok(()) => 0,
        Err((e, failed)) => {
            // SAFETY: valid for a write (caller).
            unsafe { *bad_wr = failed };
            e
        }
    }
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
/// entry's bytes are readable; on a UD QP, `wr.wr.ud.ah` is null or a live AH of ours; for
/// `IBV_WR_BIND_MW`, `wr.bind_mw.mw` is null or a live MW and `wr.bind_mw.bind_info.mr`
/// null or a live MR (libibverbs' contract for `ibv_post_send`).
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
    let mut hdr = send_header(wr, sges, caps)?;
    if caps.ud {
        // SAFETY: a UD QP's WR: its AH is null or ours and live (the caller's promise).
        hdr.ud = Some(unsafe { ud_segment(wr) }?);
    }
    if hdr.wqe.opcode == WR_BIND_MW {
        // SAFETY: a bind's window and MR are null or live (the caller's promise).
        hdr.bind = Some(unsafe { wr_bind_segment(wr) }?);
    }
    let mut bufs: [&[u8]; MAX_WQE_SGES] = [&[]; MAX_WQE_SGES];
    let payload = if hdr.wqe.flags & WQE_FLAG_INLINE != 0 {
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

/// Rings a send queue's doorbell after the WQEs up to `head` are in memory.
pub(crate) fn ring_sq(db: &impl Doorbell, qpn: u32, head: u32) {
    ring(db, DB_SQ, qpn, head);
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
    if sq.batch.is_some() {
        // WQEs staged by `ibv_wr_*` hold the next slots until `ibv_wr_complete`.
        return Err((libc::EBUSY, wr));
    }
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

/// The capabilities a send queue of `sq` and a receive queue of `rq` hold, for a QP of
/// type `qp_type` (`QP_TYPE_*`: a UD QP's WQEs have a datagram segment more).
pub(crate) fn ring_caps(sq: &QueueShape, rq: Option<&QueueShape>, qp_type: u8) -> QpCaps {
    let sq_bytes = (1u32 << sq.log_wqe_size).saturating_sub(sq_wqe_data(qp_type));
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
        uc: false,
        ud: false,
    }
}

/// Helpers shared by the fast path's tests (here and in `cq`).
#[cfg(test)]
#[path = "tests/testing.rs"]
pub(crate) mod testing;

#[cfg(test)]
#[path = "tests/wq.rs"]
mod tests;
