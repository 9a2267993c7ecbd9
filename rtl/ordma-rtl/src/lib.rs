//! The ordma NIC's RTL blocks (`rtl/hdl`), compiled by Verilator, driven cycle by cycle.
//!
//! [`Icrc`] is the ICRC unit (`ordma_icrc`), [`Mux`] the DMA channel mux
//! (`ordma_dma_mux`, four channels of 64-bit beats), or one of its test mutants
//! ([`MuxKind`]). Each `cycle` applies the inputs, samples the outputs (both sides of
//! every handshake in that cycle) and clocks the block once; the SystemVerilog assertions
//! run at that edge, and `assertion_failures` counts the ones that failed.
//! [`scoreboard`] checks the mux from outside against a reference of per-channel order.
#![warn(missing_docs)]

use std::ffi::c_void;

mod ffi;
pub mod scoreboard;

pub use ffi::{IcrcIo, MuxIo};

/// The bytes a frame must have, without its ICRC, for the ICRC unit: past the BTH, over
/// IPv4 (54) or IPv6 (74, by the Ethernet type in bytes 12 and 13, as the unit reads it).
pub fn icrc_headers(covered: &[u8]) -> usize {
    if covered.get(12..14) == Some(&[0x86, 0xdd][..]) {
        74
    } else {
        54
    }
}

/// The ICRC unit, Verilated.
pub struct Icrc {
    p: *mut c_void,
    cycles: u64,
}

impl Icrc {
    /// A unit out of reset.
    pub fn new() -> Self {
        // SAFETY: the shim allocates a model and resets it; the pointer is ours alone until
        // `drop` frees it.
        let p = unsafe { ffi::ordma_icrc_new() };
        Icrc { p, cycles: 0 }
    }

    /// One clock cycle with `io`'s inputs; its outputs are filled in.
    pub fn cycle(&mut self, io: &mut IcrcIo) {
        self.cycles += 1;
        // SAFETY: `p` is a live model (freed only by `drop`); `io` is a valid, exclusive
        // `ordma_icrc_io` for the call's duration.
        unsafe { ffi::ordma_icrc_cycle(self.p, io) }
    }

    /// Cycles clocked since reset.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// SystemVerilog assertions that failed so far.
    pub fn assertion_failures(&self) -> u64 {
        // SAFETY: `p` is a live model.
        unsafe { ffi::ordma_icrc_errors(self.p) }
    }

    /// The ICRC of `covered` (a frame without its ICRC), streamed at a beat a cycle with
    /// the output always ready: what the model's `wire::icrc` returns for the frame.
    /// `None` if it is shorter than the headers the unit masks ([`icrc_headers`]) or the
    /// unit gave no answer in time.
    pub fn icrc(&mut self, covered: &[u8]) -> Option<u32> {
        if covered.len() < icrc_headers(covered) {
            return None;
        }
        let beats: Vec<&[u8]> = covered.chunks(64).collect();
        let mut next = 0;
        let mut io = IcrcIo {
            out_ready: 1,
            ..IcrcIo::default()
        };
        // A beat a cycle, then the three cycles of the pipeline (and some to spare).
        for _ in 0..beats.len() + 8 {
            match beats.get(next) {
                Some(b) => {
                    io.in_valid = 1;
                    io.in_last = u8::from(next + 1 == beats.len());
                    set_beat(&mut io, b);
                }
                None => io.in_valid = 0,
            }
            self.cycle(&mut io);
            if io.in_valid == 1 && io.in_ready == 1 {
                next += 1;
            }
            if io.out_valid == 1 {
                return Some(io.out_icrc);
            }
        }
        None
    }
}

/// `io`'s beat: `b`'s bytes, zero after them, and `in_empty` for a short one.
pub fn set_beat(io: &mut IcrcIo, b: &[u8]) {
    let mut bytes = [0u8; 64];
    let n = b.len().min(64);
    bytes[..n].copy_from_slice(&b[..n]);
    for (w, c) in io.in_data.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    // CAST: 0..=63.
    io.in_empty = ((64 - n) % 64) as u8;
}

// SAFETY: the Verilated model behind `p` belongs to this value alone (no other pointer to it
// exists) and has no thread affinity (Verilated single-threaded, its own context): moving
// it to another thread and clocking it there, one thread at a time, is sound.
unsafe impl Send for Icrc {}

impl Default for Icrc {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Icrc {
    fn drop(&mut self) {
        // SAFETY: `p` came from `ordma_icrc_new` and is freed once, here.
        unsafe { ffi::ordma_icrc_free(self.p) }
    }
}

/// Which mux: the real one or a test mutant (`ORDMA_MUX_MUTANT` in `ordma_dma_mux.sv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MuxKind {
    /// `ordma_dma_mux` as it is.
    Good,
    /// Mutant 1: the beat that arrives while the output is stalled overwrites it.
    LosesBeat,
    /// Mutant 2: a bubble whenever the grant passes to another channel.
    Bubble,
}

/// The DMA channel mux, Verilated: four channels, 64-bit beats.
pub struct Mux {
    p: *mut c_void,
    kind: MuxKind,
    cycles: u64,
}

impl Mux {
    /// Channels.
    pub const N: usize = 4;

    /// A mux of `kind` out of reset.
    pub fn new(kind: MuxKind) -> Self {
        // SAFETY: the shim allocates a model and resets it; the pointer is ours alone until
        // `drop` frees it.
        let p = unsafe {
            match kind {
                MuxKind::Good => ffi::ordma_mux_new(),
                MuxKind::LosesBeat => ffi::ordma_mux_lose_new(),
                MuxKind::Bubble => ffi::ordma_mux_bubble_new(),
            }
        };
        Mux { p, kind, cycles: 0 }
    }

    /// One clock cycle with `io`'s inputs; its outputs are filled in.
    pub fn cycle(&mut self, io: &mut MuxIo) {
        self.cycles += 1;
        // SAFETY: `p` is a live model of `kind` (freed only by `drop`); `io` is a valid,
        // exclusive `ordma_mux_io` for the call's duration.
        unsafe {
            match self.kind {
                MuxKind::Good => ffi::ordma_mux_cycle(self.p, io),
                MuxKind::LosesBeat => ffi::ordma_mux_lose_cycle(self.p, io),
                MuxKind::Bubble => ffi::ordma_mux_bubble_cycle(self.p, io),
            }
        }
    }

    /// Cycles clocked since reset.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// SystemVerilog assertions that failed so far.
    pub fn assertion_failures(&self) -> u64 {
        // SAFETY: `p` is a live model of `kind`.
        unsafe {
            match self.kind {
                MuxKind::Good => ffi::ordma_mux_errors(self.p),
                MuxKind::LosesBeat => ffi::ordma_mux_lose_errors(self.p),
                MuxKind::Bubble => ffi::ordma_mux_bubble_errors(self.p),
            }
        }
    }
}

// SAFETY: as for `Icrc`: the model is this value's alone and has no thread affinity.
unsafe impl Send for Mux {}

impl Drop for Mux {
    fn drop(&mut self) {
        // SAFETY: `p` came from the `new` of `kind` and is freed once, here.
        unsafe {
            match self.kind {
                MuxKind::Good => ffi::ordma_mux_free(self.p),
                MuxKind::LosesBeat => ffi::ordma_mux_lose_free(self.p),
                MuxKind::Bubble => ffi::ordma_mux_bubble_free(self.p),
            }
        }
    }
}

/// A small deterministic generator (splitmix64) for the tests' random frames and mixes.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        // CAST: 53 random bits into [0, 1).
        ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }

    /// `buf` filled with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
    }
}
