// SPDX-License-Identifier: GPL-2.0
//! Memory windows (interface 1.9): `CMD_ALLOC_MW`, `CMD_DEALLOC_MW`, the bind segment of a
//! `WR_BIND_MW` WQE, local and remote invalidation.

use super::*;

/// Admin command (1.9): allocate a memory window on a PD ([`AllocMwParams`]); the result
/// is its rkey ([`MW_KEY_BIT`] set), unbound.
pub const CMD_ALLOC_MW: u8 = 0x16;
/// Admin command (1.9): free a memory window (`rkey` u32 @0: the rkey `CMD_ALLOC_MW`
/// returned, whatever key byte binds gave it since), bound or not; `BAD_PARAM` if no window
/// has it.
pub const CMD_DEALLOC_MW: u8 = 0x17;

/// A memory window's rkey has this bit set (an MR's key never has: MR keys are below
/// 2^24): the responder's lookup takes the window table for it. Below it, as for MRs,
/// `index << 8 | key`.
pub const MW_KEY_BIT: u32 = 1 << 31;

/// A type 1 window: bound by `ibv_bind_mw` (a [`WR_BIND_MW`] WQE), to the MR's PD, usable
/// by any QP of it; a bind of length 0 unbinds it.
pub const MW_TYPE_1: u8 = 1;
/// A type 2 (2B) window: bound by a [`WR_BIND_MW`] WQE to the QP that posts it, free
/// before; unbound by `LOCAL_INV` or the peer's `SEND_WITH_INV`.
pub const MW_TYPE_2: u8 = 2;

/// MR access flag (1.9, `IB_ACCESS_MW_BIND`): windows may be bound to the MR.
pub const ACCESS_MW_BIND: u32 = 1 << 4;

/// Send opcode (`IBV_WR_LOCAL_INV`, 1.9): invalidate the type 2 window whose rkey is in
/// `imm` (host order here: the rkey itself).
pub const WR_LOCAL_INV: u8 = 7;
/// Send opcode (`IBV_WR_BIND_MW`, 1.9): bind a window ([`BindSeg`], no SGEs).
pub const WR_BIND_MW: u8 = 8;
/// Send opcode (`IBV_WR_SEND_WITH_INV`, 1.9): a SEND that invalidates, at the responder,
/// the window whose rkey is in `imm`.
pub const WR_SEND_WITH_INV: u8 = 9;

/// Whether send opcode `op` is a local operation (1.9): executed by the NIC when it
/// reaches the head of the send queue, no packet sent ([`WR_BIND_MW`], [`WR_LOCAL_INV`]).
pub const fn is_local(op: u8) -> bool {
    matches!(op, WR_BIND_MW | WR_LOCAL_INV)
}

/// Completion status (`IBV_WC_MW_BIND_ERR`, 1.9): a `WR_BIND_MW` the NIC refused (the
/// window, the MR, their PDs, the access or the range); the QP goes to `ERR`.
pub const WC_MW_BIND_ERR: u8 = 6;

/// Completion opcode (`IBV_WC_BIND_MW`, 1.9).
pub const WC_BIND_MW: u8 = 5;
/// Completion opcode (`IBV_WC_LOCAL_INV`, 1.9).
pub const WC_LOCAL_INV: u8 = 6;
/// CQE flag (1.9, receive completions): the SEND invalidated the rkey in `imm`
/// (`IBV_WC_WITH_INV`).
pub const CQE_FLAG_INV: u8 = 1 << 4;

/// `CMD_ALLOC_MW` parameters: `pdn` u32 @0, `mw_type` u8 @4 ([`MW_TYPE_1`],
/// [`MW_TYPE_2`]), the rest zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocMwParams {
    /// The PD.
    pub pdn: u32,
    /// 1 or 2.
    pub mw_type: u8,
}

impl AllocMwParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.pdn);
        p[4] = self.mw_type;
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if !zero(p, 5..p.len()) {
            return None;
        }
        Some(Self {
            pdn: get_le32(p, 0)?,
            mw_type: p[4],
        })
    }
}

/// Offset of a `WR_BIND_MW` WQE's bind segment ([`BindSeg`]).
pub const SQ_WQE_BIND_OFFSET: u32 = SQ_WQE_BASE;
/// Bytes of the bind segment (it fills the smallest WQE, 64 bytes, with the header).
pub const SQ_WQE_BIND_SIZE: u32 = 32;

/// A `WR_BIND_MW` WQE's bind segment, at [`SQ_WQE_BIND_OFFSET`] (`struct ibv_mw_bind`'s
/// fields): `mw_rkey` u32 @0 (the window's rkey now), `new_rkey` u32 @4 (its rkey once
/// bound: the same index, the consumer's key byte), `mr_lkey` u32 @8, `access` u32 @12
/// (`ACCESS_REMOTE_*`), `addr` u64 @16, `length` u64 @24 (a type 1 window: 0 unbinds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BindSeg {
    /// The window's current rkey.
    pub mw_rkey: u32,
    /// The rkey it has once bound.
    pub new_rkey: u32,
    /// The MR it is bound to.
    pub mr_lkey: u32,
    /// What remote peers may do through it.
    pub access: u32,
    /// First virtual address, in the MR.
    pub addr: u64,
    /// Bytes.
    pub length: u64,
}

impl BindSeg {
    /// Encodes into `b` at [`SQ_WQE_BIND_OFFSET`]; false if it does not fit.
    pub fn encode_into(&self, b: &mut [u8]) -> bool {
        let off = SQ_WQE_BIND_OFFSET as usize;
        b.len() >= off + SQ_WQE_BIND_SIZE as usize
            && put_le32(b, off, self.mw_rkey)
            && put_le32(b, off + 4, self.new_rkey)
            && put_le32(b, off + 8, self.mr_lkey)
            && put_le32(b, off + 12, self.access)
            && put_le64(b, off + 16, self.addr)
            && put_le64(b, off + 24, self.length)
    }

    /// Decodes from `b` at [`SQ_WQE_BIND_OFFSET`].
    pub fn decode_from(b: &[u8]) -> Option<Self> {
        let off = SQ_WQE_BIND_OFFSET as usize;
        Some(Self {
            mw_rkey: get_le32(b, off)?,
            new_rkey: get_le32(b, off + 4)?,
            mr_lkey: get_le32(b, off + 8)?,
            access: get_le32(b, off + 12)?,
            addr: get_le64(b, off + 16)?,
            length: get_le64(b, off + 24)?,
        })
    }
}
