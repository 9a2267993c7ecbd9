//! The NIC's PCI configuration space, as the model presents it to QEMU.

use ordma_hw as hw;

/// Size of the (conventional) configuration space.
pub const CONFIG_SIZE: usize = 256;
/// Where the MSI-X capability sits.
const MSIX_CAP: usize = 0x40;
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
        b[MSIX_CAP + 1] = 0;
        hw::put_le16(&mut b, MSIX_CAP + 2, hw::NUM_VECTORS - 1);
        hw::put_le32(&mut b, MSIX_CAP + 4, MSIX_BAR);
        hw::put_le32(&mut b, MSIX_CAP + 8, MSIX_PBA_OFFSET | MSIX_BAR);
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

    /// Writes `data` at `offset`, keeping only the writable bits.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        for (i, &v) in data.iter().enumerate() {
            let Some(o) = usize::try_from(offset).ok().and_then(|o| o.checked_add(i)) else {
                return;
            };
            let mask = match o {
                0x04 => 0x46,                   // command: memory space, bus master, parity
                0x05 => 0x05,                   // command: SERR, interrupt disable
                0x3c => 0xff,                   // interrupt line
                o if o == MSIX_CAP + 3 => 0xc0, // MSI-X enable, function mask
                _ => 0,
            };
            if let Some(b) = self.bytes.get_mut(o) {
                *b = (*b & !mask) | (v & mask);
            }
        }
    }

    /// Whether the guest enabled bus mastering (the NIC may only DMA then).
    pub fn bus_master(&self) -> bool {
        self.bytes[0x04] & 0x04 != 0
    }
}
