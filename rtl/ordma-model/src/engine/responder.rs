//! The RC engine's responder (soft-RoCE's `rxe_resp.c`): executes request packets against
//! its QP's receive queue and MRs and answers ACK, RNR NAK, NAK, (READ) the data for the
//! read responses, (atomics, [`super::atomic`]) the old value or (FLUSH, ATOMIC WRITE,
//! [`super::flush`]) an empty read response. Receive CQEs are written
//! here.

use ordma_hw as hw;
use tracing::debug;

use super::completer::{read_packets, Answer};
use super::counters::{bounded_warn, Anomaly};
use super::data::{Data, Pos};
use super::packet::{self, NakCode, Packet};
use super::requester::wqe_bytes;
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// The responder's state for the message being received, across its packets: the receive
/// WQE a SEND consumes, its buffers (translated at the first packet) and the bytes so far;
/// the translation of the RDMA WRITE being received (its whole range, made at its first
/// packet) and the position in it. Both kept translations are used only while their MRs
/// are still registered ([`Nic::owns`]): a receive buffer whose MR is gone ends the receive
/// WQE in `WC_LOC_PROT_ERR` (NAK remote operational error), a WRITE target whose MR is gone
/// is a remote access error (NAK remote access error), and nothing is written.
#[derive(Debug, Default)]
pub(super) struct Inbound {
    recv: Option<(u16, Data, u64)>,
    got: u64,
    pos: Pos,
    /// The WRITE being received: its whole range translated, and the position in it.
    write: Option<(Data, Pos)>,
}

impl Inbound {
    /// The receive WQE a SEND in progress holds (its index), if any.
    pub(super) fn claimed(&self) -> Option<u16> {
        self.recv.as_ref().map(|r| r.0)
    }

    /// Forgets the message in progress (UC drops it): its receive WQE, not completed, is
    /// the next one claimed.
    pub(super) fn abandon(&mut self) {
        *self = Self::default();
    }
}

/// A payload handed to the responder: the sender's data, the position, the length.
pub(super) type Payload<'a> = Option<(&'a Data, &'a mut Pos, u64)>;

impl Nic {
    /// QP `qpn`, mutably.
    pub(super) fn qp_mut(&mut self, qpn: u32) -> Option<&mut super::qp::Qp> {
        super::qp::qp_index(qpn).and_then(|i| self.qps.get_index_mut(i))
    }

    /// Delivers request `pkt` from QP `src` with its payload; the answer.
    pub(super) fn deliver(
        &mut self,
        src: u32,
        pkt: &Packet,
        payload: Payload<'_>,
        inb: &mut Inbound,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Answer {
        let qpn = pkt.bth.dest_qp;
        let qp = match self.accept(src, qpn, pkt.bth.psn, mem, irq) {
            Ok(qp) => qp,
            Err(a) => return a,
        };
        let gated = self.gate(mem);
        let op = pkt.bth.opcode;
        let mut advance = 1u64;
        let answer = match op {
            packet::SEND_FIRST
            | packet::SEND_ONLY
            | packet::SEND_ONLY_IMM
            | packet::SEND_ONLY_INV => match self.claim_recv(qpn, true, &gated, mem, irq) {
                Ok(r) => {
                    inb.recv = Some(r);
                    inb.got = 0;
                    inb.pos = Pos::default();
                    self.recv_data(qpn, pkt, payload, inb, &gated, mem, irq)
                }
                Err(a) => a,
            },
            packet::SEND_MIDDLE
            | packet::SEND_LAST
            | packet::SEND_LAST_IMM
            | packet::SEND_LAST_INV => self.recv_data(qpn, pkt, payload, inb, &gated, mem, irq),
            packet::WRITE_FIRST
            | packet::WRITE_ONLY
            | packet::WRITE_ONLY_IMM
            | packet::WRITE_MIDDLE
            | packet::WRITE_LAST
            | packet::WRITE_LAST_IMM => self.write_data(qpn, pkt, payload, inb, &gated, mem, irq),
            // No responder resources for READs (`max_dest_rd_atomic` 0): refused. The
            // responder answers a READ at once, in full, so it never holds more than one.
            packet::READ_REQUEST if qp.attr.max_dest_rd_atomic == 0 => {
                Answer::Nak(NakCode::InvalidRequest)
            }
            packet::READ_REQUEST => {
                let reth = pkt.reth.unwrap_or_default();
                let len = u64::from(reth.dma_len);
                match self.remote(qpn, reth.rkey, reth.va, len, hw::ACCESS_REMOTE_READ, &gated) {
                    Some(data) => {
                        advance = read_packets(len, qp.attr.path_mtu);
                        self.message_done(qpn);
                        Answer::Read(data)
                    }
                    None => self.access_error(qpn, mem, irq),
                }
            }
            packet::COMPARE_SWAP | packet::FETCH_ADD => {
                self.atomic_request(qpn, &qp, pkt, mem, irq)
            }
            // ATOMIC WRITE ([`super::flush`]) takes a responder resource too; FLUSH does not
            // (as soft-RoCE, whose requester does not count it either).
            packet::ATOMIC_WRITE if qp.attr.max_dest_rd_atomic == 0 => {
                Answer::Nak(NakCode::InvalidRequest)
            }
            packet::ATOMIC_WRITE => self.atomic_write(qpn, pkt, payload, mem, irq),
            packet::FLUSH => self.flush_request(qpn, pkt, mem, irq),
            _ => Answer::Nak(NakCode::InvalidRequest),
        };
        if matches!(
            answer,
            Answer::Ack | Answer::Read(_) | Answer::Atomic(_) | Answer::EmptyRead
        ) {
            if let Some(q) = self.qp_mut(qpn) {
                // CAST: PSN arithmetic is mod 2^24.
                q.attr.rq_psn = packet::psn_add(q.attr.rq_psn, advance as u32);
            }
        }
        answer
    }

    /// The checks every request packet passes first, from QP `src` to QP `qpn` with PSN
    /// `psn`: the QP is live and connected to `src` (else dropped), `QP_COMM_EST` on the
    /// first request in `RTR`, the PSN is the one expected (else `NAK PSN sequence error`).
    /// A copy of the QP.
    fn accept(
        &mut self,
        src: u32,
        qpn: u32,
        psn: u32,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Result<super::qp::Qp, Answer> {
        let Some(qp) = self.qp(qpn).copied() else {
            return Err(Answer::Drop);
        };
        let live = matches!(qp.state, hw::QPS_RTR | hw::QPS_RTS | hw::QPS_SQD);
        if !live || qp.attr.dest_qp_num != src {
            debug!(qpn, src, state = qp.state, "request dropped");
            return Err(Answer::Drop);
        }
        if qp.state == hw::QPS_RTR && !qp.dp.comm_est {
            if let Some(q) = self.qp_mut(qpn) {
                q.dp.comm_est = true;
            }
            self.post_event(hw::EVENT_QP_COMM_EST, qpn, 0, mem, irq);
        }
        if psn != qp.attr.rq_psn {
            return Err(Answer::Nak(NakCode::PsnSeq));
        }
        Ok(qp)
    }

    /// Loopback: `count` consecutive `WRITE_MIDDLE` packets from QP `src` to QP `qpn`, the
    /// first with PSN `psn`, carrying `payload`'s bytes together, delivered at once after
    /// the message's first packet kept its translation. The checks
    /// are those of each packet: the QP live, connected to `src`, expecting `psn`; a WRITE
    /// in progress with at least these bytes left. Then one copy per stretch contiguous on
    /// both sides, and `rq_psn` advances by `count`: the same outcome as `count` calls of
    /// [`Self::deliver`], but for where a failed copy stops (the message fails either way).
    #[allow(clippy::too_many_arguments, reason = "the packets and their context")]
    pub(super) fn deliver_middles(
        &mut self,
        src: u32,
        qpn: u32,
        psn: u32,
        count: u64,
        payload: Payload<'_>,
        inb: &mut Inbound,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Answer {
        let qp = match self.accept(src, qpn, psn, mem, irq) {
            Ok(qp) => qp,
            Err(a) => return a,
        };
        let (Some((dst, mut pos)), Some((va, rkey, left, total))) = (inb.write.take(), qp.dp.write)
        else {
            return Answer::Nak(NakCode::InvalidRequest);
        };
        let n = payload.as_ref().map_or(0, |p| p.2);
        // At most the message's packets (2^31 / 256); PSNs are mod 2^24.
        let Ok(advance) = u32::try_from(count) else {
            return Answer::Nak(NakCode::InvalidRequest);
        };
        if n > left {
            return Answer::Nak(NakCode::InvalidRequest);
        }
        if !self.owns(&dst) {
            return self.access_error(qpn, mem, irq);
        }
        let gated = self.gate(mem);
        if !Self::copy(payload, &dst, &mut pos, &gated) {
            return Answer::Nak(NakCode::RemoteOp);
        }
        inb.write = Some((dst, pos));
        if let Some(q) = self.qp_mut(qpn) {
            q.dp.write = Some((va.wrapping_add(n), rkey, left - n, total));
            q.attr.rq_psn = packet::psn_add(q.attr.rq_psn, advance);
        }
        Answer::Ack
    }

    /// One more message done at QP `qpn` (the AETH's MSN).
    pub(super) fn message_done(&mut self, qpn: u32) {
        if let Some(q) = self.qp_mut(qpn) {
            q.dp.msn = packet::psn_add(q.dp.msn, 1);
        }
    }

    /// Translates the remote range for `access`, which the QP must allow too; `None` if
    /// refused. A zero-length range needs no MR (as soft-RoCE).
    pub(super) fn remote(
        &self,
        qpn: u32,
        rkey: u32,
        va: u64,
        len: u64,
        access: u32,
        mem: &dyn Dma,
    ) -> Option<Data> {
        let qp = self.qp(qpn)?;
        if qp.attr.qp_access_flags & access == 0 {
            return None;
        }
        if len == 0 {
            return Some(Data::empty());
        }
        if super::mw::handle(rkey).is_some() {
            return self.window_translate(mem, qpn, qp.pdn, rkey, va, len, access);
        }
        self.translate_kept(mem, rkey, qp.pdn, va, len, access).ok()
    }

    /// A remote access violation at QP `qpn`: `ERR`, `QP_ACCESS_ERR`, NAK.
    pub(super) fn access_error(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) -> Answer {
        if self.qp(qpn).is_some_and(|q| q.qp_type == hw::QP_TYPE_UC) {
            // UC drops the message silently ([`super::uc`]).
            debug!(qpn, "remote access error: the UC message is dropped");
            return Answer::Nak(NakCode::RemoteAccess);
        }
        debug!(qpn, "remote access error");
        self.enter_error(qpn, mem, irq);
        self.post_event(hw::EVENT_QP_ACCESS_ERR, qpn, 0, mem, irq);
        Answer::Nak(NakCode::RemoteAccess)
    }

    /// Claims the next receive WQE of QP `qpn` (of its SRQ, if it has one:
    /// [`Nic::srq_claim`]), with its buffers translated if `sges`.
    pub(super) fn claim_recv(
        &mut self,
        qpn: u32,
        sges: bool,
        gated: &dyn Dma,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Result<(u16, Data, u64), Answer> {
        let Some(qp) = self.qp(qpn).copied() else {
            return Err(Answer::Drop);
        };
        if let Some(srqn) = qp.srqn {
            return self.srq_claim(qpn, &qp, srqn, sges, gated, mem, irq);
        }
        let Some(rq) = qp.rq else {
            return Err(Answer::Nak(NakCode::InvalidRequest));
        };
        if rq.ci == rq.pi {
            return Err(Answer::Rnr(qp.attr.min_rnr_timer));
        }
        let index = rq.ci;
        let fail = |nic: &mut Self, status| {
            bounded_warn!(
                nic.counters,
                Anomaly::BadWqe,
                qpn,
                index,
                status,
                "receive WQE refused: error completion"
            );
            nic.complete_recv(qpn, index, status, hw::WC_RECV, 0, None, 0, mem, irq);
            Err(Answer::Nak(NakCode::RemoteOp))
        };
        let Some(raw) = wqe_bytes(gated, &rq, index) else {
            return fail(self, hw::WC_LOC_QP_OP_ERR);
        };
        let Some(wqe) = hw::RecvWqe::decode(&raw).filter(|w| w.num_sge <= qp.max_recv_sge) else {
            return fail(self, hw::WC_LOC_QP_OP_ERR);
        };
        let n = if sges { wqe.num_sge } else { 0 };
        match self.recv_buffers(gated, &raw, n, qp.pdn) {
            Ok((data, cap)) => Ok((index, data, cap)),
            Err(status) => fail(self, status),
        }
    }

    /// The `n` SGEs of the receive (or SRQ) WQE `raw`, translated with PD `pdn` for the
    /// NIC to write into, and the bytes they hold; the completion status if one is
    /// malformed (`LOC_QP_OP_ERR`) or refused (`LOC_PROT_ERR`).
    pub(super) fn recv_buffers(
        &self,
        gated: &dyn Dma,
        raw: &[u8],
        n: u8,
        pdn: u32,
    ) -> Result<(Data, u64), u8> {
        let mut data = Data::empty();
        let mut cap = 0u64;
        for i in 0..usize::from(n) {
            let sge = hw::Sge::decode_from(raw, hw::RecvWqe::sge_offset(i))
                .ok_or(hw::WC_LOC_QP_OP_ERR)?;
            if sge.length == 0 {
                continue;
            }
            let len = u64::from(sge.length);
            let piece = self
                .translate_kept(gated, sge.lkey, pdn, sge.addr, len, hw::ACCESS_LOCAL_WRITE)
                .map_err(|_| hw::WC_LOC_PROT_ERR)?;
            data.append(piece);
            cap += len;
        }
        Ok((data, cap))
    }

    /// Copies a packet's payload to `dst` at `pos`; false if a DMA failed.
    pub(super) fn copy(payload: Payload<'_>, dst: &Data, pos: &mut Pos, mem: &dyn Dma) -> bool {
        let Some((src, spos, n)) = payload else {
            return true;
        };
        let Ok(n) = usize::try_from(n) else {
            return false;
        };
        src.copy_to(mem, spos, dst, pos, n)
    }

    /// A SEND packet's data into the claimed receive WQE; completes it on the last.
    #[allow(clippy::too_many_arguments, reason = "the packet and its context")]
    fn recv_data(
        &mut self,
        qpn: u32,
        pkt: &Packet,
        payload: Payload<'_>,
        inb: &mut Inbound,
        gated: &dyn Dma,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Answer {
        let Some((index, dst, cap)) = inb.recv.take() else {
            return Answer::Nak(NakCode::InvalidRequest);
        };
        let n = payload.as_ref().map_or(0, |p| p.2);
        let got = inb.got.saturating_add(n);
        if got > cap {
            self.complete_recv(
                qpn,
                index,
                hw::WC_LOC_LEN_ERR,
                hw::WC_RECV,
                0,
                None,
                0,
                mem,
                irq,
            );
            return Answer::Nak(NakCode::InvalidRequest);
        }
        let mut pos = inb.pos;
        // The buffers were translated at the message's first packet: used only while
        // their MRs are still registered.
        if !self.owns(&dst) || !Self::copy(payload, &dst, &mut pos, gated) {
            self.complete_recv(
                qpn,
                index,
                hw::WC_LOC_PROT_ERR,
                hw::WC_RECV,
                0,
                None,
                0,
                mem,
                irq,
            );
            return Answer::Nak(NakCode::RemoteOp);
        }
        inb.got = got;
        inb.pos = pos;
        let last = matches!(
            pkt.bth.opcode,
            packet::SEND_ONLY
                | packet::SEND_ONLY_IMM
                | packet::SEND_ONLY_INV
                | packet::SEND_LAST
                | packet::SEND_LAST_IMM
                | packet::SEND_LAST_INV
        );
        // SEND with invalidate: the window goes before the receive completes, a
        // window that cannot be invalidated (not a bound type 2 of this QP's PD) ends
        // the message in error (soft-RoCE's `RESPST_ERR_INVALIDATE_RKEY`).
        if let Some(rkey) = pkt.ieth.filter(|_| last) {
            let pdn = self.qp(qpn).map_or(u32::MAX, |q| q.pdn);
            if self.invalidate(pdn, rkey).is_err() {
                debug!(
                    qpn,
                    rkey = format_args!("{rkey:#x}"),
                    "SEND with invalidate refused"
                );
                self.complete_recv(
                    qpn,
                    index,
                    hw::WC_REM_INV_REQ_ERR,
                    hw::WC_RECV,
                    0,
                    None,
                    0,
                    mem,
                    irq,
                );
                return Answer::Nak(NakCode::InvalidRequest);
            }
        }
        if last {
            // CAST: at most 2^31.
            let len = got as u32;
            self.complete_recv_ok(qpn, index, hw::WC_RECV, len, pkt, mem, irq);
            self.message_done(qpn);
        } else {
            inb.recv = Some((index, dst, cap));
        }
        Answer::Ack
    }

    /// An RDMA WRITE packet: the first checks the whole range; each writes its piece; a
    /// WRITE with immediate consumes a receive WQE on its last packet. In loopback
    /// ([`Inbound::one_call`]) the first packet's translation serves the whole message.
    #[allow(clippy::too_many_arguments, reason = "the packet and its context")]
    fn write_data(
        &mut self,
        qpn: u32,
        pkt: &Packet,
        payload: Payload<'_>,
        inb: &mut Inbound,
        gated: &dyn Dma,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Answer {
        let op = pkt.bth.opcode;
        let first = matches!(
            op,
            packet::WRITE_FIRST | packet::WRITE_ONLY | packet::WRITE_ONLY_IMM
        );
        let last_imm = matches!(op, packet::WRITE_ONLY_IMM | packet::WRITE_LAST_IMM);
        let last = last_imm || matches!(op, packet::WRITE_ONLY | packet::WRITE_LAST);
        // The translation an earlier packet of this message kept (loopback), if any: a
        // first packet makes its own, and a refused packet ends the message and drops it.
        let mut cache = inb.write.take();
        if first {
            let reth = pkt.reth.unwrap_or_default();
            let len = u64::from(reth.dma_len);
            let Some(whole) =
                self.remote(qpn, reth.rkey, reth.va, len, hw::ACCESS_REMOTE_WRITE, gated)
            else {
                return self.access_error(qpn, mem, irq);
            };
            cache = Some((whole, Pos::default()));
            if let Some(q) = self.qp_mut(qpn) {
                q.dp.write = Some((reth.va, reth.rkey, len, reth.dma_len));
            }
        }
        let Some((va, rkey, left, total)) = self.qp(qpn).and_then(|q| q.dp.write) else {
            return Answer::Nak(NakCode::InvalidRequest);
        };
        let n = payload.as_ref().map_or(0, |p| p.2);
        if n > left || (last && n != left) {
            return Answer::Nak(NakCode::InvalidRequest);
        }
        // The receive WQE of a WRITE with immediate, before any byte of this packet moves.
        let recv = if last_imm {
            match self.claim_recv(qpn, false, gated, mem, irq) {
                Ok((index, _, _)) => Some(index),
                Err(a) => return a,
            }
        } else {
            None
        };
        if n > 0 {
            let moved = match cache.as_mut() {
                Some((dst, _)) if !self.owns(dst) => return self.access_error(qpn, mem, irq),
                Some((dst, pos)) => Self::copy(payload, dst, pos, gated),
                None => {
                    let Some(dst) = self.remote(qpn, rkey, va, n, hw::ACCESS_REMOTE_WRITE, gated)
                    else {
                        return self.access_error(qpn, mem, irq);
                    };
                    Self::copy(payload, &dst, &mut Pos::default(), gated)
                }
            };
            if !moved {
                return Answer::Nak(NakCode::RemoteOp);
            }
        }
        if !last {
            inb.write = cache;
        }
        if let Some(q) = self.qp_mut(qpn) {
            q.dp.write = (!last).then_some((va.wrapping_add(n), rkey, left - n, total));
        }
        if last {
            if let Some(index) = recv {
                self.complete_recv_ok(qpn, index, hw::WC_RECV_RDMA_IMM, total, pkt, mem, irq);
            }
            self.message_done(qpn);
        }
        Answer::Ack
    }

    /// Completes receive WQE `index` of QP `qpn` successfully with the last packet of its
    /// message: its immediate data (or the rkey a SEND with invalidate invalidated) and
    /// solicited bit go into the CQE.
    #[allow(clippy::too_many_arguments, reason = "a CQE's fields")]
    fn complete_recv_ok(
        &mut self,
        qpn: u32,
        index: u16,
        opcode: u8,
        byte_len: u32,
        pkt: &Packet,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let flags = if pkt.bth.se {
            hw::CQE_FLAG_SOLICITED
        } else {
            0
        };
        if let Some(rkey) = pkt.ieth {
            // The rkey invalidated, as a number (`ibv_wc.invalidated_rkey`).
            let src_qp = self.qp(qpn).map_or(0, |q| q.attr.dest_qp_num);
            let cqe = hw::Cqe {
                status: hw::WC_SUCCESS,
                opcode,
                byte_len,
                imm: rkey,
                flags: flags | hw::CQE_FLAG_INV,
                src_qp,
                ..Default::default()
            };
            return self.post_recv_cqe(qpn, index, cqe, mem, irq);
        }
        let imm = pkt.imm.map(u32::from_le_bytes);
        self.complete_recv(
            qpn,
            index,
            hw::WC_SUCCESS,
            opcode,
            byte_len,
            imm,
            flags,
            mem,
            irq,
        );
    }

    /// Completes receive WQE `index` of QP `qpn` (always a CQE); an error moves the QP to
    /// `ERR`. `flags` may carry `CQE_FLAG_SOLICITED`; the source QP is the QP's
    /// `dest_qp_num` (RC). For a QP attached to an SRQ, `index` is the SRQ's slot.
    #[allow(clippy::too_many_arguments, reason = "a CQE's fields")]
    pub(super) fn complete_recv(
        &mut self,
        qpn: u32,
        index: u16,
        status: u8,
        opcode: u8,
        byte_len: u32,
        imm: Option<u32>,
        flags: u8,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let mut f = hw::CQE_FLAG_RECV | (flags & hw::CQE_FLAG_SOLICITED);
        if imm.is_some() {
            f |= hw::CQE_FLAG_IMM;
        }
        let src_qp = self.qp(qpn).map_or(0, |q| q.attr.dest_qp_num);
        let cqe = hw::Cqe {
            status,
            opcode,
            byte_len,
            imm: imm.unwrap_or(0),
            flags: f,
            src_qp,
            ..Default::default()
        };
        self.post_recv_cqe(qpn, index, cqe, mem, irq);
    }

    /// Completes receive WQE `index` of QP `qpn` with `cqe` (its WQE index, QP and
    /// `CQE_FLAG_RECV` are set here); an error moves the QP to `ERR`. For a QP attached to
    /// an SRQ, `index` is the SRQ's slot.
    pub(super) fn post_recv_cqe(
        &mut self,
        qpn: u32,
        index: u16,
        mut cqe: hw::Cqe,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        let Some(q) = self.qp_mut(qpn) else {
            return;
        };
        if let Some(rq) = q.rq.as_mut() {
            rq.ci = index.wrapping_add(1);
        }
        let cqn = q.recv_cqn;
        cqe.wqe_index = index;
        cqe.qpn = qpn;
        cqe.flags |= hw::CQE_FLAG_RECV;
        let status = cqe.status;
        self.count_completion(qpn, status, cqe.opcode);
        let solicited = status != hw::WC_SUCCESS || cqe.flags & hw::CQE_FLAG_SOLICITED != 0;
        self.post_completion(cqn, &cqe, solicited, mem, irq);
        if status != hw::WC_SUCCESS {
            debug!(qpn, index, status, "receive WQE failed: QP to ERR");
            self.enter_error(qpn, mem, irq);
        }
    }
}
