//! How the NIC's DMA and ICRC are carried out: by the model's own Rust, or by the RTL
//! blocks of `rtl/hdl`, Verilated, in co-simulation (`ordma-model --rtl`).
//!
//! The engine reaches guest memory only through its [`Gate`](super) and computes the ICRC
//! of a frame only in [`super::wire`]; both call the functions here, which use the
//! [`Datapath`] installed at start-up ([`install`]), or, with none installed (the
//! default, and every unit test), guest memory and [`super::wire::icrc`] directly.
//!
//! Each DMA names its [`Chan`], the DMA channel mux's input it takes in the hardware: the
//! RTL datapath streams it through that channel of `ordma_dma_mux` and acts on memory only
//! with the beats that come out.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::mem::{Atomic64, Dma, DmaError};

#[cfg(feature = "rtl")]
pub mod rtl;

/// The DMA channel mux's inputs: the NIC's streams that touch host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chan {
    /// Descriptor fetch: WQEs, admin commands, page tables, doorbell records.
    Fetch = 0,
    /// The requester's payload reads (local data to send, the source of a local copy).
    PayloadRead = 1,
    /// The responder's payload writes (data received, READ responses, atomics).
    PayloadWrite = 2,
    /// The NIC's reports: CQEs, events, admin completions and responses.
    Report = 3,
}

/// A way to carry out the NIC's DMA and ICRC.
pub trait Datapath: Send {
    /// Reads `buf.len()` bytes at `addr` from `mem` on channel `chan`.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if the range is not mapped or the datapath failed (nothing read then).
    fn read(
        &mut self,
        mem: &dyn Dma,
        chan: Chan,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), DmaError>;

    /// Writes `data` to `mem` at `addr` on channel `chan`.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if the range is not mapped (nothing written then) or the datapath
    /// failed.
    fn write(&mut self, mem: &dyn Dma, chan: Chan, addr: u64, data: &[u8]) -> Result<(), DmaError>;

    /// Copies `len` bytes from `src` to `dst` (payload read, then payload write).
    ///
    /// # Errors
    ///
    /// [`DmaError`] if either range is not mapped or the datapath failed.
    fn copy(&mut self, mem: &dyn Dma, src: u64, dst: u64, len: usize) -> Result<(), DmaError>;

    /// Executes atomic `op` on the word at `addr` (a payload write) and returns its old value.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if the word is not mapped or aligned, or the datapath failed.
    fn atomic64(&mut self, mem: &dyn Dma, addr: u64, op: Atomic64) -> Result<u64, DmaError>;

    /// The ICRC of `frame` (its last four bytes excluded), as [`super::wire::icrc`].
    fn icrc(&mut self, frame: &[u8]) -> Option<u32>;

    /// Its counters for the control channel's `status`: ` key=value` pairs, each with a
    /// leading space.
    fn status(&self) -> String;
}

static INSTALLED: OnceLock<Mutex<Box<dyn Datapath>>> = OnceLock::new();

/// Makes `d` the datapath of every NIC of this process, once, at start-up (before any
/// NIC runs). `false` if one was installed already.
pub fn install(d: Box<dyn Datapath>) -> bool {
    INSTALLED.set(Mutex::new(d)).is_ok()
}

/// The installed datapath, locked (a leaf lock: nothing else is taken while it is held).
fn installed() -> Option<MutexGuard<'static, Box<dyn Datapath>>> {
    INSTALLED
        .get()
        .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
}

/// [`Datapath::read`] of the installed datapath, or `mem`'s own.
pub(super) fn read(mem: &dyn Dma, chan: Chan, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
    match installed() {
        Some(mut d) => d.read(mem, chan, addr, buf),
        None => mem.dma_read(addr, buf),
    }
}

/// [`Datapath::write`] of the installed datapath, or `mem`'s own.
pub(super) fn write(mem: &dyn Dma, chan: Chan, addr: u64, data: &[u8]) -> Result<(), DmaError> {
    match installed() {
        Some(mut d) => d.write(mem, chan, addr, data),
        None => mem.dma_write(addr, data),
    }
}

/// [`Datapath::copy`] of the installed datapath, or `mem`'s own.
pub(super) fn copy(mem: &dyn Dma, src: u64, dst: u64, len: usize) -> Result<(), DmaError> {
    match installed() {
        Some(mut d) => d.copy(mem, src, dst, len),
        None => mem.dma_copy(src, dst, len),
    }
}

/// [`Datapath::atomic64`] of the installed datapath, or `mem`'s own.
pub(super) fn atomic64(mem: &dyn Dma, addr: u64, op: Atomic64) -> Result<u64, DmaError> {
    match installed() {
        Some(mut d) => d.atomic64(mem, addr, op),
        None => mem.dma_atomic64(addr, op),
    }
}

/// The ICRC of `frame` (its last four bytes excluded): the installed datapath's, or
/// [`super::wire::icrc`].
pub fn icrc(frame: &[u8]) -> Option<u32> {
    match installed() {
        Some(mut d) => d.icrc(frame),
        _ => super::wire::icrc(frame),
    }
}

/// The installed datapath's counters (` key=value` pairs), empty without one.
pub fn status() -> String {
    installed().map(|d| d.status()).unwrap_or_default()
}
