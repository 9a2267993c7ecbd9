//! `abi.rs` (and the structs the provider puts around the uverbs commands) against
//! rdma-core's own headers: `cargo test` fetches Debian's source package of the installed
//! rdma-core (56.1-1), compiles a C program against its `infiniband/driver.h` and
//! `kern-abi.h`, and compares every size, field offset and width, `verbs_context_ops` slot
//! and constant the provider relies on with what `size_of`/`offset_of!` say of our Rust
//! declarations. The expected values come only from the C compiler; nothing here restates
//! a number. C `_Static_assert`s check the prototypes of the functions and callbacks the
//! provider declares against rdma-core's (the C types there are transcriptions of
//! `abi.rs`'s Rust ones). The private ABI number itself is checked in `tests/exports.rs`,
//! against the symbol the built library imports. `barrier.rs`'s instructions are checked
//! against rdma-core's `util/udma_barrier.h` as the C preprocessor expands it.

use core::mem::{offset_of, size_of};
use std::collections::BTreeMap;

use crate::abi::{
    self, IbvAllocPd, IbvCreateCq, IbvCreateCqEx, IbvCreateQp, IbvCreateSrq, IbvGetContext,
    IbvModifyQp, IbvModifySrq, IbvQueryPort, IbvQueryQp, IbvQuerySrq, IbvRegMr, IbvResizeCq,
    ListNode, Unused, VerbsContextOps, VerbsCq, VerbsDevice, VerbsDeviceOps, VerbsMatchEnt,
    VerbsMr, VerbsQp,
};
use crate::barrier::{flush_writes_insn, from_device_insn, to_device_insn};
use crate::{context, cq, cq_ex, pd, qp, srq, sys};

#[path = "../tests/common/rdma_core.rs"]
mod rdma_core;

#[path = "abi_check_prototypes.rs"]
mod prototypes;
use prototypes::prototype_checks;

/// (C expression, the Rust value it must equal).
#[derive(Default)]
struct Checks(Vec<(String, i64)>);

impl Checks {
    fn push(&mut self, c: String, rust: usize) {
        // A size past i64 (none is) would show as a mismatch, not a panic.
        self.0.push((c, i64::try_from(rust).unwrap_or(i64::MAX)));
    }
}

/// The size of the field `f` picks out of a `T`.
fn field_size<T, F>(_f: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// `sizeof` of a C type against `size_of` of its mirror.
macro_rules! size {
    ($v:expr, $rust:ty, $c:literal) => {
        $v.push(format!("sizeof({})", $c), size_of::<$rust>())
    };
}

/// `offsetof` and `sizeof` of each field: `rust_name` or `rust_name as c_name`.
macro_rules! fields {
    ($v:expr, $rust:ty, $c:literal, $($f:ident $(as $cf:ident)?),+ $(,)?) => {
        $(
            $v.push(
                format!("offsetof({}, {})", $c, fields!(@c $f $($cf)?)),
                offset_of!($rust, $f),
            );
            $v.push(
                format!("sizeof((({} *)0)->{})", $c, fields!(@c $f $($cf)?)),
                field_size(|s: &$rust| &s.$f),
            );
        )+
    };
    (@c $f:ident) => { stringify!($f) };
    (@c $f:ident $cf:ident) => { stringify!($cf) };
}

/// The slot index (offset in function pointers) of each `verbs_context_ops` member.
macro_rules! slots {
    ($v:expr, $($f:ident),+ $(,)?) => {
        $( $v.push(
            format!(
                "offsetof(struct verbs_context_ops, {}) / sizeof(void (*)(void))",
                stringify!($f)
            ),
            offset_of!(VerbsContextOps, $f) / size_of::<Unused>(),
        ); )+
    };
}

fn layout_checks() -> Checks {
    let mut v = Checks::default();
    // driver.h
    size!(v, VerbsMatchEnt, "struct verbs_match_ent");
    fields!(
        v,
        VerbsMatchEnt,
        "struct verbs_match_ent",
        driver_data,
        u,
        vendor,
        device,
        kind
    );
    v.push(
        "VERBS_MATCH_SENTINEL".into(),
        abi::VERBS_MATCH_SENTINEL.into(),
    );
    v.push("VERBS_MATCH_PCI".into(), abi::VERBS_MATCH_PCI.into());
    v.push(
        "RDMA_DRIVER_UNKNOWN".into(),
        abi::RDMA_DRIVER_UNKNOWN as usize,
    );
    size!(v, ListNode, "struct list_node");
    fields!(v, ListNode, "struct list_node", next, prev);
    size!(v, VerbsDevice, "struct verbs_device");
    fields!(
        v,
        VerbsDevice,
        "struct verbs_device",
        device,
        ops,
        refcount,
        entry,
        sysfs,
        core_support
    );
    size!(v, VerbsDeviceOps, "struct verbs_device_ops");
    fields!(
        v,
        VerbsDeviceOps,
        "struct verbs_device_ops",
        name,
        match_min_abi_version,
        match_max_abi_version,
        match_table,
        static_providers,
        match_device,
        alloc_context,
        import_context,
        alloc_device,
        uninit_device,
    );
    // Every member (a missing or extra one changes the size or a slot).
    size!(v, VerbsContextOps, "struct verbs_context_ops");
    size!(v, Unused, "void (*)(void)");
    slots!(
        v,
        advise_mr,
        alloc_dm,
        alloc_mw,
        alloc_null_mr,
        alloc_parent_domain,
        alloc_pd,
        alloc_td,
        async_event,
        attach_counters_point_flow,
        attach_mcast,
        bind_mw,
        close_xrcd,
        cq_event,
        create_ah,
        create_counters,
        create_cq,
        create_cq_ex,
        create_flow,
        create_flow_action_esp,
        create_qp,
        create_qp_ex,
        create_rwq_ind_table,
        create_srq,
        create_srq_ex,
        create_wq,
        dealloc_mw,
        dealloc_pd,
        dealloc_td,
        dereg_mr,
        destroy_ah,
        destroy_counters,
        destroy_cq,
        destroy_flow,
        destroy_flow_action,
        destroy_qp,
        destroy_rwq_ind_table,
        destroy_srq,
        destroy_wq,
        detach_mcast,
        free_context,
        free_dm,
        get_srq_num,
        import_dm,
        import_mr,
        import_pd,
        modify_cq,
        modify_flow_action_esp,
        modify_qp,
        modify_qp_rate_limit,
        modify_srq,
        modify_wq,
        open_qp,
        open_xrcd,
        poll_cq,
        post_recv,
        post_send,
        post_srq_ops,
        post_srq_recv,
        query_device_ex,
        query_ece,
        query_port,
        query_qp,
        query_qp_data_in_order,
        query_rt_values,
        query_srq,
        read_counters,
        reg_dm_mr,
        reg_dmabuf_mr,
        reg_mr,
        req_notify_cq,
        rereg_mr,
        resize_cq,
        set_ece,
        unimport_dm,
        unimport_mr,
        unimport_pd,
    );
    // kern-abi.h: the command structs (`core_payload` is the core request).
    size!(v, IbvGetContext, "struct ibv_get_context");
    fields!(
        v,
        IbvGetContext,
        "struct ibv_get_context",
        hdr,
        core as core_payload
    );
    size!(v, IbvAllocPd, "struct ibv_alloc_pd");
    fields!(
        v,
        IbvAllocPd,
        "struct ibv_alloc_pd",
        hdr,
        core as core_payload
    );
    size!(v, IbvQueryPort, "struct ibv_query_port");
    fields!(
        v,
        IbvQueryPort,
        "struct ibv_query_port",
        hdr,
        core as core_payload
    );
    size!(v, IbvRegMr, "struct ibv_reg_mr");
    fields!(v, IbvRegMr, "struct ibv_reg_mr", hdr, core as core_payload);
    size!(v, IbvCreateCq, "struct ibv_create_cq");
    fields!(
        v,
        IbvCreateCq,
        "struct ibv_create_cq",
        hdr,
        core as core_payload
    );
    size!(v, IbvCreateQp, "struct ibv_create_qp");
    fields!(
        v,
        IbvCreateQp,
        "struct ibv_create_qp",
        hdr,
        core as core_payload
    );
    size!(v, IbvModifyQp, "struct ibv_modify_qp");
    fields!(
        v,
        IbvModifyQp,
        "struct ibv_modify_qp",
        hdr,
        core as core_payload
    );
    size!(v, IbvQueryQp, "struct ibv_query_qp");
    fields!(
        v,
        IbvQueryQp,
        "struct ibv_query_qp",
        hdr,
        core as core_payload
    );
    size!(v, IbvCreateSrq, "struct ibv_create_srq");
    fields!(
        v,
        IbvCreateSrq,
        "struct ibv_create_srq",
        hdr,
        core as core_payload
    );
    size!(v, IbvResizeCq, "struct ibv_resize_cq");
    fields!(
        v,
        IbvResizeCq,
        "struct ibv_resize_cq",
        hdr,
        core as core_payload
    );
    size!(
        v,
        sys::ib_uverbs_resize_cq_resp,
        "struct ib_uverbs_resize_cq_resp"
    );
    size!(v, IbvModifySrq, "struct ibv_modify_srq");
    fields!(
        v,
        IbvModifySrq,
        "struct ibv_modify_srq",
        hdr,
        core as core_payload
    );
    size!(v, IbvQuerySrq, "struct ibv_query_srq");
    fields!(
        v,
        IbvQuerySrq,
        "struct ibv_query_srq",
        hdr,
        core as core_payload
    );
    size!(v, abi::IbvAllocMw, "struct ibv_alloc_mw");
    fields!(
        v,
        abi::IbvAllocMw,
        "struct ibv_alloc_mw",
        hdr,
        core as core_payload
    );
    size!(
        v,
        sys::ib_uverbs_alloc_mw_resp,
        "struct ib_uverbs_alloc_mw_resp"
    );
    size!(v, sys::ibv_mw, "struct ibv_mw");
    fields!(
        v,
        sys::ibv_mw,
        "struct ibv_mw",
        context,
        pd,
        rkey,
        handle,
        type_ as type
    );
    size!(v, sys::ibv_mw_bind, "struct ibv_mw_bind");
    size!(v, VerbsMr, "struct verbs_mr");
    fields!(v, VerbsMr, "struct verbs_mr", ibv_mr, mr_type, access);
    // The public and uverbs types the mirror and the provider embed (bindgen read the
    // installed headers; rdma-core's source must agree).
    size!(v, sys::ibv_device, "struct ibv_device");
    size!(v, sys::ibv_context, "struct ibv_context");
    size!(v, sys::verbs_context, "struct verbs_context");
    fields!(v, sys::verbs_context, "struct verbs_context", context);
    size!(v, sys::ibv_pd, "struct ibv_pd");
    size!(v, sys::ibv_mr, "struct ibv_mr");
    size!(v, sys::ib_uverbs_reg_mr, "struct ib_uverbs_reg_mr");
    size!(
        v,
        sys::ib_uverbs_reg_mr_resp,
        "struct ib_uverbs_reg_mr_resp"
    );
    size!(v, sys::ibv_cq, "struct ibv_cq");
    size!(v, sys::ibv_qp, "struct ibv_qp");
    fields!(
        v,
        sys::ibv_qp,
        "struct ibv_qp",
        context,
        handle,
        qp_num,
        state,
        qp_type
    );
    size!(v, sys::ibv_qp_cap, "struct ibv_qp_cap");
    fields!(
        v,
        sys::ibv_qp_cap,
        "struct ibv_qp_cap",
        max_send_wr,
        max_recv_wr,
        max_send_sge,
        max_recv_sge,
        max_inline_data
    );
    size!(v, sys::ibv_qp_init_attr, "struct ibv_qp_init_attr");
    fields!(
        v,
        sys::ibv_qp_init_attr,
        "struct ibv_qp_init_attr",
        send_cq,
        recv_cq,
        cap
    );
    size!(v, sys::ibv_qp_attr, "struct ibv_qp_attr");
    fields!(v, sys::ibv_qp_init_attr, "struct ibv_qp_init_attr", srq);
    size!(v, sys::ibv_srq, "struct ibv_srq");
    fields!(v, sys::ibv_srq, "struct ibv_srq", context, pd, handle);
    size!(v, sys::ibv_srq_attr, "struct ibv_srq_attr");
    fields!(
        v,
        sys::ibv_srq_attr,
        "struct ibv_srq_attr",
        max_wr,
        max_sge,
        srq_limit
    );
    size!(v, sys::ibv_srq_init_attr, "struct ibv_srq_init_attr");
    fields!(v, sys::ibv_srq_init_attr, "struct ibv_srq_init_attr", attr);
    size!(
        v,
        sys::ib_uverbs_create_srq_resp,
        "struct ib_uverbs_create_srq_resp"
    );
    size!(
        v,
        sys::ib_uverbs_create_cq_resp,
        "struct ib_uverbs_create_cq_resp"
    );
    size!(
        v,
        sys::ib_uverbs_create_qp_resp,
        "struct ib_uverbs_create_qp_resp"
    );
    size!(v, sys::ibv_port_attr, "struct ibv_port_attr");
    size!(v, sys::ibv_device_attr_ex, "struct ibv_device_attr_ex");
    size!(
        v,
        sys::ibv_query_device_ex_input,
        "struct ibv_query_device_ex_input"
    );
    size!(v, sys::ib_uverbs_cmd_hdr, "struct ib_uverbs_cmd_hdr");
    size!(
        v,
        sys::ib_uverbs_get_context_resp,
        "struct ib_uverbs_get_context_resp"
    );
    size!(
        v,
        sys::ib_uverbs_alloc_pd_resp,
        "struct ib_uverbs_alloc_pd_resp"
    );
    size!(
        v,
        sys::ib_uverbs_ex_query_device_resp,
        "struct ib_uverbs_ex_query_device_resp"
    );
    // ordma's driver data starts where rdma-core's command and response structs end.
    v.push(
        "sizeof(struct ibv_get_context)".into(),
        offset_of!(context::GetContextCmd, drv),
    );
    v.push(
        "sizeof(struct ib_uverbs_get_context_resp)".into(),
        offset_of!(context::GetContextResp, drv),
    );
    v.push(
        "sizeof(struct ib_uverbs_alloc_pd_resp)".into(),
        offset_of!(pd::AllocPdResp, drv),
    );
    v.push(
        "sizeof(struct ibv_create_cq)".into(),
        offset_of!(cq::CreateCqCmd, drv),
    );
    v.push(
        "sizeof(struct ib_uverbs_create_cq_resp)".into(),
        offset_of!(cq::CreateCqResp, drv),
    );
    v.push(
        "sizeof(struct ibv_create_qp)".into(),
        offset_of!(qp::CreateQpCmd, drv),
    );
    v.push(
        "sizeof(struct ib_uverbs_create_qp_resp)".into(),
        offset_of!(qp::CreateQpResp, drv),
    );
    v.push(
        "sizeof(struct ibv_create_srq)".into(),
        offset_of!(srq::CreateSrqCmd, drv),
    );
    v.push(
        "sizeof(struct ib_uverbs_create_srq_resp)".into(),
        offset_of!(srq::CreateSrqResp, drv),
    );
    v.push(
        "sizeof(struct ibv_modify_srq)".into(),
        offset_of!(srq::ModifySrqCmd, drv),
    );
    v.push(
        "sizeof(struct ibv_resize_cq)".into(),
        offset_of!(cq::ResizeCqCmd, drv),
    );
    v.push(
        "sizeof(struct ib_uverbs_resize_cq_resp)".into(),
        offset_of!(cq::ResizeCqResp, drv),
    );
    v.push(
        "sizeof(struct ibv_create_cq_ex)".into(),
        offset_of!(cq_ex::ExCreateCqCmd, drv),
    );
    v.push(
        "sizeof(struct ib_uverbs_ex_create_cq_resp)".into(),
        offset_of!(cq_ex::ExCreateCqResp, drv),
    );
    // The extended objects: driver.h's verbs_cq and verbs_qp, the extended command.
    size!(v, abi::IbvReregMr, "struct ibv_rereg_mr");
    fields!(
        v,
        abi::IbvReregMr,
        "struct ibv_rereg_mr",
        hdr,
        core as core_payload
    );
    size!(v, IbvCreateCqEx, "struct ibv_create_cq_ex");
    fields!(
        v,
        IbvCreateCqEx,
        "struct ibv_create_cq_ex",
        hdr,
        core as core_payload
    );
    size!(v, abi::ExHdr, "struct ex_hdr");
    fields!(v, abi::ExHdr, "struct ex_hdr", hdr, ex_hdr);
    size!(v, VerbsCq, "struct verbs_cq");
    fields!(v, VerbsCq, "struct verbs_cq", cq_ex);
    size!(v, VerbsQp, "struct verbs_qp");
    fields!(v, VerbsQp, "struct verbs_qp", qp_ex, comp_mask, xrcd);
    v.push("VERBS_QP_EX".into(), abi::VERBS_QP_EX as usize);
    size!(v, sys::ibv_cq_ex, "struct ibv_cq_ex");
    size!(v, sys::ibv_qp_ex, "struct ibv_qp_ex");
    // The CQ, QP and SRQ objects start with libibverbs' (their address is the object's).
    v.push("0".into(), offset_of!(cq::Cq, ibv));
    v.push("0".into(), offset_of!(qp::Qp, ibv));
    v.push("0".into(), offset_of!(srq::Srq, ibv));
    v
}

#[test]
fn private_abi_mirror_matches_rdma_core_headers() {
    let checks = layout_checks();
    let exprs: Vec<String> = checks.0.iter().map(|(c, _)| c.clone()).collect();
    let c: BTreeMap<String, i64> = rdma_core::c_values(
        "abi-check",
        &["infiniband/driver.h", "infiniband/kern-abi.h"],
        &prototype_checks(),
        &exprs,
    );
    let mut wrong = Vec::new();
    for (expr, rust) in &checks.0 {
        let want = c[expr];
        if want != *rust {
            wrong.push(format!("{expr}: rdma-core {want}, ours {rust}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "abi.rs differs from rdma-core's headers:\n{}",
        wrong.join("\n")
    );
    // The test checked something: every member of every mirrored struct.
    assert!(checks.0.len() > 100, "{} checks", checks.0.len());
}

#[test]
fn barriers_are_rdma_core_s_for_x86_64() {
    let expansions = rdma_core::c_expand(
        &["util/udma_barrier.h"],
        &[
            "udma_to_device_barrier()",
            "udma_ordering_write_barrier()",
            "udma_from_device_barrier()",
            "mmio_flush_writes()",
            "mmio_wc_start()",
        ],
    );
    let asm = |insn: &str| format!("asmvolatile(\"{insn}\":::\"memory\")");
    let ours = [
        ("udma_to_device_barrier()", asm(to_device_insn!())),
        ("udma_ordering_write_barrier()", asm(to_device_insn!())),
        ("udma_from_device_barrier()", asm(from_device_insn!())),
        ("mmio_flush_writes()", asm(flush_writes_insn!())),
        ("mmio_wc_start()", asm(flush_writes_insn!())),
    ];
    for (macro_call, want) in ours {
        assert_eq!(
            expansions[macro_call], want,
            "rdma-core's {macro_call} is not barrier.rs's"
        );
    }
}
