// SPDX-License-Identifier: GPL-2.0

//! The trampolines of hardware counters: a port's counter set, and reading it; per-QP
//! counters (`ib/counter.rs`): made, bound to QPs and unbound, read, deallocated.

use core::{
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};

use kernel::prelude::*;

use crate::ib::{
    bindings as b,
    counter::IbCounter,
    device::data,
    driver::{port_desc, Driver},
    qp::IbQp,
    stats::HwStat,
};

/// A counter set of [`Driver::HW_STATS`]: for a port, or for a per-QP counter.
fn alloc_stats<T: Driver>() -> *mut b::rdma_hw_stats {
    let stats = T::HW_STATS;
    let Ok(n) = i32::try_from(stats.len()) else {
        return core::ptr::null_mut();
    };
    // CAST: a small constant (10, in milliseconds), widened.
    let lifespan = b::RDMA_HW_STATS_DEFAULT_LIFESPAN as usize;
    // SAFETY: the descriptors are `'static` (ib_core keeps the pointer for as long as the
    // set lives) and `n` of them; ib_core fails the port's registration (or the counter's
    // allocation) on a null return.
    unsafe { b::rdma_alloc_hw_stats_struct(HwStat::as_raw(stats), n, lifespan) }
}

/// The values of `stats`, for one call.
///
/// # Safety
///
/// `stats` is a set `alloc_stats` made, which ib_core hands for this call under its lock:
/// its `value` has `num_counters` entries, which only the holder of that lock writes (ib_core
/// may read them without it, as it does for every driver: 64-bit loads of values that a
/// refresh replaces whole), the caller's to write until it returns.
unsafe fn values<'a>(stats: *mut b::rdma_hw_stats) -> &'a mut [u64] {
    // SAFETY: the caller's guarantee.
    unsafe {
        let len = usize::try_from((*stats).num_counters).unwrap_or(0);
        (*stats).value.as_mut_slice(len)
    }
}

/// # Safety
///
/// `counter` is one ib_core allocated at `size_rdma_counter` (an `IbCounter<T>`, zeroed)
/// for one of `T`'s devices, its `device` and `port` set; nothing else reaches it yet.
pub(super) unsafe extern "C" fn counter_init<T: Driver>(counter: *mut b::rdma_counter) {
    // SAFETY: the caller's guarantee: the device is one of `T`'s, registered.
    let (d, port) = unsafe { (data::<T>((*counter).device), (*counter).port) };
    let ic = counter.cast::<IbCounter<T>>();
    // SAFETY: the slot is uninitialised, ours until this returns, and never moved (ib_core
    // frees the counter where it is). The initialiser cannot fail.
    let Ok(()) =
        unsafe { pin_init::raw_try_init((&raw mut (*ic).data).cast(), d.counter_init(port)) };
}

/// # Safety
///
/// `counter` is one `counter_init` set up.
pub(super) unsafe extern "C" fn counter_alloc_stats<T: Driver>(
    _counter: *mut b::rdma_counter,
) -> *mut b::rdma_hw_stats {
    alloc_stats::<T>()
}

/// The driver's data of `counter` and of `qp`, and the device.
///
/// # Safety
///
/// `counter` is one `counter_init` set up, not yet deallocated; `qp` a live QP of the same
/// device, created by `create_qp` (ib_core holds both for the call).
unsafe fn counter_and_qp<'a, T: Driver>(
    counter: *mut b::rdma_counter,
    qp: *mut b::ib_qp,
) -> (&'a T, &'a T::Counter, &'a T::Qp) {
    // SAFETY: the caller's guarantee.
    unsafe {
        (
            data::<T>((*counter).device),
            (*counter.cast::<IbCounter<T>>()).data.assume_init_ref(),
            (*qp.cast::<IbQp<T>>()).data.assume_init_ref(),
        )
    }
}

/// A QP's `counter`, as an atomic: ib_core reads it without a lock (its check that a QP is
/// not bound yet, before it takes the new counter's lock), so two binds of one QP can race
/// to the driver; the binding claims the QP first.
///
/// # Safety
///
/// `qp` is a live QP, for the returned reference's use.
unsafe fn qp_counter<'a>(qp: *mut b::ib_qp) -> &'a AtomicPtr<b::rdma_counter> {
    // SAFETY: the field is valid and aligned for as long as the QP lives (the caller's
    // guarantee); every access the binding makes to it is atomic, and ib_core's are plain
    // pointer-sized loads and stores.
    unsafe { AtomicPtr::from_ptr(&raw mut (*qp).counter) }
}

/// # Safety
///
/// See `counter_and_qp`; under the counter's lock.
pub(super) unsafe extern "C" fn counter_bind_qp<T: Driver>(
    counter: *mut b::rdma_counter,
    qp: *mut b::ib_qp,
    _port: u32,
) -> i32 {
    // SAFETY: the caller's guarantee.
    let ((d, c, q), claim) = unsafe { (counter_and_qp::<T>(counter, qp), qp_counter(qp)) };
    // Claimed before the driver binds: a QP is bound to one counter once (as ib_core's
    // check would have it, `EINVAL`), even when two binds race.
    if claim
        .compare_exchange(null_mut(), counter, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return EINVAL.to_errno();
    }
    match d.counter_bind_qp(c, q) {
        Ok(()) => 0,
        Err(e) => {
            claim.store(null_mut(), Ordering::Release);
            e.to_errno()
        }
    }
}

/// # Safety
///
/// `qp` is a live QP of one of `T`'s devices, bound to a counter (`counter` set), under
/// that counter's lock.
pub(super) unsafe extern "C" fn counter_unbind_qp<T: Driver>(qp: *mut b::ib_qp, _port: u32) -> i32 {
    // SAFETY: the caller's guarantee: the QP is bound, so its counter is one of ours.
    let claim = unsafe { qp_counter(qp) };
    let counter = claim.load(Ordering::Acquire);
    if counter.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: as above.
    let (d, c, q) = unsafe { counter_and_qp::<T>(counter, qp) };
    match d.counter_unbind_qp(c, q) {
        Ok(()) => {
            claim.store(null_mut(), Ordering::Release);
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `counter` is one `counter_init` set up, with its `stats` from `counter_alloc_stats`,
/// under its lock.
pub(super) unsafe extern "C" fn counter_update_stats<T: Driver>(
    counter: *mut b::rdma_counter,
) -> i32 {
    // SAFETY: the caller's guarantee: the counter's stats are ours to write under its lock.
    let (d, c, values) = unsafe {
        (
            data::<T>((*counter).device),
            (*counter.cast::<IbCounter<T>>()).data.assume_init_ref(),
            values((*counter).stats),
        )
    };
    match d.counter_read(c, values) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `counter` is one `counter_init` set up, no QP bound, deallocated once (ib_core frees it
/// after this).
pub(super) unsafe extern "C" fn counter_dealloc<T: Driver>(counter: *mut b::rdma_counter) -> i32 {
    // SAFETY: the caller's guarantee: the last use of its data.
    unsafe { (*counter.cast::<IbCounter<T>>()).data.assume_init_drop() };
    0
}

/// # Safety
///
/// `ib` is one of `T`'s devices (every device with these ops is), live for the call.
pub(super) unsafe extern "C" fn alloc_hw_port_stats<T: Driver>(
    _ib: *mut b::ib_device,
    _port: u32,
) -> *mut b::rdma_hw_stats {
    alloc_stats::<T>()
}

/// # Safety
///
/// See `alloc_hw_port_stats`; `stats` is the set `alloc_hw_port_stats` made for `port`.
pub(super) unsafe extern "C" fn get_hw_stats<T: Driver>(
    ib: *mut b::ib_device,
    stats: *mut b::rdma_hw_stats,
    port: u32,
    _index: i32,
) -> i32 {
    // SAFETY: `ib` is one of `T`'s devices, live for the call.
    let d = unsafe { data::<T>(ib) };
    if port_desc(d, port).is_none() {
        return EINVAL.to_errno();
    }
    // SAFETY: ib_core hands the set it had `alloc_hw_port_stats` make for this port, under
    // its lock (or, while the port registers, before anyone else can see it).
    let (n, values) = unsafe { ((*stats).num_counters, values(stats)) };
    // Every counter at once: ib_core then keeps them for the set's lifespan.
    match d.hw_stats(port, values) {
        Ok(()) => n,
        Err(e) => e.to_errno(),
    }
}
