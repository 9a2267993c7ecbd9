//! The wire between NICs: IB transport packets in RoCEv2 frames.
//!
//! A frame is Ethernet II + IPv4 or IPv6 + UDP (destination port 4791) + the IB transport
//! headers of [`super::packet`] + the payload and its pad + the 4-byte ICRC, as RoCEv2
//! defines it (soft-RoCE: `drivers/infiniband/sw/rxe/rxe_icrc.c`, `rxe_net.c`). The
//! addresses come from the port ([`super::port::Route`]): on an InfiniBand port derived
//! from LIDs (MAC `02:6f:72:64:LIDhi:LIDlo`, IPv4 `10.77.LIDhi.LIDlo`), on an Ethernet port
//! from the address vector and the GID table. The UDP source port is the flow label's
//! (as the kernel's `rdma_flow_label_to_udp_sport`) or, without one, a hash of the sending
//! QP (RoCEv2's entropy), in `0xc000..=0xffff`.
//!
//! [`decode`] checks everything a receiver can: lengths, the IPv4 header checksum, the
//! UDP port and length, the ICRC, the opcode (RC, UC or UD) and the pad. A frame that fails is
//! an error the caller counts and drops; nothing here panics on any input.
//!
//! [`Wire`] is where frames go: a Unix datagram socket per NIC in the model
//! ([`crate::wire`]), an in-memory network in the tests.

use ordma_hw as hw;

use super::packet::{Packet, BTH_LEN};
use super::port::{ipv4_gid, Ips, Route, Source};

/// RoCEv2's UDP destination port.
pub const ROCE_PORT: u16 = 4791;
/// Bytes of the Ethernet II header.
pub const ETH_LEN: usize = 14;
/// Bytes of the IPv4 header (no options).
pub const IP_LEN: usize = 20;
/// Bytes of the IPv6 header (no extension headers).
pub const IP6_LEN: usize = 40;
/// Bytes of the UDP header.
pub const UDP_LEN: usize = 8;
/// Bytes of the ICRC.
pub const ICRC_LEN: usize = 4;
/// The largest frame the model sends: headers, a 4096-byte payload, its ICRC.
pub const MAX_FRAME: usize = ETH_LEN + IP6_LEN + UDP_LEN + 64 + 4096 + ICRC_LEN;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const IPPROTO_UDP: u8 = 17;

/// Where a NIC's frames go.
pub trait Wire: Send {
    /// Sends `frame` to the port with MAC `dmac` (a broadcast or multicast MAC: to every
    /// other port). A frame that cannot go is lost, as on a real wire (the requester's
    /// retries recover). A wire may hold it back, to carry it with the next ones in one
    /// datagram, until [`Wire::flush`].
    fn send(&self, dmac: [u8; 6], frame: &[u8]);

    /// Sends every frame [`Wire::send`] held back. The NIC's owner calls it when an action
    /// on the NIC ends ([`crate::device::Locked`] does, as it unlocks).
    fn flush(&self) {}

    /// Makes the link fail on request (the control channel's `wire`): from now on, each
    /// frame sent meets `kind` with probability `p` (0 to 1). `Err` if this wire cannot.
    fn impair(&self, kind: Impairment, p: f64) -> Result<(), String> {
        let _ = (kind, p);
        Err("this wire does not fail on request".into())
    }

    /// What the link's failures did: ` key=value` pairs (empty if it cannot fail).
    fn impairments(&self) -> String {
        String::new()
    }

    /// The NIC died softly (`on`), or a function reset revived it ([`super::Death`]): a
    /// wire that carries frames besides the NIC's own (an Ethernet port's netdev: the
    /// host's) stops carrying them while the NIC is dead, both ways. The NIC itself sends
    /// nothing then and drops what it receives.
    fn silence(&self, on: bool) {
        let _ = on;
    }

    /// The NIC died softly (either way, [`super::Death`]): it forgets the ports it sent
    /// to (their sockets, the frames held for them) and their count.
    fn forget_peers(&self) {}
}

/// How a link fails on request ([`Wire::impair`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impairment {
    /// The frame is lost.
    Loss,
    /// The frame arrives twice.
    Duplicate,
    /// The frame arrives after the frames sent behind it in the same action.
    Reorder,
    /// One bit of the frame past its Ethernet header is flipped (the receiver's IP
    /// checksum or ICRC drops it).
    Corrupt,
}

impl Impairment {
    /// Every kind, in the order of their counters.
    pub const ALL: [Self; 4] = [Self::Loss, Self::Duplicate, Self::Reorder, Self::Corrupt];

    /// The kind a control request names: `loss`, `duplicate`, `reorder`, `corrupt`.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Its name in requests.
    pub fn name(self) -> &'static str {
        match self {
            Self::Loss => "loss",
            Self::Duplicate => "duplicate",
            Self::Reorder => "reorder",
            Self::Corrupt => "corrupt",
        }
    }
}

/// The first four bytes of a datagram that carries several frames (a batch): "ORB1".
/// Then, per frame, its length (16 bits, big-endian) and its bytes. A datagram without
/// them is one frame. A frame's Ethernet header starts with the destination MAC,
/// `02:6f:…`, never with these bytes.
pub const BATCH_MAGIC: [u8; 4] = *b"ORB1";
/// The largest batch a NIC sends: 125 full frames. A receiver takes any size it can read.
pub const MAX_BATCH: usize = 512 << 10;

/// Frames gathered into one batch datagram ([`BATCH_MAGIC`]).
#[derive(Debug, Default)]
pub struct Batch {
    buf: Vec<u8>,
    frames: usize,
}

impl Batch {
    /// Whether `frame` (at most [`MAX_FRAME`] bytes) still fits in this batch.
    pub fn fits(&self, frame: &[u8]) -> bool {
        self.buf.len().max(BATCH_MAGIC.len()) + 2 + frame.len() <= MAX_BATCH
    }

    /// Adds `frame`; false (and nothing added) if it does not fit or is longer than a
    /// 16-bit length says.
    pub fn push(&mut self, frame: &[u8]) -> bool {
        let Ok(len) = u16::try_from(frame.len()) else {
            return false;
        };
        if !self.fits(frame) {
            return false;
        }
        if self.buf.is_empty() {
            self.buf.extend_from_slice(&BATCH_MAGIC);
        }
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(frame);
        self.frames += 1;
        true
    }

    /// The batch's bytes as a datagram (header and lengths included).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Frames in the batch.
    pub fn len(&self) -> usize {
        self.frames
    }

    /// Whether the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// The datagram: a single frame as it is, several as a batch.
    pub fn datagram(&self) -> &[u8] {
        match self.frames {
            0 => &[],
            1 => self.buf.get(BATCH_MAGIC.len() + 2..).unwrap_or_default(),
            _ => &self.buf,
        }
    }

    /// Each frame of the batch, in order (to send them one by one).
    pub fn frames(&self) -> Frames<'_> {
        frames(&self.buf)
    }

    /// Empties the batch (keeping its buffer).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.frames = 0;
    }
}

/// The frames a datagram carries ([`BATCH_MAGIC`]): a malformed batch (a length past its
/// end, an empty frame) yields an error and ends there.
pub fn frames(datagram: &[u8]) -> Frames<'_> {
    match datagram.strip_prefix(&BATCH_MAGIC[..]) {
        Some(rest) => Frames { rest, batch: true },
        None => Frames {
            rest: datagram,
            batch: false,
        },
    }
}

/// The iterator of [`frames`].
#[derive(Debug)]
pub struct Frames<'a> {
    rest: &'a [u8],
    batch: bool,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<&'a [u8], FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        if !self.batch {
            return Some(Ok(std::mem::take(&mut self.rest)));
        }
        let frame = match self.rest {
            [hi, lo, rest @ ..] => {
                let len = usize::from(u16::from_be_bytes([*hi, *lo]));
                rest.get(..len)
                    .filter(|f| !f.is_empty())
                    .map(|f| (f, rest.get(len..).unwrap_or_default()))
            }
            _ => None,
        };
        match frame {
            Some((f, rest)) => {
                self.rest = rest;
                Some(Ok(f))
            }
            None => {
                self.rest = &[];
                Some(Err(FrameError::Length))
            }
        }
    }
}

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than its headers, or its lengths disagree.
    Length,
    /// Not IPv4 or IPv6, UDP to port 4791 (on an Ethernet port: the host's frame).
    NotRoce,
    /// The IPv4 header checksum is wrong.
    Checksum,
    /// The ICRC is wrong.
    Icrc,
    /// The transport headers do not decode (not an RC, UC or UD opcode, short, bad pad).
    Transport,
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The destination MAC.
    pub dmac: [u8; 6],
    /// The sender (its LID from an InfiniBand segment's IPv4 address `10.77.hi.lo`, else
    /// 0; its IP as a GID; the GRH area a UD receive gets).
    pub src: Source,
    /// The destination IP as a GID (IPv4-mapped for IPv4).
    pub dst: [u8; 16],
    /// The transport headers.
    pub packet: Packet,
    /// The payload, without the pad.
    pub payload: Vec<u8>,
}

/// The UDP source port of QP `qpn`'s frames to an address without a flow label.
pub fn src_port(qpn: u32) -> u16 {
    let h = qpn.wrapping_mul(0x9e37_79b1) >> 18;
    // CAST: 14 bits.
    0xc000 | (h as u16 & 0x3fff)
}

/// The UDP source port for flow label `fl` (not zero): the kernel's
/// `rdma_flow_label_to_udp_sport` (the low 14 bits xor the high 6, in `0xc000..`).
pub fn flow_src_port(fl: u32) -> u16 {
    let low = (fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14);
    // CAST: 14 bits.
    0xc000 | low as u16
}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xedb88320) of `data`, continuing from the
/// raw register value `crc` (no final inversion).
///
/// `crc32fast`: carry-less multiplication (PCLMULQDQ) where the CPU has it, slice-by-16
/// otherwise (the bit-at-a-time loop cost 29 µs per 4 KiB frame, a slice-by-8 table
/// 1.8 µs; `Documentation/performance.md`). Its state is the inverted register.
fn crc32_raw(crc: u32, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(!crc);
    h.update(data);
    !h.finalize()
}

/// The standard CRC-32 of `data` (init all ones, final inversion): 0xcbf43926 for
/// `"123456789"`.
pub fn crc32(data: &[u8]) -> u32 {
    !crc32_raw(0xffff_ffff, data)
}

/// The ICRC of `frame` without its last four bytes: the CRC-32 of 8 bytes of ones (the
/// masked LRH), the IP header with its variant fields set to ones (IPv4: TOS, TTL and
/// checksum; IPv6: traffic class, flow label, hop limit), the UDP header with its checksum
/// set to ones, the BTH with its reserved byte set to ones, and the rest of the transport
/// headers, payload and pad as they are. `None` if `frame` is shorter than the headers.
pub fn icrc(frame: &[u8]) -> Option<u32> {
    let body_end = frame.len().checked_sub(ICRC_LEN)?;
    let v6 = is_ipv6(frame);
    let ip_len = if v6 { IP6_LEN } else { IP_LEN };
    let head = ip_len + UDP_LEN + BTH_LEN;
    let mut masked = [0u8; IP6_LEN + UDP_LEN + BTH_LEN];
    let masked = masked.get_mut(..head)?;
    masked.copy_from_slice(frame.get(ETH_LEN..ETH_LEN + head)?);
    let rest = frame.get(ETH_LEN + head..body_end)?;
    let ip_fields: &[usize] = if v6 { &[1, 2, 3, 7] } else { &[1, 8, 10, 11] };
    for &i in ip_fields
        .iter()
        .chain(&[ip_len + 6, ip_len + 7, ip_len + UDP_LEN + 4])
    {
        if let Some(b) = masked.get_mut(i) {
            *b = 0xff;
        }
    }
    if v6 {
        if let Some(b) = masked.get_mut(0) {
            *b |= 0x0f;
        }
    }
    let crc = crc32_raw(0xffff_ffff, &[0xff; 8]);
    let crc = crc32_raw(crc, masked);
    Some(!crc32_raw(crc, rest))
}

/// Whether `frame`'s Ethernet header says IPv6.
pub fn is_ipv6(frame: &[u8]) -> bool {
    be16(frame, 12) == Some(ETHERTYPE_IPV6)
}

/// The IPv4 header checksum of `h` (ones' complement of the ones' complement sum).
fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for pair in h.chunks(2) {
        let hi = u32::from(pair.first().copied().unwrap_or(0));
        let lo = u32::from(pair.get(1).copied().unwrap_or(0));
        sum += (hi << 8) | lo;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // CAST: folded to 16 bits.
    !(sum as u16)
}

/// Ones' complement sum of `data` as 16-bit big-endian words, added to `sum`.
fn sum16(mut sum: u32, data: &[u8]) -> u32 {
    for pair in data.chunks(2) {
        let hi = u32::from(pair.first().copied().unwrap_or(0));
        let lo = u32::from(pair.get(1).copied().unwrap_or(0));
        sum += (hi << 8) | lo;
        if sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
    }
    sum
}

/// The UDP checksum of the datagram `udp` (its checksum field zero) between IPv6 `src`
/// and `dst`; 0xffff for a sum of zero (IPv6 forbids a zero UDP checksum).
fn udp6_checksum(src: &[u8; 16], dst: &[u8; 16], udp: &[u8]) -> u16 {
    // CAST: a frame's length fits 32 bits.
    let len = udp.len() as u32;
    let mut sum = sum16(0, src);
    sum = sum16(sum, dst);
    sum = sum16(sum, &len.to_be_bytes());
    sum = sum16(sum, &[0, 0, 0, IPPROTO_UDP]);
    sum = sum16(sum, udp);
    // CAST: folded to 16 bits by `sum16`.
    match !(sum as u16) {
        0 => 0xffff,
        c => c,
    }
}

/// Appends the IP header of a packet along `route` whose UDP datagram (header, transport
/// headers, payload, pad, ICRC) is `udp_len` bytes: IPv4 with its checksum, or IPv6.
fn ip_header(out: &mut Vec<u8>, route: &Route, udp_len: usize) {
    let ip = out.len();
    match route.ips {
        Ips::V4(src, dst) => {
            out.extend_from_slice(&[0x45, route.traffic_class]);
            // CAST: at most MAX_FRAME.
            out.extend_from_slice(&((IP_LEN + udp_len) as u16).to_be_bytes());
            out.extend_from_slice(&[0, 0, 0x40, 0, route.hop_limit, IPPROTO_UDP, 0, 0]);
            out.extend_from_slice(&src);
            out.extend_from_slice(&dst);
            let sum = ip_checksum(out.get(ip..).unwrap_or_default());
            if let Some(c) = out.get_mut(ip + 10..ip + 12) {
                c.copy_from_slice(&sum.to_be_bytes());
            }
        }
        Ips::V6(src, dst) => {
            let word = (6u32 << 28)
                | (u32::from(route.traffic_class) << 20)
                | (route.flow_label & 0xf_ffff);
            out.extend_from_slice(&word.to_be_bytes());
            // CAST: at most MAX_FRAME.
            out.extend_from_slice(&(udp_len as u16).to_be_bytes());
            out.extend_from_slice(&[IPPROTO_UDP, route.hop_limit]);
            out.extend_from_slice(&src);
            out.extend_from_slice(&dst);
        }
    }
}

/// The UDP datagram's length for `pkt` with `payload_len` bytes of payload.
pub fn udp_len(pkt: &Packet, payload_len: usize) -> usize {
    UDP_LEN + pkt.header_len() + payload_len + (4 - payload_len % 4) % 4 + ICRC_LEN
}

/// The frame carrying `pkt` and `payload` from QP `sqpn` along `route`. The BTH's pad
/// count is set here; the payload is padded to a multiple of four bytes.
pub fn encode(route: &Route, sqpn: u32, pkt: &Packet, payload: &[u8]) -> Vec<u8> {
    let pad = (4 - payload.len() % 4) % 4;
    let mut p = *pkt;
    // CAST: at most 3.
    p.bth.pad = pad as u8;
    let mut out = Vec::with_capacity(ETH_LEN + IP6_LEN + UDP_LEN + 64 + payload.len() + 8);
    out.extend_from_slice(&route.dmac);
    out.extend_from_slice(&route.smac);
    let ethertype = match route.ips {
        Ips::V4(..) => ETHERTYPE_IPV4,
        Ips::V6(..) => ETHERTYPE_IPV6,
    };
    out.extend_from_slice(&ethertype.to_be_bytes());
    let udp_len = udp_len(&p, payload.len());
    ip_header(&mut out, route, udp_len);
    let sport = match route.flow_label {
        0 => src_port(sqpn),
        fl => flow_src_port(fl),
    };
    let udp = out.len();
    out.extend_from_slice(&sport.to_be_bytes());
    out.extend_from_slice(&ROCE_PORT.to_be_bytes());
    // CAST: at most MAX_FRAME.
    out.extend_from_slice(&(udp_len as u16).to_be_bytes());
    // IPv4: a zero UDP checksum, none (RoCEv2 relies on the ICRC); IPv6: below.
    out.extend_from_slice(&[0, 0]);
    p.encode(&mut out);
    out.extend_from_slice(payload);
    out.extend_from_slice(&[0; 3][..pad]);
    out.extend_from_slice(&[0; ICRC_LEN]);
    let crc = super::datapath::icrc(&out).unwrap_or(0);
    let n = out.len();
    if let Some(c) = out.get_mut(n - ICRC_LEN..) {
        c.copy_from_slice(&crc.to_le_bytes());
    }
    if let Ips::V6(src, dst) = route.ips {
        let sum = udp6_checksum(&src, &dst, out.get(udp..).unwrap_or_default());
        if let Some(c) = out.get_mut(udp + 6..udp + 8) {
            c.copy_from_slice(&sum.to_be_bytes());
        }
    }
    out
}

/// What a UD receive buffer's first 40 bytes hold for a packet along `route` whose UDP
/// datagram is `udp_len` bytes ([`udp_len`]): the IPv6 header, or 20 zero bytes and the
/// IPv4 header (the RoCEv2 annex).
pub fn grh_area(route: &Route, udp_len: usize) -> [u8; 40] {
    let mut g = [0u8; 40];
    let mut h = Vec::with_capacity(IP6_LEN);
    ip_header(&mut h, route, udp_len);
    let at = 40usize.saturating_sub(h.len());
    if let Some(d) = g.get_mut(at..) {
        d.copy_from_slice(h.get(..40 - at).unwrap_or_default());
    }
    g
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Decodes and checks frame `b`: Ethernet II, IPv4 (no options) or IPv6 (no extension
/// headers), UDP to port 4791, the transport headers, the ICRC.
///
/// # Errors
///
/// The first check that failed. [`FrameError::NotRoce`]: not a RoCEv2 frame at all (the
/// host's, on an Ethernet port).
pub fn decode(b: &[u8]) -> Result<Frame, FrameError> {
    use FrameError as E;
    let v6 = match be16(b, 12) {
        Some(ETHERTYPE_IPV4) => false,
        Some(ETHERTYPE_IPV6) => true,
        _ => return Err(E::NotRoce),
    };
    let ip_len = if v6 { IP6_LEN } else { IP_LEN };
    let ip = b.get(ETH_LEN..ETH_LEN + ip_len).ok_or(E::NotRoce)?;
    let proto = if v6 { ip.get(6) } else { ip.get(9) };
    if proto != Some(&IPPROTO_UDP) || (!v6 && ip.first() != Some(&0x45)) {
        return Err(E::NotRoce);
    }
    if v6 && ip.first().map(|v| v >> 4) != Some(6) {
        return Err(E::NotRoce);
    }
    let udp = ETH_LEN + ip_len;
    if be16(b, udp + 2) != Some(ROCE_PORT) {
        return Err(E::NotRoce);
    }
    if b.len() < udp + UDP_LEN + BTH_LEN + ICRC_LEN {
        return Err(E::Length);
    }
    let (src, dst, udp_len) = if v6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(ip.get(8..24).ok_or(E::Length)?);
        d.copy_from_slice(ip.get(24..40).ok_or(E::Length)?);
        (s, d, usize::from(be16(ip, 4).ok_or(E::Length)?))
    } else {
        if ip_checksum(ip) != 0 {
            return Err(E::Checksum);
        }
        let total = usize::from(be16(ip, 2).ok_or(E::Length)?);
        let s = [ip[12], ip[13], ip[14], ip[15]];
        let d = [ip[16], ip[17], ip[18], ip[19]];
        (
            ipv4_gid(s),
            ipv4_gid(d),
            total.checked_sub(IP_LEN).ok_or(E::Length)?,
        )
    };
    if udp_len != b.len() - udp || be16(b, udp + 4).map(usize::from) != Some(udp_len) {
        return Err(E::Length);
    }
    let n = b.len();
    let got = b.get(n - ICRC_LEN..).ok_or(E::Length)?;
    let want = super::datapath::icrc(b).ok_or(E::Length)?.to_le_bytes();
    if got != want {
        return Err(E::Icrc);
    }
    let transport = b.get(udp + UDP_LEN..n - ICRC_LEN).ok_or(E::Length)?;
    let (packet, hlen) = Packet::decode(transport).ok_or(E::Transport)?;
    if packet.bth.tver != 0 {
        return Err(E::Transport);
    }
    let body = transport.get(hlen..).ok_or(E::Transport)?;
    let end = body
        .len()
        .checked_sub(usize::from(packet.bth.pad))
        .ok_or(E::Transport)?;
    let payload = body.get(..end).ok_or(E::Transport)?.to_vec();
    let mut grh = [0u8; 40];
    if v6 {
        grh.copy_from_slice(ip);
    } else {
        grh[20..].copy_from_slice(ip);
    }
    let mut dmac = [0u8; 6];
    dmac.copy_from_slice(b.get(..6).ok_or(E::Length)?);
    let lid = match hw::gid_ipv4(&src) {
        Some([10, 77, hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    };
    Ok(Frame {
        dmac,
        src: Source {
            lid,
            gid: src,
            grh: Some(grh),
        },
        dst,
        packet,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::super::packet::{self, Bth, Reth};
    use super::*;

    #[test]
    fn crc_known_vectors() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        // soft-RoCE's seed: the CRC register after 8 bytes of ones (the masked LRH).
        assert_eq!(crc32_raw(0xffff_ffff, &[0xff; 8]), 0xdebb_20e3);
    }

    #[test]
    fn crc_matches_the_bitwise_crc_at_every_length_and_offset() {
        fn bitwise(mut crc: u32, data: &[u8]) -> u32 {
            for &b in data {
                crc ^= u32::from(b);
                for _ in 0..8 {
                    crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
                }
            }
            crc
        }
        let data: Vec<u8> = (0..4200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in (0..40).chain([4095, 4096, 4097, 4197]) {
            for off in 0..3 {
                let d = &data[off..off + len];
                assert_eq!(
                    crc32_raw(0xdebb_20e3, d),
                    bitwise(0xdebb_20e3, d),
                    "len {len} off {off}"
                );
            }
        }
    }

    #[test]
    fn icrc_of_a_frame_captured_from_real_hardware() {
        // A RoCEv2 CNP (opcode 0x81) a ConnectX-4 Lx sent, as captured (the capture is in
        // Scapy's RoCE tests): TOS 0xc2 and TTL 64, both masked; ICRC 82 fd 00 2a.
        let hex = [
            "e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2",
            "003c 718c 4000 4011 9161 0a00 1101 0a00",
            "1201 0000 12b7 0028 0000 8100 ffff 4000",
            "0118 0000 0000 0000 0000 0000 0000 0000",
            "0000 0000 0000 82fd 002a",
        ]
        .concat();
        let digits: Vec<u8> = hex
            .bytes()
            .filter(u8::is_ascii_hexdigit)
            .map(|c| (c as char).to_digit(16).unwrap() as u8)
            .collect();
        let frame: Vec<u8> = digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect();
        assert_eq!(frame.len(), 74);
        assert_eq!(ip_checksum(&frame[ETH_LEN..ETH_LEN + IP_LEN]), 0);
        assert_eq!(
            icrc(&frame),
            Some(u32::from_le_bytes([0x82, 0xfd, 0x00, 0x2a]))
        );
        // Not RC, UC or UD: the receive path refuses it, after the ICRC passed.
        assert_eq!(decode(&frame), Err(FrameError::Transport));
    }

    #[test]
    fn batches_round_trip_and_refuse_what_does_not_fit() {
        let mut b = Batch::default();
        assert!(b.is_empty() && b.datagram().is_empty());
        assert!(b.push(b"one"));
        assert_eq!(b.datagram(), b"one", "a single frame goes as it is");
        assert_eq!(frames(b"one").collect::<Vec<_>>(), [Ok(&b"one"[..])]);
        let big = vec![7u8; MAX_FRAME];
        let mut n = 1;
        while b.push(&big) {
            n += 1;
        }
        assert_eq!(n, 1 + (MAX_BATCH - 4 - 5) / (MAX_FRAME + 2));
        assert_eq!(b.bytes(), b.datagram().len());
        assert!(b.datagram().len() <= MAX_BATCH);
        let got: Vec<_> = frames(b.datagram()).collect();
        assert_eq!(got.len(), n);
        assert_eq!(got[0], Ok(&b"one"[..]));
        assert!(got[1..].iter().all(|f| *f == Ok(&big[..])));
        assert!(b.frames().eq(frames(b.datagram())));
        b.clear();
        assert!(!b.push(&vec![0; 70_000]), "longer than a 16-bit length");
        // Truncated anywhere, a batch yields its whole frames and then one error.
        let mut b = Batch::default();
        assert!(b.push(b"abc") && b.push(b"defg"));
        let d = b.datagram();
        assert_eq!(frames(&d[..9]).collect::<Vec<_>>(), [Ok(&b"abc"[..])]);
        for cut in (5..d.len()).filter(|&c| c != 9) {
            let got: Vec<_> = frames(&d[..cut]).collect();
            let whole = usize::from(cut > 9);
            assert_eq!(got.len(), whole + 1, "cut {cut}");
            assert_eq!(got[whole], Err(FrameError::Length), "cut {cut}");
        }
        assert_eq!(frames(&BATCH_MAGIC).count(), 0);
    }

    #[test]
    fn round_trip_and_checks() {
        let pkt = Packet {
            bth: Bth {
                opcode: packet::WRITE_ONLY,
                pkey: 0xffff,
                dest_qp: 0x1234,
                ack_req: true,
                psn: 77,
                ..Default::default()
            },
            reth: Some(Reth {
                va: 0x1000,
                rkey: 0x0100_0002,
                dma_len: 5,
            }),
            ..Default::default()
        };
        let f = encode(&super::super::port::lid_route(1, 2), 3, &pkt, b"hello");
        assert_eq!(f.len() % 4, 2, "14 + a multiple of four");
        let d = decode(&f).unwrap();
        let mut want = pkt;
        want.bth.pad = 3;
        assert_eq!(
            (d.src.lid, d.dst, d.packet, &d.payload[..]),
            (1, ipv4_gid([10, 77, 0, 2]), want, &b"hello"[..])
        );
        assert_eq!(d.dmac, super::super::port::lid_mac(2));
        assert_eq!(&f[..6], &super::super::port::lid_mac(2));
        assert_eq!(
            &f[ETH_LEN + 12..ETH_LEN + 20],
            &[10, 77, 0, 1, 10, 77, 0, 2]
        );
        // The masked fields do not count in the ICRC; every other byte does.
        let mut g = f.clone();
        g[ETH_LEN + 8] = 3;
        g[ETH_LEN + 10] ^= 0;
        let sum = ip_checksum(&{
            let mut h = g[ETH_LEN..ETH_LEN + IP_LEN].to_vec();
            h[10] = 0;
            h[11] = 0;
            h
        });
        g[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&sum.to_be_bytes());
        assert!(decode(&g).is_ok(), "TTL is masked");
        for i in ETH_LEN + IP_LEN + UDP_LEN..f.len() {
            if i == ETH_LEN + IP_LEN + UDP_LEN + 4 {
                continue;
            }
            let mut g = f.clone();
            g[i] ^= 0x10;
            assert!(decode(&g).is_err(), "byte {i}");
        }
        let mut g = f.clone();
        g[ETH_LEN + 12] ^= 1;
        assert_eq!(decode(&g), Err(FrameError::Checksum));
        for n in 0..f.len() {
            assert!(decode(&f[..n]).is_err());
        }
    }
}
