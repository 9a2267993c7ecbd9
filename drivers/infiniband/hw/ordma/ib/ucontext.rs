// SPDX-License-Identifier: GPL-2.0

//! User contexts and what they may map: `struct ib_ucontext` with the driver's
//! [`Driver::Ucontext`] inside, and typed `rdma_user_mmap_entry`s.

use core::{marker::PhantomData, mem::MaybeUninit, ptr::NonNull};

use kernel::{page::PAGE_SHIFT, page::PAGE_SIZE, prelude::*, types::Opaque};

use super::{bindings as b, driver::Driver};

/// A user context as ib_core allocates it (`size_ib_ucontext`): the `ib_ucontext`
/// (ib_core's: only reached through raw pointers), then the driver's data, initialised in
/// place by `alloc_ucontext` and dropped by `dealloc_ucontext`.
#[repr(C)]
pub(super) struct IbUcontext<T: Driver> {
    pub(super) ib: Opaque<b::ib_ucontext>,
    pub(super) data: MaybeUninit<T::Ucontext>,
}

/// What an mmap entry maps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mapping {
    /// `pages` pages of device memory from page frame `pfn`, uncached (doorbells).
    IoUncached {
        /// First page frame.
        pfn: u64,
        /// Length in pages.
        pages: usize,
    },
}

impl Mapping {
    fn len(&self) -> usize {
        match *self {
            Mapping::IoUncached { pages, .. } => pages.saturating_mul(PAGE_SIZE),
        }
    }
}

/// An mmap entry: ib_core's part first, then what it maps and the driver's data, which
/// lives until ib_core frees the entry (`mmap_free`: the context and every mapping are
/// gone).
#[repr(C)]
pub(super) struct MmapEntry<T: Driver> {
    pub(super) rdma: Opaque<b::rdma_user_mmap_entry>,
    pub(super) mapping: Mapping,
    pub(super) _data: T::MmapEntry,
}

/// A user context being set up, given to [`Driver::alloc_ucontext`].
///
/// # Invariants
///
/// `raw` is a valid `ib_ucontext` of a device of driver `T` for `'a`.
pub(crate) struct UserContext<'a, T: Driver> {
    raw: NonNull<b::ib_ucontext>,
    _p: PhantomData<(&'a b::ib_ucontext, T)>,
}

impl<T: Driver> UserContext<'_, T> {
    /// # Safety
    ///
    /// `raw` is a valid `ib_ucontext` of one of `T`'s devices for the lifetime chosen.
    pub(super) unsafe fn from_raw(raw: NonNull<b::ib_ucontext>) -> Self {
        // INVARIANT: the caller guarantees validity.
        Self {
            raw,
            _p: PhantomData,
        }
    }

    /// Makes `mapping` mappable by this context's process. `data` lives as long as the
    /// entry: until the returned handle is dropped and every mapping of it is gone. If
    /// this fails, `data` is dropped at once.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, or ib_core's error from `rdma_user_mmap_entry_insert`.
    pub(crate) fn insert_mmap(
        &self,
        data: T::MmapEntry,
        mapping: Mapping,
    ) -> Result<MmapHandle<T>> {
        let entry = KBox::new(
            MmapEntry::<T> {
                rdma: Opaque::zeroed(),
                mapping,
                _data: data,
            },
            GFP_KERNEL,
        )?;
        let entry = KBox::into_raw(entry);
        // SAFETY: `raw` is a valid context (invariant); `entry` is a fresh, zero-initialised
        // `rdma_user_mmap_entry` that ib_core keeps (and hands to `mmap_free`) once inserted.
        let r = unsafe {
            b::rdma_user_mmap_entry_insert(self.raw.as_ptr(), (*entry).rdma.get(), mapping.len())
        };
        if r != 0 {
            // SAFETY: not inserted: still only ours, from `KBox::into_raw` above.
            drop(unsafe { KBox::from_raw(entry) });
            return Err(Error::from_errno(r));
        }
        // SAFETY: `entry` is live: the insertion's reference is ours until removed.
        let key = (unsafe { (*(*entry).rdma.get()).start_pgoff } as u64) << PAGE_SHIFT;
        // INVARIANT: inserted, not removed; `NonNull` since it came from a `KBox`.
        Ok(MmapHandle {
            // SAFETY: `KBox::into_raw` never returns null.
            entry: unsafe { NonNull::new_unchecked(entry) },
            key,
        })
    }
}

/// An inserted mmap entry; dropping it removes the entry (existing mappings keep it alive
/// until they are unmapped).
///
/// # Invariants
///
/// `entry` was inserted by [`UserContext::insert_mmap`] and is not yet removed.
pub(crate) struct MmapHandle<T: Driver> {
    entry: NonNull<MmapEntry<T>>,
    key: u64,
}

// SAFETY: the handle only removes the entry, which ib_core allows from any thread; the
// driver data it keeps alive is `Send + Sync` (`Driver::MmapEntry`).
unsafe impl<T: Driver> Send for MmapHandle<T> {}
// SAFETY: `&MmapHandle` only reads `key`.
unsafe impl<T: Driver> Sync for MmapHandle<T> {}

impl<T: Driver> MmapHandle<T> {
    /// The `mmap()` offset that maps the entry.
    pub(crate) fn key(&self) -> u64 {
        self.key
    }
}

impl<T: Driver> Drop for MmapHandle<T> {
    fn drop(&mut self) {
        // SAFETY: inserted and not removed (invariant); this is the only removal.
        unsafe { b::rdma_user_mmap_entry_remove((*self.entry.as_ptr()).rdma.get()) };
    }
}
