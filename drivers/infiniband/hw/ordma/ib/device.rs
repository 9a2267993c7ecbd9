// SPDX-License-Identifier: GPL-2.0

//! `ib_device` registration: the safe face of `_ib_alloc_device`, `ib_register_device`,
//! `ib_unregister_device` and `ib_dealloc_device`.

use core::{marker::PhantomData, mem::size_of, ptr::NonNull};

use kernel::{device, prelude::*};

use super::{bindings as b, trampolines};

/// What a port reports, in ib_core's terms (the IB spec's encodings).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortAttr {
    /// `true` if the port is ACTIVE (else DOWN).
    pub(crate) active: bool,
    /// Largest and current MTU, as `enum ib_mtu` codes.
    pub(crate) max_mtu: u8,
    /// Current MTU code.
    pub(crate) active_mtu: u8,
    /// The port's LID.
    pub(crate) lid: u16,
    /// The subnet manager's LID.
    pub(crate) sm_lid: u16,
    /// Largest message size.
    pub(crate) max_msg_sz: u32,
    /// Link width and speed codes.
    pub(crate) width: u8,
    /// Link speed code.
    pub(crate) speed: u8,
}

/// What the device reports, in ib_core's terms.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeviceAttr {
    /// Firmware version, `major << 32 | minor << 16 | patch`.
    pub(crate) fw_ver: u64,
    /// Supported page sizes.
    pub(crate) page_size_cap: u64,
    /// PCI vendor and part IDs, hardware version.
    pub(crate) vendor_id: u32,
    /// Vendor part ID.
    pub(crate) vendor_part_id: u32,
    /// Hardware version.
    pub(crate) hw_ver: u32,
    /// Object limits.
    pub(crate) max_qp: u32,
    /// Work requests per QP.
    pub(crate) max_qp_wr: u32,
    /// Scatter/gather entries per work request.
    pub(crate) max_sge: u32,
    /// CQs.
    pub(crate) max_cq: u32,
    /// Entries per CQ.
    pub(crate) max_cqe: u32,
    /// MRs.
    pub(crate) max_mr: u32,
    /// PDs.
    pub(crate) max_pd: u32,
}

/// A doorbell page handed to a user context.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DoorbellPage {
    /// Its index in the doorbell BAR.
    pub(crate) index: u32,
    /// Its page frame number (physical address >> `PAGE_SHIFT`).
    pub(crate) pfn: u64,
}

/// The verbs a driver implements; ib_core calls them through [`trampolines`].
pub(crate) trait Verbs: Sync {
    /// Device attributes (`query_device`).
    fn query_device(&self) -> Result<DeviceAttr>;
    /// Attributes of `port` (1-based; ib_core checks the range).
    fn query_port(&self, port: u32) -> Result<PortAttr>;
    /// The port's GUID, for GID 0 (fe80::/64 + GUID).
    fn port_guid(&self, port: u32) -> u64;
    /// Takes a free doorbell page for a new user context (`ENOMEM` if none is left).
    fn alloc_doorbell(&self) -> Result<DoorbellPage>;
    /// Returns doorbell page `index`; nothing maps it any more.
    fn free_doorbell(&self, index: u32);
    /// Allocates a PD on the NIC: its number.
    fn alloc_pd(&self) -> Result<u32>;
    /// Frees PD `pdn` on the NIC. Cannot fail from ib_core's view: a NIC that does not
    /// answer is the driver's to report (it is reset when unbound).
    fn dealloc_pd(&self, pdn: u32);
}

/// An `ib_device` followed by the driver's data: ib_core allocates it in one piece
/// (`_ib_alloc_device` with this size) and hands the `ib_device` pointer to every callback.
#[repr(C)]
pub(super) struct IbDevice<T> {
    pub(super) ib: b::ib_device,
    pub(super) data: T,
}

/// A registered `ib_device` named `ordma%d`; dropping it unregisters (waiting for every
/// user ib_core knows of) and frees it.
///
/// # Invariants
///
/// `raw` points to an `IbDevice<T>` allocated by `_ib_alloc_device`, whose `data` is
/// initialised and whose `ib` is registered, until `drop`.
pub(crate) struct Registration<'a, T: Verbs> {
    raw: NonNull<IbDevice<T>>,
    _p: PhantomData<&'a T>,
}

// SAFETY: ib_core serialises registration and unregistration; the verbs run concurrently
// and `T: Sync` makes sharing `T` among them sound. Ownership may move between threads.
unsafe impl<T: Verbs + Send> Send for Registration<'_, T> {}
// SAFETY: `&Registration` gives no access to `T` beyond `&T`, and `T: Sync`.
unsafe impl<T: Verbs> Sync for Registration<'_, T> {}

impl<'a, T: Verbs + 'a> Registration<'a, T> {
    /// Allocates and registers an InfiniBand CA with one port, DMA through `parent`.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, or the error of `ib_register_device` (logged by ib_core).
    pub(crate) fn new(
        parent: &'a device::Device<device::Bound>,
        node_guid: u64,
        data: T,
    ) -> Result<Self> {
        // SAFETY: `init_net` is the initial network namespace, a static that outlives us;
        // the size covers `IbDevice<T>`, whose first field is the `ib_device`.
        let ib = unsafe {
            b::_ib_alloc_device(
                size_of::<IbDevice<T>>(),
                core::ptr::addr_of_mut!(b::init_net),
            )
        };
        let raw = NonNull::new(ib.cast::<IbDevice<T>>()).ok_or(ENOMEM)?;
        let p = raw.as_ptr();
        // SAFETY: `p` is a fresh, exclusively owned allocation of the right size and
        // alignment (kmalloc alignment covers `T`'s); `data` is written before any callback
        // can run (registration below is what makes it reachable).
        unsafe {
            core::ptr::addr_of_mut!((*p).data).write(data);
            // CAST: the node type codes fit the `u8` field.
            (*p).ib.node_type = b::RDMA_NODE_IB_CA as u8;
            (*p).ib.phys_port_cnt = 1;
            (*p).ib.num_comp_vectors = 1;
            (*p).ib.node_guid = node_guid.to_be();
            let ops = trampolines::ops::<T>();
            b::ib_set_device_ops(&mut (*p).ib, &ops);
        }
        // `device::Device` is `#[repr(transparent)]` over `struct device`.
        let dma_device = core::ptr::from_ref(parent).cast::<b::device>().cast_mut();
        // The PCI function is the parent in sysfs too (`/sys/class/infiniband/ordma0/device`:
        // libibverbs matches providers on its modalias).
        // SAFETY: `p` is still exclusively ours (not registered).
        unsafe { (*p).ib.__bindgen_anon_1.dev.parent = dma_device };
        // SAFETY: the device is allocated and set up; `dma_device` is a bound device that
        // outlives the registration (lifetime `'a`). The name is a NUL-terminated literal.
        let ret =
            unsafe { b::ib_register_device(&mut (*p).ib, c"ordma%d".as_char_ptr(), dma_device) };
        if ret != 0 {
            // SAFETY: not registered; drop the data we wrote, then free the device.
            unsafe {
                core::ptr::drop_in_place(core::ptr::addr_of_mut!((*p).data));
                b::ib_dealloc_device(&mut (*p).ib);
            }
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: allocated, data initialised, registered.
        Ok(Self {
            raw,
            _p: PhantomData,
        })
    }

    /// The name ib_core gave the device (`ordma0`, ...).
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: by the type invariant the device is registered; its name is a
        // NUL-terminated string in `ib.dev` that lives as long as the device.
        unsafe { CStr::from_char_ptr((*self.raw.as_ptr()).ib.name.as_ptr().cast()) }
    }
}

impl<T: Verbs> Drop for Registration<'_, T> {
    fn drop(&mut self) {
        let p = self.raw.as_ptr();
        // SAFETY: by the type invariant the device is registered. `ib_unregister_device`
        // returns once no callback runs or can start; then `data` is ours to drop and the
        // device ours to free.
        unsafe {
            b::ib_unregister_device(&mut (*p).ib);
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*p).data));
            b::ib_dealloc_device(&mut (*p).ib);
        }
    }
}
