//! Memory windows' tests: the WQEs of a bind, a local invalidate and a send with
//! invalidate, byte for byte, through `ibv_post_send`, `ibv_bind_mw` and `ibv_wr_*`; every
//! refusal with its errno; device capabilities; and the completions they make.
use super::*;
use crate::cq::{self, new_cq};
use crate::wq::lock;
use crate::wq::testing::{
    cap, chain_send, nic_write, post_send, qp, send_wr, sge, slot, RecordingDb,
};
use core::ptr::NonNull;
use ordma_hw::{
    Cqe, SendWqe, CQE_FLAG_IMM, CQE_FLAG_INV, CQE_FLAG_RECV, DB_SQ, WC_BIND_MW, WC_LOCAL_INV,
    WC_LOC_PROT_ERR, WC_RECV, WQE_FLAG_FENCE, WQE_FLAG_SIGNALED, WQE_FLAG_SOLICITED, WR_BIND_MW,
    WR_LOCAL_INV, WR_SEND_WITH_INV,
};

const RTS: u32 = sys::ibv_qp_state_IBV_QPS_RTS;
const SIGNALED: u32 = sys::ibv_send_flags_IBV_SEND_SIGNALED;
const INLINE: u32 = sys::ibv_send_flags_IBV_SEND_INLINE;
const REMOTE_READ: u32 = sys::ibv_access_flags_IBV_ACCESS_REMOTE_READ;
const REMOTE_WRITE: u32 = sys::ibv_access_flags_IBV_ACCESS_REMOTE_WRITE;
const REMOTE_ATOMIC: u32 = sys::ibv_access_flags_IBV_ACCESS_REMOTE_ATOMIC;
const LOCAL_WRITE: u32 = sys::ibv_access_flags_IBV_ACCESS_LOCAL_WRITE;

/// A QP of type `t` (RC, UC, UD) in RTS, QPN `qpn`, 4 WQEs of 2 SGEs.
fn typed_qp(t: sys::ibv_qp_type, qpn: u32) -> Box<Qp> {
    let mut q = crate::qp::new_qp(&sys::ibv_qp_init_attr {
        send_cq: NonNull::dangling().as_ptr(),
        recv_cq: NonNull::dangling().as_ptr(),
        cap: cap(4, 2, 0, 0, 0),
        qp_type: t,
        ..Default::default()
    })
    .expect("a QP");
    q.qpn = qpn;
    crate::qp::set_state(&q, RTS);
    q
}

/// A PD pointer the test's objects name (never dereferenced).
fn pd(n: usize) -> *mut sys::ibv_pd {
    ptr::without_provenance_mut(n * 64)
}

fn mr(lkey: u32, pd: *mut sys::ibv_pd) -> sys::ibv_mr {
    sys::ibv_mr {
        pd,
        lkey,
        rkey: lkey,
        ..Default::default()
    }
}

fn window(rkey: u32, t: sys::ibv_mw_type, pd: *mut sys::ibv_pd) -> sys::ibv_mw {
    sys::ibv_mw {
        pd,
        rkey,
        type_: t,
        ..Default::default()
    }
}

fn info(mr: *mut sys::ibv_mr, addr: u64, length: u64, access: u32) -> sys::ibv_mw_bind_info {
    sys::ibv_mw_bind_info {
        mr,
        addr,
        length,
        mw_access_flags: access,
    }
}

/// An `IBV_WR_BIND_MW` WR: `mw` bound to `info` as `rkey`.
fn bind_wr(
    wr_id: u64,
    flags: u32,
    mw: *mut sys::ibv_mw,
    rkey: u32,
    info: sys::ibv_mw_bind_info,
) -> sys::ibv_send_wr {
    let mut w = send_wr(wr_id, sys::ibv_wr_opcode_IBV_WR_BIND_MW, flags, &mut []);
    w.__bindgen_anon_2.bind_mw = sys::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
        mw,
        rkey,
        bind_info: info,
    };
    w
}

/// A WR of `op` that invalidates `rkey`, with `sges`.
fn inv_wr(
    wr_id: u64,
    op: sys::ibv_wr_opcode,
    flags: u32,
    rkey: u32,
    sges: &mut [sys::ibv_sge],
) -> sys::ibv_send_wr {
    let mut w = send_wr(wr_id, op, flags, sges);
    w.__bindgen_anon_1.invalidate_rkey = rkey;
    w
}

/// The bytes of slot `i` from 32 on: what follows the header.
fn tail(q: &Qp, i: usize) -> Vec<u8> {
    slot(&q.sq, i)[32..].to_vec()
}

#[test]
fn window_access_types_and_keys() {
    assert_eq!(window_access(0), Ok(0));
    assert_eq!(window_access(REMOTE_WRITE), Ok(ACCESS_REMOTE_WRITE));
    assert_eq!(window_access(REMOTE_READ), Ok(ACCESS_REMOTE_READ));
    assert_eq!(window_access(REMOTE_ATOMIC), Ok(ACCESS_REMOTE_ATOMIC));
    // Local write means nothing to a window: taken (rdma-core's tests ask for it), dropped.
    assert_eq!(
        window_access(LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC),
        Ok(ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC)
    );
    for bad in [
        sys::ibv_access_flags_IBV_ACCESS_ZERO_BASED,
        sys::ibv_access_flags_IBV_ACCESS_MW_BIND,
        sys::ibv_access_flags_IBV_ACCESS_ON_DEMAND,
        REMOTE_WRITE | (1 << 31),
    ] {
        assert_eq!(window_access(bad), Err(libc::EINVAL), "{bad:#x}");
    }
    assert_eq!(inc_rkey(0x8000_01ff), 0x8000_0100);
    assert_eq!(inc_rkey(0x8000_0312), 0x8000_0313);
    assert_eq!(inc_rkey(u32::MAX), 0xffff_ff00);
    assert_eq!(check_type(sys::ibv_mw_type_IBV_MW_TYPE_1), Ok(()));
    assert_eq!(check_type(sys::ibv_mw_type_IBV_MW_TYPE_2), Ok(()));
    assert_eq!(check_type(0), Err(libc::EINVAL));
    assert_eq!(check_type(3), Err(libc::EINVAL));
}

#[test]
fn post_send_writes_bind_local_inv_and_send_inv_wqes() {
    let q = qp(cap(8, 2, 0, 0, 0), false, RTS, 7);
    let db = RecordingDb::default();
    let mut m = mr(0x0000_1234, pd(1));
    let mut w = window(0x8000_0305, sys::ibv_mw_type_IBV_MW_TYPE_2, pd(1));
    let access = REMOTE_WRITE | REMOTE_READ | LOCAL_WRITE;
    let mut s = [sge(0x5000, 24, 0x0707)];
    let mut wrs = [
        bind_wr(
            1,
            SIGNALED | sys::ibv_send_flags_IBV_SEND_FENCE,
            &mut w,
            0x8000_0306,
            info(&mut m, 0x1000_2000, 0x3000, access),
        ),
        inv_wr(
            2,
            sys::ibv_wr_opcode_IBV_WR_LOCAL_INV,
            SIGNALED,
            0x8000_0306,
            &mut [],
        ),
        inv_wr(
            3,
            sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV,
            sys::ibv_send_flags_IBV_SEND_SOLICITED,
            0x8000_0a0b,
            &mut s,
        ),
    ];
    assert_eq!(post_send(&q, &db, chain_send(&mut wrs)), Ok(()));
    assert_eq!(db.take(), vec![(DB_SQ, (7 << 16) | 3)], "one doorbell");
    // The bind: its header, then the bind segment at 32, by hand.
    let mut want = vec![0u8; 64];
    want[0] = WR_BIND_MW;
    want[1] = WQE_FLAG_SIGNALED | WQE_FLAG_FENCE;
    want[32..36].copy_from_slice(&0x8000_0305u32.to_le_bytes());
    want[36..40].copy_from_slice(&0x8000_0306u32.to_le_bytes());
    want[40..44].copy_from_slice(&0x1234u32.to_le_bytes());
    want[44..48].copy_from_slice(&(ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ).to_le_bytes());
    want[48..56].copy_from_slice(&0x1000_2000u64.to_le_bytes());
    want[56..64].copy_from_slice(&0x3000u64.to_le_bytes());
    assert_eq!(slot(&q.sq, 0), want);
    // And as the NIC's model decodes it.
    assert_eq!(
        BindSeg::decode_from(&slot(&q.sq, 0)),
        Some(BindSeg {
            mw_rkey: 0x8000_0305,
            new_rkey: 0x8000_0306,
            mr_lkey: 0x1234,
            access: ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ,
            addr: 0x1000_2000,
            length: 0x3000,
        })
    );
    // ibv_post_send leaves the window's rkey to the application.
    assert_eq!(w.rkey, 0x8000_0305);
    // The local invalidate: the rkey in `imm`, a number (not bytes), nothing else.
    let mut want = vec![0u8; 64];
    want[0] = WR_LOCAL_INV;
    want[1] = WQE_FLAG_SIGNALED;
    want[4..8].copy_from_slice(&0x8000_0306u32.to_le_bytes());
    assert_eq!(slot(&q.sq, 1), want);
    // The send with invalidate: a SEND's WQE (no remote address), the rkey in `imm`.
    let b = slot(&q.sq, 2);
    let hdr = SendWqe::decode(&b).expect("a valid header");
    assert_eq!(
        hdr,
        SendWqe {
            opcode: WR_SEND_WITH_INV,
            flags: WQE_FLAG_SOLICITED,
            num_sge: 1,
            imm: 0x8000_0a0b,
            inline_len: 0,
            remote_addr: 0,
            rkey: 0,
        }
    );
    assert_eq!(b[4..8], 0x8000_0a0bu32.to_le_bytes());
    assert_eq!(b[32..40], 0x5000u64.to_le_bytes());
    assert_eq!(b[40..48], [24, 0, 0, 0, 7, 7, 0, 0]);
    assert_eq!(lock(&q.sq).retire_through(2), Some(3));
    // Inline data on a send with invalidate, as on a SEND.
    let data = *b"windows!";
    let mut inl = [sge(data.as_ptr() as u64, 8, 0)];
    let mut wr = [inv_wr(
        4,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV,
        INLINE,
        0x11,
        &mut inl,
    )];
    assert_eq!(post_send(&q, &db, chain_send(&mut wr)), Ok(()));
    let b = slot(&q.sq, 3);
    assert_eq!(
        (b[0], b[4..8].to_vec()),
        (WR_SEND_WITH_INV, vec![0x11, 0, 0, 0])
    );
    assert_eq!(b[32..40], data);
}

#[test]
fn post_send_refuses_malformed_window_wrs_and_wrong_qp_types() {
    let mut m = mr(0x42, pd(1));
    let mut w = window(0x8000_0100, sys::ibv_mw_type_IBV_MW_TYPE_2, pd(1));
    let ok = info(&mut m, 0x1000, 0x100, REMOTE_WRITE);
    let zero_based = sys::ibv_access_flags_IBV_ACCESS_ZERO_BASED;
    let mut one = [sge(0x1000, 4, 1)];
    let local_inv = sys::ibv_wr_opcode_IBV_WR_LOCAL_INV;
    let send_inv = sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV;
    let rc = typed_qp(sys::ibv_qp_type_IBV_QPT_RC, 3);
    let mut cases = vec![
        // SGEs or inline data on a bind or a local invalidate.
        {
            let mut b = bind_wr(1, 0, &mut w, 0x8000_0101, ok);
            b.sg_list = one.as_mut_ptr();
            b.num_sge = 1;
            b
        },
        bind_wr(1, INLINE, &mut w, 0x8000_0101, ok),
        inv_wr(1, local_inv, 0, 0x8000_0101, &mut one),
        inv_wr(1, local_inv, INLINE, 0x8000_0101, &mut []),
        // No window; a range without an MR; zero-based or unknown access.
        bind_wr(1, 0, ptr::null_mut(), 0x8000_0101, ok),
        bind_wr(1, 0, &mut w, 0x8000_0101, info(ptr::null_mut(), 0, 8, 0)),
        bind_wr(1, 0, &mut w, 0x8000_0101, info(&mut m, 0, 8, zero_based)),
        bind_wr(1, 0, &mut w, 0x8000_0101, info(&mut m, 0, 8, 1 << 30)),
        // A send flag the NIC does not have.
        bind_wr(
            1,
            sys::ibv_send_flags_IBV_SEND_IP_CSUM,
            &mut w,
            0x8000_0101,
            ok,
        ),
    ];
    let db = RecordingDb::default();
    for (i, bad) in cases.iter_mut().enumerate() {
        let p: *mut sys::ibv_send_wr = bad;
        assert_eq!(post_send(&rc, &db, p), Err((libc::EINVAL, p)), "case {i}");
    }
    assert_eq!((lock(&rc.sq).head(), db.take()), (0, vec![]));
    // UC: binds and local invalidates, no SEND with invalidate (RC's alone); UD: none.
    let uc = typed_qp(sys::ibv_qp_type_IBV_QPT_UC, 4);
    for (q, op, want) in [
        (&uc, sys::ibv_wr_opcode_IBV_WR_BIND_MW, Ok(())),
        (&uc, local_inv, Ok(())),
        (&uc, send_inv, Err(libc::EINVAL)),
    ] {
        let mut wr = if op == sys::ibv_wr_opcode_IBV_WR_BIND_MW {
            bind_wr(1, 0, &mut w, 0x8000_0101, ok)
        } else {
            inv_wr(1, op, 0, 0x8000_0101, &mut [])
        };
        let p: *mut sys::ibv_send_wr = &mut wr;
        assert_eq!(post_send(q, &db, p).map_err(|e| e.0), want, "UC op {op}");
    }
    let ud = typed_qp(sys::ibv_qp_type_IBV_QPT_UD, 5);
    let mut wrs = [
        bind_wr(1, 0, &mut w, 0x8000_0101, ok),
        inv_wr(1, local_inv, 0, 0x8000_0101, &mut []),
        inv_wr(1, send_inv, 0, 0x8000_0101, &mut one),
    ];
    for (i, wr) in wrs.iter_mut().enumerate() {
        let p: *mut sys::ibv_send_wr = wr;
        assert_eq!(
            post_send(&ud, &db, p),
            Err((libc::EINVAL, p)),
            "UD case {i}"
        );
    }
    assert_eq!(lock(&ud.sq).head(), 0);
}

/// `ibv_bind_mw` on `q` without the doorbell page.
fn bind1(
    q: &Qp,
    db: &RecordingDb,
    mw: &mut sys::ibv_mw,
    wr_id: u64,
    flags: u32,
    info: sys::ibv_mw_bind_info,
) -> Result<(), c_int> {
    let bind = sys::ibv_mw_bind {
        wr_id,
        send_flags: flags,
        bind_info: info,
    };
    // SAFETY: the MR is null or the test's.
    unsafe { bind_type1(q, db, mw, &bind) }
}

#[test]
fn ibv_bind_mw_binds_type_1_with_the_next_key_and_unbinds() {
    let q = qp(cap(2, 1, 0, 0, 0), false, RTS, 9);
    let db = RecordingDb::default();
    let mut m = mr(0x77, pd(1));
    let mut w = window(0x8000_04ff, sys::ibv_mw_type_IBV_MW_TYPE_1, pd(1));
    let i = info(&mut m, 0x2000, 0x800, REMOTE_READ | REMOTE_ATOMIC);
    assert_eq!(bind1(&q, &db, &mut w, 50, SIGNALED, i), Ok(()));
    assert_eq!(w.rkey, 0x8000_0400, "the next key, its byte wrapped");
    assert_eq!(db.take(), vec![(DB_SQ, (9 << 16) | 1)]);
    let b = slot(&q.sq, 0);
    assert_eq!((b[0], b[1], b[2]), (WR_BIND_MW, WQE_FLAG_SIGNALED, 0));
    assert_eq!(
        BindSeg::decode_from(&b),
        Some(BindSeg {
            mw_rkey: 0x8000_04ff,
            new_rkey: 0x8000_0400,
            mr_lkey: 0x77,
            access: ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC,
            addr: 0x2000,
            length: 0x800,
        })
    );
    // A bind of length 0 without an MR unbinds: the key moves on again.
    let none = info(ptr::null_mut(), 0, 0, 0);
    assert_eq!(bind1(&q, &db, &mut w, 51, 0, none), Ok(()));
    assert_eq!(w.rkey, 0x8000_0401);
    let unbind = BindSeg {
        mw_rkey: 0x8000_0400,
        new_rkey: 0x8000_0401,
        ..Default::default()
    };
    let mut want = vec![0u8; 32];
    want[0..4].copy_from_slice(&0x8000_0400u32.to_le_bytes());
    want[4..8].copy_from_slice(&0x8000_0401u32.to_le_bytes());
    assert_eq!(tail(&q, 1), want, "no MR, no access, no range");
    assert_eq!(BindSeg::decode_from(&slot(&q.sq, 1)), Some(unbind));
    // The wr_ids are the binds'.
    assert_eq!(lock(&q.sq).retire_through(0), Some(50));
    assert_eq!(lock(&q.sq).retire_through(1), Some(51));
}

#[test]
fn ibv_bind_mw_refusals_leave_the_window_and_the_queue_alone() {
    let q = qp(cap(1, 1, 0, 0, 0), false, RTS, 9);
    let db = RecordingDb::default();
    let mut m = mr(0x77, pd(1));
    let mut other = mr(0x78, pd(2));
    let ok = info(&mut m, 0x2000, 0x800, REMOTE_WRITE);
    let t1 = sys::ibv_mw_type_IBV_MW_TYPE_1;
    let zero_based = sys::ibv_access_flags_IBV_ACCESS_ZERO_BASED;
    let cases: [(sys::ibv_mw_type, u32, sys::ibv_mw_bind_info, c_int); 6] = [
        (sys::ibv_mw_type_IBV_MW_TYPE_2, 0, ok, libc::EINVAL),
        (
            t1,
            0,
            info(&mut other, 0x2000, 8, REMOTE_WRITE),
            libc::EPERM,
        ),
        (t1, 0, info(ptr::null_mut(), 0x2000, 0, 0), libc::EINVAL),
        (t1, 0, info(&mut m, 0x2000, 8, zero_based), libc::EINVAL),
        (t1, INLINE, ok, libc::EINVAL),
        (t1, sys::ibv_send_flags_IBV_SEND_IP_CSUM, ok, libc::EINVAL),
    ];
    for (i, (t, flags, inf, e)) in cases.into_iter().enumerate() {
        let mut w = window(0x8000_0210, t, pd(1));
        assert_eq!(bind1(&q, &db, &mut w, 1, flags, inf), Err(e), "case {i}");
        assert_eq!(w.rkey, 0x8000_0210, "case {i}");
    }
    assert_eq!((lock(&q.sq).head(), db.take()), (0, vec![]));
    let mut w = window(0x8000_0210, t1, pd(1));
    // Not in RTS; then a full queue (1 WQE); then an open ibv_wr_* batch.
    crate::qp::set_state(&q, sys::ibv_qp_state_IBV_QPS_RTR);
    assert_eq!(bind1(&q, &db, &mut w, 1, 0, ok), Err(libc::EINVAL));
    crate::qp::set_state(&q, RTS);
    assert_eq!(bind1(&q, &db, &mut w, 1, 0, ok), Ok(()));
    assert_eq!(bind1(&q, &db, &mut w, 2, 0, ok), Err(libc::ENOMEM));
    assert_eq!(w.rkey, 0x8000_0211);
    lock(&q.sq).retire_through(0);
    crate::wr::start(&mut lock(&q.sq));
    assert_eq!(bind1(&q, &db, &mut w, 2, 0, ok), Err(libc::EBUSY));
    // A UD QP does not bind.
    let ud = typed_qp(sys::ibv_qp_type_IBV_QPT_UD, 5);
    assert_eq!(bind1(&ud, &db, &mut w, 1, 0, ok), Err(libc::EINVAL));
    assert_eq!(w.rkey, 0x8000_0211);
}

/// The `ibv_qp_ex` of a test QP, with every operation set.
fn ex(q: &mut Qp) -> *mut sys::ibv_qp_ex {
    crate::wr::set_functions(&mut q.ibv.qp_ex, u64::MAX);
    ptr::addr_of_mut!(q.ibv.qp_ex)
}

fn finish(q: &Qp) -> Result<u32, c_int> {
    crate::wr::complete(q, &mut lock(&q.sq))
}

fn set_wr(x: *mut sys::ibv_qp_ex, wr_id: u64, flags: u32) {
    // SAFETY: the test's live QP.
    unsafe {
        (*x).wr_id = wr_id;
        (*x).wr_flags = flags;
    }
}

#[test]
fn ibv_wr_ops_stage_what_post_send_writes() {
    let mut a = qp(cap(8, 2, 0, 0, 0), false, RTS, 7);
    let b = qp(cap(8, 2, 0, 0, 0), false, RTS, 8);
    let x = ex(&mut a);
    let mut m = mr(0x1234, pd(1));
    let mut w = window(0x8000_0305, sys::ibv_mw_type_IBV_MW_TYPE_2, pd(1));
    let i = info(&mut m, 0x1000_2000, 0x3000, REMOTE_WRITE);
    let mut s = [sge(0x5000, 24, 0x0707)];
    let mut wrs = [
        bind_wr(1, SIGNALED, &mut w, 0x8000_0306, i),
        inv_wr(
            2,
            sys::ibv_wr_opcode_IBV_WR_LOCAL_INV,
            0,
            0x8000_0306,
            &mut [],
        ),
        inv_wr(
            3,
            sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV,
            SIGNALED,
            0x8000_0a0b,
            &mut s,
        ),
    ];
    assert_eq!(
        post_send(&b, &RecordingDb::default(), chain_send(&mut wrs)),
        Ok(())
    );
    // SAFETY: the test's live extended QP with every function set.
    unsafe {
        let f = &*x;
        f.wr_start.expect("wr_start")(x);
        set_wr(x, 1, SIGNALED);
        f.wr_bind_mw.expect("wr_bind_mw")(x, &mut w, 0x8000_0306, &i);
        set_wr(x, 2, 0);
        f.wr_local_inv.expect("wr_local_inv")(x, 0x8000_0306);
        set_wr(x, 3, SIGNALED);
        f.wr_send_inv.expect("wr_send_inv")(x, 0x8000_0a0b);
        f.wr_set_sge.expect("wr_set_sge")(x, 0x0707, 0x5000, 24);
    }
    assert_eq!(finish(&a), Ok(3));
    for k in 0..3 {
        assert_eq!(slot(&a.sq, k), slot(&b.sq, k), "WQE {k}");
    }
    assert_eq!(w.rkey, 0x8000_0305, "the application keeps the new key");
    // Refused, nothing posted: a null window or bind info, an SGE or inline data after a
    // bind or a local invalidate, a zero-based window.
    let bytes = [0u8; 4];
    let zero_based = info(&mut m, 0, 8, sys::ibv_access_flags_IBV_ACCESS_ZERO_BASED);
    for bad in 0..6 {
        // SAFETY: as above.
        unsafe {
            let f = &*x;
            f.wr_start.expect("wr_start")(x);
            let bind = f.wr_bind_mw.expect("wr_bind_mw");
            match bad {
                0 => bind(x, ptr::null_mut(), 1, &i),
                1 => bind(x, &mut w, 1, ptr::null()),
                2 => bind(x, &mut w, 1, &zero_based),
                3 => {
                    bind(x, &mut w, 1, &i);
                    f.wr_set_sge.expect("sge")(x, 1, 0x1000, 8);
                }
                4 => {
                    f.wr_local_inv.expect("local_inv")(x, 1);
                    f.wr_set_sge.expect("sge")(x, 1, 0x1000, 8);
                }
                _ => {
                    f.wr_local_inv.expect("local_inv")(x, 1);
                    f.wr_set_inline_data.expect("inline")(x, bytes.as_ptr().cast_mut().cast(), 4);
                }
            }
        }
        assert_eq!(finish(&a), Err(libc::EINVAL), "case {bad}");
        assert_eq!(lock(&a.sq).head(), 3, "case {bad}");
    }
    // On a UD QP, none of the three (whatever `send_ops` offers it).
    let mut ud = typed_qp(sys::ibv_qp_type_IBV_QPT_UD, 5);
    let y = ex(&mut ud);
    for bad in 0..3 {
        // SAFETY: as above.
        unsafe {
            let f = &*y;
            f.wr_start.expect("wr_start")(y);
            match bad {
                0 => f.wr_bind_mw.expect("bind")(y, &mut w, 1, &i),
                1 => f.wr_local_inv.expect("local_inv")(y, 1),
                _ => f.wr_send_inv.expect("send_inv")(y, 1),
            }
        }
        assert_eq!(finish(&ud), Err(libc::EINVAL), "UD case {bad}");
    }
}

#[test]
fn extended_qps_get_window_operations_only_from_a_device_with_type_2b_windows() {
    use crate::qp::check_caps;
    use sys::*;
    let window_ops = [
        ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW,
        ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV,
        ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV,
    ];
    let mw = ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_MEM_WINDOW;
    let t2b = ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B;
    let send = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND);
    for op in window_ops.map(u64::from) {
        for (caps, want) in [
            (0, Err(libc::EOPNOTSUPP)),
            (mw, Err(libc::EOPNOTSUPP)),
            (t2b, Err(libc::EOPNOTSUPP)),
            (mw | t2b, Ok(())),
        ] {
            assert_eq!(
                check_caps(op | send, caps),
                want,
                "op {op:#x} caps {caps:#x}"
            );
        }
    }
    // What needs no capability, and IBTA 1.5's operations, as before.
    assert_eq!(check_caps(send, 0), Ok(()));
    let flush = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_FLUSH);
    assert_eq!(check_caps(flush, mw | t2b), Err(libc::EOPNOTSUPP));
    assert_eq!(
        check_caps(
            flush,
            ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_FLUSH_GLOBAL
        ),
        Ok(())
    );
    // The functions are set for the operations asked, and only those.
    let mut e = ibv_qp_ex::default();
    crate::wr::set_functions(&mut e, u64::from(window_ops[0]));
    assert!(e.wr_bind_mw.is_some() && e.wr_local_inv.is_none() && e.wr_send_inv.is_none());
}

#[test]
fn completions_of_binds_invalidations_and_sends_with_invalidate() {
    let mut c = new_cq(8).expect("a CQ");
    c.cqn = 5;
    let mut q = qp(cap(8, 1, 0, 4, 1), false, RTS, 12);
    q.ibv.qp_ex.qp_base.send_cq = ptr::addr_of_mut!(c.ibv).cast();
    q.ibv.qp_ex.qp_base.recv_cq = ptr::addr_of_mut!(c.ibv).cast();
    let qps = crate::context::QpTable::new();
    assert_eq!(qps.insert(12, ptr::addr_of!(*q).cast_mut()), Ok(()));
    let mut w = window(0x8000_0100, sys::ibv_mw_type_IBV_MW_TYPE_2, pd(1));
    let mut wrs = [
        bind_wr(
            1,
            SIGNALED,
            &mut w,
            0x8000_0101,
            info(ptr::null_mut(), 0, 0, 0),
        ),
        inv_wr(
            2,
            sys::ibv_wr_opcode_IBV_WR_LOCAL_INV,
            SIGNALED,
            0x8000_0101,
            &mut [],
        ),
        inv_wr(
            3,
            sys::ibv_wr_opcode_IBV_WR_LOCAL_INV,
            SIGNALED,
            0x8000_0101,
            &mut [],
        ),
    ];
    assert_eq!(
        post_send(&q, &RecordingDb::default(), chain_send(&mut wrs)),
        Ok(())
    );
    let mut s = [sge(0x20, 64, 2)];
    let mut rwrs: Vec<_> = (30..34)
        .map(|wr_id| sys::ibv_recv_wr {
            wr_id,
            sg_list: s.as_mut_ptr(),
            num_sge: 1,
            ..Default::default()
        })
        .collect();
    let p = crate::wq::testing::chain_recv(&mut rwrs);
    assert_eq!(
        crate::wq::testing::post_recv(&q, &RecordingDb::default(), p),
        Ok(())
    );
    let send = |idx, opcode, status| Cqe {
        wqe_index: idx,
        qpn: 12,
        opcode,
        status,
        ..Default::default()
    };
    let recv = |idx, flags, imm| Cqe {
        wqe_index: idx,
        qpn: 12,
        opcode: WC_RECV,
        flags: CQE_FLAG_RECV | flags,
        byte_len: 16,
        imm,
        ..Default::default()
    };
    nic_write(&c, 0, &send(0, WC_BIND_MW, 0));
    nic_write(&c, 1, &send(1, WC_LOCAL_INV, 0));
    nic_write(&c, 2, &recv(0, CQE_FLAG_INV, 0x8000_0a0b));
    nic_write(
        &c,
        3,
        &recv(1, CQE_FLAG_IMM, u32::from_le_bytes([1, 2, 3, 4])),
    );
    // A CQE that says both (the NIC writes none) is an invalidation.
    nic_write(&c, 4, &recv(2, CQE_FLAG_INV | CQE_FLAG_IMM, 0x8000_0c0d));
    nic_write(&c, 5, &send(2, WC_LOCAL_INV, WC_LOC_PROT_ERR));
    let mut wc = vec![core::mem::MaybeUninit::<sys::ibv_wc>::uninit(); 5];
    assert_eq!(cq::poll(&c, &qps, &mut wc), 5);
    let wc: Vec<sys::ibv_wc> = wc
        .into_iter()
        .take(5)
        // SAFETY: `poll` wrote the first 5.
        .map(|w| unsafe { w.assume_init() })
        .collect();
    let rkey = |w: &sys::ibv_wc| {
        // SAFETY: a u32 either way.
        unsafe { w.__bindgen_anon_1.invalidated_rkey }
    };
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].wc_flags),
        (1, 0, sys::ibv_wc_opcode_IBV_WC_BIND_MW, 0)
    );
    assert_eq!(
        (wc[1].wr_id, wc[1].status, wc[1].opcode, wc[1].wc_flags),
        (2, 0, sys::ibv_wc_opcode_IBV_WC_LOCAL_INV, 0)
    );
    assert_eq!(
        (wc[2].wr_id, wc[2].opcode, wc[2].byte_len, wc[2].wc_flags),
        (
            30,
            sys::ibv_wc_opcode_IBV_WC_RECV,
            16,
            sys::ibv_wc_flags_IBV_WC_WITH_INV
        )
    );
    // The rkey as a number, not the bytes of immediate data.
    assert_eq!(rkey(&wc[2]), 0x8000_0a0b);
    assert_eq!(wc[3].wc_flags, sys::ibv_wc_flags_IBV_WC_WITH_IMM);
    // SAFETY: a u32 either way.
    let imm = unsafe { wc[3].__bindgen_anon_1.imm_data };
    assert_eq!(imm.to_ne_bytes(), [1, 2, 3, 4]);
    assert_eq!(
        (wc[4].wc_flags, rkey(&wc[4])),
        (sys::ibv_wc_flags_IBV_WC_WITH_INV, 0x8000_0c0d)
    );
    // The extended polling API makes the same completions (`ibv_wc_read_opcode`,
    // `ibv_wc_read_wc_flags` and `ibv_wc_read_invalidated_rkey` read them): a failed local
    // invalidate, a SEND with invalidate.
    nic_write(&c, 6, &recv(3, CQE_FLAG_INV, 0x8000_0e0f));
    let mut st = c.state.lock();
    assert_eq!(crate::cq_ex::advance(&c, &qps, &mut st), Ok(()));
    let cur = st.current;
    assert_eq!(
        (cur.wr_id, cur.status, cur.opcode),
        (
            3,
            u32::from(WC_LOC_PROT_ERR),
            sys::ibv_wc_opcode_IBV_WC_LOCAL_INV
        )
    );
    assert_eq!(crate::cq_ex::advance(&c, &qps, &mut st), Ok(()));
    let cur = st.current;
    assert_eq!(
        (cur.wr_id, cur.wc_flags, rkey(&cur)),
        (33, sys::ibv_wc_flags_IBV_WC_WITH_INV, 0x8000_0e0f)
    );
    drop(st);
    assert_eq!(lock(&q.sq).outstanding(), 0);
}
