//! The requester and completer over the wire ([`super::remote`] has the frames in and the
//! responder): several WQEs of a QP in flight at once.
//!
//! - The WQEs from the SQ's head on are on the wire in order (`Flights`), at most
//!   [`MAX_FLIGHTS`], their PSNs following each other, their packets sent up to [`WINDOW`]
//!   beyond the first one not acknowledged (across the WQEs), the AckReq bit on every
//!   [`ACK_EVERY`]th packet of a message and on its last. At most the QP's initiator
//!   depth of READs and atomics together ([`rd_depth`], its `max_rd_atomic`) are in
//!   flight at once; a WQE with `FENCE` waits for the READs and atomics before it.
//! - An ACK at a PSN acknowledges it and every packet before, so every WQE before it
//!   completes, in order; a NAK or an RNR NAK at a PSN acknowledges every packet before it.
//!   RNR NAKs wait `min_rnr_timer` and count against `rnr_retry` as in loopback; other
//!   NAKs end their WQE in their error (and the QP in `ERR` flushes the rest).
//! - Go-back-N: a timeout (the QP's `timeout`: 4.096 µs × 2^timeout, 0 = never) or a PSN
//!   sequence NAK sends again from the first packet not acknowledged, that WQE's and every
//!   one behind it; `retry_cnt` timeouts without progress end the head WQE in
//!   `WC_RETRY_EXC_ERR`. A READ is one request packet; its responses are taken in PSN
//!   order only, and a gap (once per gap) or a timeout asks for the rest: a READ request
//!   at the first missing response's PSN. An atomic is one request packet too, completed
//!   by its ATOMIC ACKNOWLEDGE (the old value, written into its local SGEs); a lost answer
//!   sends the request again, which the responder answers from its replay cache
//!   ([`super::atomic`]) without executing it twice.
//! - A WQE behind others that cannot be started (refused) or sent (its local data cannot
//!   be read) is held, nothing starts behind it, and it completes in error when it reaches
//!   the head (completions stay in SQ order).
//! - A local operation (`BIND_MW`, `LOCAL_INV`: [`super::mw`]) sends nothing: it waits
//!   until no WQE is in flight before it, is executed, and is held the same way, to
//!   complete (in success or error) at the head; nothing starts behind it before.
//! - UC ([`super::uc`]): no AckReq, no timer; a WQE completes once its last packet is
//!   out; a window of packets per call, the timer sends the rest.
//!
//! The answers' side (the completer) is in [`answer`].

use std::collections::VecDeque;
use std::time::Instant;

use ordma_hw as hw;
use tracing::debug;

use super::completer::read_packets;
use super::packet::{self, AtomicEth, Bth, Feth, Packet, Reth};
use super::qp::{qp_index, Qp};
use super::requester::{mtu_bytes, opcode_of, wqe_bytes, Request};
use super::{Interrupts, Nic};
use crate::mem::Dma;

mod answer;

/// Packets the requester sends beyond the first one not acknowledged.
pub const WINDOW: u64 = 256;
/// The requester asks for an ACK on every this many packets (and on a message's last).
pub const ACK_EVERY: u64 = 8;
/// WQEs of one QP on the wire at once at most.
pub const MAX_FLIGHTS: usize = 32;

/// READs and atomics QP `qp` may have in flight at once, together: its `max_rd_atomic`
/// (the initiator depth, at most `QP_MAX_RD_ATOMIC`, the `max_qp_init_rd_atom` the NIC
/// advertises), 0 taken as 1.
pub(super) fn rd_depth(qp: &Qp) -> usize {
    usize::from(qp.attr.max_rd_atomic.clamp(1, hw::QP_MAX_RD_ATOMIC))
}

/// A WQE on the wire.
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
    /// A READ, FLUSH or ATOMIC WRITE: answered by read responses (the last two by one,
    /// empty).
    fn read(&self) -> bool {
        self.req.wqe.opcode == hw::WR_RDMA_READ || hw::is_flush_or_atomic_write(self.req.wqe.opcode)
    }

    fn atomic(&self) -> bool {
        hw::is_atomic(self.req.wqe.opcode)
    }

    /// A READ, an atomic, a FLUSH or an ATOMIC WRITE: one request packet, completed by the
    /// responder's answer (not by an ACK), and one of the QP's initiator depth
    /// ([`rd_depth`]).
    fn rd_atomic(&self) -> bool {
        self.read() || self.atomic()
    }

    /// The completion's `byte_len` when it succeeds: the bytes moved (an atomic's 8 come
    /// with its answer), 8 for an ATOMIC WRITE, 0 for a FLUSH.
    fn completion_bytes(&self) -> u32 {
        if self.req.wqe.opcode == hw::WR_ATOMIC_WRITE {
            hw::ATOMIC_SIZE
        } else {
            // CAST: at most MAX_MSG.
            self.req.len as u32
        }
    }

    /// Back to the first packet not acknowledged (READ: a request for the rest; atomic:
    /// the request again).
    fn rewind(&mut self) {
        self.next = if self.rd_atomic() { 0 } else { self.acked };
    }
}

/// The request packet of FLUSH or ATOMIC WRITE `req` with base header `bth` (its opcode
/// set here), and its payload (an ATOMIC WRITE's 8 bytes, as they are in memory).
fn flush_or_atomic_write(req: &Request, bth: Bth) -> (Packet, Vec<u8>) {
    let reth = Reth {
        va: req.wqe.remote_addr,
        rkey: req.wqe.rkey,
        dma_len: 0,
    };
    match (req.flush, req.atomic) {
        (Some(f), _) => (
            Packet {
                bth: Bth {
                    opcode: packet::FLUSH,
                    ..bth
                },
                feth: Some(Feth {
                    placement: f.placement,
                    level: f.level,
                }),
                reth: Some(Reth {
                    dma_len: f.length,
                    ..reth
                }),
                ..Default::default()
            },
            Vec::new(),
        ),
        (None, seg) => (
            Packet {
                bth: Bth {
                    opcode: packet::ATOMIC_WRITE,
                    ..bth
                },
                reth: Some(Reth {
                    dma_len: hw::ATOMIC_SIZE,
                    ..reth
                }),
                ..Default::default()
            },
            seg.unwrap_or_default().compare_add.to_le_bytes().to_vec(),
        ),
    }
}

/// A QP's requester on the wire.
#[derive(Default)]
pub(super) struct Flights {
    /// The WQEs on the wire, from the SQ's head, in SQ and PSN order.
    q: VecDeque<Flight>,
    /// The WQE behind them that the wire does not carry: refused, or a local operation
    /// executed; it completes at the head.
    held: Option<Held>,
    /// UC: one call's packets are out and more wait; the timer sends them.
    resume: Option<Instant>,
}

impl Flights {
    /// Every WQE back to its first packet not acknowledged, its timer stopped.
    fn rewind(&mut self) {
        for f in &mut self.q {
            f.rewind();
            f.deadline = None;
            f.reread = None;
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.q
            .iter()
            .filter_map(|f| f.deadline)
            .chain(self.resume)
            .min()
    }
}

/// A WQE done without the wire, waiting to complete at the head of the send queue.
#[derive(Clone, Copy, Debug)]
struct Held {
    index: u16,
    /// Its completion status: an error for a WQE refused.
    status: u8,
    /// Its completion opcode.
    op: u8,
    /// A CQE even on success.
    signaled: bool,
}

impl Held {
    /// WQE `index`, refused with `status`.
    fn refused(index: u16, status: u8, op: u8) -> Self {
        Self {
            index,
            status,
            op,
            signaled: true,
        }
    }
}

/// How a frame ended the flight it hit.
enum Outcome {
    Keep,
    Progress,
    Send,
    Done(u8, u32),
}

impl Nic {
    /// Takes QP `qpn`'s requester state out (put it back with [`Self::put_flights`]).
    fn take_flights(&mut self, qpn: u32) -> Flights {
        self.wire_qps
            .get_mut(&qpn)
            .map(|r| std::mem::take(&mut r.flights))
            .unwrap_or_default()
    }

    /// Puts QP `qpn`'s requester state back, unless the QP left the states that send (an
    /// error completion moved it to `ERR`, which forgot its wire state).
    fn put_flights(&mut self, qpn: u32, fs: Flights) {
        if self
            .qp(qpn)
            .is_some_and(|q| matches!(q.state, hw::QPS_RTS | hw::QPS_SQD))
        {
            self.wire_qps.entry(qpn).or_default().flights = fs;
        }
    }

    /// Runs QP `qpn`'s send queue towards another NIC: sends what the window allows of
    /// the WQEs in flight and starts the next ones; a refused WQE at the head completes
    /// in error. UC: a WQE completes once its last packet is out (there are no ACKs), and
    /// one call sends at most [`WINDOW`] packets, the timer the rest.
    pub(super) fn pump(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if self.qp(qpn).is_some_and(|q| q.qp_type == hw::QP_TYPE_UD) {
            return self.ud_send(qpn, mem, irq);
        }
        let mut budget = WINDOW;
        // Bounded: each pass completes a refused WQE (UC: a WQE sent) or returns.
        for _ in 0..=u32::from(u16::MAX) {
            let Some(qp) = self.qp(qpn).copied() else {
                return;
            };
            let sending = matches!(qp.state, hw::QPS_RTS | hw::QPS_SQD);
            if !sending || qp.dp.rnr_wait.is_some() {
                return;
            }
            let mut fs = self.take_flights(qpn);
            if fs.q.is_empty() {
                if let Some(h) = fs.held.take() {
                    self.complete_send(qpn, h.index, h.status, h.op, 0, h.signaled, mem, irq);
                    continue;
                }
            }
            let sent = self.send_flights(qpn, &mut fs, mem);
            if qp.qp_type == hw::QP_TYPE_UC {
                budget = budget.saturating_sub(sent);
                if !self.uc_sent(qpn, fs, budget, mem, irq) {
                    return;
                }
                continue;
            }
            let again = fs.q.is_empty() && fs.held.is_some();
            self.put_flights(qpn, fs);
            if !again {
                return;
            }
        }
    }

    /// Has the timer run QP `qpn`'s send queue again at its next tick (UD: what one call
    /// left, [`super::ud::UD_BUDGET`]).
    pub(super) fn resume_later(&mut self, qpn: u32) {
        let mut fs = self.take_flights(qpn);
        fs.resume = Some(Instant::now());
        self.put_flights(qpn, fs);
    }

    /// UC, after a pass of [`Self::send_flights`]: the WQEs whose packets are all out
    /// complete (in order); whether to pass again (some completed, room is left in this
    /// call's `budget`, and more waits). What waits beyond the budget is sent from the
    /// timer ([`Flights::resume`]).
    fn uc_sent(
        &mut self,
        qpn: u32,
        mut fs: Flights,
        budget: u64,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> bool {
        let mut done = Vec::new();
        while fs.q.front().is_some_and(|f| f.acked == f.npkts) {
            done.extend(fs.q.pop_front());
        }
        let progress = !done.is_empty();
        let waiting = self.qp(qpn).is_some_and(|q| {
            // CAST: at most MAX_FLIGHTS.
            let started = q.sq.ci.wrapping_add((done.len() + fs.q.len()) as u16);
            !fs.q.is_empty() || fs.held.is_some() || started != q.sq.pi
        });
        fs.resume = (waiting && (budget == 0 || !progress)).then(Instant::now);
        self.put_flights(qpn, fs);
        self.complete_flights(qpn, done, mem, irq);
        if progress && !self.sq_in_flight(qpn) {
            self.sq_drained(qpn, Some((mem, irq)));
        }
        progress && budget > 0 && waiting
    }

    /// Sends the flights' packets as far as the window allows, starting WQEs behind them
    /// while there is room; the packets sent (a READ's or atomic's request: all of its).
    fn send_flights(&mut self, qpn: u32, fs: &mut Flights, mem: &dyn Dma) -> u64 {
        let Some(mut qp) = self.qp(qpn).copied() else {
            return 0;
        };
        let mut sent = 0u64;
        // The window, in packets counted from the head WQE's first.
        let end = fs.q.front().map_or(0, |f| f.acked).saturating_add(WINDOW);
        let mut before = 0u64;
        let mut i = 0;
        loop {
            if i == fs.q.len() {
                // CAST: at most MAX_FLIGHTS.
                let index = qp.sq.ci.wrapping_add(i as u16);
                if fs.held.is_some()
                    || qp.state != hw::QPS_RTS
                    || i >= MAX_FLIGHTS
                    || index == qp.sq.pi
                    || before >= end
                {
                    return sent;
                }
                let reads = fs.q.iter().filter(|f| f.rd_atomic()).count();
                match self.start(qpn, &qp, index, i, reads, mem) {
                    Ok(Some(f)) => fs.q.push_back(f),
                    Ok(None) => return sent,
                    Err(held) => {
                        fs.held = Some(held);
                        return sent;
                    }
                }
                // `start` took the WQE's PSNs: `sq_psn` moved.
                let Some(q) = self.qp(qpn).copied() else {
                    return sent;
                };
                qp = q;
            }
            let Some(fl) = fs.q.get_mut(i) else {
                return sent;
            };
            let next = fl.next;
            if let Err(status) = self.transmit(qpn, &qp, fl, end.saturating_sub(before), mem) {
                fs.held = Some(Held::refused(fl.index, status, fl.op));
                fs.q.truncate(i);
                return sent;
            }
            sent = sent.saturating_add(fl.next.saturating_sub(next));
            before = before.saturating_add(fl.npkts);
            i += 1;
        }
    }

    /// Takes WQE `index` of QP `qpn` on the wire: checked, its PSNs taken from `sq_psn`.
    /// `None` while it must wait, `ahead` WQEs being in flight before it, `reads` of them
    /// READs and atomics: a READ or atomic beyond the QP's initiator depth ([`rd_depth`]),
    /// a WQE with `FENCE` behind any READ or atomic, a local operation behind any WQE. The
    /// error is the WQE held: refused, or a local operation executed.
    fn start(
        &mut self,
        qpn: u32,
        qp: &Qp,
        index: u16,
        ahead: usize,
        reads: usize,
        mem: &dyn Dma,
    ) -> Result<Option<Flight>, Held> {
        if reads > 0 {
            // A look at the WQE before it is checked and translated, which waiting would
            // repeat at every answer.
            let gated = self.gate(mem);
            let head = wqe_bytes(&gated, &qp.sq, index).and_then(|raw| hw::SendWqe::decode(&raw));
            if let Some(w) = head {
                if (hw::is_rd_atomic(w.opcode) && reads >= rd_depth(qp))
                    || w.flags & hw::WQE_FLAG_FENCE != 0
                {
                    return Ok(None);
                }
            }
        }
        let (req, op) = self
            .fetch_wqe(qpn, qp, index, mem)
            .map_err(|(status, _, op)| Held::refused(index, status, op))?;
        if hw::is_local(req.wqe.opcode) {
            if ahead > 0 {
                return Ok(None);
            }
            return Err(Held {
                index,
                status: self.execute_local(qpn, qp, &req),
                op,
                signaled: req.wqe.flags & hw::WQE_FLAG_SIGNALED != 0,
            });
        }
        let read = req.wqe.opcode == hw::WR_RDMA_READ;
        let npkts = if read {
            read_packets(req.len, qp.attr.path_mtu)
        } else if hw::is_rd_atomic(req.wqe.opcode) {
            1
        } else {
            req.len.div_ceil(mtu_bytes(qp.attr.path_mtu)).max(1)
        };
        let first_psn = qp.attr.sq_psn;
        if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
            // CAST: PSN arithmetic is mod 2^24.
            q.attr.sq_psn = packet::psn_add(first_psn, npkts as u32);
        }
        Ok(Some(Flight {
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
        }))
    }

    /// Sends the flight's packets from `next` up to (not including) packet `limit` (the
    /// window); the error is a completion status (the local data could not be read).
    fn transmit(
        &mut self,
        qpn: u32,
        qp: &Qp,
        fl: &mut Flight,
        limit: u64,
        mem: &dyn Dma,
    ) -> Result<(), u8> {
        // Nothing to send (every packet the window allows is out): nothing is read, so
        // nothing is checked (each answer pumps every flight).
        let idle = if fl.rd_atomic() {
            fl.next != 0
        } else {
            fl.next >= fl.npkts.min(limit)
        };
        if idle {
            return Ok(());
        }
        let mtu = mtu_bytes(qp.attr.path_mtu);
        let to = qp.attr.ah;
        let solicited = fl.req.wqe.flags & hw::WQE_FLAG_SOLICITED != 0;
        // UC: its opcodes, and no ACK asked for (UC has none).
        let uc = qp.qp_type == hw::QP_TYPE_UC;
        let bth = |opcode: u8, i: u64, ack_req: bool, last: bool| Bth {
            opcode: if uc { packet::UC | opcode } else { opcode },
            se: solicited && last,
            pkey: 0xffff,
            dest_qp: qp.attr.dest_qp_num,
            ack_req: ack_req && !uc,
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
        if !self.owns(&fl.req.data) {
            // An MR of the WQE's local data was destroyed since it started: nothing more
            // is read from (or, READ, asked for into) memory the NIC no longer owns.
            return Err(hw::WC_LOC_PROT_ERR);
        }
        let mut sent = false;
        if let (Some(seg), true, true) = (fl.req.atomic, fl.atomic(), fl.next == 0) {
            // The atomic's one request packet (again, after a loss: the responder answers
            // a duplicate from its replay cache).
            let opcode = if fl.req.wqe.opcode == hw::WR_ATOMIC_CMP_AND_SWP {
                packet::COMPARE_SWAP
            } else {
                packet::FETCH_ADD
            };
            let pkt = Packet {
                bth: bth(opcode, 0, true, true),
                atomic: Some(AtomicEth {
                    va: reth.va,
                    rkey: reth.rkey,
                    swap_add: if opcode == packet::COMPARE_SWAP {
                        seg.swap
                    } else {
                        seg.compare_add
                    },
                    compare: if opcode == packet::COMPARE_SWAP {
                        seg.compare_add
                    } else {
                        0
                    },
                }),
                ..Default::default()
            };
            self.emit(&to, qpn, &pkt, &[]);
            fl.next = fl.npkts;
            sent = true;
        } else if fl.rd_atomic() && hw::is_flush_or_atomic_write(fl.req.wqe.opcode) {
            // A FLUSH or an ATOMIC WRITE: its one request packet (again, after a loss: the
            // responder answers a duplicate without executing it again).
            if fl.next == 0 {
                // (No solicited event: soft-RoCE sets SE on SENDs and WRITEs with immediate.)
                let (pkt, payload) = flush_or_atomic_write(&fl.req, bth(0, 0, true, false));
                self.emit(&to, qpn, &pkt, &payload);
                fl.next = fl.npkts;
                sent = true;
            }
        } else if fl.rd_atomic() {
            // A READ (an atomic sent already has nothing more to send).
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
                self.emit(&to, qpn, &pkt, &[]);
                fl.next = fl.npkts;
                sent = true;
            }
        } else {
            let gated = self.gate(mem);
            let end = fl.npkts.min(limit);
            let own = self.to_own(&to);
            let mut buf = Vec::new();
            let mut i = fl.next;
            while i < end {
                let last = i + 1 == fl.npkts;
                let opcode = opcode_of(fl.req.wqe.opcode, i, fl.npkts);
                let off = i.saturating_mul(mtu);
                if own && opcode == packet::WRITE_MIDDLE {
                    // To the NIC itself: the middle packets up to the window (or the last
                    // packet) as one, asking for an ACK at its last PSN unless the last
                    // packet follows now (it asks for one).
                    let count = end.min(fl.npkts - 1).saturating_sub(i).max(1);
                    let body = fl.req.data.slice(off, count.saturating_mul(mtu));
                    let Some(body) = body else {
                        return Err(hw::WC_LOC_PROT_ERR);
                    };
                    let ack_req = end < fl.npkts;
                    let pkt = Packet {
                        bth: bth(opcode, i, ack_req, false),
                        ..Default::default()
                    };
                    self.emit_own(&to, qpn, pkt, body, count);
                    i += count;
                    sent = true;
                    continue;
                }
                let ext = packet::headers(opcode).unwrap_or_default();
                let pkt = Packet {
                    bth: bth(opcode, i, last || (i + 1) % ACK_EVERY == 0, last),
                    reth: ext.reth.then_some(reth),
                    imm: ext.imm.then_some(fl.req.wqe.imm.to_le_bytes()),
                    // SEND with invalidate: the rkey, as the WQE holds it.
                    ieth: ext.ieth.then_some(fl.req.wqe.imm),
                    ..Default::default()
                };
                let n = mtu.min(fl.req.len.saturating_sub(off));
                if own {
                    // The payload stays in the sender's memory until the responder copies it.
                    let Some(body) = fl.req.data.slice(off, n) else {
                        return Err(hw::WC_LOC_PROT_ERR);
                    };
                    self.emit_own(&to, qpn, pkt, body, 1);
                } else {
                    buf.resize(usize::try_from(n).unwrap_or(0), 0);
                    let mut pos = fl.req.data.seek(off);
                    if !fl.req.data.read(&gated, &mut pos, &mut buf) {
                        return Err(hw::WC_LOC_PROT_ERR);
                    }
                    self.emit(&to, qpn, &pkt, &buf);
                }
                sent = true;
                i += 1;
            }
            fl.next = fl.next.max(end);
        }
        if uc {
            // Nothing comes back: a packet out is a packet done.
            fl.acked = fl.next;
        } else if sent {
            fl.deadline = self.ack_deadline(qp.attr.timeout);
        }
        Ok(())
    }

    /// Whether QP `qpn` has WQEs in flight (or one held behind them, not completed).
    pub(super) fn sq_in_flight(&self, qpn: u32) -> bool {
        self.wire_qps
            .get(&qpn)
            .is_some_and(|r| !r.flights.q.is_empty() || r.flights.held.is_some())
    }

    /// QP `qpn` has no WQE in flight: in `SQD` with the notification asked for, posts
    /// `QP_SQ_DRAINED` (from an admin command, `via` is `None`: queued after its
    /// completion), once.
    pub(super) fn sq_drained(&mut self, qpn: u32, via: Option<(&dyn Dma, &dyn Interrupts)>) {
        let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) else {
            return;
        };
        if q.state != hw::QPS_SQD || !q.dp.sqd_notify {
            return;
        }
        q.dp.sqd_notify = false;
        debug!(qpn, "send queue drained");
        match via {
            Some((mem, irq)) => {
                self.post_event(hw::EVENT_QP_SQ_DRAINED, qpn, 0, mem, irq);
            }
            None => self.queue_event(hw::EVENT_QP_SQ_DRAINED, qpn, 0),
        }
    }

    /// Whether some QP waits for its transport timer.
    pub(super) fn remote_timers(&self) -> bool {
        self.wire_qps
            .values()
            .any(|r| r.flights.deadline().is_some())
    }

    /// The transport timers at `now`: every QP past its deadline sends again from the
    /// first packet not acknowledged, or, the head WQE's retries spent, ends it in
    /// `WC_RETRY_EXC_ERR`.
    pub(super) fn remote_tick(&mut self, now: Instant, mem: &dyn Dma, irq: &dyn Interrupts) {
        if !self.bus_master {
            // Held: the timers fire once bus mastering is back.
            return;
        }
        let due: Vec<u32> = self
            .wire_qps
            .iter()
            .filter(|(_, r)| r.flights.deadline().is_some_and(|d| d <= now))
            .map(|(&q, _)| q)
            .collect();
        for qpn in due {
            let mut fs = self.take_flights(qpn);
            if fs.resume.take().is_some() {
                // UC: the rest of what was posted, as far as one call goes.
                self.put_flights(qpn, fs);
                self.pump(qpn, mem, irq);
                continue;
            }
            let Some(head) = fs.q.front_mut() else {
                self.put_flights(qpn, fs);
                continue;
            };
            if head.retries == 0 {
                debug!(qpn, "transport timer: retries exhausted");
                let (index, op) = (head.index, head.op);
                self.complete_send(qpn, index, hw::WC_RETRY_EXC_ERR, op, 0, true, mem, irq);
                continue;
            }
            head.retries -= 1;
            fs.rewind();
            self.count(qpn, hw::CNT_LOCAL_ACK_TIMEOUT_ERR, 1);
            debug!(qpn, "transport timer: sending again");
            self.put_flights(qpn, fs);
            self.pump(qpn, mem, irq);
        }
    }
}
