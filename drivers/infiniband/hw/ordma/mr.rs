// SPDX-License-Identifier: GPL-2.0

//! Memory regions over user memory or a dma-buf: pinned by ib_core (`ib::Umem`), described to the NIC by
//! a page list (`hardware.md`, "Page lists") at the largest page size the NIC supports that
//! the mapping allows, registered with `CREATE_MR`, re-registered in place (same key) with
//! `MODIFY_MR`, freed with `DESTROY_MR`.

use kernel::{prelude::*, sync::Arc};

use crate::{
    hw, ib,
    nic::Nic,
    pages::{NicMemory, PageList},
    pd::Pd,
};

/// An MR on the NIC; dropping it destroys it there.
pub(crate) struct Mr<'bound> {
    nic: Arc<Nic<'bound>>,
    key: u32,
    /// `None` only while being dropped.
    memory: Option<NicMemory>,
}

/// What the NIC registers MRs with.
pub(crate) struct MrLimits {
    /// The page sizes its page lists take.
    pub(crate) page_size_cap: u64,
    /// Whether MRs may allow binding memory windows (`MW_BIND`, interface 1.9).
    pub(crate) mw_bind: bool,
}

/// The NIC's access flags for `access`, checked as ib_core's `ib_check_mr_access` and
/// real drivers (efa) do; `IB_ACCESS_MW_BIND` only with `mw_bind` (a NIC with windows).
///
/// # Errors
///
/// `EINVAL` for remote write or remote atomic without local write; `EOPNOTSUPP` for a flag
/// the NIC does not have (optional flags, such as relaxed ordering, are ignored).
fn hw_access(access: ib::Access, mw_bind: bool) -> Result<u32> {
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
        // (ib_core allows it only when the device claims FLUSH: interface 1.8.)
        (A::FLUSH_GLOBAL, hw::ACCESS_FLUSH_GLOBAL),
    ];
    let mut rest = access;
    let mut bits = 0;
    for (flag, hw_flag) in map {
        if access.contains(flag) {
            bits |= hw_flag;
            rest = rest.without(flag);
        }
    }
    // Windows may be bound to it: a NIC of interface 1.9 (before, the flag is one the NIC
    // does not have).
    if mw_bind && access.contains(A::MW_BIND) {
        bits |= hw::ACCESS_MW_BIND;
        rest = rest.without(A::MW_BIND);
    }
    if rest.bits() != 0 {
        return Err(EOPNOTSUPP);
    }
    Ok(bits)
}

/// What `CREATE_MR` or `MODIFY_MR` registers `mem` with on `pd`, and the memory it pins
/// (the pages and their page list) for the NIC.
///
/// # Errors
///
/// See [`Mr::new`].
fn describe(
    nic: &Nic<'_>,
    pd: &Pd<'_>,
    mem: &ib::UserMemory<'_>,
    limits: &MrLimits,
) -> Result<(hw::CreateMrParams, NicMemory)> {
    let access = hw_access(mem.access(), limits.mw_bind)?;
    if mem.length() == 0 {
        return Err(EINVAL);
    }
    let mut umem = mem.pin()?;
    let pgsz = umem
        .best_page_size(limits.page_size_cap, mem.virt())
        .ok_or(EINVAL)?;
    // CAST: the shift of a `u64` power of two fits `u8`.
    let page_shift = pgsz.shift() as u8;
    let npages = umem.num_dma_blocks(pgsz);
    let tables = PageList::new(nic.pdev.as_ref(), umem.dma_blocks(pgsz), npages, page_shift)?;
    let mut memory = NicMemory::default();
    memory.add_umem(umem)?;
    let params = hw::CreateMrParams {
        pdn: pd.pdn(),
        access,
        iova: mem.virt(),
        length: mem.length(),
        pages: memory.add_list(tables)?,
    };
    dev_dbg!(
        nic.pdev,
        "MR: {} bytes at {} {:#x}, {npages} pages of {} bytes\n",
        mem.length(),
        if mem.is_dmabuf() {
            "dma-buf offset"
        } else {
            "address"
        },
        mem.start(),
        pgsz.bytes()
    );
    Ok((params, memory))
}

impl<'bound> Mr<'bound> {
    /// Pins `mem`, builds its page list at the best page size and registers it on the NIC.
    ///
    /// # Errors
    ///
    /// `EINVAL`/`EOPNOTSUPP` for access flags (see [`hw_access`]), `EOPNOTSUPP` for
    /// driver input; `ib_umem_get`'s errors (`ENOMEM` over `RLIMIT_MEMLOCK`, `EFAULT`);
    /// `EINVAL` when no page size of the NIC fits the mapping or it has too many pages;
    /// `ENOMEM` when the NIC has no free MR; `EIO` when the NIC is dead, or dies while
    /// the command waits; `ETIMEDOUT` when it does not answer (then it is treated as dead).
    /// When the NIC may have made the MR without answering, the memory stays pinned until
    /// the NIC is stopped, as for an unacknowledged destroy.
    pub(crate) fn new(
        nic: &Arc<Nic<'bound>>,
        pd: &Pd<'bound>,
        mem: &ib::UserMemory<'_>,
        limits: &MrLimits,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result<Self> {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        let (params, memory) = describe(nic, pd, mem, limits)?;
        let (key, memory) = nic.create_reaching(memory, None, || nic.create_mr(&params))?;
        dev_dbg!(nic.pdev, "MR {key:#x} created\n");
        Ok(Self {
            nic: nic.clone(),
            key,
            memory: Some(memory),
        })
    }

    /// Re-registers the MR in place: `mem` on `pd` (what `ibv_rereg_mr` changes, and the
    /// rest as it was), pinned and described as [`Mr::new`] does, then `MODIFY_MR` under
    /// the same key. Once the NIC answers, nothing it does uses the old registration
    /// (`hardware.md`), and the old memory is released. On an error the MR is as it was;
    /// when the NIC may have taken the new registration without answering, both memories
    /// stay pinned until the NIC is stopped.
    ///
    /// # Errors
    ///
    /// As [`Mr::new`]; `EINVAL` when the NIC refuses the registration.
    pub(crate) fn rereg(
        &mut self,
        pd: &Pd<'bound>,
        mem: &ib::UserMemory<'_>,
        limits: &MrLimits,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        let nic = self.nic.clone();
        let (mr, memory) = describe(&nic, pd, mem, limits)?;
        let params = hw::ModifyMrParams { key: self.key, mr };
        // On an error the old registration is the NIC's still (a refused command changes
        // nothing) or may be: it stays pinned; `create_reaching` retires the new memory when
        // the NIC may have taken it without answering.
        let (_, memory) =
            nic.create_reaching(memory, None, || nic.modify_mr(&params).map(|()| 0))?;
        drop(self.memory.replace(memory));
        dev_dbg!(nic.pdev, "MR {:#x} re-registered\n", self.key);
        Ok(())
    }
}

impl ib::MrObject for Mr<'_> {
    /// The NIC's key is both.
    fn keys(&self) -> ib::MrKeys {
        ib::MrKeys {
            lkey: self.key,
            rkey: self.key,
        }
    }
}

impl Drop for Mr<'_> {
    fn drop(&mut self) {
        let memory = self.memory.take();
        self.nic.destroy_reaching("MR", self.key, memory, None, || {
            self.nic.destroy_mr(self.key)
        });
    }
}
