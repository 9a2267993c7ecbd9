//! The wire between NICs: RC packets in RoCEv2 frames.
//!
//! A frame is Ethernet II (ethertype IPv4) + IPv4 + UDP (destination port 4791) + the IB
//! transport headers of [`super::packet`] + the payload and its pad + the 4-byte ICRC, as
//! RoCEv2 defines it (soft-RoCE: `drivers/infiniband/sw/rxe/rxe_icrc.c`, `rxe_net.c`).
//! Every NIC of a run sits on one L2 segment and is addressed by its LID: its MAC is
//! `02:6f:72:64:LIDhi:LIDlo`, its IPv4 address `10.77.LIDhi.LIDlo`. The UDP source port is a
//! hash of the sending QP (RoCEv2's entropy), in `0xc000..=0xffff`.
//!
//! [`decode`] checks everything a receiver can: lengths, the IPv4 header checksum, the
//! UDP port and length, the ICRC, the opcode (RC, UC or UD) and the pad. A frame that fails is
//! an error the caller counts and drops; nothing here panics on any input.
//!
//! [`Wire`] is where frames go: a Unix datagram socket per NIC in the model
//! ([`crate::wire`]), an in-memory network in the tests.

use super::packet::{Packet, BTH_LEN};

/// RoCEv2's UDP destination port.
pub const ROCE_PORT: u16 = 4791;
/// Bytes of the Ethernet II header.
pub const ETH_LEN: usize = 14;
/// Bytes of the IPv4 header (no options).
pub const IP_LEN: usize = 20;
/// Bytes of the UDP header.
pub const UDP_LEN: usize = 8;
/// Bytes of the ICRC.
pub const ICRC_LEN: usize = 4;
/// The largest frame the model sends: headers, a 4096-byte payload, its ICRC.
pub const MAX_FRAME: usize = ETH_LEN + IP_LEN + UDP_LEN + 64 + 4096 + ICRC_LEN;

const ETHERTYPE_IPV4: u16 = 0x0800;
const IPPROTO_UDP: u8 = 17;

/// Where a NIC's frames go.
pub trait Wire: Send {
    /// Sends `frame` towards the NIC with LID `dlid`. A frame that cannot go is lost, as
    /// on a real wire (the requester's retries recover). A wire may hold it back, to
    /// carry it with the next ones in one datagram, until [`Wire::flush`].
    fn send(&self, dlid: u16, frame: &[u8]);

    /// Sends every frame [`Wire::send`] held back. The NIC's owner calls it when an action
    /// on the NIC ends ([`crate::device::Locked`] does, as it unlocks).
    fn flush(&self) {}
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
    /// Not IPv4/UDP to port 4791, or not the model's addresses.
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
    /// The sender's LID (from its IPv4 address).
    pub slid: u16,
    /// The receiver's LID.
    pub dlid: u16,
    /// The transport headers.
    pub packet: Packet,
    /// The payload, without the pad.
    pub payload: Vec<u8>,
}

/// The MAC address of the NIC with LID `lid`.
pub fn mac(lid: u16) -> [u8; 6] {
    let [hi, lo] = lid.to_be_bytes();
    [0x02, 0x6f, 0x72, 0x64, hi, lo]
}

/// The IPv4 address of the NIC with LID `lid`.
pub fn ipv4(lid: u16) -> [u8; 4] {
    let [hi, lo] = lid.to_be_bytes();
    [10, 77, hi, lo]
}

/// The UDP source port of QP `qpn`'s frames.
pub fn src_port(qpn: u32) -> u16 {
    let h = qpn.wrapping_mul(0x9e37_79b1) >> 18;
    // CAST: 14 bits.
    0xc000 | (h as u16 & 0x3fff)
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
/// masked LRH), the IPv4 header with TOS, TTL and checksum set to ones, the UDP header
/// with its checksum set to ones, the BTH with its reserved byte set to ones, and the rest
/// of the transport headers, payload and pad as they are. `None` if `frame` is shorter
/// than the headers.
pub fn icrc(frame: &[u8]) -> Option<u32> {
    let body_end = frame.len().checked_sub(ICRC_LEN)?;
    let mut masked = [0u8; IP_LEN + UDP_LEN + BTH_LEN];
    masked.copy_from_slice(frame.get(ETH_LEN..ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN)?);
    let rest = frame.get(ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN..body_end)?;
    for i in [1, 8, 10, 11, IP_LEN + 6, IP_LEN + 7, IP_LEN + UDP_LEN + 4] {
        if let Some(b) = masked.get_mut(i) {
            *b = 0xff;
        }
    }
    let crc = crc32_raw(0xffff_ffff, &[0xff; 8]);
    let crc = crc32_raw(crc, &masked);
    Some(!crc32_raw(crc, rest))
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

/// The frame carrying `pkt` and `payload` from LID `slid` (QP `sqpn`) to LID `dlid`. The
/// BTH's pad count is set here; the payload is padded to a multiple of four bytes.
pub fn encode(slid: u16, dlid: u16, sqpn: u32, pkt: &Packet, payload: &[u8]) -> Vec<u8> {
    let pad = (4 - payload.len() % 4) % 4;
    let mut p = *pkt;
    // CAST: at most 3.
    p.bth.pad = pad as u8;
    let mut out = Vec::with_capacity(ETH_LEN + IP_LEN + UDP_LEN + 64 + payload.len() + 8);
    out.extend_from_slice(&mac(dlid));
    out.extend_from_slice(&mac(slid));
    out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let udp_len = UDP_LEN + p.header_len() + payload.len() + pad + ICRC_LEN;
    let ip_len = IP_LEN + udp_len;
    let ip = ETH_LEN;
    out.extend_from_slice(&[0x45, 0]);
    // CAST: at most MAX_FRAME.
    out.extend_from_slice(&(ip_len as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x40, 0, 64, IPPROTO_UDP, 0, 0]);
    out.extend_from_slice(&ipv4(slid));
    out.extend_from_slice(&ipv4(dlid));
    let sum = ip_checksum(out.get(ip..).unwrap_or_default());
    if let Some(c) = out.get_mut(ip + 10..ip + 12) {
        c.copy_from_slice(&sum.to_be_bytes());
    }
    out.extend_from_slice(&src_port(sqpn).to_be_bytes());
    out.extend_from_slice(&ROCE_PORT.to_be_bytes());
    // CAST: at most MAX_FRAME.
    out.extend_from_slice(&(udp_len as u16).to_be_bytes());
    // A zero UDP checksum: none (IPv4 allows it; RoCEv2 relies on the ICRC).
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
    out
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Decodes and checks frame `b`.
///
/// # Errors
///
/// The first check that failed.
pub fn decode(b: &[u8]) -> Result<Frame, FrameError> {
    use FrameError as E;
    if b.len() < ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN + ICRC_LEN {
        return Err(E::Length);
    }
    if be16(b, 12) != Some(ETHERTYPE_IPV4) {
        return Err(E::NotRoce);
    }
    let ip = b.get(ETH_LEN..ETH_LEN + IP_LEN).ok_or(E::Length)?;
    if ip.first() != Some(&0x45) || ip.get(9) != Some(&IPPROTO_UDP) {
        return Err(E::NotRoce);
    }
    if ip_checksum(ip) != 0 {
        return Err(E::Checksum);
    }
    let total = usize::from(be16(ip, 2).ok_or(E::Length)?);
    if total != b.len() - ETH_LEN {
        return Err(E::Length);
    }
    if ip.get(12..14) != Some(&[10, 77]) || ip.get(16..18) != Some(&[10, 77]) {
        return Err(E::NotRoce);
    }
    let slid = be16(ip, 14).ok_or(E::Length)?;
    let dlid = be16(ip, 18).ok_or(E::Length)?;
    let udp = ETH_LEN + IP_LEN;
    if be16(b, udp + 2) != Some(ROCE_PORT) {
        return Err(E::NotRoce);
    }
    if be16(b, udp + 4).map(usize::from) != Some(total - IP_LEN) {
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
    Ok(Frame {
        slid,
        dlid,
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
        // Not RC: the receive path refuses it, after the ICRC passed.
        assert_eq!(decode(&frame), Err(FrameError::NotRoce));
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
        let f = encode(1, 2, 3, &pkt, b"hello");
        assert_eq!(f.len() % 4, 2, "14 + a multiple of four");
        let d = decode(&f).unwrap();
        let mut want = pkt;
        want.bth.pad = 3;
        assert_eq!(
            (d.slid, d.dlid, d.packet, &d.payload[..]),
            (1, 2, want, &b"hello"[..])
        );
        assert_eq!(&f[..6], &mac(2));
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
