//! Object tables: the NIC's PDs, MRs, CQs and QPs.
//!
//! A [`Table`] holds up to `max` objects in slots handed out lowest index first (the free
//! slots in a min-heap: an insert or a removal is O(log n), a lookup O(1)). Each slot
//! has an 8-bit key that changes every time the slot is reused, so a [`Handle`] (index plus
//! key) names one use of a slot: an MR key (`index << 8 | key`) that outlived its MR no
//! longer matches. PD numbers are bare indices (the key is not part of them).

use std::{cmp::Reverse, collections::BinaryHeap};

/// One use of a table slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle {
    /// The slot.
    pub index: u32,
    /// The slot's key for this use.
    pub key: u8,
}

impl Handle {
    /// The largest index a 32-bit key (`index << 8 | key`) can carry.
    pub const MAX_INDEX: u32 = (1 << 24) - 1;

    /// The 32-bit key form, `index << 8 | key`; `None` if the index needs more than 24 bits.
    pub fn to_key(self) -> Option<u32> {
        (self.index <= Self::MAX_INDEX).then_some((self.index << 8) | u32::from(self.key))
    }

    /// The handle a 32-bit key names.
    pub fn from_key(key: u32) -> Self {
        // CAST: the low 8 bits are the key by definition.
        Self {
            index: key >> 8,
            key: key as u8,
        }
    }
}

#[derive(Debug)]
struct Slot<T> {
    key: u8,
    obj: Option<T>,
}

/// A table of at most `max` objects of type `T`.
#[derive(Debug)]
pub struct Table<T> {
    slots: Vec<Slot<T>>,
    /// The empty slots below `slots.len()`, lowest first.
    free: BinaryHeap<Reverse<u32>>,
    max: u32,
    used: u32,
    /// Objects stored, and removed, over the table's life and its predecessors'
    /// ([`Table::keep_counts`]).
    created: u64,
    destroyed: u64,
}

impl<T> Table<T> {
    /// An empty table for at most `max` objects. Slots are allocated as they are used.
    pub fn new(max: u32) -> Self {
        Self {
            slots: Vec::new(),
            free: BinaryHeap::new(),
            max,
            used: 0,
            created: 0,
            destroyed: 0,
        }
    }

    /// Objects stored so far, and objects removed ([`Table::remove`], not [`Table::clear`]).
    pub fn counts(&self) -> (u64, u64) {
        (self.created, self.destroyed)
    }

    /// Continues `old`'s counts (a reset replaces the table; the counts go on).
    pub fn keep_counts(&mut self, old: &Self) {
        (self.created, self.destroyed) = old.counts();
    }

    /// Stores `obj` in the lowest free slot; `None` if all `max` are in use.
    pub fn insert(&mut self, obj: T) -> Option<Handle> {
        let index = match self.free.pop() {
            Some(Reverse(i)) => usize::try_from(i).ok()?,
            None if self.slots.len() < usize::try_from(self.max).ok()? => {
                self.slots.push(Slot { key: 0, obj: None });
                self.slots.len() - 1
            }
            None => return None,
        };
        let slot = self.slots.get_mut(index)?;
        slot.key = slot.key.wrapping_add(1);
        slot.obj = Some(obj);
        self.used += 1;
        self.created += 1;
        Some(Handle {
            index: u32::try_from(index).ok()?,
            key: slot.key,
        })
    }

    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        self.slots.get(usize::try_from(index).ok()?)
    }

    /// The object in slot `index`, whatever its key.
    pub fn get_index(&self, index: u32) -> Option<&T> {
        self.slot(index)?.obj.as_ref()
    }

    /// The object `h` names, if its key still matches.
    pub fn get(&self, h: Handle) -> Option<&T> {
        self.slot(h.index)
            .filter(|s| s.key == h.key)
            .and_then(|s| s.obj.as_ref())
    }

    /// Removes the object in slot `index`, whatever its key.
    pub fn remove_index(&mut self, index: u32) -> Option<T> {
        let obj = self
            .slots
            .get_mut(usize::try_from(index).ok()?)?
            .obj
            .take()?;
        self.free.push(Reverse(index));
        self.used -= 1;
        self.destroyed += 1;
        Some(obj)
    }

    /// Removes the object `h` names, if its key still matches.
    pub fn remove(&mut self, h: Handle) -> Option<T> {
        self.slot(h.index).filter(|s| s.key == h.key)?;
        self.remove_index(h.index)
    }

    /// The object in slot `index`, whatever its key, for changing.
    pub fn get_index_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slots
            .get_mut(usize::try_from(index).ok()?)?
            .obj
            .as_mut()
    }

    /// The object `h` names, if its key still matches, for changing.
    pub fn get_mut(&mut self, h: Handle) -> Option<&mut T> {
        self.slot(h.index).filter(|s| s.key == h.key)?;
        self.get_index_mut(h.index)
    }

    /// Every object with its slot index.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .zip(0u32..)
            .filter_map(|(s, i)| s.obj.as_ref().map(|o| (i, o)))
    }

    /// Every object, for changing.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().filter_map(|s| s.obj.as_mut())
    }

    /// Whether all `max` slots are in use (the next insert fails).
    pub fn is_full(&self) -> bool {
        self.used >= self.max
    }

    /// Objects in the table.
    pub fn in_use(&self) -> u32 {
        self.used
    }

    /// Removes every object (a reset); keys keep counting, so old handles stay stale.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| s.obj = None);
        self.free = (0..self.slots.len())
            .filter_map(|i| u32::try_from(i).ok())
            .map(Reverse)
            .collect();
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_first_bounded_and_keys_change_on_reuse() {
        let mut t = Table::new(3);
        let a = t.insert('a').unwrap_or(Handle { index: 9, key: 0 });
        let b = t.insert('b').unwrap_or(Handle { index: 9, key: 0 });
        assert_eq!((a.index, b.index), (0, 1));
        assert!(t.insert('c').is_some());
        assert_eq!(t.insert('d'), None, "max 3");
        assert_eq!(t.remove(a), Some('a'));
        assert_eq!(t.remove(a), None, "freed once");
        let a2 = t.insert('e').unwrap_or(a);
        assert_eq!(a2.index, 0, "lowest free slot again");
        assert_ne!(a2.key, a.key, "a reused slot gets a new key");
        assert_eq!(t.get(a), None, "the stale handle no longer matches");
        assert_eq!(t.get(a2), Some(&'e'));
        assert_eq!(Handle::from_key(a2.to_key().unwrap_or(0)), a2);
        assert_eq!(t.in_use(), 3);
        assert_eq!(t.counts(), (4, 1));
        t.clear();
        assert_eq!((t.in_use(), t.get_index(1)), (0, None));
        assert_eq!(t.counts(), (4, 1), "a clear is no removal");
        let mut fresh = Table::<char>::new(3);
        fresh.keep_counts(&t);
        assert_eq!(fresh.counts(), (4, 1));
    }

    #[test]
    fn a_large_table_hands_out_the_lowest_free_slot() {
        let max = 65536;
        let mut t = Table::new(max);
        let hs: Vec<Handle> = (0..max).filter_map(|i| t.insert(i)).collect();
        assert_eq!(hs.len(), 65536);
        assert!(t.is_full() && t.insert(0).is_none());
        // Free every third slot from the top down; they come back lowest first.
        for h in hs.iter().rev().step_by(3) {
            assert!(t.remove(*h).is_some());
        }
        let mut last = None;
        while let Some(h) = t.insert(7) {
            assert!(last.is_none_or(|l| h.index > l), "ascending");
            assert_eq!(h.index % 3, (max - 1) % 3);
            last = Some(h.index);
        }
        assert_eq!(t.in_use(), max);
        t.clear();
        assert_eq!(
            t.insert(1).map(|h| h.index),
            Some(0),
            "lowest first after a clear"
        );
        assert_eq!(t.insert(2).map(|h| h.index), Some(1));
    }
}
