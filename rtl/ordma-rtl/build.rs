//! Verilates the RTL blocks of `rtl/hdl` and compiles them, with Verilator's runtime and
//! the C shim of `csrc/shim.cpp`, into this crate's static library.
//!
//! Needs `verilator` (the build root's, Debian's 5.032: run cargo under `scripts/in-root`);
//! `VERILATOR` names another. Cargo runs it again only when a file of `rtl/hdl` or the shim
//! changes, so a warm build verilates and compiles nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One Verilated model: its C++ class prefix, its file and the extra Verilator arguments.
struct Model {
    prefix: &'static str,
    file: &'static str,
    args: &'static [&'static str],
}

const MODELS: &[Model] = &[
    Model {
        prefix: "Vicrc",
        file: "ordma_icrc.sv",
        args: &[],
    },
    // The mux as the harness drives it: four channels, 64-bit beats.
    Model {
        prefix: "Vmux",
        file: "ordma_dma_mux.sv",
        args: &["-GDW=64"],
    },
    Model {
        prefix: "Vmux_lose",
        file: "ordma_dma_mux.sv",
        args: &["-GDW=64", "-DORDMA_MUX_MUTANT=1"],
    },
    Model {
        prefix: "Vmux_bubble",
        file: "ordma_dma_mux.sv",
        args: &["-GDW=64", "-DORDMA_MUX_MUTANT=2"],
    },
];

fn main() {
    // PANIC: build time only: cargo prints it as the build error.
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let hdl = manifest.join("../hdl");
    // PANIC: build time only: cargo prints it as the build error.
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let verilator = std::env::var("VERILATOR").unwrap_or_else(|_| "verilator".into());
    println!("cargo:rerun-if-env-changed=VERILATOR");
    println!("cargo:rerun-if-changed=csrc/shim.cpp");
    for f in ["ordma_icrc.sv", "icrc_tables.svh", "ordma_dma_mux.sv"] {
        println!("cargo:rerun-if-changed={}", hdl.join(f).display());
    }

    let root = Command::new(&verilator)
        .args(["--getenv", "VERILATOR_ROOT"])
        .output()
        .unwrap_or_else(|e| {
            // PANIC: build time only: cargo prints it as the build error.
            panic!("ordma-rtl needs Verilator ({verilator}: {e}); the build root has it: run cargo in scripts/in-root")
        });
    let root = PathBuf::from(String::from_utf8_lossy(&root.stdout).trim());

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .debug(false)
        .flag("-w")
        .include(root.join("include"))
        .include(root.join("include/vltstd"));
    for d in [
        "VM_COVERAGE",
        "VM_SC",
        "VM_TIMING",
        "VM_TRACE",
        "VM_TRACE_FST",
        "VM_TRACE_VCD",
    ] {
        build.define(d, "0");
    }
    for m in MODELS {
        let dir = out.join(m.prefix);
        let _ = std::fs::remove_dir_all(&dir);
        let status = Command::new(&verilator)
            .args([
                "--cc",
                "--assert",
                "-O3",
                "--x-assign",
                "fast",
                "--x-initial",
                "fast",
            ])
            .args(["--quiet-stats", "--prefix", m.prefix, "--Mdir"])
            .arg(&dir)
            .arg(format!("-I{}", hdl.display()))
            .args(m.args)
            .arg(hdl.join(m.file))
            .status()
            // PANIC: build time only: cargo prints it as the build error.
            .unwrap_or_else(|e| panic!("{verilator}: {e}"));
        assert!(status.success(), "verilator failed on {}", m.file);
        build.include(&dir);
        for f in cpp_files(&dir) {
            build.file(f);
        }
    }
    build.file(root.join("include/verilated.cpp"));
    build.file(root.join("include/verilated_threads.cpp"));
    build.file(manifest.join("csrc/shim.cpp"));
    build.compile("ordma_rtl_models");
}

fn cpp_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        // PANIC: build time only: cargo prints it as the build error.
        .expect("verilator wrote it")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
        .collect();
    v.sort();
    v
}
