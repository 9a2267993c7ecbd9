// SPDX-License-Identifier: GPL-2.0

//! ordma as an ib_core driver: device and port queries answered from what the NIC
//! reported, and the objects, each in its own file (`ucontext.rs`, `pd.rs`, `mr.rs`,
//! `mw.rs`, `cq.rs`, `qp.rs`, `srq.rs`, `ah.rs`).

use kernel::{prelude::*, sync::Arc};

use crate::{
    ah::Ah,
    counters::{Counter, Reported},
    cq::Cq,
    hw,
    ib::{self, PortDesc, PortProtocol},
    mr::{Mr, MrLimits},
    mw::Mw,
    nic::Nic,
    pd::Pd,
    qp::{Qp, QpLimits},
    srq::{Srq, SrqLimits},
    uapi,
    ucontext::{DoorbellPage, Ucontext},
    OrdmaModule,
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
    /// The port as ib_core sees it: InfiniBand or RoCEv2, as the NIC said.
    ports: [PortDesc; 1],
    /// What the per-QP counters reported (`counters.rs`): the port's values less this.
    pub(crate) reported: Reported,
    /// The NIC's interface minor version (major 1): what it can do beyond 1.0.
    minor: u16,
}

impl<'bound> OrdmaIb<'bound> {
    /// The driver data of a NIC that answered `attrs` and `port` (port 1).
    ///
    /// On InfiniBand: one port without MADs (no QP0/QP1: no subnet management or GSI
    /// traffic; LIDs come from the NIC, `hardware.md`), one GID (the link-local one of its
    /// GUID) and one PKey (the default, full membership). On Ethernet (1.4): RoCEv2
    /// without MADs (kernel QPs, QP1 among them, are not supported yet: ib_mad and ib_cm
    /// leave the port alone instead of failing to open it), the NIC's GID table, which
    /// ib_core fills from the paired netdev's addresses, and the default PKey.
    ///
    /// # Errors
    ///
    /// `ENODEV` for a link layer this driver does not know, or an Ethernet port without
    /// a GID table.
    pub(crate) fn new(
        nic: Arc<Nic<'bound>>,
        minor: u16,
        attrs: hw::DeviceAttrs,
        port: hw::PortAttrs,
    ) -> Result<Self> {
        let protocol = match port.link_layer {
            // 0: a NIC before 1.4, InfiniBand.
            0 | hw::LINK_LAYER_INFINIBAND => PortProtocol::IbNoMad,
            hw::LINK_LAYER_ETHERNET if port.gid_tbl_len > 0 => {
                PortProtocol::RoceV2NoMad { mac: port.mac }
            }
            ll => {
                dev_err!(
                    nic.pdev,
                    "port 1: link layer {ll} with {} GIDs is not supported\n",
                    port.gid_tbl_len
                );
                return Err(ENODEV);
            }
        };
        let gid_tbl_len = if port.is_ethernet() {
            u16::try_from(port.gid_tbl_len).unwrap_or(u16::MAX)
        } else {
            1
        };
        let mut port = port;
        // What ib_core is told is what the address checks use.
        port.gid_tbl_len = gid_tbl_len.into();
        Ok(Self {
            nic,
            attrs,
            port,
            ports: [PortDesc {
                protocol,
                gid_tbl_len,
                pkey_tbl_len: 1,
            }],
            minor,
            reported: Reported::new(),
        })
    }
}

/// The NIC's port counters (`hardware.md`, "Port counters"), named as the NIC names them.
static HW_STATS: [ib::HwStat; hw::NUM_COUNTERS] = ib::hw_stats(&hw::COUNTERS);

#[vtable]
impl<'bound> ib::Driver for OrdmaIb<'bound> {
    type Module = OrdmaModule;
    const NAME: &'static CStr = c"ordma%d";
    const UVERBS_ABI_VERSION: u32 = uapi::UVERBS_ABI_VERSION;
    const NODE_TYPE: ib::NodeType = ib::NodeType::IbCa;
    const NUM_COMP_VECTORS: u32 = 1;

    type Ucontext = Ucontext<'bound>;
    type Pd = Pd<'bound>;
    type MmapEntry = DoorbellPage<'bound>;
    type Mr = Mr<'bound>;
    type Cq = Cq<'bound>;
    type Qp = Qp<'bound>;
    type Srq = Srq<'bound>;
    type Ah = Ah;
    type Mw = Mw<'bound>;
    type Counter = Counter;

    fn ports(&self) -> &[PortDesc] {
        &self.ports
    }

    fn query_device(&self) -> Result<ib::DeviceAttr> {
        let a = &self.attrs;
        Ok(ib::DeviceAttr {
            fw_ver: a.fw_version,
            // The NIC's MRs are bounded by their page lists only.
            max_mr_size: u64::MAX,
            page_size_cap: a.page_size_cap,
            vendor_id: u32::from(hw::PCI_VENDOR_ID),
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: a.max_qp,
            max_qp_wr: self.max_qp_wr(),
            max_send_sge: a.max_sge,
            max_recv_sge: a.max_sge,
            max_sge_rd: a.max_sge,
            max_cq: a.max_cq,
            max_cqe: self.max_cqe(),
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            max_pkeys: 1,
            // The NIC numbers CQs below `max_cq`, QPs from 2 below `max_qp + 2`, all in
            // 16 bits.
            cq_num_limit: a.max_cq.min(hw::MAX_QUEUE_NUM + 1),
            qp_num_limit: a
                .max_qp
                .saturating_add(hw::QPN_FIRST)
                .min(hw::MAX_QUEUE_NUM + 1),
            max_qp_rd_atom: hw::QP_MAX_RD_ATOMIC.into(),
            max_qp_init_rd_atom: hw::QP_MAX_RD_ATOMIC.into(),
            max_srq: a.max_srq,
            max_srq_wr: self.max_srq_wr(),
            max_srq_sge: a.max_srq_sge,
            // The NIC numbers SRQs below `max_srq`, in 16 bits.
            srq_num_limit: a.max_srq.min(hw::MAX_QUEUE_NUM + 1),
            // What the NIC says (`atomic_cap`, 1.2): any other value, none.
            atomic_cap: if a.atomic_cap == hw::ATOMIC_CAP_HCA {
                ib::AtomicCap::Hca
            } else {
                ib::AtomicCap::None
            },
            srq_resize: self.srq_limits().resize,
            atomic_write: self.flushes(),
            flush_global: self.flushes(),
            // Windows of types 1 and 2B (1.9); none before.
            max_mw: if self.windows() { a.max_mw } else { 0 },
            mem_window: self.windows(),
            mem_window_type_2b: self.windows(),
        })
    }

    fn query_port(&self, _port: u32) -> Result<ib::PortAttr> {
        let p = &self.port;
        Ok(ib::PortAttr {
            // The live state: the NIC's port events (and on Ethernet the netdev's), not
            // the probe-time answer.
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

    fn query_gid(&self, _port: u32, _index: u16) -> Result<[u8; 16]> {
        // fe80::/64 and the port's GUID.
        let mut gid = [0u8; 16];
        gid[..2].copy_from_slice(&[0xfe, 0x80]);
        gid[8..].copy_from_slice(&self.port.port_guid.to_be_bytes());
        Ok(gid)
    }

    fn query_pkey(&self, _port: u32, _index: u16) -> Result<u16> {
        // The default PKey, full membership.
        Ok(0xffff)
    }

    fn add_gid(&self, port: u32, index: u32, gid: &[u8; 16]) -> Result {
        self.nic.set_gid(port, index, gid, hw::GID_TYPE_ROCE_V2)
    }

    fn del_gid(&self, port: u32, index: u32) -> Result {
        self.nic.set_gid(port, index, &[0; 16], hw::GID_TYPE_NONE)
    }

    const HW_STATS: &'static [ib::HwStat] = &HW_STATS;

    fn hw_stats(&self, port: u32, values: &mut [u64]) -> Result {
        let counters = self.nic.query_counters(port)?;
        self.reported.port_values(&counters, values);
        Ok(())
    }

    fn counter_init(&self, _port: u32) -> impl PinInit<Counter> {
        self.new_counter()
    }

    fn counter_bind_qp(&self, counter: &Counter, qp: &Qp<'bound>) -> Result {
        self.bind_counter(counter, qp)
    }

    fn counter_unbind_qp(&self, counter: &Counter, qp: &Qp<'bound>) -> Result {
        self.unbind_counter(counter, qp)
    }

    fn counter_read(&self, counter: &Counter, values: &mut [u64]) -> Result {
        self.read_counter(counter, values)
    }

    fn netdev_changed(&self, port: u32, up: bool) {
        let changed = self.nic.set_port_netdev(up);
        let (netdev, state) = (
            if up { "up" } else { "down or gone" },
            if self.nic.port_active() {
                "ACTIVE"
            } else {
                "DOWN"
            },
        );
        if changed {
            dev_info!(
                self.nic.pdev,
                "port {port}: its netdev is {netdev}: port {state}\n"
            );
        }
    }

    fn alloc_ucontext<'a>(
        &'a self,
        uctx: &'a ib::UserContext<'a, Self>,
        udata: &'a ib::Udata<'a>,
    ) -> impl PinInit<Ucontext<'bound>, Error> + 'a {
        Ucontext::new(&self.nic, uctx, udata)
    }

    /// Nothing to stop: ib_core zaps the context's mappings (its doorbell page) itself and
    /// then destroys its objects through the usual verbs, on the running NIC.
    fn disassociate_ucontext(&self, _uctx: &Ucontext<'bound>) {}

    fn alloc_pd<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
    ) -> impl PinInit<Pd<'bound>, Error> + 'a {
        Pd::new(&self.nic, caller.udata())
    }

    fn reg_user_mr<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
        pd: &'a Pd<'bound>,
        mem: &'a ib::UserMemory<'a>,
    ) -> impl PinInit<Mr<'bound>, Error> + 'a {
        Mr::new(&self.nic, pd, mem, &self.mr_limits(), caller.udata())
    }

    fn rereg_user_mr<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
        mr: &mut Mr<'bound>,
        pd: &'a Pd<'bound>,
        mem: &'a ib::UserMemory<'a>,
    ) -> Result {
        mr.rereg(pd, mem, &self.mr_limits(), caller.udata())
    }

    fn create_cq<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
        init: &'a ib::CqInit,
    ) -> impl PinInit<Cq<'bound>, Error> + 'a {
        pin_init::pin_init_scope(move || {
            // A kernel CQ would need the fast path (poll, arm) in the kernel.
            let ib::Caller::User(u) = caller else {
                return Err(EOPNOTSUPP);
            };
            Cq::new(&self.nic, u.uctx, init, self.max_cqe(), u.pages, u.udata)
        })
    }

    fn resize_cq(
        &self,
        cq: &Cq<'bound>,
        cqe: u32,
        user: ib::UserModify<'_>,
        size: &ib::CqSize<'_>,
    ) -> Result {
        cq.resize(cqe, self.max_cqe(), self.resizes(), user, size)
    }

    fn create_qp<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
        pd: &'a Pd<'bound>,
        send_cq: &'a Cq<'bound>,
        recv_cq: &'a Cq<'bound>,
        srq: Option<&'a Srq<'bound>>,
        init: &'a ib::QpInit,
    ) -> impl PinInit<Qp<'bound>, Error> + 'a {
        pin_init::pin_init_scope(move || {
            // A kernel QP would need the fast path (post, poll) in the kernel.
            let ib::Caller::User(u) = caller else {
                return Err(EOPNOTSUPP);
            };
            let limits = QpLimits {
                max_wr: self.max_qp_wr(),
                max_sge: self.attrs.max_sge,
                port: self.port.shape(),
                flush: self.flushes(),
            };
            Qp::new(
                &self.nic, u.uctx, pd, send_cq, recv_cq, srq, init, &limits, u.pages, u.udata,
            )
        })
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

    fn create_srq<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
        pd: &'a Pd<'bound>,
        init: &'a ib::SrqInit,
    ) -> impl PinInit<Srq<'bound>, Error> + 'a {
        pin_init::pin_init_scope(move || {
            // A kernel SRQ would need the fast path (post_srq_recv) in the kernel.
            let ib::Caller::User(u) = caller else {
                return Err(EOPNOTSUPP);
            };
            Srq::new(
                &self.nic,
                u.uctx,
                pd,
                init,
                &self.srq_limits(),
                u.pages,
                u.udata,
            )
        })
    }

    fn modify_srq(
        &self,
        srq: &Srq<'bound>,
        attr: &ib::SrqAttr,
        mask: ib::SrqAttrMask,
        user: Option<ib::UserModify<'_>>,
    ) -> Result {
        srq.modify(attr, mask, user, &self.srq_limits())
    }

    fn query_srq(&self, srq: &Srq<'bound>) -> Result<ib::SrqAttr> {
        srq.query()
    }

    fn create_ah<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
        _pd: &'a Pd<'bound>,
        init: &'a ib::AhInit,
    ) -> impl PinInit<Ah, Error> + 'a {
        Ah::new(init, &self.port.shape(), caller.udata())
    }

    fn alloc_mw<'a>(
        &'a self,
        caller: ib::Caller<'a, Self>,
        pd: &'a Pd<'bound>,
        mw_type: ib::MwType,
    ) -> impl PinInit<Mw<'bound>, Error> + 'a {
        if self.windows() {
            Mw::new(&self.nic, pd, mw_type, caller.udata())
        } else {
            Err(EOPNOTSUPP)
        }
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

    /// Work requests per SRQ, likewise (the deepest ring has one slot free).
    fn max_srq_wr(&self) -> u32 {
        self.attrs.max_srq_wr.min(MAX_QUEUE_DEPTH - 1)
    }

    /// Whether the NIC resizes SRQs and CQs (`MODIFY_SRQ` bit 0, `RESIZE_CQ`): 1.7 on.
    fn resizes(&self) -> bool {
        self.minor >= 7
    }

    /// Whether the NIC executes IBTA 1.5's ATOMIC WRITE and FLUSH (interface 1.8; FLUSH to
    /// global visibility only).
    fn flushes(&self) -> bool {
        self.minor >= 8
    }

    /// Whether the NIC has memory windows, of types 1 and 2B (interface 1.9: `ALLOC_MW`,
    /// `DEALLOC_MW`, MRs' `MW_BIND`, the bind and invalidate work requests).
    fn windows(&self) -> bool {
        self.minor >= 9
    }

    /// Whether the NIC counts per QP (`CMD_QUERY_QP_COUNTERS`): 1.10 on.
    pub(crate) fn qp_counters(&self) -> bool {
        self.minor >= 10
    }

    /// What an MR is registered with.
    fn mr_limits(&self) -> MrLimits {
        MrLimits {
            page_size_cap: self.attrs.page_size_cap,
            mw_bind: self.windows(),
        }
    }

    /// What an SRQ is checked against.
    fn srq_limits(&self) -> SrqLimits {
        SrqLimits {
            max_wr: self.max_srq_wr(),
            max_sge: self.attrs.max_srq_sge,
            resize: self.resizes(),
        }
    }
}
