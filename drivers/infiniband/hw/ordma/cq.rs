// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring and a doorbell record in the user's memory, pinned here and
//! given to the NIC with `CREATE_CQ` (`hardware.md`, "Completion queues"); the CQ belongs to
//! its context's doorbell page. A resize (`RESIZE_CQ`, interface 1.7) moves it to a new ring
//! the provider allocated; the record stays. Its events reach ib_core through the binding's
//! event table (`event.rs`).

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use crate::{hw, ib, nic::Nic, pages::NicMemory, uapi, ucontext::Ucontext};

/// A CQ on the NIC; dropping it destroys it there.
#[pin_data(PinnedDrop)]
pub(crate) struct Cq<'bound> {
    nic: Arc<Nic<'bound>>,
    cqn: u32,
    /// The doorbell page it takes its arm doorbells from.
    db_page: u32,
    /// The size of its CQEs, which a resize keeps.
    log_cqe_size: u8,
    /// Its doorbell record; `None` only while being dropped.
    record: Option<NicMemory>,
    /// Its ring; the lock serialises resizes.
    #[pin]
    ring: Mutex<Ring>,
}

/// A CQ's ring as the NIC has it.
struct Ring {
    /// Entries it holds.
    depth: u32,
    /// `None` only while being dropped.
    memory: Option<NicMemory>,
}

/// Checks a ring's shape from the provider (`log_depth`, its CQE size) against the entries
/// asked for and the device's `max_cqe`: its depth.
fn ring_depth(log_depth: u8, log_cqe_size: u8, cqe: u32, max_cqe: u32) -> Result<u32> {
    let depth = 1u32.checked_shl(log_depth.into()).ok_or(EINVAL)?;
    if cqe > max_cqe
        || !(1..=hw::MAX_QUEUE_LOG_DEPTH).contains(&log_depth)
        || depth < cqe
        || depth > max_cqe
        || !(hw::CQE_LOG_SIZE_MIN..=hw::CQE_LOG_SIZE_MAX).contains(&log_cqe_size)
    {
        return Err(EINVAL);
    }
    Ok(depth)
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
    ) -> Result<impl PinInit<Self, Error> + 'bound> {
        let cmd: uapi::CreateCqCmd = udata.read()?;
        ib::check_comp_mask(cmd.comp_mask.into(), 0)?;
        if cmd.reserved_06 != 0 || init.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let depth = ring_depth(cmd.log_depth, cmd.log_cqe_size, init.cqe, max_cqe)?;
        let bytes = 1u64 << (cmd.log_depth + cmd.log_cqe_size);
        let (mut ring_mem, mut record) = (NicMemory::default(), NicMemory::default());
        let ring = ring_mem.add_ring(nic.pdev.as_ref(), pages, cmd.buf_addr, bytes)?;
        let db_record = record.add_record(pages, cmd.db_addr, hw::CQ_DB_RECORD_SIZE)?;
        let params = hw::CreateCqParams {
            db_page: uctx.db_page(),
            log_depth: cmd.log_depth,
            log_cqe_size: cmd.log_cqe_size,
            ring,
            db_record,
        };
        let (cqn, [ring_mem, record]) =
            nic.create_reaching([ring_mem, record], Some(uctx.db_page()), || {
                nic.create_cq(&params)
            })?;
        if let Err(e) = udata.respond(&uapi::CreateCqResp { comp_mask: 0, cqn }) {
            // Not made after all: the NIC's CQ goes, and its memory once it has.
            nic.destroy_reaching("CQ", cqn, [ring_mem, record], Some(uctx.db_page()), || {
                nic.destroy_cq(cqn)
            });
            return Err(e);
        }
        dev_dbg!(
            nic.pdev,
            "CQ {cqn}: {depth} CQEs of {} bytes, doorbell page {}\n",
            1u32 << cmd.log_cqe_size,
            uctx.db_page()
        );
        // Nothing below fails: the CQ is never dropped half made.
        let (nic, db_page, log_cqe_size) = (nic.clone(), uctx.db_page(), cmd.log_cqe_size);
        let ring = Ring {
            depth,
            memory: Some(ring_mem),
        };
        Ok(try_pin_init!(Self {
            nic,
            cqn,
            db_page,
            log_cqe_size,
            record: Some(record),
            ring <- new_mutex!(ring, "ordma_cq_ring"),
        }? Error))
    }

    /// The NIC's number of this CQ.
    pub(crate) fn cqn(&self) -> u32 {
        self.cqn
    }

    /// Moves the CQ to the provider's new ring of at least `cqe` entries (`uapi.md`,
    /// RESIZE_CQ): checked, pinned and given to the NIC, which answers the CQEs it had
    /// written at the move; the provider copies those it has not polled. Once the NIC has
    /// answered it never writes the old ring, which is released. On an error the CQ is as
    /// it was; when the NIC may have taken the new ring without answering, both stay pinned
    /// until the NIC is stopped.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` before interface 1.7, for unknown `comp_mask` bits or reserved fields;
    /// `EINVAL` for a ring as [`Cq::new`] refuses one, no room for the whole response, or
    /// when the CQEs not yet polled do not fit it (the NIC's refusal); the pinning's
    /// errors; `EIO`, `ETIMEDOUT` from a dead or silent NIC.
    pub(crate) fn resize(
        &self,
        cqe: u32,
        max_cqe: u32,
        resize: bool,
        user: ib::UserModify<'_>,
        size: &ib::CqSize<'_>,
    ) -> Result {
        if !resize {
            return Err(EOPNOTSUPP);
        }
        let cmd: uapi::ResizeCqCmd = user.udata.read()?;
        // The answer must reach the provider whole: past the move it cannot be taken back.
        if user.udata.out_len() < core::mem::size_of::<uapi::ResizeCqResp>() {
            return Err(EINVAL);
        }
        ib::check_comp_mask(cmd.comp_mask.into(), 0)?;
        if cmd.reserved_05 != 0 || cmd.reserved_06 != 0 {
            return Err(EOPNOTSUPP);
        }
        let depth = ring_depth(cmd.log_depth, self.log_cqe_size, cqe, max_cqe)?;
        let bytes = 1u64 << (cmd.log_depth + self.log_cqe_size);
        let nic = &self.nic;
        let mut ring = self.ring.lock();
        let mut memory = NicMemory::default();
        let list = memory.add_ring(nic.pdev.as_ref(), user.pages, cmd.buf_addr, bytes)?;
        let params = hw::ResizeCqParams {
            cqn: self.cqn,
            log_depth: cmd.log_depth,
            ring: list,
        };
        // On an error the old ring is the NIC's still (a refused command changes nothing)
        // or may be: it stays; `create_reaching` retires the new one when the NIC may have
        // taken it without answering.
        let (pi, memory) = nic.create_reaching(memory, None, || nic.resize_cq(&params))?;
        drop(ring.memory.replace(memory));
        ring.depth = depth;
        size.set(depth)?;
        dev_dbg!(
            nic.pdev,
            "CQ {}: resized to {depth} CQEs at CQE {pi}\n",
            self.cqn
        );
        user.udata.respond(&uapi::ResizeCqResp { comp_mask: 0, pi })
    }
}

impl ib::CqObject for Cq<'_> {
    fn num(&self) -> u32 {
        self.cqn
    }

    fn cqe(&self) -> u32 {
        self.ring.lock().depth
    }
}

#[pinned_drop]
impl PinnedDrop for Cq<'_> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        let (nic, cqn, db_page) = (&*this.nic, *this.cqn, *this.db_page);
        let memory = [this.ring.lock().memory.take(), this.record.take()];
        let memory = memory.into_iter().flatten();
        nic.destroy_reaching("CQ", cqn, memory, Some(db_page), || nic.destroy_cq(cqn));
    }
}
