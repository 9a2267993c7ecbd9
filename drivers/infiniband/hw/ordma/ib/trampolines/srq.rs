// SPDX-License-Identifier: GPL-2.0

//! The trampolines of SRQs, and `post_srq_recv`, which a driver without kernel queues
//! answers `EOPNOTSUPP`.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::{caller, data, init_in_place, ret, ucontext_data};
use crate::ib::{
    bindings as b, device,
    driver::{Driver, SrqObject, UserModify},
    pd::IbPd,
    srq::{IbSrq, SrqAttr, SrqAttrMask, SrqInit},
    udata::Udata,
    umem::UserPages,
};

/// The driver's part of SRQ `srq`.
///
/// # Safety
///
/// `srq` is null or a live SRQ of ours (one `create_srq` set up), for `'a`.
pub(super) unsafe fn srq_data<'a, T: Driver>(srq: *mut b::ib_srq) -> Option<&'a T::Srq> {
    if srq.is_null() {
        return None;
    }
    // SAFETY: a live SRQ of ours (caller), initialised by `create_srq`.
    Some(unsafe { (*srq.cast::<IbSrq<T>>()).data.assume_init_ref() })
}

/// # Safety
///
/// See `query_device`; `srq` is a zeroed `IbSrq<T>` with ib_core's fields set (device,
/// PD), `init` the creator's request, `udata` the verb's (null for a kernel caller).
pub(super) unsafe extern "C" fn create_srq<T: Driver>(
    srq: *mut b::ib_srq,
    init: *mut b::ib_srq_init_attr,
    udata: *mut b::ib_udata,
) -> i32 {
    let Some(srq_nn) = NonNull::new(srq) else {
        return EINVAL.to_errno();
    };
    // SAFETY: ib_core set `srq`'s device (one of `T`'s registered devices) and PD (a live
    // PD of ours, referenced for the call), and passes a valid `init`; `udata` is null or
    // valid for the call, and then the calling process's context is one of ours.
    let (ib, pd, req, u, uctx) = unsafe {
        let pd = (*srq).pd;
        (
            NonNull::new((*srq).device),
            (!pd.is_null()).then(|| (*pd.cast::<IbPd<T>>()).data.assume_init_ref()),
            SrqInit::from_raw(&*init),
            Udata::from_raw(udata),
            ucontext_data::<T>(b::rust_ib_helper_udata_ucontext(udata)),
        )
    };
    let (Some(ib), Some(pd)) = (ib, pd) else {
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
    let isrq = srq.cast::<IbSrq<T>>();
    let made = match caller::<T>(u.as_ref(), uctx, &pages) {
        // SAFETY: ib_core allocated `srq` at `size_ib_srq`, the size of an `IbSrq<T>`, for
        // this verb; it frees it where it is.
        Ok(c) => unsafe { init_in_place(&raw mut (*isrq).data, d.create_srq(c, pd, &req)) },
        Err(e) => Err(e),
    };
    if let Err(e) = made {
        return e.to_errno();
    }
    // SAFETY: initialised just above.
    let v = unsafe { (*isrq).data.assume_init_ref() };
    let (num, caps) = (v.num(), v.caps());
    // SAFETY: `init` is the caller's to read back (uverbs answers its `max_wr` and
    // `max_sge`); the limit stays as asked.
    unsafe {
        (*init).attr.max_wr = caps.max_wr;
        (*init).attr.max_sge = caps.max_sge;
    }
    // SAFETY: the SRQ is created, and `destroy_srq` removes it before dropping it.
    match unsafe { events.add_srq(num, srq_nn) } {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: initialised above, not yet known to anyone; ib_core frees the SRQ
            // after a failed create.
            unsafe { (*isrq).data.assume_init_drop() };
            e.to_errno()
        }
    }
}

/// # Safety
///
/// See `query_device`; `srq` is a live SRQ of ours, `attr` valid for the call, `udata`
/// the verb's (null for a kernel caller).
pub(super) unsafe extern "C" fn modify_srq<T: Driver>(
    srq: *mut b::ib_srq,
    attr: *mut b::ib_srq_attr,
    mask: b::ib_srq_attr_mask,
    udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: a live SRQ of one of `T`'s devices, whose data `create_srq` initialised and
    // ib_core keeps until `destroy_srq`; `attr` and `udata` (or null) are valid for the
    // call.
    let (ib, v, a, u) = unsafe {
        (
            NonNull::new((*srq).device),
            (*srq.cast::<IbSrq<T>>()).data.assume_init_ref(),
            SrqAttr::from_raw(&*attr),
            Udata::from_raw(udata),
        )
    };
    let Some(ib) = ib else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process (for a user), and
    // `pages` does not outlive the call.
    let (d, pages) = unsafe { (data::<T>(ib.as_ptr()), UserPages::new(ib)) };
    let user = u.as_ref().map(|udata| UserModify {
        udata,
        pages: &pages,
    });
    ret(d.modify_srq(v, &a, SrqAttrMask::from_raw(mask), user))
}

/// # Safety
///
/// See `query_device`; `srq` is a live SRQ of ours, `attr` valid for the call.
pub(super) unsafe extern "C" fn query_srq<T: Driver>(
    srq: *mut b::ib_srq,
    attr: *mut b::ib_srq_attr,
) -> i32 {
    // SAFETY: a live SRQ of one of `T`'s devices, whose data `create_srq` initialised and
    // ib_core keeps until `destroy_srq`.
    let (d, v) = unsafe {
        (
            data::<T>((*srq).device),
            (*srq.cast::<IbSrq<T>>()).data.assume_init_ref(),
        )
    };
    ret(d.query_srq(v).map(|a| {
        // SAFETY: `attr` is valid for the call and ours to fill.
        a.fill(unsafe { &mut *attr })
    }))
}

/// # Safety
///
/// See `query_device`; `srq` is one `create_srq` set up, destroyed once (ib_core checks
/// that no QP uses it).
pub(super) unsafe extern "C" fn destroy_srq<T: Driver>(
    srq: *mut b::ib_srq,
    _udata: *mut b::ib_udata,
) -> i32 {
    let isrq = srq.cast::<IbSrq<T>>();
    // SAFETY: a live SRQ of one of `T`'s devices, whose data `create_srq` initialised;
    // once it is out of the event table no event reaches it, and ib_core destroys it once:
    // this is the last use of its data.
    unsafe {
        let num = (*isrq).data.assume_init_ref().num();
        device::events::<T>((*srq).device).remove_srq(num);
        (*isrq).data.assume_init_drop();
    }
    0
}

/// # Safety
///
/// See `query_device`.
pub(super) unsafe extern "C" fn post_srq_recv(
    _srq: *mut b::ib_srq,
    _wr: *const b::ib_recv_wr,
    _bad: *mut *const b::ib_recv_wr,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
