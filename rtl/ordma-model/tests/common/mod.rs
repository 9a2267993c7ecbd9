//! What the engine's test files share: a recording interrupt mock and the guest-memory
//! layout their rigs program the NIC with.

use std::cell::RefCell;

use ordma_model::engine::Interrupts;

pub mod eth;
pub mod pair;
pub mod rig;
pub mod rng;

/// Records every MSI-X vector raised.
#[derive(Default)]
pub struct Irqs(RefCell<Vec<u16>>);

impl Interrupts for Irqs {
    fn raise(&self, vector: u16) {
        self.0.borrow_mut().push(vector);
    }
}

impl Irqs {
    /// The vectors raised since the last call.
    #[allow(dead_code, reason = "not every test file reads the interrupts")]
    pub fn take(&self) -> Vec<u16> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

/// Admin SQ, admin CQ, event queue and a response buffer in guest memory.
pub const SQ: u64 = 0x10_0000;
/// Admin CQ.
pub const CQ: u64 = 0x20_0000;
/// Event queue.
pub const EQ: u64 = 0x30_0000;
/// Response buffer.
pub const BUF: u64 = 0x40_0000;
/// Each region's length: half the distance, so no access runs from one into the next.
pub const LEN: usize = 0x8_0000;
