//! Two NICs with Ethernet ports (interface 1.4) on the in-memory wire, addressed by
//! IPv4-mapped or IPv6 GIDs: for the Ethernet tests and co-simulation's IPv6 frames.
#![allow(dead_code, reason = "each test file uses a part")]

use std::sync::Arc;

use ordma_hw as hw;
use ordma_model::engine::port::{ipv4_gid, lid_mac};

use super::pair::*;
use super::rig::*;

/// NIC `lid`'s GID: `10.78.0.<lid>` (IPv4-mapped), or `fe80::<lid>`.
pub fn gid(lid: u16, v6: bool) -> [u8; 16] {
    if v6 {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[14..].copy_from_slice(&lid.to_be_bytes());
        g
    } else {
        // CAST: the tests' LIDs are 1 and 2.
        ipv4_gid([10, 78, 0, lid as u8])
    }
}

pub fn set_gid(r: &mut Rig, index: u32, gid: [u8; 16], gid_type: u8) -> u16 {
    let p = hw::SetGidParams {
        port: 1,
        index,
        gid,
        gid_type,
    };
    r.run(hw::CMD_SET_GID, p.encode()).0
}

/// An Ethernet NIC with LID `lid` (for the rig's addresses only) and MAC `lid_mac(lid)`,
/// its GID table entry 0 set to `gid(lid, v6)`.
pub fn eth_nic(lid: u16, v6: bool) -> Rig {
    let mut r = Rig::bare_with(lid, |c| c.mac = Some(lid_mac(lid)));
    assert_eq!(
        set_gid(&mut r, 0, gid(lid, v6), hw::GID_TYPE_ROCE_V2),
        hw::AQ_OK
    );
    r
}

/// The address vector of NIC `to` from source GID index `sgid_index`.
pub fn av(to: u16, v6: bool, sgid_index: u8) -> hw::QpAh {
    hw::QpAh {
        port_num: 1,
        ah_flags: hw::AH_FLAG_GRH,
        dgid: gid(to, v6),
        dmac: lid_mac(to),
        sgid_index,
        hop_limit: 17,
        traffic_class: 0x28,
        flow_label: if v6 { 0x5_4321 } else { 0 },
        ..Default::default()
    }
}

/// Two Ethernet NICs on the in-memory wire, NIC 1's QP A connected to NIC 2's QP B; `f`
/// adjusts each side's attributes (the side's index, its attributes).
pub fn eth_pair(v6: bool, f: impl Fn(usize, &mut hw::QpAttr)) -> Pair {
    let q = Queue::default();
    let mut r = vec![eth_nic(1, v6), eth_nic(2, v6)];
    for x in &mut r {
        x.nic.set_wire(Some(Box::new(TestWire(Arc::clone(&q)))));
    }
    let (a, b) = (r[0].a.qpn, r[1].b.qpn);
    r[0].connect(a, b, 100, 500, |at| {
        at.ah = av(2, v6, 0);
        at.timeout = 10;
        f(0, at);
    });
    r[1].connect(b, a, 500, 100, |at| {
        at.ah = av(1, v6, 0);
        at.timeout = 10;
        f(1, at);
    });
    Pair {
        r,
        q,
        frames: 0,
        held: None,
        fault: Box::new(|_, _| Act::Pass),
        ticks: 0,
    }
}
