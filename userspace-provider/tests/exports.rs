//! The shipped library's dynamic symbol table: it exports nothing (libibverbs finds the
//! provider through the constructor, an `.init_array` entry that calls
//! `verbs_register_driver_34`), so no test-only or internal entry point can ship; and the
//! private ABI it imports is the one rdma-core's own source declares
//! (`IBVERBS_PABI_VERSION`, from the C compiler reading rdma-core's `config.h`/`driver.h`).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use common::rdma_core;

/// What the library may export. Nothing: libibverbs needs no symbol of a provider.
const ALLOWED_EXPORTS: &[&str] = &[];

/// The library as it ships: `cargo build --release -p ordma-provider` (a cdylib is not
/// built for tests), into a target directory of its own so it does not wait for the
/// running `cargo test`'s; incremental after the first run.
fn library() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        // target/<profile>/deps/<test>
        let target = exe.ancestors().nth(3).expect("the target directory");
        let dir = target.join("exports-check");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(&cargo)
            .args([
                "build",
                "--release",
                "--offline",
                "--lib",
                "-p",
                "ordma-provider",
            ])
            .env("CARGO_TARGET_DIR", &dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "cargo build --release -p ordma-provider failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = dir.join("release/libordma.so");
        assert!(lib.is_file(), "{} was not built", lib.display());
        lib
    })
    .clone()
}

/// `nm -D` of the library: (defined, undefined) symbol names, with their versions.
fn dynamic_symbols() -> (Vec<String>, Vec<String>) {
    let lib = library();
    let nm = |extra: &str| {
        let out = Command::new("nm")
            .args(["-D", "--with-symbol-versions", extra])
            .arg(&lib)
            .output()
            .expect("run nm (binutils)");
        assert!(out.status.success(), "nm {extra} {} failed", lib.display());
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().last().map(str::to_string))
            .collect::<Vec<_>>()
    };
    (nm("--defined-only"), nm("--undefined-only"))
}

#[test]
fn the_library_exports_nothing_but_what_libibverbs_needs() {
    let (defined, undefined) = dynamic_symbols();
    let unexpected: Vec<&String> = defined
        .iter()
        .filter(|s| !ALLOWED_EXPORTS.contains(&s.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{} exports symbols libibverbs does not need: {unexpected:?}",
        library().display()
    );
    // The check sees the table: the library does import from libibverbs and libc.
    assert!(
        undefined.iter().any(|s| s.starts_with("ibv_cmd_alloc_pd")),
        "{undefined:?}"
    );
    assert!(
        undefined.iter().any(|s| s.starts_with("calloc")),
        "{undefined:?}"
    );
}

#[test]
fn the_library_registers_with_rdma_core_s_private_abi() {
    let (_, undefined) = dynamic_symbols();
    let c = rdma_core::c_values(
        "pabi",
        &["config.h", "infiniband/driver.h"],
        &[],
        &["IBVERBS_PABI_VERSION".to_string()],
    );
    let pabi = c["IBVERBS_PABI_VERSION"];
    let want = format!("verbs_register_driver_{pabi}@IBVERBS_PRIVATE_{pabi}");
    assert!(
        undefined.contains(&want),
        "the library does not import {want} (rdma-core's private ABI {pabi}); it imports \
         {:?}",
        undefined
            .iter()
            .filter(|s| s.starts_with("verbs_register_driver"))
            .collect::<Vec<_>>()
    );
}
