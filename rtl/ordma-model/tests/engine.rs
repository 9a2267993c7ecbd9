//! The engine against mock guest memory: admin queue, event queue, reset, bad input.

mod common;

use common::{Irqs, BUF, CQ, EQ, LEN, SQ};
use ordma_hw as hw;
use ordma_model::engine::counters::Anomaly;
use ordma_model::engine::{Nic, NicConfig};
use ordma_model::mem::{anonymous, Dma, GuestMemoryMmap};

const GUID: u64 = 0x0200_00ff_fe00_0042;

struct Rig {
    nic: Nic,
    mem: GuestMemoryMmap,
    irq: Irqs,
    prod: u16,
    aq_log: u32,
}

impl Rig {
    fn new() -> Self {
        Self::with_config(NicConfig::with_guid(GUID))
    }

    fn with_config(config: NicConfig) -> Self {
        let mem = anonymous(&[(SQ, LEN), (CQ, LEN), (EQ, LEN), (BUF, LEN)]).unwrap();
        let irq = Irqs::default();
        let mut nic = Nic::new(config);
        // The driver enables bus mastering before it touches the NIC.
        nic.set_bus_master(true, &mem, &irq);
        Self {
            nic,
            mem,
            irq,
            prod: 0,
            aq_log: 0,
        }
    }

    fn w(&mut self, reg: usize, v: u32) {
        if reg == hw::REG_AQ_LOG_DEPTH {
            self.aq_log = v;
        }
        self.nic.bar0_write(reg as u64, 4, v, &self.mem, &self.irq);
    }

    fn r(&mut self, reg: usize) -> u32 {
        self.nic.bar0_read(reg as u64, 4)
    }

    fn program(&mut self, aq_log: u32, eq_log: u32) {
        self.w(hw::REG_AQ_SQ_BASE, SQ as u32);
        self.w(hw::REG_AQ_SQ_BASE + 4, (SQ >> 32) as u32);
        self.w(hw::REG_AQ_CQ_BASE, CQ as u32);
        self.w(hw::REG_EQ_BASE, EQ as u32);
        self.w(hw::REG_AQ_LOG_DEPTH, aq_log);
        self.w(hw::REG_EQ_LOG_DEPTH, eq_log);
    }

    fn enabled(aq_log: u32) -> Self {
        Self::enabled_with(aq_log, NicConfig::with_guid(GUID))
    }

    fn enabled_with(aq_log: u32, config: NicConfig) -> Self {
        let mut rig = Self::with_config(config);
        rig.program(aq_log, 4);
        rig.w(hw::REG_CONTROL, hw::CONTROL_ENABLE);
        assert_eq!(rig.r(hw::REG_STATUS), hw::STATUS_READY | hw::STATUS_ENABLED);
        rig
    }

    /// The admin queue depth the test programmed (as the driver knows it).
    fn depth(&self) -> u16 {
        1 << self.aq_log
    }

    /// Submits raw SQ entries and rings the doorbell.
    fn submit_raw(&mut self, entries: &[[u8; hw::AQ_SQE_SIZE]]) {
        for e in entries {
            let slot = u64::from(self.prod % self.depth());
            self.mem
                .dma_write(SQ + slot * hw::AQ_SQE_SIZE as u64, e)
                .unwrap();
            self.prod = self.prod.wrapping_add(1);
        }
        self.w(hw::REG_AQ_SQ_DB, u32::from(self.prod));
    }

    fn query_device(id: u32, addr: u64, len: u32) -> [u8; hw::AQ_SQE_SIZE] {
        let params = hw::QueryDeviceParams {
            resp_addr: addr,
            resp_len: len,
        }
        .encode();
        hw::AdminCmd {
            opcode: hw::CMD_QUERY_DEVICE,
            cmd_id: id,
            params,
        }
        .encode()
    }

    fn completion(&self, index: u16) -> hw::AdminCompletion {
        let mut b = [0u8; hw::AQ_CQE_SIZE];
        let slot = u64::from(index % self.depth());
        self.mem
            .dma_read(CQ + slot * hw::AQ_CQE_SIZE as u64, &mut b)
            .unwrap();
        hw::AdminCompletion::decode(&b)
    }

    fn event(&self, index: u16) -> hw::Event {
        let mut b = [0u8; hw::EQE_SIZE];
        self.mem
            .dma_read(EQ + u64::from(index % 16) * hw::EQE_SIZE as u64, &mut b)
            .unwrap();
        hw::Event::decode(&b)
    }
}

#[test]
fn power_on_state() {
    let mut rig = Rig::new();
    assert_eq!(rig.r(hw::REG_VERSION), hw::VERSION);
    assert_eq!(rig.r(hw::REG_STATUS), hw::STATUS_READY);
    assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_NONE);
    assert_eq!(rig.r(hw::REG_NUM_VECTORS), u32::from(hw::NUM_VECTORS));
    assert_eq!(rig.r(hw::REG_DB_PAGES), hw::DB_PAGES);
    assert_eq!(rig.r(0xffc), 0, "unlisted offsets read 0");
    assert_eq!(
        rig.nic.bar0_read(2, 4),
        u32::MAX,
        "unaligned reads return all ones"
    );
    assert_eq!(
        rig.nic.bar0_read(0, 2),
        u32::MAX,
        "non-32-bit reads return all ones"
    );
}

#[test]
fn query_device_end_to_end() {
    let mut rig = Rig::enabled(3);
    assert_eq!(
        rig.irq.take(),
        Vec::<u16>::new(),
        "no interrupt before arming the EQ"
    );
    rig.submit_raw(&[Rig::query_device(0x77, BUF, 64)]);
    let c = rig.completion(0);
    assert_eq!(
        (c.cmd_id, c.status, c.phase, c.result),
        (0x77, hw::AQ_OK, true, 64)
    );
    assert_eq!(rig.irq.take(), vec![hw::VECTOR_ADMIN]);
    let mut b = [0u8; hw::DEVICE_ATTRS_SIZE];
    rig.mem.dma_read(BUF, &mut b).unwrap();
    let attrs = hw::DeviceAttrs::decode(&b);
    assert_eq!(attrs.node_guid, GUID);
    assert_eq!(attrs.num_ports, 1);
    assert_eq!(attrs.vendor_part_id, u32::from(hw::PCI_DEVICE_ID));
}

#[test]
fn short_response_buffer_gets_a_truncated_response() {
    let mut rig = Rig::enabled(3);
    rig.mem.dma_write(BUF + 8, &[0xaa; 8]).unwrap();
    rig.submit_raw(&[Rig::query_device(1, BUF, 8)]);
    assert_eq!(rig.completion(0).result, 8);
    let mut b = [0u8; 8];
    rig.mem.dma_read(BUF + 8, &mut b).unwrap();
    assert_eq!(b, [0xaa; 8], "nothing written past resp_len");
}

#[test]
fn phase_flips_on_wrap_and_batches_raise_one_interrupt() {
    let mut rig = Rig::enabled(2); // depth 4
    for round in 0..3u16 {
        let batch: Vec<_> = (0..4)
            .map(|i| Rig::query_device(u32::from(round * 4 + i), BUF, 64))
            .collect();
        rig.submit_raw(&batch);
        assert_eq!(
            rig.irq.take(),
            vec![hw::VECTOR_ADMIN],
            "one interrupt per doorbell"
        );
        for i in 0..4 {
            let c = rig.completion(round * 4 + i);
            assert_eq!(c.cmd_id, u32::from(round * 4 + i));
            assert_eq!(c.phase, round % 2 == 0, "round {round}");
        }
    }
    assert_eq!(rig.nic.commands_completed, 12);
}

#[test]
fn bad_commands_get_error_completions_and_the_nic_keeps_working() {
    let mut rig = Rig::enabled(3);
    let mut reserved = Rig::query_device(1, BUF, 64);
    reserved[2] = 1;
    let mut bad_params = Rig::query_device(2, BUF, 64);
    bad_params[8 + 30] = 1;
    let unknown = hw::AdminCmd {
        opcode: 0x7f,
        cmd_id: 3,
        params: [0; 56],
    }
    .encode();
    let unmapped = Rig::query_device(4, 0xdead_0000_0000, 64);
    let zero_len = Rig::query_device(5, BUF, 0);
    let overflow = Rig::query_device(6, u64::MAX - 8, 64);
    rig.submit_raw(&[
        reserved,
        bad_params,
        unknown,
        unmapped,
        zero_len,
        overflow,
        Rig::query_device(7, BUF, 64),
    ]);
    let got: Vec<_> = (0..7)
        .map(|i| (rig.completion(i).cmd_id, rig.completion(i).status))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, hw::AQ_BAD_PARAM),
            (2, hw::AQ_BAD_PARAM),
            (3, hw::AQ_BAD_OPCODE),
            (4, hw::AQ_BAD_ADDRESS),
            (5, hw::AQ_BAD_PARAM),
            (6, hw::AQ_BAD_ADDRESS),
            (7, hw::AQ_OK),
        ]
    );
    assert_eq!(rig.r(hw::REG_STATUS) & hw::STATUS_FATAL, 0);
}

#[test]
fn enable_rejects_bad_queue_configurations() {
    type Breaker = Box<dyn Fn(&mut Rig)>;
    let cases: [(&str, Breaker); 5] = [
        (
            "depth too small",
            Box::new(|r: &mut Rig| r.w(hw::REG_AQ_LOG_DEPTH, 1)),
        ),
        (
            "depth too large",
            Box::new(|r: &mut Rig| r.w(hw::REG_AQ_LOG_DEPTH, 13)),
        ),
        (
            "misaligned SQ",
            Box::new(|r: &mut Rig| r.w(hw::REG_AQ_SQ_BASE, SQ as u32 + 64)),
        ),
        (
            "unmapped CQ",
            Box::new(|r: &mut Rig| r.w(hw::REG_AQ_CQ_BASE + 4, 0x99)),
        ),
        (
            "EQ past the end of memory",
            Box::new(|r: &mut Rig| r.w(hw::REG_EQ_BASE, (EQ + LEN as u64 - 4096) as u32)),
        ),
    ];
    for (name, break_it) in cases {
        let mut rig = Rig::new();
        rig.program(3, if name.starts_with("EQ") { 12 } else { 4 });
        break_it(&mut rig);
        rig.w(hw::REG_CONTROL, hw::CONTROL_ENABLE);
        assert_eq!(
            rig.r(hw::REG_STATUS),
            hw::STATUS_READY | hw::STATUS_FATAL,
            "{name}"
        );
        assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_BAD_QUEUE_CONFIG, "{name}");
        // Reset recovers.
        rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
        assert_eq!(rig.r(hw::REG_STATUS), hw::STATUS_READY, "{name}: reset");
        assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_NONE);
        assert_eq!(rig.r(hw::REG_AQ_LOG_DEPTH), 0, "reset clears RW registers");
    }
}

#[test]
fn bad_doorbells_and_register_writes_are_fatal_not_panics() {
    // Producer beyond the ring.
    let mut rig = Rig::enabled(2);
    rig.w(hw::REG_AQ_SQ_DB, 5);
    assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_BAD_DOORBELL);
    assert_ne!(rig.r(hw::REG_STATUS) & hw::STATUS_FATAL, 0);
    assert_eq!(rig.r(hw::REG_STATUS) & hw::STATUS_ENABLED, 0);
    // A fatal error is reported as an event too.
    assert_eq!(rig.event(1).kind, hw::EVENT_FATAL);
    assert_eq!(rig.event(1).data, hw::ERR_BAD_DOORBELL);
    // Doorbells before enable.
    let mut rig = Rig::new();
    rig.w(hw::REG_AQ_SQ_DB, 1);
    assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_BAD_DOORBELL);
    // Read-only registers and unknown CONTROL commands.
    for (reg, v) in [
        (hw::REG_VERSION, 0),
        (hw::REG_STATUS, 1),
        (hw::REG_CONTROL, 99),
        (0x800, 1),
    ] {
        let mut rig = Rig::new();
        rig.w(reg, v);
        assert_eq!(
            rig.r(hw::REG_ERROR),
            hw::ERR_BAD_REGISTER_WRITE,
            "reg {reg:#x}"
        );
    }
    // Queue registers are frozen while enabled.
    let mut rig = Rig::enabled(3);
    rig.w(hw::REG_AQ_SQ_BASE, 0);
    assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_BAD_REGISTER_WRITE);
}

#[test]
fn event_queue_arm_consume_and_overflow() {
    let mut rig = Rig::enabled(3);
    // ENABLE posted PORT_ACTIVE with phase 1.
    let e = rig.event(0);
    assert_eq!((e.kind, e.phase, e.data), (hw::EVENT_PORT_ACTIVE, true, 1));
    // In the buffer the rest is still zero: phase 0 marks "not written yet".
    assert!(!rig.event(1).phase);
    // Arming with an unconsumed event interrupts at once.
    rig.w(hw::REG_EQ_DB, hw::EQ_DB_ARM);
    assert_eq!(rig.irq.take(), vec![hw::VECTOR_EVENT]);
    // Consume it and arm: no interrupt until the next event.
    rig.w(hw::REG_EQ_DB, 1 | hw::EQ_DB_ARM);
    assert_eq!(rig.irq.take(), Vec::<u16>::new());
    // Consumer beyond the producer is a bad doorbell.
    rig.w(hw::REG_EQ_DB, 5);
    assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_BAD_DOORBELL);
    // The fatal event itself was posted (slot 1) and, armed, interrupted.
    assert_eq!(rig.event(1).kind, hw::EVENT_FATAL);
    assert_eq!(rig.irq.take(), vec![hw::VECTOR_EVENT]);
}

#[test]
fn an_event_queue_overrun_is_fatal_and_never_overwrites() {
    let mut rig = Rig::new();
    rig.program(3, 2); // EQ depth 4
    rig.w(hw::REG_CONTROL, hw::CONTROL_ENABLE); // event 0: PORT_ACTIVE
    for up in [false, true, false, true, false] {
        rig.nic.set_link(up, &rig.mem, &rig.irq);
    }
    // Three slots for events, the fourth kept for EVENT_FATAL: the fourth event is an
    // overrun (dropped, counted, fatal, told in the kept slot), and nothing is written over.
    let kinds: Vec<_> = (0..4).map(|i| rig.event(i).kind).collect();
    assert_eq!(
        kinds,
        vec![
            hw::EVENT_PORT_ACTIVE,
            hw::EVENT_PORT_DOWN,
            hw::EVENT_PORT_ACTIVE,
            hw::EVENT_FATAL
        ]
    );
    assert_eq!(rig.event(3).data, hw::ERR_EVENT_OVERRUN);
    assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_EVENT_OVERRUN);
    assert_ne!(rig.r(hw::REG_STATUS) & hw::STATUS_FATAL, 0);
    assert!(rig.nic.events_dropped() >= 1, "the overrun is counted");
}

#[test]
fn reset_stops_the_queues() {
    let mut rig = Rig::enabled(3);
    rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    assert_eq!(rig.r(hw::REG_STATUS), hw::STATUS_READY);
    // The old queues are gone: a doorbell now is an error, and nothing is written to them.
    rig.mem.dma_write(CQ, &[0; 16]).unwrap();
    rig.submit_raw(&[Rig::query_device(9, BUF, 64)]);
    assert_eq!(rig.r(hw::REG_ERROR), hw::ERR_BAD_DOORBELL);
    assert_eq!(rig.completion(0).cmd_id, 0);
}

#[test]
fn injected_faults_behave_as_documented() {
    use ordma_model::engine::Fault;
    let mk = |fault| {
        let mut rig = Rig::new();
        let mut config = NicConfig::with_guid(GUID);
        config.fault = Some(fault);
        rig.nic = Nic::new(config);
        rig.nic.set_bus_master(true, &rig.mem, &rig.irq);
        rig
    };
    assert_eq!(mk(Fault::BadVersion).r(hw::REG_VERSION), 2 << 16);
    let mut rig = mk(Fault::ResetStuck);
    rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    assert_eq!(rig.r(hw::REG_STATUS) & hw::STATUS_READY, 0);
    let mut rig = mk(Fault::QueryDeviceError);
    rig.program(3, 4);
    rig.w(hw::REG_CONTROL, hw::CONTROL_ENABLE);
    rig.submit_raw(&[Rig::query_device(5, BUF, 64)]);
    assert_eq!(rig.completion(0).status, hw::AQ_BAD_PARAM);
    // One failed command, counted once.
    let s = rig.nic.status_snapshot().to_string();
    assert!(s.contains(" bad_commands=1 "), "{s}");
    // admin-lost: the next command runs and its completion is never written; the fault
    // disarms itself, and the command after it completes in the next CQ slot.
    let mut rig = mk(Fault::AdminLost);
    rig.program(3, 4);
    rig.w(hw::REG_CONTROL, hw::CONTROL_ENABLE);
    rig.submit_raw(&[Rig::query_device(7, BUF, 64), Rig::query_device(8, BUF, 64)]);
    let c = rig.completion(0);
    assert_eq!(
        (c.cmd_id, c.status),
        (8, hw::AQ_OK),
        "the first answer is the second's"
    );
    assert_eq!(rig.completion(1).cmd_id, 0, "nothing more written");
    let s = rig.nic.status_snapshot();
    assert_eq!(
        (s.commands, s.admin_pending),
        (1, 0),
        "both ran, one answered"
    );
    assert!("nonsense".parse::<Fault>().is_err());
}

#[test]
fn query_port_reports_the_link_state() {
    let mut rig = Rig::enabled(3);
    let q = |port, len| {
        let params = hw::QueryPortParams {
            port,
            resp_addr: BUF,
            resp_len: len,
        }
        .encode();
        hw::AdminCmd {
            opcode: hw::CMD_QUERY_PORT,
            cmd_id: port,
            params,
        }
        .encode()
    };
    rig.submit_raw(&[q(1, 64), q(0, 32), q(2, 32)]);
    assert_eq!(rig.completion(0).status, hw::AQ_OK);
    assert_eq!(rig.completion(0).result, hw::PORT_ATTRS_SIZE as u64);
    assert_eq!(
        rig.completion(1).status,
        hw::AQ_BAD_PARAM,
        "port 0 does not exist"
    );
    assert_eq!(rig.completion(2).status, hw::AQ_BAD_PARAM, "one port only");
    let mut b = [0u8; hw::PORT_ATTRS_SIZE];
    rig.mem.dma_read(BUF, &mut b).unwrap();
    let a = hw::PortAttrs::decode(&b);
    assert_eq!(
        (a.state, a.phys_state, a.lid, a.port_guid),
        (hw::PORT_STATE_ACTIVE, hw::PHYS_STATE_LINK_UP, 1, GUID)
    );
    rig.nic.set_link(false, &rig.mem, &rig.irq);
    rig.submit_raw(&[q(1, 32)]);
    rig.mem.dma_read(BUF, &mut b).unwrap();
    assert_eq!(hw::PortAttrs::decode(&b).state, hw::PORT_STATE_DOWN);
}

fn cmd(opcode: u8, id: u32, params: [u8; hw::AQ_SQE_SIZE - 8]) -> [u8; hw::AQ_SQE_SIZE] {
    hw::AdminCmd {
        opcode,
        cmd_id: id,
        params,
    }
    .encode()
}

#[test]
fn pds_are_allocated_lowest_first_up_to_max_pd_and_freed_once() {
    let mut config = NicConfig::with_guid(GUID);
    config.attrs.max_pd = 3;
    let mut rig = Rig::enabled_with(4, config);
    let none = [0u8; hw::AQ_SQE_SIZE - 8];
    let dealloc = |pdn| hw::PdParams { pdn }.encode();

    // Three PDs fit, the fourth does not.
    rig.submit_raw(&[
        cmd(hw::CMD_ALLOC_PD, 1, none),
        cmd(hw::CMD_ALLOC_PD, 2, none),
        cmd(hw::CMD_ALLOC_PD, 3, none),
        cmd(hw::CMD_ALLOC_PD, 4, none),
    ]);
    let got: Vec<(u16, u64)> = (0..4)
        .map(|i| rig.completion(i))
        .map(|c| (c.status, c.result))
        .collect();
    assert_eq!(
        got,
        [
            (hw::AQ_OK, 0),
            (hw::AQ_OK, 1),
            (hw::AQ_OK, 2),
            (hw::AQ_NO_RESOURCES, 0)
        ]
    );
    assert_eq!(rig.nic.pds_in_use(), 3);

    // Free PD 1 twice (the second is an error), then the next ALLOC_PD reuses 1; a PD that
    // never existed and non-zero reserved bytes are errors too.
    let mut bad = dealloc(2);
    bad[9] = 1;
    let mut alloc_bad = none;
    alloc_bad[0] = 1;
    rig.submit_raw(&[
        cmd(hw::CMD_DEALLOC_PD, 5, dealloc(1)),
        cmd(hw::CMD_DEALLOC_PD, 6, dealloc(1)),
        cmd(hw::CMD_DEALLOC_PD, 7, dealloc(99)),
        cmd(hw::CMD_DEALLOC_PD, 8, bad),
        cmd(hw::CMD_ALLOC_PD, 9, alloc_bad),
        cmd(hw::CMD_ALLOC_PD, 10, none),
    ]);
    let got: Vec<(u32, u16, u64)> = (4..10)
        .map(|i| rig.completion(i))
        .map(|c| (c.cmd_id, c.status, c.result))
        .collect();
    assert_eq!(
        got,
        [
            (5, hw::AQ_OK, 0),
            (6, hw::AQ_BAD_PARAM, 0),
            (7, hw::AQ_BAD_PARAM, 0),
            (8, hw::AQ_BAD_PARAM, 0),
            (9, hw::AQ_BAD_PARAM, 0),
            (10, hw::AQ_OK, 1),
        ]
    );
    assert_eq!(rig.nic.pds_in_use(), 3);

    // A reset frees them all.
    rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    assert_eq!(rig.nic.pds_in_use(), 0);
}

#[test]
fn no_dma_and_no_msix_while_bus_mastering_is_off() {
    let mut rig = Rig::enabled(3);
    rig.w(hw::REG_EQ_DB, 1 | hw::EQ_DB_ARM); // consume PORT_ACTIVE, arm
    rig.nic.set_bus_master(false, &rig.mem, &rig.irq);
    let before = rig.nic.counters().get(Anomaly::DmaRefused);

    // A command and a link change: latched and held, nothing written, no interrupt.
    rig.submit_raw(&[Rig::query_device(0x55, BUF, 64)]);
    rig.nic.set_link(false, &rig.mem, &rig.irq);
    assert_eq!(rig.completion(0).cmd_id, 0, "no completion written");
    assert!(!rig.event(1).phase, "no event written");
    let mut b = [0u8; 8];
    rig.mem.dma_read(BUF, &mut b).unwrap();
    assert_eq!(b, [0; 8], "no response written");
    assert_eq!(rig.irq.take(), Vec::<u16>::new());
    assert_eq!(rig.nic.commands_completed, 0);
    assert_eq!(rig.nic.counters().get(Anomaly::DmaRefused), before + 2);
    // The doorbell was still checked: a bad one is fatal at once, BME or not.
    assert_eq!(rig.r(hw::REG_STATUS) & hw::STATUS_FATAL, 0);

    // Back on: the held work runs, nothing lost, each interrupt once.
    rig.nic.set_bus_master(true, &rig.mem, &rig.irq);
    let c = rig.completion(0);
    assert_eq!((c.cmd_id, c.status), (0x55, hw::AQ_OK));
    let e = rig.event(1);
    assert_eq!((e.kind, e.phase, e.data), (hw::EVENT_PORT_DOWN, true, 1));
    let mut irqs = rig.irq.take();
    irqs.sort_unstable();
    assert_eq!(irqs, vec![hw::VECTOR_ADMIN, hw::VECTOR_EVENT]);
}

#[test]
fn a_held_interrupt_is_sent_when_bus_mastering_returns() {
    let mut rig = Rig::enabled(3);
    rig.nic.set_bus_master(false, &rig.mem, &rig.irq);
    // Arming with an unconsumed event interrupts at once, but MSI-X is a DMA write.
    rig.w(hw::REG_EQ_DB, hw::EQ_DB_ARM);
    assert_eq!(rig.irq.take(), Vec::<u16>::new());
    rig.nic.set_bus_master(true, &rig.mem, &rig.irq);
    assert_eq!(rig.irq.take(), vec![hw::VECTOR_EVENT]);
    // Toggling again does not repeat it.
    rig.nic.set_bus_master(false, &rig.mem, &rig.irq);
    rig.nic.set_bus_master(true, &rig.mem, &rig.irq);
    assert_eq!(rig.irq.take(), Vec::<u16>::new());
}

#[test]
fn enable_without_bus_mastering_holds_the_first_event() {
    let mut rig = Rig::new();
    rig.nic.set_bus_master(false, &rig.mem, &rig.irq);
    rig.program(3, 4);
    rig.w(hw::REG_CONTROL, hw::CONTROL_ENABLE);
    // Address checks are not DMA: the queues start.
    assert_eq!(rig.r(hw::REG_STATUS), hw::STATUS_READY | hw::STATUS_ENABLED);
    assert!(!rig.event(0).phase, "PORT_ACTIVE held");
    rig.nic.set_bus_master(true, &rig.mem, &rig.irq);
    assert_eq!(rig.event(0).kind, hw::EVENT_PORT_ACTIVE);
    assert!(rig.event(0).phase);
}

#[test]
fn a_reset_drops_held_work_but_keeps_bus_mastering_and_counters() {
    let mut rig = Rig::enabled(3);
    rig.nic.set_bus_master(false, &rig.mem, &rig.irq);
    rig.submit_raw(&[Rig::query_device(1, BUF, 64)]);
    rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    rig.nic.set_bus_master(true, &rig.mem, &rig.irq);
    assert_eq!(
        rig.completion(0).cmd_id,
        0,
        "the reset dropped the latched doorbell"
    );
    assert_eq!(rig.irq.take(), Vec::<u16>::new());
    assert!(rig.nic.bus_master());
    assert_eq!(rig.nic.counters().get(Anomaly::DmaRefused), 1);
}

/// Counts the lines a tracing subscriber writes.
#[derive(Clone, Default)]
struct LineCount(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl std::io::Write for LineCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.iter().filter(|&&b| b == b'\n').count();
        self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn hammering_bad_input_logs_a_bounded_number_of_lines() {
    let lines = LineCount::default();
    let writer = lines.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let mut rig = Rig::enabled(3);
    tracing::subscriber::with_default(sub, || {
        // 10000 bad commands, then 10000 doorbells with the queues off.
        for i in 0..10_000u32 {
            let bad = hw::AdminCmd {
                opcode: 0x7f,
                cmd_id: i,
                params: [0; 56],
            }
            .encode();
            rig.submit_raw(&[bad]);
        }
        rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
        for _ in 0..10_000 {
            rig.w(hw::REG_AQ_SQ_DB, 1);
        }
    });
    let c = rig.nic.counters();
    assert_eq!(c.get(Anomaly::BadCommand), 10_000);
    assert_eq!(c.get(Anomaly::BadDoorbell), 10_000);
    let n = lines.0.load(std::sync::atomic::Ordering::Relaxed);
    // Per kind: 8 in full and one per power of two up to 2^13; a few info lines (reset,
    // the one fatal error).
    assert!(n <= 2 * (8 + 11) + 4, "{n} log lines for 20000 bad inputs");
    assert!(n >= 16, "the first ones are logged ({n})");
}
