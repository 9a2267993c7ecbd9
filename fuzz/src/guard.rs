//! Guest memory that checks where the NIC writes, for the targets whose NIC only has the
//! rig's objects (`wqe`, `frame`): the rig's MRs cover data pages only, so whatever a WQE,
//! a doorbell or a frame says, the NIC must never write the admin SQ, the page tables or
//! the WQE rings, which it only reads (`hardware.md`: the NIC touches only memory it owns).
//! A write there panics: a crash the fuzzer reports.

use ordma_model::mem::{Atomic64, Dma, DmaError, GuestMemoryMmap};

use crate::common::rig::{PT, PT_LEN, RINGS};
use crate::common::{LEN, SQ};

/// The rig's memory the NIC may only read: (start, end, what).
const READ_ONLY: [(u64, u64, &str); 3] = [
    (SQ, SQ + LEN as u64, "admin SQ"),
    (PT, PT + PT_LEN as u64, "page tables"),
    // QP A's and B's SQs and RQs (`Rig::bare`), the `wqe` target's SRQ and QP C's SQ, and
    // the UC pair's (`Rig::uc_pair`).
    (RINGS + 0x10_0000, RINGS + 0x40_0000, "WQE rings"),
];

/// `mem`, with every NIC write checked against [`READ_ONLY`].
pub struct Guard<'a>(pub &'a GuestMemoryMmap);

fn check(addr: u64, len: usize) {
    let end = addr.saturating_add(len as u64);
    for (lo, hi, what) in READ_ONLY {
        assert!(
            len == 0 || end <= lo || addr >= hi,
            "the NIC wrote {len} bytes at {addr:#x}, in the {what}, which it only reads"
        );
    }
}

impl Dma for Guard<'_> {
    fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.0.dma_read(addr, buf)
    }

    fn dma_write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        check(addr, data.len());
        self.0.dma_write(addr, data)
    }

    fn reachable(&self, addr: u64, len: u64) -> bool {
        self.0.reachable(addr, len)
    }

    fn dma_copy(&self, src: u64, dst: u64, len: usize) -> Result<(), DmaError> {
        check(dst, len);
        self.0.dma_copy(src, dst, len)
    }

    fn dma_atomic64(&self, addr: u64, op: Atomic64) -> Result<u64, DmaError> {
        check(addr, 8);
        self.0.dma_atomic64(addr, op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::rig::DATA;

    #[test]
    fn writes_outside_the_read_only_ranges_pass() {
        let rig = crate::common::rig::Rig::bare(1);
        let g = Guard(&rig.mem);
        assert!(g.dma_write(DATA, &[1; 64]).is_ok());
        assert!(g.dma_copy(DATA, DATA + 4096, 64).is_ok());
    }

    #[test]
    #[should_panic(expected = "in the page tables")]
    fn a_write_into_the_page_tables_panics() {
        let rig = crate::common::rig::Rig::bare(1);
        let _ = Guard(&rig.mem).dma_write(PT + PT_LEN as u64 - 1, &[0; 2]);
    }

    #[test]
    #[should_panic(expected = "in the WQE rings")]
    fn a_copy_into_a_wqe_ring_panics() {
        let rig = crate::common::rig::Rig::bare(1);
        let _ = Guard(&rig.mem).dma_copy(DATA, RINGS + 0x20_0000, 16);
    }
}
