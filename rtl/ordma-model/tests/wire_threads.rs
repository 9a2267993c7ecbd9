//! Two `Device`s on the real socket wire, in threads (their wire reader and worker threads,
//! their timer threads), driven as `ibv_rc_pingpong` drives two NICs: receives posted on
//! both QPs, path MTU 1024, random-looking PSNs, a SEND one way answered by a SEND the
//! other way as soon as it arrived, 300 times; every byte checked.

mod common;

use std::time::{Duration, Instant};

use common::rig::*;
use ordma_hw as hw;
use ordma_model::device::Device;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;

/// Rings doorbell register `reg` (`DB_SQ`, `DB_RQ`) with `value` through `dev`.
fn ring(dev: &Device, reg: usize, value: u32) {
    let off = u64::from(PAGE) * hw::DB_PAGE_SIZE as u64 + reg as u64;
    let mut l = dev.lock();
    let (mem, irq) = (l.mem.clone(), l.irq);
    l.nic.doorbell_write(off, 4, value, &*mem, irq);
}

#[test]
fn ping_pong_between_two_devices_in_threads() {
    let dir = std::env::temp_dir().join(format!("ordma-wire-pp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut r = [Rig::bare(1), Rig::bare(2)];
    let (a, b) = (r[0].a.qpn, r[1].b.qpn);
    let mtu = |at: &mut hw::QpAttr, dlid| {
        at.ah.dlid = dlid;
        at.path_mtu = 3; // 1024
    };
    r[0].connect(a, b, 0x37_813f, 0x02_6aad, |at| mtu(at, 2));
    r[1].connect(b, a, 0x02_6aad, 0x37_813f, |at| mtu(at, 1));
    let which = ['a', 'b'];
    let keys = [r[0].big, r[1].big];
    let (src, dst) = (BIG_VA, BIG_VA + (8 << 20));
    let devs = on_socket_wire(&mut r, &dir);
    let post_recv = |r: &mut [Rig; 2], k: usize| {
        r[k].put_recv(which[k], &[sge(dst, 4096, keys[k])]);
        let q = if k == 0 { &r[0].a } else { &r[1].b };
        ring(&devs[k], hw::DB_RQ, hw::db_value(q.qpn, q.rq_pi));
    };
    for k in 0..2 {
        for _ in 0..16 {
            post_recv(&mut r, k);
        }
    }
    let wait = |x: &mut Rig, cq: char| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(c) = x.poll(cq) {
                return c;
            }
            assert!(Instant::now() < deadline, "no completion");
            std::thread::yield_now();
        }
    };
    let start = Instant::now();
    for i in 0..300u64 {
        let (from, to) = ((i % 2) as usize, ((i + 1) % 2) as usize);
        let data = bytes(i, 4096);
        r[from].fill(src, &data);
        r[from].put_send(
            which[from],
            wqe(hw::WR_SEND, SIGNALED, 1),
            &[sge(src, 4096, keys[from])],
            &[],
        );
        let q = if from == 0 { &r[0].a } else { &r[1].b };
        ring(&devs[from], hw::DB_SQ, hw::db_value(q.qpn, q.sq_pi));
        let c = wait(&mut r[to], 'r');
        assert_eq!(
            (c.status, c.byte_len),
            (hw::WC_SUCCESS, 4096),
            "receive {i}"
        );
        assert!(r[to].read(dst, 4096) == data, "bytes {i}");
        post_recv(&mut r, to);
        let c = wait(&mut r[from], 's');
        assert_eq!(c.status, hw::WC_SUCCESS, "send {i}");
    }
    eprintln!("300 ping-pongs in {:?}", start.elapsed());
    std::fs::remove_dir_all(&dir).ok();
}
