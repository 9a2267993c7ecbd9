// SPDX-License-Identifier: GPL-2.0
//! The data path's formats in host memory: send and receive WQEs, CQEs.
//!
//! A send WQE is a 16-byte control segment, a 16-byte remote-address segment, then either
//! `num_sge` 16-byte SGEs or, with [`WQE_FLAG_INLINE`], `inline_len` bytes of data; an
//! atomic has a 16-byte atomic segment ([`AtomicSeg`]) before its SGEs; a UD QP's WQE has
//! a 64-byte datagram segment ([`UdSeg`]: the address) before its SGEs or inline data. A
//! receive WQE is a 16-byte control segment and `num_sge` SGEs. A CQE is 32 bytes (in a
//! slot of 32 or 64), its last byte the owner (phase) byte, which the NIC writes after the
//! rest. Opcodes and statuses are libibverbs' own values (`enum ibv_wr_opcode`, `enum
//! ibv_wc_opcode`, `enum ibv_wc_status`), so the provider copies them.

use super::*;

/// Send opcode (`IBV_WR_RDMA_WRITE`): RDMA WRITE.
pub const WR_RDMA_WRITE: u8 = 0;
/// Send opcode (`IBV_WR_RDMA_WRITE_WITH_IMM`): RDMA WRITE with immediate data, which
/// consumes a receive WQE at the responder.
pub const WR_RDMA_WRITE_IMM: u8 = 1;
/// Send opcode (`IBV_WR_SEND`): SEND.
pub const WR_SEND: u8 = 2;
/// Send opcode (`IBV_WR_SEND_WITH_IMM`): SEND with immediate data.
pub const WR_SEND_IMM: u8 = 3;
/// Send opcode (`IBV_WR_RDMA_READ`): RDMA READ.
pub const WR_RDMA_READ: u8 = 4;
/// Send opcode (`IBV_WR_ATOMIC_CMP_AND_SWP`): 64-bit compare and swap at the responder;
/// the original value comes back into the local SGEs (1.2).
pub const WR_ATOMIC_CMP_AND_SWP: u8 = 5;
/// Send opcode (`IBV_WR_ATOMIC_FETCH_AND_ADD`): 64-bit fetch and add at the responder; the
/// original value comes back into the local SGEs (1.2).
pub const WR_ATOMIC_FETCH_AND_ADD: u8 = 6;

/// Send opcode (`IBV_WR_FLUSH`, IBTA 1.5): make the responder's writes to a range of an
/// MR, or to the whole MR, globally visible; the range and the kind in the WQE's flush
/// segment ([`FlushSeg`]), no SGEs (1.8).
pub const WR_FLUSH: u8 = 14;
/// Send opcode (`IBV_WR_ATOMIC_WRITE`, IBTA 1.5): write 8 bytes at the responder as one
/// atomic store, at an 8-byte aligned address; the bytes in the atomic segment's
/// `compare_add` ([`AtomicSeg`], as they are in memory, `swap` zero), no SGEs (1.8).
pub const WR_ATOMIC_WRITE: u8 = 15;

/// Whether send opcode `op` is an atomic.
pub const fn is_atomic(op: u8) -> bool {
    op == WR_ATOMIC_CMP_AND_SWP || op == WR_ATOMIC_FETCH_AND_ADD
}

/// Whether send opcode `op` is a FLUSH or an ATOMIC WRITE: one request packet, no local
/// data, answered by an empty read response (1.8).
pub const fn is_flush_or_atomic_write(op: u8) -> bool {
    op == WR_FLUSH || op == WR_ATOMIC_WRITE
}

/// Whether send opcode `op` takes one of the QP's initiator depth (`max_rd_atomic`) and
/// one of its peer's responder resources: READ, the atomics, FLUSH, ATOMIC WRITE.
pub const fn is_rd_atomic(op: u8) -> bool {
    op == WR_RDMA_READ || is_atomic(op) || is_flush_or_atomic_write(op)
}

/// A FLUSH's placement type (`IBV_FLUSH_GLOBAL`): to global visibility.
pub const FLUSH_GLOBAL: u8 = 1 << 0;
/// A FLUSH's placement type (`IBV_FLUSH_PERSISTENT`): to the persistence domain; this NIC
/// has none, so no MR allows it and a FLUSH asking for it is a remote access error.
pub const FLUSH_PERSISTENT: u8 = 1 << 1;
/// A FLUSH's level (`IBV_FLUSH_RANGE`): the range `remote_addr`, `length`.
pub const FLUSH_RANGE: u8 = 0;
/// A FLUSH's level (`IBV_FLUSH_MR`): the whole MR of the rkey (address and length unused).
pub const FLUSH_MR: u8 = 1;
/// Offset of a FLUSH WQE's flush segment ([`FlushSeg`]).
pub const SQ_WQE_FLUSH_OFFSET: u32 = SQ_WQE_BASE;

/// A FLUSH WQE's flush segment, at [`SQ_WQE_FLUSH_OFFSET`] (the arguments of
/// `ibv_wr_flush` besides address and key, which are in the remote-address segment):
/// `length` u32 @0, `placement` u8 @4 ([`FLUSH_GLOBAL`], [`FLUSH_PERSISTENT`]: one or
/// both), `level` u8 @5 ([`FLUSH_RANGE`], [`FLUSH_MR`]), reserved @6..16 (zero).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushSeg {
    /// Bytes of the range (`FLUSH_RANGE`).
    pub length: u32,
    /// `FLUSH_GLOBAL`, `FLUSH_PERSISTENT`.
    pub placement: u8,
    /// `FLUSH_RANGE` or `FLUSH_MR`.
    pub level: u8,
}

impl FlushSeg {
    /// Encodes into `b` at [`SQ_WQE_FLUSH_OFFSET`]; false if it does not fit.
    pub fn encode_into(&self, b: &mut [u8]) -> bool {
        let off = SQ_WQE_FLUSH_OFFSET as usize;
        let Some(seg) = b.get_mut(off..off + 16) else {
            return false;
        };
        seg.fill(0);
        seg[4] = self.placement;
        seg[5] = self.level;
        put_le32(seg, 0, self.length)
    }

    /// Decodes from `b` at [`SQ_WQE_FLUSH_OFFSET`]; `None` if a reserved byte is not zero,
    /// the placement is none or unknown, or the level unknown.
    pub fn decode_from(b: &[u8]) -> Option<Self> {
        let off = SQ_WQE_FLUSH_OFFSET as usize;
        let seg = b.get(off..off + 16)?;
        let (placement, level) = (seg[4], seg[5]);
        if !zero(seg, 6..16)
            || placement == 0
            || placement & !(FLUSH_GLOBAL | FLUSH_PERSISTENT) != 0
            || level > FLUSH_MR
        {
            return None;
        }
        Some(Self {
            length: get_le32(seg, 0)?,
            placement,
            level,
        })
    }
}

/// Bytes an atomic operates on (and its local SGEs hold: exactly this many), at an address
/// aligned to them.
pub const ATOMIC_SIZE: u32 = 8;
/// Offset of a send WQE's atomic segment ([`AtomicSeg`], atomics only); their SGEs follow
/// it, at [`SendWqe::atomic_sge_offset`].
pub const SQ_WQE_ATOMIC_OFFSET: u32 = SQ_WQE_BASE;
/// Bytes of the atomic segment.
pub const SQ_WQE_ATOMIC_SIZE: u32 = 16;

/// A send WQE's atomic segment, at [`SQ_WQE_ATOMIC_OFFSET`] (the fields of `struct
/// ibv_send_wr`'s `wr.atomic` besides address and key, which are in the remote-address
/// segment): `compare_add` u64 @0 (compare and swap: the value compared; fetch and add:
/// the value added), `swap` u64 @8 (compare and swap: the value written if equal; fetch
/// and add: reserved, zero). Host order (little-endian), as the 64-bit word in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicSeg {
    /// The compare value (CMP_AND_SWP) or the addend (FETCH_AND_ADD).
    pub compare_add: u64,
    /// The swap value (CMP_AND_SWP); zero for FETCH_AND_ADD.
    pub swap: u64,
}

impl AtomicSeg {
    /// Encodes into `b` at [`SQ_WQE_ATOMIC_OFFSET`]; false if it does not fit.
    pub fn encode_into(&self, b: &mut [u8]) -> bool {
        let off = SQ_WQE_ATOMIC_OFFSET as usize;
        put_le64(b, off, self.compare_add) && put_le64(b, off + 8, self.swap)
    }

    /// Decodes from `b` at [`SQ_WQE_ATOMIC_OFFSET`].
    pub fn decode_from(b: &[u8]) -> Option<Self> {
        let off = SQ_WQE_ATOMIC_OFFSET as usize;
        Some(Self {
            compare_add: get_le64(b, off)?,
            swap: get_le64(b, off + 8)?,
        })
    }
}

/// Offset of a UD send WQE's datagram segment ([`UdSeg`], 1.3); the SGEs or the inline
/// data follow it, at [`SQ_WQE_UD_DATA`].
pub const SQ_WQE_UD_OFFSET: u32 = SQ_WQE_BASE;
/// Bytes of the datagram segment.
pub const SQ_WQE_UD_SIZE: u32 = 64;
/// Where a UD send WQE's SGEs or inline data start.
pub const SQ_WQE_UD_DATA: u32 = SQ_WQE_UD_OFFSET + SQ_WQE_UD_SIZE;
/// The `remote_qkey` bit that asks for the sending QP's own Q_Key instead (IB's
/// "controlled Q_Key" rule, as `ibv_post_send` documents it).
pub const UD_QKEY_OWN: u32 = 1 << 31;

/// Where the SGEs or inline data of a send WQE of a QP of type `qp_type` start: behind
/// the datagram segment for UD, at [`SQ_WQE_BASE`] for the others.
pub const fn sq_wqe_data(qp_type: u8) -> u32 {
    if qp_type == QP_TYPE_UD {
        SQ_WQE_UD_DATA
    } else {
        SQ_WQE_BASE
    }
}

/// A UD send WQE's datagram segment, at [`SQ_WQE_UD_OFFSET`] (the fields of `struct
/// ibv_send_wr`'s `wr.ud`, the address handle's address copied in): `remote_qpn` u32 @0
/// (24 bits), `remote_qkey` u32 @4 ([`UD_QKEY_OWN`]: the QP's own Q_Key), reserved @8..16
/// (zero), the address vector ([`QpAh`], as the driver built it for the AH) @16..64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdSeg {
    /// The destination QP.
    pub remote_qpn: u32,
    /// The destination's Q_Key (or [`UD_QKEY_OWN`]).
    pub remote_qkey: u32,
    /// Where the datagram goes.
    pub av: QpAh,
}

impl UdSeg {
    /// Encodes into `b` at [`SQ_WQE_UD_OFFSET`]; false if it does not fit.
    pub fn encode_into(&self, b: &mut [u8]) -> bool {
        let off = SQ_WQE_UD_OFFSET as usize;
        let Some(seg) = b.get_mut(off..off + SQ_WQE_UD_SIZE as usize) else {
            return false;
        };
        seg.fill(0);
        put_le32(seg, 0, self.remote_qpn) && put_le32(seg, 4, self.remote_qkey) && {
            self.av.encode_into(&mut seg[16..]);
            true
        }
    }

    /// Decodes from `b` at [`SQ_WQE_UD_OFFSET`]; `None` if a reserved byte is not zero or
    /// `remote_qpn` is wider than 24 bits.
    pub fn decode_from(b: &[u8]) -> Option<Self> {
        let off = SQ_WQE_UD_OFFSET as usize;
        let seg = b.get(off..off + SQ_WQE_UD_SIZE as usize)?;
        let remote_qpn = get_le32(seg, 0)?;
        if !zero(seg, 8..16) || remote_qpn >= 1 << 24 {
            return None;
        }
        Some(Self {
            remote_qpn,
            remote_qkey: get_le32(seg, 4)?,
            av: QpAh::decode_from(seg.get(16..)?)?,
        })
    }
}

/// Send WQE flag: write a CQE when this WQE completes successfully (errors always do).
pub const WQE_FLAG_SIGNALED: u8 = 1 << 0;
/// Send WQE flag: the request is solicited (SE bit): it wakes a CQ armed for solicited
/// completions at the responder.
pub const WQE_FLAG_SOLICITED: u8 = 1 << 1;
/// Send WQE flag: the data is inline, in the WQE from byte [`SQ_WQE_BASE`], not in SGEs.
pub const WQE_FLAG_INLINE: u8 = 1 << 2;
/// Send WQE flag: wait for earlier RDMA READs to complete before this one starts.
pub const WQE_FLAG_FENCE: u8 = 1 << 3;
/// Every send WQE flag.
pub const WQE_FLAGS: u8 = WQE_FLAG_SIGNALED | WQE_FLAG_SOLICITED | WQE_FLAG_INLINE | WQE_FLAG_FENCE;

/// One scatter/gather element: `addr` u64 @0, `length` u32 @8, `lkey` u32 @12 (the order of
/// `struct ibv_sge`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address in the MR.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// The MR's key.
    pub lkey: u32,
}

impl Sge {
    /// Encodes into `b` at `off`; false if it does not fit.
    pub fn encode_into(&self, b: &mut [u8], off: usize) -> bool {
        b.len() >= off + WQE_SGE_SIZE as usize
            && put_le64(b, off, self.addr)
            && put_le32(b, off + 8, self.length)
            && put_le32(b, off + 12, self.lkey)
    }

    /// Decodes from `b` at `off`.
    pub fn decode_from(b: &[u8], off: usize) -> Option<Self> {
        Some(Self {
            addr: get_le64(b, off)?,
            length: get_le32(b, off + 8)?,
            lkey: get_le32(b, off + 12)?,
        })
    }
}

/// The fixed part of a send WQE (its first [`SQ_WQE_BASE`] bytes).
///
/// Control segment: `opcode` u8 @0 (`WR_*`), `flags` u8 @1 (`WQE_FLAG_*`), `num_sge` u8 @2
/// (0 with `INLINE`), reserved u8 @3, `imm` u32 @4 (the immediate data, 4 bytes as the WR
/// holds them, network order: copied, never swapped), `inline_len` u32 @8 (0 without
/// `INLINE`), reserved u32 @12. Remote-address segment: `remote_addr` u64 @16, `rkey` u32
/// @24, reserved u32 @28 (all zero for SEND). Reserved bytes are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    /// `WR_*`.
    pub opcode: u8,
    /// `WQE_FLAG_*`.
    pub flags: u8,
    /// SGEs following the header.
    pub num_sge: u8,
    /// Immediate data, network order.
    pub imm: u32,
    /// Inline bytes following the header.
    pub inline_len: u32,
    /// The responder's virtual address (WRITE, READ, atomics).
    pub remote_addr: u64,
    /// The responder's MR key (WRITE, READ, atomics).
    pub rkey: u32,
}

impl SendWqe {
    /// Encodes the header into the first [`SQ_WQE_BASE`] bytes of `b` (the rest of `b` is
    /// left alone); false if `b` is shorter.
    pub fn encode_into(&self, b: &mut [u8]) -> bool {
        if b.len() < SQ_WQE_BASE as usize {
            return false;
        }
        b[..SQ_WQE_BASE as usize].fill(0);
        b[0] = self.opcode;
        b[1] = self.flags;
        b[2] = self.num_sge;
        put_le32(b, 4, self.imm)
            && put_le32(b, 8, self.inline_len)
            && put_le64(b, 16, self.remote_addr)
            && put_le32(b, 24, self.rkey)
    }

    /// Decodes the header; `None` if a reserved byte is not zero.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < SQ_WQE_BASE as usize || b[3] != 0 || !zero(b, 12..16) || !zero(b, 28..32) {
            return None;
        }
        Some(Self {
            opcode: b[0],
            flags: b[1],
            num_sge: b[2],
            imm: get_le32(b, 4)?,
            inline_len: get_le32(b, 8)?,
            remote_addr: get_le64(b, 16)?,
            rkey: get_le32(b, 24)?,
        })
    }

    /// Byte offset of SGE `i` (or of the inline data, `i` = 0) in the WQE.
    pub const fn sge_offset(i: usize) -> usize {
        SQ_WQE_BASE as usize + i * WQE_SGE_SIZE as usize
    }

    /// Byte offset of SGE `i` (or of the inline data, `i` = 0) in a send WQE whose data
    /// starts at `data` ([`sq_wqe_data`]).
    pub const fn sge_offset_from(data: u32, i: usize) -> usize {
        data as usize + i * WQE_SGE_SIZE as usize
    }

    /// Byte offset of SGE `i` in an atomic's WQE (behind its atomic segment).
    pub const fn atomic_sge_offset(i: usize) -> usize {
        (SQ_WQE_ATOMIC_OFFSET + SQ_WQE_ATOMIC_SIZE) as usize + i * WQE_SGE_SIZE as usize
    }
}

/// The fixed part of a receive WQE (its first [`RQ_WQE_BASE`] bytes): `num_sge` u8 @0, the
/// rest zero. The SGEs follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// SGEs following the header.
    pub num_sge: u8,
}

impl RecvWqe {
    /// Encodes the header into the first [`RQ_WQE_BASE`] bytes of `b`.
    pub fn encode_into(&self, b: &mut [u8]) -> bool {
        if b.len() < RQ_WQE_BASE as usize {
            return false;
        }
        b[..RQ_WQE_BASE as usize].fill(0);
        b[0] = self.num_sge;
        true
    }

    /// Decodes the header; `None` if a reserved byte is not zero.
    pub fn decode(b: &[u8]) -> Option<Self> {
        (b.len() >= RQ_WQE_BASE as usize && zero(b, 1..RQ_WQE_BASE as usize))
            .then(|| Self { num_sge: b[0] })
    }

    /// Byte offset of SGE `i` in the WQE.
    pub const fn sge_offset(i: usize) -> usize {
        RQ_WQE_BASE as usize + i * WQE_SGE_SIZE as usize
    }
}

/// Bytes of a CQE the NIC writes (in a slot of `2^log_cqe_size` bytes, 32 or 64).
pub const CQE_SIZE: usize = 32;
/// Offset of the CQE's owner byte, written last: bit 0 is the phase.
pub const CQE_OWNER_OFFSET: usize = 31;
/// CQE flag: a receive queue's completion (else the send queue's).
pub const CQE_FLAG_RECV: u8 = 1 << 0;
/// CQE flag: `imm` holds immediate data (`IBV_WC_WITH_IMM`).
pub const CQE_FLAG_IMM: u8 = 1 << 1;
/// CQE flag: the request was solicited.
pub const CQE_FLAG_SOLICITED: u8 = 1 << 2;
/// CQE flag (1.3, UD receive completions): the first 40 bytes of the receive buffers hold
/// the packet's GRH (`IBV_WC_GRH`).
pub const CQE_FLAG_GRH: u8 = 1 << 3;

/// Completion opcode (`IBV_WC_SEND`).
pub const WC_SEND: u8 = 0;
/// Completion opcode (`IBV_WC_RDMA_WRITE`).
pub const WC_RDMA_WRITE: u8 = 1;
/// Completion opcode (`IBV_WC_RDMA_READ`).
pub const WC_RDMA_READ: u8 = 2;
/// Completion opcode (`IBV_WC_COMP_SWAP`): an atomic compare and swap (1.2).
pub const WC_COMP_SWAP: u8 = 3;
/// Completion opcode (`IBV_WC_FETCH_ADD`): an atomic fetch and add (1.2).
pub const WC_FETCH_ADD: u8 = 4;
/// Completion opcode (`IBV_WC_FLUSH`): a FLUSH (1.8).
pub const WC_FLUSH: u8 = 8;
/// Completion opcode (`IBV_WC_ATOMIC_WRITE`): an ATOMIC WRITE (1.8).
pub const WC_ATOMIC_WRITE: u8 = 9;
/// Completion opcode (`IBV_WC_RECV`).
pub const WC_RECV: u8 = 128;
/// Completion opcode (`IBV_WC_RECV_RDMA_WITH_IMM`).
pub const WC_RECV_RDMA_IMM: u8 = 129;

/// Completion status (`IBV_WC_SUCCESS`).
pub const WC_SUCCESS: u8 = 0;
/// `IBV_WC_LOC_LEN_ERR`: a message longer than the receive WQE's buffers, or an SGE list
/// longer than the message size.
pub const WC_LOC_LEN_ERR: u8 = 1;
/// `IBV_WC_LOC_QP_OP_ERR`: a malformed WQE (bad opcode, flags, SGE count, inline length).
pub const WC_LOC_QP_OP_ERR: u8 = 2;
/// `IBV_WC_LOC_PROT_ERR`: an lkey, address or length the local MR table refuses.
pub const WC_LOC_PROT_ERR: u8 = 4;
/// `IBV_WC_WR_FLUSH_ERR`: the QP went to ERR before this WQE completed.
pub const WC_WR_FLUSH_ERR: u8 = 5;
/// `IBV_WC_REM_INV_REQ_ERR`: the responder found the request invalid (e.g. a message
/// longer than its receive buffers).
pub const WC_REM_INV_REQ_ERR: u8 = 9;
/// `IBV_WC_REM_ACCESS_ERR`: the responder refused the rkey, address, length or access.
pub const WC_REM_ACCESS_ERR: u8 = 10;
/// `IBV_WC_REM_OP_ERR`: the responder could not complete the operation.
pub const WC_REM_OP_ERR: u8 = 11;
/// `IBV_WC_RETRY_EXC_ERR`: no acknowledgement within `timeout`, `retry_cnt` times.
pub const WC_RETRY_EXC_ERR: u8 = 12;
/// `IBV_WC_RNR_RETRY_EXC_ERR`: the responder had no receive WQE, `rnr_retry` times.
pub const WC_RNR_RETRY_EXC_ERR: u8 = 13;

/// A CQE: `wqe_index` u16 @0 (the completed WQE's index in its queue, free-running mod
/// 2^16; for the send queue every WQE up to it is done, signaled or not), `status` u8 @2
/// (`WC_*` status), `opcode` u8 @3 (`WC_*` opcode), `qpn` u32 @4, `byte_len` u32 @8, `imm`
/// u32 @12 (network order, as sent), `flags` u8 @16 (`CQE_FLAG_*`), `vendor_err` u8 @17,
/// `slid` u16 @18 (the sender's LID, UD receive completions; 1.3), `src_qp` u32 @20 (the
/// sending QP, receive completions), reserved @24..31, the owner byte @31 (bit 0: phase).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// The WQE's index in its queue.
    pub wqe_index: u16,
    /// `WC_*` status.
    pub status: u8,
    /// `WC_*` opcode.
    pub opcode: u8,
    /// The local QP.
    pub qpn: u32,
    /// Bytes transferred (receive: received; READ: read; atomics: 8).
    pub byte_len: u32,
    /// Immediate data, network order.
    pub imm: u32,
    /// `CQE_FLAG_*`.
    pub flags: u8,
    /// The NIC's own detail of an error (0 on success).
    pub vendor_err: u8,
    /// The remote QP (receive completions).
    pub src_qp: u32,
    /// The sender's LID (UD receive completions; else zero).
    pub slid: u16,
}

impl Cqe {
    /// The CQE's first [`CQE_OWNER_OFFSET`] bytes (the owner byte is written separately,
    /// after them).
    pub fn encode(&self) -> [u8; CQE_OWNER_OFFSET] {
        let mut b = [0u8; CQE_OWNER_OFFSET];
        put_le16(&mut b, 0, self.wqe_index);
        b[2] = self.status;
        b[3] = self.opcode;
        put_le32(&mut b, 4, self.qpn);
        put_le32(&mut b, 8, self.byte_len);
        put_le32(&mut b, 12, self.imm);
        b[16] = self.flags;
        b[17] = self.vendor_err;
        put_le16(&mut b, 18, self.slid);
        put_le32(&mut b, 20, self.src_qp);
        b
    }

    /// Decodes the first [`CQE_OWNER_OFFSET`] bytes of `b` (the owner byte is not part of
    /// it).
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(Self {
            wqe_index: get_le16(b, 0)?,
            status: *b.get(2)?,
            opcode: *b.get(3)?,
            qpn: get_le32(b, 4)?,
            byte_len: get_le32(b, 8)?,
            imm: get_le32(b, 12)?,
            flags: *b.get(16)?,
            vendor_err: *b.get(17)?,
            src_qp: get_le32(b, 20)?,
            slid: get_le16(b, 18)?,
        })
    }
}

/// The phase the NIC writes for the CQE at free-running producer index `index` in a ring
/// of `2^log_depth`: 1 on the first pass, flipped on each wrap (as the admin CQ's).
pub const fn cqe_phase(index: u32, log_depth: u8) -> u8 {
    // CAST: one bit.
    (((index >> log_depth) & 1) ^ 1) as u8
}

const _: () = assert!(CQE_SIZE == 1 << CQE_LOG_SIZE_MIN);
const _: () = assert!(SendWqe::sge_offset(0) == SQ_WQE_BASE as usize);
