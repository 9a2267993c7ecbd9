//! SQ drain between two NICs: RTS → SQD with WQEs in flight. The requester starts nothing
//! new in `SQD`, keeps taking ACKs and READ responses for the WQEs in flight, and posts
//! `QP_SQ_DRAINED` only after the last of them completed; back in `RTS` the rest goes.

mod common;

use common::pair::*;
use common::rig::*;
use ordma_hw as hw;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;

fn to_state(r: &mut Rig, qpn: u32, state: u8, notify: bool) {
    let a = hw::QpAttr {
        qp_state: state,
        en_sqd_async_notify: u8::from(notify),
        ..Default::default()
    };
    let mask = hw::QP_ATTR_STATE
        | if notify {
            hw::QP_ATTR_EN_SQD_ASYNC_NOTIFY
        } else {
            0
        };
    assert_eq!(r.modify(qpn, mask, &a), hw::AQ_OK);
}

#[test]
fn sq_drained_comes_after_the_last_wqe_in_flight_completes() {
    let mut p = Pair::new(|_| {});
    let a = p.r[0].a.qpn;
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    p.r[1].fill(BIG_VA + (4 << 20), &bytes(3, 64 << 10));
    // Three WRITEs and a READ of 64 KiB (their frames on the wire, not delivered).
    for k in 0..3u64 {
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (BIG_VA + (1 << 20) + k * 0x10000, big1);
        p.r[0].put_send('a', w, &[sge(BIG_VA + k * 0x10000, 64 << 10, big0)], &[]);
    }
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA + (4 << 20), big1);
    p.r[0].put_send('a', w, &[sge(BIG_VA + (8 << 20), 64 << 10, big0)], &[]);
    p.r[0].ring_sq('a');
    // RTS -> SQD now: the four are in flight.
    to_state(&mut p.r[0], a, hw::QPS_SQD, true);
    assert_eq!(p.r[0].events(), [], "not drained: WQEs in flight");
    assert_eq!(p.r[0].query(a).sq_draining, 1);
    // A WQE posted in SQD does not start.
    let late = p.r[0].send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    // Frame by frame: the event comes only once every WQE in flight has completed.
    let mut done = Vec::new();
    let mut drained_after = None;
    for _ in 0..100_000 {
        let next = p.q.lock().unwrap().pop_front();
        let Some((dlid, f)) = next else { break };
        p.deliver(dlid, &f);
        while let Some(c) = p.r[0].poll('s') {
            assert_eq!(c.status, hw::WC_SUCCESS);
            done.push(c.wqe_index);
        }
        let ev = p.r[0].events();
        if ev.contains(&(hw::EVENT_QP_SQ_DRAINED, a)) {
            assert!(drained_after.is_none(), "once");
            drained_after = Some(done.clone());
        }
    }
    let in_flight: Vec<u16> = (0..4).collect();
    assert_eq!(
        drained_after,
        Some(in_flight.clone()),
        "drained after the last one"
    );
    assert_eq!(done, in_flight, "nothing else completed in SQD");
    assert_eq!(p.r[0].query(a).sq_draining, 0);
    assert_eq!(p.r[0].state(a), hw::QPS_SQD);
    assert!(
        p.r[1].poll('r').is_none(),
        "the SEND posted in SQD was not sent"
    );
    assert!(p.r[0].read(BIG_VA + (8 << 20), 64 << 10) == bytes(3, 64 << 10));
    // Back to RTS: the SEND goes.
    p.r[1].recv('b', &[]);
    to_state(&mut p.r[0], a, hw::QPS_RTS, false);
    p.settle(10);
    let rest: Vec<u16> = std::iter::from_fn(|| p.r[0].poll('s'))
        .map(|c| c.wqe_index)
        .collect();
    assert_eq!(rest, [late]);
    assert_eq!(p.r[0].events(), [], "no second event");
}

#[test]
fn sq_drained_waits_for_a_read_s_responses_and_at_once_when_idle() {
    let mut p = Pair::new(|_| {});
    let a = p.r[0].a.qpn;
    // Idle: at once.
    to_state(&mut p.r[0], a, hw::QPS_SQD, true);
    assert_eq!(p.r[0].events(), [(hw::EVENT_QP_SQ_DRAINED, a)]);
    to_state(&mut p.r[0], a, hw::QPS_RTS, false);
    // A READ in flight: its responses are taken in SQD, then the event.
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    p.r[1].fill(BIG_VA, &bytes(4, 100_000));
    let mut w = wqe(hw::WR_RDMA_READ, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, big1);
    let i = p.r[0].send('a', w, &[sge(BIG_VA + (2 << 20), 100_000, big0)], &[]);
    to_state(&mut p.r[0], a, hw::QPS_SQD, true);
    assert_eq!(p.r[0].events(), []);
    p.settle(10);
    let c = p.r[0].cqe('s');
    assert_eq!((c.status, c.wqe_index), (hw::WC_SUCCESS, i));
    assert_eq!(p.r[0].events(), [(hw::EVENT_QP_SQ_DRAINED, a)]);
    assert!(p.r[0].read(BIG_VA + (2 << 20), 100_000) == bytes(4, 100_000));
}
