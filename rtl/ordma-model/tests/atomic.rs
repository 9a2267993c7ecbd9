//! Atomics (compare and swap, fetch and add) in loopback and between two NICs: the old
//! value back in the local buffer and the word changed exactly once; every fetch and add of
//! many, pipelined and interleaved from two QPs, counted exactly once, also over a wire that
//! drops, duplicates and reorders frames (the responder's replay cache answers a duplicate
//! request without executing it again); the errors (misaligned address, no
//! `REMOTE_ATOMIC` on the MR or the QP, no responder resources, local length, malformed
//! WQEs); atomics and READs sharing the initiator depth. ATOMIC WRITE and FLUSH (IBTA 1.5):
//! the word stored once, FLUSH of a range and of a whole MR, their errors (misaligned,
//! persistence, no access on the MR or the QP, past the MR, no responder resources,
//! malformed WQEs, UC), and both over a lossy wire among fetch and adds.

mod common;

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::packet;
use ordma_model::engine::wire;
use ordma_model::mem::Dma;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
/// The atomic MR: the small MR's 64 pages again, at this virtual address, with every
/// access (`atomic_mr`).
const ATOM_VA: u64 = 0x5_0000_0000;
/// Where the old values go: the big MR (local write).
const RESULT_VA: u64 = BIG_VA + 0x1000;
const ALL: u32 = hw::ACCESS_LOCAL_WRITE
    | hw::ACCESS_REMOTE_WRITE
    | hw::ACCESS_REMOTE_READ
    | hw::ACCESS_REMOTE_ATOMIC;

fn atomic_mr(r: &mut Rig, access: u32) -> u32 {
    let small: Vec<u64> = (0..64).map(|i| SMALL_PHYS + small_page(i) * 4096).collect();
    r.mr(ATOM_VA, 64 * 4096, 12, &small, access)
}

/// The bus address of `va` in the atomic MR.
fn word_addr(va: u64) -> u64 {
    let off = va - ATOM_VA;
    SMALL_PHYS + small_page(off >> 12) * 4096 + off % 4096
}

fn word(r: &Rig, va: u64) -> u64 {
    let mut b = [0u8; 8];
    r.mem.dma_read(word_addr(va), &mut b).unwrap();
    u64::from_le_bytes(b)
}

fn set_word(r: &Rig, va: u64, v: u64) {
    r.mem.dma_write(word_addr(va), &v.to_le_bytes()).unwrap();
}

fn result(r: &Rig, k: u64) -> u64 {
    u64::from_le_bytes(r.read(RESULT_VA + 8 * k, 8).try_into().unwrap())
}

fn fadd(add: u64) -> hw::AtomicSeg {
    hw::AtomicSeg {
        compare_add: add,
        swap: 0,
    }
}

fn cas(compare: u64, swap: u64) -> hw::AtomicSeg {
    hw::AtomicSeg {
        compare_add: compare,
        swap,
    }
}

/// Posts a fetch and add of `add` on the word at `va` (key `rkey`) from `which` QP of
/// `r`, its old value into result slot `k`.
fn post_fadd(r: &mut Rig, which: char, va: u64, rkey: u32, add: u64, k: u64) -> u16 {
    let big = r.big;
    let s = [sge(RESULT_VA + 8 * k, 8, big)];
    let op = hw::WR_ATOMIC_FETCH_AND_ADD;
    r.put_atomic(which, op, SIGNALED, va, rkey, fadd(add), &s)
}

fn with_atomics(a: &mut hw::QpAttr) {
    a.qp_access_flags |= hw::ACCESS_REMOTE_ATOMIC;
}

/// CQE of a successful atomic `index` with opcode `wc`.
fn ok_cqe(c: hw::Cqe, index: u16, wc: u8) {
    assert_eq!(
        (c.status, c.opcode, c.wqe_index, c.byte_len),
        (hw::WC_SUCCESS, wc, index, 8),
        "atomic {index}"
    );
}

/// The three ways atomics travel, each a [`Pair`] whose `r[0]` QP A is the requester
/// and whose `r[p.rx()]` holds the word, with its atomic MR's key: loopback through the
/// NIC's own queue, loopback as frames over the test wire, two NICs. `f` adjusts both
/// QPs' attributes (which allow remote atomics).
fn pairs(f: fn(&mut hw::QpAttr)) -> Vec<(&'static str, Pair, u32)> {
    let both = move |a: &mut hw::QpAttr| {
        with_atomics(a);
        f(a);
    };
    let own = Pair {
        r: vec![Rig::with(both)],
        q: Queue::default(),
        frames: 0,
        held: None,
        fault: Box::new(|_, _| Act::Pass),
        ticks: 0,
    };
    [
        ("loopback", own),
        ("loopback on the wire", Pair::looped(both)),
        ("two NICs", Pair::new(both)),
    ]
    .into_iter()
    .map(|(name, mut p)| {
        let rx = p.rx();
        let key = atomic_mr(&mut p.r[rx], ALL);
        (name, p, key)
    })
    .collect()
}

#[test]
fn compare_swap_and_fetch_add() {
    for (name, mut p, key) in pairs(|_| {}) {
        let rx = p.rx();
        let va = ATOM_VA + 0x2008;
        set_word(&p.r[rx], va, 0x1111_2222_3333_4444);
        let req = &mut p.r[0];
        let big = req.big;
        let s = |k: u64| [sge(RESULT_VA + 8 * k, 8, big)];
        let op = hw::WR_ATOMIC_CMP_AND_SWP;
        // Not equal: unchanged, the old value back; equal: swapped; then a fetch and add
        // that wraps.
        req.put_atomic('a', op, SIGNALED, va, key, cas(5, 6), &s(0));
        let hit = cas(0x1111_2222_3333_4444, 0xffff_ffff_ffff_fff0);
        req.put_atomic('a', op, SIGNALED, va, key, hit, &s(1));
        post_fadd(req, 'a', va, key, 0x20, 2);
        req.ring_sq('a');
        p.settle(10);
        let req = &mut p.r[0];
        ok_cqe(req.cqe('s'), 0, hw::WC_COMP_SWAP);
        ok_cqe(req.cqe('s'), 1, hw::WC_COMP_SWAP);
        ok_cqe(req.cqe('s'), 2, hw::WC_FETCH_ADD);
        assert!(req.poll('s').is_none(), "{name}");
        assert_eq!(result(req, 0), 0x1111_2222_3333_4444, "{name}");
        assert_eq!(result(req, 1), 0x1111_2222_3333_4444, "{name}");
        assert_eq!(result(req, 2), 0xffff_ffff_ffff_fff0, "{name}");
        assert_eq!(
            word(&p.r[rx], va),
            0x10,
            "{name}: swapped, 0x20 added, wrapped"
        );
        assert!(p.r[rx].poll('r').is_none(), "{name}: no receive completion");
        assert_eq!(p.ticks, 0, "{name}");
        let b = p.r[rx].b.qpn;
        assert_eq!(p.r[rx].state(b), hw::QPS_RTS, "{name}");
    }
}

/// A pseudo-random fault: of every frame, one in `n` dropped, one in `n` duplicated and
/// one in `n` held back behind the next.
fn lossy(seed: u64, n: u64) -> Fault {
    let mut x = 0x2545_f491_4f6c_dd1du64 ^ seed;
    Box::new(move |_, _| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match x % (3 * n) {
            0 => Act::Drop,
            1 => Act::Dup,
            2 => Act::Hold,
            _ => Act::Pass,
        }
    })
}

/// The fetch and adds of QP `which` of `r[from]`: `n` of them, adding `k + 1` each
/// (`k` from 0), their old values into result slots `base + k`.
fn post_many(r: &mut Rig, which: char, key: u32, n: u64, base: u64) {
    for k in 0..n {
        post_fadd(r, which, ATOM_VA + 0x3000, key, k + 1, base + k);
    }
    r.ring_sq(which);
}

/// Completes `n` fetch and adds of `which` QP's CQ ('s': A's, in loopback also B's).
fn done(r: &mut Rig, n: u64) {
    for _ in 0..n {
        let c = r.cqe('s');
        assert_eq!(
            (c.status, c.opcode, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_FETCH_ADD, 8)
        );
    }
}

#[test]
fn pipelined_fetch_adds_count_once_over_a_lossy_wire() {
    for seed in 0..6u64 {
        for (name, mut p, key) in pairs(|a| a.max_rd_atomic = 4) {
            if name == "loopback" {
                continue; // nothing is lost in the NIC's own queue
            }
            p.fault = lossy(seed, 6);
            let rx = p.rx();
            set_word(&p.r[rx], ATOM_VA + 0x3000, 1000);
            post_many(&mut p.r[0], 'a', key, 60, 0);
            p.settle(400);
            done(&mut p.r[0], 60);
            // In SQ order, each exactly once: the old values are the running sums.
            let mut sum = 1000;
            for k in 0..60 {
                assert_eq!(result(&p.r[0], k), sum, "{name}, seed {seed}: atomic {k}");
                sum += k + 1;
            }
            assert_eq!(word(&p.r[rx], ATOM_VA + 0x3000), sum, "{name}, seed {seed}");
        }
    }
}

#[test]
fn fetch_adds_of_two_qps_on_one_word_are_atomic() {
    // Loopback: QP A and QP B both add to one word of the NIC's memory, interleaved
    // (their doorbells alternate), in the NIC's own queue and on a lossy wire.
    for seed in 0..4u64 {
        for (name, mut p, key) in pairs(|a| a.max_rd_atomic = 8) {
            if name == "two NICs" {
                continue;
            }
            if name != "loopback" {
                p.fault = lossy(seed, 8);
            }
            set_word(&p.r[0], ATOM_VA + 0x3000, 0);
            for round in 0..6 {
                let r = &mut p.r[0];
                post_many(r, 'a', key, 5, round * 5);
                post_many(r, 'b', key, 5, 100 + round * 5);
                p.settle(400);
            }
            done(&mut p.r[0], 60);
            // 30 adds of 1..=5 from each QP; every old value a distinct running sum.
            let total = 2 * 6 * (1 + 2 + 3 + 4 + 5);
            assert_eq!(
                word(&p.r[0], ATOM_VA + 0x3000),
                total,
                "{name}, seed {seed}"
            );
            let mut olds: Vec<u64> = (0..30)
                .chain(100..130)
                .map(|k| result(&p.r[0], k))
                .collect();
            olds.sort_unstable();
            olds.dedup();
            assert_eq!(olds.len(), 60, "{name}, seed {seed}: distinct old values");
            assert!(olds.iter().all(|&v| v < total));
        }
    }
}

#[test]
fn a_lost_answer_is_replayed_not_executed_again() {
    for lose in [packet::ATOMIC_ACKNOWLEDGE, packet::FETCH_ADD] {
        let mut p = Pair::new(with_atomics);
        let key = atomic_mr(&mut p.r[1], ALL);
        set_word(&p.r[1], ATOM_VA + 0x3000, 100);
        let (mut once, mut acks) = (true, 0);
        let seen = std::rc::Rc::new(std::cell::Cell::new(0u32));
        let s2 = std::rc::Rc::clone(&seen);
        p.fault = Box::new(move |_, f| {
            let op = f.packet.bth.opcode;
            if op == packet::ATOMIC_ACKNOWLEDGE {
                acks += 1;
                s2.set(acks);
            }
            if op == lose && once {
                once = false;
                // The answer lost: the request goes again; the request duplicated: it
                // comes twice.
                if lose == packet::ATOMIC_ACKNOWLEDGE {
                    return Act::Drop;
                }
                return Act::Dup;
            }
            Act::Pass
        });
        post_fadd(&mut p.r[0], 'a', ATOM_VA + 0x3000, key, 5, 0);
        p.r[0].ring_sq('a');
        p.settle(10);
        ok_cqe(p.r[0].cqe('s'), 0, hw::WC_FETCH_ADD);
        assert_eq!(result(&p.r[0], 0), 100, "the first answer's old value");
        assert_eq!(word(&p.r[1], ATOM_VA + 0x3000), 105, "executed once");
        assert_eq!(
            seen.get(),
            2,
            "the duplicate answered again, from the replay cache"
        );
        let st = p.r[1].nic.status_snapshot();
        assert_eq!(st.atomics, [1, 1], "executed once, replayed once");
        assert!(st
            .to_string()
            .contains(" atomics=1 atomics_replayed=1 timer_resends="));
        let resent = lose == packet::ATOMIC_ACKNOWLEDGE;
        assert_eq!(
            p.ticks > 0,
            resent,
            "sent again on the timer only when lost"
        );
    }
}

#[test]
fn a_duplicate_no_longer_kept_is_dropped_never_executed_again() {
    // The requester may have 4 atomics in flight, the responder keeps 1: the answers of
    // the first three lost, their duplicates find nothing kept and are dropped; the
    // requester gives up on the first (RETRY_EXC_ERR), each was executed once.
    let mut p = Pair::new(|a| {
        with_atomics(a);
        a.max_rd_atomic = 4;
        a.max_dest_rd_atomic = 1;
        a.retry_cnt = 2;
    });
    let key = atomic_mr(&mut p.r[1], ALL);
    set_word(&p.r[1], ATOM_VA + 0x3000, 0);
    let mut lost = 0;
    p.fault = Box::new(move |_, f| {
        if f.packet.bth.opcode == packet::ATOMIC_ACKNOWLEDGE && lost < 3 {
            lost += 1;
            return Act::Drop;
        }
        Act::Pass
    });
    post_many(&mut p.r[0], 'a', key, 3, 0);
    p.settle(20);
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_RETRY_EXC_ERR, 0));
    for i in 1..3 {
        let c = p.r[0].cqe('s');
        assert_eq!((c.status, c.wqe_index), (hw::WC_WR_FLUSH_ERR, i));
    }
    assert_eq!(
        word(&p.r[1], ATOM_VA + 0x3000),
        1 + 2 + 3,
        "each executed once"
    );
}

/// Posts one atomic from `p`'s QP A (a fresh pair) and returns its CQE; `edit` changes
/// the WQE first.
fn one(p: &mut Pair, key: u32, va: u64, edit: impl Fn(&mut Vec<u8>)) -> hw::Cqe {
    let big = p.r[0].big;
    let i = post_fadd(&mut p.r[0], 'a', va, key, 1, 0);
    let q = &p.r[0].a;
    let at = q.sq + (u64::from(i % (1 << SQ_LOG)) << SQ_WQE_LOG);
    let mut b = vec![0u8; 1 << SQ_WQE_LOG];
    p.r[0].mem.dma_read(at, &mut b).unwrap();
    edit(&mut b);
    p.r[0].mem.dma_write(at, &b).unwrap();
    let _ = big;
    p.r[0].ring_sq('a');
    p.settle(10);
    p.r[0].cqe('s')
}

#[test]
fn remote_errors() {
    // Misaligned: NAK invalid request, the responder's QP to ERR with QP_REQ_ERR.
    for (name, mut p, key) in pairs(|_| {}) {
        let rx = p.rx();
        set_word(&p.r[rx], ATOM_VA + 0x3000, 7);
        let c = one(&mut p, key, ATOM_VA + 0x3004, |_| {});
        assert_eq!(c.status, hw::WC_REM_INV_REQ_ERR, "{name}");
        let b = p.r[rx].b.qpn;
        assert_eq!(p.r[rx].state(b), hw::QPS_ERR, "{name}");
        assert!(
            p.r[rx].events().contains(&(hw::EVENT_QP_REQ_ERR, b)),
            "{name}"
        );
        assert_eq!(word(&p.r[rx], ATOM_VA + 0x3000), 7, "{name}: untouched");
    }
    // An MR without REMOTE_ATOMIC (the big MR), a QP without it, a range past the MR:
    // NAK remote access error, QP_ACCESS_ERR.
    for case in 0..3 {
        let f: fn(&mut hw::QpAttr) = if case == 1 {
            |a| a.qp_access_flags &= !hw::ACCESS_REMOTE_ATOMIC
        } else {
            |_| {}
        };
        for (name, mut p, key) in pairs(f) {
            let rx = p.rx();
            let (key, va) = match case {
                0 => (p.r[rx].big, BIG_VA + 0x10_0000),
                1 => (key, ATOM_VA),
                _ => (key, ATOM_VA + 64 * 4096),
            };
            let c = one(&mut p, key, va, |_| {});
            assert_eq!(c.status, hw::WC_REM_ACCESS_ERR, "{name}, case {case}");
            let b = p.r[rx].b.qpn;
            assert!(
                p.r[rx].events().contains(&(hw::EVENT_QP_ACCESS_ERR, b)),
                "{name}"
            );
        }
    }
    // No responder resources: NAK invalid request (the responder stays in RTS, as for a
    // READ).
    for (name, mut p, key) in pairs(|a| a.max_dest_rd_atomic = 0) {
        let rx = p.rx();
        let c = one(&mut p, key, ATOM_VA, |_| {});
        assert_eq!(c.status, hw::WC_REM_INV_REQ_ERR, "{name}");
        let b = p.r[rx].b.qpn;
        assert_eq!(p.r[rx].state(b), hw::QPS_RTS, "{name}");
    }
}

/// A change to a WQE's bytes.
type Edit = fn(&mut Vec<u8>);

#[test]
fn local_errors() {
    /// The first SGE's length field in an atomic WQE.
    const SGE_LEN: usize = hw::SendWqe::atomic_sge_offset(0) + 8;
    let cases: [(&str, Edit, u8); 5] = [
        ("4 bytes", |b| b[SGE_LEN] = 4, hw::WC_LOC_LEN_ERR),
        ("16 bytes", |b| b[SGE_LEN] = 16, hw::WC_LOC_LEN_ERR),
        ("bad lkey", |b| b[SGE_LEN + 4] ^= 0x80, hw::WC_LOC_PROT_ERR),
        (
            "inline",
            |b| b[1] |= hw::WQE_FLAG_INLINE,
            hw::WC_LOC_QP_OP_ERR,
        ),
        ("swap of an add", |b| b[40] = 1, hw::WC_LOC_QP_OP_ERR),
    ];
    for (what, edit, status) in cases {
        for (name, mut p, key) in pairs(|_| {}) {
            let rx = p.rx();
            set_word(&p.r[rx], ATOM_VA, 3);
            let c = one(&mut p, key, ATOM_VA, edit);
            assert_eq!(c.status, status, "{name}: {what}");
            assert_eq!(word(&p.r[rx], ATOM_VA), 3, "{name}: {what}: nothing sent");
        }
    }
    // Two SGEs of 4 bytes: the old value split across them.
    for (name, mut p, key) in pairs(|_| {}) {
        let rx = p.rx();
        set_word(&p.r[rx], ATOM_VA, 0x0807_0605_0403_0201);
        let big = p.r[0].big;
        let s = [sge(RESULT_VA + 100, 4, big), sge(RESULT_VA + 200, 4, big)];
        let op = hw::WR_ATOMIC_FETCH_AND_ADD;
        p.r[0].put_atomic('a', op, SIGNALED, ATOM_VA, key, fadd(1), &s);
        p.r[0].ring_sq('a');
        p.settle(10);
        ok_cqe(p.r[0].cqe('s'), 0, hw::WC_FETCH_ADD);
        assert_eq!(p.r[0].read(RESULT_VA + 100, 4), [1, 2, 3, 4], "{name}");
        assert_eq!(p.r[0].read(RESULT_VA + 200, 4), [5, 6, 7, 8], "{name}");
    }
}

#[test]
fn atomics_and_reads_share_the_initiator_depth() {
    let mut p = Pair::new(|a| {
        with_atomics(a);
        a.max_rd_atomic = 3;
    });
    let key = atomic_mr(&mut p.r[1], ALL);
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    let mut read = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
    (read.remote_addr, read.rkey) = (BIG_VA, big1);
    p.r[0].put_send('a', read, &[sge(BIG_VA + (8 << 20), 64, big0)], &[]);
    post_fadd(&mut p.r[0], 'a', ATOM_VA, key, 1, 0);
    p.r[0].put_send('a', read, &[sge(BIG_VA + (9 << 20), 64, big0)], &[]);
    post_fadd(&mut p.r[0], 'a', ATOM_VA, key, 1, 1);
    // A WRITE with FENCE behind them waits for all of them.
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED | hw::WQE_FLAG_FENCE, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + (1 << 20), big1);
    p.r[0].put_send('a', w, &[sge(BIG_VA, 16, big0)], &[]);
    p.r[0].ring_sq('a');
    let ops: Vec<u8> =
        p.q.lock()
            .unwrap()
            .iter()
            .map(|(_, f)| wire::decode(f).unwrap().packet.bth.opcode)
            .collect();
    assert_eq!(
        ops,
        [
            packet::READ_REQUEST,
            packet::FETCH_ADD,
            packet::READ_REQUEST
        ],
        "three of the four, the depth"
    );
    p.settle(10);
    let done: Vec<(u8, u8, u16)> = std::iter::from_fn(|| p.r[0].poll('s'))
        .map(|c| (c.status, c.opcode, c.wqe_index))
        .collect();
    assert_eq!(
        done,
        [
            (0, hw::WC_RDMA_READ, 0),
            (0, hw::WC_FETCH_ADD, 1),
            (0, hw::WC_RDMA_READ, 2),
            (0, hw::WC_FETCH_ADD, 3),
            (0, hw::WC_RDMA_WRITE, 4)
        ]
    );
    assert_eq!((result(&p.r[0], 0), result(&p.r[0], 1)), (0, 1));
}

// ATOMIC WRITE and FLUSH (IBTA 1.5, interface 1.8).

/// Posts an ATOMIC WRITE of `v` at `va` (key `rkey`) from `r`'s QP A; its index.
fn post_atomic_write(r: &mut Rig, va: u64, rkey: u32, v: u64) -> u16 {
    let op = hw::WR_ATOMIC_WRITE;
    r.put_atomic('a', op, SIGNALED, va, rkey, fadd(v), &[])
}

/// Posts a FLUSH of `seg` at `va` (key `rkey`) from `r`'s QP A; its index.
fn post_flush(r: &mut Rig, va: u64, rkey: u32, seg: hw::FlushSeg) -> u16 {
    let w = hw::SendWqe {
        opcode: hw::WR_FLUSH,
        flags: SIGNALED,
        remote_addr: va,
        rkey,
        ..Default::default()
    };
    let mut b = vec![0u8; 1 << SQ_WQE_LOG];
    assert!(w.encode_into(&mut b) && seg.encode_into(&mut b));
    let q = &mut r.a;
    let at = q.sq + (u64::from(q.sq_pi % (1 << SQ_LOG)) << SQ_WQE_LOG);
    r.mem.dma_write(at, &b).unwrap();
    let idx = q.sq_pi;
    q.sq_pi = q.sq_pi.wrapping_add(1);
    idx
}

fn flush(length: u32, placement: u8, level: u8) -> hw::FlushSeg {
    hw::FlushSeg {
        length,
        placement,
        level,
    }
}

fn with_flush(a: &mut hw::QpAttr) {
    a.qp_access_flags |= hw::ACCESS_FLUSH_GLOBAL;
}

/// The completions of QP A: (status, opcode, index, byte_len), as many as there are.
fn send_cqes(r: &mut Rig) -> Vec<(u8, u8, u16, u32)> {
    std::iter::from_fn(|| r.poll('s'))
        .map(|c| (c.status, c.opcode, c.wqe_index, c.byte_len))
        .collect()
}

#[test]
fn atomic_write_and_flush() {
    for (name, mut p, key) in pairs(with_flush) {
        let rx = p.rx();
        let flush_key = atomic_mr(&mut p.r[rx], ALL | hw::ACCESS_FLUSH_GLOBAL);
        set_word(&p.r[rx], ATOM_VA + 0x2000, 1);
        set_word(&p.r[rx], ATOM_VA + 0x2008, 2);
        set_word(&p.r[rx], ATOM_VA + 0x2010, 3);
        let r = &mut p.r[0];
        post_atomic_write(r, ATOM_VA + 0x2008, key, 0x0102_0304_0506_0708);
        post_atomic_write(r, ATOM_VA + 0x2008, key, 0xfedc_ba98_7654_3210);
        post_flush(
            r,
            ATOM_VA + 0x2000,
            flush_key,
            flush(24, hw::FLUSH_GLOBAL, hw::FLUSH_RANGE),
        );
        // The whole MR (address and length unused), and a range of nothing.
        post_flush(
            r,
            0,
            flush_key,
            flush(12_345_678, hw::FLUSH_GLOBAL, hw::FLUSH_MR),
        );
        post_flush(
            r,
            ATOM_VA,
            flush_key,
            flush(0, hw::FLUSH_GLOBAL, hw::FLUSH_RANGE),
        );
        r.ring_sq('a');
        p.settle(10);
        let (aw, fl) = (hw::WC_ATOMIC_WRITE, hw::WC_FLUSH);
        assert_eq!(
            send_cqes(&mut p.r[0]),
            [
                (0, aw, 0, 8),
                (0, aw, 1, 8),
                (0, fl, 2, 0),
                (0, fl, 3, 0),
                (0, fl, 4, 0)
            ],
            "{name}"
        );
        let words: Vec<u64> = (0..3)
            .map(|i| word(&p.r[rx], ATOM_VA + 0x2000 + 8 * i))
            .collect();
        assert_eq!(
            words,
            [1, 0xfedc_ba98_7654_3210, 3],
            "{name}: the last one stored, alone"
        );
        assert!(p.r[rx].poll('r').is_none(), "{name}: no receive completion");
        let b = p.r[rx].b.qpn;
        assert_eq!(p.r[rx].state(b), hw::QPS_RTS, "{name}");
        assert_eq!(p.ticks, 0, "{name}");
    }
}

#[test]
fn atomic_write_and_flush_errors() {
    // Remote: (case, expected status, the responder's QP in ERR).
    for case in 0..8 {
        let f: fn(&mut hw::QpAttr) = match case {
            5 => |a| a.qp_access_flags &= !hw::ACCESS_REMOTE_WRITE,
            6 => |_| {},
            7 => |a| {
                with_flush(a);
                a.max_dest_rd_atomic = 0;
            },
            _ => with_flush,
        };
        for (name, mut p, key) in pairs(f) {
            let rx = p.rx();
            let no_flush = key;
            let flush_key = atomic_mr(&mut p.r[rx], ALL | hw::ACCESS_FLUSH_GLOBAL);
            let g = hw::FLUSH_GLOBAL;
            if case == 7 {
                // A FLUSH needs no responder resource (as on soft-RoCE).
                let s = flush(8, g, hw::FLUSH_RANGE);
                let i = post_flush(&mut p.r[0], ATOM_VA, flush_key, s);
                p.r[0].ring_sq('a');
                p.settle(10);
                let c = p.r[0].cqe('s');
                assert_eq!(
                    (c.wqe_index, c.status),
                    (i, hw::WC_SUCCESS),
                    "{name}: FLUSH"
                );
            }
            let r = &mut p.r[0];
            let (want, err) = match case {
                // Misaligned.
                0 => (
                    post_atomic_write(r, ATOM_VA + 4, key, 9),
                    hw::WC_REM_INV_REQ_ERR,
                ),
                // Persistence: the NIC has none.
                1 => {
                    let s = flush(8, hw::FLUSH_PERSISTENT, hw::FLUSH_RANGE);
                    (post_flush(r, ATOM_VA, flush_key, s), hw::WC_REM_ACCESS_ERR)
                }
                // An MR without FLUSH_GLOBAL.
                2 => {
                    let s = flush(8, g, hw::FLUSH_MR);
                    (post_flush(r, ATOM_VA, no_flush, s), hw::WC_REM_ACCESS_ERR)
                }
                // A range past the MR's end.
                3 => {
                    let s = flush(4097, g, hw::FLUSH_RANGE);
                    let va = ATOM_VA + 63 * 4096;
                    (post_flush(r, va, flush_key, s), hw::WC_REM_ACCESS_ERR)
                }
                // An MR without REMOTE_WRITE (the atomic MR without it).
                4 => {
                    let read_only = hw::ACCESS_REMOTE_READ;
                    let k = atomic_mr(&mut p.r[rx], read_only);
                    let r = &mut p.r[0];
                    (post_atomic_write(r, ATOM_VA, k, 9), hw::WC_REM_ACCESS_ERR)
                }
                // A QP without REMOTE_WRITE; a QP without FLUSH_GLOBAL.
                5 => (post_atomic_write(r, ATOM_VA, key, 9), hw::WC_REM_ACCESS_ERR),
                6 => {
                    let s = flush(8, g, hw::FLUSH_RANGE);
                    (post_flush(r, ATOM_VA, flush_key, s), hw::WC_REM_ACCESS_ERR)
                }
                // No responder resources.
                _ => (
                    post_atomic_write(r, ATOM_VA, key, 9),
                    hw::WC_REM_INV_REQ_ERR,
                ),
            };
            p.r[0].ring_sq('a');
            p.settle(10);
            let c = p.r[0].cqe('s');
            assert_eq!((c.wqe_index, c.status), (want, err), "{name}, case {case}");
            let b = p.r[rx].b.qpn;
            let state = if case == 7 { hw::QPS_RTS } else { hw::QPS_ERR };
            assert_eq!(p.r[rx].state(b), state, "{name}, case {case}");
            assert_eq!(word(&p.r[rx], ATOM_VA), 0, "{name}, case {case}: untouched");
        }
    }
    // Local: SGEs, a swap value, inline, an unknown placement or level: LOC_QP_OP_ERR.
    let edits: [Edit; 5] = [
        |b| b[2] = 1,
        |b| b[hw::SQ_WQE_ATOMIC_OFFSET as usize + 8] = 1,
        |b| b[1] |= hw::WQE_FLAG_INLINE,
        |b| b[hw::SQ_WQE_FLUSH_OFFSET as usize + 4] = 4,
        |b| b[hw::SQ_WQE_FLUSH_OFFSET as usize + 5] = 2,
    ];
    for (k, edit) in edits.into_iter().enumerate() {
        let mut p = Pair::new(|a| {
            with_atomics(a);
            with_flush(a);
        });
        let key = atomic_mr(&mut p.r[1], ALL | hw::ACCESS_FLUSH_GLOBAL);
        let i = if k < 3 {
            post_atomic_write(&mut p.r[0], ATOM_VA, key, 9)
        } else {
            post_flush(&mut p.r[0], ATOM_VA, key, flush(8, hw::FLUSH_GLOBAL, 0))
        };
        let at = p.r[0].a.sq + (u64::from(i % (1 << SQ_LOG)) << SQ_WQE_LOG);
        let mut b = vec![0u8; 1 << SQ_WQE_LOG];
        p.r[0].mem.dma_read(at, &mut b).unwrap();
        edit(&mut b);
        p.r[0].mem.dma_write(at, &b).unwrap();
        p.r[0].ring_sq('a');
        p.settle(10);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_LOC_QP_OP_ERR, "edit {k}");
        assert_eq!(word(&p.r[1], ATOM_VA), 0, "edit {k}: untouched");
    }
}

#[test]
fn atomic_writes_and_flushes_over_a_lossy_wire() {
    // 20 ATOMIC WRITEs of increasing values to one word, a FLUSH after every fourth, and
    // fetch and adds between them on another word: in order, each once, whatever the wire
    // drops, duplicates or holds back (a duplicate is answered, never executed again: a
    // late ATOMIC WRITE executed twice would put an old value back).
    for seed in 0..6u64 {
        for (name, mut p, key) in pairs(|a| {
            with_flush(a);
            a.max_rd_atomic = 4;
        }) {
            if name == "loopback" {
                continue;
            }
            p.fault = lossy(seed, 6);
            let rx = p.rx();
            let fk = atomic_mr(&mut p.r[rx], ALL | hw::ACCESS_FLUSH_GLOBAL);
            let mut want = Vec::new();
            for k in 0..20u64 {
                let r = &mut p.r[0];
                want.push((0, hw::WC_ATOMIC_WRITE, 8));
                post_atomic_write(r, ATOM_VA + 0x10, key, 100 + k);
                want.push((0, hw::WC_FETCH_ADD, 8));
                post_fadd(r, 'a', ATOM_VA + 0x18, key, 1, k);
                if k % 4 == 3 {
                    want.push((0, hw::WC_FLUSH, 0));
                    post_flush(r, ATOM_VA, fk, flush(64, hw::FLUSH_GLOBAL, hw::FLUSH_RANGE));
                }
            }
            p.r[0].ring_sq('a');
            p.settle(400);
            let got: Vec<(u8, u8, u32)> = send_cqes(&mut p.r[0])
                .into_iter()
                .map(|(s, o, _, n)| (s, o, n))
                .collect();
            assert_eq!(got, want, "{name}, seed {seed}");
            assert_eq!(word(&p.r[rx], ATOM_VA + 0x10), 119, "{name}, seed {seed}");
            assert_eq!(word(&p.r[rx], ATOM_VA + 0x18), 20, "{name}, seed {seed}");
        }
    }
}
