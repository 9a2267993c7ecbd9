// SPDX-License-Identifier: GPL-2.0

//! The trampolines of memory windows: allocate (the rkey set from the driver's object) and
//! deallocate.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::{caller, init_in_place, ucontext_data};
use crate::ib::{
    bindings as b,
    device::data,
    driver::{Driver, MwObject},
    mw::{IbMw, MwType},
    pd::IbPd,
    udata::Udata,
    umem::UserPages,
};

/// # Safety
///
/// See `query_device`; `mw` is a zeroed `IbMw<T>` with ib_core's fields set (device, PD,
/// type), `udata` the verb's.
pub(super) unsafe extern "C" fn alloc_mw<T: Driver>(
    mw: *mut b::ib_mw,
    udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: ib_core set `mw`'s device (one of `T`'s registered devices), PD (a live PD of
    // ours, which uverbs holds for the call) and type before the verb; `udata` is null or
    // valid for the call, and then the calling process's context is one of ours.
    let (ib, pd, mw_type, u, uctx) = unsafe {
        let pd = (*mw).pd;
        (
            NonNull::new((*mw).device),
            (!pd.is_null()).then(|| (*pd.cast::<IbPd<T>>()).data.assume_init_ref()),
            MwType::from_raw((*mw).type_),
            Udata::from_raw(udata),
            ucontext_data::<T>(b::rust_ib_helper_udata_ucontext(udata)),
        )
    };
    let (Some(ib), Some(pd), Some(mw_type)) = (ib, pd, mw_type) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process, and `pages` does
    // not outlive the call.
    let (d, pages) = unsafe { (data::<T>(ib.as_ptr()), UserPages::new(ib)) };
    let imw = mw.cast::<IbMw<T>>();
    let made = match caller::<T>(u.as_ref(), uctx, &pages) {
        // SAFETY: ib_core allocated `mw` at `size_ib_mw`, the size of an `IbMw<T>`, for this
        // verb; it frees it where it is.
        Ok(c) => unsafe { init_in_place(&raw mut (*imw).data, d.alloc_mw(c, pd, mw_type)) },
        Err(e) => Err(e),
    };
    if let Err(e) = made {
        return e.to_errno();
    }
    // SAFETY: initialised just above; ib_core reads the rkey once the verb returns (its
    // answer to the caller), and nothing else reaches the window before.
    unsafe {
        let rkey = (*imw).data.assume_init_ref().rkey();
        (*mw).rkey = rkey;
    }
    0
}

/// # Safety
///
/// See `query_device`; `mw` is one `alloc_mw` set up, deallocated once.
pub(super) unsafe extern "C" fn dealloc_mw<T: Driver>(mw: *mut b::ib_mw) -> i32 {
    // SAFETY: `alloc_mw` initialised the data; ib_core deallocates each window once (and
    // frees it when this answers 0): this is the last use of its data. Dropping it frees the
    // window on the hardware.
    unsafe { (*mw.cast::<IbMw<T>>()).data.assume_init_drop() };
    0
}
