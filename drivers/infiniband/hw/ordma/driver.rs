// SPDX-License-Identifier: GPL-2.0

//! PCI glue: the ID table, probe and unbind.

use kernel::{device::Core, pci, prelude::*};

use crate::{device::OrdmaDevice, hw};

/// The PCI driver.
pub(crate) struct OrdmaDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <OrdmaDriver as pci::Driver>::IdInfo,
    [(hw::PCI_ID, ())]
);

impl pci::Driver for OrdmaDriver {
    type IdInfo = ();
    type Data<'bound> = OrdmaDevice<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        OrdmaDevice::new(pdev)
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.shutdown();
    }
}
