//! READ depth between two NICs: up to the requester's `max_rd_atomic` READs in flight per
//! QP, `FENCE` waiting for the READs before it, the responder refusing READs without
//! responder resources (`max_dest_rd_atomic` 0), lost responses of pipelined READs asked
//! for again.

mod common;

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;
use ordma_model::engine::packet;
use ordma_model::engine::wire;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
const LEN: u32 = 8192;

/// Posts `n` READs of `len` bytes from NIC 2's big MR into NIC 1's (one doorbell).
fn reads(p: &mut Pair, n: u64, len: u32, seed: u64) -> Vec<Vec<u8>> {
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    let mut want = Vec::new();
    for k in 0..n {
        let data = bytes(seed + k, len as usize);
        p.r[1].fill(BIG_VA + k * 0x2_0000, &data);
        p.r[0].fill(BIG_VA + (8 << 20) + k * 0x2_0000, &vec![0; len as usize]);
        let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (BIG_VA + k * 0x2_0000, big1);
        let dst = BIG_VA + (8 << 20) + k * 0x2_0000;
        p.r[0].put_send('a', w, &[sge(dst, len, big0)], &[]);
        want.push(data);
    }
    p.r[0].ring_sq('a');
    want
}

/// The READ requests on the wire now (not delivered).
fn read_requests(p: &Pair) -> usize {
    let q = p.q.lock().unwrap();
    q.iter()
        .filter(|(_, f)| wire::decode(f).unwrap().packet.bth.opcode == packet::READ_REQUEST)
        .count()
}

fn check(p: &mut Pair, want: &[Vec<u8>]) {
    for (k, data) in want.iter().enumerate() {
        let c = p.r[0].cqe('s');
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len),
            (
                hw::WC_SUCCESS,
                hw::WC_RDMA_READ,
                k as u16,
                data.len() as u32
            ),
            "READ {k}"
        );
        let got = p.r[0].read(BIG_VA + (8 << 20) + k as u64 * 0x2_0000, data.len());
        assert!(got == *data, "READ {k}: bytes");
    }
    assert!(p.r[0].poll('s').is_none());
}

#[test]
fn reads_in_flight_up_to_max_rd_atomic() {
    for depth in [1u8, 3, 16] {
        let mut p = Pair::new(|a| a.max_rd_atomic = depth);
        let want = reads(&mut p, 20, LEN, 10);
        assert_eq!(read_requests(&p), usize::from(depth), "depth {depth}");
        p.settle(10);
        check(&mut p, &want);
        assert_eq!(p.ticks, 0);
    }
}

#[test]
fn fence_waits_for_the_reads_before_it() {
    let mut p = Pair::new(|a| a.max_rd_atomic = 4);
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, big1);
    p.r[0].put_send('a', w, &[sge(BIG_VA + (8 << 20), LEN, big0)], &[]);
    // A WRITE without FENCE goes at once; one with FENCE waits for the READ.
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + (1 << 20), big1);
    p.r[0].put_send('a', w, &[sge(BIG_VA, 16, big0)], &[]);
    w.flags |= hw::WQE_FLAG_FENCE;
    p.r[0].put_send('a', w, &[sge(BIG_VA, 16, big0)], &[]);
    p.r[0].ring_sq('a');
    let ops: Vec<u8> =
        p.q.lock()
            .unwrap()
            .iter()
            .map(|(_, f)| wire::decode(f).unwrap().packet.bth.opcode)
            .collect();
    assert_eq!(ops, [packet::READ_REQUEST, packet::WRITE_ONLY]);
    p.settle(10);
    let done: Vec<(u8, u16)> = std::iter::from_fn(|| p.r[0].poll('s'))
        .map(|c| (c.status, c.wqe_index))
        .collect();
    assert_eq!(done, [(0, 0), (0, 1), (0, 2)]);
}

#[test]
fn no_responder_resources_is_rem_inv_req_err() {
    let mut p = Pair::new(|a| a.max_dest_rd_atomic = 0);
    reads(&mut p, 1, LEN, 20);
    p.settle(10);
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_REM_INV_REQ_ERR, 0));
}

#[test]
fn lost_responses_of_pipelined_reads_are_asked_for_again() {
    for (seed, size) in [(1u64, 100u32), (2, 9000), (3, 70_000)] {
        let mut p = Pair::new(|a| a.max_rd_atomic = 8);
        // One frame in five (requests, responses, ACKs), at random, is lost.
        let mut x = 0x2545_f491_4f6c_dd1du64 ^ seed;
        p.fault = Box::new(move |_, _| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 5 == 0 {
                Act::Drop
            } else {
                Act::Pass
            }
        });
        let want = reads(&mut p, 12, size, 30 + seed);
        p.settle(200);
        check(&mut p, &want);
    }
    // The last response of the first READ lost while the second's come: the first asks
    // for its rest, nothing completes out of order.
    let mut p = Pair::new(|a| a.max_rd_atomic = 4);
    let mut once = true;
    p.fault = Box::new(move |_, f| {
        if f.packet.bth.opcode == packet::READ_RESPONSE_LAST && once {
            once = false;
            Act::Drop
        } else {
            Act::Pass
        }
    });
    let want = reads(&mut p, 4, LEN, 50);
    p.settle(10);
    check(&mut p, &want);
    assert_eq!(p.ticks, 0, "asked for again at the gap, not on a timeout");
}
