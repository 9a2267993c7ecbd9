// SPDX-License-Identifier: GPL-2.0

//! Every `extern "C"` callback ib_core makes into a driver, and the ops table that names
//! them.
//!
//! Each trampoline turns its raw pointers into safe types once, calls the [`Driver`], and
//! maps `Err(e)` to `e.to_errno()`; nothing else. Verbs no driver implements yet answer
//! `-EOPNOTSUPP` (ib_core requires their presence to register a device).

use core::{
    mem::{align_of, size_of, MaybeUninit},
    ptr::NonNull,
};

use kernel::{ffi, prelude::*, types::Opaque, ModuleMetadata};

use super::{
    bindings as b,
    cq::{CqInit, IbCq},
    device::{self, data},
    driver::{
        format_fw_version, port_desc, Caller, CqObject, Driver, MrObject, QpObject, UserCaller,
    },
    mr::IbMr,
    pd::IbPd,
    qp::{IbQp, QpAttr, QpAttrMask, QpInit},
    ucontext::{IbUcontext, Mapping, MmapEntry, UserContext},
    udata::Udata,
    umem::{Access, Source, UserMemory, UserPages},
};

/// What `kzalloc` guarantees every allocation's alignment to be (`ARCH_KMALLOC_MINALIGN`,
/// at least `__alignof__(unsigned long long)` on x86-64): ib_core allocates every object
/// of ours with it.
pub(super) const KMALLOC_MIN_ALIGN: usize = 8;

/// 0 or the negative errno, as ib_core wants it.
fn ret(r: Result) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Only ib_core calls this and the other trampolines, through `ops::<T>()`, with the
/// pointers the `ib_device_ops` contract gives: valid for the call; every `ib_device` one of
/// `T`'s; every object of the size `ops::<T>()` declares.
unsafe extern "C" fn query_device<T: Driver>(
    ib: *mut b::ib_device,
    attr: *mut b::ib_device_attr,
    udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: `ib` is one of `T`'s devices (every device with these ops is), live for the
    // call; ib_core hands `attr` zeroed and exclusively ours for the call, and `udata` null
    // (a kernel caller) or the verb's, valid for the call.
    let (d, attr, udata) = unsafe { (data::<T>(ib), &mut *attr, Udata::from_raw(udata)) };
    ret((|| {
        udata.map_or(Ok(()), |u| u.expect_empty())?;
        // SAFETY: `ib` is valid for the call; the node GUID is set before registration
        // and not changed after.
        d.query_device()?.fill(attr, unsafe { (*ib).node_guid });
        Ok(())
    })())
}

/// # Safety
///
/// See `query_device`; `attr` is valid and zeroed.
unsafe extern "C" fn query_port<T: Driver>(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> i32 {
    let Some(desc) = port_desc::<T>(port) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is one of `T`'s devices (every device with these ops is), live for the
    // call; ib_core hands `attr` zeroed and exclusively ours for the call.
    let (d, attr) = unsafe { (data::<T>(ib), &mut *attr) };
    ret(d.query_port(port).map(|p| p.fill(desc, attr)))
}

/// # Safety
///
/// See `query_device`; `imm` is valid.
unsafe extern "C" fn get_port_immutable<T: Driver>(
    _ib: *mut b::ib_device,
    port: u32,
    imm: *mut b::ib_port_immutable,
) -> i32 {
    let Some(desc) = port_desc::<T>(port) else {
        return EINVAL.to_errno();
    };
    // SAFETY: ib_core hands a valid `ib_port_immutable`, exclusively ours for the call.
    desc.fill(unsafe { &mut *imm });
    0
}

/// # Safety
///
/// See `query_device`; `gid` is valid.
unsafe extern "C" fn query_gid<T: Driver>(
    ib: *mut b::ib_device,
    port: u32,
    index: i32,
    gid: *mut b::ib_gid,
) -> i32 {
    let Some(desc) = port_desc::<T>(port) else {
        return EINVAL.to_errno();
    };
    let Some(index) = u16::try_from(index).ok().filter(|&i| i < desc.gid_tbl_len) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    match unsafe { data::<T>(ib) }.query_gid(port, index) {
        Ok(raw) => {
            // SAFETY: ib_core hands a valid `ib_gid` to fill; `raw` is its 16-byte view.
            unsafe { (*gid).raw = raw };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// See `query_device`; `pkey` is valid.
unsafe extern "C" fn query_pkey<T: Driver>(
    ib: *mut b::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> i32 {
    if port_desc::<T>(port).is_none_or(|desc| index >= desc.pkey_tbl_len) {
        return EINVAL.to_errno();
    }
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    match unsafe { data::<T>(ib) }.query_pkey(port, index) {
        Ok(v) => {
            // SAFETY: ib_core hands a valid `u16` to fill.
            unsafe { *pkey = v };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// See `query_device`; `out` has `IB_FW_VERSION_NAME_MAX` bytes.
unsafe extern "C" fn get_dev_fw_str<T: Driver>(ib: *mut b::ib_device, out: *mut ffi::c_char) {
    // SAFETY: `ib` is one of `T`'s devices, live for the call; ib_core hands `out` with
    // `IB_FW_VERSION_NAME_MAX` writable bytes, exclusively ours for the call.
    let (d, out) = unsafe {
        (
            data::<T>(ib),
            core::slice::from_raw_parts_mut(out.cast::<u8>(), b::IB_FW_VERSION_NAME_MAX as usize),
        )
    };
    if let Ok(a) = d.query_device() {
        format_fw_version(a.fw_ver, out);
    }
}

/// Runs `init`, the driver's initialiser of an object's data, in place in `slot`.
///
/// # Safety
///
/// `slot` is the uninitialised data of an object ib_core (or, for an MR, the binding)
/// allocated for this verb: valid for writes, exclusively ours until the verb returns, and
/// never moved until it is freed (ib_core frees its objects where they are).
unsafe fn init_in_place<V>(slot: *mut MaybeUninit<V>, init: impl PinInit<V, Error>) -> Result {
    // SAFETY: `slot` is valid, uninitialised and pinned (the caller's guarantee); on an
    // error the initialiser has dropped what it initialised, and the slot stays
    // uninitialised, as the caller's cleanup (ib_core's free) expects.
    unsafe { pin_init::raw_try_init(slot.cast::<V>(), init) }
}

/// The caller of a create verb: a user when the verb carries udata (with its context's
/// data and its memory), else a kernel client.
///
/// # Errors
///
/// `EINVAL` for udata without a user context (no uverbs call has that).
fn caller<'a, T: Driver>(
    udata: Option<&'a Udata<'a>>,
    uctx: Option<&'a T::Ucontext>,
    pages: &'a UserPages<'a>,
) -> Result<Caller<'a, T>> {
    match (udata, uctx) {
        (Some(udata), Some(uctx)) => Ok(Caller::User(UserCaller { uctx, udata, pages })),
        (Some(_), None) => Err(EINVAL),
        (None, _) => Ok(Caller::Kernel),
    }
}

/// # Safety
///
/// See `query_device`; `uctx` is a zeroed `IbUcontext<T>`.
unsafe extern "C" fn alloc_ucontext<T: Driver>(
    uctx: *mut b::ib_ucontext,
    udata: *mut b::ib_udata,
) -> i32 {
    // Only processes have contexts, always with udata.
    // SAFETY: ib_core passes the verb's udata, valid for the call.
    let (Some(u), Some(raw)) = (unsafe { Udata::from_raw(udata) }, NonNull::new(uctx)) else {
        return EINVAL.to_errno();
    };
    // SAFETY: ib_core allocated `uctx` for this verb with its `device` set to one of `T`'s
    // registered devices; both are valid for the call.
    let (d, ctx) = unsafe { (data::<T>((*uctx).device), UserContext::<T>::from_raw(raw)) };
    let init = d.alloc_ucontext(&ctx, &u);
    // SAFETY: ib_core allocated `uctx` at `size_ib_ucontext`, the size of an
    // `IbUcontext<T>`, for this verb; it frees it where it is.
    ret(unsafe { init_in_place(&raw mut (*uctx.cast::<IbUcontext<T>>()).data, init) })
}

/// # Safety
///
/// See `query_device`; `uctx` is one `alloc_ucontext` set up, deallocated once, after
/// every object and mapping of it is gone (or zapped, on disassociation).
unsafe extern "C" fn dealloc_ucontext<T: Driver>(uctx: *mut b::ib_ucontext) {
    // SAFETY: `alloc_ucontext` initialised the data; ib_core calls this once, last.
    unsafe { (*uctx.cast::<IbUcontext<T>>()).data.assume_init_drop() };
}

/// # Safety
///
/// See `dealloc_ucontext`; the context is live.
unsafe extern "C" fn disassociate_ucontext<T: Driver>(uctx: *mut b::ib_ucontext) {
    // SAFETY: a live context of one of `T`'s devices, whose data `alloc_ucontext`
    // initialised; ib_core keeps it until `dealloc_ucontext`, after this returns.
    let (d, v) = unsafe {
        (
            data::<T>((*uctx).device),
            (*uctx.cast::<IbUcontext<T>>()).data.assume_init_ref(),
        )
    };
    d.disassociate_ucontext(v);
}

/// # Safety
///
/// See `query_device`; `uctx` is a live context of ours, `vma` a VMA being created on its
/// uverbs file.
unsafe extern "C" fn mmap<T: Driver>(
    uctx: *mut b::ib_ucontext,
    vma: *mut b::vm_area_struct,
) -> i32 {
    // SAFETY: ib_core passes the VMA being created, valid for the call.
    let (exec, shared) = unsafe {
        (
            b::rust_ib_helper_vma_exec(vma),
            b::rust_ib_helper_vma_shared(vma),
        )
    };
    // Device memory is written, never executed, and a private copy of it is no mapping.
    if exec {
        return EPERM.to_errno();
    }
    if !shared {
        return EINVAL.to_errno();
    }
    // The key (the offset) must name an entry of this context, and the length be its.
    // SAFETY: `uctx` and `vma` are valid for the call.
    let e = unsafe { b::rdma_user_mmap_entry_get(uctx, vma) };
    if e.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: every entry of our contexts is the first field of an `MmapEntry<T>`
    // (`UserContext::insert_mmap`); `get` took a reference, so it is live.
    let r = match unsafe { (*e.cast::<MmapEntry<T>>()).mapping } {
        // CAST: a page frame number of this machine fits `unsigned long`.
        // SAFETY: `uctx`, `vma` and `e` are valid; the helper maps the entry's pages.
        Mapping::IoUncached { pfn, pages } => unsafe {
            b::rust_ib_helper_mmap_io_noncached(uctx, vma, pfn as ffi::c_ulong, pages, e)
        },
    };
    // SAFETY: drops the reference `get` took (the mapping holds its own).
    unsafe { b::rdma_user_mmap_entry_put(e) };
    r
}

/// # Safety
///
/// See `query_device`; `e` is one of our entries whose last reference went.
unsafe extern "C" fn mmap_free<T: Driver>(e: *mut b::rdma_user_mmap_entry) {
    // SAFETY: our entries are `MmapEntry<T>`s from `KBox::into_raw` (`insert_mmap`), and
    // ib_core calls this once, when nothing references the entry any more.
    drop(unsafe { KBox::from_raw(e.cast::<MmapEntry<T>>()) });
}

/// # Safety
///
/// See `query_device`; `pd` is a zeroed `IbPd<T>` with its `device` set, `udata` the
/// verb's (null for a kernel caller).
unsafe extern "C" fn alloc_pd<T: Driver>(pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> i32 {
    // SAFETY: ib_core set `pd`'s device to one of `T`'s registered devices; `udata` is null
    // or valid for the call, and then the calling process's context (set up by
    // `alloc_ucontext`) is one of ours.
    let (ib, u, uctx) = unsafe {
        (
            NonNull::new((*pd).device),
            Udata::from_raw(udata),
            ucontext_data::<T>(b::rust_ib_helper_udata_ucontext(udata)),
        )
    };
    let Some(ib) = ib else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, the verb runs in its caller's process (for a user), and
    // `pages` does not outlive the call.
    let (d, pages) = unsafe { (data::<T>(ib.as_ptr()), UserPages::new(ib)) };
    let init = match caller::<T>(u.as_ref(), uctx, &pages) {
        Ok(c) => d.alloc_pd(c),
        Err(e) => return e.to_errno(),
    };
    // SAFETY: ib_core allocated `pd` at `size_ib_pd`, the size of an `IbPd<T>`, for this
    // verb; it frees it where it is.
    ret(unsafe { init_in_place(&raw mut (*pd.cast::<IbPd<T>>()).data, init) })
}

/// # Safety
///
/// See `query_device`; `pd` is one `alloc_pd` set up, deallocated once.
unsafe extern "C" fn dealloc_pd<T: Driver>(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> i32 {
    // SAFETY: `alloc_pd` initialised the data; ib_core deallocates once, after every user of
    // the PD is gone. Dropping it frees it on the hardware.
    unsafe { (*pd.cast::<IbPd<T>>()).data.assume_init_drop() };
    0
}

/// The driver's part of the user context `uctx`.
///
/// # Safety
///
/// `uctx` is null or a live context of ours (one `alloc_ucontext` set up), for `'a`.
unsafe fn ucontext_data<'a, T: Driver>(uctx: *mut b::ib_ucontext) -> Option<&'a T::Ucontext> {
    if uctx.is_null() {
        return None;
    }
    // SAFETY: a live context of ours (caller), initialised by `alloc_ucontext`.
    Some(unsafe { (*uctx.cast::<IbUcontext<T>>()).data.assume_init_ref() })
}

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
unsafe extern "C" fn create_cq<T: Driver>(
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
/// See `query_device`; `cq` is one `create_cq` set up, destroyed once (ib_core checks
/// that no QP uses it).
unsafe extern "C" fn destroy_cq<T: Driver>(cq: *mut b::ib_cq, _udata: *mut b::ib_udata) -> i32 {
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
/// `init` the creator's request with live CQs of ours, `udata` the verb's (null for a
/// kernel caller).
unsafe extern "C" fn create_qp<T: Driver>(
    qp: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> i32 {
    let Some(qp_nn) = NonNull::new(qp) else {
        return EINVAL.to_errno();
    };
    // SAFETY: ib_core set `qp`'s device (one of `T`'s registered devices) and PD, and
    // passes a valid `init` whose CQs are live CQs of ours (it holds references on the PD
    // and CQs for the call); `udata` is null or valid for the call, and then the calling
    // process's context is one of ours.
    let (ib, pd, send_cq, recv_cq, req, u, uctx) = unsafe {
        let pd = (*qp).pd;
        (
            NonNull::new((*qp).device),
            (!pd.is_null()).then(|| (*pd.cast::<IbPd<T>>()).data.assume_init_ref()),
            cq_data::<T>((*init).send_cq),
            cq_data::<T>((*init).recv_cq),
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
                d.create_qp(c, pd, send_cq, recv_cq, &req),
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
unsafe extern "C" fn modify_qp<T: Driver>(
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
unsafe extern "C" fn query_qp<T: Driver>(
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
unsafe extern "C" fn destroy_qp<T: Driver>(qp: *mut b::ib_qp, _udata: *mut b::ib_udata) -> i32 {
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
unsafe extern "C" fn post_send(
    _qp: *mut b::ib_qp,
    _wr: *const b::ib_send_wr,
    _bad: *mut *const b::ib_send_wr,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn post_recv(
    _qp: *mut b::ib_qp,
    _wr: *const b::ib_recv_wr,
    _bad: *mut *const b::ib_recv_wr,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn poll_cq(_cq: *mut b::ib_cq, _n: i32, _wc: *mut b::ib_wc) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn req_notify_cq(_cq: *mut b::ib_cq, _flags: b::ib_cq_notify_flags) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// `ERR_PTR(-EOPNOTSUPP)`.
fn mr_unsupported() -> *mut b::ib_mr {
    // CAST: the kernel's ERR_PTR encoding: a negative errno as a pointer.
    (EOPNOTSUPP.to_errno() as isize) as *mut b::ib_mr
}
/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn get_dma_mr(_pd: *mut b::ib_pd, _access: i32) -> *mut b::ib_mr {
    mr_unsupported()
}
/// # Safety
///
/// See `query_device`; `pd` is a live PD of ours, and the caller a verb in the context of
/// the process whose memory `start` names.
unsafe extern "C" fn reg_user_mr<T: Driver>(
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
    unsafe {
        reg_mr::<T>(pd, udata, uctx, |ib| {
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

/// # Safety
///
/// See `reg_user_mr`; `attrs` is the ioctl's attribute bundle (or null).
unsafe extern "C" fn reg_user_mr_dmabuf<T: Driver>(
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
    // SAFETY: `pd` is a live PD of ours, `udata` and `uctx` the verb's (or null); the memory
    // is described on `pd`'s device (`ib`), in the calling process (which resolves `fd`),
    // for this verb.
    unsafe {
        reg_mr::<T>(pd, udata, uctx, |ib| {
            let source = Source::DmaBuf { fd, offset };
            UserMemory::new(ib, source, len, virt, Access::from_raw(access))
        })
    }
}

/// The two registration verbs' common part: the driver registers the memory `mem` makes
/// (given `pd`'s device) inside an `IbMr<T>` the binding allocates.
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
unsafe extern "C" fn dereg_mr<T: Driver>(mr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> i32 {
    // SAFETY: `mr` is the first field of an `IbMr<T>` from `KBox::into_raw` in `reg_mr`,
    // with initialised data; ib_core deregisters it once, when nothing uses it any more.
    // Dropping the data deregisters it from the hardware, then the allocation goes.
    unsafe {
        let mut mr = KBox::from_raw(mr.cast::<IbMr<T>>());
        mr.data.assume_init_drop();
    }
    0
}

/// The size of ib_core object `O` with driver data after it, checked at compile time
/// against the alignment ib_core's allocations give.
const fn object_size<O>() -> usize {
    assert!(align_of::<O>() <= KMALLOC_MIN_ALIGN);
    size_of::<O>()
}

/// The ops table for driver `T`, sorted as ib_device_ops is.
pub(super) fn ops<T: Driver>() -> b::ib_device_ops {
    let mut ops = b::ib_device_ops {
        owner: <T::Module as ModuleMetadata>::THIS_MODULE.as_ptr().cast(),
        driver_id: b::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: T::UVERBS_ABI_VERSION,
        alloc_pd: Some(alloc_pd::<T>),
        alloc_ucontext: Some(alloc_ucontext::<T>),
        create_cq: Some(create_cq::<T>),
        create_qp: Some(create_qp::<T>),
        dealloc_pd: Some(dealloc_pd::<T>),
        dealloc_ucontext: Some(dealloc_ucontext::<T>),
        dereg_mr: Some(dereg_mr::<T>),
        destroy_cq: Some(destroy_cq::<T>),
        destroy_qp: Some(destroy_qp::<T>),
        disassociate_ucontext: if T::HAS_DISASSOCIATE_UCONTEXT {
            Some(disassociate_ucontext::<T>)
        } else {
            None
        },
        get_dev_fw_str: Some(get_dev_fw_str::<T>),
        get_dma_mr: Some(get_dma_mr),
        get_port_immutable: Some(get_port_immutable::<T>),
        mmap: Some(mmap::<T>),
        mmap_free: Some(mmap_free::<T>),
        modify_qp: Some(modify_qp::<T>),
        poll_cq: Some(poll_cq),
        post_recv: Some(post_recv),
        post_send: Some(post_send),
        query_device: Some(query_device::<T>),
        query_gid: Some(query_gid::<T>),
        query_pkey: Some(query_pkey::<T>),
        query_port: Some(query_port::<T>),
        query_qp: Some(query_qp::<T>),
        reg_user_mr: Some(reg_user_mr::<T>),
        reg_user_mr_dmabuf: Some(reg_user_mr_dmabuf::<T>),
        req_notify_cq: Some(req_notify_cq),
        size_ib_cq: const { object_size::<IbCq<T>>() },
        size_ib_pd: const { object_size::<IbPd<T>>() },
        size_ib_qp: const { object_size::<IbQp<T>>() },
        size_ib_ucontext: const { object_size::<IbUcontext<T>>() },
        ..Default::default()
    };
    // Every verb with udata reads it with ib_core's helpers (`Udata`), answers with
    // `ib_respond_udata`: tell userspace (IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA).
    ops.set_uverbs_robust_udata(1);
    ops
}
