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

use tracing::debug;
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryBackend,
    GuestMemoryRegion, GuestRegionMmap, Permissions,
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

impl<M: vm_memory::GuestMemory + ?Sized> Dma for M {
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
