// SPDX-License-Identifier: GPL-2.0

//! Memory regions over user memory or a dma-buf: pinned by ib_core (`ib::Umem`), described to the NIC by
//! a page list (`hardware.md`, "Page lists") at the largest page size the NIC supports that
//! the mapping allows, registered with `CREATE_MR`, freed with `DESTROY_MR`.

use kernel::{
    device::{Bound, Device},
    dma::{Coherent, CoherentBox},
    prelude::*,
    sync::Arc,
};

use crate::{hw, ib, nic::Nic, pd::Pd};

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
    list: hw::PageList,
}

impl PageList {
    /// Builds the list of the `npages` pages of `1 << page_shift` bytes at the bus
    /// addresses `pages` yields.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `npages` is 0 or beyond `hw::MAX_PAGES`; `EIO` if `pages` yields
    /// another number of pages; `ENOMEM`.
    fn new(
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

/// What the NIC may reach through a registered MR: its pinned pages and its page list.
/// Dropping it unpins the pages and frees the tables: only once the NIC cannot use them.
pub(crate) struct MrMemory {
    _tables: PageList,
    _umem: ib::Umem,
}

/// An MR on the NIC; dropping it destroys it there.
pub(crate) struct Mr<'bound> {
    nic: Arc<Nic<'bound>>,
    key: u32,
    /// `None` only while being dropped.
    memory: Option<MrMemory>,
}

/// The NIC's access flags for `access`, checked as ib_core's `ib_check_mr_access` and
/// real drivers (efa) do.
///
/// # Errors
///
/// `EINVAL` for remote write or remote atomic without local write; `EOPNOTSUPP` for a flag
/// the NIC does not have (optional flags, such as relaxed ordering, are ignored).
fn hw_access(access: ib::Access) -> Result<u32> {
    use ib::Access as A;
    if access.intersects(A::REMOTE_WRITE | A::REMOTE_ATOMIC) && !access.contains(A::LOCAL_WRITE) {
        return Err(EINVAL);
    }
    let access = access.without(A::OPTIONAL);
    let map = [
        (A::LOCAL_WRITE, hw::ACCESS_LOCAL_WRITE),
        (A::REMOTE_WRITE, hw::ACCESS_REMOTE_WRITE),
        (A::REMOTE_READ, hw::ACCESS_REMOTE_READ),
        (A::REMOTE_ATOMIC, hw::ACCESS_REMOTE_ATOMIC),
    ];
    let mut rest = access;
    let mut bits = 0;
    for (flag, hw_flag) in map {
        if access.contains(flag) {
            bits |= hw_flag;
            rest = rest.without(flag);
        }
    }
    if rest.bits() != 0 {
        return Err(EOPNOTSUPP);
    }
    Ok(bits)
}

impl<'bound> Mr<'bound> {
    /// Pins `mem`, builds its page list at the best page size and registers it on the NIC.
    ///
    /// # Errors
    ///
    /// `EINVAL`/`EOPNOTSUPP` for access flags (see [`hw_access`]), `EOPNOTSUPP` for
    /// driver input; `ib_umem_get`'s errors (`ENOMEM` over `RLIMIT_MEMLOCK`, `EFAULT`);
    /// `EINVAL` when no page size of the NIC fits the mapping or it has too many pages;
    /// `ENOMEM` when the NIC has no free MR; `EIO` when the NIC is dead or broken;
    /// `ETIMEDOUT` when it does not answer (the memory then stays pinned until the NIC is
    /// stopped, as for an unacknowledged destroy).
    pub(crate) fn new(
        nic: &Arc<Nic<'bound>>,
        pd: &Pd<'bound>,
        mem: &ib::UserMemory<'_>,
        page_size_cap: u64,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result<(Self, ib::MrKeys)> {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        let access = hw_access(mem.access())?;
        if mem.length() == 0 {
            return Err(EINVAL);
        }
        let mut umem = mem.pin()?;
        let pgsz = umem
            .best_page_size(page_size_cap, mem.virt())
            .ok_or(EINVAL)?;
        // CAST: the shift of a `u64` power of two fits `u8`.
        let page_shift = pgsz.shift() as u8;
        let npages = umem.num_dma_blocks(pgsz);
        let tables = PageList::new(nic.pdev.as_ref(), umem.dma_blocks(pgsz), npages, page_shift)?;
        let params = hw::CreateMrParams {
            pdn: pd.pdn(),
            access,
            iova: mem.virt(),
            length: mem.length(),
            pages: tables.list,
        };
        let memory = MrMemory {
            _tables: tables,
            _umem: umem,
        };
        let key = match nic.create_mr(&params) {
            Ok(key) => key,
            // Unanswered: the NIC may be walking the tables, or have made the MR. A refusal,
            // a command never sent (dead NIC, broken queue) leaves nothing to wait for.
            Err(e) if e == ETIMEDOUT && !nic.is_dead() => {
                nic.retire(memory);
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        dev_dbg!(
            nic.pdev,
            "MR {key:#x}: {} bytes at {} {:#x}, {npages} pages of {} bytes\n",
            mem.length(),
            if mem.is_dmabuf() {
                "dma-buf offset"
            } else {
                "address"
            },
            mem.start(),
            pgsz.bytes()
        );
        Ok((
            Self {
                nic: nic.clone(),
                key,
                memory: Some(memory),
            },
            ib::MrKeys {
                lkey: key,
                rkey: key,
            },
        ))
    }
}

impl Drop for Mr<'_> {
    fn drop(&mut self) {
        let Some(memory) = self.memory.take() else {
            return;
        };
        // Destroying cannot fail towards ib_core. A NIC that did not acknowledge may still
        // read the tables and write the pages: they stay until it is reset.
        match self.nic.destroy_mr(self.key) {
            Ok(()) => drop(memory),
            // A dead NIC does no more DMA (it stopped on its fatal error).
            Err(_) if self.nic.is_dead() => drop(memory),
            Err(e) => {
                dev_warn!(
                    self.nic.pdev,
                    "DESTROY_MR {:#x} failed (error {}): its memory stays pinned until the NIC is reset\n",
                    self.key,
                    e.to_errno()
                );
                self.nic.retire(memory);
            }
        }
    }
}
