//! The CQ's tests: its command layout, depth, arming, and polling against rings in ordinary memory.
use super::*;
use core::mem::offset_of;

#[test]
fn driver_data_follows_the_core_structs_without_padding() {
    assert_eq!(offset_of!(CreateCqCmd, drv), size_of::<abi::IbvCreateCq>());
    assert_eq!(offset_of!(CreateCqCmd, drv), 40);
    assert_eq!(size_of::<CreateCqCmd>(), 40 + 24);
    assert_eq!(
        offset_of!(CreateCqResp, drv),
        size_of::<sys::ib_uverbs_create_cq_resp>()
    );
    assert_eq!(offset_of!(CreateCqResp, drv), 8);
    assert_eq!(size_of::<CreateCqResp>(), 8 + 8);
    assert_eq!(offset_of!(Cq, ibv), 0);
}

#[test]
fn depth_is_a_power_of_two_of_at_least_two() {
    assert_eq!(cq_log_depth(1), Ok(1));
    assert_eq!(cq_log_depth(2), Ok(1));
    assert_eq!(cq_log_depth(3), Ok(2));
    assert_eq!(cq_log_depth(100), Ok(7));
    assert_eq!(cq_log_depth(1 << 15), Ok(15));
    assert_eq!(cq_log_depth(0), Err(libc::EINVAL));
    assert_eq!(cq_log_depth(-1), Err(libc::EINVAL));
    assert_eq!(cq_log_depth((1 << 15) + 1), Err(libc::EINVAL));
    assert_eq!(cq_log_depth(c_int::MAX), Err(libc::EINVAL));
}

use crate::wq::testing::{self, cap, chain_recv, chain_send, nic_write, send_wr, sge, RecordingDb};
use ordma_hw::{CQE_FLAG_SOLICITED, WC_RDMA_WRITE, WC_RECV, WC_REM_ACCESS_ERR, WC_SEND};

const RTS: u32 = sys::ibv_qp_state_IBV_QPS_RTS;
const SIGNALED: u32 = sys::ibv_send_flags_IBV_SEND_SIGNALED;

/// The consumer index in `cq`'s doorbell record.
fn record(cq: &Cq) -> u32 {
    // SAFETY: the record is 8 bytes, aligned, the test's.
    u32::from_le(unsafe { cq.record.as_ptr().cast::<u32>().read_volatile() })
}

/// Polls up to `n`: the result and the completions written.
fn poll_n(cq: &Cq, qps: &QpTable, n: usize) -> (c_int, Vec<sys::ibv_wc>) {
    let mut wc = vec![MaybeUninit::<sys::ibv_wc>::uninit(); n];
    let r = poll(cq, qps, &mut wc);
    let got = wc
        .into_iter()
        .take(usize::try_from(r).unwrap_or(0))
        // SAFETY: `poll` wrote the first `r`.
        .map(|w| unsafe { w.assume_init() })
        .collect();
    (r, got)
}

/// A CQ, a QP (QPN `qpn`) with both queues on it, in RTS, and a table that has it.
fn setup(cqe: c_int, qpn: u32) -> (Box<Cq>, Box<Qp>, QpTable) {
    let mut cq = new_cq(cqe).expect("a CQ");
    cq.cqn = 5;
    let mut qp = testing::qp(cap(8, 1, 0, 4, 1), false, RTS, qpn);
    qp.ibv.qp_ex.qp_base.send_cq = ptr::addr_of_mut!(cq.ibv).cast();
    qp.ibv.qp_ex.qp_base.recv_cq = ptr::addr_of_mut!(cq.ibv).cast();
    let qps = QpTable::new();
    assert_eq!(qps.insert(qpn, ptr::addr_of!(*qp).cast_mut()), Ok(()));
    (cq, qp, qps)
}

fn post_sends(qp: &Qp, ids: &[(u64, u32)]) {
    let mut s = [sge(0x10, 4, 1)];
    let mut wrs: Vec<_> = ids
        .iter()
        .map(|&(id, f)| send_wr(id, sys::ibv_wr_opcode_IBV_WR_SEND, f, &mut s))
        .collect();
    assert_eq!(
        testing::post_send(qp, &RecordingDb::default(), chain_send(&mut wrs)),
        Ok(())
    );
}

fn send_cqe(qpn: u32, wqe_index: u16) -> Cqe {
    Cqe {
        wqe_index,
        qpn,
        opcode: WC_SEND,
        ..Default::default()
    }
}

#[test]
fn poll_maps_wr_ids_and_retires_unsignaled_sends() {
    let (cq, qp, qps) = setup(8, 12);
    // Nothing written yet: a zeroed ring has no CQE of phase 1.
    assert_eq!(poll_n(&cq, &qps, 4).0, 0);
    post_sends(&qp, &[(100, 0), (101, SIGNALED), (102, SIGNALED)]);
    let mut s = [sge(0x20, 64, 2)];
    let mut rwrs = [
        sys::ibv_recv_wr {
            wr_id: 200,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
        sys::ibv_recv_wr {
            wr_id: 201,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
    ];
    assert_eq!(
        testing::post_recv(&qp, &RecordingDb::default(), chain_recv(&mut rwrs)),
        Ok(())
    );
    nic_write(
        &cq,
        0,
        &Cqe {
            byte_len: 4,
            ..send_cqe(12, 1)
        },
    );
    nic_write(
        &cq,
        1,
        &Cqe {
            wqe_index: 0,
            opcode: WC_RECV,
            qpn: 12,
            byte_len: 77,
            imm: u32::from_le_bytes([1, 2, 3, 4]),
            flags: CQE_FLAG_RECV | CQE_FLAG_IMM | CQE_FLAG_SOLICITED,
            src_qp: 33,
            ..Default::default()
        },
    );
    nic_write(
        &cq,
        2,
        &Cqe {
            status: WC_REM_ACCESS_ERR,
            opcode: WC_RDMA_WRITE,
            vendor_err: 7,
            ..send_cqe(12, 2)
        },
    );
    let (r, wc) = poll_n(&cq, &qps, 2);
    assert_eq!(r, 2);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len),
        (101, 0, 0, 4)
    );
    assert_eq!((wc[0].qp_num, wc[0].wc_flags), (12, 0));
    // 100 (unsignaled) and 101 retired together.
    assert_eq!(lock(&qp.sq).outstanding(), 1);
    assert_eq!(
        (wc[1].wr_id, wc[1].opcode, wc[1].byte_len, wc[1].src_qp),
        (200, 128, 77, 33)
    );
    assert_eq!(wc[1].wc_flags, sys::ibv_wc_flags_IBV_WC_WITH_IMM);
    // SAFETY: a u32 either way.
    assert_eq!(
        unsafe { wc[1].__bindgen_anon_1.imm_data }.to_ne_bytes(),
        [1, 2, 3, 4]
    );
    assert_eq!(qp.rq.as_ref().map(|rq| lock(rq).outstanding()), Some(1));
    assert_eq!(record(&cq), 2);
    let (r, wc) = poll_n(&cq, &qps, 4);
    assert_eq!(r, 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].vendor_err),
        (102, 10, 1, 7)
    );
    assert_eq!(lock(&qp.sq).outstanding(), 0);
    assert_eq!(record(&cq), 3);
    assert_eq!(poll_n(&cq, &qps, 4).0, 0);
    assert_eq!(record(&cq), 3);
    assert_eq!(cq.state.lock().bad_cqes, 0);
}

#[test]
fn poll_follows_the_phase_across_ring_wraps() {
    // Two CQEs: the phase flips every second one.
    let (cq, qp, qps) = setup(2, 3);
    let db = RecordingDb::default();
    let mut id = 0u64;
    let mut ci = 0u32;
    for round in 0..6u32 {
        // One or two CQEs per round.
        let n = 1 + round % 2;
        for _ in 0..n {
            post_sends(&qp, &[(id, SIGNALED)]);
            // CAST: small.
            nic_write(&cq, id as u32, &send_cqe(3, id as u16));
            id += 1;
        }
        let (r, wc) = poll_n(&cq, &qps, 8);
        assert_eq!(r, n as c_int, "round {round}");
        for (k, w) in wc.iter().enumerate() {
            assert_eq!(w.wr_id, u64::from(ci) + k as u64);
        }
        ci += n;
        assert_eq!(record(&cq), ci);
        // The slots now hold the previous pass's phase: nothing new.
        assert_eq!(poll_n(&cq, &qps, 8).0, 0, "round {round}");
        arm(&cq, &db, round % 2 == 1);
    }
    let arms = db.take();
    assert_eq!(arms.len(), 6);
    assert_eq!(arms[0], (DB_CQ_ARM, (5 << 16) | 1));
    assert_eq!(arms[5], (DB_CQ_ARM_SOLICITED, (5 << 16) | 9));
}

#[test]
fn a_cqe_naming_no_qp_of_the_cq_is_an_error_counted_once() {
    let (cq, qp, qps) = setup(8, 4);
    post_sends(&qp, &[(1, SIGNALED), (2, SIGNALED)]);
    nic_write(&cq, 0, &send_cqe(4, 0));
    // An unknown QPN, a QPN beyond 16 bits, a WQE that is not outstanding.
    nic_write(&cq, 1, &send_cqe(77, 0));
    nic_write(&cq, 2, &send_cqe(0x1_0004, 1));
    nic_write(&cq, 3, &send_cqe(4, 5));
    // The good one first; the poll stops before the bad one.
    let (r, wc) = poll_n(&cq, &qps, 8);
    assert_eq!((r, wc[0].wr_id), (1, 1));
    for bad in 1..=3 {
        assert_eq!(poll_n(&cq, &qps, 8).0, -libc::EIO);
        assert_eq!(cq.state.lock().bad_cqes, bad);
        assert_eq!(record(&cq), 1 + bad as u32);
    }
    // A receive CQE that is not the oldest receive (none is posted here at all).
    nic_write(
        &cq,
        4,
        &Cqe {
            flags: CQE_FLAG_RECV,
            opcode: WC_RECV,
            ..send_cqe(4, 0)
        },
    );
    assert_eq!(poll_n(&cq, &qps, 8).0, -libc::EIO);
    let mut s = [sge(0x20, 64, 2)];
    let mut rwrs = [
        sys::ibv_recv_wr {
            wr_id: 30,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
        sys::ibv_recv_wr {
            wr_id: 31,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
    ];
    assert_eq!(
        testing::post_recv(&qp, &RecordingDb::default(), chain_recv(&mut rwrs)),
        Ok(())
    );
    nic_write(
        &cq,
        5,
        &Cqe {
            flags: CQE_FLAG_RECV,
            opcode: WC_RECV,
            ..send_cqe(4, 1)
        },
    );
    assert_eq!(
        poll_n(&cq, &qps, 8).0,
        -libc::EIO,
        "receives complete in order"
    );
    assert_eq!(cq.state.lock().bad_cqes, 5);
    // A QP that is not on this CQ.
    let other = new_cq(2).expect("a CQ");
    nic_write(&other, 0, &send_cqe(4, 1));
    assert_eq!(poll_n(&other, &qps, 8).0, -libc::EIO);
    assert_eq!(lock(&qp.sq).outstanding(), 1, "untouched by the foreign CQ");
    nic_write(&cq, 6, &send_cqe(4, 1));
    nic_write(
        &cq,
        7,
        &Cqe {
            flags: CQE_FLAG_RECV,
            opcode: WC_RECV,
            ..send_cqe(4, 0)
        },
    );
    let (r, wc) = poll_n(&cq, &qps, 8);
    assert_eq!((r, wc[0].wr_id, wc[1].wr_id), (2, 2, 30));
    // A removed QP is no longer found.
    qps.remove(4, ptr::addr_of!(*qp).cast_mut());
    assert!(qps.get(4).is_none());
}

#[test]
fn cleaning_drops_one_qp_s_cqes_and_keeps_the_others_in_order() {
    // Depth 4, shared by QPs 4 and 9.
    let (cq, a, qps) = setup(4, 4);
    let mut b = testing::qp(cap(8, 1, 0, 0, 0), false, RTS, 9);
    b.ibv.qp_ex.qp_base.send_cq = a.ibv.qp_ex.qp_base.send_cq;
    b.ibv.qp_ex.qp_base.recv_cq = a.ibv.qp_ex.qp_base.recv_cq;
    assert_eq!(qps.insert(9, ptr::addr_of!(*b).cast_mut()), Ok(()));
    // Three of B's first, polled: the next CQEs wrap around the ring.
    post_sends(&b, &[(90, SIGNALED), (91, SIGNALED), (92, SIGNALED)]);
    for i in 0..3u16 {
        nic_write(&cq, u32::from(i), &send_cqe(9, i));
    }
    assert_eq!(poll_n(&cq, &qps, 3).0, 3);
    post_sends(&a, &[(40, SIGNALED), (41, SIGNALED)]);
    post_sends(&b, &[(93, SIGNALED), (94, SIGNALED)]);
    nic_write(&cq, 3, &send_cqe(4, 0));
    nic_write(&cq, 4, &send_cqe(9, 3));
    nic_write(&cq, 5, &send_cqe(4, 1));
    nic_write(&cq, 6, &send_cqe(9, 4));
    assert_eq!(clean(&cq, &mut cq.state.lock(), 4, None), 2);
    assert_eq!(record(&cq), 5);
    let (r, wc) = poll_n(&cq, &qps, 8);
    assert_eq!((r, wc[0].wr_id, wc[1].wr_id), (2, 93, 94));
    assert_eq!(record(&cq), 7);
    // The ring goes on as before.
    post_sends(&b, &[(95, SIGNALED)]);
    nic_write(&cq, 7, &send_cqe(9, 5));
    assert_eq!(poll_n(&cq, &qps, 8).1.first().map(|w| w.wr_id), Some(95));
    assert_eq!(
        clean(&cq, &mut cq.state.lock(), 4, None),
        0,
        "nothing left to drop"
    );
    assert_eq!(cq.state.lock().bad_cqes, 0);
}

/// Shares the test's objects (raw pointers inside) with its threads.
struct Shared<T>(T);
// SAFETY: the objects are used as the provider's contract lets threads use them (a
// lock per queue and per CQ); the test joins every thread before dropping them.
unsafe impl<T> Sync for Shared<T> {}

/// A doorbell page a "NIC" thread reads: the last SQ doorbell value.
#[derive(Default)]
struct LastSqDb(core::sync::atomic::AtomicU32);

impl Doorbell for LastSqDb {
    fn ring(&self, offset: usize, value: u32) {
        assert_eq!(offset, ordma_hw::DB_SQ);
        self.0.store(value, core::sync::atomic::Ordering::Release);
    }
}

#[test]
fn two_posters_a_nic_and_a_poller_run_at_once() {
    use core::sync::atomic::Ordering::Acquire;
    use std::time::{Duration, Instant};
    const PER_THREAD: u64 = 20_000;
    let (cq, qp, qps) = setup(8, 11);
    let db = LastSqDb::default();
    let sh = Shared((&*cq, &*qp, &qps, &db));
    let deadline = Instant::now() + Duration::from_secs(120);
    std::thread::scope(|t| {
        for thread in 0..2u64 {
            let sh = &sh;
            t.spawn(move || {
                let (_, qp, _, db) = sh.0;
                let mut s = [sge(0x10, 4, 1)];
                let mut seq = 0;
                while seq < PER_THREAD {
                    let id = (thread << 32) | seq;
                    let mut wr = [send_wr(
                        id,
                        sys::ibv_wr_opcode_IBV_WR_SEND,
                        SIGNALED,
                        &mut s,
                    )];
                    // SAFETY: a valid one-WR chain.
                    match unsafe { crate::wq::post_send_chain(qp, db, chain_send(&mut wr)) } {
                        Ok(()) => seq += 1,
                        Err((e, _)) => {
                            assert_eq!(e, libc::ENOMEM);
                            assert!(Instant::now() < deadline, "posting stalled");
                            std::thread::yield_now();
                        }
                    }
                }
            });
        }
        // The NIC: one CQE per WQE the doorbell names, never past the consumer index
        // in the doorbell record.
        let sh_nic = &sh;
        t.spawn(move || {
            let (cq, _, _, db) = sh_nic.0;
            let (mut wqe, mut pi) = (0u32, 0u32);
            while u64::from(wqe) < 2 * PER_THREAD {
                // CAST: the low 16 bits are the producer index.
                let produced = db.0.load(Acquire) as u16;
                // CAST: as the NIC counts.
                while wqe as u16 != produced {
                    if pi.wrapping_sub(record(cq)) >= cq.state.lock().ring.depth() {
                        assert!(Instant::now() < deadline, "the CQ stayed full");
                        std::thread::yield_now();
                        continue;
                    }
                    // CAST: as above.
                    nic_write(cq, pi, &send_cqe(11, wqe as u16));
                    pi += 1;
                    wqe += 1;
                }
                std::thread::yield_now();
            }
        });
        // The poller: every wr_id once, each thread's in order.
        let (cq, _, qps, _) = sh.0;
        let mut next = [0u64; 2];
        while next[0] + next[1] < 2 * PER_THREAD {
            let (r, wc) = poll_n(cq, qps, 4);
            assert!(r >= 0, "poll_cq: {r}");
            for w in &wc {
                assert_eq!(w.status, 0);
                // CAST: the thread's number, 0 or 1.
                let thread = (w.wr_id >> 32) as usize;
                assert_eq!(w.wr_id & 0xffff_ffff, next[thread]);
                next[thread] += 1;
            }
            assert!(Instant::now() < deadline, "polling stalled at {next:?}");
        }
    });
    assert_eq!(lock(&qp.sq).outstanding(), 0);
    assert_eq!(cq.state.lock().bad_cqes, 0);
}

#[test]
fn arming_writes_cqn_and_index_to_the_arm_doorbells() {
    assert_eq!(arm_doorbell(3, 0, false), (0x8, 3 << 16));
    assert_eq!(arm_doorbell(0xffff, 0x1_0005, true), (0xc, 0xffff_0005));
}

/// A receive CQE of QP `qpn` naming SRQ slot `slot`.
fn srq_cqe(qpn: u32, slot: u16) -> Cqe {
    Cqe {
        wqe_index: slot,
        qpn,
        opcode: WC_RECV,
        flags: CQE_FLAG_RECV,
        byte_len: 5,
        ..Default::default()
    }
}

#[test]
fn srq_completions_give_their_slots_back_in_any_order_and_clean_too() {
    use crate::srq::{post_srq_chain, Srq, SrqRing};
    use std::sync::Mutex;
    let srq = Srq {
        ibv: sys::ibv_srq::default(),
        srqn: 3,
        max_sge: 1,
        ring: Mutex::new(
            SrqRing::new(crate::qp::QueueShape {
                log_depth: 3,
                log_wqe_size: 6,
            })
            .expect("a ring"),
        ),
    };
    let mut cq = new_cq(16).expect("a CQ");
    cq.cqn = 5;
    let qps = QpTable::new();
    let mut on = Vec::new();
    for qpn in [4, 6] {
        let mut qp = testing::qp_on_srq(cap(4, 1, 0, 100, 5), &srq, RTS, qpn);
        assert!(
            qp.rq.is_none() && qp.caps.max_recv_sge == 0,
            "no RQ of its own"
        );
        qp.ibv.qp_ex.qp_base.send_cq = ptr::addr_of_mut!(cq.ibv).cast();
        qp.ibv.qp_ex.qp_base.recv_cq = ptr::addr_of_mut!(cq.ibv).cast();
        assert_eq!(qps.insert(qpn, ptr::addr_of!(*qp).cast_mut()), Ok(()));
        on.push(qp);
    }
    let db = RecordingDb::default();
    let mut s = [sge(0x30, 8, 1)];
    let mut wrs: Vec<_> = (0..5u64)
        .map(|i| sys::ibv_recv_wr {
            wr_id: 500 + i,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        })
        .collect();
    // SAFETY: the test's WRs are valid.
    assert!(unsafe { post_srq_chain(&srq, &db, chain_recv(&mut wrs)) }.is_ok());
    // QP 6 completes slot 1 before QP 4 completes slot 0; QP 4 then slot 2.
    nic_write(&cq, 0, &srq_cqe(6, 1));
    nic_write(&cq, 1, &srq_cqe(4, 0));
    nic_write(&cq, 2, &srq_cqe(4, 2));
    let (r, wc) = poll_n(&cq, &qps, 8);
    let got: Vec<_> = wc.iter().map(|w| (w.qp_num, w.wr_id, w.opcode)).collect();
    assert_eq!(r, 3);
    assert_eq!(
        got,
        [
            (6, 501, WC_RECV.into()),
            (4, 500, WC_RECV.into()),
            (4, 502, WC_RECV.into())
        ]
    );
    // A slot not posted (or given back already) is a bad CQE.
    nic_write(&cq, 3, &srq_cqe(4, 1));
    assert_eq!(poll_n(&cq, &qps, 8).0, -libc::EIO);
    // QP 6's CQEs not yet polled when it goes: cleaned, their slots back.
    nic_write(&cq, 4, &srq_cqe(6, 3));
    nic_write(&cq, 5, &srq_cqe(4, 4));
    assert_eq!(clean(&cq, &mut cq.state.lock(), 6, Some(&srq)), 1);
    assert_eq!(
        lock(&srq.ring).retire(3),
        None,
        "slot 3 came back with the clean"
    );
    assert_eq!(poll_n(&cq, &qps, 8).1.first().map(|w| w.wr_id), Some(504));
    // Every slot but the spare is free again: 7 WQEs go in, not 8.
    let mut one = sys::ibv_recv_wr {
        wr_id: 7,
        ..Default::default()
    };
    for _ in 0..7 {
        // SAFETY: as above.
        assert!(unsafe { post_srq_chain(&srq, &db, &mut one) }.is_ok());
    }
    // SAFETY: as above.
    let full = unsafe { post_srq_chain(&srq, &db, &mut one) };
    assert_eq!(full.map_err(|e| e.0), Err(libc::ENOMEM));
}

/// The extended polling API (`cq_ex`): the same completions as `poll_cq`, the consumer
/// index published only at `ibv_end_poll`.
#[test]
fn extended_polling_sees_what_poll_cq_sees() {
    use crate::cq_ex::{advance, end};
    let (cq, qp, qps) = setup(8, 12);
    let mut st = cq.state.lock();
    assert_eq!(advance(&cq, &qps, &mut st), Err(libc::ENOENT), "empty");
    drop(st);
    post_sends(&qp, &[(100, SIGNALED), (101, 0), (102, SIGNALED)]);
    nic_write(
        &cq,
        0,
        &Cqe {
            byte_len: 4,
            ..send_cqe(12, 0)
        },
    );
    nic_write(
        &cq,
        1,
        &Cqe {
            status: WC_REM_ACCESS_ERR,
            vendor_err: 3,
            ..send_cqe(12, 2)
        },
    );
    let mut st = cq.state.lock();
    assert_eq!(advance(&cq, &qps, &mut st), Ok(()));
    assert_eq!(
        (st.current.wr_id, st.current.status, st.current.byte_len),
        (100, 0, 4)
    );
    assert_eq!(st.current.qp_num, 12);
    assert_eq!(advance(&cq, &qps, &mut st), Ok(()));
    assert_eq!(
        (st.current.wr_id, st.current.status, st.current.vendor_err),
        (102, 10, 3)
    );
    assert_eq!(advance(&cq, &qps, &mut st), Err(libc::ENOENT));
    assert_eq!(record(&cq), 0, "published only by ibv_end_poll");
    end(&cq, &mut st);
    assert_eq!(record(&cq), 2);
    assert_eq!(lock(&qp.sq).outstanding(), 0);
    // A CQE of no QP of this CQ: consumed, counted, EIO.
    drop(st);
    nic_write(&cq, 2, &send_cqe(99, 0));
    let mut st = cq.state.lock();
    assert_eq!(advance(&cq, &qps, &mut st), Err(libc::EIO));
    assert_eq!(st.bad_cqes, 1);
    end(&cq, &mut st);
    drop(st);
    assert_eq!(record(&cq), 3);
    assert_eq!(poll_n(&cq, &qps, 4).0, 0);
}

#[test]
fn extended_cqs_refuse_fields_ordma_does_not_report() {
    use crate::cq_ex::{check_attr, WC_FLAGS};
    let ok = sys::ibv_cq_init_attr_ex {
        cqe: 4,
        wc_flags: WC_FLAGS,
        ..Default::default()
    };
    assert_eq!(check_attr(&ok), Ok(()));
    let ts = sys::ibv_cq_init_attr_ex {
        wc_flags: u64::from(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_COMPLETION_TIMESTAMP),
        ..ok
    };
    assert_eq!(check_attr(&ts), Err(libc::EOPNOTSUPP));
    let single = sys::ibv_cq_init_attr_ex {
        comp_mask: sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_FLAGS,
        flags: sys::ibv_create_cq_attr_flags_IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
        ..ok
    };
    assert_eq!(check_attr(&single), Ok(()));
    let overrun = sys::ibv_cq_init_attr_ex {
        flags: sys::ibv_create_cq_attr_flags_IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN,
        ..single
    };
    assert_eq!(check_attr(&overrun), Err(libc::EOPNOTSUPP));
    let pd = sys::ibv_cq_init_attr_ex {
        comp_mask: sys::ibv_cq_init_attr_mask_IBV_CQ_INIT_ATTR_MASK_PD,
        ..ok
    };
    assert_eq!(check_attr(&pd), Err(libc::EOPNOTSUPP));
}

#[test]
fn extended_command_carries_the_driver_data_after_the_core() {
    use crate::cq_ex::{ExCreateCqCmd, ExCreateCqResp};
    assert_eq!(
        offset_of!(ExCreateCqCmd, drv),
        size_of::<abi::IbvCreateCqEx>()
    );
    assert_eq!(
        offset_of!(ExCreateCqResp, drv),
        size_of::<sys::ib_uverbs_ex_create_cq_resp>()
    );
}

#[test]
fn a_resize_moves_the_cqes_not_polled_into_the_new_ring_with_its_phase() {
    assert_eq!(offset_of!(ResizeCqCmd, drv), size_of::<abi::IbvResizeCq>());
    assert_eq!(offset_of!(ResizeCqCmd, drv), 24);
    assert_eq!(size_of::<ResizeCqCmd>(), 24 + 16);
    assert_eq!(offset_of!(ResizeCqResp, drv), 8);
    assert_eq!(size_of::<ResizeCqResp>(), 8 + 8);
    // A ring of 4 on its third pass: CQEs 9..13 written (slots 1, 2, 3, 0), 9 the next
    // to poll; the NIC's index at the move is 13 (mod 2^16).
    let cq = new_cq(4).expect("a CQ");
    for i in 9..13u32 {
        nic_write(&cq, i, &send_cqe(7, 100 + i as u16));
    }
    let st = cq.state.lock();
    assert_eq!(st.ring.depth(), 4);
    for log in [3u8, 2, 4] {
        let new = CqRing::new(log).expect("a ring");
        new.stale_from(9);
        move_unpolled(&st.ring, &new, 9, 13);
        for i in 9..13u32 {
            let c = next_cqe(&new, i).expect("moved");
            assert_eq!(
                (c.qpn, c.wqe_index),
                (7, 100 + i as u16),
                "CQE {i} in 2^{log}"
            );
        }
        assert!(
            next_cqe(&new, 13).is_none(),
            "nothing past the move in 2^{log}"
        );
        for i in 13..9 + new.depth() {
            assert!(
                next_cqe(&new, i).is_none(),
                "slot of {i} in 2^{log} reads old"
            );
        }
    }
    // Without the marking, a zeroed ring of 8 at index 13 (its second pass: phase 0)
    // would read every slot as new.
    assert!(next_cqe(&CqRing::new(3).expect("a ring"), 13).is_some());
    // The consumer index is free-running in 32 bits, the NIC's in 16: at the wrap of
    // both, 3 CQEs to move.
    let new = CqRing::new(3).expect("a ring");
    new.stale_from(0x1_fffe);
    move_unpolled(&st.ring, &new, 0x1_fffe, 1);
    for i in [0x1_fffe, 0x1_ffff, 0x2_0000] {
        assert!(next_cqe(&new, i).is_some(), "CQE {i:#x} moved");
    }
    assert!(next_cqe(&new, 0x2_0001).is_none());
    // An old CQE in its slot of a new ring of 8 has the new phase: index 9 is slot 1 on
    // the second pass of 8 (phase 0), not the old ring's third pass of 4 (phase 1).
    let new = CqRing::new(3).expect("a ring");
    move_unpolled(&st.ring, &new, 9, 10);
    // SAFETY: slot 1 of the test's new ring.
    let owner = unsafe { new.slot(9).add(CQE_OWNER_OFFSET).read_volatile() };
    assert_eq!(owner, cqe_phase(9, 3));
    assert_eq!(cqe_phase(9, 3), 0);
}
