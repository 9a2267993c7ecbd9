// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of linked WQE slots in the user's memory, pinned here and
//! given to the NIC with `CREATE_SRQ` (`hardware.md`, "Shared receive queues"); the SRQ
//! belongs to its context's doorbell page, and so do the QPs attached to it. Its limit is
//! armed with `MODIFY_SRQ`; its events reach ib_core through the binding's event table.

use kernel::{prelude::*, sync::Arc};

use crate::{hw, ib, nic::Nic, pages::NicMemory, pd::Pd, uapi, ucontext::Ucontext};

/// The device limits an SRQ is checked against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SrqLimits {
    /// Work requests per SRQ (`max_srq_wr`).
    pub(crate) max_wr: u32,
    /// SGEs per work request (`max_srq_sge`).
    pub(crate) max_sge: u32,
}

/// An SRQ on the NIC; dropping it destroys it there.
pub(crate) struct Srq<'bound> {
    nic: Arc<Nic<'bound>>,
    srqn: u32,
    /// What it holds: `max_wr` WQEs of `max_sge` SGEs.
    caps: ib::SrqAttr,
    /// The doorbell page it takes its doorbells from; its QPs' page.
    db_page: u32,
    /// `None` only while being dropped.
    memory: Option<NicMemory>,
}

impl<'bound> Srq<'bound> {
    /// Checks the request (type, capabilities against `limits`, the provider's ring,
    /// `uapi.md` CREATE_SRQ), pins the ring, creates the SRQ on the NIC and answers with its
    /// number.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for a type other than basic, unknown `comp_mask` bits or reserved
    /// fields; `EINVAL` for no work request or more than `max_srq_wr`, more SGEs than
    /// `max_srq_sge`, a ring that does not hold them or of a size the NIC does not have, a
    /// misaligned ring; the pinning's errors; `ENOMEM` when the NIC has no free SRQ; `EIO`,
    /// `ETIMEDOUT` from a dead or silent NIC.
    pub(crate) fn new(
        nic: &Arc<Nic<'bound>>,
        uctx: &Ucontext<'bound>,
        pd: &Pd<'bound>,
        init: &ib::SrqInit,
        limits: &SrqLimits,
        pages: &ib::UserPages<'_>,
        udata: &ib::Udata<'_>,
    ) -> Result<Self> {
        if init.srq_type != ib::SrqType::Basic {
            return Err(EOPNOTSUPP);
        }
        let cmd: uapi::CreateSrqCmd = udata.read()?;
        ib::check_comp_mask(cmd.comp_mask.into(), 0)?;
        if cmd.reserved_06 != 0 {
            return Err(EOPNOTSUPP);
        }
        let want = &init.attr;
        if want.max_wr == 0 || want.max_wr > limits.max_wr || want.max_sge > limits.max_sge {
            return Err(EINVAL);
        }
        let slots = 1u32.checked_shl(cmd.log_depth.into()).ok_or(EINVAL)?;
        let wqe = 1u32.checked_shl(cmd.log_wqe_size.into()).ok_or(EINVAL)?;
        // One slot is always free: the ring holds `slots - 1` WQEs.
        let max_wr = slots - 1;
        if !(hw::SRQ_LOG_DEPTH_MIN..=hw::MAX_QUEUE_LOG_DEPTH).contains(&cmd.log_depth)
            || max_wr < want.max_wr
            || max_wr > limits.max_wr
            || !(hw::WQE_LOG_SIZE_MIN..=hw::WQE_LOG_SIZE_MAX).contains(&cmd.log_wqe_size)
            || wqe < hw::RQ_WQE_BASE + hw::WQE_SGE_SIZE * want.max_sge
        {
            return Err(EINVAL);
        }
        let caps = ib::SrqAttr {
            max_wr,
            max_sge: ((wqe - hw::RQ_WQE_BASE) / hw::WQE_SGE_SIZE).min(limits.max_sge),
            srq_limit: 0,
        };
        let small = |v: u32| u8::try_from(v).map_err(|_| EINVAL);
        let bytes = 1u64 << (cmd.log_depth + cmd.log_wqe_size);
        let mut memory = NicMemory::default();
        let ring = memory.add_ring(nic.pdev.as_ref(), pages, cmd.buf_addr, bytes)?;
        let params = hw::CreateSrqParams {
            db_page: u16::try_from(uctx.db_page()).map_err(|_| EINVAL)?,
            max_sge: small(caps.max_sge)?,
            wq: hw::WorkQueue {
                log_depth: cmd.log_depth,
                log_wqe_size: cmd.log_wqe_size,
                ring,
            },
            pdn: pd.pdn(),
        };
        let (srqn, memory) =
            nic.create_reaching(memory, Some(uctx.db_page()), || nic.create_srq(&params))?;
        // From here on, an error drops `srq`, which destroys it on the NIC.
        let srq = Self {
            nic: nic.clone(),
            srqn,
            caps,
            db_page: uctx.db_page(),
            memory: Some(memory),
        };
        udata.respond(&uapi::CreateSrqResp { comp_mask: 0, srqn })?;
        dev_dbg!(
            nic.pdev,
            "SRQ {srqn}: {slots} slots of {wqe} bytes, doorbell page {}\n",
            uctx.db_page()
        );
        Ok(srq)
    }

    /// The NIC's number of this SRQ.
    pub(crate) fn srqn(&self) -> u32 {
        self.srqn
    }

    /// The doorbell page it belongs to.
    pub(crate) fn db_page(&self) -> u32 {
        self.db_page
    }

    /// Arms the limit (`IB_SRQ_LIMIT`; 0 disarms).
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for a resize (`IB_SRQ_MAX_WR`) or driver input; `EINVAL` for an unknown
    /// mask bit or a limit above the SRQ's `max_wr`; `EIO`, `ETIMEDOUT` from a dead or
    /// silent NIC.
    pub(crate) fn modify(
        &self,
        attr: &ib::SrqAttr,
        mask: ib::SrqAttrMask,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        if mask.bits() & !(ib::SrqAttrMask::MAX_WR | ib::SrqAttrMask::LIMIT) != 0 {
            return Err(EINVAL);
        }
        if mask.has(ib::SrqAttrMask::MAX_WR) {
            return Err(EOPNOTSUPP);
        }
        if !mask.has(ib::SrqAttrMask::LIMIT) {
            return Ok(());
        }
        if attr.srq_limit > self.caps.max_wr {
            return Err(EINVAL);
        }
        self.nic.modify_srq_limit(self.srqn, attr.srq_limit)
    }

    /// The SRQ's attributes as the NIC holds them (the limit is 0 once its event fired).
    pub(crate) fn query(&self) -> Result<ib::SrqAttr> {
        let a = self.nic.query_srq(self.srqn)?;
        Ok(ib::SrqAttr {
            max_wr: self.caps.max_wr,
            max_sge: self.caps.max_sge,
            srq_limit: a.srq_limit,
        })
    }
}

impl ib::SrqObject for Srq<'_> {
    fn num(&self) -> u32 {
        self.srqn
    }

    fn caps(&self) -> ib::SrqAttr {
        self.caps
    }
}

impl Drop for Srq<'_> {
    fn drop(&mut self) {
        let memory = self.memory.take();
        self.nic
            .destroy_reaching("SRQ", self.srqn, memory, Some(self.db_page), || {
                self.nic.destroy_srq(self.srqn)
            });
    }
}
