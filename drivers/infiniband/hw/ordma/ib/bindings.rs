// SPDX-License-Identifier: GPL-2.0

//! Raw ib_core bindings, generated at build time, and the C helpers.
//!
//! These may not be used directly outside `ib/`: wrap them in the parent module.

// `allow`, not `expect`: which lints fire depends on what bindgen generated for this tree.
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    clippy::as_underscore,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    reason = "bindgen output follows C naming and is not ours to lint"
)]
mod generated {
    use kernel::ffi;
    use pin_init::MaybeZeroable;

    // The kernel's bindgen parameters blocklist these so they map to Rust's own types.
    type __kernel_size_t = usize;
    type __kernel_ssize_t = isize;
    type __kernel_ptrdiff_t = isize;
    include!("bindings_generated.rs");
}

pub(super) use generated::*;

/// The C compiler's view of the layouts the binding uses (helpers.c).
pub(super) fn layout() -> &'static [usize] {
    // SAFETY: `rust_ib_helper_layout` is a `const size_t[]` of `rust_ib_helper_layout_len`
    // entries defined in helpers.c and linked into this module; initialised before the
    // module runs and never written.
    unsafe {
        core::slice::from_raw_parts(
            core::ptr::addr_of!(generated::rust_ib_helper_layout).cast::<usize>(),
            generated::rust_ib_helper_layout_len,
        )
    }
}
