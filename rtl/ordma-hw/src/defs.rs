// SPDX-License-Identifier: GPL-2.0
//! The ordma NIC's hardware definitions.
//!
//! This file is compiled twice: by the kernel crate (`drivers/infiniband/hw/ordma/hw.rs`
//! includes it with `#[path]`) and by the `ordma-hw` crate that the model uses. It must stay
//! dependency-free: `core` only, no allocation, no `std`. `Documentation/hardware.md`
//! describes the same interface in prose; change both together.

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
pub const VERSION: u32 = (1 << 16) | 1;

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
/// Doorbell pages in BAR2, one per user context; page 0 belongs to the kernel.
pub const DB_PAGES: u32 = 64;

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

/// Size of the [`PortAttrs`] response.
pub const PORT_ATTRS_SIZE: usize = 32;

/// Port state `DOWN` (the IB spec's value, as `enum ib_port_state` has it).
pub const PORT_STATE_DOWN: u8 = 1;
/// Port state `ACTIVE`.
pub const PORT_STATE_ACTIVE: u8 = 4;
/// Physical port state `Disabled`.
pub const PHYS_STATE_DISABLED: u8 = 3;
/// Physical port state `LinkUp`.
pub const PHYS_STATE_LINK_UP: u8 = 5;
/// MTU code for 4096 bytes (the IB spec's `enum ib_mtu`).
pub const MTU_4096: u8 = 5;

/// The `CMD_QUERY_PORT` response (32 bytes, little-endian, offsets in the field docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortAttrs {
    /// @0: logical state (`PORT_STATE_*`).
    pub state: u8,
    /// @1: physical state (`PHYS_STATE_*`).
    pub phys_state: u8,
    /// @2: largest MTU (`MTU_*` code).
    pub max_mtu: u8,
    /// @3: current MTU (`MTU_*` code).
    pub active_mtu: u8,
    /// @4: the port's LID.
    pub lid: u16,
    /// @6: the subnet manager's LID.
    pub sm_lid: u16,
    /// @8: the port GUID (GID 0 is fe80::/64 + this).
    pub port_guid: u64,
    /// @16: GID table length.
    pub gid_tbl_len: u32,
    /// @20: PKey table length.
    pub pkey_tbl_len: u16,
    /// @22: link width (the IB spec's code; 1 = 1x).
    pub link_width: u8,
    /// @23: link speed (the IB spec's code; 1 = SDR).
    pub link_speed: u8,
    /// @24: largest message size.
    pub max_msg_sz: u32,
}

impl PortAttrs {
    /// Encodes the response as the NIC writes it (bytes 28..32 reserved, zero).
    pub fn encode(&self) -> [u8; PORT_ATTRS_SIZE] {
        let mut b = [0u8; PORT_ATTRS_SIZE];
        b[0] = self.state;
        b[1] = self.phys_state;
        b[2] = self.max_mtu;
        b[3] = self.active_mtu;
        put_le16(&mut b, 4, self.lid);
        put_le16(&mut b, 6, self.sm_lid);
        put_le64(&mut b, 8, self.port_guid);
        put_le32(&mut b, 16, self.gid_tbl_len);
        put_le16(&mut b, 20, self.pkey_tbl_len);
        b[22] = self.link_width;
        b[23] = self.link_speed;
        put_le32(&mut b, 24, self.max_msg_sz);
        b
    }

    /// Decodes a response.
    pub fn decode(b: &[u8; PORT_ATTRS_SIZE]) -> Self {
        Self {
            state: b[0],
            phys_state: b[1],
            max_mtu: b[2],
            active_mtu: b[3],
            lid: get_le16(b, 4).unwrap_or(0),
            sm_lid: get_le16(b, 6).unwrap_or(0),
            port_guid: get_le64(b, 8).unwrap_or(0),
            gid_tbl_len: get_le32(b, 16).unwrap_or(0),
            pkey_tbl_len: get_le16(b, 20).unwrap_or(0),
            link_width: b[22],
            link_speed: b[23],
            max_msg_sz: get_le32(b, 24).unwrap_or(0),
        }
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

/// Size of the [`DeviceAttrs`] response.
pub const DEVICE_ATTRS_SIZE: usize = 64;

/// The `CMD_QUERY_DEVICE` response (64 bytes, little-endian, offsets in the field docs).
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
        ];
        for (i, w) in words.iter().enumerate() {
            put_le32(&mut b, 24 + 4 * i, *w);
        }
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
/// Every access flag the NIC knows; other bits are `AQ_BAD_PARAM`.
pub const ACCESS_ALL: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// Bytes of a page-table page: [`PT_ENTRIES`] little-endian `u64` bus addresses.
pub const PT_PAGE_SIZE: u64 = 4096;
/// Entries of a page-table page.
pub const PT_ENTRIES: u64 = 512;
/// log2 of [`PT_ENTRIES`].
pub const PT_ENTRIES_SHIFT: u32 = 9;
/// Most page-table levels a page list may have.
pub const PT_MAX_LEVELS: u8 = 4;
/// Most pages one page list (an MR, a ring) may have: 2^24, a 64 GiB MR of 4 KiB pages.
pub const MAX_PAGES: u32 = 1 << 24;
/// The page sizes (log2) a page list may use: 4 KiB, 2 MiB, 1 GiB, as `page_size_cap`.
pub const PAGE_SHIFTS: [u8; 3] = [12, 21, 30];

/// Whether `shift` is a page size the NIC supports (one of [`PAGE_SHIFTS`]).
pub fn page_shift_ok(shift: u8) -> bool {
    PAGE_SHIFTS.contains(&shift)
}

/// The fewest page-table levels that hold `npages` pages (1 for 0..=512 pages); `None`
/// beyond [`PT_MAX_LEVELS`].
pub fn pt_levels_for(npages: u64) -> Option<u8> {
    let mut levels = 1u8;
    let mut cap = PT_ENTRIES;
    while cap < npages {
        levels = levels.checked_add(1)?;
        cap = cap.checked_mul(PT_ENTRIES)?;
    }
    (levels <= PT_MAX_LEVELS).then_some(levels)
}

/// A page list in host memory: the MR's (or ring's) pages, through a tree of page-table
/// pages.
///
/// A page-table page is 4 KiB, aligned, of 512 little-endian `u64` entries. In a table at
/// level 0 the entries are the bus addresses of the pages themselves (aligned to the page
/// size); at level n > 0 they are the bus addresses of level n-1 tables. The root is at
/// level `levels - 1`. Entry `i` of a level-0 table covers page `512 * t + i` of the list,
/// where `t` is the table's position in its level; only the entries the list needs are
/// read. `levels` is 1..=4 and `512^levels >= npages`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageList {
    /// Bus address of the root table (4 KiB aligned).
    pub root: u64,
    /// Pages in the list, 1..=[`MAX_PAGES`].
    pub npages: u32,
    /// log2 of the page size, one of [`PAGE_SHIFTS`].
    pub page_shift: u8,
    /// Table levels, 1..=[`PT_MAX_LEVELS`].
    pub levels: u8,
}

impl PageList {
    /// Whether the fields are consistent (not whether the tables are reachable): a known
    /// page size, a page count in range, a root aligned to 4 KiB, and enough levels.
    pub fn shape_ok(&self) -> bool {
        self.npages != 0
            && self.npages <= MAX_PAGES
            && page_shift_ok(self.page_shift)
            && self.root % PT_PAGE_SIZE == 0
            && (1..=PT_MAX_LEVELS).contains(&self.levels)
            && pt_levels_for(u64::from(self.npages)).is_some_and(|l| l <= self.levels)
    }

    /// The list's size in bytes (`npages << page_shift`).
    pub fn bytes(&self) -> u64 {
        u64::from(self.npages)
            .checked_shl(u32::from(self.page_shift))
            .unwrap_or(u64::MAX)
    }
}

/// `CMD_CREATE_MR` parameters.
///
/// Layout in `params`: `pdn` u32 @0, `access` u32 @4 (`ACCESS_*`), `iova` u64 @8, `length`
/// u64 @16, `pt_root` u64 @24, `npages` u32 @32, `page_shift` u8 @36, `pt_levels` u8 @37,
/// the rest (@38..56) zero. The MR covers `[iova, iova + length)`; its first byte is at
/// offset `iova % page_size` of the first page, and `npages` is exactly the number of pages
/// that span needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateMrParams {
    /// The PD the MR belongs to.
    pub pdn: u32,
    /// `ACCESS_*` flags.
    pub access: u32,
    /// The MR's first virtual address.
    pub iova: u64,
    /// The MR's length in bytes (not zero).
    pub length: u64,
    /// Its pages.
    pub pages: PageList,
}

impl CreateMrParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.pdn);
        put_le32(&mut p, 4, self.access);
        put_le64(&mut p, 8, self.iova);
        put_le64(&mut p, 16, self.length);
        put_le64(&mut p, 24, self.pages.root);
        put_le32(&mut p, 32, self.pages.npages);
        p[36] = self.pages.page_shift;
        p[37] = self.pages.levels;
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if !zero(p, 38..p.len()) {
            return None;
        }
        Some(Self {
            pdn: get_le32(p, 0)?,
            access: get_le32(p, 4)?,
            iova: get_le64(p, 8)?,
            length: get_le64(p, 16)?,
            pages: PageList {
                root: get_le64(p, 24)?,
                npages: get_le32(p, 32)?,
                page_shift: p[36],
                levels: p[37],
            },
        })
    }
}

/// The key of an MR: `index << 8 | key`, the same for local and remote access.
pub fn mr_key(index: u32, key: u8) -> u32 {
    (index << 8) | u32::from(key)
}

/// `CMD_DESTROY_MR` parameters.
///
/// Layout in `params`: `key` u32 @0 (the key `CMD_CREATE_MR` returned), the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyParams {
    /// The MR's key.
    pub key: u32,
}

impl KeyParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.key);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        zero(p, 4..p.len()).then_some(())?;
        Some(Self {
            key: get_le32(p, 0)?,
        })
    }
}

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

/// QP type: reliable connected (`IB_QPT_RC`).
pub const QP_TYPE_RC: u8 = 2;
/// QP type: unreliable datagram (`IB_QPT_UD`); reserved, `AQ_BAD_PARAM` in 1.1.
pub const QP_TYPE_UD: u8 = 4;
/// QP numbers start here: 0 and 1 are the IB special QPs' (SMI, GSI).
pub const QPN_FIRST: u32 = 2;
/// The largest CQN or QPN: doorbells carry it in 16 bits.
pub const MAX_QUEUE_NUM: u32 = 0xffff;
/// `CMD_CREATE_QP` flag: the QP receives through an SRQ (`rq_root` low 32 bits = SRQN);
/// reserved, `AQ_BAD_PARAM` in 1.1.
pub const QP_FLAG_SRQ: u8 = 1 << 0;
/// Bytes a send WQE needs besides its SGEs (a 16-byte control segment and a 16-byte
/// remote-address segment); `sq_wqe_size >= SQ_WQE_BASE + 16 * max_send_sge` and
/// `>= SQ_WQE_BASE + max_inline`.
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
/// Layout in `params`: `qp_type` u8 @0, `db_page` u8 @1, `max_send_sge` u8 @2,
/// `max_recv_sge` u8 @3, `pdn` u32 @4, `send_cqn` u32 @8, `recv_cqn` u32 @12, `max_inline`
/// u16 @16, `sq_log_depth` u8 @18, `sq_log_wqe_size` u8 @19, `rq_log_depth` u8 @20,
/// `rq_log_wqe_size` u8 @21, `flags` u8 @22 (`QP_FLAG_*`), reserved u8 @23, `sq_root` u64
/// @24, `rq_root` u64 @32, `sq_npages` u32 @40, `rq_npages` u32 @44, `sq_page_shift` u8 @48,
/// `sq_pt_levels` u8 @49, `rq_page_shift` u8 @50, `rq_pt_levels` u8 @51, reserved u32 @52.
/// A QP without an RQ (send only) has every `rq_*` field zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQpParams {
    /// `QP_TYPE_*`.
    pub qp_type: u8,
    /// The doorbell page (user context) that owns the QP; its CQs must have the same.
    pub db_page: u8,
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
        p[1] = self.db_page;
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
        if p[23] != 0 || !zero(p, 52..p.len()) {
            return None;
        }
        Some(Self {
            qp_type: p[0],
            db_page: p[1],
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

/// An address vector (48 bytes, little-endian), the part of `ib_ah_attr` RC needs.
///
/// Layout: `dlid` u16 @0, `sl` u8 @2, `src_path_bits` u8 @3, `static_rate` u8 @4,
/// `ah_flags` u8 @5 (`AH_FLAG_*`), `port_num` u8 @6, reserved u8 @7, `dgid` 16 bytes @8,
/// `flow_label` u32 @24, `sgid_index` u8 @28, `hop_limit` u8 @29, `traffic_class` u8 @30,
/// reserved u8 @31 and bytes @32..48 (room for RoCE's destination MAC), zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAh {
    /// Destination LID.
    pub dlid: u16,
    /// Service level, 0..=15.
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
}

impl QpAh {
    fn encode_into(&self, b: &mut [u8]) {
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
    }

    fn decode_from(b: &[u8]) -> Option<Self> {
        let byte = |o: usize| b.get(o).copied();
        if byte(7)? != 0 || byte(31)? != 0 || !zero(b, 32..QP_AH_SIZE) {
            return None;
        }
        let mut dgid = [0u8; 16];
        dgid.copy_from_slice(b.get(8..24)?);
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

/// Whether `mask` is a valid RC modify from `cur` to `next`, by `ib_modify_qp_is_ok`'s
/// rules: the transition exists, `CUR_STATE` only from `RTR`, `RTS`, `SQD` or `SQE`, every
/// required attribute and nothing beyond required, optional, `STATE` and `RATE_LIMIT`.
pub const fn rc_modify_ok(cur: u8, next: u8, mask: u32) -> bool {
    if mask & QP_ATTR_CUR_STATE != 0
        && cur != QPS_RTR
        && cur != QPS_RTS
        && cur != QPS_SQD
        && cur != QPS_SQE
    {
        return false;
    }
    let Some((req, opt)) = rc_transition(cur, next) else {
        return false;
    };
    mask & req == req && mask & !(req | opt | QP_ATTR_STATE | QP_ATTR_RATE_LIMIT) == 0
}

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

/// A doorbell value: `num << 16 | index`.
pub fn db_value(num: u32, index: u16) -> u32 {
    (num << 16) | u32::from(index)
}

const _: () = assert!(DB_PAGE_SIZE * DB_PAGES as usize == BAR2_SIZE);
const _: () = assert!(1u64 << PT_ENTRIES_SHIFT == PT_ENTRIES);
const _: () = assert!(PT_ENTRIES * 8 == PT_PAGE_SIZE);
const _: () = assert!(QP_ATTR_AH_OFFSET + QP_AH_SIZE <= QP_ATTR_SIZE);
