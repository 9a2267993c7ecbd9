//! Per-QP counters (interface 1.10, `CMD_QUERY_QP_COUNTERS`): each QP counts what the
//! port counts of its own traffic, another QP's traffic is not in it, the QPs' counts add
//! up to the port's, a QP starts at zero when created and its counts go with it.

mod common;

use common::pair::*;
use common::rig::*;
use common::BUF;
use ordma_hw as hw;
use ordma_model::mem::Dma;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;

/// QP `qpn`'s counters through the admin command, as a driver reads them.
fn query(r: &mut Rig, qpn: u32) -> Result<hw::PortCounters, u16> {
    let p = hw::QueryQpCountersParams {
        qpn,
        resp_addr: BUF + 0x400,
        resp_len: hw::COUNTERS_SIZE as u32,
    };
    let (status, written) = r.run(hw::CMD_QUERY_QP_COUNTERS, p.encode());
    if status != hw::AQ_OK {
        return Err(status);
    }
    assert_eq!(written, hw::COUNTERS_SIZE as u64);
    let mut b = [0u8; hw::COUNTERS_SIZE];
    r.mem.dma_read(BUF + 0x400, &mut b).unwrap();
    Ok(hw::PortCounters::decode(&b))
}

/// `n` SENDs of 3 pages from NIC 1's QP A to NIC 2's QP B, each completed on both sides.
fn sends(p: &mut Pair, n: u32) {
    let (big0, big1) = (p.r[0].big, p.r[1].big);
    for _ in 0..n {
        p.r[1].recv('b', &[sge(BIG_VA, 3 * 4096, big1)]);
        let w = wqe(hw::WR_SEND, SIGNALED, 1);
        p.r[0].send('a', w, &[sge(BIG_VA, 3 * 4096, big0)], &[]);
        p.settle(50);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
        assert_eq!(p.r[1].cqe('r').status, hw::WC_SUCCESS);
    }
}

#[test]
fn a_qp_counts_its_own_traffic() {
    let mut p = Pair::new(|_| {});
    let (a, b) = (p.r[0].a.qpn, p.r[1].b.qpn);
    let idle = p.r[0].b.qpn;
    assert_eq!(query(&mut p.r[0], a), Ok(hw::PortCounters::default()));
    sends(&mut p, 5);
    let qa = query(&mut p.r[0], a).unwrap();
    let qb = query(&mut p.r[1], b).unwrap();
    assert_eq!(
        (qa.get(hw::CNT_RDMA_SENDS), qa.get(hw::CNT_RDMA_RECVS)),
        (5, 0)
    );
    assert_eq!(
        (qb.get(hw::CNT_RDMA_SENDS), qb.get(hw::CNT_RDMA_RECVS)),
        (0, 5)
    );
    // A's packets are the ones B took in, and the other way.
    assert_eq!(qa.get(hw::CNT_SENT_PKTS), qb.get(hw::CNT_RCVD_PKTS));
    assert_eq!(qb.get(hw::CNT_SENT_PKTS), qa.get(hw::CNT_RCVD_PKTS));
    assert!(qa.get(hw::CNT_SENT_PKTS) >= 15, "{qa:?}");
    // The only QP with traffic on each NIC: its counts are the port's.
    assert_eq!(qa, p.r[0].nic.port_counters());
    assert_eq!(qb, p.r[1].nic.port_counters());
    // The QP beside it counted nothing.
    assert_eq!(query(&mut p.r[0], idle), Ok(hw::PortCounters::default()));
}

#[test]
fn qps_add_up_to_the_port_and_start_at_zero() {
    // Two QPs of one NIC, each sending to the other: loopback.
    let mut p = Pair::looped(|_| {});
    let (a, b) = (p.r[0].a.qpn, p.r[0].b.qpn);
    let big = p.r[0].big;
    for i in 0..4u64 {
        p.r[0].recv('b', &[sge(BIG_VA, 8192, big)]);
        p.r[0].send(
            'a',
            wqe(hw::WR_SEND, SIGNALED, 1),
            &[sge(BIG_VA + (1 << 20), 8192, big)],
            &[],
        );
        let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
        (w.remote_addr, w.rkey) = (BIG_VA + (2 << 20), big);
        p.r[0].send('a', w, &[sge(BIG_VA + (3 << 20) + i, 5000, big)], &[]);
        p.settle(20);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
        assert_eq!(p.r[0].cqe('s').status, hw::WC_SUCCESS);
        assert_eq!(p.r[0].cqe('r').status, hw::WC_SUCCESS);
    }
    let (qa, qb) = (
        query(&mut p.r[0], a).unwrap(),
        query(&mut p.r[0], b).unwrap(),
    );
    let port = p.r[0].nic.port_counters();
    for c in 0..hw::NUM_COUNTERS {
        assert_eq!(
            qa.get(c) + qb.get(c),
            port.get(c),
            "{}: {qa:?} {qb:?} {port:?}",
            hw::COUNTERS[c].to_string_lossy()
        );
    }
    assert_eq!(
        (qa.get(hw::CNT_RDMA_SENDS), qb.get(hw::CNT_RDMA_RECVS)),
        (4, 4)
    );
    assert!(qa.get(hw::CNT_SENT_PKTS) >= 4 * 4 && qb.get(hw::CNT_SENT_PKTS) >= 4);
    // Destroyed: its counts go with it, and a QP created in its place starts at zero.
    assert_eq!(
        p.r[0]
            .run(hw::CMD_DESTROY_QP, hw::NumParams { num: b }.encode())
            .0,
        hw::AQ_OK
    );
    assert_eq!(query(&mut p.r[0], b), Err(hw::AQ_BAD_PARAM));
    let again = p.r[0].qp(0x7000_0000, 0x7010_0000).qpn;
    assert_eq!(again, b, "the table hands out the lowest free number");
    assert_eq!(query(&mut p.r[0], again), Ok(hw::PortCounters::default()));
    // The port's counts stay (a port's counters only grow).
    assert_eq!(p.r[0].nic.port_counters(), port);
}

#[test]
fn errors_and_recoveries_count_on_their_qp() {
    // Every 5th frame held back behind the next: out-of-sequence requests and sequence NAKs,
    // each counted on its QP.
    let mut p = Pair::new(|_| {});
    p.fault = Box::new(|n, _| if n % 5 == 0 { Act::Hold } else { Act::Pass });
    sends(&mut p, 6);
    let (a, b) = (p.r[0].a.qpn, p.r[1].b.qpn);
    let qa = query(&mut p.r[0], a).unwrap();
    let qb = query(&mut p.r[1], b).unwrap();
    assert_eq!(qa, p.r[0].nic.port_counters());
    assert_eq!(qb, p.r[1].nic.port_counters());
    assert!(qa.get(hw::CNT_RCVD_SEQ_ERR) > 0, "{qa:?}");
    assert_eq!(qa.get(hw::CNT_RCVD_SEQ_ERR), qb.get(hw::CNT_SEND_SEQ_ERR));
    assert!(qb.get(hw::CNT_OUT_OF_SEQ_REQUEST) > 0, "{qb:?}");
    // A remote access error: counted on the requester's QP.
    let mut p = Pair::new(|_| {});
    let big0 = p.r[0].big;
    let mut w = wqe(hw::WR_RDMA_WRITE, SIGNALED, 1);
    (w.remote_addr, w.rkey) = (BIG_VA, 0xdead_0000);
    p.r[0].send('a', w, &[sge(BIG_VA, 64, big0)], &[]);
    p.settle(10);
    assert_eq!(p.r[0].cqe('s').status, hw::WC_REM_ACCESS_ERR);
    let a = p.r[0].a.qpn;
    assert_eq!(query(&mut p.r[0], a).unwrap().get(hw::CNT_REMOTE_ERR), 1);
}

#[test]
fn bad_queries_are_refused() {
    let mut p = Pair::new(|_| {});
    for qpn in [0, 1, hw::QPN_FIRST + 4000, u32::MAX] {
        assert_eq!(
            query(&mut p.r[0], qpn),
            Err(hw::AQ_BAD_PARAM),
            "QP {qpn:#x}"
        );
    }
    let a = p.r[0].a.qpn;
    let zero_len = hw::QueryQpCountersParams {
        qpn: a,
        resp_addr: BUF + 0x400,
        resp_len: 0,
    };
    assert_eq!(
        p.r[0].run(hw::CMD_QUERY_QP_COUNTERS, zero_len.encode()).0,
        hw::AQ_BAD_PARAM
    );
    let mut reserved = hw::QueryQpCountersParams {
        qpn: a,
        resp_addr: BUF + 0x400,
        resp_len: 8,
    }
    .encode();
    reserved[30] = 1;
    assert_eq!(
        p.r[0].run(hw::CMD_QUERY_QP_COUNTERS, reserved).0,
        hw::AQ_BAD_PARAM
    );
    // A short buffer gets the first counters only.
    let short = hw::QueryQpCountersParams {
        qpn: a,
        resp_addr: BUF + 0x400,
        resp_len: 8,
    };
    assert_eq!(
        p.r[0].run(hw::CMD_QUERY_QP_COUNTERS, short.encode()),
        (hw::AQ_OK, 8)
    );
}
