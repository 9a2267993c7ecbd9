//! The NIC never touches memory it no longer owns: a WQE in flight between two NICs whose
//! MR is destroyed (a READ whose responses have not come, a SEND half received, a WRITE
//! being sent again, a WRITE half written) reads and writes none of the MR's pages once
//! `CMD_DESTROY_MR` completed, and ends in the error completion the IB specification
//! gives. The pages are filled with a new pattern after the destroy, as if reallocated:
//! it must stay intact, and must not show up on the other side.

mod common;

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::mem::Dma;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
/// The victim MR: 16 pages of 4 KiB at this virtual address, physically contiguous.
const VICTIM_VA: u64 = 0x7_0000_0000;
const VICTIM_PHYS: u64 = DATA + 0x3000_0000;
const VICTIM_LEN: usize = 64 << 10;
/// Where a re-registration of the victim's key points instead.
const OTHER_PHYS: u64 = DATA + 0x3100_0000;
const ALL: u32 = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ;

fn victim(r: &mut Rig, phys: u64) -> u32 {
    let pages: Vec<u64> = (0..16).map(|i| phys + i * 4096).collect();
    r.mr(VICTIM_VA, VICTIM_LEN as u64, 12, &pages, ALL)
}

fn destroy_mr(r: &mut Rig, key: u32) {
    r.ok(hw::CMD_DESTROY_MR, hw::KeyParams { key }.encode());
}

/// The victim's pages, reallocated to someone else: filled with a new pattern.
fn reuse(r: &Rig) -> Vec<u8> {
    let pattern = bytes(0xdead, VICTIM_LEN);
    r.mem.dma_write(VICTIM_PHYS, &pattern).unwrap();
    pattern
}

fn phys(r: &Rig, at: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    r.mem.dma_read(at, &mut b).unwrap();
    b
}

/// Delivers the frames on the wire now, in order, up to `n` of them; the rest are lost.
fn deliver_first(p: &mut Pair, n: usize) {
    let frames: Vec<_> = p.q.lock().unwrap().drain(..).collect();
    for (dlid, f) in frames.into_iter().take(n) {
        p.deliver(dlid, &f);
    }
}

#[test]
fn a_read_whose_mr_is_destroyed_before_its_responses_writes_nothing() {
    let mut p = Pair::new(|_| {});
    let v = victim(&mut p.r[0], VICTIM_PHYS);
    let big1 = p.r[1].big;
    p.r[1].fill(BIG_VA, &bytes(7, VICTIM_LEN));
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, big1);
    let i = p.r[0].send('a', w, &[sge(VICTIM_VA, VICTIM_LEN as u32, v)], &[]);
    // The request is on the wire; the READ's MR goes, and its key comes back (256
    // registrations later the slot's 8-bit key repeats) for other pages.
    destroy_mr(&mut p.r[0], v);
    let pattern = reuse(&p.r[0]);
    loop {
        let k = victim(&mut p.r[0], OTHER_PHYS);
        if k == v {
            break;
        }
        destroy_mr(&mut p.r[0], k);
    }
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!(
        (c.status, c.opcode, c.wqe_index),
        (hw::WC_LOC_PROT_ERR, hw::WC_RDMA_READ, i)
    );
    assert!(
        phys(&p.r[0], VICTIM_PHYS, VICTIM_LEN) == pattern,
        "old pages intact"
    );
    assert!(
        phys(&p.r[0], OTHER_PHYS, VICTIM_LEN)
            .iter()
            .all(|&b| b == 0),
        "the new registration of the key is not the READ's"
    );
    let a = p.r[0].a.qpn;
    assert_eq!(p.r[0].state(a), hw::QPS_ERR);
}

#[test]
fn a_send_half_received_into_a_destroyed_mr_writes_nothing_more() {
    let mut p = Pair::new(|_| {});
    let v = victim(&mut p.r[1], VICTIM_PHYS);
    let big0 = p.r[0].big;
    let ri = p.r[1].recv('b', &[sge(VICTIM_VA, VICTIM_LEN as u32, v)]);
    p.r[0].fill(BIG_VA, &bytes(8, VICTIM_LEN));
    let w = wqe(hw::WR_SEND, SIGNALED, 1);
    let si = p.r[0].send('a', w, &[sge(BIG_VA, VICTIM_LEN as u32, big0)], &[]);
    // The first packet lands; then the receive buffer's MR goes and its pages are reused.
    deliver_first(&mut p, 1);
    destroy_mr(&mut p.r[1], v);
    let pattern = reuse(&p.r[1]);
    p.settle(50);
    assert!(
        phys(&p.r[1], VICTIM_PHYS, VICTIM_LEN) == pattern,
        "pages intact"
    );
    let c = p.r[1].cqe('r');
    assert_eq!((c.status, c.wqe_index), (hw::WC_LOC_PROT_ERR, ri));
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_REM_OP_ERR, si));
}

#[test]
fn a_write_sent_again_after_its_mr_is_destroyed_reads_nothing() {
    let mut p = Pair::new(|_| {});
    let v = victim(&mut p.r[0], VICTIM_PHYS);
    p.r[0]
        .mem
        .dma_write(VICTIM_PHYS, &bytes(9, VICTIM_LEN))
        .unwrap();
    let big1 = p.r[1].big;
    let dst = BIG_VA + (1 << 20);
    p.r[1].fill(dst, &vec![0u8; VICTIM_LEN]);
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (dst, big1);
    let i = p.r[0].send('a', w, &[sge(VICTIM_VA, VICTIM_LEN as u32, v)], &[]);
    // Every packet is lost; the source MR goes and its pages are reused; the transport
    // timer would send again.
    deliver_first(&mut p, 0);
    destroy_mr(&mut p.r[0], v);
    let pattern = reuse(&p.r[0]);
    p.settle(50);
    let c = p.r[0].cqe('s');
    assert_eq!(
        (c.status, c.opcode, c.wqe_index),
        (hw::WC_LOC_PROT_ERR, hw::WC_RDMA_WRITE, i)
    );
    let got = p.r[1].read(dst, VICTIM_LEN);
    assert!(got.iter().all(|&b| b == 0), "nothing of the old pages sent");
    assert!(phys(&p.r[0], VICTIM_PHYS, VICTIM_LEN) == pattern);
}

#[test]
fn a_write_half_written_into_a_destroyed_mr_writes_nothing_more() {
    let mut p = Pair::new(|_| {});
    let v = victim(&mut p.r[1], VICTIM_PHYS);
    let big0 = p.r[0].big;
    p.r[0].fill(BIG_VA, &bytes(10, VICTIM_LEN));
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (VICTIM_VA, v);
    let i = p.r[0].send('a', w, &[sge(BIG_VA, VICTIM_LEN as u32, big0)], &[]);
    deliver_first(&mut p, 1);
    destroy_mr(&mut p.r[1], v);
    let pattern = reuse(&p.r[1]);
    p.settle(50);
    assert!(
        phys(&p.r[1], VICTIM_PHYS, VICTIM_LEN) == pattern,
        "pages intact"
    );
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_REM_ACCESS_ERR, i));
    let b = p.r[1].b.qpn;
    assert_eq!(p.r[1].state(b), hw::QPS_ERR);
}
