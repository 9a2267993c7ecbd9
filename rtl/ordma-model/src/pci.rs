//! The NIC's PCI configuration space, as the model presents it to QEMU.
//!
//! Two capabilities: MSI-X, and PCI power management, there for the function reset it
//! gives: `No_Soft_Reset` is clear, so taking the function from D3hot back to D0 resets it
//! ([`ConfigSpace::write`] reports it; the server then resets configuration space and the
//! NIC, [`crate::engine::Nic::function_reset`]). That is the reset Linux's `pci_pm_reset`
//! does, which `/sys/bus/pci/devices/<bdf>/reset` reaches for a function with no FLR on
//! the root bus. QEMU's vfio-user client writes configuration space through to the model
//! and sends `DEVICE_RESET` only on its own machine reset. The model has no other power
//! state: D1 and D2 are not offered (writes asking for them are ignored), and D3hot is
//! only the first half of that reset.

use ordma_hw as hw;

/// Size of the (conventional) configuration space.
pub const CONFIG_SIZE: usize = 256;
/// Where the MSI-X capability sits.
const MSIX_CAP: usize = 0x40;
/// Where the power management capability sits (after MSI-X's 12 bytes).
pub const PM_CAP: usize = 0x50;
/// `PMCSR`, the power management control/status register.
const PMCSR: usize = PM_CAP + 4;
/// `PMCSR`'s power state field: 0 = D0, 3 = D3hot.
const PM_STATE: u8 = 0x03;
/// D3hot in [`PM_STATE`].
const D3HOT: u8 = 3;
/// The BAR that holds the MSI-X table (offset 0) and PBA (offset `MSIX_PBA_OFFSET`).
pub const MSIX_BAR: u32 = 4;
/// Offset of the PBA in [`MSIX_BAR`].
pub const MSIX_PBA_OFFSET: u32 = 0x800;
/// Size of [`MSIX_BAR`].
pub const MSIX_BAR_SIZE: u64 = 0x1000;

/// Configuration space: the identity and capabilities are fixed; the few writable fields
/// (command, status bits, interrupt line, MSI-X control) are kept as written.
pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
}

impl Default for ConfigSpace {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigSpace {
    /// The power-on configuration space.
    pub fn new() -> Self {
        let mut b = [0u8; CONFIG_SIZE];
        hw::put_le16(&mut b, 0x00, hw::PCI_VENDOR_ID);
        hw::put_le16(&mut b, 0x02, hw::PCI_DEVICE_ID);
        hw::put_le16(&mut b, 0x06, 0x0010); // status: capabilities list
        b[0x08] = 1; // revision
        b[0x09] = (hw::PCI_CLASS & 0xff) as u8;
        b[0x0a] = ((hw::PCI_CLASS >> 8) & 0xff) as u8;
        b[0x0b] = ((hw::PCI_CLASS >> 16) & 0xff) as u8;
        // BARs 0, 2, 4: 32-bit memory, not prefetchable (all flag bits zero).
        hw::put_le16(&mut b, 0x2c, hw::PCI_VENDOR_ID);
        hw::put_le16(&mut b, 0x2e, hw::PCI_DEVICE_ID);
        b[0x34] = MSIX_CAP as u8;
        b[0x3d] = 0; // interrupt pin: none (MSI-X only)
                     // MSI-X: id 0x11, last capability, table size N-1, table and PBA in BAR4.
        b[MSIX_CAP] = 0x11;
        b[MSIX_CAP + 1] = PM_CAP as u8;
        hw::put_le16(&mut b, MSIX_CAP + 2, hw::NUM_VECTORS - 1);
        hw::put_le32(&mut b, MSIX_CAP + 4, MSIX_BAR);
        hw::put_le32(&mut b, MSIX_CAP + 8, MSIX_PBA_OFFSET | MSIX_BAR);
        // Power management, id 1, last capability: PMC version 3 (PCI PM 1.2), no D1, D2
        // or PME; PMCSR D0 with No_Soft_Reset clear (D3hot -> D0 resets the function).
        b[PM_CAP] = 0x01;
        b[PM_CAP + 1] = 0;
        hw::put_le16(&mut b, PM_CAP + 2, 0x0003);
        Self { bytes: b }
    }

    /// Reads `data.len()` bytes at `offset`; out-of-range bytes read as 0xff.
    pub fn read(&self, offset: u64, data: &mut [u8]) {
        for (i, d) in data.iter_mut().enumerate() {
            *d = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_add(i))
                .and_then(|o| self.bytes.get(o))
                .copied()
                .unwrap_or(0xff);
        }
    }

    /// Writes `data` at `offset`, keeping only the writable bits. Returns whether the write
    /// reset the function: the power state went from D3hot to D0 (`No_Soft_Reset` is
    /// clear); configuration space is then back to its power-on values, and the caller
    /// resets the NIC. A write asking for D1 or D2, which the function does not offer,
    /// leaves the power state as it was.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> bool {
        let old = self.power_state();
        for (i, &v) in data.iter().enumerate() {
            let Some(o) = usize::try_from(offset).ok().and_then(|o| o.checked_add(i)) else {
                break;
            };
            let mask = match o {
                0x04 => 0x46,                   // command: memory space, bus master, parity
                0x05 => 0x05,                   // command: SERR, interrupt disable
                0x3c => 0xff,                   // interrupt line
                o if o == MSIX_CAP + 3 => 0xc0, // MSI-X enable, function mask
                PMCSR if matches!(v & PM_STATE, 0 | D3HOT) => PM_STATE,
                _ => 0,
            };
            if let Some(b) = self.bytes.get_mut(o) {
                *b = (*b & !mask) | (v & mask);
            }
        }
        if old == D3HOT && self.power_state() == 0 {
            *self = Self::new();
            return true;
        }
        false
    }

    /// The power state in `PMCSR`: 0 = D0, 3 = D3hot.
    pub fn power_state(&self) -> u8 {
        self.bytes[PMCSR] & PM_STATE
    }

    /// Whether the guest enabled bus mastering (the NIC may only DMA then).
    pub fn bus_master(&self) -> bool {
        self.bytes[0x04] & 0x04 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(c: &ConfigSpace, off: u64) -> u16 {
        let mut d = [0u8; 2];
        c.read(off, &mut d);
        u16::from_le_bytes(d)
    }

    #[test]
    fn d3hot_to_d0_resets_the_function_and_nothing_else_does() {
        let mut c = ConfigSpace::new();
        let pmcsr = PMCSR as u64;
        assert!(!c.write(0x04, &[0x06, 0x00]));
        assert!(c.bus_master());
        // D0 -> D0 (PME status written back), D1 and D2 (not offered: ignored).
        for v in [0x8000u16, 0x0001, 0x0002, 0x0000] {
            assert!(!c.write(pmcsr, &v.to_le_bytes()), "{v:#x}");
            assert_eq!(c.power_state(), 0);
        }
        // D3hot, and D3hot again: no reset yet, nothing else changed.
        assert!(!c.write(pmcsr, &[0x03, 0x00]));
        assert!(!c.write(pmcsr, &[0x03]));
        assert_eq!((c.power_state(), c.bus_master()), (3, true));
        // D2 from D3hot: ignored. D0: the reset, every writable register back to power-on.
        assert!(!c.write(pmcsr, &[0x02]));
        assert!(c.write(pmcsr, &[0x00, 0x00]));
        assert_eq!((c.power_state(), c.bus_master()), (0, false));
        assert_eq!(word(&c, 0x04), 0);
        assert_eq!(c.bytes, ConfigSpace::new().bytes);
        // A 4-byte write over the whole PM capability header takes only the state bits.
        assert!(!c.write(PM_CAP as u64, &[0xff; 8]));
        assert_eq!(word(&c, PM_CAP as u64), 0x0001, "id and next pointer");
        assert_eq!(word(&c, PM_CAP as u64 + 2), 0x0003, "PMC");
        assert_eq!(word(&c, pmcsr), 0x0003, "D3hot, No_Soft_Reset still clear");
    }
}
