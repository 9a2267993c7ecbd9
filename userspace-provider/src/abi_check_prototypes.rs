//! `abi_check`'s prototype checks: rdma-core's prototype of each function and callback
//! `abi.rs` declares, as the C transcription of our Rust signature (C `_Static_assert`s).

/// `(condition, message)`: rdma-core's prototype of each function and callback `abi.rs`
/// declares is the C transcription of our Rust signature.
pub(super) fn prototype_checks() -> Vec<(String, String)> {
    let fns: &[(&str, &str)] = &[
        (
            "&verbs_register_driver",
            "void (*)(const struct verbs_device_ops *)",
        ),
        (
            "&_verbs_init_and_alloc_context",
            "void *(*)(struct ibv_device *, int, size_t, struct verbs_context *, uint32_t)",
        ),
        ("&verbs_uninit_context", "void (*)(struct verbs_context *)"),
        (
            "&verbs_set_ops",
            "void (*)(struct verbs_context *, const struct verbs_context_ops *)",
        ),
        (
            "&ibv_cmd_get_context",
            "int (*)(struct verbs_context *, struct ibv_get_context *, size_t, \
             struct ib_uverbs_get_context_resp *, size_t)",
        ),
        (
            "&ibv_cmd_query_device_any",
            "int (*)(struct ibv_context *, const struct ibv_query_device_ex_input *, \
             struct ibv_device_attr_ex *, size_t, struct ib_uverbs_ex_query_device_resp *, \
             size_t *)",
        ),
        (
            "&ibv_cmd_query_port",
            "int (*)(struct ibv_context *, uint8_t, struct ibv_port_attr *, \
             struct ibv_query_port *, size_t)",
        ),
        (
            "&ibv_cmd_alloc_pd",
            "int (*)(struct ibv_context *, struct ibv_pd *, struct ibv_alloc_pd *, size_t, \
             struct ib_uverbs_alloc_pd_resp *, size_t)",
        ),
        ("&ibv_cmd_dealloc_pd", "int (*)(struct ibv_pd *)"),
        (
            "&ibv_cmd_reg_mr",
            "int (*)(struct ibv_pd *, void *, size_t, uint64_t, int, struct verbs_mr *, \
             struct ibv_reg_mr *, size_t, struct ib_uverbs_reg_mr_resp *, size_t)",
        ),
        (
            "&ibv_cmd_reg_dmabuf_mr",
            "int (*)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int, struct verbs_mr *, \
             struct ibv_command_buffer *)",
        ),
        ("&ibv_cmd_dereg_mr", "int (*)(struct verbs_mr *)"),
        (
            "&ibv_cmd_alloc_mw",
            "int (*)(struct ibv_pd *, enum ibv_mw_type, struct ibv_mw *, \
             struct ibv_alloc_mw *, size_t, struct ib_uverbs_alloc_mw_resp *, size_t)",
        ),
        ("&ibv_cmd_dealloc_mw", "int (*)(struct ibv_mw *)"),
        (
            "((struct verbs_context_ops *)0)->alloc_mw",
            "struct ibv_mw *(*)(struct ibv_pd *, enum ibv_mw_type)",
        ),
        (
            "((struct verbs_context_ops *)0)->bind_mw",
            "int (*)(struct ibv_qp *, struct ibv_mw *, struct ibv_mw_bind *)",
        ),
        (
            "((struct verbs_context_ops *)0)->dealloc_mw",
            "int (*)(struct ibv_mw *)",
        ),
        (
            "&ibv_cmd_rereg_mr",
            "int (*)(struct verbs_mr *, uint32_t, void *, size_t, uint64_t, int, \
             struct ibv_pd *, struct ibv_rereg_mr *, size_t, \
             struct ib_uverbs_rereg_mr_resp *, size_t)",
        ),
        (
            "((struct verbs_context_ops *)0)->rereg_mr",
            "int (*)(struct verbs_mr *, int, struct ibv_pd *, void *, size_t, int)",
        ),
        (
            "&ibv_cmd_create_cq",
            "int (*)(struct ibv_context *, int, struct ibv_comp_channel *, int, \
             struct ibv_cq *, struct ibv_create_cq *, size_t, \
             struct ib_uverbs_create_cq_resp *, size_t)",
        ),
        ("&ibv_cmd_destroy_cq", "int (*)(struct ibv_cq *)"),
        (
            "&ibv_cmd_create_cq_ex",
            "int (*)(struct ibv_context *, const struct ibv_cq_init_attr_ex *, \
             struct verbs_cq *, struct ibv_create_cq_ex *, size_t, \
             struct ib_uverbs_ex_create_cq_resp *, size_t, uint32_t)",
        ),
        (
            "&ibv_cmd_create_qp_ex",
            "int (*)(struct ibv_context *, struct verbs_qp *, struct ibv_qp_init_attr_ex *, \
             struct ibv_create_qp *, size_t, struct ib_uverbs_create_qp_resp *, size_t)",
        ),
        (
            "((struct verbs_context_ops *)0)->create_cq_ex",
            "struct ibv_cq_ex *(*)(struct ibv_context *, struct ibv_cq_init_attr_ex *)",
        ),
        (
            "((struct verbs_context_ops *)0)->create_qp_ex",
            "struct ibv_qp *(*)(struct ibv_context *, struct ibv_qp_init_attr_ex *)",
        ),
        (
            "&ibv_cmd_create_qp",
            "int (*)(struct ibv_pd *, struct ibv_qp *, struct ibv_qp_init_attr *, \
             struct ibv_create_qp *, size_t, struct ib_uverbs_create_qp_resp *, size_t)",
        ),
        (
            "&ibv_cmd_modify_qp",
            "int (*)(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_modify_qp *, \
             size_t)",
        ),
        (
            "&ibv_cmd_query_qp",
            "int (*)(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *, \
             struct ibv_query_qp *, size_t)",
        ),
        ("&ibv_cmd_destroy_qp", "int (*)(struct ibv_qp *)"),
        (
            "&ibv_cmd_create_srq",
            "int (*)(struct ibv_pd *, struct ibv_srq *, struct ibv_srq_init_attr *, \
             struct ibv_create_srq *, size_t, struct ib_uverbs_create_srq_resp *, size_t)",
        ),
        (
            "&ibv_cmd_modify_srq",
            "int (*)(struct ibv_srq *, struct ibv_srq_attr *, int, struct ibv_modify_srq *, \
             size_t)",
        ),
        (
            "&ibv_cmd_query_srq",
            "int (*)(struct ibv_srq *, struct ibv_srq_attr *, struct ibv_query_srq *, size_t)",
        ),
        ("&ibv_cmd_destroy_srq", "int (*)(struct ibv_srq *)"),
        (
            "&ibv_cmd_create_ah",
            "int (*)(struct ibv_pd *, struct ibv_ah *, struct ibv_ah_attr *, \
             struct ib_uverbs_create_ah_resp *, size_t)",
        ),
        ("&ibv_cmd_destroy_ah", "int (*)(struct ibv_ah *)"),
        (
            "((struct verbs_context_ops *)0)->create_ah",
            "struct ibv_ah *(*)(struct ibv_pd *, struct ibv_ah_attr *)",
        ),
        (
            "((struct verbs_context_ops *)0)->destroy_ah",
            "int (*)(struct ibv_ah *)",
        ),
        (
            "((struct verbs_context_ops *)0)->create_srq",
            "struct ibv_srq *(*)(struct ibv_pd *, struct ibv_srq_init_attr *)",
        ),
        (
            "((struct verbs_context_ops *)0)->destroy_srq",
            "int (*)(struct ibv_srq *)",
        ),
        (
            "((struct verbs_context_ops *)0)->modify_srq",
            "int (*)(struct ibv_srq *, struct ibv_srq_attr *, int)",
        ),
        (
            "((struct verbs_context_ops *)0)->query_srq",
            "int (*)(struct ibv_srq *, struct ibv_srq_attr *)",
        ),
        (
            "((struct verbs_context_ops *)0)->post_srq_recv",
            "int (*)(struct ibv_srq *, struct ibv_recv_wr *, struct ibv_recv_wr **)",
        ),
        (
            "((struct verbs_context_ops *)0)->create_cq",
            "struct ibv_cq *(*)(struct ibv_context *, int, struct ibv_comp_channel *, int)",
        ),
        (
            "((struct verbs_context_ops *)0)->create_qp",
            "struct ibv_qp *(*)(struct ibv_pd *, struct ibv_qp_init_attr *)",
        ),
        (
            "((struct verbs_context_ops *)0)->destroy_cq",
            "int (*)(struct ibv_cq *)",
        ),
        (
            "((struct verbs_context_ops *)0)->destroy_qp",
            "int (*)(struct ibv_qp *)",
        ),
        (
            "((struct verbs_context_ops *)0)->modify_qp",
            "int (*)(struct ibv_qp *, struct ibv_qp_attr *, int)",
        ),
        (
            "((struct verbs_context_ops *)0)->poll_cq",
            "int (*)(struct ibv_cq *, int, struct ibv_wc *)",
        ),
        (
            "((struct verbs_context_ops *)0)->post_recv",
            "int (*)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **)",
        ),
        (
            "((struct verbs_context_ops *)0)->post_send",
            "int (*)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **)",
        ),
        (
            "((struct verbs_context_ops *)0)->query_qp",
            "int (*)(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *)",
        ),
        (
            "((struct verbs_context_ops *)0)->req_notify_cq",
            "int (*)(struct ibv_cq *, int)",
        ),
        (
            "((struct verbs_context_ops *)0)->resize_cq",
            "int (*)(struct ibv_cq *, int)",
        ),
        (
            "&ibv_cmd_resize_cq",
            "int (*)(struct ibv_cq *, int, struct ibv_resize_cq *, size_t, \
             struct ib_uverbs_resize_cq_resp *, size_t)",
        ),
        (
            "((struct verbs_device_ops *)0)->match_device",
            "bool (*)(struct verbs_sysfs_dev *)",
        ),
        (
            "((struct verbs_device_ops *)0)->alloc_context",
            "struct verbs_context *(*)(struct ibv_device *, int, void *)",
        ),
        (
            "((struct verbs_device_ops *)0)->import_context",
            "struct verbs_context *(*)(struct ibv_device *, int)",
        ),
        (
            "((struct verbs_device_ops *)0)->alloc_device",
            "struct verbs_device *(*)(struct verbs_sysfs_dev *)",
        ),
        (
            "((struct verbs_device_ops *)0)->uninit_device",
            "void (*)(struct verbs_device *)",
        ),
        (
            "((struct verbs_context_ops *)0)->alloc_pd",
            "struct ibv_pd *(*)(struct ibv_context *)",
        ),
        (
            "((struct verbs_context_ops *)0)->dealloc_pd",
            "int (*)(struct ibv_pd *)",
        ),
        (
            "((struct verbs_context_ops *)0)->dereg_mr",
            "int (*)(struct verbs_mr *)",
        ),
        (
            "((struct verbs_context_ops *)0)->reg_mr",
            "struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, uint64_t, int)",
        ),
        (
            "((struct verbs_context_ops *)0)->reg_dmabuf_mr",
            "struct ibv_mr *(*)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int)",
        ),
        (
            "((struct verbs_context_ops *)0)->free_context",
            "void (*)(struct ibv_context *)",
        ),
        (
            "((struct verbs_context_ops *)0)->query_device_ex",
            "int (*)(struct ibv_context *, const struct ibv_query_device_ex_input *, \
             struct ibv_device_attr_ex *, size_t)",
        ),
        (
            "((struct verbs_context_ops *)0)->query_port",
            "int (*)(struct ibv_context *, uint8_t, struct ibv_port_attr *)",
        ),
    ];
    fns.iter()
        .map(|(e, t)| {
            (
                format!("__builtin_types_compatible_p(__typeof__({e}), {t})"),
                format!("the type of {e} is not {t}"),
            )
        })
        .collect()
}
