// SPDX-License-Identifier: GPL-2.0
//! The doorbell page layout (BAR2).

use super::*;

/// Bytes of a doorbell page in BAR2.
pub const DB_PAGE_SIZE: usize = 4096;
/// Doorbell page offset: send queue doorbell, `qpn << 16 | sq producer index`.
pub const DB_SQ: usize = 0x000;
/// Doorbell page offset: receive queue doorbell, `qpn << 16 | rq producer index`.
pub const DB_RQ: usize = 0x004;
/// Doorbell page offset: arm a CQ for its next completion, `cqn << 16 | consumer index`.
pub const DB_CQ_ARM: usize = 0x008;
/// Doorbell page offset: arm a CQ for its next solicited (or error) completion,
/// `cqn << 16 | consumer index`.
pub const DB_CQ_ARM_SOLICITED: usize = 0x00c;
/// Doorbell page offset (1.2): shared receive queue doorbell, `srqn << 16 | producer
/// index` (the WQEs posted to the SRQ, free-running).
pub const DB_SRQ: usize = 0x010;

/// A doorbell value: `num << 16 | index`.
pub fn db_value(num: u32, index: u16) -> u32 {
    (num << 16) | u32::from(index)
}

const _: () = assert!(DB_PAGE_SIZE * DB_PAGES as usize == BAR2_SIZE);
const _: () = assert!(1u64 << PT_ENTRIES_SHIFT == PT_ENTRIES);
const _: () = assert!(PT_ENTRIES * 8 == PT_PAGE_SIZE);
const _: () = assert!(QP_ATTR_AH_OFFSET + QP_AH_SIZE <= QP_ATTR_SIZE);
