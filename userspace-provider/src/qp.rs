//! Queue pairs (RC): CREATE_QP with the send and receive rings the provider sizes and
//! allocates (ordma's driver data), MODIFY_QP, QUERY_QP and DESTROY_QP through the kernel.
//! Posting waits for the WQE formats (the data path): `post_send` and `post_recv` fail.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, null_mut};

use ordma_hw::{RQ_WQE_BASE, SQ_WQE_BASE, WQE_LOG_SIZE_MAX, WQE_LOG_SIZE_MIN, WQE_SGE_SIZE};

use crate::dma::{log2_ceil, DmaMem};
use crate::{abi, set_errno, sys};

/// The shape of one work queue: `2^log_depth` WQEs of `2^log_wqe_size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueShape {
    pub(crate) log_depth: u8,
    pub(crate) log_wqe_size: u8,
}

/// A work queue's ring and shape.
pub(crate) struct WorkQueue {
    pub(crate) shape: QueueShape,
    pub(crate) ring: DmaMem,
}

impl WorkQueue {
    fn new(shape: QueueShape) -> Result<Self, c_int> {
        Ok(Self {
            shape,
            ring: DmaMem::ring(shape.log_depth, shape.log_wqe_size)?,
        })
    }
}

/// A QP: libibverbs' part first, then the NIC's number and the rings.
#[repr(C)]
pub(crate) struct Qp {
    pub(crate) ibv: sys::ibv_qp,
    /// The NIC's QP number, for the QP's doorbells.
    pub(crate) qpn: u32,
    pub(crate) sq: WorkQueue,
    /// None for a QP without a receive queue (`max_recv_wr` 0).
    pub(crate) rq: Option<WorkQueue>,
}

/// The request and response of CREATE_QP with ordma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateQpCmd {
    pub(crate) ibv: abi::IbvCreateQp,
    pub(crate) drv: sys::ordma_ibv_create_qp_cmd,
}
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateQpResp {
    pub(crate) ibv: sys::ib_uverbs_create_qp_resp,
    pub(crate) drv: sys::ordma_ibv_create_qp_resp,
}

/// The shape of a queue of `wr` WQEs of at least `wqe_bytes` bytes: a power of two of
/// WQEs (at least 1) and of bytes (64 to 1024). `EINVAL` beyond.
pub(crate) fn queue_shape(wr: u32, wqe_bytes: u64) -> Result<QueueShape, c_int> {
    let log_depth = log2_ceil(wr).ok_or(libc::EINVAL)?;
    let bytes = u32::try_from(wqe_bytes).map_err(|_| libc::EINVAL)?;
    let log_wqe_size = log2_ceil(bytes).ok_or(libc::EINVAL)?.max(WQE_LOG_SIZE_MIN);
    if log_wqe_size > WQE_LOG_SIZE_MAX {
        return Err(libc::EINVAL);
    }
    Ok(QueueShape {
        log_depth,
        log_wqe_size,
    })
}

/// The send queue for `cap`: a control and a remote-address segment, then the SGEs or
/// the inline data.
pub(crate) fn sq_shape(cap: &sys::ibv_qp_cap) -> Result<QueueShape, c_int> {
    let base = u64::from(SQ_WQE_BASE);
    let sges = base + u64::from(WQE_SGE_SIZE) * u64::from(cap.max_send_sge);
    let inline = base + u64::from(cap.max_inline_data);
    queue_shape(cap.max_send_wr, sges.max(inline))
}

/// The receive queue for `cap`, none when `max_recv_wr` is 0: a control segment, then the
/// SGEs.
pub(crate) fn rq_shape(cap: &sys::ibv_qp_cap) -> Result<Option<QueueShape>, c_int> {
    if cap.max_recv_wr == 0 {
        return Ok(None);
    }
    let bytes = u64::from(RQ_WQE_BASE) + u64::from(WQE_SGE_SIZE) * u64::from(cap.max_recv_sge);
    queue_shape(cap.max_recv_wr, bytes).map(Some)
}

/// # Safety
///
/// libibverbs calls this with one of our PDs and a valid `attr`.
pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
) -> *mut sys::ibv_qp {
    // SAFETY: `attr` is valid (contract).
    let r = new_qp(unsafe { &*attr }).and_then(|qp| {
        // SAFETY: as this function's contract.
        unsafe { register(pd, attr, qp) }
    });
    match r {
        Ok(qp) => qp,
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    }
}

/// A QP's rings for `attr`, not yet known to the kernel. Both CQs must be given
/// (libibverbs would dereference them).
fn new_qp(attr: &sys::ibv_qp_init_attr) -> Result<Box<Qp>, c_int> {
    if attr.send_cq.is_null() || attr.recv_cq.is_null() {
        return Err(libc::EINVAL);
    }
    let sq = WorkQueue::new(sq_shape(&attr.cap)?)?;
    let rq = rq_shape(&attr.cap)?.map(WorkQueue::new).transpose()?;
    Ok(Box::new(Qp {
        ibv: sys::ibv_qp::default(),
        qpn: 0,
        sq,
        rq,
    }))
}

/// ordma's CREATE_QP request for `qp`'s rings.
fn create_qp_cmd(qp: &Qp) -> CreateQpCmd {
    let mut cmd = CreateQpCmd::default();
    cmd.drv.sq_log_depth = qp.sq.shape.log_depth;
    cmd.drv.sq_log_wqe_size = qp.sq.shape.log_wqe_size;
    cmd.drv.sq_buf_addr = qp.sq.ring.addr();
    if let Some(rq) = &qp.rq {
        cmd.drv.rq_log_depth = rq.shape.log_depth;
        cmd.drv.rq_log_wqe_size = rq.shape.log_wqe_size;
        cmd.drv.rq_buf_addr = rq.ring.addr();
    }
    cmd
}

/// CREATE_QP for `qp`; on success the kernel holds its rings until DESTROY_QP, and
/// `attr`'s capabilities are the QP's (libibverbs copies them from the response).
///
/// # Safety
///
/// As [`create_qp`].
unsafe fn register(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
    qp: Box<Qp>,
) -> Result<*mut sys::ibv_qp, c_int> {
    let mut cmd = create_qp_cmd(&qp);
    let mut resp = CreateQpResp::default();
    let qp = Box::into_raw(qp);
    // SAFETY: `pd` and `attr` are valid (contract); `qp` is ours and stays where it is
    // (its address is the QP's user handle); the buffers are ours, their sizes theirs.
    let r = unsafe {
        abi::ibv_cmd_create_qp(
            pd,
            ptr::addr_of_mut!((*qp).ibv),
            attr,
            &mut cmd.ibv,
            size_of::<CreateQpCmd>(),
            &mut resp.ibv,
            size_of::<CreateQpResp>(),
        )
    };
    if r != 0 {
        // SAFETY: from `Box::into_raw` above; the kernel has not kept its rings.
        drop(unsafe { Box::from_raw(qp) });
        return Err(r);
    }
    // SAFETY: `qp` is ours.
    unsafe {
        (*qp).qpn = resp.drv.qpn;
        Ok(ptr::addr_of_mut!((*qp).ibv))
    }
}

/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned and a valid `attr`.
pub(crate) unsafe extern "C" fn modify_qp(
    ibqp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    let mut cmd = abi::IbvModifyQp::default();
    // SAFETY: pointers from libibverbs (contract) and our own command buffer.
    unsafe {
        abi::ibv_cmd_modify_qp(
            ibqp,
            attr,
            attr_mask,
            &mut cmd,
            size_of::<abi::IbvModifyQp>(),
        )
    }
}

/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned and valid `attr` and `init_attr`.
pub(crate) unsafe extern "C" fn query_qp(
    ibqp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut sys::ibv_qp_init_attr,
) -> c_int {
    let mut cmd = abi::IbvQueryQp::default();
    // SAFETY: pointers from libibverbs (contract) and our own command buffer.
    unsafe {
        abi::ibv_cmd_query_qp(
            ibqp,
            attr,
            attr_mask,
            init_attr,
            &mut cmd,
            size_of::<abi::IbvQueryQp>(),
        )
    }
}

/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned, no longer in use.
pub(crate) unsafe extern "C" fn destroy_qp(ibqp: *mut sys::ibv_qp) -> c_int {
    // SAFETY: `ibqp` is valid (contract).
    let r = unsafe { abi::ibv_cmd_destroy_qp(ibqp) };
    if r != 0 {
        // The QP still exists, and the kernel still holds its rings.
        return r;
    }
    // SAFETY: `ibqp` is the first field of a `Qp` from `Box::into_raw`; the kernel has let
    // go of its rings, and this is its last use.
    drop(unsafe { Box::from_raw(ibqp.cast::<Qp>()) });
    0
}

/// No send WQE format yet (the data path): nothing is posted.
///
/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned and a valid `bad_wr`.
pub(crate) unsafe extern "C" fn post_send(
    _ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad_wr: *mut *mut sys::ibv_send_wr,
) -> c_int {
    // SAFETY: `bad_wr` is valid for a write (contract).
    unsafe { *bad_wr = wr };
    libc::EOPNOTSUPP
}

/// No receive WQE format yet (the data path): nothing is posted.
///
/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned and a valid `bad_wr`.
pub(crate) unsafe extern "C" fn post_recv(
    _ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    // SAFETY: `bad_wr` is valid for a write (contract).
    unsafe { *bad_wr = wr };
    libc::EOPNOTSUPP
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    fn cap(
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

    fn shape(log_depth: u8, log_wqe_size: u8) -> QueueShape {
        QueueShape {
            log_depth,
            log_wqe_size,
        }
    }

    #[test]
    fn driver_data_follows_the_core_structs_without_padding() {
        assert_eq!(offset_of!(CreateQpCmd, drv), size_of::<abi::IbvCreateQp>());
        assert_eq!(offset_of!(CreateQpCmd, drv), 64);
        assert_eq!(size_of::<CreateQpCmd>(), 64 + 24);
        assert_eq!(
            offset_of!(CreateQpResp, drv),
            size_of::<sys::ib_uverbs_create_qp_resp>()
        );
        assert_eq!(offset_of!(CreateQpResp, drv), 32);
        assert_eq!(size_of::<CreateQpResp>(), 32 + 8);
        assert_eq!(offset_of!(Qp, ibv), 0);
    }

    #[test]
    fn send_queue_fits_sges_and_inline_data() {
        assert_eq!(sq_shape(&cap(0, 0, 0, 0, 0)), Ok(shape(0, 6)));
        assert_eq!(sq_shape(&cap(1, 1, 0, 0, 0)), Ok(shape(0, 6)));
        assert_eq!(sq_shape(&cap(64, 2, 0, 0, 0)), Ok(shape(6, 6)));
        assert_eq!(sq_shape(&cap(65, 3, 0, 0, 0)), Ok(shape(7, 7)));
        assert_eq!(sq_shape(&cap(4096, 16, 0, 0, 0)), Ok(shape(12, 9)));
        assert_eq!(sq_shape(&cap(1, 1, 64, 0, 0)), Ok(shape(0, 7)));
        assert_eq!(sq_shape(&cap(1, 1, 992, 0, 0)), Ok(shape(0, 10)));
        assert_eq!(sq_shape(&cap(1, 1, 993, 0, 0)), Err(libc::EINVAL));
        assert_eq!(sq_shape(&cap(1, 63, 0, 0, 0)), Err(libc::EINVAL));
        assert_eq!(sq_shape(&cap(1, u32::MAX, 0, 0, 0)), Err(libc::EINVAL));
        assert_eq!(sq_shape(&cap(u32::MAX, 1, 0, 0, 0)), Err(libc::EINVAL));
    }

    #[test]
    fn receive_queue_fits_sges_or_is_absent() {
        assert_eq!(rq_shape(&cap(1, 1, 0, 0, 4)), Ok(None));
        assert_eq!(rq_shape(&cap(1, 1, 0, 1, 1)), Ok(Some(shape(0, 6))));
        assert_eq!(rq_shape(&cap(1, 1, 0, 100, 3)), Ok(Some(shape(7, 6))));
        assert_eq!(rq_shape(&cap(1, 1, 0, 8, 4)), Ok(Some(shape(3, 7))));
        assert_eq!(rq_shape(&cap(1, 1, 0, 8, 16)), Ok(Some(shape(3, 9))));
        assert_eq!(rq_shape(&cap(1, 1, 0, 8, 64)), Err(libc::EINVAL));
    }

    #[test]
    fn the_request_names_the_rings() {
        let qp = new_qp(&sys::ibv_qp_init_attr {
            send_cq: ptr::NonNull::dangling().as_ptr(),
            recv_cq: ptr::NonNull::dangling().as_ptr(),
            cap: cap(64, 2, 0, 0, 0),
            ..Default::default()
        })
        .expect("a send-only QP");
        let cmd = create_qp_cmd(&qp);
        assert_eq!((cmd.drv.sq_log_depth, cmd.drv.sq_log_wqe_size), (6, 6));
        assert_eq!(cmd.drv.sq_buf_addr, qp.sq.ring.addr());
        assert_eq!(cmd.drv.sq_buf_addr % 4096, 0);
        assert_eq!(
            (
                cmd.drv.rq_log_depth,
                cmd.drv.rq_log_wqe_size,
                cmd.drv.rq_buf_addr
            ),
            (0, 0, 0)
        );
        assert_eq!(cmd.drv.comp_mask, 0);
        let no_cq = sys::ibv_qp_init_attr::default();
        assert_eq!(new_qp(&no_cq).err(), Some(libc::EINVAL));
    }
}
