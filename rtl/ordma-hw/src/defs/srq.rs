// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues (interface 1.2): `CMD_CREATE_SRQ`, `CMD_MODIFY_SRQ`,
//! `CMD_QUERY_SRQ`, `CMD_DESTROY_SRQ`, the SRQ's WQE and its events.
//!
//! An SRQ is a ring of receive WQEs in host memory that any number of RC QPs of its
//! doorbell page receive through (`QP_FLAG_SRQ`). Its WQEs are linked: each names the slot
//! of the next one in its `next` field, so the consumer can hand slots back in whatever
//! order their completions come (QPs complete out of order with respect to each other),
//! as mlx5's SRQs do. The NIC takes WQEs in the order they were posted, across all its
//! QPs, following the links from slot 0.

use super::*;

/// Admin command: create a shared receive queue ([`CreateSrqParams`]); the result is the
/// SRQN.
pub const CMD_CREATE_SRQ: u8 = 0x0d;
/// Admin command: arm an SRQ's limit, or resize it (1.7) ([`ModifySrqParams`]).
pub const CMD_MODIFY_SRQ: u8 = 0x0e;
/// Admin command: query an SRQ into a [`SrqAttrs`] buffer ([`QuerySrqParams`]).
pub const CMD_QUERY_SRQ: u8 = 0x0f;
/// Admin command: destroy an SRQ ([`NumParams`]); refused while a QP uses it.
pub const CMD_DESTROY_SRQ: u8 = 0x10;

/// Event type: an armed SRQ's count of WQEs fell below its limit (`data` = SRQN); the
/// limit is disarmed (`IB_EVENT_SRQ_LIMIT_REACHED`).
pub const EVENT_SRQ_LIMIT_REACHED: u8 = 11;
/// Event type: a QP attached to an SRQ reached `ERR` and will take no more WQEs from it;
/// every WQE it took has its completion (`data` = QPN; `IB_EVENT_QP_LAST_WQE_REACHED`).
pub const EVENT_QP_LAST_WQE_REACHED: u8 = 12;

/// `CMD_MODIFY_SRQ` mask bit: resize (`IB_SRQ_MAX_WR`, interface 1.7; `AQ_BAD_PARAM`
/// before): a larger ring replaces the SRQ's, whose slots it begins with, links and all.
pub const SRQ_ATTR_MAX_WR: u32 = 1 << 0;
/// `CMD_MODIFY_SRQ` mask bit: arm the limit (`IB_SRQ_LIMIT`).
pub const SRQ_ATTR_LIMIT: u32 = 1 << 1;

/// Smallest log2 depth of an SRQ (2 slots: one WQE and the free slot the links need).
pub const SRQ_LOG_DEPTH_MIN: u8 = 1;

/// `CMD_CREATE_SRQ` parameters.
///
/// Layout in `params`: `db_page` bits 7:0 u8 @0, `max_sge` u8 @1, `log_depth` u8 @2,
/// `log_wqe_size` u8 @3, `pdn` u32 @4, `pt_root` u64 @8, `npages` u32 @16, `page_shift`
/// u8 @20, `pt_levels` u8 @21, `db_page` bits 15:8 u8 @22 (reserved before interface 1.6,
/// whose 2048 pages need them), reserved @23..56 (zero). The ring is `2^log_depth` WQEs of
/// `2^log_wqe_size` bytes from the first byte of its page list, which has exactly the
/// pages it needs; it holds `2^log_depth - 1` posted WQEs at most (one slot is always
/// free, the end of the links).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateSrqParams {
    /// The doorbell page (user context) that owns the SRQ; its QPs must have the same; two
    /// bytes apart in the layout.
    pub db_page: u16,
    /// Most SGEs per WQE, at most `max_srq_sge`.
    pub max_sge: u8,
    /// The ring: `log_depth` [`SRQ_LOG_DEPTH_MIN`]..=[`MAX_QUEUE_LOG_DEPTH`], `log_wqe_size`
    /// [`WQE_LOG_SIZE_MIN`]..=[`WQE_LOG_SIZE_MAX`] with room for `max_sge` SGEs.
    pub wq: WorkQueue,
    /// The PD its WQEs' buffers are translated with.
    pub pdn: u32,
}

impl CreateSrqParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        let [page_lo, page_hi] = self.db_page.to_le_bytes();
        p[0] = page_lo;
        p[1] = self.max_sge;
        p[2] = self.wq.log_depth;
        p[3] = self.wq.log_wqe_size;
        put_le32(&mut p, 4, self.pdn);
        put_le64(&mut p, 8, self.wq.ring.root);
        put_le32(&mut p, 16, self.wq.ring.npages);
        p[20] = self.wq.ring.page_shift;
        p[21] = self.wq.ring.levels;
        p[22] = page_hi;
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        zero(p, 23..p.len()).then_some(())?;
        Some(Self {
            db_page: u16::from_le_bytes([p[0], p[22]]),
            max_sge: p[1],
            wq: WorkQueue {
                log_depth: p[2],
                log_wqe_size: p[3],
                ring: PageList {
                    root: get_le64(p, 8)?,
                    npages: get_le32(p, 16)?,
                    page_shift: p[20],
                    levels: p[21],
                },
            },
            pdn: get_le32(p, 4)?,
        })
    }
}

/// `CMD_MODIFY_SRQ` parameters.
///
/// Layout in `params`: `srqn` u32 @0, `attr_mask` u32 @4 (`SRQ_ATTR_*`), `srq_limit` u32
/// @8, then the new ring of a resize ([`SRQ_ATTR_MAX_WR`], interface 1.7; zero without
/// it): `log_depth` u8 @12, `page_shift` u8 @13, `pt_levels` u8 @14, reserved u8 @15,
/// `pt_root` u64 @16, `npages` u32 @24, the rest (@28..56) zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifySrqParams {
    /// The SRQ.
    pub srqn: u32,
    /// `SRQ_ATTR_*`.
    pub attr_mask: u32,
    /// The limit to arm (0 disarms), at most the SRQ's `max_wr` (after a resize in the
    /// same command, the new one).
    pub srq_limit: u32,
    /// The resized ring ([`SRQ_ATTR_MAX_WR`]): `2^log_depth` slots, more than the SRQ has,
    /// of the SRQ's WQE size, whose first slots hold the old ring's bytes; all zero
    /// without a resize.
    pub log_depth: u8,
    /// Its pages.
    pub ring: PageList,
}

impl ModifySrqParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.srqn);
        put_le32(&mut p, 4, self.attr_mask);
        put_le32(&mut p, 8, self.srq_limit);
        p[12] = self.log_depth;
        p[13] = self.ring.page_shift;
        p[14] = self.ring.levels;
        put_le64(&mut p, 16, self.ring.root);
        put_le32(&mut p, 24, self.ring.npages);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if p[15] != 0 || !zero(p, 28..p.len()) {
            return None;
        }
        Some(Self {
            srqn: get_le32(p, 0)?,
            attr_mask: get_le32(p, 4)?,
            srq_limit: get_le32(p, 8)?,
            log_depth: p[12],
            ring: PageList {
                root: get_le64(p, 16)?,
                npages: get_le32(p, 24)?,
                page_shift: p[13],
                levels: p[14],
            },
        })
    }
}

/// `CMD_QUERY_SRQ` parameters.
///
/// Layout in `params`: `srqn` u32 @0, reserved u32 @4, `resp_addr` u64 @8, `resp_len` u32
/// @16, the rest zero. The NIC writes `min(resp_len, SRQ_ATTRS_SIZE)` bytes of
/// [`SrqAttrs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuerySrqParams {
    /// The SRQ.
    pub srqn: u32,
    /// Bus address of the response buffer.
    pub resp_addr: u64,
    /// Its length.
    pub resp_len: u32,
}

impl QuerySrqParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.srqn);
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
            srqn: get_le32(p, 0)?,
            resp_addr: get_le64(p, 8)?,
            resp_len: get_le32(p, 16)?,
        })
    }
}

/// Size of the [`SrqAttrs`] response.
pub const SRQ_ATTRS_SIZE: usize = 16;

/// The `CMD_QUERY_SRQ` response (16 bytes, little-endian).
///
/// Layout: `max_wr` u32 @0 (`2^log_depth - 1`), `max_sge` u32 @4, `srq_limit` u32 @8 (0
/// when not armed: an event disarms it), `wqe_count` u32 @12 (WQEs posted and not yet
/// taken by a QP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttrs {
    /// WQEs the SRQ holds at most.
    pub max_wr: u32,
    /// SGEs per WQE.
    pub max_sge: u32,
    /// The armed limit, 0 if none.
    pub srq_limit: u32,
    /// WQEs posted and not yet taken.
    pub wqe_count: u32,
}

impl SrqAttrs {
    /// Encodes the response as the NIC writes it.
    pub fn encode(&self) -> [u8; SRQ_ATTRS_SIZE] {
        let mut b = [0u8; SRQ_ATTRS_SIZE];
        put_le32(&mut b, 0, self.max_wr);
        put_le32(&mut b, 4, self.max_sge);
        put_le32(&mut b, 8, self.srq_limit);
        put_le32(&mut b, 12, self.wqe_count);
        b
    }

    /// Decodes a response.
    pub fn decode(b: &[u8; SRQ_ATTRS_SIZE]) -> Self {
        let w = |o: usize| get_le32(b, o).unwrap_or(0);
        Self {
            max_wr: w(0),
            max_sge: w(4),
            srq_limit: w(8),
            wqe_count: w(12),
        }
    }
}

/// The header of an SRQ WQE (its first [`RQ_WQE_BASE`] bytes), then `num_sge` SGEs as in
/// a receive WQE.
///
/// Layout: `num_sge` u8 @0, reserved u8 @1, `next` u16 @2 (the slot of the WQE posted
/// after this one; the NIC takes it modulo the depth), reserved @4..16 (zero). The
/// consumer writes `next` when the slot is free (linking it at the end of the free
/// slots), and the WQE's other bytes when it posts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqWqe {
    /// SGEs following the header.
    pub num_sge: u8,
    /// The slot of the next WQE.
    pub next: u16,
}

impl SrqWqe {
    /// Offset of `next` in the WQE.
    pub const NEXT_OFFSET: usize = 2;

    /// Encodes the header into the first [`RQ_WQE_BASE`] bytes of `b`.
    pub fn encode_into(&self, b: &mut [u8]) -> bool {
        if b.len() < RQ_WQE_BASE as usize {
            return false;
        }
        b[..RQ_WQE_BASE as usize].fill(0);
        b[0] = self.num_sge;
        put_le16(b, Self::NEXT_OFFSET, self.next)
    }

    /// Decodes the header; `None` if a reserved byte is not zero.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < RQ_WQE_BASE as usize || b[1] != 0 || !zero(b, 4..RQ_WQE_BASE as usize) {
            return None;
        }
        Some(Self {
            num_sge: b[0],
            next: get_le16(b, Self::NEXT_OFFSET)?,
        })
    }

    /// The `next` field of a WQE whose header may be malformed; `None` if `b` is too short.
    pub fn next_of(b: &[u8]) -> Option<u16> {
        get_le16(b, Self::NEXT_OFFSET)
    }
}

impl CreateQpParams {
    /// The SRQ a QP created with [`QP_FLAG_SRQ`] receives through: the low 32 bits of
    /// `rq.ring.root`; `None` without the flag, or if any other `rq_*` field, the high
    /// bits or `max_recv_sge` is not zero.
    pub fn srqn(&self) -> Option<u32> {
        let rq = &self.rq;
        let rest_zero = rq.log_depth == 0
            && rq.log_wqe_size == 0
            && rq.ring.npages == 0
            && rq.ring.page_shift == 0
            && rq.ring.levels == 0
            && rq.ring.root >> 32 == 0
            && self.max_recv_sge == 0;
        // CAST: the high half is zero (checked).
        (self.flags & QP_FLAG_SRQ != 0 && rest_zero).then_some(rq.ring.root as u32)
    }
}
