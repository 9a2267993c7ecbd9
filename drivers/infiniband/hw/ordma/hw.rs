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

/// What the PCI ID table matches: the InfiniBand-controller class, every byte of it.
///
/// The kernel's `pci::Vendor` names only vendors the PCI-SIG assigned, and ordma's ID is
/// not one (see [`PCI_VENDOR_ID`]), so the table cannot name it; [`is_ordma`] checks the
/// vendor and device IDs at probe.
pub(crate) const PCI_ID: pci::DeviceId = pci::DeviceId::from_class(PCI_CLASS, 0xff_ff_ff);

/// Whether `pdev` is an ordma NIC (the ID table matched its class only).
pub(crate) fn is_ordma(pdev: &pci::Device) -> bool {
    pdev.vendor_id().as_raw() == PCI_VENDOR_ID && pdev.device_id() == PCI_DEVICE_ID
}
