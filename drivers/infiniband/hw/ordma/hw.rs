// SPDX-License-Identifier: GPL-2.0

//! The NIC's hardware definitions, shared with the device model, and their kernel views.

// The files are written as a crate's public API (the model uses it that way) and the driver
// uses only part of it; `allow` because which part changes with every feature.
#[allow(
    unreachable_pub,
    dead_code,
    unused_imports,
    reason = "shared definitions: public for the model, partly used here"
)]
#[path = "../../../../rtl/ordma-hw/src/defs/mod.rs"]
mod defs;

pub(crate) use defs::*;

use kernel::pci;

/// The ordma vendor ID as the PCI abstractions want it.
///
/// `pci::Vendor` offers named constants for assigned vendors only, and ordma's ID is not
/// assigned (see [`PCI_VENDOR_ID`]).
pub(crate) const VENDOR: pci::Vendor =
    // SAFETY: `pci::Vendor` is `#[repr(transparent)]` over `u16` and its invariant is only
    // that it holds a 16-bit PCI vendor ID, which `PCI_VENDOR_ID` is.
    unsafe { core::mem::transmute::<u16, pci::Vendor>(PCI_VENDOR_ID) };
