//! UC (unreliable connected) QPs in the one engine, in loopback (the NIC's own queue and
//! frames over the test wire) and between two NICs: SEND, SEND with immediate, WRITE and
//! WRITE with immediate arrive, no ACK is ever sent and the sender completes without one;
//! a lost packet drops its message (the receive WQE serves the next one); no receive WQE
//! or a refused rkey drops the message silently; READ and atomics are refused; UC's state
//! machine; a long queue of large messages sent a window per call, the rest by the timer.

mod common;

use std::sync::{Arc, Mutex};

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::packet;
use ordma_model::engine::wire::{self, Frame};

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
/// Path MTU 256: messages of a few packets.
const MTU: u8 = 1;

/// UC QPs A (requester, `r[0]`) and B (on `r[p.rx()]`) connected on each of the ways
/// packets travel: the NIC's own queue, frames over the test wire to the NIC itself, two
/// NICs.
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
            x.uc_pair();
        }
        let rx = r.len() - 1;
        let (a, b) = (r[0].a.qpn, r[rx].b.qpn);
        let peer = r.len() as u16;
        r[0].connect_uc(a, b, 100, 500, |at| {
            at.path_mtu = MTU;
            at.ah.dlid = peer;
        });
        r[rx].connect_uc(b, a, 500, 100, |at| {
            at.path_mtu = MTU;
            at.ah.dlid = 1;
        });
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

/// Posts a send of `op` of `len` bytes from A's small MR at `src`, to B's big MR at
/// `dst` (WRITE) with immediate data, and rings the doorbell.
fn post(p: &mut Pair, op: u8, src: u64, len: u32, dst: u64) -> u16 {
    let i = put(p, op, src, len, dst);
    p.r[0].ring_sq('a');
    i
}

/// [`post`] without the doorbell.
fn put(p: &mut Pair, op: u8, src: u64, len: u32, dst: u64) -> u16 {
    let rx = p.rx();
    let (small, big) = (p.r[0].small, p.r[rx].big);
    let mut w = wqe(op, SIGNALED, 1);
    (w.remote_addr, w.rkey, w.imm) = (dst, big, 0x0a0b_0c0d);
    p.r[0].put_send('a', w, &[sge(src, len, small)], &[])
}

fn recv(p: &mut Pair, at: u64, len: u32) -> u16 {
    let rx = p.rx();
    let big = p.r[rx].big;
    p.r[rx].recv('b', &[sge(at, len, big)])
}

#[test]
fn sends_and_writes_arrive_with_no_ack() {
    for (name, mut p) in pairs() {
        let seen = record(&mut p);
        let rx = p.rx();
        let data = bytes(7, 1000);
        p.r[0].fill(SMALL_VA, &data);
        recv(&mut p, BIG_VA, 4096);
        recv(&mut p, BIG_VA + 0x1000, 4096);
        recv(&mut p, BIG_VA + 0x2000, 4096);
        post(&mut p, hw::WR_SEND, SMALL_VA, 1000, 0);
        post(&mut p, hw::WR_SEND_IMM, SMALL_VA, 10, 0);
        post(
            &mut p,
            hw::WR_RDMA_WRITE,
            SMALL_VA,
            1000,
            BIG_VA + 0x10_0000,
        );
        post(
            &mut p,
            hw::WR_RDMA_WRITE_IMM,
            SMALL_VA,
            700,
            BIG_VA + 0x20_0000,
        );
        p.settle(10);
        for (i, op, len) in [
            (0, hw::WC_SEND, 1000),
            (1, hw::WC_SEND, 10),
            (2, hw::WC_RDMA_WRITE, 1000),
            (3, hw::WC_RDMA_WRITE, 700),
        ] {
            let c = p.r[0].cqe('s');
            assert_eq!(
                (c.status, c.opcode, c.wqe_index, c.byte_len),
                (hw::WC_SUCCESS, op, i, len),
                "{name}: send {i}"
            );
        }
        let want = [
            (hw::WC_RECV, 1000, 0),
            (hw::WC_RECV, 10, hw::CQE_FLAG_IMM),
            (hw::WC_RECV_RDMA_IMM, 700, hw::CQE_FLAG_IMM),
        ];
        for (i, (op, len, imm)) in want.into_iter().enumerate() {
            let c = p.r[rx].cqe('r');
            assert_eq!(
                (
                    c.status,
                    c.opcode,
                    c.wqe_index,
                    c.byte_len,
                    c.flags & hw::CQE_FLAG_IMM
                ),
                (hw::WC_SUCCESS, op, i as u16, len, imm),
                "{name}: receive {i}"
            );
            assert_eq!(c.src_qp, p.r[0].a.qpn);
        }
        assert_eq!(p.r[rx].read(BIG_VA, 1000), data, "{name}");
        assert_eq!(p.r[rx].read(BIG_VA + 0x1000, 10), data[..10], "{name}");
        assert_eq!(p.r[rx].read(BIG_VA + 0x10_0000, 1000), data, "{name}");
        assert_eq!(p.r[rx].read(BIG_VA + 0x20_0000, 700), data[..700], "{name}");
        assert_eq!(p.ticks, 0, "{name}: no timer");
        let seen = seen.lock().unwrap();
        if name != "loopback" {
            // 4 + 1 + 4 + 3 packets at 256 bytes, all UC requests, no answer.
            assert_eq!(seen.len(), 12, "{name}");
            assert!(
                seen.iter().all(|&op| packet::transport(op) == packet::UC),
                "{name}: {seen:x?}"
            );
        }
        assert_eq!(p.r[rx].nic.status_snapshot().uc_dropped, 0, "{name}");
    }
}

#[test]
fn a_lost_packet_drops_its_message_and_its_receive_serves_the_next() {
    for (name, mut p) in pairs() {
        if name == "loopback" {
            continue; // nothing is lost in the NIC's own queue
        }
        let rx = p.rx();
        // The second packet of the first SEND (PSNs 100..=103), and of the first WRITE
        // with immediate (108..=111), lost.
        p.fault = Box::new(move |_, f: &Frame| {
            if matches!(f.packet.bth.psn, 101 | 109) {
                Act::Drop
            } else {
                Act::Pass
            }
        });
        let (one, two) = (bytes(1, 1000), bytes(2, 900));
        p.r[0].fill(SMALL_VA, &one);
        p.r[0].fill(SMALL_VA + 0x1000, &two);
        recv(&mut p, BIG_VA, 4096);
        recv(&mut p, BIG_VA + 0x1000, 4096);
        post(&mut p, hw::WR_SEND, SMALL_VA, 1000, 0);
        post(&mut p, hw::WR_SEND, SMALL_VA + 0x1000, 900, 0);
        post(
            &mut p,
            hw::WR_RDMA_WRITE_IMM,
            SMALL_VA,
            1000,
            BIG_VA + 0x10_0000,
        );
        post(
            &mut p,
            hw::WR_RDMA_WRITE_IMM,
            SMALL_VA + 0x1000,
            900,
            BIG_VA + 0x20_0000,
        );
        p.settle(10);
        for i in 0..4 {
            let c = p.r[0].cqe('s');
            assert_eq!((c.status, c.wqe_index), (hw::WC_SUCCESS, i), "{name}: sent");
        }
        // The first SEND is lost; the second lands in the first receive WQE.
        let c = p.r[rx].cqe('r');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RECV, 0, 900),
            "{name}"
        );
        assert_eq!(p.r[rx].read(BIG_VA, 900), two, "{name}");
        // The first WRITE with immediate lost too; the second consumes the second WQE.
        let c = p.r[rx].cqe('r');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RECV_RDMA_IMM, 1, 900),
            "{name}"
        );
        assert_eq!(p.r[rx].read(BIG_VA + 0x20_0000, 900), two, "{name}");
        assert!(p.r[rx].poll('r').is_none(), "{name}");
        // Of each lost message, its two packets after the lost one were dropped.
        assert_eq!(p.r[rx].nic.status_snapshot().uc_dropped, 4, "{name}");
        let b = p.r[rx].b.qpn;
        assert_eq!(p.r[rx].state(b), hw::QPS_RTS, "{name}");
        assert_eq!(p.ticks, 0, "{name}: nothing sent again");
    }
}

#[test]
fn no_receive_or_a_refused_rkey_drops_the_message_silently() {
    for (name, mut p) in pairs() {
        let rx = p.rx();
        let data = bytes(3, 600);
        p.r[0].fill(SMALL_VA, &data);
        p.r[rx].fill(BIG_VA + 0x10_0000, &[0xee; 600]);
        // No receive posted: dropped (no RNR on UC).
        post(&mut p, hw::WR_SEND, SMALL_VA, 600, 0);
        // A bad rkey: dropped, nothing written, no error.
        let small = p.r[0].small;
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (BIG_VA + 0x10_0000, p.r[rx].big ^ 0x80);
        p.r[0].send('a', w, &[sge(SMALL_VA, 600, small)], &[]);
        // Then a SEND with its receive posted arrives.
        recv(&mut p, BIG_VA, 4096);
        post(&mut p, hw::WR_SEND, SMALL_VA, 600, 0);
        p.settle(10);
        for i in 0..3 {
            let c = p.r[0].cqe('s');
            assert_eq!((c.status, c.wqe_index), (hw::WC_SUCCESS, i), "{name}");
        }
        let c = p.r[rx].cqe('r');
        assert_eq!((c.status, c.byte_len), (hw::WC_SUCCESS, 600), "{name}");
        assert!(p.r[rx].poll('r').is_none(), "{name}");
        assert_eq!(p.r[rx].read(BIG_VA, 600), data, "{name}");
        assert_eq!(p.r[rx].read(BIG_VA + 0x10_0000, 600), [0xee; 600], "{name}");
        let b = p.r[rx].b.qpn;
        assert_eq!(p.r[rx].state(b), hw::QPS_RTS, "{name}: no error");
        // The SEND without a receive: its first packet refused, the other two dropped;
        // the WRITE's first refused, two dropped.
        assert_eq!(p.r[rx].nic.status_snapshot().uc_dropped, 6, "{name}");
        let events = p.r[rx].events();
        assert!(
            events.iter().all(|&(k, _)| k == hw::EVENT_QP_COMM_EST),
            "{name}: {events:?}"
        );
    }
}

#[test]
fn reads_and_atomics_are_refused() {
    for op in [
        hw::WR_RDMA_READ,
        hw::WR_ATOMIC_FETCH_AND_ADD,
        hw::WR_ATOMIC_CMP_AND_SWP,
        hw::WR_ATOMIC_WRITE,
        hw::WR_FLUSH,
    ] {
        for (name, mut p) in pairs() {
            let rx = p.rx();
            let big = p.r[rx].big;
            let small = p.r[0].small;
            if hw::is_flush_or_atomic_write(op) {
                // No SGEs, as they have none; a FLUSH's segment all zero.
                let seg = hw::AtomicSeg::default();
                p.r[0].put_atomic('a', op, SIGNALED, BIG_VA, big, seg, &[]);
                p.r[0].ring_sq('a');
            } else if hw::is_atomic(op) {
                let s = [sge(SMALL_VA, 8, small)];
                let seg = hw::AtomicSeg::default();
                p.r[0].put_atomic('a', op, SIGNALED, BIG_VA, big, seg, &s);
                p.r[0].ring_sq('a');
            } else {
                let mut w = wqe(op, SIGNALED, 1);
                (w.remote_addr, w.rkey) = (BIG_VA, big);
                p.r[0].send('a', w, &[sge(SMALL_VA, 64, small)], &[]);
            }
            p.settle(10);
            let c = p.r[0].cqe('s');
            assert_eq!(c.status, hw::WC_LOC_QP_OP_ERR, "{name}: opcode {op}");
            let a = p.r[0].a.qpn;
            assert_eq!(p.r[0].state(a), hw::QPS_ERR, "{name}");
        }
    }
}

#[test]
fn uc_state_machine_takes_ucs_attributes() {
    let mut r = Rig::bare(1);
    r.uc_pair();
    let a = r.a.qpn;
    let attr = hw::QpAttr {
        qp_state: hw::QPS_INIT,
        port_num: 1,
        path_mtu: hw::MTU_4096,
        ah: hw::QpAh {
            dlid: 1,
            port_num: 1,
            ..Default::default()
        },
        timeout: 14,
        ..Default::default()
    };
    let init =
        hw::QP_ATTR_STATE | hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_ACCESS_FLAGS;
    assert_eq!(r.modify(a, init, &attr), hw::AQ_OK);
    let rtr = hw::QP_ATTR_STATE
        | hw::QP_ATTR_AV
        | hw::QP_ATTR_PATH_MTU
        | hw::QP_ATTR_DEST_QPN
        | hw::QP_ATTR_RQ_PSN;
    let to_rtr = hw::QpAttr {
        qp_state: hw::QPS_RTR,
        ..attr
    };
    // RC's RTR attributes are not UC's.
    let rc_rtr = rtr | hw::QP_ATTR_MAX_DEST_RD_ATOMIC | hw::QP_ATTR_MIN_RNR_TIMER;
    assert_eq!(r.modify(a, rc_rtr, &to_rtr), hw::AQ_BAD_PARAM);
    assert_eq!(r.modify(a, rtr, &to_rtr), hw::AQ_OK);
    let to_rts = hw::QpAttr {
        qp_state: hw::QPS_RTS,
        ..attr
    };
    let rts = hw::QP_ATTR_STATE | hw::QP_ATTR_SQ_PSN;
    assert_eq!(
        r.modify(a, rts | hw::QP_ATTR_TIMEOUT, &to_rts),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(
        r.modify(a, rts | hw::QP_ATTR_MAX_QP_RD_ATOMIC, &to_rts),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(r.modify(a, rts, &to_rts), hw::AQ_OK);
    assert_eq!(r.state(a), hw::QPS_RTS);
    // And an RC QP still wants RC's.
    let b = r.b.qpn;
    let rc = r.qp(RINGS + 0x10_0000, RINGS + 0x20_0000);
    assert_eq!(r.modify(rc.qpn, init, &attr), hw::AQ_OK);
    assert_eq!(r.modify(rc.qpn, rtr, &to_rtr), hw::AQ_BAD_PARAM);
    let _ = b;
}

#[test]
fn a_long_queue_goes_a_window_per_call_the_rest_by_the_timer() {
    for (name, mut p) in pairs() {
        if name != "loopback" {
            continue;
        }
        let rx = p.rx();
        // 12 WRITEs of 64 KiB at MTU 256: 3072 packets, 12 windows.
        for k in 0..12u64 {
            let dst = BIG_VA + (k << 20);
            put(&mut p, hw::WR_RDMA_WRITE, SMALL_VA, 0x1_0000, dst);
        }
        p.r[0].ring_sq('a');
        let mut done = 0;
        while p.r[0].poll('s').is_some() {
            done += 1;
        }
        assert!(done < 12, "{name}: all {done} in one call");
        assert!(
            p.r[0].nic.timers_pending(),
            "{name}: the timer sends the rest"
        );
        p.settle(100);
        while let Some(c) = p.r[0].poll('s') {
            assert_eq!(c.status, hw::WC_SUCCESS);
            done += 1;
        }
        assert_eq!(done, 12, "{name}");
        assert!(p.ticks > 1, "{name}: {} ticks", p.ticks);
        assert!(!p.r[rx].nic.timers_pending());
    }
}

#[test]
fn answers_to_a_uc_qp_are_ignored() {
    for (name, mut p) in pairs() {
        if name != "two NICs" {
            continue;
        }
        post(&mut p, hw::WR_SEND, SMALL_VA, 10, 0);
        p.settle(10);
        assert!(p.r[0].poll('s').is_some());
        // An ACK and a NAK from NIC 2 to UC QP A, and an RC request: nothing happens.
        for (op, syndrome) in [
            (packet::ACKNOWLEDGE, packet::Syndrome::Ack(0x1f)),
            (
                packet::ACKNOWLEDGE,
                packet::Syndrome::Nak(packet::NakCode::RemoteAccess),
            ),
            (packet::SEND_ONLY, packet::Syndrome::Ack(0)),
        ] {
            let pkt = packet::Packet {
                bth: packet::Bth {
                    opcode: op,
                    dest_qp: p.r[0].a.qpn,
                    psn: 100,
                    ..Default::default()
                },
                aeth: (op == packet::ACKNOWLEDGE).then_some(packet::Aeth { syndrome, msn: 0 }),
                ..Default::default()
            };
            let f = wire::encode(
                &ordma_model::engine::port::lid_route(2, 1),
                p.r[1].b.qpn,
                &pkt,
                &[],
            );
            let r = &mut p.r[0];
            r.nic.receive_frame(&f, &r.mem, &r.irq);
        }
        assert!(
            p.r[0].poll('s').is_none() && p.r[0].poll('r').is_none(),
            "{name}"
        );
        let a = p.r[0].a.qpn;
        assert_eq!(p.r[0].state(a), hw::QPS_RTS, "{name}");
    }
}
