//! Compiles the test program's C part (`verbs_data.c`) and links libibverbs.

fn main() {
    println!("cargo:rerun-if-changed=verbs_data.c");
    cc::Build::new()
        .file("verbs_data.c")
        .flag("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("verbs_data");
    println!("cargo:rustc-link-lib=ibverbs");
}
