//! The event queue: a ring in host memory the NIC writes events into.
//!
//! The driver consumes entries by phase bit and writes its consumer index to `EQ_DB`, with
//! `ARM` to get MSI-X vector 1 for the next event. The ring's last free slot is kept for
//! `EVENT_FATAL`: an event due when only that one is free is an overrun, counted
//! (`events_dropped`) and fatal (`ERR_EVENT_OVERRUN`, told in that slot); the NIC never
//! overwrites an entry and never drops one silently. Completion events cannot overrun it:
//! at most one per CQ is in the ring ([`super::cq`]), so a ring deeper than the CQs plus
//! the asynchronous events in flight holds them all. While bus mastering is off, events
//! wait in a small FIFO on the NIC (full: dropped and counted).

use ordma_hw as hw;
use tracing::debug;

use super::counters::{bounded_warn, Anomaly};
use super::{Interrupts, Nic, EVENT_FIFO};
use crate::mem::Dma;

/// The event queue, once enabled.
#[derive(Debug)]
pub(super) struct EventQueue {
    base: u64,
    depth: u16,
    prod: u16,
    cons: u16,
    armed: bool,
    /// The CQ whose completion event each slot holds ([`NO_CQ`] for other events).
    cq_of_slot: Vec<u32>,
}

/// A slot of [`EventQueue::cq_of_slot`] that holds no completion event.
const NO_CQ: u32 = u32::MAX;

impl EventQueue {
    /// An empty queue of `depth` entries at `base` (already validated).
    pub(super) fn new(base: u64, depth: u16) -> Self {
        Self {
            base,
            depth,
            prod: 0,
            cons: 0,
            armed: false,
            cq_of_slot: vec![NO_CQ; usize::from(depth)],
        }
    }
}

impl Nic {
    /// Events in the event queue the driver has not consumed yet (its `EQ_DB` consumer
    /// index behind the producer); 0 without a queue.
    pub fn events_unread(&self) -> u16 {
        self.eq
            .as_ref()
            .map_or(0, |eq| eq.prod.wrapping_sub(eq.cons))
    }

    /// Writes an event, or holds it while bus mastering is off. Returns whether it was
    /// written or held: not when there is no event queue, the FIFO of held events is full
    /// (counted), or the queue overran (counted, and fatal: [`hw::ERR_EVENT_OVERRUN`]).
    pub(super) fn post_event(
        &mut self,
        kind: u8,
        data: u32,
        data2: u64,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> bool {
        if self.eq.is_none() {
            return false;
        }
        if !self.bus_master {
            if self.deferred_events.len() < EVENT_FIFO {
                self.deferred_events.push_back((kind, data, data2));
                self.refused("event");
                return true;
            }
            bounded_warn!(
                self.counters,
                Anomaly::EventDropped,
                kind,
                "the NIC's event FIFO is full (bus mastering off): event dropped"
            );
            return false;
        }
        let mem = self.gate(mem);
        let Some(eq) = self.eq.as_mut() else {
            return false;
        };
        let unread = eq.prod.wrapping_sub(eq.cons);
        // The last free slot is EVENT_FATAL's.
        if unread >= eq.depth || (kind != hw::EVENT_FATAL && unread >= eq.depth - 1) {
            bounded_warn!(
                self.counters,
                Anomaly::EventDropped,
                kind,
                unread,
                "event queue overrun: event dropped, the NIC stops (fatal)"
            );
            self.fatal(hw::ERR_EVENT_OVERRUN, &mem, irq);
            return false;
        }
        let e = hw::Event {
            kind,
            phase: hw::phase(eq.prod, eq.depth),
            data,
            data2,
        };
        let addr = eq.base + u64::from(eq.prod % eq.depth) * hw::EQE_SIZE as u64;
        if mem
            .dma_write_entry(addr, &e.encode(), hw::EQE_FLAGS_OFFSET)
            .is_err()
        {
            // The event queue itself is gone: stop, without an event to tell.
            self.eq = None;
            self.error = hw::ERR_QUEUE_DMA;
            self.status = (self.status | hw::STATUS_FATAL) & !hw::STATUS_ENABLED;
            self.aq = None;
            bounded_warn!(
                self.counters,
                Anomaly::BadAddress,
                addr,
                "event queue write failed: fatal"
            );
            return false;
        }
        if let Some(c) = eq.cq_of_slot.get_mut(usize::from(eq.prod % eq.depth)) {
            *c = if kind == hw::EVENT_CQ_COMPLETION {
                data
            } else {
                NO_CQ
            };
        }
        eq.prod = eq.prod.wrapping_add(1);
        self.events_posted += 1;
        debug!(kind, data, "event posted");
        if eq.armed {
            eq.armed = false;
            self.interrupt(hw::VECTOR_EVENT, irq);
        }
        true
    }

    /// CQ `cqn` is destroyed: its completion events still unconsumed in the queue no longer
    /// name a CQ (a new CQ with its number owes nothing to them).
    pub(super) fn forget_cq_events(&mut self, cqn: u32) {
        let Some(eq) = self.eq.as_mut() else { return };
        let mut i = eq.cons;
        while i != eq.prod {
            if let Some(c) = eq.cq_of_slot.get_mut(usize::from(i % eq.depth)) {
                if *c == cqn {
                    *c = NO_CQ;
                }
            }
            i = i.wrapping_add(1);
        }
    }

    /// A write of `EQ_DB`: the consumer index and `ARM`. Needs no DMA.
    pub(super) fn event_doorbell(&mut self, value: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        let Some(eq) = self.eq.as_mut() else {
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                value,
                "EQ doorbell while the event queue is off"
            );
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        };
        // CAST: the consumer index is the low 16 bits by definition.
        let cons = value as u16;
        // The consumer may not pass the producer.
        if cons.wrapping_sub(eq.cons) > eq.prod.wrapping_sub(eq.cons) {
            let prod = eq.prod;
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                cons,
                prod,
                "EQ doorbell beyond the producer"
            );
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        }
        // The completion events consumed now: their CQs may take another (O(1) each).
        let mut i = eq.cons;
        eq.cons = cons;
        let mut consumed = Vec::new();
        while i != cons {
            if let Some(c) = eq.cq_of_slot.get_mut(usize::from(i % eq.depth)) {
                if *c != NO_CQ {
                    consumed.push(std::mem::replace(c, NO_CQ));
                }
            }
            i = i.wrapping_add(1);
        }
        if value & hw::EQ_DB_ARM != 0 {
            if eq.prod != eq.cons {
                self.interrupt(hw::VECTOR_EVENT, irq);
            } else {
                eq.armed = true;
            }
        }
        for cqn in consumed {
            self.cq_event_consumed(cqn, mem, irq);
        }
    }
}
