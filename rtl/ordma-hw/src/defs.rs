// SPDX-License-Identifier: GPL-2.0
//! The ordma NIC's hardware definitions.
//!
//! This file is compiled twice: by the kernel crate (`drivers/infiniband/hw/ordma/hw.rs`
//! includes it with `#[path]`) and by the `ordma-hw` crate that the model uses. It must stay
//! dependency-free: `core` only, no allocation, no `std`. `Documentation/hardware.md`
//! describes the same interface in prose; change both together.

/// PCI vendor ID of the ordma NIC.
///
/// Not assigned by the PCI-SIG: ordma is a simulated NIC. `0x4f52` ("OR") is unassigned in
/// the pci.ids database; a real device would carry its maker's ID.
pub const PCI_VENDOR_ID: u16 = 0x4f52;

/// PCI device ID of the ordma NIC, function 0.
pub const PCI_DEVICE_ID: u16 = 0x0001;

/// PCI class code: network controller (0x02), InfiniBand (0x07), programming interface 0.
pub const PCI_CLASS: u32 = 0x02_07_00;

/// Size of BAR0, the control registers.
pub const BAR0_SIZE: usize = 0x1000;

/// BAR0 offset of the 32-bit, read-only `VERSION` register: `major << 16 | minor`.
pub const REG_VERSION: usize = 0x000;

/// The interface version this file describes, as `VERSION` reports it.
pub const VERSION: u32 = 1 << 16;

/// The major part of a `VERSION` value; drivers refuse a major they do not know.
pub const fn version_major(version: u32) -> u16 {
    // CAST: the shift leaves 16 bits.
    (version >> 16) as u16
}

/// The minor part of a `VERSION` value; new minors only add features.
pub const fn version_minor(version: u32) -> u16 {
    // CAST: truncation to the low 16 bits is the point.
    version as u16
}

// Compile-time checks: both the driver and the model refuse to build if these break.
const _: () = assert!(BAR0_SIZE.is_power_of_two());
const _: () = assert!(REG_VERSION + 4 <= BAR0_SIZE, "VERSION lies outside BAR0");
const _: () = assert!(
    PCI_CLASS >> 8 == 0x0207,
    "the class is InfiniBand controller"
);
