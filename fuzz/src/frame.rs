//! The `frame` target: datagrams from the wire, into NIC 2 (LID 2), whose QP B is
//! connected to QP A of NIC 1 (LID 1, played by the input) with a 256-byte path MTU. At the
//! start B has four receive WQEs posted and a WRITE, a READ, a SEND and a fetch and add in
//! flight (their frames go to a wire that checks every frame the NIC sends decodes), so the
//! input's requests, ACKs, READ responses and atomic acknowledges all find state to act on.
//! Beside B, UC QP U ([`UC_QPN`], four receive WQEs posted) is connected to NIC 1's QP
//! [`UC_PEER`], for the input's UC requests.
//!
//! Operations (the first byte modulo [`OPS`]):
//!
//! | op | operands | what |
//! |---|---|---|
//! | 0 | chunk | transport headers and payload (BTH on), wrapped by [`wrap`] in valid Ethernet, IPv4 and UDP headers from LID 1 to LID 2 and a valid ICRC, received |
//! | 1 | chunk | a datagram as it is (one frame, or a batch), received |
//! | 2 | u8 n, n chunks | n wrapped frames in one batch datagram, received |
//! | 3 | u8 | the timers: now (bit 0 clear) or an hour later |
//! | 4 | | one more receive WQE on B |
//! | 5 | u8 | one more WRITE, READ, SEND or fetch and add on B (modulo 4) |
//! | 6 | | both CQs polled empty |
//!
//! Every chunk is also run through the pure decoders ([`check_decoders`]); the NIC's writes
//! while it takes the input's frames and timers are checked ([`Guard`]).

use std::time::{Duration, Instant};

use ordma_hw as hw;
use ordma_model::engine::packet::Packet;
use ordma_model::engine::port::{self, Ips, Route};
use ordma_model::engine::wire::{self, Batch, Wire, ETH_LEN, ICRC_LEN, IP_LEN, UDP_LEN};

use crate::common::rig::{sge, wqe, Rig, BIG_VA, CQ_LOG, SMALL_VA};
use crate::guard::Guard;
use crate::script::Reader;
use crate::MAX_OPS;

/// The number of operations.
pub const OPS: u8 = 7;
/// Operation: wrapped transport bytes.
pub const OP_FRAME: u8 = 0;
/// Operation: a raw datagram.
pub const OP_RAW: u8 = 1;
/// Operation: a batch of wrapped frames.
pub const OP_BATCH: u8 = 2;
/// Operation: the timers.
pub const OP_TICK: u8 = 3;
/// Operation: a receive WQE on B.
pub const OP_RECV: u8 = 4;
/// Operation: a request from B.
pub const OP_REQUEST: u8 = 5;
/// Operation: poll both CQs.
pub const OP_POLL: u8 = 6;

/// NIC 2's UC QP (the rig's first QP after A and B).
pub const UC_QPN: u32 = hw::QPN_FIRST + 2;
/// The NIC 1 QP it is connected to.
pub const UC_PEER: u32 = 9;

/// The value of the word at B's `SMALL_VA + 0x3f00` at the start.
pub const ATOMIC_WORD: u64 = 0x0807_0605_0403_0201;

/// IB's path MTU code for 256 bytes (`IB_MTU_256`): multi-packet messages from 600 bytes.
pub const MTU_256: u8 = 1;

/// The input's side: NIC 1.
pub const PEER_LID: u16 = 1;
/// The NIC under test: NIC 2.
pub const LID: u16 = 2;

/// The wire of the NIC under test: every frame it sends must decode.
struct Checked;

impl Wire for Checked {
    fn send(&self, dmac: [u8; 6], frame: &[u8]) {
        let f = wire::decode(frame).expect("the NIC sends frames that decode");
        assert_eq!((f.src.lid, f.dmac), (LID, dmac));
    }
}

/// The frame from LID `slid` to LID `dlid` carrying `transport` (the IB transport headers,
/// payload and pad), with valid lengths, IPv4 checksum and ICRC, as [`wire::encode`] lays
/// it out.
pub fn wrap(slid: u16, dlid: u16, transport: &[u8]) -> Vec<u8> {
    let udp_len = UDP_LEN + transport.len() + ICRC_LEN;
    let ip_len = u16::try_from(IP_LEN + udp_len).unwrap_or(u16::MAX);
    let udp_len = u16::try_from(udp_len).unwrap_or(u16::MAX);
    let mut f = Vec::with_capacity(ETH_LEN + usize::from(ip_len));
    f.extend_from_slice(&port::lid_mac(dlid));
    f.extend_from_slice(&port::lid_mac(slid));
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&port::lid_ipv4(slid));
    f.extend_from_slice(&port::lid_ipv4(dlid));
    let mut sum = 0u32;
    for w in f[ETH_LEN..].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // CAST: folded to 16 bits.
    f[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&wire::src_port(0).to_be_bytes());
    f.extend_from_slice(&wire::ROCE_PORT.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(transport);
    f.extend_from_slice(&[0; ICRC_LEN]);
    if let Some(crc) = wire::icrc(&f) {
        let n = f.len();
        f[n - ICRC_LEN..].copy_from_slice(&crc.to_le_bytes());
    }
    f
}

/// The transport part of frame `f` (what [`wrap`] wraps).
pub fn transport(f: &[u8]) -> &[u8] {
    f.get(ETH_LEN + IP_LEN + UDP_LEN..f.len().saturating_sub(ICRC_LEN))
        .unwrap_or_default()
}

/// Checks the frame and packet decoders on `b`: a frame or packet that decodes encodes to
/// something that decodes to the same.
pub fn check_decoders(b: &[u8]) {
    for f in wire::frames(b).flatten() {
        if let Ok(fr) = wire::decode(f) {
            let ips = match (hw::gid_ipv4(&fr.src.gid), hw::gid_ipv4(&fr.dst)) {
                (Some(s), Some(d)) => Ips::V4(s, d),
                _ => Ips::V6(fr.src.gid, fr.dst),
            };
            let route = Route {
                dmac: fr.dmac,
                smac: port::lid_mac(fr.src.lid),
                ips,
                traffic_class: 0,
                hop_limit: 64,
                flow_label: 0,
            };
            let again = wire::decode(&wire::encode(&route, 0, &fr.packet, &fr.payload));
            // The IP header's other fields (the GRH area) are the encoder's own.
            let key = |f: &wire::Frame| {
                (
                    f.dmac,
                    f.src.lid,
                    f.src.gid,
                    f.dst,
                    f.packet,
                    f.payload.clone(),
                )
            };
            assert_eq!(again.as_ref().map(key), Ok(key(&fr)));
        }
    }
    if let Some((p, len)) = Packet::decode(b) {
        assert_eq!(p.header_len(), len);
        let mut out = Vec::new();
        p.encode(&mut out);
        assert_eq!(Packet::decode(&out), Some((p, len)));
    }
}

/// NIC 2 as the target starts it, on `wire` (the seeds' generator puts it on a real
/// conversation with NIC 1).
pub fn nic(wire: Box<dyn Wire>) -> Rig {
    let mut r = Rig::bare(LID);
    r.nic.set_wire(Some(wire));
    let (a, b) = (r.a.qpn, r.b.qpn);
    r.connect(b, a, 500, 100, |at| {
        at.ah.dlid = PEER_LID;
        at.timeout = 10;
        at.path_mtu = MTU_256;
    });
    r.fill(SMALL_VA, &crate::common::rig::bytes(2, 0x4000));
    // The word NIC 1's atomics work on.
    r.fill(SMALL_VA + 0x3f00, &ATOMIC_WORD.to_le_bytes());
    for _ in 0..4 {
        recv(&mut r);
    }
    for which in 0..4 {
        request(&mut r, which);
    }
    // UC QP U in place of the rig's QP A (unused here), its receives posted.
    let b = std::mem::replace(
        &mut r.b,
        crate::common::rig::Qp {
            qpn: 0,
            sq: 0,
            rq: 0,
            sq_pi: 0,
            rq_pi: 0,
        },
    );
    r.uc_pair();
    let u = r.a.qpn;
    r.connect_uc(u, UC_PEER, 700, 300, |at| {
        at.ah.dlid = PEER_LID;
        at.path_mtu = MTU_256;
    });
    let small = r.small;
    for i in 0..4u64 {
        r.recv('a', &[sge(SMALL_VA + 0x2_0000 + i * 0x800, 0x800, small)]);
    }
    r.b = b;
    r
}

/// Posts a receive WQE of 2 KiB on B.
fn recv(r: &mut Rig) {
    let small = r.small;
    let at = SMALL_VA + 0x1_0000 + u64::from(r.b.rq_pi % 8) * 0x800;
    r.recv('b', &[sge(at, 0x800, small)]);
}

/// Posts a WRITE (0), a READ (1) or a SEND (2) of 600 bytes on B, signaled, towards NIC 1's
/// big MR (its key is this NIC's: the rigs are built alike), or a fetch and add (3) on a
/// word of NIC 1's small MR.
fn request(r: &mut Rig, which: u8) {
    if which == 3 {
        let (small, big) = (r.small, r.big);
        let seg = hw::AtomicSeg {
            compare_add: 3,
            swap: 0,
        };
        let local = [sge(BIG_VA + 0x7000, 8, big)];
        let op = hw::WR_ATOMIC_FETCH_AND_ADD;
        let flags = hw::WQE_FLAG_SIGNALED;
        r.put_atomic('b', op, flags, SMALL_VA + 0x3f08, small, seg, &local);
        r.ring_sq('b');
        return;
    }
    let (opcode, va) = match which {
        0 => (hw::WR_RDMA_WRITE, BIG_VA),
        1 => (hw::WR_RDMA_READ, BIG_VA + 0x1000),
        _ => (hw::WR_SEND, 0),
    };
    let mut w = wqe(opcode, hw::WQE_FLAG_SIGNALED, 1);
    if va != 0 {
        w.remote_addr = va;
        w.rkey = r.big;
    }
    let local = SMALL_VA + 0x2000 + u64::from(which) * 0x400;
    let small = r.small;
    r.send('b', w, &[sge(local, 600, small)], &[]);
}

/// Runs one input.
pub fn run(data: &[u8]) {
    exec(data);
}

/// Runs one input; the NIC after it.
fn exec(data: &[u8]) -> Rig {
    let mut r = Reader::new(data);
    let mut rig = nic(Box::new(Checked));
    for _ in 0..MAX_OPS {
        if r.is_empty() {
            break;
        }
        match r.u8() % OPS {
            OP_FRAME => {
                let t = r.chunk(wire::MAX_FRAME);
                check_decoders(t);
                let f = wrap(PEER_LID, LID, t);
                rig.nic.receive_datagram(&f, &Guard(&rig.mem), &rig.irq);
            }
            OP_RAW => {
                let d = r.chunk(usize::MAX);
                check_decoders(d);
                rig.nic.receive_datagram(d, &Guard(&rig.mem), &rig.irq);
            }
            OP_BATCH => {
                let mut batch = Batch::default();
                for _ in 0..r.u8() % 8 {
                    let t = r.chunk(wire::MAX_FRAME);
                    check_decoders(t);
                    batch.push(&wrap(PEER_LID, LID, t));
                }
                rig.nic
                    .receive_datagram(batch.datagram(), &Guard(&rig.mem), &rig.irq);
            }
            OP_TICK => {
                let later = if r.u8() & 1 != 0 { 3600 } else { 0 };
                let now = Instant::now() + Duration::from_secs(later);
                rig.nic.tick(now, &Guard(&rig.mem), &rig.irq);
            }
            OP_RECV => recv(&mut rig),
            OP_REQUEST => {
                let which = r.u8() % 4;
                request(&mut rig, which);
            }
            _ => {
                for cq in ['s', 'r'] {
                    for _ in 0..1 << CQ_LOG {
                        if rig.poll(cq).is_none() {
                            break;
                        }
                    }
                }
            }
        }
    }
    rig
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Writer;

    /// NIC 1's UC requests to U: the first SEND and the WRITE with immediate arrive, the
    /// SEND that lost a packet is dropped (its last packet counted).
    #[test]
    fn uc_requests_reach_the_uc_responder() {
        let mut s = Writer::new();
        for f in crate::seeds::uc_frames() {
            s.u8(OP_FRAME).chunk(transport(&f));
        }
        let mut rig = exec(&s.finish());
        let got: Vec<_> = std::iter::from_fn(|| rig.poll('r'))
            .map(|c| (c.status, c.opcode, c.qpn, c.byte_len, c.wqe_index))
            .collect();
        assert_eq!(
            got,
            [
                (hw::WC_SUCCESS, hw::WC_RECV, UC_QPN, 522, 0),
                (hw::WC_SUCCESS, hw::WC_RECV_RDMA_IMM, UC_QPN, 16, 1)
            ]
        );
        assert_eq!(rig.nic.status_snapshot().uc_dropped, 1);
    }

    /// NIC 1's side of the seeds' conversation, replayed, completes B's WRITE, READ, SEND
    /// and fetch and add and delivers A's SEND, SEND with immediate, WRITE with immediate
    /// and atomics: the wrapped frames reach the responder and the completer.
    #[test]
    fn the_conversation_completes() {
        let mut s = Writer::new();
        for f in crate::seeds::conversation() {
            s.u8(OP_FRAME).chunk(transport(&f));
        }
        let mut rig = exec(&s.finish());
        let mut cqes = |cq| {
            std::iter::from_fn(|| rig.poll(cq))
                .map(|c| (c.status, c.opcode))
                .collect::<Vec<_>>()
        };
        let ok = hw::WC_SUCCESS;
        assert_eq!(
            cqes('s'),
            [
                (ok, hw::WC_RDMA_WRITE),
                (ok, hw::WC_RDMA_READ),
                (ok, hw::WC_SEND),
                (ok, hw::WC_FETCH_ADD),
            ]
        );
        assert_eq!(
            cqes('r'),
            [
                (ok, hw::WC_RECV),
                (ok, hw::WC_RECV),
                (ok, hw::WC_RECV_RDMA_IMM)
            ]
        );
        // NIC 1's compare and swap and fetch and add on B's word: executed once each.
        let word = u64::from_le_bytes(
            rig.read(SMALL_VA + 0x3f00, 8)
                .try_into()
                .unwrap_or_default(),
        );
        assert_eq!(word, ATOMIC_WORD + 0x10);
        assert_eq!(rig.nic.status_snapshot().atomics, [2, 0]);
    }
}
