// SPDX-License-Identifier: GPL-2.0

//! ordma as an ib_core driver: device and port queries answered from what the NIC
//! reported, and the objects, each in its own file (`ucontext.rs`, `pd.rs`, `mr.rs`,
//! `cq.rs`, `qp.rs`).

use kernel::{prelude::*, sync::Arc};

use crate::{
    cq::Cq,
    hw, ib,
    mr::Mr,
    nic::Nic,
    pd::Pd,
    qp::{Qp, QpLimits},
    ucontext::{DoorbellPage, Ucontext},
};

/// The deepest queue the NIC takes (free-running 16-bit indices).
const MAX_QUEUE_DEPTH: u32 = 1 << hw::MAX_QUEUE_LOG_DEPTH;

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
    type Cq = Cq<'bound>;
    type Qp = Qp<'bound>;

    fn query_device(&self) -> Result<ib::DeviceAttr> {
        let a = &self.attrs;
        Ok(ib::DeviceAttr {
            fw_ver: a.fw_version,
            page_size_cap: a.page_size_cap,
            vendor_id: u32::from(hw::PCI_VENDOR_ID),
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: a.max_qp,
            max_qp_wr: self.max_qp_wr(),
            max_sge: a.max_sge,
            max_cq: a.max_cq,
            max_cqe: self.max_cqe(),
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            // The NIC numbers CQs below `max_cq`, QPs from 2 below `max_qp + 2`, all in
            // 16 bits.
            cq_num_limit: a.max_cq.min(hw::MAX_QUEUE_NUM + 1),
            qp_num_limit: a
                .max_qp
                .saturating_add(hw::QPN_FIRST)
                .min(hw::MAX_QUEUE_NUM + 1),
            max_qp_rd_atom: hw::QP_MAX_RD_ATOMIC.into(),
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

    fn create_cq(
        &self,
        uctx: &Ucontext<'bound>,
        init: &ib::CqInit,
        pages: &ib::UserPages<'_>,
        udata: &ib::Udata<'_>,
    ) -> Result<(Cq<'bound>, ib::CqCreated)> {
        Cq::new(&self.nic, uctx, init, self.max_cqe(), pages, udata)
    }

    fn create_qp(
        &self,
        uctx: &Ucontext<'bound>,
        pd: &Pd<'bound>,
        send_cq: &Cq<'bound>,
        recv_cq: &Cq<'bound>,
        init: &ib::QpInit,
        pages: &ib::UserPages<'_>,
        udata: &ib::Udata<'_>,
    ) -> Result<(Qp<'bound>, u32, ib::QpCaps)> {
        let limits = QpLimits {
            max_wr: self.max_qp_wr(),
            max_sge: self.attrs.max_sge,
            max_mtu: self.port.active_mtu,
        };
        Qp::new(
            &self.nic, uctx, pd, send_cq, recv_cq, init, &limits, pages, udata,
        )
    }

    fn modify_qp(
        &self,
        qp: &Qp<'bound>,
        attr: &ib::QpAttr,
        mask: ib::QpAttrMask,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result {
        qp.modify(attr, mask, udata)
    }

    fn query_qp(&self, qp: &Qp<'bound>) -> Result<(ib::QpAttr, ib::QpCaps)> {
        qp.query()
    }
}

impl OrdmaIb<'_> {
    /// Entries per CQ: what the NIC reports, within what its queues can be.
    fn max_cqe(&self) -> u32 {
        self.attrs.max_cqe.min(MAX_QUEUE_DEPTH)
    }

    /// Work requests per queue, likewise.
    fn max_qp_wr(&self) -> u32 {
        self.attrs.max_qp_wr.min(MAX_QUEUE_DEPTH)
    }
}
