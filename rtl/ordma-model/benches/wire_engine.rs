//! RDMA WRITEs and READs between two NICs over the real socket wire (criterion).
//!
//! Two [`Device`]s (the model process's shared NIC: its wire reader and worker threads and
//! its timer thread, [`ordma_model::wire::attach`]) on one wire directory in a temporary
//! folder, QP A of NIC 1 connected to QP B of NIC 2 (`path_mtu` 4096, timeout 14 as
//! perftest sets it). One iteration posts a burst of signaled RDMA WRITEs on A (32 × 64 KiB
//! or 2 × 2 MiB: 2 or 4 MiB, as `ib_write_bw` keeps its send queue full), rings the SQ
//! doorbell once and waits for every send completion: bytes per second between the NICs.
//! `read` does the same with RDMA READs from B's memory into A's (`max_rd_atomic` and
//! `max_dest_rd_atomic` 16, as `ib_read_bw` asks for the device's `max_qp_rd_atom`).
//!
//! Before measuring, each size is run once and the destination read back: every byte
//! arrived, and no byte past them. Run with
//! `cargo bench -p ordma-model --bench wire_engine` (`Documentation/performance.md`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::rig::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ordma_hw as hw;
use ordma_model::device::Device;

/// (message bytes, messages per iteration, name).
const CASES: [(usize, usize, &str); 2] = [(64 << 10, 32, "64KiB"), (2 << 20, 2, "2MiB")];

/// The source of every WRITE (in NIC 1's big MR) and its destination (NIC 2's).
const SRC: u64 = BIG_VA;
const DST: u64 = BIG_VA + (8 << 20);

struct Two {
    r: [Rig; 2],
    devs: Vec<Arc<Device>>,
    dir: std::path::PathBuf,
}

impl Two {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("ordma-wire-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = [Rig::bare(1), Rig::bare(2)];
        let (a, b) = (r[0].a.qpn, r[1].b.qpn);
        let depth = |at: &mut hw::QpAttr| {
            at.max_rd_atomic = hw::QP_MAX_RD_ATOMIC;
            at.max_dest_rd_atomic = hw::QP_MAX_RD_ATOMIC;
        };
        r[0].connect(a, b, 10, 20, |at| {
            at.ah.dlid = 2;
            depth(at);
        });
        r[1].connect(b, a, 20, 10, |at| {
            at.ah.dlid = 1;
            depth(at);
        });
        let devs = on_socket_wire(&mut r, &dir);
        Self { r, devs, dir }
    }

    /// `n` signaled WRITEs (or, `read`, READs back) of `len` bytes from A to B, one
    /// doorbell, every CQE waited for.
    fn burst(&mut self, len: usize, n: usize, read: bool) {
        let (big0, big1) = (self.r[0].big, self.r[1].big);
        let op = if read {
            hw::WR_RDMA_READ
        } else {
            hw::WR_RDMA_WRITE
        };
        for k in 0..n {
            let off = ((k * len) % (4 << 20)) as u64;
            let mut w = wqe(op, hw::WQE_FLAG_SIGNALED, 1);
            (w.remote_addr, w.rkey) = (DST + off, big1);
            self.r[0].put_send('a', w, &[sge(SRC + off, len as u32, big0)], &[]);
        }
        let x = &self.r[0];
        let v = hw::db_value(x.a.qpn, x.a.sq_pi);
        let at = u64::from(PAGE) * hw::DB_PAGE_SIZE as u64 + hw::DB_SQ as u64;
        {
            let mut l = self.devs[0].lock();
            let (mem, irq) = (l.mem.clone(), l.irq);
            l.nic.doorbell_write(at, 4, v, &*mem, irq);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for _ in 0..n {
            let c = loop {
                if let Some(c) = self.r[0].poll('s') {
                    break c;
                }
                assert!(Instant::now() < deadline, "no completion");
                std::thread::yield_now();
            };
            assert_eq!((c.status, c.byte_len), (hw::WC_SUCCESS, len as u32));
        }
    }
}

impl Drop for Two {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

fn bench(c: &mut Criterion) {
    let mut two = Two::new();
    let span = 4usize << 20;
    let data = bytes(5, span);
    for &(len, n, name) in &CASES {
        two.r[0].fill(SRC, &data);
        two.r[1].fill(DST, &vec![0u8; span + 4096]);
        two.burst(len, n, false);
        let got = two.r[1].read(DST, span + 4096);
        let moved = (len * n).min(span);
        assert!(got[..moved] == data[..moved], "{name}: every byte arrived");
        assert!(got[moved..].iter().all(|&b| b == 0), "{name}: and no more");
        let back = bytes(6, span);
        two.r[1].fill(DST, &back);
        two.r[0].fill(SRC, &vec![0u8; span + 4096]);
        two.burst(len, n, true);
        let got = two.r[0].read(SRC, span + 4096);
        assert!(got[..moved] == back[..moved], "{name}: every byte read");
        assert!(got[moved..].iter().all(|&b| b == 0), "{name}: and no more");
    }
    let mut g = c.benchmark_group("wire");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for &(len, n, name) in &CASES {
        g.throughput(Throughput::Bytes((len * n) as u64));
        g.bench_with_input(BenchmarkId::new("write", name), &len, |b, &len| {
            b.iter(|| two.burst(len, n, false));
        });
        g.bench_with_input(BenchmarkId::new("read", name), &len, |b, &len| {
            b.iter(|| two.burst(len, n, true));
        });
    }
    g.finish();
    let counters = two.devs.iter().map(|d| d.lock().nic.counters().to_string());
    eprintln!("counters: {}", counters.collect::<Vec<_>>().join(" | "));
}

criterion_group!(benches, bench);
criterion_main!(benches);
