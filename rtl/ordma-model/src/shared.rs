//! Guest RAM shared by QEMU (DMA_MAP with a memfd), as [`GuestMemory`].

use std::fs::File;
use std::os::fd::AsRawFd;

use tracing::{debug, warn};

use crate::mem::{DmaError, GuestMemory};

/// One DMA_MAP region, mapped into this process.
struct Mapping {
    iova: u64,
    len: u64,
    /// Start of the mapping in this process.
    ptr: *mut u8,
}

/// The guest memory QEMU has mapped for DMA; every access is checked against it.
///
/// # Invariants
///
/// Each `Mapping` is a live `MAP_SHARED` mapping of `len` bytes at `ptr`, owned by this
/// struct and unmapped only when removed.
#[derive(Default)]
pub struct SharedMemory {
    maps: Vec<Mapping>,
}

impl SharedMemory {
    /// Maps `size` bytes of `fd` at file offset `offset` as bus addresses `iova..`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an empty or overlapping range, or the error of `mmap`.
    pub fn map(&mut self, iova: u64, size: u64, fd: &File, offset: u64) -> std::io::Result<()> {
        let einval = || std::io::Error::from_raw_os_error(libc::EINVAL);
        let end = iova.checked_add(size).ok_or_else(einval)?;
        if size == 0
            || self
                .maps
                .iter()
                .any(|m| iova < m.iova + m.len && m.iova < end)
        {
            return Err(einval());
        }
        let len = usize::try_from(size).map_err(|_| einval())?;
        let off = libc::off_t::try_from(offset).map_err(|_| einval())?;
        // SAFETY: a fresh shared mapping of a file QEMU gave us; no existing memory is
        // affected. The result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        debug!(iova = format_args!("{iova:#x}"), size, "DMA map");
        // INVARIANT: `ptr` is a live mapping of `len` bytes, owned from here on.
        self.maps.push(Mapping {
            iova,
            len: size,
            ptr: ptr.cast(),
        });
        Ok(())
    }

    /// Unmaps every region inside `[iova, iova + size)`; `all` unmaps everything.
    pub fn unmap(&mut self, iova: u64, size: u64, all: bool) {
        let end = iova.saturating_add(size);
        self.maps.retain(|m| {
            let inside = m.iova >= iova && m.iova + m.len <= end;
            let keep = !(all || inside);
            if !keep {
                debug!(
                    iova = format_args!("{:#x}", m.iova),
                    size = m.len,
                    "DMA unmap"
                );
                // SAFETY: by the type invariant the mapping is live and ours; it is removed
                // from the list with this call, so it is never used again.
                unsafe { libc::munmap(m.ptr.cast(), m.len as usize) };
            }
            keep
        });
    }

    /// The mapping containing the whole range, and the offset of `addr` in it.
    fn find(&self, addr: u64, len: usize) -> Option<(&Mapping, usize)> {
        let end = addr.checked_add(u64::try_from(len).ok()?)?;
        let m = self
            .maps
            .iter()
            .find(|m| addr >= m.iova && end <= m.iova + m.len)?;
        Some((m, usize::try_from(addr - m.iova).ok()?))
    }
}

impl SharedMemory {
    /// The address in this process of the mapped range `[addr, addr + len)`.
    fn host_ptr(&self, addr: u64, len: usize, what: &str) -> Result<*mut u8, DmaError> {
        let Some((m, off)) = self.find(addr, len) else {
            warn!(
                addr = format_args!("{addr:#x}"),
                len, "DMA {what} outside mapped memory"
            );
            return Err(DmaError { addr, len });
        };
        // SAFETY: `find` checked that `[off, off + len)` lies inside the live mapping (type
        // invariant), so the offset pointer stays inside it.
        Ok(unsafe { m.ptr.add(off) })
    }
}

impl GuestMemory for SharedMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let src = self.host_ptr(addr, buf.len(), "read")?;
        // SAFETY: `src` starts `buf.len()` mapped bytes (`host_ptr`). Guest memory may change
        // under us; we copy bytes, never form references to it.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let dst = self.host_ptr(addr, data.len(), "write")?;
        // SAFETY: as in `read`: `dst` starts `data.len()` bytes of a writable shared mapping.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    fn contains(&self, addr: u64, len: u64) -> bool {
        usize::try_from(len).is_ok_and(|len| self.find(addr, len).is_some())
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        self.unmap(0, u64::MAX, true);
    }
}
