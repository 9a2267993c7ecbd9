// SPDX-License-Identifier: GPL-2.0
//! Completion queues: `CMD_CREATE_CQ`, `CMD_DESTROY_CQ` (and [`NumParams`], the parameters of
//! every destroy by number).

use super::*;

/// `CMD_DESTROY_CQ` and `CMD_DESTROY_QP` parameters.
///
/// Layout in `params`: `num` u32 @0 (the CQN or QPN), the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumParams {
    /// The object's number.
    pub num: u32,
}

impl NumParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.num);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        zero(p, 4..p.len()).then_some(())?;
        Some(Self {
            num: get_le32(p, 0)?,
        })
    }
}

/// Smallest log2 CQE size (32 bytes).
pub const CQE_LOG_SIZE_MIN: u8 = 5;
/// Largest log2 CQE size (64 bytes).
pub const CQE_LOG_SIZE_MAX: u8 = 6;
/// Largest log2 depth of a CQ, SQ or RQ: free-running 16-bit indices need depth <= 2^15.
pub const MAX_QUEUE_LOG_DEPTH: u8 = 15;
/// Size of a CQ's doorbell record in host memory (8-byte aligned): the consumer index
/// u32 @0 (free-running mod 2^16 in its low half, as the provider last polled), reserved
/// u32 @4.
pub const CQ_DB_RECORD_SIZE: u64 = 8;

/// `CMD_CREATE_CQ` parameters.
///
/// Layout in `params`: `db_page` u32 @0, `log_depth` u8 @4, `log_cqe_size` u8 @5,
/// `page_shift` u8 @6, `pt_levels` u8 @7, `pt_root` u64 @8, `npages` u32 @16, reserved u32
/// @20, `db_record` u64 @24, the rest (@32..56) zero. The ring starts at the first byte of
/// its first page and is `npages` pages long, exactly as many as `2^log_depth` CQEs need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateCqParams {
    /// The doorbell page (user context) that owns the CQ; 0 is the kernel's.
    pub db_page: u32,
    /// log2 of the number of CQEs, 1..=[`MAX_QUEUE_LOG_DEPTH`].
    pub log_depth: u8,
    /// log2 of the CQE size, [`CQE_LOG_SIZE_MIN`]..=[`CQE_LOG_SIZE_MAX`].
    pub log_cqe_size: u8,
    /// The ring's pages.
    pub ring: PageList,
    /// Bus address of the CQ's doorbell record ([`CQ_DB_RECORD_SIZE`] bytes).
    pub db_record: u64,
}

impl CreateCqParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.db_page);
        p[4] = self.log_depth;
        p[5] = self.log_cqe_size;
        p[6] = self.ring.page_shift;
        p[7] = self.ring.levels;
        put_le64(&mut p, 8, self.ring.root);
        put_le32(&mut p, 16, self.ring.npages);
        put_le64(&mut p, 24, self.db_record);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if !zero(p, 20..24) || !zero(p, 32..p.len()) {
            return None;
        }
        Some(Self {
            db_page: get_le32(p, 0)?,
            log_depth: p[4],
            log_cqe_size: p[5],
            ring: PageList {
                root: get_le64(p, 8)?,
                npages: get_le32(p, 16)?,
                page_shift: p[6],
                levels: p[7],
            },
            db_record: get_le64(p, 24)?,
        })
    }
}

/// Admin command (1.7): move a CQ to a new ring ([`ResizeCqParams`]); the result is the
/// CQ's producer index at the move (the CQEs it had written, free-running mod 2^16).
pub const CMD_RESIZE_CQ: u8 = 0x15;

/// `CMD_RESIZE_CQ` parameters (1.7).
///
/// Layout in `params`: `cqn` u32 @0, `log_depth` u8 @4, reserved u8 @5, `page_shift` u8 @6,
/// `pt_levels` u8 @7, `pt_root` u64 @8, `npages` u32 @16, the rest (@20..56) zero. The new
/// ring has `2^log_depth` CQEs of the CQ's CQE size, from the first byte of its first page,
/// exactly as many pages as they need; the CQ keeps its doorbell record, its counts and its
/// arming. The CQEs the consumer has not polled yet (after the record's index) must fit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizeCqParams {
    /// The CQ.
    pub cqn: u32,
    /// log2 of the new ring's CQEs, 1..=[`MAX_QUEUE_LOG_DEPTH`].
    pub log_depth: u8,
    /// The new ring's pages.
    pub ring: PageList,
}

impl ResizeCqParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.cqn);
        p[4] = self.log_depth;
        p[6] = self.ring.page_shift;
        p[7] = self.ring.levels;
        put_le64(&mut p, 8, self.ring.root);
        put_le32(&mut p, 16, self.ring.npages);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if p[5] != 0 || !zero(p, 20..p.len()) {
            return None;
        }
        Some(Self {
            cqn: get_le32(p, 0)?,
            log_depth: p[4],
            ring: PageList {
                root: get_le64(p, 8)?,
                npages: get_le32(p, 16)?,
                page_shift: p[6],
                levels: p[7],
            },
        })
    }
}
