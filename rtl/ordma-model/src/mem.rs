//! Guest memory as the NIC's DMA engine sees it.
//!
//! The engine reaches guest RAM only through [`Dma`], a consumer-side trait implemented for
//! every [`vm_memory::GuestMemory`]: the vfio-user server's [`GuestRam`] (the memfds QEMU
//! shares with DMA_MAP) and, in tests, vm-memory's anonymous [`GuestMemoryMmap`]. Accesses go
//! through vm-memory's volatile `Bytes` accessors (vCPUs write the same memory concurrently)
//! and are bounds-checked first: a range that is not mapped in full is an error the engine
//! turns into an error status or event, and nothing is written then.

use std::fmt;
use std::fs::File;

use std::sync::atomic::Ordering;

use tracing::debug;
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryBackend,
    GuestMemoryRegion, GuestRegionMmap, Permissions, VolatileMemory,
};

pub use vm_memory::GuestMemoryMmap;

/// A DMA access outside the memory the NIC can reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaError {
    /// The bus address of the access.
    pub addr: u64,
    /// Its length.
    pub len: usize,
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DMA of {} bytes at {:#x} outside mapped memory",
            self.len, self.addr
        )
    }
}

impl std::error::Error for DmaError {}

/// A 64-bit atomic operation on host memory (InfiniBand's two): on the little-endian
/// 64-bit word at an 8-byte aligned address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atomic64 {
    /// Writes `swap` if the word is `compare`.
    CmpSwap {
        /// The value the word must hold.
        compare: u64,
        /// The value written then.
        swap: u64,
    },
    /// Adds the value (wrapping).
    FetchAdd(u64),
    /// Writes the value (an ATOMIC WRITE: one 64-bit store).
    Store(u64),
}

impl Atomic64 {
    /// The word after the operation on `old`.
    pub fn apply(self, old: u64) -> u64 {
        match self {
            Atomic64::CmpSwap { compare, swap } if old == compare => swap,
            Atomic64::CmpSwap { .. } => old,
            Atomic64::FetchAdd(add) => old.wrapping_add(add),
            Atomic64::Store(v) => v,
        }
    }
}

/// Host memory reachable by DMA.
pub trait Dma {
    /// Copies `buf.len()` bytes at bus address `addr` into `buf`.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if any byte of the range is not mapped.
    fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;

    /// Copies `data` to bus address `addr`.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if any byte of the range is not mapped (nothing is written then).
    fn dma_write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError>;

    /// [`Dma::dma_read`] of payload (the requester's data to send): the same but for
    /// the DMA channel it takes in the hardware (`engine::datapath`).
    ///
    /// # Errors
    ///
    /// As [`Dma::dma_read`].
    fn dma_read_payload(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.dma_read(addr, buf)
    }

    /// [`Dma::dma_write`] of payload (data received): the same but for the DMA channel it
    /// takes in the hardware (`engine::datapath`).
    ///
    /// # Errors
    ///
    /// As [`Dma::dma_write`].
    fn dma_write_payload(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.dma_write(addr, data)
    }

    /// Writes a ring entry whose byte `owner` holds its phase (ownership) bit: every other
    /// byte first, then, after a release fence, that byte, so a consumer that sees the new
    /// phase and then reads the rest sees the whole entry (`hardware.md`, "Admin queue").
    ///
    /// # Errors
    ///
    /// [`DmaError`] if any byte of the range is not mapped (nothing is written then).
    fn dma_write_entry(&self, addr: u64, entry: &[u8], owner: usize) -> Result<(), DmaError> {
        let err = DmaError {
            addr,
            len: entry.len(),
        };
        let len = u64::try_from(entry.len()).map_err(|_| err)?;
        if owner >= entry.len() || !self.reachable(addr, len) {
            return Err(err);
        }
        let (head, rest) = entry.split_at(owner);
        let (flags, tail) = rest.split_at(1);
        // `owner < entry.len()`, so these offsets are within the checked range.
        self.dma_write(addr, head)?;
        self.dma_write(addr + owner as u64 + 1, tail)?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        self.dma_write(addr + owner as u64, flags)
    }

    /// Whether the whole range `[addr, addr + len)` is mapped.
    fn reachable(&self, addr: u64, len: u64) -> bool;

    /// Executes `op` on the little-endian 64-bit word at `addr` (8-byte aligned) and
    /// returns the value it held before. This default reads and writes back, which is
    /// atomic only against the NIC's own accesses (it holds the NIC while it runs); guest
    /// memory does it with one atomic instruction of the host, so it is atomic against the
    /// guest's CPUs and every other NIC model too.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if `addr` is not aligned or the word is not mapped (nothing is written
    /// then).
    fn dma_atomic64(&self, addr: u64, op: Atomic64) -> Result<u64, DmaError> {
        let err = DmaError { addr, len: 8 };
        if addr % 8 != 0 || !self.reachable(addr, 8) {
            return Err(err);
        }
        let mut b = [0u8; 8];
        self.dma_read(addr, &mut b)?;
        let old = u64::from_le_bytes(b);
        self.dma_write(addr, &op.apply(old).to_le_bytes())?;
        Ok(old)
    }

    /// Copies `len` bytes from bus address `src` to bus address `dst` (the data path's
    /// guest-to-guest move). This default goes through a bounce buffer; guest memory
    /// copies directly.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if any byte of either range is not mapped (nothing is written then).
    fn dma_copy(&self, src: u64, dst: u64, len: usize) -> Result<(), DmaError> {
        let l = u64::try_from(len).map_err(|_| DmaError { addr: src, len })?;
        if !self.reachable(src, l) || !self.reachable(dst, l) {
            return Err(DmaError { addr: src, len });
        }
        let mut buf = vec![0u8; len.min(1 << 16)];
        let mut done = 0usize;
        while done < len {
            let n = buf.len().min(len - done);
            let chunk = buf.get_mut(..n).ok_or(DmaError { addr: src, len })?;
            // `done < len`, and both ranges were checked: no overflow.
            self.dma_read(src + done as u64, chunk)?;
            self.dma_write(dst + done as u64, chunk)?;
            done += n;
        }
        Ok(())
    }
}

/// Whether `[addr, addr + len)` is mapped in `m` for `access`, without overflow.
fn check<M: vm_memory::GuestMemory + ?Sized>(
    m: &M,
    addr: u64,
    len: usize,
    access: Permissions,
) -> bool {
    u64::try_from(len)
        .ok()
        .and_then(|l| addr.checked_add(l))
        .is_some()
        && m.check_range(GuestAddress(addr), len, access)
}

/// The first slice of `[addr, addr + len)` in `m` (as far as its region goes), if `len` is
/// not zero and `addr` is mapped.
fn first_slice<M: vm_memory::GuestMemory + ?Sized>(
    m: &M,
    addr: u64,
    len: usize,
    access: Permissions,
) -> Option<vm_memory::VolatileSlice<'_, vm_memory::bitmap::BS<'_, M::Bitmap>>> {
    m.get_slices(GuestAddress(addr), len, access)
        .ok()?
        .next()?
        .ok()
}

impl<M: vm_memory::GuestMemory + ?Sized> Dma for M {
    fn dma_atomic64(&self, addr: u64, op: Atomic64) -> Result<u64, DmaError> {
        let err = DmaError { addr, len: 8 };
        if addr % 8 != 0 || !check(self, addr, 8, Permissions::ReadWrite) {
            return Err(err);
        }
        let slice = first_slice(self, addr, 8, Permissions::ReadWrite).ok_or(err)?;
        // An aligned word never crosses a region (regions are page aligned); the
        // reference checks the alignment and length again.
        let word = slice
            .get_atomic_ref::<std::sync::atomic::AtomicU64>(0)
            .map_err(|_| err)?;
        // The word is little-endian in memory whatever the host's order: a loop of
        // compare-and-exchange, which is one `lock cmpxchg` on x86 when nobody races.
        let mut seen = word.load(Ordering::Acquire);
        loop {
            let old = u64::from_le(seen);
            let new = op.apply(old);
            if new == old {
                return Ok(old);
            }
            match word.compare_exchange_weak(seen, new.to_le(), Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(old),
                Err(now) => seen = now,
            }
        }
    }

    fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let err = DmaError {
            addr,
            len: buf.len(),
        };
        if !check(self, addr, buf.len(), Permissions::Read) {
            return Err(err);
        }
        self.read_slice(buf, GuestAddress(addr)).map_err(|_| err)
    }

    fn dma_write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let err = DmaError {
            addr,
            len: data.len(),
        };
        if !check(self, addr, data.len(), Permissions::Write) {
            return Err(err);
        }
        self.write_slice(data, GuestAddress(addr)).map_err(|_| err)
    }

    fn reachable(&self, addr: u64, len: u64) -> bool {
        usize::try_from(len).is_ok_and(|len| check(self, addr, len, Permissions::ReadWrite))
    }

    fn dma_copy(&self, src: u64, dst: u64, len: usize) -> Result<(), DmaError> {
        let err = DmaError { addr: src, len };
        let end_ok = |a: u64| {
            u64::try_from(len)
                .ok()
                .and_then(|l| a.checked_add(l))
                .is_some()
        };
        if !end_ok(src) || !end_ok(dst) {
            return Err(err);
        }
        // The common case: each range inside one region. The first slice of each side
        // covering the whole length is the check: one region look-up per side.
        if let (Some(s), Some(d)) = (
            first_slice(self, src, len, Permissions::Read),
            first_slice(self, dst, len, Permissions::Write),
        ) {
            if s.len() == len && d.len() == len {
                s.copy_to_volatile_slice(d);
                return Ok(());
            }
        }
        if !check(self, src, len, Permissions::Read) || !check(self, dst, len, Permissions::Write) {
            return Err(err);
        }
        // One copy per piece contiguous in both regions, no bounce buffer.
        let mut done = 0usize;
        while done < len {
            let left = len - done;
            // Both ranges were checked: no overflow.
            let s = self
                .get_slices(GuestAddress(src + done as u64), left, Permissions::Read)
                .map_err(|_| err)?
                .next()
                .ok_or(err)?
                .map_err(|_| err)?;
            let d = self
                .get_slices(GuestAddress(dst + done as u64), left, Permissions::Write)
                .map_err(|_| err)?
                .next()
                .ok_or(err)?
                .map_err(|_| err)?;
            let n = s.len().min(d.len()).min(left);
            if n == 0 {
                return Err(err);
            }
            let (s, d) = (
                s.subslice(0, n).map_err(|_| err)?,
                d.subslice(0, n).map_err(|_| err)?,
            );
            s.copy_to_volatile_slice(d);
            done += n;
        }
        Ok(())
    }
}

/// Anonymous guest memory for tests: zeroed regions at the given bus addresses.
///
/// # Errors
///
/// vm-memory's, for overlapping or unsorted ranges or a failed allocation.
pub fn anonymous(
    ranges: &[(u64, usize)],
) -> Result<GuestMemoryMmap, vm_memory::mmap::FromRangesError> {
    let ranges: Vec<_> = ranges.iter().map(|&(a, l)| (GuestAddress(a), l)).collect();
    GuestMemoryMmap::from_ranges(&ranges)
}

/// The guest memory QEMU has mapped for DMA (DMA_MAP with a memfd).
///
/// The vfio-user loop maps and unmaps; any thread takes a [`GuestRam::snapshot`] and DMAs
/// through it. A snapshot keeps its regions mapped while it lives, so an unmap racing with a
/// DMA cannot pull memory from under it (vm-memory's `GuestMemoryAtomic`).
pub struct GuestRam {
    mem: GuestMemoryAtomic<GuestMemoryMmap>,
}

impl Default for GuestRam {
    fn default() -> Self {
        Self::new(GuestMemoryMmap::new())
    }
}

/// A consistent view of the mapped guest memory, for the duration of some DMA.
pub type Snapshot = vm_memory::atomic::GuestMemoryLoadGuard<GuestMemoryMmap>;

impl GuestRam {
    /// Guest memory starting as `mem` (tests; the server starts empty).
    pub fn new(mem: GuestMemoryMmap) -> Self {
        Self {
            mem: GuestMemoryAtomic::new(mem),
        }
    }

    /// The memory mapped now.
    pub fn snapshot(&self) -> Snapshot {
        self.mem.memory()
    }

    /// Maps `size` bytes of `fd` at file offset `offset` as bus addresses `iova..`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an empty, overflowing or overlapping range, or the error of `mmap`.
    pub fn map(&self, iova: u64, size: u64, fd: File, offset: u64) -> std::io::Result<()> {
        let einval = |what: &dyn fmt::Display| {
            debug!(iova = format_args!("{iova:#x}"), size, %what, "DMA map refused");
            std::io::Error::from_raw_os_error(libc::EINVAL)
        };
        let len = usize::try_from(size).map_err(|_| einval(&"size"))?;
        if size == 0 || iova.checked_add(size).is_none() {
            return Err(einval(&"empty or overflowing range"));
        }
        let region =
            GuestRegionMmap::from_range(GuestAddress(iova), len, Some(FileOffset::new(fd, offset)))
                .map_err(|e| einval(&e))?;
        let guard = self.mem.lock().map_err(|_| einval(&"lock"))?;
        let next = self
            .mem
            .memory()
            .insert_region(std::sync::Arc::new(region))
            .map_err(|e| einval(&e))?;
        guard.replace(next);
        debug!(iova = format_args!("{iova:#x}"), size, "DMA map");
        Ok(())
    }

    /// Unmaps every region inside `[iova, iova + size)`; `all` unmaps everything.
    pub fn unmap(&self, iova: u64, size: u64, all: bool) {
        let Ok(guard) = self.mem.lock() else { return };
        let end = iova.saturating_add(size);
        let now = self.mem.memory();
        let mut next = (*now).clone();
        let gone: Vec<(GuestAddress, u64)> = now
            .iter()
            .filter(|r| {
                let (s, l) = (r.start_addr().0, r.len());
                all || (s >= iova && s.saturating_add(l) <= end)
            })
            .map(|r| (r.start_addr(), r.len()))
            .collect();
        for (start, len) in gone {
            if let Ok((rest, _)) = next.remove_region(start, len) {
                debug!(
                    iova = format_args!("{:#x}", start.0),
                    size = len,
                    "DMA unmap"
                );
                next = rest;
            }
        }
        guard.replace(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guest memory through the trait's default `dma_copy` (the bounce buffer).
    struct Bounce<'a>(&'a GuestMemoryMmap);

    impl Dma for Bounce<'_> {
        fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
            self.0.dma_read(addr, buf)
        }
        fn dma_write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
            self.0.dma_write(addr, data)
        }
        fn reachable(&self, addr: u64, len: u64) -> bool {
            self.0.reachable(addr, len)
        }
    }

    #[test]
    fn atomics_on_the_little_endian_word_direct_and_by_default() {
        let m = anonymous(&[(0x1000, 0x1000)]).unwrap();
        for (name, mem) in [("direct", &m as &dyn Dma), ("default", &Bounce(&m))] {
            m.dma_write(0x1ff8, &0x0102_0304_0506_0708u64.to_le_bytes())
                .unwrap();
            let word = || {
                let mut b = [0u8; 8];
                m.dma_read(0x1ff8, &mut b).unwrap();
                u64::from_le_bytes(b)
            };
            assert_eq!(
                mem.dma_atomic64(0x1ff8, Atomic64::FetchAdd(1)),
                Ok(0x0102_0304_0506_0708)
            );
            assert_eq!(word(), 0x0102_0304_0506_0709, "{name}");
            let miss = Atomic64::CmpSwap {
                compare: 7,
                swap: 9,
            };
            assert_eq!(mem.dma_atomic64(0x1ff8, miss), Ok(0x0102_0304_0506_0709));
            assert_eq!(word(), 0x0102_0304_0506_0709, "{name}: unequal, unchanged");
            let hit = Atomic64::CmpSwap {
                compare: 0x0102_0304_0506_0709,
                swap: u64::MAX,
            };
            assert_eq!(mem.dma_atomic64(0x1ff8, hit), Ok(0x0102_0304_0506_0709));
            assert_eq!(
                mem.dma_atomic64(0x1ff8, Atomic64::FetchAdd(2)),
                Ok(u64::MAX)
            );
            assert_eq!(word(), 1, "{name}: wraps");
            assert!(
                mem.dma_atomic64(0x1ffc, Atomic64::FetchAdd(1)).is_err(),
                "unaligned"
            );
            assert!(
                mem.dma_atomic64(0x2000, Atomic64::FetchAdd(1)).is_err(),
                "unmapped"
            );
            assert_eq!(word(), 1, "{name}: refused, unchanged");
        }
    }

    #[test]
    fn atomics_of_threads_on_one_word_all_count() {
        // Four threads (as the guest's CPUs or other NIC models would be) add to one word
        // of guest memory at once: no add is lost.
        let m = anonymous(&[(0x1000, 0x1000)]).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100_000 {
                        m.dma_atomic64(0x1800, Atomic64::FetchAdd(3)).unwrap();
                    }
                });
            }
        });
        let mut b = [0u8; 8];
        m.dma_read(0x1800, &mut b).unwrap();
        assert_eq!(u64::from_le_bytes(b), 4 * 100_000 * 3);
    }

    #[test]
    fn dma_copy_crosses_regions_and_refuses_unmapped_ranges() {
        let m = anonymous(&[(0x1000, 0x1000), (0x2000, 0x2_0000), (0x10_0000, 0x2_0000)]).unwrap();
        let data: Vec<u8> = (0..0x1_8000u32).map(|i| (i * 7) as u8).collect();
        m.dma_write(0x1400, &data).unwrap();
        for (name, mem) in [("direct", &m as &dyn Dma), ("bounce", &Bounce(&m))] {
            // From across two regions into one.
            mem.dma_copy(0x1400, 0x10_0100, data.len()).unwrap();
            let mut got = vec![0u8; data.len()];
            m.dma_read(0x10_0100, &mut got).unwrap();
            assert!(got == data, "{name}");
            // A destination or source running past mapped memory: refused, nothing written.
            m.dma_write(0x11_ff00, &[0xaa; 0x100]).unwrap();
            assert!(mem.dma_copy(0x1400, 0x11_ff00, 0x101).is_err(), "{name}");
            assert!(mem.dma_copy(0x2_1f00, 0x10_0000, 0x101).is_err(), "{name}");
            assert!(mem.dma_copy(u64::MAX, 0x10_0000, 2).is_err(), "{name}");
            let mut tail = [0u8; 0x100];
            m.dma_read(0x11_ff00, &mut tail).unwrap();
            assert_eq!(tail, [0xaa; 0x100], "{name}");
            assert!(mem.dma_copy(0x1400, 0x10_0000, 0).is_ok());
        }
    }
}
