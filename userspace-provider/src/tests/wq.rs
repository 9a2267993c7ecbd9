//! The send and receive queues' tests, against rings in ordinary memory and a recording doorbell.
use super::testing::*;
use super::*;
use ordma_hw::DB_RQ;

const RTS: u32 = sys::ibv_qp_state_IBV_QPS_RTS;
const SIGNALED: u32 = sys::ibv_send_flags_IBV_SEND_SIGNALED;
const INLINE: u32 = sys::ibv_send_flags_IBV_SEND_INLINE;

#[test]
fn send_wqes_are_byte_exact_per_opcode() {
    let qp = qp(cap(8, 2, 0, 0, 0), false, RTS, 7);
    let db = RecordingDb::default();
    let mut sges = [sge(0x1000, 100, 0x0102), sge(0x2000_0000_0000, 0, 0x0304)];
    let cases = [
        (
            sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
            WR_RDMA_WRITE,
            true,
            false,
        ),
        (
            sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
            WR_RDMA_WRITE_IMM,
            true,
            true,
        ),
        (sys::ibv_wr_opcode_IBV_WR_SEND, WR_SEND, false, false),
        (
            sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM,
            WR_SEND_IMM,
            false,
            true,
        ),
        (
            sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
            WR_RDMA_READ,
            true,
            false,
        ),
    ];
    for (i, &(op, wqe_op, remote, imm)) in cases.iter().enumerate() {
        let flags =
            SIGNALED | sys::ibv_send_flags_IBV_SEND_SOLICITED | sys::ibv_send_flags_IBV_SEND_FENCE;
        let mut wr = [send_wr(100 + i as u64, op, flags, &mut sges)];
        assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
        let b = slot(&qp.sq, i);
        // The control segment, by hand.
        let mut want = vec![0u8; 64];
        want[0] = wqe_op;
        want[1] = WQE_FLAG_SIGNALED | WQE_FLAG_SOLICITED | WQE_FLAG_FENCE;
        want[2] = 2;
        if imm {
            want[4..8].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        }
        if remote {
            want[16..24].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
            want[24..28].copy_from_slice(&0xaabb_ccddu32.to_le_bytes());
        }
        want[32..40].copy_from_slice(&0x1000u64.to_le_bytes());
        want[40..44].copy_from_slice(&100u32.to_le_bytes());
        want[44..48].copy_from_slice(&0x0102u32.to_le_bytes());
        want[48..56].copy_from_slice(&0x2000_0000_0000u64.to_le_bytes());
        want[56..60].copy_from_slice(&0u32.to_le_bytes());
        want[60..64].copy_from_slice(&0x0304u32.to_le_bytes());
        assert_eq!(b, want, "opcode {op}");
        // And as the NIC's model decodes it.
        let hdr = SendWqe::decode(&b).expect("a valid header");
        assert_eq!((hdr.opcode, hdr.num_sge, hdr.inline_len), (wqe_op, 2, 0));
        assert_eq!(
            Sge::decode_from(&b, SendWqe::sge_offset(1)),
            Some(Sge {
                addr: 0x2000_0000_0000,
                length: 0,
                lkey: 0x0304
            })
        );
        // CAST: small.
        assert_eq!(db.take(), vec![(DB_SQ, (7 << 16) | (i as u32 + 1))]);
    }
}

#[test]
fn atomic_wqes_carry_their_segment_and_sges_behind_it() {
    use ordma_hw::{AtomicSeg, WC_COMP_SWAP, WC_FETCH_ADD};
    // libibverbs' own values, copied by the NIC and the provider.
    assert_eq!(
        (
            u32::from(WR_ATOMIC_CMP_AND_SWP),
            u32::from(WR_ATOMIC_FETCH_AND_ADD)
        ),
        (
            sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP,
            sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD
        )
    );
    assert_eq!(
        (u32::from(WC_COMP_SWAP), u32::from(WC_FETCH_ADD)),
        (
            sys::ibv_wc_opcode_IBV_WC_COMP_SWAP,
            sys::ibv_wc_opcode_IBV_WC_FETCH_ADD
        )
    );
    // 64-byte WQEs (max_send_sge 2): an atomic takes one SGE behind its segment.
    let qp = qp(cap(8, 2, 0, 0, 0), false, RTS, 7);
    assert_eq!(lock(&qp.sq).wqe_size(), 64);
    let db = RecordingDb::default();
    let mut one = [sge(0x1008, 8, 0x0102)];
    for (i, op) in [
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
    ]
    .into_iter()
    .enumerate()
    {
        let mut wr = send_wr(50, op, SIGNALED, &mut one);
        wr.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: 0x7000_0000_0008,
            compare_add: 0x0102_0304_0506_0708,
            swap: 0x1112_1314_1516_1718,
            rkey: 0x0a0b,
        };
        let mut wrs = [wr];
        assert_eq!(post_send(&qp, &db, chain_send(&mut wrs)), Ok(()));
        let b = slot(&qp.sq, i);
        let hdr = SendWqe::decode(&b).expect("a valid header");
        let cas = op == sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP;
        assert_eq!(
            hdr,
            SendWqe {
                opcode: if cas {
                    WR_ATOMIC_CMP_AND_SWP
                } else {
                    WR_ATOMIC_FETCH_AND_ADD
                },
                flags: WQE_FLAG_SIGNALED,
                num_sge: 1,
                remote_addr: 0x7000_0000_0008,
                rkey: 0x0a0b,
                ..Default::default()
            }
        );
        assert_eq!(
            AtomicSeg::decode_from(&b),
            Some(AtomicSeg {
                compare_add: 0x0102_0304_0506_0708,
                // A fetch and add's swap is not sent: zero.
                swap: if cas { 0x1112_1314_1516_1718 } else { 0 },
            })
        );
        assert_eq!(
            Sge::decode_from(&b, SendWqe::atomic_sge_offset(0)),
            Some(Sge {
                addr: 0x1008,
                length: 8,
                lkey: 0x0102
            })
        );
    }
    // Two SGEs do not fit behind the segment in 64 bytes: EINVAL, nothing posted.
    let mut two = [sge(0x1008, 4, 1), sge(0x2000, 4, 1)];
    let mut wrs = [send_wr(
        51,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
        0,
        &mut two,
    )];
    let p = chain_send(&mut wrs);
    assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
    assert_eq!(lock(&qp.sq).outstanding(), 2);
    // 128-byte WQEs: they do.
    let wide = super::testing::qp(cap(8, 4, 0, 0, 0), false, RTS, 8);
    let p = chain_send(&mut wrs);
    assert_eq!(post_send(&wide, &db, p), Ok(()));
    let b = slot(&wide.sq, 0);
    assert_eq!(
        Sge::decode_from(&b, SendWqe::atomic_sge_offset(1)).map(|s| s.addr),
        Some(0x2000)
    );
}

#[test]
fn uc_qps_refuse_reads_and_atomics() {
    let mut qp = crate::qp::new_qp(&sys::ibv_qp_init_attr {
        send_cq: core::ptr::NonNull::dangling().as_ptr(),
        recv_cq: core::ptr::NonNull::dangling().as_ptr(),
        cap: cap(8, 2, 0, 0, 0),
        qp_type: sys::ibv_qp_type_IBV_QPT_UC,
        ..Default::default()
    })
    .expect("a QP");
    qp.qpn = 9;
    crate::qp::set_state(&qp, RTS);
    assert!(qp.caps.uc);
    let db = RecordingDb::default();
    let mut s = [sge(0x1000, 8, 1)];
    for op in [
        sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
    ] {
        let mut wrs = [send_wr(1, op, SIGNALED, &mut s)];
        let p = chain_send(&mut wrs);
        assert_eq!(
            post_send(&qp, &db, p),
            Err((libc::EINVAL, p)),
            "opcode {op}"
        );
    }
    assert_eq!(db.take(), vec![]);
    for op in [
        sys::ibv_wr_opcode_IBV_WR_SEND,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
    ] {
        let mut wrs = [send_wr(2, op, SIGNALED, &mut s)];
        assert_eq!(
            post_send(&qp, &db, chain_send(&mut wrs)),
            Ok(()),
            "opcode {op}"
        );
    }
    assert_eq!(lock(&qp.sq).outstanding(), 4);
    // An RC QP takes a READ.
    let rc = super::testing::qp(cap(8, 2, 0, 0, 0), false, RTS, 10);
    assert!(!rc.caps.uc);
    let mut wrs = [send_wr(3, sys::ibv_wr_opcode_IBV_WR_RDMA_READ, 0, &mut s)];
    assert_eq!(post_send(&rc, &db, chain_send(&mut wrs)), Ok(()));
}

#[test]
fn unsignaled_sends_are_signaled_with_sq_sig_all() {
    let mut sges = [sge(1, 1, 1)];
    for (sig_all, want) in [(false, 0), (true, WQE_FLAG_SIGNALED)] {
        let qp = qp(cap(2, 1, 0, 0, 0), sig_all, RTS, 3);
        let mut wr = [send_wr(1, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut sges)];
        assert_eq!(
            post_send(&qp, &RecordingDb::default(), chain_send(&mut wr)),
            Ok(())
        );
        assert_eq!(slot(&qp.sq, 0)[1], want);
    }
}

#[test]
fn inline_sends_copy_the_bytes_into_the_wqe() {
    // 64 inline bytes: 128-byte WQEs.
    let qp = qp(cap(4, 1, 64, 0, 0), false, RTS, 9);
    assert_eq!(qp.caps.max_inline, 96);
    let db = RecordingDb::default();
    let a: Vec<u8> = (1..=40).collect();
    let b: Vec<u8> = (101..=156).collect();
    let mut sges = [
        sge(a.as_ptr() as u64, 40, 0xdead),
        sge(0, 0, 0),
        sge(b.as_ptr() as u64, 56, 0xbeef),
    ];
    // Three SGEs; max_send_sge is 6 here (128-byte WQEs).
    let mut wr = [send_wr(
        5,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
        INLINE | SIGNALED,
        &mut sges,
    )];
    assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
    let w = slot(&qp.sq, 0);
    let hdr = SendWqe::decode(&w).expect("a valid header");
    assert_eq!(hdr.flags, WQE_FLAG_INLINE | WQE_FLAG_SIGNALED);
    assert_eq!((hdr.num_sge, hdr.inline_len), (0, 96));
    assert_eq!(&w[32..72], &a[..]);
    assert_eq!(&w[72..128], &b[..]);
    assert_eq!(db.take(), vec![(DB_SQ, (9 << 16) | 1)]);

    // One byte more than max_inline, and inline on a READ: EINVAL, nothing posted.
    let c = [0u8; 97];
    let mut long = [sge(c.as_ptr() as u64, 97, 0)];
    let mut wr = [send_wr(
        6,
        sys::ibv_wr_opcode_IBV_WR_SEND,
        INLINE,
        &mut long,
    )];
    let p = chain_send(&mut wr);
    assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
    let mut short = [sge(c.as_ptr() as u64, 8, 0)];
    let mut wr = [send_wr(
        7,
        sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
        INLINE,
        &mut short,
    )];
    let p = chain_send(&mut wr);
    assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
    let mut null = [sge(0, 8, 0)];
    let mut wr = [send_wr(
        8,
        sys::ibv_wr_opcode_IBV_WR_SEND,
        INLINE,
        &mut null,
    )];
    let p = chain_send(&mut wr);
    assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
    assert_eq!(db.take(), vec![]);
    assert_eq!(lock(&qp.sq).head(), 1);
}

#[test]
fn the_send_ring_wraps_across_its_end() {
    let qp = qp(cap(4, 1, 0, 0, 0), false, RTS, 0xffff);
    let db = RecordingDb::default();
    let mut s = [sge(0x10, 1, 2)];
    let mut wrs: Vec<_> = (0..3)
        .map(|i| send_wr(i, sys::ibv_wr_opcode_IBV_WR_SEND, SIGNALED, &mut s))
        .collect();
    assert_eq!(post_send(&qp, &db, chain_send(&mut wrs)), Ok(()));
    assert_eq!(lock(&qp.sq).retire_through(2), Some(2));
    let mut wrs: Vec<_> = (10..13)
        .map(|i| send_wr(i, sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE, SIGNALED, &mut s))
        .collect();
    assert_eq!(post_send(&qp, &db, chain_send(&mut wrs)), Ok(()));
    // WQEs 3, 4, 5 in slots 3, 0, 1.
    assert_eq!(slot(&qp.sq, 3)[0], WR_RDMA_WRITE);
    assert_eq!(slot(&qp.sq, 0)[0], WR_RDMA_WRITE);
    assert_eq!(slot(&qp.sq, 1)[0], WR_RDMA_WRITE);
    assert_eq!(slot(&qp.sq, 2)[0], WR_SEND);
    assert_eq!(db.take(), vec![(DB_SQ, 0xffff_0003), (DB_SQ, 0xffff_0006)]);
    let mut sq = lock(&qp.sq);
    assert_eq!(sq.outstanding(), 3);
    assert_eq!(sq.retire_through(4), Some(11));
    assert_eq!(sq.retire_through(5), Some(12));
    assert_eq!(sq.retire_through(5), None, "already retired");
}

#[test]
fn indices_wrap_past_2_pow_16() {
    let qp = qp(cap(2, 1, 0, 0, 0), false, RTS, 2);
    let db = RecordingDb::default();
    let mut s = [sge(0x10, 1, 2)];
    for i in 0..0x1_0001u32 {
        let mut wr = [send_wr(
            u64::from(i),
            sys::ibv_wr_opcode_IBV_WR_SEND,
            0,
            &mut s,
        )];
        assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
        // CAST: the CQE's index is mod 2^16.
        assert_eq!(lock(&qp.sq).retire_through(i as u16), Some(u64::from(i)));
    }
    assert_eq!(db.take().last(), Some(&(DB_SQ, (2 << 16) | 1)));
}

#[test]
fn a_full_send_queue_is_enomem_at_exactly_depth_outstanding() {
    let qp = qp(cap(3, 1, 0, 0, 0), false, RTS, 4);
    assert_eq!(lock(&qp.sq).depth(), 4);
    let db = RecordingDb::default();
    let mut s = [sge(0x10, 1, 2)];
    let mut wrs: Vec<_> = (0..6)
        .map(|i| send_wr(i, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut s))
        .collect();
    let p = chain_send(&mut wrs);
    // SAFETY: inside `wrs`.
    assert_eq!(
        post_send(&qp, &db, p),
        Err((libc::ENOMEM, unsafe { p.add(4) }))
    );
    assert_eq!(
        db.take(),
        vec![(DB_SQ, (4 << 16) | 4)],
        "one doorbell for the four posted"
    );
    // Full: the next is refused, no doorbell.
    assert_eq!(post_send(&qp, &db, p), Err((libc::ENOMEM, p)));
    assert_eq!(db.take(), vec![]);
    // One retired: one fits.
    assert_eq!(lock(&qp.sq).retire_through(0), Some(0));
    let mut wr = [send_wr(9, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut s)];
    assert_eq!(post_send(&qp, &db, chain_send(&mut wr)), Ok(()));
    assert_eq!(db.take(), vec![(DB_SQ, (4 << 16) | 5)]);
}

#[test]
fn bad_send_wrs_are_einval_with_bad_wr_at_them() {
    let qp = qp(cap(8, 2, 0, 0, 0), false, RTS, 5);
    let db = RecordingDb::default();
    let mut s2 = [sge(1, 1, 1), sge(2, 2, 2)];
    let mut s3 = [sge(1, 1, 1), sge(2, 2, 2), sge(3, 3, 3)];
    let ok = |s: &mut [sys::ibv_sge]| send_wr(0, sys::ibv_wr_opcode_IBV_WR_SEND, 0, s);
    let mut bad_cases: Vec<sys::ibv_send_wr> = vec![
        send_wr(
            1,
            sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
            INLINE,
            &mut s2,
        ),
        send_wr(1, sys::ibv_wr_opcode_IBV_WR_LOCAL_INV, 0, &mut s2),
        send_wr(1, sys::ibv_wr_opcode_IBV_WR_TSO, 0, &mut s2),
        send_wr(
            1,
            sys::ibv_wr_opcode_IBV_WR_SEND,
            sys::ibv_send_flags_IBV_SEND_IP_CSUM,
            &mut s2,
        ),
        send_wr(1, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut s3),
    ];
    let mut neg = ok(&mut s2);
    neg.num_sge = -1;
    bad_cases.push(neg);
    let mut null = ok(&mut s2);
    null.sg_list = core::ptr::null_mut();
    bad_cases.push(null);
    let mut posted = 0;
    for bad in bad_cases {
        let mut wrs = [ok(&mut s2), ok(&mut s2), bad, ok(&mut s2)];
        let p = chain_send(&mut wrs);
        // SAFETY: inside `wrs`.
        assert_eq!(
            post_send(&qp, &db, p),
            Err((libc::EINVAL, unsafe { p.add(2) }))
        );
        posted += 2;
        assert_eq!(
            db.take(),
            vec![(DB_SQ, (5 << 16) | posted)],
            "the two before it, one doorbell"
        );
        lock(&qp.sq).retire_through((posted - 1) as u16);
    }
    // Before RTS: EINVAL at the first WR, nothing posted.
    for state in [
        sys::ibv_qp_state_IBV_QPS_RESET,
        sys::ibv_qp_state_IBV_QPS_INIT,
        sys::ibv_qp_state_IBV_QPS_RTR,
    ] {
        crate::qp::set_state(&qp, state);
        let mut wrs = [ok(&mut s2), ok(&mut s2)];
        let p = chain_send(&mut wrs);
        assert_eq!(post_send(&qp, &db, p), Err((libc::EINVAL, p)));
        assert_eq!(db.take(), vec![]);
    }
    // An empty chain posts nothing.
    crate::qp::set_state(&qp, RTS);
    assert_eq!(post_send(&qp, &db, core::ptr::null_mut()), Ok(()));
    assert_eq!(db.take(), vec![]);
}

#[test]
fn receives_are_encoded_and_checked() {
    let qp = qp(cap(1, 1, 0, 2, 3), false, sys::ibv_qp_state_IBV_QPS_INIT, 6);
    let db = RecordingDb::default();
    let rq = qp.rq.as_ref().expect("an RQ");
    let mut s = [
        sge(0xa000, 10, 0x11),
        sge(0xb000, 20, 0x22),
        sge(0xc000, 30, 0x33),
    ];
    let mut s4 = [sge(0, 1, 0); 4];
    let mut wrs = [
        sys::ibv_recv_wr {
            wr_id: 1,
            sg_list: s.as_mut_ptr(),
            num_sge: 3,
            ..Default::default()
        },
        sys::ibv_recv_wr {
            wr_id: 2,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
        sys::ibv_recv_wr {
            wr_id: 3,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
    ];
    let p = chain_recv(&mut wrs);
    // Depth 2: the third is ENOMEM.
    // SAFETY: inside `wrs`.
    assert_eq!(
        post_recv(&qp, &db, p),
        Err((libc::ENOMEM, unsafe { p.add(2) }))
    );
    assert_eq!(db.take(), vec![(DB_RQ, (6 << 16) | 2)]);
    let w = slot(rq, 0);
    let mut want = vec![0u8; 64];
    want[0] = 3;
    for (i, (a, l, k)) in [
        (0xa000u64, 10u32, 0x11u32),
        (0xb000, 20, 0x22),
        (0xc000, 30, 0x33),
    ]
    .iter()
    .enumerate()
    {
        let o = 16 + 16 * i;
        want[o..o + 8].copy_from_slice(&a.to_le_bytes());
        want[o + 8..o + 12].copy_from_slice(&l.to_le_bytes());
        want[o + 12..o + 16].copy_from_slice(&k.to_le_bytes());
    }
    assert_eq!(w, want);
    assert_eq!(RecvWqe::decode(&w), Some(RecvWqe { num_sge: 3 }));
    assert_eq!(lock(rq).retire_through(0), Some(1));
    // Four SGEs, max_recv_sge 3: EINVAL.
    let mut wrs = [sys::ibv_recv_wr {
        wr_id: 4,
        sg_list: s4.as_mut_ptr(),
        num_sge: 4,
        ..Default::default()
    }];
    let p = chain_recv(&mut wrs);
    assert_eq!(post_recv(&qp, &db, p), Err((libc::EINVAL, p)));
    // In RESET: EINVAL, and the indices are back to 0.
    crate::qp::set_state(&qp, sys::ibv_qp_state_IBV_QPS_RESET);
    let mut wrs = [sys::ibv_recv_wr {
        wr_id: 5,
        sg_list: s.as_mut_ptr(),
        num_sge: 1,
        ..Default::default()
    }];
    let p = chain_recv(&mut wrs);
    assert_eq!(post_recv(&qp, &db, p), Err((libc::EINVAL, p)));
    let (head, outstanding) = {
        let rq = lock(rq);
        (rq.head(), rq.outstanding())
    };
    assert_eq!((head, outstanding), (0, 0));
    assert_eq!(db.take(), vec![]);
    // A QP without an RQ: EINVAL.
    let no_rq = super::testing::qp(cap(1, 1, 0, 0, 0), false, RTS, 8);
    assert_eq!(post_recv(&no_rq, &db, p), Err((libc::EINVAL, p)));
}

#[test]
fn the_capabilities_reported_are_the_ones_enforced() {
    let qp = qp(cap(5, 2, 40, 3, 2), false, RTS, 2);
    // The rings: SQ 8 × 128 B (40 inline + 32), RQ 4 × 64 B.
    assert_eq!(
        qp.caps,
        QpCaps {
            max_send_sge: 6,
            max_recv_sge: 3,
            max_inline: 96,
            sig_all: false,
            uc: false,
            ud: false,
        }
    );
    // What the kernel reports (`uapi.md`: the rings' capacity, capped by max_sge).
    let t = |c: sys::ibv_qp_cap| {
        (
            c.max_send_wr,
            c.max_recv_wr,
            c.max_send_sge,
            c.max_recv_sge,
            c.max_inline_data,
        )
    };
    let mut reported = cap(8, 6, 96, 4, 3);
    let caps = crate::qp::settle_caps(&qp, &mut reported);
    assert_eq!(t(reported), t(cap(8, 6, 96, 4, 3)));
    assert_eq!(caps, qp.caps);
    // A kernel that reports less (a device max_sge of 4) is what is enforced; more than
    // the rings hold is cut down to them.
    let mut reported = cap(9, 4, 200, 1, 16);
    let caps = crate::qp::settle_caps(&qp, &mut reported);
    assert_eq!(t(reported), t(cap(8, 4, 96, 1, 3)));
    // The receive queue holds 4 but was reported as 1: posting takes 1.
    let db = RecordingDb::default();
    let mut s = [sge(1, 1, 1)];
    let mut wrs = [
        sys::ibv_recv_wr {
            wr_id: 1,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
        sys::ibv_recv_wr {
            wr_id: 2,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        },
    ];
    let p = chain_recv(&mut wrs);
    // SAFETY: inside `wrs`.
    assert_eq!(
        post_recv(&qp, &db, p),
        Err((libc::ENOMEM, unsafe { p.add(1) }))
    );
    assert_eq!(
        caps,
        QpCaps {
            max_send_sge: 4,
            max_recv_sge: 3,
            max_inline: 96,
            sig_all: false,
            uc: false,
            ud: false,
        }
    );
}
