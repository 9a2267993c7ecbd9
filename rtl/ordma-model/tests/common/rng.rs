//! A small deterministic random walk for the hostile-guest tests (`hostile.rs`,
//! `hostile_data.rs`).
#![allow(dead_code, reason = "each test file uses a part")]

/// xorshift64*: small, deterministic, good enough to explore.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Iterations of a walk: `ORDMA_FUZZ_ITERS`, 20 000 by default.
pub fn iters() -> u64 {
    std::env::var("ORDMA_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}
