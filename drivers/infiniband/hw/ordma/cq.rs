// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring and a doorbell record in the user's memory, pinned here and
//! given to the NIC with `CREATE_CQ` (`hardware.md`, "Completion queues"); the CQ belongs to
//! its context's doorbell page. Its events reach ib_core through the binding's event table
//! (`event.rs`).

use kernel::{prelude::*, sync::Arc};

use crate::{hw, ib, nic::Nic, pages::NicMemory, uapi, ucontext::Ucontext};

/// A CQ on the NIC; dropping it destroys it there.
pub(crate) struct Cq<'bound> {
    nic: Arc<Nic<'bound>>,
    cqn: u32,
    /// Entries the ring holds.
    depth: u32,
    /// The doorbell page it takes its arm doorbells from.
    db_page: u32,
    /// `None` only while being dropped.
    memory: Option<NicMemory>,
}

impl<'bound> Cq<'bound> {
    /// Checks the provider's request (`uapi.md`, CREATE_CQ), pins the ring and the record,
    /// creates the CQ on the NIC and answers with its number.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for unknown `comp_mask` bits, reserved fields or CQ flags; `EINVAL` for
    /// more entries than `max_cqe`, a ring too small for them or of a size the NIC does not
    /// have, a misaligned ring or record; the pinning's errors (`ENOMEM` over
    /// `RLIMIT_MEMLOCK`, `EFAULT`); `ENOMEM` when the NIC has no free CQ; `EIO`,
    /// `ETIMEDOUT` from a dead or silent NIC.
    pub(crate) fn new(
        nic: &Arc<Nic<'bound>>,
        uctx: &Ucontext<'bound>,
        init: &ib::CqInit,
        max_cqe: u32,
        pages: &ib::UserPages<'_>,
        udata: &ib::Udata<'_>,
    ) -> Result<Self> {
        let cmd: uapi::CreateCqCmd = udata.read()?;
        ib::check_comp_mask(cmd.comp_mask.into(), 0)?;
        if cmd.reserved_06 != 0 || init.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let depth = 1u32.checked_shl(cmd.log_depth.into()).ok_or(EINVAL)?;
        if init.cqe > max_cqe
            || !(1..=hw::MAX_QUEUE_LOG_DEPTH).contains(&cmd.log_depth)
            || depth < init.cqe
            || depth > max_cqe
            || !(hw::CQE_LOG_SIZE_MIN..=hw::CQE_LOG_SIZE_MAX).contains(&cmd.log_cqe_size)
        {
            return Err(EINVAL);
        }
        let bytes = 1u64 << (cmd.log_depth + cmd.log_cqe_size);
        let mut memory = NicMemory::default();
        let ring = memory.add_ring(nic.pdev.as_ref(), pages, cmd.buf_addr, bytes)?;
        let db_record = memory.add_record(pages, cmd.db_addr, hw::CQ_DB_RECORD_SIZE)?;
        let params = hw::CreateCqParams {
            db_page: uctx.db_page(),
            log_depth: cmd.log_depth,
            log_cqe_size: cmd.log_cqe_size,
            ring,
            db_record,
        };
        let (cqn, memory) =
            nic.create_reaching(memory, Some(uctx.db_page()), || nic.create_cq(&params))?;
        // From here on, an error drops `cq`, which destroys it on the NIC.
        let cq = Self {
            nic: nic.clone(),
            cqn,
            depth,
            db_page: uctx.db_page(),
            memory: Some(memory),
        };
        udata.respond(&uapi::CreateCqResp { comp_mask: 0, cqn })?;
        dev_dbg!(
            nic.pdev,
            "CQ {cqn}: {depth} CQEs of {} bytes, doorbell page {}\n",
            1u32 << cmd.log_cqe_size,
            uctx.db_page()
        );
        Ok(cq)
    }

    /// The NIC's number of this CQ.
    pub(crate) fn cqn(&self) -> u32 {
        self.cqn
    }
}

impl ib::CqObject for Cq<'_> {
    fn num(&self) -> u32 {
        self.cqn
    }

    fn cqe(&self) -> u32 {
        self.depth
    }
}

impl Drop for Cq<'_> {
    fn drop(&mut self) {
        let memory = self.memory.take();
        self.nic
            .destroy_reaching("CQ", self.cqn, memory, Some(self.db_page), || {
                self.nic.destroy_cq(self.cqn)
            });
    }
}
