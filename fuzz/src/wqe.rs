//! The `wqe` target: WQEs and doorbells from the guest, on two RC QPs connected to each
//! other in loopback (the model's test rig: a PD, three MRs, a send and a receive CQ), and
//! a third, C, connected to itself, which receives through an SRQ of [`SRQ_DEPTH`] slots.
//!
//! Operations (the first byte modulo [`OPS`]):
//!
//! | op | operands | what |
//! |---|---|---|
//! | 0, 1 | flags, chunk | a send WQE's bytes (up to the 256-byte slot) into QP A's (0) or B's (1) next SQ slot; with flags bit 0, its SQ doorbell |
//! | 2, 3 | chunk | a receive WQE's bytes (up to 64) into A's or B's next RQ slot, and its RQ doorbell |
//! | 4 | u32 offset, u8 size, u32 value | a write of BAR2 (the doorbell pages) |
//! | 5 | u8 | the timers: now (bit 0 clear) or an hour later |
//! | 6 | | both CQs polled empty |
//! | 7 | u8 | a QP (bit 0: A or B) moved to ERR, SQD or RTS (the rest, modulo 3) |
//! | 8 | u8 slot, u8 flags, chunk | an SRQ WQE's bytes (up to 64) into SRQ slot `slot` modulo the depth; with flags bit 0, the SRQ's doorbell with the next producer index (bit 1: the index + the depth, beyond the ring) |
//! | 9 | flags, chunk | a send WQE's bytes into C's next SQ slot; with flags bit 0, its SQ doorbell |
//! | 10 | u8, u32 | C moved to ERR, SQD, RTS, or RESET and back to RTS (the u8 modulo 4); or (the u8 ≥ 128) the SRQ's limit armed at the u32 |

use std::time::{Duration, Instant};

use ordma_hw as hw;

use crate::common::rig::{Qp, Rig, CQ_LOG, PAGE, RINGS, RQ_LOG, RQ_WQE_LOG, SQ_LOG, SQ_WQE_LOG};
use crate::guard::Guard;
use crate::script::Reader;
use crate::MAX_OPS;

/// The number of operations.
pub const OPS: u8 = 11;
/// Operation: a send WQE on QP A (`+ 1`: on QP B).
pub const OP_SEND: u8 = 0;
/// Operation: a receive WQE on QP A (`+ 1`: on QP B).
pub const OP_RECV: u8 = 2;
/// Operation: a doorbell page write.
pub const OP_DOORBELL: u8 = 4;
/// Operation: the timers.
pub const OP_TICK: u8 = 5;
/// Operation: poll both CQs.
pub const OP_POLL: u8 = 6;
/// Operation: a QP state change.
pub const OP_STATE: u8 = 7;
/// Operation: an SRQ WQE (and the SRQ's doorbell).
pub const OP_SRQ: u8 = 8;
/// Operation: a send WQE on QP C.
pub const OP_SEND_C: u8 = 9;
/// Operation: C's state, or the SRQ's limit.
pub const OP_SRQ_CTL: u8 = 10;

/// log2 of the SRQ's slots.
pub const SRQ_LOG: u8 = 6;
/// The SRQ's slots.
pub const SRQ_DEPTH: u16 = 1 << SRQ_LOG;
/// log2 of an SRQ WQE's bytes.
pub const SRQ_WQE_LOG: u8 = 6;
/// The SRQ's ring, and QP C's send queue (the NIC only reads both: [`Guard`]).
pub const SRQ_RING: u64 = RINGS + 0x30_0000;
/// QP C's send queue.
pub const C_SQ: u64 = RINGS + 0x34_0000;

/// The rig, and what the target adds: the SRQ, QP C and the SRQ's producer index.
struct Target {
    rig: Rig,
    srqn: u32,
    c: Qp,
    srq_pi: u16,
}

/// Checks the WQE decoders on `b`: a header and SGEs that decode encode to the same bytes
/// (every field is checked and every reserved byte must be zero, so the encoding is
/// unique).
pub fn check_decoders(b: &[u8]) {
    if let Some(w) = hw::SendWqe::decode(b) {
        let mut out = [0u8; hw::SQ_WQE_BASE as usize];
        assert!(w.encode_into(&mut out));
        assert_eq!(Some(&out[..]), b.get(..out.len()), "send WQE {w:?}");
    }
    if let Some(w) = hw::RecvWqe::decode(b) {
        let mut out = [0u8; hw::RQ_WQE_BASE as usize];
        assert!(w.encode_into(&mut out));
        assert_eq!(Some(&out[..]), b.get(..out.len()), "receive WQE {w:?}");
    }
    if let Some(w) = hw::SrqWqe::decode(b) {
        let mut out = [0u8; hw::RQ_WQE_BASE as usize];
        assert!(w.encode_into(&mut out));
        assert_eq!(Some(&out[..]), b.get(..out.len()), "SRQ WQE {w:?}");
    }
    let mut off = 0;
    while let Some(s) = hw::Sge::decode_from(b, off) {
        let mut out = [0u8; hw::WQE_SGE_SIZE as usize];
        assert!(s.encode_into(&mut out, 0));
        assert_eq!(Some(&out[..]), b.get(off..off + out.len()), "SGE {s:?}");
        off += out.len();
    }
    if let Some(c) = hw::Cqe::decode(b) {
        assert_eq!(hw::Cqe::decode(&c.encode()), Some(c));
    }
}

/// Runs one input.
pub fn run(data: &[u8]) {
    exec(data);
}

/// The rig with the SRQ (links 0 → 1 → … → depth − 1) and QP C, connected to itself.
fn setup() -> Target {
    let mut rig = Rig::new();
    let srqn = rig.srq(SRQ_RING, SRQ_LOG, SRQ_WQE_LOG, 2);
    for slot in 0..SRQ_DEPTH {
        rig.put_srq(SRQ_RING, SRQ_WQE_LOG, slot, (slot + 1) % SRQ_DEPTH, &[]);
    }
    let c = rig.srq_qp(C_SQ, srqn);
    rig.connect(c.qpn, c.qpn, 300, 300, |_| {});
    Target {
        rig,
        srqn,
        c,
        srq_pi: 0,
    }
}

/// Runs one input; the NIC after it.
fn exec(data: &[u8]) -> Rig {
    exec_target(data).rig
}

/// Runs one input; the target after it.
fn exec_target(data: &[u8]) -> Target {
    let mut r = Reader::new(data);
    let mut t = setup();
    let rig = &mut t.rig;
    for _ in 0..MAX_OPS {
        if r.is_empty() {
            break;
        }
        let op = r.u8() % OPS;
        let b = op & 1 != 0;
        match op {
            0 | 1 => {
                let flags = r.u8();
                let bytes = r.chunk(1 << SQ_WQE_LOG);
                check_decoders(bytes);
                put_send(rig, b, bytes);
                if flags & 1 != 0 {
                    let q = if b { &rig.b } else { &rig.a };
                    let v = hw::db_value(q.qpn, q.sq_pi);
                    doorbell(rig, hw::DB_SQ, v);
                }
            }
            2 | 3 => {
                let bytes = r.chunk(1 << RQ_WQE_LOG);
                check_decoders(bytes);
                put_recv(rig, b, bytes);
            }
            OP_DOORBELL => {
                let offset = u64::from(r.u32()) % (hw::BAR2_SIZE as u64 + 16);
                let size = [4, 4, 4, 1, 2, 8][usize::from(r.u8() % 6)];
                let value = r.u32();
                let mem = Guard(&rig.mem);
                rig.nic.doorbell_write(offset, size, value, &mem, &rig.irq);
            }
            OP_TICK => {
                let later = if r.u8() & 1 != 0 { 3600 } else { 0 };
                let now = Instant::now() + Duration::from_secs(later);
                rig.nic.tick(now, &Guard(&rig.mem), &rig.irq);
            }
            OP_POLL => {
                for cq in ['s', 'r'] {
                    for _ in 0..1 << CQ_LOG {
                        if rig.poll(cq).is_none() {
                            break;
                        }
                    }
                }
            }
            OP_SRQ => {
                let slot = u16::from(r.u8()) % SRQ_DEPTH;
                let flags = r.u8();
                let bytes = r.chunk(1 << SRQ_WQE_LOG);
                check_decoders(bytes);
                let mut wqe = [0u8; 1 << SRQ_WQE_LOG];
                wqe[..bytes.len()].copy_from_slice(bytes);
                let at = SRQ_RING + (u64::from(slot) << SRQ_WQE_LOG);
                let _ = ordma_model::mem::Dma::dma_write(&rig.mem, at, &wqe);
                if flags & 1 != 0 {
                    t.srq_pi = t.srq_pi.wrapping_add(1);
                    let extra = if flags & 2 != 0 { SRQ_DEPTH } else { 0 };
                    let v = hw::db_value(t.srqn, t.srq_pi.wrapping_add(extra));
                    doorbell(rig, hw::DB_SRQ, v);
                }
            }
            OP_SEND_C => {
                let flags = r.u8();
                let bytes = r.chunk(1 << SQ_WQE_LOG);
                check_decoders(bytes);
                let mut slot = [0u8; 1 << SQ_WQE_LOG];
                slot[..bytes.len()].copy_from_slice(bytes);
                let c = &mut t.c;
                let at = c.sq + (u64::from(c.sq_pi % (1 << SQ_LOG)) << SQ_WQE_LOG);
                c.sq_pi = c.sq_pi.wrapping_add(1);
                let _ = ordma_model::mem::Dma::dma_write(&rig.mem, at, &slot);
                if flags & 1 != 0 {
                    let v = hw::db_value(c.qpn, c.sq_pi);
                    doorbell(rig, hw::DB_SQ, v);
                }
            }
            OP_SRQ_CTL => {
                let v = r.u8();
                let limit = r.u32();
                if v >= 128 {
                    let p = hw::ModifySrqParams {
                        srqn: t.srqn,
                        attr_mask: hw::SRQ_ATTR_LIMIT,
                        srq_limit: limit,
                        ..Default::default()
                    };
                    rig.run(hw::CMD_MODIFY_SRQ, p.encode());
                    continue;
                }
                let qpn = t.c.qpn;
                let state =
                    [hw::QPS_ERR, hw::QPS_SQD, hw::QPS_RTS, hw::QPS_RESET][usize::from(v % 4)];
                let attr = hw::QpAttr {
                    qp_state: state,
                    ..Default::default()
                };
                rig.modify(qpn, hw::QP_ATTR_STATE, &attr);
                if state == hw::QPS_RESET {
                    // Its indices start again; the SRQ's do not.
                    t.c.sq_pi = 0;
                    rig.connect(qpn, qpn, 300, 300, |_| {});
                }
            }
            _ => {
                let v = r.u8();
                let qpn = if v & 1 != 0 { rig.b.qpn } else { rig.a.qpn };
                let state = [hw::QPS_ERR, hw::QPS_SQD, hw::QPS_RTS][usize::from((v >> 1) % 3)];
                let attr = hw::QpAttr {
                    qp_state: state,
                    ..Default::default()
                };
                rig.modify(qpn, hw::QP_ATTR_STATE, &attr);
            }
        }
    }
    t
}

/// Writes `bytes` (zero-padded to the slot) into QP A's or B's next SQ slot.
fn put_send(rig: &mut Rig, b: bool, bytes: &[u8]) {
    let q = if b { &mut rig.b } else { &mut rig.a };
    let mut slot = [0u8; 1 << SQ_WQE_LOG];
    slot[..bytes.len()].copy_from_slice(bytes);
    let at = q.sq + (u64::from(q.sq_pi % (1 << SQ_LOG)) << SQ_WQE_LOG);
    q.sq_pi = q.sq_pi.wrapping_add(1);
    let _ = ordma_model::mem::Dma::dma_write(&rig.mem, at, &slot);
}

/// Writes `bytes` into QP A's or B's next RQ slot and rings its RQ doorbell.
fn put_recv(rig: &mut Rig, b: bool, bytes: &[u8]) {
    let q = if b { &mut rig.b } else { &mut rig.a };
    let mut slot = [0u8; 1 << RQ_WQE_LOG];
    slot[..bytes.len()].copy_from_slice(bytes);
    let at = q.rq + (u64::from(q.rq_pi % (1 << RQ_LOG)) << RQ_WQE_LOG);
    q.rq_pi = q.rq_pi.wrapping_add(1);
    let _ = ordma_model::mem::Dma::dma_write(&rig.mem, at, &slot);
    let v = hw::db_value(q.qpn, q.rq_pi);
    doorbell(rig, hw::DB_RQ, v);
}

/// A doorbell on the rig's page, with the NIC's writes checked ([`Guard`]).
fn doorbell(rig: &mut Rig, reg: usize, value: u32) {
    let off = u64::from(PAGE) * hw::DB_PAGE_SIZE as u64 + reg as u64;
    let mem = Guard(&rig.mem);
    rig.nic.doorbell_write(off, 4, value, &mem, &rig.irq);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::rig::{sge, wqe};
    use crate::script::Writer;

    /// A receive WQE's and a send WQE's bytes through the target's operations: the SEND
    /// completes on both sides (the raw slots and doorbells are what the rig's would be).
    #[test]
    fn raw_wqes_complete() {
        let small = Rig::new().small;
        let mut recv = [0u8; 32];
        hw::RecvWqe { num_sge: 1 }.encode_into(&mut recv);
        sge(crate::common::rig::SMALL_VA, 64, small).encode_into(&mut recv, 16);
        let mut send = [0u8; 48];
        wqe(hw::WR_SEND, hw::WQE_FLAG_SIGNALED, 1).encode_into(&mut send);
        sge(crate::common::rig::SMALL_VA + 64, 64, small).encode_into(&mut send, 32);
        let s = Writer::new()
            .u8(OP_RECV + 1)
            .chunk(&recv)
            .u8(OP_SEND)
            .u8(1)
            .chunk(&send)
            .finish();
        let mut rig = exec(&s);
        let s = rig.poll('s').map(|c| (c.status, c.opcode, c.byte_len));
        let r = rig.poll('r').map(|c| (c.status, c.opcode, c.byte_len));
        assert_eq!(s, Some((hw::WC_SUCCESS, hw::WC_SEND, 64)));
        assert_eq!(r, Some((hw::WC_SUCCESS, hw::WC_RECV, 64)));
    }

    /// The SRQ seed: C's first two SENDs take the SRQ's two WQEs by their links (slot 0,
    /// then slot 1), the limit fires, the third waits (RNR) and is flushed when C goes to
    /// `ERR`, after which `QP_LAST_WQE_REACHED` comes.
    #[test]
    fn srq_seed_takes_wqes_by_their_links() {
        let seed = crate::seeds::all()
            .into_iter()
            .find(|(t, n, _)| *t == "wqe" && n == "srq")
            .map(|(_, _, b)| b)
            .unwrap_or_default();
        // Without the final poll, to read the CQEs here.
        let mut t = exec_target(&seed[..seed.len() - 1]);
        let c = t.c.qpn;
        let recvs: Vec<_> = std::iter::from_fn(|| t.rig.poll('r'))
            .map(|q| (q.status, q.qpn, q.wqe_index, q.byte_len))
            .collect();
        assert_eq!(
            recvs[..2],
            [(hw::WC_SUCCESS, c, 0, 3000), (hw::WC_SUCCESS, c, 1, 100)]
        );
        let events = t.rig.events();
        assert!(
            events.contains(&(hw::EVENT_SRQ_LIMIT_REACHED, t.srqn)),
            "{events:?}"
        );
        assert!(
            events.contains(&(hw::EVENT_QP_LAST_WQE_REACHED, c)),
            "{events:?}"
        );
    }
}
