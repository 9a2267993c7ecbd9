// SPDX-License-Identifier: GPL-2.0
//! Memory regions: page lists (the format every ring and MR uses), `CMD_CREATE_MR`,
//! `CMD_MODIFY_MR` (1.6) and `CMD_DESTROY_MR`, MR keys.

use super::*;

/// Bytes of a page-table page: [`PT_ENTRIES`] little-endian `u64` bus addresses.
pub const PT_PAGE_SIZE: u64 = 4096;
/// Entries of a page-table page.
pub const PT_ENTRIES: u64 = 512;
/// log2 of [`PT_ENTRIES`].
pub const PT_ENTRIES_SHIFT: u32 = 9;
/// Most page-table levels a page list may have.
pub const PT_MAX_LEVELS: u8 = 4;
/// Most pages one page list (an MR, a ring) may have: 2^24, a 64 GiB MR of 4 KiB pages.
pub const MAX_PAGES: u32 = 1 << 24;
/// The page sizes (log2) a page list may use: 4 KiB, 2 MiB, 1 GiB, as `page_size_cap`.
pub const PAGE_SHIFTS: [u8; 3] = [12, 21, 30];

/// Whether `shift` is a page size the NIC supports (one of [`PAGE_SHIFTS`]).
pub fn page_shift_ok(shift: u8) -> bool {
    PAGE_SHIFTS.contains(&shift)
}

/// The fewest page-table levels that hold `npages` pages (1 for 0..=512 pages); `None`
/// beyond [`PT_MAX_LEVELS`].
pub fn pt_levels_for(npages: u64) -> Option<u8> {
    let mut levels = 1u8;
    let mut cap = PT_ENTRIES;
    while cap < npages {
        levels = levels.checked_add(1)?;
        cap = cap.checked_mul(PT_ENTRIES)?;
    }
    (levels <= PT_MAX_LEVELS).then_some(levels)
}

/// A page list in host memory: the MR's (or ring's) pages, through a tree of page-table
/// pages.
///
/// A page-table page is 4 KiB, aligned, of 512 little-endian `u64` entries. In a table at
/// level 0 the entries are the bus addresses of the pages themselves (aligned to the page
/// size); at level n > 0 they are the bus addresses of level n-1 tables. The root is at
/// level `levels - 1`. Entry `i` of a level-0 table covers page `512 * t + i` of the list,
/// where `t` is the table's position in its level; only the entries the list needs are
/// read. `levels` is 1..=4 and `512^levels >= npages`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageList {
    /// Bus address of the root table (4 KiB aligned).
    pub root: u64,
    /// Pages in the list, 1..=[`MAX_PAGES`].
    pub npages: u32,
    /// log2 of the page size, one of [`PAGE_SHIFTS`].
    pub page_shift: u8,
    /// Table levels, 1..=[`PT_MAX_LEVELS`].
    pub levels: u8,
}

impl PageList {
    /// Whether the fields are consistent (not whether the tables are reachable): a known
    /// page size, a page count in range, a root aligned to 4 KiB, and enough levels.
    pub fn shape_ok(&self) -> bool {
        self.npages != 0
            && self.npages <= MAX_PAGES
            && page_shift_ok(self.page_shift)
            && self.root % PT_PAGE_SIZE == 0
            && (1..=PT_MAX_LEVELS).contains(&self.levels)
            && pt_levels_for(u64::from(self.npages)).is_some_and(|l| l <= self.levels)
    }

    /// The list's size in bytes (`npages << page_shift`).
    pub fn bytes(&self) -> u64 {
        u64::from(self.npages)
            .checked_shl(u32::from(self.page_shift))
            .unwrap_or(u64::MAX)
    }
}

/// `CMD_CREATE_MR` parameters.
///
/// Layout in `params`: `pdn` u32 @0, `access` u32 @4 (`ACCESS_*`), `iova` u64 @8, `length`
/// u64 @16, `pt_root` u64 @24, `npages` u32 @32, `page_shift` u8 @36, `pt_levels` u8 @37,
/// the rest (@38..56) zero. The MR covers `[iova, iova + length)`; its first byte is at
/// offset `iova % page_size` of the first page, and `npages` is exactly the number of pages
/// that span needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateMrParams {
    /// The PD the MR belongs to.
    pub pdn: u32,
    /// `ACCESS_*` flags.
    pub access: u32,
    /// The MR's first virtual address.
    pub iova: u64,
    /// The MR's length in bytes (not zero).
    pub length: u64,
    /// Its pages.
    pub pages: PageList,
}

impl CreateMrParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.pdn);
        put_le32(&mut p, 4, self.access);
        put_le64(&mut p, 8, self.iova);
        put_le64(&mut p, 16, self.length);
        put_le64(&mut p, 24, self.pages.root);
        put_le32(&mut p, 32, self.pages.npages);
        p[36] = self.pages.page_shift;
        p[37] = self.pages.levels;
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        if !zero(p, 38..p.len()) {
            return None;
        }
        Some(Self {
            pdn: get_le32(p, 0)?,
            access: get_le32(p, 4)?,
            iova: get_le64(p, 8)?,
            length: get_le64(p, 16)?,
            pages: PageList {
                root: get_le64(p, 24)?,
                npages: get_le32(p, 32)?,
                page_shift: p[36],
                levels: p[37],
            },
        })
    }
}

/// Admin command (1.6): re-register the MR a key names in place ([`ModifyMrParams`]): its
/// PD, access, range and pages become the parameters', checked as `CMD_CREATE_MR` checks
/// them, and its key stays. No work the NIC does after the command completes uses the old
/// registration: a translation kept from it fails as one of a destroyed MR does. Result 0;
/// `AQ_BAD_PARAM` for a key no MR has or parameters `CMD_CREATE_MR` refuses (the MR then
/// unchanged).
pub const CMD_MODIFY_MR: u8 = 0x14;

/// `CMD_MODIFY_MR` parameters.
///
/// Layout in `params`: the MR's new registration as [`CreateMrParams`] lays it out (@0..38),
/// reserved u16 @38, `key` u32 @40 (the key `CMD_CREATE_MR` returned), the rest (@44..56)
/// zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifyMrParams {
    /// The MR's key.
    pub key: u32,
    /// What it is registered with from now on.
    pub mr: CreateMrParams,
}

impl ModifyMrParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = self.mr.encode();
        put_le32(&mut p, 40, self.key);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        let key = get_le32(p, 40)?;
        let mut rest = *p;
        rest.get_mut(40..44)?.fill(0);
        Some(Self {
            key,
            mr: CreateMrParams::decode(&rest)?,
        })
    }
}

/// The key of an MR: `index << 8 | key`, the same for local and remote access.
pub fn mr_key(index: u32, key: u8) -> u32 {
    (index << 8) | u32::from(key)
}

/// `CMD_DESTROY_MR` parameters.
///
/// Layout in `params`: `key` u32 @0 (the key `CMD_CREATE_MR` returned), the rest zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyParams {
    /// The MR's key.
    pub key: u32,
}

impl KeyParams {
    /// Encodes into an admin command's parameters.
    pub fn encode(&self) -> Params {
        let mut p = [0u8; AQ_SQE_SIZE - 8];
        put_le32(&mut p, 0, self.key);
        p
    }

    /// Decodes; `None` if a reserved byte is not zero.
    pub fn decode(p: &Params) -> Option<Self> {
        zero(p, 4..p.len()).then_some(())?;
        Some(Self {
            key: get_le32(p, 0)?,
        })
    }
}
