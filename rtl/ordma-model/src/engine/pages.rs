//! Page lists in host memory: validation when an object is created, and the walk from a
//! page number to its bus address afterwards.
//!
//! A page list ([`hw::PageList`]) is a tree of 4 KiB tables of 512 little-endian `u64`
//! entries (`Documentation/hardware.md`, "Page tables"). The NIC keeps only the root, the
//! level count, the page size and the page count: the tables stay in host memory, owned by
//! the driver until the object is destroyed, and every lookup walks them again through the
//! [`Dma`] trait (a translation through a [`Cursor`]: each table it needs read once), so a
//! table the driver changed or freed gives an error, never an access outside mapped memory. What a walk may cost is bounded by the page count, itself bounded
//! by [`hw::MAX_PAGES`].

use ordma_hw as hw;

use crate::mem::Dma;

/// Why a page list is refused or a lookup failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageError {
    /// The list's fields are inconsistent, or an entry is not aligned (`AQ_BAD_PARAM`).
    Shape,
    /// A table or a page is not in memory the NIC can reach (`AQ_BAD_ADDRESS`).
    Unreachable,
}

impl PageError {
    /// The admin status for this error.
    pub fn status(self) -> u16 {
        match self {
            PageError::Shape => hw::AQ_BAD_PARAM,
            PageError::Unreachable => hw::AQ_BAD_ADDRESS,
        }
    }
}

/// `ceil(n / 2^shift)`, without overflow.
fn div_ceil_shift(n: u64, shift: u32) -> u64 {
    let whole = n.checked_shr(shift).unwrap_or(0);
    let mask = 1u64.checked_shl(shift).map_or(u64::MAX, |m| m - 1);
    whole + u64::from(n & mask != 0)
}

/// Reads the first `count` (at most 512) entries of the table at `table`.
fn read_table(mem: &dyn Dma, table: u64, count: u64, buf: &mut [u8]) -> Result<(), PageError> {
    let len = usize::try_from(count.min(hw::PT_ENTRIES) * 8).map_err(|_| PageError::Shape)?;
    let dst = buf.get_mut(..len).ok_or(PageError::Shape)?;
    mem.dma_read(table, dst).map_err(|_| PageError::Unreachable)
}

/// Checks a page list whose shape [`hw::PageList::shape_ok`] accepted: every table the
/// list needs is reachable and 4 KiB aligned, every page entry is aligned to the page size
/// and the page is reachable. Reads each needed table once: at most `npages / 511 + levels`
/// tables of 4 KiB.
///
/// # Errors
///
/// [`PageError::Shape`] for a bad shape or a misaligned entry, [`PageError::Unreachable`]
/// for a table or page outside reachable memory.
pub fn validate(mem: &dyn Dma, list: &hw::PageList) -> Result<(), PageError> {
    if !list.shape_ok() {
        return Err(PageError::Shape);
    }
    let npages = u64::from(list.npages);
    let page_size = 1u64 << list.page_shift;
    let mut buf = [0u8; hw::PT_PAGE_SIZE as usize];
    // The tables of the current level, top down; the root level first.
    let mut tables = vec![list.root];
    // Pages checked reachable so far, as one run [lo, hi): repeated or contiguous pages
    // (the common cases) cost one check per run, not one per page.
    let mut run: Option<(u64, u64)> = None;
    for level in (0..u32::from(list.levels)).rev() {
        // Entries this level holds in all: one per table (or page) of the level below.
        let mut left = div_ceil_shift(npages, level * hw::PT_ENTRIES_SHIFT);
        let mut below = Vec::new();
        for &table in &tables {
            if table % hw::PT_PAGE_SIZE != 0 {
                return Err(PageError::Shape);
            }
            let count = left.min(hw::PT_ENTRIES);
            read_table(mem, table, count, &mut buf)?;
            left -= count;
            for i in 0..count {
                let off = usize::try_from(i * 8).map_err(|_| PageError::Shape)?;
                let e = hw::get_le64(&buf, off).ok_or(PageError::Shape)?;
                if level > 0 {
                    below.push(e);
                    continue;
                }
                if e % page_size != 0 {
                    return Err(PageError::Shape);
                }
                let end = e.checked_add(page_size).ok_or(PageError::Unreachable)?;
                match run {
                    Some((lo, hi)) if e >= lo && end <= hi => {}
                    Some((lo, hi)) if e == hi && mem.reachable(lo, end - lo) => {
                        run = Some((lo, end));
                    }
                    _ if mem.reachable(e, page_size) => run = Some((e, end)),
                    _ => return Err(PageError::Unreachable),
                }
            }
        }
        if left != 0 {
            // More entries needed than the tables above pointed to: cannot happen for a
            // list shape_ok accepted; refuse rather than trust it.
            return Err(PageError::Shape);
        }
        tables = below;
    }
    Ok(())
}

/// The bus address of page `index` of `list`, walking its tables: one 8-byte read per
/// level.
///
/// # Errors
///
/// [`PageError::Shape`] for an index beyond the list or a misaligned entry,
/// [`PageError::Unreachable`] for a table outside reachable memory.
pub fn page_addr(mem: &dyn Dma, list: &hw::PageList, index: u64) -> Result<u64, PageError> {
    if index >= u64::from(list.npages) || list.levels == 0 || list.levels > hw::PT_MAX_LEVELS {
        return Err(PageError::Shape);
    }
    let mut table = list.root;
    for level in (0..u32::from(list.levels)).rev() {
        let slot = index.checked_shr(level * hw::PT_ENTRIES_SHIFT).unwrap_or(0) % hw::PT_ENTRIES;
        let mut e = [0u8; 8];
        let at = table.checked_add(slot * 8).ok_or(PageError::Unreachable)?;
        mem.dma_read(at, &mut e)
            .map_err(|_| PageError::Unreachable)?;
        let e = u64::from_le_bytes(e);
        let align = if level == 0 {
            1u64 << list.page_shift.min(63)
        } else {
            hw::PT_PAGE_SIZE
        };
        if e % align != 0 {
            return Err(PageError::Shape);
        }
        table = e;
    }
    Ok(table)
}

/// Page lookups in increasing order over a list, for one translation: each level-0 table
/// the lookups touch is walked to once and its needed entries are read in one DMA read, so a
/// run of `n` pages costs about `n / 512` table reads instead of `n × levels` 8-byte reads.
/// Nothing is kept beyond the cursor's life: the next translation reads the tables again.
pub struct Cursor<'a> {
    mem: &'a dyn Dma,
    list: &'a hw::PageList,
    /// One past the last page index the translation needs: no entry beyond it is read.
    end: u64,
    /// The page index of `buf`'s first entry and how many entries `buf` holds.
    base: u64,
    held: u64,
    buf: [u8; hw::PT_PAGE_SIZE as usize],
}

impl<'a> Cursor<'a> {
    /// A cursor for lookups of pages below `end` of `list`.
    pub fn new(mem: &'a dyn Dma, list: &'a hw::PageList, end: u64) -> Self {
        Self {
            mem,
            list,
            end: end.min(u64::from(list.npages)),
            base: 0,
            held: 0,
            buf: [0u8; hw::PT_PAGE_SIZE as usize],
        }
    }

    /// The bus address of page `index`: the same result and errors as [`page_addr`].
    ///
    /// # Errors
    ///
    /// [`PageError::Shape`] for an index beyond the list (or the cursor's end) or a
    /// misaligned entry, [`PageError::Unreachable`] for a table outside reachable memory.
    pub fn page_addr(&mut self, index: u64) -> Result<u64, PageError> {
        if index >= self.end || self.list.levels == 0 || self.list.levels > hw::PT_MAX_LEVELS {
            return Err(PageError::Shape);
        }
        if index < self.base || index - self.base >= self.held {
            self.fill(index)?;
        }
        let off = usize::try_from((index - self.base) * 8).map_err(|_| PageError::Shape)?;
        let e = hw::get_le64(&self.buf, off).ok_or(PageError::Shape)?;
        if e % (1u64 << self.list.page_shift.min(63)) != 0 {
            return Err(PageError::Shape);
        }
        Ok(e)
    }

    /// Reads the entries of `index`'s level-0 table from `index` up to the table's end or
    /// the cursor's end.
    fn fill(&mut self, index: u64) -> Result<(), PageError> {
        self.held = 0;
        // The level-0 table: the root for one level, else a walk down the upper levels.
        let mut table = self.list.root;
        for level in (1..u32::from(self.list.levels)).rev() {
            let slot =
                index.checked_shr(level * hw::PT_ENTRIES_SHIFT).unwrap_or(0) % hw::PT_ENTRIES;
            let mut e = [0u8; 8];
            let at = table.checked_add(slot * 8).ok_or(PageError::Unreachable)?;
            self.mem
                .dma_read(at, &mut e)
                .map_err(|_| PageError::Unreachable)?;
            table = u64::from_le_bytes(e);
            if table % hw::PT_PAGE_SIZE != 0 {
                return Err(PageError::Shape);
            }
        }
        let slot = index % hw::PT_ENTRIES;
        let count = (hw::PT_ENTRIES - slot).min(self.end - index);
        let at = table.checked_add(slot * 8).ok_or(PageError::Unreachable)?;
        let len = usize::try_from(count * 8).map_err(|_| PageError::Shape)?;
        let dst = self.buf.get_mut(..len).ok_or(PageError::Shape)?;
        self.mem
            .dma_read(at, dst)
            .map_err(|_| PageError::Unreachable)?;
        self.base = index;
        self.held = count;
        Ok(())
    }
}

/// The pages a ring of `bytes` needs: `ceil(bytes / page size)`.
pub fn pages_for(bytes: u64, page_shift: u8) -> u64 {
    div_ceil_shift(bytes, u32::from(page_shift))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of `npages` 4 KiB pages (page `i` at `0x4000_0000 + 4096 * (i * 7 % npages)`)
    /// in `levels` levels, its tables from `0x10_0000` on, in anonymous memory.
    fn build(npages: u64, levels: u8) -> (crate::mem::GuestMemoryMmap, hw::PageList) {
        let mem = crate::mem::anonymous(&[(0x10_0000, 0x10_0000)]).unwrap();
        let mut next = 0x10_0000u64;
        let mut entries: Vec<u64> = (0..npages)
            .map(|i| 0x4000_0000 + 4096 * (i * 7 % npages))
            .collect();
        for _ in 0..levels {
            let mut tables = Vec::new();
            for chunk in entries.chunks(512) {
                let b: Vec<u8> = chunk.iter().flat_map(|e| e.to_le_bytes()).collect();
                mem.dma_write(next, &b).unwrap();
                tables.push(next);
                next += 4096;
            }
            entries = tables;
        }
        let list = hw::PageList {
            root: entries[0],
            npages: npages as u32,
            page_shift: 12,
            levels,
        };
        (mem, list)
    }

    #[test]
    fn a_cursor_finds_what_the_walk_finds_and_fails_where_it_fails() {
        for (npages, levels) in [(1, 1), (512, 1), (1000, 2), (1000, 3), (513, 2), (2000, 4)] {
            let (mem, list) = build(npages, levels);
            // Every start, in runs crossing the level-0 tables' ends.
            for start in [0, 1, 510, 511, 512, npages - 1] {
                let start = start.min(npages - 1);
                let mut c = Cursor::new(&mem, &list, npages);
                for i in start..npages {
                    assert_eq!(
                        c.page_addr(i),
                        page_addr(&mem, &list, i),
                        "{npages} pages, {levels} levels, from {start}: page {i}"
                    );
                }
                assert_eq!(c.page_addr(npages), Err(PageError::Shape), "past the list");
            }
            // A cursor ending early reads nothing past its end, and refuses it.
            let mut c = Cursor::new(&mem, &list, 1);
            assert!(c.page_addr(0).is_ok());
            if npages > 1 {
                assert_eq!(c.page_addr(1), Err(PageError::Shape), "past the end");
            }
        }
        // A misaligned page entry, in the middle of the second level-0 table: that page
        // only is refused.
        let (mem, list) = build(1000, 2);
        mem.dma_write(0x10_0000 + 4096 + 100 * 8, &0x4000_0008u64.to_le_bytes())
            .unwrap();
        let mut c = Cursor::new(&mem, &list, 1000);
        assert!(c.page_addr(611).is_ok());
        assert_eq!(c.page_addr(612), Err(PageError::Shape));
        assert!(c.page_addr(613).is_ok());
        // A level-1 entry naming a table outside memory, or misaligned.
        let root = list.root;
        mem.dma_write(root + 8, &0x9000_0000u64.to_le_bytes())
            .unwrap();
        let mut c = Cursor::new(&mem, &list, 1000);
        assert!(c.page_addr(511).is_ok());
        assert_eq!(c.page_addr(512), Err(PageError::Unreachable));
        mem.dma_write(root + 8, &(0x10_0000u64 + 8).to_le_bytes())
            .unwrap();
        let mut c = Cursor::new(&mem, &list, 1000);
        assert_eq!(c.page_addr(700), Err(PageError::Shape));
        // A table running out of memory: the run is read at once, so it fails as a whole.
        let list = hw::PageList {
            root: 0x1f_f000,
            npages: 512,
            page_shift: 12,
            levels: 1,
        };
        let mut c = Cursor::new(&mem, &list, 512);
        assert!(c.page_addr(0).is_ok());
        let list = hw::PageList {
            root: 0x1f_f800,
            ..list
        };
        let mut c = Cursor::new(&mem, &list, 512);
        assert_eq!(c.page_addr(0), Err(PageError::Unreachable));
    }

    #[test]
    fn div_ceil_shift_edges() {
        assert_eq!(div_ceil_shift(0, 12), 0);
        assert_eq!(div_ceil_shift(1, 12), 1);
        assert_eq!(div_ceil_shift(4096, 12), 1);
        assert_eq!(div_ceil_shift(4097, 12), 2);
        assert_eq!(div_ceil_shift(u64::MAX, 0), u64::MAX);
        assert_eq!(div_ceil_shift(u64::MAX, 64), 1);
        assert_eq!(div_ceil_shift(1 << 24, 18), 64);
    }
}
