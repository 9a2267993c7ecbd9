// SPDX-License-Identifier: GPL-2.0

//! The verbs ordma implements, answered from what the NIC reported (admin queue) and the
//! port state its events keep current.

use kernel::prelude::*;

use crate::{event::EventQueue, hw, ib};

/// The driver side of one registered `ib_device`.
pub(crate) struct OrdmaVerbs<'bound> {
    pub(crate) attrs: hw::DeviceAttrs,
    pub(crate) port: hw::PortAttrs,
    pub(crate) events: &'bound EventQueue<'bound>,
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
}
