//! Two or three NICs (LIDs 1, 2, 3) on an in-memory wire that can drop, duplicate and
//! reorder frames: NIC 1's QP A connected to NIC 2's QP B (`wire.rs`, `owned.rs`,
//! `drain.rs`).
#![allow(dead_code, reason = "each test file uses a part")]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordma_hw as hw;
use ordma_model::engine::wire::{self, Frame, Wire};
use ordma_model::engine::NicConfig;

use super::rig::*;

pub type Queue = Arc<Mutex<VecDeque<(u16, Vec<u8>)>>>;

pub struct TestWire(pub Queue);

impl Wire for TestWire {
    fn send(&self, dmac: [u8; 6], frame: &[u8]) {
        // The LID of an InfiniBand port's MAC (`port::lid_mac`).
        let dlid = u16::from_be_bytes([dmac[4], dmac[5]]);
        self.0.lock().unwrap().push_back((dlid, frame.to_vec()));
    }
}

/// What the wire does with a frame.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Pass,
    Drop,
    Dup,
    /// Held back and delivered after the next frame.
    Hold,
}

pub type Fault = Box<dyn FnMut(u64, &Frame) -> Act>;

pub struct Pair {
    /// The NICs; NIC i has LID i + 1.
    pub r: Vec<Rig>,
    pub q: Queue,
    pub frames: u64,
    pub held: Option<(u16, Vec<u8>)>,
    pub fault: Fault,
    pub ticks: u32,
}

impl Pair {
    /// NIC 1's QP A connected to NIC 2's QP B; `f` adjusts both QPs' attributes.
    pub fn new(f: impl Fn(&mut hw::QpAttr)) -> Self {
        Self::new_with(f, |_| {})
    }

    /// [`Pair::new`] with both NICs' configuration adjusted by `cfg`.
    pub fn new_with(f: impl Fn(&mut hw::QpAttr), cfg: impl Fn(&mut NicConfig)) -> Self {
        let q = Queue::default();
        let mut r = vec![Rig::bare_with(1, &cfg), Rig::bare_with(2, &cfg)];
        for x in &mut r {
            x.nic.set_wire(Some(Box::new(TestWire(Arc::clone(&q)))));
        }
        let (a, b) = (r[0].a.qpn, r[1].b.qpn);
        r[0].connect(a, b, 100, 500, |at| {
            at.ah.dlid = 2;
            at.timeout = 10;
            f(at);
        });
        r[1].connect(b, a, 500, 100, |at| {
            at.ah.dlid = 1;
            at.timeout = 10;
            f(at);
        });
        Self {
            r,
            q,
            frames: 0,
            held: None,
            fault: Box::new(|_, _| Act::Pass),
            ticks: 0,
        }
    }

    /// Loopback over the same in-memory wire: one NIC (LID 1), its QP A connected to its
    /// QP B, its packets to itself sent as frames ([`Nic::set_loopback_on_wire`]) so the
    /// wire can drop, duplicate and reorder them. `r[0]` is both ends.
    ///
    /// [`Nic::set_loopback_on_wire`]: ordma_model::engine::Nic::set_loopback_on_wire
    pub fn looped(f: impl Fn(&mut hw::QpAttr)) -> Self {
        let q = Queue::default();
        let mut r = vec![Rig::bare(1)];
        r[0].nic.set_wire(Some(Box::new(TestWire(Arc::clone(&q)))));
        r[0].nic.set_loopback_on_wire(true);
        let (a, b) = (r[0].a.qpn, r[0].b.qpn);
        for (x, y, sq, rq) in [(a, b, 100, 500), (b, a, 500, 100)] {
            r[0].connect(x, y, sq, rq, |at| {
                at.ah.dlid = 1;
                at.timeout = 10;
                f(at);
            });
        }
        Self {
            r,
            q,
            frames: 0,
            held: None,
            fault: Box::new(|_, _| Act::Pass),
            ticks: 0,
        }
    }

    /// The receiving NIC's index: 1, or 0 in loopback.
    pub fn rx(&self) -> usize {
        self.r.len().min(2) - 1
    }

    pub fn deliver(&mut self, dlid: u16, frame: &[u8]) {
        let Some(r) = self.r.get_mut(usize::from(dlid).wrapping_sub(1)) else {
            return;
        };
        r.nic.receive_frame(frame, &r.mem, &r.irq);
    }

    /// Runs the wire until it is quiet; while a NIC waits for a timer, fires it (as if
    /// 10 s had passed), at most `max_ticks` times.
    pub fn settle(&mut self, max_ticks: u32) {
        let mut ticks = 0;
        for _ in 0..10_000_000 {
            let next = self.q.lock().unwrap().pop_front();
            if let Some((dlid, f)) = next {
                self.frames += 1;
                let decoded = wire::decode(&f).expect("the NICs send good frames");
                match (self.fault)(self.frames, &decoded) {
                    Act::Pass => self.deliver(dlid, &f),
                    Act::Drop => {}
                    Act::Dup => {
                        self.deliver(dlid, &f);
                        self.deliver(dlid, &f);
                    }
                    Act::Hold => {
                        if let Some((d, h)) = self.held.replace((dlid, f)) {
                            self.deliver(d, &h);
                        }
                        continue;
                    }
                }
                if let Some((d, h)) = self.held.take() {
                    self.deliver(d, &h);
                }
                continue;
            }
            if let Some((d, h)) = self.held.take() {
                self.deliver(d, &h);
                continue;
            }
            if ticks == max_ticks || !self.r.iter().any(|r| r.nic.timers_pending()) {
                return;
            }
            ticks += 1;
            self.ticks += 1;
            let later = Instant::now() + Duration::from_secs(10);
            for r in &mut self.r {
                r.nic.tick(later, &r.mem, &r.irq);
            }
        }
        panic!("the wire never went quiet");
    }
}
