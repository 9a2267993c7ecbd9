//! Hostile-guest property tests: seeded random register writes, ring contents and
//! doorbells against the engine, and random bytes against every decoder. Whatever the guest
//! does, the engine must not panic, must keep its registers consistent, and must never touch
//! memory outside what was mapped (the mock memory refuses, and the engine must cope).
//!
//! Deterministic (fixed seeds), so a failure reproduces; `ORDMA_FUZZ_ITERS` scales it up.

mod common;

use common::rng::{iters, Rng};

use std::cell::RefCell;

use ordma_hw as hw;
use ordma_model::engine::counters::Anomaly;
use ordma_model::engine::{Interrupts, Nic, NicConfig};
use ordma_model::mem::{anonymous, Dma, GuestMemoryMmap};

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
        // The words 1.2 defines (reserved ones zero).
        let mut attrs = [0u8; hw::DEVICE_ATTRS_SIZE];
        attrs[..hw::AQ_SQE_SIZE].copy_from_slice(&sqe);
        // The SRQ limits after the 64 bytes of 1.1, atomic_cap @76; @80..96 reserved.
        attrs[64..76].iter_mut().for_each(|b| *b = rng.next() as u8);
        attrs[76..80].copy_from_slice(&sqe[..4]);
        assert_eq!(hw::DeviceAttrs::decode(&attrs).encode(), attrs);
        let mut port = [0u8; hw::PORT_ATTRS_SIZE];
        port.copy_from_slice(&sqe[..hw::PORT_ATTRS_SIZE]);
        port[28..].fill(0); // reserved
        assert_eq!(hw::PortAttrs::decode(&port).encode(), port);
    }
}

/// Host memory of the object test: the admin queues, then tables, rings and pages.
const OBJ_AQ: u64 = 0x10_0000;
const OBJ_HOST: u64 = 0x20_0000;
const OBJ_HOST_LEN: u64 = 0x10_0000;

/// An address in the host region, 4 KiB aligned most of the time, sometimes anywhere or
/// outside memory.
fn host_addr(rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0 => rng.next(),
        1 => OBJ_HOST + OBJ_HOST_LEN - 4096 + rng.below(8192),
        2 => OBJ_HOST + rng.below(OBJ_HOST_LEN),
        _ => OBJ_HOST + rng.below(OBJ_HOST_LEN / 4096) * 4096,
    }
}

/// A page list: a random tree of tables written into host memory, of plausible shape most
/// of the time.
fn page_list(rng: &mut Rng, mem: &GuestMemoryMmap) -> hw::PageList {
    if rng.below(2) == 0 {
        let npages = 1 + rng.below(700);
        return valid_list(rng, mem, npages);
    }
    let npages = match rng.below(8) {
        0 => rng.next() as u32,
        1 => hw::MAX_PAGES + rng.below(2) as u32,
        _ => 1 + rng.below(1100) as u32,
    };
    let levels = match rng.below(6) {
        0 => rng.below(7) as u8,
        _ => hw::pt_levels_for(u64::from(npages)).unwrap_or(1),
    };
    let page_shift = [12, 12, 12, 21, 30, 13, rng.next() as u8][rng.below(7) as usize];
    let root = host_addr(rng);
    // A few tables with mostly valid entries (pages or tables of the host region).
    for _ in 0..rng.below(4) {
        let at = OBJ_HOST + rng.below(OBJ_HOST_LEN / 4096) * 4096;
        let n = 1 + rng.below(512);
        let entries: Vec<u8> = (0..n).flat_map(|_| host_addr(rng).to_le_bytes()).collect();
        mem.dma_write(at, &entries).expect("inside the region");
    }
    hw::PageList {
        root,
        npages,
        page_shift,
        levels,
    }
}

/// A valid page list of `npages` 4 KiB pages of the host region: one level, or two with
/// the leaf tables after the root.
fn valid_list(rng: &mut Rng, mem: &GuestMemoryMmap, npages: u64) -> hw::PageList {
    let page = |rng: &mut Rng| OBJ_HOST + rng.below(OBJ_HOST_LEN / 4096) * 4096;
    let root = OBJ_HOST + rng.below(OBJ_HOST_LEN / 4096 - 3) * 4096;
    let levels = hw::pt_levels_for(npages).unwrap_or(1).min(2);
    let write = |at: u64, entries: &[u64]| {
        let b: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
        mem.dma_write(at, &b).expect("inside the region");
    };
    if levels == 1 {
        let pages: Vec<u64> = (0..npages).map(|_| page(rng)).collect();
        write(root, &pages);
    } else {
        let leaves: Vec<u64> = (0..npages.div_ceil(512))
            .map(|i| root + 4096 * (i + 1))
            .collect();
        for (i, &leaf) in leaves.iter().enumerate() {
            let n = (npages - 512 * i as u64).min(512);
            let pages: Vec<u64> = (0..n).map(|_| page(rng)).collect();
            write(leaf, &pages);
        }
        write(root, &leaves);
    }
    hw::PageList {
        root,
        // CAST: at most 700 in this test.
        npages: npages as u32,
        page_shift: 12,
        levels,
    }
}

/// A doorbell page: 0 or 1 mostly (so QPs and CQs often share one), sometimes any.
fn db_page(rng: &mut Rng) -> u32 {
    if rng.below(8) == 0 {
        small(rng, u64::from(hw::DB_PAGES) + 2)
    } else {
        rng.below(2) as u32
    }
}

fn small(rng: &mut Rng, edge: u64) -> u32 {
    if rng.below(8) == 0 {
        rng.next() as u32
    } else {
        rng.below(edge) as u32
    }
}

/// Random MR, CQ, QP and SRQ commands, page tables, QP attributes, doorbells, translations
/// and completions against an enabled NIC: never a panic, never FATAL (no object command or
/// user doorbell may stop the NIC), a completion for every command, every table within
/// its `max_*`, and a walk that reaches successes of every kind.
#[test]
fn random_object_commands_never_break_the_engine() {
    let n = iters() / 4;
    let mut ok = [0u64; 32];
    let mut foreign = 0;
    let (mut xlate_ok, mut cqe_ok) = (0u64, 0u64);
    for seed in 1..=4u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let mem = anonymous(&[(OBJ_AQ, 0x1_0000), (OBJ_HOST, OBJ_HOST_LEN as usize)])
            .expect("test memory");
        let irq = Irqs::default();
        let mut config = NicConfig::with_guid(seed);
        config.attrs.max_mr = 8;
        config.attrs.max_cq = 6;
        config.attrs.max_qp = 6;
        config.attrs.max_pd = 4;
        config.attrs.max_srq = 3;
        let mut nic = Nic::new(config);
        nic.set_bus_master(true, &mem, &irq);
        for (reg, v) in [
            (hw::REG_AQ_SQ_BASE, OBJ_AQ as u32),
            (hw::REG_AQ_CQ_BASE, (OBJ_AQ + 0x4000) as u32),
            (hw::REG_EQ_BASE, (OBJ_AQ + 0x8000) as u32),
            (hw::REG_AQ_LOG_DEPTH, 2),
            (hw::REG_EQ_LOG_DEPTH, 4),
            (hw::REG_CONTROL, hw::CONTROL_ENABLE),
        ] {
            nic.bar0_write(reg as u64, 4, v, &mem, &irq);
        }
        let mut prod = 0u16;
        let (mut keys, mut cqns, mut qpns) = (vec![0u32], vec![0u32], vec![2u32]);
        let (mut pdns, mut srqns) = (vec![0u32], vec![0u32]);
        for _ in 0..n {
            // QP commands twice as often: they need the most to succeed.
            let op = [
                0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 9, 10, 11, 12, 13, 14, 14, 15, 16, 17, 11, 18, 19,
            ][rng.below(24) as usize];
            if (11..=13).contains(&op) {
                // A doorbell, a translation or a completion.
                match op {
                    11 => {
                        let page = rng.below(65);
                        let reg = [0, 4, 8, 12, 16, 16, rng.below(4096)][rng.below(7) as usize];
                        let num = match rng.below(3) {
                            0 => qpns[rng.below(qpns.len() as u64) as usize],
                            1 => cqns[rng.below(cqns.len() as u64) as usize],
                            _ => srqns[rng.below(srqns.len() as u64) as usize],
                        };
                        let v = hw::db_value(num & 0xffff, rng.next() as u16 % 300);
                        let size = [4, 4, 4, 2, 8][rng.below(5) as usize];
                        nic.doorbell_write(page * 4096 + reg, size, v, &mem, &irq);
                    }
                    12 => {
                        let key = keys[rng.below(keys.len() as u64) as usize];
                        let iova = if rng.below(2) == 0 {
                            rng.next()
                        } else {
                            rng.below(1 << 40)
                        };
                        let shift = rng.below(33);
                        let len = rng.below(1 << shift);
                        if rng.below(2) == 0 {
                            // Inside the MR's pages, PD 0 to 3, local read: often valid.
                            let len = rng.below(20_000);
                            if let Ok(p) = nic.translate(
                                &mem,
                                key,
                                small(&mut rng, 4),
                                0x1000 + rng.below(1 << 20),
                                len,
                                0,
                            ) {
                                assert_eq!(p.iter().map(|x| x.1).sum::<u64>(), len);
                                xlate_ok += 1;
                            }
                        }
                        if let Ok(pieces) = nic.translate(
                            &mem,
                            key,
                            small(&mut rng, 4),
                            iova,
                            len,
                            small(&mut rng, 16),
                        ) {
                            let total: u64 = pieces.iter().map(|p| p.1).sum();
                            assert_eq!(total, len, "pieces cover the length");
                            xlate_ok += 1;
                        }
                    }
                    _ => {
                        let cqn = cqns[rng.below(cqns.len() as u64) as usize];
                        let size = [32, 64, 16][rng.below(3) as usize];
                        if nic.post_cqe(cqn, &vec![0x5a; size], rng.below(2) == 0, &mem, &irq) {
                            cqe_ok += 1;
                        }
                    }
                }
                assert_eq!(nic.status(), hw::STATUS_READY | hw::STATUS_ENABLED);
                continue;
            }
            let (opcode, params) = match op {
                0 => (hw::CMD_ALLOC_PD, [0u8; 56]),
                1 => (
                    hw::CMD_DEALLOC_PD,
                    hw::PdParams {
                        pdn: small(&mut rng, 5),
                    }
                    .encode(),
                ),
                2 | 3 => {
                    let pages = page_list(&mut rng, &mem);
                    let iova = if rng.below(2) == 0 {
                        0x1000 + rng.below(4096)
                    } else {
                        rng.below(1 << 48)
                    };
                    let ps = pages.page_shift.min(40);
                    let length = if rng.below(4) == 0 {
                        rng.next()
                    } else {
                        (u64::from(pages.npages) << ps).saturating_sub(iova % (1u64 << ps))
                    };
                    let p = hw::CreateMrParams {
                        pdn: small(&mut rng, 5),
                        access: small(&mut rng, 16),
                        iova,
                        length,
                        pages,
                    };
                    if op == 3 && rng.below(2) == 0 {
                        // The same registration, onto a key that lives or once did.
                        let key = keys[rng.below(keys.len() as u64) as usize];
                        (
                            hw::CMD_MODIFY_MR,
                            hw::ModifyMrParams { key, mr: p }.encode(),
                        )
                    } else {
                        (hw::CMD_CREATE_MR, p.encode())
                    }
                }
                4 => {
                    let key = keys[rng.below(keys.len() as u64) as usize];
                    (hw::CMD_DESTROY_MR, hw::KeyParams { key }.encode())
                }
                5 => {
                    let mut ring = page_list(&mut rng, &mem);
                    let log_depth = small(&mut rng, 12) as u8;
                    let log_cqe_size = 5 + rng.below(2) as u8;
                    if rng.below(2) == 0 {
                        let bytes =
                            1u64 << (u32::from(log_depth) + u32::from(log_cqe_size)).min(40);
                        ring = valid_list(&mut rng, &mem, bytes.div_ceil(4096).min(700));
                    }
                    let p = hw::CreateCqParams {
                        db_page: db_page(&mut rng),
                        log_depth,
                        log_cqe_size,
                        ring,
                        db_record: host_addr(&mut rng) & !(rng.below(2) * 7),
                    };
                    (hw::CMD_CREATE_CQ, p.encode())
                }
                6 => {
                    let num = cqns[rng.below(cqns.len() as u64) as usize];
                    (hw::CMD_DESTROY_CQ, hw::NumParams { num }.encode())
                }
                7 => {
                    let wq = |rng: &mut Rng| {
                        let mut ring = page_list(rng, &mem);
                        let log_depth = small(rng, 10) as u8;
                        let log_wqe_size = (6 + small(rng, 5)) as u8;
                        if rng.below(2) == 0 {
                            let bytes =
                                1u64 << (u32::from(log_depth) + u32::from(log_wqe_size)).min(40);
                            ring = valid_list(rng, &mem, bytes.div_ceil(4096).min(700));
                        }
                        hw::WorkQueue {
                            log_depth,
                            log_wqe_size,
                            ring,
                        }
                    };
                    let sq = wq(&mut rng);
                    let rq = if rng.below(4) == 0 {
                        hw::WorkQueue::default()
                    } else {
                        wq(&mut rng)
                    };
                    let p = hw::CreateQpParams {
                        qp_type: [hw::QP_TYPE_RC, hw::QP_TYPE_RC, hw::QP_TYPE_UD, 0]
                            [rng.below(4) as usize],
                        db_page: db_page(&mut rng) as u16,
                        max_send_sge: small(&mut rng, 4) as u8,
                        max_recv_sge: small(&mut rng, 4) as u8,
                        pdn: small(&mut rng, 5),
                        send_cqn: cqns[rng.below(cqns.len() as u64) as usize],
                        recv_cqn: cqns[rng.below(cqns.len() as u64) as usize],
                        max_inline: small(&mut rng, 64) as u16,
                        flags: (rng.below(8) == 0) as u8,
                        sq,
                        rq,
                    };
                    // On an SRQ: its number in `rq_root`, the rest of the RQ zero.
                    let on_srq = |mut q: hw::CreateQpParams, rng: &mut Rng| {
                        if rng.below(3) == 0 {
                            q.flags = hw::QP_FLAG_SRQ;
                            q.max_recv_sge = 0;
                            q.rq = hw::WorkQueue::default();
                            q.rq.ring.root =
                                u64::from(srqns[rng.below(srqns.len() as u64) as usize]);
                        }
                        q
                    };
                    if rng.below(2) == 0 {
                        // Well-formed: small rings of 64-byte WQEs, one SGE, a live PD.
                        let wq = |rng: &mut Rng| {
                            let log_depth = rng.below(7) as u8;
                            let bytes = 64u64 << log_depth;
                            hw::WorkQueue {
                                log_depth,
                                log_wqe_size: 6,
                                ring: valid_list(rng, &mem, bytes.div_ceil(4096)),
                            }
                        };
                        let good = hw::CreateQpParams {
                            qp_type: hw::QP_TYPE_RC,
                            max_send_sge: 1,
                            max_recv_sge: 1,
                            max_inline: 0,
                            flags: 0,
                            pdn: pdns[rng.below(pdns.len() as u64) as usize],
                            sq: wq(&mut rng),
                            rq: wq(&mut rng),
                            ..p
                        };
                        (hw::CMD_CREATE_QP, on_srq(good, &mut rng).encode())
                    } else {
                        (hw::CMD_CREATE_QP, on_srq(p, &mut rng).encode())
                    }
                }
                8 => {
                    // Attributes: random bytes or a plausible set, any mask.
                    let mut a = [0u8; hw::QP_ATTR_SIZE];
                    let state = small(&mut rng, 7) as u8;
                    let valid = rng.below(2) == 0;
                    if rng.below(3) == 0 {
                        a.iter_mut().for_each(|b| *b = rng.next() as u8);
                    } else {
                        let attr = hw::QpAttr {
                            qp_state: small(&mut rng, 7) as u8,
                            cur_qp_state: small(&mut rng, 7) as u8,
                            path_mtu: small(&mut rng, 7) as u8,
                            port_num: small(&mut rng, 3) as u8,
                            qp_access_flags: small(&mut rng, 16),
                            dest_qp_num: small(&mut rng, 1 << 24),
                            timeout: small(&mut rng, 32) as u8,
                            retry_cnt: small(&mut rng, 8) as u8,
                            rnr_retry: small(&mut rng, 8) as u8,
                            max_rd_atomic: small(&mut rng, 17) as u8,
                            max_dest_rd_atomic: small(&mut rng, 17) as u8,
                            ah: hw::QpAh {
                                dlid: small(&mut rng, 4) as u16,
                                port_num: small(&mut rng, 3) as u8,
                                ah_flags: small(&mut rng, 2) as u8,
                                ..Default::default()
                            },
                            ..Default::default()
                        };
                        a = if valid {
                            hw::QpAttr {
                                qp_state: state,
                                path_mtu: 3,
                                port_num: 1,
                                dest_qp_num: 3,
                                ah: hw::QpAh {
                                    dlid: 1,
                                    port_num: 1,
                                    ..Default::default()
                                },
                                ..Default::default()
                            }
                            .encode()
                        } else {
                            attr.encode()
                        };
                    }
                    let at = OBJ_HOST + rng.below(OBJ_HOST_LEN / 256) * 256;
                    mem.dma_write(at, &a).expect("inside the region");
                    let p = hw::ModifyQpParams {
                        qpn: qpns[rng.below(qpns.len() as u64) as usize],
                        attr_mask: if valid {
                            // The required mask of some transition into `state`.
                            let cur = rng.below(7) as u8;
                            hw::rc_transition(cur, state).map_or(1, |(req, _)| req | 1)
                        } else if rng.below(2) == 0 {
                            rng.next() as u32
                        } else {
                            1 | (rng.next() as u32 & 0x1f_ffff & rng.next() as u32)
                        },
                        attr_addr: if rng.below(8) == 0 { rng.next() } else { at },
                        attr_len: [128, 127, 4096, rng.next() as u32][rng.below(4) as usize],
                    };
                    (hw::CMD_MODIFY_QP, p.encode())
                }
                9 => {
                    let p = hw::QueryQpParams {
                        qpn: qpns[rng.below(qpns.len() as u64) as usize],
                        resp_addr: host_addr(&mut rng),
                        resp_len: small(&mut rng, 200),
                    };
                    (hw::CMD_QUERY_QP, p.encode())
                }
                10 => {
                    let num = qpns[rng.below(qpns.len() as u64) as usize];
                    (hw::CMD_DESTROY_QP, hw::NumParams { num }.encode())
                }
                14 => {
                    let mut wq = hw::WorkQueue {
                        log_depth: small(&mut rng, 17) as u8,
                        log_wqe_size: (5 + small(&mut rng, 7)) as u8,
                        ring: page_list(&mut rng, &mem),
                    };
                    let mut p = hw::CreateSrqParams {
                        db_page: db_page(&mut rng) as u16,
                        max_sge: small(&mut rng, 20) as u8,
                        wq,
                        pdn: small(&mut rng, 5),
                    };
                    if rng.below(2) == 0 {
                        // Well-formed: a small ring of 64-byte WQEs, one SGE, a live PD.
                        wq.log_depth = 1 + rng.below(6) as u8;
                        wq.log_wqe_size = 6;
                        wq.ring =
                            valid_list(&mut rng, &mem, (64u64 << wq.log_depth).div_ceil(4096));
                        p = hw::CreateSrqParams {
                            max_sge: 1,
                            wq,
                            pdn: pdns[rng.below(pdns.len() as u64) as usize],
                            ..p
                        };
                    }
                    (hw::CMD_CREATE_SRQ, p.encode())
                }
                15 => {
                    let mut p = hw::ModifySrqParams {
                        srqn: srqns[rng.below(srqns.len() as u64) as usize],
                        attr_mask: small(&mut rng, 4),
                        srq_limit: small(&mut rng, 70),
                        ..Default::default()
                    };
                    if p.attr_mask & hw::SRQ_ATTR_MAX_WR != 0 {
                        // A resize (1.7): any ring, or a well-formed larger one.
                        p.log_depth = small(&mut rng, 17) as u8;
                        p.ring = page_list(&mut rng, &mem);
                        if rng.below(2) == 0 {
                            p.log_depth = 2 + rng.below(6) as u8;
                            p.ring =
                                valid_list(&mut rng, &mem, (64u64 << p.log_depth).div_ceil(4096));
                        }
                    }
                    (hw::CMD_MODIFY_SRQ, p.encode())
                }
                16 => {
                    let p = hw::QuerySrqParams {
                        srqn: srqns[rng.below(srqns.len() as u64) as usize],
                        resp_addr: host_addr(&mut rng),
                        resp_len: small(&mut rng, 40),
                    };
                    (hw::CMD_QUERY_SRQ, p.encode())
                }
                19 => {
                    // A QP's counters (1.10): any QP number, any buffer and length.
                    let p = hw::QueryQpCountersParams {
                        qpn: if rng.below(4) == 0 {
                            rng.next() as u32
                        } else {
                            qpns[rng.below(qpns.len() as u64) as usize]
                        },
                        resp_addr: host_addr(&mut rng),
                        resp_len: small(&mut rng, 200),
                    };
                    (hw::CMD_QUERY_QP_COUNTERS, p.encode())
                }
                18 => {
                    // A CQ resized (1.7): any ring, or a well-formed one of 32-byte CQEs.
                    let log_depth = small(&mut rng, 17) as u8;
                    let mut ring = page_list(&mut rng, &mem);
                    if rng.below(2) == 0 {
                        let bytes = 32u64 << log_depth.min(12);
                        ring = valid_list(&mut rng, &mem, bytes.div_ceil(4096));
                    }
                    let p = hw::ResizeCqParams {
                        cqn: cqns[rng.below(cqns.len() as u64) as usize],
                        log_depth,
                        ring,
                    };
                    (hw::CMD_RESIZE_CQ, p.encode())
                }
                _ => {
                    let num = srqns[rng.below(srqns.len() as u64) as usize];
                    (hw::CMD_DESTROY_SRQ, hw::NumParams { num }.encode())
                }
            };
            let mut params = params;
            if rng.below(16) == 0 {
                params[rng.below(56) as usize] ^= 1 << rng.below(8);
            }
            let e = hw::AdminCmd {
                opcode,
                cmd_id: u32::from(prod),
                params,
            }
            .encode();
            mem.dma_write(OBJ_AQ + u64::from(prod % 4) * 64, &e)
                .expect("inside the region");
            prod = prod.wrapping_add(1);
            nic.bar0_write(hw::REG_AQ_SQ_DB as u64, 4, u32::from(prod), &mem, &irq);
            let mut c = [0u8; hw::AQ_CQE_SIZE];
            mem.dma_read(OBJ_AQ + 0x4000 + u64::from((prod - 1) % 4) * 16, &mut c)
                .expect("inside the region");
            let c = hw::AdminCompletion::decode(&c);
            assert_eq!(
                c.cmd_id,
                u32::from(prod - 1),
                "a completion for every command"
            );
            assert_eq!(
                nic.status(),
                hw::STATUS_READY | hw::STATUS_ENABLED,
                "an object command stopped the NIC"
            );
            if c.status == hw::AQ_OK {
                ok[usize::from(opcode)] += 1;
                // CAST: results are 32-bit keys and numbers.
                let r = c.result as u32;
                match opcode {
                    hw::CMD_CREATE_MR => keys.push(r),
                    hw::CMD_ALLOC_PD => pdns.push(r),
                    hw::CMD_CREATE_CQ => cqns.push(r),
                    hw::CMD_CREATE_QP => qpns.push(r),
                    hw::CMD_CREATE_SRQ => srqns.push(r),
                    _ => {}
                }
            }
            let s = nic.status_snapshot();
            assert!(
                s.mrs <= 8 && s.cqs <= 6 && s.qps <= 6 && s.pds <= 4 && s.srqs <= 3,
                "{s}"
            );
        }
        foreign += nic.counters().get(Anomaly::ForeignDoorbell);
        assert_eq!(nic.status() & hw::STATUS_FATAL, 0);
    }
    println!(
        "successes by opcode {ok:?}, {xlate_ok} translations, {cqe_ok} CQEs, {foreign} foreign doorbells"
    );
    for op in [
        hw::CMD_CREATE_MR,
        hw::CMD_MODIFY_MR,
        hw::CMD_DESTROY_MR,
        hw::CMD_CREATE_CQ,
        hw::CMD_DESTROY_CQ,
        hw::CMD_CREATE_QP,
        hw::CMD_MODIFY_QP,
        hw::CMD_QUERY_QP,
        hw::CMD_DESTROY_QP,
        hw::CMD_CREATE_SRQ,
        hw::CMD_MODIFY_SRQ,
        hw::CMD_QUERY_SRQ,
        hw::CMD_DESTROY_SRQ,
        hw::CMD_QUERY_QP_COUNTERS,
    ] {
        assert!(ok[usize::from(op)] > 0, "opcode {op:#x} never succeeded");
    }
    assert!(xlate_ok > 0, "no translation ever succeeded");
    assert!(cqe_ok > 0, "no completion was ever written");
}
