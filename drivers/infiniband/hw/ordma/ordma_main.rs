// SPDX-License-Identifier: GPL-2.0

//! ordma: the Linux driver of the ordma RDMA NIC.
//!
//! See `Documentation/architecture.md` in the ordma repository for the component map.

mod admin;
mod ah;
mod commands;
mod counters;
mod cq;
mod device;
mod driver;
mod event;
mod hw;
mod ib;
mod mr;
mod mw;
mod nic;
mod pages;
mod pd;
mod qp;
mod srq;
mod uapi;
mod ucontext;
mod verbs;

use kernel::prelude::*;

/// The module: the ib_core ABI check, then the PCI driver registration.
#[pin_data]
pub(crate) struct OrdmaModule {
    _abi: ib::AbiChecked,
    #[pin]
    _driver: kernel::driver::Registration<kernel::pci::Adapter<driver::OrdmaDriver>>,
}

impl kernel::InPlaceModule for OrdmaModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            _abi: ib::AbiChecked::check()?,
            _driver <- kernel::driver::Registration::new(c"ordma", module),
        })
    }
}

module! {
    type: OrdmaModule,
    name: "ordma",
    authors: ["The ordma developers"],
    description: "ordma RDMA NIC driver",
    license: "GPL v2",
}
