// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events to ib_core (`ib_dispatch_event`), and the events of CQs, QPs and
//! SRQs (completion and error handlers), from any context.

use core::ptr::NonNull;

use kernel::{alloc::KVVec, new_spinlock_irq, prelude::*, sync::SpinLockIrq};

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
    /// The device's live CQs, QPs and SRQs by number, for their events.
    #[pin]
    objects: SpinLockIrq<Objects>,
}

/// A live CQ, QP or SRQ, as the sink holds it.
struct Object<O>(NonNull<O>);

// SAFETY: ib_core's CQ, QP and SRQ pointers may be used from any thread; the sink only holds one
// between its object's creation and destruction (see `EventSink::add_cq`).
unsafe impl<O> Send for Object<O> {}

/// The live CQs, QPs and SRQs of a device, by number: what their events reach.
///
/// # Invariants
///
/// Every entry is a live object of the registered device: entries are added when the
/// driver has created the object and removed before it is destroyed.
#[derive(Default)]
struct Objects {
    cqs: KVVec<Option<Object<b::ib_cq>>>,
    qps: KVVec<Option<Object<b::ib_qp>>>,
    srqs: KVVec<Option<Object<b::ib_srq>>>,
}

/// A table of `n` empty slots.
fn slots<O>(n: u32) -> Result<KVVec<Option<Object<O>>>> {
    let n = usize::try_from(n).map_err(|_| EINVAL)?;
    let mut v = KVVec::with_capacity(n, GFP_KERNEL)?;
    for _ in 0..n {
        v.push_within_capacity(None).map_err(|_| ENOMEM)?;
    }
    Ok(v)
}

/// Puts `o` in slot `num` of `table`, which must be free.
fn insert<O>(table: &mut KVVec<Option<Object<O>>>, num: u32, o: NonNull<O>) -> Result {
    let slot = usize::try_from(num)
        .ok()
        .and_then(|i| table.get_mut(i))
        .ok_or(EINVAL)?;
    if slot.is_some() {
        return Err(EEXIST);
    }
    *slot = Some(Object(o));
    Ok(())
}

/// Frees slot `num` of `table`.
fn remove<O>(table: &mut KVVec<Option<Object<O>>>, num: u32) {
    if let Some(slot) = usize::try_from(num).ok().and_then(|i| table.get_mut(i)) {
        *slot = None;
    }
}

/// The object in slot `num` of `table`.
fn lookup<O>(table: &KVVec<Option<Object<O>>>, num: u32) -> Option<NonNull<O>> {
    let i = usize::try_from(num).ok()?;
    table.get(i)?.as_ref().map(|o| o.0)
}

impl EventSink {
    /// A sink attached to nothing yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        // INVARIANT: `None`.
        pin_init!(Self {
            target <- new_spinlock_irq!(None, "ib_event_sink"),
            objects <- new_spinlock_irq!(Objects::default(), "ib_event_objects"),
        })
    }

    /// Makes room for CQs numbered below `cqs`, QPs numbered below `qps` and SRQs
    /// numbered below `srqs`, before the device is registered.
    pub(super) fn size_tables(&self, cqs: u32, qps: u32, srqs: u32) -> Result {
        let (cqs, qps, srqs) = (slots(cqs)?, slots(qps)?, slots(srqs)?);
        let mut o = self.objects.lock();
        o.cqs = cqs;
        o.qps = qps;
        o.srqs = srqs;
        Ok(())
    }

    /// # Safety
    ///
    /// `cq` is a CQ of the attached device that the driver has just created; it is removed
    /// with [`EventSink::remove_cq`] before it is destroyed.
    pub(super) unsafe fn add_cq(&self, num: u32, cq: NonNull<b::ib_cq>) -> Result {
        // INVARIANT: the caller guarantees `cq` is live until removed.
        insert(&mut self.objects.lock().cqs, num, cq)
    }

    /// After this returns, no event reaches CQ `num`.
    pub(super) fn remove_cq(&self, num: u32) {
        remove(&mut self.objects.lock().cqs, num);
    }

    /// # Safety
    ///
    /// As [`EventSink::add_cq`], for QP `qp`.
    pub(super) unsafe fn add_qp(&self, num: u32, qp: NonNull<b::ib_qp>) -> Result {
        // INVARIANT: the caller guarantees `qp` is live until removed.
        insert(&mut self.objects.lock().qps, num, qp)
    }

    /// After this returns, no event reaches QP `num`.
    pub(super) fn remove_qp(&self, num: u32) {
        remove(&mut self.objects.lock().qps, num);
    }

    /// # Safety
    ///
    /// As [`EventSink::add_cq`], for SRQ `srq`.
    pub(super) unsafe fn add_srq(&self, num: u32, srq: NonNull<b::ib_srq>) -> Result {
        // INVARIANT: the caller guarantees `srq` is live until removed.
        insert(&mut self.objects.lock().srqs, num, srq)
    }

    /// After this returns, no event reaches SRQ `num`.
    pub(super) fn remove_srq(&self, num: u32) {
        remove(&mut self.objects.lock().srqs, num);
    }

    /// An event of SRQ `num`. `false` if there is no such SRQ.
    pub(crate) fn srq_event(&self, num: u32, event: SrqEvent) -> bool {
        let o = self.objects.lock();
        let Some(srq) = lookup(&o.srqs, num) else {
            return false;
        };
        let srq = srq.as_ptr();
        // SAFETY: as in `cq_completion`; ib_core's SRQ event handlers queue the event for
        // the owner (uverbs' async event file) and may be called from interrupt context.
        unsafe {
            if let Some(handler) = (*srq).event_handler {
                let mut ev = b::ib_event {
                    device: (*srq).device,
                    event: event.raw(),
                    ..Default::default()
                };
                ev.element.srq = srq;
                handler(&mut ev, (*srq).srq_context);
            }
        }
        true
    }

    /// CQ `num` has a completion its consumer asked to hear of: its completion handler
    /// runs (for a user CQ, the completion channel wakes). `false` if there is no such CQ.
    pub(crate) fn cq_completion(&self, num: u32) -> bool {
        let o = self.objects.lock();
        let Some(cq) = lookup(&o.cqs, num) else {
            return false;
        };
        let cq = cq.as_ptr();
        // SAFETY: the CQ is live while in the table (invariant), and the lock keeps it
        // there during the call; ib_core set its handler and context before create_cq,
        // and completion handlers may run in interrupt context.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
        true
    }

    /// CQ `num` failed (`IB_EVENT_CQ_ERR`). `false` if there is no such CQ.
    pub(crate) fn cq_error(&self, num: u32) -> bool {
        let o = self.objects.lock();
        let Some(cq) = lookup(&o.cqs, num) else {
            return false;
        };
        let cq = cq.as_ptr();
        // SAFETY: as in `cq_completion`; ib_core copies the event.
        unsafe {
            if let Some(handler) = (*cq).event_handler {
                let mut ev = b::ib_event {
                    device: (*cq).device,
                    event: b::ib_event_type_IB_EVENT_CQ_ERR,
                    ..Default::default()
                };
                ev.element.cq = cq;
                handler(&mut ev, (*cq).cq_context);
            }
        }
        true
    }

    /// An event of QP `num` (`IB_EVENT_QP_FATAL`, `SQ_DRAINED`, ...). `false` if there is
    /// no such QP.
    pub(crate) fn qp_event(&self, num: u32, event: QpEvent) -> bool {
        let o = self.objects.lock();
        let Some(qp) = lookup(&o.qps, num) else {
            return false;
        };
        let qp = qp.as_ptr();
        // SAFETY: as in `cq_completion`; ib_core's QP event handlers queue work or copy
        // the event, and may be called from interrupt context.
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                let mut ev = b::ib_event {
                    device: (*qp).device,
                    event: event.raw(),
                    ..Default::default()
                };
                ev.element.qp = qp;
                handler(&mut ev, (*qp).qp_context);
            }
        }
        true
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

/// The asynchronous events of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpEvent {
    /// `IB_EVENT_QP_FATAL`.
    Fatal,
    /// `IB_EVENT_QP_REQ_ERR`.
    RequestError,
    /// `IB_EVENT_QP_ACCESS_ERR`.
    AccessError,
    /// `IB_EVENT_SQ_DRAINED`.
    SqDrained,
    /// `IB_EVENT_COMM_EST`.
    CommEstablished,
    /// `IB_EVENT_QP_LAST_WQE_REACHED`: a QP on an SRQ takes no more of its WQEs.
    LastWqeReached,
}

impl QpEvent {
    fn raw(self) -> b::ib_event_type {
        match self {
            Self::Fatal => b::ib_event_type_IB_EVENT_QP_FATAL,
            Self::RequestError => b::ib_event_type_IB_EVENT_QP_REQ_ERR,
            Self::AccessError => b::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            Self::SqDrained => b::ib_event_type_IB_EVENT_SQ_DRAINED,
            Self::CommEstablished => b::ib_event_type_IB_EVENT_COMM_EST,
            Self::LastWqeReached => b::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
        }
    }
}

/// The asynchronous events of an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrqEvent {
    /// `IB_EVENT_SRQ_LIMIT_REACHED`.
    LimitReached,
}

impl SrqEvent {
    fn raw(self) -> b::ib_event_type {
        match self {
            Self::LimitReached => b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
        }
    }
}
