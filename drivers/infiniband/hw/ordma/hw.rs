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

/// BAR0's registers, typed (the kernel's `register!`): each a type with its offset and
/// fields, read with `bar.read(REG)` and written with `bar.write_reg(value)`. The offsets
/// and bits are the shared definitions' (`REG_*`, `STATUS_*`, `EQ_DB_ARM`), checked below at
/// compile time.
pub(crate) mod regs {
    use kernel::io::register::Register;

    use super::defs;

    kernel::io::register! {
        /// `VERSION`: the interface version the NIC speaks.
        pub(crate) VERSION(u32) @ 0x000 {
            /// Incompatible changes.
            31:16 major => u16;
            /// Compatible additions.
            15:0 minor => u16;
        }

        /// `STATUS`: the NIC's state.
        pub(crate) STATUS(u32) @ 0x004 {
            /// Stopped on an error (`ERROR` says which); only a reset clears it.
            2:2 fatal => bool;
            /// Queues enabled: admin commands are processed.
            1:1 enabled => bool;
            /// Reset done: registers may be programmed.
            0:0 ready => bool;
        }

        /// `CONTROL`: one command (`CONTROL_*`) per write.
        pub(crate) CONTROL(u32) @ 0x008 {
            31:0 command => u32;
        }

        /// `ERROR`: why `STATUS.fatal` is set (`ERR_*`).
        pub(crate) ERROR(u32) @ 0x00c {
            31:0 code => u32;
        }

        /// `AQ_SQ_BASE`, low word: the admin SQ's bus address.
        pub(crate) AQ_SQ_BASE_LO(u32) @ 0x020 {
            31:0 addr => u32;
        }

        /// `AQ_SQ_BASE`, high word.
        pub(crate) AQ_SQ_BASE_HI(u32) @ 0x024 {
            31:0 addr => u32;
        }

        /// `AQ_CQ_BASE`, low word: the admin CQ's bus address.
        pub(crate) AQ_CQ_BASE_LO(u32) @ 0x028 {
            31:0 addr => u32;
        }

        /// `AQ_CQ_BASE`, high word.
        pub(crate) AQ_CQ_BASE_HI(u32) @ 0x02c {
            31:0 addr => u32;
        }

        /// `EQ_BASE`, low word: the event queue's bus address.
        pub(crate) EQ_BASE_LO(u32) @ 0x030 {
            31:0 addr => u32;
        }

        /// `EQ_BASE`, high word.
        pub(crate) EQ_BASE_HI(u32) @ 0x034 {
            31:0 addr => u32;
        }

        /// `AQ_LOG_DEPTH`: log2 of the admin SQ's and CQ's depth.
        pub(crate) AQ_LOG_DEPTH(u32) @ 0x038 {
            31:0 log_depth => u32;
        }

        /// `EQ_LOG_DEPTH`: log2 of the event queue's depth.
        pub(crate) EQ_LOG_DEPTH(u32) @ 0x03c {
            31:0 log_depth => u32;
        }

        /// `AQ_SQ_DB`: the admin SQ's producer index.
        pub(crate) AQ_SQ_DB(u32) @ 0x040 {
            15:0 prod => u16;
        }

        /// `EQ_DB`: the event queue's consumer index, and whether to interrupt on the next
        /// entry.
        pub(crate) EQ_DB(u32) @ 0x044 {
            31:31 arm => bool;
            15:0 cons => u16;
        }
    }

    // The offsets and bits are the shared definitions'.
    const _: () = {
        assert!(VERSION::OFFSET == defs::REG_VERSION);
        assert!(STATUS::OFFSET == defs::REG_STATUS);
        assert!(CONTROL::OFFSET == defs::REG_CONTROL);
        assert!(ERROR::OFFSET == defs::REG_ERROR);
        assert!(AQ_SQ_BASE_LO::OFFSET == defs::REG_AQ_SQ_BASE);
        assert!(AQ_SQ_BASE_HI::OFFSET == defs::REG_AQ_SQ_BASE + 4);
        assert!(AQ_CQ_BASE_LO::OFFSET == defs::REG_AQ_CQ_BASE);
        assert!(AQ_CQ_BASE_HI::OFFSET == defs::REG_AQ_CQ_BASE + 4);
        assert!(EQ_BASE_LO::OFFSET == defs::REG_EQ_BASE);
        assert!(EQ_BASE_HI::OFFSET == defs::REG_EQ_BASE + 4);
        assert!(AQ_LOG_DEPTH::OFFSET == defs::REG_AQ_LOG_DEPTH);
        assert!(EQ_LOG_DEPTH::OFFSET == defs::REG_EQ_LOG_DEPTH);
        assert!(AQ_SQ_DB::OFFSET == defs::REG_AQ_SQ_DB);
        assert!(EQ_DB::OFFSET == defs::REG_EQ_DB);
        assert!(defs::STATUS_FATAL == 1 << 2);
        assert!(defs::STATUS_ENABLED == 1 << 1);
        assert!(defs::STATUS_READY == 1 << 0);
        assert!(defs::EQ_DB_ARM == 1 << 31);
        assert!(defs::version_major(0xabcd_0000) == 0xabcd);
        assert!(defs::version_minor(0x0000_abcd) == 0xabcd);
    };
}
