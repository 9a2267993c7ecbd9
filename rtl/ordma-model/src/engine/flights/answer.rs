//! The completer's side of the requester over the wire ([`super`]): the ACKs, NAKs, read
//! responses and atomic acknowledges that end the WQEs in flight, in order.

use std::time::Instant;

use ordma_hw as hw;
use tracing::debug;

use super::{Flight, Outcome};
use crate::engine::completer::{rnr_delay, RETRY_FOREVER};
use crate::engine::data::{Data, Pos};
use crate::engine::packet::{self, NakCode, Packet, Syndrome};
use crate::engine::port::Source;
use crate::engine::qp::{qp_index, Qp};
use crate::engine::remote::psn_sub;
use crate::engine::requester::mtu_bytes;
use crate::engine::{Interrupts, Nic};
use crate::mem::Dma;

impl Nic {
    /// The completer's side of an ACK, NAK or read response from `src`, its payload
    /// `body` (`count` responses of one READ together, from the NIC itself).
    pub(in crate::engine) fn on_answer(
        &mut self,
        src: &Source,
        pkt: &Packet,
        body: &Data,
        count: u64,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let qpn = pkt.bth.dest_qp;
        self.count(qpn, hw::CNT_RCVD_PKTS, count);
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        let live = matches!(qp.state, hw::QPS_RTS | hw::QPS_SQD);
        if !live || !self.is_peer(&qp.attr.ah, src) || qp.qp_type != hw::QP_TYPE_RC {
            // (UC has no answers: one is ignored.)
            return;
        }
        let mut fs = self.take_flights(qpn);
        // The WQE whose PSNs the frame's falls in.
        let hit = fs.q.iter().enumerate().find_map(|(k, fl)| {
            let d = u64::from(psn_sub(pkt.bth.psn, fl.first_psn));
            (d < fl.npkts).then_some((k, d))
        });
        let syndrome = pkt.aeth.map(|a| a.syndrome);
        // An answer is an ACK or NAK, a read response in a READ's PSNs, or an atomic
        // acknowledge at an atomic's.
        let answers = |fl: &Flight| match pkt.bth.opcode {
            packet::ACKNOWLEDGE => syndrome.is_some(),
            packet::ATOMIC_ACKNOWLEDGE => fl.atomic() && pkt.atomic_ack.is_some(),
            _ => fl.read(),
        };
        let Some((k, diff)) = hit.filter(|&(k, _)| fs.q.get(k).is_some_and(answers)) else {
            self.put_flights(qpn, fs);
            return;
        };
        if let Some(j) = fs.q.iter().take(k).position(Flight::rd_atomic) {
            // An answer at a later WQE's PSN while a READ or atomic before it misses its
            // responses: they were lost. The WQEs before it are done; it asks again (a
            // READ for the rest), once per gap, and the WQEs behind it go again.
            let done: Vec<Flight> = fs.q.drain(..j).collect();
            let progress = !done.is_empty();
            self.complete_flights(qpn, done, mem, irq);
            let mut again = progress;
            if let Some(acked) =
                fs.q.front()
                    .filter(|r| r.reread != Some(r.acked))
                    .map(|r| r.acked)
            {
                fs.rewind();
                if let Some(r) = fs.q.front_mut() {
                    r.reread = Some(acked);
                }
                again = true;
            }
            if progress {
                let t = self.ack_deadline(qp.attr.timeout);
                for f in &mut fs.q {
                    f.deadline = f.deadline.and(t);
                }
                if let Some(r) = fs.q.front_mut() {
                    r.retries = qp.attr.retry_cnt;
                }
            }
            self.put_flights(qpn, fs);
            if again {
                self.pump(qpn, mem, irq);
            }
            return;
        }
        // An ACK or NAK at a later WQE's PSN: the responder executed every WQE before it.
        let before: Vec<Flight> = fs.q.drain(..k).collect();
        let Some(mut fl) = fs.q.pop_front() else {
            self.put_flights(qpn, fs);
            return;
        };
        let current = diff >= fl.acked;
        let outcome = match (pkt.bth.opcode, syndrome) {
            (packet::ACKNOWLEDGE, Some(Syndrome::Ack(_))) if current && !fl.rd_atomic() => {
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
                self.count(qpn, hw::CNT_RCVD_RNR_ERR, 1);
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
                    fs.rewind();
                    Outcome::Keep
                }
            }
            (packet::ACKNOWLEDGE, Some(Syndrome::Nak(NakCode::PsnSeq))) if current => {
                self.count(qpn, hw::CNT_RCVD_SEQ_ERR, 1);
                fl.acked = diff;
                fl.rewind();
                fs.rewind();
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
            (packet::ATOMIC_ACKNOWLEDGE, Some(Syndrome::Ack(_))) if current => {
                self.atomic_response(&fl, pkt.atomic_ack.unwrap_or(0), mem)
            }
            (packet::ATOMIC_ACKNOWLEDGE, _) => Outcome::Keep,
            (_, _) if fl.read() && diff == fl.acked && diff < fl.npkts => {
                self.read_response(&mut fl, &qp, diff, count, body, mem)
            }
            (_, _) if fl.read() && current && fl.reread != Some(fl.acked) => {
                // A gap in the read responses: ask for the rest again, once per gap.
                fl.reread = Some(fl.acked);
                fl.rewind();
                Outcome::Send
            }
            _ => Outcome::Keep,
        };
        let progress = !before.is_empty()
            || matches!(
                outcome,
                Outcome::Progress | Outcome::Done(hw::WC_SUCCESS, _)
            );
        self.complete_flights(qpn, before, mem, irq);
        if progress {
            // The transport timer starts again on progress, for every WQE it runs for.
            let again = self.ack_deadline(qp.attr.timeout);
            fl.deadline = fl.deadline.and(again);
            for f in &mut fs.q {
                f.deadline = f.deadline.and(again);
            }
            fl.retries = qp.attr.retry_cnt;
            if let Some(q) = qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
                if !matches!(outcome, Outcome::Keep) {
                    q.dp.rnr_left = None;
                }
            }
        }
        match outcome {
            Outcome::Done(status, bytes) => {
                let (index, op, signaled) = (fl.index, fl.op, fl.signaled);
                self.complete_send(qpn, index, status, op, bytes, signaled, mem, irq);
                self.put_flights(qpn, fs);
                self.pump(qpn, mem, irq);
                if !self.sq_in_flight(qpn) {
                    self.sq_drained(qpn, Some((mem, irq)));
                }
            }
            Outcome::Keep if !progress => {
                fs.q.push_front(fl);
                self.put_flights(qpn, fs);
            }
            Outcome::Keep | Outcome::Progress | Outcome::Send => {
                fs.q.push_front(fl);
                self.put_flights(qpn, fs);
                self.pump(qpn, mem, irq);
            }
        }
    }

    /// Completes `done`, WQEs the responder answered, in order.
    pub(super) fn complete_flights(
        &mut self,
        qpn: u32,
        done: Vec<Flight>,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        for b in done {
            let bytes = b.completion_bytes();
            let (index, op, signaled) = (b.index, b.op, b.signaled);
            self.complete_send(qpn, index, hw::WC_SUCCESS, op, bytes, signaled, mem, irq);
        }
    }

    /// The atomic's answer: `value`, the word's old value, into its local buffer (8 bytes,
    /// checked when it started), little-endian as in memory.
    fn atomic_response(&mut self, fl: &Flight, value: u64, mem: &dyn Dma) -> Outcome {
        let gated = self.gate(mem);
        let mut pos = fl.req.data.seek(0);
        if !self.owns(&fl.req.data) || !fl.req.data.write(&gated, &mut pos, &value.to_le_bytes()) {
            return Outcome::Done(hw::WC_LOC_PROT_ERR, 0);
        }
        Outcome::Done(hw::WC_SUCCESS, hw::ATOMIC_SIZE)
    }

    /// Read responses `k` to `k + count` of the flight: their bytes to the local buffers
    /// (each full but the READ's last; a FLUSH's or ATOMIC WRITE's one response is empty).
    fn read_response(
        &mut self,
        fl: &mut Flight,
        qp: &Qp,
        k: u64,
        count: u64,
        payload: &Data,
        mem: &dyn Dma,
    ) -> Outcome {
        let mtu = mtu_bytes(qp.attr.path_mtu);
        let off = k.saturating_mul(mtu);
        let full = count.saturating_mul(mtu);
        let want = full.min(fl.req.len.saturating_sub(off));
        let end = k.saturating_add(count);
        if count == 0 || end > fl.npkts || payload.len() != want || (end < fl.npkts && want != full)
        {
            return Outcome::Keep;
        }
        let gated = self.gate(mem);
        let mut pos = fl.req.data.seek(off);
        let ok = self.owns(&fl.req.data)
            && usize::try_from(want).is_ok_and(|n| {
                payload.copy_to(&gated, &mut Pos::default(), &fl.req.data, &mut pos, n)
            });
        if !ok {
            return Outcome::Done(hw::WC_LOC_PROT_ERR, 0);
        }
        fl.acked = end;
        if fl.acked == fl.npkts {
            return Outcome::Done(hw::WC_SUCCESS, fl.completion_bytes());
        }
        fl.deadline = self.ack_deadline(qp.attr.timeout);
        fl.retries = qp.attr.retry_cnt;
        Outcome::Keep
    }
}
