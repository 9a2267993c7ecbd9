//! The user context: opening a device (GET_CONTEXT with ordma's driver data, the doorbell
//! page mapped), closing it, and the query verbs.

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr::{self, null_mut, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};

use ordma_hw::{DB_PAGE_SIZE, MAX_QUEUE_NUM};

use crate::abi::{self, VerbsContextOps};
use crate::barrier::mmio_write32;
use crate::qp::Qp;
use crate::{ah, cq, cq_ex, errno, mr, mw, pd, qp, set_errno, srq, sys};

/// An open ordma device: libibverbs' context, the doorbell page and the QPs by number.
#[repr(C)]
pub(crate) struct Context {
    pub(crate) vctx: sys::verbs_context,
    /// The context's doorbell page, mapped write-only.
    pub(crate) db: *mut c_void,
    pub(crate) db_len: usize,
    /// Its index in the NIC's doorbell BAR.
    pub(crate) db_page: u32,
    /// The context's QPs by QPN, for `poll_cq` (written in `alloc_context`, dropped in
    /// `free_context`).
    pub(crate) qps: QpTable,
}

/// Where a doorbell write goes: the mapped doorbell page, or a recorder in tests.
pub(crate) trait Doorbell {
    /// Writes `value` to the 32-bit doorbell at byte `offset` of the page (one store).
    fn ring(&self, offset: usize, value: u32);
}

/// A context's doorbell page as mapped.
///
/// # Invariants
///
/// `base` is valid for 4-byte aligned 32-bit writes over [`DB_PAGE_SIZE`] bytes while the
/// value exists.
#[derive(Clone, Copy)]
pub(crate) struct DbPage {
    base: NonNull<u32>,
}

impl DbPage {
    /// The doorbell page at `base`; `None` if it is null.
    ///
    /// # Safety
    ///
    /// `base` is valid for aligned 32-bit writes over [`DB_PAGE_SIZE`] bytes, page
    /// aligned, for as long as the result is used.
    pub(crate) unsafe fn new(base: *mut c_void) -> Option<Self> {
        // INVARIANT: the caller's promise.
        NonNull::new(base.cast::<u32>()).map(|base| Self { base })
    }
}

impl Doorbell for DbPage {
    fn ring(&self, offset: usize, value: u32) {
        if offset % 4 != 0 || offset + 4 > DB_PAGE_SIZE {
            // Our offsets are the constants of `defs/doorbell.rs`: never taken.
            return;
        }
        // SAFETY: inside the page and aligned (checked), which is valid (invariant).
        unsafe { mmio_write32(self.base.as_ptr().add(offset / 4), value) };
    }
}

/// Entries per level of the [`QpTable`].
const QP_TABLE_FANOUT: usize = 256;

/// One second-level block of the [`QpTable`].
struct QpTableLeaf([AtomicPtr<Qp>; QP_TABLE_FANOUT]);

/// The context's QPs by number, as mlx5's `qp_table`: two levels of 256 (QPNs are below
/// 2^16), the second allocated when a QP first needs it (at create, never on the fast
/// path) and kept until the context closes. Lookups take no lock.
///
/// A QP is inserted after CREATE_QP and removed after DESTROY_QP while its CQs' locks are
/// held, so `poll_cq`, which looks QPs up under its CQ's lock, never sees one freed.
///
/// All-zero memory is an empty table (the context comes zeroed from libibverbs).
pub(crate) struct QpTable {
    dirs: [AtomicPtr<QpTableLeaf>; QP_TABLE_FANOUT],
}

impl QpTable {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self {
            dirs: core::array::from_fn(|_| AtomicPtr::new(null_mut())),
        }
    }

    /// The slot of `qpn`, allocating its block if `create`; `None` for a QPN above 2^16 - 1
    /// (or a block not there).
    fn slot(&self, qpn: u32, create: bool) -> Option<&AtomicPtr<Qp>> {
        if qpn > MAX_QUEUE_NUM {
            return None;
        }
        // CAST: below 2^16.
        let (hi, lo) = (
            qpn as usize / QP_TABLE_FANOUT,
            qpn as usize % QP_TABLE_FANOUT,
        );
        let dir = self.dirs.get(hi)?;
        let mut leaf = dir.load(Ordering::Acquire);
        if leaf.is_null() {
            if !create {
                return None;
            }
            let new = Box::into_raw(Box::new(QpTableLeaf(core::array::from_fn(|_| {
                AtomicPtr::new(null_mut())
            }))));
            leaf = match dir.compare_exchange(null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => new,
                Err(other) => {
                    // SAFETY: `new` is ours, never published.
                    drop(unsafe { Box::from_raw(new) });
                    other
                }
            };
        }
        // SAFETY: a published block lives until the table is dropped.
        unsafe { (*leaf).0.get(lo) }
    }

    /// Records `qp` as `qpn`; `EPROTO` for a QPN the NIC cannot have given.
    pub(crate) fn insert(&self, qpn: u32, qp: *mut Qp) -> Result<(), c_int> {
        self.slot(qpn, true)
            .ok_or(libc::EPROTO)?
            .store(qp, Ordering::Release);
        Ok(())
    }

    /// Forgets `qpn` if it is still `qp` (a new QP may have the number already).
    pub(crate) fn remove(&self, qpn: u32, qp: *mut Qp) {
        if let Some(s) = self.slot(qpn, false) {
            let _ = s.compare_exchange(qp, null_mut(), Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// The QP numbered `qpn`, if this context has it.
    pub(crate) fn get(&self, qpn: u32) -> Option<NonNull<Qp>> {
        NonNull::new(self.slot(qpn, false)?.load(Ordering::Acquire))
    }
}

impl Drop for QpTable {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let leaf = dir.swap(null_mut(), Ordering::AcqRel);
            if !leaf.is_null() {
                // SAFETY: from `Box::into_raw` in `slot`, freed only here.
                drop(unsafe { Box::from_raw(leaf) });
            }
        }
    }
}

impl Context {
    /// The `Context` around one of our `ibv_context`s.
    pub(crate) fn from_ibv(ctx: *mut sys::ibv_context) -> *mut Context {
        verbs_ctx(ctx).cast()
    }
}

/// The request and response of GET_CONTEXT with ordma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct GetContextCmd {
    pub(crate) ibv: abi::IbvGetContext,
    pub(crate) drv: sys::ordma_ibv_alloc_ucontext_cmd,
}
#[repr(C)]
#[derive(Default)]
pub(crate) struct GetContextResp {
    pub(crate) ibv: sys::ib_uverbs_get_context_resp,
    pub(crate) drv: sys::ordma_ibv_alloc_ucontext_resp,
}

/// The `verbs_context` around an `ibv_context` (`verbs_get_ctx()`).
pub(crate) fn verbs_ctx(ctx: *mut sys::ibv_context) -> *mut sys::verbs_context {
    ctx.cast::<u8>()
        .wrapping_sub(offset_of!(sys::verbs_context, context))
        .cast()
}

/// # Safety
///
/// libibverbs calls this with one of our devices and the open uverbs file `cmd_fd`.
pub(crate) unsafe extern "C" fn alloc_context(
    dev: *mut sys::ibv_device,
    cmd_fd: c_int,
    _private: *mut c_void,
) -> *mut sys::verbs_context {
    // `vctx` is at offset 0 of `Context`: the offset argument is a null pointer.
    // SAFETY: `dev` and `cmd_fd` are valid (contract); the size covers `Context`.
    let ctx = unsafe {
        abi::_verbs_init_and_alloc_context(
            dev,
            cmd_fd,
            size_of::<Context>(),
            null_mut(),
            abi::RDMA_DRIVER_UNKNOWN,
        )
    }
    .cast::<Context>();
    if ctx.is_null() {
        return null_mut();
    }
    // SAFETY: `ctx` is a zeroed `Context` (an empty table), ours alone.
    unsafe { ptr::addr_of_mut!((*ctx).qps).write(QpTable::new()) };
    // SAFETY: `ctx` is a zeroed `Context` with its `verbs_context` initialised.
    match unsafe { open(ctx, cmd_fd) } {
        // SAFETY: as above.
        Ok(()) => unsafe { ptr::addr_of_mut!((*ctx).vctx) },
        Err(e) => {
            // SAFETY: as above; nothing else holds `ctx`.
            unsafe {
                ptr::drop_in_place(ptr::addr_of_mut!((*ctx).qps));
                abi::verbs_uninit_context(ptr::addr_of_mut!((*ctx).vctx));
                libc::free(ctx.cast());
            }
            set_errno(e);
            null_mut()
        }
    }
}

/// Creates the kernel's context and maps its doorbell page.
///
/// # Safety
///
/// `ctx` is a fresh context from `_verbs_init_and_alloc_context` on `cmd_fd`.
unsafe fn open(ctx: *mut Context, cmd_fd: c_int) -> Result<(), c_int> {
    let mut cmd = GetContextCmd::default();
    let mut resp = GetContextResp::default();
    // SAFETY: `ctx` is valid; the buffers are ours and their sizes their own.
    let r = unsafe {
        abi::ibv_cmd_get_context(
            ptr::addr_of_mut!((*ctx).vctx),
            &mut cmd.ibv,
            size_of::<GetContextCmd>(),
            &mut resp.ibv,
            size_of::<GetContextResp>(),
        )
    };
    if r != 0 {
        return Err(r);
    }
    let drv = &resp.drv;
    if drv.db_page_size != sys::ORDMA_DB_PAGE_SIZE {
        // A kernel speaking another contract: do not guess.
        return Err(libc::EPROTO);
    }
    let len = drv.db_page_size as usize;
    let off = libc::off_t::try_from(drv.db_mmap_key).map_err(|_| libc::EPROTO)?;
    // SAFETY: maps the page the kernel named; we check the result.
    let db = unsafe {
        libc::mmap(
            null_mut(),
            len,
            libc::PROT_WRITE,
            libc::MAP_SHARED,
            cmd_fd,
            off,
        )
    };
    if db == libc::MAP_FAILED {
        return Err(errno());
    }
    // SAFETY: `ctx` is valid and ours.
    unsafe {
        (*ctx).db = db;
        (*ctx).db_len = len;
        (*ctx).db_page = drv.db_page_index;
    }
    // SAFETY: `verbs_set_ops` copies the non-null ops into the context.
    unsafe { abi::verbs_set_ops(ptr::addr_of_mut!((*ctx).vctx), &context_ops()) };
    Ok(())
}

/// The verbs of an ordma context; the empty slots are libibverbs' `EOPNOTSUPP`. One line
/// per verb, alphabetical like the struct, each from the file of its object.
fn context_ops() -> VerbsContextOps {
    VerbsContextOps {
        alloc_mw: Some(mw::alloc_mw),
        alloc_pd: Some(pd::alloc_pd),
        bind_mw: Some(mw::bind_mw),
        create_ah: Some(ah::create_ah),
        create_cq: Some(cq::create_cq),
        create_cq_ex: Some(cq_ex::create_cq_ex),
        create_qp: Some(qp::create_qp),
        create_qp_ex: Some(qp::create_qp_ex),
        create_srq: Some(srq::create_srq),
        dealloc_mw: Some(mw::dealloc_mw),
        dealloc_pd: Some(pd::dealloc_pd),
        dereg_mr: Some(mr::dereg_mr),
        destroy_ah: Some(ah::destroy_ah),
        destroy_cq: Some(cq::destroy_cq),
        destroy_qp: Some(qp::destroy_qp),
        destroy_srq: Some(srq::destroy_srq),
        free_context: Some(free_context),
        modify_qp: Some(qp::modify_qp),
        modify_srq: Some(srq::modify_srq),
        poll_cq: Some(cq::poll_cq),
        post_recv: Some(qp::post_recv),
        post_send: Some(qp::post_send),
        post_srq_recv: Some(srq::post_srq_recv),
        query_device_ex: Some(query_device_ex),
        query_port: Some(query_port),
        query_qp: Some(qp::query_qp),
        query_srq: Some(srq::query_srq),
        reg_dmabuf_mr: Some(mr::reg_dmabuf_mr),
        reg_mr: Some(mr::reg_mr),
        req_notify_cq: Some(cq::req_notify_cq),
        rereg_mr: Some(mr::rereg_mr),
        resize_cq: Some(cq::resize_cq),
        ..Default::default()
    }
}

/// # Safety
///
/// libibverbs calls this once, for a context `alloc_context` returned, with every object
/// of it destroyed.
unsafe extern "C" fn free_context(ibctx: *mut sys::ibv_context) {
    let ctx = Context::from_ibv(ibctx);
    // SAFETY: `ctx` is a `Context` from `alloc_context` (its `vctx` is at offset 0); the
    // mapping and the table are ours (every QP is destroyed).
    unsafe {
        libc::munmap((*ctx).db, (*ctx).db_len);
        ptr::drop_in_place(ptr::addr_of_mut!((*ctx).qps));
        abi::verbs_uninit_context(ptr::addr_of_mut!((*ctx).vctx));
        libc::free(ctx.cast());
    }
}

/// Writes `major.minor.sub` (the kernel's `fw_ver` encoding) into `out`, NUL-terminated.
fn format_fw(fw: u64, out: &mut [c_char]) {
    let s = format!(
        "{}.{}.{}",
        (fw >> 32) & 0xffff,
        (fw >> 16) & 0xffff,
        fw & 0xffff
    );
    let n = s.len().min(out.len().saturating_sub(1));
    for (o, b) in out.iter_mut().zip(s.bytes().take(n)) {
        // CAST: ASCII digits and dots.
        *o = b as c_char;
    }
    if let Some(nul) = out.get_mut(n) {
        *nul = 0;
    }
}

/// # Safety
///
/// libibverbs calls this with one of our contexts and `attr` valid for `attr_size` bytes.
pub(crate) unsafe extern "C" fn query_device_ex(
    ibctx: *mut sys::ibv_context,
    input: *const sys::ibv_query_device_ex_input,
    attr: *mut sys::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    let mut resp = sys::ib_uverbs_ex_query_device_resp::default();
    let mut resp_size = size_of::<sys::ib_uverbs_ex_query_device_resp>();
    // SAFETY: pointers from libibverbs (contract) and our own buffer.
    let r = unsafe {
        abi::ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &mut resp, &mut resp_size)
    };
    if r != 0 {
        return r;
    }
    // SAFETY: `attr` is valid and at least `orig_attr` long (ibv_cmd_query_device_any
    // checked).
    format_fw(resp.base.fw_ver, unsafe { &mut (*attr).orig_attr.fw_ver });
    0
}

/// # Safety
///
/// libibverbs calls this with one of our contexts and a valid `attr`.
unsafe extern "C" fn query_port(
    ibctx: *mut sys::ibv_context,
    port: u8,
    attr: *mut sys::ibv_port_attr,
) -> c_int {
    let mut cmd = abi::IbvQueryPort::default();
    // SAFETY: pointers from libibverbs and our own command buffer.
    unsafe { abi::ibv_cmd_query_port(ibctx, port, attr, &mut cmd, size_of::<abi::IbvQueryPort>()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ffi::CStr;

    #[test]
    fn driver_data_follows_the_core_structs_without_padding() {
        // What the kernel reads and writes as udata starts right after the core
        // request/response.
        assert_eq!(
            offset_of!(GetContextCmd, drv),
            size_of::<abi::IbvGetContext>()
        );
        assert_eq!(offset_of!(GetContextCmd, drv), 16);
        assert_eq!(size_of::<GetContextCmd>(), 24);
        assert_eq!(
            offset_of!(GetContextResp, drv),
            size_of::<sys::ib_uverbs_get_context_resp>()
        );
        assert_eq!(offset_of!(GetContextResp, drv), 8);
        assert_eq!(size_of::<GetContextResp>(), 8 + 24);
        assert_eq!(size_of::<abi::IbvQueryPort>(), 24);
    }

    #[test]
    fn firmware_version_formats_and_truncates() {
        let mut out = [0 as c_char; 64];
        format_fw((1 << 32) | (2 << 16) | 3, &mut out);
        // SAFETY: `format_fw` NUL-terminates within the buffer.
        let s = unsafe { CStr::from_ptr(out.as_ptr()) };
        assert_eq!(s.to_str(), Ok("1.2.3"));
        let mut short = [0 as c_char; 4];
        format_fw((10 << 32) | (20 << 16) | 30, &mut short);
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(short.as_ptr()) };
        assert_eq!(s.to_str(), Ok("10."));
    }
}
