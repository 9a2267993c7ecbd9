//! Completion queues: CREATE_CQ with the ring and doorbell record the provider allocates
//! (ordma's driver data), DESTROY_CQ, and arming (`req_notify_cq`, a doorbell write, no
//! system call). Polling waits for the CQE format (the data path): `poll_cq` fails.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, null_mut};

use ordma_hw::{
    db_value, CQE_LOG_SIZE_MIN, CQ_DB_RECORD_SIZE, DB_CQ_ARM, DB_CQ_ARM_SOLICITED,
    MAX_QUEUE_LOG_DEPTH,
};

use crate::barrier::{mmio_write32, udma_to_device_barrier};
use crate::context::Context;
use crate::dma::{log2_ceil, DmaMem, RING_ALIGN};
use crate::{abi, set_errno, sys};

/// A CQ: libibverbs' part first, then the NIC's number and the memory it writes.
#[repr(C)]
pub(crate) struct Cq {
    pub(crate) ibv: sys::ibv_cq,
    /// The NIC's CQ number, for the CQ's doorbells.
    pub(crate) cqn: u32,
    /// log2 of the ring's CQEs.
    pub(crate) log_depth: u8,
    /// CQEs consumed, free-running (nothing polls yet: 0). When `poll_cq` arrives, it and
    /// the arm doorbell that carries it go under the CQ's lock (rdma-core's providers
    /// ring doorbells inside the queue lock).
    pub(crate) consumer_index: u32,
    /// The ring, `2^log_depth` CQEs of `2^CQE_LOG_SIZE_MIN` bytes.
    pub(crate) ring: DmaMem,
    /// The doorbell record (`consumer_index` u32 @0), which the NIC reads.
    pub(crate) record: DmaMem,
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
        consumer_index: 0,
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
    let cq = ibcq.cast::<Cq>();
    // SAFETY: `ibcq` is the first field of a live `Cq`; its context is one of ours, open
    // while the CQ exists.
    let (db, (offset, value)) = unsafe {
        let ctx = Context::from_ibv((*cq).ibv.context);
        (
            (*ctx).db,
            arm_doorbell((*cq).cqn, (*cq).consumer_index, solicited_only != 0),
        )
    };
    udma_to_device_barrier();
    // SAFETY: `db` is the context's mapped doorbell page (4096 bytes, page aligned); the
    // arm doorbells are aligned 32-bit registers inside it.
    unsafe { mmio_write32(db.cast::<u8>().add(offset).cast::<u32>(), value) };
    0
}

/// No CQE format yet (it comes with the data path): a negative count, an error to
/// `ibv_poll_cq`'s caller (libibverbs' default would be a positive one, read as
/// completions).
///
/// # Safety
///
/// libibverbs calls this with a CQ `create_cq` returned.
pub(crate) unsafe extern "C" fn poll_cq(
    _ibcq: *mut sys::ibv_cq,
    _num_entries: c_int,
    _wc: *mut sys::ibv_wc,
) -> c_int {
    -libc::EOPNOTSUPP
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

    #[test]
    fn arming_writes_cqn_and_index_to_the_arm_doorbells() {
        assert_eq!(arm_doorbell(3, 0, false), (0x8, 3 << 16));
        assert_eq!(arm_doorbell(0xffff, 0x1_0005, true), (0xc, 0xffff_0005));
    }
}
