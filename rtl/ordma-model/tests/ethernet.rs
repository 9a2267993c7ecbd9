//! The Ethernet port (interface 1.4): QUERY_PORT's link layer and MAC, the GID table
//! (SET_GID and its refusals), RC and UD between two Ethernet NICs over IPv4-mapped and
//! IPv6 GIDs (the frames' addresses, TOS/traffic class, TTL/hop limit, flow label's UDP
//! source port, IPv6's UDP checksum), the GRH area of UD receives, loopback by the port's
//! own MAC, requests only from the QP's peer GID, no frame without a source GID entry,
//! and the frames that are the host's (not RoCEv2 to one of the port's GIDs).

mod common;

use std::sync::{Arc, Mutex};

use common::eth::*;
use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::port::{ipv4_gid, lid_mac};
use ordma_model::engine::remote::Steer;
use ordma_model::engine::wire::{self, Frame, ETH_LEN};
use ordma_model::mem::Dma;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
const QKEY: u32 = 0x1111_2222;

/// Records every frame on the wire, decoded, with its bytes' first 80 (and passes them).
fn record(p: &mut Pair) -> Arc<Mutex<Vec<Frame>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    p.fault = Box::new(move |_, f: &Frame| {
        s.lock().unwrap().push(f.clone());
        Act::Pass
    });
    seen
}

#[test]
fn query_port_and_the_gid_table() {
    let mut r = Rig::bare_with(3, |c| c.mac = Some([2, 0, 0, 0, 0, 9]));
    let a = r.nic.port_attrs();
    assert_eq!(
        (a.link_layer, a.mac, a.lid, a.gid_tbl_len),
        (hw::LINK_LAYER_ETHERNET, [2, 0, 0, 0, 0, 9], 0, 16)
    );
    assert!(a.is_ethernet());
    let g = gid(3, false);
    assert_eq!(set_gid(&mut r, 15, g, hw::GID_TYPE_ROCE_V2), hw::AQ_OK);
    assert_eq!(
        set_gid(&mut r, 3, gid(3, true), hw::GID_TYPE_ROCE_V2),
        hw::AQ_OK
    );
    assert_eq!(r.nic.gid_count(), 2);
    assert!(r.nic.status_snapshot().to_string().contains(" gids=2 "));
    assert_eq!(
        set_gid(&mut r, 16, g, hw::GID_TYPE_ROCE_V2),
        hw::AQ_BAD_PARAM,
        "index 16: the table has 16 entries"
    );
    assert_eq!(
        set_gid(&mut r, 1, g, 7),
        hw::AQ_BAD_PARAM,
        "an unknown GID type"
    );
    assert_eq!(
        set_gid(&mut r, 1, g, hw::GID_TYPE_NONE),
        hw::AQ_BAD_PARAM,
        "a cleared entry carries no GID"
    );
    let mut p = hw::SetGidParams {
        port: 2,
        index: 0,
        gid: g,
        gid_type: hw::GID_TYPE_ROCE_V2,
    };
    assert_eq!(
        r.run(hw::CMD_SET_GID, p.encode()).0,
        hw::AQ_BAD_PARAM,
        "port 2"
    );
    p.port = 1;
    p.index = 15;
    p.gid = [0; 16];
    p.gid_type = hw::GID_TYPE_NONE;
    assert_eq!(r.run(hw::CMD_SET_GID, p.encode()).0, hw::AQ_OK, "cleared");
    assert_eq!(r.nic.gid_count(), 1);

    let mut ib = Rig::bare(4);
    let a = ib.nic.port_attrs();
    assert_eq!(
        (a.link_layer, a.lid, a.gid_tbl_len),
        (hw::LINK_LAYER_INFINIBAND, 4, 1)
    );
    assert_eq!(
        set_gid(&mut ib, 0, g, hw::GID_TYPE_ROCE_V2),
        hw::AQ_BAD_PARAM,
        "an InfiniBand port has no GID table to set"
    );
}

#[test]
fn an_infiniband_av_is_refused_on_an_ethernet_port() {
    let mut r = eth_nic(1, false);
    let mut a = hw::QpAttr {
        port_num: 1,
        qp_access_flags: hw::ACCESS_REMOTE_WRITE,
        ..Default::default()
    };
    a.qp_state = hw::QPS_INIT;
    let qpn = r.a.qpn;
    let init =
        hw::QP_ATTR_STATE | hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_ACCESS_FLAGS;
    assert_eq!(r.modify(qpn, init, &a), hw::AQ_OK);
    a.qp_state = hw::QPS_RTR;
    a.path_mtu = hw::MTU_4096;
    a.dest_qp_num = r.b.qpn;
    let rtr = hw::QP_ATTR_STATE
        | hw::QP_ATTR_AV
        | hw::QP_ATTR_PATH_MTU
        | hw::QP_ATTR_DEST_QPN
        | hw::QP_ATTR_RQ_PSN
        | hw::QP_ATTR_MAX_DEST_RD_ATOMIC
        | hw::QP_ATTR_MIN_RNR_TIMER;
    for (what, ah) in [
        (
            "a LID, no GRH",
            hw::QpAh {
                dlid: 2,
                port_num: 1,
                ..Default::default()
            },
        ),
        (
            "no destination MAC",
            hw::QpAh {
                dmac: [0; 6],
                ..av(2, false, 0)
            },
        ),
        (
            "a multicast MAC",
            hw::QpAh {
                dmac: [1, 0, 0x5e, 0, 0, 1],
                ..av(2, false, 0)
            },
        ),
        ("source GID index 16", av(2, false, 16)),
    ] {
        a.ah = ah;
        assert_eq!(r.modify(qpn, rtr, &a), hw::AQ_BAD_PARAM, "{what}");
    }
    a.ah = av(2, false, 0);
    assert_eq!(r.modify(qpn, rtr, &a), hw::AQ_OK);
}

/// A WRITE of 10000 bytes and a SEND from A to B; every frame's addresses as the AVs and
/// the GID tables say.
fn write_and_send(v6: bool) {
    let mut p = eth_pair(v6, |_, _| {});
    let seen = record(&mut p);
    let data = bytes(21, 10_000);
    p.r[0].fill(BIG_VA, &data);
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + 0x4_0000, big1);
    p.r[0].send('a', w, &[sge(BIG_VA, 10_000, big0)], &[]);
    p.r[1].recv('b', &[sge(BIG_VA + 0x8_0000, 64, big1)]);
    p.r[0].send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(BIG_VA + 7, 64, big0)],
        &[],
    );
    p.settle(10);
    for op in [hw::WC_RDMA_WRITE, hw::WC_SEND] {
        let c = p.r[0].cqe('s');
        assert_eq!((c.status, c.opcode), (hw::WC_SUCCESS, op), "v6 {v6}");
    }
    let c = p.r[1].cqe('r');
    assert_eq!((c.status, c.byte_len, c.slid), (hw::WC_SUCCESS, 64, 0));
    assert_eq!(p.r[1].read(BIG_VA + 0x4_0000, 10_000), data);
    assert_eq!(p.r[1].read(BIG_VA + 0x8_0000, 64), data[7..71]);
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 4, "requests and ACKs");
    for f in seen.iter() {
        let from_a = f.src.gid == gid(1, v6);
        let (s, d) = if from_a { (1, 2) } else { (2, 1) };
        assert_eq!(
            (f.src.gid, f.dst, f.dmac),
            (gid(s, v6), gid(d, v6), lid_mac(d))
        );
        assert_eq!(f.src.lid, 0, "no LID on Ethernet");
        let ip = f.src.grh.expect("the IP header");
        if v6 {
            // Version 6, traffic class 0x28, flow label 0x54321; hop limit 17.
            assert_eq!(ip[..4], [0x62, 0x85, 0x43, 0x21]);
            assert_eq!((ip[6], ip[7]), (17, 17));
        } else {
            assert_eq!(ip[..20], [0; 20]);
            assert_eq!((ip[20], ip[21], ip[28], ip[29]), (0x45, 0x28, 17, 17));
        }
    }
}

#[test]
fn rc_over_ipv4_gids() {
    write_and_send(false);
}

#[test]
fn rc_over_ipv6_gids() {
    write_and_send(true);
}

/// The raw frames on the wire: IPv6's UDP checksum is right, the flow label's UDP source
/// port is the kernel's, and IPv4 frames carry no UDP checksum.
#[test]
fn udp_source_port_and_checksum() {
    for v6 in [false, true] {
        let mut p = eth_pair(v6, |_, _| {});
        let big0 = p.r[0].big;
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (BIG_VA, p.r[1].big);
        p.r[0].send('a', w, &[sge(BIG_VA, 33, big0)], &[]);
        let (_, f) = p.q.lock().unwrap().front().cloned().expect("a frame");
        let ip = ETH_LEN;
        let udp = ip + if v6 { 40 } else { 20 };
        let sport = u16::from_be_bytes([f[udp], f[udp + 1]]);
        let sum = u16::from_be_bytes([f[udp + 6], f[udp + 7]]);
        if v6 {
            assert_eq!(&f[12..14], &[0x86, 0xdd]);
            // rdma_flow_label_to_udp_sport(0x54321): (0x0321 ^ 0x15) | 0xc000.
            assert_eq!(sport, 0xc000 | (0x0321 ^ 0x15));
            // The ones' complement sum of the pseudo-header and the datagram is all ones.
            let mut words: Vec<u8> = f[ip + 8..ip + 40].to_vec();
            let len = (f.len() - udp) as u32;
            words.extend_from_slice(&len.to_be_bytes());
            words.extend_from_slice(&[0, 0, 0, 17]);
            words.extend_from_slice(&f[udp..]);
            let mut s = 0u32;
            for c in words.chunks(2) {
                s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            assert_eq!(s, 0xffff, "IPv6 UDP checksum {sum:#x}");
        } else {
            assert_eq!(&f[12..14], &[0x08, 0x00]);
            assert_eq!(sport, wire::src_port(p.r[0].a.qpn));
            assert_eq!(sum, 0);
        }
        p.settle(10);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
    }
}

#[test]
fn requests_only_from_the_peer_gid() {
    // A sends from its second address, 10.78.0.7, which B's AV does not name: B drops A's
    // requests (its answers would reach A), and A's retries run out.
    let mut p = eth_pair(false, |side, at| {
        if side == 0 {
            at.ah.sgid_index = 1;
        }
        at.retry_cnt = 1;
    });
    let other = ipv4_gid([10, 78, 0, 7]);
    assert_eq!(
        set_gid(&mut p.r[0], 1, other, hw::GID_TYPE_ROCE_V2),
        hw::AQ_OK
    );
    let big0 = p.r[0].big;
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, p.r[1].big);
    p.r[0].send('a', w, &[sge(BIG_VA, 100, big0)], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_RETRY_EXC_ERR);
}

#[test]
fn no_source_gid_entry_no_frame() {
    // A's AV names source GID entry 5, which is empty: nothing goes out.
    let mut p = eth_pair(false, |side, at| {
        if side == 0 {
            at.ah.sgid_index = 5;
            at.retry_cnt = 1;
        }
    });
    let seen = record(&mut p);
    let big0 = p.r[0].big;
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, p.r[1].big);
    p.r[0].send('a', w, &[sge(BIG_VA, 100, big0)], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_RETRY_EXC_ERR);
    assert!(
        seen.lock().unwrap().is_empty(),
        "a frame without a source address"
    );
    // An IPv4 source towards an IPv6 destination is no route either.
    let mut p = eth_pair(false, |side, at| {
        if side == 0 {
            at.ah.dgid = gid(2, true);
            at.retry_cnt = 1;
        }
    });
    let seen = record(&mut p);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, p.r[1].big);
    p.r[0].send('a', w, &[sge(BIG_VA, 100, big0)], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_RETRY_EXC_ERR);
    assert!(seen.lock().unwrap().is_empty(), "a frame of mixed families");
}

#[test]
fn loopback_by_the_ports_own_mac() {
    let mut r = eth_nic(1, false);
    let q = Queue::default();
    r.nic.set_wire(Some(Box::new(TestWire(Arc::clone(&q)))));
    let (a, b) = (r.a.qpn, r.b.qpn);
    r.connect(a, b, 100, 500, |at| at.ah = av(1, false, 0));
    r.connect(b, a, 500, 100, |at| at.ah = av(1, false, 0));
    let data = bytes(5, 9000);
    r.fill(BIG_VA, &data);
    let big = r.big;
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + 0x10_0000, big);
    r.send('a', w, &[sge(BIG_VA, 9000, big)], &[]);
    assert_eq!(r.cqe('s').status, hw::WC_SUCCESS);
    assert_eq!(r.read(BIG_VA + 0x10_0000, 9000), data);
    assert!(q.lock().unwrap().is_empty(), "loopback stays in the NIC");
}

/// UD QPs A and B on `r` (in place of the rig's), in RTS with `QKEY`.
fn ud_qps(r: &mut Rig) {
    r.a = r.qp_of(hw::QP_TYPE_UD, RINGS + 0x30_0000, RINGS + 0x34_0000);
    r.b = r.qp_of(hw::QP_TYPE_UD, RINGS + 0x38_0000, RINGS + 0x3c_0000);
    for qpn in [r.a.qpn, r.b.qpn] {
        let mut a = hw::QpAttr {
            port_num: 1,
            qkey: QKEY,
            ..Default::default()
        };
        let steps = [
            (
                hw::QPS_INIT,
                hw::QP_ATTR_PKEY_INDEX | hw::QP_ATTR_PORT | hw::QP_ATTR_QKEY,
            ),
            (hw::QPS_RTR, 0),
            (hw::QPS_RTS, hw::QP_ATTR_SQ_PSN),
        ];
        for (state, mask) in steps {
            a.qp_state = state;
            assert_eq!(r.modify(qpn, hw::QP_ATTR_STATE | mask, &a), hw::AQ_OK);
        }
    }
}

/// A UD SEND of `data` from `r`'s QP A to QP `to_qpn` at `to`.
fn post_ud(r: &mut Rig, to: hw::QpAh, to_qpn: u32, data: &[u8]) {
    let seg = hw::UdSeg {
        remote_qpn: to_qpn,
        remote_qkey: QKEY,
        av: to,
    };
    r.fill(SMALL_VA, data);
    let mut b = vec![0u8; 1 << SQ_WQE_LOG];
    let w = wqe(hw::WR_SEND, SIGNALED, 1);
    assert!(w.encode_into(&mut b) && seg.encode_into(&mut b));
    let at = hw::SendWqe::sge_offset_from(hw::sq_wqe_data(hw::QP_TYPE_UD), 0);
    // CAST: the tests' datagrams are small.
    assert!(sge(SMALL_VA, data.len() as u32, r.small).encode_into(&mut b, at));
    let q = &mut r.a;
    let slot = u64::from(q.sq_pi % (1 << SQ_LOG));
    r.mem.dma_write(q.sq + (slot << SQ_WQE_LOG), &b).unwrap();
    q.sq_pi = q.sq_pi.wrapping_add(1);
    r.ring_sq('a');
}

#[test]
fn ud_receives_get_the_ip_header_in_the_grh_area() {
    for (v6, looped) in [(false, false), (true, false), (false, true), (true, true)] {
        let name = format!(
            "IPv{} {}",
            if v6 { 6 } else { 4 },
            if looped { "loopback" } else { "two NICs" }
        );
        let q = Queue::default();
        let mut r = vec![eth_nic(1, v6)];
        if !looped {
            r.push(eth_nic(2, v6));
        }
        for x in &mut r {
            x.nic.set_wire(Some(Box::new(TestWire(Arc::clone(&q)))));
            ud_qps(x);
        }
        let mut p = Pair {
            r,
            q,
            frames: 0,
            held: None,
            fault: Box::new(|_, _| Act::Pass),
            ticks: 0,
        };
        let rx = p.rx();
        let to = if looped { 1 } else { 2 };
        let big = p.r[rx].big;
        p.r[rx].fill(BIG_VA, &[0xee; 200]);
        p.r[rx].recv('b', &[sge(BIG_VA, 200, big)]);
        let data = bytes(3, 99);
        let b = p.r[rx].b.qpn;
        post_ud(&mut p.r[0], av(to, v6, 0), b, &data);
        p.settle(10);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS, "{name}");
        let c = p.r[rx].cqe('r');
        assert_eq!(
            (c.status, c.byte_len, c.slid, c.src_qp),
            (hw::WC_SUCCESS, 40 + 99, 0, p.r[0].a.qpn),
            "{name}"
        );
        assert_ne!(c.flags & hw::CQE_FLAG_GRH, 0, "{name}: the GRH flag");
        let got = p.r[rx].read(BIG_VA, 40 + 99);
        assert_eq!(got[40..], data[..], "{name}");
        // The UDP datagram: header 8, BTH 12, DETH 8, payload 99 + pad 1, ICRC 4.
        let udp_len: u16 = 8 + 12 + 8 + 100 + 4;
        if v6 {
            assert_eq!(got[0] >> 4, 6, "{name}");
            assert_eq!(got[4..6], udp_len.to_be_bytes(), "{name}");
            assert_eq!((got[6], got[7]), (17, 17), "{name}: UDP, hop limit");
            assert_eq!(got[8..24], gid(1, true), "{name}: source");
            assert_eq!(got[24..40], gid(to, true), "{name}: destination");
        } else {
            assert_eq!(got[..20], [0; 20], "{name}");
            let h = &got[20..40];
            assert_eq!((h[0], h[1], h[8], h[9]), (0x45, 0x28, 17, 17), "{name}");
            assert_eq!(
                h[2..4],
                (20 + udp_len).to_be_bytes(),
                "{name}: total length"
            );
            assert_eq!(h[12..16], [10, 78, 0, 1], "{name}: source");
            // CAST: LID 1 or 2.
            assert_eq!(h[16..20], [10, 78, 0, to as u8], "{name}: destination");
            let mut s = 0u32;
            for c in h.chunks(2) {
                s += u32::from(u16::from_be_bytes([c[0], c[1]]));
            }
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            assert_eq!(s, 0xffff, "{name}: the IPv4 header checksum");
        }
    }
}

#[test]
fn the_hosts_frames_are_steered_to_the_host() {
    let mut p = eth_pair(false, |_, _| {});
    let r = &mut p.r[1];
    // An ARP request (broadcast).
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&lid_mac(1));
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    assert_eq!(r.nic.receive_frame(&arp, &r.mem, &r.irq), Steer::Host);
    // RoCEv2 to an address that is not in the GID table: the host's (its stack answers).
    let other = ordma_model::engine::port::Route {
        dmac: lid_mac(2),
        smac: lid_mac(1),
        ips: ordma_model::engine::port::Ips::V4([10, 78, 0, 1], [10, 78, 0, 99]),
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    };
    let pkt = ordma_model::engine::packet::Packet::default();
    let f = wire::encode(&other, 1, &pkt, &[]);
    assert_eq!(r.nic.receive_frame(&f, &r.mem, &r.irq), Steer::Host);
    // To the port's GID, but broken: the engine's, counted.
    let mine = ordma_model::engine::port::Route {
        ips: ordma_model::engine::port::Ips::V4([10, 78, 0, 1], [10, 78, 0, 2]),
        ..other
    };
    let mut f = wire::encode(&mine, 1, &pkt, &[1, 2, 3, 4]);
    let n = f.len();
    f[n - 1] ^= 1;
    assert!(!r.nic.status_snapshot().to_string().contains("bad_frames=1"));
    assert_eq!(r.nic.receive_frame(&f, &r.mem, &r.irq), Steer::Engine);
    assert!(r.nic.status_snapshot().to_string().contains("bad_frames=1"));
    // A datagram of both: the host's frame comes back.
    let mut b = wire::Batch::default();
    assert!(b.push(&arp) && b.push(&f));
    let host = r.nic.receive_datagram(b.datagram(), &r.mem, &r.irq);
    assert_eq!(host, [&arp[..]]);
    // An InfiniBand port has no host: a frame for another address is a bad frame.
    let mut ib = Rig::bare(2);
    assert_eq!(ib.nic.receive_frame(&arp, &ib.mem, &ib.irq), Steer::Engine);
}
