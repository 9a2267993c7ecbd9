// SPDX-License-Identifier: GPL-2.0

//! Per-QP counters (`rdma statistic qp`; NIC interface 1.10).
//!
//! The NIC counts every event on its port and on the QP it happened to, from the QP's
//! creation (`CMD_QUERY_QP_COUNTERS`). An ib_core counter ([`Counter`]) counts what its QPs
//! did while bound to it: it keeps each bound QP's counts at the moment of binding, and
//! when a QP is unbound (at the latest, as it is destroyed) adds what the QP did since to
//! its base. Reading a counter reads its bound QPs from the NIC: one admin command each.
//!
//! ib_core shows a port's totals as the driver's port values plus every counter's, so
//! the port values the driver gives are the NIC's less all that its counters have
//! reported ([`Reported`]): the totals stay the NIC's own.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::{new_mutex, prelude::*, sync::Mutex};

use crate::{hw, ib::QpObject, qp::Qp, verbs::OrdmaIb};

/// What every counter of a device reported last, added up (each counter's latest values,
/// live or gone): what ib_core adds to the port's values.
pub(crate) struct Reported([AtomicU64; hw::NUM_COUNTERS]);

impl Reported {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; hw::NUM_COUNTERS])
    }

    /// The port's values for ib_core: the NIC's `port` counters less what the counters
    /// reported (wrapping: ib_core adds the counters' values back with 64-bit wrapping
    /// sums, so the totals it shows are the NIC's exactly).
    pub(crate) fn port_values(&self, port: &hw::PortCounters, values: &mut [u64]) {
        for ((v, c), r) in values.iter_mut().zip(port.0).zip(&self.0) {
            *v = c.wrapping_sub(r.load(Ordering::Relaxed));
        }
    }
}

/// A QP bound to a counter, its counts when it was bound and when last read.
struct Bound {
    qpn: u32,
    start: hw::PortCounters,
    last: hw::PortCounters,
}

struct Inner {
    /// What QPs no longer bound did while they were.
    base: hw::PortCounters,
    /// The values last reported to ib_core.
    reported: hw::PortCounters,
    bound: KVec<Bound>,
}

/// The driver's part of an ib_core per-QP counter.
#[pin_data]
pub(crate) struct Counter {
    #[pin]
    inner: Mutex<Inner>,
}

/// `now - then`, counter by counter (64-bit counters that wrap).
fn since(now: &hw::PortCounters, then: &hw::PortCounters) -> hw::PortCounters {
    let mut d = hw::PortCounters::default();
    for (i, v) in d.0.iter_mut().enumerate() {
        *v = now.get(i).wrapping_sub(then.get(i));
    }
    d
}

/// `a += b`, counter by counter.
fn add(a: &mut hw::PortCounters, b: &hw::PortCounters) {
    for (i, v) in b.0.iter().enumerate() {
        a.add(i, *v);
    }
}

impl OrdmaIb<'_> {
    /// A new counter, no QP bound (it holds no allocation until one is).
    pub(crate) fn new_counter(&self) -> impl PinInit<Counter> {
        pin_init!(Counter {
            inner <- new_mutex!(
                Inner {
                    base: hw::PortCounters::default(),
                    reported: hw::PortCounters::default(),
                    bound: KVec::new(),
                },
                "ordma_counter"
            ),
        })
    }

    /// Binds `qp`: its counts from now on are the counter's.
    pub(crate) fn bind_counter(&self, counter: &Counter, qp: &Qp<'_>) -> Result {
        if !self.qp_counters() {
            return Err(EOPNOTSUPP);
        }
        let qpn = qp.qp_num();
        let start = self.nic.query_qp_counters(qpn)?;
        counter.inner.lock().bound.push(
            Bound {
                qpn,
                start,
                last: start,
            },
            GFP_KERNEL,
        )?;
        Ok(())
    }

    /// Unbinds `qp`: what it did since it was bound stays in the counter. A NIC that
    /// cannot be read (gone, failed) leaves what the counter last read of the QP (so the
    /// counter never goes back), and the QP is unbound all the same.
    pub(crate) fn unbind_counter(&self, counter: &Counter, qp: &Qp<'_>) -> Result {
        let qpn = qp.qp_num();
        let mut inner = counter.inner.lock();
        let Some(i) = inner.bound.iter().position(|b| b.qpn == qpn) else {
            return Err(EINVAL);
        };
        let b = inner.bound.remove(i).map_err(|_| EINVAL)?;
        let now = self.nic.query_qp_counters(qpn).unwrap_or(b.last);
        add(&mut inner.base, &since(&now, &b.start));
        Ok(())
    }

    /// Reads the counter into `values` (in [`hw::COUNTERS`]' order).
    pub(crate) fn read_counter(&self, counter: &Counter, values: &mut [u64]) -> Result {
        let mut inner = counter.inner.lock();
        let mut sum = inner.base;
        for b in inner.bound.iter_mut() {
            b.last = self.nic.query_qp_counters(b.qpn)?;
            add(&mut sum, &since(&b.last, &b.start));
        }
        for (i, r) in self.reported.0.iter().enumerate() {
            r.fetch_add(
                sum.get(i).wrapping_sub(inner.reported.get(i)),
                Ordering::Relaxed,
            );
        }
        inner.reported = sum;
        for (v, c) in values.iter_mut().zip(sum.0) {
            *v = c;
        }
        Ok(())
    }
}
