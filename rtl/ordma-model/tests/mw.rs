//! Memory windows (interface 1.9): `ALLOC_MW` and `DEALLOC_MW`, their refusals, a PD kept
//! while a window uses it; binding by a `BIND_MW` WQE (type 1 and type 2), remote WRITEs
//! and READs through a window, its range, access and QP; invalidation by `LOCAL_INV`, by
//! a peer's SEND with invalidate, by a rebind of length 0 (type 1), by the MR's
//! destruction; every refused bind `WC_MW_BIND_ERR`.

mod common;

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::mem::Dma;

fn alloc(r: &mut Rig, pdn: u32, mw_type: u8) -> (u16, u64) {
    r.run(
        hw::CMD_ALLOC_MW,
        hw::AllocMwParams { pdn, mw_type }.encode(),
    )
}

fn dealloc(r: &mut Rig, rkey: u32) -> u16 {
    r.run(hw::CMD_DEALLOC_MW, hw::KeyParams { key: rkey }.encode())
        .0
}

#[test]
fn windows_are_allocated_and_freed() {
    let mut r = Rig::new();
    let (pdn, big) = (r.pdn, r.big);
    let (s1, k1) = alloc(&mut r, pdn, hw::MW_TYPE_1);
    let (s2, k2) = alloc(&mut r, pdn, hw::MW_TYPE_2);
    assert_eq!((s1, s2), (hw::AQ_OK, hw::AQ_OK));
    let (k1, k2) = (k1 as u32, k2 as u32);
    assert!(
        k1 & hw::MW_KEY_BIT != 0 && k2 & hw::MW_KEY_BIT != 0,
        "{k1:#x} {k2:#x}"
    );
    assert_ne!(k1, k2);
    assert_eq!(r.nic.mws_in_use(), 2);
    // Refused: type 3, type 0, a PD that does not exist, a reserved byte.
    for (pdn, t) in [(pdn, 3), (pdn, 0), (pdn + 100, 1)] {
        assert_eq!(
            alloc(&mut r, pdn, t).0,
            hw::AQ_BAD_PARAM,
            "PD {pdn}, type {t}"
        );
    }
    let mut p = hw::AllocMwParams { pdn, mw_type: 1 }.encode();
    p[5] = 1;
    assert_eq!(
        r.run(hw::CMD_ALLOC_MW, p).0,
        hw::AQ_BAD_PARAM,
        "reserved byte"
    );
    // The PD stays while a window uses it.
    let pd = hw::PdParams { pdn }.encode();
    assert_eq!(r.run(hw::CMD_DEALLOC_PD, pd).0, hw::AQ_BAD_PARAM);
    // Freed once; an MR's key, a stale or unknown rkey are not a window's.
    assert_eq!(dealloc(&mut r, k1), hw::AQ_OK);
    assert_eq!(dealloc(&mut r, k1), hw::AQ_BAD_PARAM, "twice");
    assert_eq!(dealloc(&mut r, big), hw::AQ_BAD_PARAM, "an MR's key");
    assert_eq!(
        dealloc(&mut r, k2 ^ 1),
        hw::AQ_BAD_PARAM,
        "another key byte"
    );
    assert_eq!(dealloc(&mut r, k2), hw::AQ_OK);
    assert_eq!(r.nic.mws_in_use(), 0);
    // The slot again: another key byte, so the old rkey stays dead.
    let (_, k3) = alloc(&mut r, pdn, hw::MW_TYPE_1);
    assert_ne!(k3 as u32, k1);
    assert_eq!(dealloc(&mut r, k1), hw::AQ_BAD_PARAM, "a stale rkey");
}

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
/// The windows' MR: the small MR's pages again, at this virtual address.
const MW_VA: u64 = 0x6_0000_0000;
const RW: u32 = hw::ACCESS_REMOTE_READ | hw::ACCESS_REMOTE_WRITE;

fn mw_mr(r: &mut Rig, access: u32) -> u32 {
    let small: Vec<u64> = (0..64).map(|i| SMALL_PHYS + small_page(i) * 4096).collect();
    r.mr(MW_VA, 64 * 4096, 12, &small, access)
}

/// The bus address of `va` in the windows' MR.
fn bus(va: u64) -> u64 {
    let off = va - MW_VA;
    SMALL_PHYS + small_page(off >> 12) * 4096 + off % 4096
}

/// `rkey` with its key byte moved back (the rkey before [`inc`]).
fn dec(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_sub(1) & 0xff)
}

/// `rkey` with its key byte moved on (`ibv_inc_rkey`).
fn inc(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// Posts a `BIND_MW` of `seg` on `which` QP and rings; its completion.
fn bind(r: &mut Rig, which: char, seg: hw::BindSeg) -> hw::Cqe {
    let w = hw::SendWqe {
        opcode: hw::WR_BIND_MW,
        flags: SIGNALED,
        ..Default::default()
    };
    let mut b = vec![0u8; 1 << SQ_WQE_LOG];
    assert!(w.encode_into(&mut b) && seg.encode_into(&mut b));
    let q = if which == 'a' { &mut r.a } else { &mut r.b };
    let at = q.sq + (u64::from(q.sq_pi % (1 << SQ_LOG)) << SQ_WQE_LOG);
    r.mem.dma_write(at, &b).unwrap();
    q.sq_pi = q.sq_pi.wrapping_add(1);
    r.ring_sq(which);
    r.cqe('s')
}

/// A bind of window `mw` to `len` bytes at `MW_VA + off` of MR `mr`, its new rkey
/// `inc(mw)`.
fn seg(mw: u32, mr: u32, off: u64, len: u64, access: u32) -> hw::BindSeg {
    hw::BindSeg {
        mw_rkey: mw,
        new_rkey: inc(mw),
        mr_lkey: mr,
        access,
        addr: MW_VA + off,
        length: len,
    }
}

/// A WRITE of `n` bytes (seeded by `seed`) from `which` QP at `va` through `rkey`; its
/// completion status.
fn write(r: &mut Rig, which: char, va: u64, rkey: u32, n: u32, seed: u64) -> u8 {
    r.fill(BIG_VA, &bytes(seed, n as usize));
    let big = r.big;
    let w = hw::SendWqe {
        opcode: hw::WR_RDMA_WRITE,
        flags: SIGNALED,
        num_sge: 1,
        remote_addr: va,
        rkey,
        ..Default::default()
    };
    r.send(which, w, &[sge(BIG_VA, n, big)], &[]);
    r.cqe('s').status
}

fn landed(r: &Rig, va: u64, n: usize, seed: u64) -> bool {
    let mut b = vec![0u8; n];
    r.mem.dma_read(bus(va), &mut b).unwrap();
    b == bytes(seed, n)
}

/// A rig with the windows' MR (`MW_BIND`, local write and remote read, no remote write:
/// a window gives that) and a window of type `t`, bound by QP A to 8 KiB at 4 KiB into
/// the MR for reads and writes: (rig, MR key, the window's rkey now).
fn bound(t: u8) -> (Rig, u32, u32) {
    let mut r = Rig::new();
    let mr = mw_mr(
        &mut r,
        hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_READ | hw::ACCESS_MW_BIND,
    );
    let (st, k) = {
        let pdn = r.pdn;
        alloc(&mut r, pdn, t)
    };
    assert_eq!(st, hw::AQ_OK);
    let k = k as u32;
    let c = bind(&mut r, 'a', seg(k, mr, 0x1000, 0x2000, RW));
    assert_eq!(
        (c.status, c.opcode),
        (hw::WC_SUCCESS, hw::WC_BIND_MW),
        "bind"
    );
    (r, mr, inc(k))
}

#[test]
fn a_type_2_window_gives_its_range_to_its_qp_until_invalidated() {
    let (mut r, _, k) = bound(hw::MW_TYPE_2);
    // B's WRITE arrives on A, the window's QP: in range, bytes there.
    assert_eq!(
        write(&mut r, 'b', MW_VA + 0x1800, k, 2048, 1),
        hw::WC_SUCCESS
    );
    assert!(landed(&r, MW_VA + 0x1800, 2048, 1));
    // A READ through it too.
    let big = r.big;
    let w = hw::SendWqe {
        opcode: hw::WR_RDMA_READ,
        flags: SIGNALED,
        num_sge: 1,
        remote_addr: MW_VA + 0x1800,
        rkey: k,
        ..Default::default()
    };
    r.send('b', w, &[sge(BIG_VA + 0x10_0000, 2048, big)], &[]);
    assert_eq!(r.cqe('s').status, hw::WC_SUCCESS);
    assert_eq!(r.read(BIG_VA + 0x10_0000, 2048), bytes(1, 2048));
    // LOCAL_INV by A: done, and the window is dead.
    let w = hw::SendWqe {
        opcode: hw::WR_LOCAL_INV,
        flags: SIGNALED,
        imm: k,
        ..Default::default()
    };
    r.send('a', w, &[], &[]);
    let c = r.cqe('s');
    assert_eq!((c.status, c.opcode), (hw::WC_SUCCESS, hw::WC_LOCAL_INV));
    assert_eq!(
        write(&mut r, 'b', MW_VA + 0x1800, k, 64, 2),
        hw::WC_REM_ACCESS_ERR
    );
    assert!(landed(&r, MW_VA + 0x1800, 2048, 1), "nothing written after");
}

#[test]
fn a_window_refuses_what_it_does_not_give() {
    // Each refusal moves both QPs to ERR: a rig each.
    // From the window's rkey: the QP that WRITEs, where, with which rkey, how many bytes.
    type Case = fn(u32) -> (char, u64, u32, u32);
    let cases: [(&str, Case); 4] = [
        ("the rkey before the bind", |k| {
            ('b', MW_VA + 0x1000, dec(k), 64)
        }),
        ("past the range", |k| ('b', MW_VA + 0x2f00, k, 512)),
        ("before the range", |k| ('b', MW_VA + 0xf00, k, 512)),
        ("arriving on another QP than the window's", |k| {
            ('a', MW_VA + 0x1000, k, 64)
        }),
    ];
    for (what, case) in cases {
        let (mut r, _, k) = bound(hw::MW_TYPE_2);
        let (which, va, key, n) = case(k);
        assert_eq!(
            write(&mut r, which, va, key, n, 3),
            hw::WC_REM_ACCESS_ERR,
            "{what}"
        );
    }
    // A window for reads only: a WRITE refused.
    let mut r = Rig::new();
    let mr = mw_mr(&mut r, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    let k = {
        let pdn = r.pdn;
        alloc(&mut r, pdn, hw::MW_TYPE_2)
    }
    .1 as u32;
    let c = bind(&mut r, 'a', seg(k, mr, 0, 0x1000, hw::ACCESS_REMOTE_READ));
    assert_eq!(c.status, hw::WC_SUCCESS);
    assert_eq!(
        write(&mut r, 'b', MW_VA, inc(k), 64, 3),
        hw::WC_REM_ACCESS_ERR,
        "read only"
    );
}

#[test]
fn a_send_with_invalidate_invalidates_at_the_responder() {
    let (mut r, _, k) = bound(hw::MW_TYPE_2);
    let big = r.big;
    r.recv('a', &[sge(BIG_VA + 0x20_0000, 256, big)]);
    r.fill(BIG_VA, &bytes(4, 100));
    let w = hw::SendWqe {
        opcode: hw::WR_SEND_WITH_INV,
        flags: SIGNALED,
        num_sge: 1,
        imm: k,
        ..Default::default()
    };
    r.send('b', w, &[sge(BIG_VA, 100, big)], &[]);
    let c = r.cqe('s');
    assert_eq!(
        (c.status, c.opcode, c.byte_len),
        (hw::WC_SUCCESS, hw::WC_SEND, 100)
    );
    let c = r.cqe('r');
    assert_eq!(
        (c.status, c.opcode, c.byte_len),
        (hw::WC_SUCCESS, hw::WC_RECV, 100)
    );
    assert_eq!(
        (
            c.flags & hw::CQE_FLAG_INV,
            c.flags & hw::CQE_FLAG_IMM,
            c.imm
        ),
        (hw::CQE_FLAG_INV, 0, k)
    );
    assert_eq!(r.read(BIG_VA + 0x20_0000, 100), bytes(4, 100));
    assert_eq!(
        write(&mut r, 'b', MW_VA + 0x1000, k, 64, 5),
        hw::WC_REM_ACCESS_ERR
    );

    // A SEND invalidating what cannot be (a type 1 window): the receive in error.
    let (mut r, _, k) = bound(hw::MW_TYPE_1);
    let big = r.big;
    r.recv('a', &[sge(BIG_VA + 0x20_0000, 256, big)]);
    let w = hw::SendWqe {
        opcode: hw::WR_SEND_WITH_INV,
        flags: SIGNALED,
        num_sge: 1,
        imm: k,
        ..Default::default()
    };
    r.send('b', w, &[sge(BIG_VA, 100, big)], &[]);
    assert_eq!(r.cqe('r').status, hw::WC_REM_INV_REQ_ERR);
    assert_eq!(r.cqe('s').status, hw::WC_REM_INV_REQ_ERR);
}

#[test]
fn a_type_1_window_serves_every_qp_of_its_pd_until_unbound() {
    let (mut r, mr, k) = bound(hw::MW_TYPE_1);
    assert_eq!(write(&mut r, 'b', MW_VA + 0x1000, k, 64, 6), hw::WC_SUCCESS);
    assert_eq!(write(&mut r, 'a', MW_VA + 0x1100, k, 64, 7), hw::WC_SUCCESS);
    assert!(landed(&r, MW_VA + 0x1000, 64, 6) && landed(&r, MW_VA + 0x1100, 64, 7));
    // LOCAL_INV is for type 2: refused, the QP in error.
    // Rebound elsewhere: the old rkey dead, the new range live.
    let c = bind(&mut r, 'a', seg(k, mr, 0x8000, 0x100, RW));
    assert_eq!(c.status, hw::WC_SUCCESS);
    let k2 = inc(k);
    assert_eq!(
        write(&mut r, 'b', MW_VA + 0x8000, k2, 0x100, 8),
        hw::WC_SUCCESS
    );
    assert!(landed(&r, MW_VA + 0x8000, 0x100, 8));
    // Unbound by a bind of length 0 (no MR): the rkey after it dead too.
    let c = bind(&mut r, 'a', seg(k2, 0, 0, 0, 0));
    assert_eq!(c.status, hw::WC_SUCCESS);
    assert_eq!(
        write(&mut r, 'b', MW_VA + 0x8000, inc(k2), 64, 9),
        hw::WC_REM_ACCESS_ERR
    );

    // LOCAL_INV of a type 1 window: refused (LOC_QP_OP_ERR).
    let (mut r, _, k) = bound(hw::MW_TYPE_1);
    let w = hw::SendWqe {
        opcode: hw::WR_LOCAL_INV,
        flags: SIGNALED,
        imm: k,
        ..Default::default()
    };
    r.send('a', w, &[], &[]);
    assert_eq!(r.cqe('s').status, hw::WC_LOC_QP_OP_ERR);
}

#[test]
fn a_window_dies_with_its_mr_and_its_qp() {
    let (mut r, mr, k) = bound(hw::MW_TYPE_1);
    r.ok(hw::CMD_DESTROY_MR, hw::KeyParams { key: mr }.encode());
    assert_eq!(
        write(&mut r, 'b', MW_VA + 0x1000, k, 64, 10),
        hw::WC_REM_ACCESS_ERR
    );
    // Freed by the rkey it was allocated with, after binds changed its key byte.
    let first = dec(k);
    assert_eq!(dealloc(&mut r, first), hw::AQ_OK);
    assert_eq!(r.nic.mws_in_use(), 0);

    // A type 2 window bound to a QP that is destroyed is unbound.
    let (mut r, _, k) = bound(hw::MW_TYPE_2);
    let a = r.a.qpn;
    r.ok(hw::CMD_DESTROY_QP, hw::NumParams { num: a }.encode());
    let first = dec(k);
    // A type 2 window must be free to bind again: B may, now.
    let mr = mw_mr(&mut r, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    let mut s = seg(k, mr, 0, 0x100, RW);
    s.new_rkey = inc(k);
    assert_eq!(bind(&mut r, 'b', s).status, hw::WC_SUCCESS, "free again");
    assert_eq!(dealloc(&mut r, first), hw::AQ_OK);
}

#[test]
fn every_refused_bind_completes_in_mw_bind_err() {
    type Edit = fn(&mut hw::BindSeg, u32);
    let cases: [(&str, u32, u8, Edit); 10] = [
        (
            "an MR without MW_BIND",
            hw::ACCESS_LOCAL_WRITE,
            2,
            |_, _| {},
        ),
        (
            "a write window on an MR without local write",
            hw::ACCESS_MW_BIND,
            2,
            |_, _| {},
        ),
        ("another slot in the new rkey", ALL, 2, |s, _| {
            s.new_rkey ^= 1 << 8
        }),
        ("the window's key byte wrong", ALL, 2, |s, _| {
            s.mw_rkey ^= 0x80
        }),
        ("past the MR", ALL, 2, |s, _| s.length = 64 * 4096 + 1),
        ("before the MR", ALL, 2, |s, _| s.addr = MW_VA - 1),
        ("an access bit windows do not give", ALL, 2, |s, _| {
            s.access |= hw::ACCESS_FLUSH_GLOBAL
        }),
        ("a type 2 window of length 0", ALL, 2, |s, _| s.length = 0),
        ("an MR key that does not exist", ALL, 1, |s, mr| {
            s.mr_lkey = mr + (1 << 8)
        }),
        ("an MR key of a window", ALL, 1, |s, _| {
            s.mr_lkey = s.mw_rkey
        }),
    ];
    for (what, access, t, edit) in cases {
        let mut r = Rig::new();
        let mr = mw_mr(&mut r, access);
        let k = {
            let pdn = r.pdn;
            alloc(&mut r, pdn, t)
        }
        .1 as u32;
        let mut s = seg(k, mr, 0, 0x1000, RW);
        edit(&mut s, mr);
        let c = bind(&mut r, 'a', s);
        assert_eq!(
            (c.status, c.opcode),
            (hw::WC_MW_BIND_ERR, hw::WC_BIND_MW),
            "{what}"
        );
        assert_eq!(r.state(r.a.qpn), hw::QPS_ERR, "{what}");
        // The window did not move: its rkey still the allocated one, unbound (type 2:
        // free), so QP B binds it.
        let good = mw_mr(&mut r, ALL);
        let c = bind(&mut r, 'b', seg(k, good, 0, 0x100, hw::ACCESS_REMOTE_READ));
        assert_eq!(c.status, hw::WC_SUCCESS, "{what}: bound after");
    }
    // A type 2 window bound twice.
    let (mut r, mr, k) = bound(hw::MW_TYPE_2);
    let c = bind(&mut r, 'a', seg(k, mr, 0, 0x100, RW));
    assert_eq!(c.status, hw::WC_MW_BIND_ERR, "bound twice");
}

const ALL: u32 = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND;

/// Drops, duplicates and holds back frames: one in `n` each, from `seed`.
fn lossy(seed: u64, n: u64) -> Fault {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ seed;
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

#[test]
fn windows_between_two_nics_over_a_lossy_wire() {
    for seed in 0..6u64 {
        let mut p = Pair::new(|_| {});
        p.fault = lossy(seed, 5);
        // NIC 2's QP B binds a type 2 window; NIC 1's QP A WRITEs 16 pieces through it,
        // READs one back, then SENDs with invalidate.
        let mr = mw_mr(&mut p.r[1], ALL | hw::ACCESS_REMOTE_READ);
        let pdn = p.r[1].pdn;
        let k = alloc(&mut p.r[1], pdn, hw::MW_TYPE_2).1 as u32;
        let c = bind(&mut p.r[1], 'b', seg(k, mr, 0, 0x8000, RW));
        assert_eq!(c.status, hw::WC_SUCCESS, "seed {seed}");
        let k = inc(k);
        let big = p.r[1].big;
        p.r[1].recv('b', &[sge(BIG_VA, 64, big)]);
        let a = &mut p.r[0];
        let big = a.big;
        a.fill(BIG_VA, &bytes(seed, 0x8000));
        for i in 0..16u64 {
            let w = hw::SendWqe {
                opcode: hw::WR_RDMA_WRITE,
                flags: SIGNALED,
                num_sge: 1,
                remote_addr: MW_VA + i * 0x800,
                rkey: k,
                ..Default::default()
            };
            a.put_send('a', w, &[sge(BIG_VA + i * 0x800, 0x800, big)], &[]);
        }
        let w = hw::SendWqe {
            opcode: hw::WR_RDMA_READ,
            flags: SIGNALED,
            num_sge: 1,
            remote_addr: MW_VA + 0x1000,
            rkey: k,
            ..Default::default()
        };
        a.put_send('a', w, &[sge(BIG_VA + 0x10_0000, 0x3000, big)], &[]);
        let w = hw::SendWqe {
            opcode: hw::WR_SEND_WITH_INV,
            flags: SIGNALED,
            num_sge: 1,
            imm: k,
            ..Default::default()
        };
        a.put_send('a', w, &[sge(BIG_VA, 64, big)], &[]);
        a.ring_sq('a');
        p.settle(400);
        for i in 0..18 {
            let c = p.r[0].cqe('s');
            assert_eq!((c.status, c.wqe_index), (hw::WC_SUCCESS, i), "seed {seed}");
        }
        let c = p.r[1].cqe('r');
        assert_eq!(
            (c.status, c.flags & hw::CQE_FLAG_INV, c.imm),
            (hw::WC_SUCCESS, hw::CQE_FLAG_INV, k)
        );
        assert!(p.r[1].poll('r').is_none(), "seed {seed}: invalidated once");
        let mut b = vec![0u8; 0x8000];
        for (i, chunk) in b.chunks_mut(4096).enumerate() {
            p.r[1]
                .mem
                .dma_read(bus(MW_VA + i as u64 * 4096), chunk)
                .unwrap();
        }
        assert!(
            b == bytes(seed, 0x8000),
            "seed {seed}: the bytes through the window"
        );
        assert_eq!(
            p.r[0].read(BIG_VA + 0x10_0000, 0x3000),
            bytes(seed, 0x8000)[0x1000..0x4000]
        );
        // Invalidated: a WRITE now is refused.
        p.fault = Box::new(|_, _| Act::Pass);
        let w = hw::SendWqe {
            opcode: hw::WR_RDMA_WRITE,
            flags: SIGNALED,
            num_sge: 1,
            remote_addr: MW_VA,
            rkey: k,
            ..Default::default()
        };
        p.r[0].send('a', w, &[sge(BIG_VA, 8, big)], &[]);
        p.settle(10);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_REM_ACCESS_ERR, "seed {seed}");
    }
}

#[test]
fn windows_are_bounded_by_max_mw() {
    let mut r = Rig::bare_with(1, |c| c.attrs.max_mw = 4);
    let pdn = r.pdn;
    let keys: Vec<u32> = (0..4)
        .map(|i| {
            let (st, k) = alloc(&mut r, pdn, 1 + i % 2);
            assert_eq!(st, hw::AQ_OK, "window {i}");
            k as u32
        })
        .collect();
    assert_eq!(alloc(&mut r, pdn, 1).0, hw::AQ_NO_RESOURCES, "the fifth");
    assert_eq!(dealloc(&mut r, keys[2]), hw::AQ_OK);
    assert_eq!(alloc(&mut r, pdn, 2).0, hw::AQ_OK, "a slot again");
    assert_eq!(r.nic.mws_in_use(), 4);
}

#[test]
fn a_local_operation_waits_for_the_wqes_before_it() {
    for looped in [false, true] {
        let mut p = if looped {
            Pair::looped(|_| {})
        } else {
            Pair::new(|_| {})
        };
        let n = p.rx();
        let mr = mw_mr(&mut p.r[n], ALL);
        let pdn = p.r[n].pdn;
        let k = alloc(&mut p.r[n], pdn, hw::MW_TYPE_2).1 as u32;
        assert_eq!(
            bind(&mut p.r[n], 'b', seg(k, mr, 0, 0x100, RW)).status,
            hw::WC_SUCCESS
        );
        let k = inc(k);
        // B: a WRITE of 1 MiB to A's side, LOCAL_INV, another WRITE: in order, each once.
        let (big, peer_big) = (p.r[n].big, p.r[0].big);
        let b = &mut p.r[n];
        let write = hw::SendWqe {
            opcode: hw::WR_RDMA_WRITE,
            flags: SIGNALED,
            num_sge: 1,
            remote_addr: BIG_VA + 0x40_0000,
            rkey: peer_big,
            ..Default::default()
        };
        b.put_send('b', write, &[sge(BIG_VA, 1 << 20, big)], &[]);
        let inv = hw::SendWqe {
            opcode: hw::WR_LOCAL_INV,
            flags: SIGNALED,
            imm: k,
            ..Default::default()
        };
        b.put_send('b', inv, &[], &[]);
        b.put_send('b', write, &[sge(BIG_VA, 64, big)], &[]);
        b.ring_sq('b');
        p.settle(50);
        let got: Vec<(u8, u8, u16)> = std::iter::from_fn(|| p.r[n].poll('s'))
            .map(|c| (c.status, c.opcode, c.wqe_index))
            .collect();
        let (ok, w, l) = (hw::WC_SUCCESS, hw::WC_RDMA_WRITE, hw::WC_LOCAL_INV);
        assert_eq!(got, [(ok, w, 1), (ok, l, 2), (ok, w, 3)], "looped {looped}");
    }
}
