//! The engine's verbs objects against mock guest memory: MRs and their page lists,
//! translation, CQs and arming, QPs and the state machine, doorbell ownership, reset.

mod common;

use common::{Irqs, BUF, CQ, EQ, LEN, SQ};
use ordma_hw as hw;
use ordma_model::engine::counters::Anomaly;
use ordma_model::engine::mr::XlateError;
use ordma_model::engine::{Nic, NicConfig};
use ordma_model::mem::{anonymous, Dma, GuestMemoryMmap};

/// Page tables (4 MiB).
const PT: u64 = 0x100_0000;
const PT_LEN: usize = 0x40_0000;
/// Data pages: 1 GiB, 1 GiB aligned (anonymous memory: only touched pages cost).
const DATA: u64 = 0x4000_0000;
const DATA_LEN: usize = 0x4000_0000;
const AQ_LOG: u32 = 4;
const EQ_LOG: u32 = 6;

type P = [u8; hw::AQ_SQE_SIZE - 8];

struct Rig {
    nic: Nic,
    mem: GuestMemoryMmap,
    irq: Irqs,
    prod: u16,
    /// Next event to read.
    ev: u16,
}

impl Rig {
    fn new() -> Self {
        Self::with(|_| {})
    }

    fn with(f: impl FnOnce(&mut NicConfig)) -> Self {
        let mut config = NicConfig::with_guid(0x42);
        f(&mut config);
        let mem = anonymous(&[
            (SQ, LEN),
            (CQ, LEN),
            (EQ, LEN),
            (BUF, LEN),
            (PT, PT_LEN),
            (DATA, DATA_LEN),
        ])
        .unwrap();
        let irq = Irqs::default();
        let mut nic = Nic::new(config);
        nic.set_bus_master(true, &mem, &irq);
        let mut rig = Self {
            nic,
            mem,
            irq,
            prod: 0,
            ev: 0,
        };
        for (reg, v) in [
            (hw::REG_AQ_SQ_BASE, SQ as u32),
            (hw::REG_AQ_CQ_BASE, CQ as u32),
            (hw::REG_EQ_BASE, EQ as u32),
            (hw::REG_AQ_LOG_DEPTH, AQ_LOG),
            (hw::REG_EQ_LOG_DEPTH, EQ_LOG),
            (hw::REG_CONTROL, hw::CONTROL_ENABLE),
        ] {
            rig.w(reg, v);
        }
        assert_eq!(rig.event().kind, hw::EVENT_PORT_ACTIVE);
        rig
    }

    fn w(&mut self, reg: usize, v: u32) {
        self.nic.bar0_write(reg as u64, 4, v, &self.mem, &self.irq);
    }

    /// Runs one admin command; (status, result).
    fn run(&mut self, opcode: u8, params: P) -> (u16, u64) {
        let e = hw::AdminCmd {
            opcode,
            cmd_id: u32::from(self.prod) + 1000,
            params,
        }
        .encode();
        let slot = u64::from(self.prod % (1 << AQ_LOG));
        self.mem
            .dma_write(SQ + slot * hw::AQ_SQE_SIZE as u64, &e)
            .unwrap();
        self.prod = self.prod.wrapping_add(1);
        self.w(hw::REG_AQ_SQ_DB, u32::from(self.prod));
        let mut b = [0u8; hw::AQ_CQE_SIZE];
        self.mem
            .dma_read(CQ + slot * hw::AQ_CQE_SIZE as u64, &mut b)
            .unwrap();
        let c = hw::AdminCompletion::decode(&b);
        assert_eq!(
            c.cmd_id,
            u32::from(self.prod) - 1 + 1000,
            "completion written"
        );
        (c.status, c.result)
    }

    fn status(&mut self, opcode: u8, params: P) -> u16 {
        self.run(opcode, params).0
    }

    /// Runs a command that must succeed; its result.
    fn ok(&mut self, opcode: u8, params: P) -> u64 {
        let (s, r) = self.run(opcode, params);
        assert_eq!(s, hw::AQ_OK, "opcode {opcode:#x}");
        r
    }

    /// The next event, if one was written since the last call.
    fn next_event(&mut self) -> Option<hw::Event> {
        let mut b = [0u8; hw::EQE_SIZE];
        let depth = 1u16 << EQ_LOG;
        let slot = u64::from(self.ev % depth);
        self.mem
            .dma_read(EQ + slot * hw::EQE_SIZE as u64, &mut b)
            .unwrap();
        let e = hw::Event::decode(&b);
        if e.phase != hw::phase(self.ev, depth) {
            return None;
        }
        self.ev += 1;
        self.w(hw::REG_EQ_DB, u32::from(self.ev));
        Some(e)
    }

    fn event(&mut self) -> hw::Event {
        self.next_event().expect("an event")
    }

    fn alloc_pd(&mut self) -> u32 {
        self.ok(hw::CMD_ALLOC_PD, [0; 56]) as u32
    }

    /// Writes a page table at `at`.
    fn table(&self, at: u64, entries: &[u64]) {
        let b: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
        self.mem.dma_write(at, &b).unwrap();
    }

    /// A one-level page list at `at` of `pages`.
    fn list(&self, at: u64, shift: u8, pages: &[u64]) -> hw::PageList {
        self.table(at, pages);
        hw::PageList {
            root: at,
            npages: pages.len() as u32,
            page_shift: shift,
            levels: 1,
        }
    }

    fn create_mr(&mut self, p: hw::CreateMrParams) -> (u16, u64) {
        self.run(hw::CMD_CREATE_MR, p.encode())
    }

    /// A CQ of `2^log_depth` 64-byte CQEs, one page per 4 KiB from `ring`, its record at
    /// `record`, owned by `page`.
    fn cq_params(&self, page: u32, log_depth: u8, ring: u64, record: u64) -> hw::CreateCqParams {
        let bytes = 64u64 << log_depth;
        let n = bytes.div_ceil(4096);
        let pages: Vec<u64> = (0..n).map(|i| ring + i * 4096).collect();
        hw::CreateCqParams {
            db_page: page,
            log_depth,
            log_cqe_size: 6,
            ring: self.list(PT + 0x20_0000 + u64::from(log_depth) * 0x1000, 12, &pages),
            db_record: record,
        }
    }

    fn create_cq(&mut self, page: u32) -> u32 {
        let p = self.cq_params(page, 4, DATA + 0x10_0000, BUF + 0x100);
        self.ok(hw::CMD_CREATE_CQ, p.encode()) as u32
    }

    fn qp_params(&self, page: u16, pdn: u32, scq: u32, rcq: u32) -> hw::CreateQpParams {
        // SQ: 64 WQEs of 128 B = 2 pages; RQ: 16 of 64 B = 1 page.
        let sq = self.list(PT + 0x30_0000, 12, &[DATA + 0x20_0000, DATA + 0x30_0000]);
        let rq = self.list(PT + 0x31_0000, 12, &[DATA + 0x40_0000]);
        hw::CreateQpParams {
            qp_type: hw::QP_TYPE_RC,
            db_page: page,
            max_send_sge: 4,
            max_recv_sge: 3,
            pdn,
            send_cqn: scq,
            recv_cqn: rcq,
            max_inline: 64,
            flags: 0,
            sq: hw::WorkQueue {
                log_depth: 6,
                log_wqe_size: 7,
                ring: sq,
            },
            rq: hw::WorkQueue {
                log_depth: 4,
                log_wqe_size: 6,
                ring: rq,
            },
        }
    }

    /// A PD, a CQ and an RC QP on doorbell page `page`: (pdn, cqn, qpn).
    fn qp_on(&mut self, page: u16) -> (u32, u32, u32) {
        let pdn = self.alloc_pd();
        let cqn = self.create_cq(u32::from(page));
        let p = self.qp_params(page, pdn, cqn, cqn);
        let qpn = self.ok(hw::CMD_CREATE_QP, p.encode()) as u32;
        (pdn, cqn, qpn)
    }

    fn modify(&mut self, qpn: u32, mask: u32, a: &hw::QpAttr) -> u16 {
        self.mem.dma_write(BUF, &a.encode()).unwrap();
        let p = hw::ModifyQpParams {
            qpn,
            attr_mask: mask,
            attr_addr: BUF,
            attr_len: hw::QP_ATTR_SIZE as u32,
        };
        self.status(hw::CMD_MODIFY_QP, p.encode())
    }

    fn query(&mut self, qpn: u32) -> hw::QpAttr {
        let p = hw::QueryQpParams {
            qpn,
            resp_addr: BUF + 0x200,
            resp_len: hw::QP_ATTR_SIZE as u32,
        };
        assert_eq!(self.run(hw::CMD_QUERY_QP, p.encode()), (hw::AQ_OK, 128));
        let mut b = [0u8; hw::QP_ATTR_SIZE];
        self.mem.dma_read(BUF + 0x200, &mut b).unwrap();
        hw::QpAttr::decode(&b).expect("query writes no reserved bytes")
    }

    fn state(&mut self, qpn: u32) -> u8 {
        self.query(qpn).qp_state
    }

    fn db(&mut self, page: u32, reg: usize, value: u32) {
        let off = u64::from(page) * hw::DB_PAGE_SIZE as u64 + reg as u64;
        self.nic.doorbell_write(off, 4, value, &self.mem, &self.irq);
    }

    fn count(&self, a: Anomaly) -> u64 {
        self.nic.counters().get(a)
    }
}

// ----- MRs -------------------------------------------------------------------------------

/// An MR of three scattered 4 KiB pages, starting 0x100 into the first.
fn small_mr(rig: &Rig, pdn: u32) -> hw::CreateMrParams {
    let pages = [DATA + 0x5000, DATA + 0x2000, DATA + 0x3000];
    hw::CreateMrParams {
        pdn,
        access: hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_READ,
        iova: 0x7000_0000_0100,
        length: 3 * 4096 - 0x100,
        pages: rig.list(PT, 12, &pages),
    }
}

#[test]
fn mr_keys_are_index_and_a_key_that_changes_on_reuse() {
    let mut rig = Rig::new();
    let pdn = rig.alloc_pd();
    let p = small_mr(&rig, pdn);
    let k1 = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
    let k2 = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
    assert_eq!((k1 >> 8, k2 >> 8), (0, 1), "lowest free index first");
    assert_eq!(rig.nic.mrs_in_use(), 2);
    let destroy = |key| hw::KeyParams { key }.encode();
    // A right index with a wrong key does not destroy it.
    assert_eq!(
        rig.status(hw::CMD_DESTROY_MR, destroy(k1 ^ 0x80)),
        hw::AQ_BAD_PARAM
    );
    rig.ok(hw::CMD_DESTROY_MR, destroy(k1));
    assert_eq!(
        rig.status(hw::CMD_DESTROY_MR, destroy(k1)),
        hw::AQ_BAD_PARAM
    );
    let mut seen = vec![k1];
    for _ in 0..300 {
        let k = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
        assert_eq!(k >> 8, 0, "index 0 reused");
        assert_ne!(k, *seen.last().unwrap(), "never the previous key");
        let prev = *seen.last().unwrap();
        assert_eq!(
            rig.nic.translate(&rig.mem, prev, pdn, p.iova, 1, 0),
            Err(XlateError::BadKey),
            "the stale key translates nothing"
        );
        rig.ok(hw::CMD_DESTROY_MR, destroy(k));
        seen.push(k);
    }
    rig.ok(hw::CMD_DESTROY_MR, destroy(k2));
    assert_eq!(rig.nic.mrs_in_use(), 0);
}

#[test]
fn mr_create_rejects_every_bad_field() {
    let mut rig = Rig::with(|c| c.attrs.page_size_cap = (1 << 12) | (1 << 21));
    let pdn = rig.alloc_pd();
    let good = small_mr(&rig, pdn);
    let pl = good.pages;
    type Case = (&'static str, hw::CreateMrParams, u16);
    let bad = hw::AQ_BAD_PARAM;
    let cases: Vec<Case> = vec![
        ("no such PD", hw::CreateMrParams { pdn: 9, ..good }, bad),
        (
            "unknown access bit",
            hw::CreateMrParams {
                access: 1 << 5,
                ..good
            },
            bad,
        ),
        (
            "remote write without local write",
            hw::CreateMrParams {
                access: hw::ACCESS_REMOTE_WRITE,
                ..good
            },
            bad,
        ),
        (
            "remote atomic without local write",
            hw::CreateMrParams {
                access: hw::ACCESS_REMOTE_ATOMIC | hw::ACCESS_REMOTE_READ,
                ..good
            },
            bad,
        ),
        ("zero length", hw::CreateMrParams { length: 0, ..good }, bad),
        (
            "iova + length overflows",
            hw::CreateMrParams {
                iova: u64::MAX - 0xeff,
                ..good
            },
            bad,
        ),
        (
            "page count does not match the span",
            hw::CreateMrParams {
                length: 3 * 4096,
                ..good
            },
            bad,
        ),
        (
            "page size not in page_size_cap",
            hw::CreateMrParams {
                pages: hw::PageList {
                    page_shift: 30,
                    ..pl
                },
                ..good
            },
            bad,
        ),
        (
            "page size unknown",
            hw::CreateMrParams {
                pages: hw::PageList {
                    page_shift: 16,
                    ..pl
                },
                ..good
            },
            bad,
        ),
        (
            "zero levels",
            hw::CreateMrParams {
                pages: hw::PageList { levels: 0, ..pl },
                ..good
            },
            bad,
        ),
        (
            "five levels",
            hw::CreateMrParams {
                pages: hw::PageList { levels: 5, ..pl },
                ..good
            },
            bad,
        ),
        (
            "misaligned root",
            hw::CreateMrParams {
                pages: hw::PageList { root: PT + 8, ..pl },
                ..good
            },
            bad,
        ),
        (
            "root outside memory",
            hw::CreateMrParams {
                pages: hw::PageList {
                    root: 0xdead_0000_0000,
                    ..pl
                },
                ..good
            },
            hw::AQ_BAD_ADDRESS,
        ),
        (
            "root at the top of the address space",
            hw::CreateMrParams {
                pages: hw::PageList {
                    root: u64::MAX - 4095,
                    ..pl
                },
                ..good
            },
            hw::AQ_BAD_ADDRESS,
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(rig.create_mr(p).0, want, "{name}");
    }
    // Entries: misaligned, outside memory, the last page half outside.
    for (entry, want) in [
        (DATA + 0x800, hw::AQ_BAD_PARAM),
        (0x7777_0000_0000, hw::AQ_BAD_ADDRESS),
        (DATA + DATA_LEN as u64, hw::AQ_BAD_ADDRESS),
        (u64::MAX - 4095, hw::AQ_BAD_ADDRESS),
    ] {
        let p = hw::CreateMrParams {
            pages: rig.list(PT, 12, &[DATA, DATA + 0x1000, entry]),
            ..good
        };
        assert_eq!(rig.create_mr(p).0, want, "entry {entry:#x}");
    }
    // A reserved byte.
    let mut raw = good.encode();
    raw[40] = 1;
    assert_eq!(rig.status(hw::CMD_CREATE_MR, raw), hw::AQ_BAD_PARAM);
    assert_eq!(rig.nic.mrs_in_use(), 0, "nothing was created");
    // The good one (its table written again) still works, and no error stopped the NIC.
    let good = small_mr(&rig, pdn);
    assert_eq!(rig.create_mr(good).0, hw::AQ_OK);
    assert_eq!(rig.nic.status() & hw::STATUS_FATAL, 0);
}

#[test]
fn mr_table_is_bounded_by_max_mr() {
    let mut rig = Rig::with(|c| c.attrs.max_mr = 2);
    let pdn = rig.alloc_pd();
    let p = small_mr(&rig, pdn);
    rig.ok(hw::CMD_CREATE_MR, p.encode());
    rig.ok(hw::CMD_CREATE_MR, p.encode());
    assert_eq!(rig.create_mr(p).0, hw::AQ_NO_RESOURCES);
    // A PD in use by an MR cannot go.
    assert_eq!(
        rig.status(hw::CMD_DEALLOC_PD, hw::PdParams { pdn }.encode()),
        hw::AQ_BAD_PARAM
    );
}

#[test]
fn translate_crosses_pages_and_checks_key_pd_bounds_access() {
    let mut rig = Rig::new();
    let pdn = rig.alloc_pd();
    let p = small_mr(&rig, pdn);
    let key = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
    let t = |rig: &Rig, iova, len, access| rig.nic.translate(&rig.mem, key, pdn, iova, len, access);
    // Inside the first page, 0x100 into it.
    assert_eq!(t(&rig, p.iova, 16, 0), Ok(vec![(DATA + 0x5100, 16)]));
    // Across the first page boundary: two pieces (scattered pages).
    let end1 = p.iova + 4096 - 0x100;
    assert_eq!(
        t(&rig, end1 - 8, 16, 0),
        Ok(vec![(DATA + 0x5ff8, 8), (DATA + 0x2000, 8)])
    );
    // Pages 2 and 3 are contiguous: one merged piece.
    assert_eq!(
        t(&rig, end1 + 4000, 200, hw::ACCESS_LOCAL_WRITE),
        Ok(vec![(DATA + 0x2000 + 4000, 200)])
    );
    // The whole MR: three pages, two pieces.
    assert_eq!(
        t(&rig, p.iova, p.length, 0),
        Ok(vec![(DATA + 0x5100, 4096 - 0x100), (DATA + 0x2000, 8192)])
    );
    assert_eq!(t(&rig, p.iova + 5, 0, 0), Ok(vec![]), "zero length");
    // Bounds: before, past the end, overflowing.
    assert_eq!(t(&rig, p.iova - 1, 2, 0), Err(XlateError::Bounds));
    assert_eq!(
        t(&rig, p.iova + p.length - 1, 2, 0),
        Err(XlateError::Bounds)
    );
    assert_eq!(t(&rig, u64::MAX, 2, 0), Err(XlateError::Bounds));
    // Access: the MR allows local write and remote read only.
    for denied in [hw::ACCESS_REMOTE_WRITE, hw::ACCESS_REMOTE_ATOMIC, 1 << 7] {
        assert_eq!(t(&rig, p.iova, 8, denied), Err(XlateError::Access));
    }
    assert!(t(&rig, p.iova, 8, hw::ACCESS_REMOTE_READ).is_ok());
    // Wrong PD, wrong key.
    assert_eq!(
        rig.nic.translate(&rig.mem, key, pdn + 1, p.iova, 8, 0),
        Err(XlateError::WrongPd)
    );
    assert_eq!(
        rig.nic.translate(&rig.mem, key + 1, pdn, p.iova, 8, 0),
        Err(XlateError::BadKey)
    );
    // The driver broke the table after registering: an error, not a bad access.
    rig.table(PT + 8, &[0xdead_0000_1000]);
    assert!(t(&rig, p.iova, 8, 0).is_ok(), "page 0 is untouched");
    assert!(
        t(&rig, end1, 8, 0).is_ok(),
        "the walk finds the new address"
    );
    rig.table(PT + 8, &[DATA + 0x2001]);
    assert_eq!(t(&rig, end1, 8, 0), Err(XlateError::Dma), "misaligned now");
}

#[test]
fn two_level_tables_and_large_pages() {
    let mut rig = Rig::new();
    let pdn = rig.alloc_pd();
    // 600 pages of 4 KiB, in reverse order, through two levels.
    let leaf0: Vec<u64> = (0..512).map(|i| DATA + (599 - i) * 4096).collect();
    let leaf1: Vec<u64> = (512..600).map(|i| DATA + (599 - i) * 4096).collect();
    rig.table(PT + 0x1000, &leaf0);
    rig.table(PT + 0x2000, &leaf1);
    rig.table(PT, &[PT + 0x1000, PT + 0x2000]);
    let list = hw::PageList {
        root: PT,
        npages: 600,
        page_shift: 12,
        levels: 2,
    };
    let p = hw::CreateMrParams {
        pdn,
        access: hw::ACCESS_LOCAL_WRITE,
        iova: 0x10_0000_0000,
        length: 600 * 4096,
        pages: list,
    };
    // One level is too few for 600 pages.
    let one = hw::CreateMrParams {
        pages: hw::PageList { levels: 1, ..list },
        ..p
    };
    assert_eq!(rig.create_mr(one).0, hw::AQ_BAD_PARAM);
    // A level-1 entry that is not 4 KiB aligned.
    rig.table(PT, &[PT + 0x1000, PT + 0x2008]);
    assert_eq!(rig.create_mr(p).0, hw::AQ_BAD_PARAM);
    rig.table(PT, &[PT + 0x1000, PT + 0x2000]);
    let key = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
    // Page 511 -> 512 crosses from the first leaf table to the second.
    let at = p.iova + 511 * 4096 + 4090;
    assert_eq!(
        rig.nic.translate(&rig.mem, key, pdn, at, 12, 0),
        Ok(vec![(DATA + 88 * 4096 + 4090, 6), (DATA + 87 * 4096, 6)])
    );
    // Three levels (more than needed) also work: root -> one level-1 table -> leaves.
    rig.table(PT + 0x3000, &[PT]);
    let p3 = hw::CreateMrParams {
        pages: hw::PageList {
            root: PT + 0x3000,
            levels: 3,
            ..list
        },
        ..p
    };
    let key3 = rig.ok(hw::CMD_CREATE_MR, p3.encode()) as u32;
    assert_eq!(
        rig.nic.translate(&rig.mem, key3, pdn, at, 12, 0),
        rig.nic.translate(&rig.mem, key, pdn, at, 12, 0)
    );

    // 2 MiB pages: an MR of 3 MiB starting 1 MiB into a huge page.
    let pages = [DATA + (8 << 20), DATA + (2 << 20)];
    let p2 = hw::CreateMrParams {
        pdn,
        access: 0,
        iova: 0x20_0010_0000,
        length: 3 << 20,
        pages: rig.list(PT + 0x10_0000, 21, &pages),
    };
    let k2 = rig.ok(hw::CMD_CREATE_MR, p2.encode()) as u32;
    assert_eq!(
        rig.nic
            .translate(&rig.mem, k2, pdn, p2.iova + (1 << 20) - 4, 8, 0),
        Ok(vec![(DATA + (10 << 20) - 4, 4), (DATA + (2 << 20), 4)])
    );
    // A 2 MiB page entry aligned to 4 KiB only.
    let bad = hw::CreateMrParams {
        pages: rig.list(PT + 0x10_0000, 21, &[DATA + 0x1000, DATA]),
        ..p2
    };
    assert_eq!(rig.create_mr(bad).0, hw::AQ_BAD_PARAM);

    // A 1 GiB page: the whole data region.
    let p1g = hw::CreateMrParams {
        pdn,
        access: 0,
        iova: 0x40_0000_0000,
        length: 1 << 30,
        pages: rig.list(PT + 0x20_0000, 30, &[DATA]),
    };
    let k1g = rig.ok(hw::CMD_CREATE_MR, p1g.encode()) as u32;
    assert_eq!(
        rig.nic
            .translate(&rig.mem, k1g, pdn, p1g.iova + 12345, 1 << 20, 0),
        Ok(vec![(DATA + 12345, 1 << 20)])
    );
}

#[test]
fn a_64_gib_mr_of_4_kib_pages_registers_through_three_levels() {
    // 2^24 pages. Pinning the same pages in several places is legal, so the tables repeat:
    // the root's 64 entries name one level-1 table, whose 512 entries name one leaf table,
    // whose 512 entries name 512 distinct pages. The NIC still reads and checks every
    // entry the MR needs (16 Mi leaf entries).
    let mut rig = Rig::new();
    let pdn = rig.alloc_pd();
    let leaf: Vec<u64> = (0..512).map(|i| DATA + i * 4096).collect();
    rig.table(PT + 0x2000, &leaf);
    rig.table(PT + 0x1000, &[PT + 0x2000; 512]);
    rig.table(PT, &[PT + 0x1000; 64]);
    let p = hw::CreateMrParams {
        pdn,
        access: hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_WRITE,
        iova: 0x7f00_0000_0000,
        length: 64 << 30,
        pages: hw::PageList {
            root: PT,
            npages: 1 << 24,
            page_shift: 12,
            levels: 3,
        },
    };
    // Two levels cannot hold it.
    let two = hw::CreateMrParams {
        pages: hw::PageList {
            levels: 2,
            ..p.pages
        },
        ..p
    };
    assert_eq!(rig.create_mr(two).0, hw::AQ_BAD_PARAM);
    // One byte more needs a page more than the maximum.
    let big = hw::CreateMrParams {
        length: (64 << 30) + 1,
        pages: hw::PageList {
            npages: (1 << 24) + 1,
            ..p.pages
        },
        ..p
    };
    assert_eq!(rig.create_mr(big).0, hw::AQ_BAD_PARAM);
    let key = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
    // 40 GiB in: page 10 Mi, leaf slot 0.
    let at = p.iova + (40 << 30);
    assert_eq!(
        rig.nic
            .translate(&rig.mem, key, pdn, at + 4095, 2, hw::ACCESS_REMOTE_WRITE),
        Ok(vec![(DATA + 4095, 2)])
    );
    // The last byte, and the leaf-table boundary (slot 511 -> slot 0 of the next table).
    let last = p.iova + (64 << 30) - 1;
    assert_eq!(
        rig.nic.translate(&rig.mem, key, pdn, last, 1, 0),
        Ok(vec![(DATA + 511 * 4096 + 4095, 1)])
    );
    assert_eq!(
        rig.nic
            .translate(&rig.mem, key, pdn, p.iova + 512 * 4096 - 2, 4, 0),
        Ok(vec![(DATA + 511 * 4096 + 4094, 2), (DATA, 2)])
    );
    // A hole deep in the last leaf table's run is found at create: the NIC walks it all.
    rig.table(PT + 0x1000 + 511 * 8, &[PT + 0x3000]);
    let mut leaf2 = leaf.clone();
    leaf2[511] = 0x7777_0000_0000;
    rig.table(PT + 0x3000, &leaf2);
    assert_eq!(rig.create_mr(p).0, hw::AQ_BAD_ADDRESS);
}

// ----- CQs -------------------------------------------------------------------------------

#[test]
fn cq_create_destroy_and_errors() {
    let mut rig = Rig::with(|c| {
        c.attrs.max_cq = 2;
        c.attrs.max_cqe = 1 << 10;
    });
    let good = rig.cq_params(1, 4, DATA + 0x10_0000, BUF + 0x100);
    let bad = hw::AQ_BAD_PARAM;
    let big = rig.cq_params(1, 11, DATA, BUF + 0x100);
    let cases: Vec<(&str, hw::CreateCqParams, u16)> = vec![
        (
            "doorbell page beyond BAR2",
            hw::CreateCqParams {
                db_page: hw::DB_PAGES,
                ..good
            },
            bad,
        ),
        (
            "depth 1",
            hw::CreateCqParams {
                log_depth: 0,
                ..good
            },
            bad,
        ),
        ("depth beyond max_cqe", big, bad),
        (
            "CQE of 16 bytes",
            hw::CreateCqParams {
                log_cqe_size: 4,
                ..good
            },
            bad,
        ),
        (
            "CQE of 128 bytes",
            hw::CreateCqParams {
                log_cqe_size: 7,
                ..good
            },
            bad,
        ),
        (
            "more pages than the ring needs",
            hw::CreateCqParams {
                ring: hw::PageList {
                    npages: 2,
                    ..good.ring
                },
                ..good
            },
            bad,
        ),
        (
            "misaligned record",
            hw::CreateCqParams {
                db_record: BUF + 0x104,
                ..good
            },
            bad,
        ),
        (
            "record outside memory",
            hw::CreateCqParams {
                db_record: 0x9999_0000,
                ..good
            },
            hw::AQ_BAD_ADDRESS,
        ),
        (
            "ring outside memory",
            hw::CreateCqParams {
                ring: rig.list(PT + 0x5000, 12, &[0x9999_0000]),
                ..good
            },
            hw::AQ_BAD_ADDRESS,
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(rig.status(hw::CMD_CREATE_CQ, p.encode()), want, "{name}");
    }
    let mut raw = good.encode();
    raw[21] = 1;
    assert_eq!(rig.status(hw::CMD_CREATE_CQ, raw), bad, "reserved byte");
    assert_eq!(rig.nic.cqs_in_use(), 0);
    let a = rig.ok(hw::CMD_CREATE_CQ, good.encode());
    let b = rig.ok(hw::CMD_CREATE_CQ, good.encode());
    assert_eq!((a, b), (0, 1));
    assert_eq!(
        rig.status(hw::CMD_CREATE_CQ, good.encode()),
        hw::AQ_NO_RESOURCES
    );
    let destroy = |num| hw::NumParams { num }.encode();
    rig.ok(hw::CMD_DESTROY_CQ, destroy(0));
    assert_eq!(rig.status(hw::CMD_DESTROY_CQ, destroy(0)), bad, "twice");
    assert_eq!(rig.status(hw::CMD_DESTROY_CQ, destroy(7)), bad, "never");
    assert_eq!(rig.nic.cqs_in_use(), 1);
}

#[test]
fn cq_arming_completions_and_overrun() {
    let mut rig = Rig::new();
    // Depth 128 x 64 B = two scattered pages.
    let ring = rig.list(PT + 0x7000, 12, &[DATA + 0x9000, DATA + 0x4000]);
    let rec = BUF + 0x300;
    let p = hw::CreateCqParams {
        db_page: 0,
        log_depth: 7,
        log_cqe_size: 6,
        ring,
        db_record: rec,
    };
    let cqn = rig.ok(hw::CMD_CREATE_CQ, p.encode()) as u32;
    let cqe = |i: u8| [i; 64];
    let (mem, irq) = (&rig.mem, &rig.irq);
    // Not armed: the CQE lands, no event.
    assert!(rig.nic.post_cqe(cqn, &cqe(1), false, mem, irq));
    assert!(rig.next_event().is_none());
    let mut b = [0u8; 64];
    rig.mem.dma_read(DATA + 0x9000, &mut b).unwrap();
    assert_eq!(b, cqe(1));
    // Arm with ci 0 while one CQE is unpolled: an event at once.
    rig.db(0, hw::DB_CQ_ARM, hw::db_value(cqn, 0));
    let e = rig.event();
    assert_eq!((e.kind, e.data), (hw::EVENT_CQ_COMPLETION, cqn));
    // Arm with ci 1 (all polled): the next completion raises one event, the one after none.
    rig.db(0, hw::DB_CQ_ARM, hw::db_value(cqn, 1));
    assert!(rig.next_event().is_none());
    assert!(rig.nic.post_cqe(cqn, &cqe(2), false, &rig.mem, &rig.irq));
    assert_eq!(rig.event().kind, hw::EVENT_CQ_COMPLETION);
    assert!(rig.nic.post_cqe(cqn, &cqe(3), false, &rig.mem, &rig.irq));
    assert!(rig.next_event().is_none(), "one event per arm");
    // Solicited arm: an unsolicited completion does not fire, a solicited one does.
    rig.db(0, hw::DB_CQ_ARM_SOLICITED, hw::db_value(cqn, 3));
    assert!(rig.nic.post_cqe(cqn, &cqe(4), false, &rig.mem, &rig.irq));
    assert!(rig.next_event().is_none());
    assert!(rig.nic.post_cqe(cqn, &cqe(5), true, &rig.mem, &rig.irq));
    assert_eq!(rig.event().kind, hw::EVENT_CQ_COMPLETION);
    // The ring's second page: CQE 64 (the 65th) is the first entry there.
    for i in 5..=64u8 {
        assert!(rig
            .nic
            .post_cqe(cqn, &cqe(i + 1), false, &rig.mem, &rig.irq));
    }
    rig.mem.dma_read(DATA + 0x4000, &mut b).unwrap();
    assert_eq!(b, cqe(65));
    // A wrong CQE size or an unknown CQ writes nothing.
    assert!(!rig.nic.post_cqe(cqn, &[0; 32], false, &rig.mem, &rig.irq));
    assert!(!rig.nic.post_cqe(99, &cqe(0), false, &rig.mem, &rig.irq));
    // Arming beyond the producer is ignored and counted, not fatal.
    let before = rig.count(Anomaly::BadDoorbell);
    rig.db(0, hw::DB_CQ_ARM, hw::db_value(cqn, 1000));
    assert_eq!(rig.count(Anomaly::BadDoorbell), before + 1);
    // Fill the ring (128): the consumer's record says 100 polled, so 100 more fit.
    rig.mem.dma_write(rec, &100u32.to_le_bytes()).unwrap();
    for i in 65..228u32 {
        assert!(
            rig.nic
                .post_cqe(cqn, &cqe(i as u8), false, &rig.mem, &rig.irq),
            "CQE {i}"
        );
    }
    // The 229th overruns: CQ_ERROR, and the CQ takes nothing more.
    assert!(!rig.nic.post_cqe(cqn, &cqe(0), false, &rig.mem, &rig.irq));
    let e = rig.event();
    assert_eq!(
        (e.kind, e.data, e.data2),
        (hw::EVENT_CQ_ERROR, cqn, hw::CQ_ERR_OVERRUN)
    );
    rig.mem.dma_write(rec, &228u32.to_le_bytes()).unwrap();
    assert!(!rig.nic.post_cqe(cqn, &cqe(0), false, &rig.mem, &rig.irq));
    assert_eq!(rig.nic.status() & hw::STATUS_FATAL, 0);
}

// ----- QPs -------------------------------------------------------------------------------

#[test]
fn qp_create_destroy_and_errors() {
    let mut rig = Rig::with(|c| {
        c.attrs.max_qp = 2;
        c.attrs.max_sge = 4;
        c.attrs.max_qp_wr = 64;
    });
    let pdn = rig.alloc_pd();
    let cq1 = rig.create_cq(1);
    let cq2 = rig.create_cq(2);
    let good = rig.qp_params(1, pdn, cq1, cq1);
    let bad = hw::AQ_BAD_PARAM;
    let mut no_rq = good;
    no_rq.rq = hw::WorkQueue::default();
    let mut cases: Vec<(&str, hw::CreateQpParams, u16)> = vec![
        (
            "UD is reserved",
            hw::CreateQpParams {
                qp_type: hw::QP_TYPE_UD,
                ..good
            },
            bad,
        ),
        (
            "SRQ is reserved",
            hw::CreateQpParams {
                flags: hw::QP_FLAG_SRQ,
                ..good
            },
            bad,
        ),
        (
            "no such PD",
            hw::CreateQpParams {
                pdn: pdn + 1,
                ..good
            },
            bad,
        ),
        (
            "no such send CQ",
            hw::CreateQpParams {
                send_cqn: 9,
                ..good
            },
            bad,
        ),
        (
            "recv CQ of another context",
            hw::CreateQpParams {
                recv_cqn: cq2,
                ..good
            },
            bad,
        ),
        (
            "doorbell page beyond BAR2",
            hw::CreateQpParams {
                db_page: 2048, // hw::DB_PAGES
                ..good
            },
            bad,
        ),
        (
            "more SGEs than max_sge",
            hw::CreateQpParams {
                max_send_sge: 5,
                ..good
            },
            bad,
        ),
        (
            "recv SGEs beyond the RQ WQE",
            hw::CreateQpParams {
                max_recv_sge: 4,
                ..good
            },
            bad,
        ),
        (
            "inline beyond the SQ WQE",
            hw::CreateQpParams {
                max_inline: 97,
                ..good
            },
            bad,
        ),
        (
            "receive SGEs without an RQ",
            hw::CreateQpParams { ..no_rq },
            bad,
        ),
    ];
    let mut deep = good;
    deep.sq.log_depth = 7; // 128 > max_qp_wr
    deep.sq.ring.npages = 4;
    cases.push(("deeper than max_qp_wr", deep, bad));
    let mut wqe = good;
    wqe.sq.log_wqe_size = 11;
    cases.push(("WQE of 2 KiB", wqe, bad));
    let mut pages = good;
    pages.sq.ring.npages = 3;
    cases.push(("SQ pages do not match", pages, bad));
    let mut gone = good;
    gone.rq.ring = rig.list(PT + 0x32_0000, 12, &[0x5555_0000_0000]);
    cases.push(("RQ ring outside memory", gone, hw::AQ_BAD_ADDRESS));
    for (name, p, want) in cases {
        assert_eq!(rig.status(hw::CMD_CREATE_QP, p.encode()), want, "{name}");
    }
    let mut raw = good.encode();
    raw[23] = 1;
    assert_eq!(rig.status(hw::CMD_CREATE_QP, raw), bad, "reserved byte");
    assert_eq!(rig.nic.qps_in_use(), 0);

    let q1 = rig.ok(hw::CMD_CREATE_QP, good.encode());
    no_rq.max_recv_sge = 0;
    let q2 = rig.ok(hw::CMD_CREATE_QP, no_rq.encode());
    assert_eq!((q1, q2), (2, 3), "QPNs start at 2");
    assert_eq!(
        rig.status(hw::CMD_CREATE_QP, good.encode()),
        hw::AQ_NO_RESOURCES
    );
    assert_eq!(rig.state(2), hw::QPS_RESET);
    // CQ and PD in use cannot go; the QP can, and then they can.
    let num = |num| hw::NumParams { num }.encode();
    assert_eq!(rig.status(hw::CMD_DESTROY_CQ, num(cq1)), bad);
    assert_eq!(
        rig.status(hw::CMD_DEALLOC_PD, hw::PdParams { pdn }.encode()),
        bad
    );
    for qpn in [0, 1, 4, u32::MAX] {
        assert_eq!(rig.status(hw::CMD_DESTROY_QP, num(qpn)), bad, "qpn {qpn}");
    }
    rig.ok(hw::CMD_DESTROY_QP, num(2));
    rig.ok(hw::CMD_DESTROY_QP, num(3));
    assert_eq!(rig.status(hw::CMD_DESTROY_QP, num(2)), bad, "twice");
    rig.ok(hw::CMD_DESTROY_CQ, num(cq1));
    rig.ok(hw::CMD_DEALLOC_PD, hw::PdParams { pdn }.encode());
}

/// The attributes every transition of the RC path needs, all valid.
fn full_attrs(state: u8) -> hw::QpAttr {
    hw::QpAttr {
        qp_state: state,
        cur_qp_state: 0,
        path_mtu: hw::MTU_4096,
        qp_access_flags: hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ,
        port_num: 1,
        dest_qp_num: 0x12_3456,
        rq_psn: 0x11_1111,
        sq_psn: 0x22_2222,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 8,
        min_rnr_timer: 12,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        ah: hw::QpAh {
            dlid: 2,
            sl: 1,
            port_num: 1,
            ah_flags: hw::AH_FLAG_GRH,
            dgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1],
            hop_limit: 1,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The masks the IB table requires for each step of RESET -> INIT -> RTR -> RTS.
const TO_INIT: u32 = hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_ACCESS_FLAGS;
const TO_RTR: u32 = hw::QP_ATTR_AV
    | hw::QP_ATTR_PATH_MTU
    | hw::QP_ATTR_DEST_QPN
    | hw::QP_ATTR_RQ_PSN
    | hw::QP_ATTR_MAX_DEST_RD_ATOMIC
    | hw::QP_ATTR_MIN_RNR_TIMER;
const TO_RTS: u32 = hw::QP_ATTR_TIMEOUT
    | hw::QP_ATTR_RETRY_CNT
    | hw::QP_ATTR_RNR_RETRY
    | hw::QP_ATTR_SQ_PSN
    | hw::QP_ATTR_MAX_QP_RD_ATOMIC;

/// Moves QP `qpn` (in RESET) to `target` by valid modifies.
fn drive(rig: &mut Rig, qpn: u32, target: u8) {
    let steps: &[(u8, u32)] = &[
        (hw::QPS_INIT, TO_INIT),
        (hw::QPS_RTR, TO_RTR),
        (hw::QPS_RTS, TO_RTS),
        (hw::QPS_SQD, 0),
    ];
    if target == hw::QPS_ERR {
        drive(rig, qpn, hw::QPS_INIT);
        let a = full_attrs(hw::QPS_ERR);
        assert_eq!(rig.modify(qpn, hw::QP_ATTR_STATE, &a), hw::AQ_OK);
        return;
    }
    for &(state, mask) in steps {
        if rig.state(qpn) == target {
            return;
        }
        let a = full_attrs(state);
        assert_eq!(
            rig.modify(qpn, hw::QP_ATTR_STATE | mask, &a),
            hw::AQ_OK,
            "to {state}"
        );
    }
    assert_eq!(rig.state(qpn), target);
}

#[test]
fn the_rc_path_sets_and_query_returns_the_attributes() {
    let mut rig = Rig::new();
    let (_, _, qpn) = rig.qp_on(0);
    drive(&mut rig, qpn, hw::QPS_RTS);
    let q = rig.query(qpn);
    let want = full_attrs(hw::QPS_RTS);
    assert_eq!((q.qp_state, q.cur_qp_state), (hw::QPS_RTS, hw::QPS_RTS));
    assert_eq!(
        (q.path_mtu, q.dest_qp_num, q.rq_psn, q.sq_psn),
        (want.path_mtu, want.dest_qp_num, want.rq_psn, want.sq_psn)
    );
    assert_eq!(
        (q.max_rd_atomic, q.max_dest_rd_atomic, q.min_rnr_timer),
        (4, 8, 12)
    );
    assert_eq!(
        (q.timeout, q.retry_cnt, q.rnr_retry, q.port_num),
        (14, 7, 7, 1)
    );
    assert_eq!(q.qp_access_flags, want.qp_access_flags);
    assert_eq!(q.ah, want.ah);
    // RTS -> RTS changes an optional attribute; CUR_STATE must be the truth.
    let mut a = full_attrs(hw::QPS_RTS);
    a.min_rnr_timer = 3;
    a.cur_qp_state = hw::QPS_RTS;
    let m = hw::QP_ATTR_STATE | hw::QP_ATTR_CUR_STATE | hw::QP_ATTR_MIN_RNR_TIMER;
    assert_eq!(rig.modify(qpn, m, &a), hw::AQ_OK);
    assert_eq!(rig.query(qpn).min_rnr_timer, 3);
    a.cur_qp_state = hw::QPS_SQD;
    assert_eq!(
        rig.modify(qpn, m, &a),
        hw::AQ_BAD_PARAM,
        "a lie about the state"
    );
    // RTS -> SQD with notification: SQ_DRAINED for this QP.
    while rig.next_event().is_some() {}
    let mut a = full_attrs(hw::QPS_SQD);
    a.en_sqd_async_notify = 1;
    let m = hw::QP_ATTR_STATE | hw::QP_ATTR_EN_SQD_ASYNC_NOTIFY;
    assert_eq!(rig.modify(qpn, m, &a), hw::AQ_OK);
    let e = rig.event();
    assert_eq!((e.kind, e.data), (hw::EVENT_QP_SQ_DRAINED, qpn));
    // SQD -> SQD may change the path; SQD -> RTS; -> ERR; -> RESET forgets everything.
    let mut a = full_attrs(hw::QPS_SQD);
    a.timeout = 20;
    let m = hw::QP_ATTR_STATE | hw::QP_ATTR_TIMEOUT | hw::QP_ATTR_AV;
    assert_eq!(rig.modify(qpn, m, &a), hw::AQ_OK);
    assert_eq!(rig.query(qpn).timeout, 20);
    assert_eq!(
        rig.modify(qpn, hw::QP_ATTR_STATE, &full_attrs(hw::QPS_RTS)),
        hw::AQ_OK
    );
    assert_eq!(
        rig.modify(qpn, hw::QP_ATTR_STATE, &full_attrs(hw::QPS_ERR)),
        hw::AQ_OK
    );
    assert_eq!(
        rig.modify(qpn, hw::QP_ATTR_STATE, &full_attrs(hw::QPS_RESET)),
        hw::AQ_OK
    );
    assert_eq!(rig.query(qpn), hw::QpAttr::default());
    // And up again.
    drive(&mut rig, qpn, hw::QPS_RTS);
}

/// Every (current, next) pair reachable by modify, and what the NIC answers: a valid
/// transition with exactly its required mask is OK; without one required bit, or with one
/// bit that is neither required nor optional, it is BAD_PARAM; an invalid pair is
/// BAD_PARAM with any mask. Each refused modify leaves the state as it was.
#[test]
fn the_state_machine_follows_the_ib_table_for_every_pair() {
    let states = [
        hw::QPS_RESET,
        hw::QPS_INIT,
        hw::QPS_RTR,
        hw::QPS_RTS,
        hw::QPS_SQD,
        hw::QPS_ERR,
    ];
    // Bits the NIC knows (IB_QP_* up to DEST_QPN, and RATE_LIMIT).
    let known: Vec<u32> = (0..=20).map(|b| 1 << b).chain([1 << 25]).collect();
    let mut rig = Rig::with(|c| c.attrs.max_qp = 8);
    let (pdn, cqn, _) = rig.qp_on(0);
    let p = rig.qp_params(0, pdn, cqn, cqn);
    let fresh = |rig: &mut Rig, state: u8| {
        let qpn = rig.ok(hw::CMD_CREATE_QP, p.encode()) as u32;
        drive(rig, qpn, state);
        qpn
    };
    let (mut ok, mut refused) = (0, 0);
    for &cur in &states {
        for &next in &states {
            let qpn = fresh(&mut rig, cur);
            let mut a = full_attrs(next);
            a.cur_qp_state = cur;
            let Some((req, opt)) = hw::rc_transition(cur, next) else {
                for mask in [
                    hw::QP_ATTR_STATE,
                    hw::QP_ATTR_STATE | TO_INIT | TO_RTR | TO_RTS,
                ] {
                    assert_eq!(rig.modify(qpn, mask, &a), hw::AQ_BAD_PARAM, "{cur}->{next}");
                    refused += 1;
                }
                assert_eq!(rig.state(qpn), cur, "{cur}->{next} refused, unchanged");
                rig.ok(hw::CMD_DESTROY_QP, hw::NumParams { num: qpn }.encode());
                continue;
            };
            for bit in (0..32).map(|b| 1u32 << b).filter(|b| req & b != 0) {
                let m = hw::QP_ATTR_STATE | (req & !bit);
                assert_eq!(
                    rig.modify(qpn, m, &a),
                    hw::AQ_BAD_PARAM,
                    "{cur}->{next} without {bit:#x}"
                );
                refused += 1;
            }
            for &bit in known
                .iter()
                .filter(|&&b| (req | opt | hw::QP_ATTR_STATE | hw::QP_ATTR_RATE_LIMIT) & b == 0)
            {
                let m = hw::QP_ATTR_STATE | req | bit;
                assert_eq!(
                    rig.modify(qpn, m, &a),
                    hw::AQ_BAD_PARAM,
                    "{cur}->{next} with {bit:#x}"
                );
                refused += 1;
            }
            // Unsupported although the table allows them: alternate path, rate limit.
            for bit in [hw::QP_ATTR_ALT_PATH, hw::QP_ATTR_RATE_LIMIT] {
                assert_eq!(
                    rig.modify(qpn, hw::QP_ATTR_STATE | req | bit, &a),
                    hw::AQ_BAD_PARAM
                );
            }
            assert_eq!(
                rig.state(qpn),
                cur,
                "{cur}->{next}: refusals changed nothing"
            );
            // The required mask alone, then with every supported optional attribute.
            let supported_opt = opt & !(hw::QP_ATTR_ALT_PATH | hw::QP_ATTR_CUR_STATE);
            let m = hw::QP_ATTR_STATE | req | supported_opt;
            assert_eq!(
                rig.modify(qpn, m, &a),
                hw::AQ_OK,
                "{cur}->{next} mask {m:#x}"
            );
            assert_eq!(rig.state(qpn), next);
            ok += 1;
            rig.ok(hw::CMD_DESTROY_QP, hw::NumParams { num: qpn }.encode());
        }
    }
    assert_eq!(
        ok, 19,
        "every valid transition but SQE's (the NIC enters SQE itself)"
    );
    assert!(refused > 100, "{refused}");
    // A modify without QP_ATTR_STATE stays in the state: valid in INIT, not in RTR.
    let qpn = fresh(&mut rig, hw::QPS_INIT);
    let a = full_attrs(hw::QPS_INIT);
    assert_eq!(rig.modify(qpn, hw::QP_ATTR_PORT, &a), hw::AQ_OK);
    drive(&mut rig, qpn, hw::QPS_RTR);
    assert_eq!(rig.modify(qpn, hw::QP_ATTR_PATH_MTU, &a), hw::AQ_BAD_PARAM);
}

#[test]
fn modify_checks_every_value_and_the_buffer() {
    let mut rig = Rig::new();
    let (_, _, qpn) = rig.qp_on(0);
    drive(&mut rig, qpn, hw::QPS_INIT);
    let rtr = hw::QP_ATTR_STATE | TO_RTR;
    type Breaker = fn(&mut hw::QpAttr);
    let cases: [(&str, Breaker); 14] = [
        ("MTU 0", |a| a.path_mtu = 0),
        ("MTU 8192", |a| a.path_mtu = 6),
        ("dest QPN of 25 bits", |a| a.dest_qp_num = 1 << 24),
        ("RQ PSN of 25 bits", |a| a.rq_psn = 1 << 24),
        ("max_dest_rd_atomic 17", |a| a.max_dest_rd_atomic = 17),
        ("min_rnr_timer 32", |a| a.min_rnr_timer = 32),
        ("DLID 0", |a| a.ah.dlid = 0),
        ("multicast DLID", |a| a.ah.dlid = 0xc001),
        ("SL 16", |a| a.ah.sl = 16),
        ("port 2", |a| a.ah.port_num = 2),
        ("source path bits with LMC 0", |a| a.ah.src_path_bits = 1),
        ("unknown AH flag", |a| a.ah.ah_flags = 2),
        ("SGID index 1", |a| a.ah.sgid_index = 1),
        ("state 7", |a| a.qp_state = 7),
    ];
    for (name, f) in cases {
        let mut a = full_attrs(hw::QPS_RTR);
        f(&mut a);
        assert_eq!(rig.modify(qpn, rtr, &a), hw::AQ_BAD_PARAM, "{name}");
        assert_eq!(rig.state(qpn), hw::QPS_INIT, "{name}: unchanged");
    }
    // INIT -> INIT values: pkey index, port, access flags.
    let init = hw::QP_ATTR_STATE | TO_INIT;
    let cases: [(&str, Breaker); 3] = [
        ("PKey index 1", |a| a.pkey_index = 1),
        ("port 0", |a| a.port_num = 0),
        ("MW bind access", |a| a.qp_access_flags = 1 << 4),
    ];
    for (name, f) in cases {
        let mut a = full_attrs(hw::QPS_INIT);
        f(&mut a);
        assert_eq!(rig.modify(qpn, init, &a), hw::AQ_BAD_PARAM, "{name}");
    }
    // The buffer: short, outside memory, a reserved byte; the QP number.
    let mut a = full_attrs(hw::QPS_RTR).encode();
    a[100] = 1;
    rig.mem.dma_write(BUF, &a).unwrap();
    let mp = |qpn, addr, len| {
        hw::ModifyQpParams {
            qpn,
            attr_mask: rtr,
            attr_addr: addr,
            attr_len: len,
        }
        .encode()
    };
    assert_eq!(
        rig.status(hw::CMD_MODIFY_QP, mp(qpn, BUF, 128)),
        hw::AQ_BAD_PARAM
    );
    rig.mem
        .dma_write(BUF, &full_attrs(hw::QPS_RTR).encode())
        .unwrap();
    assert_eq!(
        rig.status(hw::CMD_MODIFY_QP, mp(qpn, BUF, 127)),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(
        rig.status(hw::CMD_MODIFY_QP, mp(qpn, 0xdead_0000, 128)),
        hw::AQ_BAD_ADDRESS
    );
    assert_eq!(
        rig.status(hw::CMD_MODIFY_QP, mp(qpn, u64::MAX - 64, 128)),
        hw::AQ_BAD_ADDRESS
    );
    assert_eq!(
        rig.status(hw::CMD_MODIFY_QP, mp(qpn + 1, BUF, 128)),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(
        rig.status(hw::CMD_MODIFY_QP, mp(1, BUF, 128)),
        hw::AQ_BAD_PARAM
    );
    // Then the right one works.
    assert_eq!(rig.status(hw::CMD_MODIFY_QP, mp(qpn, BUF, 4096)), hw::AQ_OK);
    // RTR -> RTS values.
    let rts = hw::QP_ATTR_STATE | TO_RTS;
    let cases: [(&str, Breaker); 5] = [
        ("timeout 32", |a| a.timeout = 32),
        ("retry 8", |a| a.retry_cnt = 8),
        ("RNR retry 8", |a| a.rnr_retry = 8),
        ("SQ PSN of 25 bits", |a| a.sq_psn = 1 << 24),
        ("max_rd_atomic 17", |a| a.max_rd_atomic = 17),
    ];
    for (name, f) in cases {
        let mut a = full_attrs(hw::QPS_RTS);
        f(&mut a);
        assert_eq!(rig.modify(qpn, rts, &a), hw::AQ_BAD_PARAM, "{name}");
    }
    // Query: a zero-length buffer, an unknown QP, a short buffer gets a prefix.
    let qq = |qpn, addr, len| {
        hw::QueryQpParams {
            qpn,
            resp_addr: addr,
            resp_len: len,
        }
        .encode()
    };
    assert_eq!(
        rig.status(hw::CMD_QUERY_QP, qq(qpn, BUF, 0)),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(
        rig.status(hw::CMD_QUERY_QP, qq(77, BUF, 8)),
        hw::AQ_BAD_PARAM
    );
    assert_eq!(
        rig.status(hw::CMD_QUERY_QP, qq(qpn, 0xdead_0000, 8)),
        hw::AQ_BAD_ADDRESS
    );
    assert_eq!(rig.run(hw::CMD_QUERY_QP, qq(qpn, BUF, 8)), (hw::AQ_OK, 8));
    assert_eq!(rig.nic.status() & hw::STATUS_FATAL, 0);
}

#[test]
fn destroy_works_in_every_state() {
    let mut rig = Rig::new();
    let (pdn, cqn, first) = rig.qp_on(0);
    rig.ok(hw::CMD_DESTROY_QP, hw::NumParams { num: first }.encode());
    let p = rig.qp_params(0, pdn, cqn, cqn);
    for state in [
        hw::QPS_RESET,
        hw::QPS_INIT,
        hw::QPS_RTR,
        hw::QPS_RTS,
        hw::QPS_SQD,
        hw::QPS_ERR,
    ] {
        let qpn = rig.ok(hw::CMD_CREATE_QP, p.encode()) as u32;
        drive(&mut rig, qpn, state);
        rig.ok(hw::CMD_DESTROY_QP, hw::NumParams { num: qpn }.encode());
        assert_eq!(rig.nic.qps_in_use(), 0, "state {state}");
    }
}

// ----- Doorbells and reset ------------------------------------------------------------------

/// Pages past a byte's reach own QPs (interface 1.6 carries the page's high byte; 1.5's
/// one byte could not name page 256), and their doorbells reach them.
#[test]
fn every_page_of_bar2_owns_qps() {
    let mut rig = Rig::new();
    for page in [255u16, 256, 2047] {
        let (_, _, qpn) = rig.qp_on(page);
        drive(&mut rig, qpn, hw::QPS_INIT);
        let before = rig.nic.doorbells_accepted();
        rig.db(u32::from(page), hw::DB_RQ, hw::db_value(qpn, 1));
        assert_eq!(rig.nic.doorbells_accepted(), before + 1, "page {page}");
        rig.db(u32::from(page) - 1, hw::DB_RQ, hw::db_value(qpn, 2));
        assert_eq!(rig.nic.doorbells_accepted(), before + 1, "page {page} - 1");
    }
}

#[test]
fn doorbells_reach_only_the_owners_queues() {
    let mut rig = Rig::new();
    let (_, cqn, qpn) = rig.qp_on(3);
    let foreign = rig.count(Anomaly::ForeignDoorbell);
    let bad = rig.count(Anomaly::BadDoorbell);
    // RQ doorbells count from INIT, SQ doorbells from RTS.
    rig.db(3, hw::DB_RQ, hw::db_value(qpn, 1));
    assert_eq!(rig.count(Anomaly::BadDoorbell), bad + 1, "RQ in RESET");
    drive(&mut rig, qpn, hw::QPS_INIT);
    rig.db(3, hw::DB_RQ, hw::db_value(qpn, 1));
    rig.db(3, hw::DB_SQ, hw::db_value(qpn, 1));
    assert_eq!(rig.nic.doorbells_accepted(), 1);
    assert_eq!(rig.count(Anomaly::BadDoorbell), bad + 2, "SQ in INIT");
    drive(&mut rig, qpn, hw::QPS_RTS);
    // 64 zeroed WQEs (RDMA WRITEs towards LID 2, not this NIC): the first fails (no
    // route), the QP goes to ERR and the rest flush: the NIC consumed all 64.
    rig.db(3, hw::DB_SQ, hw::db_value(qpn, 64));
    assert_eq!(rig.nic.doorbells_accepted(), 2);
    assert_eq!(rig.state(qpn), hw::QPS_ERR);
    assert_eq!(rig.nic.qp(qpn).map(|q| q.sq.producer()), Some(64));
    // From another context's page (and the kernel's): ignored and counted.
    for page in [0, 4, 63] {
        rig.db(page, hw::DB_SQ, hw::db_value(qpn, 1));
        rig.db(page, hw::DB_RQ, hw::db_value(qpn, 2));
        rig.db(page, hw::DB_CQ_ARM, hw::db_value(cqn, 0));
    }
    assert_eq!(rig.count(Anomaly::ForeignDoorbell), foreign + 9);
    assert_eq!(
        rig.nic.qp(qpn).map(|q| q.sq.producer()),
        Some(64),
        "unchanged"
    );
    // Beyond the ring, no such queue, unknown offset: bad, ignored.
    let bad = rig.count(Anomaly::BadDoorbell);
    rig.db(3, hw::DB_SQ, hw::db_value(qpn, 64 + 65));
    rig.db(3, hw::DB_SQ, hw::db_value(qpn + 1, 1));
    rig.db(3, hw::DB_SQ, hw::db_value(0, 1));
    rig.db(3, hw::DB_CQ_ARM, hw::db_value(cqn + 5, 0));
    rig.db(3, 0x10, 0);
    rig.db(3, 0xffc, 0);
    assert_eq!(rig.count(Anomaly::BadDoorbell), bad + 6);
    // Malformed accesses.
    let acc = rig.count(Anomaly::BadAccess);
    for (off, size) in [
        (3 * 4096 + 2, 4),
        (3 * 4096, 2),
        (3 * 4096, 8),
        (hw::BAR2_SIZE as u64, 4),
    ] {
        rig.nic.doorbell_write(off, size, 0, &rig.mem, &rig.irq);
    }
    assert_eq!(rig.count(Anomaly::BadAccess), acc + 4);
    // The owner's CQ arm works.
    rig.db(3, hw::DB_CQ_ARM, hw::db_value(cqn, 0));
    assert_eq!(rig.nic.doorbells_accepted(), 3);
    // None of this stopped the NIC.
    assert_eq!(
        rig.nic.status(),
        hw::STATUS_READY | hw::STATUS_ENABLED,
        "user doorbells never make the NIC fatal"
    );
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" foreign_doorbells=9"), "{s}");
    assert!(s.contains(" doorbells=3 "), "{s}");
}

#[test]
fn a_reset_frees_every_object_and_the_status_line_shows_it() {
    let mut rig = Rig::new();
    let (pdn, _, _) = rig.qp_on(1);
    let p = small_mr(&rig, pdn);
    let key = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
    // A second MR, destroyed: counted as created, not as existing.
    let key2 = rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32;
    rig.ok(hw::CMD_DESTROY_MR, hw::KeyParams { key: key2 }.encode());
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" pds=1 mrs=1 cqs=1 qps=1 "), "{s}");
    assert!(
        s.contains(" pds_created=1 mrs_created=2 cqs_created=1 qps_created=1 "),
        "{s}"
    );
    rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" pds=0 mrs=0 cqs=0 qps=0 "), "{s}");
    // Counted since the model started: the reset freed them without destroying.
    assert!(
        s.contains(
            " pds_created=1 mrs_created=2 cqs_created=1 qps_created=1 \
             pds_destroyed=0 mrs_destroyed=1 cqs_destroyed=0 qps_destroyed=0 "
        ),
        "{s}"
    );
    assert_eq!(
        rig.nic.translate(&rig.mem, key, pdn, p.iova, 1, 0),
        Err(XlateError::BadKey)
    );
    // Doorbells on a reset NIC are ignored.
    let bad = rig.count(Anomaly::BadDoorbell);
    rig.db(1, hw::DB_SQ, hw::db_value(2, 1));
    assert_eq!(rig.count(Anomaly::BadDoorbell), bad + 1);
}

#[test]
fn injected_destroy_and_admin_faults_behave_as_documented() {
    use ordma_model::engine::Fault;
    // destroy-fails: DESTROY_QP and DESTROY_CQ fail, the queues stay on their page.
    let mut rig = Rig::new();
    let (_, cqn, qpn) = rig.qp_on(5);
    rig.nic.inject(Some(Fault::DestroyFails));
    let n = hw::NumParams { num: qpn }.encode();
    assert_eq!(rig.status(hw::CMD_DESTROY_QP, n), hw::AQ_BAD_PARAM);
    let c = hw::NumParams { num: cqn }.encode();
    assert_eq!(rig.status(hw::CMD_DESTROY_CQ, c), hw::AQ_BAD_PARAM);
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" cqs=1 qps=1 "), "{s}");
    // The queue still answers its page's doorbells.
    rig.db(5, hw::DB_CQ_ARM, hw::db_value(cqn, 0));
    assert_eq!(rig.nic.doorbells_accepted(), 1);
    rig.nic.inject(None);
    rig.ok(hw::CMD_DESTROY_QP, n);
    rig.ok(hw::CMD_DESTROY_CQ, c);

    // admin-stuck: the doorbell is taken, nothing completes, `admin_pending` counts it;
    // disarmed, the next doorbell runs what waited.
    rig.nic.inject(Some(Fault::AdminStuck));
    let done = rig.nic.commands_completed;
    let e = hw::AdminCmd {
        opcode: hw::CMD_ALLOC_PD,
        cmd_id: 77,
        params: [0; hw::AQ_SQE_SIZE - 8],
    }
    .encode();
    let slot = u64::from(rig.prod % (1 << AQ_LOG));
    rig.mem
        .dma_write(SQ + slot * hw::AQ_SQE_SIZE as u64, &e)
        .unwrap();
    rig.prod = rig.prod.wrapping_add(1);
    rig.w(hw::REG_AQ_SQ_DB, u32::from(rig.prod));
    assert_eq!(rig.nic.commands_completed, done);
    assert_eq!(rig.nic.status() & hw::STATUS_FATAL, 0);
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" admin_pending=1 "), "{s}");
    rig.nic.inject(None);
    // PD 0 is the QP's; the waiting ALLOC_PD ran first and got PD 1.
    assert_eq!(rig.alloc_pd(), 2);
    assert_eq!(rig.nic.commands_completed, done + 2);
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" admin_pending=0 "), "{s}");

    // admin-dies: the next admin doorbell makes the NIC fatal, nothing completes.
    rig.nic.inject(Some(Fault::AdminDies));
    let done = rig.nic.commands_completed;
    let slot = u64::from(rig.prod % (1 << AQ_LOG));
    rig.mem
        .dma_write(SQ + slot * hw::AQ_SQE_SIZE as u64, &e)
        .unwrap();
    rig.prod = rig.prod.wrapping_add(1);
    rig.w(hw::REG_AQ_SQ_DB, u32::from(rig.prod));
    assert_eq!(rig.nic.commands_completed, done);
    assert_ne!(rig.nic.status() & hw::STATUS_FATAL, 0);
    assert_eq!(rig.nic.error(), hw::ERR_INTERNAL);
    assert_eq!(rig.event().kind, hw::EVENT_FATAL);
}
