// SPDX-License-Identifier: GPL-2.0

//! The trampolines of MRs, which the binding allocates (ib_core does not).

use core::{mem::MaybeUninit, ptr::NonNull};

use kernel::{prelude::*, types::Opaque};

use super::{caller, data, init_in_place, ucontext_data};
use crate::ib::{
    bindings as b,
    driver::{Driver, MrObject},
    mr::{IbMr, MrReg},
    pd::IbPd,
    udata::Udata,
    umem::{Access, Source, UserMemory, UserPages},
};

/// `ERR_PTR(-EOPNOTSUPP)`.
fn mr_unsupported() -> *mut b::ib_mr {
    // CAST: the kernel's ERR_PTR encoding: a negative errno as a pointer.
    (EOPNOTSUPP.to_errno() as isize) as *mut b::ib_mr
}
/// # Safety
///
/// See `query_device`.
pub(super) unsafe extern "C" fn get_dma_mr(_pd: *mut b::ib_pd, _access: i32) -> *mut b::ib_mr {
    mr_unsupported()
}
/// # Safety
///
/// See `query_device`; `pd` is a live PD of ours, and the caller a verb in the context of
/// the process whose memory `start` names.
pub(super) unsafe extern "C" fn reg_user_mr<T: Driver>(
    pd: *mut b::ib_pd,
    start: u64,
    len: u64,
    virt: u64,
    access: i32,
    dmah: *mut b::ib_dmah,
    udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    // No DMA handles (TPH steering) yet.
    if !dmah.is_null() {
        return EOPNOTSUPP.to_ptr();
    }
    // SAFETY: `udata` is null or the verb's, valid for the call.
    let uctx = unsafe { b::rust_ib_helper_udata_ucontext(udata) };
    // SAFETY: `pd` is a live PD of ours, `udata` and `uctx` the verb's (or null); the memory
    // is described on `pd`'s device (`ib`), in the calling process, for this verb.
    unsafe { reg_va::<T>(pd, udata, uctx, start, len, virt, access) }
}

/// `reg_mr` of `len` bytes of the calling process's memory at `start`, seen at `virt`.
///
/// # Safety
///
/// As `reg_mr`, the caller a verb in the context of the process whose memory `start`
/// names.
unsafe fn reg_va<T: Driver>(
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
    uctx: *mut b::ib_ucontext,
    start: u64,
    len: u64,
    virt: u64,
    access: i32,
) -> *mut b::ib_mr {
    let reg = MrReg {
        start: Some(start),
        length: len,
        virt,
        access,
    };
    // SAFETY: the caller's promise; the memory is described on `pd`'s device (`ib`).
    unsafe {
        reg_mr::<T>(pd, udata, uctx, reg, |ib| {
            UserMemory::new(
                ib,
                Source::Va { start },
                len,
                virt,
                Access::from_raw(access),
            )
        })
    }
}

/// `rereg_user_mr`: the driver re-registers `mr` in place ([`Driver::rereg_user_mr`]) for
/// what `flags` changes (translation, PD, access) and what `mr` had otherwise; null on
/// success (ib_core keeps `mr`, with its keys, and updates its PD, address and length).
/// `EOPNOTSUPP` for an MR over a dma-buf or an unknown flag.
///
/// # Safety
///
/// See `reg_user_mr`; `mr` is a live MR of ours, `pd` the PD it is to be on (its own when
/// `flags` does not change it), and ib_core holds `mr` exclusively for the call (uverbs
/// takes its object for writing), so nothing else reaches its data meanwhile.
pub(super) unsafe extern "C" fn rereg_user_mr<T: Driver>(
    mr: *mut b::ib_mr,
    flags: i32,
    start: u64,
    len: u64,
    virt: u64,
    access: i32,
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    let m = mr.cast::<IbMr<T>>();
    // SAFETY: `mr` is the first field of a live `IbMr<T>` (`reg_mr`).
    let old = unsafe { (*m).reg };
    // CAST: a bit mask, reinterpreted.
    let flags = flags as u32;
    let (trans, change_pd, change_access) = (
        b::ib_mr_rereg_flags_IB_MR_REREG_TRANS,
        b::ib_mr_rereg_flags_IB_MR_REREG_PD,
        b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS,
    );
    let Some(old_start) = old.start else {
        return EOPNOTSUPP.to_ptr();
    };
    if flags & !(trans | change_pd | change_access) != 0 {
        return EOPNOTSUPP.to_ptr();
    }
    let reg = MrReg {
        start: Some(if flags & trans != 0 { start } else { old_start }),
        length: if flags & trans != 0 { len } else { old.length },
        virt: if flags & trans != 0 { virt } else { old.virt },
        access: if flags & change_access != 0 {
            access
        } else {
            old.access
        },
    };
    // SAFETY: `pd` is a live PD of ours (`alloc_pd` initialised its data) that ib_core holds
    // for the call; `udata` is the verb's and `uctx` its caller's context.
    let (ib, pd_data, u, uctx) = unsafe {
        let uctx = b::rust_ib_helper_udata_ucontext(udata);
        (
            NonNull::new((*pd).device),
            (*pd.cast::<IbPd<T>>()).data.assume_init_ref(),
            Udata::from_raw(udata),
            ucontext_data::<T>(uctx),
        )
    };
    let Some(ib) = ib else {
        return EINVAL.to_ptr();
    };
    let source = Source::Va {
        start: reg.start.unwrap_or(old_start),
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process (whose memory the
    // registration's start names), and `pages` and `mem` do not outlive the call.
    let (d, pages, mem) = unsafe {
        (
            data::<T>(ib.as_ptr()),
            UserPages::new(ib),
            UserMemory::new(
                ib,
                source,
                reg.length,
                reg.virt,
                Access::from_raw(reg.access),
            ),
        )
    };
    let caller = match caller::<T>(u.as_ref(), uctx, &pages) {
        Ok(c) => c,
        Err(e) => return e.to_ptr(),
    };
    // SAFETY: `reg_mr` initialised the data; ib_core holds `mr` exclusively for the call
    // (the contract), so this is the only reference to it.
    let data = unsafe { (*m).data.assume_init_mut() };
    match d.rereg_user_mr(caller, data, pd_data, &mem) {
        Ok(()) => {
            // SAFETY: as above: the MR is ours alone for the call.
            unsafe { (*m).reg = reg };
            core::ptr::null_mut()
        }
        Err(e) => e.to_ptr(),
    }
}

/// # Safety
///
/// See `reg_user_mr`; `attrs` is the ioctl's attribute bundle (or null).
pub(super) unsafe extern "C" fn reg_user_mr_dmabuf<T: Driver>(
    pd: *mut b::ib_pd,
    offset: u64,
    len: u64,
    virt: u64,
    fd: i32,
    access: i32,
    dmah: *mut b::ib_dmah,
    attrs: *mut b::uverbs_attr_bundle,
) -> *mut b::ib_mr {
    if !dmah.is_null() {
        return EOPNOTSUPP.to_ptr();
    }
    // SAFETY: `attrs` is null or the verb's bundle, valid for the call.
    let (udata, uctx) = unsafe {
        (
            b::rust_ib_helper_attrs_driver_udata(attrs),
            b::rust_ib_helper_attrs_ucontext(attrs),
        )
    };
    let reg = MrReg {
        start: None,
        length: len,
        virt,
        access,
    };
    // SAFETY: `pd` is a live PD of ours, `udata` and `uctx` the verb's (or null); the memory
    // is described on `pd`'s device (`ib`), in the calling process (which resolves `fd`),
    // for this verb.
    unsafe {
        reg_mr::<T>(pd, udata, uctx, reg, |ib| {
            let source = Source::DmaBuf { fd, offset };
            UserMemory::new(ib, source, len, virt, Access::from_raw(access))
        })
    }
}

/// The registration verbs' common part: the driver registers the memory `mem` makes
/// (given `pd`'s device) inside an `IbMr<T>` the binding allocates, which keeps `reg`.
///
/// # Safety
///
/// `pd` is a live PD of ours (one `alloc_pd` set up) on a registered device; `udata` is
/// null or the verb's, valid for the call, and `uctx` then the calling process's context
/// (one of ours); `mem` makes a `UserMemory` whose own contract the caller meets.
unsafe fn reg_mr<'a, T: Driver>(
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
    uctx: *mut b::ib_ucontext,
    reg: MrReg,
    mem: impl FnOnce(NonNull<b::ib_device>) -> UserMemory<'a>,
) -> *mut b::ib_mr {
    // SAFETY: `pd`, `udata` and `uctx` as the caller guarantees; `alloc_pd` initialised the
    // PD's data, and ib_core holds the PD for the call.
    let (ib, pd_data, u, uctx) = unsafe {
        (
            NonNull::new((*pd).device),
            (*pd.cast::<IbPd<T>>()).data.assume_init_ref(),
            Udata::from_raw(udata),
            ucontext_data::<T>(uctx),
        )
    };
    let Some(ib) = ib else {
        return EINVAL.to_ptr();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process, and `pages` does
    // not outlive the call.
    let (d, pages) = unsafe { (data::<T>(ib.as_ptr()), UserPages::new(ib)) };
    let mem = mem(ib);
    let caller = match caller::<T>(u.as_ref(), uctx, &pages) {
        Ok(c) => c,
        Err(e) => return e.to_ptr(),
    };
    let mr = match KBox::new(
        IbMr::<T> {
            ib: Opaque::zeroed(),
            data: MaybeUninit::uninit(),
            reg,
        },
        GFP_KERNEL,
    ) {
        Ok(mr) => KBox::into_raw(mr),
        Err(e) => return Error::from(e).to_ptr(),
    };
    let init = d.reg_user_mr(caller, pd_data, &mem);
    // SAFETY: `mr` is a fresh allocation of ours that stays where it is until `dereg_mr`
    // (or the error below) frees it.
    if let Err(e) = unsafe { init_in_place(&raw mut (*mr).data, init) } {
        // SAFETY: from `KBox::into_raw` above and not handed out; its data is uninitialised
        // (a `MaybeUninit`, not dropped).
        drop(unsafe { KBox::from_raw(mr) });
        return e.to_ptr();
    }
    // SAFETY: `mr` is ours until ib_core gets it below; its data was initialised above.
    unsafe {
        let keys = (*mr).data.assume_init_ref().keys();
        let ib_mr = (*mr).ib.get();
        (*ib_mr).lkey = keys.lkey;
        (*ib_mr).rkey = keys.rkey;
        ib_mr
    }
}
/// # Safety
///
/// See `query_device`; `mr` is one `reg_user_mr` returned, deregistered once.
pub(super) unsafe extern "C" fn dereg_mr<T: Driver>(
    mr: *mut b::ib_mr,
    _udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: `mr` is the first field of an `IbMr<T>` from `KBox::into_raw` in `reg_mr`,
    // with initialised data; ib_core deregisters it once, when nothing uses it any more.
    // Dropping the data deregisters it from the hardware, then the allocation goes.
    unsafe {
        let mut mr = KBox::from_raw(mr.cast::<IbMr<T>>());
        mr.data.assume_init_drop();
    }
    0
}
