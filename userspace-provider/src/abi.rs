//! rdma-core's private provider ABI, as of **rdma-core 56.1** (`IBVERBS_PRIVATE_34`).
//!
//! libibverbs does not install `infiniband/driver.h` or `kern-abi.h`; every provider is
//! built inside rdma-core's tree. These are our own `#[repr(C)]` declarations of the parts
//! ordma uses, written from rdma-core 56.1's `libibverbs/driver.h` and
//! `libibverbs/kern-abi.h`. rdma-core changes the `IBVERBS_PRIVATE_` number (and so the
//! `verbs_register_driver_34` symbol and the `-rdmav34.so` file name) whenever these
//! change, so a mismatch is a load failure, not memory corruption. `cargo test` checks
//! every size, field offset and width, `verbs_context_ops` slot, constant and prototype
//! here against rdma-core's own headers, read by the C compiler from Debian's source
//! package of the installed version (`abi_check.rs`), and the private ABI number against
//! the symbol the built library imports (`tests/exports.rs`); the VM test
//! `verbs-provider` loads the library with the real libibverbs.

use core::ffi::{c_char, c_int, c_void};

use crate::sys;

/// `enum verbs_match_kind`.
pub const VERBS_MATCH_SENTINEL: u8 = 0;
/// Match on the PCI vendor and device of the ib_device's parent.
pub const VERBS_MATCH_PCI: u8 = 1;

/// `RDMA_DRIVER_UNKNOWN` (`enum rdma_driver_id`): ordma has no upstream driver id.
pub const RDMA_DRIVER_UNKNOWN: u32 = 0;

/// `struct verbs_match_ent`.
#[repr(C)]
pub struct VerbsMatchEnt {
    pub driver_data: *mut c_void,
    /// `union { const char *modalias; uint64_t driver_id; }`: unused for PCI matches.
    pub u: u64,
    pub vendor: u16,
    pub device: u16,
    pub kind: u8,
}

/// `struct verbs_sysfs_dev`: only passed through.
#[repr(C)]
pub struct VerbsSysfsDev {
    _opaque: [u8; 0],
}

/// `struct list_node` (ccan).
#[repr(C)]
pub struct ListNode {
    pub next: *mut ListNode,
    pub prev: *mut ListNode,
}

/// `struct verbs_device`; the provider allocates it (`alloc_device`), libibverbs fills it.
#[repr(C)]
pub struct VerbsDevice {
    pub device: sys::ibv_device,
    pub ops: *const VerbsDeviceOps,
    pub refcount: c_int,
    pub entry: ListNode,
    pub sysfs: *mut VerbsSysfsDev,
    pub core_support: u64,
}

/// `struct verbs_device_ops`.
#[repr(C)]
pub struct VerbsDeviceOps {
    pub name: *const c_char,
    pub match_min_abi_version: u32,
    pub match_max_abi_version: u32,
    pub match_table: *const VerbsMatchEnt,
    pub static_providers: *const *const VerbsDeviceOps,
    pub match_device: Option<unsafe extern "C" fn(*mut VerbsSysfsDev) -> bool>,
    pub alloc_context: Option<
        unsafe extern "C" fn(*mut sys::ibv_device, c_int, *mut c_void) -> *mut sys::verbs_context,
    >,
    pub import_context:
        Option<unsafe extern "C" fn(*mut sys::ibv_device, c_int) -> *mut sys::verbs_context>,
    pub alloc_device: Option<unsafe extern "C" fn(*mut VerbsSysfsDev) -> *mut VerbsDevice>,
    pub uninit_device: Option<unsafe extern "C" fn(*mut VerbsDevice)>,
}

/// A slot of [`VerbsContextOps`] ordma leaves empty (libibverbs then answers `EOPNOTSUPP`).
/// Every member of the C struct is a function pointer, so the type of an unused one does
/// not matter to the layout.
pub type Unused = Option<unsafe extern "C" fn()>;

/// `struct verbs_context_ops`: its 76 members, in rdma-core 56.1's (alphabetical) order.
#[repr(C)]
#[derive(Default)]
pub struct VerbsContextOps {
    pub advise_mr: Unused,
    pub alloc_dm: Unused,
    pub alloc_mw:
        Option<unsafe extern "C" fn(*mut sys::ibv_pd, sys::ibv_mw_type) -> *mut sys::ibv_mw>,
    pub alloc_null_mr: Unused,
    pub alloc_parent_domain: Unused,
    pub alloc_pd: Option<unsafe extern "C" fn(*mut sys::ibv_context) -> *mut sys::ibv_pd>,
    pub alloc_td: Unused,
    pub async_event: Unused,
    pub attach_counters_point_flow: Unused,
    pub attach_mcast: Unused,
    pub bind_mw: Option<
        unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_mw, *mut sys::ibv_mw_bind) -> c_int,
    >,
    pub close_xrcd: Unused,
    pub cq_event: Unused,
    pub create_ah:
        Option<unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_ah_attr) -> *mut sys::ibv_ah>,
    pub create_counters: Unused,
    pub create_cq: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            c_int,
            *mut sys::ibv_comp_channel,
            c_int,
        ) -> *mut sys::ibv_cq,
    >,
    pub create_cq_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_cq_init_attr_ex,
        ) -> *mut sys::ibv_cq_ex,
    >,
    pub create_flow: Unused,
    pub create_flow_action_esp: Unused,
    pub create_qp: Option<
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_qp_init_attr) -> *mut sys::ibv_qp,
    >,
    pub create_qp_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_qp_init_attr_ex,
        ) -> *mut sys::ibv_qp,
    >,
    pub create_rwq_ind_table: Unused,
    pub create_srq: Option<
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_srq_init_attr) -> *mut sys::ibv_srq,
    >,
    pub create_srq_ex: Unused,
    pub create_wq: Unused,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut sys::ibv_mw) -> c_int>,
    pub dealloc_pd: Option<unsafe extern "C" fn(*mut sys::ibv_pd) -> c_int>,
    pub dealloc_td: Unused,
    pub dereg_mr: Option<unsafe extern "C" fn(*mut VerbsMr) -> c_int>,
    pub destroy_ah: Option<unsafe extern "C" fn(*mut sys::ibv_ah) -> c_int>,
    pub destroy_counters: Unused,
    pub destroy_cq: Option<unsafe extern "C" fn(*mut sys::ibv_cq) -> c_int>,
    pub destroy_flow: Unused,
    pub destroy_flow_action: Unused,
    pub destroy_qp: Option<unsafe extern "C" fn(*mut sys::ibv_qp) -> c_int>,
    pub destroy_rwq_ind_table: Unused,
    pub destroy_srq: Option<unsafe extern "C" fn(*mut sys::ibv_srq) -> c_int>,
    pub destroy_wq: Unused,
    pub detach_mcast: Unused,
    pub free_context: Option<unsafe extern "C" fn(*mut sys::ibv_context)>,
    pub free_dm: Unused,
    pub get_srq_num: Unused,
    pub import_dm: Unused,
    pub import_mr: Unused,
    pub import_pd: Unused,
    pub modify_cq: Unused,
    pub modify_flow_action_esp: Unused,
    pub modify_qp:
        Option<unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_qp_attr, c_int) -> c_int>,
    pub modify_qp_rate_limit: Unused,
    pub modify_srq:
        Option<unsafe extern "C" fn(*mut sys::ibv_srq, *mut sys::ibv_srq_attr, c_int) -> c_int>,
    pub modify_wq: Unused,
    pub open_qp: Unused,
    pub open_xrcd: Unused,
    pub poll_cq: Option<unsafe extern "C" fn(*mut sys::ibv_cq, c_int, *mut sys::ibv_wc) -> c_int>,
    pub post_recv: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_qp,
            *mut sys::ibv_recv_wr,
            *mut *mut sys::ibv_recv_wr,
        ) -> c_int,
    >,
    pub post_send: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_qp,
            *mut sys::ibv_send_wr,
            *mut *mut sys::ibv_send_wr,
        ) -> c_int,
    >,
    pub post_srq_ops: Unused,
    pub post_srq_recv: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_srq,
            *mut sys::ibv_recv_wr,
            *mut *mut sys::ibv_recv_wr,
        ) -> c_int,
    >,
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *const sys::ibv_query_device_ex_input,
            *mut sys::ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    pub query_ece: Unused,
    pub query_port:
        Option<unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::ibv_port_attr) -> c_int>,
    pub query_qp: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_qp,
            *mut sys::ibv_qp_attr,
            c_int,
            *mut sys::ibv_qp_init_attr,
        ) -> c_int,
    >,
    pub query_qp_data_in_order: Unused,
    pub query_rt_values: Unused,
    pub query_srq: Option<unsafe extern "C" fn(*mut sys::ibv_srq, *mut sys::ibv_srq_attr) -> c_int>,
    pub read_counters: Unused,
    pub reg_dm_mr: Unused,
    pub reg_dmabuf_mr: Option<
        unsafe extern "C" fn(*mut sys::ibv_pd, u64, usize, u64, c_int, c_int) -> *mut sys::ibv_mr,
    >,
    pub reg_mr: Option<
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut c_void, usize, u64, c_int) -> *mut sys::ibv_mr,
    >,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut sys::ibv_cq, c_int) -> c_int>,
    pub rereg_mr: Option<
        unsafe extern "C" fn(
            *mut VerbsMr,
            c_int,
            *mut sys::ibv_pd,
            *mut c_void,
            usize,
            c_int,
        ) -> c_int,
    >,
    pub resize_cq: Option<unsafe extern "C" fn(*mut sys::ibv_cq, c_int) -> c_int>,
    pub set_ece: Unused,
    pub unimport_dm: Unused,
    pub unimport_mr: Unused,
    pub unimport_pd: Unused,
}

/// kern-abi.h's `struct ibv_get_context`: the uverbs header and the core request.
#[repr(C)]
#[derive(Default)]
pub struct IbvGetContext {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_get_context,
}

/// kern-abi.h's `struct ibv_alloc_pd`.
#[repr(C)]
#[derive(Default)]
pub struct IbvAllocPd {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_alloc_pd,
}

/// kern-abi.h's `struct ibv_reg_mr`.
#[repr(C)]
#[derive(Default)]
pub struct IbvRegMr {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_reg_mr,
}

/// kern-abi.h's `struct ibv_rereg_mr`.
#[repr(C)]
#[derive(Default)]
pub struct IbvReregMr {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_rereg_mr,
}

/// kern-abi.h's `struct ibv_alloc_mw`.
#[repr(C)]
#[derive(Default)]
pub struct IbvAllocMw {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_alloc_mw,
}

/// driver.h's `struct verbs_mr`: the provider allocates it, libibverbs and `ibv_cmd_*`
/// fill it.
#[repr(C)]
pub struct VerbsMr {
    pub ibv_mr: sys::ibv_mr,
    /// driver.h's `enum ibv_mr_type` (a C enum: `unsigned int`).
    pub mr_type: u32,
    pub access: c_int,
}

/// driver.h's `struct ibv_command_buffer`: only passed (as null) through.
#[repr(C)]
pub struct IbvCommandBuffer {
    _opaque: [u8; 0],
}

/// kern-abi.h's `struct ibv_query_port`.
#[repr(C)]
#[derive(Default)]
pub struct IbvQueryPort {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_query_port,
}

/// kern-abi.h's `struct ibv_create_cq`.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateCq {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_create_cq,
}

/// kern-abi.h's `struct ex_hdr`: the uverbs header of an extended command.
#[repr(C)]
#[derive(Default)]
pub struct ExHdr {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub ex_hdr: sys::ib_uverbs_ex_cmd_hdr,
}

/// kern-abi.h's `struct ibv_create_cq_ex`.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateCqEx {
    pub hdr: ExHdr,
    pub core: sys::ib_uverbs_ex_create_cq,
}

/// driver.h's `struct verbs_cq`: a union of `ibv_cq` and `ibv_cq_ex`, which begins with
/// the same fields (so the larger, `ibv_cq_ex`, alone).
#[repr(C)]
pub struct VerbsCq {
    pub cq_ex: sys::ibv_cq_ex,
}

/// driver.h's `struct verbs_qp`: a union of `ibv_qp` and `ibv_qp_ex` (whose head is an
/// `ibv_qp`: the larger alone), then what libibverbs' `ibv_qp_to_qp_ex` reads.
#[repr(C)]
pub struct VerbsQp {
    pub qp_ex: sys::ibv_qp_ex,
    /// `VERBS_QP_EX` when `qp_ex` is the QP's (`ibv_qp_to_qp_ex` returns it).
    pub comp_mask: u32,
    pub xrcd: *mut c_void,
}

/// driver.h's `enum verbs_qp_mask`: the QP has its `ibv_qp_ex`.
pub const VERBS_QP_EX: u32 = 1 << 1;

/// kern-abi.h's `struct ibv_create_qp`.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateQp {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_create_qp,
}

/// kern-abi.h's `struct ibv_modify_qp`.
#[repr(C)]
#[derive(Default)]
pub struct IbvModifyQp {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_modify_qp,
}

/// kern-abi.h's `struct ibv_create_srq`.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateSrq {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_create_srq,
}

/// kern-abi.h's `struct ibv_resize_cq`.
#[repr(C)]
#[derive(Default)]
pub struct IbvResizeCq {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_resize_cq,
}

/// kern-abi.h's `struct ibv_modify_srq`.
#[repr(C)]
#[derive(Default)]
pub struct IbvModifySrq {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_modify_srq,
}

/// kern-abi.h's `struct ibv_query_srq`.
#[repr(C)]
#[derive(Default)]
pub struct IbvQuerySrq {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_query_srq,
}

/// kern-abi.h's `struct ibv_query_qp`.
#[repr(C)]
#[derive(Default)]
pub struct IbvQueryQp {
    pub hdr: sys::ib_uverbs_cmd_hdr,
    pub core: sys::ib_uverbs_query_qp,
}

#[link(name = "ibverbs")]
extern "C" {
    /// `verbs_register_driver()` with the private ABI number in its name.
    pub fn verbs_register_driver_34(ops: *const VerbsDeviceOps);
    /// `verbs_init_and_alloc_context()`: callocs `alloc_size` bytes with the
    /// `verbs_context` at `context_offset` (given as a pointer value) initialised.
    pub fn _verbs_init_and_alloc_context(
        device: *mut sys::ibv_device,
        cmd_fd: c_int,
        alloc_size: usize,
        context_offset: *mut sys::verbs_context,
        driver_id: u32,
    ) -> *mut c_void;
    pub fn verbs_uninit_context(context: *mut sys::verbs_context);
    pub fn verbs_set_ops(vctx: *mut sys::verbs_context, ops: *const VerbsContextOps);
    pub fn ibv_cmd_get_context(
        context: *mut sys::verbs_context,
        cmd: *mut IbvGetContext,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_get_context_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_query_device_any(
        context: *mut sys::ibv_context,
        input: *const sys::ibv_query_device_ex_input,
        attr: *mut sys::ibv_device_attr_ex,
        attr_size: usize,
        resp: *mut sys::ib_uverbs_ex_query_device_resp,
        resp_size: *mut usize,
    ) -> c_int;
    pub fn ibv_cmd_query_port(
        context: *mut sys::ibv_context,
        port_num: u8,
        port_attr: *mut sys::ibv_port_attr,
        cmd: *mut IbvQueryPort,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_alloc_pd(
        context: *mut sys::ibv_context,
        pd: *mut sys::ibv_pd,
        cmd: *mut IbvAllocPd,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_alloc_pd_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_dealloc_pd(pd: *mut sys::ibv_pd) -> c_int;
    pub fn ibv_cmd_reg_mr(
        pd: *mut sys::ibv_pd,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        vmr: *mut VerbsMr,
        cmd: *mut IbvRegMr,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_reg_mr_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_reg_dmabuf_mr(
        pd: *mut sys::ibv_pd,
        offset: u64,
        length: usize,
        iova: u64,
        fd: c_int,
        access: c_int,
        vmr: *mut VerbsMr,
        driver: *mut IbvCommandBuffer,
    ) -> c_int;
    pub fn ibv_cmd_rereg_mr(
        vmr: *mut VerbsMr,
        flags: u32,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        pd: *mut sys::ibv_pd,
        cmd: *mut IbvReregMr,
        cmd_sz: usize,
        resp: *mut sys::ib_uverbs_rereg_mr_resp,
        resp_sz: usize,
    ) -> c_int;
    pub fn ibv_cmd_dereg_mr(vmr: *mut VerbsMr) -> c_int;
    pub fn ibv_cmd_alloc_mw(
        pd: *mut sys::ibv_pd,
        mw_type: sys::ibv_mw_type,
        mw: *mut sys::ibv_mw,
        cmd: *mut IbvAllocMw,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_alloc_mw_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_dealloc_mw(mw: *mut sys::ibv_mw) -> c_int;
    pub fn ibv_cmd_create_cq(
        context: *mut sys::ibv_context,
        cqe: c_int,
        channel: *mut sys::ibv_comp_channel,
        comp_vector: c_int,
        cq: *mut sys::ibv_cq,
        cmd: *mut IbvCreateCq,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_create_cq_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_create_cq_ex(
        context: *mut sys::ibv_context,
        cq_attr: *const sys::ibv_cq_init_attr_ex,
        cq: *mut VerbsCq,
        cmd: *mut IbvCreateCqEx,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_ex_create_cq_resp,
        resp_size: usize,
        cmd_flags: u32,
    ) -> c_int;
    pub fn ibv_cmd_destroy_cq(cq: *mut sys::ibv_cq) -> c_int;
    pub fn ibv_cmd_create_qp(
        pd: *mut sys::ibv_pd,
        qp: *mut sys::ibv_qp,
        attr: *mut sys::ibv_qp_init_attr,
        cmd: *mut IbvCreateQp,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_create_qp_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_create_qp_ex(
        context: *mut sys::ibv_context,
        qp: *mut VerbsQp,
        attr_ex: *mut sys::ibv_qp_init_attr_ex,
        cmd: *mut IbvCreateQp,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_create_qp_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_modify_qp(
        qp: *mut sys::ibv_qp,
        attr: *mut sys::ibv_qp_attr,
        attr_mask: c_int,
        cmd: *mut IbvModifyQp,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_query_qp(
        qp: *mut sys::ibv_qp,
        qp_attr: *mut sys::ibv_qp_attr,
        attr_mask: c_int,
        qp_init_attr: *mut sys::ibv_qp_init_attr,
        cmd: *mut IbvQueryQp,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_destroy_qp(qp: *mut sys::ibv_qp) -> c_int;
    pub fn ibv_cmd_resize_cq(
        cq: *mut sys::ibv_cq,
        cqe: c_int,
        cmd: *mut IbvResizeCq,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_resize_cq_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_create_srq(
        pd: *mut sys::ibv_pd,
        srq: *mut sys::ibv_srq,
        attr: *mut sys::ibv_srq_init_attr,
        cmd: *mut IbvCreateSrq,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_create_srq_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_modify_srq(
        srq: *mut sys::ibv_srq,
        srq_attr: *mut sys::ibv_srq_attr,
        srq_attr_mask: c_int,
        cmd: *mut IbvModifySrq,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_query_srq(
        srq: *mut sys::ibv_srq,
        srq_attr: *mut sys::ibv_srq_attr,
        cmd: *mut IbvQuerySrq,
        cmd_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_destroy_srq(srq: *mut sys::ibv_srq) -> c_int;
    pub fn ibv_cmd_create_ah(
        pd: *mut sys::ibv_pd,
        ah: *mut sys::ibv_ah,
        attr: *mut sys::ibv_ah_attr,
        resp: *mut sys::ib_uverbs_create_ah_resp,
        resp_size: usize,
    ) -> c_int;
    pub fn ibv_cmd_destroy_ah(ah: *mut sys::ibv_ah) -> c_int;
}
