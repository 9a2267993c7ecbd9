//! The doorbell pages in BAR2: one 4 KiB page per user context, page 0 the kernel's.
//!
//! Every doorbell is a 32-bit write of `num << 16 | index` at a fixed offset of the page
//! (`hw::DB_SQ`, `hw::DB_RQ`, `hw::DB_CQ_ARM`, `hw::DB_CQ_ARM_SOLICITED`, `hw::DB_SRQ`). A doorbell
//! reaches a queue only from the page that owns it: one on another page is ignored and
//! counted (`foreign_doorbells`), so one process cannot drive another's queues. A doorbell
//! for a queue that does not exist, an index out of range, an unknown offset or a
//! malformed access is ignored and counted (`bad_doorbells`, `bad_accesses`): user space
//! writes these pages, and nothing it writes stops the NIC.

use ordma_hw as hw;

use super::counters::{bounded_warn, Anomaly};
use super::cq::Arm;
use super::qp::qp_index;
use super::{Interrupts, Nic};
use crate::mem::Dma;

impl Nic {
    /// Doorbells accepted since reset, for logs and tests.
    pub fn doorbells_accepted(&self) -> u64 {
        self.doorbells
    }

    /// The 32-bit writes each doorbell page took since the model started, accepted or not
    /// (the control channel's `doorbell-pages`).
    pub fn doorbell_page_writes(&self) -> &[u64] {
        &self.db_page_writes
    }

    /// A guest write of BAR2 (`size` bytes at `offset`); a dead NIC
    /// ([`super::Death::Silent`]) ignores it without counting it.
    pub fn doorbell_write(
        &mut self,
        offset: u64,
        size: usize,
        value: u32,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        if self.dead {
            return;
        }
        if size != 4 || offset % 4 != 0 || offset >= hw::BAR2_SIZE as u64 {
            bounded_warn!(
                self.counters,
                Anomaly::BadAccess,
                offset,
                size,
                "unaligned, non-32-bit or out-of-range doorbell write ignored"
            );
            return;
        }
        // CAST: below BAR2_SIZE, so both fit.
        let page = (offset / hw::DB_PAGE_SIZE as u64) as u32;
        let reg = (offset % hw::DB_PAGE_SIZE as u64) as usize;
        if let Some(n) = self.db_page_writes.get_mut(page as usize) {
            *n += 1;
        }
        let num = value >> 16;
        // CAST: the index is the low 16 bits by definition.
        let index = value as u16;
        if self.status & hw::STATUS_ENABLED == 0 {
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                page,
                reg,
                value,
                "doorbell while the NIC is not enabled: ignored"
            );
            return;
        }
        let owner = match reg {
            hw::DB_SQ | hw::DB_RQ => qp_index(num)
                .and_then(|i| self.qps.get_index(i))
                .map(|qp| qp.db_page),
            hw::DB_CQ_ARM | hw::DB_CQ_ARM_SOLICITED => self.cqs.get_index(num).map(|cq| cq.db_page),
            hw::DB_SRQ => self.srq(num).map(|srq| srq.db_page),
            _ => None,
        };
        let Some(owner) = owner else {
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                page,
                reg,
                value,
                "doorbell for no queue, or at an unknown offset: ignored"
            );
            return;
        };
        if owner != page {
            bounded_warn!(
                self.counters,
                Anomaly::ForeignDoorbell,
                page,
                owner,
                reg,
                num,
                "doorbell for a queue another context owns: ignored"
            );
            return;
        }
        match reg {
            hw::DB_CQ_ARM => self.arm_cq(num, index, Arm::Next, mem, irq),
            hw::DB_CQ_ARM_SOLICITED => self.arm_cq(num, index, Arm::Solicited, mem, irq),
            hw::DB_SRQ => self.srq_doorbell(num, index, mem, irq),
            _ => self.wq_doorbell(num, reg == hw::DB_SQ, index, mem, irq),
        }
    }

    /// An SQ or RQ doorbell from the page that owns QP `qpn`: the new producer index. The
    /// NIC validates and latches it, then the data path runs: an SQ's new WQEs are sent (in
    /// `RTS`; held in `SQD` and `SQE`), a QP in `ERR` flushes them, a new receive wakes
    /// the QPs waiting for an RNR retry towards this one.
    fn wq_doorbell(&mut self, qpn: u32, send: bool, pi: u16, mem: &dyn Dma, irq: &dyn Interrupts) {
        let Some(qp) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) else {
            return;
        };
        let state = qp.state;
        // Sends from RTS on (and SQD/SQE/ERR, where the data path flushes or holds them);
        // receives from INIT on.
        let state_ok = if send {
            state >= hw::QPS_RTS
        } else {
            state >= hw::QPS_INIT
        };
        let wq = if send {
            Some(&mut qp.sq)
        } else {
            qp.rq.as_mut()
        };
        match wq {
            Some(wq) if state_ok && pi.wrapping_sub(wq.ci) <= wq.depth() => {
                wq.pi = pi;
                self.doorbells += 1;
                if send || state == hw::QPS_ERR {
                    self.run_sq(qpn, mem, irq);
                } else {
                    self.rnr_wake(qpn, mem, irq);
                }
            }
            _ => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadDoorbell,
                    qpn,
                    send,
                    pi,
                    state,
                    "work queue doorbell beyond the ring, in a state that takes none, or for no RQ: ignored"
                );
            }
        }
    }
}
