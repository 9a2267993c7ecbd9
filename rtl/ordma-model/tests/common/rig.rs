//! A NIC with two RC QPs connected to each other in loopback, built through the admin
//! queue on anonymous guest memory: the data-path tests' rig (`datapath.rs`,
//! `hostile.rs`).
#![allow(dead_code, reason = "each test file uses a part")]

use ordma_hw as hw;
use std::path::Path;
use std::sync::Arc;

use ordma_model::device::Device;
use ordma_model::engine::{Nic, NicConfig};
use ordma_model::mem::{anonymous, Dma, GuestMemoryMmap, GuestRam};

use super::{Irqs, BUF, CQ, EQ, LEN, SQ};

/// Page tables.
pub const PT: u64 = 0x100_0000;
pub const PT_LEN: usize = 0x40_0000;
/// Rings: SQs, RQs, CQs (physically contiguous pages).
pub const RINGS: u64 = 0x200_0000;
pub const RINGS_LEN: usize = 0x40_0000;
/// Data: 1 GiB (only touched pages cost).
pub const DATA: u64 = 0x4000_0000;
pub const DATA_LEN: usize = 0x4000_0000;
pub const AQ_LOG: u32 = 4;
pub const EQ_LOG: u32 = 6;
/// The big MR: 16 MiB of 2 MiB pages in a shuffled order, at this virtual address.
pub const BIG_VA: u64 = 0x1_0000_0000;
pub const BIG_PAGES: [u64; 8] = [3, 0, 6, 1, 7, 2, 5, 4];
pub const BIG_PHYS: u64 = DATA + 0x1000_0000;
/// The small MR: 64 pages of 4 KiB, shuffled.
pub const SMALL_VA: u64 = 0x2_0000_0000;
pub const SMALL_PHYS: u64 = DATA + 0x2000_0000;
/// A read-only MR (no remote access) over the small MR's pages.
pub const RO_VA: u64 = 0x3_0000_0000;
pub const SQ_LOG: u8 = 6;
pub const SQ_WQE_LOG: u8 = 8;
pub const RQ_LOG: u8 = 6;
pub const RQ_WQE_LOG: u8 = 6;
pub const CQ_LOG: u8 = 6;
pub const PAGE: u32 = 1;
/// [`PAGE`] as QPs and SRQs carry it.
pub const PAGE16: u16 = 1;

pub type P = [u8; hw::AQ_SQE_SIZE - 8];

pub fn small_page(i: u64) -> u64 {
    (i * 37) % 64
}

/// Deterministic bytes.
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub struct Cq {
    pub cqn: u32,
    pub ring: u64,
    pub record: u64,
    pub ci: u32,
    /// log2 of its depth: `CQ_LOG` until a resize.
    pub log: u8,
}

pub struct Qp {
    pub qpn: u32,
    pub sq: u64,
    pub rq: u64,
    pub sq_pi: u16,
    pub rq_pi: u16,
}

pub struct Rig {
    pub nic: Nic,
    pub mem: GuestMemoryMmap,
    pub irq: Irqs,
    pub prod: u16,
    pub ev: u16,
    pub pdn: u32,
    pub big: u32,
    pub small: u32,
    pub ro: u32,
    pub scq: Cq,
    pub rcq: Cq,
    pub a: Qp,
    pub b: Qp,
    pub pt_next: u64,
}

impl Rig {
    pub fn w(&mut self, reg: usize, v: u32) {
        self.nic.bar0_write(reg as u64, 4, v, &self.mem, &self.irq);
    }

    pub fn run(&mut self, opcode: u8, params: P) -> (u16, u64) {
        let e = hw::AdminCmd {
            opcode,
            cmd_id: u32::from(self.prod),
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
        (c.status, c.result)
    }

    pub fn ok(&mut self, opcode: u8, params: P) -> u64 {
        let (s, r) = self.run(opcode, params);
        assert_eq!(s, hw::AQ_OK, "opcode {opcode:#x}");
        r
    }

    pub fn next_event(&mut self) -> Option<hw::Event> {
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

    pub fn events(&mut self) -> Vec<(u8, u32)> {
        std::iter::from_fn(|| self.next_event())
            .map(|e| (e.kind, e.data))
            .collect()
    }

    /// A one-level page list of `pages` (at most 512).
    pub fn list(&mut self, shift: u8, pages: &[u64]) -> hw::PageList {
        let at = self.pt_next;
        self.pt_next += 0x1000;
        let b: Vec<u8> = pages.iter().flat_map(|e| e.to_le_bytes()).collect();
        self.mem.dma_write(at, &b).unwrap();
        hw::PageList {
            root: at,
            npages: pages.len() as u32,
            page_shift: shift,
            levels: 1,
        }
    }

    pub fn mr(&mut self, va: u64, len: u64, shift: u8, pages: &[u64], access: u32) -> u32 {
        let pages = self.list(shift, pages);
        let p = hw::CreateMrParams {
            pdn: self.pdn,
            access,
            iova: va,
            length: len,
            pages,
        };
        self.ok(hw::CMD_CREATE_MR, p.encode()) as u32
    }

    pub fn cq(&mut self, ring: u64, record: u64) -> Cq {
        let bytes = 32u64 << CQ_LOG;
        let pages: Vec<u64> = (0..bytes.div_ceil(4096)).map(|i| ring + i * 4096).collect();
        let list = self.list(12, &pages);
        let p = hw::CreateCqParams {
            db_page: PAGE,
            log_depth: CQ_LOG,
            log_cqe_size: 5,
            ring: list,
            db_record: record,
        };
        let cqn = self.ok(hw::CMD_CREATE_CQ, p.encode()) as u32;
        Cq {
            cqn,
            ring,
            record,
            ci: 0,
            log: CQ_LOG,
        }
    }

    pub fn qp(&mut self, sq: u64, rq: u64) -> Qp {
        self.qp_of(hw::QP_TYPE_RC, sq, rq)
    }

    /// A QP of type `qp_type` with its rings at `sq` and `rq`.
    pub fn qp_of(&mut self, qp_type: u8, sq: u64, rq: u64) -> Qp {
        let sq_pages: Vec<u64> = (0..(1u64 << (SQ_LOG + SQ_WQE_LOG)) / 4096)
            .map(|i| sq + i * 4096)
            .collect();
        let sq_list = self.list(12, &sq_pages);
        let rq_pages: Vec<u64> = (0..(1u64 << (RQ_LOG + RQ_WQE_LOG)).div_ceil(4096))
            .map(|i| rq + i * 4096)
            .collect();
        let rq_list = self.list(12, &rq_pages);
        let p = hw::CreateQpParams {
            qp_type,
            db_page: PAGE16,
            max_send_sge: 4,
            max_recv_sge: 3,
            pdn: self.pdn,
            send_cqn: self.scq.cqn,
            recv_cqn: self.rcq.cqn,
            max_inline: 128,
            flags: 0,
            sq: hw::WorkQueue {
                log_depth: SQ_LOG,
                log_wqe_size: SQ_WQE_LOG,
                ring: sq_list,
            },
            rq: hw::WorkQueue {
                log_depth: RQ_LOG,
                log_wqe_size: RQ_WQE_LOG,
                ring: rq_list,
            },
        };
        let qpn = self.ok(hw::CMD_CREATE_QP, p.encode()) as u32;
        Qp {
            qpn,
            sq,
            rq,
            sq_pi: 0,
            rq_pi: 0,
        }
    }

    pub fn modify(&mut self, qpn: u32, mask: u32, a: &hw::QpAttr) -> u16 {
        self.mem.dma_write(BUF, &a.encode()).unwrap();
        let p = hw::ModifyQpParams {
            qpn,
            attr_mask: mask,
            attr_addr: BUF,
            attr_len: hw::QP_ATTR_SIZE as u32,
        };
        self.run(hw::CMD_MODIFY_QP, p.encode()).0
    }

    pub fn query(&mut self, qpn: u32) -> hw::QpAttr {
        let p = hw::QueryQpParams {
            qpn,
            resp_addr: BUF + 0x200,
            resp_len: hw::QP_ATTR_SIZE as u32,
        };
        assert_eq!(self.run(hw::CMD_QUERY_QP, p.encode()).0, hw::AQ_OK);
        let mut b = [0u8; hw::QP_ATTR_SIZE];
        self.mem.dma_read(BUF + 0x200, &mut b).unwrap();
        hw::QpAttr::decode(&b).unwrap()
    }

    /// RESET -> RTS towards `dest`, `psn` its send PSN, `rq_psn` its receive PSN.
    pub fn connect(
        &mut self,
        qpn: u32,
        dest: u32,
        sq_psn: u32,
        rq_psn: u32,
        f: impl Fn(&mut hw::QpAttr),
    ) {
        let mut a = hw::QpAttr {
            path_mtu: hw::MTU_4096,
            qp_access_flags: hw::ACCESS_REMOTE_WRITE
                | hw::ACCESS_REMOTE_READ
                | hw::ACCESS_REMOTE_ATOMIC,
            port_num: 1,
            dest_qp_num: dest,
            rq_psn,
            sq_psn,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            ah: hw::QpAh {
                dlid: 1,
                port_num: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        f(&mut a);
        let steps = [
            (
                hw::QPS_INIT,
                hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_ACCESS_FLAGS,
            ),
            (
                hw::QPS_RTR,
                hw::QP_ATTR_AV
                    | hw::QP_ATTR_PATH_MTU
                    | hw::QP_ATTR_DEST_QPN
                    | hw::QP_ATTR_RQ_PSN
                    | hw::QP_ATTR_MAX_DEST_RD_ATOMIC
                    | hw::QP_ATTR_MIN_RNR_TIMER,
            ),
            (
                hw::QPS_RTS,
                hw::QP_ATTR_TIMEOUT
                    | hw::QP_ATTR_RETRY_CNT
                    | hw::QP_ATTR_RNR_RETRY
                    | hw::QP_ATTR_SQ_PSN
                    | hw::QP_ATTR_MAX_QP_RD_ATOMIC,
            ),
        ];
        for (state, mask) in steps {
            a.qp_state = state;
            assert_eq!(self.modify(qpn, hw::QP_ATTR_STATE | mask, &a), hw::AQ_OK);
        }
    }

    /// Two UC QPs in place of QPs A and B (which stay, unused, in `RESET`), their rings at
    /// the free end of the rings' region; in `RESET` ([`Rig::connect_uc`] connects them).
    pub fn uc_pair(&mut self) {
        self.a = self.qp_of(hw::QP_TYPE_UC, RINGS + 0x30_0000, RINGS + 0x34_0000);
        self.b = self.qp_of(hw::QP_TYPE_UC, RINGS + 0x38_0000, RINGS + 0x3c_0000);
    }

    /// RESET -> RTS of UC QP `qpn` towards `dest`: UC's required attributes only (no
    /// timeout, retries, RNR timer or READ/atomic depths), `f` adjusting them.
    pub fn connect_uc(
        &mut self,
        qpn: u32,
        dest: u32,
        sq_psn: u32,
        rq_psn: u32,
        f: impl Fn(&mut hw::QpAttr),
    ) {
        let mut a = hw::QpAttr {
            path_mtu: hw::MTU_4096,
            qp_access_flags: hw::ACCESS_REMOTE_WRITE,
            port_num: 1,
            dest_qp_num: dest,
            rq_psn,
            sq_psn,
            ah: hw::QpAh {
                dlid: 1,
                port_num: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        f(&mut a);
        let steps = [
            (
                hw::QPS_INIT,
                hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_ACCESS_FLAGS,
            ),
            (
                hw::QPS_RTR,
                hw::QP_ATTR_AV | hw::QP_ATTR_PATH_MTU | hw::QP_ATTR_DEST_QPN | hw::QP_ATTR_RQ_PSN,
            ),
            (hw::QPS_RTS, hw::QP_ATTR_SQ_PSN),
        ];
        for (state, mask) in steps {
            a.qp_state = state;
            assert_eq!(self.modify(qpn, hw::QP_ATTR_STATE | mask, &a), hw::AQ_OK);
        }
    }

    pub fn new() -> Self {
        Self::with(|_| {})
    }

    /// Two QPs A and B connected to each other, `f` adjusting both QPs' attributes.
    pub fn with(f: impl Fn(&mut hw::QpAttr)) -> Self {
        let mut rig = Self::bare(1);
        let (a, b) = (rig.a.qpn, rig.b.qpn);
        rig.connect(a, b, 100, 500, &f);
        rig.connect(b, a, 500, 100, &f);
        rig
    }

    /// A NIC with port LID `lid`, its PD, MRs, CQs and QPs A and B in `RESET`.
    pub fn bare(lid: u16) -> Self {
        Self::bare_with(lid, |_| {})
    }

    /// [`Rig::bare`] with the NIC's configuration adjusted by `cfg`.
    pub fn bare_with(lid: u16, cfg: impl FnOnce(&mut NicConfig)) -> Self {
        let mut config = NicConfig::with_guid(0x42 + u64::from(lid));
        config.lid = lid;
        cfg(&mut config);
        let mem = anonymous(&[
            (SQ, LEN),
            (CQ, LEN),
            (EQ, LEN),
            (BUF, LEN),
            (PT, PT_LEN),
            (RINGS, RINGS_LEN),
            (DATA, DATA_LEN),
        ])
        .unwrap();
        let irq = Irqs::default();
        let nic = Nic::new(config);
        let dummy = || Cq {
            cqn: 0,
            ring: 0,
            record: 0,
            ci: 0,
            log: CQ_LOG,
        };
        let dq = || Qp {
            qpn: 0,
            sq: 0,
            rq: 0,
            sq_pi: 0,
            rq_pi: 0,
        };
        let mut rig = Self {
            nic,
            mem,
            irq,
            prod: 0,
            ev: 0,
            pdn: 0,
            big: 0,
            small: 0,
            ro: 0,
            scq: dummy(),
            rcq: dummy(),
            a: dq(),
            b: dq(),
            pt_next: PT,
        };
        rig.bring_up();
        rig
    }

    /// Brings the NIC up as [`Rig::bare`] does, from its state after a reset
    /// ([`Rig::enable`]), and makes the rig's PD, MRs, CQs and QPs A and B (in `RESET`) on
    /// it again.
    pub fn bring_up(&mut self) {
        self.enable();
        let rig = self;
        assert_eq!(rig.events(), [(hw::EVENT_PORT_ACTIVE, 1)]);
        rig.pdn = rig.ok(hw::CMD_ALLOC_PD, [0; 56]) as u32;
        let all = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ;
        let big: Vec<u64> = BIG_PAGES.iter().map(|p| BIG_PHYS + p * 0x20_0000).collect();
        rig.big = rig.mr(BIG_VA, 16 << 20, 21, &big, all);
        let small: Vec<u64> = (0..64).map(|i| SMALL_PHYS + small_page(i) * 4096).collect();
        rig.small = rig.mr(
            SMALL_VA,
            64 * 4096,
            12,
            &small,
            all | hw::ACCESS_REMOTE_ATOMIC,
        );
        rig.ro = rig.mr(RO_VA, 64 * 4096, 12, &small, hw::ACCESS_LOCAL_WRITE);
        rig.scq = rig.cq(RINGS, BUF + 0x800);
        rig.rcq = rig.cq(RINGS + 0x1_0000, BUF + 0x808);
        rig.a = rig.qp(RINGS + 0x10_0000, RINGS + 0x20_0000);
        rig.b = rig.qp(RINGS + 0x18_0000, RINGS + 0x28_0000);
    }

    /// Enables the NIC as a driver does after a reset: its admin CQ and event queue
    /// zeroed (no stale phase bits), bus mastering on, the queue registers, `ENABLE`.
    pub fn enable(&mut self) {
        self.prod = 0;
        self.ev = 0;
        self.pt_next = PT;
        let aq_cq = vec![0u8; hw::AQ_CQE_SIZE << AQ_LOG];
        self.mem.dma_write(CQ, &aq_cq).unwrap();
        let eq = vec![0u8; hw::EQE_SIZE << EQ_LOG];
        self.mem.dma_write(EQ, &eq).unwrap();
        self.nic.set_bus_master(true, &self.mem, &self.irq);
        for (reg, v) in [
            (hw::REG_AQ_SQ_BASE, SQ as u32),
            (hw::REG_AQ_CQ_BASE, CQ as u32),
            (hw::REG_EQ_BASE, EQ as u32),
            (hw::REG_AQ_LOG_DEPTH, AQ_LOG),
            (hw::REG_EQ_LOG_DEPTH, EQ_LOG),
            (hw::REG_CONTROL, hw::CONTROL_ENABLE),
        ] {
            self.w(reg, v);
        }
    }

    /// The bus address of virtual address `va` in the big or small MR, and the bytes
    /// contiguous from it.
    pub fn bus(va: u64) -> (u64, u64) {
        if (BIG_VA..BIG_VA + (16 << 20)).contains(&va) {
            let off = va - BIG_VA;
            let page = BIG_PAGES[(off >> 21) as usize];
            (
                BIG_PHYS + page * 0x20_0000 + off % 0x20_0000,
                0x20_0000 - off % 0x20_0000,
            )
        } else {
            let off = va - if va >= RO_VA { RO_VA } else { SMALL_VA };
            (
                SMALL_PHYS + small_page(off >> 12) * 4096 + off % 4096,
                4096 - off % 4096,
            )
        }
    }

    pub fn fill(&self, va: u64, data: &[u8]) {
        let mut done = 0;
        while done < data.len() {
            let (addr, n) = Self::bus(va + done as u64);
            let n = (n as usize).min(data.len() - done);
            self.mem.dma_write(addr, &data[done..done + n]).unwrap();
            done += n;
        }
    }

    pub fn read(&self, va: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let (addr, n) = Self::bus(va + done as u64);
            let n = (n as usize).min(len - done);
            self.mem.dma_read(addr, &mut out[done..done + n]).unwrap();
            done += n;
        }
        out
    }

    pub fn db(&mut self, reg: usize, value: u32) {
        let off = u64::from(PAGE) * hw::DB_PAGE_SIZE as u64 + reg as u64;
        self.nic.doorbell_write(off, 4, value, &self.mem, &self.irq);
    }

    /// Writes a send WQE on `which` QP's SQ (without a doorbell); its index.
    pub fn put_send(
        &mut self,
        which: char,
        wqe: hw::SendWqe,
        sges: &[hw::Sge],
        inline: &[u8],
    ) -> u16 {
        let q = if which == 'a' {
            &mut self.a
        } else {
            &mut self.b
        };
        let mut b = vec![0u8; 1 << SQ_WQE_LOG];
        assert!(wqe.encode_into(&mut b));
        for (i, s) in sges.iter().enumerate() {
            assert!(s.encode_into(&mut b, hw::SendWqe::sge_offset(i)));
        }
        let at = hw::SendWqe::sge_offset(0);
        b[at..at + inline.len()].copy_from_slice(inline);
        let slot = u64::from(q.sq_pi % (1 << SQ_LOG));
        let idx = q.sq_pi;
        self.mem.dma_write(q.sq + (slot << SQ_WQE_LOG), &b).unwrap();
        q.sq_pi = q.sq_pi.wrapping_add(1);
        idx
    }

    /// Writes an atomic WQE on `which` QP's SQ (without a doorbell): its atomic segment
    /// `seg`, its SGEs behind it; its index.
    #[allow(clippy::too_many_arguments, reason = "a WQE's fields")]
    pub fn put_atomic(
        &mut self,
        which: char,
        opcode: u8,
        flags: u8,
        va: u64,
        rkey: u32,
        seg: hw::AtomicSeg,
        sges: &[hw::Sge],
    ) -> u16 {
        let q = if which == 'a' {
            &mut self.a
        } else {
            &mut self.b
        };
        let w = hw::SendWqe {
            opcode,
            flags,
            num_sge: sges.len() as u8,
            remote_addr: va,
            rkey,
            ..Default::default()
        };
        let mut b = vec![0u8; 1 << SQ_WQE_LOG];
        assert!(w.encode_into(&mut b) && seg.encode_into(&mut b));
        for (i, s) in sges.iter().enumerate() {
            assert!(s.encode_into(&mut b, hw::SendWqe::atomic_sge_offset(i)));
        }
        let slot = u64::from(q.sq_pi % (1 << SQ_LOG));
        let idx = q.sq_pi;
        self.mem.dma_write(q.sq + (slot << SQ_WQE_LOG), &b).unwrap();
        q.sq_pi = q.sq_pi.wrapping_add(1);
        idx
    }

    pub fn ring_sq(&mut self, which: char) {
        let q = if which == 'a' { &self.a } else { &self.b };
        let v = hw::db_value(q.qpn, q.sq_pi);
        self.db(hw::DB_SQ, v);
    }

    pub fn send(&mut self, which: char, wqe: hw::SendWqe, sges: &[hw::Sge], inline: &[u8]) -> u16 {
        let i = self.put_send(which, wqe, sges, inline);
        self.ring_sq(which);
        i
    }

    pub fn put_recv(&mut self, which: char, sges: &[hw::Sge]) -> u16 {
        let q = if which == 'a' {
            &mut self.a
        } else {
            &mut self.b
        };
        let mut b = vec![0u8; 1 << RQ_WQE_LOG];
        assert!(hw::RecvWqe {
            num_sge: sges.len() as u8
        }
        .encode_into(&mut b));
        for (i, s) in sges.iter().enumerate() {
            assert!(s.encode_into(&mut b, hw::RecvWqe::sge_offset(i)));
        }
        let slot = u64::from(q.rq_pi % (1 << RQ_LOG));
        let idx = q.rq_pi;
        self.mem.dma_write(q.rq + (slot << RQ_WQE_LOG), &b).unwrap();
        q.rq_pi = q.rq_pi.wrapping_add(1);
        idx
    }

    pub fn recv(&mut self, which: char, sges: &[hw::Sge]) -> u16 {
        let i = self.put_recv(which, sges);
        let q = if which == 'a' { &self.a } else { &self.b };
        let v = hw::db_value(q.qpn, q.rq_pi);
        self.db(hw::DB_RQ, v);
        i
    }

    /// The next CQE of the send (`'s'`) or receive CQ, if its phase says it is new.
    pub fn poll(&mut self, which: char) -> Option<hw::Cqe> {
        let cq = if which == 's' {
            &mut self.scq
        } else {
            &mut self.rcq
        };
        let slot = u64::from(cq.ci % (1 << cq.log));
        let mut b = [0u8; 32];
        self.mem.dma_read(cq.ring + slot * 32, &mut b).unwrap();
        if b[hw::CQE_OWNER_OFFSET] & 1 != hw::cqe_phase(cq.ci, cq.log) {
            return None;
        }
        cq.ci += 1;
        self.mem.dma_write(cq.record, &cq.ci.to_le_bytes()).unwrap();
        hw::Cqe::decode(&b)
    }

    pub fn cqe(&mut self, which: char) -> hw::Cqe {
        self.poll(which).expect("a CQE")
    }

    pub fn state(&mut self, qpn: u32) -> u8 {
        self.query(qpn).qp_state
    }

    /// `CMD_CREATE_SRQ`'s parameters for a ring of `2^log_depth` WQEs of `2^log_wqe` bytes
    /// at `ring` (physically contiguous), on the rig's page and PD.
    pub fn srq_params(
        &mut self,
        ring: u64,
        log_depth: u8,
        log_wqe: u8,
        max_sge: u8,
    ) -> hw::CreateSrqParams {
        let bytes = 1u64 << (log_depth + log_wqe);
        let pages: Vec<u64> = (0..bytes.div_ceil(4096)).map(|i| ring + i * 4096).collect();
        let list = self.list(12, &pages);
        hw::CreateSrqParams {
            db_page: PAGE16,
            max_sge,
            wq: hw::WorkQueue {
                log_depth,
                log_wqe_size: log_wqe,
                ring: list,
            },
            pdn: self.pdn,
        }
    }

    /// An SRQ as [`Rig::srq_params`] describes it: its number.
    pub fn srq(&mut self, ring: u64, log_depth: u8, log_wqe: u8, max_sge: u8) -> u32 {
        let p = self.srq_params(ring, log_depth, log_wqe, max_sge);
        self.ok(hw::CMD_CREATE_SRQ, p.encode()) as u32
    }

    /// `CMD_CREATE_QP`'s parameters for a QP with its SQ at `sq` receiving through SRQ
    /// `srqn`, completing to the rig's CQs.
    pub fn srq_qp_params(&mut self, sq: u64, srqn: u32) -> hw::CreateQpParams {
        let sq_pages: Vec<u64> = (0..(1u64 << (SQ_LOG + SQ_WQE_LOG)) / 4096)
            .map(|i| sq + i * 4096)
            .collect();
        let sq_list = self.list(12, &sq_pages);
        let mut p = hw::CreateQpParams {
            qp_type: hw::QP_TYPE_RC,
            db_page: PAGE16,
            max_send_sge: 4,
            max_recv_sge: 0,
            pdn: self.pdn,
            send_cqn: self.scq.cqn,
            recv_cqn: self.rcq.cqn,
            max_inline: 128,
            flags: hw::QP_FLAG_SRQ,
            sq: hw::WorkQueue {
                log_depth: SQ_LOG,
                log_wqe_size: SQ_WQE_LOG,
                ring: sq_list,
            },
            rq: hw::WorkQueue::default(),
        };
        p.rq.ring.root = u64::from(srqn);
        p
    }

    /// A QP receiving through SRQ `srqn`, its SQ at `sq`.
    pub fn srq_qp(&mut self, sq: u64, srqn: u32) -> Qp {
        let p = self.srq_qp_params(sq, srqn);
        let qpn = self.ok(hw::CMD_CREATE_QP, p.encode()) as u32;
        Qp {
            qpn,
            sq,
            rq: 0,
            sq_pi: 0,
            rq_pi: 0,
        }
    }

    /// Writes the WQE of `slot` (linked to `next`) of an SRQ ring of `2^log_wqe`-byte WQEs
    /// at `ring`.
    pub fn put_srq(&self, ring: u64, log_wqe: u8, slot: u16, next: u16, sges: &[hw::Sge]) {
        let mut b = vec![0u8; 1 << log_wqe];
        assert!(hw::SrqWqe {
            num_sge: sges.len() as u8,
            next
        }
        .encode_into(&mut b));
        for (i, s) in sges.iter().enumerate() {
            assert!(s.encode_into(&mut b, hw::RecvWqe::sge_offset(i)));
        }
        self.mem
            .dma_write(ring + (u64::from(slot) << log_wqe), &b)
            .unwrap();
    }
}

pub fn sge(addr: u64, length: u32, lkey: u32) -> hw::Sge {
    hw::Sge { addr, length, lkey }
}

pub fn wqe(opcode: u8, flags: u8, num_sge: u8) -> hw::SendWqe {
    hw::SendWqe {
        opcode,
        flags,
        num_sge,
        ..Default::default()
    }
}

/// `len` bytes split into up to `n` SGEs of uneven sizes at `va`.
pub fn split(va: u64, len: u32, n: u32, key: u32) -> Vec<hw::Sge> {
    let mut out = Vec::new();
    let mut off = 0;
    for i in 0..n {
        let part = if i + 1 == n {
            len - off
        } else {
            (len - off) / (n - i + 1)
        };
        out.push(sge(va + u64::from(off), part, key));
        off += part;
    }
    out
}

/// Moves each rig's NIC into a [`Device`] on the real socket wire in `dir` (LID = its index
/// + 1), with its timer thread, as a model process runs it; the rig keeps its memory.
#[allow(dead_code)] // each test binary uses its own part of the rig
pub fn on_socket_wire(r: &mut [Rig], dir: &Path) -> Vec<Arc<Device>> {
    r.iter_mut()
        .enumerate()
        .map(|(i, x)| {
            let nic = std::mem::replace(&mut x.nic, Nic::new(NicConfig::with_guid(0)));
            let dev = Arc::new(Device::new(nic, GuestRam::new(x.mem.clone())));
            let lid = u16::try_from(i + 1).unwrap();
            let mac = ordma_model::engine::port::lid_mac(lid);
            ordma_model::wire::attach(&dev, dir, mac, Default::default()).unwrap();
            Device::spawn_timers(&dev).unwrap();
            dev
        })
        .collect()
}
