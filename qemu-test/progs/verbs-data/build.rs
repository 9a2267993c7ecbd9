//! Compiles the test program's C part (`verbs_data.c`, `mr_checks.c`, `ownership.c`,
//! `quirks.c`, `srq_checks.c`, `atomics.c`, `uc.c`, `ud.c`, `stress.c`, `many.c`, `ex.c`, `mw.c`, `scale.c`, `cq_resize.c`, `qp_counters.c`, `health.c`) and links libibverbs.

fn main() {
    for f in [
        "verbs_data.c",
        "verbs_data.h",
        "mr_checks.c",
        "ownership.c",
        "quirks.c",
        "srq_checks.c",
        "atomics.c",
        "uc.c",
        "ud.c",
        "stress.c",
        "many.c",
        "ex.c",
        "mw.c",
        "scale.c",
        "cq_resize.c",
        "qp_counters.c",
        "health.c",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .file("verbs_data.c")
        .file("mr_checks.c")
        .file("ownership.c")
        .file("quirks.c")
        .file("srq_checks.c")
        .file("atomics.c")
        .file("uc.c")
        .file("ud.c")
        .file("stress.c")
        .file("many.c")
        .file("ex.c")
        .file("mw.c")
        .file("scale.c")
        .file("cq_resize.c")
        .file("qp_counters.c")
        .file("health.c")
        .flag("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("verbs_data");
    println!("cargo:rustc-link-lib=ibverbs");
}
