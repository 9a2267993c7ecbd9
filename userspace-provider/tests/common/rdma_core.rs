//! Shared by the provider's tests: rdma-core's own headers, from Debian's source package of
//! the installed libibverbs-dev (`tests/rdma-core-source.sh`), and C programs compiled
//! against them, so expected values come from the C compiler reading rdma-core's headers.
// Each test crate that includes this uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the source package is kept: `ORDMA_RDMA_CORE_SRC`, else the build root's state
/// directory (`/ordma/cache`, outside the repository).
fn source_dir() -> PathBuf {
    std::env::var_os("ORDMA_RDMA_CORE_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/ordma/cache/rdma-core-src"))
}

/// rdma-core's include directory (as its cmake build lays it out), fetched on first use.
/// Fails the test, saying why, when it cannot be had.
pub fn include_dir() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/rdma-core-source.sh");
    let dir = source_dir();
    let out = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "cannot get rdma-core's source package into {}:\n{}\nThis test needs the build root \
         (scripts/in-root -- cargo test ...), run as root, with network to the Debian mirror; \
         see Documentation/testing.md.",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Compiles and runs a C program that includes `headers` from rdma-core's include
/// directory, checks `asserts` (C `_Static_assert` conditions, each with its message) and
/// prints the value of each C expression in `exprs`; returns them by expression.
pub fn c_values(
    name: &str,
    headers: &[&str],
    asserts: &[(String, String)],
    exprs: &[String],
) -> BTreeMap<String, i64> {
    let inc = include_dir();
    let dir = std::env::temp_dir().join(format!("ordma-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n");
    for h in headers {
        c += &format!("#include <{h}>\n");
    }
    for (cond, msg) in asserts {
        c += &format!("_Static_assert({cond}, \"{msg}\");\n");
    }
    c += "int main(void)\n{\n";
    let mut exprs = exprs.to_vec();
    exprs.sort();
    exprs.dedup();
    for e in &exprs {
        c += &format!("\tprintf(\"%s\\t%lld\\n\", \"{e}\", (long long)({e}));\n");
    }
    c += "\treturn 0;\n}\n";
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, &c).expect("write the C program");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-I"])
        .arg(&inc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(
        out.status.success(),
        "{cc} failed on {} (against {}):\n{}",
        src.display(),
        inc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().expect("run the C program");
    assert!(out.status.success(), "{} failed", exe.display());
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let (k, v) = line.split_once('\t').expect("key\\tvalue");
        values.insert(k.to_string(), v.parse().expect("a number"));
    }
    assert_eq!(values.len(), exprs.len(), "one value per expression");
    values
}

/// What the C preprocessor makes of each C expression in `exprs` after including `headers`
/// from rdma-core's include directory, whitespace removed; returned by expression.
pub fn c_expand(headers: &[&str], exprs: &[&str]) -> BTreeMap<String, String> {
    let inc = include_dir();
    let mut c = String::new();
    for h in headers {
        c += &format!("#include <{h}>\n");
    }
    for (i, e) in exprs.iter().enumerate() {
        c += &format!("ordma_expansion_{i}: {e}\n");
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut child = Command::new(&cc)
        .args(["-E", "-P", "-std=gnu11", "-I"])
        .arg(&inc)
        .args(["-x", "c", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run the C preprocessor {cc}: {e}"));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(c.as_bytes()).expect("write to cc -E");
    }
    let out = child.wait_with_output().expect("cc -E");
    assert!(
        out.status.success(),
        "{cc} -E failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut values = BTreeMap::new();
    for line in text.lines() {
        for (i, e) in exprs.iter().enumerate() {
            if let Some(rest) = line.trim().strip_prefix(&format!("ordma_expansion_{i}:")) {
                let v: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
                values.insert(e.to_string(), v);
            }
        }
    }
    assert_eq!(
        values.len(),
        exprs.len(),
        "one expansion per expression:\n{text}"
    );
    values
}
