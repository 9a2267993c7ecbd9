//! Guest memory as the NIC's DMA engine sees it.
//!
//! The engine reaches host (guest) RAM only through [`GuestMemory`]: the vfio-user server
//! implements it over the memory regions QEMU shares with DMA_MAP, and [`MockMemory`] over
//! plain vectors for unit tests. Every access is bounds-checked by the implementation; a
//! failed access is an error the engine turns into an error status or event.

use std::fmt;

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
pub trait GuestMemory {
    /// Copies `buf.len()` bytes at bus address `addr` into `buf`.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if any byte of the range is not mapped.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;

    /// Copies `data` to bus address `addr`.
    ///
    /// # Errors
    ///
    /// [`DmaError`] if any byte of the range is not mapped (nothing is written then).
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError>;

    /// Whether the whole range `[addr, addr + len)` is mapped.
    fn contains(&self, addr: u64, len: u64) -> bool;
}

/// Guest memory for tests: regions of plain bytes at chosen bus addresses.
#[derive(Default)]
pub struct MockMemory {
    regions: std::cell::RefCell<Vec<(u64, Vec<u8>)>>,
}

impl MockMemory {
    /// Empty memory: every access fails.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a zeroed region of `len` bytes at `addr`.
    pub fn add_region(&self, addr: u64, len: usize) {
        self.regions.borrow_mut().push((addr, vec![0; len]));
    }

    fn find(&self, addr: u64, len: usize) -> Option<(usize, usize)> {
        let end = addr.checked_add(len as u64)?;
        self.regions
            .borrow()
            .iter()
            .enumerate()
            .find_map(|(i, (base, bytes))| {
                let rend = base.checked_add(bytes.len() as u64)?;
                (addr >= *base && end <= rend).then(|| (i, (addr - base) as usize))
            })
    }
}

impl GuestMemory for MockMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let (i, off) = self.find(addr, buf.len()).ok_or(DmaError {
            addr,
            len: buf.len(),
        })?;
        buf.copy_from_slice(&self.regions.borrow()[i].1[off..off + buf.len()]);
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let (i, off) = self.find(addr, data.len()).ok_or(DmaError {
            addr,
            len: data.len(),
        })?;
        self.regions.borrow_mut()[i].1[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn contains(&self, addr: u64, len: u64) -> bool {
        usize::try_from(len).is_ok_and(|len| self.find(addr, len).is_some())
    }
}
