// SPDX-License-Identifier: GPL-2.0

//! The trampolines of address handles: one create for kernel and user callers (ib_core
//! calls `create_user_ah` for uverbs, `create_ah` for the kernel), and destroy.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::{caller, init_in_place, ucontext_data};
use crate::ib::{
    ah::{AhInit, IbAh},
    bindings as b,
    device::data,
    driver::Driver,
    pd::IbPd,
    udata::Udata,
    umem::UserPages,
};

/// # Safety
///
/// See `query_device`; `ah` is a zeroed `IbAh<T>` with ib_core's fields set (device, PD),
/// `init` the creator's request, `udata` the verb's (null for a kernel caller).
pub(super) unsafe extern "C" fn create_ah<T: Driver>(
    ah: *mut b::ib_ah,
    init: *mut b::rdma_ah_init_attr,
    udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: ib_core set `ah`'s device (one of `T`'s registered devices) and PD (a live
    // PD of ours, referenced for the call), and passes a valid `init` whose `ah_attr` is
    // valid for the call; `udata` is null or valid for the call, and then the calling
    // process's context is one of ours.
    let (ib, pd, req, u, uctx) = unsafe {
        let pd = (*ah).pd;
        (
            NonNull::new((*ah).device),
            (!pd.is_null()).then(|| (*pd.cast::<IbPd<T>>()).data.assume_init_ref()),
            AhInit::from_raw(&*init),
            Udata::from_raw(udata),
            ucontext_data::<T>(b::rust_ib_helper_udata_ucontext(udata)),
        )
    };
    let (Some(ib), Some(pd), Some(req)) = (ib, pd, req) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process (for a user), and
    // `pages` does not outlive the call.
    let (d, pages) = unsafe { (data::<T>(ib.as_ptr()), UserPages::new(ib)) };
    let made = match caller::<T>(u.as_ref(), uctx, &pages) {
        // SAFETY: ib_core allocated `ah` at `size_ib_ah`, the size of an `IbAh<T>`, for this
        // verb; it frees it where it is.
        Ok(c) => unsafe {
            init_in_place(
                &raw mut (*ah.cast::<IbAh<T>>()).data,
                d.create_ah(c, pd, &req),
            )
        },
        Err(e) => Err(e),
    };
    match made {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// See `query_device`; `ah` is one `create_ah` set up, destroyed once.
pub(super) unsafe extern "C" fn destroy_ah<T: Driver>(ah: *mut b::ib_ah, _flags: u32) -> i32 {
    // SAFETY: `create_ah` initialised the data; ib_core destroys each AH once: this is the
    // last use of its data.
    unsafe { (*ah.cast::<IbAh<T>>()).data.assume_init_drop() };
    0
}
