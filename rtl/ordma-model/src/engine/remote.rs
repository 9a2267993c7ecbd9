//! The RC engine over the wire: a QP whose AV's `dlid` is another NIC's LID sends its
//! requests as frames ([`super::wire`]), and the frames that come in are answered or
//! consumed here.
//!
//! - Requester and completer: [`super::flights`] (several WQEs in flight per QP, a
//!   window of packets, go-back-N, READ re-requests).
//! - Responder: the responder of loopback (`deliver`); the payload arrives as bytes. An
//!   in-order packet with AckReq is ACKed; a duplicate (PSN behind the expected one) is not
//!   executed again: re-ACKed if it asks for an ACK, and a duplicate READ is answered again
//!   from memory; a packet ahead of the expected PSN gets one PSN sequence NAK (then
//!   silence until the expected PSN comes).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use ordma_hw as hw;
use tracing::debug;

use super::atomic::Replay;
use super::completer::read_packets;
use super::counters::{bounded_warn, Anomaly};
use super::data::{Data, Pos};
use super::flights::Flights;
use super::packet::{self, Aeth, Bth, NakCode, Packet, Syndrome, PSN_MASK};
use super::port::Source;
use super::requester::mtu_bytes;
use super::responder::Inbound;
use super::wire::{self, FrameError};
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// Where a frame taken from the wire went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    /// To the RDMA engine (taken, or counted and dropped).
    Engine,
    /// Not the engine's: an Ethernet port's host traffic, for the port's netdev.
    Host,
}

/// A QP's state for the wire (the parts that are not `Copy`, beside [`super::qp::Qp`]).
#[derive(Default)]
pub(super) struct Remote {
    /// Requester: the WQEs on the wire.
    pub(super) flights: Flights,
    pub(super) inb: Inbound,
    /// Responder: a PSN sequence NAK was sent; no other until the expected PSN comes.
    nak_sent: bool,
    /// Responder (UC): packets are dropped until a message starts ([`super::uc`]).
    pub(super) uc_drop: bool,
    /// Responder: the answers of the last atomics, for duplicates.
    pub(super) atomics: Replay,
}

/// Every QP's wire state, by QPN (hashed as it is: QPNs are small table indices).
pub(super) type Remotes = HashMap<u32, Remote, BuildHasherDefault<QpnHasher>>;

/// The hasher of [`Remotes`]: the QPN itself.
#[derive(Default)]
pub(super) struct QpnHasher(u64);

impl Hasher for QpnHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n);
    }
}

/// `a - b` in PSN space.
pub(super) fn psn_sub(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b) & PSN_MASK
}

/// The transport timer of `timeout` (IB: 4.096 µs × 2^timeout; 0: none).
pub fn ack_timeout(timeout: u8) -> Option<Duration> {
    (timeout != 0).then(|| Duration::from_nanos(4096u64 << timeout.min(31)))
}

impl Nic {
    /// When a transport timer started now for a QP of `timeout` expires: at least
    /// `min_ack_timeout` away (IB lets a CA wait longer than the QP asks); never for 0.
    pub(super) fn ack_deadline(&self, timeout: u8) -> Option<Instant> {
        let t = if timeout == 0 {
            0
        } else {
            timeout.max(self.config.min_ack_timeout)
        };
        ack_timeout(t).and_then(|d| Instant::now().checked_add(d))
    }
}

impl Nic {
    /// Sends one packet to address `to` from QP `sqpn`: to the NIC itself if `to` is the
    /// port ([`super::own`]); else lost if there is no wire, the port's link is down, or
    /// the port has no route for `to` ([`Nic::route`]).
    pub(super) fn emit(&mut self, to: &hw::QpAh, sqpn: u32, pkt: &Packet, payload: &[u8]) {
        if self.to_own(to) {
            return self.emit_own(to, sqpn, *pkt, Data::Inline(payload.to_vec()), 1);
        }
        if !self.config.link_up {
            return;
        }
        let Some(route) = self.route(to) else {
            debug!(sqpn, "no route (source GID entry): packet lost");
            return;
        };
        if let Some(w) = self.wire.as_ref() {
            let f = wire::encode(&route, sqpn, pkt, payload);
            w.send(route.dmac, &f);
            self.count(sqpn, hw::CNT_SENT_PKTS, 1);
        }
    }

    /// The receive WQE QP `qpn`'s SEND in progress holds (its index), if any.
    pub(super) fn claimed_recv(&self, qpn: u32) -> Option<u16> {
        self.wire_qps.get(&qpn).and_then(|r| r.inb.claimed())
    }

    /// Forgets QP `qpn`'s wire state (reset, created, destroyed, flushed).
    pub(super) fn remote_forget(&mut self, qpn: u32) {
        self.wire_qps.remove(&qpn);
        self.own_forget(qpn);
        self.ud_forget(qpn);
    }

    /// Takes a frame from the wire: a RoCEv2 frame to one of the port's addresses is
    /// checked, then handed to the responder (requests) or the completer (ACKs, NAKs, read
    /// responses); a bad one is counted and dropped. On an Ethernet port every other frame
    /// is the host's: [`Steer::Host`] (the caller hands it to the port's netdev). A dead
    /// NIC ([`super::Death::Silent`]) drops every frame, the host's too, without counting.
    pub fn receive_frame(&mut self, frame: &[u8], mem: &dyn Dma, irq: &dyn Interrupts) -> Steer {
        if self.dead {
            return Steer::Engine;
        }
        let eth = self.is_ethernet();
        let mut f = match wire::decode(frame) {
            Ok(f) if self.takes_ip(&f.dst) => f,
            Ok(_) | Err(FrameError::NotRoce) if eth => return Steer::Host,
            Ok(f) => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadFrame,
                    dst = ?f.dst,
                    "frame for another address dropped"
                );
                return Steer::Engine;
            }
            Err(e) => {
                bounded_warn!(self.counters, Anomaly::BadFrame, ?e, "bad frame dropped");
                return Steer::Engine;
            }
        };
        if !self.bus_master || self.status & hw::STATUS_ENABLED == 0 || !self.config.link_up {
            debug!("frame dropped: the NIC does not run");
            return Steer::Engine;
        }
        if eth {
            f.src.lid = 0;
        } else {
            f.src.grh = None;
        }
        let body = Data::Inline(f.payload);
        match f.packet.bth.opcode {
            packet::READ_RESPONSE_FIRST
            | packet::READ_RESPONSE_MIDDLE
            | packet::READ_RESPONSE_LAST
            | packet::READ_RESPONSE_ONLY
            | packet::ACKNOWLEDGE
            | packet::ATOMIC_ACKNOWLEDGE => self.on_answer(&f.src, &f.packet, &body, 1, mem, irq),
            _ => self.on_request(&f.src, &f.packet, body, 1, mem, irq),
        }
        Steer::Engine
    }

    /// Takes a datagram from the wire: every frame it carries ([`wire::frames`]: one, or a
    /// batch), in order. A malformed batch is counted and the rest of it dropped. Returns
    /// the frames that are the host's ([`Steer::Host`]).
    pub fn receive_datagram<'a>(
        &mut self,
        datagram: &'a [u8],
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Vec<&'a [u8]> {
        let mut host = Vec::new();
        for f in wire::frames(datagram) {
            match f {
                Ok(f) => {
                    if self.receive_frame(f, mem, irq) == Steer::Host {
                        host.push(f);
                    }
                }
                Err(e) => {
                    bounded_warn!(self.counters, Anomaly::BadFrame, ?e, "bad batch dropped");
                }
            }
        }
        host
    }

    /// Sends the frames the wire held back to carry them together ([`wire::Wire::flush`]).
    pub fn flush_wire(&self) {
        if let Some(w) = self.wire.as_ref() {
            w.flush();
        }
    }

    /// The responder's side of a request from `src` (this NIC itself for loopback):
    /// `pkt` with its payload `body`; `count` > 1: that many `WRITE_MIDDLE` packets from
    /// `pkt`'s PSN on, the payload theirs together (loopback only).
    pub(super) fn on_request(
        &mut self,
        src: &Source,
        pkt: &Packet,
        body: Data,
        count: u64,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let qpn = pkt.bth.dest_qp;
        self.count(qpn, hw::CNT_RCVD_PKTS, count);
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        if qp.qp_type == hw::QP_TYPE_UD {
            return self.ud_request(src, qpn, &qp, pkt, body, mem, irq);
        }
        let live = matches!(qp.state, hw::QPS_RTR | hw::QPS_RTS | hw::QPS_SQD);
        let uc = qp.qp_type == hw::QP_TYPE_UC;
        if !live
            || !self.is_peer(&qp.attr.ah, src)
            || (packet::transport(pkt.bth.opcode) == packet::UC) != uc
        {
            debug!(qpn, ?src.gid, src.lid, "request dropped");
            return;
        }
        if uc {
            return self.uc_request(qpn, &qp, pkt, body, count, mem, irq);
        }
        let (to, peer) = (qp.attr.ah, qp.attr.dest_qp_num);
        let ack = |psn: u32, syndrome: Syndrome, msn: u32| Packet {
            bth: Bth {
                opcode: packet::ACKNOWLEDGE,
                pkey: 0xffff,
                dest_qp: peer,
                psn,
                ..Default::default()
            },
            aeth: Some(Aeth { syndrome, msn }),
            ..Default::default()
        };
        let d = psn_sub(pkt.bth.psn, qp.attr.rq_psn);
        if d != 0 {
            if d >= 1 << 23 {
                // A duplicate: done already; never executed twice.
                self.count(qpn, hw::CNT_DUPLICATE_REQUEST, count);
                if matches!(pkt.bth.opcode, packet::COMPARE_SWAP | packet::FETCH_ADD) {
                    self.atomic_replay(qpn, to, pkt);
                } else if matches!(pkt.bth.opcode, packet::FLUSH | packet::ATOMIC_WRITE) {
                    // Answered again, not executed again.
                    self.read_answer(qpn, to, pkt.bth.psn, Data::empty(), 0, mem);
                } else if pkt.bth.opcode == packet::READ_REQUEST {
                    let reth = pkt.reth.unwrap_or_default();
                    let len = u64::from(reth.dma_len);
                    let gated = self.gate(mem);
                    let data =
                        self.remote(qpn, reth.rkey, reth.va, len, hw::ACCESS_REMOTE_READ, &gated);
                    if let Some(data) = data {
                        self.read_answer(qpn, to, pkt.bth.psn, data, len, mem);
                    }
                } else if pkt.bth.ack_req {
                    let last = psn_sub(qp.attr.rq_psn, 1);
                    self.emit(&to, qpn, &ack(last, Syndrome::Ack(0x1f), qp.dp.msn), &[]);
                }
                return;
            }
            self.count(qpn, hw::CNT_OUT_OF_SEQ_REQUEST, count);
            if !self.wire_qps.get(&qpn).is_some_and(|r| r.nak_sent) {
                self.wire_qps.entry(qpn).or_default().nak_sent = true;
                self.count(qpn, hw::CNT_SEND_SEQ_ERR, 1);
                let nak = ack(qp.attr.rq_psn, Syndrome::Nak(NakCode::PsnSeq), qp.dp.msn);
                self.emit(&to, qpn, &nak, &[]);
            }
            return;
        }
        let mut inb = {
            let r = self.wire_qps.entry(qpn).or_default();
            r.nak_sent = false;
            std::mem::take(&mut r.inb)
        };
        let n = body.len();
        let mut pos = Pos::default();
        // (An atomic's payload, which it should not have, is ignored as a READ's is.)
        let payload = (pkt.bth.opcode != packet::READ_REQUEST).then_some((&body, &mut pos, n));
        let answer = if count > 1 && pkt.bth.opcode == packet::WRITE_MIDDLE {
            self.deliver_middles(peer, qpn, pkt.bth.psn, count, payload, &mut inb, mem, irq)
        } else {
            self.deliver(peer, pkt, payload, &mut inb, mem, irq)
        };
        if let Some(r) = self.wire_qps.get_mut(&qpn) {
            r.inb = inb;
        }
        // The answer's PSN: the last the request carries.
        // CAST: PSN arithmetic is mod 2^24; `count` is at most a message's packets.
        let psn = packet::psn_add(pkt.bth.psn, count.saturating_sub(1) as u32);
        let msn = self.qp(qpn).map_or(0, |q| q.dp.msn);
        use super::completer::Answer;
        match answer {
            Answer::Ack if pkt.bth.ack_req => {
                self.emit(&to, qpn, &ack(psn, Syndrome::Ack(0x1f), msn), &[]);
            }
            Answer::Read(data) => {
                let len = u64::from(pkt.reth.unwrap_or_default().dma_len);
                self.read_answer(qpn, to, pkt.bth.psn, data, len, mem);
            }
            Answer::EmptyRead => self.read_answer(qpn, to, psn, Data::empty(), 0, mem),
            Answer::Atomic(old) => {
                if let Some(qp) = self.qp(qpn).copied() {
                    let a = self.atomic_ack(&qp, psn, old);
                    self.emit(&to, qpn, &a, &[]);
                }
            }
            Answer::Rnr(t) => {
                self.count(qpn, hw::CNT_SEND_RNR_ERR, 1);
                self.emit(&to, qpn, &ack(psn, Syndrome::Rnr(t), msn), &[]);
            }
            Answer::Nak(c) => self.emit(&to, qpn, &ack(psn, Syndrome::Nak(c), msn), &[]),
            Answer::Ack | Answer::Drop => {}
        }
    }

    /// The read responses for a READ at `psn` of `len` bytes of `data`, from QP `qpn`.
    pub(super) fn read_answer(
        &mut self,
        qpn: u32,
        to: hw::QpAh,
        psn: u32,
        data: Data,
        len: u64,
        mem: &dyn Dma,
    ) {
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        let mtu = mtu_bytes(qp.attr.path_mtu);
        let n = read_packets(len, qp.attr.path_mtu);
        if self.to_own(&to) {
            // To the NIC itself: every response at once, their payload the responder's
            // memory (`n` PSNs from `psn`).
            let pkt = Packet {
                bth: Bth {
                    opcode: if n == 1 {
                        packet::READ_RESPONSE_ONLY
                    } else {
                        packet::READ_RESPONSE_LAST
                    },
                    pkey: 0xffff,
                    dest_qp: qp.attr.dest_qp_num,
                    psn,
                    ..Default::default()
                },
                aeth: Some(Aeth {
                    syndrome: Syndrome::Ack(0x1f),
                    msn: qp.dp.msn,
                }),
                ..Default::default()
            };
            return self.emit_own(&to, qpn, pkt, data, n);
        }
        let gated = self.gate(mem);
        let mut pos = Pos::default();
        let mut buf = Vec::new();
        for k in 0..n {
            let (first, last) = (k == 0, k + 1 == n);
            let opcode = match (first, last) {
                (true, true) => packet::READ_RESPONSE_ONLY,
                (true, false) => packet::READ_RESPONSE_FIRST,
                (false, true) => packet::READ_RESPONSE_LAST,
                (false, false) => packet::READ_RESPONSE_MIDDLE,
            };
            let size = usize::try_from(mtu.min(len.saturating_sub(k * mtu))).unwrap_or(0);
            buf.resize(size, 0);
            if !data.read(&gated, &mut pos, &mut buf) {
                return;
            }
            let pkt = Packet {
                bth: Bth {
                    opcode,
                    pkey: 0xffff,
                    dest_qp: qp.attr.dest_qp_num,
                    // CAST: PSN arithmetic is mod 2^24.
                    psn: packet::psn_add(psn, k as u32),
                    ..Default::default()
                },
                aeth: (first || last).then_some(Aeth {
                    syndrome: Syndrome::Ack(0x1f),
                    msn: qp.dp.msn,
                }),
                ..Default::default()
            };
            self.emit(&to, qpn, &pkt, &buf);
        }
    }
}
