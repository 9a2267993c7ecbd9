//! Shared receive queues: `CMD_CREATE_SRQ`, `CMD_MODIFY_SRQ` (its limit, a resize),
//! `CMD_QUERY_SRQ`, `CMD_DESTROY_SRQ`, the `DB_SRQ` doorbell, and the responder's taking
//! of a WQE from an SRQ for a QP attached to it.
//!
//! An SRQ is a ring of receive WQEs in host memory whose slots are linked: each WQE names
//! the slot of the next one (`hw::SrqWqe::next`), so the consumer can give slots back in
//! the order their completions arrive, which differs between QPs. The NIC keeps the slot of
//! the next WQE to take (`head`, slot 0 at create) and the free-running counts of WQEs
//! posted (the doorbell's index) and taken; it takes WQEs in posting order across all the
//! QPs attached. A WQE is taken whole on the first packet of the message that consumes it:
//! its bytes are read, its `next` followed, its buffers translated with the SRQ's PD (and
//! kept, checked at each use, as a receive queue's are); nothing of the ring is kept
//! between two takes, and the ring is walked again through its page list each time. A WQE
//! the NIC cannot read, or a malformed one, is taken all the same (the next link as far as
//! it can be read, else the slot after it) and completes in error on the QP that took it.

use ordma_hw as hw;
use tracing::debug;

use super::completer::Answer;
use super::counters::{bounded_warn, Anomaly};
use super::data::Data;
use super::packet::NakCode;
use super::pages;
use super::qp::{Qp, WorkQueue};
use super::requester::wqe_bytes;
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// A shared receive queue on the NIC.
#[derive(Clone, Copy, Debug)]
pub struct Srq {
    /// The doorbell page (user context) that owns it; its QPs belong to the same.
    pub db_page: u32,
    /// The PD its WQEs' buffers are translated with.
    pub pdn: u32,
    /// Most SGEs per WQE.
    pub max_sge: u8,
    /// The ring, with the WQEs posted (`pi`, the last doorbell's index) and taken (`ci`).
    pub wq: WorkQueue,
    /// The slot of the next WQE to take.
    head: u16,
    /// The armed limit (0: not armed).
    limit: u32,
}

impl Srq {
    /// WQEs it holds at most: one slot is always free (the end of the links).
    pub fn max_wr(&self) -> u32 {
        u32::from(self.wq.depth()).saturating_sub(1)
    }

    /// WQEs posted and not yet taken.
    pub fn count(&self) -> u16 {
        self.wq.pi.wrapping_sub(self.wq.ci)
    }
}

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

/// A WQE taken for a message: its slot, its buffers translated, their bytes.
pub(super) type Claim = (u16, Data, u64);

impl Nic {
    /// SRQs existing now, for logs and tests.
    pub fn srqs_in_use(&self) -> u32 {
        self.srqs.in_use()
    }

    /// SRQ `srqn`, if it exists.
    pub fn srq(&self, srqn: u32) -> Option<&Srq> {
        self.srqs.get_index(srqn)
    }

    /// `CMD_CREATE_SRQ`: the result is the SRQN, the lowest free below `max_srq`.
    pub(super) fn create_srq(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::CreateSrqParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let attrs = &self.config.attrs;
        let q = &p.wq;
        let need = hw::RQ_WQE_BASE + hw::WQE_SGE_SIZE * u32::from(p.max_sge);
        let depth_ok = (hw::SRQ_LOG_DEPTH_MIN..=hw::MAX_QUEUE_LOG_DEPTH).contains(&q.log_depth)
            && (1u32 << q.log_depth) - 1 <= attrs.max_srq_wr;
        let wqe_ok = (hw::WQE_LOG_SIZE_MIN..=hw::WQE_LOG_SIZE_MAX).contains(&q.log_wqe_size)
            && (1u32 << q.log_wqe_size) >= need;
        // At most 2^(15 + 10) bytes once both are in range.
        let bytes = 1u64 << (u32::from(q.log_depth) + u32::from(q.log_wqe_size)).min(32);
        if u32::from(p.db_page) >= hw::DB_PAGES
            || self.pds.get_index(p.pdn).is_none()
            || u32::from(p.max_sge) > attrs.max_srq_sge
            || !depth_ok
            || !wqe_ok
            || !self.page_list_ok(&q.ring, bytes)
        {
            return (hw::AQ_BAD_PARAM, 0);
        }
        if self.srqs.is_full() {
            return (hw::AQ_NO_RESOURCES, 0);
        }
        if let Err(e) = pages::validate(mem, &q.ring) {
            return (e.status(), 0);
        }
        let srq = Srq {
            db_page: u32::from(p.db_page),
            pdn: p.pdn,
            max_sge: p.max_sge,
            wq: WorkQueue::new(q),
            head: 0,
            limit: 0,
        };
        match self.srqs.insert(srq) {
            Some(h) => {
                debug!(srqn = h.index, db_page = p.db_page, "SRQ created");
                (hw::AQ_OK, u64::from(h.index))
            }
            None => (hw::AQ_NO_RESOURCES, 0),
        }
    }

    /// `CMD_MODIFY_SRQ`: resizes (1.7) and arms (or, with 0, disarms) the limit, all or
    /// nothing: a parameter it refuses leaves the SRQ as it was.
    ///
    /// A resize gives the SRQ a larger ring of the same WQE size, whose first slots hold
    /// the old ring's bytes (the consumer copied them, links and all, and linked the new
    /// slots after its last free one): the next WQE to take stays in the same slot, the
    /// counts of WQEs posted and taken go on, and from here on the old ring is never read.
    pub(super) fn modify_srq(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::ModifySrqParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let Some(&srq) = self.srqs.get_index(p.srqn) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if p.attr_mask & !(hw::SRQ_ATTR_LIMIT | hw::SRQ_ATTR_MAX_WR) != 0 {
            return (hw::AQ_BAD_PARAM, 0);
        }
        let mut new = srq;
        if p.attr_mask & hw::SRQ_ATTR_MAX_WR != 0 {
            let q = hw::WorkQueue {
                log_depth: p.log_depth,
                log_wqe_size: srq.wq.log_wqe_size,
                ring: p.ring,
            };
            // Larger only: every slot the consumer or a QP holds keeps its number.
            let depth_ok = q.log_depth > srq.wq.log_depth
                && q.log_depth <= hw::MAX_QUEUE_LOG_DEPTH
                && (1u32 << q.log_depth) - 1 <= self.config.attrs.max_srq_wr;
            let bytes = 1u64 << (u32::from(q.log_depth) + u32::from(q.log_wqe_size)).min(32);
            if !depth_ok || !self.page_list_ok(&q.ring, bytes) {
                return (hw::AQ_BAD_PARAM, 0);
            }
            if let Err(e) = pages::validate(mem, &q.ring) {
                return (e.status(), 0);
            }
            new.wq = WorkQueue {
                pi: srq.wq.pi,
                ci: srq.wq.ci,
                ..WorkQueue::new(&q)
            };
        } else if p.log_depth != 0 || p.ring != hw::PageList::default() {
            return (hw::AQ_BAD_PARAM, 0);
        }
        if p.attr_mask & hw::SRQ_ATTR_LIMIT != 0 {
            if p.srq_limit > new.max_wr() {
                return (hw::AQ_BAD_PARAM, 0);
            }
            new.limit = p.srq_limit;
        }
        if let Some(s) = self.srqs.get_index_mut(p.srqn) {
            *s = new;
        }
        debug!(
            srqn = p.srqn,
            max_wr = new.max_wr(),
            limit = new.limit,
            "SRQ modified"
        );
        (hw::AQ_OK, 0)
    }

    /// `CMD_QUERY_SRQ`: writes the SRQ's attributes.
    pub(super) fn query_srq(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::QuerySrqParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let Some(srq) = self.srqs.get_index(p.srqn) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if p.resp_len == 0 {
            return (hw::AQ_BAD_PARAM, 0);
        }
        let a = hw::SrqAttrs {
            max_wr: srq.max_wr(),
            max_sge: u32::from(srq.max_sge),
            srq_limit: srq.limit,
            wqe_count: u32::from(srq.count()),
        };
        Self::respond(mem, p.resp_addr, p.resp_len, &a.encode())
    }

    /// `CMD_DESTROY_SRQ`: `AQ_BAD_PARAM` if there is no such SRQ or a QP still uses it.
    pub(super) fn destroy_srq(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::NumParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if self.qps.iter().any(|(_, qp)| qp.srqn == Some(p.num)) {
            return (hw::AQ_BAD_PARAM, 0);
        }
        match self.srqs.remove_index(p.num) {
            Some(_) => {
                debug!(srqn = p.num, "SRQ destroyed");
                (hw::AQ_OK, 0)
            }
            None => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// A `DB_SRQ` doorbell from the page that owns SRQ `srqn` (checked by the caller): WQEs
    /// up to `pi` are posted. A QP attached to it that waits to retry an RNR NAK towards
    /// it (loopback) sends again.
    pub(super) fn srq_doorbell(&mut self, srqn: u32, pi: u16, mem: &dyn Dma, irq: &dyn Interrupts) {
        let Some(srq) = self.srqs.get_index_mut(srqn) else {
            return;
        };
        // At most `depth - 1` WQEs are posted and not taken.
        if pi.wrapping_sub(srq.wq.ci) >= srq.wq.depth() {
            let ci = srq.wq.ci;
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                srqn,
                pi,
                ci,
                "SRQ doorbell beyond the ring: ignored"
            );
            return;
        }
        srq.wq.pi = pi;
        self.doorbells += 1;
        if self.ud_waiting() {
            self.ud_retry(std::time::Instant::now(), mem, irq);
        }
        // One pass over the QPs: those waiting for an RNR retry towards a QP of this NIC
        // that is attached to this SRQ.
        let waiting: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| {
                q.dp.rnr_wait.is_some()
                    && self.is_own(&q.attr.ah)
                    && self
                        .qp(q.attr.dest_qp_num)
                        .is_some_and(|d| d.srqn == Some(srqn))
            })
            .map(|(i, _)| i + hw::QPN_FIRST)
            .collect();
        for qpn in waiting {
            self.retry_now(qpn, mem, irq);
        }
    }

    /// Takes the next WQE of SRQ `srqn` for QP `qpn` (which `qp` is a copy of), with its
    /// buffers translated if `sges`: as [`Nic::claim_recv`] does for a QP's own receive
    /// queue. No WQE: an RNR NAK with the QP's timer. A WQE the NIC cannot read or
    /// that is malformed is taken and completes in error on QP `qpn` (which goes to
    /// `ERR`): `NAK remote operational error`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the QP, the SRQ and their context"
    )]
    pub(super) fn srq_claim(
        &mut self,
        qpn: u32,
        qp: &Qp,
        srqn: u32,
        sges: bool,
        gated: &dyn Dma,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Result<Claim, Answer> {
        let Some(srq) = self.srqs.get_index(srqn).copied() else {
            return Err(Answer::Nak(NakCode::InvalidRequest));
        };
        if srq.count() == 0 {
            return Err(Answer::Rnr(qp.attr.min_rnr_timer));
        }
        let slot = srq.head;
        let mask = srq.wq.depth().wrapping_sub(1);
        let raw = wqe_bytes(gated, &srq.wq, slot);
        let next = raw
            .as_deref()
            .and_then(hw::SrqWqe::next_of)
            .unwrap_or(slot.wrapping_add(1))
            & mask;
        if let Some(s) = self.srqs.get_index_mut(srqn) {
            s.head = next;
            s.wq.ci = s.wq.ci.wrapping_add(1);
        }
        self.srq_limit_check(srqn, mem, irq);
        let fail = |nic: &mut Self, status| {
            bounded_warn!(
                nic.counters,
                Anomaly::BadWqe,
                qpn,
                srqn,
                slot,
                status,
                "SRQ WQE refused: error completion"
            );
            nic.complete_recv(qpn, slot, status, hw::WC_RECV, 0, None, 0, mem, irq);
            Err(Answer::Nak(NakCode::RemoteOp))
        };
        let Some(raw) = raw else {
            return fail(self, hw::WC_LOC_QP_OP_ERR);
        };
        let Some(wqe) = hw::SrqWqe::decode(&raw).filter(|w| w.num_sge <= srq.max_sge) else {
            return fail(self, hw::WC_LOC_QP_OP_ERR);
        };
        let n = if sges { wqe.num_sge } else { 0 };
        match self.recv_buffers(gated, &raw, n, srq.pdn) {
            Ok((data, cap)) => Ok((slot, data, cap)),
            Err(status) => fail(self, status),
        }
    }

    /// After a WQE was taken from SRQ `srqn`: if its limit is armed and the WQEs left fell
    /// below it, `EVENT_SRQ_LIMIT_REACHED` and the limit is disarmed.
    fn srq_limit_check(&mut self, srqn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        let Some(s) = self.srqs.get_index_mut(srqn) else {
            return;
        };
        if s.limit != 0 && u32::from(s.count()) < s.limit {
            debug!(srqn, limit = s.limit, "SRQ limit reached");
            s.limit = 0;
            self.post_event(hw::EVENT_SRQ_LIMIT_REACHED, srqn, 0, mem, irq);
        }
    }
}
