//! UC, the unreliable connected transport, in the one engine: the requester, responder
//! and completer of RC with the transport's differences (soft-RoCE's `IB_QPT_UC` cases).
//!
//! - Requester ([`super::flights`]): UC opcodes (RC's plus [`packet::UC`]), SEND, SEND with
//!   immediate, WRITE and WRITE with immediate only (a READ or atomic WQE completes with
//!   `LOC_QP_OP_ERR`), no AckReq, no transport timer and no retransmission: a WQE completes
//!   successfully once its last packet is out. One call sends at most a window of packets;
//!   the timer sends the rest.
//! - Completer: nothing comes back; an answer to a UC QP is ignored.
//! - Responder (here, then the responder of RC): no ACK or NAK is ever sent. A packet that
//!   starts a message (SEND or WRITE first or only) is taken whatever its PSN: the
//!   responder's PSN follows it, and a message in progress is abandoned (its receive WQE
//!   is used again by the next SEND, nothing is completed). Any other packet must carry the
//!   next PSN of the message in progress; else it is dropped, and so is every packet after
//!   it until a message starts (a lost packet loses its message). A request the RC
//!   responder would NAK or RNR NAK (no receive WQE, a remote access error) drops its
//!   message too, silently: the QP stays as it was. Local errors of a receive WQE (a
//!   malformed WQE, its buffer refused, a message longer than its buffers) complete it in
//!   error and move the QP to `ERR`, as on RC. Each packet dropped is counted
//!   (`uc_dropped` in the control channel's `status`).

use tracing::debug;

use super::completer::Answer;
use super::data::{Data, Pos};
use super::packet::{self, Packet};
use super::qp::Qp;
use super::{Interrupts, Nic};
use crate::mem::Dma;

impl Nic {
    /// A UC request `pkt` (its UC opcode) for QP `qpn` (a copy of it in `qp`, live and
    /// connected to the sender), its payload `body`; `count` > 1: that many `WRITE_MIDDLE`
    /// packets from the NIC itself.
    #[allow(clippy::too_many_arguments, reason = "the packet and its context")]
    pub(super) fn uc_request(
        &mut self,
        qpn: u32,
        qp: &Qp,
        pkt: &Packet,
        body: Data,
        count: u64,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let mut p = *pkt;
        p.bth.opcode = packet::operation(pkt.bth.opcode);
        if !self.uc_in_sequence(qpn, qp, &p) {
            self.uc_dropped = self.uc_dropped.saturating_add(1);
            return;
        }
        let mut inb = std::mem::take(&mut self.wire_qps.entry(qpn).or_default().inb);
        let n = body.len();
        let mut pos = Pos::default();
        let payload = Some((&body, &mut pos, n));
        let peer = qp.attr.dest_qp_num;
        let answer = if count > 1 && p.bth.opcode == packet::WRITE_MIDDLE {
            self.deliver_middles(peer, qpn, p.bth.psn, count, payload, &mut inb, mem, irq)
        } else {
            self.deliver(peer, &p, payload, &mut inb, mem, irq)
        };
        if let Some(r) = self.wire_qps.get_mut(&qpn) {
            r.inb = inb;
        }
        if !matches!(answer, Answer::Ack | Answer::Drop) {
            debug!(qpn, psn = p.bth.psn, ?answer, "UC: the message is dropped");
            self.uc_dropped = self.uc_dropped.saturating_add(1);
            self.uc_abandon(qpn, true);
        }
    }

    /// Whether UC request `pkt` (its operation's opcode) is taken at QP `qpn`: a packet
    /// that starts a message always (the responder's PSN then follows it, and a message in
    /// progress is abandoned); another one only at the expected PSN of a message not being
    /// dropped (else the message is dropped up to the next one that starts).
    fn uc_in_sequence(&mut self, qpn: u32, qp: &Qp, pkt: &Packet) -> bool {
        let start = packet::starts_message(pkt.bth.opcode);
        let dropping = self.wire_qps.get(&qpn).is_some_and(|r| r.uc_drop);
        if !start && !dropping && pkt.bth.psn == qp.attr.rq_psn {
            return true;
        }
        if !start {
            debug!(
                qpn,
                psn = pkt.bth.psn,
                want = qp.attr.rq_psn,
                "UC: packet dropped"
            );
        }
        self.uc_abandon(qpn, !start);
        if start {
            if let Some(q) = self.qp_mut(qpn) {
                q.attr.rq_psn = pkt.bth.psn;
            }
        }
        start
    }

    /// Abandons QP `qpn`'s message in progress (its receive WQE stays the next one);
    /// with `drop`, the packets up to the next message's start are dropped.
    fn uc_abandon(&mut self, qpn: u32, drop: bool) {
        let r = self.wire_qps.entry(qpn).or_default();
        r.inb.abandon();
        r.uc_drop = drop;
        if let Some(q) = self.qp_mut(qpn) {
            q.dp.write = None;
        }
    }
}
