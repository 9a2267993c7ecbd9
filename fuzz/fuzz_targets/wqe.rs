//! libFuzzer's entry for the `wqe` target ([`ordma_fuzz::wqe`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordma_fuzz::wqe::run(data));
