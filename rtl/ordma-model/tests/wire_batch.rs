//! The wire's batches (several frames per datagram, `engine::wire::Batch`) between two
//! `Nic`s (LIDs 1 and 2), carried by an in-memory wire that gathers each NIC's frames per
//! peer until the NIC's owner flushes, as the socket wire does, and that can lose whole
//! datagrams.

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::counters::Anomaly;
use ordma_model::engine::packet;
use ordma_model::engine::wire::{self, Batch, Wire};

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;

type Queue = Arc<Mutex<VecDeque<(u16, Vec<u8>)>>>;

/// Gathers frames per destination; a full batch or a flush makes a datagram.
struct BatchWire {
    q: Queue,
    held: Mutex<HashMap<u16, Batch>>,
}

impl BatchWire {
    fn out(&self, dlid: u16, b: &mut Batch) {
        if !b.is_empty() {
            self.q
                .lock()
                .unwrap()
                .push_back((dlid, b.datagram().to_vec()));
            b.clear();
        }
    }
}

impl Wire for BatchWire {
    fn send(&self, dmac: [u8; 6], frame: &[u8]) {
        let dlid = u16::from_be_bytes([dmac[4], dmac[5]]);
        let mut held = self.held.lock().unwrap();
        let b = held.entry(dlid).or_default();
        if !b.fits(frame) {
            self.out(dlid, b);
        }
        assert!(b.push(frame));
    }

    fn flush(&self) {
        for (&dlid, b) in self.held.lock().unwrap().iter_mut() {
            self.out(dlid, b);
        }
    }
}

/// Whether the wire loses datagram `n` (from 1), which carries `frames` frames.
type Loss = Box<dyn FnMut(u64, usize) -> bool>;

struct Net {
    r: Vec<Rig>,
    q: Queue,
    datagrams: u64,
    /// The most frames one datagram carried.
    widest: usize,
    /// The most messages whose first packet one datagram carried.
    starts: usize,
    lost_frames: usize,
    loss: Loss,
    ticks: u32,
}

impl Net {
    fn new() -> Self {
        let q = Queue::default();
        let mut r = vec![Rig::bare(1), Rig::bare(2)];
        for x in &mut r {
            x.nic.set_wire(Some(Box::new(BatchWire {
                q: Arc::clone(&q),
                held: Mutex::default(),
            })));
        }
        let (a, b) = (r[0].a.qpn, r[1].b.qpn);
        r[0].connect(a, b, 0xff_fff0, 7, |at| at.ah.dlid = 2);
        r[1].connect(b, a, 7, 0xff_fff0, |at| at.ah.dlid = 1);
        Self {
            r,
            q,
            datagrams: 0,
            widest: 0,
            starts: 0,
            lost_frames: 0,
            loss: Box::new(|_, _| false),
            ticks: 0,
        }
    }

    /// Runs the wire until it is quiet, firing the timers (as if 10 s had passed) while a
    /// NIC waits for one, at most `max_ticks` times.
    fn settle(&mut self, max_ticks: u32) {
        for _ in 0..1_000_000 {
            // The test owns the NICs: it ends each action by flushing their wires.
            self.r.iter().for_each(|r| r.nic.flush_wire());
            let next = self.q.lock().unwrap().pop_front();
            if let Some((dlid, d)) = next {
                self.datagrams += 1;
                let n = wire::frames(&d).count();
                assert!(wire::frames(&d).all(|f| f.is_ok()));
                self.widest = self.widest.max(n);
                let first = [
                    packet::SEND_FIRST,
                    packet::SEND_ONLY,
                    packet::SEND_ONLY_IMM,
                    packet::WRITE_FIRST,
                    packet::WRITE_ONLY,
                    packet::WRITE_ONLY_IMM,
                    packet::READ_REQUEST,
                ];
                let starts = wire::frames(&d)
                    .flatten()
                    .filter_map(|f| wire::decode(f).ok())
                    .filter(|f| first.contains(&f.packet.bth.opcode))
                    .count();
                self.starts = self.starts.max(starts);
                if (self.loss)(self.datagrams, n) {
                    self.lost_frames += n;
                    continue;
                }
                let r = &mut self.r[usize::from(dlid) - 1];
                r.nic.receive_datagram(&d, &r.mem, &r.irq);
                continue;
            }
            if self.ticks == max_ticks || !self.r.iter().any(|r| r.nic.timers_pending()) {
                return;
            }
            self.ticks += 1;
            let later = Instant::now() + Duration::from_secs(10);
            for r in &mut self.r {
                r.nic.tick(later, &r.mem, &r.irq);
            }
        }
        panic!("the wire never went quiet");
    }

    /// A SEND of `size` bytes into one receive, then a WRITE of `size` bytes, from NIC 1
    /// to NIC 2: both complete once, every byte arrives, nothing more.
    fn send_and_write(&mut self, seed: u64, size: u32) {
        let (a, b) = (self.r[0].a.qpn, self.r[1].b.qpn);
        let (big0, big1) = (self.r[0].big, self.r[1].big);
        let (src, dst) = (BIG_VA + 0x10, BIG_VA + (8 << 20) + 0x20);
        let bad: Vec<u64> = self
            .r
            .iter()
            .map(|r| r.nic.counters().get(Anomaly::BadFrame))
            .collect();
        let data = bytes(seed, size as usize);
        self.r[0].fill(src, &data);
        self.r[1].fill(dst, &vec![0xee; size as usize + 16]);
        let ri = self.r[1].recv('b', &[sge(dst, size + 16, big1)]);
        let si = self.r[0].send(
            'a',
            wqe(hw::WR_SEND, SIGNALED, 1),
            &[sge(src, size, big0)],
            &[],
        );
        self.settle(50);
        let c = self.r[0].cqe('s');
        assert_eq!(
            (c.status, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, si, size)
        );
        let c = self.r[1].cqe('r');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.qpn, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RECV, ri, b, size)
        );
        let got = self.r[1].read(dst, size as usize + 16);
        assert!(got[..size as usize] == data[..], "SEND bytes");
        assert_eq!(got[size as usize..], [0xee; 16], "nothing beyond");
        let data = bytes(seed + 1, size as usize);
        self.r[0].fill(src, &data);
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (dst, big1);
        self.r[0].send('a', w, &[sge(src, size, big0)], &[]);
        self.settle(50);
        let c = self.r[0].cqe('s');
        assert_eq!((c.status, c.qpn, c.byte_len), (hw::WC_SUCCESS, a, size));
        assert!(self.r[1].read(dst, size as usize) == data, "WRITE bytes");
        assert!(self.r[0].poll('s').is_none() && self.r[1].poll('r').is_none());
        for (r, bad) in self.r.iter().zip(bad) {
            assert_eq!(r.nic.counters().get(Anomaly::BadFrame), bad, "no bad frame");
        }
    }
}

#[test]
fn batches_carry_every_message() {
    let mut n = Net::new();
    for (k, size) in [0u32, 1, 4096, 70_000, 2 << 20].into_iter().enumerate() {
        n.send_and_write(k as u64, size);
    }
    assert!(n.widest > 8, "several frames per datagram: {}", n.widest);
    assert_eq!(n.ticks, 0, "nothing lost, no timer fired");
}

#[test]
fn a_lost_batch_is_sent_again() {
    // Datagrams 2 and 3 (the second of the requests and the ACKs of the first) are lost
    // whole, each with the several frames it carries; then datagram 9 too.
    let mut n = Net::new();
    n.loss = Box::new(|i, _| matches!(i, 2 | 3 | 9));
    n.send_and_write(3, 1 << 20);
    assert!(
        n.lost_frames > 3,
        "whole batches lost: {} frames",
        n.lost_frames
    );
    // One datagram with several frames in four lost, at random, over a PSN wrap (from
    // 0xfffff0). (A fixed pattern can starve a retry that meets it every time.)
    let mut n = Net::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    n.loss = Box::new(move |_, frames| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        frames > 1 && x % 4 == 0
    });
    n.send_and_write(4, 300_000);
    assert!(n.lost_frames > 8, "{} frames lost", n.lost_frames);
}

#[test]
fn a_malformed_batch_is_counted_and_never_panics() {
    let mut n = Net::new();
    let f = {
        let mut b = Batch::default();
        let pkt = ordma_model::engine::packet::Packet::default();
        let frame = wire::encode(
            &ordma_model::engine::port::lid_route(1, 2),
            2,
            &pkt,
            &[1; 8],
        );
        assert!(b.push(&frame) && b.push(&frame));
        b.datagram().to_vec()
    };
    let r = &mut n.r[1];
    for cut in 0..f.len() {
        r.nic.receive_datagram(&f[..cut], &r.mem, &r.irq);
    }
    let mut zero = wire::BATCH_MAGIC.to_vec();
    zero.extend_from_slice(&[0, 0, 0, 0]);
    r.nic.receive_datagram(&zero, &r.mem, &r.irq);
    assert!(r.nic.counters().get(Anomaly::BadFrame) > 0);
    // Random batches: random lengths and bytes, and real frames with a byte flipped.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..2000 {
        let mut d = wire::BATCH_MAGIC.to_vec();
        for _ in 0..rnd() % 6 {
            if rnd() % 2 == 0 {
                let len = (rnd() % 200) as usize;
                d.extend_from_slice(&(rnd() as u16).to_be_bytes());
                d.extend((0..len).map(|_| rnd() as u8));
            } else {
                let mut g = f.clone();
                let at = (rnd() as usize) % g.len();
                g[at] ^= 1 << (rnd() % 8);
                d.extend_from_slice(&g[4..]);
            }
        }
        r.nic.receive_datagram(&d, &r.mem, &r.irq);
    }
    n.send_and_write(5, 5000);
}

/// Twelve WQEs posted at once (SEND, WRITE with immediate, READ, in turn; 20–33 KB: 5–9
/// packets each), on the wire together, some datagrams lost: every message arrives once,
/// every completion comes once and in order, every byte is where it belongs.
#[test]
fn several_wqes_in_flight_complete_in_order_with_losses() {
    for lost in [&[][..], &[1], &[2, 3], &[2, 6, 7, 11]] {
        let mut n = Net::new();
        let quiet = lost.is_empty();
        let lost = lost.to_vec();
        n.loss = Box::new(move |i, _| lost.contains(&i));
        let (big0, big1) = (n.r[0].big, n.r[1].big);
        let (src, dst, back) = (BIG_VA, BIG_VA + (8 << 20), BIG_VA + (12 << 20));
        let slot = |k: u64| k * 0x1_0000;
        let size = |k: u64| 20_000 + 1111 * k as u32;
        let mut sent = Vec::new();
        let mut recvs = Vec::new();
        n.r[1].fill(dst, &vec![0xee; 12 << 16]);
        n.r[0].fill(back, &vec![0xee; 12 << 16]);
        for k in 0..12u64 {
            let data = bytes(100 + k, size(k) as usize);
            let sg = |va| [sge(va, size(k), big0)];
            let (i, op) = match k % 3 {
                0 => {
                    n.r[0].fill(src + slot(k), &data);
                    recvs.push((n.r[1].recv('b', &[sge(dst + slot(k), 1 << 16, big1)]), k));
                    let w = wqe(hw::WR_SEND, SIGNALED, 1);
                    (
                        n.r[0].put_send('a', w, &sg(src + slot(k)), &[]),
                        hw::WC_SEND,
                    )
                }
                1 => {
                    n.r[0].fill(src + slot(k), &data);
                    recvs.push((n.r[1].recv('b', &[]), k));
                    let mut w = wqe(hw::WR_RDMA_WRITE_IMM, SIGNALED, 1);
                    (w.remote_addr, w.rkey, w.imm) = (dst + slot(k), big1, k as u32);
                    (
                        n.r[0].put_send('a', w, &sg(src + slot(k)), &[]),
                        hw::WC_RDMA_WRITE,
                    )
                }
                _ => {
                    n.r[1].fill(dst + slot(k), &data);
                    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
                    (w.remote_addr, w.rkey) = (dst + slot(k), big1);
                    (
                        n.r[0].put_send('a', w, &sg(back + slot(k)), &[]),
                        hw::WC_RDMA_READ,
                    )
                }
            };
            sent.push((i, op, k));
        }
        n.r[0].ring_sq('a');
        n.settle(100);
        for &(i, op, k) in &sent {
            let c = n.r[0].cqe('s');
            assert_eq!(
                (c.status, c.wqe_index, c.opcode, c.byte_len),
                (hw::WC_SUCCESS, i, op, size(k)),
                "send completion {k}, in order"
            );
            let data = bytes(100 + k, size(k) as usize);
            let at = if k % 3 == 2 { back } else { dst };
            let r = if k % 3 == 2 { &n.r[0] } else { &n.r[1] };
            let got = r.read(at + slot(k), size(k) as usize + 16);
            assert!(got[..size(k) as usize] == data[..], "message {k}: bytes");
            assert_eq!(got[size(k) as usize..], [0xee; 16], "message {k}: no more");
        }
        for &(ri, k) in &recvs {
            let c = n.r[1].cqe('r');
            let op = if k % 3 == 0 {
                hw::WC_RECV
            } else {
                hw::WC_RECV_RDMA_IMM
            };
            assert_eq!(
                (c.status, c.wqe_index, c.opcode, c.byte_len),
                (hw::WC_SUCCESS, ri, op, size(k)),
                "receive completion {k}, once and in order"
            );
        }
        assert!(n.r[0].poll('s').is_none() && n.r[1].poll('r').is_none());
        assert!(n.starts > 1, "several WQEs in one datagram: {}", n.starts);
        // A READ waits for the WQEs before it (its responses are taken at the head only).
        assert!(
            !quiet || n.ticks == 0,
            "nothing lost, no timer: {}",
            n.ticks
        );
        let (a, b) = (n.r[0].a.qpn, n.r[1].b.qpn);
        assert_eq!(n.r[0].query(a).sq_psn, n.r[1].query(b).rq_psn);
    }
}

/// `ibv_rc_pingpong`'s pattern: both QPs with receives posted, path MTU 1024, PSNs far
/// apart; a SEND of 4096 bytes one way, answered by one the other way, 20 times.
#[test]
fn ping_pong_both_ways() {
    let mut n = Net::new();
    let (a, b) = (n.r[0].a.qpn, n.r[1].b.qpn);
    for (r, q, d, sq, rq) in [
        (0, a, b, 0x37_813f, 0x02_6aad),
        (1, b, a, 0x02_6aad, 0x37_813f),
    ] {
        let x = &mut n.r[r];
        x.modify(
            q,
            hw::QP_ATTR_STATE,
            &hw::QpAttr {
                qp_state: hw::QPS_RESET,
                ..Default::default()
            },
        );
        x.connect(q, d, sq, rq, |at| {
            at.ah.dlid = if r == 0 { 2 } else { 1 };
            at.path_mtu = 3; // 1024
        });
    }
    let (big0, big1) = (n.r[0].big, n.r[1].big);
    let rq = |n: &mut Net, k: usize| {
        let (w, big) = if k == 0 { ('a', big0) } else { ('b', big1) };
        n.r[k].recv(w, &[sge(BIG_VA + (8 << 20), 4096, big)])
    };
    for k in 0..2 {
        for _ in 0..8 {
            rq(&mut n, k);
        }
    }
    for i in 0..20u64 {
        let (from, to, w, big) = if i % 2 == 0 {
            (0, 1, 'a', big0)
        } else {
            (1, 0, 'b', big1)
        };
        let data = bytes(i, 4096);
        n.r[from].fill(BIG_VA, &data);
        n.r[from].send(
            w,
            wqe(hw::WR_SEND, SIGNALED, 1),
            &[sge(BIG_VA, 4096, big)],
            &[],
        );
        n.settle(10);
        assert_eq!(n.r[from].cqe('s').status, hw::WC_SUCCESS, "send {i}");
        assert_eq!(n.r[to].cqe('r').status, hw::WC_SUCCESS, "receive {i}");
        assert!(n.r[to].read(BIG_VA + (8 << 20), 4096) == data);
        rq(&mut n, to);
    }
    assert_eq!(n.ticks, 0);
}

/// The transport timer starts again on progress for the WQEs still in flight: two WRITEs
/// sent at once, the first one's frames delivered and ACKed at least 0.6 s later; 0.7 s
/// after the ACK (at least 1.3 s after the send: past the first deadline, 1.07 s, not the
/// one the ACK restarted) nothing is sent again; 1.2 s after it, the second WRITE is.
#[test]
fn progress_restarts_the_transport_timer_of_every_wqe_in_flight() {
    let mut n = Net::new();
    let (a, b) = (n.r[0].a.qpn, n.r[1].b.qpn);
    let x = &mut n.r[0];
    x.modify(
        a,
        hw::QP_ATTR_STATE,
        &hw::QpAttr {
            qp_state: hw::QPS_RESET,
            ..Default::default()
        },
    );
    // 4.096 µs × 2^18 ≈ 1.07 s.
    x.connect(a, b, 0xff_fff0, 7, |at| {
        at.ah.dlid = 2;
        at.timeout = 18;
    });
    let (big0, big1) = (n.r[0].big, n.r[1].big);
    for k in 0..2u64 {
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (BIG_VA + (8 << 20) + k * 32768, big1);
        n.r[0].put_send('a', w, &[sge(BIG_VA + k * 32768, 32768, big0)], &[]);
    }
    n.r[0].ring_sq('a');
    n.r[0].nic.flush_wire();
    let (_, d) = n.q.lock().unwrap().pop_front().expect("the requests");
    std::thread::sleep(Duration::from_millis(600));
    // The first WRITE's 8 frames only: its last asks for the ACK.
    let r = &mut n.r[1];
    for f in wire::frames(&d).take(8) {
        r.nic.receive_frame(f.unwrap(), &r.mem, &r.irq);
    }
    r.nic.flush_wire();
    let (_, acks) = n.q.lock().unwrap().pop_front().expect("the ACK");
    let r = &mut n.r[0];
    // The ACK restarts the timer at some instant between these two: the checks below hold
    // however long the sleep above or this delivery took on a loaded machine (the sleep is
    // a lower bound: without the restart, the first check would see a resend).
    let t_ack = Instant::now();
    r.nic.receive_datagram(&acks, &r.mem, &r.irq);
    let t_acked = Instant::now();
    r.nic.flush_wire();
    assert_eq!(r.cqe('s').status, hw::WC_SUCCESS, "the first WRITE");
    assert!(n.q.lock().unwrap().is_empty(), "nothing left to send");
    let r = &mut n.r[0];
    r.nic
        .tick(t_ack + Duration::from_millis(700), &r.mem, &r.irq);
    r.nic.flush_wire();
    assert!(
        n.q.lock().unwrap().is_empty(),
        "no resend before the restarted deadline"
    );
    r.nic
        .tick(t_acked + Duration::from_millis(1200), &r.mem, &r.irq);
    r.nic.flush_wire();
    assert_eq!(
        n.q.lock().unwrap().len(),
        1,
        "the second WRITE again after it"
    );
    n.settle(10);
    assert_eq!(n.r[0].cqe('s').status, hw::WC_SUCCESS, "the second WRITE");
}
