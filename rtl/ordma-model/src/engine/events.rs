//! The event queue: a ring in host memory the NIC writes events into.
//!
//! The driver consumes entries by phase bit and writes its consumer index to `EQ_DB`, with
//! `ARM` to get MSI-X vector 1 for the next event. A full ring drops the event and counts
//! it; it never overwrites. While bus mastering is off, events wait in a small FIFO on the
//! NIC (full: dropped and counted).

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
}

impl EventQueue {
    /// An empty queue of `depth` entries at `base` (already validated).
    pub(super) fn new(base: u64, depth: u16) -> Self {
        Self {
            base,
            depth,
            prod: 0,
            cons: 0,
            armed: false,
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

    /// Writes an event; drops it (and counts) if the queue is full. Held while bus
    /// mastering is off.
    pub(super) fn post_event(
        &mut self,
        kind: u8,
        data: u32,
        data2: u64,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        if self.eq.is_none() {
            return;
        }
        if !self.bus_master {
            if self.deferred_events.len() < EVENT_FIFO {
                self.deferred_events.push_back((kind, data, data2));
                self.refused("event");
            } else {
                bounded_warn!(
                    self.counters,
                    Anomaly::EventDropped,
                    kind,
                    "the NIC's event FIFO is full (bus mastering off): event dropped"
                );
            }
            return;
        }
        let mem = self.gate(mem);
        let Some(eq) = self.eq.as_mut() else { return };
        if eq.prod.wrapping_sub(eq.cons) >= eq.depth {
            bounded_warn!(
                self.counters,
                Anomaly::EventDropped,
                kind,
                "event queue full: event dropped"
            );
            return;
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
            return;
        }
        eq.prod = eq.prod.wrapping_add(1);
        self.events_posted += 1;
        debug!(kind, data, "event posted");
        if eq.armed {
            eq.armed = false;
            self.interrupt(hw::VECTOR_EVENT, irq);
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
        eq.cons = cons;
        if value & hw::EQ_DB_ARM != 0 {
            if eq.prod != eq.cons {
                self.interrupt(hw::VECTOR_EVENT, irq);
            } else {
                eq.armed = true;
            }
        }
    }
}
