//! Completion queues: `CMD_CREATE_CQ`, `CMD_RESIZE_CQ` (1.7), `CMD_DESTROY_CQ`, arming,
//! and the data path's writing of completions.
//!
//! A CQ is a ring of `2^log_depth` CQEs in host memory (a page list, as the driver pinned
//! it) plus an 8-byte doorbell record in host memory where the consumer publishes its
//! consumer index. The NIC reads the record only when the ring looks full by the index it
//! last saw. Arming is a doorbell (`DB_CQ_ARM`, `DB_CQ_ARM_SOLICITED`) carrying the
//! consumer index: if completions past it exist already, the NIC posts
//! `EVENT_CQ_COMPLETION` at once, else with the next (solicited) completion. One event per
//! arm, and only for news: an arm with the consumer index and producer index of the CQ's
//! last event (nothing polled, nothing new since) posts nothing and stays armed for the
//! next completion. At most one completion event per CQ is in the event queue at a time:
//! one due while the last is still unconsumed is owed, and posted when the driver's
//! `EQ_DB` passes that one ([`Nic::cq_events_consumed`]). So a consumer re-arming in a loop
//! costs the event queue nothing, and the queue is sized by the CQs, not by the arms.

use ordma_hw as hw;
use tracing::debug;

use super::counters::{bounded_warn, Anomaly};
use super::pages;
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// What an armed CQ waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    /// Not armed.
    Off,
    /// The next completion.
    Next,
    /// The next solicited or error completion.
    Solicited,
}

/// A completion queue on the NIC.
#[derive(Clone, Copy, Debug)]
pub struct Cq {
    /// The doorbell page (user context) that owns it.
    pub db_page: u32,
    /// log2 of its depth.
    pub log_depth: u8,
    /// log2 of its CQE size.
    pub log_cqe_size: u8,
    /// The ring's pages.
    pub ring: hw::PageList,
    /// Bus address of its doorbell record.
    pub db_record: u64,
    /// CQEs written (free-running, mod 2^16).
    pub(super) pi: u16,
    /// The consumer index last seen (arm doorbell or record).
    pub(super) ci: u16,
    /// Arming.
    pub(super) arm: Arm,
    /// Overran or lost its ring: takes no more completions.
    pub(super) broken: bool,
    /// The producer and consumer indexes when its last completion event was posted.
    pub(super) ev_at: (u16, u16),
    /// Its last completion event is in the event queue, not yet consumed by the driver.
    pub(super) ev_pending: bool,
    /// An event came due while one was pending: posted once that one is consumed.
    pub(super) ev_owed: bool,
}

impl Cq {
    /// Its depth in CQEs.
    pub fn depth(&self) -> u16 {
        1u16.checked_shl(u32::from(self.log_depth)).unwrap_or(0)
    }
}

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

impl Nic {
    /// CQs existing now, for logs and tests.
    pub fn cqs_in_use(&self) -> u32 {
        self.cqs.in_use()
    }

    /// `CMD_CREATE_CQ`: the result is the CQN.
    pub(super) fn create_cq(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::CreateCqParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let depth_ok = (1..=hw::MAX_QUEUE_LOG_DEPTH).contains(&p.log_depth)
            && (1u32 << p.log_depth) <= self.config.attrs.max_cqe;
        let cqe_ok = (hw::CQE_LOG_SIZE_MIN..=hw::CQE_LOG_SIZE_MAX).contains(&p.log_cqe_size);
        // At most 2^(15 + 6) bytes once both are in range.
        let bytes = 1u64 << (u32::from(p.log_depth) + u32::from(p.log_cqe_size)).min(32);
        if p.db_page >= hw::DB_PAGES
            || !depth_ok
            || !cqe_ok
            || !self.page_list_ok(&p.ring, bytes)
            || p.db_record % hw::CQ_DB_RECORD_SIZE != 0
        {
            return (hw::AQ_BAD_PARAM, 0);
        }
        if !mem.reachable(p.db_record, hw::CQ_DB_RECORD_SIZE) {
            return (hw::AQ_BAD_ADDRESS, 0);
        }
        if self.cqs.is_full() {
            return (hw::AQ_NO_RESOURCES, 0);
        }
        if let Err(e) = pages::validate(mem, &p.ring) {
            return (e.status(), 0);
        }
        let cq = Cq {
            db_page: p.db_page,
            log_depth: p.log_depth,
            log_cqe_size: p.log_cqe_size,
            ring: p.ring,
            db_record: p.db_record,
            pi: 0,
            ci: 0,
            arm: Arm::Off,
            broken: false,
            ev_at: (0, 0),
            ev_pending: false,
            ev_owed: false,
        };
        match self.cqs.insert(cq) {
            Some(h) => {
                debug!(cqn = h.index, db_page = p.db_page, "CQ created");
                (hw::AQ_OK, u64::from(h.index))
            }
            None => (hw::AQ_NO_RESOURCES, 0),
        }
    }

    /// `CMD_DESTROY_CQ`: `AQ_BAD_PARAM` if no such CQ or a QP still uses it.
    pub(super) fn destroy_cq(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::NumParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let used = self
            .qps
            .iter()
            .any(|(_, qp)| qp.send_cqn == p.num || qp.recv_cqn == p.num);
        if used {
            return (hw::AQ_BAD_PARAM, 0);
        }
        match self.cqs.remove_index(p.num) {
            Some(_) => {
                // Its event still in the queue names a CQ that is gone, not the next one
                // made with its number.
                self.forget_cq_events(p.num);
                debug!(cqn = p.num, "CQ destroyed");
                (hw::AQ_OK, 0)
            }
            None => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// `CMD_RESIZE_CQ` (1.7): moves CQ `cqn` to a new ring; the result is its producer
    /// index (the CQEs written so far, mod 2^16).
    ///
    /// From here on CQE `i` goes to slot `i mod` the new depth, with the new ring's phase
    /// for it; the old ring is never written again. The consumer, which holds its CQ's lock
    /// across the command, copies the CQEs it has not polled (from its record's index up to
    /// the result) into the new ring itself: they must fit, or the CQ stays as it was
    /// (`AQ_BAD_PARAM`), as it does for a broken CQ, a depth out of range or a page list of
    /// the wrong shape (`AQ_BAD_ADDRESS` for one the NIC cannot read, or an unreadable
    /// record). The doorbell record, the counts and the arming stay.
    pub(super) fn resize_cq(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::ResizeCqParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let Some(&cq) = self.cqs.get_index(p.cqn) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let depth_ok = (1..=hw::MAX_QUEUE_LOG_DEPTH).contains(&p.log_depth)
            && (1u32 << p.log_depth) <= self.config.attrs.max_cqe;
        let bytes = 1u64 << (u32::from(p.log_depth) + u32::from(cq.log_cqe_size)).min(32);
        if cq.broken || !depth_ok || !self.page_list_ok(&p.ring, bytes) {
            return (hw::AQ_BAD_PARAM, 0);
        }
        if let Err(e) = pages::validate(mem, &p.ring) {
            return (e.status(), 0);
        }
        let mut rec = [0u8; 8];
        if self.gate(mem).dma_read(cq.db_record, &mut rec).is_err() {
            return (hw::AQ_BAD_ADDRESS, 0);
        }
        // CAST: the record's index is free-running mod 2^16 in its low half.
        let ci = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]) as u16;
        let unpolled = cq.pi.wrapping_sub(ci);
        // A record past the producer is nonsense; more unpolled CQEs than the new ring
        // holds do not fit.
        if unpolled > cq.depth() || u32::from(unpolled) > 1u32 << p.log_depth {
            return (hw::AQ_BAD_PARAM, 0);
        }
        if let Some(c) = self.cqs.get_index_mut(p.cqn) {
            c.log_depth = p.log_depth;
            c.ring = p.ring;
            c.ci = ci;
        }
        debug!(
            cqn = p.cqn,
            log_depth = p.log_depth,
            pi = cq.pi,
            "CQ resized"
        );
        (hw::AQ_OK, u64::from(cq.pi))
    }

    /// Whether `list` is a page list the NIC takes for a ring of `bytes`: a consistent
    /// shape, a page size in `page_size_cap`, exactly the pages the ring needs.
    pub(super) fn page_list_ok(&self, list: &hw::PageList, bytes: u64) -> bool {
        let ps = list.page_shift;
        let cap_ok = 1u64
            .checked_shl(u32::from(ps))
            .is_some_and(|bit| self.config.attrs.page_size_cap & bit != 0);
        list.shape_ok() && cap_ok && pages::pages_for(bytes, ps) == u64::from(list.npages)
    }

    /// A CQ arm doorbell from the page that owns CQ `cqn` (checked by the caller):
    /// `ci` is the consumer index, `arm` what to wait for.
    pub(super) fn arm_cq(
        &mut self,
        cqn: u32,
        ci: u16,
        arm: Arm,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let Some(cq) = self.cqs.get_index_mut(cqn) else {
            return;
        };
        // The consumer may not pass the producer.
        if cq.pi.wrapping_sub(ci) > cq.depth() {
            let pi = cq.pi;
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                cqn,
                ci,
                pi,
                "CQ arm beyond the producer: ignored"
            );
            return;
        }
        cq.ci = ci;
        self.doorbells += 1;
        // Completions past the consumer, and news since the last event (a completion or
        // the consumer's progress): an event now. Otherwise armed for the next completion.
        if cq.pi != ci && (cq.pi, ci) != cq.ev_at {
            self.cq_event_due(cqn, mem, irq);
        } else {
            cq.arm = arm;
            if cq.pi != ci {
                self.cq_events_coalesced += 1;
            }
        }
    }

    /// A completion event is due for CQ `cqn` (an arm found completions past the consumer,
    /// or a completion met its arm): the arm is spent, and the event posted now, or owed
    /// while the CQ's last one is still in the event queue.
    fn cq_event_due(&mut self, cqn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        let Some(cq) = self.cqs.get_index_mut(cqn) else {
            return;
        };
        cq.arm = Arm::Off;
        if cq.ev_pending {
            cq.ev_owed = true;
            self.cq_events_coalesced += 1;
            return;
        }
        cq.ev_at = (cq.pi, cq.ci);
        let posted = self.post_event(hw::EVENT_CQ_COMPLETION, cqn, 0, mem, irq);
        if let Some(cq) = self.cqs.get_index_mut(cqn) {
            cq.ev_pending = posted;
        }
    }

    /// The driver consumed the completion event of CQ `cqn` (its `EQ_DB` passed it): an
    /// owed event goes out now.
    pub(super) fn cq_event_consumed(&mut self, cqn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        let Some(cq) = self.cqs.get_index_mut(cqn) else {
            return;
        };
        cq.ev_pending = false;
        if std::mem::take(&mut cq.ev_owed) {
            self.cq_event_due(cqn, mem, irq);
        }
    }

    /// Writes one completion (`cqe`, exactly the CQ's CQE size) into CQ `cqn`; raises
    /// `EVENT_CQ_COMPLETION` if the CQ is armed for it. The data path's entry point.
    ///
    /// Returns false if the CQE was not written: no such CQ, a wrong size, or the CQ is
    /// broken. A full ring (after re-reading the doorbell record) or an unreachable ring
    /// breaks the CQ and posts `EVENT_CQ_ERROR`.
    pub fn post_cqe(
        &mut self,
        cqn: u32,
        cqe: &[u8],
        solicited: bool,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> bool {
        let gated = self.gate(mem);
        let Some(cq) = self.cqs.get_index_mut(cqn) else {
            return false;
        };
        let size = 1usize << cq.log_cqe_size.min(hw::CQE_LOG_SIZE_MAX);
        if cq.broken || cqe.len() != size || cq.depth() == 0 {
            return false;
        }
        let depth = cq.depth();
        if cq.pi.wrapping_sub(cq.ci) >= depth {
            // Full by what we saw: the consumer may have moved on since.
            let mut rec = [0u8; 8];
            if gated.dma_read(cq.db_record, &mut rec).is_ok() {
                // CAST: the record's index is free-running mod 2^16 in its low half.
                let ci = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]) as u16;
                if cq.pi.wrapping_sub(ci) <= depth {
                    cq.ci = ci;
                }
            }
        }
        let reason = if cq.pi.wrapping_sub(cq.ci) >= depth {
            Some(hw::CQ_ERR_OVERRUN)
        } else {
            let off = u64::from(cq.pi % depth) << cq.log_cqe_size;
            let shift = cq.ring.page_shift.min(63);
            let ring = cq.ring;
            pages::page_addr(&gated, &ring, off >> shift)
                .ok()
                .and_then(|page| page.checked_add(off % (1u64 << shift)))
                .filter(|&addr| {
                    gated
                        .dma_write_entry(addr, cqe, hw::CQE_OWNER_OFFSET)
                        .is_ok()
                })
                .map_or(Some(hw::CQ_ERR_DMA), |_| None)
        };
        if let Some(reason) = reason {
            cq.broken = true;
            bounded_warn!(
                self.counters,
                Anomaly::BadAddress,
                cqn,
                reason,
                "CQ overrun or ring unreachable: CQ error"
            );
            self.post_event(hw::EVENT_CQ_ERROR, cqn, reason, mem, irq);
            return false;
        }
        cq.pi = cq.pi.wrapping_add(1);
        let fire = cq.arm == Arm::Next || (cq.arm == Arm::Solicited && solicited);
        if fire {
            self.cq_event_due(cqn, mem, irq);
        }
        true
    }

    /// Writes completion `cqe` into CQ `cqn` with the phase of its slot (the owner byte
    /// last); as [`Nic::post_cqe`] otherwise.
    pub(super) fn post_completion(
        &mut self,
        cqn: u32,
        cqe: &hw::Cqe,
        solicited: bool,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> bool {
        let Some(cq) = self.cqs.get_index(cqn) else {
            return false;
        };
        let mut slot = vec![0u8; 1usize << cq.log_cqe_size.min(hw::CQE_LOG_SIZE_MAX)];
        if let Some(head) = slot.get_mut(..hw::CQE_OWNER_OFFSET) {
            head.copy_from_slice(&cqe.encode());
        }
        if let Some(owner) = slot.get_mut(hw::CQE_OWNER_OFFSET) {
            *owner = hw::cqe_phase(u32::from(cq.pi), cq.log_depth);
        }
        self.post_cqe(cqn, &slot, solicited, mem, irq)
    }
}
