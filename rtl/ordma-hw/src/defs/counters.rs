// SPDX-License-Identifier: GPL-2.0
//! Port counters (interface 1.5): `CMD_QUERY_COUNTERS`; per-QP counters (1.10):
//! `CMD_QUERY_QP_COUNTERS`.
//!
//! The NIC counts, per port, what happens to its packets and to the work they carry, from
//! the moment it starts (a reset does not clear them; the counters of a real NIC's port
//! run as long as it has power). Each is a 64-bit count that only grows. The response is
//! [`NUM_COUNTERS`] little-endian `u64`s in the order of [`COUNTERS`], whose names are the
//! ones the driver gives ib_core (`rdma statistic`, `hw_counters/` in sysfs): soft-RoCE's
//! where it counts the same thing.

use core::ffi::CStr;

use super::*;

/// Admin command (1.5): read port `port`'s counters into a buffer of [`COUNTERS_SIZE`]
/// bytes ([`QueryPortParams`]; the NIC writes `min(resp_len, COUNTERS_SIZE)` bytes).
/// `AQ_BAD_PARAM` for a port that does not exist or a `resp_len` of 0. Result: the
/// number of bytes written.
pub const CMD_QUERY_COUNTERS: u8 = 0x13;

/// Admin command (1.10): read QP `qpn`'s counters into a buffer of [`COUNTERS_SIZE`] bytes
/// ([`QueryQpCountersParams`]; the NIC writes `min(resp_len, COUNTERS_SIZE)` bytes): the
/// same counters as the port's, in the same order, of what happened to this QP since it
/// was created. Every event the port counts for a QP it also counts for that QP, so the
/// QPs' counts never exceed the port's; `bad_frames` is the port's alone (a bad frame
/// has no trusted QP), and so is `rcvd_pkts` of a packet for a QP that does not exist.
/// `AQ_BAD_PARAM` for a QP that does not exist or a `resp_len` of 0. Result: the number
/// of bytes written.
pub const CMD_QUERY_QP_COUNTERS: u8 = 0x18;

/// Packets the port sent (requests and answers; to itself too).
pub const CNT_SENT_PKTS: usize = 0;
/// Packets the port took in (valid ones, to the RDMA engine; from itself too).
pub const CNT_RCVD_PKTS: usize = 1;
/// Requests behind the expected PSN (duplicates: answered again, never executed twice).
pub const CNT_DUPLICATE_REQUEST: usize = 2;
/// Requests ahead of the expected PSN (dropped: a packet before them went missing).
pub const CNT_OUT_OF_SEQ_REQUEST: usize = 3;
/// PSN sequence NAKs the responder sent (one per gap).
pub const CNT_SEND_SEQ_ERR: usize = 4;
/// PSN sequence NAKs the requester took (each sends again from the PSN it names).
pub const CNT_RCVD_SEQ_ERR: usize = 5;
/// RNR NAKs the responder sent (a SEND found no receive WQE).
pub const CNT_SEND_RNR_ERR: usize = 6;
/// RNR NAKs the requester took.
pub const CNT_RCVD_RNR_ERR: usize = 7;
/// Transport timer expiries that sent again (no answer within the QP's `timeout`).
pub const CNT_LOCAL_ACK_TIMEOUT_ERR: usize = 8;
/// Send WQEs ended in `WC_RETRY_EXC_ERR` (`retry_cnt` timeouts without progress).
pub const CNT_RETRY_EXCEEDED_ERR: usize = 9;
/// Send WQEs ended in `WC_RNR_RETRY_EXC_ERR` (`rnr_retry` RNR NAKs).
pub const CNT_RETRY_RNR_EXCEEDED_ERR: usize = 10;
/// Completions in error for a local cause: `WC_LOC_LEN_ERR`, `WC_LOC_QP_OP_ERR`,
/// `WC_LOC_PROT_ERR` (flushes are not counted).
pub const CNT_LOCAL_ERR: usize = 11;
/// Send completions in error for the responder's NAK: `WC_REM_INV_REQ_ERR`,
/// `WC_REM_ACCESS_ERR`, `WC_REM_OP_ERR`.
pub const CNT_REMOTE_ERR: usize = 12;
/// SEND messages (with or without immediate, any transport) the port sent, completed.
pub const CNT_RDMA_SENDS: usize = 13;
/// SEND messages the port received, completed in a receive WQE.
pub const CNT_RDMA_RECVS: usize = 14;
/// Atomic operations the responder executed (answers again from the replay cache not
/// counted).
pub const CNT_ATOMICS: usize = 15;
/// Frames the port dropped as bad: short, a bad checksum or ICRC, not RoCEv2, for another
/// address, a malformed batch.
pub const CNT_BAD_FRAMES: usize = 16;

/// Counters a port has.
pub const NUM_COUNTERS: usize = 17;
/// Size of `CMD_QUERY_COUNTERS`'s response.
pub const COUNTERS_SIZE: usize = NUM_COUNTERS * 8;

/// The counters' names, in response order (`CNT_*` is the index).
pub const COUNTERS: [&CStr; NUM_COUNTERS] = [
    c"sent_pkts",
    c"rcvd_pkts",
    c"duplicate_request",
    c"out_of_seq_request",
    c"send_seq_err",
    c"rcvd_seq_err",
    c"send_rnr_err",
    c"rcvd_rnr_err",
    c"local_ack_timeout_err",
    c"retry_exceeded_err",
    c"retry_rnr_exceeded_err",
    c"local_err",
    c"remote_err",
    c"rdma_sends",
    c"rdma_recvs",
    c"atomics",
    c"bad_frames",
];

/// `CMD_QUERY_QP_COUNTERS` parameters.
///
/// Layout in `params` (that of [`QueryPortParams`], a QP number for the port): `qpn` u32
/// @0, reserved u32 @4, `resp_addr` u64 @8, `resp_len` u32 @16, the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryQpCountersParams {
    /// The QP.
    pub qpn: u32,
    /// Bus address of the response buffer.
    pub resp_addr: u64,
    /// Length of the response buffer.
    pub resp_len: u32,
}

impl QueryQpCountersParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> [u8; AQ_SQE_SIZE - 8] {
        QueryPortParams {
            port: self.qpn,
            resp_addr: self.resp_addr,
            resp_len: self.resp_len,
        }
        .encode()
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &[u8; AQ_SQE_SIZE - 8]) -> Option<Self> {
        QueryPortParams::decode(p).map(|q| Self {
            qpn: q.port,
            resp_addr: q.resp_addr,
            resp_len: q.resp_len,
        })
    }
}

/// A port's (or a QP's) counters, as `CMD_QUERY_COUNTERS` (`CMD_QUERY_QP_COUNTERS`) writes
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters(pub [u64; NUM_COUNTERS]);

impl PortCounters {
    /// Adds `n` to counter `index` (a `CNT_*`), wrapping as 64-bit hardware counters do.
    pub fn add(&mut self, index: usize, n: u64) {
        if let Some(c) = self.0.get_mut(index) {
            *c = c.wrapping_add(n);
        }
    }

    /// Counter `index` (a `CNT_*`); 0 for an index that is not one.
    pub fn get(&self, index: usize) -> u64 {
        self.0.get(index).copied().unwrap_or(0)
    }

    /// Encodes as the NIC writes them.
    pub fn encode(&self) -> [u8; COUNTERS_SIZE] {
        let mut b = [0u8; COUNTERS_SIZE];
        for (i, v) in self.0.iter().enumerate() {
            put_le64(&mut b, i * 8, *v);
        }
        b
    }

    /// Decodes a response.
    pub fn decode(b: &[u8; COUNTERS_SIZE]) -> Self {
        let mut c = [0u64; NUM_COUNTERS];
        for (i, v) in c.iter_mut().enumerate() {
            *v = get_le64(b, i * 8).unwrap_or(0);
        }
        Self(c)
    }
}
