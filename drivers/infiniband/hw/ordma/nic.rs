// SPDX-License-Identifier: GPL-2.0

//! The NIC object: one bound ordma NIC's state (BARs, admin queue, event ring, port state,
//! the doorbell-page pool), shared by the interrupt handlers, the verbs and every object
//! the verbs create (each holds an `Arc<Nic>`), so nothing borrows past its owner.

use kernel::{
    device::Bound,
    io::{poll::read_poll_timeout, Io},
    new_mutex, new_spinlock_irq,
    page::PAGE_SHIFT,
    pci,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc, Mutex, SpinLockIrq,
    },
    time::{Delta, Instant, Monotonic},
};

use crate::{
    admin::{AdminQueue, Failure},
    event::EventRing,
    hw::{self, regs},
    ib,
    pages::NicMemory,
};

/// A port's state as the driver sees it: ACTIVE when both are up.
#[derive(Clone, Copy, Debug, Default)]
struct PortState {
    /// The NIC's link (`QUERY_PORT`, then its `PORT_ACTIVE`/`PORT_DOWN` events).
    link: bool,
    /// The paired netdev is running with its carrier on (always on InfiniBand).
    netdev_up: bool,
}

impl PortState {
    fn active(self) -> bool {
        self.link && self.netdev_up
    }
}

/// BAR0, the control registers, at its documented size.
pub(crate) type Bar0<'bound> = pci::Bar<'bound, { hw::BAR0_SIZE }>;

/// BAR2, the doorbell pages.
pub(crate) type Bar2<'bound> = pci::Bar<'bound, { hw::BAR2_SIZE }>;

/// One bound NIC.
#[pin_data]
pub(crate) struct Nic<'bound> {
    pub(crate) pdev: &'bound pci::Device<Bound>,
    pub(crate) bar: Bar0<'bound>,
    /// Mapped for its reservation: user contexts map its pages, the kernel none yet.
    _db_bar: Bar2<'bound>,
    #[pin]
    pub(crate) admin: AdminQueue,
    #[pin]
    pub(crate) eq: EventRing,
    /// Where events for ib_core go: attached while the `ib_device` is registered.
    pub(crate) ib_events: Arc<ib::EventSink>,
    /// Port 1's state: the NIC's link and, on Ethernet, the paired netdev's.
    #[pin]
    port: SpinLockIrq<PortState>,
    /// Port state changes seen, so registration can tell whether one raced it.
    port_changes: Atomic<u32>,
    /// The NIC reported a fatal error: it does nothing more until it is reset.
    dead: Atomic<bool>,
    /// The user doorbell pages.
    pub(crate) doorbells: DoorbellPages,
    /// Bounds what interrupt handlers log.
    pub(crate) log_limit: RateLimit,
    /// Bounds what the verbs log: every message a user's calls can cause.
    pub(crate) verbs_log_limit: RateLimit,
    /// Memory of objects (MRs, CQs, QPs) whose destroy the NIC did not acknowledge: it may
    /// still reach it, so it is released only once the NIC is stopped (`quiesce`).
    #[pin]
    retired: Mutex<KVec<NicMemory>>,
}

impl<'bound> Nic<'bound> {
    /// The NIC's state, with its queues allocated (not yet given to the NIC).
    pub(crate) fn new(
        pdev: &'bound pci::Device<Bound>,
        bar: Bar0<'bound>,
        db_bar: Bar2<'bound>,
    ) -> Result<impl PinInit<Self, Error> + 'bound> {
        let db_pfn = pdev.resource_start(2)? >> PAGE_SHIFT;
        let ib_events = Arc::pin_init(ib::EventSink::new(), GFP_KERNEL)?;
        let dev: &'bound kernel::device::Device<Bound> = pdev.as_ref();
        Ok(try_pin_init!(Self {
            pdev,
            bar,
            _db_bar: db_bar,
            admin <- AdminQueue::new(dev),
            eq <- EventRing::new(dev),
            ib_events,
            port <- new_spinlock_irq!(PortState::default(), "ordma_port"),
            port_changes: Atomic::new(0),
            dead: Atomic::new(false),
            doorbells: DoorbellPages::new(db_pfn),
            log_limit: RateLimit::new("event"),
            verbs_log_limit: RateLimit::new("verbs"),
            retired <- new_mutex!(KVec::new(), "ordma_retired"),
        }))
    }

    /// Whether the NIC has stopped: its registers read all ones (it no longer answers), or
    /// `STATUS` says fatal or not enabled.
    fn stopped(&self) -> bool {
        let s = self.bar.read(regs::STATUS);
        s.into_raw() == u32::MAX || s.fatal() || !s.enabled()
    }

    /// Resets the NIC and waits for `STATUS.READY`: it then uses no memory of ours.
    pub(crate) fn reset(&self) -> Result {
        let bar = &self.bar;
        bar.write_reg(regs::CONTROL::zeroed().with_command(hw::CONTROL_RESET));
        read_poll_timeout(
            || Ok(bar.read(regs::STATUS)),
            |s| s.ready() && s.into_raw() != u32::MAX,
            Delta::from_millis(1),
            Delta::from_secs(2),
        )
        .map(|_| ())
        .inspect_err(|_| dev_err!(self.pdev, "the NIC did not come out of reset\n"))
    }

    /// Stops the NIC for good before its memory is released: a reset, or, if the NIC does
    /// not answer, bus mastering off, so it cannot write to memory the driver frees.
    /// Memory retired by MRs the NIC did not let go is released then.
    pub(crate) fn quiesce(&self) {
        if self.reset().is_ok() {
            dev_dbg!(self.pdev, "NIC stopped\n");
        } else {
            clear_bus_master(self.pdev);
            dev_warn!(
                self.pdev,
                "bus mastering turned off: the NIC did not stop\n"
            );
        }
        let retired = core::mem::take(&mut *self.retired.lock());
        if !retired.is_empty() {
            dev_info!(
                self.pdev,
                "released the memory of {} object(s) the NIC had not let go\n",
                retired.len()
            );
        }
    }

    /// Keeps `memory` (an object's pinned pages and page lists, which the NIC may still reach)
    /// until the NIC is stopped. If even the list cannot grow, it is leaked: never freed
    /// under a NIC that may write to it.
    pub(crate) fn retire(&self, memory: NicMemory) {
        let mut retired = self.retired.lock();
        let kept = match retired.reserve(1, GFP_KERNEL) {
            Ok(()) => retired.push_within_capacity(memory).map_err(|e| e.0),
            Err(_) => Err(memory),
        };
        drop(retired);
        if let Err(memory) = kept {
            self.verbs_log_limit.log(self.pdev, || {
                dev_err!(
                    self.pdev,
                    "leaking an object's pinned memory: no room to keep it until the NIC is reset\n"
                )
            });
            core::mem::forget(memory);
        }
    }

    /// Programs the queues and starts them.
    pub(crate) fn enable(&self) -> Result {
        // CAST: splitting 64-bit addresses into their two register words.
        let (sq, cq, eq) = (self.admin.sq_addr(), self.admin.cq_addr(), self.eq.addr());
        let bar = &self.bar;
        bar.write_reg(regs::AQ_SQ_BASE_LO::zeroed().with_addr(sq as u32));
        bar.write_reg(regs::AQ_SQ_BASE_HI::zeroed().with_addr((sq >> 32) as u32));
        bar.write_reg(regs::AQ_CQ_BASE_LO::zeroed().with_addr(cq as u32));
        bar.write_reg(regs::AQ_CQ_BASE_HI::zeroed().with_addr((cq >> 32) as u32));
        bar.write_reg(regs::EQ_BASE_LO::zeroed().with_addr(eq as u32));
        bar.write_reg(regs::EQ_BASE_HI::zeroed().with_addr((eq >> 32) as u32));
        bar.write_reg(regs::AQ_LOG_DEPTH::zeroed().with_log_depth(crate::admin::AQ_LOG_DEPTH));
        bar.write_reg(regs::EQ_LOG_DEPTH::zeroed().with_log_depth(crate::event::EQ_LOG_DEPTH));
        bar.write_reg(regs::CONTROL::zeroed().with_command(hw::CONTROL_ENABLE));
        let status = bar.read(regs::STATUS);
        if !status.enabled() {
            dev_err!(
                self.pdev,
                "the NIC refused its queues: status {:#x}, error {}\n",
                status.into_raw(),
                bar.read(regs::ERROR).code()
            );
            return Err(EIO);
        }
        Ok(())
    }

    /// Whether port 1 is ACTIVE: its link up and, on Ethernet, its netdev up.
    pub(crate) fn port_active(&self) -> bool {
        self.port.lock().active()
    }

    /// Sets port 1's state before the events are armed and the `ib_device` registered:
    /// its link as `QUERY_PORT` said, and on Ethernet no netdev yet.
    pub(crate) fn init_port(&self, link: bool, ethernet: bool) {
        *self.port.lock() = PortState {
            link,
            netdev_up: !ethernet,
        };
    }

    /// Records port 1's link, as the NIC's event said; `true` if the port's state changed
    /// (and then ib_core is told).
    pub(crate) fn set_port_link(&self, link: bool) -> bool {
        self.update_port(|p| p.link = link)
    }

    /// Records whether port 1's netdev (Ethernet) is up; `true` if the port's state
    /// changed (and then ib_core is told).
    pub(crate) fn set_port_netdev(&self, up: bool) -> bool {
        self.update_port(|p| p.netdev_up = up)
    }

    /// Changes port 1's state and, if it went ACTIVE or left it, tells ib_core under the
    /// lock (so two changes are told in their order).
    fn update_port(&self, change: impl FnOnce(&mut PortState)) -> bool {
        let mut p = self.port.lock();
        let was = p.active();
        change(&mut p);
        let active = p.active();
        if was != active {
            self.port_changes.fetch_add(1, Relaxed);
            if active {
                self.ib_events.port_active(1);
            } else {
                self.ib_events.port_error(1);
            }
        }
        was != active
    }

    /// How many port state changes were seen so far.
    pub(crate) fn port_changes(&self) -> u32 {
        self.port_changes.load(Acquire)
    }

    /// Whether the NIC failed (its `FATAL` event, or an admin queue it stopped serving).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Acquire)
    }

    /// The NIC stopped with a fatal error: every admin command fails from now on, at once,
    /// and waiters wake. `true` the first time.
    fn mark_dead(&self) -> bool {
        let first = !self.dead.xchg(true, Release);
        self.admin.fail_all();
        first
    }

    /// The NIC failed (its `FATAL` event, or an admin queue it stopped serving): it is
    /// dead from now on, every admin command failing at once with `EIO`, and ib_core is
    /// told (`IB_EVENT_DEVICE_FATAL`, to every user context). `print` says why, the first
    /// time only.
    pub(crate) fn failed(&self, print: impl FnOnce()) {
        if self.mark_dead() {
            self.ib_events.device_fatal();
            print();
        }
    }

    /// Runs one admin command (see [`AdminQueue::execute`]) and acts on a failure: a
    /// command the NIC does not answer in time fails alone; a NIC that answers nothing for
    /// 10 s, whose registers read all ones or say it stopped, or that answers out of step,
    /// has failed ([`Nic::failed`]).
    ///
    /// # Errors
    ///
    /// `EIO` at once if the NIC is dead; `ETIMEDOUT` if it did not answer within 5 s (or
    /// every slot of the queue held an unanswered command for 5 s);
    /// `ENOMEM` if it has no room for the object; `EIO` if it died while the command
    /// waited, answered for another command or with another error status (logged, rate
    /// limited). [`Failed::may_have_run`] says whether the NIC may have carried it out.
    pub(crate) fn command(
        &self,
        opcode: u8,
        params: [u8; hw::AQ_SQE_SIZE - 8],
    ) -> Result<u64, Failed> {
        self.command_refusable(opcode, params, None)
    }

    /// As [`Nic::command`], but with `refused`, a `BAD_PARAM` answer is that errno and not
    /// logged: for a command whose refusal depends on state only the NIC knows (a CQ
    /// resized below the completions it holds).
    pub(crate) fn command_refusable(
        &self,
        opcode: u8,
        params: [u8; hw::AQ_SQE_SIZE - 8],
        refused: Option<Error>,
    ) -> Result<u64, Failed> {
        let f = match self.admin.execute(&self.bar, opcode, params) {
            Ok(result) => return Ok(result),
            Err(f) => f,
        };
        let err = match f {
            Failure::NotSent | Failure::DiedWaiting => EIO,
            // This command alone: the NIC answers others (and may answer this one late,
            // when its answer is dropped; what it reaches stays with the caller's retired
            // memory, `may_have_run`).
            // A NIC that no longer answers its registers (all ones: gone from the bus, or
            // dead) or has stopped its queues will answer nothing: failed now.
            Failure::TimedOut | Failure::QueueFull if self.stopped() => {
                self.failed(|| {
                    dev_err!(
                        self.pdev,
                        "admin command {opcode:#x} timed out and the NIC has stopped (STATUS {:#x}): the NIC is treated as failed, its verbs fail with EIO until it is rebound\n",
                        self.bar.read(regs::STATUS).into_raw()
                    )
                });
                ETIMEDOUT
            }
            Failure::TimedOut | Failure::QueueFull => {
                let what = if f == Failure::QueueFull {
                    "found every admin slot unanswered for 5 s"
                } else {
                    "timed out (5 s)"
                };
                self.verbs_log_limit.log(self.pdev, || {
                    dev_warn!(
                        self.pdev,
                        "admin command {opcode:#x} {what}: it fails with ETIMEDOUT, the NIC serves the rest\n"
                    )
                });
                ETIMEDOUT
            }
            Failure::Unresponsive => {
                self.failed(|| {
                    dev_err!(
                        self.pdev,
                        "admin command {opcode:#x} timed out and the NIC answered no command for 10 s: the NIC is treated as failed, its verbs fail with EIO until it is rebound\n"
                    )
                });
                ETIMEDOUT
            }
            Failure::Stray { got } => {
                self.failed(|| {
                    dev_err!(
                        self.pdev,
                        "admin completion for tag {got}, which no command has: the NIC is treated as failed\n"
                    )
                });
                EIO
            }
            // The NIC's table is full: the caller's ENOMEM, not a NIC failure.
            Failure::Status(hw::AQ_NO_RESOURCES) => ENOMEM,
            Failure::Status(hw::AQ_BAD_PARAM) if refused.is_some() => refused.unwrap_or(EINVAL),
            Failure::Status(status) => {
                self.verbs_log_limit.log(self.pdev, || {
                    dev_err!(
                        self.pdev,
                        "admin command {opcode:#x} failed with status {status}\n"
                    )
                });
                EIO
            }
        };
        Err(Failed {
            err,
            may_have_run: f.may_have_run(),
        })
    }

    /// Runs one admin command, for a caller that needs only the errno (see
    /// [`Nic::command`]).
    pub(crate) fn admin(&self, opcode: u8, params: [u8; hw::AQ_SQE_SIZE - 8]) -> Result<u64> {
        self.command(opcode, params).map_err(Error::from)
    }
}

/// An admin command that failed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failed {
    /// The caller's errno.
    pub(crate) err: Error,
    /// The NIC may have carried the command out (it was sent and never answered, or its
    /// answer made no sense): an object it creates may exist on the NIC.
    pub(crate) may_have_run: bool,
}

impl Failed {
    /// An answer the driver cannot use (a number out of range): the NIC says it made the
    /// object, so it may exist.
    pub(crate) fn nonsense() -> Self {
        Self {
            err: EIO,
            may_have_run: true,
        }
    }
}

impl From<Failed> for Error {
    fn from(f: Failed) -> Self {
        f.err
    }
}

/// The PCI command register and its bus-master bit (`include/uapi/linux/pci_regs.h`).
const PCI_COMMAND: usize = 0x04;
const PCI_COMMAND_MASTER: u16 = 0x4;

/// Turns bus mastering off (`pci_clear_master`, which the kernel's Rust PCI binding does not
/// offer): the function can no longer read or write memory.
pub(crate) fn clear_bus_master(pdev: &pci::Device<Bound>) {
    let cfg = pdev.config_space();
    let cmd = cfg.read16(PCI_COMMAND);
    if cmd & PCI_COMMAND_MASTER != 0 {
        cfg.write16(cmd & !PCI_COMMAND_MASTER, PCI_COMMAND);
    }
}

/// The user doorbell pages of BAR2: a lock-free bitmap of [`DB_WORDS`] words, page 0 being
/// the kernel's.
///
/// A page goes back to the pool when its context is gone, unless a queue on it may still
/// exist on the NIC (a destroy the NIC did not acknowledge, a create it did not answer):
/// the NIC takes that queue's doorbells from the page, so whoever maps it next could
/// drive the queue. Such a page is kept out of the pool until the NIC is reset (unbind,
/// which drops the pool with the `Nic`).
pub(crate) struct DoorbellPages {
    /// Page frame number of page 0.
    pfn0: u64,
    /// Pages in use, bit `i % 64` of word `i / 64` for page `i`; page 0 and every bit
    /// beyond `DB_PAGES` set.
    used: [Atomic<u64>; DB_WORDS],
    /// Pages that stay in use when their context goes: a queue on them may be on the NIC.
    kept: [Atomic<u64>; DB_WORDS],
}

/// Words of the doorbell bitmaps.
const DB_WORDS: usize = hw::DB_PAGES.div_ceil(64) as usize;
const _: () = assert!(hw::DB_PAGES >= 1);

/// Word and bit of page `index`, if it is one of BAR2's.
fn db_bit(index: u32) -> Option<(usize, u64)> {
    (index < hw::DB_PAGES).then(|| ((index / 64) as usize, 1u64 << (index % 64)))
}

impl DoorbellPages {
    fn new(pfn0: u64) -> Self {
        let used = core::array::from_fn(|w| {
            // CAST: `w < DB_WORDS`, a few thousand at most.
            let first = w as u32 * 64;
            let valid = hw::DB_PAGES.saturating_sub(first).min(64);
            let beyond = u64::MAX.checked_shl(valid).unwrap_or(0);
            Atomic::new(beyond | u64::from(w == 0))
        });
        Self {
            pfn0,
            used,
            kept: core::array::from_fn(|_| Atomic::new(0)),
        }
    }

    /// A queue on page `index` may still exist on the NIC: the page never goes back to the
    /// pool. Called while the page's context still holds it (its queues go before it).
    pub(crate) fn keep(&self, index: u32) {
        let Some((w, bit)) = db_bit(index) else {
            return;
        };
        let Some(word) = self.kept.get(w) else {
            return;
        };
        let mut cur = word.load(Relaxed);
        while let Err(now) = word.cmpxchg(cur, cur | bit, Release) {
            cur = now;
        }
    }

    /// Takes a free page, the lowest: its index and page frame number.
    ///
    /// # Errors
    ///
    /// `ENOMEM` if every page is in use.
    pub(crate) fn alloc(&self) -> Result<(u32, u64)> {
        for (w, word) in (0u32..).zip(self.used.iter()) {
            let mut cur = word.load(Relaxed);
            while cur != u64::MAX {
                let bit = (!cur).trailing_zeros();
                match word.cmpxchg(cur, cur | 1 << bit, Relaxed) {
                    Ok(_) => {
                        let index = w * 64 + bit;
                        return Ok((index, self.pfn0 + u64::from(index)));
                    }
                    Err(now) => cur = now,
                }
            }
        }
        Err(ENOMEM)
    }

    /// Returns page `index`, which `alloc` gave and nothing maps any more, unless it is
    /// kept (see [`DoorbellPages::keep`]).
    pub(crate) fn free(&self, index: u32) {
        let Some((w, bit)) = db_bit(index).filter(|_| index != 0) else {
            return;
        };
        let (Some(word), Some(kept)) = (self.used.get(w), self.kept.get(w)) else {
            return;
        };
        if kept.load(Acquire) & bit != 0 {
            return;
        }
        let mut cur = word.load(Relaxed);
        while let Err(now) = word.cmpxchg(cur, cur & !bit, Relaxed) {
            cur = now;
        }
    }
}

/// At most `BURST` messages per `WINDOW`, for logging where a misbehaving NIC or user
/// could otherwise flood the log (interrupt handlers, the verbs).
pub(crate) struct RateLimit {
    /// What the messages are about, for the line that counts those suppressed.
    what: &'static str,
    base: Instant<Monotonic>,
    /// The current window's number (time since `base` in windows).
    window: Atomic<i64>,
    /// Messages in the current window.
    count: Atomic<u32>,
    /// Messages suppressed since the last one printed.
    suppressed: Atomic<u32>,
}

impl RateLimit {
    const WINDOW_MS: i64 = 5000;
    const BURST: u32 = 10;

    fn new(what: &'static str) -> Self {
        Self {
            what,
            base: Instant::now(),
            window: Atomic::new(0),
            count: Atomic::new(0),
            suppressed: Atomic::new(0),
        }
    }

    /// `Some(n)` if a message may be printed now (`n` earlier ones were suppressed),
    /// `None` if it must be dropped.
    fn allow(&self) -> Option<u32> {
        let now = self.base.elapsed().as_millis() / Self::WINDOW_MS;
        if self.window.xchg(now, Relaxed) != now {
            self.count.store(0, Relaxed);
        }
        if self.count.fetch_add(1, Relaxed) < Self::BURST {
            Some(self.suppressed.xchg(0, Relaxed))
        } else {
            self.suppressed.fetch_add(1, Relaxed);
            None
        }
    }

    /// Runs `print` if a message may be printed now, after a line counting those
    /// suppressed since the last one.
    pub(crate) fn log(&self, pdev: &pci::Device<Bound>, print: impl FnOnce()) {
        if let Some(suppressed) = self.allow() {
            if suppressed > 0 {
                dev_warn!(pdev, "{suppressed} {} message(s) suppressed\n", self.what);
            }
            print();
        }
    }
}
