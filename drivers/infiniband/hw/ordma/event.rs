// SPDX-License-Identifier: GPL-2.0

//! The event queue: the NIC's asynchronous events (port state, fatal errors, CQ, QP and
//! SRQ events), consumed in the MSI-X handler of the event vector and passed on to ib_core.

use kernel::{
    device,
    dma::Coherent,
    io::{io_project, Io},
    irq::{self, IrqReturn},
    new_spinlock_irq,
    prelude::*,
    sync::{
        barrier::{dma_mb, Read},
        Arc, SpinLockIrq,
    },
};

use crate::{hw, ib, nic::Nic};

/// log2 of the event queue depth: the deepest the interface allows, which holds one
/// completion event of every CQ a NIC may have (`hw::MAX_CQS`) and the asynchronous events.
pub(crate) const EQ_LOG_DEPTH: u32 = hw::MAX_LOG_DEPTH;
const EQ_DEPTH: u16 = 1 << EQ_LOG_DEPTH;

/// The event ring in DMA-coherent memory.
#[pin_data]
pub(crate) struct EventRing {
    ring: Coherent<[[u8; hw::EQE_SIZE]]>,
    /// Consumer index (free-running); the lock serialises handler runs and arming.
    #[pin]
    cons: SpinLockIrq<u16>,
}

impl EventRing {
    /// Allocates the ring, zeroed (every entry reads as "not yet written").
    pub(crate) fn new(dev: &device::Device<device::Bound>) -> impl PinInit<Self, Error> + '_ {
        try_pin_init!(Self {
            ring: Coherent::zeroed_slice(dev, usize::from(EQ_DEPTH), GFP_KERNEL)?,
            cons <- new_spinlock_irq!(0, "ordma_eq"),
        })
    }

    /// Bus address of the ring.
    pub(crate) fn addr(&self) -> u64 {
        self.ring.dma_address()
    }
}

impl Nic<'_> {
    /// Asks for an interrupt on the next event (or now, if events are pending).
    pub(crate) fn arm_events(&self) {
        let cons = self.eq.cons.lock();
        self.bar
            .write_reg(hw::regs::EQ_DB::zeroed().with_cons(*cons).with_arm(true));
    }

    /// Acts on one event: the NIC's state first, then ib_core (on a change of state),
    /// then the log (rate-limited).
    fn handle_event(&self, e: &hw::Event) {
        match e.kind {
            hw::EVENT_PORT_ACTIVE | hw::EVENT_PORT_DOWN => {
                let active = e.kind == hw::EVENT_PORT_ACTIVE;
                // Port 1 is the only one; the event's data names it. ib_core hears of
                // a change of the port's state (on Ethernet, the netdev's counts too).
                self.set_port_link(active);
                let state = if active { "ACTIVE" } else { "DOWN" };
                self.log_event(|| dev_info!(self.pdev, "port {} {state}\n", e.data));
            }
            hw::EVENT_FATAL => self.failed(|| {
                dev_err!(
                    self.pdev,
                    "the NIC stopped with a fatal error {}: its verbs fail with EIO until it is rebound\n",
                    e.data
                )
            }),
            hw::EVENT_CQ_COMPLETION => {
                // A CQ destroyed while its event was on the way: nothing to wake.
                if !self.ib_events.cq_completion(e.data) {
                    dev_dbg!(
                        self.pdev,
                        "completion event for CQ {} that is gone\n",
                        e.data
                    );
                }
            }
            hw::EVENT_CQ_ERROR => {
                let found = self.ib_events.cq_error(e.data);
                self.log_event(|| {
                    dev_warn!(
                        self.pdev,
                        "CQ {} failed (reason {}){}\n",
                        e.data,
                        e.data2,
                        if found { "" } else { ": no such CQ" }
                    )
                });
            }
            hw::EVENT_SRQ_LIMIT_REACHED => {
                if !self.ib_events.srq_event(e.data, ib::SrqEvent::LimitReached) {
                    self.log_event(|| {
                        dev_warn!(
                            self.pdev,
                            "limit event for SRQ {} that does not exist\n",
                            e.data
                        )
                    });
                }
            }
            kind => {
                let qp_event = match kind {
                    hw::EVENT_QP_FATAL => Some(ib::QpEvent::Fatal),
                    hw::EVENT_QP_REQ_ERR => Some(ib::QpEvent::RequestError),
                    hw::EVENT_QP_ACCESS_ERR => Some(ib::QpEvent::AccessError),
                    hw::EVENT_QP_SQ_DRAINED => Some(ib::QpEvent::SqDrained),
                    hw::EVENT_QP_COMM_EST => Some(ib::QpEvent::CommEstablished),
                    hw::EVENT_QP_LAST_WQE_REACHED => Some(ib::QpEvent::LastWqeReached),
                    _ => None,
                };
                match qp_event {
                    Some(ev) => {
                        if !self.ib_events.qp_event(e.data, ev) {
                            self.log_event(|| {
                                dev_warn!(
                                    self.pdev,
                                    "event {kind} for QP {} that does not exist\n",
                                    e.data
                                )
                            });
                        }
                    }
                    None => self
                        .log_event(|| dev_warn!(self.pdev, "unknown event type {kind} ignored\n")),
                }
            }
        }
    }

    /// Logs through the interrupt handlers' rate limit.
    fn log_event(&self, print: impl FnOnce()) {
        self.log_limit.log(self.pdev, print);
    }
}

/// The event-queue interrupt handler.
pub(crate) struct EventIrq<'bound>(pub(crate) Arc<Nic<'bound>>);

impl irq::Handler for EventIrq<'_> {
    fn handle(&self) -> IrqReturn {
        let nic = &*self.0;
        let mut cons = nic.eq.cons.lock();
        let mut seen = 0;
        while seen < EQ_DEPTH {
            let slot = usize::from(*cons % EQ_DEPTH);
            // PANIC: `slot < EQ_DEPTH`, the ring's length.
            let e = hw::Event::decode(&io_project!(nic.eq.ring, [panic: slot]).copy_read());
            if e.phase != hw::phase(*cons, EQ_DEPTH) {
                break;
            }
            // The NIC writes the phase byte last: read the rest only after seeing it.
            dma_mb(Read);
            // PANIC: as above.
            let e = hw::Event::decode(&io_project!(nic.eq.ring, [panic: slot]).copy_read());
            nic.handle_event(&e);
            *cons = cons.wrapping_add(1);
            seen += 1;
        }
        nic.bar
            .write_reg(hw::regs::EQ_DB::zeroed().with_cons(*cons).with_arm(true));
        if seen > 0 {
            IrqReturn::Handled
        } else {
            IrqReturn::None
        }
    }
}
