//! The SRQ's tests: its command layout, the ring's shape and links, posting (the WQE bytes,
//! the doorbell, `ENOMEM` one short of the depth, `EINVAL` with `bad_wr`), and slots given
//! back out of order.
use super::*;
use core::mem::offset_of;

use crate::wq::testing::{chain_recv, sge, RecordingDb};

#[test]
fn driver_data_follows_the_core_structs_without_padding() {
    assert_eq!(
        offset_of!(CreateSrqCmd, drv),
        size_of::<abi::IbvCreateSrq>()
    );
    assert_eq!(offset_of!(CreateSrqCmd, drv), 40);
    assert_eq!(size_of::<CreateSrqCmd>(), 40 + 16);
    assert_eq!(
        offset_of!(CreateSrqResp, drv),
        size_of::<sys::ib_uverbs_create_srq_resp>()
    );
    assert_eq!(offset_of!(CreateSrqResp, drv), 16);
    assert_eq!(size_of::<CreateSrqResp>(), 16 + 8);
    assert_eq!(offset_of!(Srq, ibv), 0);
}

fn shape(log_depth: u8, log_wqe_size: u8) -> QueueShape {
    QueueShape {
        log_depth,
        log_wqe_size,
    }
}

#[test]
fn the_ring_holds_max_wr_with_one_slot_free() {
    assert_eq!(srq_shape(1, 1), Ok(shape(1, 6)));
    assert_eq!(srq_shape(3, 3), Ok(shape(2, 6)));
    assert_eq!(srq_shape(4, 3), Ok(shape(3, 6)));
    assert_eq!(srq_shape(4, 4), Ok(shape(3, 7)));
    assert_eq!(srq_shape(500, 1), Ok(shape(9, 6)), "ibv_srq_pingpong's");
    assert_eq!(srq_shape(4096, 1), Ok(shape(13, 6)), "UCX's: 8191 then");
    assert_eq!(srq_shape(32767, 16), Ok(shape(15, 9)));
    assert_eq!(srq_shape(1, 63), Ok(shape(1, 10)));
    assert_eq!(srq_shape(32768, 1), Err(libc::EINVAL));
    assert_eq!(srq_shape(0, 1), Err(libc::EINVAL));
    assert_eq!(srq_shape(u32::MAX, 1), Err(libc::EINVAL));
    assert_eq!(srq_shape(1, 64), Err(libc::EINVAL));
}

/// An SRQ of 8 slots (7 WQEs) of 64 bytes, 2 SGEs, SRQN 9.
fn srq() -> Srq {
    Srq {
        ibv: sys::ibv_srq::default(),
        srqn: 9,
        max_sge: 2,
        ring: Mutex::new(SrqRing::new(shape(3, 6)).expect("a ring")),
    }
}

fn recv_wr(wr_id: u64, sges: &mut [sys::ibv_sge]) -> sys::ibv_recv_wr {
    sys::ibv_recv_wr {
        wr_id,
        sg_list: sges.as_mut_ptr(),
        num_sge: c_int::try_from(sges.len()).expect("few"),
        ..Default::default()
    }
}

fn post(srq: &Srq, db: &RecordingDb, wr: *mut sys::ibv_recv_wr) -> Result<(), c_int> {
    // SAFETY: the tests' WRs and SGE lists are valid.
    unsafe { post_srq_chain(srq, db, wr) }.map_err(|e| e.0)
}

/// The bytes of slot `slot`.
fn slot(srq: &Srq, slot: u16) -> Vec<u8> {
    lock(&srq.ring).wqe(slot).to_vec()
}

#[test]
fn posting_follows_the_links_and_rings_once_per_chain() {
    let s = srq();
    let db = RecordingDb::default();
    for i in 0..8u16 {
        assert_eq!(
            SrqWqe::next_of(&slot(&s, i)),
            Some((i + 1) % 8),
            "the links start 0 -> 1 -> ..."
        );
    }
    let mut a = [sge(0x1000, 64, 7), sge(0x2000, 32, 8)];
    let mut b = [sge(0x3000, 16, 9)];
    let mut wrs = [
        recv_wr(100, &mut a),
        recv_wr(101, &mut b),
        recv_wr(102, &mut []),
    ];
    assert_eq!(post(&s, &db, chain_recv(&mut wrs)), Ok(()));
    assert_eq!(
        db.take(),
        [(DB_SRQ, db_value(9, 3))],
        "one doorbell, 3 posted"
    );
    let w0 = slot(&s, 0);
    assert_eq!(
        SrqWqe::decode(&w0),
        Some(SrqWqe {
            num_sge: 2,
            next: 1
        })
    );
    let sge0 = ordma_hw::Sge::decode_from(&w0, 16).expect("SGE 0");
    let sge1 = ordma_hw::Sge::decode_from(&w0, 32).expect("SGE 1");
    assert_eq!((sge0.addr, sge0.length, sge0.lkey), (0x1000, 64, 7));
    assert_eq!((sge1.addr, sge1.length, sge1.lkey), (0x2000, 32, 8));
    assert_eq!(
        SrqWqe::decode(&slot(&s, 2)),
        Some(SrqWqe {
            num_sge: 0,
            next: 3
        })
    );
    // Too many SGEs: EINVAL, that WR and the rest not posted, those before are.
    let mut three = [sge(1, 1, 1), sge(2, 2, 2), sge(3, 3, 3)];
    let mut one = [sge(4, 4, 4)];
    let mut wrs = [recv_wr(103, &mut one), recv_wr(104, &mut three)];
    let first = chain_recv(&mut wrs);
    // SAFETY: the tests' WRs are valid.
    let r = unsafe { post_srq_chain(&s, &db, first) };
    assert_eq!(
        r.map_err(|e| (e.0, e.1)),
        Err((libc::EINVAL, wrs[1..].as_mut_ptr()))
    );
    assert_eq!(db.take(), [(DB_SRQ, db_value(9, 4))]);
    // Up to 7 (one slot stays free), then ENOMEM.
    for id in 105..108 {
        assert_eq!(post(&s, &db, &mut recv_wr(id, &mut [])), Ok(()));
    }
    assert!(lock(&s.ring).is_full());
    assert_eq!(post(&s, &db, &mut recv_wr(108, &mut [])), Err(libc::ENOMEM));
    assert_eq!(db.take().last(), Some(&(DB_SRQ, db_value(9, 7))));
}

#[test]
fn slots_come_back_in_completion_order_and_are_posted_again() {
    let s = srq();
    let db = RecordingDb::default();
    for id in 0..7 {
        assert_eq!(post(&s, &db, &mut recv_wr(id, &mut [])), Ok(()));
    }
    let mut r = lock(&s.ring);
    // Slot 3's completion first, then 0's (a QP held slot 0 for longer).
    assert_eq!(r.retire(3), Some(3));
    assert_eq!(r.retire(0), Some(0));
    assert_eq!(r.retire(0), None, "given back once");
    assert_eq!(r.retire(7), None, "never posted");
    assert_eq!(r.retire(200), None, "no such slot");
    drop(r);
    // The free ones: 7 (the spare), then 3, then 0 (the new spare).
    assert_eq!(post(&s, &db, &mut recv_wr(10, &mut [])), Ok(()));
    assert_eq!(post(&s, &db, &mut recv_wr(11, &mut [])), Ok(()));
    assert_eq!(post(&s, &db, &mut recv_wr(12, &mut [])), Err(libc::ENOMEM));
    assert_eq!(
        SrqWqe::next_of(&slot(&s, 6)),
        Some(7),
        "the NIC goes 6 -> 7"
    );
    assert_eq!(SrqWqe::next_of(&slot(&s, 7)), Some(3), "-> 3");
    assert_eq!(SrqWqe::next_of(&slot(&s, 3)), Some(0), "-> 0, the free one");
    let mut r = lock(&s.ring);
    assert_eq!(r.retire(7), Some(10));
    assert_eq!(r.retire(3), Some(11));
    assert_eq!(r.posted(), 9);
}

#[test]
fn a_grown_ring_keeps_every_slot_and_links_the_new_ones_after_the_last_free() {
    assert_eq!(
        offset_of!(ModifySrqCmd, drv),
        size_of::<abi::IbvModifySrq>()
    );
    assert_eq!(offset_of!(ModifySrqCmd, drv), 24);
    assert_eq!(size_of::<ModifySrqCmd>(), 24 + 16);
    let s = srq();
    let db = RecordingDb::default();
    // 7 posted (full), slots 2 and 5 given back: free 7 -> 2 -> 5, 5 the last.
    for id in 0..7 {
        assert_eq!(
            post(&s, &db, &mut recv_wr(id, &mut [sge(0x1000 * id, 8, 3)])),
            Ok(())
        );
    }
    {
        let mut r = lock(&s.ring);
        assert_eq!(r.retire(2), Some(2));
        assert_eq!(r.retire(5), Some(5));
    }
    let old = lock(&s.ring);
    assert_eq!(old.grown(3).err(), Some(libc::EINVAL), "no larger");
    assert_eq!(old.grown(16).err(), Some(libc::EINVAL), "beyond 2^15");
    let mut g = old.grown(5).expect("32 slots");
    assert_eq!((g.depth(), g.max_wr(), g.posted()), (32, 31, 7));
    for i in 0..8u16 {
        let size = 64usize;
        let was = &old.mem_bytes()[usize::from(i) * size..][..size];
        if i != 5 {
            assert_eq!(g.wqe(i), was, "slot {i} copied as it was");
        }
    }
    assert_eq!(
        SrqWqe::next_of(g.wqe(5)),
        Some(8),
        "the last free slot leads on to 8"
    );
    for i in 8..31u16 {
        assert_eq!(SrqWqe::next_of(g.wqe(i)), Some(i + 1));
    }
    drop(old);
    *lock(&s.ring) = g;
    // 26 more fit now (5 are held; the free 7, 2, 5, 8..=30; 31 the spare).
    for id in 100..126 {
        assert_eq!(post(&s, &db, &mut recv_wr(id, &mut [])), Ok(()), "WR {id}");
    }
    assert_eq!(post(&s, &db, &mut recv_wr(126, &mut [])), Err(libc::ENOMEM));
    let mut r = lock(&s.ring);
    assert_eq!(r.posted(), 33);
    assert_eq!(
        r.retire(0),
        Some(0),
        "a WQE posted before the resize keeps its wr_id"
    );
    assert_eq!(
        r.retire(7),
        Some(100),
        "the old spare took the first one after"
    );
    assert_eq!(r.retire(5), Some(102));
    assert_eq!(r.retire(8), Some(103), "then the new slots");
    assert_eq!(r.retire(30), Some(125));
    assert_eq!(r.retire(31), None, "the spare");
}
