//! The responder's FLUSH and ATOMIC WRITE (IBTA 1.5, NIC interface 1.8; soft-RoCE's
//! `process_flush` and `atomic_write_reply`), both answered by an empty RDMA READ response
//! only. An ATOMIC WRITE takes one of the QP's responder resources (`max_dest_rd_atomic` 0:
//! `NAK invalid request`, as a READ); a FLUSH needs none, as on soft-RoCE, whose requester
//! does not count it against its initiator depth (this NIC's requester does: it waits for
//! the answer as for a READ's).
//!
//! - ATOMIC WRITE: 8 bytes of payload (else `NAK invalid request`) written at an 8-byte
//!   aligned address (else `NAK invalid request`, the QP to `ERR` with `QP_REQ_ERR`, as a
//!   misaligned atomic) as one 64-bit store, through an MR and a QP that allow
//!   `REMOTE_WRITE` (else `NAK remote access error`, `ERR` with `QP_ACCESS_ERR`, as a
//!   WRITE's).
//! - FLUSH: to global visibility only. The placement must be `FLUSH_GLOBAL` (the NIC has no
//!   persistence domain: `FLUSH_PERSISTENT` is a remote access error, as for an MR without
//!   it), the MR and the QP must allow `FLUSH_GLOBAL`, and the range must be inside the MR
//!   (`FLUSH_RANGE`; `FLUSH_MR` names the whole MR: its key, PD and access checked). The
//!   NIC has nothing to do then: every write it executed for the QP reached host memory
//!   before it answered (the model writes guest memory directly, in order).
//! - A duplicate (the requester's retransmission after a lost answer) is answered again and
//!   not executed again ([`super::remote`]).

use ordma_hw as hw;
use tracing::debug;

use super::completer::Answer;
use super::packet::{NakCode, Packet};
use super::responder::Payload;
use super::{Interrupts, Nic};
use crate::mem::{Atomic64, Dma};

impl Nic {
    /// An in-order ATOMIC WRITE `pkt` with its payload at QP `qpn`: checked, executed.
    pub(super) fn atomic_write(
        &mut self,
        qpn: u32,
        pkt: &Packet,
        payload: Payload<'_>,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Answer {
        let Some(reth) = pkt.reth else {
            return Answer::Nak(NakCode::InvalidRequest);
        };
        let size = u64::from(hw::ATOMIC_SIZE);
        let gated = self.gate(mem);
        let mut value = [0u8; 8];
        let read = match payload {
            Some((data, pos, n)) if n == size && reth.dma_len == hw::ATOMIC_SIZE => {
                data.read(&gated, pos, &mut value)
            }
            _ => false,
        };
        if !read {
            debug!(qpn, "ATOMIC WRITE without its 8 bytes");
            return Answer::Nak(NakCode::InvalidRequest);
        }
        if reth.va % size != 0 {
            debug!(qpn, va = reth.va, "misaligned ATOMIC WRITE");
            self.enter_error(qpn, mem, irq);
            self.post_event(hw::EVENT_QP_REQ_ERR, qpn, 0, mem, irq);
            return Answer::Nak(NakCode::InvalidRequest);
        }
        let word = self
            .remote(
                qpn,
                reth.rkey,
                reth.va,
                size,
                hw::ACCESS_REMOTE_WRITE,
                &gated,
            )
            .and_then(|d| d.single());
        let Some(addr) = word else {
            return self.access_error(qpn, mem, irq);
        };
        if gated
            .dma_atomic64(addr, Atomic64::Store(u64::from_le_bytes(value)))
            .is_err()
        {
            return Answer::Nak(NakCode::RemoteOp);
        }
        self.message_done(qpn);
        Answer::EmptyRead
    }

    /// An in-order FLUSH `pkt` at QP `qpn`: checked (there is nothing more to do).
    pub(super) fn flush_request(
        &mut self,
        qpn: u32,
        pkt: &Packet,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Answer {
        let (Some(feth), Some(reth)) = (pkt.feth, pkt.reth) else {
            return Answer::Nak(NakCode::InvalidRequest);
        };
        let known = hw::FLUSH_GLOBAL | hw::FLUSH_PERSISTENT;
        if feth.placement == 0 || feth.placement & !known != 0 || feth.level > hw::FLUSH_MR {
            return Answer::Nak(NakCode::InvalidRequest);
        }
        let ok = feth.placement & hw::FLUSH_PERSISTENT == 0
            && self.flushable(qpn, reth.rkey, reth.va, reth.dma_len, feth.level, mem);
        if !ok {
            return self.access_error(qpn, mem, irq);
        }
        self.message_done(qpn);
        Answer::EmptyRead
    }

    /// Whether QP `qpn` may FLUSH to global visibility the range `va`, `len` of the MR
    /// `rkey` names (`FLUSH_RANGE`), or that whole MR (`FLUSH_MR`): the QP's and the MR's
    /// access, the MR's PD, the range inside the MR.
    fn flushable(&self, qpn: u32, rkey: u32, va: u64, len: u32, level: u8, mem: &dyn Dma) -> bool {
        let (Some(qp), Some(mr)) = (self.qp(qpn), self.mr(rkey)) else {
            return false;
        };
        let access = hw::ACCESS_FLUSH_GLOBAL;
        if qp.attr.qp_access_flags & access == 0 {
            return false;
        }
        let (va, len) = if level == hw::FLUSH_MR {
            (mr.iova, 0)
        } else {
            (va, u64::from(len))
        };
        let inside = va
            .checked_add(len)
            .zip(mr.iova.checked_add(mr.length))
            .is_some_and(|(end, mr_end)| va >= mr.iova && end <= mr_end);
        // Key, PD and access checked by a translation of nothing at the range's start.
        inside && self.translate(mem, rkey, qp.pdn, va, 0, access).is_ok()
    }
}
