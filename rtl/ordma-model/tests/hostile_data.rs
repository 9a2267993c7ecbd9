//! Hostile-guest property tests of the data path: seeded random WQEs, doorbells, timer
//! ticks, state changes and MRs destroyed under WQEs in flight on two QPs connected in
//! loopback (the engine between NICs shares every line of it). Deterministic (fixed
//! seeds); `ORDMA_FUZZ_ITERS` scales it up.

mod common;

use std::time::{Duration, Instant};

use common::rng::{iters, Rng};
use ordma_hw as hw;
use ordma_model::mem::Dma;

/// A random send or receive WQE: fully random bytes, or a plausible one whose every field
/// may be wrong (opcode, flags, SGE count, keys, addresses, lengths, inline data, an
/// atomic's segment and alignment).
fn random_wqe(rng: &mut Rng, size: usize, send: bool, keys: &[u32]) -> Vec<u8> {
    use common::rig::{BIG_VA, SMALL_VA};
    let mut b = vec![0u8; size];
    if rng.below(4) == 0 {
        b.iter_mut().for_each(|x| *x = rng.next() as u8);
        return b;
    }
    let key = |rng: &mut Rng| {
        if rng.below(8) == 0 {
            rng.next() as u32
        } else {
            keys[rng.below(keys.len() as u64) as usize]
        }
    };
    let addr = |rng: &mut Rng| match rng.below(4) {
        0 => rng.next(),
        1 => BIG_VA + rng.below(17 << 20),
        _ => SMALL_VA + rng.below(0x4_1000),
    };
    let length = |rng: &mut Rng| match rng.below(8) {
        0 => rng.next() as u32,
        1 => rng.below(3 << 20) as u32,
        _ => rng.below(20_000) as u32,
    };
    let num_sge = rng.below(6) as u8;
    let base = if send {
        let flags = if rng.below(4) == 0 {
            rng.next() as u8
        } else {
            rng.below(16) as u8 & !hw::WQE_FLAG_INLINE
        };
        let inline = rng.below(4) == 0;
        // The opcodes up to 7 (7 is none), and 1.8's FLUSH and ATOMIC WRITE.
        let opcode = match rng.below(10) {
            8 => hw::WR_FLUSH,
            9 => hw::WR_ATOMIC_WRITE,
            o => o as u8,
        };
        let atomic = hw::is_atomic(opcode) && !inline;
        let w = hw::SendWqe {
            opcode,
            flags: flags | if inline { hw::WQE_FLAG_INLINE } else { 0 },
            num_sge: if inline { 0 } else { num_sge },
            imm: rng.next() as u32,
            inline_len: if inline { rng.below(300) as u32 } else { 0 },
            remote_addr: addr(rng),
            rkey: key(rng),
        };
        w.encode_into(&mut b);
        if inline {
            b.iter_mut().skip(32).for_each(|x| *x = rng.next() as u8);
            return b;
        }
        if hw::is_flush_or_atomic_write(opcode) && rng.below(2) == 0 {
            // Half plausible: no SGEs, a word or range of the MR that allows atomics (the
            // last key), any placement and level, any length.
            let w = hw::SendWqe {
                remote_addr: SMALL_VA + 8 * rng.below(0x8400),
                rkey: keys[keys.len() - 1],
                num_sge: 0,
                ..w
            };
            w.encode_into(&mut b);
            hw::AtomicSeg {
                compare_add: rng.next(),
                swap: 0,
            }
            .encode_into(&mut b);
            if opcode == hw::WR_FLUSH {
                hw::FlushSeg {
                    length: length(rng),
                    placement: rng.below(4) as u8,
                    level: rng.below(3) as u8,
                }
                .encode_into(&mut b);
            }
            return b;
        }
        if atomic {
            // Mostly a plausible atomic: an aligned word of the MR that allows atomics
            // (the last key), the old value into 8 bytes of one SGE.
            if rng.below(4) != 0 {
                let w = hw::SendWqe {
                    remote_addr: SMALL_VA + 8 * rng.below(0x8400),
                    rkey: keys[keys.len() - 1],
                    num_sge: 1,
                    ..w
                };
                w.encode_into(&mut b);
                let s = hw::Sge {
                    addr: BIG_VA + 8 * rng.below(0x20_0000),
                    length: 8,
                    lkey: keys[0],
                };
                s.encode_into(&mut b, hw::SendWqe::atomic_sge_offset(0));
                hw::AtomicSeg {
                    compare_add: rng.below(4),
                    swap: if opcode == hw::WR_ATOMIC_CMP_AND_SWP {
                        rng.below(4)
                    } else {
                        0
                    },
                }
                .encode_into(&mut b);
                return b;
            }
            let seg = hw::AtomicSeg {
                compare_add: rng.below(4),
                swap: if rng.below(4) == 0 { rng.next() } else { 0 },
            };
            seg.encode_into(&mut b);
            // Mostly the 8 bytes an atomic's old value takes.
            for i in 0..usize::from(num_sge) {
                let len = if rng.below(4) == 0 {
                    length(rng)
                } else {
                    8 / u32::from(num_sge).min(8)
                };
                let s = hw::Sge {
                    addr: addr(rng),
                    length: len,
                    lkey: key(rng),
                };
                s.encode_into(&mut b, hw::SendWqe::atomic_sge_offset(i));
            }
            return b;
        }
        32
    } else {
        hw::RecvWqe { num_sge }.encode_into(&mut b);
        16
    };
    for i in 0..usize::from(num_sge) {
        let s = hw::Sge {
            addr: addr(rng),
            length: length(rng),
            lkey: key(rng),
        };
        s.encode_into(&mut b, base + 16 * i);
    }
    b
}

/// Seeded random WQEs, doorbells, timer ticks, reconnections (any READ depths, RC or UC),
/// RTS <-> SQD, an MR destroyed and registered again under WQEs in flight, and scribbled
/// rings and page tables on two QPs connected in loopback: never a panic, never FATAL,
/// nothing written outside guest memory (the mock refuses it), every doorbell returns, and
/// the walk reaches successful completions of sends and receives as well as errors.
#[test]
fn random_wqes_on_connected_qps_never_break_the_engine() {
    use common::rig::{
        small_page, Qp, Rig, PT, RINGS, RQ_LOG, RQ_WQE_LOG, SMALL_PHYS, SMALL_VA, SQ_LOG,
        SQ_WQE_LOG,
    };
    let n = iters() / 20;
    let mut statuses = [0u64; 256];
    let mut atomics = 0u64;
    let mut uc_runs = 0u64;
    for seed in 1..=4u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let rnr = (seed * 3 % 8) as u8;
        let mut rig = Rig::with(|a| {
            a.rnr_retry = rnr;
            a.path_mtu = (seed % 5 + 1) as u8;
            a.qp_access_flags |= hw::ACCESS_REMOTE_ATOMIC | hw::ACCESS_FLUSH_GLOBAL;
        });
        let pages: Vec<u64> = (0..64).map(|i| SMALL_PHYS + small_page(i) * 4096).collect();
        let all = hw::ACCESS_LOCAL_WRITE
            | hw::ACCESS_REMOTE_WRITE
            | hw::ACCESS_REMOTE_READ
            | hw::ACCESS_REMOTE_ATOMIC
            | hw::ACCESS_FLUSH_GLOBAL;
        let mut victim = Some(rig.mr(SMALL_VA, 64 * 4096, 12, &pages, all));
        // The RC pair A and B, and a UC pair (in RESET until a reconnection picks it):
        // (QPN, SQ, RQ) each.
        let rc = [
            (rig.a.qpn, rig.a.sq, rig.a.rq),
            (rig.b.qpn, rig.b.sq, rig.b.rq),
        ];
        rig.uc_pair();
        let ucp = [
            (rig.a.qpn, rig.a.sq, rig.a.rq),
            (rig.b.qpn, rig.b.sq, rig.b.rq),
        ];
        let pairs = [rc, ucp];
        for (q, (qpn, sq, rq)) in [(&mut rig.a, rc[0]), (&mut rig.b, rc[1])] {
            *q = Qp {
                qpn,
                sq,
                rq,
                sq_pi: 0,
                rq_pi: 0,
            };
        }
        let mut keys = [rig.big, rig.small, rig.ro, victim.unwrap_or(0)];
        for _ in 0..n {
            let which = if rng.below(2) == 0 { 'a' } else { 'b' };
            match rng.below(19) {
                0..=6 => {
                    let w = random_wqe(&mut rng, 1 << SQ_WQE_LOG, true, &keys);
                    let q = if which == 'a' { &mut rig.a } else { &mut rig.b };
                    let slot = u64::from(q.sq_pi % (1 << SQ_LOG));
                    rig.mem
                        .dma_write(q.sq + (slot << SQ_WQE_LOG), &w)
                        .expect("ring");
                    q.sq_pi = q.sq_pi.wrapping_add(1);
                    rig.ring_sq(which);
                }
                7..=10 => {
                    let w = random_wqe(&mut rng, 1 << RQ_WQE_LOG, false, &keys);
                    let q = if which == 'a' { &mut rig.a } else { &mut rig.b };
                    let slot = u64::from(q.rq_pi % (1 << RQ_LOG));
                    rig.mem
                        .dma_write(q.rq + (slot << RQ_WQE_LOG), &w)
                        .expect("ring");
                    q.rq_pi = q.rq_pi.wrapping_add(1);
                    let v = hw::db_value(q.qpn, q.rq_pi);
                    rig.db(hw::DB_RQ, v);
                }
                11 => {
                    let later = Instant::now() + Duration::from_millis(rng.below(2000));
                    rig.nic.tick(later, &rig.mem, &rig.irq);
                }
                12 => {
                    // Any doorbell value, for either QP or CQ.
                    let reg = [hw::DB_SQ, hw::DB_RQ, hw::DB_CQ_ARM, hw::DB_CQ_ARM_SOLICITED]
                        [rng.below(4) as usize];
                    let num =
                        [rig.a.qpn, rig.b.qpn, rig.scq.cqn, rig.rcq.cqn][rng.below(4) as usize];
                    rig.db(reg, hw::db_value(num, rng.next() as u16));
                }
                13 => {
                    // Scribble on a ring or a page table.
                    let at = if rng.below(2) == 0 {
                        RINGS + rng.below(0x30_0000)
                    } else {
                        PT + rng.below(0x8000)
                    };
                    rig.mem
                        .dma_write(at, &rng.next().to_le_bytes())
                        .expect("inside the region");
                }
                14 | 15 => {
                    // RTS -> SQD (notified or not) or back; refused from other states.
                    let q = if which == 'a' { rig.a.qpn } else { rig.b.qpn };
                    let sqd = rng.below(2) == 0;
                    let a = hw::QpAttr {
                        qp_state: if sqd { hw::QPS_SQD } else { hw::QPS_RTS },
                        en_sqd_async_notify: rng.below(2) as u8,
                        ..Default::default()
                    };
                    let notify = if sqd {
                        hw::QP_ATTR_EN_SQD_ASYNC_NOTIFY
                    } else {
                        0
                    };
                    rig.modify(q, hw::QP_ATTR_STATE | notify, &a);
                    rig.events();
                }
                16 => {
                    // The MR under the WQEs goes, or comes back (another key).
                    match victim.take() {
                        Some(key) => {
                            rig.ok(hw::CMD_DESTROY_MR, hw::KeyParams { key }.encode());
                        }
                        None => {
                            let key = rig.mr(SMALL_VA, 64 * 4096, 12, &pages, all);
                            victim = Some(key);
                            keys[3] = key;
                        }
                    }
                }
                _ => {
                    // Reconnect both QPs from RESET (the only way back from ERR); a third
                    // of the time the UC pair instead (UC's attributes).
                    let (a, b) = (rig.a.qpn, rig.b.qpn);
                    for q in [a, b] {
                        rig.modify(q, hw::QP_ATTR_STATE, &hw::QpAttr::default());
                    }
                    let uc = rng.below(3) == 0;
                    for (q, i) in [(&mut rig.a, 0), (&mut rig.b, 1)] {
                        let (qpn, sq, rq) = pairs[usize::from(uc)][i];
                        *q = Qp {
                            qpn,
                            sq,
                            rq,
                            sq_pi: 0,
                            rq_pi: 0,
                        };
                    }
                    let (a, b) = (rig.a.qpn, rig.b.qpn);
                    let psn = rng.below(1 << 24) as u32;
                    if uc {
                        let mtu = (rng.below(5) + 1) as u8;
                        let set = |x: &mut hw::QpAttr| {
                            x.path_mtu = mtu;
                            x.qp_access_flags = hw::ACCESS_REMOTE_WRITE;
                        };
                        // The responder's PSN behind sometimes: it follows the first
                        // message's start.
                        let off = rng.below(3) as u32;
                        rig.connect_uc(a, b, psn, psn, set);
                        rig.connect_uc(b, a, psn, psn.wrapping_add(off) & 0xff_ffff, set);
                        uc_runs += 1;
                    } else {
                        // Sometimes A is connected to itself.
                        let a_dest = if rng.below(4) == 0 { a } else { b };
                        let (rd, dest_rd) = (rng.below(17) as u8, rng.below(17) as u8);
                        let set = |x: &mut hw::QpAttr| {
                            x.rnr_retry = rnr;
                            x.max_rd_atomic = rd;
                            x.max_dest_rd_atomic = dest_rd;
                            x.qp_access_flags |= hw::ACCESS_REMOTE_ATOMIC;
                        };
                        rig.connect(a, a_dest, psn, psn, set);
                        rig.connect(b, a, psn, psn, set);
                    }
                }
            }
            for cq in ['s', 'r'] {
                while let Some(c) = rig.poll(cq) {
                    statuses[usize::from(c.status)] += 1;
                    let atomic = matches!(c.opcode, hw::WC_COMP_SWAP | hw::WC_FETCH_ADD);
                    if atomic && c.status == hw::WC_SUCCESS {
                        atomics += 1;
                    }
                }
            }
            assert_eq!(
                rig.nic.status(),
                hw::STATUS_READY | hw::STATUS_ENABLED,
                "the data path stopped the NIC"
            );
        }
    }
    println!(
        "completion statuses: {:?}",
        statuses
            .iter()
            .enumerate()
            .filter(|s| *s.1 > 0)
            .collect::<Vec<_>>()
    );
    assert!(
        statuses[usize::from(hw::WC_SUCCESS)] > 0,
        "nothing ever succeeded"
    );
    assert!(statuses[usize::from(hw::WC_WR_FLUSH_ERR)] > 0);
    assert!(atomics > 0, "no atomic ever succeeded");
    assert!(uc_runs > 0, "UC never ran");
    assert!(statuses[usize::from(hw::WC_LOC_QP_OP_ERR)] > 0);
}
