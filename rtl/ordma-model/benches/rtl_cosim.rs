//! How fast co-simulation runs (criterion; `--features rtl`): the RTL blocks Verilated on
//! their own, in cycles a second, and one RDMA WRITE through the model with the RTL
//! datapath installed (`engine::datapath::rtl`, as `ordma-model --rtl` runs it: every DMA
//! through the Verilated DMA channel mux, every frame's ICRC from the Verilated ICRC unit),
//! no stall injected.
//!
//! - `rtl_blocks/mux`: the mux clocked with its four channels offering requests of 16
//!   beats and its output always ready: cycles a second (a beat leaves every cycle);
//! - `rtl_blocks/icrc`: the ICRC unit fed 4 KiB frames back to back, a beat a cycle:
//!   cycles a second;
//! - `rtl_write/4KiB`, `rtl_write/2MiB`: one signaled RDMA WRITE from NIC 1 to NIC 2 on the
//!   tests' in-memory wire (`tests/common/pair.rs`), from the WQE to its completion: the
//!   requester's payload reads and the responder's writes through the mux, the WQE fetch
//!   and the CQEs too, both ends' ICRCs through the unit.
//!
//! Before measuring, each WRITE is run once and its bytes checked, and the cycles one WRITE
//! takes are printed. Run with `cargo bench -p ordma-model --features rtl --bench rtl_cosim`
//! (`Documentation/performance.md`, "Co-simulation").

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::pair::*;
use common::rig::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ordma_hw as hw;
use ordma_model::engine::datapath::{self, rtl};
use ordma_rtl::{set_beat, Icrc, IcrcIo, Mux, MuxIo, MuxKind};

const SIZES: [(u32, &str); 2] = [(4096, "4KiB"), (2 << 20, "2MiB")];
const SRC: u64 = BIG_VA;
const DST: u64 = BIG_VA + (8 << 20);
/// Cycles a block is clocked per iteration.
const CYCLES: u64 = 100_000;

fn counter(status: &str, key: &str) -> u64 {
    status
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The mux, every channel offering 16-beat requests, the output always ready.
fn mux_cycles(mux: &mut Mux, beat: &mut [u64; 4]) {
    let mut io = MuxIo {
        out_ready: 1,
        in_valid: 0xf,
        ..MuxIo::default()
    };
    for _ in 0..CYCLES {
        io.in_data = *beat;
        io.in_last = beat
            .iter()
            .enumerate()
            .fold(0, |m, (i, b)| m | (u8::from(b % 16 == 15) << i));
        mux.cycle(&mut io);
        for (i, b) in beat.iter_mut().enumerate() {
            if io.in_ready & (1 << i) != 0 {
                *b += 1;
            }
        }
    }
}

/// The ICRC unit fed 4 KiB frames (64 beats) back to back, its output always ready.
fn icrc_cycles(unit: &mut Icrc, frame: &[u8]) {
    let beats: Vec<&[u8]> = frame.chunks(64).collect();
    let mut io = IcrcIo {
        out_ready: 1,
        in_valid: 1,
        ..IcrcIo::default()
    };
    let mut next = 0;
    for _ in 0..CYCLES {
        set_beat(&mut io, beats[next]);
        io.in_last = u8::from(next + 1 == beats.len());
        unit.cycle(&mut io);
        if io.in_ready == 1 {
            next = (next + 1) % beats.len();
        }
    }
}

/// One signaled WRITE of `len` bytes from A (NIC 1) to B (NIC 2), to its completion.
fn write(p: &mut Pair, len: u32) {
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    let mut w = wqe(hw::WR_RDMA_WRITE, hw::WQE_FLAG_SIGNALED, 1);
    (w.remote_addr, w.rkey) = (DST, big1);
    p.r[0].send('a', w, &[sge(SRC, len, big0)], &[]);
    p.settle(0);
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.byte_len), (hw::WC_SUCCESS, len));
}

fn bench(c: &mut Criterion) {
    let cfg = rtl::Config {
        stalls: 0.0,
        seed: 1,
        mux: MuxKind::Good,
    };
    assert!(datapath::install(Box::new(rtl::Rtl::new(cfg))));

    let mut g = c.benchmark_group("rtl_blocks");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(CYCLES));
    let mut mux = Mux::new(MuxKind::Good);
    let mut beat = [0u64, 1 << 20, 2 << 20, 3 << 20];
    g.bench_function("mux", |b| b.iter(|| mux_cycles(&mut mux, &mut beat)));
    let mut unit = Icrc::new();
    let frame = bytes(3, 4096);
    g.bench_function("icrc", |b| b.iter(|| icrc_cycles(&mut unit, &frame)));
    g.finish();
    assert_eq!(mux.assertion_failures() + unit.assertion_failures(), 0);

    let mut p = Pair::new(|_| {});
    for &(len, name) in &SIZES {
        let data = bytes(u64::from(len), len as usize);
        p.r[0].fill(SRC, &data);
        p.r[1].fill(DST, &vec![0u8; len as usize + 64]);
        let before = datapath::status();
        write(&mut p, len);
        let after = datapath::status();
        let got = p.r[1].read(DST, len as usize + 64);
        assert!(
            got[..len as usize] == data[..],
            "{name}: every byte arrived"
        );
        assert!(
            got[len as usize..].iter().all(|&b| b == 0),
            "{name}: and no more"
        );
        let d = |k| counter(&after, k) - counter(&before, k);
        eprintln!(
            "one {name} WRITE: {} mux cycles ({} beats, {} requests), {} ICRC cycles ({} frames)",
            d("rtl_mux_cycles"),
            d("rtl_beats"),
            d("rtl_requests"),
            d("rtl_icrc_cycles"),
            d("rtl_icrc_frames")
        );
    }
    let mut g = c.benchmark_group("rtl_write");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for &(len, name) in &SIZES {
        g.throughput(Throughput::Bytes(u64::from(len)));
        g.bench_with_input(BenchmarkId::from_parameter(name), &len, |b, &len| {
            b.iter(|| write(&mut p, len));
        });
    }
    g.finish();
    let s = datapath::status();
    eprintln!("{s}");
    assert_eq!(counter(&s, "rtl_violations"), 0, "{s}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
