//! The responder's atomics (soft-RoCE's `rxe_mr_do_atomic_op` and its responder
//! resources): COMPARE SWAP and FETCH ADD on a 64-bit word of an MR, answered with an
//! ATOMIC ACKNOWLEDGE that carries the word's old value.
//!
//! - Checks, in order: responder resources (`max_dest_rd_atomic` 0: `NAK invalid
//!   request`, as a READ); the word's address 8-byte aligned (else `NAK invalid request`,
//!   the QP to `ERR` with `QP_REQ_ERR`); the rkey, the QP's PD and `REMOTE_ATOMIC` on both
//!   the MR and the QP over the 8 bytes (else `NAK remote access error`, `ERR` with
//!   `QP_ACCESS_ERR`, as a WRITE's).
//! - Execution: one operation on the little-endian word in host memory ([`Atomic64`]),
//!   atomic with respect to every other atomic of this NIC (the NIC runs one action at a
//!   time; the model's guest memory even uses the host's atomic instruction, so it is
//!   atomic against the CPUs and the other NIC models too: more than `ATOMIC_CAP_HCA`
//!   promises).
//! - Replay: the responder keeps the answers of its last `max_dest_rd_atomic` atomics
//!   (its responder resources, which READs share: a READ is answered again from memory
//!   and needs none kept). A duplicate atomic request (the requester's retransmission
//!   after a lost answer) is answered again from there, never executed twice; one no
//!   longer kept, or that differs from the request it duplicates, is dropped (the
//!   requester's retries run out), as soft-RoCE does.

use std::collections::VecDeque;

use ordma_hw as hw;
use tracing::debug;

use super::completer::Answer;
use super::packet::{self, Aeth, AtomicEth, Bth, NakCode, Packet, Syndrome};
use super::qp::Qp;
use super::{Interrupts, Nic};
use crate::mem::{Atomic64, Dma};

/// An atomic the responder executed: what it was asked and what it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Done {
    psn: u32,
    opcode: u8,
    eth: AtomicEth,
    /// The word's value before the operation: the answer.
    old: u64,
}

/// A QP's responder resources for atomics: the answers of its last atomics, oldest first,
/// at most `max_dest_rd_atomic` of them.
#[derive(Debug, Default)]
pub(super) struct Replay {
    done: VecDeque<Done>,
}

impl Replay {
    /// Keeps `d`, forgetting the oldest beyond `depth`.
    fn keep(&mut self, d: Done, depth: u8) {
        let depth = usize::from(depth.clamp(1, hw::QP_MAX_RD_ATOMIC));
        while self.done.len() >= depth {
            self.done.pop_front();
        }
        self.done.push_back(d);
    }

    /// The atomic kept at `psn`, if it is the same request.
    fn find(&self, psn: u32, opcode: u8, eth: &AtomicEth) -> Option<u64> {
        self.done
            .iter()
            .rev()
            .find(|d| d.psn == psn)
            .filter(|d| d.opcode == opcode && d.eth == *eth)
            .map(|d| d.old)
    }
}

/// The operation of an atomic request packet.
fn operation(opcode: u8, eth: &AtomicEth) -> Atomic64 {
    if opcode == packet::COMPARE_SWAP {
        Atomic64::CmpSwap {
            compare: eth.compare,
            swap: eth.swap_add,
        }
    } else {
        Atomic64::FetchAdd(eth.swap_add)
    }
}

impl Nic {
    /// An in-order COMPARE SWAP or FETCH ADD `pkt` at QP `qpn` (a copy of it in `qp`):
    /// checked, executed, kept for replay. The answer: the old value, or a NAK.
    pub(super) fn atomic_request(
        &mut self,
        qpn: u32,
        qp: &Qp,
        pkt: &Packet,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> Answer {
        let Some(eth) = pkt.atomic else {
            return Answer::Nak(NakCode::InvalidRequest);
        };
        if qp.attr.max_dest_rd_atomic == 0 {
            // No responder resources (as for a READ).
            return Answer::Nak(NakCode::InvalidRequest);
        }
        if eth.va % u64::from(hw::ATOMIC_SIZE) != 0 {
            debug!(qpn, va = eth.va, "misaligned atomic");
            self.enter_error(qpn, mem, irq);
            self.post_event(hw::EVENT_QP_REQ_ERR, qpn, 0, mem, irq);
            return Answer::Nak(NakCode::InvalidRequest);
        }
        let gated = self.gate(mem);
        let len = u64::from(hw::ATOMIC_SIZE);
        let word = self
            .remote(qpn, eth.rkey, eth.va, len, hw::ACCESS_REMOTE_ATOMIC, &gated)
            .and_then(|d| d.single());
        let Some(addr) = word else {
            return self.access_error(qpn, mem, irq);
        };
        let op = operation(pkt.bth.opcode, &eth);
        let Ok(old) = gated.dma_atomic64(addr, op) else {
            return Answer::Nak(NakCode::RemoteOp);
        };
        let done = Done {
            psn: pkt.bth.psn,
            opcode: pkt.bth.opcode,
            eth,
            old,
        };
        let depth = qp.attr.max_dest_rd_atomic;
        self.wire_qps
            .entry(qpn)
            .or_default()
            .atomics
            .keep(done, depth);
        self.message_done(qpn);
        self.atomics[0] += 1;
        self.count(qpn, hw::CNT_ATOMICS, 1);
        Answer::Atomic(old)
    }

    /// A duplicate atomic request `pkt` at QP `qpn`, from its peer `to`: answered again with
    /// the old value it got the first time, if the responder still keeps it; else dropped.
    pub(super) fn atomic_replay(&mut self, qpn: u32, to: hw::QpAh, pkt: &Packet) {
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        let kept = pkt.atomic.and_then(|eth| {
            self.wire_qps
                .get(&qpn)
                .and_then(|r| r.atomics.find(pkt.bth.psn, pkt.bth.opcode, &eth))
        });
        let Some(old) = kept else {
            debug!(qpn, psn = pkt.bth.psn, "duplicate atomic not kept: dropped");
            return;
        };
        debug!(qpn, psn = pkt.bth.psn, "duplicate atomic answered again");
        self.atomics[1] += 1;
        let ack = self.atomic_ack(&qp, pkt.bth.psn, old);
        self.emit(&to, qpn, &ack, &[]);
    }

    /// The ATOMIC ACKNOWLEDGE of QP `qp` at `psn` carrying `old`.
    pub(super) fn atomic_ack(&self, qp: &Qp, psn: u32, old: u64) -> Packet {
        Packet {
            bth: Bth {
                opcode: packet::ATOMIC_ACKNOWLEDGE,
                pkey: 0xffff,
                dest_qp: qp.attr.dest_qp_num,
                psn,
                ..Default::default()
            },
            aeth: Some(Aeth {
                syndrome: Syndrome::Ack(0x1f),
                msn: qp.dp.msn,
            }),
            atomic_ack: Some(old),
            ..Default::default()
        }
    }
}
