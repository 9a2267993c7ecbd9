//! The fast path's memory barriers and doorbell writes, as rdma-core 56.1 defines them for
//! x86-64 (`util/udma_barrier.h`, `util/mmio.h`).
//!
//! rdma-core gives each narrow use of a barrier its own name, so a provider's code says
//! why it orders, and the providers ordma learns from (erdma, efa) use them at fixed
//! points: build a WQE in queue memory, [`udma_to_device_barrier`], then write the doorbell
//! ([`mmio_write32`] / [`mmio_write64`]); on poll, read a CQE's owner/phase bit, then
//! [`udma_from_device_barrier`], then the rest of the CQE. On x86-64 the ordering of stores
//! to write-back memory and to the uncached doorbell page is the CPU's own (TSO), so most
//! of these are compiler barriers; each function says what rdma-core emits and we emit
//! exactly that (`cargo test` compares the instructions with rdma-core's header, expanded
//! by the C preprocessor). Other architectures are not supported, as rdma-core stops with
//! `#error` when it has no definition.
//!
//! An `asm!` block without `options(nomem)` is, like C's `asm volatile("" ::: "memory")`, a
//! compiler barrier: the compiler assumes it reads and writes any memory, so it neither
//! caches values across it nor moves memory accesses over it.

#[cfg(not(target_arch = "x86_64"))]
compile_error!(
    "ordma's provider defines its barriers for x86-64 only (as rdma-core does per arch)"
);

use core::arch::asm;

/// The instruction of each barrier, exactly as rdma-core's x86-64 definition writes it
/// inside its `asm volatile("..." ::: "memory")` (empty: a compiler barrier only). Macros,
/// because `asm!` takes its template as a literal; `cargo test` compares each with
/// rdma-core's own header, expanded by the C preprocessor (`abi_check.rs`).
macro_rules! to_device_insn {
    () => {
        ""
    };
}
macro_rules! from_device_insn {
    () => {
        "lfence"
    };
}
macro_rules! flush_writes_insn {
    () => {
        "sfence"
    };
}
pub(crate) use {flush_writes_insn, from_device_insn, to_device_insn};

/// `udma_to_device_barrier()`: everything written to memory the NIC reads by DMA (WQEs,
/// the queues) before this is visible to the NIC before any MMIO store after it (the
/// doorbell). Place it between building WQEs and ringing the doorbell.
///
/// rdma-core, x86-64: `asm volatile("" ::: "memory")`, a compiler barrier only: x86 does
/// not reorder stores with older stores, and an uncached MMIO store is not reordered with
/// them either. (rdma-core notes that x86 fences only normal stores to normal memory here;
/// non-temporal stores need the caller's own SFENCE.)
#[inline(always)]
pub fn udma_to_device_barrier() {
    // SAFETY: an empty instruction sequence; it touches no register, stack or flag, and
    // only constrains the compiler's ordering of memory accesses.
    unsafe { asm!(to_device_insn!(), options(nostack, preserves_flags)) };
}

/// `udma_ordering_write_barrier()`: the NIC cannot see writes after this without the
/// writes before it (a valid bit written after the data it guards).
///
/// rdma-core: `udma_to_device_barrier()` on every architecture.
#[inline(always)]
pub fn udma_ordering_write_barrier() {
    udma_to_device_barrier();
}

/// `udma_from_device_barrier()`: reads of DMA memory after this see data at least as new as
/// the read before it. Place it after reading a CQE's owner/phase bit and before reading
/// the rest of the CQE.
///
/// rdma-core, x86-64: `asm volatile("lfence" ::: "memory")`.
#[inline(always)]
pub fn udma_from_device_barrier() {
    // SAFETY: `lfence` orders loads; it reads and writes no register, stack or flag.
    unsafe { asm!(from_device_insn!(), options(nostack, preserves_flags)) };
}

/// `mmio_flush_writes()`: promptly flush writes to write-combining MMIO memory, and order
/// them before later stores. Place it after a run of writes to a write-combining mapping.
///
/// rdma-core, x86-64: `asm volatile("sfence" ::: "memory")`.
#[inline(always)]
pub fn mmio_flush_writes() {
    // SAFETY: `sfence` orders stores; it reads and writes no register, stack or flag.
    unsafe { asm!(flush_writes_insn!(), options(nostack, preserves_flags)) };
}

/// `mmio_wc_start()`: keeps writes to write-combining memory after this from being
/// reordered with MMIO writes before it; it implies [`udma_to_device_barrier`]. Place it
/// before writing a WQE into a write-combining page.
///
/// rdma-core: `mmio_flush_writes()` on every architecture, so `sfence` on x86-64.
/// (ordma's doorbell page is mapped uncached, not write-combining, so the doorbell writes
/// need only [`udma_to_device_barrier`] before them.)
#[inline(always)]
pub fn mmio_wc_start() {
    mmio_flush_writes();
}

/// `mmio_write32()`: stores `value` little-endian to the 32-bit doorbell register at
/// `addr`, in one access.
///
/// rdma-core (not s390x): `atomic_store_explicit(addr, htole32(value),
/// memory_order_relaxed)`, one naturally aligned store, the compiler neither splits, merges
/// nor drops it. A volatile aligned store is that on x86-64: one `mov`.
///
/// # Safety
///
/// `addr` is valid for a 4-byte write and 4-byte aligned: a register in a mapped doorbell
/// page.
#[inline(always)]
pub unsafe fn mmio_write32(addr: *mut u32, value: u32) {
    // SAFETY: valid and aligned (caller).
    unsafe { addr.write_volatile(value.to_le()) };
}

/// `mmio_write64()`: stores `value` little-endian to the 64-bit doorbell register at
/// `addr`, in one access (x86-64 has `SIZEOF_LONG == 8`, so rdma-core does one store too).
///
/// # Safety
///
/// `addr` is valid for an 8-byte write and 8-byte aligned: a register in a mapped doorbell
/// page.
#[inline(always)]
pub unsafe fn mmio_write64(addr: *mut u64, value: u64) {
    // SAFETY: valid and aligned (caller).
    unsafe { addr.write_volatile(value.to_le()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbell_writes_store_little_endian_in_place() {
        let mut page = [0u64; 4];
        let base = page.as_mut_ptr();
        // SAFETY: `base` is 8-byte aligned and the page holds 32 bytes.
        unsafe {
            mmio_write32(base.cast::<u32>().add(1), 0x1122_3344);
            mmio_write64(base.add(2), 0x0102_0304_0506_0708);
        }
        udma_to_device_barrier();
        udma_ordering_write_barrier();
        mmio_wc_start();
        mmio_flush_writes();
        udma_from_device_barrier();
        let bytes: Vec<u8> = page.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(&bytes[0..4], &[0; 4], "bytes before the 32-bit register");
        assert_eq!(&bytes[4..8], &[0x44, 0x33, 0x22, 0x11]);
        assert_eq!(&bytes[8..16], &[0; 8], "bytes between the registers");
        assert_eq!(&bytes[16..24], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&bytes[24..32], &[0; 8], "bytes after the 64-bit register");
    }
}
