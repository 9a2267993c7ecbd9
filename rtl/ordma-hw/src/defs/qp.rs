// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: `CMD_CREATE_QP`, `CMD_MODIFY_QP`, `CMD_QUERY_QP`, `CMD_DESTROY_QP`, the
//! attribute buffer, and the RC and UC state machines.

use super::*;

/// QP type: reliable connected (`IB_QPT_RC`).
pub const QP_TYPE_RC: u8 = 2;
/// QP type: unreliable connected (`IB_QPT_UC`; 1.2): SEND and WRITE, no ACKs, no
/// retransmission.
pub const QP_TYPE_UC: u8 = 3;
/// QP type: unreliable datagram (`IB_QPT_UD`; 1.3): SEND and SEND with immediate of at
/// most the path MTU, each WQE addressed by its datagram segment ([`UdSeg`]).
pub const QP_TYPE_UD: u8 = 4;
/// QP numbers start here: 0 and 1 are the IB special QPs' (SMI, GSI).
pub const QPN_FIRST: u32 = 2;
/// The largest CQN or QPN: doorbells carry it in 16 bits.
pub const MAX_QUEUE_NUM: u32 = 0xffff;
/// `CMD_CREATE_QP` flag (1.2): the QP receives through an SRQ (`rq_root` low 32 bits =
/// SRQN, every other `rq_*` field and `max_recv_sge` zero; [`CreateQpParams::srqn`]).
pub const QP_FLAG_SRQ: u8 = 1 << 0;
/// Bytes a send WQE needs besides its SGEs (a 16-byte control segment and a 16-byte
/// remote-address segment); `sq_wqe_size >= SQ_WQE_BASE + 16 * max_send_sge` and
/// `>= SQ_WQE_BASE + max_inline` (UD: [`SQ_WQE_UD_DATA`] in place of `SQ_WQE_BASE`).
pub const SQ_WQE_BASE: u32 = 32;
/// Bytes a receive WQE needs besides its SGEs (a 16-byte control segment).
pub const RQ_WQE_BASE: u32 = 16;
/// Bytes of one scatter/gather entry in a WQE.
pub const WQE_SGE_SIZE: u32 = 16;
/// Smallest log2 WQE size (64 bytes).
pub const WQE_LOG_SIZE_MIN: u8 = 6;
/// Largest log2 WQE size (1 KiB).
pub const WQE_LOG_SIZE_MAX: u8 = 10;
/// The deepest `max_rd_atomic` / `max_dest_rd_atomic` the NIC takes (`max_qp_rd_atom`).
pub const QP_MAX_RD_ATOMIC: u8 = 16;

/// One work queue of a QP (the SQ or the RQ) as `CMD_CREATE_QP` describes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkQueue {
    /// log2 of the number of WQEs, 0..=[`MAX_QUEUE_LOG_DEPTH`], at most `max_qp_wr`.
    pub log_depth: u8,
    /// log2 of the WQE size, [`WQE_LOG_SIZE_MIN`]..=[`WQE_LOG_SIZE_MAX`].
    pub log_wqe_size: u8,
    /// The ring's pages; all zero for a QP without an RQ.
    pub ring: PageList,
}

/// `CMD_CREATE_QP` parameters.
///
/// Layout in `params`: `qp_type` u8 @0, `db_page` bits 7:0 u8 @1, `max_send_sge` u8 @2,
/// `max_recv_sge` u8 @3, `pdn` u32 @4, `send_cqn` u32 @8, `recv_cqn` u32 @12, `max_inline`
/// u16 @16, `sq_log_depth` u8 @18, `sq_log_wqe_size` u8 @19, `rq_log_depth` u8 @20,
/// `rq_log_wqe_size` u8 @21, `flags` u8 @22 (`QP_FLAG_*`), `db_page` bits 15:8 u8 @23
/// (reserved before interface 1.6, whose 2048 pages need them), `sq_root` u64
/// @24, `rq_root` u64 @32, `sq_npages` u32 @40, `rq_npages` u32 @44, `sq_page_shift` u8 @48,
/// `sq_pt_levels` u8 @49, `rq_page_shift` u8 @50, `rq_pt_levels` u8 @51, reserved u32 @52.
/// A QP without an RQ (send only) has every `rq_*` field zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQpParams {
    /// `QP_TYPE_*`.
    pub qp_type: u8,
    /// The doorbell page (user context) that owns the QP; its CQs must have the same; two
    /// bytes apart in the layout.
    pub db_page: u16,
    /// Most SGEs per send WR, at most `max_sge`.
    pub max_send_sge: u8,
    /// Most SGEs per receive WR, at most `max_sge`.
    pub max_recv_sge: u8,
    /// The PD.
    pub pdn: u32,
    /// The CQ of send completions.
    pub send_cqn: u32,
    /// The CQ of receive completions.
    pub recv_cqn: u32,
    /// Most inline bytes per send WR.
    pub max_inline: u16,
    /// `QP_FLAG_*`.
    pub flags: u8,
    /// The send queue.
    pub sq: WorkQueue,
    /// The receive queue.
    pub rq: WorkQueue,
}

impl CreateQpParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        p[0] = self.qp_type;
        let [page_lo, page_hi] = self.db_page.to_le_bytes();
        p[1] = page_lo;
        p[2] = self.max_send_sge;
        p[3] = self.max_recv_sge;
        put_le32(&mut p, 4, self.pdn);
        put_le32(&mut p, 8, self.send_cqn);
        put_le32(&mut p, 12, self.recv_cqn);
        put_le16(&mut p, 16, self.max_inline);
        p[18] = self.sq.log_depth;
        p[19] = self.sq.log_wqe_size;
        p[20] = self.rq.log_depth;
        p[21] = self.rq.log_wqe_size;
        p[22] = self.flags;
        p[23] = page_hi;
        put_le64(&mut p, 24, self.sq.ring.root);
        put_le64(&mut p, 32, self.rq.ring.root);
        put_le32(&mut p, 40, self.sq.ring.npages);
        put_le32(&mut p, 44, self.rq.ring.npages);
        p[48] = self.sq.ring.page_shift;
        p[49] = self.sq.ring.levels;
        p[50] = self.rq.ring.page_shift;
        p[51] = self.rq.ring.levels;
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if !zero(p, 52..p.len()) {
            return None;
        }
        Some(Self {
            qp_type: p[0],
            db_page: u16::from_le_bytes([p[1], p[23]]),
            max_send_sge: p[2],
            max_recv_sge: p[3],
            pdn: get_le32(p, 4)?,
            send_cqn: get_le32(p, 8)?,
            recv_cqn: get_le32(p, 12)?,
            max_inline: get_le16(p, 16)?,
            flags: p[22],
            sq: WorkQueue {
                log_depth: p[18],
                log_wqe_size: p[19],
                ring: PageList {
                    root: get_le64(p, 24)?,
                    npages: get_le32(p, 40)?,
                    page_shift: p[48],
                    levels: p[49],
                },
            },
            rq: WorkQueue {
                log_depth: p[20],
                log_wqe_size: p[21],
                ring: PageList {
                    root: get_le64(p, 32)?,
                    npages: get_le32(p, 44)?,
                    page_shift: p[50],
                    levels: p[51],
                },
            },
        })
    }
}

/// `CMD_MODIFY_QP` parameters.
///
/// Layout in `params`: `qpn` u32 @0, `attr_mask` u32 @4 (`QP_ATTR_*`), `attr_addr` u64 @8
/// (a [`QpAttr`] buffer), `attr_len` u32 @16 (at least [`QP_ATTR_SIZE`]), the rest zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifyQpParams {
    /// The QP.
    pub qpn: u32,
    /// Which attributes to change (`QP_ATTR_*`, the `IB_QP_*` bit values).
    pub attr_mask: u32,
    /// Bus address of the [`QpAttr`] buffer.
    pub attr_addr: u64,
    /// Its length.
    pub attr_len: u32,
}

impl ModifyQpParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.qpn);
        put_le32(&mut p, 4, self.attr_mask);
        put_le64(&mut p, 8, self.attr_addr);
        put_le32(&mut p, 16, self.attr_len);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        zero(p, 20..p.len()).then_some(())?;
        Some(Self {
            qpn: get_le32(p, 0)?,
            attr_mask: get_le32(p, 4)?,
            attr_addr: get_le64(p, 8)?,
            attr_len: get_le32(p, 16)?,
        })
    }
}

/// `CMD_QUERY_QP` parameters.
///
/// Layout in `params`: `qpn` u32 @0, reserved u32 @4, `resp_addr` u64 @8, `resp_len` u32
/// @16, the rest zero. The NIC writes `min(resp_len, QP_ATTR_SIZE)` bytes of [`QpAttr`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryQpParams {
    /// The QP.
    pub qpn: u32,
    /// Bus address of the response buffer.
    pub resp_addr: u64,
    /// Its length.
    pub resp_len: u32,
}

impl QueryQpParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.qpn);
        put_le64(&mut p, 8, self.resp_addr);
        put_le32(&mut p, 16, self.resp_len);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if !zero(p, 4..8) || !zero(p, 20..p.len()) {
            return None;
        }
        Some(Self {
            qpn: get_le32(p, 0)?,
            resp_addr: get_le64(p, 8)?,
            resp_len: get_le32(p, 16)?,
        })
    }
}

/// QP state `RESET` (`enum ib_qp_state`'s values).
pub const QPS_RESET: u8 = 0;
/// QP state `INIT`.
pub const QPS_INIT: u8 = 1;
/// QP state `RTR` (ready to receive).
pub const QPS_RTR: u8 = 2;
/// QP state `RTS` (ready to send).
pub const QPS_RTS: u8 = 3;
/// QP state `SQD` (send queue drained).
pub const QPS_SQD: u8 = 4;
/// QP state `SQE` (send queue error).
pub const QPS_SQE: u8 = 5;
/// QP state `ERR`.
pub const QPS_ERR: u8 = 6;

/// `attr_mask` bit: `qp_state` is the state to move to (`IB_QP_STATE`).
pub const QP_ATTR_STATE: u32 = 1 << 0;
/// `attr_mask` bit: `cur_qp_state` (`IB_QP_CUR_STATE`).
pub const QP_ATTR_CUR_STATE: u32 = 1 << 1;
/// `attr_mask` bit: `en_sqd_async_notify` (`IB_QP_EN_SQD_ASYNC_NOTIFY`).
pub const QP_ATTR_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
/// `attr_mask` bit: `qp_access_flags` (`IB_QP_ACCESS_FLAGS`).
pub const QP_ATTR_ACCESS_FLAGS: u32 = 1 << 3;
/// `attr_mask` bit: `pkey_index` (`IB_QP_PKEY_INDEX`).
pub const QP_ATTR_PKEY_INDEX: u32 = 1 << 4;
/// `attr_mask` bit: `port_num` (`IB_QP_PORT`).
pub const QP_ATTR_PORT: u32 = 1 << 5;
/// `attr_mask` bit: `qkey` (`IB_QP_QKEY`; UD only).
pub const QP_ATTR_QKEY: u32 = 1 << 6;
/// `attr_mask` bit: the address vector `ah` (`IB_QP_AV`).
pub const QP_ATTR_AV: u32 = 1 << 7;
/// `attr_mask` bit: `path_mtu` (`IB_QP_PATH_MTU`).
pub const QP_ATTR_PATH_MTU: u32 = 1 << 8;
/// `attr_mask` bit: `timeout` (`IB_QP_TIMEOUT`).
pub const QP_ATTR_TIMEOUT: u32 = 1 << 9;
/// `attr_mask` bit: `retry_cnt` (`IB_QP_RETRY_CNT`).
pub const QP_ATTR_RETRY_CNT: u32 = 1 << 10;
/// `attr_mask` bit: `rnr_retry` (`IB_QP_RNR_RETRY`).
pub const QP_ATTR_RNR_RETRY: u32 = 1 << 11;
/// `attr_mask` bit: `rq_psn` (`IB_QP_RQ_PSN`).
pub const QP_ATTR_RQ_PSN: u32 = 1 << 12;
/// `attr_mask` bit: `max_rd_atomic` (`IB_QP_MAX_QP_RD_ATOMIC`).
pub const QP_ATTR_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
/// `attr_mask` bit: the alternate path (`IB_QP_ALT_PATH`); not supported (`AQ_BAD_PARAM`).
pub const QP_ATTR_ALT_PATH: u32 = 1 << 14;
/// `attr_mask` bit: `min_rnr_timer` (`IB_QP_MIN_RNR_TIMER`).
pub const QP_ATTR_MIN_RNR_TIMER: u32 = 1 << 15;
/// `attr_mask` bit: `sq_psn` (`IB_QP_SQ_PSN`).
pub const QP_ATTR_SQ_PSN: u32 = 1 << 16;
/// `attr_mask` bit: `max_dest_rd_atomic` (`IB_QP_MAX_DEST_RD_ATOMIC`).
pub const QP_ATTR_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
/// `attr_mask` bit: `path_mig_state` (`IB_QP_PATH_MIG_STATE`); only `MIGRATED` (0).
pub const QP_ATTR_PATH_MIG_STATE: u32 = 1 << 18;
/// `attr_mask` bit: capabilities (`IB_QP_CAP`); never valid for the NIC.
pub const QP_ATTR_CAP: u32 = 1 << 19;
/// `attr_mask` bit: `dest_qp_num` (`IB_QP_DEST_QPN`).
pub const QP_ATTR_DEST_QPN: u32 = 1 << 20;
/// `attr_mask` bit: `rate_limit` (`IB_QP_RATE_LIMIT`); not supported (`AQ_BAD_PARAM`).
pub const QP_ATTR_RATE_LIMIT: u32 = 1 << 25;

/// Size of the [`QpAttr`] buffer of `CMD_MODIFY_QP` and `CMD_QUERY_QP`.
pub const QP_ATTR_SIZE: usize = 128;
/// Offset of the address vector ([`QpAh`]) in [`QpAttr`].
pub const QP_ATTR_AH_OFFSET: usize = 48;
/// Size of [`QpAh`].
pub const QP_AH_SIZE: usize = 48;
/// `QpAh::ah_flags` bit: the GRH fields are valid (`IB_AH_GRH`).
pub const AH_FLAG_GRH: u8 = 1 << 0;

/// An address vector (48 bytes, little-endian), the part of `ib_ah_attr` the NIC needs.
///
/// Layout: `dlid` u16 @0, `sl` u8 @2, `src_path_bits` u8 @3, `static_rate` u8 @4,
/// `ah_flags` u8 @5 (`AH_FLAG_*`), `port_num` u8 @6, reserved u8 @7, `dgid` 16 bytes @8,
/// `flow_label` u32 @24, `sgid_index` u8 @28, `hop_limit` u8 @29, `traffic_class` u8 @30,
/// reserved u8 @31, `dmac` 6 bytes @32 (1.4: an Ethernet port's destination MAC, as
/// ib_core resolved it; zero on InfiniBand), reserved @38..48, zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAh {
    /// Destination LID (0 on Ethernet).
    pub dlid: u16,
    /// Service level, 0..=15 (Ethernet: the frame's priority, 0..=7).
    pub sl: u8,
    /// Source path bits (below 2^LMC; the port's LMC is 0).
    pub src_path_bits: u8,
    /// `enum ib_rate`.
    pub static_rate: u8,
    /// `AH_FLAG_*`.
    pub ah_flags: u8,
    /// Port number, from 1.
    pub port_num: u8,
    /// Destination GID (with `AH_FLAG_GRH`).
    pub dgid: [u8; 16],
    /// Flow label, below 2^20.
    pub flow_label: u32,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Destination MAC (Ethernet).
    pub dmac: [u8; 6],
}

impl QpAh {
    /// Encodes into the first [`QP_AH_SIZE`] bytes of `b` (what fits of them).
    pub fn encode_into(&self, b: &mut [u8]) {
        put_le16(b, 0, self.dlid);
        let bytes = [
            self.sl,
            self.src_path_bits,
            self.static_rate,
            self.ah_flags,
            self.port_num,
        ];
        for (i, v) in bytes.iter().enumerate() {
            if let Some(d) = b.get_mut(2 + i) {
                *d = *v;
            }
        }
        if let Some(d) = b.get_mut(8..24) {
            d.copy_from_slice(&self.dgid);
        }
        put_le32(b, 24, self.flow_label);
        for (i, v) in [self.sgid_index, self.hop_limit, self.traffic_class]
            .iter()
            .enumerate()
        {
            if let Some(d) = b.get_mut(28 + i) {
                *d = *v;
            }
        }
        if let Some(d) = b.get_mut(32..38) {
            d.copy_from_slice(&self.dmac);
        }
    }

    /// Whether an InfiniBand port takes this address (a QP's path, a UD WQE's
    /// destination): port 1, a unicast LID, SL 0..=15, no source path bits (LMC 0), a
    /// known rate, no flag but `AH_FLAG_GRH`, and with it source GID index 0 (the port has
    /// one GID) and a 20-bit flow label; no MAC.
    pub fn valid(&self) -> bool {
        self.port_num == 1
            && (1..0xc000).contains(&self.dlid)
            && self.sl <= 15
            && self.src_path_bits == 0
            && self.static_rate <= MAX_STATIC_RATE
            && self.ah_flags & !AH_FLAG_GRH == 0
            && (self.ah_flags & AH_FLAG_GRH == 0
                || (self.sgid_index == 0 && self.flow_label < 1 << 20))
            && self.dmac == [0; 6]
    }

    /// Whether an Ethernet port with a GID table of `gid_tbl_len` entries takes this
    /// address: port 1, LID 0, SL 0..=7, no source path bits, a known rate, `AH_FLAG_GRH`
    /// (every RoCE address is global) and no other flag, a source GID index in the table,
    /// a 20-bit flow label, a unicast destination MAC. Whether the source entry is set,
    /// and of the destination's family, is checked when a frame is built.
    pub fn valid_ethernet(&self, gid_tbl_len: u32) -> bool {
        self.port_num == 1
            && self.dlid == 0
            && self.sl <= 7
            && self.src_path_bits == 0
            && self.static_rate <= MAX_STATIC_RATE
            && self.ah_flags == AH_FLAG_GRH
            && u32::from(self.sgid_index) < gid_tbl_len
            && self.flow_label < 1 << 20
            && self.dmac[0] & 1 == 0
            && self.dmac != [0; 6]
    }

    /// Whether a port of link layer `link_layer` (`LINK_LAYER_*`) with a GID table of
    /// `gid_tbl_len` entries takes this address.
    pub fn valid_on(&self, link_layer: u8, gid_tbl_len: u32) -> bool {
        if link_layer == super::LINK_LAYER_ETHERNET {
            self.valid_ethernet(gid_tbl_len)
        } else {
            self.valid()
        }
    }

    /// The address as the NIC reads it (the layout above).
    pub fn encode(&self) -> [u8; QP_AH_SIZE] {
        let mut b = [0u8; QP_AH_SIZE];
        self.encode_into(&mut b);
        b
    }

    /// Decodes from the first [`QP_AH_SIZE`] bytes of `b`; `None` if a reserved byte is
    /// not zero.
    pub fn decode_from(b: &[u8]) -> Option<Self> {
        let byte = |o: usize| b.get(o).copied();
        if byte(7)? != 0 || byte(31)? != 0 || !zero(b, 38..QP_AH_SIZE) {
            return None;
        }
        let mut dgid = [0u8; 16];
        dgid.copy_from_slice(b.get(8..24)?);
        let mut dmac = [0u8; 6];
        dmac.copy_from_slice(b.get(32..38)?);
        Some(Self {
            dlid: get_le16(b, 0)?,
            sl: byte(2)?,
            src_path_bits: byte(3)?,
            static_rate: byte(4)?,
            ah_flags: byte(5)?,
            port_num: byte(6)?,
            dgid,
            flow_label: get_le32(b, 24)?,
            sgid_index: byte(28)?,
            hop_limit: byte(29)?,
            traffic_class: byte(30)?,
            dmac,
        })
    }
}

/// A QP's attributes (128 bytes, little-endian): the part of `ib_qp_attr` RC needs, with
/// room for UD and alternate paths. `CMD_MODIFY_QP` reads it (only the fields its mask
/// names count), `CMD_QUERY_QP` writes it.
///
/// Layout: `qp_state` u8 @0, `cur_qp_state` u8 @1, `path_mtu` u8 @2, `path_mig_state` u8
/// @3, `qkey` u32 @4, `rq_psn` u32 @8, `sq_psn` u32 @12, `dest_qp_num` u32 @16,
/// `qp_access_flags` u32 @20, `pkey_index` u16 @24, reserved u16 @26 (alternate PKey index),
/// `en_sqd_async_notify` u8 @28, `sq_draining` u8 @29 (query only), `max_rd_atomic` u8 @30,
/// `max_dest_rd_atomic` u8 @31, `min_rnr_timer` u8 @32, `port_num` u8 @33, `timeout` u8 @34,
/// `retry_cnt` u8 @35, `rnr_retry` u8 @36, reserved u8 @37..40, `rate_limit` u32 @40,
/// reserved u32 @44, the address vector ([`QpAh`]) @48..96, reserved @96..128 (the
/// alternate path to come). Reserved bytes are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttr {
    /// `QPS_*`: the state to move to (modify) or the state (query).
    pub qp_state: u8,
    /// `QPS_*`: the state the driver believes the QP is in.
    pub cur_qp_state: u8,
    /// Path MTU (`MTU_*` code, 1 = 256 .. 5 = 4096).
    pub path_mtu: u8,
    /// `IB_MIG_*` (0 = migrated).
    pub path_mig_state: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Receive PSN, 24 bits.
    pub rq_psn: u32,
    /// Send PSN, 24 bits.
    pub sq_psn: u32,
    /// Destination QP number, 24 bits.
    pub dest_qp_num: u32,
    /// `ACCESS_REMOTE_*` flags the QP's responder allows.
    pub qp_access_flags: u32,
    /// PKey table index.
    pub pkey_index: u16,
    /// Raise `EVENT_QP_SQ_DRAINED` on reaching `SQD` (0 or 1).
    pub en_sqd_async_notify: u8,
    /// Query only: the send queue is draining (1) in `SQD`.
    pub sq_draining: u8,
    /// Outstanding RDMA reads/atomics as initiator.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA reads/atomics as responder.
    pub max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer code, 0..=31.
    pub min_rnr_timer: u8,
    /// Port number, from 1.
    pub port_num: u8,
    /// Local ACK timeout code, 0..=31.
    pub timeout: u8,
    /// Transport retries, 0..=7.
    pub retry_cnt: u8,
    /// RNR retries, 0..=7 (7 = infinite).
    pub rnr_retry: u8,
    /// Rate limit in kbps (not supported: zero).
    pub rate_limit: u32,
    /// The primary path's address vector.
    pub ah: QpAh,
}

impl QpAttr {
    /// Encodes the buffer.
    pub fn encode(&self) -> [u8; QP_ATTR_SIZE] {
        let mut b = [0u8; QP_ATTR_SIZE];
        b[0] = self.qp_state;
        b[1] = self.cur_qp_state;
        b[2] = self.path_mtu;
        b[3] = self.path_mig_state;
        put_le32(&mut b, 4, self.qkey);
        put_le32(&mut b, 8, self.rq_psn);
        put_le32(&mut b, 12, self.sq_psn);
        put_le32(&mut b, 16, self.dest_qp_num);
        put_le32(&mut b, 20, self.qp_access_flags);
        put_le16(&mut b, 24, self.pkey_index);
        b[28] = self.en_sqd_async_notify;
        b[29] = self.sq_draining;
        b[30] = self.max_rd_atomic;
        b[31] = self.max_dest_rd_atomic;
        b[32] = self.min_rnr_timer;
        b[33] = self.port_num;
        b[34] = self.timeout;
        b[35] = self.retry_cnt;
        b[36] = self.rnr_retry;
        put_le32(&mut b, 40, self.rate_limit);
        self.ah
            .encode_into(&mut b[QP_ATTR_AH_OFFSET..QP_ATTR_AH_OFFSET + QP_AH_SIZE]);
        b
    }

    /// Decodes a buffer; `None` if a reserved byte is not zero.
    pub fn decode(b: &[u8; QP_ATTR_SIZE]) -> Option<Self> {
        if !zero(b, 26..28) || !zero(b, 37..40) || !zero(b, 44..48) || !zero(b, 96..QP_ATTR_SIZE) {
            return None;
        }
        Some(Self {
            qp_state: b[0],
            cur_qp_state: b[1],
            path_mtu: b[2],
            path_mig_state: b[3],
            qkey: get_le32(b, 4)?,
            rq_psn: get_le32(b, 8)?,
            sq_psn: get_le32(b, 12)?,
            dest_qp_num: get_le32(b, 16)?,
            qp_access_flags: get_le32(b, 20)?,
            pkey_index: get_le16(b, 24)?,
            en_sqd_async_notify: b[28],
            sq_draining: b[29],
            max_rd_atomic: b[30],
            max_dest_rd_atomic: b[31],
            min_rnr_timer: b[32],
            port_num: b[33],
            timeout: b[34],
            retry_cnt: b[35],
            rnr_retry: b[36],
            rate_limit: get_le32(b, 40)?,
            ah: QpAh::decode_from(b.get(QP_ATTR_AH_OFFSET..QP_ATTR_AH_OFFSET + QP_AH_SIZE)?)?,
        })
    }
}

/// The RC attribute masks of one QP state transition, as Linux's `ib_modify_qp_is_ok`
/// table (`drivers/infiniband/core/verbs.c`) has them: `None` if the transition is
/// invalid, else `(required, optional)`. `QP_ATTR_STATE` is allowed on every valid
/// transition and is in neither mask.
pub const fn rc_transition(cur: u8, next: u8) -> Option<(u32, u32)> {
    const PATH: u32 = QP_ATTR_ALT_PATH | QP_ATTR_ACCESS_FLAGS | QP_ATTR_PATH_MIG_STATE;
    let init = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
    let rts = QP_ATTR_CUR_STATE | PATH | QP_ATTR_MIN_RNR_TIMER;
    Some(match (cur, next) {
        (_, QPS_RESET) if cur <= QPS_ERR => (0, 0),
        (QPS_RESET, QPS_INIT) => (init, 0),
        (QPS_INIT, QPS_ERR)
        | (QPS_RTR, QPS_ERR)
        | (QPS_RTS, QPS_ERR)
        | (QPS_SQD, QPS_ERR)
        | (QPS_SQE, QPS_ERR)
        | (QPS_ERR, QPS_ERR) => (0, 0),
        (QPS_INIT, QPS_INIT) => (0, init),
        (QPS_INIT, QPS_RTR) => (
            QP_ATTR_AV
                | QP_ATTR_PATH_MTU
                | QP_ATTR_DEST_QPN
                | QP_ATTR_RQ_PSN
                | QP_ATTR_MAX_DEST_RD_ATOMIC
                | QP_ATTR_MIN_RNR_TIMER,
            QP_ATTR_ALT_PATH | QP_ATTR_ACCESS_FLAGS | QP_ATTR_PKEY_INDEX,
        ),
        (QPS_RTR, QPS_RTS) => (
            QP_ATTR_TIMEOUT
                | QP_ATTR_RETRY_CNT
                | QP_ATTR_RNR_RETRY
                | QP_ATTR_SQ_PSN
                | QP_ATTR_MAX_QP_RD_ATOMIC,
            rts,
        ),
        (QPS_RTS, QPS_RTS) | (QPS_SQD, QPS_RTS) => (0, rts),
        (QPS_RTS, QPS_SQD) => (0, QP_ATTR_EN_SQD_ASYNC_NOTIFY),
        (QPS_SQD, QPS_SQD) => (
            0,
            QP_ATTR_PORT
                | QP_ATTR_AV
                | QP_ATTR_TIMEOUT
                | QP_ATTR_RETRY_CNT
                | QP_ATTR_RNR_RETRY
                | QP_ATTR_MAX_QP_RD_ATOMIC
                | QP_ATTR_MAX_DEST_RD_ATOMIC
                | PATH
                | QP_ATTR_PKEY_INDEX
                | QP_ATTR_MIN_RNR_TIMER,
        ),
        // RC has no optional attributes here (UC and UD have some).
        (QPS_SQE, QPS_RTS) => (0, 0),
        _ => return None,
    })
}

/// The UC attribute masks of one QP state transition, as `ib_modify_qp_is_ok`'s table has
/// them (as [`rc_transition`]): UC has no timeout, retries, RNR timer or READ/atomic
/// depths.
pub const fn uc_transition(cur: u8, next: u8) -> Option<(u32, u32)> {
    const PATH: u32 = QP_ATTR_ALT_PATH | QP_ATTR_ACCESS_FLAGS | QP_ATTR_PATH_MIG_STATE;
    let init = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
    Some(match (cur, next) {
        (_, QPS_RESET) if cur <= QPS_ERR => (0, 0),
        (QPS_RESET, QPS_INIT) => (init, 0),
        (QPS_INIT, QPS_ERR)
        | (QPS_RTR, QPS_ERR)
        | (QPS_RTS, QPS_ERR)
        | (QPS_SQD, QPS_ERR)
        | (QPS_SQE, QPS_ERR)
        | (QPS_ERR, QPS_ERR) => (0, 0),
        (QPS_INIT, QPS_INIT) => (0, init),
        (QPS_INIT, QPS_RTR) => (
            QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN,
            QP_ATTR_ALT_PATH | QP_ATTR_ACCESS_FLAGS | QP_ATTR_PKEY_INDEX,
        ),
        (QPS_RTR, QPS_RTS) => (QP_ATTR_SQ_PSN, QP_ATTR_CUR_STATE | PATH),
        (QPS_RTS, QPS_RTS) | (QPS_SQD, QPS_RTS) => (0, QP_ATTR_CUR_STATE | PATH),
        (QPS_RTS, QPS_SQD) => (0, QP_ATTR_EN_SQD_ASYNC_NOTIFY),
        (QPS_SQD, QPS_SQD) => (0, QP_ATTR_AV | QP_ATTR_PKEY_INDEX | PATH),
        (QPS_SQE, QPS_RTS) => (0, QP_ATTR_CUR_STATE | QP_ATTR_ACCESS_FLAGS),
        _ => return None,
    })
}

/// The UD attribute masks of one QP state transition, as `ib_modify_qp_is_ok`'s table has
/// them (as [`rc_transition`]): a Q_Key instead of a path, no PSN to receive.
pub const fn ud_transition(cur: u8, next: u8) -> Option<(u32, u32)> {
    let init = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_QKEY;
    let rts = QP_ATTR_CUR_STATE | QP_ATTR_QKEY;
    Some(match (cur, next) {
        (_, QPS_RESET) if cur <= QPS_ERR => (0, 0),
        (QPS_RESET, QPS_INIT) => (init, 0),
        (QPS_INIT, QPS_ERR)
        | (QPS_RTR, QPS_ERR)
        | (QPS_RTS, QPS_ERR)
        | (QPS_SQD, QPS_ERR)
        | (QPS_SQE, QPS_ERR)
        | (QPS_ERR, QPS_ERR) => (0, 0),
        (QPS_INIT, QPS_INIT) => (0, init),
        (QPS_INIT, QPS_RTR) => (0, QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY),
        (QPS_RTR, QPS_RTS) => (QP_ATTR_SQ_PSN, rts),
        (QPS_RTS, QPS_RTS) | (QPS_SQD, QPS_RTS) | (QPS_SQE, QPS_RTS) => (0, rts),
        (QPS_RTS, QPS_SQD) => (0, QP_ATTR_EN_SQD_ASYNC_NOTIFY),
        (QPS_SQD, QPS_SQD) => (0, QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY),
        _ => return None,
    })
}

/// Whether `mask` is a valid RC modify from `cur` to `next`, by `ib_modify_qp_is_ok`'s
/// rules: the transition exists, `CUR_STATE` only from `RTR`, `RTS`, `SQD` or `SQE`, every
/// required attribute and nothing beyond required, optional, `STATE` and `RATE_LIMIT`.
pub const fn rc_modify_ok(cur: u8, next: u8, mask: u32) -> bool {
    modify_ok(QP_TYPE_RC, cur, next, mask)
}

/// [`rc_modify_ok`] for a QP of type `qp_type` (`QP_TYPE_RC`, `QP_TYPE_UC` or
/// `QP_TYPE_UD`; any other type has no valid modify).
pub const fn modify_ok(qp_type: u8, cur: u8, next: u8, mask: u32) -> bool {
    if mask & QP_ATTR_CUR_STATE != 0
        && cur != QPS_RTR
        && cur != QPS_RTS
        && cur != QPS_SQD
        && cur != QPS_SQE
    {
        return false;
    }
    let t = match qp_type {
        QP_TYPE_RC => rc_transition(cur, next),
        QP_TYPE_UC => uc_transition(cur, next),
        QP_TYPE_UD => ud_transition(cur, next),
        _ => None,
    };
    let Some((req, opt)) = t else {
        return false;
    };
    mask & req == req && mask & !(req | opt | QP_ATTR_STATE | QP_ATTR_RATE_LIMIT) == 0
}

/// Attributes the NIC does not support although the table allows them: alternate paths
/// (APM) and rate limits.
pub const QP_ATTR_UNSUPPORTED: u32 = QP_ATTR_ALT_PATH | QP_ATTR_RATE_LIMIT;

/// Largest `enum ib_rate` value.
pub const MAX_STATIC_RATE: u8 = 25;

/// What of a port decides whether a QP's attributes are in range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortShape {
    /// The largest path MTU (`MTU_*` code).
    pub max_mtu: u8,
    /// `LINK_LAYER_*`.
    pub link_layer: u8,
    /// GID table length.
    pub gid_tbl_len: u32,
}

impl super::PortAttrs {
    /// What of this port decides whether a QP's attributes are in range.
    pub fn shape(&self) -> PortShape {
        PortShape {
            max_mtu: self.active_mtu,
            link_layer: self.link_layer,
            gid_tbl_len: self.gid_tbl_len,
        }
    }
}

/// Whether the values of every attribute `mask` names are in range for this NIC (one
/// port, one PKey, LMC 0, MTU up to the port's, the address as [`QpAh::valid_on`] takes
/// it), as "The QP state machine" in `hardware.md` lists them. The NIC checks every
/// `MODIFY_QP` with it; the driver checks first, so that a user's bad value is its
/// `EINVAL`, not a refused command.
pub fn qp_values_ok(mask: u32, a: &QpAttr, port: &PortShape) -> bool {
    let has = |bit: u32| mask & bit != 0;
    let psn = |v: u32| v < 1 << 24;
    let max_mtu = port.max_mtu;
    let ah_ok = a.ah.valid_on(port.link_layer, port.gid_tbl_len);
    let checks = [
        (QP_ATTR_STATE, a.qp_state <= QPS_ERR),
        (QP_ATTR_CUR_STATE, a.cur_qp_state <= QPS_ERR),
        (QP_ATTR_EN_SQD_ASYNC_NOTIFY, a.en_sqd_async_notify <= 1),
        (
            QP_ATTR_ACCESS_FLAGS,
            a.qp_access_flags & !QP_ACCESS_ALL == 0,
        ),
        (QP_ATTR_PKEY_INDEX, a.pkey_index == 0),
        (QP_ATTR_PORT, a.port_num == 1),
        (QP_ATTR_AV, ah_ok),
        (QP_ATTR_PATH_MTU, (1..=max_mtu).contains(&a.path_mtu)),
        (QP_ATTR_TIMEOUT, a.timeout <= 31),
        (QP_ATTR_RETRY_CNT, a.retry_cnt <= 7),
        (QP_ATTR_RNR_RETRY, a.rnr_retry <= 7),
        (QP_ATTR_RQ_PSN, psn(a.rq_psn)),
        (
            QP_ATTR_MAX_QP_RD_ATOMIC,
            a.max_rd_atomic <= QP_MAX_RD_ATOMIC,
        ),
        (QP_ATTR_MIN_RNR_TIMER, a.min_rnr_timer <= 31),
        (QP_ATTR_SQ_PSN, psn(a.sq_psn)),
        (
            QP_ATTR_MAX_DEST_RD_ATOMIC,
            a.max_dest_rd_atomic <= QP_MAX_RD_ATOMIC,
        ),
        (QP_ATTR_PATH_MIG_STATE, a.path_mig_state == 0),
        (QP_ATTR_DEST_QPN, psn(a.dest_qp_num)),
    ];
    checks.iter().all(|&(bit, ok)| !has(bit) || ok) && a.sq_draining == 0
}
