// SPDX-License-Identifier: GPL-2.0

//! RoCE ports and their netdevs: a netdevice notifier per device pairs each RoCE port with
//! the netdev whose permanent MAC is the port's (`ib_device_set_netdev`, as erdma pairs
//! its RDMA function with a virtio-net device), unpairs it when that netdev unregisters,
//! and tells the driver of the paired netdev's state ([`Driver::netdev_changed`]).
//!
//! The notifier is registered before the `ib_device` (registering replays
//! `NETDEV_REGISTER` and `NETDEV_UP` of every netdev there is, so a netdev that exists
//! already is paired before ib_core's registration scans the ports' netdevs for their
//! GIDs) and unregistered after it (which replays `NETDEV_DOWN` and `NETDEV_UNREGISTER`:
//! the ports are unpaired). A netdev that registers later, or again (a driver rebound, a
//! move between namespaces), is paired on its `NETDEV_REGISTER`; ib_core's RoCE GID code
//! adds its addresses when it comes up and as they change.

use kernel::{ffi, prelude::*, types::Opaque};

use super::{bindings as b, device::IbDevice, driver::Driver};

/// A device's netdevice notifier, inside its `IbDevice` (which ib_core allocated: it
/// never moves).
#[repr(transparent)]
pub(super) struct Notifier(Opaque<b::notifier_block>);

impl Notifier {
    /// A notifier for the devices of driver `T`, not registered.
    pub(super) fn new<T: Driver>() -> Self {
        Self(Opaque::new(b::notifier_block {
            notifier_call: Some(event::<T>),
            ..Default::default()
        }))
    }

    /// Registers the notifier (replaying the netdevs there are). Takes RTNL.
    ///
    /// # Safety
    ///
    /// `self` is the `netdevs` field of an `IbDevice<T>` (`T` the driver `new` was given)
    /// whose `ib_device` has its ops and port count set and whose data is initialised; it
    /// stays in place, with its data, until [`Notifier::unregister`].
    pub(super) unsafe fn register(&self) -> Result {
        // SAFETY: the block is valid and stays so until unregistered (the caller).
        kernel::error::to_result(unsafe { b::register_netdevice_notifier(self.0.get()) })
    }

    /// Unregisters the notifier (replaying the netdevs' removal); when it returns, no
    /// callback runs or will. Takes RTNL.
    ///
    /// # Safety
    ///
    /// Registered with [`Notifier::register`], not unregistered since.
    pub(super) unsafe fn unregister(&self) {
        // SAFETY: registered (the caller). The call cannot fail for a registered block.
        unsafe { b::unregister_netdevice_notifier(self.0.get()) };
    }
}

/// Whether `ndev` is the netdev paired with `port` of `ib`.
///
/// # Safety
///
/// `ib` is a live `ib_device` with its port count set; `ndev` a live netdev.
unsafe fn is_paired(ib: *mut b::ib_device, port: u32, ndev: *mut b::net_device) -> bool {
    // SAFETY: as the caller says; ib_core returns the paired netdev with a reference
    // (or null), which is dropped here: it is only compared.
    unsafe {
        let cur = b::ib_device_get_netdev(ib, port);
        b::rust_ib_helper_dev_put(cur);
        cur == ndev
    }
}

/// The notifier's callback: called under RTNL, in process context, for each event of
/// each netdev.
///
/// # Safety
///
/// `nb` is the notifier of a live `IbDevice<T>` ([`Notifier::register`]'s contract), `ptr`
/// the event's `netdev_notifier_info`.
unsafe extern "C" fn event<T: Driver>(
    nb: *mut b::notifier_block,
    event: ffi::c_ulong,
    ptr: *mut ffi::c_void,
) -> ffi::c_int {
    // CAST: the notifier is the `netdevs` field of an `IbDevice<T>` (`Opaque` and the
    // `#[repr(transparent)]` wrapper have the block's address).
    // SAFETY: the containing device is live while the notifier is registered (the
    // contract of `register`); its data is initialised.
    let (dev, ndev) = unsafe {
        (
            nb.byte_sub(core::mem::offset_of!(IbDevice<T>, netdevs))
                .cast::<IbDevice<T>>(),
            b::rust_ib_helper_netdev_notifier_info_to_dev(ptr),
        )
    };
    // SAFETY: as above.
    let (ib, d) = unsafe { ((*dev).ib.get(), &(*dev).data) };
    // CAST: the `enum netdev_cmd` values fit an `unsigned long` and are compared as such.
    let is = |cmd: b::netdev_cmd| event == cmd as ffi::c_ulong;
    for (i, desc) in d.ports().iter().enumerate() {
        let Some(mac) = desc.protocol.mac() else {
            continue;
        };
        let Ok(port) = u32::try_from(i + 1) else {
            break;
        };
        // SAFETY: `ndev` is the event's netdev, live for the call; `mac` is 6 bytes.
        if !unsafe { b::rust_ib_helper_netdev_has_perm_addr(ndev, mac.as_ptr()) } {
            continue;
        }
        // SAFETY: `ndev` is live for the call, RTNL held.
        let up = || unsafe { b::rust_ib_helper_netdev_up(ndev) };
        // SAFETY: `ib` is live with its port count set (registered or about to be), and
        // `ndev` for the call.
        let paired = unsafe { is_paired(ib, port, ndev) };
        if is(b::netdev_cmd_NETDEV_REGISTER) {
            // SAFETY: as for `is_paired`.
            let cur = unsafe { b::ib_device_get_netdev(ib, port) };
            // SAFETY: a reference ib_core took for us (or null).
            unsafe { b::rust_ib_helper_dev_put(cur) };
            // The first netdev of the MAC keeps the port.
            if !cur.is_null() && cur != ndev {
                continue;
            }
            // SAFETY: as for `is_paired`; ib_core takes its own reference on `ndev`.
            let r = unsafe { b::ib_device_set_netdev(ib, ndev, port) };
            if r != 0 {
                pr_warn!("port {port}: pairing with its netdev failed ({r})\n");
                continue;
            }
            d.netdev_changed(port, up());
        } else if is(b::netdev_cmd_NETDEV_UNREGISTER) {
            if paired {
                // SAFETY: as for `is_paired`; ib_core drops its reference.
                unsafe { b::ib_device_set_netdev(ib, core::ptr::null_mut(), port) };
                d.netdev_changed(port, false);
            }
        } else if (is(b::netdev_cmd_NETDEV_UP)
            || is(b::netdev_cmd_NETDEV_DOWN)
            || is(b::netdev_cmd_NETDEV_CHANGE))
            && paired
        {
            d.netdev_changed(port, up());
        }
    }
    // CAST: `NOTIFY_DONE` is 0.
    b::NOTIFY_DONE as ffi::c_int
}
