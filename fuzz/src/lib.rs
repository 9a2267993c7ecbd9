//! Fuzz targets for the NIC model's parsers of what a guest or the wire hands it.
//!
//! Each target is a function of one byte string that must never panic (with debug
//! assertions and overflow checks on, as `scripts/fuzz.sh` builds them):
//!
//! - [`wqe::run`]: send and receive WQEs written into a connected QP pair's rings and rung,
//!   doorbell writes of any value, timers, QP state changes;
//! - [`frame::run`]: datagrams from the wire: raw bytes, and transport headers wrapped in
//!   valid Ethernet/IPv4/UDP headers and ICRC so they reach the responder and the
//!   completer, alone or batched;
//! - [`admin::run`]: admin commands, raw admin entries, the memory they point at, BAR0
//!   register writes.
//!
//! Each also checks its decoders' round trips (decode, encode, decode gives the same), and
//! `wqe` and `frame` where the NIC writes ([`guard::Guard`]: never into memory it only
//! reads). The
//! input is a script of operations ([`script`]), so the checked-in seeds
//! (`fuzz/corpus/<target>/`, made by [`seeds`] from real WQEs, frames and commands) start
//! the search deep in the engine. The fuzz binaries (`fuzz_targets/`) only call these
//! functions; `cargo test` replays the seeds and every crash ever found
//! (`fuzz/regressions/`) through them.
#![warn(missing_docs)]

#[path = "../../rtl/ordma-model/tests/common/mod.rs"]
#[allow(
    dead_code,
    unused_imports,
    reason = "the model's test rig, shared; not all of it"
)]
#[allow(
    clippy::new_without_default,
    reason = "the model's test rig, linted as its tests"
)]
mod common;

pub mod admin;
pub mod frame;
pub mod guard;
pub mod script;
pub mod seeds;
pub mod wqe;

/// At most this many operations run per input, so one input stays fast.
pub const MAX_OPS: usize = 64;

/// A target: one input, run.
pub type Target = fn(&[u8]);

/// The targets by name: the corpus and regression folders' names.
pub const TARGETS: [(&str, Target); 3] = [
    ("wqe", wqe::run),
    ("frame", frame::run),
    ("admin", admin::run),
];
