//! Checks of the hardware definitions that both the driver and the model compile.

use ordma_hw::*;

#[test]
fn version_fields_round_trip() {
    assert_eq!(version_major(VERSION), 1);
    assert_eq!(version_minor(VERSION), 0);
    assert_eq!(version_major(0x0003_0007), 3);
    assert_eq!(version_minor(0x0003_0007), 7);
}

#[test]
fn pci_identity_is_an_infiniband_controller() {
    assert_eq!(PCI_CLASS >> 16, 0x02, "network controller");
    assert_eq!((PCI_CLASS >> 8) & 0xff, 0x07, "InfiniBand");
    assert_ne!(PCI_VENDOR_ID, 0xffff, "0xffff means no device");
}

#[test]
fn registers_fit_in_bar0() {
    assert!(REG_VERSION + 4 <= BAR0_SIZE);
    assert!(BAR0_SIZE.is_power_of_two());
}
