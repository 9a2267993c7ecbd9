//! Helpers shared by the fast path's tests (here and in `cq`).
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

/// A QP of `cap` on SRQ `srq` (both CQs dangling), in `state`, with QPN `qpn`.
pub(crate) fn qp_on_srq(
    cap: sys::ibv_qp_cap,
    srq: &crate::srq::Srq,
    state: u32,
    qpn: u32,
) -> Box<Qp> {
    let mut qp = crate::qp::new_qp(&sys::ibv_qp_init_attr {
        send_cq: ptr::NonNull::dangling().as_ptr(),
        recv_cq: ptr::NonNull::dangling().as_ptr(),
        srq: ptr::from_ref(srq).cast_mut().cast(),
        cap,
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

/// A queue with a ring: a receive queue, or a send queue's.
pub(crate) trait AsRing {
    fn ring_queue(&self) -> &WorkQueue;
}

impl AsRing for WorkQueue {
    fn ring_queue(&self) -> &WorkQueue {
        self
    }
}

impl AsRing for SendQueue {
    fn ring_queue(&self) -> &WorkQueue {
        &self.wq
    }
}

/// The bytes of slot `slot` of `wq`'s ring.
pub(crate) fn slot<Q: AsRing>(wq: &Mutex<Q>, slot: usize) -> Vec<u8> {
    let guard = lock(wq);
    let wq = guard.ring_queue();
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

/// Writes `cqe` at producer index `pi` of `cq`'s ring as the NIC does: the body, then
/// the owner byte with the phase of that pass.
pub(crate) fn nic_write(cq: &crate::cq::Cq, pi: u32, cqe: &ordma_hw::Cqe) {
    use ordma_hw::{cqe_phase, CQE_LOG_SIZE_MIN, CQE_OWNER_OFFSET};
    // The ring's place and size (the NIC knows them; the lock is only how the test
    // reads them), then the write without the lock, as the NIC's.
    let (base, log) = {
        let st = cq.state.lock();
        (st.ring.mem.as_ptr(), st.ring.log_depth)
    };
    let off = ((pi & ((1 << log) - 1)) as usize) << CQE_LOG_SIZE_MIN;
    let body = cqe.encode();
    // SAFETY: a slot of the test's ring.
    unsafe {
        ptr::copy_nonoverlapping(body.as_ptr(), base.add(off), body.len());
        base.add(off + CQE_OWNER_OFFSET)
            .write_volatile(cqe_phase(pi, log));
    }
}
