// SPDX-License-Identifier: GPL-2.0

//! ordma as an ib_core driver: device and port queries answered from what the NIC
//! reported, and the objects, each in its own file (`ucontext.rs`, `pd.rs`, `mr.rs`).

use kernel::{prelude::*, sync::Arc};

use crate::{
    hw, ib,
    mr::Mr,
    nic::Nic,
    pd::Pd,
    ucontext::{DoorbellPage, Ucontext},
};

/// The driver data of one registered `ib_device`.
pub(crate) struct OrdmaIb<'bound> {
    pub(crate) nic: Arc<Nic<'bound>>,
    /// What `QUERY_DEVICE` said at probe.
    pub(crate) attrs: hw::DeviceAttrs,
    /// What `QUERY_PORT` said at probe (the port's state is kept current by events).
    pub(crate) port: hw::PortAttrs,
}

impl<'bound> ib::Driver for OrdmaIb<'bound> {
    type Ucontext = Ucontext<'bound>;
    type Pd = Pd<'bound>;
    type MmapEntry = DoorbellPage<'bound>;
    type Mr = Mr<'bound>;

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
            active: self.nic.port_active(),
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

    fn alloc_ucontext(
        &self,
        uctx: &ib::UserContext<'_, Self>,
        udata: &ib::Udata<'_>,
    ) -> Result<Ucontext<'bound>> {
        Ucontext::new(&self.nic, uctx, udata)
    }

    fn alloc_pd(&self, udata: Option<&ib::Udata<'_>>) -> Result<Pd<'bound>> {
        Pd::new(&self.nic, udata)
    }

    fn reg_user_mr(
        &self,
        pd: &Pd<'bound>,
        mem: &ib::UserMemory<'_>,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result<(Mr<'bound>, ib::MrKeys)> {
        Mr::new(&self.nic, pd, mem, self.attrs.page_size_cap, udata)
    }
}
