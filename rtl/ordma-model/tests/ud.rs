//! UD (unreliable datagram) QPs in the one engine, in loopback (the NIC's own queue and
//! frames over the test wire) and between two NICs: SEND, SEND with immediate and inline
//! datagrams arrive behind the 40-byte GRH area with the sender's QP and LID in the CQE,
//! the sender completes at once; a Q_Key that is not the QP's, no receive WQE or a QP that
//! does not receive drops the datagram silently and counts it; the QP's own Q_Key on
//! request; a datagram above the MTU, an opcode UD does not have, a bad address and a
//! receive buffer too small complete in error; UD's state machine.

mod common;

use std::sync::{Arc, Mutex};

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::packet;
use ordma_model::engine::wire::Frame;
use ordma_model::mem::Dma;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
const QKEY: u32 = 0x1111_2222;
const GRH: u64 = 40;

/// Creates two UD QPs in place of the rig's QPs A and B (which stay, unused, in `RESET`)
/// and brings them to `RTS` with Q_Key `QKEY`.
fn ud_pair(r: &mut Rig) {
    r.a = r.qp_of(hw::QP_TYPE_UD, RINGS + 0x30_0000, RINGS + 0x34_0000);
    r.b = r.qp_of(hw::QP_TYPE_UD, RINGS + 0x38_0000, RINGS + 0x3c_0000);
    for qpn in [r.a.qpn, r.b.qpn] {
        to_rts(r, qpn, QKEY);
    }
}

/// RESET -> RTS of UD QP `qpn` with Q_Key `qkey`: UD's required attributes.
fn to_rts(r: &mut Rig, qpn: u32, qkey: u32) {
    let mut a = hw::QpAttr {
        port_num: 1,
        qkey,
        sq_psn: 7,
        ..Default::default()
    };
    let steps = [
        (
            hw::QPS_INIT,
            hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_QKEY,
        ),
        (hw::QPS_RTR, 0),
        (hw::QPS_RTS, hw::QP_ATTR_SQ_PSN),
    ];
    for (state, mask) in steps {
        a.qp_state = state;
        assert_eq!(r.modify(qpn, hw::QP_ATTR_STATE | mask, &a), hw::AQ_OK);
    }
}

/// UD QPs A (sender, `r[0]`) and B (on `r[p.rx()]`) on each of the ways packets travel.
fn pairs() -> Vec<(&'static str, Pair)> {
    let mut out = Vec::new();
    for name in ["loopback", "loopback on the wire", "two NICs"] {
        let q = Queue::default();
        let mut r = vec![Rig::bare(1)];
        if name == "two NICs" {
            r.push(Rig::bare(2));
        }
        for x in &mut r {
            x.nic.set_wire(Some(Box::new(TestWire(Arc::clone(&q)))));
            x.nic.set_loopback_on_wire(name == "loopback on the wire");
            ud_pair(x);
        }
        out.push((
            name,
            Pair {
                r,
                q,
                frames: 0,
                held: None,
                fault: Box::new(|_, _| Act::Pass),
                ticks: 0,
            },
        ));
    }
    out
}

/// The datagram segment towards `p`'s QP B with `qkey`.
fn to_b(p: &Pair, qkey: u32) -> hw::UdSeg {
    hw::UdSeg {
        remote_qpn: p.r[p.rx()].b.qpn,
        remote_qkey: qkey,
        av: hw::QpAh {
            // CAST: at most 2 NICs.
            dlid: p.rx() as u16 + 1,
            port_num: 1,
            ..Default::default()
        },
    }
}

/// Writes a UD send WQE on QP A of `r` and rings the doorbell: its index.
fn post_ud(r: &mut Rig, w: hw::SendWqe, seg: &hw::UdSeg, sges: &[hw::Sge], inline: &[u8]) -> u16 {
    let mut b = vec![0u8; 1 << SQ_WQE_LOG];
    assert!(w.encode_into(&mut b) && seg.encode_into(&mut b));
    let data = hw::sq_wqe_data(hw::QP_TYPE_UD);
    for (i, s) in sges.iter().enumerate() {
        assert!(s.encode_into(&mut b, hw::SendWqe::sge_offset_from(data, i)));
    }
    let at = hw::SendWqe::sge_offset_from(data, 0);
    b[at..at + inline.len()].copy_from_slice(inline);
    let q = &mut r.a;
    let slot = u64::from(q.sq_pi % (1 << SQ_LOG));
    let idx = q.sq_pi;
    r.mem.dma_write(q.sq + (slot << SQ_WQE_LOG), &b).unwrap();
    q.sq_pi = q.sq_pi.wrapping_add(1);
    r.ring_sq('a');
    idx
}

/// A SEND of `len` bytes from A's small MR at `src`.
fn send(p: &mut Pair, op: u8, flags: u8, src: u64, len: u32, seg: &hw::UdSeg) -> u16 {
    let small = p.r[0].small;
    let mut w = wqe(op, flags, 1);
    w.imm = 0x0a0b_0c0d;
    post_ud(&mut p.r[0], w, seg, &[sge(src, len, small)], &[])
}

/// Posts a receive of `len` bytes at `at` in B's big MR, filled with 0xee first.
fn recv(p: &mut Pair, at: u64, len: u32) -> u16 {
    let rx = p.rx();
    p.r[rx].fill(at, &vec![0xee; len as usize]);
    let big = p.r[rx].big;
    p.r[rx].recv('b', &[sge(at, len, big)])
}

/// Records the opcodes of every frame on the wire (and passes them).
fn record(p: &mut Pair) -> Arc<Mutex<Vec<u8>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    p.fault = Box::new(move |_, f: &Frame| {
        s.lock().unwrap().push(f.packet.bth.opcode);
        Act::Pass
    });
    seen
}

fn status(r: &Rig) -> String {
    r.nic.status_snapshot().to_string()
}

#[test]
fn datagrams_arrive_behind_the_grh_area_with_the_senders_address() {
    for (name, mut p) in pairs() {
        let seen = record(&mut p);
        let rx = p.rx();
        let data = bytes(11, 4096);
        p.r[0].fill(SMALL_VA, &data);
        for i in 0..3 {
            recv(&mut p, BIG_VA + i * 0x2000, 4096 + GRH as u32);
        }
        let seg = to_b(&p, QKEY);
        send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA, 4096, &seg);
        let f = SIGNALED | hw::WQE_FLAG_SOLICITED;
        send(&mut p, hw::WR_SEND_IMM, f, SMALL_VA + 5, 10, &seg);
        let mut w = wqe(hw::WR_SEND, SIGNALED | hw::WQE_FLAG_INLINE, 0);
        w.inline_len = 50;
        post_ud(&mut p.r[0], w, &seg, &[], &data[100..150]);
        p.settle(10);
        for i in 0..3 {
            let c = p.r[0].cqe('s');
            assert_eq!(
                (c.status, c.opcode, c.wqe_index),
                (hw::WC_SUCCESS, hw::WC_SEND, i),
                "{name}: send {i}"
            );
        }
        let (a, lid) = (p.r[0].a.qpn, 1);
        let want = [
            (4096, 0, &data[..4096]),
            (10, hw::CQE_FLAG_IMM | hw::CQE_FLAG_SOLICITED, &data[5..15]),
            (50, 0, &data[100..150]),
        ];
        for (i, (n, flags, bytes)) in want.into_iter().enumerate() {
            let c = p.r[rx].cqe('r');
            assert_eq!(
                (c.status, c.opcode, c.byte_len, c.flags),
                (
                    hw::WC_SUCCESS,
                    hw::WC_RECV,
                    GRH as u32 + n,
                    hw::CQE_FLAG_RECV | flags
                ),
                "{name}: receive {i}"
            );
            assert_eq!((c.src_qp, c.slid, c.qpn), (a, lid, p.r[rx].b.qpn), "{name}");
            if flags & hw::CQE_FLAG_IMM != 0 {
                assert_eq!(c.imm, 0x0a0b_0c0d, "{name}");
            }
            let at = BIG_VA + i as u64 * 0x2000;
            let got = p.r[rx].read(at, GRH as usize + n as usize);
            assert_eq!(
                got[..40],
                [0xee; 40],
                "{name}: no GRH on an IB port: left alone"
            );
            assert_eq!(&got[40..], bytes, "{name}: receive {i}'s bytes");
        }
        assert!(p.r[rx].poll('r').is_none(), "{name}");
        if name != "loopback" {
            let seen = seen.lock().unwrap();
            assert_eq!(
                *seen,
                [
                    packet::UD_SEND_ONLY,
                    packet::UD_SEND_ONLY_IMM,
                    packet::UD_SEND_ONLY
                ],
                "{name}: one frame a datagram, no ACK"
            );
        }
        assert!(status(&p.r[0]).contains(" ud_sent=3 "), "{name}");
        assert!(status(&p.r[rx]).contains(" ud_received=3 "), "{name}");
    }
}

#[test]
fn a_wrong_qkey_or_no_receive_wqe_drops_the_datagram_and_counts_it() {
    for (name, mut p) in pairs() {
        let rx = p.rx();
        p.r[0].fill(SMALL_VA, &bytes(3, 64));
        // No receive WQE: the sender completes, the datagram is dropped.
        {
            let seg = to_b(&p, QKEY);
            send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA, 64, &seg);
        }
        p.settle(10);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS, "{name}");
        assert!(
            status(&p.r[rx]).contains(" ud_dropped=1 ud_qkey_dropped=0 "),
            "{name}"
        );
        // A wrong Q_Key: dropped and counted, the receive WQE stays for the next one.
        recv(&mut p, BIG_VA, 4096);
        {
            let seg = to_b(&p, QKEY + 1);
            send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA, 64, &seg);
        }
        p.settle(10);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS, "{name}");
        assert!(p.r[rx].poll('r').is_none(), "{name}: nothing received");
        assert!(
            status(&p.r[rx]).contains(" ud_dropped=1 ud_qkey_dropped=1 "),
            "{name}"
        );
        // The sender's own Q_Key on request (the high bit): the same as B's here.
        {
            let seg = to_b(&p, hw::UD_QKEY_OWN);
            send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA, 64, &seg);
        }
        p.settle(10);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS, "{name}");
        let c = p.r[rx].cqe('r');
        assert_eq!((c.status, c.byte_len), (hw::WC_SUCCESS, 104), "{name}");
        let b = p.r[rx].b.qpn;
        assert_eq!(p.r[rx].state(b), hw::QPS_RTS, "{name}: never an error");
    }
}

#[test]
fn bad_datagrams_complete_in_error() {
    // Each case on a fresh pair: the WQE's status at the sender; the sender's QP ends in ERR.
    type Edit = fn(&mut hw::SendWqe, &mut hw::UdSeg, &mut u32);
    let cases: [(&str, Edit, u8); 5] = [
        ("above the MTU", |_, _, len| *len = 4097, hw::WC_LOC_LEN_ERR),
        (
            "a WRITE",
            |w, _, _| w.opcode = hw::WR_RDMA_WRITE,
            hw::WC_LOC_QP_OP_ERR,
        ),
        (
            "a READ",
            |w, _, _| w.opcode = hw::WR_RDMA_READ,
            hw::WC_LOC_QP_OP_ERR,
        ),
        ("port 2", |_, s, _| s.av.port_num = 2, hw::WC_LOC_QP_OP_ERR),
        (
            "a multicast LID",
            |_, s, _| s.av.dlid = 0xc001,
            hw::WC_LOC_QP_OP_ERR,
        ),
    ];
    for (what, edit, status) in cases {
        let (name, mut p) = pairs().remove(2);
        let mut w = wqe(hw::WR_SEND, SIGNALED, 1);
        let mut seg = to_b(&p, QKEY);
        let mut len = 100;
        edit(&mut w, &mut seg, &mut len);
        let small = p.r[0].small;
        post_ud(&mut p.r[0], w, &seg, &[sge(SMALL_VA, len, small)], &[]);
        p.settle(10);
        let c = p.r[0].cqe('s');
        assert_eq!(c.status, status, "{name}: {what}");
        let a = p.r[0].a.qpn;
        assert_eq!(p.r[0].state(a), hw::QPS_ERR, "{what}");
        assert!(status_of_sent(&p.r[0], 0), "{what}: nothing sent");
    }
    // A receive buffer shorter than the GRH area and the payload: LOC_LEN_ERR at the
    // receiver, whose QP goes to ERR.
    let (name, mut p) = pairs().remove(2);
    recv(&mut p, BIG_VA, 40 + 99);
    {
        let seg = to_b(&p, QKEY);
        send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA, 100, &seg);
    }
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS, "{name}");
    assert_eq!(p.r[1].cqe('r').status, hw::WC_LOC_LEN_ERR, "{name}");
    let b = p.r[1].b.qpn;
    assert_eq!(p.r[1].state(b), hw::QPS_ERR, "{name}");
}

fn status_of_sent(r: &Rig, n: u64) -> bool {
    status(r).contains(&format!(" ud_sent={n} "))
}

#[test]
fn ud_state_machine_takes_a_qkey_and_no_path() {
    let mut r = Rig::bare(1);
    let qp = r.qp_of(hw::QP_TYPE_UD, RINGS + 0x30_0000, RINGS + 0x34_0000);
    let mut a = hw::QpAttr {
        qp_state: hw::QPS_INIT,
        port_num: 1,
        qkey: 5,
        ..Default::default()
    };
    let init = hw::QP_ATTR_STATE | hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT;
    assert_eq!(r.modify(qp.qpn, init, &a), hw::AQ_BAD_PARAM, "no Q_Key");
    assert_eq!(r.modify(qp.qpn, init | hw::QP_ATTR_QKEY, &a), hw::AQ_OK);
    a.qp_state = hw::QPS_RTR;
    let av = hw::QP_ATTR_STATE | hw::QP_ATTR_AV;
    assert_eq!(r.modify(qp.qpn, av, &a), hw::AQ_BAD_PARAM, "no AV on UD");
    assert_eq!(r.modify(qp.qpn, hw::QP_ATTR_STATE, &a), hw::AQ_OK);
    a.qp_state = hw::QPS_RTS;
    a.sq_psn = 3;
    assert_eq!(
        r.modify(qp.qpn, hw::QP_ATTR_STATE | hw::QP_ATTR_SQ_PSN, &a),
        hw::AQ_OK
    );
    assert_eq!(r.query(qp.qpn).qkey, 5);
    a.qkey = 9;
    assert_eq!(r.modify(qp.qpn, hw::QP_ATTR_QKEY, &a), hw::AQ_OK);
    assert_eq!(r.query(qp.qpn).qkey, 9);
}

#[test]
fn datagrams_wait_in_order_for_a_receive_posted_just_after_them() {
    for (name, mut p) in pairs() {
        let rx = p.rx();
        let data = bytes(5, 300);
        p.r[0].fill(SMALL_VA, &data);
        let seg = to_b(&p, QKEY);
        send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA, 100, &seg);
        send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA + 100, 200, &seg);
        // The datagrams arrive; no timer runs (no time passes).
        p.settle(0);
        assert!(p.r[rx].poll('r').is_none(), "{name}");
        assert!(p.r[rx].nic.timers_pending(), "{name}: they wait");
        recv(&mut p, BIG_VA, 4096);
        recv(&mut p, BIG_VA + 0x2000, 4096);
        p.settle(0);
        for (i, (at, n)) in [(0, 100), (100, 200)].into_iter().enumerate() {
            let c = p.r[rx].cqe('r');
            assert_eq!(
                (c.status, c.byte_len),
                (hw::WC_SUCCESS, 40 + n),
                "{name}: {i}"
            );
            let got = p.r[rx].read(BIG_VA + i as u64 * 0x2000 + GRH, n as usize);
            assert_eq!(got, &data[at..at + n as usize], "{name}: {i}, in order");
        }
        assert!(status(&p.r[rx]).contains(" ud_dropped=0 "), "{name}");
        // Without a receive in time: dropped at the timer, counted.
        send(&mut p, hw::WR_SEND, SIGNALED, SMALL_VA, 100, &seg);
        p.settle(3);
        assert!(p.r[rx].poll('r').is_none(), "{name}");
        assert!(!p.r[rx].nic.timers_pending(), "{name}: nothing waits");
        assert!(status(&p.r[rx]).contains(" ud_dropped=1 "), "{name}");
    }
}
