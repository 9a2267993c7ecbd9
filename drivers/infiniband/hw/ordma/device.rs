// SPDX-License-Identifier: GPL-2.0

//! One bound ordma NIC: bring-up (reset, version, queues, MSI-X, first admin command) and
//! teardown.

use kernel::{
    device::{Bound, Core},
    dma::{Coherent, Device as _, DmaMask},
    io::{poll::read_poll_timeout, Io},
    irq, new_mutex,
    page::PAGE_SHIFT,
    pci,
    prelude::*,
    sync::{atomic::Atomic, Mutex},
    time::Delta,
};

use crate::{
    admin::{AdminIrq, AdminQueue, AQ_LOG_DEPTH},
    driver::Bar0,
    event::{EventQueue, EQ_LOG_DEPTH},
    hw, ib,
    verbs::OrdmaVerbs,
};

/// Resets the NIC and waits for `STATUS.READY`.
fn reset(pdev: &pci::Device<Bound>, bar: &Bar0<'_>) -> Result {
    bar.write32(hw::CONTROL_RESET, hw::REG_CONTROL);
    read_poll_timeout(
        || Ok(bar.read32(hw::REG_STATUS)),
        |s| s & hw::STATUS_READY != 0 && *s != u32::MAX,
        Delta::from_millis(1),
        Delta::from_secs(2),
    )
    .map(|_| ())
    .inspect_err(|_| dev_err!(pdev, "the NIC did not come out of reset\n"))
}

/// BAR2, the doorbell pages.
type Bar2<'bound> = pci::Bar<'bound, { hw::BAR2_SIZE }>;

/// A bound NIC. Fields drop in declaration order: the `ib_device` first (`unbind` already
/// unregistered it), the interrupts (the event queue's ring goes with its handler), then
/// the vectors, then the admin DMA memory (the NIC was reset in `unbind`, so it no longer
/// uses any of it), then the BARs.
#[pin_data]
pub(crate) struct OrdmaDevice<'bound> {
    /// The `ib_device`, registered last in probe and unregistered first, in `unbind`,
    /// while the NIC still runs (disassociated users free their PDs through it).
    #[pin]
    ib: Mutex<Option<ib::Registration<'bound, OrdmaVerbs<'bound>>>>,
    #[pin]
    event_irq: irq::Registration<'bound, EventQueue<'bound>>,
    #[pin]
    admin_irq: irq::Registration<'bound, AdminIrq>,
    _vectors: pci::IrqVectorRegistration<'bound>,
    #[pin]
    admin: AdminQueue,
    /// Mapped for its reservation: user contexts map its pages, the kernel none yet.
    _db_bar: Bar2<'bound>,
    bar: Bar0<'bound>,
    pdev: &'bound pci::Device<Bound>,
}

impl<'bound> OrdmaDevice<'bound> {
    /// Brings the NIC up; on any failure everything done so far is undone.
    pub(crate) fn new(pdev: &'bound pci::Device<Core<'_>>) -> impl PinInit<Self, Error> + 'bound {
        // What needs the `Core` context runs now; the rest only needs the bound device.
        let prepared = Self::prepare(pdev);
        let bound: &'bound pci::Device<Bound> = pdev;
        pin_init::pin_init_scope(move || {
            prepared?;
            let pdev = bound;
            let bar = pdev.iomap_region_sized::<{ hw::BAR0_SIZE }>(0, c"ordma")?;
            let version = bar.read32(hw::REG_VERSION);
            let (major, minor) = (hw::version_major(version), hw::version_minor(version));
            if version == u32::MAX {
                dev_err!(pdev, "the NIC does not respond (reads return all ones)\n");
                return Err(ENODEV);
            }
            if major != hw::version_major(hw::VERSION) {
                dev_err!(
                    pdev,
                    "NIC interface version {major}.{minor} is not supported (this driver speaks {}.x)\n",
                    hw::version_major(hw::VERSION)
                );
                return Err(ENODEV);
            }
            reset(pdev, &bar)?;
            let db_bar = pdev.iomap_region_sized::<{ hw::BAR2_SIZE }>(2, c"ordma-db")?;
            let db_pfn = pdev.resource_start(2)? >> PAGE_SHIFT;
            let dev: &'bound kernel::device::Device<Bound> = pdev.as_ref();
            let vectors = pdev.alloc_irq_vectors(
                u32::from(hw::NUM_VECTORS),
                u32::from(hw::NUM_VECTORS),
                pci::IrqTypes::default().with(pci::IrqType::MsiX),
            )?;
            Ok(try_pin_init!(Self {
                bar,
                _db_bar: db_bar,
                pdev: bound,
                _vectors: vectors,
                admin <- AdminQueue::new(dev),
                // SAFETY: `_vectors` is initialised before this expression, lives at a pinned,
                // stable address and is dropped after `admin_irq` (field order). The
                // registration is never leaked.
                admin_irq <- unsafe {
                    irq::Registration::new(
                        (*core::ptr::from_ref(_vectors)).index(usize::from(hw::VECTOR_ADMIN))?.into(),
                        irq::Flags::TRIGGER_NONE,
                        c"ordma-admin",
                        AdminIrq::new(),
                    )
                },
                // SAFETY: as for `admin_irq`; `bar` too is initialised before, pinned, and
                // dropped after `event_irq`, whose handler borrows it.
                event_irq <- unsafe {
                    irq::Registration::new(
                        (*core::ptr::from_ref(_vectors)).index(usize::from(hw::VECTOR_EVENT))?.into(),
                        irq::Flags::TRIGGER_NONE,
                        c"ordma-event",
                        EventQueue::new(bound, &*core::ptr::from_ref(bar)),
                    )
                },
                ib <- new_mutex!(None, "ordma_ib"),
                _: {
                    Self::enable(bound, bar, &admin, event_irq.handler().addr())?;
                    let queried = Self::query_device(bound, bar, &admin, admin_irq.handler())
                        .and_then(|a| {
                            Ok((a, Self::query_port(bound, bar, &admin, admin_irq.handler())?))
                        });
                    let (attrs, port) = match queried {
                        Ok(q) => q,
                        Err(e) => {
                            // Stop the NIC before its queues are freed.
                            let _ = reset(bound, bar);
                            return Err(e);
                        }
                    };
                    // Events (the first: PORT_ACTIVE) from now on.
                    event_irq.handler().arm();
                    dev_info!(
                        bound,
                        "ordma NIC {major}.{minor}: node GUID {:016x}, fw {}.{}.{}, {} port(s), max QP {}, CQ {}, MR {}, PD {}\n",
                        attrs.node_guid,
                        attrs.fw_version >> 32,
                        (attrs.fw_version >> 16) & 0xffff,
                        attrs.fw_version & 0xffff,
                        attrs.num_ports,
                        attrs.max_qp,
                        attrs.max_cq,
                        attrs.max_mr,
                        attrs.max_pd
                    );
                    dev_info!(
                        bound,
                        "port 1: LID {}, state {}, MTU code {}, GUID {:016x}\n",
                        port.lid,
                        port.state,
                        port.active_mtu,
                        port.port_guid
                    );
                    // SAFETY (all four): these fields are initialised, pinned, and dropped
                    // after `ib` (field order), which alone holds the references.
                    let verbs = OrdmaVerbs {
                        attrs,
                        port,
                        // SAFETY: see above.
                        events: unsafe { &*core::ptr::from_ref(event_irq.handler()) },
                        // SAFETY: see above.
                        admin: unsafe { &*core::ptr::from_ref(&*admin) },
                        // SAFETY: see above.
                        admin_irq: unsafe { &*core::ptr::from_ref(admin_irq.handler()) },
                        // SAFETY: see above.
                        bar: unsafe { &*core::ptr::from_ref(bar) },
                        pdev: bound,
                        db_pfn,
                        db_used: Atomic::new(OrdmaVerbs::initial_db_used()),
                    };
                    match ib::Registration::new(dev, attrs.node_guid, verbs) {
                        Ok(r) => {
                            dev_info!(bound, "registered {}\n", r.name().to_str().unwrap_or("?"));
                            *ib.lock() = Some(r);
                        }
                        Err(e) => {
                            dev_err!(bound, "ib_device registration failed: {e:?}\n");
                            let _ = reset(bound, bar);
                            return Err(e);
                        }
                    }
                },
            }))
        })
    }

    /// Enables the function for memory access and bus mastering, and sets the DMA mask.
    fn prepare(pdev: &pci::Device<Core<'_>>) -> Result {
        pdev.enable_device_mem()?;
        pdev.set_master();
        // SAFETY: probe is the only context allocating or mapping DMA for this device, and
        // nothing has been allocated or mapped yet.
        unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<64>()) }
    }

    /// Programs the queues and starts them.
    fn enable(pdev: &pci::Device, bar: &Bar0<'_>, admin: &AdminQueue, eq: u64) -> Result {
        // Register offsets must be constants: the BAR's bounds are checked at compile time.
        // CAST: splitting 64-bit addresses into their two register words.
        let (sq, cq) = (admin.sq_addr(), admin.cq_addr());
        bar.write32(sq as u32, hw::REG_AQ_SQ_BASE);
        bar.write32((sq >> 32) as u32, hw::REG_AQ_SQ_BASE + 4);
        bar.write32(cq as u32, hw::REG_AQ_CQ_BASE);
        bar.write32((cq >> 32) as u32, hw::REG_AQ_CQ_BASE + 4);
        bar.write32(eq as u32, hw::REG_EQ_BASE);
        bar.write32((eq >> 32) as u32, hw::REG_EQ_BASE + 4);
        bar.write32(AQ_LOG_DEPTH, hw::REG_AQ_LOG_DEPTH);
        bar.write32(EQ_LOG_DEPTH, hw::REG_EQ_LOG_DEPTH);
        bar.write32(hw::CONTROL_ENABLE, hw::REG_CONTROL);
        let status = bar.read32(hw::REG_STATUS);
        if status & hw::STATUS_ENABLED == 0 {
            dev_err!(
                pdev,
                "the NIC refused its queues: status {status:#x}, error {}\n",
                bar.read32(hw::REG_ERROR)
            );
            return Err(EIO);
        }
        Ok(())
    }

    /// Runs a query command whose `N`-byte response the NIC writes to a DMA buffer;
    /// `params` builds the parameters from the buffer's address and length.
    fn query<const N: usize>(
        pdev: &pci::Device<Bound>,
        bar: &Bar0<'_>,
        admin: &AdminQueue,
        irq: &AdminIrq,
        opcode: u8,
        params: impl FnOnce(u64, u32) -> [u8; hw::AQ_SQE_SIZE - 8],
    ) -> Result<[u8; N]> {
        let buf: Coherent<[u8; N]> = Coherent::zeroed(pdev.as_ref(), GFP_KERNEL)?;
        // CAST: `N` is a response size, a small constant.
        let params = params(buf.dma_address(), N as u32);
        let len = admin.execute(pdev.as_ref(), bar, irq, opcode, params)?;
        if len != N as u64 {
            dev_err!(
                pdev,
                "admin command {opcode:#x} returned {len} bytes, expected {N}\n"
            );
            return Err(EIO);
        }
        Ok(buf.copy_read())
    }

    /// `CMD_QUERY_DEVICE`.
    fn query_device(
        pdev: &pci::Device<Bound>,
        bar: &Bar0<'_>,
        admin: &AdminQueue,
        irq: &AdminIrq,
    ) -> Result<hw::DeviceAttrs> {
        let raw = Self::query::<{ hw::DEVICE_ATTRS_SIZE }>(
            pdev,
            bar,
            admin,
            irq,
            hw::CMD_QUERY_DEVICE,
            |resp_addr, resp_len| {
                hw::QueryDeviceParams {
                    resp_addr,
                    resp_len,
                }
                .encode()
            },
        )?;
        Ok(hw::DeviceAttrs::decode(&raw))
    }

    /// `CMD_QUERY_PORT` for port 1.
    fn query_port(
        pdev: &pci::Device<Bound>,
        bar: &Bar0<'_>,
        admin: &AdminQueue,
        irq: &AdminIrq,
    ) -> Result<hw::PortAttrs> {
        let raw = Self::query::<{ hw::PORT_ATTRS_SIZE }>(
            pdev,
            bar,
            admin,
            irq,
            hw::CMD_QUERY_PORT,
            |resp_addr, resp_len| {
                hw::QueryPortParams {
                    port: 1,
                    resp_addr,
                    resp_len,
                }
                .encode()
            },
        )?;
        Ok(hw::PortAttrs::decode(&raw))
    }

    /// Unregisters the `ib_device` (disassociating any user context: their PDs are freed
    /// on the running NIC), then stops the NIC (reset), so it no longer touches memory we
    /// are about to free.
    pub(crate) fn shutdown(&self) {
        let registration = self.ib.lock().take();
        drop(registration);
        if reset(self.pdev, &self.bar).is_ok() {
            dev_dbg!(self.pdev, "NIC stopped\n");
        }
    }
}
