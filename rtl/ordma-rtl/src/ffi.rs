//! The C interface of `csrc/shim.cpp`: one call per clock cycle.

use std::ffi::c_void;

/// The ICRC unit's ports in one cycle (`ordma_icrc_io`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IcrcIo {
    /// The beat, as 16 little-endian 32-bit words (byte `j` of the beat in word `j / 4`).
    pub in_data: [u32; 16],
    /// `in_valid`.
    pub in_valid: u8,
    /// `in_last`.
    pub in_last: u8,
    /// `in_empty`: unused bytes at the end of a last beat.
    pub in_empty: u8,
    /// `out_ready`.
    pub out_ready: u8,
    /// `in_ready`, sampled before the clock edge.
    pub in_ready: u8,
    /// `out_valid`, sampled before the clock edge.
    pub out_valid: u8,
    /// `out_icrc`, sampled before the clock edge.
    pub out_icrc: u32,
}

/// The mux's ports in one cycle (`ordma_mux_io`): four channels of 64-bit beats.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct MuxIo {
    /// Each channel's beat.
    pub in_data: [u64; 4],
    /// `in_valid`, bit per channel.
    pub in_valid: u8,
    /// `in_last`, bit per channel.
    pub in_last: u8,
    /// `out_ready`.
    pub out_ready: u8,
    /// `in_ready`, bit per channel, sampled before the clock edge.
    pub in_ready: u8,
    /// `out_valid`, sampled before the clock edge.
    pub out_valid: u8,
    /// `out_last`, sampled before the clock edge.
    pub out_last: u8,
    /// `out_chan`, sampled before the clock edge.
    pub out_chan: u8,
    /// `out_data`, sampled before the clock edge.
    pub out_data: u64,
}

extern "C" {
    pub fn ordma_icrc_new() -> *mut c_void;
    pub fn ordma_icrc_free(p: *mut c_void);
    pub fn ordma_icrc_errors(p: *mut c_void) -> u64;
    pub fn ordma_icrc_cycle(p: *mut c_void, io: *mut IcrcIo);
    pub fn ordma_mux_new() -> *mut c_void;
    pub fn ordma_mux_free(p: *mut c_void);
    pub fn ordma_mux_errors(p: *mut c_void) -> u64;
    pub fn ordma_mux_cycle(p: *mut c_void, io: *mut MuxIo);
    pub fn ordma_mux_lose_new() -> *mut c_void;
    pub fn ordma_mux_lose_free(p: *mut c_void);
    pub fn ordma_mux_lose_errors(p: *mut c_void) -> u64;
    pub fn ordma_mux_lose_cycle(p: *mut c_void, io: *mut MuxIo);
    pub fn ordma_mux_bubble_new() -> *mut c_void;
    pub fn ordma_mux_bubble_free(p: *mut c_void);
    pub fn ordma_mux_bubble_errors(p: *mut c_void) -> u64;
    pub fn ordma_mux_bubble_cycle(p: *mut c_void, io: *mut MuxIo);
}
