// SPDX-License-Identifier: GPL-2.0

//! PCI glue: the ID table, probe and unbind.

use kernel::{device::Core, io::Io, pci, prelude::*};

use crate::hw;

/// BAR0, the control registers, at its documented size.
type Bar0<'bound> = pci::Bar<'bound, { hw::BAR0_SIZE }>;

/// What a bound ordma function holds.
pub(crate) struct OrdmaDevice<'bound> {
    pdev: &'bound pci::Device,
    _bar: Bar0<'bound>,
}

/// The PCI driver.
pub(crate) struct OrdmaDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <OrdmaDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(hw::VENDOR, hw::PCI_DEVICE_ID as u32),
        ()
    )]
);

impl pci::Driver for OrdmaDriver {
    type IdInfo = ();
    type Data<'bound> = OrdmaDevice<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pdev.enable_device_mem()?;
        pdev.set_master();
        let bar = pdev.iomap_region_sized::<{ hw::BAR0_SIZE }>(0, c"ordma")?;
        let version = bar.read32(hw::REG_VERSION);
        let major = hw::version_major(version);
        if major != hw::version_major(hw::VERSION) {
            dev_err!(
                pdev,
                "NIC interface version {}.{} is not supported (this driver speaks {}.x)\n",
                major,
                hw::version_minor(version),
                hw::version_major(hw::VERSION)
            );
            return Err(ENODEV);
        }
        dev_info!(
            pdev,
            "ordma NIC, interface version {}.{}\n",
            major,
            hw::version_minor(version)
        );
        Ok(OrdmaDevice { pdev, _bar: bar })
    }
}

impl Drop for OrdmaDevice<'_> {
    fn drop(&mut self) {
        dev_dbg!(self.pdev, "removed\n");
    }
}
