//! The RC engine's requester (soft-RoCE's `rxe_req.c`): on an SQ doorbell it takes the
//! QP's new send WQEs in order, checks and translates them, and sends their request
//! packets, one per `path_mtu` bytes, to the responder. Loopback only: a QP whose AV `dlid`
//! is the port's own LID talks to `dest_qp_num` on this NIC, synchronously, packet by
//! packet: each request goes through the [`super::responder`] at once and its answer
//! through the [`super::completer`]; a WRITE's middle packets go together, once its first
//! packet made the responder keep the translation of the whole range.

use ordma_hw as hw;

use super::completer::Answer;
use super::counters::{bounded_warn, Anomaly};
use super::data::Data;
use super::packet::{self, Bth, Packet, Reth};
use super::pages;
use super::qp::{Qp, WorkQueue};
use super::responder::Inbound;
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// The port's largest message (2 GiB).
pub(super) const MAX_MSG: u64 = 1 << 31;

/// Bytes one call of [`Nic::run_sq`] moves before it leaves the rest of the send queue to
/// the timer thread (`backlog`), so a guest's doorbell holds the NIC for a bounded time
/// (one message beyond it at most).
pub(super) const SQ_BUDGET: u64 = 64 << 20;

/// The bytes of WQE `index` of `wq` (one WQE never crosses a page: pages are at least
/// 4 KiB, WQEs at most 1 KiB and aligned); `None` if the ring cannot be read.
pub(super) fn wqe_bytes(mem: &dyn Dma, wq: &WorkQueue, index: u16) -> Option<Vec<u8>> {
    let depth = wq.depth();
    if depth == 0 {
        return None;
    }
    let off = u64::from(index % depth) << wq.log_wqe_size.min(hw::WQE_LOG_SIZE_MAX);
    let shift = wq.ring.page_shift.min(63);
    let page = pages::page_addr(mem, &wq.ring, off >> shift).ok()?;
    let addr = page.checked_add(off % (1u64 << shift))?;
    let mut b = vec![0u8; 1usize << wq.log_wqe_size.min(hw::WQE_LOG_SIZE_MAX)];
    mem.dma_read(addr, &mut b).ok()?;
    Some(b)
}

/// The completion opcode of send opcode `op` (`WC_SEND` for one that is not valid).
pub(super) fn wc_opcode(op: u8) -> u8 {
    match op {
        hw::WR_RDMA_WRITE | hw::WR_RDMA_WRITE_IMM => hw::WC_RDMA_WRITE,
        hw::WR_RDMA_READ => hw::WC_RDMA_READ,
        _ => hw::WC_SEND,
    }
}

/// A checked send WQE, its local data translated.
pub(super) struct Request {
    pub(super) wqe: hw::SendWqe,
    pub(super) data: Data,
    pub(super) len: u64,
}

/// How the head WQE ended this time.
pub(super) enum Step {
    /// Done: a CQE if signaled.
    Done(u32),
    /// Waiting for an RNR retry: the WQE stays at the head.
    Wait,
    /// Failed with a status; the byte count for the CQE.
    Failed(u8, u32),
}

/// The BTH opcode of packet `i` of `n` of a SEND or WRITE message.
pub(super) fn opcode_of(op: u8, i: u64, n: u64) -> u8 {
    let (first, last) = (i == 0, i + 1 == n);
    match (op, first, last) {
        (hw::WR_SEND, true, true) => packet::SEND_ONLY,
        (hw::WR_SEND_IMM, true, true) => packet::SEND_ONLY_IMM,
        (hw::WR_SEND | hw::WR_SEND_IMM, true, false) => packet::SEND_FIRST,
        (hw::WR_SEND | hw::WR_SEND_IMM, false, false) => packet::SEND_MIDDLE,
        (hw::WR_SEND, false, true) => packet::SEND_LAST,
        (hw::WR_SEND_IMM, false, true) => packet::SEND_LAST_IMM,
        (hw::WR_RDMA_WRITE, true, true) => packet::WRITE_ONLY,
        (hw::WR_RDMA_WRITE_IMM, true, true) => packet::WRITE_ONLY_IMM,
        (_, true, false) => packet::WRITE_FIRST,
        (_, false, false) => packet::WRITE_MIDDLE,
        (hw::WR_RDMA_WRITE_IMM, false, true) => packet::WRITE_LAST_IMM,
        _ => packet::WRITE_LAST,
    }
}

/// Bytes per packet for an MTU code (1 = 256 .. 5 = 4096).
pub(super) fn mtu_bytes(code: u8) -> u64 {
    128u64 << code.clamp(1, 5)
}

impl Nic {
    /// Runs QP `qpn`'s send queue: every WQE up to the producer index, in order, while the
    /// QP is in `RTS` and not waiting for an RNR retry; in `ERR` flushes it.
    pub(super) fn run_sq(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if !self.bus_master {
            self.refused("send queue");
            return;
        }
        let mut spent = 0u64;
        // Bounded: each pass completes a WQE or returns; a queue holds at most 2^15.
        for _ in 0..=u32::from(u16::MAX) {
            let Some(qp) = self.qp(qpn).copied() else {
                return;
            };
            if qp.state == hw::QPS_ERR {
                return self.flush(qpn, mem, irq);
            }
            if qp.attr.ah.dlid != self.config.lid && self.wire.is_some() {
                return self.pump(qpn, mem, irq);
            }
            if qp.state != hw::QPS_RTS || qp.dp.rnr_wait.is_some() || qp.sq.ci == qp.sq.pi {
                return;
            }
            if spent >= SQ_BUDGET {
                if let Some(q) = super::qp::qp_index(qpn).and_then(|i| self.qps.get_index_mut(i)) {
                    q.dp.backlog = true;
                }
                return;
            }
            let index = qp.sq.ci;
            let (step, op, signaled) = self.send_wqe(qpn, &qp, index, mem, irq);
            match step {
                Step::Wait => return,
                Step::Done(bytes) => {
                    // At least a packet's worth per WQE, so empty ones count too.
                    spent = spent.saturating_add(u64::from(bytes).max(4096));
                    self.complete_send(qpn, index, hw::WC_SUCCESS, op, bytes, signaled, mem, irq)
                }
                Step::Failed(status, bytes) => {
                    self.complete_send(qpn, index, status, op, bytes, true, mem, irq)
                }
            }
        }
    }

    /// Checks WQE `raw` of QP `qp`; translates its local SGEs. The error is the status.
    pub(super) fn check(&self, qp: &Qp, raw: &[u8], mem: &dyn Dma) -> Result<Request, (u8, u32)> {
        let op_err = (hw::WC_LOC_QP_OP_ERR, 0);
        let wqe = hw::SendWqe::decode(raw).ok_or(op_err)?;
        let inline = wqe.flags & hw::WQE_FLAG_INLINE != 0;
        let read = wqe.opcode == hw::WR_RDMA_READ;
        if wqe.opcode > hw::WR_RDMA_READ
            || wqe.flags & !hw::WQE_FLAGS != 0
            || wqe.num_sge > qp.max_send_sge
            || (inline && (read || wqe.num_sge != 0 || wqe.inline_len > u32::from(qp.max_inline)))
            || (!inline && wqe.inline_len != 0)
        {
            return Err(op_err);
        }
        if inline {
            let start = hw::SendWqe::sge_offset(0);
            let end = start.checked_add(wqe.inline_len as usize).ok_or(op_err)?;
            let bytes = raw.get(start..end).ok_or(op_err)?.to_vec();
            return Ok(Request {
                wqe,
                len: u64::from(wqe.inline_len),
                data: Data::Inline(bytes),
            });
        }
        let access = if read { hw::ACCESS_LOCAL_WRITE } else { 0 };
        let mut len = 0u64;
        let mut data = Data::empty();
        for i in 0..usize::from(wqe.num_sge) {
            let sge = hw::Sge::decode_from(raw, hw::SendWqe::sge_offset(i)).ok_or(op_err)?;
            if sge.length == 0 {
                continue;
            }
            len += u64::from(sge.length);
            if len > MAX_MSG {
                return Err((hw::WC_LOC_LEN_ERR, 0));
            }
            let p = self
                .translate_kept(
                    mem,
                    sge.lkey,
                    qp.pdn,
                    sge.addr,
                    u64::from(sge.length),
                    access,
                )
                .map_err(|_| (hw::WC_LOC_PROT_ERR, 0))?;
            data.append(p);
        }
        Ok(Request { wqe, data, len })
    }

    /// Reads send WQE `index` of QP `qpn` (a copy of it in `qp`) from its ring and checks it
    /// ([`Self::check`]): the request and its completion opcode, or the error completion's
    /// status, the bytes it had reached and its opcode (a refused WQE is counted and logged,
    /// bounded). Loopback and the wire take their WQEs here alike.
    pub(super) fn fetch_wqe(
        &mut self,
        qpn: u32,
        qp: &Qp,
        index: u16,
        mem: &dyn Dma,
    ) -> Result<(Request, u8), (u8, u32, u8)> {
        let gated = self.gate(mem);
        let Some(raw) = wqe_bytes(&gated, &qp.sq, index) else {
            return Err((hw::WC_LOC_QP_OP_ERR, 0, hw::WC_SEND));
        };
        let op = wc_opcode(raw.first().copied().unwrap_or(0));
        match self.check(qp, &raw, &gated) {
            Ok(r) => Ok((r, op)),
            Err((status, n)) => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadWqe,
                    qpn,
                    index,
                    status,
                    "send WQE refused: error completion"
                );
                Err((status, n, op))
            }
        }
    }

    /// Sends WQE `index` of QP `qpn` (a copy of it in `qp`), from the packet an RNR NAK
    /// stopped at, if any. Returns the outcome, the WQE's completion opcode and whether it
    /// is signaled.
    fn send_wqe(
        &mut self,
        qpn: u32,
        qp: &Qp,
        index: u16,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> (Step, u8, bool) {
        let (req, op) = match self.fetch_wqe(qpn, qp, index, mem) {
            Ok(r) => r,
            Err((status, n, op)) => return (Step::Failed(status, n), op, true),
        };
        let signaled = req.wqe.flags & hw::WQE_FLAG_SIGNALED != 0;
        // CAST: at most MAX_MSG.
        let len32 = req.len as u32;
        if qp.attr.ah.dlid != self.config.lid {
            // No route: this model has no wire (`--wire`); the request is never answered,
            // as if every retry timed out.
            return (Step::Failed(hw::WC_RETRY_EXC_ERR, 0), op, true);
        }
        let mtu = mtu_bytes(qp.attr.path_mtu);
        let npkts = req.len.div_ceil(mtu).max(1);
        let first_psn = qp.attr.sq_psn;
        let solicited = req.wqe.flags & hw::WQE_FLAG_SOLICITED != 0;
        let bth = |opcode: u8, i: u64, last: bool| Bth {
            opcode,
            se: solicited && last,
            pkey: 0xffff,
            dest_qp: qp.attr.dest_qp_num,
            ack_req: last,
            // CAST: PSN arithmetic is mod 2^24.
            psn: packet::psn_add(first_psn, i as u32),
            ..Default::default()
        };
        let mut inb = Inbound::one_call();
        if req.wqe.opcode == hw::WR_RDMA_READ {
            let pkt = Packet {
                bth: bth(packet::READ_REQUEST, 0, true),
                reth: Some(Reth {
                    va: req.wqe.remote_addr,
                    rkey: req.wqe.rkey,
                    dma_len: len32,
                }),
                ..Default::default()
            };
            let answer = self.deliver(qpn, &pkt, None, &mut inb, mem, irq);
            let answer = self.read_responses(answer, &req.data, req.len, mem);
            return (self.answered(qpn, answer, len32, npkts, 0), op, signaled);
        }
        let start = qp.dp.resume;
        let mut pos = req.data.seek(start.saturating_mul(mtu));
        let mut i = start;
        while i < npkts {
            let last = i + 1 == npkts;
            let opcode = opcode_of(req.wqe.opcode, i, npkts);
            if opcode == packet::WRITE_MIDDLE && inb.writing() {
                // The responder kept the first packet's translation: every middle packet
                // at once, one copy per contiguous stretch (the last one follows alone).
                let count = npkts - 1 - i;
                let n = count.saturating_mul(mtu);
                // CAST: PSN arithmetic is mod 2^24.
                let psn = packet::psn_add(first_psn, i as u32);
                let answer = self.deliver_middles(
                    qpn,
                    qp.attr.dest_qp_num,
                    psn,
                    count,
                    Some((&req.data, &mut pos, n)),
                    &mut inb,
                    mem,
                    irq,
                );
                if !matches!(answer, Answer::Ack) {
                    return (self.answered(qpn, answer, len32, npkts, i), op, signaled);
                }
                i += count;
                continue;
            }
            let (reth, imm) = packet::headers(opcode).map_or((false, false), |h| (h.0, h.2));
            let pkt = Packet {
                bth: bth(opcode, i, last),
                reth: reth.then_some(Reth {
                    va: req.wqe.remote_addr,
                    rkey: req.wqe.rkey,
                    dma_len: len32,
                }),
                aeth: None,
                imm: imm.then_some(req.wqe.imm.to_le_bytes()),
            };
            let n = mtu.min(req.len - i * mtu);
            let answer = self.deliver(
                qpn,
                &pkt,
                Some((&req.data, &mut pos, n)),
                &mut inb,
                mem,
                irq,
            );
            if !matches!(answer, Answer::Ack) || last {
                return (self.answered(qpn, answer, len32, npkts, i), op, signaled);
            }
            i += 1;
        }
        (Step::Done(len32), op, signaled)
    }
}
