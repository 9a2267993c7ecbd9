// SPDX-License-Identifier: GPL-2.0

//! User contexts: each gets a doorbell page of its own, which its process maps.

use kernel::{prelude::*, sync::Arc};

use crate::{ib, nic::Nic, uapi, verbs::OrdmaIb};

/// A user doorbell page, held by the mmap entry that maps it: back to the pool when the
/// context and every mapping of it are gone.
pub(crate) struct DoorbellPage<'bound> {
    nic: Arc<Nic<'bound>>,
    index: u32,
}

impl Drop for DoorbellPage<'_> {
    fn drop(&mut self) {
        self.nic.doorbells.free(self.index);
    }
}

/// A user context.
pub(crate) struct Ucontext<'bound> {
    /// The doorbell page's mmap entry; removed (unmappable) when the context goes.
    _db: ib::MmapHandle<OrdmaIb<'bound>>,
    /// Its index: the context's CQs and QPs belong to it.
    db_page: u32,
}

impl<'bound> Ucontext<'bound> {
    /// Checks the provider's request (`uapi.md`), takes a doorbell page, makes it mappable
    /// and answers with its key.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a request shorter than ABI version 1's, `EOPNOTSUPP` for unknown
    /// `comp_mask` bits, non-zero reserved fields or trailing bytes; `ENOMEM` when every
    /// doorbell page is in use; `EFAULT`.
    pub(crate) fn new(
        nic: &Arc<Nic<'bound>>,
        uctx: &ib::UserContext<'_, OrdmaIb<'bound>>,
        udata: &ib::Udata<'_>,
    ) -> Result<Self> {
        let cmd: uapi::AllocUcontextCmd = udata.read()?;
        ib::check_comp_mask(cmd.comp_mask.into(), 0)?;
        if cmd.reserved_04 != 0 {
            return Err(EOPNOTSUPP);
        }
        let (index, pfn) = nic.doorbells.alloc().inspect_err(|_| {
            dev_dbg!(nic.pdev, "all doorbell pages are in use\n");
        })?;
        let page = DoorbellPage {
            nic: nic.clone(),
            index,
        };
        let db = uctx.insert_mmap(page, ib::Mapping::IoUncached { pfn, pages: 1 })?;
        udata.respond(&uapi::AllocUcontextResp {
            comp_mask: 0,
            db_page_index: index,
            db_mmap_key: db.key(),
            db_page_size: uapi::DB_PAGE_SIZE,
            reserved_14: 0,
        })?;
        Ok(Self {
            _db: db,
            db_page: index,
        })
    }

    /// The context's doorbell page: every CQ and QP it creates belongs to it.
    pub(crate) fn db_page(&self) -> u32 {
        self.db_page
    }
}
