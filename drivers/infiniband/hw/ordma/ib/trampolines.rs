// SPDX-License-Identifier: GPL-2.0

//! Every `extern "C"` callback ib_core makes into a driver, and the ops table that names
//! them: here the device's, the ports', the user contexts', mmap's and the PDs'; the CQs'
//! and QPs' in `queues`, the SRQs' in `srq`, the MRs' in `mr`, the MWs' in `mw`, the AHs' in
//! `ah`.
//!
//! Each trampoline turns its raw pointers into safe types once, calls the [`Driver`], and
//! maps `Err(e)` to `e.to_errno()`; nothing else. Verbs no driver implements yet answer
//! `-EOPNOTSUPP` (ib_core requires their presence to register a device).

mod ah;
mod mr;
mod mw;
mod queues;
mod srq;
mod stats;

use core::{
    mem::{align_of, size_of, MaybeUninit},
    ptr::NonNull,
};

use kernel::{ffi, prelude::*, ModuleMetadata};

use super::{
    ah::IbAh,
    bindings as b,
    counter::IbCounter,
    cq::IbCq,
    device::data,
    driver::{format_fw_version, port_desc, Caller, Driver, UserCaller},
    mw::IbMw,
    pd::IbPd,
    qp::IbQp,
    srq::IbSrq,
    ucontext::{IbUcontext, Mapping, MmapEntry, UserContext},
    udata::Udata,
    umem::UserPages,
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
    // SAFETY: `ib` is one of `T`'s devices (every device with these ops is), live for the
    // call; ib_core hands `attr` zeroed and exclusively ours for the call.
    let (d, attr) = unsafe { (data::<T>(ib), &mut *attr) };
    let Some(desc) = port_desc(d, port) else {
        return EINVAL.to_errno();
    };
    ret(d.query_port(port).map(|p| p.fill(desc, attr)))
}

/// # Safety
///
/// See `query_device`; `imm` is valid.
unsafe extern "C" fn get_port_immutable<T: Driver>(
    ib: *mut b::ib_device,
    port: u32,
    imm: *mut b::ib_port_immutable,
) -> i32 {
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    let Some(desc) = port_desc(unsafe { data::<T>(ib) }, port) else {
        return EINVAL.to_errno();
    };
    // SAFETY: ib_core hands a valid `ib_port_immutable`, exclusively ours for the call.
    desc.fill(unsafe { &mut *imm });
    0
}

/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn get_link_layer<T: Driver>(
    ib: *mut b::ib_device,
    port: u32,
) -> b::rdma_link_layer {
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    match port_desc(unsafe { data::<T>(ib) }, port) {
        Some(desc) => desc.link_layer(),
        // ib_core asks only for its ports; its own default for an IB node.
        None => b::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
    }
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
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    let d = unsafe { data::<T>(ib) };
    let Some(desc) = port_desc(d, port) else {
        return EINVAL.to_errno();
    };
    // A RoCE port's table is ib_core's (it never asks).
    if desc.protocol.mac().is_some() {
        return EINVAL.to_errno();
    }
    let Some(index) = u16::try_from(index).ok().filter(|&i| i < desc.gid_tbl_len) else {
        return EINVAL.to_errno();
    };
    match d.query_gid(port, index) {
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
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    let d = unsafe { data::<T>(ib) };
    if port_desc(d, port).is_none_or(|desc| index >= desc.pkey_tbl_len) {
        return EINVAL.to_errno();
    }
    match d.query_pkey(port, index) {
        Ok(v) => {
            // SAFETY: ib_core hands a valid `u16` to fill.
            unsafe { *pkey = v };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The device, port and index of a RoCE GID table entry ib_core hands a driver, checked
/// against the device's ports.
///
/// # Safety
///
/// `attr` is valid for the call, its `device` one of `T`'s devices.
unsafe fn gid_entry<'a, T: Driver>(attr: *const b::ib_gid_attr) -> Option<(&'a T, u32, u32)> {
    // SAFETY: valid for the call (caller), its device one of `T`'s, live for the call.
    let (d, port, index) = unsafe { (data::<T>((*attr).device), (*attr).port_num, (*attr).index) };
    let desc = port_desc(d, port)?;
    (desc.protocol.mac().is_some() && u32::from(index) < u32::from(desc.gid_tbl_len)).then_some((
        d,
        port,
        u32::from(index),
    ))
}

/// # Safety
///
/// See `query_device`; `attr` is the new entry, valid for the call (ib_core holds its
/// table's lock: the call may sleep).
unsafe extern "C" fn add_gid<T: Driver>(
    attr: *const b::ib_gid_attr,
    _context: *mut *mut ffi::c_void,
) -> i32 {
    // SAFETY: as the function's contract says.
    let Some((d, port, index)) = (unsafe { gid_entry::<T>(attr) }) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `attr` is valid for the call; the GID is plain bytes.
    let (gid, gid_type) = unsafe { ((*attr).gid.raw, (*attr).gid_type) };
    // The port claims RoCEv2 only (`RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP`): ib_core makes no
    // other type of entry.
    if gid_type != b::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
        return EINVAL.to_errno();
    }
    ret(d.add_gid(port, index, &gid))
}

/// # Safety
///
/// See `add_gid`; `attr` is the entry being removed.
unsafe extern "C" fn del_gid<T: Driver>(
    attr: *const b::ib_gid_attr,
    _context: *mut *mut ffi::c_void,
) -> i32 {
    // SAFETY: as the function's contract says.
    let Some((d, port, index)) = (unsafe { gid_entry::<T>(attr) }) else {
        return EINVAL.to_errno();
    };
    ret(d.del_gid(port, index))
}

/// ib_core's own netdevice notifier calls this for a netdev event of a paired netdev,
/// instead of dispatching a port event from the netdev's state alone: the binding's
/// notifier ([`super::netdev`]) tells the driver ([`Driver::netdev_changed`]), which
/// dispatches from its link and the netdev's together.
///
/// # Safety
///
/// See `query_device`.
unsafe extern "C" fn report_port_event(
    _ib: *mut b::ib_device,
    _ndev: *mut b::net_device,
    _event: ffi::c_ulong,
) {
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
        add_gid: if T::HAS_ADD_GID {
            Some(add_gid::<T>)
        } else {
            None
        },
        alloc_hw_port_stats: if T::HAS_HW_STATS {
            Some(stats::alloc_hw_port_stats::<T>)
        } else {
            None
        },
        alloc_mw: Some(mw::alloc_mw::<T>),
        counter_alloc_stats: T::HAS_COUNTER_BIND_QP.then_some(stats::counter_alloc_stats::<T>),
        counter_bind_qp: T::HAS_COUNTER_BIND_QP.then_some(stats::counter_bind_qp::<T>),
        counter_dealloc: T::HAS_COUNTER_BIND_QP.then_some(stats::counter_dealloc::<T>),
        counter_init: T::HAS_COUNTER_BIND_QP.then_some(stats::counter_init::<T>),
        counter_unbind_qp: T::HAS_COUNTER_BIND_QP.then_some(stats::counter_unbind_qp::<T>),
        counter_update_stats: T::HAS_COUNTER_BIND_QP.then_some(stats::counter_update_stats::<T>),
        alloc_pd: Some(alloc_pd::<T>),
        alloc_ucontext: Some(alloc_ucontext::<T>),
        create_ah: Some(ah::create_ah::<T>),
        create_cq: Some(queues::create_cq::<T>),
        create_qp: Some(queues::create_qp::<T>),
        create_srq: Some(srq::create_srq::<T>),
        create_user_ah: Some(ah::create_ah::<T>),
        dealloc_mw: Some(mw::dealloc_mw::<T>),
        dealloc_pd: Some(dealloc_pd::<T>),
        dealloc_ucontext: Some(dealloc_ucontext::<T>),
        del_gid: if T::HAS_DEL_GID {
            Some(del_gid::<T>)
        } else {
            None
        },
        dereg_mr: Some(mr::dereg_mr::<T>),
        destroy_ah: Some(ah::destroy_ah::<T>),
        destroy_cq: Some(queues::destroy_cq::<T>),
        destroy_qp: Some(queues::destroy_qp::<T>),
        destroy_srq: Some(srq::destroy_srq::<T>),
        disassociate_ucontext: if T::HAS_DISASSOCIATE_UCONTEXT {
            Some(disassociate_ucontext::<T>)
        } else {
            None
        },
        get_dev_fw_str: Some(get_dev_fw_str::<T>),
        get_hw_stats: if T::HAS_HW_STATS {
            Some(stats::get_hw_stats::<T>)
        } else {
            None
        },
        get_dma_mr: Some(mr::get_dma_mr),
        get_link_layer: Some(get_link_layer::<T>),
        get_port_immutable: Some(get_port_immutable::<T>),
        mmap: Some(mmap::<T>),
        mmap_free: Some(mmap_free::<T>),
        modify_qp: Some(queues::modify_qp::<T>),
        modify_srq: Some(srq::modify_srq::<T>),
        poll_cq: Some(queues::poll_cq),
        post_recv: Some(queues::post_recv),
        post_send: Some(queues::post_send),
        post_srq_recv: Some(srq::post_srq_recv),
        query_device: Some(query_device::<T>),
        query_gid: Some(query_gid::<T>),
        query_pkey: Some(query_pkey::<T>),
        query_port: Some(query_port::<T>),
        query_qp: Some(queues::query_qp::<T>),
        query_srq: Some(srq::query_srq::<T>),
        reg_user_mr: Some(mr::reg_user_mr::<T>),
        rereg_user_mr: Some(mr::rereg_user_mr::<T>),
        report_port_event: if T::HAS_NETDEV_CHANGED {
            Some(report_port_event)
        } else {
            None
        },
        reg_user_mr_dmabuf: Some(mr::reg_user_mr_dmabuf::<T>),
        req_notify_cq: Some(queues::req_notify_cq),
        resize_user_cq: Some(queues::resize_user_cq::<T>),
        size_ib_ah: const { object_size::<IbAh<T>>() },
        size_ib_cq: const { object_size::<IbCq<T>>() },
        size_ib_mw: const { object_size::<IbMw<T>>() },
        size_ib_pd: const { object_size::<IbPd<T>>() },
        size_ib_qp: const { object_size::<IbQp<T>>() },
        size_ib_srq: const { object_size::<IbSrq<T>>() },
        size_ib_ucontext: const { object_size::<IbUcontext<T>>() },
        size_rdma_counter: const { object_size::<IbCounter<T>>() },
        ..Default::default()
    };
    // Every verb with udata reads it with ib_core's helpers (`Udata`), answers with
    // `ib_respond_udata`: tell userspace (IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA).
    ops.set_uverbs_robust_udata(1);
    ops
}
