//! UD, the unreliable datagram transport (soft-RoCE's `IB_QPT_UD` cases).
//!
//! - Requester ([`Nic::ud_send`]): each send WQE is one datagram, SEND or SEND with
//!   immediate of at most the port's MTU, addressed by its own datagram segment
//!   ([`hw::UdSeg`]: the destination's address vector, QP and Q_Key). Its packet (BTH with
//!   a UD opcode, DETH, ImmDt) goes out with the QP's next PSN and the WQE completes at
//!   once: there are no ACKs, and a datagram lost on the wire is lost. The address is
//!   checked per WQE as the port takes it ([`Nic::av_ok`]); a bad WQE completes in its error and moves
//!   the QP to `ERR`, as on RC. One call sends at most [`UD_BUDGET`] WQEs, the timer the
//!   rest.
//! - Responder ([`Nic::ud_request`]): a datagram for a QP in `RTR`, `RTS` or `SQD` whose
//!   Q_Key matches the DETH's takes the QP's next receive WQE (or its SRQ's) whatever its
//!   PSN. The payload goes into the receive buffers behind their first 40 bytes, the GRH
//!   area. On an InfiniBand port the frames carry no GRH: the area is left as it is and
//!   the CQE has no `CQE_FLAG_GRH`; on an Ethernet port the area gets the frame's IP header
//!   as the RoCEv2 annex places it (IPv6: the 40-byte header; IPv4: 20 zero bytes, then
//!   the 20-byte header) and the CQE `CQE_FLAG_GRH`. The CQE carries the sender's QP and
//!   LID (0 on Ethernet).
//!   A datagram with a wrong Q_Key, for a QP in another state or with a payload above the
//!   MTU is dropped and counted, silently (`ud_dropped`, `ud_qkey_dropped` in the control
//!   channel's `status`). A datagram that finds no receive WQE waits for one a short
//!   while ([`UD_HOLD`], at most [`UD_HELD_MAX`] datagrams on the NIC; those behind it for
//!   the same QP wait too, in order) and is dropped and counted after that: a receive the
//!   application posted just before its peer's send may reach the NIC after the datagram
//!   (each NIC takes its doorbells and frames on its own), as a posted doorbell write and a
//!   packet race on a real machine; the wait takes that race away without delivering late
//!   anything that had no receive. A receive WQE too small for the
//!   GRH area and the payload completes in `LOC_LEN_ERR` and moves the QP to `ERR`, as a
//!   receive WQE's local errors do on RC.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ordma_hw as hw;
use tracing::debug;

use super::completer::Answer;
use super::data::{Data, Pos};
use super::packet::{self, Bth, Deth, Packet};
use super::port::Source;
use super::qp::Qp;
use super::requester::{mtu_bytes, Request};
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// WQEs one call sends at most; the timer sends the rest.
pub const UD_BUDGET: u32 = 256;
/// Bytes at the head of every UD receive buffer that hold the GRH (whether the packet
/// had one or not).
pub const GRH_LEN: u64 = 40;

/// How long a datagram waits for a receive WQE.
pub const UD_HOLD: Duration = Duration::from_millis(5);
/// Datagrams the NIC holds waiting for receive WQEs at most; more are dropped.
pub const UD_HELD_MAX: usize = 256;

/// A datagram waiting for a receive WQE of its QP.
pub struct Held {
    src: Source,
    qpn: u32,
    pkt: Packet,
    body: Data,
    until: Instant,
}

/// The datagrams waiting for receive WQEs, in arrival order.
pub type HeldQueue = VecDeque<Held>;

/// What the UD transport counted since the model started.
#[derive(Clone, Copy, Debug, Default)]
pub struct UdCounts {
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams received (a receive WQE completed).
    pub received: u64,
    /// Datagrams dropped: no receive WQE, the QP not receiving, too long.
    pub dropped: u64,
    /// Datagrams dropped for a Q_Key that is not the QP's.
    pub qkey_dropped: u64,
}

impl Nic {
    /// Runs UD QP `qpn`'s send queue in `RTS`: each WQE from the head is sent and
    /// completed, at most [`UD_BUDGET`] of them (the timer sends the rest).
    pub(super) fn ud_send(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        for _ in 0..UD_BUDGET {
            let Some(qp) = self.qp(qpn).copied() else {
                return;
            };
            if qp.state != hw::QPS_RTS || qp.sq.ci == qp.sq.pi {
                return;
            }
            let index = qp.sq.ci;
            let (status, op, signaled) = match self.fetch_wqe(qpn, &qp, index, mem) {
                Ok((req, op)) => (
                    self.ud_emit(qpn, &qp, &req, mem),
                    op,
                    req.wqe.flags & hw::WQE_FLAG_SIGNALED != 0,
                ),
                Err((status, _, op)) => (status, op, true),
            };
            self.complete_send(qpn, index, status, op, 0, signaled, mem, irq);
            if status != hw::WC_SUCCESS {
                return;
            }
        }
        self.resume_later(qpn);
    }

    /// Sends the datagram of checked WQE `req` of QP `qpn` (a copy of it in `qp`); its
    /// completion status.
    fn ud_emit(&mut self, qpn: u32, qp: &Qp, req: &Request, mem: &dyn Dma) -> u8 {
        let Some(ud) = req.ud else {
            return hw::WC_LOC_QP_OP_ERR;
        };
        let av = ud.av;
        if !self.av_ok(&av) {
            return hw::WC_LOC_QP_OP_ERR;
        }
        let mtu = mtu_bytes(self.port_attrs().active_mtu);
        if req.len > mtu {
            return hw::WC_LOC_LEN_ERR;
        }
        let Ok(n) = usize::try_from(req.len) else {
            return hw::WC_LOC_LEN_ERR;
        };
        let mut payload = vec![0u8; n];
        let gated = self.gate(mem);
        if !req.data.read(&gated, &mut Pos::default(), &mut payload) {
            return hw::WC_LOC_PROT_ERR;
        }
        let qkey = if ud.remote_qkey & hw::UD_QKEY_OWN != 0 {
            qp.attr.qkey
        } else {
            ud.remote_qkey
        };
        let imm = req.wqe.opcode == hw::WR_SEND_IMM;
        let pkt = Packet {
            bth: Bth {
                opcode: if imm {
                    packet::UD_SEND_ONLY_IMM
                } else {
                    packet::UD_SEND_ONLY
                },
                se: req.wqe.flags & hw::WQE_FLAG_SOLICITED != 0,
                pkey: 0xffff,
                dest_qp: ud.remote_qpn,
                psn: qp.attr.sq_psn,
                ..Default::default()
            },
            deth: Some(Deth { qkey, src_qp: qpn }),
            imm: imm.then_some(req.wqe.imm.to_le_bytes()),
            ..Default::default()
        };
        if let Some(q) = self.qp_mut(qpn) {
            q.attr.sq_psn = packet::psn_add(q.attr.sq_psn, 1);
        }
        self.ud.sent = self.ud.sent.saturating_add(1);
        self.emit(&av, qpn, &pkt, &payload);
        hw::WC_SUCCESS
    }

    /// The responder's side of a UD datagram `pkt` from `src` for QP `qpn` (a copy
    /// of it in `qp`, a UD QP), its payload `body`.
    #[allow(clippy::too_many_arguments, reason = "the datagram and its context")]
    pub(super) fn ud_request(
        &mut self,
        src: &Source,
        qpn: u32,
        qp: &Qp,
        pkt: &Packet,
        body: Data,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        if self.ud_held.iter().any(|h| h.qpn == qpn) {
            // Behind the QP's datagrams that wait: in order.
            return self.ud_hold(src, qpn, pkt, body, None);
        }
        let live = matches!(qp.state, hw::QPS_RTR | hw::QPS_RTS | hw::QPS_SQD);
        let Some(deth) = pkt
            .deth
            .filter(|_| packet::transport(pkt.bth.opcode) == packet::UD)
        else {
            return self.ud_drop(qpn, "not a UD packet");
        };
        if !live {
            return self.ud_drop(qpn, "QP not receiving");
        }
        if deth.qkey != qp.attr.qkey {
            debug!(qpn, qkey = deth.qkey, "UD: Q_Key violation, dropped");
            self.ud.qkey_dropped = self.ud.qkey_dropped.saturating_add(1);
            return;
        }
        let n = body.len();
        if n > mtu_bytes(self.port_attrs().active_mtu) {
            return self.ud_drop(qpn, "longer than the MTU");
        }
        let gated = self.gate(mem);
        let (index, data, cap) = match self.claim_recv(qpn, true, &gated, mem, irq) {
            Ok(c) => c,
            Err(Answer::Rnr(_)) => return self.ud_hold(src, qpn, pkt, body, None),
            Err(_) => return self.ud_drop(qpn, "no receive queue"),
        };
        let imm = pkt.imm.map(u32::from_le_bytes);
        let opcode = hw::WC_RECV;
        let total = GRH_LEN + n;
        let Ok(byte_len) = u32::try_from(total) else {
            return self.ud_drop(qpn, "longer than the MTU");
        };
        if total > cap {
            let cqe = hw::Cqe {
                status: hw::WC_LOC_LEN_ERR,
                opcode,
                ..Default::default()
            };
            return self.post_recv_cqe(qpn, index, cqe, mem, irq);
        }
        let grh = src.grh.map(|g| Data::Inline(g.to_vec()));
        let grh_ok = grh.as_ref().is_none_or(|g| {
            Self::copy(
                Some((g, &mut Pos::default(), GRH_LEN)),
                &data,
                &mut Pos::default(),
                &gated,
            )
        });
        let mut pos = data.seek(GRH_LEN);
        let mut spos = Pos::default();
        if !grh_ok || !Self::copy(Some((&body, &mut spos, n)), &data, &mut pos, &gated) {
            let cqe = hw::Cqe {
                status: hw::WC_LOC_PROT_ERR,
                opcode,
                ..Default::default()
            };
            return self.post_recv_cqe(qpn, index, cqe, mem, irq);
        }
        self.ud.received = self.ud.received.saturating_add(1);
        let mut flags = 0;
        if pkt.bth.se {
            flags |= hw::CQE_FLAG_SOLICITED;
        }
        if imm.is_some() {
            flags |= hw::CQE_FLAG_IMM;
        }
        if grh.is_some() {
            flags |= hw::CQE_FLAG_GRH;
        }
        let cqe = hw::Cqe {
            status: hw::WC_SUCCESS,
            opcode,
            byte_len,
            imm: imm.unwrap_or(0),
            flags,
            src_qp: deth.src_qp,
            slid: src.lid,
            ..Default::default()
        };
        self.post_recv_cqe(qpn, index, cqe, mem, irq);
    }

    /// Holds a datagram for QP `qpn` that found no receive WQE, until `until` (a new one:
    /// [`UD_HOLD`] from now); dropped if the NIC holds [`UD_HELD_MAX`] already.
    fn ud_hold(
        &mut self,
        src: &Source,
        qpn: u32,
        pkt: &Packet,
        body: Data,
        until: Option<Instant>,
    ) {
        if self.ud_held.len() >= UD_HELD_MAX {
            return self.ud_drop(qpn, "no receive WQE, and the NIC holds too many");
        }
        let until = until.unwrap_or_else(|| Instant::now() + UD_HOLD);
        self.ud_held.push_back(Held {
            src: *src,
            qpn,
            pkt: *pkt,
            body,
            until,
        });
    }

    /// The datagrams waiting for receive WQEs try again (new ones were posted, or the
    /// timer ticked at `now`), in order; those past their time are dropped and counted.
    pub(super) fn ud_retry(&mut self, now: Instant, mem: &dyn Dma, irq: &dyn Interrupts) {
        let held = std::mem::take(&mut self.ud_held);
        for h in held {
            let qp = self.qp(h.qpn).copied();
            match qp {
                Some(qp) if qp.qp_type == hw::QP_TYPE_UD && h.until > now => {
                    let before = self.ud_held.len();
                    self.ud_request(&h.src, h.qpn, &qp, &h.pkt, h.body, mem, irq);
                    if let Some(last) = self.ud_held.get_mut(before) {
                        // Held again: its time runs from its arrival, not from now.
                        last.until = h.until;
                    }
                }
                _ => self.ud_drop(h.qpn, "no receive WQE in time"),
            }
        }
    }

    /// Whether datagrams wait for receive WQEs (the timer then ticks).
    pub(super) fn ud_waiting(&self) -> bool {
        !self.ud_held.is_empty()
    }

    /// Forgets the datagrams waiting for QP `qpn` (reset, destroyed).
    pub(super) fn ud_forget(&mut self, qpn: u32) {
        self.ud_held.retain(|h| h.qpn != qpn);
    }

    /// Drops a datagram for QP `qpn` and counts it.
    fn ud_drop(&mut self, qpn: u32, why: &str) {
        debug!(qpn, why, "UD: datagram dropped");
        self.ud.dropped = self.ud.dropped.saturating_add(1);
    }
}
