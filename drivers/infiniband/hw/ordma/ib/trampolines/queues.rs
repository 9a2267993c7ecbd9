// SPDX-License-Identifier: GPL-2.0

//! The trampolines of CQs and QPs, and the fast-path verbs a driver without kernel queues
//! answers `EOPNOTSUPP`.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::{caller, data, init_in_place, ret, srq::srq_data, ucontext_data};
use crate::ib::{
    bindings as b,
    cq::{CqInit, CqSize, IbCq},
    device,
    driver::{CqObject, Driver, QpObject, UserModify},
    pd::IbPd,
    qp::{IbQp, QpAttr, QpAttrMask, QpInit},
    udata::Udata,
    umem::UserPages,
};

/// The driver's part of CQ `cq`.
///
/// # Safety
///
/// `cq` is null or a live CQ of ours (one `create_cq` set up), for `'a`.
unsafe fn cq_data<'a, T: Driver>(cq: *mut b::ib_cq) -> Option<&'a T::Cq> {
    if cq.is_null() {
        return None;
    }
    // SAFETY: a live CQ of ours (caller), initialised by `create_cq`.
    Some(unsafe { (*cq.cast::<IbCq<T>>()).data.assume_init_ref() })
}

/// # Safety
///
/// See `query_device`; `cq` is a zeroed `IbCq<T>` with ib_core's fields set, `attrs` the
/// verb's bundle (null for a kernel caller).
pub(super) unsafe extern "C" fn create_cq<T: Driver>(
    cq: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> i32 {
    let Some(cq_nn) = NonNull::new(cq) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `attrs` is null or the verb's bundle, valid for the call.
    let (udata, uctx) = unsafe {
        (
            b::rust_ib_helper_attrs_driver_udata(attrs),
            b::rust_ib_helper_attrs_ucontext(attrs),
        )
    };
    // SAFETY: ib_core set `cq`'s device to one of `T`'s registered devices and passes a
    // valid `attr`; the bundle's udata and context are valid for the call, the context one
    // of ours that `alloc_ucontext` set up.
    let (ib, u, uctx, init) = unsafe {
        (
            NonNull::new((*cq).device),
            Udata::from_raw(udata),
            ucontext_data::<T>(uctx),
            CqInit {
                cqe: (*attr).cqe,
                flags: (*attr).flags,
            },
        )
    };
    let Some(ib) = ib else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process (for a user), and
    // `pages` does not outlive the call.
    let (d, events, pages) = unsafe {
        (
            data::<T>(ib.as_ptr()),
            device::events::<T>(ib.as_ptr()),
            UserPages::new(ib),
        )
    };
    let icq = cq.cast::<IbCq<T>>();
    let made = match caller::<T>(u.as_ref(), uctx, &pages) {
        // SAFETY: ib_core allocated `cq` at `size_ib_cq`, the size of an `IbCq<T>`, for
        // this verb; it frees it where it is.
        Ok(c) => unsafe { init_in_place(&raw mut (*icq).data, d.create_cq(c, &init)) },
        Err(e) => Err(e),
    };
    if let Err(e) = made {
        return e.to_errno();
    }
    // SAFETY: initialised just above.
    let v = unsafe { (*icq).data.assume_init_ref() };
    let num = v.num();
    let added = i32::try_from(v.cqe()).map_err(|_| EINVAL).and_then(|cqe| {
        // SAFETY: `cq` is ours until we return; ib_core reads `cqe` back for the caller.
        unsafe { (*cq).cqe = cqe };
        // SAFETY: the CQ is created, and `destroy_cq` removes it before dropping it.
        unsafe { events.add_cq(num, cq_nn) }
    });
    match added {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: initialised above, not yet known to anyone; ib_core frees the CQ
            // after a failed create.
            unsafe { (*icq).data.assume_init_drop() };
            e.to_errno()
        }
    }
}

/// # Safety
///
/// See `query_device`; `cq` is a live CQ of ours, `udata` the verb's (uverbs' resize is
/// the only caller).
pub(super) unsafe extern "C" fn resize_user_cq<T: Driver>(
    cq: *mut b::ib_cq,
    cqe: u32,
    udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: a live CQ of one of `T`'s devices, whose data `create_cq` initialised and
    // ib_core keeps until `destroy_cq`; `udata` is null or valid for the call.
    let (ib, v, u) = unsafe {
        (
            NonNull::new((*cq).device),
            cq_data::<T>(cq),
            Udata::from_raw(udata),
        )
    };
    let (Some(ib), Some(v), Some(u)) = (ib, v, u) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process, and `pages` does
    // not outlive the call.
    let (d, pages) = unsafe { (data::<T>(ib.as_ptr()), UserPages::new(ib)) };
    let user = UserModify {
        udata: &u,
        pages: &pages,
    };
    // SAFETY: `cq` is live for the call (it came through `NonNull::new` above as `ib`'s CQ).
    let size = unsafe { CqSize::new(NonNull::from(&mut *cq)) };
    ret(d.resize_cq(v, cqe, user, &size))
}

/// # Safety
///
/// See `query_device`; `cq` is one `create_cq` set up, destroyed once (ib_core checks
/// that no QP uses it).
pub(super) unsafe extern "C" fn destroy_cq<T: Driver>(
    cq: *mut b::ib_cq,
    _udata: *mut b::ib_udata,
) -> i32 {
    let icq = cq.cast::<IbCq<T>>();
    // SAFETY: a live CQ of one of `T`'s devices, whose data `create_cq` initialised; once
    // it is out of the event table no event reaches it, and ib_core destroys it once: this
    // is the last use of its data.
    unsafe {
        let num = (*icq).data.assume_init_ref().num();
        device::events::<T>((*cq).device).remove_cq(num);
        (*icq).data.assume_init_drop();
    }
    0
}

/// # Safety
///
/// See `query_device`; `qp` is a zeroed `IbQp<T>` with ib_core's fields set (device, PD),
/// `init` the creator's request with live CQs (and SRQ, if any) of ours, `udata` the
/// verb's (null for a kernel caller).
pub(super) unsafe extern "C" fn create_qp<T: Driver>(
    qp: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> i32 {
    let Some(qp_nn) = NonNull::new(qp) else {
        return EINVAL.to_errno();
    };
    // SAFETY: ib_core set `qp`'s device (one of `T`'s registered devices) and PD, and
    // passes a valid `init` whose CQs are live CQs of ours and whose SRQ is null or a live
    // SRQ of ours (it holds references on the PD, CQs and SRQ for the call); `udata` is
    // null or valid for the call, and then the calling process's context is one of ours.
    let (ib, pd, send_cq, recv_cq, srq, req, u, uctx) = unsafe {
        let pd = (*qp).pd;
        (
            NonNull::new((*qp).device),
            (!pd.is_null()).then(|| (*pd.cast::<IbPd<T>>()).data.assume_init_ref()),
            cq_data::<T>((*init).send_cq),
            cq_data::<T>((*init).recv_cq),
            srq_data::<T>((*init).srq),
            QpInit::from_raw(&*init),
            Udata::from_raw(udata),
            ucontext_data::<T>(b::rust_ib_helper_udata_ucontext(udata)),
        )
    };
    let (Some(ib), Some(pd), Some(send_cq), Some(recv_cq)) = (ib, pd, send_cq, recv_cq) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process (for a user), and
    // `pages` does not outlive the call.
    let (d, events, pages) = unsafe {
        (
            data::<T>(ib.as_ptr()),
            device::events::<T>(ib.as_ptr()),
            UserPages::new(ib),
        )
    };
    let iqp = qp.cast::<IbQp<T>>();
    let made = match caller::<T>(u.as_ref(), uctx, &pages) {
        // SAFETY: ib_core allocated `qp` at `size_ib_qp`, the size of an `IbQp<T>`, for
        // this verb; it frees it where it is.
        Ok(c) => unsafe {
            init_in_place(
                &raw mut (*iqp).data,
                d.create_qp(c, pd, send_cq, recv_cq, srq, &req),
            )
        },
        Err(e) => Err(e),
    };
    if let Err(e) = made {
        return e.to_errno();
    }
    // SAFETY: initialised just above.
    let v = unsafe { (*iqp).data.assume_init_ref() };
    let (num, caps) = (v.qp_num(), v.caps());
    // SAFETY: `qp` is ours until we return (ib_core publishes it after); `sq_sig_all` is
    // the binding's field; `init` is the caller's to read back.
    unsafe {
        (*iqp).sq_sig_all = req.sq_sig_all;
        (*qp).qp_num = num;
        caps.fill(&mut (*init).cap);
    }
    // SAFETY: the QP is created, and `destroy_qp` removes it before dropping it.
    match unsafe { events.add_qp(num, qp_nn) } {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: initialised above, not yet known to anyone; ib_core frees the QP
            // after a failed create.
            unsafe { (*iqp).data.assume_init_drop() };
            e.to_errno()
        }
    }
}

/// # Safety
///
/// See `query_device`; `qp` is a live QP of ours, `attr` valid for the call.
pub(super) unsafe extern "C" fn modify_qp<T: Driver>(
    qp: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    mask: i32,
    udata: *mut b::ib_udata,
) -> i32 {
    let mask = QpAttrMask::from_raw(mask);
    // SAFETY: a live QP of one of `T`'s devices, whose data `create_qp` initialised and
    // ib_core keeps until `destroy_qp`; `attr` and `udata` (or null) are valid for the call.
    let (d, v, a, u) = unsafe {
        (
            data::<T>((*qp).device),
            (*qp.cast::<IbQp<T>>()).data.assume_init_ref(),
            QpAttr::from_raw(&*attr, mask),
            Udata::from_raw(udata),
        )
    };
    ret(a.and_then(|a| d.modify_qp(v, &a, mask, u.as_ref())))
}

/// # Safety
///
/// See `query_device`; `qp` is a live QP of ours, `attr` and `init` valid and zeroed.
pub(super) unsafe extern "C" fn query_qp<T: Driver>(
    qp: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    _mask: i32,
    init: *mut b::ib_qp_init_attr,
) -> i32 {
    let iqp = qp.cast::<IbQp<T>>();
    // SAFETY: a live QP of one of `T`'s devices: `create_qp` initialised its data and set
    // `sq_sig_all`, and ib_core keeps it until `destroy_qp`.
    let (d, v, sq_sig_all) = unsafe {
        (
            data::<T>((*qp).device),
            (*iqp).data.assume_init_ref(),
            (*iqp).sq_sig_all,
        )
    };
    // The `ib_qp` is ib_core's and it writes parts of it while the QP lives (its use
    // count, ...): these three fields are read by value through the raw pointer, never
    // through a reference to the whole struct.
    // SAFETY: ib_core set them before `create_qp` and does not change them while the QP
    // lives.
    let (qp_type, send_cq, recv_cq) = unsafe { ((*qp).qp_type, (*qp).send_cq, (*qp).recv_cq) };
    ret(d.query_qp(v).map(|(a, caps)| {
        // SAFETY: `attr` and `init` are valid for the call and ours to fill.
        let (attr, init) = unsafe { (&mut *attr, &mut *init) };
        a.fill(attr);
        caps.fill(&mut attr.cap);
        caps.fill(&mut init.cap);
        init.qp_type = qp_type;
        init.send_cq = send_cq;
        init.recv_cq = recv_cq;
        init.sq_sig_type = if sq_sig_all {
            b::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            b::ib_sig_type_IB_SIGNAL_REQ_WR
        };
    }))
}

/// # Safety
///
/// See `query_device`; `qp` is one `create_qp` set up, destroyed once.
pub(super) unsafe extern "C" fn destroy_qp<T: Driver>(
    qp: *mut b::ib_qp,
    _udata: *mut b::ib_udata,
) -> i32 {
    let iqp = qp.cast::<IbQp<T>>();
    // SAFETY: a live QP of one of `T`'s devices, whose data `create_qp` initialised; once
    // it is out of the event table no event reaches it, and ib_core destroys it once: this
    // is the last use of its data.
    unsafe {
        let num = (*iqp).data.assume_init_ref().qp_num();
        device::events::<T>((*qp).device).remove_qp(num);
        (*iqp).data.assume_init_drop();
    }
    0
}

// Fast-path verbs: a user's provider runs them in its process; a driver whose create
// verbs refuse kernel CQs and QPs never sees these called for its objects.
/// # Safety
///
/// See `query_device`.
pub(super) unsafe extern "C" fn post_send(
    _qp: *mut b::ib_qp,
    _wr: *const b::ib_send_wr,
    _bad: *mut *const b::ib_send_wr,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// See `query_device`.
pub(super) unsafe extern "C" fn post_recv(
    _qp: *mut b::ib_qp,
    _wr: *const b::ib_recv_wr,
    _bad: *mut *const b::ib_recv_wr,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// See `query_device`.
pub(super) unsafe extern "C" fn poll_cq(_cq: *mut b::ib_cq, _n: i32, _wc: *mut b::ib_wc) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// See `query_device`.
pub(super) unsafe extern "C" fn req_notify_cq(
    _cq: *mut b::ib_cq,
    _flags: b::ib_cq_notify_flags,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
