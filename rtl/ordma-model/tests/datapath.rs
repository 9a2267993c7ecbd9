//! The RC engine's data path, loopback on one NIC, against anonymous guest memory: two QPs
//! connected to each other (the AV's `dlid` is the port's own LID), everything built
//! through the admin queue; bytes, CQEs, PSNs, errors, flushes, RNR and CQ events checked.

mod common;

use std::time::{Duration, Instant};

use common::rig::*;
use ordma_hw as hw;
use ordma_model::mem::Dma;

const SIZES: [u32; 7] = [0, 1, 4095, 4096, 4097, 65536, 2 << 20];
const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;

#[test]
fn send_recv_every_size_multi_sge_both_sides() {
    let mut rig = Rig::new();
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    for (n, &size) in SIZES.iter().enumerate() {
        let data = bytes(n as u64, size as usize);
        let src = BIG_VA + 0x1234;
        let dst = BIG_VA + (8 << 20) + 0x777;
        rig.fill(src, &data);
        rig.fill(dst, &vec![0xee; size as usize + 16]);
        let big = rig.big;
        let ri = rig.recv('b', &split(dst, size + 16, 3, big));
        let imm = if n % 2 == 1 {
            hw::WR_SEND_IMM
        } else {
            hw::WR_SEND
        };
        let mut w = wqe(imm, SIGNALED, 2);
        w.imm = 0x1122_3344 + n as u32;
        let si = rig.send('a', w, &split(src, size, 2, big), &[]);
        let c = rig.cqe('s');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.qpn, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_SEND, si, a, size),
            "size {size}"
        );
        let c = rig.cqe('r');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.qpn, c.byte_len, c.src_qp),
            (hw::WC_SUCCESS, hw::WC_RECV, ri, b, size, a),
            "size {size}"
        );
        if imm == hw::WR_SEND_IMM {
            assert_eq!(c.flags, hw::CQE_FLAG_RECV | hw::CQE_FLAG_IMM);
            assert_eq!(c.imm, 0x1122_3344 + n as u32);
        } else {
            assert_eq!(c.flags, hw::CQE_FLAG_RECV);
        }
        let got = rig.read(dst, size as usize + 16);
        assert!(got[..size as usize] == data[..], "size {size}: bytes");
        assert_eq!(
            got[size as usize..],
            [0xee; 16],
            "size {size}: nothing beyond"
        );
        assert!(rig.poll('s').is_none() && rig.poll('r').is_none());
    }
    assert_eq!(rig.state(a), hw::QPS_RTS);
    assert_eq!(rig.state(b), hw::QPS_RTS);
}

#[test]
fn write_write_imm_and_read_every_size() {
    let mut rig = Rig::new();
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    let big = rig.big;
    for (n, &size) in SIZES.iter().enumerate() {
        let data = bytes(100 + n as u64, size as usize);
        let src = BIG_VA + 0x10;
        let dst = BIG_VA + (6 << 20) + 0x3;
        let back = BIG_VA + (12 << 20) + 0x99;
        rig.fill(src, &data);
        rig.fill(dst, &vec![0; size as usize + 8]);
        // WRITE.
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 3);
        w.remote_addr = dst;
        w.rkey = big;
        let i = rig.send('a', w, &split(src, size, 3, big), &[]);
        let c = rig.cqe('s');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RDMA_WRITE, i, size)
        );
        assert!(rig.read(dst, size as usize) == data, "WRITE {size}");
        assert!(rig.poll('r').is_none(), "a WRITE consumes no receive");
        // WRITE with immediate: the same bytes again plus a receive completion.
        rig.fill(dst, &vec![0; size as usize]);
        let ri = rig.recv('b', &[]);
        let mut w = wqe(hw::WR_RDMA_WRITE_IMM, SIGNALED | hw::WQE_FLAG_SOLICITED, 3);
        w.remote_addr = dst;
        w.rkey = big;
        w.imm = 0xdead_beef;
        rig.send('a', w, &split(src, size, 3, big), &[]);
        assert_eq!(rig.cqe('s').status, hw::WC_SUCCESS);
        let c = rig.cqe('r');
        assert_eq!(
            (
                c.status,
                c.opcode,
                c.wqe_index,
                c.byte_len,
                c.imm,
                c.flags,
                c.src_qp,
                c.qpn
            ),
            (
                hw::WC_SUCCESS,
                hw::WC_RECV_RDMA_IMM,
                ri,
                size,
                0xdead_beef,
                hw::CQE_FLAG_RECV | hw::CQE_FLAG_IMM | hw::CQE_FLAG_SOLICITED,
                a,
                b
            )
        );
        assert!(rig.read(dst, size as usize) == data, "WRITE_IMM {size}");
        // READ it back into a third buffer.
        rig.fill(back, &vec![0; size as usize]);
        let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 2);
        w.remote_addr = dst;
        w.rkey = big;
        let i = rig.send('a', w, &split(back, size, 2, big), &[]);
        let c = rig.cqe('s');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RDMA_READ, i, size)
        );
        assert!(rig.read(back, size as usize) == data, "READ {size}");
    }
}

#[test]
fn inline_sends_and_psns_advance_per_packet() {
    let mut rig = Rig::with(|a| a.path_mtu = 3);
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    let small = rig.small;
    // Inline: 100 bytes in the WQE.
    let data = bytes(7, 100);
    let ri = rig.recv('b', &[sge(SMALL_VA + 4000, 200, small)]);
    let mut w = wqe(hw::WR_SEND, SIGNALED, 0);
    w.flags |= hw::WQE_FLAG_INLINE;
    w.inline_len = 100;
    rig.send('a', w, &[], &data);
    assert_eq!(rig.cqe('s').status, hw::WC_SUCCESS);
    let c = rig.cqe('r');
    assert_eq!((c.wqe_index, c.byte_len), (ri, 100));
    assert_eq!(rig.read(SMALL_VA + 4000, 100), data);
    assert_eq!(rig.query(a).sq_psn, 101);
    assert_eq!(rig.query(b).rq_psn, 101);
    // MTU 1024: 5000 bytes are 5 packets; an unsignaled WRITE writes no CQE.
    let mut w = wqe(hw::WR_RDMA_WRITE, 0, 1);
    w.remote_addr = SMALL_VA + 0x8000;
    w.rkey = small;
    rig.send('a', w, &[sge(SMALL_VA, 5000, small)], &[]);
    assert!(rig.poll('s').is_none());
    assert_eq!(rig.query(a).sq_psn, 106);
    assert_eq!(rig.query(b).rq_psn, 106);
    assert!(rig.read(SMALL_VA + 0x8000, 5000) == rig.read(SMALL_VA, 5000));
    // A READ of 3000 bytes takes 3 PSNs (its responses); zero bytes one.
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
    w.remote_addr = SMALL_VA;
    w.rkey = small;
    rig.send('a', w, &[sge(SMALL_VA + 0x2_0000, 3000, small)], &[]);
    let c = rig.cqe('s');
    assert_eq!(
        (c.status, c.wqe_index),
        (hw::WC_SUCCESS, 2),
        "unsignaled WQE 1 done before"
    );
    assert_eq!(rig.query(a).sq_psn, 109);
    let w = wqe(hw::WR_SEND, SIGNALED, 0);
    rig.recv('b', &[]);
    rig.send('a', w, &[], &[]);
    assert_eq!(rig.cqe('s').byte_len, 0);
    assert_eq!(rig.cqe('r').byte_len, 0);
    assert_eq!(rig.query(a).sq_psn, 110);
    assert_eq!(rig.query(b).rq_psn, 110);
}

#[test]
fn cqe_phase_flips_across_a_wrap_and_the_first_request_raises_comm_est() {
    let mut rig = Rig::new();
    let small = rig.small;
    for i in 0..150u32 {
        rig.recv('b', &[sge(SMALL_VA, 4, small)]);
        let mut w = wqe(hw::WR_SEND, SIGNALED, 0);
        w.flags |= hw::WQE_FLAG_INLINE;
        w.inline_len = 4;
        rig.send('a', w, &[], &i.to_le_bytes());
        let s = rig.cqe('s');
        let r = rig.cqe('r');
        assert_eq!(u32::from(s.wqe_index), i);
        assert_eq!(u32::from(r.wqe_index), i);
        assert_eq!(rig.read(SMALL_VA, 4), i.to_le_bytes());
    }
    // Slot 0 on the third pass has phase 1 again; one past it is stale.
    assert!(rig.poll('s').is_none());
    assert_eq!(rig.nic.status() & hw::STATUS_FATAL, 0);
}

#[test]
fn comm_est_on_the_first_request_in_rtr() {
    let mut rig = Rig::new();
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    // Take B back to RTR: reset it and connect up to RTR only.
    assert_eq!(
        rig.modify(b, hw::QP_ATTR_STATE, &hw::QpAttr::default()),
        hw::AQ_OK
    );
    rig.b.rq_pi = 0;
    let mut at = hw::QpAttr {
        qp_state: hw::QPS_INIT,
        port_num: 1,
        qp_access_flags: hw::ACCESS_REMOTE_WRITE,
        ..Default::default()
    };
    let m =
        hw::QP_ATTR_STATE | hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_ACCESS_FLAGS;
    assert_eq!(rig.modify(b, m, &at), hw::AQ_OK);
    at.qp_state = hw::QPS_RTR;
    at.path_mtu = hw::MTU_4096;
    at.dest_qp_num = a;
    at.rq_psn = 100;
    at.ah = hw::QpAh {
        dlid: 1,
        port_num: 1,
        ..Default::default()
    };
    let m = hw::QP_ATTR_STATE
        | hw::QP_ATTR_AV
        | hw::QP_ATTR_PATH_MTU
        | hw::QP_ATTR_DEST_QPN
        | hw::QP_ATTR_RQ_PSN
        | hw::QP_ATTR_MAX_DEST_RD_ATOMIC
        | hw::QP_ATTR_MIN_RNR_TIMER;
    assert_eq!(rig.modify(b, m, &at), hw::AQ_OK);
    rig.events();
    let small = rig.small;
    for _ in 0..2 {
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        w.remote_addr = SMALL_VA + 0x100;
        w.rkey = small;
        rig.send('a', w, &[sge(SMALL_VA, 16, small)], &[]);
        assert_eq!(rig.cqe('s').status, hw::WC_SUCCESS);
    }
    assert_eq!(rig.events(), [(hw::EVENT_QP_COMM_EST, b)], "once");
}

/// The QP `qpn` is in ERR.
fn in_err(rig: &mut Rig, qpn: u32) {
    assert_eq!(rig.state(qpn), hw::QPS_ERR);
}

#[test]
fn malformed_wqes_are_loc_qp_op_err_and_flush_the_rest_in_order() {
    let cases: Vec<(&str, hw::SendWqe)> = vec![
        ("opcode", wqe(10, SIGNALED, 0)),
        ("flag", wqe(hw::WR_SEND, 0x10, 0)),
        ("num_sge", wqe(hw::WR_SEND, 0, 5)),
        (
            "inline too long",
            hw::SendWqe {
                flags: hw::WQE_FLAG_INLINE,
                inline_len: 129,
                ..wqe(hw::WR_SEND, 0, 0)
            },
        ),
        (
            "inline READ",
            hw::SendWqe {
                flags: hw::WQE_FLAG_INLINE,
                inline_len: 4,
                ..wqe(hw::WR_RDMA_READ, 0, 0)
            },
        ),
        (
            "inline_len without INLINE",
            hw::SendWqe {
                inline_len: 4,
                ..wqe(hw::WR_SEND, 0, 0)
            },
        ),
    ];
    for (name, w) in cases {
        let mut rig = Rig::new();
        let a = rig.a.qpn;
        let bad = rig.put_send('a', w, &[], &[]);
        let next = rig.put_send('a', wqe(hw::WR_SEND, 0, 0), &[], &[]);
        let last = rig.put_send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
        rig.ring_sq('a');
        let c = rig.cqe('s');
        assert_eq!(
            (c.status, c.wqe_index, c.qpn),
            (hw::WC_LOC_QP_OP_ERR, bad, a),
            "{name}"
        );
        for i in [next, last] {
            let c = rig.cqe('s');
            assert_eq!((c.status, c.wqe_index), (hw::WC_WR_FLUSH_ERR, i), "{name}");
        }
        in_err(&mut rig, a);
        // Later WQEs flush at once, receives too.
        let i = rig.send('a', wqe(hw::WR_SEND, 0, 0), &[], &[]);
        assert_eq!(rig.cqe('s').status, hw::WC_WR_FLUSH_ERR);
        let _ = i;
        let r = rig.recv('a', &[]);
        let c = rig.cqe('r');
        assert_eq!(
            (c.status, c.wqe_index, c.flags),
            (hw::WC_WR_FLUSH_ERR, r, hw::CQE_FLAG_RECV)
        );
    }
    // A reserved byte.
    let mut rig = Rig::new();
    let i = rig.put_send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    rig.mem.dma_write(rig.a.sq + 3, &[1]).unwrap();
    rig.ring_sq('a');
    assert_eq!((rig.cqe('s').status, i), (hw::WC_LOC_QP_OP_ERR, 0));
}

#[test]
fn bad_lkeys_ranges_and_access_are_loc_prot_err() {
    let cases: Vec<(&str, u8, hw::Sge)> = vec![
        ("unknown lkey", hw::WR_SEND, sge(SMALL_VA, 4, 0xff_ffff)),
        (
            "beyond the MR",
            hw::WR_SEND,
            sge(SMALL_VA + 64 * 4096 - 2, 4, 0),
        ),
        ("before the MR", hw::WR_SEND, sge(SMALL_VA - 1, 4, 0)),
        (
            "READ into a MR without LOCAL_WRITE",
            hw::WR_RDMA_READ,
            sge(0, 4, 1),
        ),
    ];
    for (name, op, mut s) in cases {
        let mut rig = Rig::new();
        if s.lkey == 0 {
            s.lkey = rig.small;
        }
        if s.lkey == 1 {
            // An MR without LOCAL_WRITE.
            let pages: Vec<u64> = (0..1).map(|i| SMALL_PHYS + i * 4096).collect();
            s.lkey = rig.mr(0x9_0000_0000, 4096, 12, &pages, 0);
            s.addr = 0x9_0000_0000;
        }
        let mut w = wqe(op, 0, 1);
        w.remote_addr = SMALL_VA;
        w.rkey = rig.small;
        rig.recv('b', &[sge(SMALL_VA, 64, rig.small)]);
        let i = rig.send('a', w, &[s], &[]);
        let c = rig.cqe('s');
        assert_eq!((c.status, c.wqe_index), (hw::WC_LOC_PROT_ERR, i), "{name}");
        let a = rig.a.qpn;
        in_err(&mut rig, a);
        let b = rig.b.qpn;
        assert_eq!(
            rig.state(b),
            hw::QPS_RTS,
            "{name}: the responder saw nothing"
        );
        assert!(rig.poll('r').is_none(), "{name}");
    }
}

#[test]
fn a_receive_too_small_is_loc_len_err_there_and_rem_inv_req_err_here() {
    let mut rig = Rig::new();
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    let small = rig.small;
    let r = rig.recv('b', &[sge(SMALL_VA + 0x1000, 100, small)]);
    let r2 = rig.recv('b', &[sge(SMALL_VA + 0x1000, 100, small)]);
    let i = rig.send(
        'a',
        wqe(hw::WR_SEND, 0, 1),
        &[sge(SMALL_VA, 101, small)],
        &[],
    );
    let c = rig.cqe('r');
    assert_eq!((c.status, c.wqe_index, c.qpn), (hw::WC_LOC_LEN_ERR, r, b));
    let c = rig.cqe('r');
    assert_eq!(
        (c.status, c.wqe_index),
        (hw::WC_WR_FLUSH_ERR, r2),
        "the responder flushes"
    );
    let c = rig.cqe('s');
    assert_eq!(
        (c.status, c.wqe_index, c.qpn),
        (hw::WC_REM_INV_REQ_ERR, i, a)
    );
    in_err(&mut rig, a);
    in_err(&mut rig, b);
}

#[test]
fn remote_access_errors_are_rem_access_err_and_qp_access_err() {
    // (name, opcode, rkey selector, remote address, QP access flags)
    let cases: Vec<(&str, u8, u8, u64, u32)> = vec![
        ("unknown rkey", hw::WR_RDMA_WRITE, 0, SMALL_VA, 6),
        (
            "beyond the MR",
            hw::WR_RDMA_WRITE,
            1,
            SMALL_VA + 64 * 4096 - 8,
            6,
        ),
        ("MR without REMOTE_WRITE", hw::WR_RDMA_WRITE, 2, RO_VA, 6),
        ("MR without REMOTE_READ", hw::WR_RDMA_READ, 2, RO_VA, 6),
        (
            "QP without REMOTE_WRITE",
            hw::WR_RDMA_WRITE,
            1,
            SMALL_VA,
            hw::ACCESS_REMOTE_READ,
        ),
        (
            "QP without REMOTE_READ",
            hw::WR_RDMA_READ,
            1,
            SMALL_VA,
            hw::ACCESS_REMOTE_WRITE,
        ),
        (
            "WRITE_IMM beyond the MR",
            hw::WR_RDMA_WRITE_IMM,
            1,
            SMALL_VA + 64 * 4096,
            6,
        ),
    ];
    for (name, op, key, addr, access) in cases {
        let mut rig = Rig::with(|a| a.qp_access_flags = access);
        let (a, b) = (rig.a.qpn, rig.b.qpn);
        rig.events();
        let small = rig.small;
        let before = rig.read(SMALL_VA, 64);
        rig.recv('b', &[]);
        let mut w = wqe(op, 0, 1);
        w.remote_addr = addr;
        w.rkey = [0xab_cdef, small, rig.ro][usize::from(key)];
        let i = rig.send('a', w, &[sge(SMALL_VA + 0x1_0000, 16, small)], &[]);
        let c = rig.cqe('s');
        assert_eq!(
            (c.status, c.wqe_index),
            (hw::WC_REM_ACCESS_ERR, i),
            "{name}"
        );
        in_err(&mut rig, a);
        in_err(&mut rig, b);
        assert_eq!(rig.events(), [(hw::EVENT_QP_ACCESS_ERR, b)], "{name}");
        assert_eq!(
            rig.cqe('r').status,
            hw::WC_WR_FLUSH_ERR,
            "{name}: its receive flushed"
        );
        assert_eq!(rig.read(SMALL_VA, 64), before, "{name}: nothing written");
    }
}

/// Fires the NIC's timers (as if 10 s had passed each time) while some wait, at most 100
/// times; how many times.
fn timers(rig: &mut Rig) -> u32 {
    let mut n = 0;
    while rig.nic.timers_pending() && n < 100 {
        let later = Instant::now() + Duration::from_secs(10);
        rig.nic.tick(later, &rig.mem, &rig.irq);
        n += 1;
    }
    n
}

#[test]
fn no_route_and_a_dead_peer_are_retry_exc_err() {
    let mut rig = Rig::with(|a| a.ah.dlid = 7);
    let i = rig.send('a', wqe(hw::WR_SEND, 0, 0), &[], &[]);
    let c = rig.cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_RETRY_EXC_ERR, i));
    let a = rig.a.qpn;
    in_err(&mut rig, a);
    // The peer in ERR drops the request.
    let mut rig = Rig::new();
    let b = rig.b.qpn;
    let e = hw::QpAttr {
        qp_state: hw::QPS_ERR,
        ..Default::default()
    };
    assert_eq!(rig.modify(b, hw::QP_ATTR_STATE, &e), hw::AQ_OK);
    rig.send('a', wqe(hw::WR_SEND, 0, 0), &[], &[]);
    assert!(rig.poll('s').is_none(), "loopback retries as the wire does");
    let ticks = timers(&mut rig);
    assert_eq!(ticks, 8, "retry_cnt 7: the first send and seven more");
    assert_eq!(rig.cqe('s').status, hw::WC_RETRY_EXC_ERR);
    // PSNs that do not match (A sends from 999, B expects 100): a PSN sequence NAK, then
    // silence; retrying cannot heal it.
    let mut rig = Rig::new();
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    assert_eq!(
        rig.modify(a, hw::QP_ATTR_STATE, &hw::QpAttr::default()),
        hw::AQ_OK
    );
    rig.connect(a, b, 999, 500, |_| {});
    rig.recv('b', &[]);
    rig.send('a', wqe(hw::WR_SEND, 0, 0), &[], &[]);
    timers(&mut rig);
    assert_eq!(rig.cqe('s').status, hw::WC_RETRY_EXC_ERR);
    assert!(rig.poll('r').is_none(), "B consumed nothing");
    assert_eq!(rig.query(b).rq_psn, 100);
    assert_eq!(rig.state(b), hw::QPS_RTS);
}

#[test]
fn modify_to_err_flushes_posted_receives_and_sends_in_order() {
    let mut rig = Rig::new();
    let b = rig.b.qpn;
    let small = rig.small;
    let r: Vec<u16> = (0..3)
        .map(|_| rig.recv('b', &[sge(SMALL_VA, 8, small)]))
        .collect();
    assert!(rig.poll('r').is_none());
    let e = hw::QpAttr {
        qp_state: hw::QPS_ERR,
        ..Default::default()
    };
    assert_eq!(rig.modify(b, hw::QP_ATTR_STATE, &e), hw::AQ_OK);
    for i in r {
        let c = rig.cqe('r');
        assert_eq!((c.status, c.wqe_index, c.qpn), (hw::WC_WR_FLUSH_ERR, i, b));
    }
    // SQ doorbells in ERR are taken and flushed.
    let i = rig.send('b', wqe(hw::WR_SEND, 0, 0), &[], &[]);
    let c = rig.cqe('s');
    assert_eq!((c.status, c.wqe_index, c.qpn), (hw::WC_WR_FLUSH_ERR, i, b));
}

#[test]
fn rnr_retries_on_the_timer_then_rnr_retry_exc_err() {
    let mut rig = Rig::with(|a| a.rnr_retry = 2);
    let a = rig.a.qpn;
    let i = rig.send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    assert!(rig.poll('s').is_none(), "waiting");
    assert!(rig.nic.timers_pending());
    // Not due yet: nothing.
    rig.nic
        .tick(Instant::now() - Duration::from_secs(1), &rig.mem, &rig.irq);
    assert!(rig.poll('s').is_none());
    // rnr_retry 2: the first send and two retries, each answered RNR NAK.
    rig.nic
        .tick(Instant::now() + Duration::from_secs(1), &rig.mem, &rig.irq);
    assert!(rig.poll('s').is_none(), "retried, RNR again");
    rig.nic
        .tick(Instant::now() + Duration::from_secs(1), &rig.mem, &rig.irq);
    let c = rig.cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_RNR_RETRY_EXC_ERR, i));
    in_err(&mut rig, a);
    assert!(!rig.nic.timers_pending());
    // As over the wire, a WQE takes its PSNs when it starts.
    assert_eq!(rig.query(a).sq_psn, 101, "the SEND's PSN taken");
}

#[test]
fn rnr_succeeds_once_a_receive_is_posted() {
    let mut rig = Rig::new();
    let small = rig.small;
    let data = bytes(9, 10_000);
    rig.fill(SMALL_VA, &data);
    let i = rig.send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(SMALL_VA, 10_000, small)],
        &[],
    );
    let j = rig.send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    assert!(rig.poll('s').is_none());
    // Rings on and on (rnr_retry 7): still waiting.
    for _ in 0..20 {
        rig.nic
            .tick(Instant::now() + Duration::from_secs(1), &rig.mem, &rig.irq);
    }
    assert!(rig.poll('s').is_none());
    rig.recv('b', &[sge(SMALL_VA + 0x10000, 10_000, small)]);
    let c = rig.cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_SUCCESS, i));
    assert_eq!(rig.cqe('r').byte_len, 10_000);
    assert!(
        rig.read(SMALL_VA + 0x10000, 10_000) == data,
        "bytes after the RNR retry"
    );
    // The second waits for its own receive.
    assert!(rig.poll('s').is_none());
    rig.recv('b', &[]);
    assert_eq!(rig.cqe('s').wqe_index, j);
    assert!(!rig.nic.timers_pending());
    // WRITE with immediate, multi-packet, RNR on its last packet: resumes there.
    let mut rig = Rig::new();
    let small = rig.small;
    rig.fill(SMALL_VA, &data);
    let mut w = wqe(hw::WR_RDMA_WRITE_IMM, SIGNALED, 1);
    w.remote_addr = SMALL_VA + 0x20000;
    w.rkey = small;
    w.imm = 5;
    rig.send('a', w, &[sge(SMALL_VA, 10_000, small)], &[]);
    assert!(rig.poll('s').is_none());
    rig.recv('b', &[]);
    assert_eq!(rig.cqe('s').status, hw::WC_SUCCESS);
    let c = rig.cqe('r');
    assert_eq!(
        (c.opcode, c.byte_len, c.imm),
        (hw::WC_RECV_RDMA_IMM, 10_000, 5)
    );
    assert!(
        rig.read(SMALL_VA + 0x20000, 10_000) == data,
        "WRITE_IMM bytes after the RNR retry"
    );
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    assert_eq!(rig.query(a).sq_psn, 103);
    assert_eq!(rig.query(b).rq_psn, 103);
}

#[test]
fn armed_cqs_raise_events_solicited_only_for_solicited() {
    let mut rig = Rig::new();
    let small = rig.small;
    rig.events();
    let (scq, rcq) = (rig.scq.cqn, rig.rcq.cqn);
    rig.db(hw::DB_CQ_ARM, hw::db_value(scq, 0));
    rig.db(hw::DB_CQ_ARM_SOLICITED, hw::db_value(rcq, 0));
    rig.recv('b', &[sge(SMALL_VA, 8, small)]);
    rig.send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    assert_eq!(
        rig.events(),
        [(hw::EVENT_CQ_COMPLETION, scq)],
        "the unsolicited receive does not fire"
    );
    rig.cqe('s');
    rig.cqe('r');
    rig.recv('b', &[sge(SMALL_VA, 8, small)]);
    rig.send('a', wqe(hw::WR_SEND, hw::WQE_FLAG_SOLICITED, 0), &[], &[]);
    assert_eq!(rig.events(), [(hw::EVENT_CQ_COMPLETION, rcq)]);
    let c = rig.cqe('r');
    assert_eq!(c.flags, hw::CQE_FLAG_RECV | hw::CQE_FLAG_SOLICITED);
    // An error completion fires a solicited arm too.
    rig.db(hw::DB_CQ_ARM_SOLICITED, hw::db_value(rcq, 2));
    rig.recv('b', &[sge(SMALL_VA, 1, small)]);
    rig.send('a', wqe(hw::WR_SEND, 0, 1), &[sge(SMALL_VA, 2, small)], &[]);
    let ev = rig.events();
    assert!(ev.contains(&(hw::EVENT_CQ_COMPLETION, rcq)), "{ev:?}");
    assert_eq!(rig.cqe('r').status, hw::WC_LOC_LEN_ERR);
}

#[test]
fn one_doorbell_moves_a_bounded_amount_and_the_timer_goes_on() {
    let mut rig = Rig::new();
    let big = rig.big;
    // 40 WRITEs of 2 MiB: 80 MiB, beyond one doorbell's 64 MiB.
    for _ in 0..40 {
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        w.remote_addr = BIG_VA + (8 << 20);
        w.rkey = big;
        rig.put_send('a', w, &[sge(BIG_VA, 2 << 20, big)], &[]);
    }
    rig.ring_sq('a');
    let first: Vec<u16> = std::iter::from_fn(|| rig.poll('s'))
        .map(|c| c.wqe_index)
        .collect();
    let n = first.len() as u16;
    assert_eq!(first, (0..n).collect::<Vec<_>>(), "in order");
    assert!(
        (24..=32).contains(&n),
        "about the budget ({n}), then a pause"
    );
    assert!(rig.nic.timers_pending());
    rig.nic.tick(Instant::now(), &rig.mem, &rig.irq);
    let rest: Vec<u16> = std::iter::from_fn(|| rig.poll('s'))
        .map(|c| c.wqe_index)
        .collect();
    assert_eq!(rest, (n..40).collect::<Vec<_>>());
    assert!(!rig.nic.timers_pending());
}

#[test]
fn a_qp_connected_to_itself_sends_and_flushes_once() {
    let mut rig = Rig::new();
    let a = rig.a.qpn;
    // qp_state 0: RESET.
    let reset = hw::QpAttr::default();
    assert_eq!(rig.modify(a, hw::QP_ATTR_STATE, &reset), hw::AQ_OK);
    rig.a.sq_pi = 0;
    rig.a.rq_pi = 0;
    rig.connect(a, a, 7, 7, |_| {});
    let small = rig.small;
    rig.fill(SMALL_VA, b"loop");
    rig.recv('a', &[sge(SMALL_VA + 100, 4, small)]);
    rig.send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(SMALL_VA, 4, small)],
        &[],
    );
    assert_eq!(rig.cqe('s').status, hw::WC_SUCCESS);
    let c = rig.cqe('r');
    assert_eq!((c.src_qp, c.qpn, c.byte_len), (a, a, 4));
    assert_eq!(rig.read(SMALL_VA + 100, 4), b"loop");
    // Too long for its own receive: the responder side (itself) goes to ERR; every WQE
    // completes exactly once.
    rig.recv('a', &[sge(SMALL_VA + 100, 2, small)]);
    rig.put_send('a', wqe(hw::WR_SEND, 0, 1), &[sge(SMALL_VA, 4, small)], &[]);
    rig.put_send('a', wqe(hw::WR_SEND, 0, 0), &[], &[]);
    rig.ring_sq('a');
    let sends: Vec<(u8, u16)> = std::iter::from_fn(|| rig.poll('s'))
        .map(|c| (c.status, c.wqe_index))
        .collect();
    assert_eq!(sends, [(hw::WC_WR_FLUSH_ERR, 1), (hw::WC_WR_FLUSH_ERR, 2)]);
    let c = rig.cqe('r');
    assert_eq!((c.status, c.wqe_index), (hw::WC_LOC_LEN_ERR, 1));
    assert!(rig.poll('r').is_none());
    in_err(&mut rig, a);
}

#[test]
fn the_device_timer_thread_runs_rnr_retries() {
    use ordma_model::device::Device;
    use ordma_model::engine::{Nic, NicConfig};
    use ordma_model::mem::GuestRam;
    use std::sync::Arc;

    let mut rig = Rig::with(|a| {
        a.rnr_retry = 3;
        a.min_rnr_timer = 1;
    });
    rig.send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    assert!(rig.nic.timers_pending());
    let nic = std::mem::replace(&mut rig.nic, Nic::new(NicConfig::with_guid(0)));
    let dev = Arc::new(Device::new(nic, GuestRam::new(rig.mem.clone())));
    let thread = Device::spawn_timers(&dev).unwrap();
    let start = Instant::now();
    // A generous deadline: the timer thread may be starved on a loaded machine.
    while dev.lock().nic.timers_pending() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    rig.nic = std::mem::replace(&mut *dev.lock().nic, Nic::new(NicConfig::with_guid(0)));
    drop(dev);
    thread.join().unwrap();
    let c = rig.cqe('s');
    assert_eq!(
        c.status,
        hw::WC_RNR_RETRY_EXC_ERR,
        "the thread retried three times"
    );
}

#[test]
fn refused_wqes_are_counted_and_a_refused_receive_is_rem_op_err() {
    use ordma_model::engine::counters::Anomaly;
    let mut rig = Rig::new();
    rig.send('a', wqe(10, 0, 0), &[], &[]);
    assert_eq!(rig.cqe('s').status, hw::WC_LOC_QP_OP_ERR);
    assert_eq!(rig.nic.counters().get(Anomaly::BadWqe), 1);
    let mut rig = Rig::new();
    let small = rig.small;
    let r = rig.recv('b', &[sge(SMALL_VA, 8, 0xdead)]);
    let i = rig.send('a', wqe(hw::WR_SEND, 0, 1), &[sge(SMALL_VA, 4, small)], &[]);
    let c = rig.cqe('r');
    assert_eq!((c.status, c.wqe_index), (hw::WC_LOC_PROT_ERR, r));
    let c = rig.cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_REM_OP_ERR, i));
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    in_err(&mut rig, a);
    in_err(&mut rig, b);
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" bad_wqes=1 "), "{s}");
}

/// `CMD_RESIZE_CQ` for the rig's send CQ: a new ring of `2^log` CQEs at `ring`.
fn resize_params(rig: &mut Rig, ring: u64, log: u8) -> hw::ResizeCqParams {
    let pages: Vec<u64> = (0..(32u64 << log).div_ceil(4096))
        .map(|i| ring + i * 4096)
        .collect();
    hw::ResizeCqParams {
        cqn: rig.scq.cqn,
        log_depth: log,
        ring: rig.list(12, &pages),
    }
}

/// What a consumer does across a resize: the CQEs it has not polled, from its index up to
/// the NIC's producer index at the move, copied into the new ring with the new ring's
/// phase; then it polls there.
fn move_unpolled(rig: &mut Rig, new_ring: u64, log: u8, pi: u32) {
    let (old, old_log, ci) = (rig.scq.ring, rig.scq.log, rig.scq.ci);
    for i in ci..pi {
        let mut b = [0u8; 32];
        let from = old + u64::from(i % (1 << old_log)) * 32;
        rig.mem.dma_read(from, &mut b).unwrap();
        b[hw::CQE_OWNER_OFFSET] = hw::cqe_phase(i, log);
        let to = new_ring + u64::from(i % (1 << log)) * 32;
        rig.mem.dma_write(to, &b).unwrap();
    }
    (rig.scq.ring, rig.scq.log) = (new_ring, log);
}

fn inline_send(rig: &mut Rig, i: u32) {
    let small = rig.small;
    rig.recv('b', &[sge(SMALL_VA, 4, small)]);
    let mut w = wqe(hw::WR_SEND, SIGNALED, 0);
    w.flags |= hw::WQE_FLAG_INLINE;
    w.inline_len = 4;
    rig.send('a', w, &[], &i.to_le_bytes());
    assert_eq!(rig.cqe('r').status, hw::WC_SUCCESS);
}

#[test]
fn a_resized_cq_goes_on_in_its_new_ring_with_what_was_not_polled() {
    let mut rig = Rig::new();
    let (ring8, ring4) = (RINGS + 0x2_0000, RINGS + 0x3_0000);
    // 10 SENDs complete; 4 of their CQEs are polled, 6 are not.
    for i in 0..10 {
        inline_send(&mut rig, i);
    }
    for i in 0..4 {
        assert_eq!(u32::from(rig.cqe('s').wqe_index), i);
    }
    let scq = rig.scq.cqn;

    // Refused, the CQ unchanged: the 6 do not fit in 4, a depth out of range, the wrong
    // pages, reserved bytes, no such CQ; a page list the NIC cannot read.
    let bad: [(&str, hw::ResizeCqParams); 5] = [
        ("6 unpolled in 4", resize_params(&mut rig, ring4, 2)),
        ("depth 1", resize_params(&mut rig, ring4, 0)),
        ("depth 2^16", resize_params(&mut rig, ring4, 16)),
        (
            "one page for 8 KiB",
            hw::ResizeCqParams {
                log_depth: 8,
                ..resize_params(&mut rig, ring8, 3)
            },
        ),
        (
            "CQ 9",
            hw::ResizeCqParams {
                cqn: 9,
                ..resize_params(&mut rig, ring8, 3)
            },
        ),
    ];
    for (what, p) in bad {
        assert_eq!(
            rig.run(hw::CMD_RESIZE_CQ, p.encode()).0,
            hw::AQ_BAD_PARAM,
            "{what}"
        );
    }
    let mut raw = resize_params(&mut rig, ring8, 3).encode();
    raw[5] = 1;
    assert_eq!(
        rig.run(hw::CMD_RESIZE_CQ, raw).0,
        hw::AQ_BAD_PARAM,
        "reserved"
    );
    let mut far = resize_params(&mut rig, ring8, 3);
    far.ring.root = 0x7000_0000_0000;
    assert_eq!(
        rig.run(hw::CMD_RESIZE_CQ, far.encode()).0,
        hw::AQ_BAD_ADDRESS
    );
    inline_send(&mut rig, 10);
    assert_eq!(u32::from(rig.cqe('s').wqe_index), 4, "the CQ unchanged");

    // To 8 CQEs: the result is the producer index (11); 6 unpolled are moved.
    let p = resize_params(&mut rig, ring8, 3);
    assert_eq!(rig.run(hw::CMD_RESIZE_CQ, p.encode()), (hw::AQ_OK, 11));
    let mut old = vec![0u8; 32 << CQ_LOG];
    rig.mem.dma_read(RINGS, &mut old).unwrap();
    move_unpolled(&mut rig, ring8, 3, 11);
    // 2 more complete into the new ring beside the 6 moved (8: full, not overrun).
    for i in 11..13 {
        inline_send(&mut rig, i);
    }
    for i in 5..13 {
        assert_eq!(
            u32::from(rig.cqe('s').wqe_index),
            i,
            "in order across the move"
        );
    }
    assert!(rig.poll('s').is_none());
    // Many laps of the new ring, polled as they come.
    for i in 13..60 {
        inline_send(&mut rig, i);
        assert_eq!(u32::from(rig.cqe('s').wqe_index), i);
    }
    let mut now = vec![0u8; 32 << CQ_LOG];
    rig.mem.dma_read(RINGS, &mut now).unwrap();
    assert!(old == now, "the old ring was not written after the move");

    // Smaller again: 3 unpolled fit in 4.
    for i in 60..63 {
        inline_send(&mut rig, i);
    }
    let p = resize_params(&mut rig, ring4, 2);
    assert_eq!(rig.run(hw::CMD_RESIZE_CQ, p.encode()), (hw::AQ_OK, 63));
    move_unpolled(&mut rig, ring4, 2, 63);
    inline_send(&mut rig, 63);
    for i in 60..64 {
        assert_eq!(u32::from(rig.cqe('s').wqe_index), i);
    }
    assert_eq!(rig.nic.status() & hw::STATUS_FATAL, 0);
    let ev = rig.events();
    assert!(
        !ev.contains(&(hw::EVENT_CQ_ERROR, scq)),
        "no overrun, no lost ring: {ev:?}"
    );
    assert_eq!(rig.nic.cqs_in_use(), 2);
}
