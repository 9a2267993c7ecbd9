//! Generates the provider's view of libibverbs' public types, the uverbs ABI and ordma's
//! uapi (`uapi/rdma/ordma-abi.h`) with the bindgen tool, and links libibverbs.

use std::path::PathBuf;
use std::process::Command;

fn main() -> Result<(), String> {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=../uapi/rdma/ordma-abi.h");
    println!("cargo:rustc-link-lib=ibverbs");
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set (run through cargo)")?);
    let bindgen = std::env::var_os("BINDGEN").unwrap_or_else(|| "bindgen".into());
    let status = Command::new(&bindgen)
        .args([
            "wrapper.h",
            "--use-core",
            "--with-derive-default",
            "--no-layout-tests",
        ])
        .args([
            "--allowlist-type",
            "ibv_context|verbs_context|ibv_device|ibv_pd|ibv_mr",
        ])
        .args([
            "--allowlist-type",
            "ibv_cq|ibv_qp|ibv_qp_init_attr|ibv_qp_attr|ibv_comp_channel|ibv_wc",
        ])
        .args([
            "--allowlist-type",
            "ibv_srq|ibv_srq_init_attr|ibv_srq_attr|ibv_srq_attr_mask",
        ])
        .args([
            "--allowlist-type",
            "ibv_send_wr|ibv_recv_wr|ibv_send_flags|ibv_wc_flags",
        ])
        .args([
            "--allowlist-type",
            "ibv_port_attr|ibv_device_attr_ex|ibv_query_device_ex_input",
        ])
        .args([
            "--allowlist-type",
            "ibv_cq_ex|ibv_cq_init_attr_ex|ibv_poll_cq_attr|ibv_create_cq_wc_flags",
        ])
        .args([
            "--allowlist-type",
            "ibv_cq_init_attr_mask|ibv_create_cq_attr_flags",
        ])
        .args([
            "--allowlist-type",
            "ibv_qp_ex|ibv_qp_init_attr_ex|ibv_qp_init_attr_mask|ibv_qp_create_send_ops_flags",
        ])
        .args(["--allowlist-type", "ibv_data_buf"])
        .args([
            "--allowlist-type",
            "ibv_mw|ibv_mw_bind|ibv_mw_type|ibv_access_flags",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_(cmd_hdr|ex_cmd_hdr|get_context|get_context_resp)",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_(alloc_pd|alloc_pd_resp|query_port|reg_mr|reg_mr_resp|rereg_mr|rereg_mr_resp)",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_(create_cq|create_cq_resp|create_qp|create_qp_resp|modify_qp|query_qp)",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_ex_(create_cq|create_cq_resp)",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_(create_srq|create_srq_resp|modify_srq|query_srq|create_ah_resp)",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_(resize_cq|resize_cq_resp)",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_(alloc_mw|alloc_mw_resp)",
        ])
        .args([
            "--allowlist-type",
            "ib_uverbs_ex_query_device_resp|ib_uverbs_device_cap_flags|ordma_ibv_.*",
        ])
        .args(["--allowlist-var", "ORDMA_.*"])
        .arg("-o")
        .arg(out.join("bindings.rs"))
        .status()
        .map_err(|e| format!("cannot run {}: {e}", bindgen.to_string_lossy()))?;
    if !status.success() {
        return Err(format!("bindgen failed on wrapper.h ({status})"));
    }
    Ok(())
}
