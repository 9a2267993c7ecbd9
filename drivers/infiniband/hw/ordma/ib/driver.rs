// SPDX-License-Identifier: GPL-2.0

//! What a driver implements to be an ib_core device: the [`Driver`] trait, with one
//! associated type per object ib_core allocates for it, and the attributes it reports.

use kernel::prelude::*;

use super::{
    cq::{CqCreated, CqInit},
    mr::MrKeys,
    qp::{QpAttr, QpAttrMask, QpCaps, QpInit},
    ucontext::UserContext,
    udata::Udata,
    umem::{UserMemory, UserPages},
};

/// What a port reports, in ib_core's terms (the IB spec's encodings).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortAttr {
    /// `true` if the port is ACTIVE (else DOWN).
    pub(crate) active: bool,
    /// Largest MTU, as an `enum ib_mtu` code.
    pub(crate) max_mtu: u8,
    /// Current MTU code.
    pub(crate) active_mtu: u8,
    /// The port's LID.
    pub(crate) lid: u16,
    /// The subnet manager's LID.
    pub(crate) sm_lid: u16,
    /// Largest message size.
    pub(crate) max_msg_sz: u32,
    /// Link width code.
    pub(crate) width: u8,
    /// Link speed code.
    pub(crate) speed: u8,
}

/// What the device reports, in ib_core's terms.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeviceAttr {
    /// Firmware version, `major << 32 | minor << 16 | patch`.
    pub(crate) fw_ver: u64,
    /// Supported page sizes.
    pub(crate) page_size_cap: u64,
    /// PCI vendor ID.
    pub(crate) vendor_id: u32,
    /// Vendor part ID.
    pub(crate) vendor_part_id: u32,
    /// Hardware version.
    pub(crate) hw_ver: u32,
    /// QPs.
    pub(crate) max_qp: u32,
    /// Work requests per QP.
    pub(crate) max_qp_wr: u32,
    /// Scatter/gather entries per work request.
    pub(crate) max_sge: u32,
    /// CQs.
    pub(crate) max_cq: u32,
    /// Entries per CQ.
    pub(crate) max_cqe: u32,
    /// MRs.
    pub(crate) max_mr: u32,
    /// PDs.
    pub(crate) max_pd: u32,
    /// The driver's CQ numbers are below this.
    pub(crate) cq_num_limit: u32,
    /// The driver's QP numbers are below this.
    pub(crate) qp_num_limit: u32,
    /// Outstanding RDMA reads and atomics per QP, as initiator and as responder.
    pub(crate) max_qp_rd_atom: u32,
}

/// An ib_core device driver.
///
/// ib_core allocates every object (user context, PD, and to come CQ, QP, SRQ, AH) at the
/// size the driver declares and calls the driver to set it up (MRs, which ib_core does not
/// allocate, the binding allocates); the binding places the
/// driver's associated type inside that allocation, initialised in place, and drops it when
/// ib_core destroys the object. Destroying cannot fail towards ib_core, so an object's
/// `Drop` is its destroy verb: it releases what the object holds on the hardware.
pub(crate) trait Driver: Sync + Sized {
    /// The driver's part of a user context.
    type Ucontext: Send + Sync;
    /// The driver's part of a PD.
    type Pd: Send + Sync;
    /// The driver's part of an mmap entry (what a user context may map); dropped when the
    /// entry's last reference goes (the context's and every mapping's).
    type MmapEntry: Send + Sync;
    /// The driver's part of an MR.
    type Mr: Send + Sync;
    /// The driver's part of a CQ.
    type Cq: Send + Sync;
    /// The driver's part of a QP.
    type Qp: Send + Sync;

    /// Device attributes (`query_device`).
    fn query_device(&self) -> Result<DeviceAttr>;
    /// Attributes of `port` (1-based; ib_core checks the range).
    fn query_port(&self, port: u32) -> Result<PortAttr>;
    /// The port's GUID, for GID 0 (fe80::/64 + GUID).
    fn port_guid(&self, port: u32) -> u64;
    /// A new user context; `udata` holds the provider's request and takes the response.
    fn alloc_ucontext(
        &self,
        uctx: &UserContext<'_, Self>,
        udata: &Udata<'_>,
    ) -> Result<Self::Ucontext>;
    /// The device is going away under `uctx`: stop anything that would still reach the
    /// hardware through it. ib_core then destroys its objects and the context as usual.
    fn disassociate_ucontext(&self, _uctx: &Self::Ucontext) {}
    /// A new PD; `udata` is `None` for a kernel caller.
    fn alloc_pd(&self, udata: Option<&Udata<'_>>) -> Result<Self::Pd>;
    /// A new MR of `pd` over user memory `mem`, and its keys; `udata` is `None` for a
    /// kernel caller.
    fn reg_user_mr(
        &self,
        pd: &Self::Pd,
        mem: &UserMemory<'_>,
        udata: Option<&Udata<'_>>,
    ) -> Result<(Self::Mr, MrKeys)>;
    /// A new CQ of user context `uctx`, whose memory `mem` pins; `udata` holds the
    /// provider's request and takes the response. (Kernel CQs are not offered.)
    fn create_cq(
        &self,
        uctx: &Self::Ucontext,
        init: &CqInit,
        mem: &UserPages<'_>,
        udata: &Udata<'_>,
    ) -> Result<(Self::Cq, CqCreated)>;
    /// A new QP of user context `uctx` on `pd`, completing to `send_cq` and `recv_cq`;
    /// its number and the capabilities it has. (Kernel QPs are not offered.)
    #[expect(clippy::too_many_arguments)]
    fn create_qp(
        &self,
        uctx: &Self::Ucontext,
        pd: &Self::Pd,
        send_cq: &Self::Cq,
        recv_cq: &Self::Cq,
        init: &QpInit,
        mem: &UserPages<'_>,
        udata: &Udata<'_>,
    ) -> Result<(Self::Qp, u32, QpCaps)>;
    /// Modifies `qp`: the attributes `mask` names, from `attr`.
    fn modify_qp(
        &self,
        qp: &Self::Qp,
        attr: &QpAttr,
        mask: QpAttrMask,
        udata: Option<&Udata<'_>>,
    ) -> Result;
    /// `qp`'s attributes and capabilities.
    fn query_qp(&self, qp: &Self::Qp) -> Result<(QpAttr, QpCaps)>;
}

impl DeviceAttr {
    /// Fills ib_core's view; `sys_image_guid` is the node GUID (ib_core's byte order).
    pub(super) fn fill(&self, attr: &mut super::bindings::ib_device_attr, sys_image_guid: u64) {
        attr.fw_ver = self.fw_ver;
        attr.sys_image_guid = sys_image_guid;
        attr.max_mr_size = u64::MAX;
        attr.page_size_cap = self.page_size_cap;
        attr.vendor_id = self.vendor_id;
        attr.vendor_part_id = self.vendor_part_id;
        attr.hw_ver = self.hw_ver;
        attr.max_qp = self.max_qp;
        attr.max_qp_wr = self.max_qp_wr;
        attr.max_send_sge = self.max_sge;
        attr.max_recv_sge = self.max_sge;
        attr.max_sge_rd = self.max_sge;
        attr.max_cq = self.max_cq;
        attr.max_cqe = self.max_cqe;
        attr.max_mr = self.max_mr;
        attr.max_pd = self.max_pd;
        attr.max_pkeys = 1;
        attr.max_qp_rd_atom = self.max_qp_rd_atom;
        attr.max_qp_init_rd_atom = self.max_qp_rd_atom;
    }
}

impl PortAttr {
    /// Fills ib_core's view.
    pub(super) fn fill(&self, attr: &mut super::bindings::ib_port_attr) {
        use super::bindings as b;
        if self.active {
            attr.state = b::ib_port_state_IB_PORT_ACTIVE;
            // CAST: the enum's values fit the `u8` field.
            attr.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8;
        } else {
            attr.state = b::ib_port_state_IB_PORT_DOWN;
            // CAST: as above.
            attr.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8;
        }
        attr.max_mtu = b::ib_mtu::from(self.max_mtu);
        attr.active_mtu = b::ib_mtu::from(self.active_mtu);
        attr.gid_tbl_len = 1;
        attr.pkey_tbl_len = 1;
        attr.max_msg_sz = self.max_msg_sz;
        attr.lid = u32::from(self.lid);
        attr.sm_lid = u32::from(self.sm_lid);
        attr.active_width = self.width;
        attr.active_speed = u16::from(self.speed);
    }
}

/// Writes `major.minor.patch` of a `major << 32 | minor << 16 | patch` version into `buf`
/// as a NUL-terminated string, truncated to fit.
pub(super) fn format_fw_version(fw_ver: u64, buf: &mut [u8]) {
    let mut w = Truncating { buf, len: 0 };
    let _ = core::fmt::Write::write_fmt(
        &mut w,
        format_args!(
            "{}.{}.{}",
            fw_ver >> 32,
            (fw_ver >> 16) & 0xffff,
            fw_ver & 0xffff
        ),
    );
    let len = w.len;
    if let Some(b) = buf.get_mut(len) {
        *b = 0;
    }
}

/// Formats into a buffer, keeping one byte for the NUL and dropping what does not fit.
struct Truncating<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl core::fmt::Write for Truncating<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &c in s.as_bytes() {
            if self.len + 1 >= self.buf.len() {
                break;
            }
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = c;
                self.len += 1;
            }
        }
        Ok(())
    }
}
