// SPDX-License-Identifier: GPL-2.0

//! The verbs ordma implements, answered from what the NIC reported (admin queue) and the
//! port state its events keep current; objects (PDs) live on the NIC, created by admin
//! commands.

use kernel::{
    device::Bound,
    pci,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

use crate::{
    admin::{AdminIrq, AdminQueue},
    driver::Bar0,
    event::EventQueue,
    hw, ib,
};

/// The driver side of one registered `ib_device`.
pub(crate) struct OrdmaVerbs<'bound> {
    pub(crate) attrs: hw::DeviceAttrs,
    pub(crate) port: hw::PortAttrs,
    pub(crate) events: &'bound EventQueue<'bound>,
    pub(crate) admin: &'bound AdminQueue,
    pub(crate) admin_irq: &'bound AdminIrq,
    pub(crate) bar: &'bound Bar0<'bound>,
    pub(crate) pdev: &'bound pci::Device<Bound>,
    /// Page frame number of doorbell page 0 (BAR2).
    pub(crate) db_pfn: u64,
    /// Doorbell pages in use, bit `i` for page `i`; page 0 is the kernel's.
    pub(crate) db_used: Atomic<u64>,
}

// The doorbell bitmap has a bit per page.
const _: () = assert!(hw::DB_PAGES >= 1 && hw::DB_PAGES <= 64);

impl OrdmaVerbs<'_> {
    /// The doorbell bitmap before any user context: only the kernel's page 0 taken, and
    /// every bit beyond `DB_PAGES`.
    pub(crate) fn initial_db_used() -> u64 {
        let beyond = u64::MAX.checked_shl(hw::DB_PAGES).unwrap_or(0);
        beyond | 1
    }

    fn admin(&self, opcode: u8, params: [u8; hw::AQ_SQE_SIZE - 8]) -> Result<u64> {
        self.admin
            .execute(self.pdev.as_ref(), self.bar, self.admin_irq, opcode, params)
    }
}

impl ib::Verbs for OrdmaVerbs<'_> {
    fn query_device(&self) -> Result<ib::DeviceAttr> {
        let a = &self.attrs;
        Ok(ib::DeviceAttr {
            fw_ver: a.fw_version,
            page_size_cap: a.page_size_cap,
            vendor_id: u32::from(hw::PCI_VENDOR_ID),
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            max_sge: a.max_sge,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_pd: a.max_pd,
        })
    }

    fn query_port(&self, port: u32) -> Result<ib::PortAttr> {
        if port != 1 {
            return Err(EINVAL);
        }
        let p = &self.port;
        Ok(ib::PortAttr {
            // The live state: the NIC's port events, not the probe-time answer.
            active: self.events.port_active(),
            max_mtu: p.max_mtu,
            active_mtu: p.active_mtu,
            lid: p.lid,
            sm_lid: p.sm_lid,
            max_msg_sz: p.max_msg_sz,
            width: p.link_width,
            speed: p.link_speed,
        })
    }

    fn port_guid(&self, _port: u32) -> u64 {
        self.port.port_guid
    }

    fn alloc_doorbell(&self) -> Result<ib::DoorbellPage> {
        let mut cur = self.db_used.load(Relaxed);
        loop {
            if cur == u64::MAX {
                dev_dbg!(self.pdev, "all doorbell pages are in use\n");
                return Err(ENOMEM);
            }
            let index = (!cur).trailing_zeros();
            match self.db_used.cmpxchg(cur, cur | 1 << index, Relaxed) {
                Ok(_) => {
                    return Ok(ib::DoorbellPage {
                        index,
                        pfn: self.db_pfn + u64::from(index),
                    })
                }
                Err(now) => cur = now,
            }
        }
    }

    fn free_doorbell(&self, index: u32) {
        if index == 0 || index >= hw::DB_PAGES {
            dev_warn!(
                self.pdev,
                "freeing doorbell page {index}, which is not a user's\n"
            );
            return;
        }
        let mut cur = self.db_used.load(Relaxed);
        loop {
            match self.db_used.cmpxchg(cur, cur & !(1 << index), Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    fn alloc_pd(&self) -> Result<u32> {
        let pdn = self.admin(hw::CMD_ALLOC_PD, [0; hw::AQ_SQE_SIZE - 8])?;
        // The NIC answers below `max_pd`, a u32; anything else is a broken NIC.
        u32::try_from(pdn).map_err(|_| {
            dev_err!(self.pdev, "ALLOC_PD returned PD number {pdn}\n");
            EIO
        })
    }

    fn dealloc_pd(&self, pdn: u32) {
        if let Err(e) = self.admin(hw::CMD_DEALLOC_PD, hw::PdParams { pdn }.encode()) {
            dev_err!(
                self.pdev,
                "DEALLOC_PD {pdn} failed (error {})\n",
                e.to_errno()
            );
        }
    }
}
