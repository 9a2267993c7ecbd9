//! Hostile-guest property tests: seeded random register writes, ring contents and
//! doorbells against the engine, and random bytes against every decoder. Whatever the guest
//! does, the engine must not panic, must keep its registers consistent, and must never touch
//! memory outside what was mapped (the mock memory refuses, and the engine must cope).
//!
//! Deterministic (fixed seeds), so a failure reproduces; `ORDMA_FUZZ_ITERS` scales it up.

use std::cell::RefCell;

use ordma_hw as hw;
use ordma_model::engine::{Interrupts, Nic, NicConfig};
use ordma_model::mem::{anonymous, Dma, GuestMemoryMmap};

/// xorshift64*: small, deterministic, good enough to explore.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Irqs(RefCell<u64>);

impl Interrupts for Irqs {
    fn raise(&self, vector: u16) {
        assert!(
            vector < hw::NUM_VECTORS,
            "raised a vector the NIC does not have: {vector}"
        );
        *self.0.borrow_mut() += 1;
    }
}

const MEM_BASE: u64 = 0x10_0000;
const MEM_LEN: usize = 0x4_0000;

fn iters() -> u64 {
    std::env::var("ORDMA_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

const REGS: [usize; 16] = [
    hw::REG_VERSION,
    hw::REG_STATUS,
    hw::REG_CONTROL,
    hw::REG_ERROR,
    hw::REG_NUM_VECTORS,
    hw::REG_DB_PAGES,
    hw::REG_AQ_SQ_BASE,
    hw::REG_AQ_SQ_BASE + 4,
    hw::REG_AQ_CQ_BASE,
    hw::REG_AQ_CQ_BASE + 4,
    hw::REG_EQ_BASE,
    hw::REG_EQ_BASE + 4,
    hw::REG_AQ_LOG_DEPTH,
    hw::REG_EQ_LOG_DEPTH,
    hw::REG_AQ_SQ_DB,
    hw::REG_EQ_DB,
];

/// A value that is sometimes valid, sometimes at an edge, sometimes anything.
fn value(rng: &mut Rng) -> u32 {
    match rng.below(8) {
        0 => 0,
        1 => u32::MAX,
        2 => rng.below(16) as u32,
        3 => (MEM_BASE + rng.below(MEM_LEN as u64 / 4096) * 4096) as u32,
        4 => hw::CONTROL_ENABLE,
        5 => hw::CONTROL_RESET,
        6 => rng.below(64) as u32 | ((rng.below(2) as u32) << 31),
        _ => rng.next() as u32,
    }
}

fn read_all(mem: &GuestMemoryMmap) -> Vec<u8> {
    let mut b = vec![0u8; MEM_LEN];
    mem.dma_read(MEM_BASE, &mut b).expect("inside the region");
    b
}

fn check_invariants(nic: &Nic) {
    let status = nic.status();
    let known = hw::STATUS_READY | hw::STATUS_ENABLED | hw::STATUS_FATAL;
    assert_eq!(status & !known, 0, "unknown STATUS bits {status:#x}");
    assert_ne!(
        status & hw::STATUS_READY,
        0,
        "READY must stay set outside a reset"
    );
    if status & hw::STATUS_FATAL != 0 {
        assert_eq!(status & hw::STATUS_ENABLED, 0, "FATAL and ENABLED together");
        assert_ne!(nic.error(), hw::ERR_NONE, "FATAL without an ERROR code");
    }
    assert!(
        nic.error() <= hw::ERR_BAD_DOORBELL,
        "unknown ERROR {}",
        nic.error()
    );
}

#[test]
fn random_guest_behaviour_never_breaks_the_engine() {
    let n = iters();
    let (mut completed, mut interrupts, mut bme_offs) = (0, 0, 0);
    for seed in 1..=8u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mem: GuestMemoryMmap = anonymous(&[(MEM_BASE, MEM_LEN)]).expect("test memory");
        let irq = Irqs::default();
        let mut nic = Nic::new(NicConfig::with_guid(seed));
        nic.set_bus_master(true, &mem, &irq);
        for _ in 0..n / 8 {
            match rng.below(11) {
                0..=4 => {
                    let off = if rng.below(8) == 0 {
                        rng.below(0x2000)
                    } else {
                        REGS[rng.below(16) as usize] as u64
                    };
                    let size = [4, 4, 4, 1, 2, 8][rng.below(6) as usize];
                    nic.bar0_write(off, size, value(&mut rng), &mem, &irq);
                }
                5..=7 => {
                    // Scribble over guest memory, often with well-formed commands.
                    // Half the time into the SQ ring of the bring-up below.
                    let addr = if rng.below(2) == 0 {
                        MEM_BASE + rng.below(64) * 64
                    } else {
                        MEM_BASE + rng.below(MEM_LEN as u64 - 64)
                    };
                    let mut e = [0u8; hw::AQ_SQE_SIZE];
                    e.iter_mut().for_each(|b| *b = rng.next() as u8);
                    if rng.below(4) == 0 {
                        e[0] = hw::CMD_QUERY_PORT;
                        e[1..4].fill(0);
                        let p = hw::QueryPortParams {
                            port: rng.below(3) as u32,
                            resp_addr: MEM_BASE + rng.below(MEM_LEN as u64 + 4096),
                            resp_len: rng.below(64) as u32,
                        };
                        e[8..].copy_from_slice(&p.encode());
                    } else if rng.below(2) == 0 {
                        e[0] = hw::CMD_QUERY_DEVICE;
                        e[1..4].fill(0);
                        let p = hw::QueryDeviceParams {
                            resp_addr: MEM_BASE + rng.below(MEM_LEN as u64 + 4096),
                            resp_len: rng.below(200) as u32,
                        };
                        e[8..].copy_from_slice(&p.encode());
                    }
                    mem.dma_write(addr & !63, &e).expect("inside the region");
                }
                8 => {
                    let _ = nic.bar0_read(rng.below(0x2000), [1, 2, 4, 8][rng.below(4) as usize]);
                }
                9 if rng.below(2) == 0 => {
                    // A mostly well-formed bring-up, so the walk reaches the enabled states.
                    let aq_log = 2 + rng.below(5) as u32;
                    for (reg, v) in [
                        (hw::REG_CONTROL, hw::CONTROL_RESET),
                        (hw::REG_AQ_SQ_BASE, MEM_BASE as u32),
                        (hw::REG_AQ_CQ_BASE, (MEM_BASE + 0x1_0000) as u32),
                        (hw::REG_EQ_BASE, (MEM_BASE + 0x2_0000) as u32),
                        (hw::REG_AQ_LOG_DEPTH, aq_log),
                        (hw::REG_EQ_LOG_DEPTH, 2 + rng.below(5) as u32),
                        (hw::REG_CONTROL, hw::CONTROL_ENABLE),
                        (hw::REG_EQ_DB, hw::EQ_DB_ARM),
                        (hw::REG_AQ_SQ_DB, rng.below(1 << aq_log) as u32),
                    ] {
                        nic.bar0_write(reg as u64, 4, v, &mem, &irq);
                    }
                }
                9 => nic.set_link(rng.below(2) == 0, &mem, &irq),
                _ => {
                    // Bus mastering off now and then: while it is, nothing the NIC does
                    // may change guest memory or raise an interrupt.
                    let before = *irq.0.borrow();
                    let snapshot = read_all(&mem);
                    nic.set_bus_master(false, &mem, &irq);
                    for _ in 0..rng.below(8) {
                        let reg = REGS[rng.below(16) as usize];
                        nic.bar0_write(reg as u64, 4, value(&mut rng), &mem, &irq);
                        nic.set_link(rng.below(2) == 0, &mem, &irq);
                    }
                    assert!(
                        snapshot == read_all(&mem),
                        "DMA while bus mastering was off"
                    );
                    assert_eq!(*irq.0.borrow(), before, "MSI-X while bus mastering was off");
                    nic.set_bus_master(true, &mem, &irq);
                    bme_offs += 1;
                }
            }
            check_invariants(&nic);
        }
        completed += nic.commands_completed;
        interrupts += *irq.0.borrow();
    }
    // The walk must reach the interesting states, or it proves nothing.
    assert!(
        completed > 0,
        "no admin command ever completed: the generator is too weak"
    );
    assert!(interrupts > 0, "no interrupt was ever raised");
    assert!(bme_offs > 0, "bus mastering was never turned off");
    println!("{completed} admin commands completed, {interrupts} interrupts");
}

#[test]
fn decoders_accept_any_bytes() {
    let mut rng = Rng(42);
    for _ in 0..iters() {
        let mut sqe = [0u8; hw::AQ_SQE_SIZE];
        sqe.iter_mut().for_each(|b| *b = rng.next() as u8);
        if rng.below(2) == 0 {
            sqe[1..4].fill(0);
        }
        if let Some(cmd) = hw::AdminCmd::decode(&sqe) {
            assert_eq!(cmd.encode(), sqe, "decode/encode must round-trip");
            let _ = hw::QueryDeviceParams::decode(&cmd.params);
            if let Some(p) = hw::QueryPortParams::decode(&cmd.params) {
                assert_eq!(p.encode(), cmd.params);
            }
        }
        let mut small = [0u8; 16];
        small.copy_from_slice(&sqe[..16]);
        let _ = hw::AdminCompletion::decode(&small);
        let _ = hw::Event::decode(&small);
        let mut attrs = [0u8; hw::DEVICE_ATTRS_SIZE];
        attrs.copy_from_slice(&sqe);
        assert_eq!(hw::DeviceAttrs::decode(&attrs).encode(), attrs);
        let mut port = [0u8; hw::PORT_ATTRS_SIZE];
        port.copy_from_slice(&sqe[..hw::PORT_ATTRS_SIZE]);
        port[28..].fill(0); // reserved
        assert_eq!(hw::PortAttrs::decode(&port).encode(), port);
    }
}
