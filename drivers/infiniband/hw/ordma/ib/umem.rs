// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for the device (`struct ib_umem`): what a user MR asks for
//! ([`UserMemory`]), its access flags ([`Access`]), the pinned and DMA-mapped memory
//! ([`Umem`]) and its DMA blocks at a page size the device supports ([`DmaBlocks`]).

use core::{marker::PhantomData, ptr::NonNull};

use kernel::{error::from_err_ptr, ffi, prelude::*};

use super::bindings as b;

/// MR access flags, ib_core's `enum ib_access_flags` (the IB verbs' bit values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access(u32);

impl Access {
    /// The device may write the memory locally (receives, RDMA read responses).
    pub(crate) const LOCAL_WRITE: Self = Self(b::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// Remote peers may write it.
    pub(crate) const REMOTE_WRITE: Self = Self(b::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// Remote peers may read it.
    pub(crate) const REMOTE_READ: Self = Self(b::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// Remote peers may run atomics on it.
    pub(crate) const REMOTE_ATOMIC: Self = Self(b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);
    /// Memory windows may be bound to it (`IB_ACCESS_MW_BIND`).
    pub(crate) const MW_BIND: Self = Self(b::ib_access_flags_IB_ACCESS_MW_BIND);
    /// Remote peers may FLUSH it, to the global or the persistence domain
    /// (`IB_ACCESS_FLUSH_GLOBAL | IB_ACCESS_FLUSH_PERSISTENT`).
    pub(crate) const FLUSH: Self = Self(
        b::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL | b::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT,
    );
    /// Remote peers may FLUSH it to global visibility (`IB_ACCESS_FLUSH_GLOBAL`).
    pub(crate) const FLUSH_GLOBAL: Self = Self(b::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL);
    /// Remote peers may FLUSH it to the persistence domain (`IB_ACCESS_FLUSH_PERSISTENT`).
    pub(crate) const FLUSH_PERSISTENT: Self = Self(b::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT);
    /// Flags a device may ignore when it does not support them (`IB_ACCESS_OPTIONAL`, e.g.
    /// relaxed ordering).
    pub(crate) const OPTIONAL: Self = Self(b::ib_access_flags_IB_ACCESS_OPTIONAL);

    /// The flags as ib_core passed them.
    pub(crate) fn from_raw(bits: i32) -> Self {
        // CAST: a bit mask, reinterpreted.
        Self(bits as u32)
    }

    /// The bit values.
    pub(crate) fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub(crate) fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag of `other` is set.
    pub(crate) fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// These flags without those of `other`.
    pub(crate) fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Where the memory of a user MR is.
#[derive(Clone, Copy, Debug)]
pub(super) enum Source {
    /// The calling process's virtual addresses from `start` (`reg_user_mr`).
    Va { start: u64 },
    /// Offset `offset` of the dma-buf `fd` (`reg_user_mr_dmabuf`).
    DmaBuf { fd: i32, offset: u64 },
}

/// What a user asks to register: `length` bytes of its memory (at a virtual address, or in
/// a dma-buf), seen by the device at virtual address `virt`, with `access`.
///
/// # Invariants
///
/// `ib` is a registered `ib_device` for `'a`, and the caller is a verb of it.
pub(crate) struct UserMemory<'a> {
    ib: NonNull<b::ib_device>,
    source: Source,
    length: u64,
    virt: u64,
    access: Access,
    _p: PhantomData<&'a b::ib_device>,
}

impl UserMemory<'_> {
    /// `length` bytes of `source`, seen by the device at `virt`, with `access`.
    ///
    /// # Safety
    ///
    /// `ib` is a registered `ib_device`, valid for the lifetime chosen, and this is called
    /// from one of its verbs, in the context of the process whose memory `source` names
    /// (which also resolves a dma-buf's `fd`).
    pub(super) unsafe fn new(
        ib: NonNull<b::ib_device>,
        source: Source,
        length: u64,
        virt: u64,
        access: Access,
    ) -> Self {
        // INVARIANT: the caller guarantees it.
        Self {
            ib,
            source,
            length,
            virt,
            access,
            _p: PhantomData,
        }
    }

    /// The first user virtual address, or the offset in the dma-buf.
    pub(crate) fn start(&self) -> u64 {
        match self.source {
            Source::Va { start } => start,
            Source::DmaBuf { offset, .. } => offset,
        }
    }

    /// Whether the memory is a dma-buf's.
    pub(crate) fn is_dmabuf(&self) -> bool {
        matches!(self.source, Source::DmaBuf { .. })
    }

    /// The length in bytes.
    pub(crate) fn length(&self) -> u64 {
        self.length
    }

    /// The virtual address the device sees for `start` (the MR's iova).
    pub(crate) fn virt(&self) -> u64 {
        self.virt
    }

    /// The access flags asked for.
    pub(crate) fn access(&self) -> Access {
        self.access
    }

    /// Pins the memory and maps it for the device's DMA (`ib_umem_get`, or
    /// `ib_umem_dmabuf_get_pinned` for a dma-buf).
    ///
    /// # Errors
    ///
    /// ib_core's: `ENOMEM` when pinning would exceed `RLIMIT_MEMLOCK` (without
    /// `CAP_IPC_LOCK`) or memory runs out, `EINVAL` for an overflowing range or a range
    /// beyond the dma-buf, `EFAULT` for memory the process has not mapped, `EBADF` for a
    /// file descriptor that is no dma-buf.
    pub(crate) fn pin(&self) -> Result<Umem> {
        let len = usize::try_from(self.length).map_err(|_| EINVAL)?;
        // CAST: a bit mask, reinterpreted as ib_core's `int`.
        let access = self.access.bits() as i32;
        let raw = match self.source {
            Source::Va { start } => {
                let addr = ffi::c_ulong::try_from(start).map_err(|_| EINVAL)?;
                // SAFETY: `ib` is a registered device and we run in its verb (invariant),
                // in the calling process's context, as `ib_umem_get` requires.
                from_err_ptr(unsafe {
                    b::rust_ib_helper_umem_get(self.ib.as_ptr(), addr, len, access)
                })?
            }
            Source::DmaBuf { fd, offset } => {
                let offset = ffi::c_ulong::try_from(offset).map_err(|_| EINVAL)?;
                // SAFETY: as above; `fd` is looked up in the calling process.
                from_err_ptr(unsafe {
                    b::rust_ib_helper_umem_dmabuf_get_pinned(
                        self.ib.as_ptr(),
                        offset,
                        len,
                        fd,
                        access,
                    )
                })?
            }
        };
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: a umem one of the helpers returned, ours alone.
        Ok(Umem { raw })
    }
}

/// The calling process's memory, as a verb that creates a queue pins it for the device.
///
/// # Invariants
///
/// `ib` is a registered device, and the value lives only for the verb call, in the
/// context of the process that made it.
pub(crate) struct UserPages<'a> {
    ib: NonNull<b::ib_device>,
    _p: PhantomData<&'a b::ib_device>,
}

impl UserPages<'_> {
    /// # Safety
    ///
    /// `ib` is a registered device; the value is used only during the verb call that made
    /// it, in the calling process.
    pub(super) unsafe fn new(ib: NonNull<b::ib_device>) -> Self {
        // INVARIANT: the caller guarantees both.
        Self {
            ib,
            _p: PhantomData,
        }
    }

    /// Pins `[start, start + len)` of the process's memory for the device to read and
    /// write (a queue's ring or record).
    ///
    /// # Errors
    ///
    /// As [`UserMemory::pin`].
    pub(crate) fn pin(&self, start: u64, len: u64) -> Result<Umem> {
        // SAFETY: `ib` is registered and this is the verb's call, in its process
        // (invariant).
        let mem = unsafe {
            UserMemory::new(
                self.ib,
                Source::Va { start },
                len,
                start,
                Access::LOCAL_WRITE,
            )
        };
        mem.pin()
    }
}

/// Pinned, DMA-mapped user memory; dropping it unmaps and unpins it
/// (`ib_umem_release`).
///
/// It holds a reference on its `ib_device`, so it may outlive the device's registration
/// (to be released only once the hardware can no longer reach it).
///
/// # Invariants
///
/// `raw` came from `rust_ib_helper_umem_get` or `rust_ib_helper_umem_dmabuf_get_pinned`, is
/// owned by this value and not released.
pub(crate) struct Umem {
    raw: NonNull<b::ib_umem>,
}

// SAFETY: a umem is plain memory ib_core gives its owner; it may be released from any
// thread (`ib_umem_release` only unmaps, unpins and frees).
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads the umem's DMA mapping, which nothing changes while it lives.
unsafe impl Sync for Umem {}

impl Umem {
    /// The largest page size of `pgsz_bitmap` (a bit per supported size) such that the
    /// memory is a list of DMA blocks of that size, with `virt` (the MR's iova) at the same
    /// offset in its block as the memory's start (`ib_umem_find_best_pgsz`, which also
    /// records `virt` as the umem's iova). `None` if no size fits.
    pub(crate) fn best_page_size(&mut self, pgsz_bitmap: u64, virt: u64) -> Option<PageSize> {
        // CAST: `unsigned long` is 64-bit here.
        // SAFETY: a live umem (invariant), ours to change (`&mut self`).
        let pgsz = unsafe {
            b::ib_umem_find_best_pgsz(self.raw.as_ptr(), pgsz_bitmap as ffi::c_ulong, virt)
        };
        // CAST: as above.
        // INVARIANT: returned by `ib_umem_find_best_pgsz` for this umem, which now has the
        // iova the block walk needs.
        (pgsz != 0).then_some(PageSize(pgsz as u64))
    }

    /// How many DMA blocks of `pgsz` the memory spans (`ib_umem_num_dma_blocks`).
    pub(crate) fn num_dma_blocks(&self, pgsz: PageSize) -> usize {
        // CAST: `unsigned long` is 64-bit here.
        // SAFETY: a live umem (invariant); `pgsz` came from `best_page_size`.
        unsafe { b::rust_ib_helper_umem_num_dma_blocks(self.raw.as_ptr(), pgsz.0 as ffi::c_ulong) }
    }

    /// The bus addresses of the memory's DMA blocks of `pgsz`, each aligned to it
    /// (`rdma_umem_for_each_dma_block`).
    pub(crate) fn dma_blocks(&self, pgsz: PageSize) -> DmaBlocks<'_> {
        let mut iter = b::ib_block_iter::default();
        // CAST: `unsigned long` is 64-bit here.
        // SAFETY: a live umem (invariant), `pgsz` from `best_page_size`; `iter` is ours
        // to initialise.
        unsafe {
            b::rust_ib_helper_umem_block_iter_start(
                &mut iter,
                self.raw.as_ptr(),
                pgsz.0 as ffi::c_ulong,
            )
        };
        DmaBlocks {
            iter,
            _umem: PhantomData,
        }
    }
}

/// A page size [`Umem::best_page_size`] chose: the only sizes the block walk may use.
///
/// # Invariants
///
/// A power of two `ib_umem_find_best_pgsz` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageSize(u64);

impl PageSize {
    /// The CPU's page size. Valid for any umem without `best_page_size`: pinning is in
    /// CPU pages, and a umem's iova starts as its address (`ib_umem_get`), which is what
    /// a queue's ring or record wants (the NIC sees it from its first byte).
    // CAST: `PAGE_SIZE` is a `usize` of at most 64 bits.
    pub(crate) const CPU: Self = Self(kernel::page::PAGE_SIZE as u64);

    /// The size in bytes.
    pub(crate) fn bytes(self) -> u64 {
        self.0
    }

    /// Its log2.
    pub(crate) fn shift(self) -> u32 {
        self.0.trailing_zeros()
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: ours and not yet released (invariant); this is the only release.
        unsafe { b::rust_ib_helper_umem_release(self.raw.as_ptr()) };
    }
}

/// An iterator over a [`Umem`]'s DMA blocks: their bus addresses.
pub(crate) struct DmaBlocks<'a> {
    /// Started over the umem by `rust_ib_helper_umem_block_iter_start`.
    iter: b::ib_block_iter,
    _umem: PhantomData<&'a Umem>,
}

impl Iterator for DmaBlocks<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        // SAFETY: `iter` was started over a umem that outlives `self` (`'a`); the helpers
        // step it exactly as `rdma_umem_for_each_dma_block` does.
        unsafe {
            b::rust_ib_helper_umem_block_iter_next(&mut self.iter)
                .then(|| b::rust_ib_helper_block_iter_dma_address(&mut self.iter))
        }
    }
}
