//! Shared receive queues: CREATE_SRQ with the ring the provider sizes, allocates and links
//! (ordma's driver data), MODIFY_SRQ (a resize with a larger ring, likewise), QUERY_SRQ and
//! DESTROY_SRQ through the kernel;
//! `post_srq_recv` in user space, and the slots given back as their completions are polled.
//!
//! The ring's slots are linked (`hardware.md`, "Shared receive queues"): each WQE's `next`
//! names the slot after it. The provider keeps the free slots in those links, from `head`
//! (where the next WQE is written) to `tail` (the last free slot, whose `next` is not yet
//! meaningful); the NIC takes the posted ones in the same links. A completion gives its
//! slot back at the end (`tail.next = slot`), in whatever order the completions come, so a
//! WQE one QP holds for long never blocks the others. One slot always stays free: a ring
//! of `2^log_depth` slots holds `2^log_depth - 1` WQEs.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, null_mut, NonNull};
use std::sync::Mutex;

use ordma_hw::{
    db_value, SrqWqe, DB_SRQ, MAX_QUEUE_LOG_DEPTH, RQ_WQE_BASE, SRQ_LOG_DEPTH_MIN, WQE_SGE_SIZE,
};

use crate::barrier::udma_to_device_barrier;
use crate::context::{Context, DbPage, Doorbell};
use crate::dma::{log2_ceil, DmaMem};
use crate::qp::{queue_shape, QueueShape};
use crate::wq::{lock, post_result, put_sge, sge_list};
use crate::{abi, set_errno, sys};

/// An SRQ: libibverbs' part first, then the NIC's number, the ring under its lock, and the
/// SGEs posting allows (what `ibv_create_srq` reported).
#[repr(C)]
pub(crate) struct Srq {
    pub(crate) ibv: sys::ibv_srq,
    /// The NIC's SRQ number, for its doorbells.
    pub(crate) srqn: u32,
    pub(crate) max_sge: u32,
    pub(crate) ring: Mutex<SrqRing>,
}

/// A QP's SRQ, as the QP holds it.
///
/// # Invariants
///
/// Points to a live [`Srq`] of the QP's context: the kernel refuses to destroy an SRQ while
/// a QP uses it (`EBUSY`), so it outlives the QP.
#[derive(Clone, Copy)]
pub(crate) struct SrqRef(NonNull<Srq>);

// SAFETY: the SRQ's mutable state is behind its lock; the rest is set at create and only
// read after, so it may be used from any thread (as libibverbs' callers do).
unsafe impl Send for SrqRef {}
// SAFETY: as above.
unsafe impl Sync for SrqRef {}

impl SrqRef {
    /// The SRQ a QP is created on, if `srq` (from `ibv_qp_init_attr`) is not null.
    ///
    /// # Safety
    ///
    /// `srq` is null or an SRQ `create_srq` returned, which outlives the QP.
    pub(crate) unsafe fn new(srq: *mut sys::ibv_srq) -> Option<Self> {
        // INVARIANT: the caller's promise.
        NonNull::new(srq.cast::<Srq>()).map(Self)
    }

    /// The SRQ.
    pub(crate) fn get(&self) -> &Srq {
        // SAFETY: live for as long as the QP that holds this (invariant).
        unsafe { self.0.as_ref() }
    }
}

/// An SRQ's ring and its links, as the provider keeps them.
pub(crate) struct SrqRing {
    pub(crate) shape: QueueShape,
    pub(crate) mem: DmaMem,
    /// The free slot the next WQE goes into.
    head: u16,
    /// The last free slot: a slot given back is linked after it.
    tail: u16,
    /// WQEs posted, free-running (the doorbell's index, mod 2^16).
    posted: u32,
    /// Each posted slot's `wr_id`, and whether it is posted (its completion not yet polled).
    wr_id: Box<[u64]>,
    busy: Box<[bool]>,
}

/// The request and response of CREATE_SRQ with ordma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateSrqCmd {
    pub(crate) ibv: abi::IbvCreateSrq,
    pub(crate) drv: sys::ordma_ibv_create_srq_cmd,
}
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateSrqResp {
    pub(crate) ibv: sys::ib_uverbs_create_srq_resp,
    pub(crate) drv: sys::ordma_ibv_create_srq_resp,
}

/// The ring for `max_wr` WQEs of `max_sge` SGEs: `2^log_depth > max_wr` slots (at least
/// 2) of a power of two of bytes (64 to 1024). `EINVAL` for no WQE or beyond.
pub(crate) fn srq_shape(max_wr: u32, max_sge: u32) -> Result<QueueShape, c_int> {
    let slots = max_wr
        .checked_add(1)
        .filter(|_| max_wr > 0)
        .ok_or(libc::EINVAL)?;
    let log_depth = log2_ceil(slots).ok_or(libc::EINVAL)?.max(SRQ_LOG_DEPTH_MIN);
    if log_depth > MAX_QUEUE_LOG_DEPTH {
        return Err(libc::EINVAL);
    }
    let bytes = u64::from(RQ_WQE_BASE) + u64::from(WQE_SGE_SIZE) * u64::from(max_sge);
    let wqe = queue_shape(1, bytes)?;
    Ok(QueueShape {
        log_depth,
        log_wqe_size: wqe.log_wqe_size,
    })
}

impl SrqRing {
    /// An empty ring of `shape`, its slots linked 0 → 1 → … → depth − 1.
    pub(crate) fn new(shape: QueueShape) -> Result<Self, c_int> {
        let mem = DmaMem::ring(shape.log_depth, shape.log_wqe_size)?;
        let depth = 1usize << shape.log_depth;
        let mut ring = Self {
            shape,
            mem,
            head: 0,
            // CAST: the depth is at most 2^15.
            tail: (depth - 1) as u16,
            posted: 0,
            wr_id: vec![0; depth].into_boxed_slice(),
            busy: vec![false; depth].into_boxed_slice(),
        };
        for slot in 0..depth {
            // CAST: below the depth.
            ring.set_next(slot as u16, ((slot + 1) % depth) as u16);
        }
        Ok(ring)
    }

    /// Slots.
    pub(crate) fn depth(&self) -> u16 {
        1 << self.shape.log_depth
    }

    /// The bytes of `slot` (below the depth).
    fn wqe(&mut self, slot: u16) -> &mut [u8] {
        let size = 1usize << self.shape.log_wqe_size;
        let slot = usize::from(slot % self.depth());
        // SAFETY: the ring holds `depth` WQEs of `size` bytes (`DmaMem::ring`); `&mut self`
        // (the SRQ's lock) keeps every other writer out, and the NIC only reads slots
        // that are posted, which the callers do not write.
        unsafe { core::slice::from_raw_parts_mut(self.mem.as_ptr().add(slot * size), size) }
    }

    /// The whole ring's bytes.
    #[cfg(test)]
    pub(crate) fn mem_bytes(&self) -> &[u8] {
        let len = usize::from(self.depth()) << self.shape.log_wqe_size;
        // SAFETY: the ring holds `depth` WQEs of `2^log_wqe_size` bytes (`DmaMem::ring`);
        // the tests' NIC does not write it.
        unsafe { core::slice::from_raw_parts(self.mem.as_ptr(), len) }
    }

    /// `slot`'s link.
    fn next(&mut self, slot: u16) -> u16 {
        let mask = self.depth() - 1;
        SrqWqe::next_of(self.wqe(slot)).unwrap_or(0) & mask
    }

    fn set_next(&mut self, slot: u16, next: u16) {
        let w = self.wqe(slot);
        if let Some(b) = w.get_mut(SrqWqe::NEXT_OFFSET..SrqWqe::NEXT_OFFSET + 2) {
            b.copy_from_slice(&next.to_le_bytes());
        }
    }

    /// The same SRQ in a ring of `2^log_depth` slots (more than it has), for a resize
    /// (`uapi.md`, MODIFY_SRQ): every slot copied to the same slot, links and all, and the
    /// new slots linked after the last free one. Posted WQEs, the slots QPs hold and the
    /// free ones keep their numbers, so the NIC goes on from where it is. `EINVAL` for no
    /// more slots or beyond the deepest ring; `ENOMEM`.
    pub(crate) fn grown(&self, log_depth: u8) -> Result<Self, c_int> {
        if log_depth <= self.shape.log_depth || log_depth > MAX_QUEUE_LOG_DEPTH {
            return Err(libc::EINVAL);
        }
        let shape = QueueShape {
            log_depth,
            log_wqe_size: self.shape.log_wqe_size,
        };
        let mem = DmaMem::ring(shape.log_depth, shape.log_wqe_size)?;
        let old_bytes = usize::from(self.depth()) << self.shape.log_wqe_size;
        // SAFETY: both rings are ours, the new one larger (`DmaMem::ring` sizes), and
        // distinct allocations.
        unsafe { ptr::copy_nonoverlapping(self.mem.as_ptr(), mem.as_ptr(), old_bytes) };
        let depth = 1usize << log_depth;
        let mut wr_id = vec![0; depth];
        wr_id[..self.wr_id.len()].copy_from_slice(&self.wr_id);
        let mut busy = vec![false; depth];
        busy[..self.busy.len()].copy_from_slice(&self.busy);
        let mut ring = Self {
            shape,
            mem,
            head: self.head,
            // CAST: the depth is at most 2^15.
            tail: (depth - 1) as u16,
            posted: self.posted,
            wr_id: wr_id.into_boxed_slice(),
            busy: busy.into_boxed_slice(),
        };
        ring.set_next(self.tail, self.depth());
        for slot in usize::from(self.depth())..depth - 1 {
            // CAST: below the depth.
            ring.set_next(slot as u16, (slot + 1) as u16);
        }
        Ok(ring)
    }

    /// WQEs it holds at most.
    pub(crate) fn max_wr(&self) -> u32 {
        u32::from(self.depth()) - 1
    }

    /// WQEs posted, free-running.
    pub(crate) fn posted(&self) -> u32 {
        self.posted
    }

    /// Whether no WQE can be posted: only the last free slot is left.
    pub(crate) fn is_full(&self) -> bool {
        self.head == self.tail
    }

    /// Posts one WQE of `sges` for `wr_id` in the first free slot; `ENOMEM` when full,
    /// `EINVAL` if the SGEs do not fit the slot.
    pub(crate) fn push(&mut self, wr_id: u64, sges: &[sys::ibv_sge]) -> Result<(), c_int> {
        if self.is_full() {
            return Err(libc::ENOMEM);
        }
        let slot = self.head;
        let next = self.next(slot);
        let num_sge = u8::try_from(sges.len()).map_err(|_| libc::EINVAL)?;
        let w = self.wqe(slot);
        if !(SrqWqe { num_sge, next }).encode_into(w) {
            return Err(libc::EINVAL);
        }
        for (i, s) in sges.iter().enumerate() {
            put_sge(w, ordma_hw::RecvWqe::sge_offset(i), s)?;
        }
        let i = usize::from(slot);
        if let (Some(id), Some(b)) = (self.wr_id.get_mut(i), self.busy.get_mut(i)) {
            *id = wr_id;
            *b = true;
        }
        self.head = next;
        self.posted = self.posted.wrapping_add(1);
        Ok(())
    }

    /// Gives back slot `slot` (a CQE named it): its `wr_id`; `None` if it is not posted.
    /// The slot goes to the end of the free ones.
    pub(crate) fn retire(&mut self, slot: u16) -> Option<u64> {
        let i = usize::from(slot);
        let busy = self.busy.get_mut(i)?;
        if !*busy {
            return None;
        }
        *busy = false;
        let wr_id = *self.wr_id.get(i)?;
        let tail = self.tail;
        self.set_next(tail, slot);
        self.tail = slot;
        Some(wr_id)
    }
}

/// `ibv_post_srq_recv`'s logic: posts the chain from `wr` in order, then rings the SRQ's
/// doorbell once for what was posted (`DB_SRQ`, `srqn << 16 | posted mod 2^16`, after
/// [`udma_to_device_barrier`], under the SRQ's lock). On an error, the failing WR and the
/// errno: `EINVAL` for more SGEs than `max_sge`, `ENOMEM` when full; the WRs before it stay
/// posted.
///
/// # Safety
///
/// `wr` is null or the first of a chain of valid WRs whose `sg_list`s are valid for
/// `num_sge` entries.
pub(crate) unsafe fn post_srq_chain(
    srq: &Srq,
    db: &impl Doorbell,
    mut wr: *mut sys::ibv_recv_wr,
) -> Result<(), (c_int, *mut sys::ibv_recv_wr)> {
    if wr.is_null() {
        return Ok(());
    }
    let mut ring = lock(&srq.ring);
    let start = ring.posted();
    let mut result = Ok(());
    while let Some(w) = NonNull::new(wr) {
        // SAFETY: a valid WR of the chain (caller).
        let w = unsafe { w.as_ref() };
        // SAFETY: its `sg_list` is valid for `num_sge` entries (caller).
        let r = unsafe { sge_list(w.sg_list, w.num_sge) }.and_then(|sges| {
            if sges.len() > srq.max_sge as usize {
                return Err(libc::EINVAL);
            }
            ring.push(w.wr_id, sges)
        });
        if let Err(e) = r {
            result = Err((e, wr));
            break;
        }
        wr = w.next;
    }
    if ring.posted() != start {
        udma_to_device_barrier();
        // CAST: the NIC counts mod 2^16.
        db.ring(DB_SRQ, db_value(srq.srqn, ring.posted() as u16));
    }
    result
}

/// # Safety
///
/// libibverbs calls this with one of our PDs and a valid `attr`.
pub(crate) unsafe extern "C" fn create_srq(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_srq_init_attr,
) -> *mut sys::ibv_srq {
    // SAFETY: `attr` is valid (contract).
    let a = unsafe { (*attr).attr };
    let r = srq_shape(a.max_wr, a.max_sge)
        .and_then(SrqRing::new)
        .and_then(|ring| {
            // SAFETY: as this function's contract.
            unsafe { register(pd, attr, ring) }
        });
    match r {
        Ok(srq) => srq,
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    }
}

/// CREATE_SRQ for `ring`; on success the kernel holds it until DESTROY_SRQ, and `attr`'s
/// capabilities are the SRQ's.
///
/// # Safety
///
/// As [`create_srq`].
unsafe fn register(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_srq_init_attr,
    ring: SrqRing,
) -> Result<*mut sys::ibv_srq, c_int> {
    let mut cmd = CreateSrqCmd::default();
    cmd.drv.log_depth = ring.shape.log_depth;
    cmd.drv.log_wqe_size = ring.shape.log_wqe_size;
    cmd.drv.buf_addr = ring.mem.addr();
    let ring_sges = ((1u32 << ring.shape.log_wqe_size) - RQ_WQE_BASE) / WQE_SGE_SIZE;
    let mut resp = CreateSrqResp::default();
    let srq = Box::into_raw(Box::new(Srq {
        ibv: sys::ibv_srq::default(),
        srqn: 0,
        max_sge: 0,
        ring: Mutex::new(ring),
    }));
    // SAFETY: `pd` and `attr` are valid (contract); `srq` is ours and stays where it is
    // (its address is the SRQ's user handle); the buffers are ours, their sizes theirs.
    let r = unsafe {
        abi::ibv_cmd_create_srq(
            pd,
            ptr::addr_of_mut!((*srq).ibv),
            attr,
            &mut cmd.ibv,
            size_of::<CreateSrqCmd>(),
            &mut resp.ibv,
            size_of::<CreateSrqResp>(),
        )
    };
    if r != 0 {
        // SAFETY: from `Box::into_raw` above; the kernel has not kept its ring.
        drop(unsafe { Box::from_raw(srq) });
        return Err(r);
    }
    // SAFETY: `srq` is ours; `attr` holds the kernel's answer (libibverbs copied it).
    unsafe {
        (*srq).srqn = resp.drv.srqn;
        let sges = (*attr).attr.max_sge.min(ring_sges);
        (*srq).max_sge = sges;
        (*attr).attr.max_sge = sges;
        Ok(ptr::addr_of_mut!((*srq).ibv))
    }
}

/// The request of MODIFY_SRQ with ordma's driver data (a resize).
#[repr(C)]
#[derive(Default)]
pub(crate) struct ModifySrqCmd {
    pub(crate) ibv: abi::IbvModifySrq,
    pub(crate) drv: sys::ordma_ibv_modify_srq_cmd,
}

/// `ibv_modify_srq`: the limit, and a resize (`IBV_SRQ_MAX_WR` beyond what the SRQ holds)
/// with a new ring ([`SrqRing::grown`]) built and handed over under the SRQ's lock, so no
/// WQE is posted or given back meanwhile. A `max_wr` the SRQ already holds changes
/// nothing (it is never made smaller). On an error the SRQ is as it was.
///
/// # Safety
///
/// libibverbs calls this with an SRQ `create_srq` returned and a valid `attr`.
pub(crate) unsafe extern "C" fn modify_srq(
    ibsrq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
    attr_mask: c_int,
) -> c_int {
    // SAFETY: `ibsrq` is the first field of a live `Srq` (contract); `attr` is valid.
    let (srq, max_wr) = unsafe { (&*ibsrq.cast::<Srq>(), (*attr).max_wr) };
    // CAST: the mask's bits, as libibverbs passes them.
    let resize = attr_mask as u32 & sys::ibv_srq_attr_mask_IBV_SRQ_MAX_WR != 0;
    let mut ring = lock(&srq.ring);
    if !resize || max_wr <= ring.max_wr() {
        drop(ring);
        let mut cmd = abi::IbvModifySrq::default();
        // SAFETY: pointers from libibverbs (contract) and our own command buffer.
        return unsafe {
            abi::ibv_cmd_modify_srq(
                ibsrq,
                attr,
                attr_mask,
                &mut cmd,
                size_of::<abi::IbvModifySrq>(),
            )
        };
    }
    let new = max_wr
        .checked_add(1)
        .and_then(log2_ceil)
        .ok_or(libc::EINVAL)
        .and_then(|log_depth| ring.grown(log_depth));
    let new = match new {
        Ok(n) => n,
        Err(e) => return e,
    };
    let mut cmd = ModifySrqCmd::default();
    cmd.drv.log_depth = new.shape.log_depth;
    cmd.drv.buf_addr = new.mem.addr();
    // SAFETY: pointers from libibverbs (contract) and our own command buffer, the driver
    // data after the core command.
    let r = unsafe {
        abi::ibv_cmd_modify_srq(
            ibsrq,
            attr,
            attr_mask,
            &mut cmd.ibv,
            size_of::<ModifySrqCmd>(),
        )
    };
    if r == 0 {
        // The NIC reads the new ring only; the kernel has let go of the old one.
        *ring = new;
    } else {
        crate::cq::keep_if_nic_may_use(r, new.mem);
    }
    r
}

/// # Safety
///
/// libibverbs calls this with an SRQ `create_srq` returned and a valid `attr`.
pub(crate) unsafe extern "C" fn query_srq(
    ibsrq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
) -> c_int {
    let mut cmd = abi::IbvQuerySrq::default();
    // SAFETY: pointers from libibverbs (contract) and our own command buffer.
    unsafe { abi::ibv_cmd_query_srq(ibsrq, attr, &mut cmd, size_of::<abi::IbvQuerySrq>()) }
}

/// # Safety
///
/// libibverbs calls this with an SRQ `create_srq` returned, no longer in use (the kernel
/// refuses while a QP uses it).
pub(crate) unsafe extern "C" fn destroy_srq(ibsrq: *mut sys::ibv_srq) -> c_int {
    // SAFETY: `ibsrq` is valid (contract).
    let r = unsafe { abi::ibv_cmd_destroy_srq(ibsrq) };
    if r != 0 {
        // The SRQ still exists, and the kernel still holds its ring.
        return r;
    }
    // SAFETY: `ibsrq` is the first field of a `Srq` from `Box::into_raw`; the kernel has
    // let go of its ring, no QP uses it, and this is its last use.
    drop(unsafe { Box::from_raw(ibsrq.cast::<Srq>()) });
    0
}

/// Posts a chain of receive WRs to the SRQ ([`post_srq_chain`]): 0, or an errno with
/// `*bad_wr` the first WR not posted.
///
/// # Safety
///
/// libibverbs calls this with an SRQ `create_srq` returned, a chain of valid WRs and a
/// valid `bad_wr`.
pub(crate) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut sys::ibv_srq,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    // SAFETY: `ibsrq` is the first field of a live `Srq`; its context is one of ours (set
    // by CREATE_SRQ), whose doorbell page stays mapped while it is open.
    let r = unsafe {
        let srq = &*ibsrq.cast::<Srq>();
        match DbPage::new((*Context::from_ibv(srq.ibv.context)).db) {
            Some(db) => post_srq_chain(srq, &db, wr),
            None => Err((libc::EINVAL, wr)),
        }
    };
    // SAFETY: `bad_wr` is valid for a write (contract).
    unsafe { post_result(r, bad_wr) }
}

#[cfg(test)]
#[path = "tests/srq.rs"]
mod tests;
