//! Queue pairs (RC, UC, UD): CREATE_QP with the send and receive rings the provider sizes
//! and allocates (ordma's driver data), for `ibv_create_qp` and `ibv_create_qp_ex` (whose
//! QPs have an `ibv_qp_ex`: the `ibv_wr_*` functions of `wr`), MODIFY_QP, QUERY_QP and
//! DESTROY_QP through the kernel; `post_send` and `post_recv` in user space (their logic
//! is in `wq`).

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, null_mut};
use core::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use ordma_hw::{
    sq_wqe_data, QP_ATTR_STATE, QP_TYPE_RC, QP_TYPE_UC, QP_TYPE_UD, RQ_WQE_BASE, WQE_LOG_SIZE_MAX,
    WQE_LOG_SIZE_MIN, WQE_SGE_SIZE,
};

use crate::context::{Context, DbPage};
use crate::cq::{self, Cq};
use crate::dma::log2_ceil;
use crate::srq::SrqRef;
use crate::wq::{
    lock, post_recv_chain, post_result, post_send_chain, ring_caps, QpCaps, SendQueue, WorkQueue,
};
use crate::{abi, set_errno, sys, wr};

/// The shape of one work queue: `2^log_depth` WQEs of `2^log_wqe_size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueShape {
    pub(crate) log_depth: u8,
    pub(crate) log_wqe_size: u8,
}

/// A QP: libibverbs' part first (driver.h's `verbs_qp`: the `ibv_qp`, in an `ibv_qp_ex`
/// that extended QPs use), then the NIC's number, the queues (each under its own lock, as
/// libibverbs lets threads post to the SQ and the RQ at once), what they take, and the
/// state the provider last set.
#[repr(C)]
pub(crate) struct Qp {
    pub(crate) ibv: abi::VerbsQp,
    /// The NIC's QP number, for the QP's doorbells.
    pub(crate) qpn: u32,
    pub(crate) sq: Mutex<SendQueue>,
    /// None for a QP without a receive queue (`max_recv_wr` 0, or on an SRQ).
    pub(crate) rq: Option<Mutex<WorkQueue>>,
    /// The SRQ it receives through instead, if any.
    pub(crate) srq: Option<SrqRef>,
    /// What posting enforces: what `ibv_create_qp` reported.
    pub(crate) caps: QpCaps,
    /// `enum ibv_qp_state` as the last successful `modify_qp` set it (RESET at create).
    pub(crate) state: AtomicU32,
}

impl Qp {
    /// libibverbs' `ibv_qp` of the QP.
    pub(crate) fn base(&self) -> &sys::ibv_qp {
        &self.ibv.qp_ex.qp_base
    }

    /// libibverbs' `ibv_qp` of `qp` (at its head).
    pub(crate) fn ibv_qp(qp: *mut Qp) -> *mut sys::ibv_qp {
        qp.cast()
    }

    /// The state the provider last set.
    pub(crate) fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }
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

/// The NIC's QP type of `t` (RC for the types the kernel refuses anyway).
pub(crate) fn hw_qp_type(t: sys::ibv_qp_type) -> u8 {
    match t {
        sys::ibv_qp_type_IBV_QPT_UC => QP_TYPE_UC,
        sys::ibv_qp_type_IBV_QPT_UD => QP_TYPE_UD,
        _ => QP_TYPE_RC,
    }
}

/// The send queue for `cap` on a QP of type `qp_type`: a control and a remote-address
/// segment (UD: and a datagram segment), then the SGEs or the inline data.
pub(crate) fn sq_shape(cap: &sys::ibv_qp_cap, qp_type: u8) -> Result<QueueShape, c_int> {
    let base = u64::from(sq_wqe_data(qp_type));
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
/// (libibverbs would dereference them). A QP on an SRQ has no receive ring (what `attr`
/// asks for one is ignored, as the kernel does).
pub(crate) fn new_qp(attr: &sys::ibv_qp_init_attr) -> Result<Box<Qp>, c_int> {
    if attr.send_cq.is_null() || attr.recv_cq.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: libibverbs' contract: `srq` is null or one of ours, which the kernel keeps
    // alive while the QP uses it.
    let srq = unsafe { SrqRef::new(attr.srq) };
    let qp_type = hw_qp_type(attr.qp_type);
    let sq_shape = sq_shape(&attr.cap, qp_type)?;
    let rq_shape = if srq.is_some() {
        None
    } else {
        rq_shape(&attr.cap)?
    };
    let sq = WorkQueue::new(sq_shape)?;
    let rq = rq_shape.map(WorkQueue::new).transpose()?;
    let caps = QpCaps {
        sig_all: attr.sq_sig_all != 0,
        uc: qp_type == QP_TYPE_UC,
        ud: qp_type == QP_TYPE_UD,
        ..ring_caps(&sq_shape, rq_shape.as_ref(), qp_type)
    };
    Ok(Box::new(Qp {
        ibv: abi::VerbsQp {
            qp_ex: sys::ibv_qp_ex::default(),
            comp_mask: 0,
            xrcd: null_mut(),
        },
        qpn: 0,
        sq: Mutex::new(SendQueue {
            wq: sq,
            batch: None,
        }),
        rq: rq.map(Mutex::new),
        srq,
        caps,
        state: AtomicU32::new(sys::ibv_qp_state_IBV_QPS_RESET),
    }))
}

/// What the QP takes: what the kernel reported in `cap` (libibverbs copied it from the
/// response) and the rings hold, the smaller of each (the queues' `max_*_wr` limits are
/// set here). `cap` is set to it, so what `ibv_create_qp` reports is what posting
/// enforces.
pub(crate) fn settle_caps(qp: &Qp, cap: &mut sys::ibv_qp_cap) -> QpCaps {
    let ring = qp.caps;
    let max_send_wr = lock(&qp.sq).set_limit(cap.max_send_wr);
    let max_recv_wr = qp
        .rq
        .as_ref()
        .map_or(0, |rq| lock(rq).set_limit(cap.max_recv_wr));
    let caps = QpCaps {
        max_send_sge: ring.max_send_sge.min(cap.max_send_sge),
        max_recv_sge: ring.max_recv_sge.min(cap.max_recv_sge),
        max_inline: ring.max_inline.min(cap.max_inline_data),
        sig_all: ring.sig_all,
        uc: ring.uc,
        ud: ring.ud,
    };
    *cap = sys::ibv_qp_cap {
        max_send_wr,
        max_recv_wr,
        max_send_sge: caps.max_send_sge,
        max_recv_sge: caps.max_recv_sge,
        max_inline_data: caps.max_inline,
    };
    caps
}

/// ordma's CREATE_QP request for `qp`'s rings.
fn create_qp_cmd(qp: &Qp) -> CreateQpCmd {
    let mut cmd = CreateQpCmd::default();
    let sq = lock(&qp.sq);
    cmd.drv.sq_log_depth = sq.shape.log_depth;
    cmd.drv.sq_log_wqe_size = sq.shape.log_wqe_size;
    cmd.drv.sq_buf_addr = sq.ring.addr();
    if let Some(rq) = &qp.rq {
        let rq = lock(rq);
        cmd.drv.rq_log_depth = rq.shape.log_depth;
        cmd.drv.rq_log_wqe_size = rq.shape.log_wqe_size;
        cmd.drv.rq_buf_addr = rq.ring.addr();
    }
    cmd
}

/// CREATE_QP for `qp`; on success the kernel holds its rings until DESTROY_QP, `attr`'s
/// capabilities are the QP's (libibverbs copies them from the response, then
/// [`settle_caps`]), and the context's table has the QP.
///
/// # Safety
///
/// As [`create_qp`].
unsafe fn register(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
    qp: Box<Qp>,
) -> Result<*mut sys::ibv_qp, c_int> {
    // SAFETY: `attr` is valid (contract).
    let cap = unsafe { ptr::addr_of_mut!((*attr).cap) };
    let command = |qp: *mut Qp, cmd: &mut CreateQpCmd, resp: &mut CreateQpResp| {
        // SAFETY: `pd` and `attr` are valid (contract); `qp` is ours and stays where it is
        // (its address is the QP's user handle); the buffers are ours, their sizes theirs.
        unsafe {
            abi::ibv_cmd_create_qp(
                pd,
                Qp::ibv_qp(qp),
                attr,
                &mut cmd.ibv,
                size_of::<CreateQpCmd>(),
                &mut resp.ibv,
                size_of::<CreateQpResp>(),
            )
        }
    };
    // SAFETY: `cap` is valid; the command is CREATE_QP with the request's rings.
    unsafe { create_with(qp, cap, command) }
}

/// CREATE_QP for `qp` by `command` (one of libibverbs' `ibv_cmd_create_qp*`, given the QP,
/// ordma's request and its response); then as [`register`] says, with `cap` (which the
/// command filled) settled.
///
/// # Safety
///
/// `cap` is valid; `command` creates the QP in the kernel with the rings of the request
/// and sets the QP's context (one of ours), or fails.
unsafe fn create_with(
    qp: Box<Qp>,
    cap: *mut sys::ibv_qp_cap,
    command: impl FnOnce(*mut Qp, &mut CreateQpCmd, &mut CreateQpResp) -> c_int,
) -> Result<*mut sys::ibv_qp, c_int> {
    let mut cmd = create_qp_cmd(&qp);
    let mut resp = CreateQpResp::default();
    let qp = Box::into_raw(qp);
    let r = command(qp, &mut cmd, &mut resp);
    if r != 0 {
        // SAFETY: from `Box::into_raw` above; the kernel has not kept its rings.
        drop(unsafe { Box::from_raw(qp) });
        return Err(r);
    }
    // SAFETY: `qp` is ours, `cap` valid (caller); the command set the QP's context, one
    // of ours.
    unsafe {
        (*qp).qpn = resp.drv.qpn;
        (*qp).caps = settle_caps(&*qp, &mut *cap);
        let ctx = Context::from_ibv((*qp).base().context);
        if let Err(e) = (*ctx).qps.insert((*qp).qpn, qp) {
            if abi::ibv_cmd_destroy_qp(Qp::ibv_qp(qp)) == 0 {
                drop(Box::from_raw(qp));
            }
            // Else the kernel still holds the rings: the QP's memory is leaked, never
            // freed under the NIC.
            return Err(e);
        }
        Ok(Qp::ibv_qp(qp))
    }
}

/// What `ibv_create_qp_ex` may ask: a PD (required) and the send operations; no creation
/// flags, XRC, RSS or TSO (`EOPNOTSUPP`, as soft-RoCE's provider), and only the
/// operations the QP's type takes (`wr::send_ops`).
pub(crate) fn check_attr_ex(attr: &sys::ibv_qp_init_attr_ex) -> Result<(), c_int> {
    use sys::*;
    let pd = ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_PD;
    let ops = ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    let flags = ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_CREATE_FLAGS;
    if attr.comp_mask & !(pd | ops | flags) != 0
        || (attr.comp_mask & flags != 0 && attr.create_flags != 0)
    {
        return Err(libc::EOPNOTSUPP);
    }
    if attr.comp_mask & pd == 0 || attr.pd.is_null() {
        return Err(libc::EINVAL);
    }
    if attr.comp_mask & ops != 0 {
        let allowed = wr::send_ops(attr.qp_type).ok_or(libc::EOPNOTSUPP)?;
        if attr.send_ops_flags & !allowed != 0 {
            return Err(libc::EOPNOTSUPP);
        }
    }
    Ok(())
}

/// The send operations an extended QP takes only from a device that claims them, and the
/// capability flags (`ib_uverbs_device_cap_flags`) it must claim: IBTA 1.5's FLUSH and
/// ATOMIC WRITE (interface 1.8; there are no `IBV_DEVICE_*` bits for them), and the
/// operations of type 2 windows, which need windows of type 2B (interface 1.9:
/// `IBV_DEVICE_MEM_WINDOW`, `IBV_DEVICE_MEM_WINDOW_TYPE_2B`, the same bits).
pub(crate) fn device_ops() -> [(u32, u64); 5] {
    use sys::*;
    let windows = ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_MEM_WINDOW
        | ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B;
    [
        (
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_FLUSH,
            ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_FLUSH_GLOBAL,
        ),
        (
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_WRITE,
            ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_ATOMIC_WRITE,
        ),
        (ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW, windows),
        (
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV,
            windows,
        ),
        (
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV,
            windows,
        ),
    ]
}

/// Whether a device of capability flags `caps` (`device_cap_flags_ex` with
/// `device_cap_flags`) executes send operations `ops`: `EOPNOTSUPP` for one it does not
/// claim ([`device_ops`]), the skip rdma-core's tests expect.
pub(crate) fn check_caps(ops: u64, caps: u64) -> Result<(), c_int> {
    for (op, need) in device_ops() {
        if ops & u64::from(op) != 0 && caps & need != need {
            return Err(libc::EOPNOTSUPP);
        }
    }
    Ok(())
}

/// The send operations `ops` that need the device's word ([`device_ops`]) are checked
/// against its capability flags, which one query asks ([`check_caps`]).
///
/// # Safety
///
/// `ibctx` is one of our contexts.
unsafe fn check_device_ops(ibctx: *mut sys::ibv_context, ops: u64) -> Result<(), c_int> {
    use sys::*;
    let need = device_ops();
    if need.iter().all(|&(op, _)| ops & u64::from(op) == 0) {
        return Ok(());
    }
    let mut attr = ibv_device_attr_ex::default();
    // SAFETY: one of our contexts (caller), no input, our own `attr` of its size.
    let r = unsafe {
        crate::context::query_device_ex(
            ibctx,
            core::ptr::null(),
            &mut attr,
            size_of::<ibv_device_attr_ex>(),
        )
    };
    if r != 0 {
        return Err(r);
    }
    check_caps(
        ops,
        attr.device_cap_flags_ex | u64::from(attr.orig_attr.device_cap_flags),
    )
}

/// The `ibv_qp_init_attr` part of `attr`.
pub(crate) fn base_attr(attr: &sys::ibv_qp_init_attr_ex) -> sys::ibv_qp_init_attr {
    sys::ibv_qp_init_attr {
        qp_context: attr.qp_context,
        send_cq: attr.send_cq,
        recv_cq: attr.recv_cq,
        srq: attr.srq,
        cap: attr.cap,
        qp_type: attr.qp_type,
        sq_sig_all: attr.sq_sig_all,
    }
}

/// # Safety
///
/// libibverbs calls this with one of our contexts and a valid `attr` (its PD, CQs and SRQ
/// ours).
pub(crate) unsafe extern "C" fn create_qp_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    // SAFETY: `attr` is valid (contract).
    let r = check_attr_ex(unsafe { &*attr })
        // SAFETY: as above; `ibctx` is one of our contexts (contract).
        .and_then(|()| unsafe { check_device_ops(ibctx, send_ops_of(&*attr).unwrap_or(0)) })
        // SAFETY: as above.
        .and_then(|()| new_qp(&base_attr(unsafe { &*attr })))
        .and_then(|mut qp| {
            // SAFETY: as above.
            let ops = unsafe { send_ops_of(&*attr) };
            if let Some(ops) = ops {
                wr::set_functions(&mut qp.ibv.qp_ex, ops);
            }
            // SAFETY: as this function's contract.
            unsafe { register_ex(ibctx, attr, qp) }
        });
    match r {
        Ok(qp) => qp,
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    }
}

/// The send operations `attr` asks for, if it asks.
fn send_ops_of(attr: &sys::ibv_qp_init_attr_ex) -> Option<u64> {
    (attr.comp_mask & sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0)
        .then_some(attr.send_ops_flags)
}

/// CREATE_QP for an extended QP (`ibv_cmd_create_qp_ex`, the command `create_qp` uses with
/// the extended attributes), then as [`register`]; the QP's `ibv_qp_ex` is its own
/// (`VERBS_QP_EX`: `ibv_qp_to_qp_ex` returns it).
///
/// # Safety
///
/// As [`create_qp_ex`].
unsafe fn register_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
    qp: Box<Qp>,
) -> Result<*mut sys::ibv_qp, c_int> {
    // The kernel's command knows no creation flags (checked to be none).
    // SAFETY: `attr` is valid (contract).
    let mut core = unsafe { *attr };
    core.comp_mask &= !sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_CREATE_FLAGS;
    // SAFETY: `attr` is valid (contract).
    let cap = unsafe { ptr::addr_of_mut!((*attr).cap) };
    let command = |qp: *mut Qp, cmd: &mut CreateQpCmd, resp: &mut CreateQpResp| {
        // SAFETY: `ibctx` is valid (contract); `qp` is ours, a `verbs_qp` at its head, and
        // stays where it is; `core` and the buffers are ours, their sizes theirs.
        let r = unsafe {
            abi::ibv_cmd_create_qp_ex(
                ibctx,
                qp.cast::<abi::VerbsQp>(),
                &mut core,
                &mut cmd.ibv,
                size_of::<CreateQpCmd>(),
                &mut resp.ibv,
                size_of::<CreateQpResp>(),
            )
        };
        if r == 0 {
            // SAFETY: `cap` is valid (contract); the command reported the QP's own.
            unsafe { *cap = core.cap };
        }
        r
    };
    // SAFETY: `cap` is valid; the command is CREATE_QP with the request's rings.
    let r = unsafe { create_with(qp, cap, command) }?;
    // SAFETY: `r` is the head of our live `Qp`, not yet returned to the caller.
    unsafe { (*r.cast::<Qp>()).ibv.comp_mask |= abi::VERBS_QP_EX };
    Ok(r)
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
    let r = unsafe {
        abi::ibv_cmd_modify_qp(
            ibqp,
            attr,
            attr_mask,
            &mut cmd,
            size_of::<abi::IbvModifyQp>(),
        )
    };
    // CAST: the mask's bits.
    if r == 0 && attr_mask as u32 & QP_ATTR_STATE != 0 {
        // SAFETY: `ibqp` is the first field of a live `Qp` with its CQs, `attr` valid
        // (contract).
        unsafe {
            let state = (*attr).qp_state;
            if state == sys::ibv_qp_state_IBV_QPS_RESET {
                clean_cqs(ibqp.cast::<Qp>(), false);
            }
            set_state(&*ibqp.cast::<Qp>(), state);
        }
    }
    r
}

/// Records the state the NIC accepted for `qp`. Moving to RESET empties the queues, as
/// the NIC resets its indices.
pub(crate) fn set_state(qp: &Qp, state: sys::ibv_qp_state) {
    if state == sys::ibv_qp_state_IBV_QPS_RESET {
        lock(&qp.sq).reset();
        if let Some(rq) = &qp.rq {
            lock(rq).reset();
        }
    }
    qp.state.store(state, Ordering::Release);
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
    let qp = ibqp.cast::<Qp>();
    // SAFETY: `qp` is live; its context and CQs are ours and outlive it.
    unsafe { clean_cqs(qp, true) };
    // SAFETY: `ibqp` is the first field of a `Qp` from `Box::into_raw`; the kernel has let
    // go of its rings, no poller can reach it any more, and this is its last use.
    drop(unsafe { Box::from_raw(qp) });
    0
}

/// With `qp`'s CQs locked (the lower address first), drops the CQEs of `qp` they still
/// hold (`cq::clean`) and, if `forget`, takes `qp` out of its context's table, so a
/// `poll_cq` that found it is done with it and none finds it again.
///
/// # Safety
///
/// `qp` is a live QP of ours with its context and CQs set (by CREATE_QP).
unsafe fn clean_cqs(qp: *mut Qp, forget: bool) {
    // SAFETY: the caller's promise; our CQs are `Cq`s with `ibv` first.
    let (ctx, qpn, a, b, srq) = unsafe {
        (
            Context::from_ibv((*qp).base().context),
            (*qp).qpn,
            (*qp).base().send_cq.cast::<Cq>(),
            (*qp).base().recv_cq.cast::<Cq>(),
            (*qp).srq,
        )
    };
    let srq = srq.as_ref().map(SrqRef::get);
    let (first, second) = if a <= b { (a, b) } else { (b, a) };
    // SAFETY: live CQs (the QP uses them, so they cannot be destroyed yet).
    let (first, second) = unsafe { (&*first, &*second) };
    let mut g1 = first.state.lock();
    let mut g2 = (!ptr::eq(first, second)).then(|| second.state.lock());
    cq::clean(first, &mut g1, qpn, srq);
    if let Some(g2) = g2.as_mut() {
        cq::clean(second, g2, qpn, srq);
    }
    if forget {
        // SAFETY: the context is live while its QPs are.
        unsafe { (*ctx).qps.remove(qpn, qp) };
    }
}

/// Posts a chain of send WRs (`wq::post_send_chain`): 0, or an errno with `*bad_wr` the
/// first WR not posted.
///
/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned, a chain of valid WRs (whose
/// `sg_list`s are valid and, for inline sends, whose buffers are readable; a bind's window
/// and MR null or live) and a valid `bad_wr`.
pub(crate) unsafe extern "C" fn post_send(
    ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad_wr: *mut *mut sys::ibv_send_wr,
) -> c_int {
    // SAFETY: `ibqp` is the first field of a live `Qp`; its context is one of ours, whose
    // doorbell page stays mapped while it is open; the WRs as the contract says.
    let r = unsafe {
        let qp = &*ibqp.cast::<Qp>();
        match DbPage::new((*Context::from_ibv(qp.base().context)).db) {
            Some(db) => post_send_chain(qp, &db, wr),
            None => Err((libc::EINVAL, wr)),
        }
    };
    // SAFETY: `bad_wr` is valid for a write (contract).
    unsafe { post_result(r, bad_wr) }
}

/// Posts a chain of receive WRs (`wq::post_recv_chain`): 0, or an errno with `*bad_wr`
/// the first WR not posted.
///
/// # Safety
///
/// libibverbs calls this with a QP `create_qp` returned, a chain of valid WRs and a valid
/// `bad_wr`.
pub(crate) unsafe extern "C" fn post_recv(
    ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    // SAFETY: as `post_send`.
    let r = unsafe {
        let qp = &*ibqp.cast::<Qp>();
        match DbPage::new((*Context::from_ibv(qp.base().context)).db) {
            Some(db) => post_recv_chain(qp, &db, wr),
            None => Err((libc::EINVAL, wr)),
        }
    };
    // SAFETY: `bad_wr` is valid for a write (contract).
    unsafe { post_result(r, bad_wr) }
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
        assert_eq!(offset_of!(abi::VerbsQp, qp_ex), 0);
    }

    #[test]
    fn send_queue_fits_sges_and_inline_data() {
        assert_eq!(sq_shape(&cap(0, 0, 0, 0, 0), QP_TYPE_RC), Ok(shape(0, 6)));
        assert_eq!(sq_shape(&cap(1, 1, 0, 0, 0), QP_TYPE_RC), Ok(shape(0, 6)));
        assert_eq!(sq_shape(&cap(64, 2, 0, 0, 0), QP_TYPE_RC), Ok(shape(6, 6)));
        assert_eq!(sq_shape(&cap(65, 3, 0, 0, 0), QP_TYPE_RC), Ok(shape(7, 7)));
        assert_eq!(
            sq_shape(&cap(4096, 16, 0, 0, 0), QP_TYPE_RC),
            Ok(shape(12, 9))
        );
        assert_eq!(sq_shape(&cap(1, 1, 64, 0, 0), QP_TYPE_RC), Ok(shape(0, 7)));
        assert_eq!(
            sq_shape(&cap(1, 1, 992, 0, 0), QP_TYPE_RC),
            Ok(shape(0, 10))
        );
        assert_eq!(
            sq_shape(&cap(1, 1, 993, 0, 0), QP_TYPE_RC),
            Err(libc::EINVAL)
        );
        assert_eq!(
            sq_shape(&cap(1, 63, 0, 0, 0), QP_TYPE_RC),
            Err(libc::EINVAL)
        );
        assert_eq!(
            sq_shape(&cap(1, u32::MAX, 0, 0, 0), QP_TYPE_RC),
            Err(libc::EINVAL)
        );
        assert_eq!(
            sq_shape(&cap(u32::MAX, 1, 0, 0, 0), QP_TYPE_RC),
            Err(libc::EINVAL)
        );
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
        assert_eq!(cmd.drv.sq_buf_addr, lock(&qp.sq).ring.addr());
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
