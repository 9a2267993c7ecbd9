//! One NIC as the threads of the model share it.
//!
//! The vfio-user loop (register accesses, DMA_MAP, SET_IRQS), the control channel, the
//! timers and the wire between NICs ([`crate::wire`]) all act on the same [`Device`] through
//! an `Arc`:
//!
//! - the [`Nic`] sits in a mutex; every action on it (a register write, a link change, a
//!   timer) takes the lock, so the engine itself stays plain single-threaded code;
//! - guest memory is a [`GuestRam`]: lock-free snapshots for DMA, updates by the vfio-user
//!   loop only;
//! - the MSI-X eventfds ([`Msix`]) are behind their own lock, so an interrupt can be raised
//!   from any thread.
//!
//! The NIC's timers (RNR retries, the transport timers of QPs on the wire) run on a thread
//! of their own, [`Device::spawn_timers`]: it ticks the NIC every millisecond while some QP
//! waits, and only looks every [`TIMER_IDLE`] otherwise.
//!
//! Lock order: the NIC, then (briefly, inside `raise`) the MSI-X table. Nothing takes the NIC
//! lock while holding the MSI-X lock.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use crate::engine::{Interrupts, Nic};
use crate::mem::{GuestRam, Snapshot};

/// The MSI-X eventfds QEMU gave us, by vector.
#[derive(Default)]
pub struct Msix {
    fds: RwLock<Vec<Option<File>>>,
}

impl Msix {
    /// Sets (or, with `None`, clears) vector `vector`'s eventfd; vectors beyond `max` are
    /// ignored. Returns whether the vector exists.
    pub fn set(&self, vector: usize, max: usize, fd: Option<File>) -> bool {
        let mut fds = self.fds.write().unwrap_or_else(PoisonError::into_inner);
        if fds.len() < max {
            fds.resize_with(max, || None);
        }
        match fds.get_mut(vector).filter(|_| vector < max) {
            Some(slot) => {
                *slot = fd;
                true
            }
            None => false,
        }
    }

    /// Clears every vector (MSI-X disabled).
    pub fn clear(&self) {
        let mut fds = self.fds.write().unwrap_or_else(PoisonError::into_inner);
        fds.iter_mut().for_each(|f| *f = None);
    }
}

impl Interrupts for Msix {
    fn raise(&self, vector: u16) {
        let fds = self.fds.read().unwrap_or_else(PoisonError::into_inner);
        match fds.get(usize::from(vector)).and_then(Option::as_ref) {
            Some(mut fd) => {
                if let Err(e) = fd.write_all(&1u64.to_ne_bytes()) {
                    warn!(vector, %e, "MSI-X eventfd write failed");
                }
                debug!(vector, "MSI-X");
            }
            None => debug!(vector, "MSI-X vector not set up: interrupt dropped"),
        }
    }
}

/// One NIC, shared by the model's threads.
pub struct Device {
    nic: Mutex<Nic>,
    /// Guest memory mapped for DMA.
    pub mem: GuestRam,
    /// The MSI-X eventfds.
    pub msix: Msix,
}

/// A locked NIC together with what its actions need: a memory snapshot and the interrupts.
pub struct Locked<'a> {
    /// The NIC, locked.
    pub nic: MutexGuard<'a, Nic>,
    /// Guest memory as mapped when the lock was taken.
    pub mem: Snapshot,
    /// Where interrupts go.
    pub irq: &'a Msix,
}

impl Drop for Locked<'_> {
    /// The action on the NIC ended: the frames it sent leave now, together
    /// ([`crate::engine::wire::Wire::flush`]), before the lock is released.
    fn drop(&mut self) {
        self.nic.flush_wire();
    }
}

impl Device {
    /// A device for `nic` with `mem` mapped.
    pub fn new(nic: Nic, mem: GuestRam) -> Self {
        Self {
            nic: Mutex::new(nic),
            mem,
            msix: Msix::default(),
        }
    }

    /// Locks the NIC. A thread that panicked while holding it cannot have left the engine
    /// half-way (it has no panicking paths), so a poisoned lock is used as it is.
    pub fn lock(&self) -> Locked<'_> {
        Locked {
            nic: self.nic.lock().unwrap_or_else(PoisonError::into_inner),
            mem: self.mem.snapshot(),
            irq: &self.msix,
        }
    }
}

/// How often the timer thread looks while no QP waits.
pub const TIMER_IDLE: Duration = Duration::from_millis(10);
/// How often it ticks the NIC while some QP waits (RNR timers start at 10 µs; a
/// millisecond is the model's resolution).
pub const TIMER_BUSY: Duration = Duration::from_millis(1);

impl Device {
    /// Starts the thread of the NIC's timers; it ends when the device is dropped.
    ///
    /// # Errors
    ///
    /// The thread could not be created.
    pub fn spawn_timers(dev: &Arc<Self>) -> std::io::Result<JoinHandle<()>> {
        let weak: Weak<Self> = Arc::downgrade(dev);
        std::thread::Builder::new()
            .name("ordma-timers".into())
            .spawn(move || loop {
                let Some(dev) = weak.upgrade() else {
                    return;
                };
                let busy = {
                    let mut l = dev.lock();
                    if l.nic.timers_pending() {
                        l.nic.tick(Instant::now(), &*l.mem, l.irq);
                    }
                    l.nic.timers_pending()
                };
                drop(dev);
                std::thread::sleep(if busy { TIMER_BUSY } else { TIMER_IDLE });
            })
    }
}
