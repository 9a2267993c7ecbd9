// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of linked WQE slots in the user's memory, pinned here and
//! given to the NIC with `CREATE_SRQ` (`hardware.md`, "Shared receive queues"); the SRQ
//! belongs to its context's doorbell page, and so do the QPs attached to it. Its limit is
//! armed with `MODIFY_SRQ`, and a resize (interface 1.7) moves it to a larger ring the
//! provider filled; its events reach ib_core through the binding's event table.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use crate::{hw, ib, nic::Nic, pages::NicMemory, pd::Pd, uapi, ucontext::Ucontext};

/// The device limits an SRQ is checked against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SrqLimits {
    /// Work requests per SRQ (`max_srq_wr`).
    pub(crate) max_wr: u32,
    /// SGEs per work request (`max_srq_sge`).
    pub(crate) max_sge: u32,
    /// Whether the NIC resizes an SRQ (`MODIFY_SRQ` with `SRQ_ATTR_MAX_WR`, 1.7).
    pub(crate) resize: bool,
}

/// An SRQ on the NIC; dropping it destroys it there.
#[pin_data(PinnedDrop)]
pub(crate) struct Srq<'bound> {
    nic: Arc<Nic<'bound>>,
    srqn: u32,
    /// The doorbell page it takes its doorbells from; its QPs' page.
    db_page: u32,
    /// The size of its WQEs, which a resize keeps.
    log_wqe_size: u8,
    /// Its ring and what it holds; the lock serialises modifies.
    #[pin]
    ring: Mutex<Ring>,
}

/// An SRQ's ring as the NIC has it.
struct Ring {
    /// What it holds: `max_wr` WQEs of `max_sge` SGEs (`srq_limit` unused).
    caps: ib::SrqAttr,
    /// `2^log_depth` slots.
    log_depth: u8,
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
    ) -> Result<impl PinInit<Self, Error> + 'bound> {
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
        let ring = Ring {
            caps,
            log_depth: cmd.log_depth,
            memory: Some(memory),
        };
        if let Err(e) = udata.respond(&uapi::CreateSrqResp { comp_mask: 0, srqn }) {
            // Not made after all: the NIC's SRQ goes, and its ring once it has.
            nic.destroy_reaching("SRQ", srqn, ring.memory, Some(uctx.db_page()), || {
                nic.destroy_srq(srqn)
            });
            return Err(e);
        }
        dev_dbg!(
            nic.pdev,
            "SRQ {srqn}: {slots} slots of {wqe} bytes, doorbell page {}\n",
            uctx.db_page()
        );
        // Nothing below fails: the SRQ is never dropped half made.
        let (nic, db_page, log_wqe_size) = (nic.clone(), uctx.db_page(), cmd.log_wqe_size);
        Ok(try_pin_init!(Self {
            nic,
            srqn,
            db_page,
            log_wqe_size,
            ring <- new_mutex!(ring, "ordma_srq_ring"),
        }? Error))
    }

    /// The NIC's number of this SRQ.
    pub(crate) fn srqn(&self) -> u32 {
        self.srqn
    }

    /// The doorbell page it belongs to.
    pub(crate) fn db_page(&self) -> u32 {
        self.db_page
    }

    /// Resizes (`IB_SRQ_MAX_WR`) and arms the limit (`IB_SRQ_LIMIT`; 0 disarms), in one
    /// `MODIFY_SRQ`.
    ///
    /// A `max_wr` the SRQ holds already needs nothing (an SRQ is never made smaller); a
    /// larger one needs the provider's new ring (`uapi.md`, MODIFY_SRQ), which is checked,
    /// pinned and given to the NIC; once the NIC answers it never reads the old ring,
    /// which is released. On an error the SRQ is as it was; when the NIC may have taken
    /// the new ring without answering, both stay pinned until the NIC is stopped.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for a resize the NIC cannot do (before 1.7) or asked by a kernel
    /// caller, non-zero driver data without a resize, unknown `comp_mask` bits or reserved
    /// fields;
    /// `EINVAL` for an unknown mask bit, a limit above `max_wr` (the new one after a
    /// resize), a `max_wr` above the device's without a ring that holds it, a ring no
    /// larger than the SRQ's, deeper than the NIC's queues or misaligned; the pinning's
    /// errors; `EIO`, `ETIMEDOUT` from a dead or silent NIC.
    pub(crate) fn modify(
        &self,
        attr: &ib::SrqAttr,
        mask: ib::SrqAttrMask,
        user: Option<ib::UserModify<'_>>,
        limits: &SrqLimits,
    ) -> Result {
        if mask.bits() & !(ib::SrqAttrMask::MAX_WR | ib::SrqAttrMask::LIMIT) != 0 {
            return Err(EINVAL);
        }
        let mut ring = self.ring.lock();
        // The new ring, if the provider sent one: only with a resize; without, any input
        // must be zero (`ib_is_udata_in_empty`).
        let new = match &user {
            Some(u) if mask.has(ib::SrqAttrMask::MAX_WR) && u.udata.has_input() => {
                Some(u.udata.read::<uapi::ModifySrqCmd>()?)
            }
            Some(u) => {
                u.udata.expect_empty()?;
                None
            }
            None => None,
        };
        if let Some(cmd) = &new {
            ib::check_comp_mask(cmd.comp_mask.into(), 0)?;
            if cmd.reserved_05 != 0 || cmd.reserved_06 != 0 {
                return Err(EOPNOTSUPP);
            }
        }
        let grow = mask.has(ib::SrqAttrMask::MAX_WR) && attr.max_wr > ring.caps.max_wr;
        let mut params = hw::ModifySrqParams {
            srqn: self.srqn,
            ..Default::default()
        };
        let mut caps = ring.caps;
        let mut log_depth = ring.log_depth;
        let mut memory = None;
        if grow {
            if !limits.resize {
                return Err(EOPNOTSUPP);
            }
            let (Some(u), Some(cmd)) = (&user, &new) else {
                // A kernel caller, or a provider that sent no ring.
                return Err(if user.is_some() { EINVAL } else { EOPNOTSUPP });
            };
            let slots = 1u32.checked_shl(cmd.log_depth.into()).ok_or(EINVAL)?;
            if attr.max_wr > limits.max_wr
                || cmd.log_depth <= ring.log_depth
                || cmd.log_depth > hw::MAX_QUEUE_LOG_DEPTH
                || slots - 1 < attr.max_wr
                || slots - 1 > limits.max_wr
            {
                return Err(EINVAL);
            }
            let bytes = 1u64 << (u32::from(cmd.log_depth) + u32::from(self.log_wqe_size));
            let mut m = NicMemory::default();
            params.ring = m.add_ring(self.nic.pdev.as_ref(), u.pages, cmd.buf_addr, bytes)?;
            params.attr_mask |= hw::SRQ_ATTR_MAX_WR;
            params.log_depth = cmd.log_depth;
            caps.max_wr = slots - 1;
            log_depth = cmd.log_depth;
            memory = Some(m);
        } else if new.is_some() {
            // A ring for an SRQ that holds what was asked already.
            return Err(EINVAL);
        }
        if mask.has(ib::SrqAttrMask::LIMIT) {
            if attr.srq_limit > caps.max_wr {
                return Err(EINVAL);
            }
            params.attr_mask |= hw::SRQ_ATTR_LIMIT;
            params.srq_limit = attr.srq_limit;
        }
        if params.attr_mask == 0 {
            return Ok(());
        }
        let nic = &self.nic;
        match memory {
            // On an error the old ring is the NIC's still (a refused command changes
            // nothing) or may be: it stays; `create_reaching` retires the new one when the
            // NIC may have taken it without answering.
            Some(m) => {
                let (_, m) =
                    nic.create_reaching(m, None, || nic.modify_srq(&params).map(|()| 0))?;
                drop(ring.memory.replace(m));
                ring.caps = caps;
                ring.log_depth = log_depth;
                dev_dbg!(
                    nic.pdev,
                    "SRQ {}: resized to {} slots\n",
                    self.srqn,
                    1u32 << log_depth
                );
            }
            None => nic.modify_srq(&params)?,
        }
        Ok(())
    }

    /// The SRQ's attributes as the NIC holds them (the limit is 0 once its event fired).
    pub(crate) fn query(&self) -> Result<ib::SrqAttr> {
        let caps = self.ring.lock().caps;
        let a = self.nic.query_srq(self.srqn)?;
        Ok(ib::SrqAttr {
            max_wr: caps.max_wr,
            max_sge: caps.max_sge,
            srq_limit: a.srq_limit,
        })
    }
}

impl ib::SrqObject for Srq<'_> {
    fn num(&self) -> u32 {
        self.srqn
    }

    fn caps(&self) -> ib::SrqAttr {
        self.ring.lock().caps
    }
}

#[pinned_drop]
impl PinnedDrop for Srq<'_> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        let (nic, srqn, db_page) = (&*this.nic, *this.srqn, *this.db_page);
        let memory = this.ring.lock().memory.take();
        nic.destroy_reaching("SRQ", srqn, memory, Some(db_page), || nic.destroy_srq(srqn));
    }
}
