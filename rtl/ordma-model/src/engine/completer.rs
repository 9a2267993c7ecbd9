//! The RC engine's completer (soft-RoCE's `rxe_comp.c`): matches the responder's answers
//! (ACK, RNR NAK, NAK, read responses) to the requester's head WQE and writes send CQEs;
//! RNR retries (on the responder's RQ doorbell or the `min_rnr_timer`, through
//! [`Nic::tick`]); errors, which move a QP to `ERR`, and the flush of every WQE left in
//! `ERR`.

use std::time::{Duration, Instant};

use ordma_hw as hw;
use tracing::debug;

use super::data::Data;
use super::packet::NakCode;
use super::qp::qp_index;
use super::requester::mtu_bytes;
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// The responder's answer to one request packet.
#[derive(Debug)]
pub(super) enum Answer {
    /// ACK (or, for a packet without the ack request, accepted).
    Ack,
    /// No answer: the request was dropped (the requester's retries time out).
    Drop,
    /// RNR NAK with the responder's timer code.
    Rnr(u8),
    /// NAK.
    Nak(NakCode),
    /// READ: the responder's data, to come back in read responses.
    Read(Data),
    /// An atomic: the word's old value, to come back in an ATOMIC ACKNOWLEDGE.
    Atomic(u64),
    /// A FLUSH or an ATOMIC WRITE done: an empty RDMA READ response only.
    EmptyRead,
}

/// IB's RNR timer encoding (`min_rnr_timer`), in microseconds.
const RNR_TIMER_US: [u64; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// The RNR delay of timer code `code`.
pub fn rnr_delay(code: u8) -> Duration {
    Duration::from_micros(
        RNR_TIMER_US
            .get(usize::from(code & 31))
            .copied()
            .unwrap_or(0),
    )
}

/// `rnr_retry` and `retry_cnt` value meaning "without limit".
pub(super) const RETRY_FOREVER: u8 = 7;

impl Nic {
    /// Completes send WQE `index` of QP `qpn`: a CQE if `signaled` or an error; an error
    /// moves the QP to `ERR`.
    #[allow(clippy::too_many_arguments, reason = "a CQE's fields")]
    pub(super) fn complete_send(
        &mut self,
        qpn: u32,
        index: u16,
        status: u8,
        opcode: u8,
        byte_len: u32,
        signaled: bool,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let Some(qp) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) else {
            return;
        };
        if qp.sq.ci != index {
            // A QP connected to itself went to ERR as the responder: the flush completed
            // this WQE already.
            return;
        }
        qp.sq.ci = index.wrapping_add(1);
        qp.dp.rnr_left = None;
        qp.dp.rnr_wait = None;
        let cqn = qp.send_cqn;
        self.count_completion(qpn, status, opcode);
        if signaled || status != hw::WC_SUCCESS {
            let cqe = hw::Cqe {
                wqe_index: index,
                status,
                opcode,
                qpn,
                byte_len,
                ..Default::default()
            };
            self.post_completion(cqn, &cqe, status != hw::WC_SUCCESS, mem, irq);
        }
        if status != hw::WC_SUCCESS {
            debug!(qpn, index, status, "send WQE failed: QP to ERR");
            self.enter_error(qpn, mem, irq);
        }
    }

    /// Counts a completion of QP `qpn` (and its port): a SEND sent or received, or an error
    /// by its cause (flushes are not counted).
    pub(super) fn count_completion(&mut self, qpn: u32, status: u8, opcode: u8) {
        let counter = match status {
            hw::WC_SUCCESS if opcode == hw::WC_SEND => hw::CNT_RDMA_SENDS,
            hw::WC_SUCCESS if opcode == hw::WC_RECV => hw::CNT_RDMA_RECVS,
            hw::WC_LOC_LEN_ERR | hw::WC_LOC_QP_OP_ERR | hw::WC_LOC_PROT_ERR => hw::CNT_LOCAL_ERR,
            hw::WC_REM_INV_REQ_ERR | hw::WC_REM_ACCESS_ERR | hw::WC_REM_OP_ERR => {
                hw::CNT_REMOTE_ERR
            }
            hw::WC_RETRY_EXC_ERR => hw::CNT_RETRY_EXCEEDED_ERR,
            hw::WC_RNR_RETRY_EXC_ERR => hw::CNT_RETRY_RNR_EXCEEDED_ERR,
            _ => return,
        };
        self.count(qpn, counter, 1);
    }

    /// Moves QP `qpn` to `ERR` and flushes its queues.
    pub(super) fn enter_error(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if let Some(qp) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
            if qp.state != hw::QPS_ERR && qp.srqn.is_some() {
                qp.dp.last_wqe_due = true;
            }
            qp.state = hw::QPS_ERR;
        }
        self.flush(qpn, mem, irq);
    }

    /// In `ERR`: completes every WQE of QP `qpn` not completed yet, SQ then RQ, in order,
    /// with `WR_FLUSH_ERR`. A QP attached to an SRQ completes the SRQ WQE its SEND in
    /// progress took, if any, and then, once after entering `ERR`, posts
    /// `QP_LAST_WQE_REACHED`: it takes no WQE from the SRQ any more.
    pub(super) fn flush(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if !self.bus_master {
            self.refused("flush");
            return;
        }
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        if qp.state != hw::QPS_ERR {
            return;
        }
        let mut cqe = hw::Cqe {
            status: hw::WC_WR_FLUSH_ERR,
            qpn,
            ..Default::default()
        };
        let mut i = qp.sq.ci;
        while i != qp.sq.pi {
            cqe.wqe_index = i;
            self.post_completion(qp.send_cqn, &cqe, true, mem, irq);
            i = i.wrapping_add(1);
        }
        let mut rq_done = None;
        if let Some(rq) = qp.rq {
            cqe.opcode = hw::WC_RECV;
            cqe.flags = hw::CQE_FLAG_RECV;
            let mut i = rq.ci;
            while i != rq.pi {
                cqe.wqe_index = i;
                self.post_completion(qp.recv_cqn, &cqe, true, mem, irq);
                i = i.wrapping_add(1);
            }
            rq_done = Some(rq.pi);
        }
        let srq_claimed = qp.srqn.and_then(|_| self.claimed_recv(qpn));
        if let Some(i) = srq_claimed {
            cqe.opcode = hw::WC_RECV;
            cqe.flags = hw::CQE_FLAG_RECV;
            cqe.wqe_index = i;
            self.post_completion(qp.recv_cqn, &cqe, true, mem, irq);
        }
        if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
            q.sq.ci = qp.sq.pi;
            if let (Some(rq), Some(pi)) = (q.rq.as_mut(), rq_done) {
                rq.ci = pi;
            }
            q.dp.rnr_wait = None;
            q.dp.rnr_left = None;
        }
        self.remote_forget(qpn);
        if qp.dp.last_wqe_due {
            if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
                q.dp.last_wqe_due = false;
            }
            self.post_event(hw::EVENT_QP_LAST_WQE_REACHED, qpn, 0, mem, irq);
        }
    }

    /// A receive was posted on QP `qpn`: the QPs waiting for an RNR retry towards it send
    /// again now.
    pub(super) fn rnr_wake(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if self.ud_waiting() {
            self.ud_retry(Instant::now(), mem, irq);
        }
        let waiting: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| {
                q.dp.rnr_wait.is_some() && q.attr.dest_qp_num == qpn && self.is_own(&q.attr.ah)
            })
            .map(|(i, _)| i + hw::QPN_FIRST)
            .collect();
        for w in waiting {
            self.retry_now(w, mem, irq);
        }
    }

    /// QP `qpn`'s RNR wait is over: it sends again now.
    pub(super) fn retry_now(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
            q.dp.rnr_wait = None;
        }
        self.run_sq(qpn, mem, irq);
    }

    /// Whether some QP waits for a timer (an RNR retry, a transport timer) or packets to
    /// the NIC itself wait beyond one call's budget: the device calls [`Nic::tick`] while
    /// this holds.
    pub fn timers_pending(&self) -> bool {
        self.qps.iter().any(|(_, q)| q.dp.rnr_wait.is_some())
            || self.remote_timers()
            || self.own_pending()
            || self.ud_waiting()
    }

    /// The NIC's timers at time `now`: every QP whose RNR delay has passed sends again;
    /// every QP whose transport timer ran out sends again or gives up; the packets to the
    /// NIC itself left over by the last call are taken (another budget's worth).
    pub fn tick(&mut self, now: Instant, mem: &dyn Dma, irq: &dyn Interrupts) {
        let due: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| q.dp.rnr_wait.is_some_and(|t| t <= now))
            .map(|(i, _)| i + hw::QPN_FIRST)
            .collect();
        for qpn in due {
            self.retry_now(qpn, mem, irq);
        }
        self.remote_tick(now, mem, irq);
        self.ud_retry(now, mem, irq);
        self.drain_own(mem, irq);
    }

    /// After admin commands: QPs a `MODIFY_QP` moved to `ERR` flush (and those attached to
    /// an SRQ post `QP_LAST_WQE_REACHED`), QPs back in `RTS`
    /// (from `SQD`) send what was posted meanwhile.
    pub(super) fn run_data_path(&mut self, mem: &dyn Dma, irq: &dyn Interrupts) {
        let work: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| {
                let rq_busy = q.rq.is_some_and(|rq| rq.ci != rq.pi);
                match q.state {
                    hw::QPS_ERR => q.sq.ci != q.sq.pi || rq_busy || q.dp.last_wqe_due,
                    hw::QPS_RTS => q.sq.ci != q.sq.pi && q.dp.rnr_wait.is_none(),
                    _ => false,
                }
            })
            .map(|(i, _)| i + hw::QPN_FIRST)
            .collect();
        for qpn in work {
            self.run_sq(qpn, mem, irq);
        }
    }
}

/// Packets a READ of `len` bytes takes (its responses), at MTU code `mtu`.
pub(super) fn read_packets(len: u64, mtu: u8) -> u64 {
    len.div_ceil(mtu_bytes(mtu)).max(1)
}
