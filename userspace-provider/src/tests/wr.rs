//! The `ibv_wr_*` API's tests: the WQEs a batch stages are byte for byte those
//! `ibv_post_send` writes for the same work, posted only by `ibv_wr_complete`, and a batch
//! with an error posts nothing.
use super::*;
use crate::wq::testing::{cap, chain_send, post_send, qp, send_wr, sge, slot, RecordingDb};
use core::ptr;

const RTS: u32 = sys::ibv_qp_state_IBV_QPS_RTS;
const SIGNALED: u32 = sys::ibv_send_flags_IBV_SEND_SIGNALED;

/// The `ibv_qp_ex` of a test QP, with every operation set.
fn ex(qp: &mut Qp) -> *mut sys::ibv_qp_ex {
    set_functions(&mut qp.ibv.qp_ex, u64::MAX);
    ptr::addr_of_mut!(qp.ibv.qp_ex)
}

/// `ibv_wr_complete` without the doorbell page: the WQEs posted, or the error.
fn finish(qp: &Qp) -> Result<u32, c_int> {
    complete(qp, &mut lock(&qp.sq))
}

fn set_wr(x: *mut sys::ibv_qp_ex, wr_id: u64, flags: u32) {
    // SAFETY: the test's live QP.
    unsafe {
        (*x).wr_id = wr_id;
        (*x).wr_flags = flags;
    }
}

#[test]
fn a_batch_stages_the_wqes_post_send_writes() {
    let mut a = qp(cap(8, 2, 64, 0, 0), false, RTS, 7);
    let b = qp(cap(8, 2, 64, 0, 0), false, RTS, 8);
    let x = ex(&mut a);
    let mut sges = [sge(0x1000, 100, 0x0102), sge(0x2000, 28, 0x0304)];
    // The same work through ibv_post_send on `b`.
    let mut wrs = [
        send_wr(1, sys::ibv_wr_opcode_IBV_WR_SEND, SIGNALED, &mut sges[..1]),
        send_wr(
            2,
            sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
            0,
            &mut sges,
        ),
        send_wr(
            3,
            sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
            SIGNALED,
            &mut sges[1..],
        ),
    ];
    assert_eq!(
        post_send(&b, &RecordingDb::default(), chain_send(&mut wrs)),
        Ok(())
    );
    let imm = u32::from_ne_bytes([0xde, 0xad, 0xbe, 0xef]);
    let (raddr, rkey) = (0x1122_3344_5566_7788, 0xaabb_ccdd);
    // SAFETY: the test's live extended QP with every function set.
    unsafe {
        let f = &*x;
        f.wr_start.expect("wr_start")(x);
        set_wr(x, 1, SIGNALED);
        f.wr_send.expect("wr_send")(x);
        f.wr_set_sge.expect("wr_set_sge")(x, 0x0102, 0x1000, 100);
        set_wr(x, 2, 0);
        f.wr_rdma_write_imm.expect("wr_rdma_write_imm")(x, rkey, raddr, imm);
        f.wr_set_sge_list.expect("wr_set_sge_list")(x, 2, sges.as_ptr());
        set_wr(x, 3, SIGNALED);
        f.wr_rdma_read.expect("wr_rdma_read")(x, rkey, raddr);
        f.wr_set_sge_list.expect("wr_set_sge_list")(x, 1, sges.as_ptr().add(1));
    }
    assert_eq!(lock(&a.sq).head(), 0, "nothing posted before wr_complete");
    assert_eq!(finish(&a), Ok(3));
    assert_eq!(lock(&a.sq).head(), 3);
    for i in 0..3 {
        assert_eq!(slot(&a.sq, i), slot(&b.sq, i), "WQE {i}");
    }
    assert_eq!(lock(&a.sq).retire_through(2), Some(3));
}

#[test]
fn atomics_and_inline_data_match_post_send() {
    let mut a = qp(cap(8, 2, 64, 0, 0), false, RTS, 7);
    let b = qp(cap(8, 2, 64, 0, 0), false, RTS, 8);
    let x = ex(&mut a);
    let data = *b"0123456789abcdefghij";
    let mut inl = [
        sge(data.as_ptr() as u64, 12, 0),
        sge(data.as_ptr() as u64 + 12, 8, 0),
    ];
    let mut one = [sge(0x3000, 8, 9)];
    let mut wrs = [
        send_wr(
            1,
            sys::ibv_wr_opcode_IBV_WR_SEND,
            sys::ibv_send_flags_IBV_SEND_INLINE,
            &mut inl,
        ),
        send_wr(
            2,
            sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
            0,
            &mut one,
        ),
    ];
    wrs[1].wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
        remote_addr: 0x8000,
        compare_add: 5,
        swap: 0,
        rkey: 77,
    };
    assert_eq!(
        post_send(&b, &RecordingDb::default(), chain_send(&mut wrs)),
        Ok(())
    );
    let bufs = [
        sys::ibv_data_buf {
            addr: data.as_ptr().cast_mut().cast(),
            length: 12,
        },
        sys::ibv_data_buf {
            addr: data.as_ptr().wrapping_add(12).cast_mut().cast(),
            length: 8,
        },
    ];
    // SAFETY: the test's live extended QP with every function set.
    unsafe {
        let f = &*x;
        f.wr_start.expect("wr_start")(x);
        set_wr(x, 1, sys::ibv_send_flags_IBV_SEND_INLINE);
        f.wr_send.expect("wr_send")(x);
        f.wr_set_inline_data_list.expect("list")(x, 2, bufs.as_ptr());
        set_wr(x, 2, 0);
        f.wr_atomic_fetch_add.expect("fetch_add")(x, 77, 0x8000, 5);
        f.wr_set_sge.expect("wr_set_sge")(x, 9, 0x3000, 8);
    }
    assert_eq!(finish(&a), Ok(2));
    for i in 0..2 {
        assert_eq!(slot(&a.sq, i), slot(&b.sq, i), "WQE {i}");
    }
}

#[test]
fn a_failed_call_fails_the_batch_and_posts_nothing() {
    let mut a = qp(cap(4, 1, 0, 0, 0), false, RTS, 7);
    let x = ex(&mut a);
    // The test QP takes what its ring holds: 32 bytes inline behind a 64-byte WQE's header.
    assert_eq!(a.caps.max_inline, 32);
    let big = [0u8; 33];
    // SAFETY: the test's live extended QP with every function set.
    unsafe {
        let f = &*x;
        f.wr_start.expect("wr_start")(x);
        f.wr_send.expect("wr_send")(x);
        f.wr_set_sge.expect("wr_set_sge")(x, 1, 0x1000, 4);
        f.wr_send.expect("wr_send")(x);
        // Past max_inline.
        f.wr_set_inline_data.expect("inline")(x, big.as_ptr().cast_mut().cast(), 33);
        f.wr_send.expect("wr_send")(x);
    }
    assert_eq!(finish(&a), Err(libc::EINVAL));
    assert_eq!(lock(&a.sq).head(), 0);
    // Inline data on a READ, and three SGEs past max_send_sge (the ring's 2).
    assert_eq!(a.caps.max_send_sge, 2);
    let three = [sge(1, 1, 1), sge(2, 2, 2), sge(3, 3, 3)];
    for bad in 0..2 {
        // SAFETY: as above.
        unsafe {
            let f = &*x;
            f.wr_start.expect("wr_start")(x);
            f.wr_rdma_read.expect("read")(x, 1, 0x10);
            if bad == 0 {
                f.wr_set_inline_data.expect("inline")(x, big.as_ptr().cast_mut().cast(), 4);
            } else {
                f.wr_set_sge_list.expect("list")(x, 3, three.as_ptr());
            }
        }
        assert_eq!(finish(&a), Err(libc::EINVAL), "case {bad}");
        assert_eq!(lock(&a.sq).head(), 0);
    }
    // More WQEs than the queue holds (4): ENOMEM, nothing posted.
    // SAFETY: as above.
    unsafe {
        let f = &*x;
        f.wr_start.expect("wr_start")(x);
        for _ in 0..5 {
            f.wr_send.expect("wr_send")(x);
        }
    }
    assert_eq!(finish(&a), Err(libc::ENOMEM));
    assert_eq!(lock(&a.sq).head(), 0);
    // Four fit.
    // SAFETY: as above.
    unsafe {
        let f = &*x;
        f.wr_start.expect("wr_start")(x);
        for _ in 0..4 {
            f.wr_send.expect("wr_send")(x);
        }
    }
    assert_eq!(finish(&a), Ok(4));
}

#[test]
fn post_send_waits_for_the_batch_and_abort_drops_it() {
    let mut a = qp(cap(4, 1, 0, 0, 0), false, RTS, 7);
    let x = ex(&mut a);
    let mut s = [sge(0x1000, 4, 1)];
    let mut wr = [send_wr(9, sys::ibv_wr_opcode_IBV_WR_SEND, 0, &mut s)];
    // SAFETY: the test's live extended QP with every function set.
    unsafe {
        (*x).wr_start.expect("wr_start")(x);
        (*x).wr_send.expect("wr_send")(x);
    }
    let db = RecordingDb::default();
    assert_eq!(
        post_send(&a, &db, chain_send(&mut wr)).map_err(|e| e.0),
        Err(libc::EBUSY)
    );
    // SAFETY: as above.
    unsafe { (*x).wr_abort.expect("wr_abort")(x) };
    assert_eq!(finish(&a), Err(libc::EINVAL), "no batch open");
    assert_eq!(post_send(&a, &db, chain_send(&mut wr)), Ok(()));
    assert_eq!(lock(&a.sq).head(), 1);
    // A move to RESET drops an open batch.
    // SAFETY: as above.
    unsafe {
        (*x).wr_start.expect("wr_start")(x);
        (*x).wr_send.expect("wr_send")(x);
    }
    crate::qp::set_state(&a, sys::ibv_qp_state_IBV_QPS_RESET);
    assert_eq!(finish(&a), Err(libc::EINVAL));
    // Not in a state that sends.
    // SAFETY: as above.
    unsafe {
        (*x).wr_start.expect("wr_start")(x);
        (*x).wr_send.expect("wr_send")(x);
    }
    assert_eq!(finish(&a), Err(libc::EINVAL));
    assert_eq!(lock(&a.sq).head(), 0);
}

#[test]
fn ud_wqes_need_their_address_and_rc_qps_take_none() {
    let mut ud = crate::qp::new_qp(&sys::ibv_qp_init_attr {
        send_cq: ptr::NonNull::dangling().as_ptr(),
        recv_cq: ptr::NonNull::dangling().as_ptr(),
        cap: cap(4, 1, 0, 0, 0),
        qp_type: sys::ibv_qp_type_IBV_QPT_UD,
        ..Default::default()
    })
    .expect("a UD QP");
    crate::qp::set_state(&ud, RTS);
    let x = ex(&mut ud);
    // SAFETY: the test's live extended QP with every function set.
    unsafe {
        (*x).wr_start.expect("wr_start")(x);
        (*x).wr_send.expect("wr_send")(x);
        (*x).wr_set_sge.expect("wr_set_sge")(x, 1, 0x1000, 4);
    }
    assert_eq!(finish(&ud), Err(libc::EINVAL), "no address");
    // A null AH is refused as ibv_post_send refuses it.
    // SAFETY: as above.
    unsafe {
        (*x).wr_start.expect("wr_start")(x);
        (*x).wr_send.expect("wr_send")(x);
        (*x).wr_set_ud_addr.expect("ud_addr")(x, ptr::null_mut(), 5, 0x1111);
    }
    assert_eq!(finish(&ud), Err(libc::EINVAL));
    // A READ on a UD QP, and an address on an RC QP.
    // SAFETY: as above.
    unsafe {
        (*x).wr_start.expect("wr_start")(x);
        (*x).wr_rdma_read.expect("read")(x, 1, 2);
    }
    assert_eq!(finish(&ud), Err(libc::EINVAL));
    let mut rc = qp(cap(4, 1, 0, 0, 0), false, RTS, 7);
    let y = ex(&mut rc);
    // SAFETY: as above.
    unsafe {
        (*y).wr_start.expect("wr_start")(y);
        (*y).wr_send.expect("wr_send")(y);
        (*y).wr_set_ud_addr.expect("ud_addr")(y, ptr::null_mut(), 5, 0x1111);
    }
    assert_eq!(finish(&rc), Err(libc::EINVAL));
}

#[test]
fn each_qp_type_offers_the_operations_it_posts() {
    use sys::*;
    let rc = send_ops(ibv_qp_type_IBV_QPT_RC).expect("RC");
    let uc = send_ops(ibv_qp_type_IBV_QPT_UC).expect("UC");
    let ud = send_ops(ibv_qp_type_IBV_QPT_UD).expect("UD");
    let read = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_READ);
    let write = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE);
    let send = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND);
    let local = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW)
        | u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV);
    let send_inv = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV);
    assert_eq!((rc & read, uc & read, ud & read), (read, 0, 0));
    assert_eq!((rc & write, uc & write, ud & write), (write, write, 0));
    assert_eq!((rc & send, uc & send, ud & send), (send, send, send));
    // Windows: binds and local invalidates on RC and UC, SEND with invalidate on RC alone.
    assert_eq!((rc & local, uc & local, ud & local), (local, local, 0));
    assert_eq!(
        (rc & send_inv, uc & send_inv, ud & send_inv),
        (send_inv, 0, 0)
    );
    assert_eq!(send_ops(ibv_qp_type_IBV_QPT_XRC_SEND), None);
    let mut e = sys::ibv_qp_ex::default();
    set_functions(&mut e, send);
    assert!(e.wr_send.is_some() && e.wr_rdma_write.is_none() && e.wr_complete.is_some());
}

#[test]
fn atomic_write_and_flush_stage_their_segments() {
    let mut a = qp(cap(8, 2, 64, 0, 0), false, RTS, 7);
    let x = ex(&mut a);
    let value = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let (raddr, rkey) = (0x1122_3344_5566_7788, 0xaabb_ccdd);
    // SAFETY: the test's live extended QP with every function set; `value` is 8 bytes.
    unsafe {
        let f = &*x;
        f.wr_start.expect("wr_start")(x);
        set_wr(x, 1, SIGNALED | sys::ibv_send_flags_IBV_SEND_FENCE);
        f.wr_atomic_write.expect("atomic_write")(x, rkey, raddr, value.as_ptr().cast());
        set_wr(x, 2, 0);
        let (g, mr) = (ordma_hw::FLUSH_GLOBAL, ordma_hw::FLUSH_MR);
        f.wr_flush.expect("flush")(x, rkey, raddr, 1 << 40, g, mr);
        f.wr_flush.expect("flush")(x, rkey, raddr, 4096, g, ordma_hw::FLUSH_RANGE);
    }
    assert_eq!(finish(&a), Ok(3));
    let w = slot(&a.sq, 0);
    let hdr = SendWqe::decode(&w).expect("a header");
    assert_eq!(
        (
            hdr.opcode,
            hdr.flags,
            hdr.num_sge,
            hdr.remote_addr,
            hdr.rkey
        ),
        (
            ordma_hw::WR_ATOMIC_WRITE,
            ordma_hw::WQE_FLAG_SIGNALED | ordma_hw::WQE_FLAG_FENCE,
            0,
            raddr,
            rkey
        )
    );
    // The bytes as they were in memory.
    assert_eq!(w[32..40], value);
    assert_eq!(w[40..48], [0; 8]);
    let seg = |i| FlushSeg::decode_from(&slot(&a.sq, i)).expect("a flush segment");
    assert_eq!(
        SendWqe::decode(&slot(&a.sq, 1)).map(|h| h.opcode),
        Some(WR_FLUSH)
    );
    // The whole MR's length does not matter (past 32 bits: kept at the most).
    assert_eq!(
        seg(1),
        FlushSeg {
            length: u32::MAX,
            placement: 1,
            level: 1
        }
    );
    assert_eq!(
        seg(2),
        FlushSeg {
            length: 4096,
            placement: 1,
            level: 0
        }
    );
    // Refused, nothing posted: a range past 32 bits, no or an unknown placement, an
    // unknown level, an SGE after either, inline data, a null value.
    let head = lock(&a.sq).head();
    for bad in 0..7 {
        // SAFETY: as above.
        unsafe {
            let f = &*x;
            f.wr_start.expect("wr_start")(x);
            let flush = f.wr_flush.expect("flush");
            match bad {
                0 => flush(x, rkey, raddr, 1 << 32, 1, 0),
                1 => flush(x, rkey, raddr, 8, 0, 0),
                2 => flush(x, rkey, raddr, 8, 4, 0),
                3 => flush(x, rkey, raddr, 8, 1, 2),
                4 | 5 => {
                    f.wr_atomic_write.expect("aw")(x, rkey, raddr, value.as_ptr().cast());
                    if bad == 4 {
                        f.wr_set_sge.expect("sge")(x, 1, 0x1000, 8);
                    } else {
                        f.wr_set_inline_data.expect("inline")(
                            x,
                            value.as_ptr().cast_mut().cast(),
                            8,
                        );
                    }
                }
                _ => f.wr_atomic_write.expect("aw")(x, rkey, raddr, ptr::null()),
            }
        }
        assert_eq!(finish(&a), Err(libc::EINVAL), "case {bad}");
        assert_eq!(lock(&a.sq).head(), head, "case {bad}");
    }
}
