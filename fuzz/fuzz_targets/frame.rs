//! libFuzzer's entry for the `frame` target ([`ordma_fuzz::frame`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordma_fuzz::frame::run(data));
