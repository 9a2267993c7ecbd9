//! The RC engine's RDMA WRITE against a plain memcpy of the same bytes (criterion).
//!
//! Per size (4 KiB, 64 KiB, 2 MiB), in bytes per second:
//! - `memcpy`: `copy_from_slice` between two `Vec<u8>`, the ceiling;
//! - `memcpy_4k_scattered`: the same bytes as 4 KiB `copy_from_slice`s between the pages of
//!   two 2 MiB `Vec<u8>` in the order of the scattered MRs below, the ceiling of
//!   `write_engine/4k_pages`;
//! - `dma_copy`: the model's raw guest-to-guest copy primitive, [`Dma::dma_copy`], between
//!   two contiguous guest-memory ranges;
//! - `write_engine/4k_pages` and `write_engine/2m_pages`: one loopback RDMA WRITE end to end
//!   through the engine (WQE written into the SQ ring, SQ doorbell, CQE consumed and the
//!   consumer index published to the CQ's doorbell record), between two MRs of scattered
//!   4 KiB pages, and between two ranges of the rig's MR of shuffled 2 MiB pages.
//!
//! Every WRITE variant is checked once, before measuring, to move the bytes it claims to.
//! Run with `cargo bench -p ordma-model --bench write_engine` (`Documentation/performance.md`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use common::rig::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ordma_hw as hw;
use ordma_model::mem::Dma;

const SIZES: [(usize, &str); 3] = [(4 << 10, "4KiB"), (64 << 10, "64KiB"), (2 << 20, "2MiB")];

/// Two MRs of 512 scattered 4 KiB pages (2 MiB each): source and destination.
const SCAT_SRC_VA: u64 = 0x5_0000_0000;
const SCAT_DST_VA: u64 = 0x6_0000_0000;
const SCAT_SRC_PHYS: u64 = DATA + 0x3000_0000;
const SCAT_DST_PHYS: u64 = DATA + 0x3800_0000;
const SCAT_PAGES: u64 = 512;

/// The physical page of virtual page `i` of a scattered MR (37 is prime to 512: a
/// permutation, no two neighbours adjacent).
fn scat_page(i: u64) -> u64 {
    (i * 37) % SCAT_PAGES
}

/// The bus address of every 4 KiB page of a scattered MR, in virtual order.
fn scat_list(phys: u64) -> Vec<u64> {
    (0..SCAT_PAGES)
        .map(|i| phys + scat_page(i) * 4096)
        .collect()
}

/// Writes (`Some`) or reads back `len` bytes at the start of a scattered MR.
fn scat_io(rig: &Rig, phys: u64, len: usize, data: Option<&[u8]>) -> Vec<u8> {
    let mut out = vec![0u8; len];
    for (i, chunk) in out.chunks_mut(4096).enumerate() {
        let at = phys + scat_page(i as u64) * 4096;
        match data {
            Some(d) => rig
                .mem
                .dma_write(at, &d[i * 4096..i * 4096 + chunk.len()])
                .unwrap(),
            None => rig.mem.dma_read(at, chunk).unwrap(),
        }
    }
    out
}

/// One signaled RDMA WRITE of `len` bytes from `src` (lkey `lkey`) to `dst` (rkey `rkey`),
/// end to end: WQE into A's SQ ring, SQ doorbell, the send CQE consumed (its consumer
/// index written to the CQ's doorbell record).
fn write(rig: &mut Rig, src: u64, lkey: u32, dst: u64, rkey: u32, len: usize) {
    let mut w = wqe(hw::WR_RDMA_WRITE, hw::WQE_FLAG_SIGNALED, 1);
    w.remote_addr = dst;
    w.rkey = rkey;
    rig.send('a', w, &[sge(src, len as u32, lkey)], &[]);
    let c = rig.cqe('s');
    debug_assert_eq!(c.status, hw::WC_SUCCESS);
    black_box(c);
}

/// The rig, plus the two scattered MRs: (rig, source lkey, destination rkey).
fn rig() -> (Rig, u32, u32) {
    let mut rig = Rig::new();
    let all = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ;
    let len = SCAT_PAGES * 4096;
    let s = rig.mr(SCAT_SRC_VA, len, 12, &scat_list(SCAT_SRC_PHYS), all);
    let d = rig.mr(SCAT_DST_VA, len, 12, &scat_list(SCAT_DST_PHYS), all);
    (rig, s, d)
}

fn bench(c: &mut Criterion) {
    let (mut rig, s_key, d_key) = rig();
    let big = rig.big;
    // The 2 MiB-page MR: source at its start, destination 8 MiB in (other 2 MiB pages).
    let (big_src, big_dst) = (BIG_VA, BIG_VA + (8 << 20));

    // Check once, at the largest size, that every variant moves the bytes.
    let max = SIZES[SIZES.len() - 1].0;
    let data = bytes(7, max);
    {
        let (a, b) = (DATA, DATA + (4 << 20));
        rig.mem.dma_write(a, &data).unwrap();
        rig.mem.dma_copy(a, b, max).unwrap();
        let mut got = vec![0u8; max];
        rig.mem.dma_read(b, &mut got).unwrap();
        assert!(got == data, "dma_copy moved the bytes");
    }
    scat_io(&rig, SCAT_SRC_PHYS, max, Some(&data));
    for (n, &(len, _)) in SIZES.iter().enumerate() {
        scat_io(&rig, SCAT_DST_PHYS, max, Some(&vec![0u8; max]));
        rig.fill(big_src, &data);
        rig.fill(big_dst, &vec![0u8; max]);
        let mut w = wqe(hw::WR_RDMA_WRITE, hw::WQE_FLAG_SIGNALED, 1);
        w.remote_addr = SCAT_DST_VA;
        w.rkey = d_key;
        let i = rig.send('a', w, &[sge(SCAT_SRC_VA, len as u32, s_key)], &[]);
        let c = rig.cqe('s');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RDMA_WRITE, i, len as u32),
            "4 KiB pages, size {len}"
        );
        let got = scat_io(&rig, SCAT_DST_PHYS, max, None);
        assert!(
            got[..len] == data[..len],
            "4 KiB pages: WRITE {len} moved the bytes"
        );
        assert!(got[len..].iter().all(|&b| b == 0), "and no more ({n})");
        let mut w = wqe(hw::WR_RDMA_WRITE, hw::WQE_FLAG_SIGNALED, 1);
        w.remote_addr = big_dst;
        w.rkey = big;
        let i = rig.send('a', w, &[sge(big_src, len as u32, big)], &[]);
        let c = rig.cqe('s');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RDMA_WRITE, i, len as u32),
            "2 MiB pages, size {len}"
        );
        let got = rig.read(big_dst, max);
        assert!(
            got[..len] == data[..len],
            "2 MiB pages: WRITE {len} moved the bytes"
        );
        assert!(got[len..].iter().all(|&b| b == 0), "and no more ({n})");
        assert!(rig.poll('r').is_none(), "a WRITE consumes no receive");
    }

    let mut g = c.benchmark_group("write");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for &(len, name) in &SIZES {
        g.throughput(Throughput::Bytes(len as u64));
        let src = bytes(1, len);
        let mut dst = vec![0u8; len];
        g.bench_with_input(BenchmarkId::new("memcpy", name), &len, |b, _| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
            });
        });
        let (ssrc, mut sdst) = (
            bytes(2, SCAT_PAGES as usize * 4096),
            vec![0u8; SCAT_PAGES as usize * 4096],
        );
        g.bench_with_input(
            BenchmarkId::new("memcpy_4k_scattered", name),
            &len,
            |b, &len| {
                b.iter(|| {
                    let mut done = 0usize;
                    for i in 0..SCAT_PAGES {
                        if done >= len {
                            break;
                        }
                        let n = 4096.min(len - done);
                        let at = scat_page(i) as usize * 4096;
                        sdst[at..at + n].copy_from_slice(black_box(&ssrc[at..at + n]));
                        done += n;
                    }
                    black_box(&mut sdst);
                });
            },
        );
        g.bench_with_input(BenchmarkId::new("dma_copy", name), &len, |b, &len| {
            b.iter(|| {
                rig.mem
                    .dma_copy(black_box(DATA), black_box(DATA + (4 << 20)), len)
                    .unwrap();
            });
        });
        g.bench_with_input(
            BenchmarkId::new("write_engine_4k_pages", name),
            &len,
            |b, &len| b.iter(|| write(&mut rig, SCAT_SRC_VA, s_key, SCAT_DST_VA, d_key, len)),
        );
        g.bench_with_input(
            BenchmarkId::new("write_engine_2m_pages", name),
            &len,
            |b, &len| b.iter(|| write(&mut rig, big_src, big, big_dst, big, len)),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
