// SPDX-License-Identifier: GPL-2.0

//! The event queue: the NIC's asynchronous events (port state, fatal errors), consumed in
//! the MSI-X handler of the event vector.

use kernel::{
    device::Bound,
    dma::Coherent,
    io::{io_project, Io},
    irq::{self, IrqReturn},
    new_spinlock_irq, pci,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Release},
        SpinLockIrq,
    },
};

use crate::{driver::Bar0, hw};

/// log2 of the event queue depth.
pub(crate) const EQ_LOG_DEPTH: u32 = 6;
const EQ_DEPTH: u16 = 1 << EQ_LOG_DEPTH;

/// The event queue and its interrupt handler.
#[pin_data]
pub(crate) struct EventQueue<'bound> {
    ring: Coherent<[[u8; hw::EQE_SIZE]]>,
    /// Consumer index (free-running); the lock serialises handler runs.
    #[pin]
    cons: SpinLockIrq<u16>,
    /// Whether port 1 is ACTIVE, as the last port event said.
    port_active: Atomic<bool>,
    bar: &'bound Bar0<'bound>,
    pdev: &'bound pci::Device<Bound>,
}

impl<'bound> EventQueue<'bound> {
    /// Allocates the ring, zeroed (every entry reads as "not yet written").
    pub(crate) fn new(
        pdev: &'bound pci::Device<Bound>,
        bar: &'bound Bar0<'bound>,
    ) -> impl PinInit<Self, Error> + 'bound {
        try_pin_init!(Self {
            ring: Coherent::zeroed_slice(pdev.as_ref(), usize::from(EQ_DEPTH), GFP_KERNEL)?,
            cons <- new_spinlock_irq!(0, "ordma_eq"),
            port_active: Atomic::new(false),
            bar,
            pdev,
        })
    }

    /// Bus address of the ring.
    pub(crate) fn addr(&self) -> u64 {
        self.ring.dma_address()
    }

    /// Asks for an interrupt on the next event (or now, if events are pending).
    pub(crate) fn arm(&self) {
        let cons = self.cons.lock();
        self.bar
            .write32(u32::from(*cons) | hw::EQ_DB_ARM, hw::REG_EQ_DB);
    }

    /// Whether port 1 is ACTIVE.
    pub(crate) fn port_active(&self) -> bool {
        self.port_active.load(Acquire)
    }

    fn handle_event(&self, e: &hw::Event) {
        match e.kind {
            hw::EVENT_PORT_ACTIVE => {
                self.port_active.store(true, Release);
                dev_info!(self.pdev, "port {} ACTIVE\n", e.data);
            }
            hw::EVENT_PORT_DOWN => {
                self.port_active.store(false, Release);
                dev_info!(self.pdev, "port {} DOWN\n", e.data);
            }
            hw::EVENT_FATAL => {
                self.port_active.store(false, Release);
                dev_err!(self.pdev, "the NIC stopped with a fatal error {}\n", e.data);
            }
            kind => dev_warn!(self.pdev, "unknown event type {kind} ignored\n"),
        }
    }
}

impl irq::Handler for EventQueue<'_> {
    fn handle(&self) -> IrqReturn {
        let mut cons = self.cons.lock();
        let mut seen = 0;
        while seen < EQ_DEPTH {
            let slot = usize::from(*cons % EQ_DEPTH);
            // PANIC: `slot < EQ_DEPTH`, the ring's length.
            let e = hw::Event::decode(&io_project!(self.ring, [panic: slot]).copy_read());
            if e.phase != hw::phase(*cons, EQ_DEPTH) {
                break;
            }
            self.handle_event(&e);
            *cons = cons.wrapping_add(1);
            seen += 1;
        }
        self.bar
            .write32(u32::from(*cons) | hw::EQ_DB_ARM, hw::REG_EQ_DB);
        if seen > 0 {
            IrqReturn::Handled
        } else {
            IrqReturn::None
        }
    }
}
