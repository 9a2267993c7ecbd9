//! The RC engine between NICs over the wire: `Nic`s (LIDs 1, 2, once 3) in one test, QP A
//! of NIC 1 connected to QP B of NIC 2, frames carried by an in-memory wire that can drop,
//! duplicate and reorder them; and twice by the real Unix datagram sockets (`SocketWire`
//! polled by the test; two `Device`s with their wire and timer threads).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::counters::Anomaly;
use ordma_model::engine::wire;
use ordma_model::engine::{packet, port};

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;

const SIZES: [u32; 8] = [0, 1, 3, 4095, 4096, 4097, 65536 + 5, 2 << 20];

/// SEND, WRITE, WRITE_IMM, READ of `size` bytes from NIC 1 to NIC 2 (or, looped, from QP
/// A to QP B of NIC 1), bytes checked.
fn every_op(p: &mut Pair, n: u64, size: u32) {
    let rx = p.rx();
    let (a, b) = (p.r[0].a.qpn, p.r[rx].b.qpn);
    let big = p.r[0].big;
    let data = bytes(n, size as usize);
    let src = BIG_VA + 0x1234;
    let dst = BIG_VA + (8 << 20) + 0x777;
    let slack = vec![0xee; size as usize + 16];
    // SEND with immediate into a receive on B.
    p.r[0].fill(src, &data);
    p.r[rx].fill(dst, &slack);
    let big1 = p.r[rx].big;
    let ri = p.r[rx].recv('b', &split(dst, size + 16, 3, big1));
    let mut w = wqe(hw::WR_SEND_IMM, SIGNALED, 2);
    w.imm = 0x5151_0000 + n as u32;
    let si = p.r[0].send('a', w, &split(src, size, 2, big), &[]);
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!(
        (c.status, c.opcode, c.wqe_index, c.qpn, c.byte_len),
        (hw::WC_SUCCESS, hw::WC_SEND, si, a, size),
        "SEND size {size}"
    );
    let c = p.r[rx].cqe('r');
    assert_eq!(
        (
            c.status,
            c.opcode,
            c.wqe_index,
            c.qpn,
            c.byte_len,
            c.src_qp,
            c.imm
        ),
        (hw::WC_SUCCESS, hw::WC_RECV, ri, b, size, a, w.imm),
        "RECV size {size}"
    );
    let got = p.r[rx].read(dst, size as usize + 16);
    assert!(got[..size as usize] == data[..], "SEND size {size}: bytes");
    assert_eq!(got[size as usize..], [0xee; 16], "SEND size {size}: beyond");
    // WRITE with immediate (one receive), then a plain WRITE over it.
    let data2 = bytes(n + 1000, size as usize);
    p.r[0].fill(src, &data2);
    let ri = p.r[rx].recv('b', &[]);
    let mut w = wqe(hw::WR_RDMA_WRITE_IMM, SIGNALED, 1);
    (w.remote_addr, w.rkey, w.imm) = (dst, big1, 77);
    p.r[0].send('a', w, &[sge(src, size, big)], &[]);
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.opcode), (hw::WC_SUCCESS, hw::WC_RDMA_WRITE));
    let c = p.r[rx].cqe('r');
    assert_eq!(
        (c.status, c.opcode, c.wqe_index, c.byte_len, c.imm),
        (hw::WC_SUCCESS, hw::WC_RECV_RDMA_IMM, ri, size, 77),
        "WRITE_IMM size {size}"
    );
    assert!(p.r[rx].read(dst, size as usize) == data2, "WRITE_IMM bytes");
    let data3 = bytes(n + 2000, size as usize);
    p.r[0].fill(src + 1, &data3);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (dst, big1);
    p.r[0].send('a', w, &[sge(src + 1, size, big)], &[]);
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!(
        (c.status, c.opcode, c.byte_len),
        (hw::WC_SUCCESS, hw::WC_RDMA_WRITE, size)
    );
    assert!(p.r[rx].read(dst, size as usize) == data3, "WRITE bytes");
    // READ it back into NIC 1.
    let back = BIG_VA + (12 << 20) + 0x99;
    p.r[0].fill(back, &slack);
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 3);
    (w.remote_addr, w.rkey) = (dst, big1);
    p.r[0].send('a', w, &split(back, size, 3, big), &[]);
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!(
        (c.status, c.opcode, c.byte_len),
        (hw::WC_SUCCESS, hw::WC_RDMA_READ, size),
        "READ size {size}"
    );
    let got = p.r[0].read(back, size as usize + 16);
    assert!(got[..size as usize] == data3[..], "READ size {size}: bytes");
    assert_eq!(got[size as usize..], [0xee; 16], "READ size {size}: beyond");
    assert!(p.r[0].poll('s').is_none() && p.r[rx].poll('r').is_none());
    assert!(p.r[rx].poll('s').is_none() && p.r[0].poll('r').is_none());
}

#[test]
fn send_write_write_imm_read_every_size_between_nics() {
    let mut p = Pair::new(|_| {});
    for (n, &size) in SIZES.iter().enumerate() {
        every_op(&mut p, n as u64, size);
    }
    assert_eq!(p.ticks, 0, "nothing was lost: no timer fired");
    let (a, b) = (p.r[0].a.qpn, p.r[1].b.qpn);
    assert_eq!(p.r[0].state(a), hw::QPS_RTS);
    assert_eq!(p.r[1].state(b), hw::QPS_RTS);
    // PSNs moved on both sides alike.
    let (qa, qb) = (p.r[0].query(a), p.r[1].query(b));
    assert_eq!(qa.sq_psn, qb.rq_psn);
    assert!(qa.sq_psn > 100 + 512 * 4);
    for r in &p.r {
        assert_eq!(r.nic.counters().get(Anomaly::BadFrame), 0);
    }
}

#[test]
fn lost_frames_are_sent_again() {
    let mut p = Pair::new(|_| {});
    // One frame in seven (requests, ACKs and read responses alike), at random, is lost.
    // (Every 7th exactly can starve a retry whose frame count is a multiple of 7.)
    let mut x = 0x2545_f491_4f6c_dd1du64;
    p.fault = Box::new(move |_, _| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x % 7 == 0 {
            Act::Drop
        } else {
            Act::Pass
        }
    });
    for (n, &size) in [1u32, 4097, 300_000].iter().enumerate() {
        every_op(&mut p, n as u64, size);
    }
    assert!(p.ticks > 0, "the transport timer resent");
}

#[test]
fn lost_last_frame_and_lost_ack() {
    for which in [packet::SEND_ONLY_IMM, packet::ACKNOWLEDGE] {
        let mut p = Pair::new(|_| {});
        let mut once = true;
        p.fault = Box::new(move |_, f| {
            if f.packet.bth.opcode == which && once {
                once = false;
                Act::Drop
            } else {
                Act::Pass
            }
        });
        every_op(&mut p, 9, 100);
        assert_eq!(p.ticks, 1, "one timeout, one resend");
    }
}

#[test]
fn duplicated_frames_execute_once() {
    let mut p = Pair::new(|_| {});
    p.fault = Box::new(|_, _| Act::Dup);
    for (n, &size) in [0u32, 5, 8192, 70_000].iter().enumerate() {
        // every_op checks that one receive is consumed per message and no CQE more.
        every_op(&mut p, n as u64, size);
    }
    // A duplicated WRITE_IMM with two receives posted consumes one.
    let big1 = p.r[1].big;
    p.r[1].recv('b', &[]);
    p.r[1].recv('b', &[]);
    let mut w = wqe(hw::WR_RDMA_WRITE_IMM, SIGNALED, 0);
    (w.remote_addr, w.rkey, w.imm) = (BIG_VA, big1, 5);
    p.r[0].send('a', w, &[], &[]);
    p.settle(50);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
    assert_eq!(p.r[1].cqe('r').imm, 5);
    assert!(
        p.r[1].poll('r').is_none(),
        "the duplicate consumed no receive"
    );
}

#[test]
fn reordered_frames_nak_then_recover() {
    let mut p = Pair::new(|_| {});
    let naks = Arc::new(Mutex::new(0));
    let n2 = Arc::clone(&naks);
    let reads = Arc::new(Mutex::new(0));
    let r2 = Arc::clone(&reads);
    p.fault = Box::new(move |n, f| {
        if f.packet.bth.opcode == packet::READ_REQUEST {
            *r2.lock().unwrap() += 1;
        }
        if let Some(a) = f.packet.aeth {
            if a.syndrome == packet::Syndrome::Nak(packet::NakCode::PsnSeq) {
                *n2.lock().unwrap() += 1;
            }
        }
        if n % 5 == 0 {
            Act::Hold
        } else {
            Act::Pass
        }
    });
    for (n, &size) in [4096u32 * 3, 100_000, 1 << 20].iter().enumerate() {
        every_op(&mut p, n as u64, size);
    }
    assert!(*naks.lock().unwrap() > 0, "PSN sequence NAKs were sent");
    assert!(
        *reads.lock().unwrap() > 3,
        "gaps in the read responses asked for the rest"
    );
}

#[test]
fn peer_gone_ends_in_retry_exc_err() {
    let mut p = Pair::new(|a| a.retry_cnt = 3);
    let sent = Arc::new(Mutex::new(0));
    let s2 = Arc::clone(&sent);
    p.fault = Box::new(move |_, _| {
        *s2.lock().unwrap() += 1;
        Act::Drop
    });
    let a = p.r[0].a.qpn;
    let big1 = p.r[1].big;
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 0);
    (w.remote_addr, w.rkey) = (BIG_VA, big1);
    let si = p.r[0].send('a', w, &[], &[]);
    let w2 = p.r[0].send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    p.settle(100);
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_RETRY_EXC_ERR, si));
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_WR_FLUSH_ERR, w2));
    assert_eq!(p.r[0].state(a), hw::QPS_ERR);
    assert_eq!(
        *sent.lock().unwrap(),
        8,
        "the first send and retry_cnt resends, of both WQEs (in flight together)"
    );
    assert_eq!(p.ticks, 4);
    assert!(!p.r[0].nic.timers_pending());
}

#[test]
fn min_ack_timeout_holds_a_shorter_timer() {
    // With a minimum of 2^22 x 4.096 us (17 s), a QP asking timeout 10 (4 ms) is not sent
    // again at a tick 10 s on; with no minimum the same tick sends it again.
    for (min, frames) in [(22u8, 1), (0, 2)] {
        let mut p = Pair::new_with(|_| {}, |c| c.min_ack_timeout = min);
        let sent = Arc::new(Mutex::new(0));
        let s2 = Arc::clone(&sent);
        p.fault = Box::new(move |_, _| {
            *s2.lock().unwrap() += 1;
            Act::Drop
        });
        let big1 = p.r[1].big;
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 0);
        (w.remote_addr, w.rkey) = (BIG_VA, big1);
        p.r[0].send('a', w, &[], &[]);
        p.settle(1);
        assert_eq!(*sent.lock().unwrap(), frames, "min_ack_timeout {min}");
        assert!(
            p.r[0].nic.timers_pending(),
            "the WRITE still waits for its ACK"
        );
    }
}

#[test]
fn three_nics_on_one_segment() {
    // NIC 1's QP A to NIC 2's QP B, NIC 3's QP A to NIC 2's QP A: two peers send to
    // NIC 2 at once, frames interleaved on the one wire.
    let mut p = Pair::new(|_| {});
    let mut third = Rig::bare(3);
    third
        .nic
        .set_wire(Some(Box::new(TestWire(Arc::clone(&p.q)))));
    p.r.push(third);
    let (a3, a2) = (p.r[2].a.qpn, p.r[1].a.qpn);
    p.r[2].connect(a3, a2, 7000, 9000, |at| at.ah.dlid = 2);
    p.r[1].connect(a2, a3, 9000, 7000, |at| at.ah.dlid = 3);
    let n = 300_000;
    let (d1, d3) = (bytes(31, n), bytes(33, n));
    p.r[0].fill(BIG_VA, &d1);
    p.r[2].fill(BIG_VA, &d3);
    let big2 = p.r[1].big;
    p.r[1].recv('b', &[sge(BIG_VA, n as u32, big2)]);
    p.r[1].recv('a', &[sge(BIG_VA + (4 << 20), n as u32, big2)]);
    let (big1, big3) = (p.r[0].big, p.r[2].big);
    p.r[0].put_send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, n as u32, big1)],
        &[],
    );
    p.r[2].put_send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, n as u32, big3)],
        &[],
    );
    p.r[0].ring_sq('a');
    p.r[2].ring_sq('a');
    p.settle(10);
    assert_eq!(p.ticks, 0);
    for i in [0, 2] {
        let c = p.r[i].cqe('s');
        assert_eq!(
            (c.status, c.byte_len),
            (hw::WC_SUCCESS, n as u32),
            "NIC {}",
            i + 1
        );
    }
    let mut from: Vec<u32> = (0..2).map(|_| p.r[1].cqe('r').src_qp).collect();
    from.sort_unstable();
    assert_eq!(from, [p.r[0].a.qpn, a3]);
    assert!(p.r[1].read(BIG_VA, n) == d1, "from NIC 1");
    assert!(p.r[1].read(BIG_VA + (4 << 20), n) == d3, "from NIC 3");
}

#[test]
fn link_down_sends_nothing() {
    let mut p = Pair::new(|a| a.retry_cnt = 2);
    let r = &mut p.r[0];
    r.nic.set_link(false, &r.mem, &r.irq);
    r.send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_RETRY_EXC_ERR);
    assert_eq!((p.frames, p.ticks), (0, 3));
}

#[test]
fn infinite_timeout_never_gives_up_and_no_lid_is_no_route() {
    let mut p = Pair::new(|a| a.timeout = 0);
    p.fault = Box::new(|_, _| Act::Drop);
    p.r[0].send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    p.settle(10);
    assert!(p.r[0].poll('s').is_none(), "timeout 0: waits forever");
    assert!(!p.r[0].nic.timers_pending());
    // Without a wire, another LID is no route, as before.
    let mut r = Rig::with(|a| a.ah.dlid = 9);
    r.send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    assert_eq!(r.cqe('s').status, hw::WC_RETRY_EXC_ERR);
}

#[test]
fn rnr_across_the_wire() {
    let mut p = Pair::new(|a| a.rnr_retry = 7);
    let src = BIG_VA;
    let big = p.r[0].big;
    let data = bytes(3, 10_000);
    p.r[0].fill(src, &data);
    let si = p.r[0].send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(src, 10_000, big)],
        &[],
    );
    p.settle(3);
    assert!(p.r[0].poll('s').is_none(), "RNR: waiting");
    let big1 = p.r[1].big;
    let dst = BIG_VA + (1 << 20);
    p.r[1].recv('b', &[sge(dst, 10_000, big1)]);
    p.settle(3);
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_SUCCESS, si));
    assert_eq!(p.r[1].cqe('r').byte_len, 10_000);
    assert!(p.r[1].read(dst, 10_000) == data);
    // rnr_retry 1: one retry, then RNR_RETRY_EXC_ERR.
    let mut p = Pair::new(|a| a.rnr_retry = 1);
    p.r[0].send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_RNR_RETRY_EXC_ERR);
    assert_eq!(p.ticks, 1);
}

#[test]
fn remote_access_error_across_the_wire() {
    let mut p = Pair::new(|_| {});
    let (a, b) = (p.r[0].a.qpn, p.r[1].b.qpn);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 0);
    (w.remote_addr, w.rkey, w.inline_len, w.flags) =
        (RO_VA, p.r[1].ro, 4, SIGNALED | hw::WQE_FLAG_INLINE);
    p.r[0].send('a', w, &[], b"abcd");
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_REM_ACCESS_ERR);
    assert_eq!(p.r[0].state(a), hw::QPS_ERR);
    assert_eq!(p.r[1].state(b), hw::QPS_ERR);
}

#[test]
fn hostile_frames_never_panic() {
    let mut p = Pair::new(|_| {});
    // A good frame to mutate.
    let pkt = packet::Packet {
        bth: packet::Bth {
            opcode: packet::SEND_ONLY,
            dest_qp: p.r[1].b.qpn,
            psn: 500,
            ack_req: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let good = wire::encode(&port::lid_route(1, 2), 2, &pkt, b"xyz");
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let r = &mut p.r[1];
    for i in 0..20_000 {
        let f: Vec<u8> = if i % 2 == 0 {
            let n = (rnd() % 200) as usize;
            (0..n).map(|_| rnd() as u8).collect()
        } else {
            let mut f = good.clone();
            for _ in 0..1 + rnd() % 3 {
                let at = (rnd() as usize) % f.len();
                f[at] = rnd() as u8;
            }
            f.truncate(f.len() - (rnd() % 2) as usize * (rnd() as usize % f.len()));
            f
        };
        r.nic.receive_frame(&f, &r.mem, &r.irq);
    }
    let bad = r.nic.counters().get(Anomaly::BadFrame);
    assert!(bad > 19_000, "{bad}");
    // A good frame for another LID is refused and counted too.
    let other = wire::encode(&port::lid_route(1, 5), 2, &pkt, b"xyz");
    r.nic.receive_frame(&other, &r.mem, &r.irq);
    assert_eq!(r.nic.counters().get(Anomaly::BadFrame), bad + 1);
    // Valid frames with hostile headers: every opcode (UD's too, at RC QPs), PSNs, QPNs.
    let ops = [
        packet::SEND_LAST_INV,
        packet::SEND_ONLY_INV,
        packet::FLUSH,
        packet::ATOMIC_WRITE,
        packet::UD_SEND_ONLY,
        packet::UD_SEND_ONLY_IMM,
    ];
    for op in (0..=0x14u8).chain(ops) {
        for (qpn, psn) in [(p.r[1].b.qpn, 500), (p.r[1].b.qpn, 0x80_0000), (77, 500)] {
            let ext = packet::headers(op).unwrap();
            let pkt = packet::Packet {
                bth: packet::Bth {
                    opcode: op,
                    dest_qp: qpn,
                    psn,
                    ack_req: true,
                    ..Default::default()
                },
                reth: ext.reth.then_some(packet::Reth {
                    va: u64::MAX - 3,
                    rkey: rnd() as u32,
                    dma_len: u32::MAX,
                }),
                aeth: ext.aeth.then_some(packet::Aeth {
                    syndrome: packet::Syndrome::Ack(0),
                    msn: 0,
                }),
                imm: ext.imm.then_some([9; 4]),
                atomic: ext.atomic.then_some(packet::AtomicEth {
                    va: u64::MAX - 3,
                    rkey: rnd() as u32,
                    swap_add: rnd(),
                    compare: rnd(),
                }),
                atomic_ack: ext.atomic_ack.then_some(rnd()),
                deth: ext.deth.then_some(packet::Deth {
                    qkey: rnd() as u32,
                    src_qp: qpn,
                }),
                feth: ext.feth.then_some(packet::Feth {
                    placement: rnd() as u8 & 0xf,
                    level: rnd() as u8 & 3,
                }),
                ieth: ext.ieth.then_some(rnd() as u32 | (1 << 31)),
            };
            let f = wire::encode(&port::lid_route(1, 2), 2, &pkt, &[7; 33]);
            let r = &mut p.r[1];
            r.nic.receive_frame(&f, &r.mem, &r.irq);
        }
    }
    p.settle(10);
}

#[test]
fn socket_wire_carries_frames() {
    let (batches, _) = socket_write(None);
    assert!(batches > 0, "several frames per datagram");
    // A send buffer too small for a whole batch: smaller batches, every byte still there.
    let (batches, largest) = socket_write(Some(64 << 10));
    assert!(batches > 1, "several frames per datagram");
    let small = ordma_model::wire::SMALL_BATCH;
    assert!(largest <= small, "{largest} bytes, over {small}");
}

/// A silenced socket wire (its NIC died softly) sends nothing, its own frames or its
/// host's; unsilenced (a function reset revived the NIC) it sends again.
#[test]
fn a_silenced_socket_wire_sends_nothing() {
    let dir = std::env::temp_dir().join(format!("ordma-wire-silence-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mac1, mac2) = (port::lid_mac(1), port::lid_mac(2));
    let (w, _) = ordma_model::wire::SocketWire::bind(&dir, mac1).unwrap();
    let (_, rx) = ordma_model::wire::SocketWire::bind(&dir, mac2).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut frame = vec![0u8; 64];
    frame[..6].copy_from_slice(&mac2);
    frame[6..12].copy_from_slice(&mac1);
    let mut buf = vec![0u8; 256];
    for silent in [true, false] {
        wire::Wire::silence(&w, silent);
        w.send_now(mac2, &frame);
        wire::Wire::send(&w, mac2, &frame);
        wire::Wire::flush(&w);
        let got = std::iter::from_fn(|| rx.recv(&mut buf).ok()).count();
        assert_eq!(got, if silent { 0 } else { 2 }, "silent {silent}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Frames to 1000 random MACs (a user's UD datagrams, each WQE with its own destination
/// MAC): the port keeps at most `MAX_PEERS` peers, evicting idle ones (counted), and a real
/// peer among them still gets every frame sent to it.
#[test]
fn a_sender_to_random_macs_grows_no_table() {
    let dir = std::env::temp_dir().join(format!("ordma-wire-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mac1, mac2) = (port::lid_mac(1), port::lid_mac(2));
    let (w, _) = ordma_model::wire::SocketWire::bind(&dir, mac1).unwrap();
    let (_, rx) = ordma_model::wire::SocketWire::bind(&dir, mac2).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut frame = vec![0u8; 64];
    frame[6..12].copy_from_slice(&mac1);
    let mut sent = 0;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..1000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // A unicast MAC (group bit clear) that no port has.
        let mut mac: [u8; 6] = x.to_le_bytes()[..6].try_into().unwrap();
        mac[0] &= 0xfe;
        wire::Wire::send(&w, mac, &frame);
        if i % 100 == 0 {
            wire::Wire::send(&w, mac2, &frame);
            sent += 1;
        }
        wire::Wire::flush(&w);
    }
    let report = wire::Wire::impairments(&w);
    let field = |k: &str| -> usize {
        report
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    assert!(
        field("wire_peers") <= ordma_model::wire::MAX_PEERS,
        "{report}"
    );
    assert!(
        field("wire_peers_evicted") >= 1000 - ordma_model::wire::MAX_PEERS,
        "{report}"
    );
    let mut buf = vec![0u8; 256];
    let got = std::iter::from_fn(|| rx.recv(&mut buf).ok()).count();
    assert_eq!(got, sent, "the real peer got every frame");
    std::fs::remove_dir_all(&dir).ok();
}

/// A 200 000-byte WRITE between two NICs on `SocketWire`s polled by the test, each socket
/// to a peer asking for `sndbuf` bytes of send buffer: the batches that came and the
/// largest datagram.
fn socket_write(sndbuf: Option<usize>) -> (usize, usize) {
    let dir = std::env::temp_dir().join(format!(
        "ordma-wire-test-{}-{}",
        std::process::id(),
        sndbuf.unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut r = [Rig::bare(1), Rig::bare(2)];
    let mut rx = Vec::new();
    for (i, x) in r.iter_mut().enumerate() {
        let (mut w, sock) =
            ordma_model::wire::SocketWire::bind(&dir, port::lid_mac(i as u16 + 1)).unwrap();
        if let Some(b) = sndbuf {
            w.set_send_buffer(b);
        }
        sock.set_nonblocking(true).unwrap();
        x.nic.set_wire(Some(Box::new(w)));
        rx.push(sock);
    }
    let (a, b) = (r[0].a.qpn, r[1].b.qpn);
    r[0].connect(a, b, 1, 2, |at| at.ah.dlid = 2);
    r[1].connect(b, a, 2, 1, |at| at.ah.dlid = 1);
    let data = bytes(8, 200_000);
    let (big0, big1) = (r[0].big, r[1].big);
    r[0].fill(BIG_VA, &data);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + 0x100, big1);
    r[0].send('a', w, &[sge(BIG_VA, 200_000, big0)], &[]);
    // Used without a `Device`, the NIC's owner (the test) sends what its actions gathered.
    r[0].nic.flush_wire();
    let mut buf = vec![0u8; wire::MAX_BATCH];
    let (mut batches, mut largest) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let cqe = loop {
        let mut quiet = true;
        for (i, s) in rx.iter().enumerate() {
            while let Ok(n) = s.recv(&mut buf) {
                quiet = false;
                batches += usize::from(buf[..4] == wire::BATCH_MAGIC);
                largest = largest.max(n);
                r[i].nic.receive_datagram(&buf[..n], &r[i].mem, &r[i].irq);
                r[i].nic.flush_wire();
            }
        }
        if let Some(c) = r[0].poll('s') {
            break c;
        }
        if quiet {
            r[0].nic.tick(Instant::now(), &r[0].mem, &r[0].irq);
            r[0].nic.flush_wire();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(Instant::now() < deadline, "no completion");
    };
    assert_eq!(cqe.status, hw::WC_SUCCESS);
    assert!(r[1].read(BIG_VA + 0x100, 200_000) == data);
    std::fs::remove_dir_all(&dir).ok();
    (batches, largest)
}

#[test]
fn two_devices_on_the_socket_wire_in_threads() {
    use ordma_model::device::Device;

    let dir = std::env::temp_dir().join(format!("ordma-wire-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut r = [Rig::bare(1), Rig::bare(2)];
    let (a, b) = (r[0].a.qpn, r[1].b.qpn);
    r[0].connect(a, b, 10, 20, |at| at.ah.dlid = 2);
    r[1].connect(b, a, 20, 10, |at| at.ah.dlid = 1);
    let size = 2usize << 20;
    let data = bytes(21, size);
    let (big0, big1) = (r[0].big, r[1].big);
    r[0].fill(BIG_VA, &data);
    // The NICs move into devices on the real wire, with their timer threads.
    let devs = on_socket_wire(&mut r, &dir);
    let ring = |x: &Rig, dev: &Device| {
        let v = hw::db_value(x.a.qpn, x.a.sq_pi);
        let off = u64::from(PAGE) * hw::DB_PAGE_SIZE as u64 + hw::DB_SQ as u64;
        let mut l = dev.lock();
        let (mem, irq) = (l.mem.clone(), l.irq);
        l.nic.doorbell_write(off, 4, v, &*mem, irq);
    };
    let wait = |x: &mut Rig| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(c) = x.poll('s') {
                return c;
            }
            assert!(Instant::now() < deadline, "no completion");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + (4 << 20), big1);
    r[0].put_send('a', w, &[sge(BIG_VA, size as u32, big0)], &[]);
    ring(&r[0], &devs[0]);
    let c = wait(&mut r[0]);
    assert_eq!((c.status, c.byte_len), (hw::WC_SUCCESS, size as u32));
    assert!(r[1].read(BIG_VA + (4 << 20), size) == data, "WRITE bytes");
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + (4 << 20), big1);
    r[0].put_send('a', w, &[sge(BIG_VA + (8 << 20), size as u32, big0)], &[]);
    ring(&r[0], &devs[0]);
    let c = wait(&mut r[0]);
    assert_eq!((c.status, c.byte_len), (hw::WC_SUCCESS, size as u32));
    assert!(r[0].read(BIG_VA + (8 << 20), size) == data, "READ bytes");
    std::fs::remove_dir_all(&dir).ok();
}

/// Loopback is the same engine: its packets, sent over the test's wire, are lost,
/// duplicated and reordered, and recover as between NICs (retransmission, duplicates
/// executed once, PSN sequence NAKs, READ re-requests).
#[test]
fn loopback_is_the_same_wire_lost_duplicated_reordered() {
    let mut p = Pair::looped(|_| {});
    for (n, &size) in SIZES.iter().enumerate() {
        every_op(&mut p, n as u64, size);
    }
    assert_eq!(p.ticks, 0, "nothing was lost: no timer fired");
    let naks = Arc::new(Mutex::new(0));
    for kind in 0..3 {
        let mut p = Pair::looped(|_| {});
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let n2 = Arc::clone(&naks);
        p.fault = Box::new(move |n, f| {
            if let Some(a) = f.packet.aeth {
                if a.syndrome == packet::Syndrome::Nak(packet::NakCode::PsnSeq) {
                    *n2.lock().unwrap() += 1;
                }
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match kind {
                0 if x % 7 == 0 => Act::Drop,
                1 => Act::Dup,
                2 if n % 5 == 0 => Act::Hold,
                _ => Act::Pass,
            }
        });
        for (n, &size) in [1u32, 4097, 300_000].iter().enumerate() {
            every_op(&mut p, n as u64, size);
        }
        if kind == 0 {
            assert!(p.ticks > 0, "the transport timer resent");
        }
    }
    assert!(*naks.lock().unwrap() > 0, "PSN sequence NAKs were sent");
}

/// The socket wire fails on request: each kind at probability 1 does what it says to
/// every unicast frame, and counts it.
#[test]
fn the_socket_wire_fails_on_request() {
    use ordma_model::engine::wire::{Impairment, Wire};
    use ordma_model::wire::SocketWire;
    let dir = std::env::temp_dir().join(format!("ordma-wire-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, _) = SocketWire::bind(&dir, port::lid_mac(1)).unwrap();
    let (_b, rx) = SocketWire::bind(&dir, port::lid_mac(2)).unwrap();
    rx.set_nonblocking(true).unwrap();
    let frame = |i: u8| {
        let mut f = port::lid_mac(2).to_vec();
        f.extend_from_slice(&[i; 50]);
        f
    };
    // Sends frames 1, 2, 3 in one action; the frames that arrive.
    let burst = || {
        for i in 1..=3 {
            a.send(port::lid_mac(2), &frame(i));
        }
        a.flush();
        let mut got = Vec::new();
        let mut buf = vec![0u8; wire::MAX_BATCH];
        while let Ok(n) = rx.recv(&mut buf) {
            got.extend(wire::frames(&buf[..n]).map(|f| f.unwrap().to_vec()));
        }
        got
    };
    assert_eq!(burst(), [frame(1), frame(2), frame(3)]);
    assert_eq!(
        a.impairments(),
        " wire_lost=0 wire_duplicated=0 wire_reordered=0 wire_corrupted=0 wire_peers=1 wire_peers_evicted=0"
    );
    a.impair(Impairment::Loss, 1.0).unwrap();
    assert_eq!(burst(), Vec::<Vec<u8>>::new());
    a.impair(Impairment::Loss, 0.0).unwrap();
    a.impair(Impairment::Duplicate, 1.0).unwrap();
    assert_eq!(
        burst(),
        [frame(1), frame(1), frame(2), frame(2), frame(3), frame(3)]
    );
    a.impair(Impairment::Duplicate, 0.0).unwrap();
    a.impair(Impairment::Reorder, 1.0).unwrap();
    // 1 is held; 2 and 3 overtake it (each would be held, but one is at a time).
    assert_eq!(burst(), [frame(2), frame(3), frame(1)]);
    a.impair(Impairment::Reorder, 0.0).unwrap();
    a.impair(Impairment::Corrupt, 1.0).unwrap();
    let got = burst();
    assert_eq!(got.len(), 3);
    for (i, g) in got.iter().enumerate() {
        let want = frame(i as u8 + 1);
        let diff: u32 = g.iter().zip(&want).map(|(x, y)| (x ^ y).count_ones()).sum();
        assert_eq!(
            (diff, &g[..14], g.len()),
            (1, &want[..14], want.len()),
            "frame {i}"
        );
    }
    assert_eq!(
        a.impairments(),
        " wire_lost=3 wire_duplicated=3 wire_reordered=1 wire_corrupted=3 wire_peers=1 wire_peers_evicted=0"
    );
    assert!(a.impair(Impairment::Loss, 1.5).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The port counters (`CMD_QUERY_COUNTERS`): packets sent by one NIC are the packets the
/// other took in, a SEND is one sent and one received message, a duplicated request is
/// counted as one and executed once (out of sequence requests: `recoveries_are_counted`).
#[test]
fn port_counters_count() {
    let mut p = Pair::new(|_| {});
    let big = p.r[0].big;
    let big1 = p.r[1].big;
    p.r[1].recv('b', &[sge(BIG_VA, 3 * 4096, big1)]);
    p.r[0].send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 3 * 4096, big)],
        &[],
    );
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
    assert_eq!(p.r[1].cqe('r').status, hw::WC_SUCCESS);
    let (a, b) = (p.r[0].nic.port_counters(), p.r[1].nic.port_counters());
    assert_eq!(
        a.get(hw::CNT_SENT_PKTS),
        b.get(hw::CNT_RCVD_PKTS),
        "{a:?} {b:?}"
    );
    assert_eq!(
        b.get(hw::CNT_SENT_PKTS),
        a.get(hw::CNT_RCVD_PKTS),
        "{a:?} {b:?}"
    );
    // 3 packets of 4 KiB at the pair's MTU or more; at least one ACK back.
    assert!(a.get(hw::CNT_SENT_PKTS) >= 3 && b.get(hw::CNT_SENT_PKTS) >= 1);
    assert_eq!(
        (a.get(hw::CNT_RDMA_SENDS), b.get(hw::CNT_RDMA_RECVS)),
        (1, 1)
    );
    assert_eq!(
        (a.get(hw::CNT_RDMA_RECVS), b.get(hw::CNT_RDMA_SENDS)),
        (0, 0)
    );
    for c in [
        hw::CNT_DUPLICATE_REQUEST,
        hw::CNT_OUT_OF_SEQ_REQUEST,
        hw::CNT_LOCAL_ERR,
        hw::CNT_REMOTE_ERR,
        hw::CNT_RETRY_EXCEEDED_ERR,
    ] {
        assert_eq!(
            (a.get(c), b.get(c)),
            (0, 0),
            "{}",
            hw::COUNTERS[c].to_string_lossy()
        );
    }
    // Every frame twice: each request once more, counted, executed once.
    let mut p = Pair::new(|_| {});
    p.fault = Box::new(|_, _| Act::Dup);
    let big1 = p.r[1].big;
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, big1);
    let big0 = p.r[0].big;
    p.r[0].send('a', w, &[sge(BIG_VA, 3 * 4096, big0)], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
    let b = p.r[1].nic.port_counters();
    assert!(b.get(hw::CNT_DUPLICATE_REQUEST) >= 1, "{b:?}");
}

/// The recovery counters: a lost request is resent by the timer, a request ahead of the
/// expected PSN gets a sequence NAK that the requester takes (the status line's counts and
/// the port counters alike).
#[test]
fn recoveries_are_counted() {
    // The first WRITE packet lost: the second arrives ahead (a sequence NAK, taken).
    let mut p = Pair::new(|_| {});
    let mut n = 0;
    p.fault = Box::new(move |_, f| {
        n += 1;
        if n == 1 && f.packet.bth.opcode == packet::WRITE_FIRST {
            Act::Drop
        } else {
            Act::Pass
        }
    });
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, big1);
    p.r[0].send('a', w, &[sge(BIG_VA, 3 * 4096, big0)], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
    let (a, b) = (p.r[0].nic.status_snapshot(), p.r[1].nic.status_snapshot());
    assert_eq!(
        (b.recoveries[1], a.recoveries[2]),
        (1, 1),
        "one sequence NAK, sent and taken"
    );
    // The same in the port counters, which count the requests ahead too.
    let (ca, cb) = (a.port_counters, b.port_counters);
    assert_eq!(
        (cb.get(hw::CNT_SEND_SEQ_ERR), ca.get(hw::CNT_RCVD_SEQ_ERR)),
        (1, 1)
    );
    assert!(cb.get(hw::CNT_OUT_OF_SEQ_REQUEST) >= 1, "{cb:?}");
    assert_eq!(cb, p.r[1].nic.port_counters());
    // Everything lost once: the timer sends it again.
    let mut p = Pair::new(|_| {});
    let mut n = 0;
    p.fault = Box::new(move |_, _| {
        n += 1;
        if n <= 3 {
            Act::Drop
        } else {
            Act::Pass
        }
    });
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, big1);
    p.r[0].send('a', w, &[sge(BIG_VA, 3 * 4096, big0)], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
    let a = p.r[0].nic.status_snapshot();
    assert!(a.recoveries[0] >= 1, "timer resends {:?}", a.recoveries);
    assert!(a
        .to_string()
        .contains(&format!(" timer_resends={} ", a.recoveries[0])));
}
