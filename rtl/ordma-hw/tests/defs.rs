//! Checks of the hardware definitions that both the driver and the model compile.

use ordma_hw::*;

#[test]
fn version_fields_split_major_and_minor() {
    assert_eq!(version_major(VERSION), 1);
    assert_eq!(version_minor(VERSION), 0);
    assert_eq!(version_major(0x0003_0007), 3);
    assert_eq!(version_minor(0x0003_0007), 7);
    assert_eq!(version_major(u32::MAX), 0xffff);
    assert_eq!(version_minor(u32::MAX), 0xffff);
}
