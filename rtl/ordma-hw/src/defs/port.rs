// SPDX-License-Identifier: GPL-2.0
//! The port (interface 1.0; the Ethernet port of 1.4): `CMD_QUERY_PORT`'s answer, the
//! port states and link layers, and the GID table the driver sets (`CMD_SET_GID`).

use super::*;

/// Size of the [`PortAttrs`] response (1.4; 32 before, and a driver asking for 32 gets
/// those).
pub const PORT_ATTRS_SIZE: usize = 48;

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
/// Link layer InfiniBand (`IB_LINK_LAYER_INFINIBAND`): LIDs, one GID, no MAC.
pub const LINK_LAYER_INFINIBAND: u8 = 1;
/// Link layer Ethernet (`IB_LINK_LAYER_ETHERNET`, 1.4): RoCEv2, every address a GRH, a GID
/// table the driver sets ([`CMD_SET_GID`]) and the port's MAC.
pub const LINK_LAYER_ETHERNET: u8 = 2;

/// The `CMD_QUERY_PORT` response (48 bytes, little-endian, offsets in the field docs).
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
    /// @4: the port's LID (0 on Ethernet).
    pub lid: u16,
    /// @6: the subnet manager's LID (0 on Ethernet).
    pub sm_lid: u16,
    /// @8: the port GUID (InfiniBand: GID 0 is fe80::/64 + this).
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
    /// @28 (1.4): `LINK_LAYER_*`; 0 from a NIC before 1.4 means InfiniBand.
    pub link_layer: u8,
    /// @32 (1.4): the port's MAC address (Ethernet; zero on InfiniBand). Bytes 29..32 and
    /// 38..48 are reserved, zero.
    pub mac: [u8; 6],
}

impl PortAttrs {
    /// Encodes the response as the NIC writes it.
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
        b[28] = self.link_layer;
        b[32..38].copy_from_slice(&self.mac);
        b
    }

    /// Decodes a response.
    pub fn decode(b: &[u8; PORT_ATTRS_SIZE]) -> Self {
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&b[32..38]);
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
            link_layer: b[28],
            mac,
        }
    }

    /// Whether the port is Ethernet (RoCEv2).
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == LINK_LAYER_ETHERNET
    }
}

/// Admin command (1.4): set or clear entry `index` of an Ethernet port's GID table
/// ([`SetGidParams`]). The NIC sends RoCEv2 frames from the entry a QP's or AH's
/// `sgid_index` names, and takes in the frames to UDP port 4791 of one of its entries'
/// addresses. `AQ_BAD_PARAM` on an InfiniBand port (its one GID is the NIC's own), for a
/// port that does not exist, an index at or past `gid_tbl_len`, an unknown type or a
/// reserved byte not zero. Result 0.
pub const CMD_SET_GID: u8 = 0x12;

/// `SetGidParams::gid_type`: the entry is empty (clears it).
pub const GID_TYPE_NONE: u8 = 0;
/// `SetGidParams::gid_type`: a RoCEv2 GID: an IPv4-mapped GID (`::ffff:a.b.c.d`) is the
/// IPv4 address a.b.c.d, any other the IPv6 address.
pub const GID_TYPE_ROCE_V2: u8 = 1;

/// `CMD_SET_GID` parameters.
///
/// Layout in `params`: `port` u32 @0 (1-based), `index` u32 @4, `gid` 16 bytes @8 (network
/// order, zero with `GID_TYPE_NONE`), `gid_type` u8 @24, the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetGidParams {
    /// Port number, from 1.
    pub port: u32,
    /// GID table index, below the port's `gid_tbl_len`.
    pub index: u32,
    /// The GID.
    pub gid: [u8; 16],
    /// `GID_TYPE_*`.
    pub gid_type: u8,
}

impl SetGidParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> [u8; AQ_SQE_SIZE - 8] {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.port);
        put_le32(&mut p, 4, self.index);
        p[8..24].copy_from_slice(&self.gid);
        p[24] = self.gid_type;
        p
    }

    /// Decodes; `None` if a reserved byte is not zero, the type is unknown, or an empty
    /// entry carries a GID.
    pub fn decode(p: &[u8; AQ_SQE_SIZE - 8]) -> Option<Self> {
        if p[25..].iter().any(|&x| x != 0) {
            return None;
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&p[8..24]);
        let gid_type = p[24];
        match gid_type {
            GID_TYPE_ROCE_V2 => {}
            GID_TYPE_NONE if gid == [0; 16] => {}
            _ => return None,
        }
        Some(Self {
            port: get_le32(p, 0)?,
            index: get_le32(p, 4)?,
            gid,
            gid_type,
        })
    }
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`, RFC 4291), else `None`.
pub fn gid_ipv4(gid: &[u8; 16]) -> Option<[u8; 4]> {
    if gid[..10].iter().all(|&x| x == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some([gid[12], gid[13], gid[14], gid[15]])
    } else {
        None
    }
}
