//! Loopback: the wire from the NIC to itself. A QP whose AV names the port itself
//! ([`Nic::to_own`]: its own LID, or on an Ethernet port its own MAC) sends its packets here, through the same requester ([`super::flights`]), responder and
//! completer as the wire between NICs ([`super::remote`]): every transport is written
//! once, and loopback retransmits, NAKs and retries exactly as the wire does.
//!
//! A packet to the NIC itself is not serialized (no frame, no ICRC): it is queued in its
//! parsed form with its payload as a reference to the sender's memory (the translated
//! pieces and the MRs they came from, [`Data`]), and the responder copies straight from
//! source to destination. Consecutive `WRITE_MIDDLE` packets of one message travel as one
//! queued packet that carries `count` PSNs (the responder checks each as it would a
//! packet, [`Nic::deliver_middles`]), and so do the responses of one READ. Packets are
//! queued while the NIC acts and taken after the action ([`Nic::drain_own`]), never in a
//! nested call: up to [`SQ_BUDGET`] bytes per call, the rest at the next timer tick. A
//! queued packet whose payload's MR was destroyed meanwhile is dropped (lost), as is every
//! packet while bus mastering is off or the NIC is not enabled.

use ordma_hw as hw;
use tracing::debug;

use super::data::Data;
use super::packet::{self, Packet};
use super::port::Source;
use super::requester::SQ_BUDGET;
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// A packet from the NIC to itself.
pub(super) struct Own {
    /// The sending QP.
    pub(super) sqpn: u32,
    /// The sender as the receiver sees it (what its frame would say).
    pub(super) src: Source,
    /// The headers (the first PSN, if it carries several).
    pub(super) pkt: Packet,
    /// The payload: a reference to the sender's memory, or bytes.
    pub(super) body: Data,
    /// The PSNs it carries: consecutive `WRITE_MIDDLE` packets, or a READ's responses.
    pub(super) count: u64,
}

/// What a queued packet costs the budget at least (headers), so empty ones count too.
const HEADER_COST: u64 = 64;

impl Nic {
    /// Queues a packet from QP `sqpn` to the NIC itself, at address `to` (the port's
    /// own); lost if the port has no route for it ([`Nic::route`]: an empty source GID
    /// entry), as on the wire.
    pub(super) fn emit_own(
        &mut self,
        to: &hw::QpAh,
        sqpn: u32,
        pkt: Packet,
        body: Data,
        count: u64,
    ) {
        let Some(route) = self.route(to) else {
            debug!(sqpn, "no route (source GID entry): packet to itself lost");
            return;
        };
        self.count(sqpn, hw::CNT_SENT_PKTS, count);
        let len = usize::try_from(body.len()).unwrap_or(usize::MAX);
        let src = self.own_source(&route, &pkt, len);
        self.own.push_back(Own {
            sqpn,
            src,
            pkt,
            body,
            count,
        });
    }

    /// Whether packets to the NIC itself wait.
    pub(super) fn own_pending(&self) -> bool {
        !self.own.is_empty()
    }

    /// Forgets the queued packets from or to QP `qpn`.
    pub(super) fn own_forget(&mut self, qpn: u32) {
        self.own
            .retain(|o| o.sqpn != qpn && o.pkt.bth.dest_qp != qpn);
    }

    /// Takes the packets queued to the NIC itself, and those they cause, in order, until
    /// none is left or [`SQ_BUDGET`] bytes were taken (the rest waits for the timer). A
    /// call from inside another (an answer that sends more) returns at once: the outer
    /// loop takes what it queued.
    pub(super) fn drain_own(&mut self, mem: &dyn Dma, irq: &dyn Interrupts) {
        if self.draining {
            return;
        }
        self.draining = true;
        let mut spent = 0u64;
        while spent < SQ_BUDGET {
            let Some(o) = self.own.pop_front() else {
                break;
            };
            spent = spent.saturating_add(o.body.len().max(HEADER_COST));
            if !self.bus_master || self.status & hw::STATUS_ENABLED == 0 {
                debug!("packet to itself dropped: the NIC does not run");
                continue;
            }
            if !self.owns(&o.body) {
                debug!(sqpn = o.sqpn, "packet to itself dropped: its MR is gone");
                continue;
            }
            match o.pkt.bth.opcode {
                packet::READ_RESPONSE_FIRST
                | packet::READ_RESPONSE_MIDDLE
                | packet::READ_RESPONSE_LAST
                | packet::READ_RESPONSE_ONLY
                | packet::ACKNOWLEDGE
                | packet::ATOMIC_ACKNOWLEDGE => {
                    self.on_answer(&o.src, &o.pkt, &o.body, o.count, mem, irq)
                }
                _ => self.on_request(&o.src, &o.pkt, o.body, o.count, mem, irq),
            }
        }
        self.draining = false;
    }
}
