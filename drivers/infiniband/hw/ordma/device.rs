// SPDX-License-Identifier: GPL-2.0

//! One bound ordma NIC: bring-up (reset, version, queues, MSI-X, first admin commands,
//! `ib_device` registration) and teardown.

use kernel::{
    device::Core,
    dma::{Device as _, DmaMask},
    io::Io,
    irq, new_mutex, pci,
    prelude::*,
    sync::{Arc, Mutex},
};

use crate::{admin::AdminIrq, event::EventIrq, hw, ib, nic::Nic, verbs::OrdmaIb};

/// A bound NIC: what the PCI driver keeps. Fields drop in declaration order: the
/// `ib_device` first (`unbind` already unregistered it), the interrupt handlers, the
/// vectors, the NIC object (its DMA memory and BARs go with its last reference: the
/// handlers' and the verbs' are gone by then, and `unbind` stopped the NIC), and last bus
/// mastering, turned off.
#[pin_data]
pub(crate) struct OrdmaDevice<'bound> {
    /// The `ib_device`, registered last in probe and unregistered first, in `unbind`,
    /// while the NIC still runs (disassociated users free their objects through it).
    #[pin]
    ib: Mutex<Option<ib::Registration<'bound, OrdmaIb<'bound>>>>,
    #[pin]
    event_irq: irq::Registration<'bound, EventIrq<'bound>>,
    #[pin]
    admin_irq: irq::Registration<'bound, AdminIrq<'bound>>,
    _vectors: pci::IrqVectorRegistration<'bound>,
    nic: Arc<Nic<'bound>>,
    _master: BusMaster<'bound>,
}

/// Bus mastering, on while this lives (`prepare` turns it on): a probe that fails after
/// `prepare`, at any step, and a NIC unbound turn it off again, as a C driver's error path
/// and remove call `pci_clear_master`, so no function the driver let go of can reach
/// memory.
struct BusMaster<'bound>(&'bound pci::Device<kernel::device::Bound>);

impl Drop for BusMaster<'_> {
    fn drop(&mut self) {
        crate::nic::clear_bus_master(self.0);
    }
}

impl<'bound> OrdmaDevice<'bound> {
    /// Brings the NIC up; on any failure everything done so far is undone.
    pub(crate) fn new(pdev: &'bound pci::Device<Core<'_>>) -> impl PinInit<Self, Error> + 'bound {
        // What needs the `Core` context runs now; the rest only needs the bound device.
        let prepared = Self::prepare(pdev);
        let pdev: &'bound pci::Device<kernel::device::Bound> = pdev;
        pin_init::pin_init_scope(move || {
            prepared?;
            // From here on, any failure drops this and turns bus mastering off.
            let master = BusMaster(pdev);
            let bar = pdev.iomap_region_sized::<{ hw::BAR0_SIZE }>(0, c"ordma")?;
            let version = bar.read(hw::regs::VERSION);
            let (major, minor) = (version.major(), version.minor());
            if version.into_raw() == u32::MAX {
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
            let db_bar = pdev.iomap_region_sized::<{ hw::BAR2_SIZE }>(2, c"ordma-db")?;
            let nic = Arc::pin_init(Nic::new(pdev, bar, db_bar)?, GFP_KERNEL)?;
            nic.reset()?;
            let vectors = pdev.alloc_irq_vectors(
                u32::from(hw::NUM_VECTORS),
                u32::from(hw::NUM_VECTORS),
                pci::IrqTypes::default().with(pci::IrqType::MsiX),
            )?;
            let (admin_handler, event_handler) = (AdminIrq(nic.clone()), EventIrq(nic.clone()));
            // The handlers' vectors are borrows of `_vectors` taken for `'bound`, longer than
            // the one pin-init hands out (the kernel gives an `IrqVector` only as a borrow of
            // its registration, and a struct cannot name a borrow of its own field): sound
            // because `_vectors` is initialised before the two registrations, never moves
            // (the struct is pinned) and is dropped after them, both by `Drop` (declaration
            // order) and by pin-init's unwinding of a failed init (reverse order of
            // initialisation), so the vectors outlive the handlers' `free_irq`.
            Ok(try_pin_init!(Self {
                // First in, last out: a failure below drops it after everything else.
                _master: master,
                nic,
                _vectors: vectors,
                // SAFETY: the registration is never leaked (a field of this struct, dropped
                // with it), and its vector outlives it (`_vectors`, as said above).
                admin_irq <- unsafe {
                    irq::Registration::new(
                        (*core::ptr::from_ref(_vectors)).index(usize::from(hw::VECTOR_ADMIN))?.into(),
                        irq::Flags::TRIGGER_NONE,
                        c"ordma-admin",
                        Ok::<_, Error>(admin_handler),
                    )
                },
                // SAFETY: as for `admin_irq`.
                event_irq <- unsafe {
                    irq::Registration::new(
                        (*core::ptr::from_ref(_vectors)).index(usize::from(hw::VECTOR_EVENT))?.into(),
                        irq::Flags::TRIGGER_NONE,
                        c"ordma-event",
                        Ok::<_, Error>(event_handler),
                    )
                },
                ib <- new_mutex!(None, "ordma_ib"),
                _: {
                    let registration = Self::start(nic, major, minor).inspect_err(|_| {
                        // Stop the NIC before its queues are freed.
                        nic.quiesce();
                    })?;
                    *ib.lock() = Some(registration);
                },
            }))
        })
    }

    /// Checks that the function is an ordma NIC (the ID table matches a class), enables it
    /// for memory access and bus mastering, and sets the DMA mask.
    fn prepare(pdev: &pci::Device<Core<'_>>) -> Result {
        if !hw::is_ordma(pdev) {
            return Err(ENODEV);
        }
        pdev.enable_device_mem()?;
        pdev.set_master();
        // SAFETY: probe is the only context allocating or mapping DMA for this device, and
        // nothing has been allocated or mapped yet.
        unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<64>()) }
    }

    /// Starts the queues, asks the NIC what it is, and registers the `ib_device`.
    fn start(
        nic: &Arc<Nic<'bound>>,
        major: u16,
        minor: u16,
    ) -> Result<ib::Registration<'bound, OrdmaIb<'bound>>> {
        let pdev = nic.pdev;
        nic.enable()?;
        // Every limit at most what the interface allows, whatever the NIC says.
        let (attrs, clamped) = nic.query_device()?.clamped();
        for c in clamped.iter().flatten() {
            dev_warn!(
                pdev,
                "the NIC reports {} {}, above the interface's {}: {} used\n",
                c.name,
                c.from,
                c.to,
                c.to
            );
        }
        let port = nic.query_port(1)?;
        nic.init_port(port.state == hw::PORT_STATE_ACTIVE, port.is_ethernet());
        // Events (the first: the PORT_ACTIVE of the enable) from now on.
        nic.arm_events();
        dev_info!(
            pdev,
            "ordma NIC {}.{}: node GUID {:016x}, fw {}.{}.{}, {} port(s), max QP {}, CQ {}, MR {}, PD {}\n",
            major,
            minor,
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
        if port.is_ethernet() {
            let m = port.mac;
            dev_info!(
                pdev,
                "port 1: Ethernet (RoCEv2), MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, link state {}, MTU code {}, {} GIDs\n",
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                m[5],
                port.state,
                port.active_mtu,
                port.gid_tbl_len
            );
        } else {
            dev_info!(
                pdev,
                "port 1: LID {}, state {}, MTU code {}, GUID {:016x}\n",
                port.lid,
                port.state,
                port.active_mtu,
                port.port_guid
            );
        }
        let changes = nic.port_changes();
        let verbs = OrdmaIb::new(nic.clone(), minor, attrs, port)?;
        let r = ib::Registration::new(pdev.as_ref(), attrs.node_guid, verbs, nic.ib_events.clone())
            .inspect_err(|e| dev_err!(pdev, "ib_device registration failed: {e:?}\n"))?;
        // A port change between ib_core's first look and the events' attachment would
        // leave its port cache stale: tell it now.
        if nic.port_changes() != changes {
            if nic.port_active() {
                nic.ib_events.port_active(1);
            } else {
                nic.ib_events.port_error(1);
            }
        }
        dev_info!(pdev, "registered {}\n", r.name().to_str().unwrap_or("?"));
        Ok(r)
    }

    /// Unregisters the `ib_device` (disassociating any user context: their objects are
    /// freed on the running NIC), then stops the NIC, so it no longer touches memory we
    /// are about to free.
    pub(crate) fn shutdown(&self) {
        let registration = self.ib.lock().take();
        drop(registration);
        self.nic.quiesce();
    }
}
