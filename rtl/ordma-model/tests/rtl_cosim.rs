//! Co-simulation on the host (`--features rtl`): the RTL datapath installed
//! (`engine::datapath::rtl`: every DMA through the Verilated DMA channel mux, every ICRC
//! from the Verilated ICRC unit) with a third of the cycles stalled on every port; SEND,
//! WRITE and READ of up to 2 MiB between two NICs on a wire, in loopback over the wire and
//! in loopback by DMA copy, and between two Ethernet ports over IPv6, bytes checked;
//! then the RTL's counters: used, and no violation. `ORDMA_RTL_MUX=loses-beat` runs the
//! same with the mutant mux that loses a beat under backpressure: the test must fail.
#![cfg(feature = "rtl")]

mod common;

use common::eth::eth_pair;
use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::datapath::{self, rtl};
use ordma_rtl::MuxKind;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;

fn counter(status: &str, key: &str) -> u64 {
    status
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {status:?}"))
}

/// WRITE of `size` bytes from NIC 1 to NIC 2 (or QP A to QP B in loopback), READ back,
/// SEND; bytes checked.
fn write_read_send(p: &mut Pair, n: u64, size: u32) {
    let rx = p.rx();
    let (big, big1) = (p.r[0].big, p.r[rx].big);
    let data = bytes(n, size as usize);
    let src = BIG_VA + 0x1234;
    let dst = BIG_VA + (8 << 20) + 0x777;
    let back = BIG_VA + (12 << 20) + 0x99;
    p.r[0].fill(src, &data);
    p.r[rx].fill(dst, &vec![0xee; size as usize + 16]);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (dst, big1);
    p.r[0].send('a', w, &[sge(src, size, big)], &[]);
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!(
        (c.status, c.opcode, c.byte_len),
        (hw::WC_SUCCESS, hw::WC_RDMA_WRITE, size),
        "WRITE {size}"
    );
    let got = p.r[rx].read(dst, size as usize + 16);
    assert!(got[..size as usize] == data[..], "WRITE {size}: bytes");
    assert_eq!(got[size as usize..], [0xee; 16], "WRITE {size}: beyond");
    p.r[0].fill(back, &vec![0; size as usize]);
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 2);
    (w.remote_addr, w.rkey) = (dst, big1);
    p.r[0].send('a', w, &split(back, size, 2, big), &[]);
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!(
        (c.status, c.byte_len),
        (hw::WC_SUCCESS, size),
        "READ {size}"
    );
    assert!(
        p.r[0].read(back, size as usize) == data,
        "READ {size}: bytes"
    );
    let data2 = bytes(n + 7, size as usize);
    p.r[0].fill(src, &data2);
    let ri = p.r[rx].recv('b', &split(dst, size + 16, 3, big1));
    p.r[0].send(
        'a',
        wqe(hw::WR_SEND, SIGNALED, 1),
        &[sge(src, size, big)],
        &[],
    );
    p.settle(50);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS, "SEND {size}");
    let c = p.r[rx].cqe('r');
    assert_eq!(
        (c.status, c.wqe_index, c.byte_len),
        (hw::WC_SUCCESS, ri, size),
        "RECV {size}"
    );
    assert!(
        p.r[rx].read(dst, size as usize) == data2,
        "SEND {size}: bytes"
    );
}

#[test]
fn transfers_through_the_rtl_mux_and_icrc_under_stalls() {
    let mux = match std::env::var("ORDMA_RTL_MUX").as_deref() {
        Ok("loses-beat") => MuxKind::LosesBeat,
        Ok("bubble") => MuxKind::Bubble,
        _ => MuxKind::Good,
    };
    let cfg = rtl::Config {
        stalls: 0.3,
        seed: 0x5eed,
        mux,
    };
    assert!(datapath::install(Box::new(rtl::Rtl::new(cfg))));
    let mut wire = Pair::new(|_| {});
    let mut looped = Pair::looped(|_| {});
    for (n, size) in [1u32, 4095, 4096, 65541, 2 << 20].into_iter().enumerate() {
        write_read_send(&mut wire, n as u64, size);
        write_read_send(&mut looped, 100 + n as u64, size);
    }
    // Loopback on one NIC without the wire: a DMA copy, reads and writes on two channels.
    let mut rig = Rig::new();
    let big = rig.big;
    for (n, size) in [4096u32, 65541, 2 << 20].into_iter().enumerate() {
        let data = bytes(200 + n as u64, size as usize);
        let (src, dst) = (BIG_VA + 0x10, BIG_VA + (6 << 20) + 0x3);
        rig.fill(src, &data);
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (dst, big);
        rig.send('a', w, &[sge(src, size, big)], &[]);
        assert_eq!(rig.cqe('s').status, hw::WC_SUCCESS, "copy {size}");
        assert!(rig.read(dst, size as usize) == data, "copy {size}: bytes");
    }
    // Two Ethernet ports over IPv6 GIDs: the unit masks IPv6's fields (the BTH in the
    // frame's second beat); its every ICRC checked against the model's (rtl_violations).
    let before = counter(&datapath::status(), "rtl_icrc_frames");
    let mut v6 = eth_pair(true, |_, _| {});
    for (n, size) in [1u32, 4096, 65541].into_iter().enumerate() {
        write_read_send(&mut v6, 300 + n as u64, size);
    }
    let v6_frames = counter(&datapath::status(), "rtl_icrc_frames") - before;
    assert!(v6_frames > 3 * 65541 / 4096, "{v6_frames} IPv6 frames");
    let s = datapath::status();
    println!("{s}");
    // 2 MiB WRITE, READ and SEND each way: at least 6 × 256 Ki beats of payload.
    assert!(counter(&s, "rtl_beats") > 6 * (2 << 20) / 8, "{s}");
    assert!(counter(&s, "rtl_icrc_frames") > 3 * (2 << 20) / 4096, "{s}");
    assert!(counter(&s, "rtl_stall_cycles") > 0, "{s}");
    assert_eq!(counter(&s, "rtl_violations"), 0, "{s}");
    assert_eq!(counter(&s, "rtl_assert_failures"), 0, "{s}");
}
