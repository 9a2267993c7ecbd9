// SPDX-License-Identifier: GPL-2.0

//! Every `extern "C"` callback ib_core makes into ordma, and the ops table that names them.
//!
//! Each trampoline turns its raw pointers into safe types once, calls the driver's
//! [`Verbs`], and maps `Err(e)` to `e.to_errno()`. Verbs ordma does not implement yet answer
//! `-EOPNOTSUPP` (ib_core requires their presence to register a device).

use core::mem::size_of;

use kernel::{ffi, page::PAGE_SHIFT, page::PAGE_SIZE, prelude::*, ModuleMetadata};

use super::{
    bindings as b,
    device::{IbDevice, Verbs},
    user::{DbEntry, IbPd, IbUcontext, Udata},
};

/// The driver data behind an `ib_device` ib_core hands us.
///
/// # Safety
///
/// `ib` must be the `ib` field of a live `IbDevice<T>` (every `ib_device` whose ops are
/// `ops::<T>()` is one: `Registration::new` allocates it so) with initialised `data`.
unsafe fn data<'a, T: Verbs>(ib: *mut b::ib_device) -> &'a T {
    // SAFETY: `ib` is the first field of a `#[repr(C)]` `IbDevice<T>` (caller), so the cast
    // gives the containing struct, whose `data` is initialised and outlives the callback.
    unsafe { &(*ib.cast::<IbDevice<T>>()).data }
}

fn errno(e: Error) -> i32 {
    e.to_errno()
}

/// 0 or the negative errno, as ib_core wants it.
fn ret(r: Result) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn query_device<T: Verbs>(
    ib: *mut b::ib_device,
    attr: *mut b::ib_device_attr,
    udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: ib_core calls this with a device of ours (see `data`).
    let d = unsafe { data::<T>(ib) };
    // SAFETY: ib_core's `udata` is null or valid for the call.
    if let Some(u) = unsafe { Udata::from_raw(udata) } {
        // No driver request is defined: input we do not understand must be zero.
        if let Err(e) = u.expect_empty() {
            return errno(e);
        }
    }
    let a = match d.query_device() {
        Ok(a) => a,
        Err(e) => return errno(e),
    };
    // SAFETY: ib_core passes a valid, zeroed `ib_device_attr` to fill.
    let attr = unsafe { &mut *attr };
    attr.fw_ver = a.fw_ver;
    // SAFETY: `ib` is valid for the call (as above).
    attr.sys_image_guid = unsafe { (*ib).node_guid };
    attr.max_mr_size = u64::MAX;
    attr.page_size_cap = a.page_size_cap;
    attr.vendor_id = a.vendor_id;
    attr.vendor_part_id = a.vendor_part_id;
    attr.hw_ver = a.hw_ver;
    attr.max_qp = a.max_qp;
    attr.max_qp_wr = a.max_qp_wr;
    attr.max_send_sge = a.max_sge;
    attr.max_recv_sge = a.max_sge;
    attr.max_sge_rd = a.max_sge;
    attr.max_cq = a.max_cq;
    attr.max_cqe = a.max_cqe;
    attr.max_mr = a.max_mr;
    attr.max_pd = a.max_pd;
    attr.max_pkeys = 1;
    0
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn query_port<T: Verbs>(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> i32 {
    // SAFETY: ib_core calls this with a device of ours (see `data`).
    let d = unsafe { data::<T>(ib) };
    let p = match d.query_port(port) {
        Ok(p) => p,
        Err(e) => return errno(e),
    };
    // SAFETY: ib_core passes a valid, zeroed `ib_port_attr` to fill.
    let attr = unsafe { &mut *attr };
    if p.active {
        attr.state = b::ib_port_state_IB_PORT_ACTIVE;
        attr.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8;
    } else {
        attr.state = b::ib_port_state_IB_PORT_DOWN;
        attr.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8;
    }
    attr.max_mtu = b::ib_mtu::from(p.max_mtu);
    attr.active_mtu = b::ib_mtu::from(p.active_mtu);
    attr.gid_tbl_len = 1;
    attr.pkey_tbl_len = 1;
    attr.max_msg_sz = p.max_msg_sz;
    attr.lid = u32::from(p.lid);
    attr.sm_lid = u32::from(p.sm_lid);
    attr.active_width = p.width;
    attr.active_speed = u16::from(p.speed);
    0
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn get_port_immutable<T: Verbs>(
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
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn query_gid<T: Verbs>(
    ib: *mut b::ib_device,
    port: u32,
    index: i32,
    gid: *mut b::ib_gid,
) -> i32 {
    if index != 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: ib_core calls this with a device of ours (see `data`).
    let guid = unsafe { data::<T>(ib) }.port_guid(port);
    let mut raw = [0u8; 16];
    raw[0] = 0xfe;
    raw[1] = 0x80;
    raw[8..].copy_from_slice(&guid.to_be_bytes());
    // SAFETY: ib_core passes a valid `ib_gid` to fill; `raw` is its 16-byte view.
    unsafe { (*gid).raw = raw };
    0
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn query_pkey<T: Verbs>(
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
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn get_dev_fw_str<T: Verbs>(ib: *mut b::ib_device, out: *mut ffi::c_char) {
    // SAFETY: ib_core calls this with a device of ours (see `data`).
    let Ok(a) = unsafe { data::<T>(ib) }.query_device() else {
        return;
    };
    let mut w = Truncating {
        buf: [0u8; b::IB_FW_VERSION_NAME_MAX as usize],
        len: 0,
    };
    let _ = core::fmt::Write::write_fmt(
        &mut w,
        format_args!(
            "{}.{}.{}",
            a.fw_ver >> 32,
            (a.fw_ver >> 16) & 0xffff,
            a.fw_ver & 0xffff
        ),
    );
    let (buf, n) = (w.buf, w.len);
    // SAFETY: ib_core passes a buffer of IB_FW_VERSION_NAME_MAX bytes; we write `n + 1`
    // bytes at most, `n < IB_FW_VERSION_NAME_MAX`, the last a NUL.
    unsafe {
        core::ptr::copy_nonoverlapping(buf.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
    }
}

/// Formats into a fixed buffer, keeping one byte for the NUL and dropping what does not fit.
struct Truncating<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> core::fmt::Write for Truncating<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &c in s.as_bytes() {
            if self.len + 1 >= N {
                break;
            }
            self.buf[self.len] = c;
            self.len += 1;
        }
        Ok(())
    }
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`: `uctx` is a zeroed allocation of
/// `size_ib_ucontext` bytes (an `IbUcontext`) on one of our devices, `udata` valid.
unsafe extern "C" fn alloc_ucontext<T: Verbs>(
    uctx: *mut b::ib_ucontext,
    udata: *mut b::ib_udata,
) -> i32 {
    // SAFETY: `udata` is null or valid for the call.
    let Some(udata) = (unsafe { Udata::from_raw(udata) }) else {
        // Only userspace creates contexts, always with udata.
        return EINVAL.to_errno();
    };
    // SAFETY: `uctx` is valid and on one of our devices (contract).
    let d = unsafe { data::<T>((*uctx).device) };
    ret((|| {
        let cmd: b::ordma_ibv_alloc_ucontext_cmd = udata.read()?;
        if cmd.comp_mask != 0 || cmd.reserved_04 != 0 {
            return Err(EINVAL);
        }
        let page = d.alloc_doorbell()?;
        let entry = DbEntry {
            rdma: Default::default(),
            pfn: page.pfn,
            index: page.index,
        };
        let entry = match KBox::new(entry, GFP_KERNEL) {
            Ok(e) => KBox::into_raw(e),
            Err(_) => {
                d.free_doorbell(page.index);
                return Err(ENOMEM);
            }
        };
        // SAFETY: `uctx` is valid; `entry` is a fresh, zero-initialised entry of ours,
        // which ib_core keeps (and hands to `mmap_free`) once inserted.
        let r = unsafe { b::rdma_user_mmap_entry_insert(uctx, &mut (*entry).rdma, PAGE_SIZE) };
        if r != 0 {
            // SAFETY: not inserted: still only ours, from `KBox::into_raw` above.
            drop(unsafe { KBox::from_raw(entry) });
            d.free_doorbell(page.index);
            return Err(Error::from_errno(r));
        }
        // From here on the entry owns the page: removing it frees both (`mmap_free`).
        let resp = b::ordma_ibv_alloc_ucontext_resp {
            comp_mask: 0,
            db_page_index: page.index,
            // CAST: `usize` to `u64` is lossless here (64-bit `unsigned long`).
            // SAFETY: `entry` is live (we hold the context's reference).
            db_mmap_key: (unsafe { (*entry).rdma.start_pgoff } as u64) << PAGE_SHIFT,
            db_page_size: b::ORDMA_DB_PAGE_SIZE,
            reserved_14: 0,
        };
        if let Err(e) = udata.respond(&resp) {
            // SAFETY: the entry is inserted and not yet removed; ib_core frees the context
            // without `dealloc_ucontext` when this fails, so this is the only removal.
            unsafe { b::rdma_user_mmap_entry_remove(&mut (*entry).rdma) };
            return Err(e);
        }
        // SAFETY: `uctx` is the `ib` field of an `IbUcontext` (size_ib_ucontext).
        unsafe { (*uctx.cast::<IbUcontext>()).db = entry };
        Ok(())
    })())
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with a context `alloc_ucontext` set up,
/// once, after every object and mapping of it is gone (or zapped, on disassociation).
unsafe extern "C" fn dealloc_ucontext(uctx: *mut b::ib_ucontext) {
    // SAFETY: `uctx` is the `ib` field of a live `IbUcontext`.
    let db = unsafe { (*uctx.cast::<IbUcontext>()).db };
    if !db.is_null() {
        // SAFETY: inserted by `alloc_ucontext`, removed only here.
        unsafe { b::rdma_user_mmap_entry_remove(&mut (*db).rdma) };
    }
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, for a user context of ours and a VMA
/// being created on its uverbs file.
unsafe extern "C" fn mmap(uctx: *mut b::ib_ucontext, vma: *mut b::vm_area_struct) -> i32 {
    // Doorbells are written, never executed; and a private copy of I/O memory is no
    // mapping of it.
    // SAFETY: `vma` is valid for the call.
    if unsafe { b::ordma_helper_vma_exec(vma) } {
        return EPERM.to_errno();
    }
    // SAFETY: as above.
    if !unsafe { b::ordma_helper_vma_shared(vma) } {
        return EINVAL.to_errno();
    }
    // The key (the offset) must name an entry of this context, and the length be its.
    // SAFETY: `uctx` and `vma` are valid for the call.
    let e = unsafe { b::rdma_user_mmap_entry_get(uctx, vma) };
    if e.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: every entry of our contexts is the `rdma` field of a `DbEntry`; `get` took
    // a reference, so it is live.
    let pfn = unsafe { (*e.cast::<DbEntry>()).pfn };
    // CAST: a page frame number of this machine fits `unsigned long`.
    // SAFETY: `uctx`, `vma` and `e` are valid; the helper maps one uncached page.
    let r = unsafe { b::ordma_helper_mmap_io_noncached(uctx, vma, pfn as ffi::c_ulong, e) };
    // SAFETY: drops the reference `get` took (the mapping holds its own).
    unsafe { b::rdma_user_mmap_entry_put(e) };
    r
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, when the last reference to one of our
/// entries goes; the entry's context and device are still live.
unsafe extern "C" fn mmap_free<T: Verbs>(e: *mut b::rdma_user_mmap_entry) {
    // SAFETY: as in `mmap`: our entries are `DbEntry`s from `KBox::into_raw`, and this is
    // the last use of this one.
    let entry = unsafe { KBox::from_raw(e.cast::<DbEntry>()) };
    // SAFETY: the entry's context, and its device (one of ours), are live (contract).
    let d = unsafe { data::<T>((*entry.rdma.ucontext).device) };
    d.free_doorbell(entry.index);
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, when the device goes away under a live
/// context.
unsafe extern "C" fn disassociate_ucontext(_uctx: *mut b::ib_ucontext) {
    // Nothing of ours to stop: ib_core zaps the context's mappings itself and then
    // destroys its objects (PDs) and the context through the usual verbs, while the NIC
    // still runs. Having this op is what lets unbind and rmmod proceed under live users.
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`: `pd` is a zeroed allocation of
/// `size_ib_pd` bytes (an `IbPd`) on one of our devices; `udata` null or valid.
unsafe extern "C" fn alloc_pd<T: Verbs>(pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> i32 {
    // SAFETY: `pd` is valid, on one of our devices (contract).
    let d = unsafe { data::<T>((*pd).device) };
    // SAFETY: `udata` is null or valid for the call.
    let udata = unsafe { Udata::from_raw(udata) };
    ret((|| {
        if let Some(u) = &udata {
            u.expect_empty()?;
        }
        let pdn = d.alloc_pd()?;
        if let Some(u) = &udata {
            let resp = b::ordma_ibv_alloc_pd_resp { comp_mask: 0, pdn };
            if let Err(e) = u.respond(&resp) {
                d.dealloc_pd(pdn);
                return Err(e);
            }
        }
        // SAFETY: `pd` is the `ib` field of an `IbPd` (size_ib_pd).
        unsafe { (*pd.cast::<IbPd>()).pdn = pdn };
        Ok(())
    })())
}

/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, once, for a PD `alloc_pd` set up.
unsafe extern "C" fn dealloc_pd<T: Verbs>(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> i32 {
    // SAFETY: `pd` is the `ib` field of a live `IbPd` on one of our devices.
    let (d, pdn) = unsafe { (data::<T>((*pd).device), (*pd.cast::<IbPd>()).pdn) };
    d.dealloc_pd(pdn);
    0
}

// Verbs that need objects the NIC does not have yet. ib_core requires them to register.
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn create_qp(
    _qp: *mut b::ib_qp,
    _attr: *mut b::ib_qp_init_attr,
    _udata: *mut b::ib_udata,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn modify_qp(
    _qp: *mut b::ib_qp,
    _attr: *mut b::ib_qp_attr,
    _mask: i32,
    _udata: *mut b::ib_udata,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn destroy_qp(_qp: *mut b::ib_qp, _udata: *mut b::ib_udata) -> i32 {
    0
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn post_send(
    _qp: *mut b::ib_qp,
    _wr: *const b::ib_send_wr,
    _bad: *mut *const b::ib_send_wr,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn post_recv(
    _qp: *mut b::ib_qp,
    _wr: *const b::ib_recv_wr,
    _bad: *mut *const b::ib_recv_wr,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn create_cq(
    _cq: *mut b::ib_cq,
    _attr: *const b::ib_cq_init_attr,
    _attrs: *mut b::uverbs_attr_bundle,
) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn destroy_cq(_cq: *mut b::ib_cq, _udata: *mut b::ib_udata) -> i32 {
    0
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn poll_cq(_cq: *mut b::ib_cq, _n: i32, _wc: *mut b::ib_wc) -> i32 {
    EOPNOTSUPP.to_errno()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
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
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn get_dma_mr(_pd: *mut b::ib_pd, _access: i32) -> *mut b::ib_mr {
    mr_unsupported()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn reg_user_mr(
    _pd: *mut b::ib_pd,
    _start: u64,
    _len: u64,
    _virt: u64,
    _access: i32,
    _dmah: *mut b::ib_dmah,
    _udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    mr_unsupported()
}
/// # Safety
///
/// Only ib_core calls this, through `ops::<T>()`, with the pointers the `ib_device_ops`
/// contract gives: valid for the call, and any `ib_device` one of ours.
unsafe extern "C" fn dereg_mr(_mr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> i32 {
    0
}

/// The ops table for a driver with verbs `T`, sorted as ib_device_ops is.
pub(super) fn ops<T: Verbs>() -> b::ib_device_ops {
    b::ib_device_ops {
        owner: <crate::OrdmaModule as ModuleMetadata>::THIS_MODULE
            .as_ptr()
            .cast(),
        driver_id: b::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: b::ORDMA_UVERBS_ABI_VERSION,
        alloc_pd: Some(alloc_pd::<T>),
        alloc_ucontext: Some(alloc_ucontext::<T>),
        create_cq: Some(create_cq),
        create_qp: Some(create_qp),
        dealloc_pd: Some(dealloc_pd::<T>),
        dealloc_ucontext: Some(dealloc_ucontext),
        dereg_mr: Some(dereg_mr),
        destroy_cq: Some(destroy_cq),
        destroy_qp: Some(destroy_qp),
        disassociate_ucontext: Some(disassociate_ucontext),
        get_dev_fw_str: Some(get_dev_fw_str::<T>),
        get_dma_mr: Some(get_dma_mr),
        get_port_immutable: Some(get_port_immutable::<T>),
        mmap: Some(mmap),
        mmap_free: Some(mmap_free::<T>),
        modify_qp: Some(modify_qp),
        poll_cq: Some(poll_cq),
        post_recv: Some(post_recv),
        post_send: Some(post_send),
        query_device: Some(query_device::<T>),
        query_gid: Some(query_gid::<T>),
        query_pkey: Some(query_pkey::<T>),
        query_port: Some(query_port::<T>),
        reg_user_mr: Some(reg_user_mr),
        req_notify_cq: Some(req_notify_cq),
        size_ib_cq: size_of::<b::ib_cq>(),
        size_ib_pd: size_of::<IbPd>(),
        size_ib_qp: size_of::<b::ib_qp>(),
        size_ib_ucontext: size_of::<IbUcontext>(),
        ..Default::default()
    }
}
