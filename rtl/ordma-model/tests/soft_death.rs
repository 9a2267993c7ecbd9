//! Soft deaths (the control channel's `die` and `die fatal`: `Nic::die`), function resets
//! (`Nic::function_reset`) and faults that last until one: a dead NIC forgets every object
//! and counter at once, does no DMA, sends and answers no frame, takes no doorbell and
//! raises no event or interrupt; a function reset makes it a NIC as a new model process
//! starts, whose objects get a brand-new NIC's numbers and keys; `die fatal` is revived by
//! a NIC reset; a fault armed `until-reset` ends at the next function reset and a NIC
//! reset does not end it, a permanent one survives both.

mod common;

use std::cell::Cell;
use std::time::{Duration, Instant};

use common::eth::*;
use common::pair::*;
use common::rig::*;
use common::{Irqs, EQ};
use ordma_hw as hw;
use ordma_model::engine::remote::Steer;
use ordma_model::engine::{Death, Fault, Nic};
use ordma_model::mem::{Dma, DmaError};

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
const SRQ_RING: u64 = RINGS + 0x30_0000;
const SRQ_QP_SQ: u64 = RINGS + 0x34_0000;

/// Guest memory that counts every access the NIC makes through it: descriptors and
/// payload, reads and writes (copies and atomics go through them).
struct Watch<'a> {
    mem: &'a dyn Dma,
    accesses: Cell<u64>,
}

impl<'a> Watch<'a> {
    fn new(mem: &'a dyn Dma) -> Self {
        Self {
            mem,
            accesses: Cell::new(0),
        }
    }
}

impl Dma for Watch<'_> {
    fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.accesses.set(self.accesses.get() + 1);
        self.mem.dma_read(addr, buf)
    }

    fn dma_write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.accesses.set(self.accesses.get() + 1);
        self.mem.dma_write(addr, data)
    }

    fn reachable(&self, addr: u64, len: u64) -> bool {
        self.mem.reachable(addr, len)
    }
}

fn alloc_mw(r: &mut Rig, mw_type: u8) -> u32 {
    let pdn = r.pdn;
    r.ok(
        hw::CMD_ALLOC_MW,
        hw::AllocMwParams { pdn, mw_type }.encode(),
    ) as u32
}

/// Every object kind the NIC holds, beyond the rig's PD, 3 MRs, 2 CQs and QPs A and B:
/// a window of each type, an SRQ and a QP on it. (window keys, SRQ number, its QP)
fn more_objects(r: &mut Rig) -> ([u32; 2], u32, u32) {
    let mws = [alloc_mw(r, hw::MW_TYPE_1), alloc_mw(r, hw::MW_TYPE_2)];
    let srqn = r.srq(SRQ_RING, 3, 6, 2);
    let qpn = r.srq_qp(SRQ_QP_SQ, srqn).qpn;
    (mws, srqn, qpn)
}

/// The rig's object numbers and keys, and `more_objects`'.
fn numbers(r: &Rig, more: ([u32; 2], u32, u32)) -> Vec<u32> {
    let (mws, srqn, qpn) = more;
    vec![
        r.pdn, r.big, r.small, r.ro, r.scq.cqn, r.rcq.cqn, r.a.qpn, r.b.qpn, mws[0], mws[1], srqn,
        qpn,
    ]
}

/// Every `key=value` of the NIC's `status` that is not 0, but for the link and `bme`.
fn nonzero(nic: &Nic) -> Vec<String> {
    nic.status_snapshot()
        .to_string()
        .split_whitespace()
        .filter(|kv| !kv.starts_with("link=") && !kv.starts_with("bme="))
        .filter(|kv| !kv.ends_with("=0"))
        .map(str::to_string)
        .collect()
}

/// `n` SENDs of 2 pages from NIC 1's QP A to NIC 2's QP B, each completed on both sides.
fn sends(p: &mut Pair, n: u32) {
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    for _ in 0..n {
        p.r[1].recv('b', &[sge(BIG_VA, 2 * 4096, big1)]);
        let w = wqe(hw::WR_SEND, SIGNALED, 1);
        p.r[0].send('a', w, &[sge(BIG_VA, 2 * 4096, big0)], &[]);
        p.settle(50);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
        assert_eq!(p.r[1].cqe('r').status, hw::WC_SUCCESS);
    }
}

#[test]
fn a_soft_death_forgets_everything_and_a_function_reset_makes_a_new_nic() {
    // What a brand-new NIC hands out.
    let mut fresh = eth_nic(1, false);
    let fresh_more = more_objects(&mut fresh);
    let fresh_numbers = numbers(&fresh, fresh_more);

    // Two Ethernet NICs, NIC 1's QP A connected to NIC 2's QP B, traffic between them;
    // NIC 1 holds one of every object kind, a GID, counters of every sort.
    let mut p = eth_pair(false, |_, _| {});
    let (_, srqn, _) = more_objects(&mut p.r[0]);
    sends(&mut p, 3);
    let a = p.r[0].a.qpn;
    let big = p.r[0].big;
    let cqn = p.r[0].rcq.cqn;
    let ci = p.r[0].rcq.ci as u16;
    p.r[0].db(hw::DB_CQ_ARM, hw::db_value(cqn, ci));
    let r = &mut p.r[0];
    let before = r.nic.status_snapshot();
    assert_eq!(
        (
            before.pds,
            before.mrs,
            before.mws,
            before.cqs,
            before.qps,
            before.srqs
        ),
        (1, 3, 2, 2, 3, 1)
    );
    assert!(before.gids > 0 && before.doorbells > 0 && before.commands > 0);
    assert!(before.port_counters.get(hw::CNT_SENT_PKTS) >= 3);
    assert!(r
        .nic
        .qp_counters(a)
        .is_some_and(|c| c.get(hw::CNT_RDMA_SENDS) == 3));
    assert!(r.nic.doorbell_page_writes().iter().any(|&n| n > 0));
    assert!(r.nic.mr(big).is_some());

    r.nic.die(Death::Silent, &r.mem, &r.irq).unwrap();
    // Forgotten at once, every object and every count: only `dead` is left.
    assert_eq!(nonzero(&r.nic), ["dead=1"]);
    assert!(r.nic.is_dead());
    assert!(r.nic.qp_counters(a).is_none() && r.nic.mr(big).is_none());
    assert!(r.nic.srq(srqn).is_none() && r.nic.qp(a).is_none());
    assert!(r.nic.doorbell_page_writes().iter().all(|&n| n == 0));
    assert_eq!(
        r.nic.die(Death::Silent, &r.mem, &r.irq),
        Err("the NIC is dead already".into())
    );

    // A function reset: a NIC in its power-on state, bus mastering off.
    r.nic.function_reset();
    assert!(!r.nic.is_dead() && !r.nic.bus_master());
    assert_eq!(r.nic.status(), hw::STATUS_READY);
    assert_eq!(r.nic.bar0_read(hw::REG_VERSION as u64, 4), hw::VERSION);
    assert_eq!(nonzero(&r.nic), Vec::<String>::new());
    // Brought up again, its objects get what a brand-new NIC's get.
    r.bring_up();
    let again = more_objects(r);
    assert_eq!(numbers(r, again), fresh_numbers);
    // And it works: a SEND from QP A to QP B of its own, every byte.
    let (a, b) = (r.a.qpn, r.b.qpn);
    r.connect(a, b, 7, 9, |at| at.ah = av(1, false, 0));
    r.connect(b, a, 9, 7, |at| at.ah = av(1, false, 0));
    assert_eq!(
        set_gid(r, 0, gid(1, false), hw::GID_TYPE_ROCE_V2),
        hw::AQ_OK
    );
    let big = r.big;
    let data = bytes(5, 5000);
    r.fill(BIG_VA, &data);
    r.recv('b', &[sge(BIG_VA + (4 << 20), 5000, big)]);
    r.send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 5000, big)],
        &[],
    );
    assert_eq!(r.cqe('s').status, hw::WC_SUCCESS);
    assert_eq!(r.cqe('r').byte_len, 5000);
    assert!(r.read(BIG_VA + (4 << 20), 5000) == data);
}

#[test]
fn a_dead_nic_does_no_dma_sends_no_frame_takes_no_doorbell_raises_no_event() {
    let mut p = Pair::new(|at| at.retry_cnt = 2);
    // NIC 2's QP B has a receive posted and its receive CQ armed: a SEND from A would
    // complete there and raise an event, a WRITE would land, had NIC 2 lived.
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    let target = BIG_VA + (2 << 20);
    p.r[1].fill(target, &[0xee; 8192]);
    p.r[1].recv('b', &[sge(BIG_VA, 4096, big1)]);
    let (cqn, ci) = (p.r[1].rcq.cqn, p.r[1].rcq.ci as u16);
    p.r[1].db(hw::DB_CQ_ARM, hw::db_value(cqn, ci));
    // Two WQEs of its own in B's SQ, rung only once it is dead.
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, big0);
    p.r[1].put_send('b', w, &[sge(BIG_VA, 100, big1)], &[]);
    p.r[1].put_send('b', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    let (bqpn, bpi) = (p.r[1].b.qpn, p.r[1].b.sq_pi);
    let mut r1 = p.r.pop().unwrap();
    let _ = r1.irq.take();
    r1.nic.die(Death::Silent, &r1.mem, &r1.irq).unwrap();

    // From now on everything NIC 2 is handed goes through memory that counts.
    let watch = Watch::new(&r1.mem);
    let irq2 = Irqs::default();
    // NIC 1 sends a SEND and a WRITE to it; NIC 2 takes the frames, and its timers run.
    let w1 = p.r[0].send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA, 4096, big0)],
        &[],
    );
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (target, big1);
    let w2 = p.r[0].send('a', w, &[sge(BIG_VA, 8192, big0)], &[]);
    let (mut to_dead, mut from_dead) = (0, 0);
    for tick in 0..20 {
        let frames: Vec<(u16, Vec<u8>)> = p.q.lock().unwrap().drain(..).collect();
        for (dlid, f) in frames {
            if dlid == 2 {
                to_dead += 1;
                assert_eq!(r1.nic.receive_frame(&f, &watch, &irq2), Steer::Engine);
            } else {
                from_dead += 1;
            }
        }
        let later = Instant::now() + Duration::from_secs(10 * (tick + 1));
        r1.nic.tick(later, &watch, &irq2);
        if !p.r[0].nic.timers_pending() {
            break;
        }
        let r0 = &mut p.r[0];
        r0.nic.tick(later, &r0.mem, &r0.irq);
    }
    assert!(
        to_dead >= 6,
        "{to_dead} frames to the dead NIC: the first sends, retries"
    );
    assert_eq!(
        watch.accesses.get(),
        0,
        "the dead NIC reached memory for a frame"
    );
    assert_eq!(from_dead, 0, "the dead NIC answered");
    // No answer: NIC 1's retries run out.
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_RETRY_EXC_ERR, w1));
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_WR_FLUSH_ERR, w2));

    // Doorbells on every page and offset, register writes, bus mastering off and on,
    // link changes, events and fatal errors on request: nothing.
    for page in [0u64, 1, 2] {
        let base = page * hw::DB_PAGE_SIZE as u64;
        let sq = hw::db_value(bqpn, bpi);
        r1.nic
            .doorbell_write(base + hw::DB_SQ as u64, 4, sq, &watch, &irq2);
        let arm = hw::db_value(cqn, ci);
        r1.nic
            .doorbell_write(base + hw::DB_CQ_ARM as u64, 4, arm, &watch, &irq2);
    }
    for (reg, v) in [
        (hw::REG_CONTROL, hw::CONTROL_ENABLE),
        (hw::REG_CONTROL, hw::CONTROL_RESET),
        (hw::REG_CONTROL, 77),
        (hw::REG_AQ_SQ_DB, 1),
        (hw::REG_EQ_DB, 1 | hw::EQ_DB_ARM),
        (hw::REG_VERSION, 1),
    ] {
        r1.nic.bar0_write(reg as u64, 4, v, &watch, &irq2);
    }
    r1.nic.set_bus_master(false, &watch, &irq2);
    r1.nic.set_bus_master(true, &watch, &irq2);
    r1.nic.set_link(false, &watch, &irq2);
    r1.nic.set_link(true, &watch, &irq2);
    assert!(!r1
        .nic
        .post_any_event(hw::EVENT_PORT_ACTIVE, 1, &watch, &irq2));
    r1.nic.fatal(hw::ERR_INTERNAL, &watch, &irq2);
    // BAR0 reads all ones, however read.
    for reg in [
        hw::REG_VERSION,
        hw::REG_STATUS,
        hw::REG_ERROR,
        hw::REG_DB_PAGES,
        0x44,
    ] {
        assert_eq!(r1.nic.bar0_read(reg as u64, 4), u32::MAX);
    }
    assert_eq!(r1.nic.bar0_read(2, 2), u32::MAX);

    assert_eq!(watch.accesses.get(), 0, "the dead NIC reached memory");
    assert!(
        irq2.take().is_empty() && r1.irq.take().is_empty(),
        "an interrupt"
    );
    assert!(p.q.lock().unwrap().is_empty(), "the dead NIC sent a frame");
    // Nothing counted (the anomalies neither), nothing landed.
    assert_eq!(nonzero(&r1.nic), ["dead=1"]);
    assert!(r1.poll('r').is_none() && r1.poll('s').is_none());
    assert!(r1.read(target, 8192) == [0xee; 8192]);
    let mut e = [0u8; hw::EQE_SIZE];
    r1.mem
        .dma_read(EQ + u64::from(r1.ev) * hw::EQE_SIZE as u64, &mut e)
        .unwrap();
    assert_eq!(e, [0; hw::EQE_SIZE], "an event after the last one taken");
}

#[test]
fn a_dead_ethernet_port_passes_no_frame_of_the_host() {
    let mut r = eth_nic(1, false);
    // An ARP request to the port's MAC: the host's, handed to the netdev while alive.
    let mut arp = vec![0u8; 60];
    arp[..6].copy_from_slice(&[0xff; 6]);
    arp[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(r.nic.receive_frame(&arp, &r.mem, &r.irq), Steer::Host);
    r.nic.die(Death::Silent, &r.mem, &r.irq).unwrap();
    assert_eq!(r.nic.receive_frame(&arp, &r.mem, &r.irq), Steer::Engine);
    r.nic.function_reset();
    assert_eq!(r.nic.receive_frame(&arp, &r.mem, &r.irq), Steer::Host);
}

#[test]
fn die_fatal_reports_forgets_and_a_nic_reset_revives() {
    let fresh = Rig::bare(1);
    let mut r = Rig::new();
    let ev = u32::from(r.ev);
    r.w(hw::REG_EQ_DB, ev | hw::EQ_DB_ARM);
    let _ = r.irq.take();
    r.nic.die(Death::Fatal, &r.mem, &r.irq).unwrap();
    // The driver hears of it as of any fatal error: the event and its interrupt.
    assert_eq!(r.events(), [(hw::EVENT_FATAL, hw::ERR_INTERNAL)]);
    assert_eq!(r.irq.take(), [hw::VECTOR_EVENT]);
    let s = r.nic.status_snapshot();
    assert!(s.fatal && !s.dead && !s.enabled && s.error == hw::ERR_INTERNAL);
    // Everything forgotten but the error (the event's count too).
    assert_eq!(nonzero(&r.nic), ["fatal=1", "error=5"]);
    // The registers still answer.
    assert_eq!(r.nic.bar0_read(hw::REG_VERSION as u64, 4), hw::VERSION);
    assert_ne!(
        r.nic.bar0_read(hw::REG_STATUS as u64, 4) & hw::STATUS_FATAL,
        0
    );
    assert!(r.nic.die(Death::Fatal, &r.mem, &r.irq).is_err());
    // The driver's reset revives it; its objects get a brand-new NIC's numbers.
    r.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    assert_eq!(r.nic.status(), hw::STATUS_READY);
    r.bring_up();
    assert_eq!(numbers(&r, ([0; 2], 0, 0)), numbers(&fresh, ([0; 2], 0, 0)));
}

/// Whether an admin command completes on `r`'s NIC after a NIC reset (`CONTROL =
/// RESET`) and an enable.
fn admin_completes(r: &mut Rig) -> bool {
    r.nic.set_bus_master(true, &r.mem, &r.irq);
    r.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    r.enable();
    let _ = r.events();
    r.run(hw::CMD_ALLOC_PD, [0; 56]);
    r.nic.status_snapshot().admin_pending == 0
}

#[test]
fn a_fault_until_reset_ends_at_the_next_function_reset_a_permanent_one_does_not() {
    for until_reset in [true, false] {
        let arm = |r: &mut Rig, f| {
            if until_reset {
                r.nic.inject_until_reset(f);
            } else {
                r.nic.inject(Some(f));
            }
        };
        // admin-stuck: no command completes, through NIC resets; after a function reset
        // only the permanent fault is still there.
        let mut r = Rig::bare(1);
        arm(&mut r, Fault::AdminStuck);
        assert!(!admin_completes(&mut r), "until_reset {until_reset}");
        assert!(!admin_completes(&mut r), "after another NIC reset");
        r.nic.function_reset();
        assert_eq!(
            admin_completes(&mut r),
            until_reset,
            "after a function reset"
        );
        r.nic.function_reset();
        assert_eq!(admin_completes(&mut r), until_reset, "after another");

        // reset-stuck: the NIC's own reset never completes; a function reset that ends
        // the fault completes (the fault is disarmed first), and so do NIC resets after.
        let mut r = Rig::bare(1);
        arm(&mut r, Fault::ResetStuck);
        r.w(hw::REG_CONTROL, hw::CONTROL_RESET);
        assert_eq!(r.nic.status(), 0);
        r.nic.function_reset();
        let ready = if until_reset { hw::STATUS_READY } else { 0 };
        assert_eq!(r.nic.status(), ready);
        r.nic.set_bus_master(true, &r.mem, &r.irq);
        r.w(hw::REG_CONTROL, hw::CONTROL_RESET);
        assert_eq!(r.nic.status(), ready);

        // bad-version: VERSION says 2.0 until the function reset ends the fault.
        let mut r = Rig::bare(1);
        arm(&mut r, Fault::BadVersion);
        r.w(hw::REG_CONTROL, hw::CONTROL_RESET);
        assert_eq!(r.nic.bar0_read(hw::REG_VERSION as u64, 4), 2 << 16);
        r.nic.function_reset();
        let version = if until_reset { hw::VERSION } else { 2 << 16 };
        assert_eq!(r.nic.bar0_read(hw::REG_VERSION as u64, 4), version);
    }
    // `inject none` disarms either; a permanent fault armed over an until-reset one is
    // permanent.
    let mut r = Rig::bare(1);
    r.nic.inject_until_reset(Fault::AdminStuck);
    r.nic.inject(Some(Fault::AdminStuck));
    r.nic.function_reset();
    assert!(!admin_completes(&mut r));
    r.nic.inject(None);
    assert!(admin_completes(&mut r));
}
