// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: `struct ib_qp` with the driver's [`Driver::Qp`] inside, the creator's
//! request, and `struct ib_qp_attr` as plain Rust values both ways.

use core::mem::MaybeUninit;

use kernel::{prelude::*, types::Opaque};

use super::{bindings as b, driver::Driver};

/// A QP as ib_core allocates it (`size_ib_qp`): the `ib_qp` (ib_core's, which it writes
/// while the QP lives, e.g. its use count: only reached through raw pointers), then the
/// driver's data, initialised in place by `create_qp` and dropped by `destroy_qp`. Its
/// number (`ib_qp.qp_num`) is its key in the device's event table.
#[repr(C)]
pub(super) struct IbQp<T: Driver> {
    pub(super) ib: Opaque<b::ib_qp>,
    /// Every send work request completes (`IB_SIGNAL_ALL_WR`), as created.
    pub(super) sq_sig_all: bool,
    pub(super) data: MaybeUninit<T::Qp>,
}

/// A QP's capabilities (`struct ib_qp_cap`): asked for at create, then what it has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpCaps {
    /// Send work requests outstanding at once.
    pub(crate) max_send_wr: u32,
    /// Receive work requests outstanding at once.
    pub(crate) max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub(crate) max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub(crate) max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub(crate) max_inline_data: u32,
}

impl QpCaps {
    fn from_raw(c: &b::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    pub(super) fn fill(&self, c: &mut b::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// QP transport types the binding names (`enum ib_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// Any other (special QPs, XRC, raw packet, driver-specific).
    Other(b::ib_qp_type),
}

impl QpType {
    fn from_raw(t: b::ib_qp_type) -> Self {
        match t {
            b::ib_qp_type_IB_QPT_RC => Self::Rc,
            b::ib_qp_type_IB_QPT_UC => Self::Uc,
            b::ib_qp_type_IB_QPT_UD => Self::Ud,
            other => Self::Other(other),
        }
    }

    fn to_raw(self) -> b::ib_qp_type {
        match self {
            Self::Rc => b::ib_qp_type_IB_QPT_RC,
            Self::Uc => b::ib_qp_type_IB_QPT_UC,
            Self::Ud => b::ib_qp_type_IB_QPT_UD,
            Self::Other(t) => t,
        }
    }
}

/// What the creator asks of a new QP (`struct ib_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpInit {
    /// The transport.
    pub(crate) qp_type: QpType,
    /// Capabilities asked for; the driver answers what the QP has.
    pub(crate) caps: QpCaps,
    /// Receives through a shared receive queue (the creator's SRQ is passed beside).
    pub(crate) has_srq: bool,
    /// Receives through an XRC domain or an RSS indirection table.
    pub(crate) other_receive: bool,
    /// Every send work request completes with a CQE (`IB_SIGNAL_ALL_WR`).
    pub(crate) sq_sig_all: bool,
    /// `IB_QP_CREATE_*`.
    pub(crate) create_flags: u32,
}

impl QpInit {
    pub(super) fn from_raw(a: &b::ib_qp_init_attr) -> Self {
        Self {
            qp_type: QpType::from_raw(a.qp_type),
            caps: QpCaps::from_raw(&a.cap),
            has_srq: !a.srq.is_null(),
            other_receive: !a.xrcd.is_null() || !a.rwq_ind_tbl.is_null(),
            sq_sig_all: a.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR,
            create_flags: a.create_flags,
        }
    }
}

/// An attribute mask of `modify_qp`/`query_qp` (`enum ib_qp_attr_mask`'s bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpAttrMask(u32);

impl QpAttrMask {
    /// `IB_QP_STATE`.
    pub(crate) const STATE: u32 = b::ib_qp_attr_mask_IB_QP_STATE;
    /// `IB_QP_CUR_STATE`.
    pub(crate) const CUR_STATE: u32 = b::ib_qp_attr_mask_IB_QP_CUR_STATE;
    /// `IB_QP_AV`.
    pub(crate) const AV: u32 = b::ib_qp_attr_mask_IB_QP_AV;

    /// The mask's bits (the `IB_QP_*` values).
    pub(crate) fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `bits` is set.
    pub(crate) fn has(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
}

/// The address vector of a QP's path or an AH (the part of `struct rdma_ah_attr` an
/// InfiniBand or a RoCE port uses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AhAttr {
    /// Destination LID (InfiniBand; 0 for RoCE).
    pub(crate) dlid: u16,
    /// Service level.
    pub(crate) sl: u8,
    /// Source path bits (InfiniBand; 0 for RoCE).
    pub(crate) src_path_bits: u8,
    /// `enum ib_rate`.
    pub(crate) static_rate: u8,
    /// Port number.
    pub(crate) port_num: u32,
    /// The global route, with `IB_AH_GRH`.
    pub(crate) grh: Option<Grh>,
    /// A RoCE address (`RDMA_AH_ATTR_TYPE_ROCE`): the destination MAC, as ib_core resolved
    /// it; `None` for an InfiniBand one.
    pub(crate) dmac: Option<[u8; 6]>,
}

/// A global route header's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Grh {
    /// Destination GID.
    pub(crate) dgid: [u8; 16],
    /// Flow label.
    pub(crate) flow_label: u32,
    /// Source GID index.
    pub(crate) sgid_index: u8,
    /// Hop limit.
    pub(crate) hop_limit: u8,
    /// Traffic class.
    pub(crate) traffic_class: u8,
}

impl AhAttr {
    /// `None` for an address vector that is neither of the IB type nor of the RoCE one
    /// (OPA, unset).
    pub(super) fn from_raw(a: &b::rdma_ah_attr) -> Option<Self> {
        let (ib, dmac) = match a.type_ {
            // SAFETY: the type says the `ib` member of the union is the one in use.
            b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_IB => (unsafe { a.__bindgen_anon_1.ib }, None),
            b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE => (
                b::ib_ah_attr::default(),
                // SAFETY: the type says the `roce` member of the union is the one in use.
                Some(unsafe { a.__bindgen_anon_1.roce.dmac }),
            ),
            _ => return None,
        };
        let grh = (u32::from(a.ah_flags) & b::ib_ah_flags_IB_AH_GRH != 0).then_some(Grh {
            // SAFETY: every bit pattern of the union's 16 bytes is a valid `raw` array.
            dgid: unsafe { a.grh.dgid.raw },
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        });
        Some(Self {
            dlid: ib.dlid,
            sl: a.sl,
            src_path_bits: ib.src_path_bits,
            static_rate: a.static_rate,
            port_num: a.port_num,
            grh,
            dmac,
        })
    }

    fn fill(&self, a: &mut b::rdma_ah_attr) {
        match self.dmac {
            None => {
                a.type_ = b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_IB;
                a.__bindgen_anon_1.ib = b::ib_ah_attr {
                    dlid: self.dlid,
                    src_path_bits: self.src_path_bits,
                };
            }
            Some(dmac) => {
                a.type_ = b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
                a.__bindgen_anon_1.roce = b::roce_ah_attr { dmac };
            }
        }
        a.sl = self.sl;
        a.static_rate = self.static_rate;
        a.port_num = self.port_num;
        if let Some(g) = &self.grh {
            // CAST: the flag's value fits the `u8` field.
            a.ah_flags = b::ib_ah_flags_IB_AH_GRH as u8;
            a.grh.dgid.raw = g.dgid;
            a.grh.flow_label = g.flow_label;
            a.grh.sgid_index = g.sgid_index;
            a.grh.hop_limit = g.hop_limit;
            a.grh.traffic_class = g.traffic_class;
        }
    }
}

/// A QP's attributes (`struct ib_qp_attr`, the fields an IB port's RC QP uses; the
/// alternate path is not carried: a driver that sees `IB_QP_ALT_PATH` refuses it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpAttr {
    /// `enum ib_qp_state`: the state to move to, or the state.
    pub(crate) qp_state: u8,
    /// The state the caller believes the QP is in.
    pub(crate) cur_qp_state: u8,
    /// `enum ib_mtu`.
    pub(crate) path_mtu: u8,
    /// `enum ib_mig_state`.
    pub(crate) path_mig_state: u8,
    /// Q_Key.
    pub(crate) qkey: u32,
    /// Receive PSN.
    pub(crate) rq_psn: u32,
    /// Send PSN.
    pub(crate) sq_psn: u32,
    /// Destination QP number.
    pub(crate) dest_qp_num: u32,
    /// `IB_ACCESS_REMOTE_*` flags.
    pub(crate) qp_access_flags: u32,
    /// PKey index.
    pub(crate) pkey_index: u16,
    /// Raise `IB_EVENT_SQ_DRAINED` in SQD.
    pub(crate) en_sqd_async_notify: u8,
    /// The SQ is draining (query).
    pub(crate) sq_draining: u8,
    /// Outstanding reads/atomics as initiator.
    pub(crate) max_rd_atomic: u8,
    /// Outstanding reads/atomics as responder.
    pub(crate) max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer code.
    pub(crate) min_rnr_timer: u8,
    /// Port number.
    pub(crate) port_num: u32,
    /// Local ACK timeout code.
    pub(crate) timeout: u8,
    /// Transport retries.
    pub(crate) retry_cnt: u8,
    /// RNR retries.
    pub(crate) rnr_retry: u8,
    /// Rate limit (kbps).
    pub(crate) rate_limit: u32,
    /// The primary path.
    pub(crate) ah: AhAttr,
}

impl QpAttr {
    /// The attributes `mask` names, as plain values.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an address vector (in `mask`) that is neither IB nor RoCE, or an enum value
    /// out of range.
    pub(super) fn from_raw(a: &b::ib_qp_attr, mask: QpAttrMask) -> Result<Self> {
        let ah = if mask.has(QpAttrMask::AV) {
            AhAttr::from_raw(&a.ah_attr).ok_or(EINVAL)?
        } else {
            AhAttr::default()
        };
        let small = |v: u32| u8::try_from(v).map_err(|_| EINVAL);
        Ok(Self {
            qp_state: small(a.qp_state)?,
            cur_qp_state: small(a.cur_qp_state)?,
            path_mtu: small(a.path_mtu)?,
            path_mig_state: small(a.path_mig_state)?,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            // CAST: the `int` holds flag bits.
            qp_access_flags: a.qp_access_flags as u32,
            pkey_index: a.pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify,
            sq_draining: a.sq_draining,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            rate_limit: a.rate_limit,
            ah,
        })
    }

    /// Fills ib_core's view (which the caller zeroed).
    pub(super) fn fill(&self, a: &mut b::ib_qp_attr) {
        a.qp_state = b::ib_qp_state::from(self.qp_state);
        a.cur_qp_state = b::ib_qp_state::from(self.cur_qp_state);
        a.path_mtu = b::ib_mtu::from(self.path_mtu);
        a.path_mig_state = b::ib_mig_state::from(self.path_mig_state);
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qp_num;
        // CAST: flag bits back into the `int`.
        a.qp_access_flags = self.qp_access_flags as i32;
        a.pkey_index = self.pkey_index;
        a.en_sqd_async_notify = self.en_sqd_async_notify;
        a.sq_draining = self.sq_draining;
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.port_num = self.port_num;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
        a.rate_limit = self.rate_limit;
        self.ah.fill(&mut a.ah_attr);
    }
}

/// Whether a modify from `cur` to `next` with `mask` is valid for a QP of type `qp_type`,
/// by ib_core's own table (`ib_modify_qp_is_ok`). States out of range are invalid.
pub(crate) fn modify_qp_is_ok(cur: u8, next: u8, qp_type: QpType, mask: QpAttrMask) -> bool {
    let last = b::ib_qp_state_IB_QPS_ERR;
    if u32::from(cur) > last || u32::from(next) > last {
        return false;
    }
    // SAFETY: a pure function of its arguments; both states are in the enum's range (the
    // table is indexed by them).
    unsafe {
        b::ib_modify_qp_is_ok(
            u32::from(cur),
            u32::from(next),
            qp_type.to_raw(),
            mask.bits(),
        )
    }
}

impl QpAttrMask {
    /// The mask ib_core passed.
    pub(super) fn from_raw(mask: i32) -> Self {
        // CAST: the `int` holds flag bits.
        Self(mask as u32)
    }
}
