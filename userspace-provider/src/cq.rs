//! Completion queues: CREATE_CQ with the ring and doorbell record the provider allocates
//! (ordma's driver data), DESTROY_CQ, arming (`req_notify_cq`, a doorbell write) and
//! polling (`poll_cq`), both without a system call.

use core::ffi::c_int;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{self, null_mut};
use std::sync::Mutex;

use ordma_hw::{
    cqe_phase, db_value, Cqe, CQE_FLAG_IMM, CQE_FLAG_RECV, CQE_LOG_SIZE_MIN, CQE_OWNER_OFFSET,
    CQ_DB_RECORD_SIZE, DB_CQ_ARM, DB_CQ_ARM_SOLICITED, MAX_QUEUE_LOG_DEPTH,
};

use crate::barrier::{udma_from_device_barrier, udma_to_device_barrier};
use crate::context::{Context, DbPage, Doorbell, QpTable};
use crate::dma::{log2_ceil, DmaMem, RING_ALIGN};
use crate::qp::Qp;
use crate::wq::lock;
use crate::{abi, set_errno, sys};

/// A CQ: libibverbs' part first, then the NIC's number and the memory it writes.
#[repr(C)]
pub(crate) struct Cq {
    pub(crate) ibv: sys::ibv_cq,
    /// The NIC's CQ number, for the CQ's doorbells.
    pub(crate) cqn: u32,
    /// log2 of the ring's CQEs.
    pub(crate) log_depth: u8,
    /// The CQ's lock and what it guards: `poll_cq`, the arm doorbell and a QP's removal
    /// from the context's table (`qp::destroy_qp`) take it.
    pub(crate) state: Mutex<CqState>,
    /// The ring, `2^log_depth` CQEs of `2^CQE_LOG_SIZE_MIN` bytes.
    pub(crate) ring: DmaMem,
    /// The doorbell record (`consumer_index` u32 @0), which the NIC reads.
    pub(crate) record: DmaMem,
}

/// What a CQ's lock guards.
#[derive(Debug, Default)]
pub(crate) struct CqState {
    /// CQEs consumed, free-running.
    pub(crate) consumer_index: u32,
    /// CQEs that named no QP of this CQ, or no outstanding WQE of it: consumed and
    /// counted, each an error to one `poll_cq`.
    pub(crate) bad_cqes: u64,
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
fn new_cq(cqe: c_int) -> Result<Box<Cq>, c_int> {
    let log_depth = cq_log_depth(cqe)?;
    let ring = DmaMem::ring(log_depth, CQE_LOG_SIZE_MIN)?;
    // CAST: 8 bytes.
    let record = DmaMem::zeroed(CQ_DB_RECORD_SIZE as usize, CQ_DB_RECORD_SIZE as usize)?;
    debug_assert_eq!(ring.addr() % RING_ALIGN as u64, 0);
    Ok(Box::new(Cq {
        ibv: sys::ibv_cq::default(),
        cqn: 0,
        log_depth,
        state: Mutex::new(CqState::default()),
        ring,
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
    cmd.drv.log_depth = cq.log_depth;
    cmd.drv.log_cqe_size = CQE_LOG_SIZE_MIN;
    cmd.drv.buf_addr = cq.ring.addr();
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
            ptr::addr_of_mut!((*cq).ibv),
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
        Ok(ptr::addr_of_mut!((*cq).ibv))
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
    let st = lock(&cq.state);
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

/// The next CQE of `cq` at consumer index `ci`, if the NIC has written it: the owner
/// byte first, then (after [`udma_from_device_barrier`]) the rest.
fn next_cqe(cq: &Cq, ci: u32) -> Option<Cqe> {
    let mask = (1u32 << cq.log_depth) - 1;
    // CAST: below the depth, at most 2^15.
    let off = ((ci & mask) as usize) << CQE_LOG_SIZE_MIN;
    // SAFETY: the ring holds `2^log_depth` CQEs of `2^CQE_LOG_SIZE_MIN` bytes and the
    // slot is one of them; the NIC writes it concurrently, so it is read volatile, the
    // owner byte alone first.
    let owner = unsafe { cq.ring.as_ptr().add(off + CQE_OWNER_OFFSET).read_volatile() };
    if owner & 1 != cqe_phase(ci, cq.log_depth) {
        return None;
    }
    udma_from_device_barrier();
    // SAFETY: as above; the NIC wrote these bytes before the owner byte and does not
    // write the slot again until the consumer index passes it.
    let body = unsafe {
        cq.ring
            .as_ptr()
            .add(off)
            .cast::<[u8; CQE_OWNER_OFFSET]>()
            .read_volatile()
    };
    Cqe::decode(&body)
}

/// Publishes `ci` in `cq`'s doorbell record, after the CQEs before it were read.
fn publish(cq: &Cq, ci: u32) {
    // The CQEs are read before the NIC may overwrite their slots.
    udma_to_device_barrier();
    // SAFETY: the record is 8 bytes, 8-byte aligned, ours; the NIC reads it.
    unsafe { cq.record.as_ptr().cast::<u32>().write_volatile(ci.to_le()) };
}

/// Drops every CQE of QP `qpn` not yet polled from `cq` (whose lock `st` is), as mlx5's
/// `__mlx5_cq_clean`: after DESTROY_QP or a move to RESET the NIC writes no more of them,
/// and those left would name a QP that is gone (or a new one with the same number). The
/// later CQEs move up over them, each into a slot whose owner byte already says "new";
/// the consumer index then skips the freed slots. Returns how many were dropped.
pub(crate) fn clean(cq: &Cq, st: &mut CqState, qpn: u32) -> u32 {
    let depth = 1u32 << cq.log_depth;
    let ci = st.consumer_index;
    let mut pi = ci;
    while pi.wrapping_sub(ci) < depth && next_cqe(cq, pi).is_some() {
        pi = pi.wrapping_add(1);
    }
    let slot = |i: u32| {
        // SAFETY: a slot of the ring (below `depth`).
        unsafe {
            cq.ring
                .as_ptr()
                .add(((i & (depth - 1)) as usize) << CQE_LOG_SIZE_MIN)
        }
    };
    let mut freed = 0u32;
    let mut i = pi;
    while i != ci {
        i = i.wrapping_sub(1);
        match next_cqe(cq, i) {
            Some(cqe) if cqe.qpn == qpn => freed += 1,
            Some(_) if freed > 0 => {
                // SAFETY: both slots are in [ci, pi): written by the NIC, which writes
                // neither again before the consumer index passes them; the destination's
                // owner byte (not copied) is already that of a new CQE at its index.
                unsafe {
                    ptr::copy_nonoverlapping(slot(i), slot(i.wrapping_add(freed)), CQE_OWNER_OFFSET)
                };
            }
            _ => {}
        }
    }
    if freed > 0 {
        st.consumer_index = ci.wrapping_add(freed);
        publish(cq, st.consumer_index);
    }
    freed
}

/// The work completion for `cqe`, retiring its WQE(s) in the QP it names: on the SQ
/// every WQE up to `wqe_index` (the unsignaled ones before it), on the RQ that one, which
/// must be the oldest (receives complete in order). `EIO` if no QP of `cq` in `qps` has
/// that number, or it has no such outstanding WQE.
fn complete(cq: &Cq, qps: &QpTable, cqe: &Cqe) -> Result<sys::ibv_wc, c_int> {
    let qp = qps.get(cqe.qpn).ok_or(libc::EIO)?;
    // SAFETY: a QP leaves the table only under the locks of its CQs (`qp::clean_cqs`); the
    // caller holds `cq`'s, and the QP is used only once it is known to be one of `cq`'s
    // (the NIC writes a QP's CQEs to its own CQs only).
    let qp: &Qp = unsafe { qp.as_ref() };
    let me = ptr::addr_of!(cq.ibv).cast_mut();
    let recv = cqe.flags & CQE_FLAG_RECV != 0;
    let (cq_of_qp, wq) = if recv {
        (qp.ibv.recv_cq, qp.rq.as_ref().ok_or(libc::EIO)?)
    } else {
        (qp.ibv.send_cq, &qp.sq)
    };
    if cq_of_qp != me {
        return Err(libc::EIO);
    }
    let wr_id = if recv {
        lock(wq).retire_next(cqe.wqe_index)
    } else {
        lock(wq).retire_through(cqe.wqe_index)
    }
    .ok_or(libc::EIO)?;
    let imm = cqe.flags & CQE_FLAG_IMM != 0;
    let mut wc = sys::ibv_wc {
        wr_id,
        status: u32::from(cqe.status),
        opcode: u32::from(cqe.opcode),
        vendor_err: u32::from(cqe.vendor_err),
        byte_len: cqe.byte_len,
        qp_num: cqe.qpn,
        src_qp: cqe.src_qp,
        wc_flags: if imm {
            sys::ibv_wc_flags_IBV_WC_WITH_IMM
        } else {
            0
        },
        ..Default::default()
    };
    if imm {
        // The 4 bytes as the CQE holds them (network order), not swapped.
        wc.__bindgen_anon_1.imm_data = u32::from_ne_bytes(cqe.imm.to_le_bytes());
    }
    Ok(wc)
}

/// `poll_cq`'s logic: up to `wc.len()` new CQEs of `cq`, each filled into `wc`, then the
/// consumer index published in the CQ's doorbell record. Returns the count. A CQE that
/// names no QP of this CQ or no outstanding WQE is consumed and counted
/// ([`CqState::bad_cqes`]) and makes this poll return `-EIO` if it is the first; after
/// good ones the poll stops before it (the next poll reports it).
pub(crate) fn poll(cq: &Cq, qps: &QpTable, wc: &mut [MaybeUninit<sys::ibv_wc>]) -> c_int {
    let mut st = lock(&cq.state);
    let start = st.consumer_index;
    let mut n: c_int = 0;
    let mut result = None;
    for out in wc.iter_mut() {
        let Some(cqe) = next_cqe(cq, st.consumer_index) else {
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
    }
    result.unwrap_or(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn driver_data_follows_the_core_structs_without_padding() {
        assert_eq!(offset_of!(CreateCqCmd, drv), size_of::<abi::IbvCreateCq>());
        assert_eq!(offset_of!(CreateCqCmd, drv), 40);
        assert_eq!(size_of::<CreateCqCmd>(), 40 + 24);
        assert_eq!(
            offset_of!(CreateCqResp, drv),
            size_of::<sys::ib_uverbs_create_cq_resp>()
        );
        assert_eq!(offset_of!(CreateCqResp, drv), 8);
        assert_eq!(size_of::<CreateCqResp>(), 8 + 8);
        assert_eq!(offset_of!(Cq, ibv), 0);
    }

    #[test]
    fn depth_is_a_power_of_two_of_at_least_two() {
        assert_eq!(cq_log_depth(1), Ok(1));
        assert_eq!(cq_log_depth(2), Ok(1));
        assert_eq!(cq_log_depth(3), Ok(2));
        assert_eq!(cq_log_depth(100), Ok(7));
        assert_eq!(cq_log_depth(1 << 15), Ok(15));
        assert_eq!(cq_log_depth(0), Err(libc::EINVAL));
        assert_eq!(cq_log_depth(-1), Err(libc::EINVAL));
        assert_eq!(cq_log_depth((1 << 15) + 1), Err(libc::EINVAL));
        assert_eq!(cq_log_depth(c_int::MAX), Err(libc::EINVAL));
    }

    use crate::wq::testing::{self, cap, chain_recv, chain_send, send_wr, sge, RecordingDb};
    use ordma_hw::{CQE_FLAG_SOLICITED, WC_RDMA_WRITE, WC_RECV, WC_REM_ACCESS_ERR, WC_SEND};

    const RTS: u32 = sys::ibv_qp_state_IBV_QPS_RTS;
    const SIGNALED: u32 = sys::ibv_send_flags_IBV_SEND_SIGNALED;

    /// Writes `cqe` at producer index `pi` of `cq`'s ring as the NIC does: the body, then
    /// the owner byte with the phase of that pass.
    fn nic_write(cq: &Cq, pi: u32, cqe: &Cqe) {
        let off = ((pi & ((1 << cq.log_depth) - 1)) as usize) << CQE_LOG_SIZE_MIN;
        let body = cqe.encode();
        // SAFETY: a slot of the test's ring.
        unsafe {
            ptr::copy_nonoverlapping(body.as_ptr(), cq.ring.as_ptr().add(off), body.len());
            cq.ring
                .as_ptr()
                .add(off + CQE_OWNER_OFFSET)
                .write_volatile(cqe_phase(pi, cq.log_depth));
        }
    }

    /// The consumer index in `cq`'s doorbell record.
    fn record(cq: &Cq) -> u32 {
        // SAFETY: the record is 8 bytes, aligned, the test's.
        u32::from_le(unsafe { cq.record.as_ptr().cast::<u32>().read_volatile() })
    }

    /// Polls up to `n`: the result and the completions written.
    fn poll_n(cq: &Cq, qps: &QpTable, n: usize) -> (c_int, Vec<sys::ibv_wc>) {
        let mut wc = vec![MaybeUninit::<sys::ibv_wc>::uninit(); n];
        let r = poll(cq, qps, &mut wc);
        let got = wc
            .into_iter()
            .take(usize::try_from(r).unwrap_or(0))
            // SAFETY: `poll` wrote the first `r`.
            .map(|w| unsafe { w.assume_init() })
            .collect();
        (r, got)
    }

    /// A CQ, a QP (QPN `qpn`) with both queues on it, in RTS, and a table that has it.
    fn setup(cqe: c_int, qpn: u32) -> (Box<Cq>, Box<Qp>, QpTable) {
        let mut cq = new_cq(cqe).expect("a CQ");
        cq.cqn = 5;
        let mut qp = testing::qp(cap(8, 1, 0, 4, 1), false, RTS, qpn);
        qp.ibv.send_cq = ptr::addr_of_mut!(cq.ibv);
        qp.ibv.recv_cq = ptr::addr_of_mut!(cq.ibv);
        let qps = QpTable::new();
        assert_eq!(qps.insert(qpn, ptr::addr_of!(*qp).cast_mut()), Ok(()));
        (cq, qp, qps)
    }

    fn post_sends(qp: &Qp, ids: &[(u64, u32)]) {
        let mut s = [sge(0x10, 4, 1)];
        let mut wrs: Vec<_> = ids
            .iter()
            .map(|&(id, f)| send_wr(id, sys::ibv_wr_opcode_IBV_WR_SEND, f, &mut s))
            .collect();
        assert_eq!(
            testing::post_send(qp, &RecordingDb::default(), chain_send(&mut wrs)),
            Ok(())
        );
    }

    fn send_cqe(qpn: u32, wqe_index: u16) -> Cqe {
        Cqe {
            wqe_index,
            qpn,
            opcode: WC_SEND,
            ..Default::default()
        }
    }

    #[test]
    fn poll_maps_wr_ids_and_retires_unsignaled_sends() {
        let (cq, qp, qps) = setup(8, 12);
        // Nothing written yet: a zeroed ring has no CQE of phase 1.
        assert_eq!(poll_n(&cq, &qps, 4).0, 0);
        post_sends(&qp, &[(100, 0), (101, SIGNALED), (102, SIGNALED)]);
        let mut s = [sge(0x20, 64, 2)];
        let mut rwrs = [
            sys::ibv_recv_wr {
                wr_id: 200,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
            sys::ibv_recv_wr {
                wr_id: 201,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
        ];
        assert_eq!(
            testing::post_recv(&qp, &RecordingDb::default(), chain_recv(&mut rwrs)),
            Ok(())
        );
        nic_write(
            &cq,
            0,
            &Cqe {
                byte_len: 4,
                ..send_cqe(12, 1)
            },
        );
        nic_write(
            &cq,
            1,
            &Cqe {
                wqe_index: 0,
                opcode: WC_RECV,
                qpn: 12,
                byte_len: 77,
                imm: u32::from_le_bytes([1, 2, 3, 4]),
                flags: CQE_FLAG_RECV | CQE_FLAG_IMM | CQE_FLAG_SOLICITED,
                src_qp: 33,
                ..Default::default()
            },
        );
        nic_write(
            &cq,
            2,
            &Cqe {
                status: WC_REM_ACCESS_ERR,
                opcode: WC_RDMA_WRITE,
                vendor_err: 7,
                ..send_cqe(12, 2)
            },
        );
        let (r, wc) = poll_n(&cq, &qps, 2);
        assert_eq!(r, 2);
        assert_eq!(
            (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len),
            (101, 0, 0, 4)
        );
        assert_eq!((wc[0].qp_num, wc[0].wc_flags), (12, 0));
        // 100 (unsignaled) and 101 retired together.
        assert_eq!(lock(&qp.sq).outstanding(), 1);
        assert_eq!(
            (wc[1].wr_id, wc[1].opcode, wc[1].byte_len, wc[1].src_qp),
            (200, 128, 77, 33)
        );
        assert_eq!(wc[1].wc_flags, sys::ibv_wc_flags_IBV_WC_WITH_IMM);
        // SAFETY: a u32 either way.
        assert_eq!(
            unsafe { wc[1].__bindgen_anon_1.imm_data }.to_ne_bytes(),
            [1, 2, 3, 4]
        );
        assert_eq!(qp.rq.as_ref().map(|rq| lock(rq).outstanding()), Some(1));
        assert_eq!(record(&cq), 2);
        let (r, wc) = poll_n(&cq, &qps, 4);
        assert_eq!(r, 1);
        assert_eq!(
            (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].vendor_err),
            (102, 10, 1, 7)
        );
        assert_eq!(lock(&qp.sq).outstanding(), 0);
        assert_eq!(record(&cq), 3);
        assert_eq!(poll_n(&cq, &qps, 4).0, 0);
        assert_eq!(record(&cq), 3);
        assert_eq!(lock(&cq.state).bad_cqes, 0);
    }

    #[test]
    fn poll_follows_the_phase_across_ring_wraps() {
        // Two CQEs: the phase flips every second one.
        let (cq, qp, qps) = setup(2, 3);
        let db = RecordingDb::default();
        let mut id = 0u64;
        let mut ci = 0u32;
        for round in 0..6u32 {
            // One or two CQEs per round.
            let n = 1 + round % 2;
            for _ in 0..n {
                post_sends(&qp, &[(id, SIGNALED)]);
                // CAST: small.
                nic_write(&cq, id as u32, &send_cqe(3, id as u16));
                id += 1;
            }
            let (r, wc) = poll_n(&cq, &qps, 8);
            assert_eq!(r, n as c_int, "round {round}");
            for (k, w) in wc.iter().enumerate() {
                assert_eq!(w.wr_id, u64::from(ci) + k as u64);
            }
            ci += n;
            assert_eq!(record(&cq), ci);
            // The slots now hold the previous pass's phase: nothing new.
            assert_eq!(poll_n(&cq, &qps, 8).0, 0, "round {round}");
            arm(&cq, &db, round % 2 == 1);
        }
        let arms = db.take();
        assert_eq!(arms.len(), 6);
        assert_eq!(arms[0], (DB_CQ_ARM, (5 << 16) | 1));
        assert_eq!(arms[5], (DB_CQ_ARM_SOLICITED, (5 << 16) | 9));
    }

    #[test]
    fn a_cqe_naming_no_qp_of_the_cq_is_an_error_counted_once() {
        let (cq, qp, qps) = setup(8, 4);
        post_sends(&qp, &[(1, SIGNALED), (2, SIGNALED)]);
        nic_write(&cq, 0, &send_cqe(4, 0));
        // An unknown QPN, a QPN beyond 16 bits, a WQE that is not outstanding.
        nic_write(&cq, 1, &send_cqe(77, 0));
        nic_write(&cq, 2, &send_cqe(0x1_0004, 1));
        nic_write(&cq, 3, &send_cqe(4, 5));
        // The good one first; the poll stops before the bad one.
        let (r, wc) = poll_n(&cq, &qps, 8);
        assert_eq!((r, wc[0].wr_id), (1, 1));
        for bad in 1..=3 {
            assert_eq!(poll_n(&cq, &qps, 8).0, -libc::EIO);
            assert_eq!(lock(&cq.state).bad_cqes, bad);
            assert_eq!(record(&cq), 1 + bad as u32);
        }
        // A receive CQE that is not the oldest receive (none is posted here at all).
        nic_write(
            &cq,
            4,
            &Cqe {
                flags: CQE_FLAG_RECV,
                opcode: WC_RECV,
                ..send_cqe(4, 0)
            },
        );
        assert_eq!(poll_n(&cq, &qps, 8).0, -libc::EIO);
        let mut s = [sge(0x20, 64, 2)];
        let mut rwrs = [
            sys::ibv_recv_wr {
                wr_id: 30,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
            sys::ibv_recv_wr {
                wr_id: 31,
                sg_list: s.as_mut_ptr(),
                num_sge: 1,
                ..Default::default()
            },
        ];
        assert_eq!(
            testing::post_recv(&qp, &RecordingDb::default(), chain_recv(&mut rwrs)),
            Ok(())
        );
        nic_write(
            &cq,
            5,
            &Cqe {
                flags: CQE_FLAG_RECV,
                opcode: WC_RECV,
                ..send_cqe(4, 1)
            },
        );
        assert_eq!(
            poll_n(&cq, &qps, 8).0,
            -libc::EIO,
            "receives complete in order"
        );
        assert_eq!(lock(&cq.state).bad_cqes, 5);
        // A QP that is not on this CQ.
        let other = new_cq(2).expect("a CQ");
        nic_write(&other, 0, &send_cqe(4, 1));
        assert_eq!(poll_n(&other, &qps, 8).0, -libc::EIO);
        assert_eq!(lock(&qp.sq).outstanding(), 1, "untouched by the foreign CQ");
        nic_write(&cq, 6, &send_cqe(4, 1));
        nic_write(
            &cq,
            7,
            &Cqe {
                flags: CQE_FLAG_RECV,
                opcode: WC_RECV,
                ..send_cqe(4, 0)
            },
        );
        let (r, wc) = poll_n(&cq, &qps, 8);
        assert_eq!((r, wc[0].wr_id, wc[1].wr_id), (2, 2, 30));
        // A removed QP is no longer found.
        qps.remove(4, ptr::addr_of!(*qp).cast_mut());
        assert!(qps.get(4).is_none());
    }

    #[test]
    fn cleaning_drops_one_qp_s_cqes_and_keeps_the_others_in_order() {
        // Depth 4, shared by QPs 4 and 9.
        let (cq, a, qps) = setup(4, 4);
        let mut b = testing::qp(cap(8, 1, 0, 0, 0), false, RTS, 9);
        b.ibv.send_cq = a.ibv.send_cq;
        b.ibv.recv_cq = a.ibv.recv_cq;
        assert_eq!(qps.insert(9, ptr::addr_of!(*b).cast_mut()), Ok(()));
        // Three of B's first, polled: the next CQEs wrap around the ring.
        post_sends(&b, &[(90, SIGNALED), (91, SIGNALED), (92, SIGNALED)]);
        for i in 0..3u16 {
            nic_write(&cq, u32::from(i), &send_cqe(9, i));
        }
        assert_eq!(poll_n(&cq, &qps, 3).0, 3);
        post_sends(&a, &[(40, SIGNALED), (41, SIGNALED)]);
        post_sends(&b, &[(93, SIGNALED), (94, SIGNALED)]);
        nic_write(&cq, 3, &send_cqe(4, 0));
        nic_write(&cq, 4, &send_cqe(9, 3));
        nic_write(&cq, 5, &send_cqe(4, 1));
        nic_write(&cq, 6, &send_cqe(9, 4));
        assert_eq!(clean(&cq, &mut lock(&cq.state), 4), 2);
        assert_eq!(record(&cq), 5);
        let (r, wc) = poll_n(&cq, &qps, 8);
        assert_eq!((r, wc[0].wr_id, wc[1].wr_id), (2, 93, 94));
        assert_eq!(record(&cq), 7);
        // The ring goes on as before.
        post_sends(&b, &[(95, SIGNALED)]);
        nic_write(&cq, 7, &send_cqe(9, 5));
        assert_eq!(poll_n(&cq, &qps, 8).1.first().map(|w| w.wr_id), Some(95));
        assert_eq!(
            clean(&cq, &mut lock(&cq.state), 4),
            0,
            "nothing left to drop"
        );
        assert_eq!(lock(&cq.state).bad_cqes, 0);
    }

    /// Shares the test's objects (raw pointers inside) with its threads.
    struct Shared<T>(T);
    // SAFETY: the objects are used as the provider's contract lets threads use them (a
    // lock per queue and per CQ); the test joins every thread before dropping them.
    unsafe impl<T> Sync for Shared<T> {}

    /// A doorbell page a "NIC" thread reads: the last SQ doorbell value.
    #[derive(Default)]
    struct LastSqDb(core::sync::atomic::AtomicU32);

    impl Doorbell for LastSqDb {
        fn ring(&self, offset: usize, value: u32) {
            assert_eq!(offset, ordma_hw::DB_SQ);
            self.0.store(value, core::sync::atomic::Ordering::Release);
        }
    }

    #[test]
    fn two_posters_a_nic_and_a_poller_run_at_once() {
        use core::sync::atomic::Ordering::Acquire;
        use std::time::{Duration, Instant};
        const PER_THREAD: u64 = 20_000;
        let (cq, qp, qps) = setup(8, 11);
        let db = LastSqDb::default();
        let sh = Shared((&*cq, &*qp, &qps, &db));
        let deadline = Instant::now() + Duration::from_secs(120);
        std::thread::scope(|t| {
            for thread in 0..2u64 {
                let sh = &sh;
                t.spawn(move || {
                    let (_, qp, _, db) = sh.0;
                    let mut s = [sge(0x10, 4, 1)];
                    let mut seq = 0;
                    while seq < PER_THREAD {
                        let id = (thread << 32) | seq;
                        let mut wr = [send_wr(
                            id,
                            sys::ibv_wr_opcode_IBV_WR_SEND,
                            SIGNALED,
                            &mut s,
                        )];
                        // SAFETY: a valid one-WR chain.
                        match unsafe { crate::wq::post_send_chain(qp, db, chain_send(&mut wr)) } {
                            Ok(()) => seq += 1,
                            Err((e, _)) => {
                                assert_eq!(e, libc::ENOMEM);
                                assert!(Instant::now() < deadline, "posting stalled");
                                std::thread::yield_now();
                            }
                        }
                    }
                });
            }
            // The NIC: one CQE per WQE the doorbell names, never past the consumer index
            // in the doorbell record.
            let sh_nic = &sh;
            t.spawn(move || {
                let (cq, _, _, db) = sh_nic.0;
                let (mut wqe, mut pi) = (0u32, 0u32);
                while u64::from(wqe) < 2 * PER_THREAD {
                    // CAST: the low 16 bits are the producer index.
                    let produced = db.0.load(Acquire) as u16;
                    // CAST: as the NIC counts.
                    while wqe as u16 != produced {
                        if pi.wrapping_sub(record(cq)) >= 1 << cq.log_depth {
                            assert!(Instant::now() < deadline, "the CQ stayed full");
                            std::thread::yield_now();
                            continue;
                        }
                        // CAST: as above.
                        nic_write(cq, pi, &send_cqe(11, wqe as u16));
                        pi += 1;
                        wqe += 1;
                    }
                    std::thread::yield_now();
                }
            });
            // The poller: every wr_id once, each thread's in order.
            let (cq, _, qps, _) = sh.0;
            let mut next = [0u64; 2];
            while next[0] + next[1] < 2 * PER_THREAD {
                let (r, wc) = poll_n(cq, qps, 4);
                assert!(r >= 0, "poll_cq: {r}");
                for w in &wc {
                    assert_eq!(w.status, 0);
                    // CAST: the thread's number, 0 or 1.
                    let thread = (w.wr_id >> 32) as usize;
                    assert_eq!(w.wr_id & 0xffff_ffff, next[thread]);
                    next[thread] += 1;
                }
                assert!(Instant::now() < deadline, "polling stalled at {next:?}");
            }
        });
        assert_eq!(lock(&qp.sq).outstanding(), 0);
        assert_eq!(lock(&cq.state).bad_cqes, 0);
    }

    #[test]
    fn arming_writes_cqn_and_index_to_the_arm_doorbells() {
        assert_eq!(arm_doorbell(3, 0, false), (0x8, 3 << 16));
        assert_eq!(arm_doorbell(0xffff, 0x1_0005, true), (0xc, 0xffff_0005));
    }
}
