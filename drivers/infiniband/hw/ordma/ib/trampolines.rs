// SPDX-License-Identifier: GPL-2.0

//! Every `extern "C"` callback ib_core makes into a driver, and the ops table that names
//! them.
//!
//! Each trampoline turns its raw pointers into safe types once, calls the [`Driver`], and
//! maps `Err(e)` to `e.to_errno()`; nothing else. Verbs no driver implements yet answer
//! `-EOPNOTSUPP` (ib_core requires their presence to register a device).

use core::{
    mem::{align_of, size_of},
    ptr::NonNull,
};

use kernel::{ffi, prelude::*, ModuleMetadata};

use super::{
    bindings as b,
    cq::{CqInit, IbCq},
    device::{self, data},
    driver::{format_fw_version, Driver},
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
    // SAFETY: see the contract above; `attr` is valid and zeroed, `udata` null or valid.
    let (d, attr, udata) = unsafe { (data::<T>(ib), &mut *attr, Udata::from_raw(udata)) };
    ret((|| {
        udata.map_or(Ok(()), |u| u.expect_empty())?;
        // SAFETY: `ib` is valid for the call.
        d.query_device()?.fill(attr, unsafe { (*ib).node_guid });
        Ok(())
    })())
}

/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn query_port<T: Driver>(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> i32 {
    // SAFETY: see `query_device`; `attr` is valid and zeroed.
    let (d, attr) = unsafe { (data::<T>(ib), &mut *attr) };
    ret(d.query_port(port).map(|p| p.fill(attr)))
}

/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn get_port_immutable<T: Driver>(
    _ib: *mut b::ib_device,
    _port: u32,
    imm: *mut b::ib_port_immutable,
) -> i32 {
    // SAFETY: ib_core passes a valid `ib_port_immutable` to fill.
    let imm = unsafe { &mut *imm };
    imm.pkey_tbl_len = 1;
    imm.gid_tbl_len = 1;
    // InfiniBand transport, no MAD support yet (QP0/QP1 need QPs): the MAD layer, SMI and
    // CM leave the port alone.
    imm.core_cap_flags = b::RDMA_CORE_CAP_PROT_IB;
    imm.max_mad_size = 0;
    0
}

/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn query_gid<T: Driver>(
    ib: *mut b::ib_device,
    port: u32,
    index: i32,
    gid: *mut b::ib_gid,
) -> i32 {
    if index != 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: see `query_device`.
    let guid = unsafe { data::<T>(ib) }.port_guid(port);
    let mut raw = [0u8; 16];
    raw[..2].copy_from_slice(&[0xfe, 0x80]);
    raw[8..].copy_from_slice(&guid.to_be_bytes());
    // SAFETY: ib_core passes a valid `ib_gid` to fill; `raw` is its 16-byte view.
    unsafe { (*gid).raw = raw };
    0
}

/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn query_pkey<T: Driver>(
    _ib: *mut b::ib_device,
    _port: u32,
    index: u16,
    pkey: *mut u16,
) -> i32 {
    if index != 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: ib_core passes a valid `u16` to fill.
    unsafe { *pkey = 0xffff };
    0
}

/// # Safety
///
/// See `query_device`; `out` has `IB_FW_VERSION_NAME_MAX` bytes.
unsafe extern "C" fn get_dev_fw_str<T: Driver>(ib: *mut b::ib_device, out: *mut ffi::c_char) {
    // SAFETY: see `query_device`; `out` is valid for its length (contract).
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

/// # Safety
///
/// See `query_device`; `uctx` is a zeroed `IbUcontext<T>`.
unsafe extern "C" fn alloc_ucontext<T: Driver>(
    uctx: *mut b::ib_ucontext,
    udata: *mut b::ib_udata,
) -> i32 {
    // Only userspace creates contexts, always with udata.
    // SAFETY: see the contract.
    let (Some(u), Some(raw)) = (unsafe { Udata::from_raw(udata) }, NonNull::new(uctx)) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `uctx` is valid, on one of our devices, for the call.
    let (d, ctx) = unsafe { (data::<T>((*uctx).device), UserContext::<T>::from_raw(raw)) };
    ret(d.alloc_ucontext(&ctx, &u).map(|v| {
        // SAFETY: `uctx` is an `IbUcontext<T>` (size_ib_ucontext), exclusively ours here.
        unsafe { (*uctx.cast::<IbUcontext<T>>()).data.write(v) };
    }))
}

/// # Safety
///
/// See `query_device`; `uctx` is one `alloc_ucontext` set up, deallocated once, after
/// every object and mapping of it is gone (or zapped, on disassociation).
unsafe extern "C" fn dealloc_ucontext<T: Driver>(uctx: *mut b::ib_ucontext) {
    // SAFETY: initialised by `alloc_ucontext`; this is its last use.
    unsafe { (*uctx.cast::<IbUcontext<T>>()).data.assume_init_drop() };
}

/// # Safety
///
/// See `dealloc_ucontext`; the context is live.
unsafe extern "C" fn disassociate_ucontext<T: Driver>(uctx: *mut b::ib_ucontext) {
    // SAFETY: a live context of ours, initialised by `alloc_ucontext`.
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
    // SAFETY: `vma` is valid for the call.
    let (exec, shared) = unsafe {
        (
            b::ordma_helper_vma_exec(vma),
            b::ordma_helper_vma_shared(vma),
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
    // SAFETY: every entry of our contexts is the `rdma` field of an `MmapEntry<T>`; `get`
    // took a reference, so it is live.
    let r = match unsafe { (*e.cast::<MmapEntry<T>>()).mapping } {
        // CAST: a page frame number of this machine fits `unsigned long`.
        // SAFETY: `uctx`, `vma` and `e` are valid; the helper maps the entry's pages.
        Mapping::IoUncached { pfn, pages } => unsafe {
            b::ordma_helper_mmap_io_noncached(uctx, vma, pfn as ffi::c_ulong, pages, e)
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
    // SAFETY: our entries are `MmapEntry<T>`s from `KBox::into_raw`; this is the last use.
    drop(unsafe { KBox::from_raw(e.cast::<MmapEntry<T>>()) });
}

/// # Safety
///
/// See `query_device`; `pd` is a zeroed `IbPd<T>`.
unsafe extern "C" fn alloc_pd<T: Driver>(pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> i32 {
    // SAFETY: see the contract.
    let (d, u) = unsafe { (data::<T>((*pd).device), Udata::from_raw(udata)) };
    ret(d.alloc_pd(u.as_ref()).map(|v| {
        // SAFETY: `pd` is an `IbPd<T>` (size_ib_pd), exclusively ours here.
        unsafe { (*pd.cast::<IbPd<T>>()).data.write(v) };
    }))
}

/// # Safety
///
/// See `query_device`; `pd` is one `alloc_pd` set up, deallocated once.
unsafe extern "C" fn dealloc_pd<T: Driver>(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> i32 {
    // SAFETY: initialised by `alloc_pd`; this is its last use. Dropping it frees it.
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
    // Only user CQs: a kernel caller has no bundle.
    // SAFETY: `attrs` is null or valid for the call (contract).
    let (udata, uctx) = unsafe {
        (
            b::ordma_helper_attrs_driver_udata(attrs),
            b::ordma_helper_attrs_ucontext(attrs),
        )
    };
    // SAFETY: the bundle's udata and context are valid for the call; the context is ours.
    let (Some(u), Some(uctx)) = (unsafe { Udata::from_raw(udata) }, unsafe {
        ucontext_data::<T>(uctx)
    }) else {
        return EOPNOTSUPP.to_errno();
    };
    // SAFETY: `cq` and `attr` are valid for the call; the device is one of ours.
    let (ib, d, events, init) = unsafe {
        let ib = (*cq).device;
        (
            NonNull::new(ib),
            data::<T>(ib),
            device::events::<T>(ib),
            CqInit {
                cqe: (*attr).cqe,
                flags: (*attr).flags,
            },
        )
    };
    let Some(ib) = ib else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, and the verb runs in its caller's process.
    let pages = unsafe { UserPages::new(ib) };
    let (v, created) = match d.create_cq(uctx, &init, &pages, &u) {
        Ok(r) => r,
        Err(e) => return e.to_errno(),
    };
    let Ok(cqe) = i32::try_from(created.cqe) else {
        return EINVAL.to_errno();
    };
    let icq = cq.cast::<IbCq<T>>();
    // SAFETY: `cq` is an `IbCq<T>` (size_ib_cq), exclusively ours until we return.
    unsafe {
        (*icq).data.write(v);
        (*icq).num = created.num;
        (*cq).cqe = cqe;
    }
    // SAFETY: the CQ is created, and `destroy_cq` removes it before dropping it.
    match unsafe { events.add_cq(created.num, NonNull::from(&mut *cq)) } {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: initialised above; ib_core frees the CQ after a failed create.
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
    // SAFETY: a live CQ of ours; no event reaches it once removed, then this is the last
    // use of its data.
    unsafe {
        let icq = cq.cast::<IbCq<T>>();
        device::events::<T>((*cq).device).remove_cq((*icq).num);
        (*icq).data.assume_init_drop();
    }
    0
}

/// # Safety
///
/// See `query_device`; `qp` is a zeroed `IbQp<T>` with ib_core's fields set (device, PD),
/// `init` the creator's request with live CQs of ours.
unsafe extern "C" fn create_qp<T: Driver>(
    qp: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> i32 {
    // Only user QPs: a kernel caller has no udata.
    // SAFETY: `udata` is null or valid for the call; its context is ours.
    let (Some(u), Some(uctx)) = (unsafe { Udata::from_raw(udata) }, unsafe {
        ucontext_data::<T>(b::ordma_helper_udata_ucontext(udata))
    }) else {
        return EOPNOTSUPP.to_errno();
    };
    // SAFETY: `qp` and `init` are valid for the call; the device, PD and CQs are ours and
    // live (ib_core holds references for the call).
    let (ib, d, events, pd, send_cq, recv_cq, req) = unsafe {
        let ib = (*qp).device;
        let pd = (*qp).pd;
        (
            NonNull::new(ib),
            data::<T>(ib),
            device::events::<T>(ib),
            (!pd.is_null()).then(|| (*pd.cast::<IbPd<T>>()).data.assume_init_ref()),
            cq_data::<T>((*init).send_cq),
            cq_data::<T>((*init).recv_cq),
            QpInit::from_raw(&*init),
        )
    };
    let (Some(ib), Some(pd), Some(send_cq), Some(recv_cq)) = (ib, pd, send_cq, recv_cq) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib` is registered, and the verb runs in its caller's process.
    let pages = unsafe { UserPages::new(ib) };
    let (v, num, caps) = match d.create_qp(uctx, pd, send_cq, recv_cq, &req, &pages, &u) {
        Ok(r) => r,
        Err(e) => return e.to_errno(),
    };
    let iqp = qp.cast::<IbQp<T>>();
    // SAFETY: `qp` is an `IbQp<T>` (size_ib_qp), exclusively ours until we return; `init`
    // is the caller's to read back.
    unsafe {
        (*iqp).data.write(v);
        (*iqp).sq_sig_all = req.sq_sig_all;
        (*qp).qp_num = num;
        caps.fill(&mut (*init).cap);
    }
    // SAFETY: the QP is created, and `destroy_qp` removes it before dropping it.
    match unsafe { events.add_qp(num, NonNull::from(&mut *qp)) } {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: initialised above; ib_core frees the QP after a failed create.
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
    // SAFETY: see the contract; the QP's data was initialised by `create_qp`.
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
    // SAFETY: see the contract.
    let (d, iqp) = unsafe { (data::<T>((*qp).device), &*qp.cast::<IbQp<T>>()) };
    // SAFETY: initialised by `create_qp`.
    let v = unsafe { iqp.data.assume_init_ref() };
    ret(d.query_qp(v).map(|(a, caps)| {
        // SAFETY: `attr` and `init` are valid for the call and ours to fill.
        let (attr, init) = unsafe { (&mut *attr, &mut *init) };
        a.fill(attr);
        caps.fill(&mut attr.cap);
        caps.fill(&mut init.cap);
        init.qp_type = iqp.ib.qp_type;
        init.send_cq = iqp.ib.send_cq;
        init.recv_cq = iqp.ib.recv_cq;
        init.sq_sig_type = if iqp.sq_sig_all {
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
    // SAFETY: a live QP of ours; no event reaches it once removed, then this is the last
    // use of its data.
    unsafe {
        device::events::<T>((*qp).device).remove_qp((*qp).qp_num);
        (*qp.cast::<IbQp<T>>()).data.assume_init_drop();
    }
    0
}

// Fast-path verbs: a user's provider runs them in its process; kernel QPs and CQs are not
// offered, so ib_core never calls these for ours.
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
    // No DMA handles (TPH steering) on this device.
    if !dmah.is_null() {
        return EOPNOTSUPP.to_ptr();
    }
    // SAFETY: see the contract; the memory is described on `pd`'s device (`ib`), in the
    // calling process, for this verb.
    unsafe {
        reg_mr::<T>(pd, udata, |ib| {
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
    let udata = unsafe { b::ordma_helper_attrs_driver_udata(attrs) };
    // SAFETY: see the contract; the memory is described on `pd`'s device (`ib`), in the
    // calling process (which resolves `fd`), for this verb.
    unsafe {
        reg_mr::<T>(pd, udata, |ib| {
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
/// See `reg_user_mr`; `mem` makes a `UserMemory` whose own contract the caller meets.
unsafe fn reg_mr<'a, T: Driver>(
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
    mem: impl FnOnce(NonNull<b::ib_device>) -> UserMemory<'a>,
) -> *mut b::ib_mr {
    // SAFETY: see the contract: `pd` is an `IbPd<T>` that `alloc_pd` initialised, live for
    // the call, on one of our registered devices.
    let (d, ib, pd_data, u) = unsafe {
        (
            data::<T>((*pd).device),
            NonNull::new((*pd).device),
            (*pd.cast::<IbPd<T>>()).data.assume_init_ref(),
            Udata::from_raw(udata),
        )
    };
    let Some(ib) = ib else {
        return EINVAL.to_ptr();
    };
    let mem = mem(ib);
    let mr = match KBox::new(
        IbMr::<T> {
            ib: Default::default(),
            data: core::mem::MaybeUninit::uninit(),
        },
        GFP_KERNEL,
    ) {
        Ok(mr) => mr,
        Err(e) => return Error::from(e).to_ptr(),
    };
    match d.reg_user_mr(pd_data, &mem, u.as_ref()) {
        Ok((v, keys)) => {
            let mr = KBox::into_raw(mr);
            // SAFETY: `mr` is ours until ib_core gets it below.
            unsafe {
                (*mr).data.write(v);
                (*mr).ib.lkey = keys.lkey;
                (*mr).ib.rkey = keys.rkey;
                &raw mut (*mr).ib
            }
        }
        Err(e) => e.to_ptr(),
    }
}
/// # Safety
///
/// See `query_device`; `mr` is one `reg_user_mr` returned, deregistered once.
unsafe extern "C" fn dereg_mr<T: Driver>(mr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> i32 {
    // SAFETY: `mr` is the first field of an `IbMr<T>` from `KBox::into_raw` in
    // `reg_user_mr`, with initialised data; this is its last use. Dropping the data
    // deregisters it from the hardware, then the allocation goes.
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
        owner: <crate::OrdmaModule as ModuleMetadata>::THIS_MODULE
            .as_ptr()
            .cast(),
        driver_id: b::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: b::ORDMA_UVERBS_ABI_VERSION,
        alloc_pd: Some(alloc_pd::<T>),
        alloc_ucontext: Some(alloc_ucontext::<T>),
        create_cq: Some(create_cq::<T>),
        create_qp: Some(create_qp::<T>),
        dealloc_pd: Some(dealloc_pd::<T>),
        dealloc_ucontext: Some(dealloc_ucontext::<T>),
        dereg_mr: Some(dereg_mr::<T>),
        destroy_cq: Some(destroy_cq::<T>),
        destroy_qp: Some(destroy_qp::<T>),
        disassociate_ucontext: Some(disassociate_ucontext::<T>),
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
