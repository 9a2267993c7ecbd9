//! The ordma NIC's hardware interface as a `no_std` crate for the model and host tests.
//!
//! The definitions live in [`defs`] (`src/defs/`), a dependency-free module that the
//! kernel crate also compiles (with `#[path]`), so driver and model cannot drift apart.
//! `Documentation/hardware.md` is the prose version.
#![no_std]
#![warn(missing_docs)]

pub mod defs;
pub use defs::*;
