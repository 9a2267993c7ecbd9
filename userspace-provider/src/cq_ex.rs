//! Extended CQs: `ibv_create_cq_ex` (CREATE_CQ through the extended command, the same ring
//! and driver data as `cq`) and the polling API on the fast path, without a system call:
//! `ibv_start_poll` takes the CQ's lock and the first new completion, `ibv_next_poll` the
//! next, `ibv_end_poll` publishes the consumer index and gives the lock back; the
//! `ibv_wc_read_*` accessors read the completion at hand. The completion is made exactly
//! as `poll_cq` makes it (`cq::complete`), so both APIs retire WQEs alike, and a CQ made by
//! either can be polled by both (`cq`'s tests hold the two to the same results).

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, null_mut};

use crate::context::{Context, QpTable};
use crate::cq::{self, Cq, CqState};
use crate::{abi, set_errno, sys};

/// The completion fields ordma's CQEs carry (`IBV_WC_STANDARD_FLAGS`): byte count,
/// immediate data (or the rkey a SEND with invalidate invalidated), QP number, source QP,
/// source LID, SL and path bits. No timestamps, VLAN, flow tag or tag matching:
/// `EOPNOTSUPP` for those, as soft-RoCE's provider.
pub(crate) const WC_FLAGS: u64 = sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_BYTE_LEN as u64
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_IMM as u64
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_QP_NUM as u64
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SRC_QP as u64
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SLID as u64
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SL as u64
    | sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_DLID_PATH_BITS as u64;

/// The request of CREATE_CQ (extended) with ordma's driver data; the response is
/// [`ExCreateCqResp`].
#[repr(C)]
#[derive(Default)]
pub(crate) struct ExCreateCqCmd {
    pub(crate) ibv: abi::IbvCreateCqEx,
    pub(crate) drv: sys::ordma_ibv_create_cq_cmd,
}
#[repr(C)]
#[derive(Default)]
pub(crate) struct ExCreateCqResp {
    pub(crate) ibv: sys::ib_uverbs_ex_create_cq_resp,
    pub(crate) drv: sys::ordma_ibv_create_cq_resp,
}

/// Checks what `attr` asks of an extended CQ: `EOPNOTSUPP` for completion fields ordma
/// does not report, a parent domain, or a creation flag other than single-threaded use
/// (which only promises what the lock already gives).
pub(crate) fn check_attr(attr: &sys::ibv_cq_init_attr_ex) -> Result<(), c_int> {
    if attr.wc_flags & !WC_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let mask = attr.comp_mask;
    if mask & !sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if mask & sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
        && attr.flags & !sys::ibv_create_cq_attr_flags_IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(())
}

/// # Safety
///
/// libibverbs calls this with one of our contexts and a valid `attr` (whose channel is
/// null or one of the context's).
pub(crate) unsafe extern "C" fn create_cq_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_cq_init_attr_ex,
) -> *mut sys::ibv_cq_ex {
    // SAFETY: `attr` is valid (contract).
    let attr = unsafe { &*attr };
    let r = check_attr(attr)
        .and_then(|()| cq::new_cq(c_int::try_from(attr.cqe).map_err(|_| libc::EINVAL)?))
        .and_then(|cq| {
            // SAFETY: as this function's contract.
            unsafe { register(ibctx, attr, cq) }
        });
    match r {
        Ok(cq) => cq,
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    }
}

/// CREATE_CQ (extended) for `cq`, then its polling functions; on success the kernel holds
/// its memory until DESTROY_CQ (`cq::destroy_cq`, for both kinds).
///
/// # Safety
///
/// As [`create_cq_ex`].
unsafe fn register(
    ibctx: *mut sys::ibv_context,
    attr: &sys::ibv_cq_init_attr_ex,
    cq: Box<Cq>,
) -> Result<*mut sys::ibv_cq_ex, c_int> {
    let mut cmd = ExCreateCqCmd::default();
    {
        let st = cq.state.lock();
        cmd.drv.log_depth = st.ring.log_depth;
        cmd.drv.buf_addr = st.ring.mem.addr();
    }
    cmd.drv.log_cqe_size = ordma_hw::CQE_LOG_SIZE_MIN;
    cmd.drv.db_addr = cq.record.addr();
    let mut resp = ExCreateCqResp::default();
    let cq = Box::into_raw(cq);
    // SAFETY: `ibctx` and `attr` are valid (contract); `cq` is ours and stays where it is
    // (its address is the CQ's user handle), a `verbs_cq` at its head; the buffers are
    // ours, their sizes theirs.
    let r = unsafe {
        abi::ibv_cmd_create_cq_ex(
            ibctx,
            attr,
            cq.cast::<abi::VerbsCq>(),
            &mut cmd.ibv,
            size_of::<ExCreateCqCmd>(),
            &mut resp.ibv,
            size_of::<ExCreateCqResp>(),
            0,
        )
    };
    if r != 0 {
        // SAFETY: from `Box::into_raw` above; the kernel has not kept its memory.
        drop(unsafe { Box::from_raw(cq) });
        return Err(r);
    }
    // SAFETY: `cq` is ours; libibverbs reads the functions only after we return.
    unsafe {
        (*cq).cqn = resp.drv.cqn;
        let ex = &mut (*cq).ibv;
        ex.start_poll = Some(start_poll);
        ex.next_poll = Some(next_poll);
        ex.end_poll = Some(end_poll);
        ex.read_opcode = Some(read_opcode);
        ex.read_vendor_err = Some(read_vendor_err);
        ex.read_byte_len = Some(read_byte_len);
        ex.read_imm_data = Some(read_imm_data);
        ex.read_qp_num = Some(read_qp_num);
        ex.read_src_qp = Some(read_src_qp);
        ex.read_wc_flags = Some(read_wc_flags);
        ex.read_slid = Some(read_slid);
        ex.read_sl = Some(read_sl);
        ex.read_dlid_path_bits = Some(read_dlid_path_bits);
        Ok(ptr::addr_of_mut!((*cq).ibv))
    }
}

/// Takes the next new CQE of `cq` into `st.current`: `ENOENT` if there is none; `EIO` for
/// a CQE that names no QP of this CQ or no outstanding WQE of it (consumed and counted, as
/// `poll_cq` does).
pub(crate) fn advance(cq: &Cq, qps: &QpTable, st: &mut CqState) -> Result<(), c_int> {
    let cqe = cq::next_cqe(&st.ring, st.consumer_index).ok_or(libc::ENOENT)?;
    st.consumer_index = st.consumer_index.wrapping_add(1);
    match cq::complete(cq, qps, &cqe) {
        Ok(wc) => {
            st.current = wc;
            Ok(())
        }
        Err(e) => {
            st.bad_cqes += 1;
            Err(e)
        }
    }
}

/// Publishes the consumer index if polling moved it.
pub(crate) fn end(cq: &Cq, st: &mut CqState) {
    if st.consumer_index != st.published {
        cq::publish(cq, st.consumer_index);
        st.published = st.consumer_index;
    }
}

/// The CQ and its context's QP table behind one of our `ibv_cq_ex`s.
///
/// # Safety
///
/// `ibcq` is a live CQ `create_cq_ex` returned, of an open context.
unsafe fn parts<'a>(ibcq: *mut sys::ibv_cq_ex) -> (&'a Cq, &'a QpTable) {
    // SAFETY: `ibcq` is the first field of a live `Cq`, whose context is one of ours.
    unsafe {
        let cq = &*ibcq.cast::<Cq>();
        (cq, &(*Context::from_ibv(cq.ibv.context)).qps)
    }
}

/// Sets the CQ's `wr_id` and `status` from the completion at hand.
fn show(cq: *mut sys::ibv_cq_ex, st: &CqState) {
    // SAFETY: `cq` is a live CQ of ours; the two fields are plain data libibverbs' caller
    // reads after the call returns, and only the lock's holder writes them.
    unsafe {
        (*cq).wr_id = st.current.wr_id;
        (*cq).status = st.current.status;
    }
}

/// `ibv_start_poll`: 0 with the lock held and the first completion at hand, or `ENOENT`
/// (empty) or `EIO` (a bad CQE, consumed) with the lock given back. `EINVAL` for an
/// attribute mask ordma does not know.
///
/// # Safety
///
/// libibverbs' caller passes a CQ `create_cq_ex` returned and a valid `attr`.
unsafe extern "C" fn start_poll(
    ibcq: *mut sys::ibv_cq_ex,
    attr: *mut sys::ibv_poll_cq_attr,
) -> c_int {
    // SAFETY: `attr` is null or valid (contract).
    if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
        return libc::EINVAL;
    }
    // SAFETY: as the contract.
    let (cq, qps) = unsafe { parts(ibcq) };
    cq.state.acquire();
    // SAFETY: held just above; the reference ends before any release.
    let st = unsafe { cq.state.get_held() };
    match advance(cq, qps, st) {
        Ok(()) => {
            show(ibcq, st);
            0
        }
        Err(e) => {
            end(cq, st);
            // SAFETY: held by `acquire` above; `st` is not used after.
            unsafe { cq.state.release() };
            e
        }
    }
}

/// `ibv_next_poll`: 0 with the next completion at hand, `ENOENT` when there is none,
/// `EIO` for a bad CQE (consumed); the lock stays held until `ibv_end_poll`.
///
/// # Safety
///
/// libibverbs' caller passes a CQ on which `ibv_start_poll` succeeded, before
/// `ibv_end_poll`: its lock is this thread's.
unsafe extern "C" fn next_poll(ibcq: *mut sys::ibv_cq_ex) -> c_int {
    // SAFETY: as the contract.
    let (cq, qps) = unsafe { parts(ibcq) };
    // SAFETY: the lock is held by this thread (contract).
    let st = unsafe { cq.state.get_held() };
    match advance(cq, qps, st) {
        Ok(()) => {
            show(ibcq, st);
            0
        }
        Err(e) => e,
    }
}

/// `ibv_end_poll`: publishes the consumer index and gives the lock back.
///
/// # Safety
///
/// As [`next_poll`].
unsafe extern "C" fn end_poll(ibcq: *mut sys::ibv_cq_ex) {
    // SAFETY: as the contract.
    let (cq, _) = unsafe { parts(ibcq) };
    // SAFETY: the lock is held by this thread (contract); `st` ends before the release.
    unsafe {
        end(cq, cq.state.get_held());
        cq.state.release();
    }
}

/// The completion at hand.
///
/// # Safety
///
/// As [`next_poll`], after a successful `ibv_start_poll` or `ibv_next_poll`.
unsafe fn current<'a>(ibcq: *mut sys::ibv_cq_ex) -> &'a sys::ibv_wc {
    // SAFETY: as the contract: the CQ is live and its lock this thread's.
    unsafe { &(*ibcq.cast::<Cq>()).state.get_held().current }
}

macro_rules! readers {
    ($($(#[$doc:meta])* $name:ident -> $t:ty = |$w:ident| $e:expr;)+) => {
        $(
            $(#[$doc])*
            ///
            /// # Safety
            ///
            /// As [`current`].
            unsafe extern "C" fn $name(ibcq: *mut sys::ibv_cq_ex) -> $t {
                // SAFETY: as the contract.
                let $w = unsafe { current(ibcq) };
                $e
            }
        )+
    };
}

readers! {
    /// `ibv_wc_read_opcode`.
    read_opcode -> sys::ibv_wc_opcode = |w| w.opcode;
    /// `ibv_wc_read_vendor_err`.
    read_vendor_err -> u32 = |w| w.vendor_err;
    /// `ibv_wc_read_byte_len`.
    read_byte_len -> u32 = |w| w.byte_len;
    /// `ibv_wc_read_imm_data`: the 4 bytes in network order, as `ibv_wc.imm_data`; also
    /// `ibv_wc_read_invalidated_rkey` (libibverbs reads the same), the rkey as a number
    /// with `IBV_WC_WITH_INV`, as `ibv_wc.invalidated_rkey`.
    read_imm_data -> u32 = |w| {
        // SAFETY: both members of the union are a u32.
        unsafe { w.__bindgen_anon_1.imm_data }
    };
    /// `ibv_wc_read_qp_num`.
    read_qp_num -> u32 = |w| w.qp_num;
    /// `ibv_wc_read_src_qp`.
    read_src_qp -> u32 = |w| w.src_qp;
    /// `ibv_wc_read_wc_flags`.
    read_wc_flags -> u32 = |w| w.wc_flags;
    /// `ibv_wc_read_slid`.
    read_slid -> u32 = |w| u32::from(w.slid);
    /// `ibv_wc_read_sl`.
    read_sl -> u8 = |w| w.sl;
    /// `ibv_wc_read_dlid_path_bits`.
    read_dlid_path_bits -> u8 = |w| w.dlid_path_bits;
}
