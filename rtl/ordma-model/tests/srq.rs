//! Shared receive queues: the SRQ commands and their refusals, QPs attached to an SRQ,
//! WQEs taken in posting order across QPs by their links, RNR and the SRQ doorbell, the
//! limit event, `QP_LAST_WQE_REACHED` after the flush of the WQE a QP had taken, the
//! doorbell's checks, and an SRQ's ring never read once it is destroyed.

mod common;

use common::pair::*;
use common::rig::*;
use common::BUF;
use ordma_hw as hw;
use ordma_model::engine::NicConfig;
use ordma_model::mem::Dma;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
/// The SRQ's ring, and a second one.
const SRQ_RING: u64 = RINGS + 0x30_0000;
const SRQ_RING2: u64 = RINGS + 0x31_0000;
/// The send queues of the QPs attached to the SRQ.
const R1_SQ: u64 = RINGS + 0x34_0000;
const R2_SQ: u64 = RINGS + 0x38_0000;
const SRQ_LOG: u8 = 3;
const SRQ_WQE_LOG: u8 = 6;

/// An SRQ of 8 slots of 64 bytes (2 SGEs) at `ring`: its number.
fn srq(r: &mut Rig, ring: u64) -> u32 {
    r.srq(ring, SRQ_LOG, SRQ_WQE_LOG, 2)
}

fn srq_params(r: &mut Rig, ring: u64) -> hw::CreateSrqParams {
    r.srq_params(ring, SRQ_LOG, SRQ_WQE_LOG, 2)
}

/// A QP receiving through SRQ `srqn`: its number.
fn srq_qp(r: &mut Rig, sq: u64, srqn: u32) -> u32 {
    r.srq_qp(sq, srqn).qpn
}

/// Writes the WQE of `slot` (linked to `next`) of the SRQ ring at `ring`.
fn put_srq(r: &Rig, ring: u64, slot: u16, next: u16, sges: &[hw::Sge]) {
    r.put_srq(ring, SRQ_WQE_LOG, slot, next, sges);
}

fn srq_db(r: &mut Rig, srqn: u32, pi: u16) {
    r.db(hw::DB_SRQ, hw::db_value(srqn, pi));
}

fn query_srq(r: &mut Rig, srqn: u32) -> hw::SrqAttrs {
    let p = hw::QuerySrqParams {
        srqn,
        resp_addr: BUF + 0x400,
        resp_len: hw::SRQ_ATTRS_SIZE as u32,
    };
    assert_eq!(r.run(hw::CMD_QUERY_SRQ, p.encode()).0, hw::AQ_OK);
    let mut b = [0u8; hw::SRQ_ATTRS_SIZE];
    r.mem.dma_read(BUF + 0x400, &mut b).unwrap();
    hw::SrqAttrs::decode(&b)
}

fn modify_srq(r: &mut Rig, srqn: u32, attr_mask: u32, srq_limit: u32) -> u16 {
    let p = hw::ModifySrqParams {
        srqn,
        attr_mask,
        srq_limit,
        ..Default::default()
    };
    r.run(hw::CMD_MODIFY_SRQ, p.encode()).0
}

/// `CMD_MODIFY_SRQ` resizing SRQ `srqn` to a ring of `2^log_depth` slots at `ring` (and
/// arming `limit` too if given).
fn resize_params(r: &mut Rig, srqn: u32, ring: u64, log_depth: u8) -> hw::ModifySrqParams {
    hw::ModifySrqParams {
        srqn,
        attr_mask: hw::SRQ_ATTR_MAX_WR,
        srq_limit: 0,
        log_depth,
        ring: r.srq_params(ring, log_depth, SRQ_WQE_LOG, 2).wq.ring,
    }
}

fn destroy(r: &mut Rig, opcode: u8, num: u32) -> u16 {
    r.run(opcode, hw::NumParams { num }.encode()).0
}

fn status(r: &Rig) -> String {
    r.nic.status_snapshot().to_string()
}

/// A NIC with QPs A and B connected to R1 and R2, which receive through one SRQ; `cfg`
/// adjusts the NIC. (rig, srqn, r1, r2)
fn setup(cfg: impl FnOnce(&mut NicConfig)) -> (Rig, u32, u32, u32) {
    let mut r = Rig::bare_with(1, cfg);
    let n = srq(&mut r, SRQ_RING);
    let r1 = srq_qp(&mut r, R1_SQ, n);
    let r2 = srq_qp(&mut r, R2_SQ, n);
    let (a, b) = (r.a.qpn, r.b.qpn);
    for (x, y, sq, rq) in [
        (a, r1, 100, 500),
        (r1, a, 500, 100),
        (b, r2, 200, 600),
        (r2, b, 600, 200),
    ] {
        r.connect(x, y, sq, rq, |_| {});
    }
    (r, n, r1, r2)
}

/// The buffer of SRQ slot `slot` in the small MR.
fn slot_va(slot: u16) -> u64 {
    SMALL_VA + u64::from(slot) * 0x2000
}

#[test]
fn srq_commands_and_their_refusals() {
    let mut r = Rig::bare_with(1, |c| c.attrs.max_srq = 2);
    assert_eq!(r.nic.srqs_in_use(), 0);
    let n = srq(&mut r, SRQ_RING);
    assert_eq!(n, 0, "the lowest free SRQN");
    let q = query_srq(&mut r, n);
    assert_eq!(
        q,
        hw::SrqAttrs {
            max_wr: 7,
            max_sge: 2,
            srq_limit: 0,
            wqe_count: 0
        },
        "one slot is always free"
    );
    type Change = Box<dyn Fn(&mut hw::CreateSrqParams)>;
    let bad: [(&str, Change); 9] = [
        ("db_page", Box::new(|p| p.db_page = 2048)), // hw::DB_PAGES
        ("no PD", Box::new(|p| p.pdn = 99)),
        ("max_sge over max_srq_sge", Box::new(|p| p.max_sge = 17)),
        ("depth 1", Box::new(|p| p.wq.log_depth = 0)),
        ("depth 2^16", Box::new(|p| p.wq.log_depth = 16)),
        ("WQE of 32 bytes", Box::new(|p| p.wq.log_wqe_size = 5)),
        ("WQE of 2 KiB", Box::new(|p| p.wq.log_wqe_size = 11)),
        (
            "2 SGEs need 48 bytes: fine; 4 need 80",
            Box::new(|p| p.max_sge = 4),
        ),
        ("pages", Box::new(|p| p.wq.ring.npages = 2)),
    ];
    for (what, f) in &bad {
        let mut p = srq_params(&mut r, SRQ_RING2);
        f(&mut p);
        assert_eq!(
            r.run(hw::CMD_CREATE_SRQ, p.encode()).0,
            hw::AQ_BAD_PARAM,
            "{what}"
        );
    }
    let mut raw = srq_params(&mut r, SRQ_RING2).encode();
    raw[30] = 1;
    assert_eq!(
        r.run(hw::CMD_CREATE_SRQ, raw).0,
        hw::AQ_BAD_PARAM,
        "reserved"
    );
    let mut far = srq_params(&mut r, SRQ_RING2);
    far.wq.ring.root = 0x7000_0000_0000;
    assert_eq!(
        r.run(hw::CMD_CREATE_SRQ, far.encode()).0,
        hw::AQ_BAD_ADDRESS
    );
    assert_eq!(r.nic.srqs_in_use(), 1, "nothing refused was made");
    let n2 = srq(&mut r, SRQ_RING2);
    let p = srq_params(&mut r, SRQ_RING2);
    assert_eq!(
        r.run(hw::CMD_CREATE_SRQ, p.encode()).0,
        hw::AQ_NO_RESOURCES,
        "max_srq"
    );

    // The limit: up to max_wr; a resize or an unknown bit is refused.
    assert_eq!(modify_srq(&mut r, n, hw::SRQ_ATTR_LIMIT, 7), hw::AQ_OK);
    assert_eq!(query_srq(&mut r, n).srq_limit, 7);
    assert_eq!(
        modify_srq(&mut r, n, hw::SRQ_ATTR_LIMIT, 8),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(
        modify_srq(&mut r, n, hw::SRQ_ATTR_MAX_WR, 8),
        hw::AQ_BAD_PARAM,
        "a resize without a ring"
    );
    assert_eq!(modify_srq(&mut r, n, 1 << 2, 0), hw::AQ_BAD_PARAM);
    assert_eq!(
        modify_srq(&mut r, 9, hw::SRQ_ATTR_LIMIT, 1),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(modify_srq(&mut r, n, hw::SRQ_ATTR_LIMIT, 0), hw::AQ_OK);
    assert_eq!(query_srq(&mut r, n).srq_limit, 0, "0 disarms");

    // QPs on an SRQ: it must exist and be of their page, with no RQ of their own.
    let mut p = r.srq_qp_params(R1_SQ, 5);
    assert_eq!(
        r.run(hw::CMD_CREATE_QP, p.encode()).0,
        hw::AQ_BAD_PARAM,
        "no SRQ 5"
    );
    p = r.srq_qp_params(R1_SQ, n);
    p.rq.log_depth = 2;
    assert_eq!(
        r.run(hw::CMD_CREATE_QP, p.encode()).0,
        hw::AQ_BAD_PARAM,
        "and an RQ"
    );
    p = r.srq_qp_params(R1_SQ, n);
    p.max_recv_sge = 1;
    assert_eq!(
        r.run(hw::CMD_CREATE_QP, p.encode()).0,
        hw::AQ_BAD_PARAM,
        "recv SGEs"
    );
    p = r.srq_qp_params(R1_SQ, n);
    p.flags = hw::QP_FLAG_SRQ | 2;
    assert_eq!(
        r.run(hw::CMD_CREATE_QP, p.encode()).0,
        hw::AQ_BAD_PARAM,
        "flags"
    );
    assert_eq!(destroy(&mut r, hw::CMD_DESTROY_SRQ, n2), hw::AQ_OK);
    let mut other = srq_params(&mut r, SRQ_RING2);
    other.db_page = 2;
    let n3 = r.ok(hw::CMD_CREATE_SRQ, other.encode()) as u32;
    p = r.srq_qp_params(R1_SQ, n3);
    assert_eq!(
        r.run(hw::CMD_CREATE_QP, p.encode()).0,
        hw::AQ_BAD_PARAM,
        "an SRQ of another context's page"
    );
    let qpn = srq_qp(&mut r, R1_SQ, n);
    assert_eq!(r.nic.qp(qpn).and_then(|q| q.srqn), Some(n));
    assert!(r.nic.qp(qpn).is_some_and(|q| q.rq.is_none()));

    // Destroy: not while a QP uses it; the PD not while an SRQ does.
    assert_eq!(
        destroy(&mut r, hw::CMD_DESTROY_SRQ, n),
        hw::AQ_BAD_PARAM,
        "in use"
    );
    assert_eq!(destroy(&mut r, hw::CMD_DESTROY_QP, qpn), hw::AQ_OK);
    assert_eq!(destroy(&mut r, hw::CMD_DESTROY_SRQ, n), hw::AQ_OK);
    assert_eq!(
        destroy(&mut r, hw::CMD_DESTROY_SRQ, n),
        hw::AQ_BAD_PARAM,
        "twice"
    );
    let q = hw::QuerySrqParams {
        srqn: n,
        resp_addr: BUF,
        resp_len: 16,
    };
    assert_eq!(
        r.run(hw::CMD_QUERY_SRQ, q.encode()).0,
        hw::AQ_BAD_PARAM,
        "gone"
    );
    for q in [r.a.qpn, r.b.qpn] {
        assert_eq!(destroy(&mut r, hw::CMD_DESTROY_QP, q), hw::AQ_OK);
    }
    for key in [r.big, r.small, r.ro] {
        r.ok(hw::CMD_DESTROY_MR, hw::KeyParams { key }.encode());
    }
    let pd = hw::PdParams { pdn: r.pdn }.encode();
    assert_eq!(
        r.run(hw::CMD_DEALLOC_PD, pd).0,
        hw::AQ_BAD_PARAM,
        "SRQ 3 uses the PD"
    );
    assert_eq!(destroy(&mut r, hw::CMD_DESTROY_SRQ, n3), hw::AQ_OK);
    assert_eq!(r.run(hw::CMD_DEALLOC_PD, pd).0, hw::AQ_OK);
    let s = status(&r);
    assert!(
        s.contains(" qps_destroyed=3 srqs=0 srqs_created=3 srqs_destroyed=3 "),
        "{s}"
    );
}

#[test]
fn wqes_are_taken_in_posting_order_across_qps_by_their_links() {
    let (mut r, n, r1, r2) = setup(|_| {});
    let (a, b) = (r.a.qpn, r.b.qpn);
    // Posted in the order 0, 5, 2, 7, 1, 3, 6; slot 4 is the free end of the links.
    let order: [u16; 8] = [0, 5, 2, 7, 1, 3, 6, 4];
    for w in order.windows(2) {
        put_srq(
            &r,
            SRQ_RING,
            w[0],
            w[1],
            &[sge(slot_va(w[0]), 0x2000, r.small)],
        );
    }
    srq_db(&mut r, n, 7);
    assert_eq!(query_srq(&mut r, n).wqe_count, 7);
    let small = r.small;
    for (i, &slot) in order[..7].iter().enumerate() {
        let data = bytes(i as u64 + 1, 1000 + 300 * i);
        let src = BIG_VA + 0x10_0000 * i as u64;
        r.fill(src, &data);
        let from = if i % 2 == 0 { 'a' } else { 'b' };
        let big = r.big;
        r.send(
            from,
            wqe(hw::WR_SEND, SIGNALED, 1),
            &[sge(src, data.len() as u32, big)],
            &[],
        );
        let c = r.cqe('s');
        assert_eq!(c.status, hw::WC_SUCCESS, "send {i}");
        let c = r.cqe('r');
        let (qpn, src_qp) = if i % 2 == 0 { (r1, a) } else { (r2, b) };
        assert_eq!(
            (c.status, c.opcode, c.qpn, c.src_qp, c.wqe_index, c.byte_len),
            (
                hw::WC_SUCCESS,
                hw::WC_RECV,
                qpn,
                src_qp,
                slot,
                data.len() as u32
            ),
            "message {i} takes the next WQE posted, whichever QP receives it"
        );
        assert_eq!(
            r.read(slot_va(slot), data.len()),
            data,
            "message {i}'s bytes"
        );
        let _ = small;
    }
    assert_eq!(query_srq(&mut r, n).wqe_count, 0);
    // None left: RNR; posting one (the SRQ's doorbell) sends the SEND again at once.
    let big = r.big;
    r.fill(BIG_VA, b"after the RNR NAK");
    r.send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 17, big)],
        &[],
    );
    assert!(r.poll('r').is_none(), "no WQE: RNR NAK");
    assert!(r.poll('s').is_none(), "the sender waits for its RNR retry");
    put_srq(&r, SRQ_RING, 4, 0, &[sge(slot_va(4), 64, small)]);
    srq_db(&mut r, n, 8);
    let c = r.cqe('r');
    assert_eq!(
        (c.status, c.qpn, c.wqe_index, c.byte_len),
        (hw::WC_SUCCESS, r1, 4, 17)
    );
    assert_eq!(r.read(slot_va(4), 17), b"after the RNR NAK");
    assert_eq!(r.cqe('s').status, hw::WC_SUCCESS);
    // A WRITE with immediate takes one too (its SGEs unused).
    put_srq(&r, SRQ_RING, 0, 5, &[sge(slot_va(0), 64, small)]);
    srq_db(&mut r, n, 9);
    let mut w = wqe(hw::WR_RDMA_WRITE_IMM, SIGNALED, 1);
    (w.remote_addr, w.rkey, w.imm) = (SMALL_VA + 0x3_0000, small, 0x1234_5678);
    r.send('b', w, &[sge(BIG_VA, 17, big)], &[]);
    let c = r.cqe('r');
    assert_eq!(
        (c.status, c.opcode, c.qpn, c.wqe_index, c.byte_len, c.imm),
        (hw::WC_SUCCESS, hw::WC_RECV_RDMA_IMM, r2, 0, 17, 0x1234_5678)
    );
    assert_eq!(r.read(SMALL_VA + 0x3_0000, 17), b"after the RNR NAK");
}

#[test]
fn the_limit_event_fires_once_below_the_limit_then_disarms() {
    let (mut r, n, r1, _) = setup(|_| {});
    let small = r.small;
    for s in 0..6u16 {
        put_srq(&r, SRQ_RING, s, s + 1, &[sge(slot_va(s), 64, small)]);
    }
    srq_db(&mut r, n, 6);
    r.events();
    assert_eq!(modify_srq(&mut r, n, hw::SRQ_ATTR_LIMIT, 4), hw::AQ_OK);
    let big = r.big;
    let mut limits = Vec::new();
    for i in 0..5 {
        r.send(
            'a',
            wqe(hw::WR_SEND, SIGNALED, 1),
            &[sge(BIG_VA, 8, big)],
            &[],
        );
        assert_eq!(r.cqe('r').qpn, r1);
        r.cqe('s');
        let ev = r.events();
        limits.push(
            ev.iter()
                .filter(|e| e.0 == hw::EVENT_SRQ_LIMIT_REACHED)
                .count(),
        );
        if i == 2 {
            assert!(ev.contains(&(hw::EVENT_SRQ_LIMIT_REACHED, n)), "{ev:?}");
            assert_eq!(query_srq(&mut r, n).srq_limit, 0, "disarmed");
        }
    }
    assert_eq!(
        limits,
        [0, 0, 1, 0, 0],
        "6, 5, 4 left: no; 3 < 4: once; disarmed after"
    );
    // Armed again above the count: the next take fires it.
    assert_eq!(modify_srq(&mut r, n, hw::SRQ_ATTR_LIMIT, 3), hw::AQ_OK);
    assert!(r.events().is_empty(), "arming alone raises nothing");
    r.send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 8, big)],
        &[],
    );
    r.cqe('r');
    assert!(r.events().contains(&(hw::EVENT_SRQ_LIMIT_REACHED, n)));
}

#[test]
fn a_bad_srq_wqe_fails_its_qp_alone_and_last_wqe_reached_follows() {
    let (mut r, n, r1, r2) = setup(|_| {});
    let small = r.small;
    // Slot 0 is malformed (a reserved byte), slot 1 good; the link past 0 still holds.
    put_srq(&r, SRQ_RING, 0, 1, &[sge(slot_va(0), 64, small)]);
    put_srq(&r, SRQ_RING, 1, 2, &[sge(slot_va(1), 64, small)]);
    r.mem.dma_write(SRQ_RING + 7, &[1]).unwrap();
    srq_db(&mut r, n, 2);
    r.events();
    let big = r.big;
    r.send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 8, big)],
        &[],
    );
    let c = r.cqe('r');
    assert_eq!(
        (c.status, c.qpn, c.wqe_index),
        (hw::WC_LOC_QP_OP_ERR, r1, 0)
    );
    assert_eq!(r.cqe('s').status, hw::WC_REM_OP_ERR);
    assert_eq!(r.state(r1), hw::QPS_ERR);
    let ev = r.events();
    assert_eq!(
        ev.iter()
            .filter(|e| **e == (hw::EVENT_QP_LAST_WQE_REACHED, r1))
            .count(),
        1,
        "{ev:?}"
    );
    // The other QP takes the next WQE by the link.
    r.send(
        'b',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 8, big)],
        &[],
    );
    let c = r.cqe('r');
    assert_eq!((c.status, c.qpn, c.wqe_index), (hw::WC_SUCCESS, r2, 1));
    assert_eq!(
        r.nic
            .counters()
            .get(ordma_model::engine::counters::Anomaly::BadWqe),
        1
    );
    // A QP moved to ERR by a command: the event too, once; ERR -> ERR raises none.
    let mut at = hw::QpAttr {
        qp_state: hw::QPS_ERR,
        ..Default::default()
    };
    assert_eq!(r.modify(r2, hw::QP_ATTR_STATE, &at), hw::AQ_OK);
    assert_eq!(r.events(), [(hw::EVENT_QP_LAST_WQE_REACHED, r2)]);
    assert_eq!(r.modify(r2, hw::QP_ATTR_STATE, &at), hw::AQ_OK);
    assert!(r.events().is_empty());
    // Back through RESET and to ERR again: again.
    at.qp_state = hw::QPS_RESET;
    assert_eq!(r.modify(r2, hw::QP_ATTR_STATE, &at), hw::AQ_OK);
    at.qp_state = hw::QPS_INIT;
    assert_eq!(
        r.modify(
            r2,
            hw::QP_ATTR_STATE
                | hw::QP_ATTR_PKEY_INDEX
                | hw::QP_ATTR_PORT
                | hw::QP_ATTR_ACCESS_FLAGS,
            &hw::QpAttr {
                qp_state: hw::QPS_INIT,
                port_num: 1,
                ..Default::default()
            }
        ),
        hw::AQ_OK
    );
    at.qp_state = hw::QPS_ERR;
    assert_eq!(r.modify(r2, hw::QP_ATTR_STATE, &at), hw::AQ_OK);
    assert_eq!(r.events(), [(hw::EVENT_QP_LAST_WQE_REACHED, r2)]);
    // A QP with its own RQ raises none.
    let a = r.a.qpn;
    assert_eq!(r.modify(a, hw::QP_ATTR_STATE, &at), hw::AQ_OK);
    assert!(!r.events().contains(&(hw::EVENT_QP_LAST_WQE_REACHED, a)));
}

#[test]
fn the_wqe_a_send_in_progress_took_is_flushed_before_last_wqe_reached() {
    // NIC 1's A sends to NIC 2's R, attached to an SRQ; only the SEND's first packet
    // arrives.
    let mut p = Pair::new(|_| {});
    let n = srq(&mut p.r[1], SRQ_RING);
    let rq = srq_qp(&mut p.r[1], R1_SQ, n);
    let a = p.r[0].a.qpn;
    let reset = hw::QpAttr::default();
    assert_eq!(p.r[0].modify(a, hw::QP_ATTR_STATE, &reset), hw::AQ_OK);
    p.r[0].connect(a, rq, 100, 500, |at| {
        at.ah.dlid = 2;
        at.path_mtu = 1;
    });
    p.r[1].connect(rq, a, 500, 100, |at| {
        at.ah.dlid = 1;
        at.path_mtu = 1;
    });
    let small = p.r[1].small;
    for s in 0..3u16 {
        put_srq(
            &p.r[1],
            SRQ_RING,
            s,
            s + 1,
            &[sge(slot_va(s), 0x2000, small)],
        );
    }
    srq_db(&mut p.r[1], n, 3);
    p.r[1].events();
    let big = p.r[0].big;
    p.r[0].fill(BIG_VA, &bytes(3, 1000));
    p.r[0].send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 1000, big)],
        &[],
    );
    let frames: Vec<_> = p.q.lock().unwrap().drain(..).collect();
    assert_eq!(frames.len(), 4, "1000 bytes in packets of 256");
    let (dlid, first) = &frames[0];
    p.deliver(*dlid, first);
    p.q.lock().unwrap().clear();
    assert_eq!(
        query_srq(&mut p.r[1], n).wqe_count,
        2,
        "slot 0 taken by the first packet"
    );
    assert!(p.r[1].poll('r').is_none());
    let at = hw::QpAttr {
        qp_state: hw::QPS_ERR,
        ..Default::default()
    };
    assert_eq!(p.r[1].modify(rq, hw::QP_ATTR_STATE, &at), hw::AQ_OK);
    let c = p.r[1].cqe('r');
    assert_eq!(
        (
            c.status,
            c.opcode,
            c.qpn,
            c.wqe_index,
            c.flags & hw::CQE_FLAG_RECV
        ),
        (hw::WC_WR_FLUSH_ERR, hw::WC_RECV, rq, 0, hw::CQE_FLAG_RECV),
        "the WQE it had taken completes flushed"
    );
    assert!(p.r[1].poll('r').is_none(), "the WQEs left stay in the SRQ");
    let ev = p.r[1].events();
    assert_eq!(
        ev.last(),
        Some(&(hw::EVENT_QP_LAST_WQE_REACHED, rq)),
        "{ev:?}"
    );
    assert_eq!(query_srq(&mut p.r[1], n).wqe_count, 2);
}

#[test]
fn srq_doorbells_are_checked() {
    let (mut r, n, _, _) = setup(|_| {});
    let before = status(&r);
    let bad = |s: &str, k: &str| {
        s.split(' ')
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    };
    srq_db(&mut r, n, 8); // 8 ahead of 0 in a ring of 8: beyond (7 at most)
    srq_db(&mut r, n + 7, 1); // no such SRQ
    let off = 2 * hw::DB_PAGE_SIZE as u64 + hw::DB_SRQ as u64;
    r.nic
        .doorbell_write(off, 4, hw::db_value(n, 1), &r.mem, &r.irq); // another page
    let after = status(&r);
    assert_eq!(
        bad(&after, "bad_doorbells"),
        bad(&before, "bad_doorbells") + 2,
        "{after}"
    );
    assert_eq!(
        bad(&after, "foreign_doorbells"),
        bad(&before, "foreign_doorbells") + 1
    );
    assert_eq!(query_srq(&mut r, n).wqe_count, 0, "none accepted");
    srq_db(&mut r, n, 7);
    assert_eq!(query_srq(&mut r, n).wqe_count, 7);
}

#[test]
fn a_destroyed_srqs_ring_is_never_read_again() {
    let (mut r, n, r1, r2) = setup(|_| {});
    let small = r.small;
    put_srq(&r, SRQ_RING, 0, 1, &[sge(slot_va(0), 64, small)]);
    srq_db(&mut r, n, 1);
    // Its QPs go, then the SRQ; its ring's memory keeps a WQE aimed at slot 0's buffer.
    for q in [r1, r2] {
        assert_eq!(destroy(&mut r, hw::CMD_DESTROY_QP, q), hw::AQ_OK);
    }
    assert_eq!(destroy(&mut r, hw::CMD_DESTROY_SRQ, n), hw::AQ_OK);
    srq_db(&mut r, n, 1);
    // A new SRQ takes the same number over another ring.
    let n2 = srq(&mut r, SRQ_RING2);
    assert_eq!(n2, n);
    let q = srq_qp(&mut r, R1_SQ, n2);
    let a = r.a.qpn;
    assert_eq!(
        r.modify(a, hw::QP_ATTR_STATE, &hw::QpAttr::default()),
        hw::AQ_OK
    );
    r.connect(a, q, 300, 700, |_| {});
    r.connect(q, a, 700, 300, |_| {});
    put_srq(&r, SRQ_RING2, 0, 1, &[sge(slot_va(3), 64, small)]);
    srq_db(&mut r, n2, 1);
    r.fill(slot_va(0), &[0xee; 16]);
    let big = r.big;
    r.fill(BIG_VA, b"new ring, new WQE");
    r.send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 17, big)],
        &[],
    );
    let c = r.cqe('r');
    assert_eq!((c.status, c.qpn, c.wqe_index), (hw::WC_SUCCESS, q, 0));
    assert_eq!(r.read(slot_va(3), 17), b"new ring, new WQE");
    assert_eq!(
        r.read(slot_va(0), 16),
        [0xee; 16],
        "the old ring's WQE was not used"
    );
}

#[test]
fn a_resized_srq_takes_from_its_new_ring_where_it_left_off() {
    let (mut r, n, r1, _) = setup(|_| {});
    r.events();
    let (small, big, a) = (r.small, r.big, r.a.qpn);
    // Slots 0..5 posted (0 → 1 → … → 5), the free ones 5 → 6 → 7 (7 the last).
    for slot in 0..5u16 {
        put_srq(
            &r,
            SRQ_RING,
            slot,
            slot + 1,
            &[sge(slot_va(slot), 0x2000, small)],
        );
    }
    srq_db(&mut r, n, 5);
    let mut sent = 0u64;
    let mut send = |r: &mut Rig, want_slot: u16| {
        sent += 1;
        let data = bytes(sent, 700 + 100 * sent as usize);
        let src = BIG_VA + 0x8_0000 * sent;
        r.fill(src, &data);
        r.send(
            'a',
            wqe(hw::WR_SEND, SIGNALED, 1),
            &[sge(src, data.len() as u32, big)],
            &[],
        );
        assert_eq!(r.cqe('s').status, hw::WC_SUCCESS, "send {sent}");
        let c = r.cqe('r');
        assert_eq!(
            (c.status, c.qpn, c.src_qp, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, r1, a, want_slot, data.len() as u32),
            "message {sent}"
        );
        assert_eq!(
            r.read(slot_va(want_slot), data.len()),
            data,
            "message {sent}'s bytes"
        );
    };
    send(&mut r, 0);
    send(&mut r, 1);

    // Refused, the SRQ unchanged: no larger, a ring of the wrong size, one the NIC cannot
    // read, reserved bytes, a limit above the new max_wr, ring fields without a resize.
    let bad: [(&str, hw::ModifySrqParams, u16); 6] = [
        (
            "the same depth",
            resize_params(&mut r, n, SRQ_RING2, SRQ_LOG),
            hw::AQ_BAD_PARAM,
        ),
        (
            "smaller",
            resize_params(&mut r, n, SRQ_RING2, SRQ_LOG - 1),
            hw::AQ_BAD_PARAM,
        ),
        (
            "2^16 slots",
            resize_params(&mut r, n, SRQ_RING2, 16),
            hw::AQ_BAD_PARAM,
        ),
        (
            "a page list of one page for 2 pages",
            hw::ModifySrqParams {
                ring: r.srq_params(SRQ_RING2, 4, SRQ_WQE_LOG, 2).wq.ring,
                ..resize_params(&mut r, n, SRQ_RING2, 7)
            },
            hw::AQ_BAD_PARAM,
        ),
        (
            "a limit of 16 with 15 slots",
            hw::ModifySrqParams {
                attr_mask: hw::SRQ_ATTR_MAX_WR | hw::SRQ_ATTR_LIMIT,
                srq_limit: 16,
                ..resize_params(&mut r, n, SRQ_RING2, 4)
            },
            hw::AQ_BAD_PARAM,
        ),
        (
            "a ring without the resize bit",
            hw::ModifySrqParams {
                attr_mask: hw::SRQ_ATTR_LIMIT,
                ..resize_params(&mut r, n, SRQ_RING2, 4)
            },
            hw::AQ_BAD_PARAM,
        ),
    ];
    for (what, p, want) in bad {
        assert_eq!(r.run(hw::CMD_MODIFY_SRQ, p.encode()).0, want, "{what}");
    }
    let mut far = resize_params(&mut r, n, SRQ_RING2, 4);
    far.ring.root = 0x7000_0000_0000;
    assert_eq!(
        r.run(hw::CMD_MODIFY_SRQ, far.encode()).0,
        hw::AQ_BAD_ADDRESS,
        "a page list the NIC cannot read"
    );
    let q = query_srq(&mut r, n);
    assert_eq!((q.max_wr, q.wqe_count, q.srq_limit), (7, 3, 0), "unchanged");

    // The consumer copies the 8 slots into a ring of 16 and links the new ones after its
    // last free slot (7 → 8 → … → 15); the NIC moves to it, and arms a limit of 12, above
    // the old max_wr, in the same command.
    let mut old = vec![0u8; 8 << SRQ_WQE_LOG];
    r.mem.dma_read(SRQ_RING, &mut old).unwrap();
    r.mem.dma_write(SRQ_RING2, &old).unwrap();
    for slot in 7..16u16 {
        let mut b = [0u8; 2];
        b.copy_from_slice(&(slot + 1).to_le_bytes());
        let at = SRQ_RING2 + (u64::from(slot) << SRQ_WQE_LOG) + hw::SrqWqe::NEXT_OFFSET as u64;
        r.mem.dma_write(at, &b).unwrap();
    }
    let p = hw::ModifySrqParams {
        attr_mask: hw::SRQ_ATTR_MAX_WR | hw::SRQ_ATTR_LIMIT,
        srq_limit: 12,
        ..resize_params(&mut r, n, SRQ_RING2, 4)
    };
    assert_eq!(r.run(hw::CMD_MODIFY_SRQ, p.encode()).0, hw::AQ_OK);
    let q = query_srq(&mut r, n);
    assert_eq!(
        (q.max_wr, q.max_sge, q.wqe_count, q.srq_limit),
        (15, 2, 3, 12)
    );
    // The old ring is not read again: garbage there changes nothing.
    r.mem
        .dma_write(SRQ_RING, &vec![0xa5; 8 << SRQ_WQE_LOG])
        .unwrap();

    // 11 more WQEs (slots 5..=15), 14 posted and not taken: more than the old ring held.
    for slot in 5..16u16 {
        put_srq(
            &r,
            SRQ_RING2,
            slot,
            slot + 1,
            &[sge(slot_va(slot), 0x2000, small)],
        );
    }
    srq_db(&mut r, n, 16);
    assert_eq!(query_srq(&mut r, n).wqe_count, 14);
    let mut limits = Vec::new();
    for slot in 2..16u16 {
        send(&mut r, slot);
        let ev = r.events();
        limits.push(ev.contains(&(hw::EVENT_SRQ_LIMIT_REACHED, n)));
    }
    assert_eq!(
        limits.iter().position(|&l| l),
        Some(2),
        "the limit of 12 fires when 11 are left (the third take), once: {limits:?}"
    );
    assert_eq!(limits.iter().filter(|&&l| l).count(), 1);
    assert_eq!(query_srq(&mut r, n).wqe_count, 0);
    let s = status(&r);
    assert!(s.contains(" bad_wqes=0 "), "{s}");
}
