// SPDX-License-Identifier: GPL-2.0
//! The ordma NIC's hardware definitions.
//!
//! This file is compiled twice: by the kernel crate (`drivers/infiniband/hw/ordma/hw.rs`
//! includes it with `#[path]`) and by the `ordma-hw` crate that the model uses. It must stay
//! dependency-free: `core` only, no allocation, no `std`. `Documentation/hardware.md`
//! describes the same interface in prose; change both together. Interface 1.1's and
//! 1.2's objects are in the submodules, one per role, re-exported here.

/// PCI vendor ID of the ordma NIC.
///
/// Not assigned by the PCI-SIG: ordma is a simulated NIC. `0x4f52` ("OR") is unassigned in
/// the pci.ids database; a real device would carry its maker's ID.
pub const PCI_VENDOR_ID: u16 = 0x4f52;

/// PCI device ID of the ordma NIC, function 0.
pub const PCI_DEVICE_ID: u16 = 0x0001;

/// PCI class code: network controller (0x02), InfiniBand (0x07), programming interface 0.
pub const PCI_CLASS: u32 = 0x02_07_00;

/// Size of BAR0, the control registers.
pub const BAR0_SIZE: usize = 0x1000;

/// BAR0 offset of `VERSION` (32-bit, read-only): `major << 16 | minor`.
pub const REG_VERSION: usize = 0x000;
/// BAR0 offset of `STATUS` (32-bit, read-only): the `STATUS_*` bits.
pub const REG_STATUS: usize = 0x004;
/// BAR0 offset of `CONTROL` (32-bit, write-only): write one `CONTROL_*` command.
pub const REG_CONTROL: usize = 0x008;
/// BAR0 offset of `ERROR` (32-bit, read-only): why `STATUS_FATAL` is set (`ERR_*`).
pub const REG_ERROR: usize = 0x00c;
/// BAR0 offset of `NUM_VECTORS` (32-bit, read-only): MSI-X vectors the NIC has.
pub const REG_NUM_VECTORS: usize = 0x010;
/// BAR0 offset of `DB_PAGES` (32-bit, read-only): 4 KiB doorbell pages in BAR2.
pub const REG_DB_PAGES: usize = 0x014;
/// BAR0 offset of `AQ_SQ_BASE` (2 x 32-bit, read-write, low word first): admin SQ address.
pub const REG_AQ_SQ_BASE: usize = 0x020;
/// BAR0 offset of `AQ_CQ_BASE` (2 x 32-bit, read-write): admin CQ address.
pub const REG_AQ_CQ_BASE: usize = 0x028;
/// BAR0 offset of `EQ_BASE` (2 x 32-bit, read-write): event queue address.
pub const REG_EQ_BASE: usize = 0x030;
/// BAR0 offset of `AQ_LOG_DEPTH` (32-bit, read-write): log2 of the admin SQ and CQ depth.
pub const REG_AQ_LOG_DEPTH: usize = 0x038;
/// BAR0 offset of `EQ_LOG_DEPTH` (32-bit, read-write): log2 of the event queue depth.
pub const REG_EQ_LOG_DEPTH: usize = 0x03c;
/// BAR0 offset of `AQ_SQ_DB` (32-bit, write-only): the admin SQ producer index (mod 2^16).
pub const REG_AQ_SQ_DB: usize = 0x040;
/// BAR0 offset of `EQ_DB` (32-bit, write-only): EQ consumer index (mod 2^16) | `EQ_DB_ARM`.
pub const REG_EQ_DB: usize = 0x044;

/// The interface version this file describes, as `VERSION` reports it.
pub const VERSION: u32 = (1 << 16) | 10;

/// The major part of a `VERSION` value; drivers refuse a major they do not know.
pub const fn version_major(version: u32) -> u16 {
    // CAST: the shift leaves 16 bits.
    (version >> 16) as u16
}

/// The minor part of a `VERSION` value; new minors only add features.
pub const fn version_minor(version: u32) -> u16 {
    // CAST: truncation to the low 16 bits is the point.
    version as u16
}

/// `STATUS`: reset done, registers may be programmed.
pub const STATUS_READY: u32 = 1 << 0;
/// `STATUS`: queues enabled; admin commands are processed.
pub const STATUS_ENABLED: u32 = 1 << 1;
/// `STATUS`: the NIC stopped on an error (`ERROR` says which); only a reset clears it.
pub const STATUS_FATAL: u32 = 1 << 2;

/// `CONTROL` command: reset the NIC to its power-on state (queues off, registers zero).
pub const CONTROL_RESET: u32 = 1;
/// `CONTROL` command: validate the queue registers and start the queues.
pub const CONTROL_ENABLE: u32 = 2;

/// `ERROR`: no error.
pub const ERR_NONE: u32 = 0;
/// `ERROR`: `CONTROL_ENABLE` with a queue address or depth out of range or misaligned.
pub const ERR_BAD_QUEUE_CONFIG: u32 = 1;
/// `ERROR`: the NIC could not read or write a queue in host memory (address not mapped).
pub const ERR_QUEUE_DMA: u32 = 2;
/// `ERROR`: an unknown `CONTROL` command or a write to a read-only register.
pub const ERR_BAD_REGISTER_WRITE: u32 = 3;
/// `ERROR`: a doorbell index beyond the queue's depth.
pub const ERR_BAD_DOORBELL: u32 = 4;
/// `ERROR`: an internal error of the NIC (the model: one injected by a test).
pub const ERR_INTERNAL: u32 = 5;
/// `ERROR`: the event queue overran: an event was due and only the slot kept for
/// `EVENT_FATAL` was free (the driver did not consume events; with one completion event
/// pending per CQ at most, a queue deeper than `max_cq` plus the asynchronous events in
/// flight never overruns).
pub const ERR_EVENT_OVERRUN: u32 = 6;

/// `EQ_DB` bit: raise the event interrupt when the next entry is written.
pub const EQ_DB_ARM: u32 = 1 << 31;

/// Queues in host memory must be aligned to this.
pub const QUEUE_ALIGN: u64 = 4096;
/// Smallest log2 depth of a queue.
pub const MIN_LOG_DEPTH: u32 = 2;
/// Largest log2 depth of a queue.
pub const MAX_LOG_DEPTH: u32 = 12;

/// MSI-X vector of admin completions.
pub const VECTOR_ADMIN: u16 = 0;
/// MSI-X vector of the event queue.
pub const VECTOR_EVENT: u16 = 1;
/// MSI-X vectors the NIC has (admin, events).
pub const NUM_VECTORS: u16 = 2;

/// Size of BAR2, the doorbell area: [`DB_PAGES`] pages of 4 KiB.
pub const BAR2_SIZE: usize = DB_PAGES as usize * 4096;
/// Doorbell pages in BAR2, one per user context; page 0 belongs to the kernel (so 2047
/// user contexts at once; 63 before interface 1.6's BAR2 of 8 MiB).
pub const DB_PAGES: u32 = 2048;

/// Size of an admin SQ entry.
pub const AQ_SQE_SIZE: usize = 64;
/// Size of an admin CQ entry.
pub const AQ_CQE_SIZE: usize = 16;
/// Size of an event queue entry.
pub const EQE_SIZE: usize = 16;

/// Admin command: query the device's attributes into a [`DeviceAttrs`] buffer.
pub const CMD_QUERY_DEVICE: u8 = 0x01;

/// Admin command: query port `port` into a [`PortAttrs`] buffer.
pub const CMD_QUERY_PORT: u8 = 0x02;

/// Admin command: allocate a protection domain. No parameters (all zero); the result is
/// the PD number, below `max_pd`.
pub const CMD_ALLOC_PD: u8 = 0x03;

/// Admin command: free PD `pdn` ([`PdParams`]).
pub const CMD_DEALLOC_PD: u8 = 0x04;

/// Admin status: success.
pub const AQ_OK: u16 = 0;
/// Admin status: unknown opcode.
pub const AQ_BAD_OPCODE: u16 = 1;
/// Admin status: a parameter is out of range or a reserved field is not zero.
pub const AQ_BAD_PARAM: u16 = 2;
/// Admin status: a buffer address is not in host memory the NIC can reach.
pub const AQ_BAD_ADDRESS: u16 = 3;
/// Admin status: every object of the kind asked for is in use (the `max_*` attribute).
pub const AQ_NO_RESOURCES: u16 = 4;

/// Event type: the port's link went up (`data` = port number).
pub const EVENT_PORT_ACTIVE: u8 = 1;
/// Event type: the port's link went down (`data` = port number).
pub const EVENT_PORT_DOWN: u8 = 2;
/// Event type: the NIC stopped (`data` = the `ERR_*` code).
pub const EVENT_FATAL: u8 = 3;

/// Reads a little-endian `u16` at `off`; `None` if out of bounds.
pub fn get_le16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]))
}

/// Reads a little-endian `u32` at `off`; `None` if out of bounds.
pub fn get_le32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Reads a little-endian `u64` at `off`; `None` if out of bounds.
pub fn get_le64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// Writes `v` little-endian at `off`; false if out of bounds.
pub fn put_le16(b: &mut [u8], off: usize, v: u16) -> bool {
    put(b, off, &v.to_le_bytes())
}

/// Writes `v` little-endian at `off`; false if out of bounds.
pub fn put_le32(b: &mut [u8], off: usize, v: u32) -> bool {
    put(b, off, &v.to_le_bytes())
}

/// Writes `v` little-endian at `off`; false if out of bounds.
pub fn put_le64(b: &mut [u8], off: usize, v: u64) -> bool {
    put(b, off, &v.to_le_bytes())
}

fn put(b: &mut [u8], off: usize, v: &[u8]) -> bool {
    match off.checked_add(v.len()).and_then(|end| b.get_mut(off..end)) {
        Some(d) => {
            d.copy_from_slice(v);
            true
        }
        None => false,
    }
}

/// Offset of the flags byte (phase bit) in an admin CQ entry: the NIC writes it last.
pub const AQ_CQE_FLAGS_OFFSET: usize = 6;
/// Offset of the flags byte (phase bit) in an event queue entry: the NIC writes it last.
pub const EQE_FLAGS_OFFSET: usize = 1;

/// The phase bit of free-running ring slot `index` in a ring of `depth` entries (a power of
/// two dividing 2^16): 1 on the first pass, flipped on each wrap. Producers write it,
/// consumers treat an entry as new when its phase is this.
pub const fn phase(index: u16, depth: u16) -> bool {
    (index / depth) % 2 == 0
}

/// An admin SQ entry (64 bytes, little-endian): the header and 56 bytes of parameters.
///
/// Layout: `opcode` u8 @0, reserved u8 @1 and u16 @2 (zero), `cmd_id` u32 @4, `params` @8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdminCmd {
    /// One of the `CMD_*` opcodes.
    pub opcode: u8,
    /// The driver's tag, echoed in the completion.
    pub cmd_id: u32,
    /// The opcode's parameters.
    pub params: [u8; AQ_SQE_SIZE - 8],
}

impl AdminCmd {
    /// Encodes the entry as the NIC reads it.
    pub fn encode(&self) -> [u8; AQ_SQE_SIZE] {
        let mut b = [0u8; AQ_SQE_SIZE];
        b[0] = self.opcode;
        put_le32(&mut b, 4, self.cmd_id);
        b[8..].copy_from_slice(&self.params);
        b
    }

    /// Decodes an entry; `None` if a reserved header field is not zero.
    pub fn decode(b: &[u8; AQ_SQE_SIZE]) -> Option<Self> {
        if b[1] != 0 || b[2] != 0 || b[3] != 0 {
            return None;
        }
        let mut params = [0u8; AQ_SQE_SIZE - 8];
        params.copy_from_slice(&b[8..]);
        Some(Self {
            opcode: b[0],
            cmd_id: get_le32(b, 4)?,
            params,
        })
    }
}

/// `CMD_QUERY_DEVICE` parameters: where to write the [`DeviceAttrs`].
///
/// Layout in `params`: `resp_addr` u64 @0, `resp_len` u32 @8, the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryDeviceParams {
    /// Bus address of the response buffer.
    pub resp_addr: u64,
    /// Length of the response buffer; the NIC writes `min(resp_len, DEVICE_ATTRS_SIZE)`.
    pub resp_len: u32,
}

impl QueryDeviceParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> [u8; AQ_SQE_SIZE - 8] {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le64(&mut p, 0, self.resp_addr);
        put_le32(&mut p, 8, self.resp_len);
        p
    }

    /// Decodes; `None` if the reserved bytes are not zero.
    pub fn decode(p: &[u8; AQ_SQE_SIZE - 8]) -> Option<Self> {
        if p[12..].iter().any(|&x| x != 0) {
            return None;
        }
        Some(Self {
            resp_addr: get_le64(p, 0)?,
            resp_len: get_le32(p, 8)?,
        })
    }
}

/// `CMD_QUERY_PORT` parameters.
///
/// Layout in `params`: `port` u32 @0 (1-based), reserved u32 @4, `resp_addr` u64 @8,
/// `resp_len` u32 @16, the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryPortParams {
    /// Port number, from 1.
    pub port: u32,
    /// Bus address of the response buffer.
    pub resp_addr: u64,
    /// Length of the response buffer; the NIC writes `min(resp_len, PORT_ATTRS_SIZE)`.
    pub resp_len: u32,
}

impl QueryPortParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> [u8; AQ_SQE_SIZE - 8] {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.port);
        put_le64(&mut p, 8, self.resp_addr);
        put_le32(&mut p, 16, self.resp_len);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &[u8; AQ_SQE_SIZE - 8]) -> Option<Self> {
        if p[4..8].iter().chain(&p[20..]).any(|&x| x != 0) {
            return None;
        }
        Some(Self {
            port: get_le32(p, 0)?,
            resp_addr: get_le64(p, 8)?,
            resp_len: get_le32(p, 16)?,
        })
    }
}

/// `CMD_DEALLOC_PD` parameters.
///
/// Layout in `params`: `pdn` u32 @0, the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdParams {
    /// The PD number `CMD_ALLOC_PD` returned.
    pub pdn: u32,
}

impl PdParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> [u8; AQ_SQE_SIZE - 8] {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.pdn);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &[u8; AQ_SQE_SIZE - 8]) -> Option<Self> {
        if p[4..].iter().any(|&x| x != 0) {
            return None;
        }
        Some(Self {
            pdn: get_le32(p, 0)?,
        })
    }
}

/// An admin CQ entry (16 bytes, little-endian).
///
/// Layout: `cmd_id` u32 @0, `status` u16 @4, flags u8 @6 (bit 0: phase), reserved u8 @7,
/// `result` u64 @8. The phase bit flips each time the NIC wraps the ring; an entry is new
/// when its phase equals the consumer's expected phase (1 on the first pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdminCompletion {
    /// The command's `cmd_id`.
    pub cmd_id: u32,
    /// One of the `AQ_*` statuses.
    pub status: u16,
    /// The phase bit.
    pub phase: bool,
    /// Command-specific result.
    pub result: u64,
}

impl AdminCompletion {
    /// Encodes the entry as the NIC writes it.
    pub fn encode(&self) -> [u8; AQ_CQE_SIZE] {
        let mut b = [0u8; AQ_CQE_SIZE];
        put_le32(&mut b, 0, self.cmd_id);
        put_le16(&mut b, 4, self.status);
        b[6] = u8::from(self.phase);
        put_le64(&mut b, 8, self.result);
        b
    }

    /// Decodes an entry.
    pub fn decode(b: &[u8; AQ_CQE_SIZE]) -> Self {
        Self {
            cmd_id: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            status: u16::from_le_bytes([b[4], b[5]]),
            phase: b[6] & 1 != 0,
            result: u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        }
    }
}

/// An event queue entry (16 bytes, little-endian).
///
/// Layout: `kind` u8 @0, flags u8 @1 (bit 0: phase), reserved u16 @2, `data` u32 @4,
/// `data2` u64 @8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// One of the `EVENT_*` types.
    pub kind: u8,
    /// The phase bit, as for admin completions.
    pub phase: bool,
    /// Type-specific data.
    pub data: u32,
    /// More type-specific data.
    pub data2: u64,
}

impl Event {
    /// Encodes the entry as the NIC writes it.
    pub fn encode(&self) -> [u8; EQE_SIZE] {
        let mut b = [0u8; EQE_SIZE];
        b[0] = self.kind;
        b[1] = u8::from(self.phase);
        put_le32(&mut b, 4, self.data);
        put_le64(&mut b, 8, self.data2);
        b
    }

    /// Decodes an entry.
    pub fn decode(b: &[u8; EQE_SIZE]) -> Self {
        Self {
            kind: b[0],
            phase: b[1] & 1 != 0,
            data: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            data2: u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        }
    }
}

/// Size of the [`DeviceAttrs`] response (interface 1.2; 64 in 1.1).
pub const DEVICE_ATTRS_SIZE: usize = 96;

/// `atomic_cap`: the NIC does no atomics (`IB_ATOMIC_NONE`).
pub const ATOMIC_CAP_NONE: u32 = 0;
/// `atomic_cap`: atomics are atomic with respect to every other atomic on this NIC
/// (`IB_ATOMIC_HCA`), not to the CPUs' accesses or another NIC's.
pub const ATOMIC_CAP_HCA: u32 = 1;

/// The `CMD_QUERY_DEVICE` response (96 bytes, little-endian, offsets in the field docs;
/// @84..96 reserved, zero).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceAttrs {
    /// @0: firmware (model) version, `major << 32 | minor << 16 | patch`.
    pub fw_version: u64,
    /// @8: node GUID.
    pub node_guid: u64,
    /// @16: supported page sizes, a bit per size (bit 12 = 4 KiB).
    pub page_size_cap: u64,
    /// @24: maximum number of QPs.
    pub max_qp: u32,
    /// @28: maximum work requests per QP.
    pub max_qp_wr: u32,
    /// @32: maximum number of CQs.
    pub max_cq: u32,
    /// @36: maximum entries per CQ.
    pub max_cqe: u32,
    /// @40: maximum number of MRs.
    pub max_mr: u32,
    /// @44: maximum number of PDs.
    pub max_pd: u32,
    /// @48: maximum scatter/gather entries per work request.
    pub max_sge: u32,
    /// @52: number of ports.
    pub num_ports: u32,
    /// @56: vendor part ID (hardware revision).
    pub vendor_part_id: u32,
    /// @60: hardware version.
    pub hw_ver: u32,
    /// @64 (1.2): maximum number of SRQs.
    pub max_srq: u32,
    /// @68 (1.2): maximum work requests per SRQ.
    pub max_srq_wr: u32,
    /// @72 (1.2): maximum scatter/gather entries per SRQ work request.
    pub max_srq_sge: u32,
    /// @76: `ATOMIC_CAP_*` (1.2).
    pub atomic_cap: u32,
    /// @80 (1.9): maximum number of memory windows (0 before: none).
    pub max_mw: u32,
}

impl DeviceAttrs {
    /// Encodes the response as the NIC writes it.
    pub fn encode(&self) -> [u8; DEVICE_ATTRS_SIZE] {
        let mut b = [0u8; DEVICE_ATTRS_SIZE];
        put_le64(&mut b, 0, self.fw_version);
        put_le64(&mut b, 8, self.node_guid);
        put_le64(&mut b, 16, self.page_size_cap);
        let words = [
            self.max_qp,
            self.max_qp_wr,
            self.max_cq,
            self.max_cqe,
            self.max_mr,
            self.max_pd,
            self.max_sge,
            self.num_ports,
            self.vendor_part_id,
            self.hw_ver,
            self.max_srq,
            self.max_srq_wr,
            self.max_srq_sge,
        ];
        for (i, w) in words.iter().enumerate() {
            put_le32(&mut b, 24 + 4 * i, *w);
        }
        put_le32(&mut b, 76, self.atomic_cap);
        put_le32(&mut b, 80, self.max_mw);
        b
    }

    /// Decodes a response.
    pub fn decode(b: &[u8; DEVICE_ATTRS_SIZE]) -> Self {
        let w = |i: usize| get_le32(b, 24 + 4 * i).unwrap_or(0);
        Self {
            fw_version: get_le64(b, 0).unwrap_or(0),
            node_guid: get_le64(b, 8).unwrap_or(0),
            page_size_cap: get_le64(b, 16).unwrap_or(0),
            max_qp: w(0),
            max_qp_wr: w(1),
            max_cq: w(2),
            max_cqe: w(3),
            max_mr: w(4),
            max_pd: w(5),
            max_sge: w(6),
            num_ports: w(7),
            vendor_part_id: w(8),
            hw_ver: w(9),
            max_srq: w(10),
            max_srq_wr: w(11),
            max_srq_sge: w(12),
            atomic_cap: get_le32(b, 76).unwrap_or(0),
            max_mw: get_le32(b, 80).unwrap_or(0),
        }
    }
}

// Compile-time checks: both the driver and the model refuse to build if these break.
const _: () = assert!(BAR0_SIZE.is_power_of_two());
const _: () = assert!(REG_EQ_DB + 4 <= BAR0_SIZE, "a register lies outside BAR0");
const _: () = assert!(
    PCI_CLASS >> 8 == 0x0207,
    "the class is InfiniBand controller"
);

// ---------------------------------------------------------------------------------------
// Interface 1.1: memory regions, completion queues, queue pairs, doorbell pages.
// ---------------------------------------------------------------------------------------

/// The parameter area of an admin command.
pub type Params = [u8; AQ_SQE_SIZE - 8];

/// Whether every byte of `p[range]` is zero (an out-of-range range counts as not zero).
fn zero(p: &[u8], range: core::ops::Range<usize>) -> bool {
    p.get(range).is_some_and(|s| s.iter().all(|&x| x == 0))
}

/// Admin command: register a memory region ([`CreateMrParams`]); the result is its key.
pub const CMD_CREATE_MR: u8 = 0x05;
/// Admin command: deregister a memory region ([`KeyParams`]).
pub const CMD_DESTROY_MR: u8 = 0x06;
/// Admin command: create a completion queue ([`CreateCqParams`]); the result is the CQN.
pub const CMD_CREATE_CQ: u8 = 0x07;
/// Admin command: destroy a completion queue ([`NumParams`]).
pub const CMD_DESTROY_CQ: u8 = 0x08;
/// Admin command: create a queue pair ([`CreateQpParams`]); the result is the QPN.
pub const CMD_CREATE_QP: u8 = 0x09;
/// Admin command: modify a queue pair ([`ModifyQpParams`], a [`QpAttr`] buffer).
pub const CMD_MODIFY_QP: u8 = 0x0a;
/// Admin command: query a queue pair into a [`QpAttr`] buffer ([`QueryQpParams`]).
pub const CMD_QUERY_QP: u8 = 0x0b;
/// Admin command: destroy a queue pair, in any state ([`NumParams`]).
pub const CMD_DESTROY_QP: u8 = 0x0c;

/// Event type: an armed CQ got a completion (`data` = CQN).
pub const EVENT_CQ_COMPLETION: u8 = 4;
/// Event type: a CQ overran or its ring became unreachable (`data` = CQN, `data2` =
/// `CQ_ERR_*`); the CQ takes no more completions.
pub const EVENT_CQ_ERROR: u8 = 5;
/// Event type: a QP hit an error that is neither of the two below (`data` = QPN); it is in
/// `ERR` (`IB_EVENT_QP_FATAL`).
pub const EVENT_QP_FATAL: u8 = 6;
/// Event type: invalid request on a QP's receive side (`data` = QPN; `IB_EVENT_QP_REQ_ERR`).
pub const EVENT_QP_REQ_ERR: u8 = 7;
/// Event type: a remote access violation on a QP (`data` = QPN; `IB_EVENT_QP_ACCESS_ERR`).
pub const EVENT_QP_ACCESS_ERR: u8 = 8;
/// Event type: a QP in `SQD` drained its send queue and asked to be told (`data` = QPN;
/// `IB_EVENT_SQ_DRAINED`).
pub const EVENT_QP_SQ_DRAINED: u8 = 9;
/// Event type: an RC QP in `RTR` received its first packet (`data` = QPN;
/// `IB_EVENT_COMM_EST`).
pub const EVENT_QP_COMM_EST: u8 = 10;

/// `EVENT_CQ_ERROR` reason: a completion found the ring full.
pub const CQ_ERR_OVERRUN: u64 = 1;
/// `EVENT_CQ_ERROR` reason: the ring or its doorbell record could not be reached by DMA.
pub const CQ_ERR_DMA: u64 = 2;

/// MR access flag: the NIC may write the MR locally (`IB_ACCESS_LOCAL_WRITE`). Local read
/// is always allowed.
pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
/// MR/QP access flag: remote writes (`IB_ACCESS_REMOTE_WRITE`); needs `LOCAL_WRITE` on MRs.
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// MR/QP access flag: remote reads (`IB_ACCESS_REMOTE_READ`).
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
/// MR/QP access flag: remote atomics (`IB_ACCESS_REMOTE_ATOMIC`); needs `LOCAL_WRITE` on
/// MRs.
pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
/// MR/QP access flag (1.8): remote FLUSHes to global visibility
/// (`IB_ACCESS_FLUSH_GLOBAL`). There is no persistent flag: the NIC has no persistence
/// domain.
pub const ACCESS_FLUSH_GLOBAL: u32 = 1 << 8;
/// Every access flag the NIC knows; other bits are `AQ_BAD_PARAM`.
pub const ACCESS_ALL: u32 = ACCESS_LOCAL_WRITE
    | ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_FLUSH_GLOBAL
    | ACCESS_MW_BIND;
/// Every access flag a QP may have (`ACCESS_MW_BIND` is an MR's alone); other bits are
/// `AQ_BAD_PARAM`.
pub const QP_ACCESS_ALL: u32 = ACCESS_ALL & !ACCESS_MW_BIND;

mod counters;
mod cq;
mod doorbell;
mod limits;
mod memory;
mod mw;
mod port;
mod qp;
mod srq;
mod wqe;

pub use counters::*;
pub use cq::*;
pub use doorbell::*;
pub use limits::*;
pub use memory::*;
pub use mw::*;
pub use port::*;
pub use qp::*;
pub use srq::*;
pub use wqe::*;
