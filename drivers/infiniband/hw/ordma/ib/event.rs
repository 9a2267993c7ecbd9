// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events to ib_core (`ib_dispatch_event`), from any context.

use core::ptr::NonNull;

use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq};

use super::bindings as b;

/// A registered `ib_device`, as the sink holds it.
struct Target(NonNull<b::ib_device>);

// SAFETY: an `ib_device` pointer may be used from any thread; the sink only holds it while
// the device is registered (see `EventSink`).
unsafe impl Send for Target {}

/// Where a driver's interrupt handlers send the device's asynchronous events.
///
/// The driver creates one before it registers its device and hands it to
/// [`Registration::new`](super::Registration::new), which attaches it once the device is
/// registered and detaches it before unregistering. In between, events reach ib_core (its
/// port cache, uverbs' async event files, kernel clients); before and after, they are
/// dropped. `ib_dispatch_event` only queues work (`GFP_ATOMIC`), so any context may call.
///
/// # Invariants
///
/// `target`, when `Some`, is a registered `ib_device`.
#[pin_data]
pub(crate) struct EventSink {
    #[pin]
    target: SpinLockIrq<Option<Target>>,
}

impl EventSink {
    /// A sink attached to nothing yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        // INVARIANT: `None`.
        pin_init!(Self {
            target <- new_spinlock_irq!(None, "ordma_ib_events"),
        })
    }

    /// # Safety
    ///
    /// `dev` is registered, and stays so until [`EventSink::detach`].
    pub(super) unsafe fn attach(&self, dev: NonNull<b::ib_device>) {
        // INVARIANT: the caller guarantees `dev` is registered until `detach`.
        *self.target.lock() = Some(Target(dev));
    }

    /// After this returns, no event reaches the device.
    pub(super) fn detach(&self) {
        *self.target.lock() = None;
    }

    fn dispatch(&self, event: b::ib_event_type, port: u32) -> bool {
        let target = self.target.lock();
        let Some(t) = target.as_ref() else {
            return false;
        };
        let mut ev = b::ib_event {
            device: t.0.as_ptr(),
            event,
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: the device is registered while attached (invariant), and the lock keeps it
        // attached during the call; `ev` is valid for the call (ib_core copies it).
        unsafe { b::ib_dispatch_event(&ev) };
        true
    }

    /// Port `port` went ACTIVE (`IB_EVENT_PORT_ACTIVE`). `false` if no device is attached.
    pub(crate) fn port_active(&self, port: u32) -> bool {
        self.dispatch(b::ib_event_type_IB_EVENT_PORT_ACTIVE, port)
    }

    /// Port `port` left ACTIVE (`IB_EVENT_PORT_ERR`). `false` if no device is attached.
    pub(crate) fn port_error(&self, port: u32) -> bool {
        self.dispatch(b::ib_event_type_IB_EVENT_PORT_ERR, port)
    }

    /// The device stopped working (`IB_EVENT_DEVICE_FATAL`). `false` if no device is
    /// attached.
    pub(crate) fn device_fatal(&self) -> bool {
        self.dispatch(b::ib_event_type_IB_EVENT_DEVICE_FATAL, 0)
    }
}
