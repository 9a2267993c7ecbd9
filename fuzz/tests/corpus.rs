//! Every checked-in seed (`fuzz/corpus/<target>/`) and every reproducer of a crash the
//! fuzzer found (`fuzz/regressions/<target>/`) through its target, without libFuzzer: none
//! may panic.

use std::fs;
use std::path::PathBuf;

fn dir(kind: &str, target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(kind)
        .join(target)
}

fn files(kind: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(rd) = fs::read_dir(dir(kind, target)) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            (name, fs::read(e.path()).unwrap())
        })
        .filter(|(n, _)| !n.starts_with('.') && n != "README.md")
        .collect();
    out.sort();
    out
}

#[test]
fn seeds_and_regressions_run_clean() {
    let mut n = 0;
    for (target, run) in ordma_fuzz::TARGETS {
        for kind in ["corpus", "regressions"] {
            for (name, data) in files(kind, target) {
                eprintln!("{kind}/{target}/{name}");
                run(&data);
                n += 1;
            }
        }
    }
    assert!(n >= 15, "only {n} inputs: the corpora are missing");
}

#[test]
#[ignore = "writes fuzz/corpus/: run after changing a script's format or the rig"]
fn write_seeds() {
    for (target, _, _) in ordma_fuzz::seeds::all() {
        let _ = fs::remove_dir_all(dir("corpus", target));
    }
    for (target, name, data) in ordma_fuzz::seeds::all() {
        fs::create_dir_all(dir("corpus", target)).unwrap();
        fs::write(dir("corpus", target).join(name), data).unwrap();
    }
}
