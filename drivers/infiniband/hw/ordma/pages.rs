// SPDX-License-Identifier: GPL-2.0

//! Host memory the NIC reaches: page lists in the hardware's format (`hardware.md`, "Page
//! lists"), the memory behind one object (an MR's pages, a queue's ring), and creating and
//! destroying objects so that memory is never freed while the NIC may still use it.

use kernel::{
    device::{Bound, Device},
    dma::{Coherent, CoherentBox},
    page::PAGE_SIZE,
    prelude::*,
};

use crate::{
    hw, ib,
    nic::{Failed, Nic},
};

/// Entries of a page-table page.
// CAST: 512, the hardware's constant.
const PT_ENTRIES: usize = hw::PT_ENTRIES as usize;

/// One page-table page: 512 little-endian bus addresses, 4 KiB, in DMA-coherent memory
/// (which `dma_alloc_coherent` aligns to its size, so to 4 KiB).
type Table = Coherent<[u64; PT_ENTRIES]>;

const _: () = assert!(core::mem::size_of::<[u64; PT_ENTRIES]>() as u64 == hw::PT_PAGE_SIZE);

/// A page list in the hardware's format: level-0 tables with the bus addresses of the
/// pages, then each level's tables with those of the level below, up to one root.
pub(crate) struct PageList {
    /// Every table, level 0 first, the root last; the NIC reads them until the list is
    /// destroyed.
    _tables: KVec<Table>,
    /// What the NIC is told.
    pub(crate) list: hw::PageList,
}

impl PageList {
    /// Builds the list of the `npages` pages of `1 << page_shift` bytes at the bus
    /// addresses `pages` yields.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `npages` is 0 or beyond `hw::MAX_PAGES`; `EIO` if `pages` yields
    /// another number of pages; `ENOMEM`.
    pub(crate) fn new(
        dev: &Device<Bound>,
        pages: impl Iterator<Item = u64>,
        npages: usize,
        page_shift: u8,
    ) -> Result<Self> {
        let count = u32::try_from(npages)
            .ok()
            .filter(|&n| n != 0 && n <= hw::MAX_PAGES)
            .ok_or(EINVAL)?;
        let levels = hw::pt_levels_for(u64::from(count)).ok_or(EINVAL)?;
        let mut tables = KVec::new();
        // Level 0 from the pages, then each level from the addresses of the one below.
        let mut addrs = Self::level(dev, &mut tables, pages)?;
        if addrs.len() != npages.div_ceil(PT_ENTRIES) {
            return Err(EIO);
        }
        let mut built = 1u8;
        while addrs.len() > 1 {
            addrs = Self::level(dev, &mut tables, addrs.into_iter())?;
            built += 1;
        }
        let root = addrs.first().copied().ok_or(EIO)?;
        if built != levels {
            return Err(EIO);
        }
        Ok(Self {
            _tables: tables,
            list: hw::PageList {
                root,
                npages: count,
                page_shift,
                levels,
            },
        })
    }

    /// Fills tables with `entries`, 512 a table, appends them to `tables`, and returns
    /// their bus addresses.
    fn level(
        dev: &Device<Bound>,
        tables: &mut KVec<Table>,
        mut entries: impl Iterator<Item = u64>,
    ) -> Result<KVec<u64>> {
        let mut addrs = KVec::new();
        while let Some(first) = entries.next() {
            let mut t: CoherentBox<[u64; PT_ENTRIES]> = CoherentBox::zeroed(dev, GFP_KERNEL)?;
            t[0] = first.to_le();
            for (slot, e) in t.iter_mut().skip(1).zip(&mut entries) {
                *slot = e.to_le();
            }
            let t: Table = t.into();
            addrs.push(t.dma_address(), GFP_KERNEL)?;
            tables.push(t, GFP_KERNEL)?;
        }
        Ok(addrs)
    }
}

/// What the NIC may reach through one object: pinned user memory and the page lists that
/// describe it. Dropping it unpins the pages and frees the tables: only once the NIC
/// cannot use them.
#[derive(Default)]
pub(crate) struct NicMemory {
    lists: KVec<PageList>,
    umems: KVec<ib::Umem>,
}

impl NicMemory {
    /// Adds pinned memory.
    pub(crate) fn add_umem(&mut self, umem: ib::Umem) -> Result {
        self.umems.push(umem, GFP_KERNEL)?;
        Ok(())
    }

    /// Adds a page list; returns what the NIC is told of it.
    pub(crate) fn add_list(&mut self, list: PageList) -> Result<hw::PageList> {
        let l = list.list;
        self.lists.push(list, GFP_KERNEL)?;
        Ok(l)
    }

    /// Pins a queue's ring, `bytes` at page-aligned user address `addr`, and describes it in
    /// CPU pages, from its first byte (what `CREATE_CQ` and `CREATE_QP` want).
    ///
    /// # Errors
    ///
    /// `EINVAL` for an address not page aligned or an empty ring; the pinning's errors
    /// (`ENOMEM` over `RLIMIT_MEMLOCK`, `EFAULT`); `ENOMEM`.
    pub(crate) fn add_ring(
        &mut self,
        dev: &Device<Bound>,
        pages: &ib::UserPages<'_>,
        addr: u64,
        bytes: u64,
    ) -> Result<hw::PageList> {
        // CAST: a page size fits `u64`.
        if bytes == 0 || addr % PAGE_SIZE as u64 != 0 {
            return Err(EINVAL);
        }
        let umem = pages.pin(addr, bytes)?;
        let pgsz = ib::PageSize::CPU;
        let npages = umem.num_dma_blocks(pgsz);
        // CAST: the shift of a page size fits `u8`.
        let list = PageList::new(dev, umem.dma_blocks(pgsz), npages, pgsz.shift() as u8)?;
        self.add_umem(umem)?;
        self.add_list(list)
    }

    /// Pins a `len`-byte record at user address `addr` (aligned to `len`, at most a page)
    /// and returns its bus address.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a misaligned address; the pinning's errors; `ENOMEM`.
    pub(crate) fn add_record(
        &mut self,
        pages: &ib::UserPages<'_>,
        addr: u64,
        len: u64,
    ) -> Result<u64> {
        if len == 0 || !len.is_power_of_two() || addr % len != 0 {
            return Err(EINVAL);
        }
        let umem = pages.pin(addr, len)?;
        // The record lies in one page: the first block's address (the page's) plus its
        // offset there.
        let pgsz = ib::PageSize::CPU;
        let page = umem.dma_blocks(pgsz).next().ok_or(EIO)?;
        self.add_umem(umem)?;
        Ok(page + addr % pgsz.bytes())
    }
}

/// One object's memory, for [`Nic::create_reaching`] and [`Nic::destroy_reaching`], which
/// take several (a CQ's ring and its record, pinned and released apart).
impl IntoIterator for NicMemory {
    type Item = NicMemory;
    type IntoIter = core::iter::Once<NicMemory>;

    fn into_iter(self) -> Self::IntoIter {
        core::iter::once(self)
    }
}

impl<'bound> Nic<'bound> {
    /// Runs `create`, the command that makes an object reaching `memory` (a queue on
    /// doorbell page `db_page`, if given). When the NIC may have carried it out without
    /// saying so (no answer in time, dead while the command waited, an answer out of step
    /// or out of range), it may have made the object and be reading the memory: the memory
    /// is retired (kept until the NIC is stopped) and the page kept out of the pool. A
    /// refusal, or a command never sent (a dead NIC), leaves nothing to wait for.
    pub(crate) fn create_reaching<M: IntoIterator<Item = NicMemory>>(
        &self,
        memory: M,
        db_page: Option<u32>,
        create: impl FnOnce() -> Result<u32, Failed>,
    ) -> Result<(u32, M)> {
        match create() {
            Ok(num) => Ok((num, memory)),
            Err(f) => {
                if f.may_have_run {
                    for m in memory {
                        self.retire(m);
                    }
                    if let Some(page) = db_page {
                        self.doorbells.keep(page);
                    }
                }
                Err(f.err)
            }
        }
    }

    /// Runs `destroy`, the command that destroys object `what` `num` (a queue on doorbell
    /// page `db_page`, if given), then releases its `memory`. Destroying cannot fail
    /// towards ib_core: a NIC that did not acknowledge may still use the memory, which then
    /// stays until the NIC is stopped, and the object may still take doorbells from its
    /// page, which then stays out of the pool. That holds for a dead NIC too: it said it
    /// stopped (`FATAL`), but the word of a failed device is not what keeps memory safe;
    /// unbind's reset or bus mastering off is.
    pub(crate) fn destroy_reaching(
        &self,
        what: &str,
        num: u32,
        memory: impl IntoIterator<Item = NicMemory>,
        db_page: Option<u32>,
        destroy: impl FnOnce() -> Result,
    ) {
        let Err(e) = destroy() else {
            drop(memory.into_iter());
            return;
        };
        if !self.is_dead() {
            self.verbs_log_limit.log(self.pdev, || {
                dev_warn!(
                    self.pdev,
                    "destroying {what} {num:#x} failed (error {}): its memory stays pinned until the NIC is reset\n",
                    e.to_errno()
                )
            });
        }
        for m in memory {
            self.retire(m);
        }
        if let Some(page) = db_page {
            self.doorbells.keep(page);
        }
    }
}
