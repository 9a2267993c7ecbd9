//! The NIC's engine: registers, the admin queue, the event queue, reset.
//!
//! Transport-free: the vfio-user server (or a test) calls [`Nic::bar0_read`] and
//! [`Nic::bar0_write`] for the guest's register accesses and hands in the guest memory and
//! the interrupt sink. Every value the guest gives is checked before use; bad values end in
//! an error completion, an error event or `STATUS_FATAL` with an `ERROR` code, as
//! `Documentation/hardware.md` specifies, never a panic.

use ordma_hw as hw;
use tracing::{debug, info, warn};

use crate::mem::GuestMemory;

/// Where the engine raises MSI-X interrupts.
pub trait Interrupts {
    /// Signals MSI-X vector `vector` (the server writes its eventfd).
    fn raise(&self, vector: u16);
}

/// A fault the model injects, to test the driver's error paths (`--inject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `VERSION` reports interface 2.0, which no driver of 1.x may accept.
    BadVersion,
    /// A reset never completes: `STATUS.READY` stays clear.
    ResetStuck,
    /// `CMD_QUERY_DEVICE` fails with `AQ_BAD_PARAM`.
    QueryDeviceError,
}

impl core::str::FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bad-version" => Ok(Self::BadVersion),
            "reset-stuck" => Ok(Self::ResetStuck),
            "query-device-error" => Ok(Self::QueryDeviceError),
            _ => Err(format!(
                "unknown fault {s} (bad-version, reset-stuck, query-device-error)"
            )),
        }
    }
}

/// What the NIC reports about itself; fixed per model instance (command line).
#[derive(Clone, Copy, Debug)]
pub struct NicConfig {
    /// The attributes `CMD_QUERY_DEVICE` returns.
    pub attrs: hw::DeviceAttrs,
    /// The port's LID.
    pub lid: u16,
    /// Whether the port's link is up.
    pub link_up: bool,
    /// A fault to inject, if any.
    pub fault: Option<Fault>,
}

impl NicConfig {
    /// The model's defaults, with the given node GUID.
    pub fn with_guid(node_guid: u64) -> Self {
        Self {
            attrs: hw::DeviceAttrs {
                fw_version: (u64::from(
                    env!("CARGO_PKG_VERSION_MAJOR").parse::<u16>().unwrap_or(0),
                ) << 32)
                    | (u64::from(env!("CARGO_PKG_VERSION_MINOR").parse::<u16>().unwrap_or(0))
                        << 16),
                node_guid,
                page_size_cap: (1 << 12) | (1 << 21) | (1 << 30),
                max_qp: 1024,
                max_qp_wr: 4096,
                max_cq: 1024,
                max_cqe: 65536,
                max_mr: 4096,
                max_pd: 1024,
                max_sge: 16,
                num_ports: 1,
                vendor_part_id: u32::from(hw::PCI_DEVICE_ID),
                hw_ver: 1,
            },
            lid: 1,
            link_up: true,
            fault: None,
        }
    }
}

/// The admin queue pair, once enabled.
#[derive(Debug)]
struct AdminQueue {
    sq_base: u64,
    cq_base: u64,
    depth: u16,
    /// Next SQ entry to process (free-running, mod 2^16).
    sq_head: u16,
    /// Next CQ slot to write (free-running, mod 2^16).
    cq_tail: u16,
}

/// The event queue, once enabled.
#[derive(Debug)]
struct EventQueue {
    base: u64,
    depth: u16,
    prod: u16,
    cons: u16,
    armed: bool,
    dropped: u64,
}

/// One ordma NIC.
pub struct Nic {
    config: NicConfig,
    status: u32,
    error: u32,
    aq_sq_base: u64,
    aq_cq_base: u64,
    eq_base: u64,
    aq_log_depth: u32,
    eq_log_depth: u32,
    aq: Option<AdminQueue>,
    eq: Option<EventQueue>,
    /// Admin commands completed since reset, for logs and tests.
    pub commands_completed: u64,
    /// Allocated PDs.
    pds: IdTable,
}

/// A set of object numbers `0..max`, handed out lowest first.
#[derive(Debug)]
struct IdTable {
    used: Vec<u64>,
    max: u32,
}

impl IdTable {
    fn new(max: u32) -> Self {
        Self {
            used: Vec::new(),
            max,
        }
    }

    /// The lowest free number, now taken; `None` if all `max` are in use.
    fn alloc(&mut self) -> Option<u32> {
        let word = self.used.iter().position(|w| *w != u64::MAX);
        let (i, w) = match word {
            Some(i) => (i, self.used[i]),
            None => {
                self.used.push(0);
                (self.used.len() - 1, 0)
            }
        };
        let bit = (!w).trailing_zeros();
        let id = u32::try_from(i * 64).ok()?.checked_add(bit)?;
        if id >= self.max {
            return None;
        }
        self.used[i] |= 1 << bit;
        Some(id)
    }

    /// Frees `id`; `false` if it was not allocated.
    fn free(&mut self, id: u32) -> bool {
        let (i, bit) = ((id / 64) as usize, id % 64);
        match self.used.get_mut(i) {
            Some(w) if *w & (1 << bit) != 0 => {
                *w &= !(1 << bit);
                true
            }
            _ => false,
        }
    }

    fn in_use(&self) -> u32 {
        self.used.iter().map(|w| w.count_ones()).sum()
    }
}

fn set_lo(reg: &mut u64, v: u32) {
    *reg = (*reg & !0xffff_ffff) | u64::from(v);
}

fn set_hi(reg: &mut u64, v: u32) {
    *reg = (*reg & 0xffff_ffff) | (u64::from(v) << 32);
}

impl Nic {
    /// A NIC in its power-on state (as after a reset).
    pub fn new(config: NicConfig) -> Self {
        Self {
            config,
            status: hw::STATUS_READY,
            error: hw::ERR_NONE,
            aq_sq_base: 0,
            aq_cq_base: 0,
            eq_base: 0,
            aq_log_depth: 0,
            eq_log_depth: 0,
            aq: None,
            eq: None,
            commands_completed: 0,
            pds: IdTable::new(config.attrs.max_pd),
        }
    }

    /// PDs allocated now, for logs and tests.
    pub fn pds_in_use(&self) -> u32 {
        self.pds.in_use()
    }

    /// Resets to the power-on state: queues off, registers zero, `STATUS = READY`.
    pub fn reset(&mut self) {
        info!("reset");
        *self = Self::new(self.config);
        if self.config.fault == Some(Fault::ResetStuck) {
            warn!("injected fault: the reset never completes");
            self.status = 0;
        }
    }

    /// Changes the port's link state; posts `PORT_ACTIVE`/`PORT_DOWN` if the queues run.
    pub fn set_link(&mut self, up: bool, mem: &dyn GuestMemory, irq: &dyn Interrupts) {
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

    /// The attributes of port 1 as `CMD_QUERY_PORT` reports them.
    pub fn port_attrs(&self) -> hw::PortAttrs {
        let up = self.config.link_up;
        hw::PortAttrs {
            state: if up {
                hw::PORT_STATE_ACTIVE
            } else {
                hw::PORT_STATE_DOWN
            },
            phys_state: if up {
                hw::PHYS_STATE_LINK_UP
            } else {
                hw::PHYS_STATE_DISABLED
            },
            max_mtu: hw::MTU_4096,
            active_mtu: hw::MTU_4096,
            lid: self.config.lid,
            sm_lid: 0,
            port_guid: self.config.attrs.node_guid,
            gid_tbl_len: 1,
            pkey_tbl_len: 1,
            link_width: 1,
            link_speed: 1,
            max_msg_sz: 1 << 31,
        }
    }

    /// The `STATUS` register.
    pub fn status(&self) -> u32 {
        self.status
    }

    /// The `ERROR` register.
    pub fn error(&self) -> u32 {
        self.error
    }

    /// Events dropped because the event queue was full.
    pub fn events_dropped(&self) -> u64 {
        self.eq.as_ref().map_or(0, |eq| eq.dropped)
    }

    fn fatal(&mut self, error: u32, mem: &dyn GuestMemory, irq: &dyn Interrupts) {
        if self.status & hw::STATUS_FATAL != 0 {
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

    /// A guest read of BAR0. `size` is the access width in bytes.
    pub fn bar0_read(&self, offset: u64, size: usize) -> u32 {
        if size != 4 || offset % 4 != 0 {
            debug!(offset, size, "unaligned or non-32-bit BAR0 read");
            return u32::MAX;
        }
        let lo = |v: u64| v as u32;
        let hi = |v: u64| (v >> 32) as u32;
        match usize::try_from(offset).unwrap_or(usize::MAX) {
            hw::REG_VERSION if self.config.fault == Some(Fault::BadVersion) => 2 << 16,
            hw::REG_VERSION => hw::VERSION,
            hw::REG_STATUS => self.status,
            hw::REG_ERROR => self.error,
            hw::REG_NUM_VECTORS => u32::from(hw::NUM_VECTORS),
            hw::REG_DB_PAGES => hw::DB_PAGES,
            o if o == hw::REG_AQ_SQ_BASE => lo(self.aq_sq_base),
            o if o == hw::REG_AQ_SQ_BASE + 4 => hi(self.aq_sq_base),
            o if o == hw::REG_AQ_CQ_BASE => lo(self.aq_cq_base),
            o if o == hw::REG_AQ_CQ_BASE + 4 => hi(self.aq_cq_base),
            o if o == hw::REG_EQ_BASE => lo(self.eq_base),
            o if o == hw::REG_EQ_BASE + 4 => hi(self.eq_base),
            hw::REG_AQ_LOG_DEPTH => self.aq_log_depth,
            hw::REG_EQ_LOG_DEPTH => self.eq_log_depth,
            _ => 0,
        }
    }

    /// A guest write of BAR0.
    pub fn bar0_write(
        &mut self,
        offset: u64,
        size: usize,
        value: u32,
        mem: &dyn GuestMemory,
        irq: &dyn Interrupts,
    ) {
        if size != 4 || offset % 4 != 0 {
            debug!(offset, size, "unaligned or non-32-bit BAR0 write ignored");
            return;
        }
        let off = usize::try_from(offset).unwrap_or(usize::MAX);
        // Queue registers may only change while the queues are off.
        let enabled = self.status & hw::STATUS_ENABLED != 0;
        match off {
            hw::REG_CONTROL => match value {
                hw::CONTROL_RESET => self.reset(),
                hw::CONTROL_ENABLE => self.enable(mem, irq),
                _ => self.fatal(hw::ERR_BAD_REGISTER_WRITE, mem, irq),
            },
            hw::REG_AQ_SQ_DB => self.admin_doorbell(value, mem, irq),
            hw::REG_EQ_DB => self.event_doorbell(value, mem, irq),
            o if !enabled && o == hw::REG_AQ_SQ_BASE => set_lo(&mut self.aq_sq_base, value),
            o if !enabled && o == hw::REG_AQ_SQ_BASE + 4 => set_hi(&mut self.aq_sq_base, value),
            o if !enabled && o == hw::REG_AQ_CQ_BASE => set_lo(&mut self.aq_cq_base, value),
            o if !enabled && o == hw::REG_AQ_CQ_BASE + 4 => set_hi(&mut self.aq_cq_base, value),
            o if !enabled && o == hw::REG_EQ_BASE => set_lo(&mut self.eq_base, value),
            o if !enabled && o == hw::REG_EQ_BASE + 4 => set_hi(&mut self.eq_base, value),
            hw::REG_AQ_LOG_DEPTH if !enabled => self.aq_log_depth = value,
            hw::REG_EQ_LOG_DEPTH if !enabled => self.eq_log_depth = value,
            _ => {
                warn!(offset, value, "write to a read-only or unknown register");
                self.fatal(hw::ERR_BAD_REGISTER_WRITE, mem, irq);
            }
        }
    }

    fn queue_ok(mem: &dyn GuestMemory, base: u64, log_depth: u32, entry: usize) -> Option<u16> {
        if !(hw::MIN_LOG_DEPTH..=hw::MAX_LOG_DEPTH).contains(&log_depth)
            || base % hw::QUEUE_ALIGN != 0
        {
            return None;
        }
        let depth = 1u16 << log_depth;
        mem.contains(base, u64::from(depth) * entry as u64)
            .then_some(depth)
    }

    fn enable(&mut self, mem: &dyn GuestMemory, irq: &dyn Interrupts) {
        if self.status & (hw::STATUS_ENABLED | hw::STATUS_FATAL) != 0 {
            warn!(status = self.status, "ENABLE while enabled or fatal");
            self.fatal(hw::ERR_BAD_REGISTER_WRITE, mem, irq);
            return;
        }
        let sq = Self::queue_ok(mem, self.aq_sq_base, self.aq_log_depth, hw::AQ_SQE_SIZE);
        let cq = Self::queue_ok(mem, self.aq_cq_base, self.aq_log_depth, hw::AQ_CQE_SIZE);
        let eq = Self::queue_ok(mem, self.eq_base, self.eq_log_depth, hw::EQE_SIZE);
        let (Some(depth), Some(_), Some(eq_depth)) = (sq, cq, eq) else {
            warn!(
                sq = self.aq_sq_base,
                cq = self.aq_cq_base,
                eq = self.eq_base,
                aq_log_depth = self.aq_log_depth,
                eq_log_depth = self.eq_log_depth,
                "ENABLE with a bad queue configuration"
            );
            // No usable event queue to report on: just the registers.
            self.error = hw::ERR_BAD_QUEUE_CONFIG;
            self.status |= hw::STATUS_FATAL;
            return;
        };
        self.aq = Some(AdminQueue {
            sq_base: self.aq_sq_base,
            cq_base: self.aq_cq_base,
            depth,
            sq_head: 0,
            cq_tail: 0,
        });
        self.eq = Some(EventQueue {
            base: self.eq_base,
            depth: eq_depth,
            prod: 0,
            cons: 0,
            armed: false,
            dropped: 0,
        });
        self.status |= hw::STATUS_ENABLED;
        info!(aq_depth = depth, eq_depth, "queues enabled");
        if self.config.link_up {
            self.post_event(hw::EVENT_PORT_ACTIVE, 1, 0, mem, irq);
        }
    }

    /// Writes an event; drops it (and counts) if the queue is full.
    fn post_event(
        &mut self,
        kind: u8,
        data: u32,
        data2: u64,
        mem: &dyn GuestMemory,
        irq: &dyn Interrupts,
    ) {
        let Some(eq) = self.eq.as_mut() else { return };
        if eq.prod.wrapping_sub(eq.cons) >= eq.depth {
            eq.dropped += 1;
            warn!(
                kind,
                dropped = eq.dropped,
                "event queue full: event dropped"
            );
            return;
        }
        let e = hw::Event {
            kind,
            phase: hw::phase(eq.prod, eq.depth),
            data,
            data2,
        };
        let addr = eq.base + u64::from(eq.prod % eq.depth) * hw::EQE_SIZE as u64;
        if mem.write(addr, &e.encode()).is_err() {
            // The event queue itself is gone: stop, without an event to tell.
            self.eq = None;
            self.error = hw::ERR_QUEUE_DMA;
            self.status = (self.status | hw::STATUS_FATAL) & !hw::STATUS_ENABLED;
            self.aq = None;
            warn!(addr, "event queue write failed: fatal");
            return;
        }
        eq.prod = eq.prod.wrapping_add(1);
        debug!(kind, data, "event posted");
        if eq.armed {
            eq.armed = false;
            irq.raise(hw::VECTOR_EVENT);
        }
    }

    fn event_doorbell(&mut self, value: u32, mem: &dyn GuestMemory, irq: &dyn Interrupts) {
        let Some(eq) = self.eq.as_mut() else {
            warn!(value, "EQ doorbell while the event queue is off");
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        };
        // CAST: the consumer index is the low 16 bits by definition.
        let cons = value as u16;
        // The consumer may not pass the producer.
        if cons.wrapping_sub(eq.cons) > eq.prod.wrapping_sub(eq.cons) {
            warn!(cons, prod = eq.prod, "EQ doorbell beyond the producer");
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        }
        eq.cons = cons;
        if value & hw::EQ_DB_ARM != 0 {
            if eq.prod != eq.cons {
                irq.raise(hw::VECTOR_EVENT);
            } else {
                eq.armed = true;
            }
        }
    }

    fn admin_doorbell(&mut self, value: u32, mem: &dyn GuestMemory, irq: &dyn Interrupts) {
        let Some(aq) = self.aq.as_ref() else {
            warn!(value, "admin doorbell while the queues are off");
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        };
        // CAST: the producer index is the low 16 bits by definition.
        let prod = value as u16;
        let pending = prod.wrapping_sub(aq.sq_head);
        if pending > aq.depth || value >> 16 != 0 {
            warn!(
                prod,
                head = aq.sq_head,
                depth = aq.depth,
                "admin doorbell beyond the queue"
            );
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        }
        let mut completed = false;
        for _ in 0..pending {
            let Some(aq) = self.aq.as_ref() else { break };
            let addr = aq.sq_base + u64::from(aq.sq_head % aq.depth) * hw::AQ_SQE_SIZE as u64;
            let mut raw = [0u8; hw::AQ_SQE_SIZE];
            if mem.read(addr, &mut raw).is_err() {
                return self.fatal(hw::ERR_QUEUE_DMA, mem, irq);
            }
            // Answer with the tag even for a malformed entry (it sits at a fixed place).
            let cmd_id = hw::get_le32(&raw, 4).unwrap_or(0);
            let (status, result) = match hw::AdminCmd::decode(&raw) {
                Some(cmd) => self.execute(&cmd, mem),
                None => (hw::AQ_BAD_PARAM, 0),
            };
            let Some(aq) = self.aq.as_mut() else { break };
            let c = hw::AdminCompletion {
                cmd_id,
                status,
                phase: hw::phase(aq.cq_tail, aq.depth),
                result,
            };
            let caddr = aq.cq_base + u64::from(aq.cq_tail % aq.depth) * hw::AQ_CQE_SIZE as u64;
            if mem.write(caddr, &c.encode()).is_err() {
                return self.fatal(hw::ERR_QUEUE_DMA, mem, irq);
            }
            aq.sq_head = aq.sq_head.wrapping_add(1);
            aq.cq_tail = aq.cq_tail.wrapping_add(1);
            self.commands_completed += 1;
            completed = true;
        }
        if completed {
            irq.raise(hw::VECTOR_ADMIN);
        }
    }

    /// Writes a query's response, `min(resp_len, bytes.len())` bytes: (status, result).
    fn respond(
        mem: &dyn GuestMemory,
        cmd_id: u32,
        addr: u64,
        resp_len: u32,
        bytes: &[u8],
    ) -> (u16, u64) {
        let len = bytes.len().min(resp_len as usize);
        match mem.write(addr, &bytes[..len]) {
            Ok(()) => (hw::AQ_OK, len as u64),
            Err(e) => {
                warn!(cmd_id, %e, "bad response buffer");
                (hw::AQ_BAD_ADDRESS, 0)
            }
        }
    }

    /// Runs one admin command: (status, result).
    fn execute(&mut self, cmd: &hw::AdminCmd, mem: &dyn GuestMemory) -> (u16, u64) {
        match cmd.opcode {
            hw::CMD_QUERY_DEVICE if self.config.fault == Some(Fault::QueryDeviceError) => {
                warn!(cmd_id = cmd.cmd_id, "injected fault: QUERY_DEVICE fails");
                (hw::AQ_BAD_PARAM, 0)
            }
            hw::CMD_QUERY_DEVICE => {
                let Some(p) = hw::QueryDeviceParams::decode(&cmd.params) else {
                    return (hw::AQ_BAD_PARAM, 0);
                };
                if p.resp_len == 0 {
                    return (hw::AQ_BAD_PARAM, 0);
                }
                Self::respond(
                    mem,
                    cmd.cmd_id,
                    p.resp_addr,
                    p.resp_len,
                    &self.config.attrs.encode(),
                )
            }
            hw::CMD_QUERY_PORT => {
                let Some(p) = hw::QueryPortParams::decode(&cmd.params) else {
                    return (hw::AQ_BAD_PARAM, 0);
                };
                if p.resp_len == 0 || p.port == 0 || p.port > self.config.attrs.num_ports {
                    return (hw::AQ_BAD_PARAM, 0);
                }
                Self::respond(
                    mem,
                    cmd.cmd_id,
                    p.resp_addr,
                    p.resp_len,
                    &self.port_attrs().encode(),
                )
            }
            hw::CMD_ALLOC_PD => {
                if cmd.params.iter().any(|&x| x != 0) {
                    return (hw::AQ_BAD_PARAM, 0);
                }
                match self.pds.alloc() {
                    Some(pdn) => {
                        debug!(pdn, "PD allocated");
                        (hw::AQ_OK, u64::from(pdn))
                    }
                    None => {
                        warn!(max = self.config.attrs.max_pd, "no free PD");
                        (hw::AQ_NO_RESOURCES, 0)
                    }
                }
            }
            hw::CMD_DEALLOC_PD => {
                let Some(p) = hw::PdParams::decode(&cmd.params) else {
                    return (hw::AQ_BAD_PARAM, 0);
                };
                if self.pds.free(p.pdn) {
                    debug!(pdn = p.pdn, "PD freed");
                    (hw::AQ_OK, 0)
                } else {
                    warn!(pdn = p.pdn, "DEALLOC_PD of a PD that is not allocated");
                    (hw::AQ_BAD_PARAM, 0)
                }
            }
            op => {
                warn!(op, cmd_id = cmd.cmd_id, "unknown admin opcode");
                (hw::AQ_BAD_OPCODE, 0)
            }
        }
    }
}
