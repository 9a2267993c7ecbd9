//! libFuzzer's entry for the `admin` target ([`ordma_fuzz::admin`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordma_fuzz::admin::run(data));
