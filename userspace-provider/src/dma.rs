//! Memory the NIC reads and writes by DMA: queue rings and doorbell records. The provider
//! allocates it in the process, zeroed, and passes its address to the kernel, which pins it
//! for the NIC; it is freed only after the kernel has let go of it (the destroy command
//! succeeded).

use core::ffi::{c_int, c_void};
use core::ptr::{self, NonNull};

use ordma_hw::MAX_QUEUE_LOG_DEPTH;

/// The alignment and size granule of a queue ring: one page.
pub(crate) const RING_ALIGN: usize = 4096;

/// A zeroed, aligned allocation, freed on drop.
///
/// # Invariants
///
/// `ptr` came from `posix_memalign`, and nothing else frees it.
pub(crate) struct DmaMem {
    ptr: NonNull<c_void>,
}

// SAFETY: a `DmaMem` owns its allocation alone; any thread may use or free it.
unsafe impl Send for DmaMem {}

impl DmaMem {
    /// `len` zeroed bytes aligned to `align` (a power of two, a multiple of the pointer
    /// size), or `ENOMEM`/`EINVAL` as `posix_memalign` answers.
    pub(crate) fn zeroed(len: usize, align: usize) -> Result<Self, c_int> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: `p` is a valid out pointer; the result is checked.
        let r = unsafe { libc::posix_memalign(&mut p, align, len) };
        if r != 0 {
            return Err(r);
        }
        let ptr = NonNull::new(p).ok_or(libc::ENOMEM)?;
        // SAFETY: `ptr` is valid for `len` bytes, just allocated and ours alone.
        unsafe { ptr::write_bytes(ptr.as_ptr().cast::<u8>(), 0, len) };
        // INVARIANT: from posix_memalign.
        Ok(Self { ptr })
    }

    /// A queue ring of `2^(log_depth + log_entry_size)` bytes, rounded up to whole pages,
    /// page aligned. `EINVAL` past the deepest queue the NIC has (so a huge request never
    /// becomes a huge allocation).
    pub(crate) fn ring(log_depth: u8, log_entry_size: u8) -> Result<Self, c_int> {
        if log_depth > MAX_QUEUE_LOG_DEPTH || log_entry_size > 16 {
            return Err(libc::EINVAL);
        }
        Self::zeroed(ring_bytes(log_depth, log_entry_size), RING_ALIGN)
    }

    /// The first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr().cast()
    }

    /// The address the kernel is given.
    pub(crate) fn addr(&self) -> u64 {
        // CAST: a user-space address fits in u64 on x86-64.
        self.ptr.as_ptr() as u64
    }
}

impl Drop for DmaMem {
    fn drop(&mut self) {
        // SAFETY: from posix_memalign and freed only here (invariant).
        unsafe { libc::free(self.ptr.as_ptr()) };
    }
}

/// Bytes of a ring of `2^log_depth` entries of `2^log_entry_size` bytes: whole pages.
pub(crate) fn ring_bytes(log_depth: u8, log_entry_size: u8) -> usize {
    (1usize << (u32::from(log_depth) + u32::from(log_entry_size))).next_multiple_of(RING_ALIGN)
}

/// log2 of the smallest power of two at least `n` (0 for 0 and 1); `None` past 2^31.
pub(crate) fn log2_ceil(n: u32) -> Option<u8> {
    let p = n.max(1).checked_next_power_of_two()?;
    // CAST: trailing_zeros of a u32 is at most 31.
    Some(p.trailing_zeros() as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_whole_zeroed_pages() {
        assert_eq!(ring_bytes(1, 5), 4096);
        assert_eq!(ring_bytes(7, 5), 4096);
        assert_eq!(ring_bytes(8, 5), 8192);
        assert_eq!(ring_bytes(15, 10), 32 << 20);
        let r = DmaMem::ring(8, 5).expect("an 8 KiB ring");
        assert_eq!(r.addr() % 4096, 0);
        // SAFETY: the ring is ours and 8 KiB long.
        let bytes = unsafe { core::slice::from_raw_parts(r.ptr.as_ptr().cast::<u8>(), 8192) };
        assert!(bytes.iter().all(|&b| b == 0));
        assert_eq!(DmaMem::ring(16, 5).err(), Some(libc::EINVAL));
        let rec = DmaMem::zeroed(8, 8).expect("a record");
        assert_eq!(rec.addr() % 8, 0);
    }

    #[test]
    fn log2_ceil_rounds_up() {
        assert_eq!(log2_ceil(0), Some(0));
        assert_eq!(log2_ceil(1), Some(0));
        assert_eq!(log2_ceil(2), Some(1));
        assert_eq!(log2_ceil(3), Some(2));
        assert_eq!(log2_ceil(100), Some(7));
        assert_eq!(log2_ceil(4096), Some(12));
        assert_eq!(log2_ceil(4097), Some(13));
        assert_eq!(log2_ceil(1 << 31), Some(31));
        assert_eq!(log2_ceil((1 << 31) + 1), None);
    }
}
