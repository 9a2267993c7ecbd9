//! A CQ's lock: a spin lock (as rdma-core's providers use `pthread_spin_lock` for their
//! CQs) that, beside the usual guard, can be taken in one call and given back in another:
//! `ibv_start_poll` takes it and `ibv_end_poll` gives it back (libibverbs' contract for
//! the extended polling API, `cq_ex`). A waiter spins briefly, then yields its CPU.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

/// Spins before a waiter starts yielding.
const SPINS: u32 = 64;

/// `T` under a spin lock. All-zero memory is an unlocked lock around a zeroed `T`.
#[derive(Default)]
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives one thread at a time access to `value` (`T: Send` is enough, as
// for `std::sync::Mutex`).
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Access to a [`SpinLock`]'s value while held; gives the lock back when dropped.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    /// `value`, unlocked.
    pub(crate) fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting for it.
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        self.acquire();
        SpinGuard { lock: self }
    }

    /// Takes the lock without a guard: [`Self::release`] gives it back.
    pub(crate) fn acquire(&self) {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if spins < SPINS {
                spins += 1;
                core::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Gives back a lock taken by [`Self::acquire`].
    ///
    /// # Safety
    ///
    /// The calling thread holds the lock by [`Self::acquire`], and no reference from
    /// [`Self::get_held`] is used after this call.
    pub(crate) unsafe fn release(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// The value, while the lock is held without a guard.
    ///
    /// # Safety
    ///
    /// The calling thread holds the lock by [`Self::acquire`], and the reference is
    /// neither kept past [`Self::release`] nor held beside another from this function.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get_held(&self) -> &mut T {
        // SAFETY: the caller holds the lock: no other thread touches the value, and the
        // caller holds no other reference to it.
        unsafe { &mut *self.value.get() }
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` is the only way to the value.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard took the lock by `acquire`, and its borrows ended with it.
        unsafe { self.lock.release() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_take_turns() {
        let l = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = Arc::clone(&l);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a thread");
        }
        assert_eq!(*l.lock(), 40_000);
    }

    #[test]
    fn taken_in_one_call_and_given_back_in_another() {
        let l = Arc::new(SpinLock::new(0u32));
        l.acquire();
        let other = {
            let l = Arc::clone(&l);
            std::thread::spawn(move || {
                *l.lock() += 1;
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        // SAFETY: held by `acquire` above; the reference ends before `release`.
        unsafe {
            assert_eq!(*l.get_held(), 0, "the other thread waited");
            *l.get_held() = 10;
            l.release();
        }
        other.join().expect("the other thread");
        assert_eq!(*l.lock(), 11);
    }
}
