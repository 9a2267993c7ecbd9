//! The NIC's health as the tests drive it: injected faults (`--inject`, the control
//! channel's `inject`, permanent or until the next function reset), the soft death (the
//! control channel's `die` and `die fatal`: the NIC forgets everything, and a function
//! reset or a NIC reset revives it), and the PCI function reset that ends both
//! (hardware.md, "Soft death").

use super::{Interrupts, Nic};
use crate::mem::Dma;
use ordma_hw as hw;
use tracing::info;

/// A fault the model injects, to test the driver's error paths (`--inject`, or `inject`
/// on the control channel). It lasts until it is disarmed, through every reset, or, armed
/// `until-reset` ([`Nic::inject_until_reset`]), until the next function reset
/// ([`Nic::function_reset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `VERSION` reports interface 2.0, which no driver of 1.x may accept.
    BadVersion,
    /// A reset never completes: `STATUS.READY` stays clear.
    ResetStuck,
    /// `CMD_QUERY_DEVICE` fails with `AQ_BAD_PARAM`.
    QueryDeviceError,
    /// `CMD_DESTROY_CQ` and `CMD_DESTROY_QP` fail with `AQ_BAD_PARAM` and destroy nothing:
    /// the queue stays on the NIC, bound to its doorbell page.
    DestroyFails,
    /// The admin queue stops: doorbells are checked and latched, but no command is
    /// processed (none completes) while the fault is armed.
    AdminStuck,
    /// The next admin doorbell makes the NIC fatal (`ERR_INTERNAL`, `EVENT_FATAL`) before
    /// it processes a command: the driver's command dies in flight.
    AdminDies,
    /// The next admin command runs, and its completion is never written (lost on the
    /// NIC's way); the fault then disarms itself. The driver's command times out alone.
    AdminLost,
}

impl Fault {
    /// The names `--inject` accepts.
    pub const NAMES: &'static str =
        "bad-version, reset-stuck, query-device-error, destroy-fails, admin-stuck, admin-dies, admin-lost";
}

impl core::str::FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bad-version" => Ok(Self::BadVersion),
            "reset-stuck" => Ok(Self::ResetStuck),
            "query-device-error" => Ok(Self::QueryDeviceError),
            "destroy-fails" => Ok(Self::DestroyFails),
            "admin-stuck" => Ok(Self::AdminStuck),
            "admin-dies" => Ok(Self::AdminDies),
            "admin-lost" => Ok(Self::AdminLost),
            _ => Err(format!("unknown fault {s} ({})", Self::NAMES)),
        }
    }
}

/// How the NIC dies on request (the control channel's `die`, [`Nic::die`]). Either way it
/// forgets everything it holds at once: every PD, MR, memory window, CQ, QP and SRQ, the
/// doorbell pages' bindings, the QPs' wire state and peers, the packets in flight and to
/// itself, the GID table, every counter (port, per QP, objects created and destroyed,
/// anomalies, doorbell page writes): what is left is a NIC as a new model process starts,
/// which issues no DMA, raises no interrupt and sends no frame, since it holds nothing that
/// would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Death {
    /// The NIC stops answering, as a killed model process looks to the guest: BAR0 reads
    /// return all ones, BAR0 and doorbell writes are ignored, frames from the wire (and,
    /// on an Ethernet port, to and from its netdev) are dropped, no event is posted. Only
    /// a function reset ([`Nic::function_reset`]) revives it. Configuration space still
    /// answers: the function reset goes through it.
    Silent,
    /// The NIC goes fatal as on an internal error (`STATUS.FATAL`, `ERROR =
    /// ERR_INTERNAL`, `EVENT_FATAL` if its event queue works), then forgets everything but
    /// its registers and the event queue that carries that event. A NIC reset (`CONTROL =
    /// RESET`, what the driver writes at unbind and probe) revives it.
    Fatal,
}

impl Nic {
    /// A PCI function reset: vfio-user's `DEVICE_RESET`, or configuration space's PM
    /// capability taken from D3hot to D0 (`crate::pci`), which is how the guest's
    /// `/sys/bus/pci/devices/<bdf>/reset` reaches the NIC. A fault armed `until-reset` is
    /// disarmed first, a soft death ([`Death::Silent`]) is over, then the NIC resets as by
    /// `CONTROL = RESET` ([`Nic::reset`]) and bus mastering is off (PCI COMMAND is reset;
    /// the caller resets configuration space to match).
    pub fn function_reset(&mut self) {
        if self.config.fault_until_reset {
            info!(fault = ?self.config.fault, "function reset: the injected fault is disarmed");
            self.config.fault = None;
            self.config.fault_until_reset = false;
        }
        let revived = self.dead;
        self.dead = false;
        self.bus_master = false;
        self.reset();
        if revived {
            info!("function reset: the NIC is alive again");
            if let Some(w) = self.wire.as_ref() {
                w.silence(false);
            }
        }
    }

    /// Whether the NIC died softly and no function reset revived it yet.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Kills the NIC softly ([`Death`]): it forgets everything it holds, and either stops
    /// answering until a function reset ([`Death::Silent`]) or goes fatal until a NIC reset
    /// ([`Death::Fatal`]). The model process and its vfio-user connection live on.
    ///
    /// # Errors
    ///
    /// The NIC is dead already ([`Death::Silent`]), or, for [`Death::Fatal`], fatal already.
    pub fn die(&mut self, how: Death, mem: &dyn Dma, irq: &dyn Interrupts) -> Result<(), String> {
        if self.dead {
            return Err("the NIC is dead already".into());
        }
        if how == Death::Fatal && self.status & hw::STATUS_FATAL != 0 {
            return Err(format!("the NIC is fatal already (ERROR {})", self.error));
        }
        info!(
            ?how,
            counters = %self.counters,
            "soft death: the NIC forgets everything (the counts so far)"
        );
        if how == Death::Fatal {
            self.fatal(hw::ERR_INTERNAL, mem, irq);
        }
        let mut fresh = Self::new(self.config);
        fresh.bus_master = self.bus_master;
        fresh.wire = self.wire.take();
        fresh.loop_wire = self.loop_wire;
        match how {
            Death::Silent => fresh.dead = true,
            Death::Fatal => {
                // What reported the fatal error, and may still have to (bus mastering off).
                fresh.status = self.status;
                fresh.error = self.error;
                fresh.regs = std::mem::take(&mut self.regs);
                fresh.eq = self.eq.take();
                fresh.deferred_events = std::mem::take(&mut self.deferred_events);
                fresh.pending_irqs = self.pending_irqs;
            }
        }
        *self = fresh;
        if let Some(w) = self.wire.as_ref() {
            w.forget_peers();
            w.silence(self.dead);
        }
        Ok(())
    }

    /// Arms (or, with `None`, clears) an injected fault at run time; it lasts until it is
    /// disarmed.
    pub fn inject(&mut self, fault: Option<Fault>) {
        info!(?fault, "injected fault armed");
        self.config.fault = fault;
        self.config.fault_until_reset = false;
    }

    /// Arms an injected fault at run time that the next function reset disarms
    /// ([`Nic::function_reset`]).
    pub fn inject_until_reset(&mut self, fault: Fault) {
        info!(?fault, "injected fault armed until the next function reset");
        self.config.fault = Some(fault);
        self.config.fault_until_reset = true;
    }
}
