//! The BAR0 register file: decoding of the guest's register reads and writes, `CONTROL`
//! (reset, enable) and the queue registers.

use ordma_hw as hw;
use tracing::{debug, info};

use super::admin::AdminQueue;
use super::counters::{bounded_warn, Anomaly};
use super::events::EventQueue;
use super::{Fault, Interrupts, Nic};
use crate::mem::Dma;

/// The read-write registers; all zero after reset.
#[derive(Debug, Default)]
pub(super) struct Regs {
    aq_sq_base: u64,
    aq_cq_base: u64,
    eq_base: u64,
    aq_log_depth: u32,
    eq_log_depth: u32,
}

fn set_lo(reg: &mut u64, v: u32) {
    *reg = (*reg & !0xffff_ffff) | u64::from(v);
}

fn set_hi(reg: &mut u64, v: u32) {
    *reg = (*reg & 0xffff_ffff) | (u64::from(v) << 32);
}

impl Regs {
    /// The value of the read-write register at `off`, if it is one.
    fn read(&self, off: usize) -> Option<u32> {
        // CAST: the low and high words of the 64-bit registers.
        let lo = |v: u64| v as u32;
        let hi = |v: u64| (v >> 32) as u32;
        Some(match off {
            o if o == hw::REG_AQ_SQ_BASE => lo(self.aq_sq_base),
            o if o == hw::REG_AQ_SQ_BASE + 4 => hi(self.aq_sq_base),
            o if o == hw::REG_AQ_CQ_BASE => lo(self.aq_cq_base),
            o if o == hw::REG_AQ_CQ_BASE + 4 => hi(self.aq_cq_base),
            o if o == hw::REG_EQ_BASE => lo(self.eq_base),
            o if o == hw::REG_EQ_BASE + 4 => hi(self.eq_base),
            hw::REG_AQ_LOG_DEPTH => self.aq_log_depth,
            hw::REG_EQ_LOG_DEPTH => self.eq_log_depth,
            _ => return None,
        })
    }

    /// Stores `value` in the read-write register at `off`; `false` if it is not one.
    fn write(&mut self, off: usize, value: u32) -> bool {
        match off {
            o if o == hw::REG_AQ_SQ_BASE => set_lo(&mut self.aq_sq_base, value),
            o if o == hw::REG_AQ_SQ_BASE + 4 => set_hi(&mut self.aq_sq_base, value),
            o if o == hw::REG_AQ_CQ_BASE => set_lo(&mut self.aq_cq_base, value),
            o if o == hw::REG_AQ_CQ_BASE + 4 => set_hi(&mut self.aq_cq_base, value),
            o if o == hw::REG_EQ_BASE => set_lo(&mut self.eq_base, value),
            o if o == hw::REG_EQ_BASE + 4 => set_hi(&mut self.eq_base, value),
            hw::REG_AQ_LOG_DEPTH => self.aq_log_depth = value,
            hw::REG_EQ_LOG_DEPTH => self.eq_log_depth = value,
            _ => return false,
        }
        true
    }
}

/// The depth of a queue at `base` with `log_depth` and `entry`-byte entries, if the
/// configuration is valid and the whole ring is reachable.
fn queue_ok(mem: &dyn Dma, base: u64, log_depth: u32, entry: usize) -> Option<u16> {
    if !(hw::MIN_LOG_DEPTH..=hw::MAX_LOG_DEPTH).contains(&log_depth) || base % hw::QUEUE_ALIGN != 0
    {
        return None;
    }
    let depth = 1u16 << log_depth;
    mem.reachable(base, u64::from(depth) * entry as u64)
        .then_some(depth)
}

impl Nic {
    /// A guest read of BAR0. `size` is the access width in bytes. A dead NIC
    /// ([`super::Death::Silent`]) answers all ones, as a function that does not respond.
    pub fn bar0_read(&mut self, offset: u64, size: usize) -> u32 {
        if self.dead {
            return u32::MAX;
        }
        if size != 4 || offset % 4 != 0 {
            bounded_warn!(
                self.counters,
                Anomaly::BadAccess,
                offset,
                size,
                "unaligned or non-32-bit BAR0 read"
            );
            return u32::MAX;
        }
        let off = usize::try_from(offset).unwrap_or(usize::MAX);
        match off {
            hw::REG_VERSION if self.config.fault == Some(Fault::BadVersion) => 2 << 16,
            hw::REG_VERSION => hw::VERSION,
            hw::REG_STATUS => self.status,
            hw::REG_ERROR => self.error,
            hw::REG_NUM_VECTORS => u32::from(hw::NUM_VECTORS),
            hw::REG_DB_PAGES => hw::DB_PAGES,
            o => self.regs.read(o).unwrap_or(0),
        }
    }

    /// A guest write of BAR0; a dead NIC ([`super::Death::Silent`]) ignores it.
    pub fn bar0_write(
        &mut self,
        offset: u64,
        size: usize,
        value: u32,
        mem: &dyn Dma,
        irq: &dyn Interrupts,
    ) {
        if self.dead {
            return;
        }
        if size != 4 || offset % 4 != 0 {
            bounded_warn!(
                self.counters,
                Anomaly::BadAccess,
                offset,
                size,
                "unaligned or non-32-bit BAR0 write ignored"
            );
            return;
        }
        let off = usize::try_from(offset).unwrap_or(usize::MAX);
        // Queue registers may only change while the queues are off.
        let enabled = self.status & hw::STATUS_ENABLED != 0;
        match off {
            hw::REG_CONTROL => match value {
                hw::CONTROL_RESET => self.reset(),
                hw::CONTROL_ENABLE => self.enable(mem, irq),
                _ => {
                    bounded_warn!(
                        self.counters,
                        Anomaly::BadRegisterWrite,
                        value,
                        "unknown CONTROL command"
                    );
                    self.fatal(hw::ERR_BAD_REGISTER_WRITE, mem, irq);
                }
            },
            hw::REG_AQ_SQ_DB => self.admin_doorbell(value, mem, irq),
            hw::REG_EQ_DB => self.event_doorbell(value, mem, irq),
            o if !enabled && self.regs.write(o, value) => {}
            _ => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadRegisterWrite,
                    offset,
                    value,
                    "write to a read-only, unknown or frozen register"
                );
                self.fatal(hw::ERR_BAD_REGISTER_WRITE, mem, irq);
            }
        }
    }

    /// `CONTROL = ENABLE`: validates the queue registers and starts the queues.
    fn enable(&mut self, mem: &dyn Dma, irq: &dyn Interrupts) {
        if self.status & (hw::STATUS_ENABLED | hw::STATUS_FATAL) != 0 {
            bounded_warn!(
                self.counters,
                Anomaly::BadRegisterWrite,
                status = self.status,
                "ENABLE while enabled or fatal"
            );
            self.fatal(hw::ERR_BAD_REGISTER_WRITE, mem, irq);
            return;
        }
        let r = &self.regs;
        let sq = queue_ok(mem, r.aq_sq_base, r.aq_log_depth, hw::AQ_SQE_SIZE);
        let cq = queue_ok(mem, r.aq_cq_base, r.aq_log_depth, hw::AQ_CQE_SIZE);
        let eq = queue_ok(mem, r.eq_base, r.eq_log_depth, hw::EQE_SIZE);
        let (Some(depth), Some(_), Some(eq_depth)) = (sq, cq, eq) else {
            let (sq, cq, eq) = (r.aq_sq_base, r.aq_cq_base, r.eq_base);
            let (aq_log_depth, eq_log_depth) = (r.aq_log_depth, r.eq_log_depth);
            bounded_warn!(
                self.counters,
                Anomaly::BadRegisterWrite,
                sq,
                cq,
                eq,
                aq_log_depth,
                eq_log_depth,
                "ENABLE with a bad queue configuration"
            );
            // No usable event queue to report on: just the registers.
            self.error = hw::ERR_BAD_QUEUE_CONFIG;
            self.status |= hw::STATUS_FATAL;
            return;
        };
        self.aq = Some(AdminQueue::new(r.aq_sq_base, r.aq_cq_base, depth));
        self.eq = Some(EventQueue::new(r.eq_base, eq_depth));
        self.status |= hw::STATUS_ENABLED;
        info!(aq_depth = depth, eq_depth, "queues enabled");
        debug!(bus_master = self.bus_master, "enable");
        if self.config.link_up {
            self.post_event(hw::EVENT_PORT_ACTIVE, 1, 0, mem, irq);
        }
    }
}
