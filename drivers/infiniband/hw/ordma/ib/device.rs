// SPDX-License-Identifier: GPL-2.0

//! `ib_device` registration: the safe face of `_ib_alloc_device`, `ib_register_device`,
//! `ib_unregister_device` and `ib_dealloc_device`.

use core::{marker::PhantomData, mem::size_of, ptr::NonNull};

use kernel::{device, prelude::*, sync::Arc, types::Opaque};

use super::{bindings as b, driver::Driver, event::EventSink, netdev::Notifier, trampolines};

/// An `ib_device` followed by the driver's data: ib_core allocates it in one piece
/// (`_ib_alloc_device` with this size) and hands the `ib_device` pointer to every callback.
/// The `ib_device` is ib_core's, which changes it while the device lives: only reached
/// through raw pointers.
#[repr(C)]
pub(super) struct IbDevice<T> {
    pub(super) ib: Opaque<b::ib_device>,
    pub(super) data: T,
    /// Where the device's events go (the driver's sink, attached while registered).
    pub(super) events: Arc<EventSink>,
    /// The netdevice notifier that pairs the device's RoCE ports with their netdevs,
    /// registered (before the `ib_device`, unregistered after it) if it has one.
    pub(super) netdevs: Notifier,
}

/// The driver data behind an `ib_device` ib_core hands us.
///
/// # Safety
///
/// `ib` must be the `ib` field of a live `IbDevice<T>` (every `ib_device` whose ops are
/// `ops::<T>()` is one: `Registration::new` allocates it so) with initialised `data`, for
/// `'a`.
pub(super) unsafe fn data<'a, T: Driver>(ib: *mut b::ib_device) -> &'a T {
    // SAFETY: `ib` is the first field of a `#[repr(C)]` `IbDevice<T>` (caller), so the cast
    // gives the containing struct, whose `data` is initialised and outlives the callback.
    unsafe { &(*ib.cast::<IbDevice<T>>()).data }
}

/// The event sink of an `ib_device` ib_core hands us.
///
/// # Safety
///
/// As for [`data`].
pub(super) unsafe fn events<'a, T: Driver>(ib: *mut b::ib_device) -> &'a EventSink {
    // SAFETY: as in `data`: `events` is initialised with `data`.
    unsafe { &(*ib.cast::<IbDevice<T>>()).events }
}

/// A registered `ib_device` named after [`Driver::NAME`]; dropping it unregisters (waiting for every
/// user ib_core knows of, and destroying what they still hold) and frees it.
///
/// # Invariants
///
/// `raw` points to an `IbDevice<T>` allocated by `_ib_alloc_device`, whose `data` is
/// initialised and whose `ib` is registered, until `drop`; `events` is attached to it; its
/// `netdevs` notifier is registered if `roce`.
pub(crate) struct Registration<'a, T: Driver> {
    raw: NonNull<IbDevice<T>>,
    events: Arc<EventSink>,
    roce: bool,
    _p: PhantomData<&'a T>,
}

// SAFETY: ib_core serialises registration and unregistration; the verbs run concurrently
// and `T: Sync` makes sharing `T` among them sound. Ownership may move between threads.
unsafe impl<T: Driver + Send> Send for Registration<'_, T> {}
// SAFETY: `&Registration` gives no access to `T` beyond `&T`, and `T: Sync`.
unsafe impl<T: Driver> Sync for Registration<'_, T> {}

impl<'a, T: Driver + 'a> Registration<'a, T> {
    /// Allocates and registers a device of driver `T` (its node type and name from `T`'s
    /// constants, its ports from `data`), DMA through `parent`, and attaches `events` to it.
    /// If it has RoCE ports, it pairs them with their netdevs first ([`super::netdev`]).
    ///
    /// # Errors
    ///
    /// `EINVAL` for no port or more than 255, or a RoCE port of a driver without the RoCE
    /// verbs (`add_gid`, `del_gid`, `netdev_changed`); `ENOMEM`; the error of registering
    /// the netdevice notifier or of `ib_register_device` (logged by ib_core).
    pub(crate) fn new(
        parent: &'a device::Device<device::Bound>,
        node_guid: u64,
        data: T,
        events: Arc<EventSink>,
    ) -> Result<Self> {
        const {
            assert!(core::mem::align_of::<IbDevice<T>>() <= trampolines::KMALLOC_MIN_ALIGN);
            assert!(T::NUM_COMP_VECTORS >= 1 && T::NUM_COMP_VECTORS <= i32::MAX as u32);
        };
        let ports = data.ports();
        let nports = u8::try_from(ports.len()).map_err(|_| EINVAL)?;
        let roce = ports.iter().any(|p| p.protocol.mac().is_some());
        if nports == 0 || (roce && !(T::HAS_ADD_GID && T::HAS_DEL_GID && T::HAS_NETDEV_CHANGED)) {
            return Err(EINVAL);
        }
        // Room in the event tables for every CQ, QP and SRQ number the driver hands out.
        let attr = data.query_device()?;
        events.size_tables(attr.cq_num_limit, attr.qp_num_limit, attr.srq_num_limit)?;
        // SAFETY: `init_net` is the initial network namespace, a static that outlives us;
        // the size covers `IbDevice<T>`, whose first field is the `ib_device`.
        let ib = unsafe { b::_ib_alloc_device(size_of::<IbDevice<T>>(), &raw mut b::init_net) };
        let raw = NonNull::new(ib.cast::<IbDevice<T>>()).ok_or(ENOMEM)?;
        let p = raw.as_ptr();
        // CAST: `device::Device` is `#[repr(transparent)]` over an `Opaque<struct device>`,
        // so C may use it through a mutable pointer.
        let dma_device = core::ptr::from_ref(parent).cast::<b::device>().cast_mut();
        // SAFETY: `p` is a fresh, exclusively owned allocation of the right size and
        // alignment (asserted above, at compile time); `data` is written
        // before any callback can run (registration below is what makes it reachable).
        unsafe {
            (&raw mut (*p).data).write(data);
            (&raw mut (*p).events).write(events.clone());
            (&raw mut (*p).netdevs).write(Notifier::new::<T>());
            let ib = (*p).ib.get();
            (*ib).node_type = T::NODE_TYPE.raw();
            (*ib).phys_port_cnt = nports.into();
            // CAST: checked above, at compile time, to fit.
            (*ib).num_comp_vectors = T::NUM_COMP_VECTORS as i32;
            (*ib).node_guid = node_guid.to_be();
            let ops = trampolines::ops::<T>();
            b::ib_set_device_ops(ib, &ops);
            // The parent device is the parent in sysfs too (`/sys/class/infiniband/<name>/
            // device`: libibverbs matches providers on its modalias).
            (*ib).__bindgen_anon_1.dev.parent = dma_device;
        }
        // SAFETY: not registered; drop what we wrote, then free the device.
        let free = || unsafe {
            core::ptr::drop_in_place(&raw mut (*p).data);
            core::ptr::drop_in_place(&raw mut (*p).events);
            b::ib_dealloc_device((*p).ib.get());
        };
        if roce {
            // SAFETY: `netdevs` is in the device, whose ops, port count and data are set;
            // it is unregistered before the data is dropped (below, and in `drop`).
            if let Err(e) = unsafe { (*p).netdevs.register() } {
                free();
                return Err(e);
            }
        }
        // SAFETY: the device is allocated and set up; `dma_device` is a bound device that
        // outlives the registration (lifetime `'a`). The name is a NUL-terminated `'static`
        // string (ib_core copies it).
        let ret =
            unsafe { b::ib_register_device((*p).ib.get(), T::NAME.as_char_ptr(), dma_device) };
        if ret != 0 {
            if roce {
                // SAFETY: registered just above.
                unsafe { (*p).netdevs.unregister() };
            }
            free();
            return Err(Error::from_errno(ret));
        }
        // SAFETY: registered now, and detached in `drop` before it is unregistered.
        unsafe { events.attach(raw.cast()) };
        // INVARIANT: allocated, data initialised, registered, `events` attached, the
        // notifier registered if `roce`.
        Ok(Self {
            raw,
            events,
            roce,
            _p: PhantomData,
        })
    }

    /// The name ib_core gave the device ([`Driver::NAME`] with its number).
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: by the type invariant the device is registered; its name is a
        // NUL-terminated string in `ib.dev` that lives as long as the device.
        unsafe { CStr::from_char_ptr((*(*self.raw.as_ptr()).ib.get()).name.as_ptr().cast()) }
    }
}

impl<T: Driver> Drop for Registration<'_, T> {
    fn drop(&mut self) {
        self.events.detach();
        let p = self.raw.as_ptr();
        // SAFETY: by the type invariant the device is registered. `ib_unregister_device`
        // returns once no callback runs or can start, and unregistering the notifier once
        // its callback does not run (it unpairs the ports); then `data` is ours to drop and
        // the device ours to free.
        unsafe {
            b::ib_unregister_device((*p).ib.get());
            if self.roce {
                (*p).netdevs.unregister();
            }
            core::ptr::drop_in_place(&raw mut (*p).data);
            core::ptr::drop_in_place(&raw mut (*p).events);
            b::ib_dealloc_device((*p).ib.get());
        }
    }
}
