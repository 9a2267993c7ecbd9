//! The RC engine over the wire: a QP whose AV's `dlid` is another NIC's LID sends its
//! requests as frames ([`super::wire`]), and the frames that come in are answered or
//! consumed here.
//!
//! - Requester: one WQE in flight per QP (the head of the SQ), its packets sent up to
//!   [`WINDOW`] beyond the last acknowledged, the AckReq bit on every [`ACK_EVERY`]th and on
//!   the last. Go-back-N: a timeout (the QP's `timeout`: 4.096 µs × 2^timeout, 0 =
//!   never) or a PSN sequence NAK sends again from the first packet not acknowledged;
//!   `retry_cnt` timeouts without progress end the WQE in `WC_RETRY_EXC_ERR`. A READ is one
//!   request packet; its responses are taken in PSN order only, and a gap (once per gap)
//!   or a timeout asks for the rest: a READ request at the first missing response's PSN.
//! - Responder: the responder of loopback (`deliver`); the payload arrives as bytes. An
//!   in-order packet with AckReq is ACKed; a duplicate (PSN behind the expected one) is not
//!   executed again: re-ACKed if it asks for an ACK, and a duplicate READ is answered again
//!   from memory; a packet ahead of the expected PSN gets one PSN sequence NAK (then
//!   silence until the expected PSN comes).
//! - Completer: ACKs move the acknowledged PSN; RNR NAKs wait `min_rnr_timer` and count
//!   against `rnr_retry` as in loopback; other NAKs end the WQE in their error.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ordma_hw as hw;
use tracing::debug;

use super::completer::{read_packets, rnr_delay, RETRY_FOREVER};
use super::counters::{bounded_warn, Anomaly};
use super::packet::{self, Aeth, Bth, NakCode, Packet, Reth, Syndrome, PSN_MASK};
use super::qp::qp_index;
use super::requester::{mtu_bytes, opcode_of, Data, Pos, Request};
use super::responder::Inbound;
use super::wire::{self, Frame};
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// Packets the requester sends beyond the last acknowledged one.
pub const WINDOW: u64 = 32;
/// The requester asks for an ACK on every this many packets (and on a message's last).
pub const ACK_EVERY: u64 = 8;

/// The WQE a QP has on the wire.
struct Flight {
    index: u16,
    op: u8,
    signaled: bool,
    req: Request,
    first_psn: u32,
    npkts: u64,
    /// Packets acknowledged (READ: responses received), from the first.
    acked: u64,
    /// The next packet to send.
    next: u64,
    /// Timeouts left before `WC_RETRY_EXC_ERR`.
    retries: u8,
    /// When the requester gives up waiting and sends again.
    deadline: Option<Instant>,
    /// READ: the response count at which the rest was asked for again after a gap.
    reread: Option<u64>,
}

impl Flight {
    fn read(&self) -> bool {
        self.req.wqe.opcode == hw::WR_RDMA_READ
    }

    /// Back to the first packet not acknowledged (READ: a request for the rest).
    fn rewind(&mut self) {
        self.next = if self.read() { 0 } else { self.acked };
    }
}

/// A QP's state for the wire (the parts that are not `Copy`, beside [`super::qp::Qp`]).
#[derive(Default)]
pub(super) struct Remote {
    flight: Option<Flight>,
    inb: Inbound,
    /// Responder: a PSN sequence NAK was sent; no other until the expected PSN comes.
    nak_sent: bool,
}

/// Every QP's wire state, by QPN.
pub(super) type Remotes = HashMap<u32, Remote>;

/// `a - b` in PSN space.
fn psn_sub(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b) & PSN_MASK
}

/// The transport timer of `timeout` (IB: 4.096 µs × 2^timeout; 0: none).
pub fn ack_timeout(timeout: u8) -> Option<Duration> {
    (timeout != 0).then(|| Duration::from_nanos(4096u64 << timeout.min(31)))
}

/// How a frame ended the flight.
enum Outcome {
    Keep,
    Progress,
    Send,
    Done(u8, u32),
}

impl Nic {
    /// Sends one packet to LID `dlid` from QP `sqpn`; lost if there is no wire or the
    /// port's link is down.
    fn emit(&mut self, dlid: u16, sqpn: u32, pkt: &Packet, payload: &[u8]) {
        if !self.config.link_up {
            return;
        }
        if let Some(w) = self.wire.as_ref() {
            let f = wire::encode(self.config.lid, dlid, sqpn, pkt, payload);
            w.send(dlid, &f);
        }
    }

    /// Forgets QP `qpn`'s wire state (reset, created, destroyed, flushed).
    pub(super) fn remote_forget(&mut self, qpn: u32) {
        self.wire_qps.remove(&qpn);
    }

    /// Runs QP `qpn`'s send queue towards another NIC: starts the head WQE if none is in
    /// flight and sends what the window allows.
    pub(super) fn pump(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        // Bounded: each pass completes a refused WQE or returns.
        for _ in 0..=u32::from(u16::MAX) {
            let Some(qp) = self.qp(qpn).copied() else {
                return;
            };
            if qp.state != hw::QPS_RTS || qp.dp.rnr_wait.is_some() {
                return;
            }
            let flight = self.wire_qps.get_mut(&qpn).and_then(|r| r.flight.take());
            let mut fl = match flight {
                Some(f) => f,
                None => {
                    if qp.sq.ci == qp.sq.pi {
                        return;
                    }
                    match self.start(qpn, &qp, mem) {
                        Ok(f) => f,
                        Err((index, status, op)) => {
                            self.complete_send(qpn, index, status, op, 0, true, mem, irq);
                            continue;
                        }
                    }
                }
            };
            if let Err(status) = self.transmit(qpn, &qp, &mut fl, mem) {
                let (index, op) = (fl.index, fl.op);
                self.complete_send(qpn, index, status, op, 0, true, mem, irq);
                continue;
            }
            self.wire_qps.entry(qpn).or_default().flight = Some(fl);
            return;
        }
    }

    /// Takes the head WQE of QP `qpn` on the wire: checked, its PSNs taken from `sq_psn`.
    fn start(
        &mut self,
        qpn: u32,
        qp: &super::qp::Qp,
        mem: &dyn Dma,
    ) -> Result<Flight, (u16, u8, u8)> {
        let index = qp.sq.ci;
        let (req, op) = self
            .fetch_wqe(qpn, qp, index, mem)
            .map_err(|(status, _, op)| (index, status, op))?;
        let npkts = if req.wqe.opcode == hw::WR_RDMA_READ {
            read_packets(req.len, qp.attr.path_mtu)
        } else {
            req.len.div_ceil(mtu_bytes(qp.attr.path_mtu)).max(1)
        };
        let first_psn = qp.attr.sq_psn;
        if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
            // CAST: PSN arithmetic is mod 2^24.
            q.attr.sq_psn = packet::psn_add(first_psn, npkts as u32);
        }
        Ok(Flight {
            index,
            op,
            signaled: req.wqe.flags & hw::WQE_FLAG_SIGNALED != 0,
            req,
            first_psn,
            npkts,
            acked: 0,
            next: 0,
            retries: qp.attr.retry_cnt,
            deadline: None,
            reread: None,
        })
    }

    /// Sends the flight's packets from `next` as far as the window allows; the error is a
    /// completion status (the local data could not be read).
    fn transmit(
        &mut self,
        qpn: u32,
        qp: &super::qp::Qp,
        fl: &mut Flight,
        mem: &dyn Dma,
    ) -> Result<(), u8> {
        let mtu = mtu_bytes(qp.attr.path_mtu);
        let dlid = qp.attr.ah.dlid;
        let solicited = fl.req.wqe.flags & hw::WQE_FLAG_SOLICITED != 0;
        let bth = |opcode: u8, i: u64, ack_req: bool, last: bool| Bth {
            opcode,
            se: solicited && last,
            pkey: 0xffff,
            dest_qp: qp.attr.dest_qp_num,
            ack_req,
            // CAST: PSN arithmetic is mod 2^24.
            psn: packet::psn_add(fl.first_psn, i as u32),
            ..Default::default()
        };
        // CAST: at most MAX_MSG.
        let len32 = fl.req.len as u32;
        let reth = Reth {
            va: fl.req.wqe.remote_addr,
            rkey: fl.req.wqe.rkey,
            dma_len: len32,
        };
        let mut sent = false;
        if fl.read() {
            if fl.next == 0 {
                // The responses not received yet: the READ's tail, at its PSN.
                let done = fl.acked.saturating_mul(mtu).min(fl.req.len);
                let pkt = Packet {
                    bth: bth(packet::READ_REQUEST, fl.acked, true, true),
                    reth: Some(Reth {
                        va: reth.va.wrapping_add(done),
                        // CAST: at most MAX_MSG.
                        dma_len: (fl.req.len - done) as u32,
                        ..reth
                    }),
                    ..Default::default()
                };
                self.emit(dlid, qpn, &pkt, &[]);
                fl.next = fl.npkts;
                sent = true;
            }
        } else {
            let gated = self.gate(mem);
            let end = fl.npkts.min(fl.acked.saturating_add(WINDOW));
            let mut buf = Vec::new();
            for i in fl.next..end {
                let last = i + 1 == fl.npkts;
                let opcode = opcode_of(fl.req.wqe.opcode, i, fl.npkts);
                let (has_reth, _, imm) = packet::headers(opcode).unwrap_or_default();
                let pkt = Packet {
                    bth: bth(opcode, i, last || (i + 1) % ACK_EVERY == 0, last),
                    reth: has_reth.then_some(reth),
                    aeth: None,
                    imm: imm.then_some(fl.req.wqe.imm.to_le_bytes()),
                };
                let off = i.saturating_mul(mtu);
                let n = usize::try_from(mtu.min(fl.req.len.saturating_sub(off))).unwrap_or(0);
                buf.resize(n, 0);
                let mut pos = fl.req.data.seek(off);
                if !fl.req.data.read(&gated, &mut pos, &mut buf) {
                    return Err(hw::WC_LOC_PROT_ERR);
                }
                self.emit(dlid, qpn, &pkt, &buf);
                sent = true;
            }
            fl.next = fl.next.max(end);
        }
        if sent {
            fl.deadline = ack_timeout(qp.attr.timeout).and_then(|t| Instant::now().checked_add(t));
        }
        Ok(())
    }

    /// Takes a frame from the wire: checked, then handed to the responder (requests) or
    /// the completer (ACKs, NAKs, read responses). A bad frame is counted and dropped.
    pub fn receive_frame(&mut self, frame: &[u8], mem: &dyn Dma, irq: &dyn Interrupts) {
        let f = match wire::decode(frame) {
            Ok(f) if f.dlid == self.config.lid => f,
            Ok(f) => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadFrame,
                    dlid = f.dlid,
                    "frame for another LID dropped"
                );
                return;
            }
            Err(e) => {
                bounded_warn!(self.counters, Anomaly::BadFrame, ?e, "bad frame dropped");
                return;
            }
        };
        if !self.bus_master || self.status & hw::STATUS_ENABLED == 0 || !self.config.link_up {
            debug!("frame dropped: the NIC does not run");
            return;
        }
        match f.packet.bth.opcode {
            packet::READ_RESPONSE_FIRST
            | packet::READ_RESPONSE_MIDDLE
            | packet::READ_RESPONSE_LAST
            | packet::READ_RESPONSE_ONLY
            | packet::ACKNOWLEDGE => self.on_answer(&f, mem, irq),
            _ => self.on_request(&f, mem, irq),
        }
    }

    /// Takes a datagram from the wire: every frame it carries ([`wire::frames`]: one, or a
    /// batch), in order. A malformed batch is counted and the rest of it dropped.
    pub fn receive_datagram(&mut self, datagram: &[u8], mem: &dyn Dma, irq: &dyn Interrupts) {
        for f in wire::frames(datagram) {
            match f {
                Ok(f) => self.receive_frame(f, mem, irq),
                Err(e) => {
                    bounded_warn!(self.counters, Anomaly::BadFrame, ?e, "bad batch dropped");
                }
            }
        }
    }

    /// Sends the frames the wire held back to carry them together ([`wire::Wire::flush`]).
    pub fn flush_wire(&self) {
        if let Some(w) = self.wire.as_ref() {
            w.flush();
        }
    }

    /// The responder's side of a request frame.
    fn on_request(&mut self, f: &Frame, mem: &dyn Dma, irq: &dyn Interrupts) {
        let pkt = &f.packet;
        let qpn = pkt.bth.dest_qp;
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        let live = matches!(qp.state, hw::QPS_RTR | hw::QPS_RTS | hw::QPS_SQD);
        if !live || qp.attr.ah.dlid != f.slid {
            debug!(qpn, slid = f.slid, "request frame dropped");
            return;
        }
        let (dlid, peer) = (f.slid, qp.attr.dest_qp_num);
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
                if pkt.bth.opcode == packet::READ_REQUEST {
                    let reth = pkt.reth.unwrap_or_default();
                    let len = u64::from(reth.dma_len);
                    let gated = self.gate(mem);
                    let data =
                        self.remote(qpn, reth.rkey, reth.va, len, hw::ACCESS_REMOTE_READ, &gated);
                    if let Some(data) = data {
                        self.read_answer(qpn, dlid, pkt.bth.psn, &data, len, mem);
                    }
                } else if pkt.bth.ack_req {
                    let last = psn_sub(qp.attr.rq_psn, 1);
                    self.emit(dlid, qpn, &ack(last, Syndrome::Ack(0x1f), qp.dp.msn), &[]);
                }
            } else if !self.wire_qps.get(&qpn).is_some_and(|r| r.nak_sent) {
                self.wire_qps.entry(qpn).or_default().nak_sent = true;
                let nak = ack(qp.attr.rq_psn, Syndrome::Nak(NakCode::PsnSeq), qp.dp.msn);
                self.emit(dlid, qpn, &nak, &[]);
            }
            return;
        }
        let mut inb = {
            let r = self.wire_qps.entry(qpn).or_default();
            r.nak_sent = false;
            std::mem::take(&mut r.inb)
        };
        let data = Data::Inline(f.payload.clone());
        let mut pos = Pos::default();
        let payload = (pkt.bth.opcode != packet::READ_REQUEST).then_some((
            &data,
            &mut pos,
            f.payload.len() as u64,
        ));
        let answer = self.deliver(peer, pkt, payload, &mut inb, mem, irq);
        if let Some(r) = self.wire_qps.get_mut(&qpn) {
            r.inb = inb;
        }
        let msn = self.qp(qpn).map_or(0, |q| q.dp.msn);
        use super::completer::Answer;
        match answer {
            Answer::Ack if pkt.bth.ack_req => {
                self.emit(dlid, qpn, &ack(pkt.bth.psn, Syndrome::Ack(0x1f), msn), &[]);
            }
            Answer::Read(data) => {
                let len = u64::from(pkt.reth.unwrap_or_default().dma_len);
                self.read_answer(qpn, dlid, pkt.bth.psn, &data, len, mem);
            }
            Answer::Rnr(t) => self.emit(dlid, qpn, &ack(pkt.bth.psn, Syndrome::Rnr(t), msn), &[]),
            Answer::Nak(c) => self.emit(dlid, qpn, &ack(pkt.bth.psn, Syndrome::Nak(c), msn), &[]),
            Answer::Ack | Answer::Drop | Answer::Local(_) => {}
        }
    }

    /// The read responses for a READ at `psn` of `len` bytes of `data`, from QP `qpn`.
    fn read_answer(&mut self, qpn: u32, dlid: u16, psn: u32, data: &Data, len: u64, mem: &dyn Dma) {
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        let mtu = mtu_bytes(qp.attr.path_mtu);
        let n = read_packets(len, qp.attr.path_mtu);
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
            self.emit(dlid, qpn, &pkt, &buf);
        }
    }

    /// The completer's side of an ACK, NAK or read response frame.
    fn on_answer(&mut self, f: &Frame, mem: &dyn Dma, irq: &dyn Interrupts) {
        let pkt = &f.packet;
        let qpn = pkt.bth.dest_qp;
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        if qp.state != hw::QPS_RTS || qp.attr.ah.dlid != f.slid {
            return;
        }
        let Some(mut fl) = self.wire_qps.get_mut(&qpn).and_then(|r| r.flight.take()) else {
            return;
        };
        let diff = u64::from(psn_sub(pkt.bth.psn, fl.first_psn));
        let current = diff < fl.npkts && diff >= fl.acked;
        let outcome = match (pkt.bth.opcode, pkt.aeth.map(|a| a.syndrome)) {
            (packet::ACKNOWLEDGE, Some(Syndrome::Ack(_))) if current && !fl.read() => {
                fl.acked = diff + 1;
                fl.next = fl.next.max(fl.acked);
                if fl.acked == fl.npkts {
                    // CAST: at most MAX_MSG.
                    Outcome::Done(hw::WC_SUCCESS, fl.req.len as u32)
                } else {
                    Outcome::Progress
                }
            }
            (packet::ACKNOWLEDGE, Some(Syndrome::Rnr(code))) if current => {
                let left = qp.dp.rnr_left.unwrap_or(qp.attr.rnr_retry);
                if left == 0 {
                    Outcome::Done(hw::WC_RNR_RETRY_EXC_ERR, 0)
                } else {
                    if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
                        q.dp.rnr_left = Some(if left == RETRY_FOREVER {
                            left
                        } else {
                            left - 1
                        });
                        let now = Instant::now();
                        q.dp.rnr_wait = Some(now.checked_add(rnr_delay(code)).unwrap_or(now));
                    }
                    debug!(qpn, code, left, "RNR NAK over the wire: retry later");
                    fl.acked = diff;
                    fl.rewind();
                    fl.deadline = None;
                    Outcome::Keep
                }
            }
            (packet::ACKNOWLEDGE, Some(Syndrome::Nak(NakCode::PsnSeq))) if current => {
                fl.acked = diff;
                fl.rewind();
                Outcome::Send
            }
            (packet::ACKNOWLEDGE, Some(Syndrome::Nak(c))) if current => {
                let status = match c {
                    NakCode::InvalidRequest => hw::WC_REM_INV_REQ_ERR,
                    NakCode::RemoteAccess => hw::WC_REM_ACCESS_ERR,
                    _ => hw::WC_REM_OP_ERR,
                };
                Outcome::Done(status, 0)
            }
            (packet::ACKNOWLEDGE, _) => Outcome::Keep,
            (_, _) if fl.read() && diff == fl.acked && diff < fl.npkts => {
                self.read_response(&mut fl, &qp, diff, &f.payload, mem)
            }
            (_, _) if fl.read() && current && fl.reread != Some(fl.acked) => {
                // A gap in the read responses: ask for the rest again, once per gap.
                fl.reread = Some(fl.acked);
                fl.rewind();
                Outcome::Send
            }
            _ => Outcome::Keep,
        };
        match outcome {
            Outcome::Done(status, bytes) => {
                let (index, op, signaled) = (fl.index, fl.op, fl.signaled);
                self.complete_send(qpn, index, status, op, bytes, signaled, mem, irq);
                self.pump(qpn, mem, irq);
            }
            Outcome::Keep => {
                self.wire_qps.entry(qpn).or_default().flight = Some(fl);
            }
            Outcome::Progress | Outcome::Send => {
                if matches!(outcome, Outcome::Progress) {
                    fl.retries = qp.attr.retry_cnt;
                    if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
                        q.dp.rnr_left = None;
                    }
                }
                self.wire_qps.entry(qpn).or_default().flight = Some(fl);
                self.pump(qpn, mem, irq);
            }
        }
    }

    /// Read response `k` of the flight: its bytes to the local buffers.
    fn read_response(
        &mut self,
        fl: &mut Flight,
        qp: &super::qp::Qp,
        k: u64,
        payload: &[u8],
        mem: &dyn Dma,
    ) -> Outcome {
        let mtu = mtu_bytes(qp.attr.path_mtu);
        let off = k.saturating_mul(mtu);
        if payload.len() as u64 != mtu.min(fl.req.len.saturating_sub(off)) {
            return Outcome::Keep;
        }
        let gated = self.gate(mem);
        let mut pos = fl.req.data.seek(off);
        if !fl.req.data.write(&gated, &mut pos, payload) {
            return Outcome::Done(hw::WC_LOC_PROT_ERR, 0);
        }
        fl.acked = k + 1;
        if fl.acked == fl.npkts {
            // CAST: at most MAX_MSG.
            return Outcome::Done(hw::WC_SUCCESS, fl.req.len as u32);
        }
        fl.deadline = ack_timeout(qp.attr.timeout).and_then(|t| Instant::now().checked_add(t));
        fl.retries = qp.attr.retry_cnt;
        Outcome::Keep
    }

    /// Whether some QP waits for its transport timer.
    pub(super) fn remote_timers(&self) -> bool {
        self.wire_qps
            .values()
            .any(|r| r.flight.as_ref().is_some_and(|f| f.deadline.is_some()))
    }

    /// The transport timers at `now`: every flight past its deadline is sent again from
    /// the first packet not acknowledged, or, its retries spent, ends in
    /// `WC_RETRY_EXC_ERR`.
    pub(super) fn remote_tick(&mut self, now: Instant, mem: &dyn Dma, irq: &dyn Interrupts) {
        if !self.bus_master {
            // Held: the timers fire once bus mastering is back.
            return;
        }
        let due: Vec<u32> = self
            .wire_qps
            .iter()
            .filter(|(_, r)| {
                r.flight
                    .as_ref()
                    .and_then(|f| f.deadline)
                    .is_some_and(|d| d <= now)
            })
            .map(|(&q, _)| q)
            .collect();
        for qpn in due {
            let Some(mut fl) = self.wire_qps.get_mut(&qpn).and_then(|r| r.flight.take()) else {
                continue;
            };
            if fl.retries == 0 {
                debug!(qpn, "transport timer: retries exhausted");
                let (index, op) = (fl.index, fl.op);
                self.complete_send(qpn, index, hw::WC_RETRY_EXC_ERR, op, 0, true, mem, irq);
                continue;
            }
            fl.retries -= 1;
            fl.deadline = None;
            fl.reread = None;
            fl.rewind();
            debug!(qpn, from = fl.next, "transport timer: sending again");
            self.wire_qps.entry(qpn).or_default().flight = Some(fl);
            self.pump(qpn, mem, irq);
        }
    }
}
