//! Memory regions: `CMD_CREATE_MR`, `CMD_MODIFY_MR`, `CMD_DESTROY_MR` and the data path's
//! translation of an (MR key, virtual address, length) into bus addresses.
//!
//! An MR's key is `index << 8 | key` ([`hw::mr_key`]): the table slot and the 8-bit key that
//! changes each time the slot is reused, so a key that outlived its MR matches nothing. The
//! NIC validates the whole page list when the MR is created and keeps only its root; each
//! translation walks the tables again: the entries of the pages it touches, one read per
//! level-0 table (up to 512 entries), and one 8-byte read per upper level for each.

use ordma_hw as hw;
use tracing::debug;

use super::pages::{self, PageError};
use super::tables::Handle;
use super::Nic;
use crate::mem::Dma;

/// A memory region on the NIC.
#[derive(Clone, Copy, Debug)]
pub struct Mr {
    /// Its PD.
    pub pdn: u32,
    /// `hw::ACCESS_*`.
    pub access: u32,
    /// First virtual address.
    pub iova: u64,
    /// Length in bytes.
    pub length: u64,
    /// Its pages.
    pub pages: hw::PageList,
    /// Which registration this is: a number no other MR of this NIC had before
    /// ([`MrRef`]).
    pub(super) gen: u64,
}

/// The MR a kept translation came from: its key and its registration
/// ([`Mr::gen`]). A translation kept across packets or time is used only while
/// [`Nic::owns`] finds each of its MRs still registered, the same registration (a key
/// alone repeats after 256 reuses of its slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MrRef {
    key: u32,
    gen: u64,
}

/// The largest length one translation may cover (the port's `max_msg_sz`, 2 GiB), so a
/// translation's result is bounded.
pub const MAX_XLATE: u64 = 1 << 31;

/// Why a translation failed; the data path turns these into completion statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XlateError {
    /// No MR has this key (never created, destroyed, or the slot was reused).
    BadKey,
    /// The MR belongs to another PD than the QP.
    WrongPd,
    /// The range is not inside the MR (or longer than [`MAX_XLATE`]).
    Bounds,
    /// The MR does not allow the access asked for.
    Access,
    /// The MR's page tables could not be read or hold a misaligned entry now.
    Dma,
}

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

impl Nic {
    /// MRs registered now, for logs and tests.
    pub fn mrs_in_use(&self) -> u32 {
        self.mrs.in_use()
    }

    /// The MR with key `key`, as the NIC holds it (the control channel's `mr`).
    pub fn mr(&self, key: u32) -> Option<Mr> {
        self.mrs.get(Handle::from_key(key)).copied()
    }

    /// `CMD_CREATE_MR`: validates everything, walks the page list, stores the MR; the
    /// result is its key.
    pub(super) fn create_mr(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::CreateMrParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if let Err(status) = self.check_mr(&p, mem) {
            return (status, 0);
        }
        if self.mrs.is_full() {
            return (hw::AQ_NO_RESOURCES, 0);
        }
        let mr = self.registration(&p);
        match self.mrs.insert(mr).and_then(Handle::to_key) {
            Some(key) => {
                debug!(
                    key = format_args!("{key:#x}"),
                    pdn = p.pdn,
                    npages = p.pages.npages,
                    page_shift = p.pages.page_shift,
                    levels = p.pages.levels,
                    "MR created"
                );
                (hw::AQ_OK, u64::from(key))
            }
            None => (hw::AQ_NO_RESOURCES, 0),
        }
    }

    /// `CMD_MODIFY_MR`: the MR the key names gets the new registration, checked as
    /// `CMD_CREATE_MR` checks one, under the same key. Its number ([`Mr::gen`]) is new, so
    /// no translation kept from the old one is used again.
    pub(super) fn modify_mr(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::ModifyMrParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let h = Handle::from_key(p.key);
        if self.mrs.get(h).is_none() {
            return (hw::AQ_BAD_PARAM, 0);
        }
        if let Err(status) = self.check_mr(&p.mr, mem) {
            return (status, 0);
        }
        let mr = self.registration(&p.mr);
        match self.mrs.get_mut(h) {
            Some(slot) => {
                *slot = mr;
                debug!(
                    key = format_args!("{:#x}", p.key),
                    pdn = p.mr.pdn,
                    npages = p.mr.pages.npages,
                    "MR re-registered"
                );
                (hw::AQ_OK, 0)
            }
            None => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// Checks a registration as `CMD_CREATE_MR` and `CMD_MODIFY_MR` take it: a PD that
    /// exists, access flags the NIC has (remote write and atomics only with local write),
    /// a range that does not wrap, a page list of a supported page size whose pages cover
    /// exactly the range, every table of it readable.
    fn check_mr(&self, p: &hw::CreateMrParams, mem: &dyn Dma) -> Result<(), u16> {
        let ps = p.pages.page_shift;
        let cap_ok = 1u64
            .checked_shl(u32::from(ps))
            .is_some_and(|bit| self.config.attrs.page_size_cap & bit != 0);
        let access_ok = p.access & !hw::ACCESS_ALL == 0
            && (p.access & (hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC) == 0
                || p.access & hw::ACCESS_LOCAL_WRITE != 0);
        // The span the MR's pages must cover: its offset in the first page plus its length.
        let span = (p.iova % (1u64 << ps.min(63))).checked_add(p.length);
        let npages_ok = span.is_some_and(|s| pages::pages_for(s, ps) == u64::from(p.pages.npages));
        if self.pds.get_index(p.pdn).is_none()
            || !access_ok
            || p.length == 0
            || p.iova.checked_add(p.length).is_none()
            || !p.pages.shape_ok()
            || !cap_ok
            || !npages_ok
        {
            return Err(hw::AQ_BAD_PARAM);
        }
        pages::validate(mem, &p.pages).map_err(|e| e.status())
    }

    /// A new registration of checked parameters `p`, numbered after every one before it.
    fn registration(&mut self, p: &hw::CreateMrParams) -> Mr {
        self.mr_gen = self.mr_gen.wrapping_add(1);
        Mr {
            pdn: p.pdn,
            access: p.access,
            iova: p.iova,
            length: p.length,
            pages: p.pages,
            gen: self.mr_gen,
        }
    }

    /// `CMD_DESTROY_MR`: frees the MR the key names; `AQ_BAD_PARAM` for a wrong key.
    pub(super) fn destroy_mr(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::KeyParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        match self.mrs.remove(Handle::from_key(p.key)) {
            Some(_) => {
                debug!(key = format_args!("{:#x}", p.key), "MR destroyed");
                (hw::AQ_OK, 0)
            }
            None => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// The registration MR key `key` names now, if any.
    pub(super) fn mr_ref(&self, key: u32) -> Option<MrRef> {
        let mr = self.mrs.get(Handle::from_key(key))?;
        Some(MrRef { key, gen: mr.gen })
    }

    /// Whether MR registration `r` still exists.
    pub(super) fn mr_live(&self, r: MrRef) -> bool {
        self.mrs
            .get(Handle::from_key(r.key))
            .is_some_and(|m| m.gen == r.gen)
    }

    /// Translates `len` bytes at virtual address `iova` of the MR `key` names, for a QP of
    /// PD `pdn` wanting `access` (`hw::ACCESS_*`; 0 = local read), into bus-address pieces
    /// `(addr, len)`, contiguous pieces merged, in order. A zero length translates to no
    /// pieces once the key, PD and access are checked.
    ///
    /// # Errors
    ///
    /// [`XlateError`]: which check failed.
    pub fn translate(
        &self,
        mem: &dyn Dma,
        key: u32,
        pdn: u32,
        iova: u64,
        len: u64,
        access: u32,
    ) -> Result<Vec<(u64, u64)>, XlateError> {
        let mr = self
            .mrs
            .get(Handle::from_key(key))
            .ok_or(XlateError::BadKey)?;
        if mr.pdn != pdn {
            return Err(XlateError::WrongPd);
        }
        if access & !mr.access != 0 {
            return Err(XlateError::Access);
        }
        let end = iova.checked_add(len).ok_or(XlateError::Bounds)?;
        let mr_end = mr.iova.checked_add(mr.length).ok_or(XlateError::Bounds)?;
        if iova < mr.iova || end > mr_end || len > MAX_XLATE {
            return Err(XlateError::Bounds);
        }
        let shift = u32::from(mr.pages.page_shift.min(63));
        let page_size = 1u64 << shift;
        // Offset from the start of the MR's first page.
        let mut off = (iova - mr.iova)
            .checked_add(mr.iova % page_size)
            .ok_or(XlateError::Bounds)?;
        let mut left = len;
        let mut out: Vec<(u64, u64)> = Vec::new();
        // One past the last page the range touches (bounded by the MR's pages).
        let end_page = off
            .checked_add(len)
            .map_or(u64::MAX, |e| e.div_ceil(page_size));
        let mut cursor = pages::Cursor::new(mem, &mr.pages, end_page);
        while left > 0 {
            let in_page = off % page_size;
            let chunk = left.min(page_size - in_page);
            let page = cursor.page_addr(off >> shift).map_err(|e| match e {
                PageError::Shape | PageError::Unreachable => XlateError::Dma,
            })?;
            let addr = page.checked_add(in_page).ok_or(XlateError::Dma)?;
            match out.last_mut() {
                Some((a, l)) if a.checked_add(*l) == Some(addr) => *l += chunk,
                _ => out.push((addr, chunk)),
            }
            off += chunk;
            left -= chunk;
        }
        Ok(out)
    }
}
