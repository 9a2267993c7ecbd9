//! The port: InfiniBand (LIDs) or Ethernet (RoCEv2: a MAC, a GID table of IP addresses),
//! as `hardware.md`, "The Ethernet port (1.4)", defines it.
//!
//! The engine never looks at LIDs or addresses itself: it hands a QP's or AH's address
//! vector to [`Nic::route`] to learn where a packet goes and what its frame's headers say
//! ([`Route`]), asks [`Nic::to_own`] whether the packet stays in the NIC, and
//! [`Nic::is_peer`] whether a received packet comes from the peer a QP is connected to
//! ([`Source`]). On an InfiniBand port every NIC of a run is on one segment addressed by
//! LID (its MAC and IPv4 address derived from the LID: [`lid_mac`], [`lid_ipv4`]); on an
//! Ethernet port the address vector names the destination MAC and GID, and the GID table
//! the source.

use ordma_hw as hw;
use tracing::debug;

use super::admin::Outcome;
use super::packet::{self, Packet};
use super::{wire, Nic};

/// GID table entries of an Ethernet port.
pub const GID_TBL_LEN: u32 = 16;

/// The MAC address of the NIC with LID `lid` on an InfiniBand port's segment (and the
/// default MAC of an Ethernet port of NIC number `lid - 1`).
pub fn lid_mac(lid: u16) -> [u8; 6] {
    let [hi, lo] = lid.to_be_bytes();
    [0x02, 0x6f, 0x72, 0x64, hi, lo]
}

/// The IPv4 address of the NIC with LID `lid` on an InfiniBand port's segment.
pub fn lid_ipv4(lid: u16) -> [u8; 4] {
    let [hi, lo] = lid.to_be_bytes();
    [10, 77, hi, lo]
}

/// The route between the NICs with LIDs `slid` and `dlid` on an InfiniBand port's
/// segment.
pub fn lid_route(slid: u16, dlid: u16) -> Route {
    Route {
        dmac: lid_mac(dlid),
        smac: lid_mac(slid),
        ips: Ips::V4(lid_ipv4(slid), lid_ipv4(dlid)),
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    }
}

/// The IPv4-mapped GID of `ip` (`::ffff:a.b.c.d`).
pub fn ipv4_gid(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip);
    g
}

/// The network addresses of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ips {
    /// IPv4: source, destination.
    V4([u8; 4], [u8; 4]),
    /// IPv6: source, destination.
    V6([u8; 16], [u8; 16]),
}

/// Where a packet goes and the headers of its frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Destination MAC.
    pub dmac: [u8; 6],
    /// Source MAC (the port's).
    pub smac: [u8; 6],
    /// Source and destination IP.
    pub ips: Ips,
    /// IPv4 TOS or IPv6 traffic class.
    pub traffic_class: u8,
    /// TTL or hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (20 bits; 0: none), and the UDP source port's entropy if not zero.
    pub flow_label: u32,
}

/// Who sent a packet, as the port knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// The sender's LID (InfiniBand; 0 on Ethernet).
    pub lid: u16,
    /// The sender's IP address as a GID (IPv4-mapped for IPv4).
    pub gid: [u8; 16],
    /// What a UD receive buffer's first 40 bytes get (Ethernet: the IP header as the
    /// RoCEv2 annex places it); `None`: left as they are.
    pub grh: Option<[u8; 40]>,
}

/// An Ethernet port's state: its GID table.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gids {
    entries: [Option<[u8; 16]>; GID_TBL_LEN as usize],
}

impl Gids {
    /// Entry `index`, if set.
    pub fn get(&self, index: u8) -> Option<[u8; 16]> {
        self.entries.get(usize::from(index)).copied().flatten()
    }

    /// Whether `gid` is one of the table's entries.
    pub fn contains(&self, gid: &[u8; 16]) -> bool {
        self.entries.iter().flatten().any(|g| g == gid)
    }

    /// Entries set.
    pub fn count(&self) -> usize {
        self.entries.iter().flatten().count()
    }
}

impl Nic {
    /// Whether the port is Ethernet.
    pub fn is_ethernet(&self) -> bool {
        self.config.mac.is_some()
    }

    /// The port's MAC: an Ethernet port's own, an InfiniBand port's derived from its LID.
    pub fn mac(&self) -> [u8; 6] {
        self.config.mac.unwrap_or_else(|| lid_mac(self.config.lid))
    }

    /// The GID table entries set (0 on InfiniBand).
    pub fn gid_count(&self) -> usize {
        self.gids.count()
    }

    /// The attributes of port 1 as `CMD_QUERY_PORT` reports them.
    pub fn port_attrs(&self) -> hw::PortAttrs {
        let up = self.config.link_up;
        let eth = self.config.mac;
        hw::PortAttrs {
            state: if up {
                hw::PORT_STATE_ACTIVE
            } else {
                hw::PORT_STATE_DOWN
            },
            phys_state: if up {
                hw::PHYS_STATE_LINK_UP
            } else {
                hw::PHYS_STATE_DISABLED
            },
            max_mtu: hw::MTU_4096,
            active_mtu: hw::MTU_4096,
            lid: if eth.is_some() { 0 } else { self.config.lid },
            sm_lid: 0,
            port_guid: self.config.attrs.node_guid,
            gid_tbl_len: if eth.is_some() { GID_TBL_LEN } else { 1 },
            pkey_tbl_len: 1,
            link_width: 1,
            link_speed: 1,
            max_msg_sz: 1 << 31,
            link_layer: if eth.is_some() {
                hw::LINK_LAYER_ETHERNET
            } else {
                hw::LINK_LAYER_INFINIBAND
            },
            mac: eth.unwrap_or_default(),
        }
    }

    /// Whether the port takes address vector `av` (a QP's path, a UD WQE's destination).
    pub(super) fn av_ok(&self, av: &hw::QpAh) -> bool {
        let p = self.port_attrs();
        av.valid_on(p.link_layer, p.gid_tbl_len)
    }

    /// `CMD_SET_GID`: sets or clears an Ethernet port's GID table entry.
    pub(super) fn set_gid(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::SetGidParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let slot = usize::try_from(p.index)
            .ok()
            .and_then(|i| self.gids.entries.get_mut(i));
        match slot {
            Some(e) if p.port == 1 && self.config.mac.is_some() => {
                *e = (p.gid_type == hw::GID_TYPE_ROCE_V2).then_some(p.gid);
                debug!(index = p.index, gid = ?p.gid, set = e.is_some(), "GID table entry");
                (hw::AQ_OK, 0)
            }
            _ => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// Where a packet to address `av` goes: `None` if the port cannot send it (an
    /// Ethernet address whose source entry is empty, or of another family than the
    /// destination).
    pub(super) fn route(&self, av: &hw::QpAh) -> Option<Route> {
        if self.config.mac.is_none() {
            return Some(lid_route(self.config.lid, av.dlid));
        }
        let sgid = self.gids.get(av.sgid_index)?;
        let ips = match (hw::gid_ipv4(&sgid), hw::gid_ipv4(&av.dgid)) {
            (Some(s), Some(d)) => Ips::V4(s, d),
            (None, None) => Ips::V6(sgid, av.dgid),
            _ => return None,
        };
        Some(Route {
            dmac: av.dmac,
            smac: self.mac(),
            ips,
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
            flow_label: av.flow_label,
        })
    }

    /// Whether a packet to `av` stays in the NIC (loopback): its destination is the
    /// port itself, and no test asked for loopback over the wire.
    pub(super) fn to_own(&self, av: &hw::QpAh) -> bool {
        self.is_own(av) && !self.loop_wire
    }

    /// Whether `av` names the port itself.
    pub(super) fn is_own(&self, av: &hw::QpAh) -> bool {
        match self.config.mac {
            Some(mac) => av.dmac == mac,
            None => av.dlid == self.config.lid,
        }
    }

    /// Whether a packet from `src` comes from the peer address `av` names.
    pub(super) fn is_peer(&self, av: &hw::QpAh, src: &Source) -> bool {
        if self.config.mac.is_some() {
            av.dgid == src.gid
        } else {
            av.dlid == src.lid
        }
    }

    /// Who packet `pkt` with `payload_len` bytes of payload, sent to the NIC itself along
    /// `route`, comes from: what [`super::wire::decode`] would say of its frame (the GRH
    /// area only for UD, the only transport that shows it).
    pub(super) fn own_source(&self, route: &Route, pkt: &Packet, payload_len: usize) -> Source {
        let eth = self.config.mac.is_some();
        let ud = packet::transport(pkt.bth.opcode) == packet::UD;
        Source {
            lid: if eth { 0 } else { self.config.lid },
            gid: match route.ips {
                Ips::V4(s, _) => ipv4_gid(s),
                Ips::V6(s, _) => s,
            },
            grh: (eth && ud).then(|| wire::grh_area(route, wire::udp_len(pkt, payload_len))),
        }
    }

    /// Whether a frame to IP address `gid` (as a GID) is the RDMA engine's.
    pub(super) fn takes_ip(&self, gid: &[u8; 16]) -> bool {
        match self.config.mac {
            Some(_) => self.gids.contains(gid),
            None => hw::gid_ipv4(gid) == Some(lid_ipv4(self.config.lid)),
        }
    }
}
