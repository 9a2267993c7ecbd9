//! The NIC's engine: one ordma NIC, transport-free.
//!
//! The vfio-user server (or a test) calls [`Nic::bar0_read`] and [`Nic::bar0_write`] for the
//! guest's register accesses, [`Nic::set_bus_master`] for the PCI command register, and
//! hands in the guest memory ([`Dma`]) and the interrupt sink ([`Interrupts`]). Every value
//! the guest gives is checked before use; bad values end in an error completion, an error
//! event or `STATUS_FATAL` with an `ERROR` code, as `Documentation/hardware.md` specifies,
//! never a panic. The parts, by role:
//!
//! - [`regs`]: the BAR0 register file and its decoding;
//! - [`admin`]: the admin queue, one function per command;
//! - [`events`]: the event queue;
//! - [`tables`]: object tables (PDs, MRs, CQs, QPs: index plus an 8-bit key);
//! - [`pages`]: page lists in host memory (MR pages, rings), validated and walked;
//! - [`mr`]: memory regions and the translation of MR keys and addresses;
//! - [`data`]: a message's bytes: translated pieces with the MRs they came from;
//! - [`cq`]: completion queues, arming, completion events;
//! - [`qp`]: queue pairs; [`qp_state`]: the QP state machine (`CMD_MODIFY_QP`);
//! - [`srq`]: shared receive queues, and the WQEs their QPs take from them;
//! - [`doorbell`]: the doorbell pages in BAR2 and their ownership rule;
//! - the RC engine, by role as soft-RoCE's: [`packet`] (the IB transport headers),
//!   [`requester`] (SQ WQEs to request packets), [`responder`] (requests to receive
//!   completions, memory writes, read data, ACK/NAK), [`atomic`] (the responder's atomics
//!   and their replay), [`completer`] (answers to send CQEs,
//!   RNR retries, errors and the flush in `ERR`, the timers of [`Nic::tick`]);
//! - the wire between NICs: [`wire`] (RoCEv2 frames: Ethernet, IPv4, UDP, the IB
//!   transport headers, ICRC), [`remote`] (frames in, the responder's side of it),
//!   [`flights`] (the requester and completer: a window of packets in flight,
//!   retransmission, duplicates, PSN sequence NAKs); [`own`]: loopback, the wire from the
//!   NIC to itself, through the same requester, responder and completer; [`uc`]: the
//!   unreliable connected transport's differences in the same engine;
//! - [`counters`]: counted, bounded logging of bad input.
//!
//! The `Nic` itself is plain data behind `&mut self`: whoever shares it between threads (the
//! [`crate::device`]) holds it in a lock.

pub mod admin;
pub mod atomic;
pub mod completer;
pub mod counters;
pub mod cq;
pub mod data;
pub mod datapath;
pub mod doorbell;
pub mod events;
pub mod flights;
pub mod flush;
pub mod health;
pub mod mr;
pub mod mw;
pub mod own;
pub mod packet;
pub mod pages;
pub mod port;
pub mod qp;
pub mod qp_state;
pub mod regs;
pub mod remote;
pub mod requester;
pub mod responder;
pub mod srq;
pub mod tables;
pub mod uc;
pub mod ud;
pub mod wire;

pub use health::{Death, Fault};
use std::collections::{HashMap, VecDeque};
use std::fmt;

use ordma_hw as hw;
use tracing::{info, warn};

use crate::mem::{Dma, DmaError};
use admin::AdminQueue;
use counters::{bounded_warn, Anomaly, Counters};
use cq::Cq;
use events::EventQueue;
use mr::Mr;
use qp::Qp;
use regs::Regs;
use srq::Srq;
use tables::{Handle, Table};

/// Where the engine raises MSI-X interrupts.
pub trait Interrupts {
    /// Signals MSI-X vector `vector` (the server writes its eventfd).
    fn raise(&self, vector: u16);
}

/// What the NIC reports about itself; fixed per model instance (command line), except the
/// link state and the injected fault, which the control channel changes.
#[derive(Clone, Copy, Debug)]
pub struct NicConfig {
    /// The attributes `CMD_QUERY_DEVICE` returns.
    pub attrs: hw::DeviceAttrs,
    /// The port's LID (an InfiniBand port's; on Ethernet, the NIC's number + 1, for logs).
    pub lid: u16,
    /// An Ethernet port's MAC; `None`: the port is InfiniBand.
    pub mac: Option<[u8; 6]>,
    /// Whether the port's link is up.
    pub link_up: bool,
    /// A fault to inject, if any.
    pub fault: Option<Fault>,
    /// The fault lasts until the next function reset ([`Nic::function_reset`]), which
    /// disarms it; otherwise it lasts until it is disarmed.
    pub fault_until_reset: bool,
    /// The shortest transport timer the NIC runs, as an IB `timeout` exponent: a QP's
    /// `timeout` below it waits this long instead (0: as the QP says). `engine.md`,
    /// "The transport timer".
    pub min_ack_timeout: u8,
}

impl NicConfig {
    /// The model's defaults, with the given node GUID.
    pub fn with_guid(node_guid: u64) -> Self {
        let major = env!("CARGO_PKG_VERSION_MAJOR").parse::<u16>().unwrap_or(0);
        let minor = env!("CARGO_PKG_VERSION_MINOR").parse::<u16>().unwrap_or(0);
        Self {
            attrs: hw::DeviceAttrs {
                fw_version: (u64::from(major) << 32) | (u64::from(minor) << 16),
                node_guid,
                page_size_cap: (1 << 12) | (1 << 21) | (1 << 30),
                max_qp: 16384,
                max_qp_wr: 4096,
                max_cq: hw::MAX_CQS,
                max_cqe: 1 << hw::MAX_QUEUE_LOG_DEPTH,
                max_mr: 65536,
                max_pd: 16384,
                max_sge: 16,
                num_ports: 1,
                vendor_part_id: u32::from(hw::PCI_DEVICE_ID),
                hw_ver: 1,
                max_srq: 16384,
                // The deepest ring less the free slot its links need.
                max_srq_wr: (1 << hw::MAX_QUEUE_LOG_DEPTH) - 1,
                max_srq_sge: 16,
                atomic_cap: hw::ATOMIC_CAP_HCA,
                max_mw: 65536,
            },
            lid: 1,
            mac: None,
            link_up: true,
            fault: None,
            fault_until_reset: false,
            min_ack_timeout: 0,
        }
    }
}

/// A protection domain on the NIC (no state of its own yet).
#[derive(Debug)]
pub struct Pd;

/// Events the NIC holds while it may not DMA (bus mastering off); more are dropped.
const EVENT_FIFO: usize = 64;

/// One ordma NIC.
pub struct Nic {
    config: NicConfig,
    status: u32,
    error: u32,
    regs: Regs,
    aq: Option<AdminQueue>,
    eq: Option<EventQueue>,
    /// Admin commands completed since reset, for logs and tests.
    pub commands_completed: u64,
    pds: Table<Pd>,
    mrs: Table<Mr>,
    /// Memory windows (1.9).
    mws: Table<mw::Mw>,
    /// The last MR registration's number ([`mr::MrRef`]); never goes back, not even on reset.
    mr_gen: u64,
    cqs: Table<Cq>,
    qps: Table<Qp>,
    srqs: Table<Srq>,
    /// Queue doorbells accepted since reset.
    doorbells: u64,
    /// Events written into the event queue since reset.
    events_posted: u64,
    /// Completion events not posted since reset: arms with nothing new since the CQ's last
    /// event, and events due while the last was unconsumed (owed, posted later).
    cq_events_coalesced: u64,
    /// Atomics the responder executed, and duplicates it answered again from its replay
    /// cache, since the model started.
    atomics: [u64; 2],
    /// The port's counters since the model started (`CMD_QUERY_COUNTERS`; the bad frames
    /// among them are the anomaly's count).
    port_counters: hw::PortCounters,
    /// Each live QP's counters since it was created (`CMD_QUERY_QP_COUNTERS`), by QP
    /// number: an entry per QP of the table, made by `CREATE_QP`, gone with `DESTROY_QP`.
    qp_counts: HashMap<u32, hw::PortCounters>,
    /// Packets UC responders dropped (out of sequence, or of a message dropped), since the
    /// model started.
    uc_dropped: u64,
    /// What the UD transport counted since the model started.
    ud: ud::UdCounts,
    /// UD datagrams waiting for receive WQEs.
    ud_held: ud::HeldQueue,
    /// An Ethernet port's GID table.
    gids: port::Gids,
    /// 32-bit writes per doorbell page since the model started.
    db_page_writes: [u64; hw::DB_PAGES as usize],
    /// PCI COMMAND.BME: the NIC may DMA (and send MSI-X) only while it is set.
    bus_master: bool,
    /// Events waiting for bus mastering: (kind, data, data2).
    deferred_events: VecDeque<(u8, u32, u64)>,
    /// MSI-X vectors waiting for bus mastering, one bit each.
    pending_irqs: u32,
    counters: Counters,
    /// Where frames to other NICs go; `None`: no wire (requests to another LID are never
    /// answered).
    wire: Option<Box<dyn wire::Wire>>,
    /// The QPs' state for the wire.
    wire_qps: remote::Remotes,
    /// Packets to the NIC itself (loopback), waiting to be taken ([`own`]).
    own: VecDeque<own::Own>,
    /// Whether [`Nic::drain_own`] runs (a nested call returns at once).
    draining: bool,
    /// For tests: packets to the NIC itself go as frames over the wire
    /// ([`Nic::set_loopback_on_wire`]).
    loop_wire: bool,
    /// The NIC died softly ([`Death::Silent`]) and a function reset has not revived it yet.
    dead: bool,
}

/// A snapshot of the NIC's state for the control channel's `status`.
#[derive(Clone, Copy, Debug)]
pub struct NicStatus {
    /// The port's link.
    pub link_up: bool,
    /// `STATUS.ENABLED`.
    pub enabled: bool,
    /// `STATUS.FATAL`.
    pub fatal: bool,
    /// The `ERROR` register.
    pub error: u32,
    /// The NIC died softly and no function reset revived it yet ([`Death::Silent`]).
    pub dead: bool,
    /// PCI bus mastering.
    pub bus_master: bool,
    /// PDs allocated.
    pub pds: u32,
    /// MRs registered.
    pub mrs: u32,
    /// CQs existing.
    pub cqs: u32,
    /// QPs existing.
    pub qps: u32,
    /// SRQs existing.
    pub srqs: u32,
    /// SRQs created, and destroyed by a command, since the model started.
    pub srqs_counts: (u64, u64),
    /// Memory windows allocated now (1.9).
    pub mws: u32,
    /// Memory windows allocated, and freed, since the model started.
    pub mws_counts: (u64, u64),
    /// PDs, MRs, CQs and QPs created since the model started.
    pub created: [u64; 4],
    /// PDs, MRs, CQs and QPs destroyed by a command since the model started (a reset frees
    /// without counting).
    pub destroyed: [u64; 4],
    /// Atomics executed, and duplicate atomics answered again, since the model started.
    pub atomics: [u64; 2],
    /// Transport timer resends, sequence NAKs sent and received, since the model started.
    pub recoveries: [u64; 3],
    /// The port's counters, as `CMD_QUERY_COUNTERS` reports them.
    pub port_counters: hw::PortCounters,
    /// Packets UC responders dropped since the model started.
    pub uc_dropped: u64,
    /// UD datagrams sent, received and dropped since the model started.
    pub ud: ud::UdCounts,
    /// GID table entries set (an Ethernet port's).
    pub gids: usize,
    /// Queue doorbells accepted since reset.
    pub doorbells: u64,
    /// Admin commands completed since reset.
    pub commands: u64,
    /// Events written into the event queue since reset.
    pub events: u64,
    /// Completion events coalesced since reset (see [`Nic`]'s `cq_events_coalesced`).
    pub events_coalesced: u64,
    /// Events in the event queue the driver has not consumed yet.
    pub events_unread: u16,
    /// Admin commands the driver has submitted (doorbell) that the NIC has not completed.
    pub admin_pending: u16,
    /// The anomaly counters.
    pub counters: Counters,
}

impl fmt::Display for NicStatus {
    /// `key=value` pairs, space-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "link={} enabled={} fatal={} error={} dead={} bme={} pds={} mrs={} cqs={} qps={} \
             pds_created={} mrs_created={} cqs_created={} qps_created={} \
             pds_destroyed={} mrs_destroyed={} cqs_destroyed={} qps_destroyed={} \
             srqs={} srqs_created={} srqs_destroyed={} mws={} mws_created={} mws_destroyed={} \
             atomics={} atomics_replayed={} \
             timer_resends={} seq_naks_sent={} seq_naks_received={} \
             uc_dropped={} ud_sent={} ud_received={} ud_dropped={} ud_qkey_dropped={} \
             gids={} doorbells={} commands={} events={} events_coalesced={} events_unread={} admin_pending={} {}",
            if self.link_up { "up" } else { "down" },
            u8::from(self.enabled),
            u8::from(self.fatal),
            self.error,
            u8::from(self.dead),
            u8::from(self.bus_master),
            self.pds,
            self.mrs,
            self.cqs,
            self.qps,
            self.created[0],
            self.created[1],
            self.created[2],
            self.created[3],
            self.destroyed[0],
            self.destroyed[1],
            self.destroyed[2],
            self.destroyed[3],
            self.srqs,
            self.srqs_counts.0,
            self.srqs_counts.1,
            self.mws,
            self.mws_counts.0,
            self.mws_counts.1,
            self.atomics[0],
            self.atomics[1],
            self.recoveries[0],
            self.recoveries[1],
            self.recoveries[2],
            self.uc_dropped,
            self.ud.sent,
            self.ud.received,
            self.ud.dropped,
            self.ud.qkey_dropped,
            self.gids,
            self.doorbells,
            self.commands,
            self.events,
            self.events_coalesced,
            self.events_unread,
            self.admin_pending,
            self.counters
        )
    }
}

/// Guest memory as the engine may use it: refuses every DMA while bus mastering is off.
/// Address checks (`reachable`) are address decoding, not DMA, and pass through.
struct Gate<'a> {
    mem: &'a dyn Dma,
    open: bool,
}

impl Gate<'_> {
    fn refused(&self, addr: u64, len: usize) -> Result<(), DmaError> {
        if self.open {
            Ok(())
        } else {
            Err(DmaError { addr, len })
        }
    }
}

/// Every DMA through the [`datapath`], on the DMA channel mux's input it takes in the
/// hardware: reads fetch descriptors and plain writes report unless the caller names the
/// payload (`dma_read_payload`, `dma_write_payload`, copies and atomics).
impl Dma for Gate<'_> {
    fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.refused(addr, buf.len())?;
        datapath::read(self.mem, datapath::Chan::Fetch, addr, buf)
    }

    fn dma_write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.refused(addr, data.len())?;
        datapath::write(self.mem, datapath::Chan::Report, addr, data)
    }

    fn dma_read_payload(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.refused(addr, buf.len())?;
        datapath::read(self.mem, datapath::Chan::PayloadRead, addr, buf)
    }

    fn dma_write_payload(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.refused(addr, data.len())?;
        datapath::write(self.mem, datapath::Chan::PayloadWrite, addr, data)
    }

    fn reachable(&self, addr: u64, len: u64) -> bool {
        self.mem.reachable(addr, len)
    }

    fn dma_copy(&self, src: u64, dst: u64, len: usize) -> Result<(), DmaError> {
        self.refused(src, len)?;
        datapath::copy(self.mem, src, dst, len)
    }

    fn dma_atomic64(&self, addr: u64, op: crate::mem::Atomic64) -> Result<u64, DmaError> {
        self.refused(addr, 8)?;
        datapath::atomic64(self.mem, addr, op)
    }
}

impl Nic {
    /// A NIC in its power-on state: reset done, bus mastering off (as PCI starts).
    pub fn new(config: NicConfig) -> Self {
        Self {
            config,
            status: hw::STATUS_READY,
            error: hw::ERR_NONE,
            regs: Regs::default(),
            aq: None,
            eq: None,
            commands_completed: 0,
            pds: Table::new(config.attrs.max_pd),
            // Keys carry 24 bits of index; doorbells carry 16 bits of CQN and QPN.
            mrs: Table::new(config.attrs.max_mr.min(Handle::MAX_INDEX + 1)),
            // A window's rkey has bit 31 set: 23 bits of index.
            mws: Table::new(config.attrs.max_mw.min(Handle::MAX_INDEX >> 1)),
            mr_gen: 0,
            cqs: Table::new(config.attrs.max_cq.min(hw::MAX_QUEUE_NUM + 1)),
            qps: Table::new(
                config
                    .attrs
                    .max_qp
                    .min(hw::MAX_QUEUE_NUM + 1 - hw::QPN_FIRST),
            ),
            // Doorbells carry 16 bits of SRQN.
            srqs: Table::new(config.attrs.max_srq.min(hw::MAX_QUEUE_NUM + 1)),
            doorbells: 0,
            events_posted: 0,
            cq_events_coalesced: 0,
            atomics: [0; 2],
            port_counters: hw::PortCounters::default(),
            qp_counts: HashMap::new(),
            uc_dropped: 0,
            ud: ud::UdCounts::default(),
            ud_held: ud::HeldQueue::default(),
            gids: port::Gids::default(),
            db_page_writes: [0; hw::DB_PAGES as usize],
            bus_master: false,
            deferred_events: VecDeque::new(),
            pending_irqs: 0,
            counters: Counters::default(),
            wire: None,
            wire_qps: remote::Remotes::default(),
            own: VecDeque::new(),
            draining: false,
            loop_wire: false,
            dead: false,
        }
    }

    /// `mem` as the engine may use it now: not at all while bus mastering is off or the
    /// NIC is dead.
    fn gate<'a>(&self, mem: &'a dyn Dma) -> Gate<'a> {
        Gate {
            mem,
            open: self.bus_master && !self.dead,
        }
    }

    /// Makes the wire fail on request ([`wire::Wire::impair`]).
    ///
    /// # Errors
    ///
    /// No wire, or one that cannot fail.
    pub fn wire_impair(&self, kind: wire::Impairment, p: f64) -> Result<(), String> {
        match &self.wire {
            Some(w) => w.impair(kind, p),
            None => Err("the NIC is on no wire".into()),
        }
    }

    /// What the wire's failures did (` key=value` pairs; empty without a wire that fails).
    pub fn wire_impairments(&self) -> String {
        self.wire
            .as_ref()
            .map(|w| w.impairments())
            .unwrap_or_default()
    }

    /// Connects the NIC to the wire between NICs (or, with `None`, disconnects it): QPs
    /// whose AV does not name the port itself send their packets there, and
    /// [`Nic::receive_frame`] takes what comes back.
    pub fn set_wire(&mut self, wire: Option<Box<dyn wire::Wire>>) {
        self.wire = wire;
    }

    /// For tests: with `on`, packets to the NIC itself (loopback) go as frames through the
    /// wire of [`Nic::set_wire`] (to this NIC's LID) instead of the NIC's own queue, so a
    /// test's wire can drop, duplicate and reorder them; they come back through
    /// [`Nic::receive_frame`] as any frame. Not a mode of the model binary.
    pub fn set_loopback_on_wire(&mut self, on: bool) {
        self.loop_wire = on;
    }

    /// PDs allocated now, for logs and tests.
    pub fn pds_in_use(&self) -> u32 {
        self.pds.in_use()
    }

    /// The anomaly counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The port's counters (`CMD_QUERY_COUNTERS`).
    pub fn port_counters(&self) -> hw::PortCounters {
        let mut c = self.port_counters;
        c.0[hw::CNT_BAD_FRAMES] = self.counters.get(Anomaly::BadFrame);
        c
    }

    /// QP `qpn`'s counters (`CMD_QUERY_QP_COUNTERS`), if it exists.
    pub fn qp_counters(&self, qpn: u32) -> Option<hw::PortCounters> {
        self.qp_counts.get(&qpn).copied()
    }

    /// Adds `n` to counter `index` (a `hw::CNT_*`) of the port and of QP `qpn`, the QP the
    /// event happened to (if it exists: a packet for no QP counts on the port alone).
    pub(super) fn count(&mut self, qpn: u32, index: usize, n: u64) {
        self.port_counters.add(index, n);
        if let Some(c) = self.qp_counts.get_mut(&qpn) {
            c.add(index, n);
        }
    }

    /// The state the control channel's `status` reports.
    pub fn status_snapshot(&self) -> NicStatus {
        NicStatus {
            link_up: self.config.link_up,
            enabled: self.status & hw::STATUS_ENABLED != 0,
            fatal: self.status & hw::STATUS_FATAL != 0,
            error: self.error,
            dead: self.dead,
            bus_master: self.bus_master,
            pds: self.pds.in_use(),
            mrs: self.mrs.in_use(),
            cqs: self.cqs.in_use(),
            qps: self.qps.in_use(),
            srqs: self.srqs.in_use(),
            srqs_counts: self.srqs.counts(),
            mws: self.mws.in_use(),
            mws_counts: self.mws.counts(),
            created: [
                self.pds.counts().0,
                self.mrs.counts().0,
                self.cqs.counts().0,
                self.qps.counts().0,
            ],
            destroyed: [
                self.pds.counts().1,
                self.mrs.counts().1,
                self.cqs.counts().1,
                self.qps.counts().1,
            ],
            atomics: self.atomics,
            recoveries: [
                self.port_counters.get(hw::CNT_LOCAL_ACK_TIMEOUT_ERR),
                self.port_counters.get(hw::CNT_SEND_SEQ_ERR),
                self.port_counters.get(hw::CNT_RCVD_SEQ_ERR),
            ],
            port_counters: self.port_counters(),
            uc_dropped: self.uc_dropped,
            ud: self.ud,
            gids: self.gid_count(),
            doorbells: self.doorbells,
            commands: self.commands_completed,
            events: self.events_posted,
            events_coalesced: self.cq_events_coalesced,
            events_unread: self.events_unread(),
            admin_pending: self
                .aq
                .as_ref()
                .map_or(0, |aq| aq.sq_prod.wrapping_sub(aq.sq_head)),
            counters: self.counters,
        }
    }

    /// Resets to the power-on state (`CONTROL = RESET`): queues off, registers zero,
    /// objects freed, `STATUS = READY`. PCI state (bus mastering), the link, the injected
    /// fault and the counters (the anomalies, objects created and destroyed, doorbell page
    /// writes) are not part of the NIC's reset, nor is a soft death ([`Death::Silent`]:
    /// only a function reset revives it).
    pub fn reset(&mut self) {
        info!("reset");
        let mut fresh = Self::new(self.config);
        fresh.bus_master = self.bus_master;
        fresh.counters = self.counters;
        fresh.mr_gen = self.mr_gen;
        fresh.db_page_writes = self.db_page_writes;
        fresh.atomics = self.atomics;
        fresh.port_counters = self.port_counters;
        fresh.uc_dropped = self.uc_dropped;
        fresh.ud = self.ud;
        fresh.pds.keep_counts(&self.pds);
        fresh.mrs.keep_counts(&self.mrs);
        fresh.mws.keep_counts(&self.mws);
        fresh.cqs.keep_counts(&self.cqs);
        fresh.qps.keep_counts(&self.qps);
        fresh.srqs.keep_counts(&self.srqs);
        fresh.wire = self.wire.take();
        fresh.loop_wire = self.loop_wire;
        fresh.dead = self.dead;
        *self = fresh;
        if self.config.fault == Some(Fault::ResetStuck) {
            warn!("injected fault: the reset never completes");
            self.status = 0;
        }
    }

    /// Follows the PCI COMMAND register's Bus Master Enable.
    ///
    /// While it is off the NIC does no DMA and sends no MSI-X: admin doorbells are latched,
    /// events and interrupts held. When it comes back, the held work runs.
    pub fn set_bus_master(&mut self, on: bool, mem: &dyn Dma, irq: &dyn Interrupts) {
        if self.bus_master == on {
            return;
        }
        self.bus_master = on;
        info!(on, "bus mastering");
        if !on || self.dead {
            return;
        }
        while let Some((kind, data, data2)) = self.deferred_events.pop_front() {
            self.post_event(kind, data, data2, mem, irq);
        }
        self.run_admin(mem, irq);
        self.run_data_path(mem, irq);
        for v in 0..hw::NUM_VECTORS {
            let bit = 1u32.checked_shl(u32::from(v)).unwrap_or(0);
            if self.pending_irqs & bit != 0 {
                self.pending_irqs &= !bit;
                irq.raise(v);
            }
        }
    }

    /// Whether bus mastering is on.
    pub fn bus_master(&self) -> bool {
        self.bus_master
    }

    /// Counts (and, bounded, logs) work held back because bus mastering is off.
    fn refused(&mut self, what: &str) {
        bounded_warn!(
            self.counters,
            Anomaly::DmaRefused,
            what,
            "bus mastering is off: no DMA; held until it is back on"
        );
    }

    /// Queues an event a command raised; the admin loop posts it after the command's
    /// completion (and the bus-mastering rule holds it as any other). Bounded like the
    /// FIFO of held events: beyond it the event is dropped and counted.
    fn queue_event(&mut self, kind: u8, data: u32, data2: u64) {
        if self.deferred_events.len() < EVENT_FIFO {
            self.deferred_events.push_back((kind, data, data2));
        } else {
            bounded_warn!(
                self.counters,
                Anomaly::EventDropped,
                kind,
                "the NIC's event FIFO is full: event dropped"
            );
        }
    }

    /// Raises MSI-X `vector`, or holds it while bus mastering is off.
    fn interrupt(&mut self, vector: u16, irq: &dyn Interrupts) {
        if self.dead {
            return;
        }
        if self.bus_master {
            irq.raise(vector);
        } else {
            self.pending_irqs |= 1u32.checked_shl(u32::from(vector)).unwrap_or(0);
            self.refused("MSI-X");
        }
    }

    /// Changes the port's link state; posts `PORT_ACTIVE`/`PORT_DOWN` if the queues run.
    pub fn set_link(&mut self, up: bool, mem: &dyn Dma, irq: &dyn Interrupts) {
        if self.config.link_up == up {
            return;
        }
        self.config.link_up = up;
        info!(up, "link state");
        if self.status & hw::STATUS_ENABLED != 0 {
            let kind = if up {
                hw::EVENT_PORT_ACTIVE
            } else {
                hw::EVENT_PORT_DOWN
            };
            self.post_event(kind, 1, 0, mem, irq);
        }
    }

    /// Posts an event of any kind, as the NIC would (the control channel's `event`: for
    /// the driver's tests of events the NIC does not raise on its own, and of kinds it
    /// does not know). `false` if the queues do not run.
    pub fn post_any_event(
        &mut self,
        kind: u8,
        data: u32,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) -> bool {
        if self.status & hw::STATUS_ENABLED == 0 {
            return false;
        }
        self.post_event(kind, data, 0, mem, irq);
        true
    }

    /// The port's link state.
    pub fn link_up(&self) -> bool {
        self.config.link_up
    }

    /// The `STATUS` register.
    pub fn status(&self) -> u32 {
        self.status
    }

    /// The `ERROR` register.
    pub fn error(&self) -> u32 {
        self.error
    }

    /// Events dropped because the event queue was full (since the model started).
    pub fn events_dropped(&self) -> u64 {
        self.counters.get(Anomaly::EventDropped)
    }

    /// Stops the NIC with `error` in `ERROR`, as on an internal error: `STATUS.FATAL`, the
    /// queues stop, `EVENT_FATAL` is posted if the event queue works. Sticky until reset; a
    /// second fatal error changes nothing, nor does one of a dead NIC.
    pub fn fatal(&mut self, error: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if self.status & hw::STATUS_FATAL != 0 || self.dead {
            return;
        }
        warn!(error, "fatal error: the NIC stops until reset");
        self.error = error;
        self.status |= hw::STATUS_FATAL;
        // Tell the driver while the event queue still works; it stops after this.
        self.post_event(hw::EVENT_FATAL, error, 0, mem, irq);
        self.status &= !hw::STATUS_ENABLED;
        self.aq = None;
    }

    /// An admin queue DMA failed: counted, then fatal with `ERR_QUEUE_DMA`.
    fn admin_dma_failed(&mut self, addr: u64, mem: &dyn Dma, irq: &dyn Interrupts) {
        bounded_warn!(
            self.counters,
            Anomaly::BadAddress,
            addr = format_args!("{addr:#x}"),
            "admin queue DMA failed"
        );
        self.fatal(hw::ERR_QUEUE_DMA, mem, irq);
    }
}
