//! `ordma-verbs-data`: the data-path VM test program. The test itself is C
//! (`verbs_data.c`, written against libibverbs as an RDMA program is); this passes it the
//! command line and returns its exit status.

use std::ffi::{c_char, c_int, CString};

extern "C" {
    fn verbs_data_main(argc: c_int, argv: *const *const c_char) -> c_int;
}

fn main() {
    let args: Vec<CString> = std::env::args()
        .filter_map(|a| CString::new(a).ok())
        .collect();
    let mut argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let argc = c_int::try_from(args.len()).unwrap_or(c_int::MAX);
    // SAFETY: argv holds argc pointers to NUL-terminated strings that outlive the call,
    // then a null pointer, as a C main expects.
    let rc = unsafe { verbs_data_main(argc, argv.as_ptr()) };
    std::process::exit(rc);
}
