//! Completion queues: CREATE_CQ with the ring and doorbell record the provider allocates
//! (ordma's driver data), RESIZE_CQ (a new ring, the CQEs not yet polled moved into it),
//! DESTROY_CQ, arming (`req_notify_cq`, a doorbell write) and polling (`poll_cq`), both
//! without a system call.

use core::ffi::c_int;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{self, null_mut};

use ordma_hw::{
    cqe_phase, db_value, Cqe, CQE_FLAG_GRH, CQE_FLAG_IMM, CQE_FLAG_INV, CQE_FLAG_RECV,
    CQE_LOG_SIZE_MIN, CQE_OWNER_OFFSET, CQ_DB_RECORD_SIZE, DB_CQ_ARM, DB_CQ_ARM_SOLICITED,
    MAX_QUEUE_LOG_DEPTH,
};

use crate::barrier::{udma_from_device_barrier, udma_to_device_barrier};
use crate::context::{Context, DbPage, Doorbell, QpTable};
use crate::dma::{log2_ceil, DmaMem, RING_ALIGN};
use crate::lock::SpinLock;
use crate::qp::Qp;
use crate::srq::Srq;
use crate::wq::lock;
use crate::{abi, set_errno, sys};

/// A CQ: libibverbs' part first (driver.h's `struct verbs_cq`: an `ibv_cq`, or for
/// `ibv_create_cq_ex` the `ibv_cq_ex` that begins with the same fields), then the NIC's
/// number and the memory it writes.
#[repr(C)]
pub(crate) struct Cq {
    pub(crate) ibv: sys::ibv_cq_ex,
    /// The NIC's CQ number, for the CQ's doorbells.
    pub(crate) cqn: u32,
    /// The CQ's lock and what it guards: `poll_cq`, the arm doorbell, a resize and a QP's
    /// removal from the context's table (`qp::destroy_qp`) take it; `ibv_start_poll` takes
    /// it until `ibv_end_poll` (`cq_ex`).
    pub(crate) state: SpinLock<CqState>,
    /// The doorbell record (`consumer_index` u32 @0), which the NIC reads.
    pub(crate) record: DmaMem,
}

/// A CQ's ring: `2^log_depth` CQEs of `2^CQE_LOG_SIZE_MIN` bytes, which the NIC writes.
pub(crate) struct CqRing {
    pub(crate) mem: DmaMem,
    pub(crate) log_depth: u8,
}

impl CqRing {
    /// A zeroed ring of `2^log_depth` CQEs (no CQE of its first pass is new).
    pub(crate) fn new(log_depth: u8) -> Result<Self, c_int> {
        let mem = DmaMem::ring(log_depth, CQE_LOG_SIZE_MIN)?;
        debug_assert_eq!(mem.addr() % RING_ALIGN as u64, 0);
        Ok(Self { mem, log_depth })
    }

    /// Makes every slot read as old to a consumer at index `ci` (the next pass's CQE is
    /// new only once the NIC writes it): each slot's owner byte the phase its index from
    /// `ci` on does not have. A zeroed ring is that only for `ci` on a first pass: a
    /// resized CQ goes on from its index.
    pub(crate) fn stale_from(&self, ci: u32) {
        for i in (0..self.depth()).map(|k| ci.wrapping_add(k)) {
            // SAFETY: a slot of the ring, which the NIC does not know yet.
            unsafe {
                self.slot(i)
                    .add(CQE_OWNER_OFFSET)
                    .write_volatile(cqe_phase(i, self.log_depth) ^ 1)
            };
        }
    }

    /// CQEs it holds.
    pub(crate) fn depth(&self) -> u32 {
        1 << self.log_depth
    }

    /// The first byte of CQE `i`'s slot.
    fn slot(&self, i: u32) -> *mut u8 {
        // CAST: below the depth, at most 2^15.
        let off = ((i & (self.depth() - 1)) as usize) << CQE_LOG_SIZE_MIN;
        // SAFETY: the ring holds `depth` CQEs of `2^CQE_LOG_SIZE_MIN` bytes
        // (`DmaMem::ring`), and `off` is one of them.
        unsafe { self.mem.as_ptr().add(off) }
    }
}

/// What a CQ's lock guards.
pub(crate) struct CqState {
    /// The ring the NIC writes (a resize replaces it).
    pub(crate) ring: CqRing,
    /// CQEs consumed, free-running.
    pub(crate) consumer_index: u32,
    /// CQEs that named no QP of this CQ, or no outstanding WQE of it: consumed and
    /// counted, each an error to one `poll_cq`.
    pub(crate) bad_cqes: u64,
    /// The extended polling API's completion at hand (from `ibv_start_poll` or
    /// `ibv_next_poll`), which its `ibv_wc_read_*` accessors read.
    pub(crate) current: sys::ibv_wc,
    /// The consumer index the NIC was last told of (`ibv_end_poll` publishes the new one).
    pub(crate) published: u32,
}

impl CqState {
    /// A CQ's state with `ring`, nothing consumed.
    pub(crate) fn new(ring: CqRing) -> Self {
        Self {
            ring,
            consumer_index: 0,
            bad_cqes: 0,
            current: sys::ibv_wc::default(),
            published: 0,
        }
    }
}

impl Cq {
    /// libibverbs' `ibv_cq` of `cq` (the head of its `ibv_cq_ex`).
    pub(crate) fn ibv_cq(cq: *mut Cq) -> *mut sys::ibv_cq {
        cq.cast()
    }
}

/// The request and response of CREATE_CQ with ordma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateCqCmd {
    pub(crate) ibv: abi::IbvCreateCq,
    pub(crate) drv: sys::ordma_ibv_create_cq_cmd,
}
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateCqResp {
    pub(crate) ibv: sys::ib_uverbs_create_cq_resp,
    pub(crate) drv: sys::ordma_ibv_create_cq_resp,
}

/// log2 of the ring depth for `cqe` CQEs asked: at least 2 entries, a power of two.
/// `EINVAL` for no CQE or more than the deepest ring the NIC has.
pub(crate) fn cq_log_depth(cqe: c_int) -> Result<u8, c_int> {
    let cqe = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
    if cqe == 0 {
        return Err(libc::EINVAL);
    }
    let log = log2_ceil(cqe).ok_or(libc::EINVAL)?.max(1);
    if log > MAX_QUEUE_LOG_DEPTH {
        return Err(libc::EINVAL);
    }
    Ok(log)
}

/// # Safety
///
/// libibverbs calls this with one of our contexts and, if not null, a completion channel
/// of it.
pub(crate) unsafe extern "C" fn create_cq(
    ibctx: *mut sys::ibv_context,
    cqe: c_int,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut sys::ibv_cq {
    match new_cq(cqe).and_then(|cq| {
        // SAFETY: as this function's contract.
        unsafe { register(ibctx, cq, cqe, channel, comp_vector) }
    }) {
        Ok(cq) => cq,
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    }
}

/// A CQ's memory for `cqe` CQEs, not yet known to the kernel.
pub(crate) fn new_cq(cqe: c_int) -> Result<Box<Cq>, c_int> {
    let ring = CqRing::new(cq_log_depth(cqe)?)?;
    // CAST: 8 bytes.
    let record = DmaMem::zeroed(CQ_DB_RECORD_SIZE as usize, CQ_DB_RECORD_SIZE as usize)?;
    Ok(Box::new(Cq {
        ibv: sys::ibv_cq_ex::default(),
        cqn: 0,
        state: SpinLock::new(CqState::new(ring)),
        record,
    }))
}

/// CREATE_CQ for `cq` of `cqe` CQEs asked (its ring may hold more); on success the kernel
/// holds its memory until DESTROY_CQ.
///
/// # Safety
///
/// As [`create_cq`].
unsafe fn register(
    ibctx: *mut sys::ibv_context,
    cq: Box<Cq>,
    cqe: c_int,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> Result<*mut sys::ibv_cq, c_int> {
    let mut cmd = CreateCqCmd::default();
    {
        let st = cq.state.lock();
        cmd.drv.log_depth = st.ring.log_depth;
        cmd.drv.buf_addr = st.ring.mem.addr();
    }
    cmd.drv.log_cqe_size = CQE_LOG_SIZE_MIN;
    cmd.drv.db_addr = cq.record.addr();
    let mut resp = CreateCqResp::default();
    let cq = Box::into_raw(cq);
    // SAFETY: `ibctx` and `channel` are valid (contract); `cq` is ours and stays where it
    // is (its address is the CQ's user handle); the buffers are ours, their sizes theirs.
    let r = unsafe {
        abi::ibv_cmd_create_cq(
            ibctx,
            cqe,
            channel,
            comp_vector,
            Cq::ibv_cq(cq),
            &mut cmd.ibv,
            size_of::<CreateCqCmd>(),
            &mut resp.ibv,
            size_of::<CreateCqResp>(),
        )
    };
    if r != 0 {
        // SAFETY: from `Box::into_raw` above; the kernel has not kept its memory.
        drop(unsafe { Box::from_raw(cq) });
        return Err(r);
    }
    // SAFETY: `cq` is ours.
    unsafe {
        (*cq).cqn = resp.drv.cqn;
        Ok(Cq::ibv_cq(cq))
    }
}

/// # Safety
///
/// libibverbs calls this with a CQ `create_cq` returned, no longer in use.
pub(crate) unsafe extern "C" fn destroy_cq(ibcq: *mut sys::ibv_cq) -> c_int {
    // SAFETY: `ibcq` is valid (contract).
    let r = unsafe { abi::ibv_cmd_destroy_cq(ibcq) };
    if r != 0 {
        // The CQ still exists, and the kernel still holds its memory.
        return r;
    }
    // SAFETY: `ibcq` is the first field of a `Cq` from `Box::into_raw`; the kernel has let
    // go of its memory, and this is its last use.
    drop(unsafe { Box::from_raw(ibcq.cast::<Cq>()) });
    0
}

/// The request and response of RESIZE_CQ with ordma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct ResizeCqCmd {
    pub(crate) ibv: abi::IbvResizeCq,
    pub(crate) drv: sys::ordma_ibv_resize_cq_cmd,
}
#[repr(C)]
#[derive(Default)]
pub(crate) struct ResizeCqResp {
    pub(crate) ibv: sys::ib_uverbs_resize_cq_resp,
    pub(crate) drv: sys::ordma_ibv_resize_cq_resp,
}

/// `ibv_resize_cq`: a new ring for at least `cqe` CQEs (`uapi.md`, RESIZE_CQ), under the
/// CQ's lock, so nothing is polled meanwhile: every slot of the new ring marked old for
/// the consumer index ([`CqRing::stale_from`]), the index published, RESIZE_CQ,
/// then the CQEs not yet polled moved from the old ring into the new one
/// ([`move_unpolled`]) and the old ring freed (the kernel has let go of it). `EINVAL` for
/// no CQE, more than the deepest ring, or more CQEs not yet polled than the new ring holds
/// (the NIC's answer); on an error the CQ is as it was.
///
/// # Safety
///
/// libibverbs calls this with a CQ `create_cq` or `create_cq_ex` returned.
pub(crate) unsafe extern "C" fn resize_cq(ibcq: *mut sys::ibv_cq, cqe: c_int) -> c_int {
    let ring = match cq_log_depth(cqe).and_then(CqRing::new) {
        Ok(r) => r,
        Err(e) => return e,
    };
    // SAFETY: `ibcq` is the first field of a live `Cq` (contract).
    let cq = unsafe { &*ibcq.cast::<Cq>() };
    let mut st = cq.state.lock();
    ring.stale_from(st.consumer_index);
    // What the NIC reads to count the CQEs not yet polled.
    publish(cq, st.consumer_index);
    st.published = st.consumer_index;
    let mut cmd = ResizeCqCmd::default();
    cmd.drv.log_depth = ring.log_depth;
    cmd.drv.buf_addr = ring.mem.addr();
    let mut resp = ResizeCqResp::default();
    // SAFETY: `ibcq` is valid (contract); the buffers are ours, their sizes theirs.
    let r = unsafe {
        abi::ibv_cmd_resize_cq(
            ibcq,
            cqe,
            &mut cmd.ibv,
            size_of::<ResizeCqCmd>(),
            &mut resp.ibv,
            size_of::<ResizeCqResp>(),
        )
    };
    if r != 0 {
        keep_if_nic_may_use(r, ring.mem);
        return r;
    }
    move_unpolled(&st.ring, &ring, st.consumer_index, resp.drv.pi);
    st.ring = ring;
    0
}

/// After a command that gave the NIC new memory failed with `err`: when the NIC may have
/// taken it without answering (`ETIMEDOUT`, `EIO`: the kernel keeps it pinned until the NIC
/// is stopped), the memory is never freed, so a late write from the NIC cannot land in
/// memory the process reuses; otherwise it is freed.
pub(crate) fn keep_if_nic_may_use(err: c_int, mem: DmaMem) {
    if err == libc::ETIMEDOUT || err == libc::EIO {
        core::mem::forget(mem);
    }
}

/// Copies the CQEs of `old` from consumer index `ci` up to the NIC's producer index at the
/// move (`pi`, mod 2^16) into `new`, each into its slot there with `new`'s phase for it,
/// the owner byte last. The NIC writes the CQEs after them into `new` meanwhile, in other
/// slots (they all fit: the NIC checked).
pub(crate) fn move_unpolled(old: &CqRing, new: &CqRing, ci: u32, pi: u32) {
    // CAST: the NIC counts mod 2^16.
    let n = (pi as u16).wrapping_sub(ci as u16);
    for i in (0..u32::from(n)).map(|k| ci.wrapping_add(k)) {
        // SAFETY: a slot of each ring ([`CqRing::slot`]), distinct allocations; the NIC
        // wrote the old one before it answered the move and writes neither again.
        unsafe {
            ptr::copy_nonoverlapping(old.slot(i), new.slot(i), CQE_OWNER_OFFSET);
            new.slot(i)
                .add(CQE_OWNER_OFFSET)
                .write_volatile(cqe_phase(i, new.log_depth));
        }
    }
}

/// The doorbell that arms `cqn` at `consumer_index`: its offset in the doorbell page and
/// its value.
pub(crate) fn arm_doorbell(cqn: u32, consumer_index: u32, solicited_only: bool) -> (usize, u32) {
    let offset = if solicited_only {
        DB_CQ_ARM_SOLICITED
    } else {
        DB_CQ_ARM
    };
    // CAST: the NIC takes the index modulo 2^16.
    (offset, db_value(cqn, consumer_index as u16))
}

/// Arms the CQ for its next (solicited) completion: one doorbell write.
///
/// # Safety
///
/// libibverbs calls this with a CQ `create_cq` returned.
pub(crate) unsafe extern "C" fn req_notify_cq(
    ibcq: *mut sys::ibv_cq,
    solicited_only: c_int,
) -> c_int {
    // SAFETY: `ibcq` is the first field of a live `Cq`; its context is one of ours, open
    // while the CQ exists, its doorbell page mapped.
    let (cq, db) = unsafe {
        let cq = &*ibcq.cast::<Cq>();
        (cq, DbPage::new((*Context::from_ibv(cq.ibv.context)).db))
    };
    match db {
        Some(db) => {
            arm(cq, &db, solicited_only != 0);
            0
        }
        None => libc::EINVAL,
    }
}

/// Arms `cq` at its consumer index, under its lock (so the index is the one the last
/// poll published).
pub(crate) fn arm(cq: &Cq, db: &impl Doorbell, solicited_only: bool) {
    let st = cq.state.lock();
    let (offset, value) = arm_doorbell(cq.cqn, st.consumer_index, solicited_only);
    udma_to_device_barrier();
    db.ring(offset, value);
}

/// Polls up to `num_entries` completions into `wc`: their count, or a negative errno
/// (`-EINVAL` for a negative count or a null array; see [`poll`]).
///
/// # Safety
///
/// libibverbs calls this with a CQ `create_cq` returned and `wc` valid for
/// `num_entries` writes.
pub(crate) unsafe extern "C" fn poll_cq(
    ibcq: *mut sys::ibv_cq,
    num_entries: c_int,
    wc: *mut sys::ibv_wc,
) -> c_int {
    let Ok(n) = usize::try_from(num_entries) else {
        return -libc::EINVAL;
    };
    if n == 0 {
        return 0;
    }
    if wc.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: `ibcq` is the first field of a live `Cq` of an open context of ours; `wc`
    // is valid for `n` writes (contract), seen as possibly uninitialised.
    unsafe {
        let cq = &*ibcq.cast::<Cq>();
        let ctx = Context::from_ibv(cq.ibv.context);
        let wc = core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<sys::ibv_wc>>(), n);
        poll(cq, &(*ctx).qps, wc)
    }
}

/// The next CQE of `ring` at consumer index `ci`, if the NIC has written it: the owner
/// byte first, then (after [`udma_from_device_barrier`]) the rest.
pub(crate) fn next_cqe(ring: &CqRing, ci: u32) -> Option<Cqe> {
    let slot = ring.slot(ci);
    // SAFETY: a slot of the ring ([`CqRing::slot`]); the NIC writes it concurrently, so it
    // is read volatile, the owner byte alone first.
    let owner = unsafe { slot.add(CQE_OWNER_OFFSET).read_volatile() };
    if owner & 1 != cqe_phase(ci, ring.log_depth) {
        return None;
    }
    udma_from_device_barrier();
    // SAFETY: as above; the NIC wrote these bytes before the owner byte and does not
    // write the slot again until the consumer index passes it.
    let body = unsafe { slot.cast::<[u8; CQE_OWNER_OFFSET]>().read_volatile() };
    Cqe::decode(&body)
}

/// Publishes `ci` in `cq`'s doorbell record, after the CQEs before it were read.
pub(crate) fn publish(cq: &Cq, ci: u32) {
    // The CQEs are read before the NIC may overwrite their slots.
    udma_to_device_barrier();
    // SAFETY: the record is 8 bytes, 8-byte aligned, ours; the NIC reads it.
    unsafe { cq.record.as_ptr().cast::<u32>().write_volatile(ci.to_le()) };
}

/// Drops every CQE of QP `qpn` not yet polled from `cq` (whose lock `st` is), as mlx5's
/// `__mlx5_cq_clean`: after DESTROY_QP or a move to RESET the NIC writes no more of them,
/// and those left would name a QP that is gone (or a new one with the same number). The
/// later CQEs move up over them, each into a slot whose owner byte already says "new";
/// the consumer index then skips the freed slots. The receive CQEs of a QP on `srq` give
/// their SRQ slots back, as mlx5's do. Returns how many were dropped.
pub(crate) fn clean(cq: &Cq, st: &mut CqState, qpn: u32, srq: Option<&Srq>) -> u32 {
    let ring = &st.ring;
    let depth = ring.depth();
    let ci = st.consumer_index;
    let mut pi = ci;
    while pi.wrapping_sub(ci) < depth && next_cqe(ring, pi).is_some() {
        pi = pi.wrapping_add(1);
    }
    let mut freed = 0u32;
    let mut i = pi;
    while i != ci {
        i = i.wrapping_sub(1);
        match next_cqe(ring, i) {
            Some(cqe) if cqe.qpn == qpn => {
                if let Some(s) = srq.filter(|_| cqe.flags & CQE_FLAG_RECV != 0) {
                    lock(&s.ring).retire(cqe.wqe_index);
                }
                freed += 1;
            }
            Some(_) if freed > 0 => {
                // SAFETY: both slots are in [ci, pi): written by the NIC, which writes
                // neither again before the consumer index passes them; the destination's
                // owner byte (not copied) is already that of a new CQE at its index.
                unsafe {
                    ptr::copy_nonoverlapping(
                        ring.slot(i),
                        ring.slot(i.wrapping_add(freed)),
                        CQE_OWNER_OFFSET,
                    )
                };
            }
            _ => {}
        }
    }
    if freed > 0 {
        st.consumer_index = ci.wrapping_add(freed);
        publish(cq, st.consumer_index);
        st.published = st.consumer_index;
    }
    freed
}

/// The work completion for `cqe`, retiring its WQE(s) in the QP it names: on the SQ
/// every WQE up to `wqe_index` (the unsignaled ones before it), on the RQ that one, which
/// must be the oldest (receives complete in order), on the QP's SRQ that slot (given back).
/// `EIO` if no QP of `cq` in `qps` has that number, or it has no such outstanding WQE.
///
/// The opcode and status are the CQE's (libibverbs' values: `BIND_MW` and `LOCAL_INV`
/// among them). `imm` is immediate data (`IBV_WC_WITH_IMM`: the 4 bytes as sent) or, for a
/// SEND with invalidate (`IBV_WC_WITH_INV`), the rkey the responder invalidated, a number
/// (`invalidated_rkey`, the same union); a CQE that says both (the NIC never writes one) is
/// taken as an invalidation.
pub(crate) fn complete(cq: &Cq, qps: &QpTable, cqe: &Cqe) -> Result<sys::ibv_wc, c_int> {
    let qp = qps.get(cqe.qpn).ok_or(libc::EIO)?;
    // SAFETY: a QP leaves the table only under the locks of its CQs (`qp::clean_cqs`); the
    // caller holds `cq`'s, and the QP is used only once it is known to be one of `cq`'s
    // (the NIC writes a QP's CQEs to its own CQs only).
    let qp: &Qp = unsafe { qp.as_ref() };
    let me = ptr::addr_of!(cq.ibv).cast_mut().cast::<sys::ibv_cq>();
    let recv = cqe.flags & CQE_FLAG_RECV != 0;
    let base = qp.base();
    let cq_of_qp = if recv { base.recv_cq } else { base.send_cq };
    if cq_of_qp != me {
        return Err(libc::EIO);
    }
    let wr_id = match (recv, &qp.srq, &qp.rq) {
        (false, _, _) => lock(&qp.sq).retire_through(cqe.wqe_index),
        (true, Some(srq), _) => lock(&srq.get().ring).retire(cqe.wqe_index),
        (true, None, Some(rq)) => lock(rq).retire_next(cqe.wqe_index),
        (true, None, None) => None,
    }
    .ok_or(libc::EIO)?;
    let inv = cqe.flags & CQE_FLAG_INV != 0;
    let imm = !inv && cqe.flags & CQE_FLAG_IMM != 0;
    let mut wc_flags = 0;
    if imm {
        wc_flags |= sys::ibv_wc_flags_IBV_WC_WITH_IMM;
    }
    if inv {
        wc_flags |= sys::ibv_wc_flags_IBV_WC_WITH_INV;
    }
    if cqe.flags & CQE_FLAG_GRH != 0 {
        wc_flags |= sys::ibv_wc_flags_IBV_WC_GRH;
    }
    let mut wc = sys::ibv_wc {
        wr_id,
        status: u32::from(cqe.status),
        opcode: u32::from(cqe.opcode),
        vendor_err: u32::from(cqe.vendor_err),
        byte_len: cqe.byte_len,
        qp_num: cqe.qpn,
        src_qp: cqe.src_qp,
        wc_flags,
        // UD: the sender's LID (0 otherwise); SL, path bits and PKey index are 0 on this
        // port.
        slid: cqe.slid,
        ..Default::default()
    };
    if imm {
        // The 4 bytes as the CQE holds them (network order), not swapped.
        wc.__bindgen_anon_1.imm_data = u32::from_ne_bytes(cqe.imm.to_le_bytes());
    }
    if inv {
        // The rkey itself (`defs/mw.rs`: the CQE holds it in host order).
        wc.__bindgen_anon_1.invalidated_rkey = cqe.imm;
    }
    Ok(wc)
}

/// `poll_cq`'s logic: up to `wc.len()` new CQEs of `cq`, each filled into `wc`, then the
/// consumer index published in the CQ's doorbell record. Returns the count. A CQE that
/// names no QP of this CQ or no outstanding WQE is consumed and counted
/// ([`CqState::bad_cqes`]) and makes this poll return `-EIO` if it is the first; after
/// good ones the poll stops before it (the next poll reports it).
pub(crate) fn poll(cq: &Cq, qps: &QpTable, wc: &mut [MaybeUninit<sys::ibv_wc>]) -> c_int {
    let mut st = cq.state.lock();
    let start = st.consumer_index;
    let mut n: c_int = 0;
    let mut result = None;
    for out in wc.iter_mut() {
        let Some(cqe) = next_cqe(&st.ring, st.consumer_index) else {
            break;
        };
        match complete(cq, qps, &cqe) {
            Ok(w) => {
                out.write(w);
                n += 1;
            }
            Err(e) if n == 0 => {
                st.bad_cqes += 1;
                result = Some(-e);
            }
            Err(_) => break,
        }
        st.consumer_index = st.consumer_index.wrapping_add(1);
        if result.is_some() {
            break;
        }
    }
    if st.consumer_index != start {
        publish(cq, st.consumer_index);
        st.published = st.consumer_index;
    }
    result.unwrap_or(n)
}

#[cfg(test)]
#[path = "tests/cq.rs"]
mod tests;
