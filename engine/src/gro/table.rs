//! The per-queue table of held packets: at most `cap` entries, found by hash
//! in O(1) (open addressing, linear probing over an index twice the size,
//! backward-shift deletion, no tombstones), and kept in arrival order (an
//! intrusive list) so the oldest is evicted when full and flushed first.
//! Everything is allocated once, when the table is built, and entries live
//! in place: an insert hands out a slot to fill, a remove hands back the
//! entry to take from, so a large entry is never moved.

const NIL: u16 = u16::MAX;

pub struct Table<E> {
    /// Every slot holds an entry; `used` says which are live.
    entries: Vec<E>,
    used: Vec<bool>,
    hashes: Vec<u32>,
    /// Slot numbers by hash position; NIL = empty.
    index: Vec<u16>,
    mask: usize,
    free: Vec<u16>,
    prev: Vec<u16>,
    next: Vec<u16>,
    oldest: u16,
    newest: u16,
    len: usize,
}

impl<E: Default> Table<E> {
    pub fn new(cap: usize) -> Table<E> {
        assert!((1..NIL as usize).contains(&cap), "table capacity 1..65534");
        let isize = (cap * 2).next_power_of_two();
        Table {
            entries: (0..cap).map(|_| E::default()).collect(),
            used: vec![false; cap],
            hashes: vec![0; cap],
            index: vec![NIL; isize],
            mask: isize - 1,
            free: (0..cap as u16).rev().collect(),
            prev: vec![NIL; cap],
            next: vec![NIL; cap],
            oldest: NIL,
            newest: NIL,
            len: 0,
        }
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// The slot of the entry with this hash for which `eq` holds.
    #[inline(always)]
    pub fn find(&self, hash: u32, mut eq: impl FnMut(&E) -> bool) -> Option<u16> {
        let mut i = hash as usize & self.mask;
        loop {
            let s = self.index[i];
            if s == NIL {
                return None;
            }
            // The index only ever names live slots (insert and remove keep it so).
            if self.hashes[s as usize] == hash && eq(&self.entries[s as usize]) {
                return Some(s);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The entry in this slot, if the slot is in use.
    #[inline(always)]
    pub fn try_get(&self, slot: u16) -> Option<&E> {
        let s = slot as usize;
        (s < self.used.len() && self.used[s]).then(|| &self.entries[s])
    }

    /// The entry in this slot, if the slot is in use.
    #[inline(always)]
    pub fn try_get_mut(&mut self, slot: u16) -> Option<&mut E> {
        let s = slot as usize;
        (s < self.used.len() && self.used[s]).then(|| &mut self.entries[s])
    }

    /// A live entry (the slot came from `insert` and was not removed since).
    #[inline(always)]
    pub fn get_mut(&mut self, slot: u16) -> &mut E {
        debug_assert!(self.used[slot as usize]);
        &mut self.entries[slot as usize]
    }

    #[inline(always)]
    pub fn get(&self, slot: u16) -> &E {
        debug_assert!(self.used[slot as usize]);
        &self.entries[slot as usize]
    }

    /// Claims a slot as the newest, for the caller to fill in place: it
    /// still holds whatever its previous entry left. The caller makes room
    /// first (`is_full`).
    #[inline(always)]
    pub fn insert(&mut self, hash: u32) -> (u16, &mut E) {
        let s = self.free.pop().expect("insert into a full GRO table");
        self.used[s as usize] = true;
        self.hashes[s as usize] = hash;
        let mut i = hash as usize & self.mask;
        while self.index[i] != NIL {
            i = (i + 1) & self.mask;
        }
        self.index[i] = s;
        self.prev[s as usize] = self.newest;
        self.next[s as usize] = NIL;
        if self.newest != NIL {
            self.next[self.newest as usize] = s;
        } else {
            self.oldest = s;
        }
        self.newest = s;
        self.len += 1;
        (s, &mut self.entries[s as usize])
    }

    /// The entry of a slot, live or not (a free one holds what its last
    /// use left, or the default).
    #[inline(always)]
    pub fn entry(&self, slot: u16) -> &E {
        &self.entries[slot as usize]
    }

    /// The entry of the slot removed last, if it is `slot` (see `reclaim`).
    #[inline(always)]
    pub fn peek_freed(&self, slot: u16) -> Option<&E> {
        (self.free.last() == Some(&slot)).then(|| &self.entries[slot as usize])
    }

    /// Takes back the slot removed last, if no other slot was taken or
    /// given back since: the entry still holds what its previous use left
    /// (a flow's state, for a restart without a lookup). It becomes the
    /// newest, under the hash it had.
    #[inline(always)]
    pub fn reclaim(&mut self, slot: u16) -> Option<&mut E> {
        if self.free.last() != Some(&slot) {
            return None;
        }
        let (s, e) = self.insert(self.hashes[slot as usize]);
        debug_assert_eq!(s, slot);
        Some(e)
    }

    /// Takes an entry out; hands it back, in place, for the caller to take
    /// what it needs before the slot is reused.
    #[inline(always)]
    pub fn remove(&mut self, slot: u16) -> &mut E {
        let s = slot as usize;
        assert!(self.used[s], "remove of an empty slot");
        self.used[s] = false;
        // Unlink from the arrival list.
        let (p, n) = (self.prev[s], self.next[s]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.oldest = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        } else {
            self.newest = p;
        }
        // Remove from the index, shifting later members of the probe run back.
        let mut i = self.hashes[s] as usize & self.mask;
        while self.index[i] != slot {
            i = (i + 1) & self.mask;
        }
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let sj = self.index[j];
            if sj == NIL {
                break;
            }
            let home = self.hashes[sj as usize] as usize & self.mask;
            // Move sj into the hole at i unless its home lies in (i, j].
            let in_range = if i <= j {
                home > i && home <= j
            } else {
                home > i || home <= j
            };
            if !in_range {
                self.index[i] = sj;
                i = j;
            }
        }
        self.index[i] = NIL;
        self.free.push(slot);
        self.len -= 1;
        &mut self.entries[s]
    }

    /// The oldest entry for which `f` holds (a scan: for rare paths only).
    pub fn first_where(&self, mut f: impl FnMut(&E) -> bool) -> Option<u16> {
        let mut s = self.oldest;
        while s != NIL {
            if f(&self.entries[s as usize]) {
                return Some(s);
            }
            s = self.next[s as usize];
        }
        None
    }

    /// The entry held longest.
    #[inline(always)]
    pub fn oldest(&self) -> Option<u16> {
        (self.oldest != NIL).then_some(self.oldest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn put(t: &mut Table<u32>, hash: u32, v: u32) -> u16 {
        let (s, e) = t.insert(hash);
        *e = v;
        s
    }

    #[test]
    fn insert_find_remove_in_order() {
        let mut t: Table<u32> = Table::new(4);
        let a = put(&mut t, 7, 70);
        let b = put(&mut t, 7, 71); // same hash: probing
        let c = put(&mut t, 3, 30);
        assert_eq!(t.find(7, |e| *e == 71), Some(b));
        assert_eq!(t.oldest(), Some(a));
        assert_eq!(*t.remove(a), 70);
        assert_eq!(t.try_get(a), None, "a removed slot is not live");
        assert_eq!(t.oldest(), Some(b));
        assert_eq!(
            t.find(7, |e| *e == 71),
            Some(b),
            "found after a backward shift"
        );
        assert_eq!(t.find(7, |e| *e == 70), None);
        put(&mut t, 1, 10);
        put(&mut t, 2, 20);
        assert!(t.is_full());
        assert_eq!(*t.remove(c), 30);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn reclaim_takes_back_only_the_slot_removed_last() {
        let mut t: Table<u32> = Table::new(4);
        let a = put(&mut t, 5, 50);
        let b = put(&mut t, 5, 51);
        t.remove(a);
        t.remove(b);
        assert!(t.reclaim(a).is_none(), "b was given back after a");
        assert!(t.peek_freed(a).is_none());
        assert_eq!(t.peek_freed(b).copied(), Some(51));
        assert_eq!(t.reclaim(b).copied(), Some(51), "its entry is as it was");
        assert_eq!(t.find(5, |e| *e == 51), Some(b), "under its old hash");
        assert_eq!(t.oldest(), Some(b));
        assert!(t.reclaim(b).is_none(), "a live slot is not free");
        put(&mut t, 9, 90); // takes a
        assert!(t.reclaim(a).is_none(), "taken since");
        assert_eq!(t.len(), 2);
    }

    proptest! {
        /// Against a model: random inserts/removes with colliding hashes.
        #[test]
        fn behaves_like_a_model(ops in proptest::collection::vec((0u8..3, 0u32..16, 0u32..1000), 1..400)) {
            let cap = 8;
            let mut t: Table<u32> = Table::new(cap);
            let mut model: Vec<(u32, u32)> = Vec::new(); // (hash, value) in arrival order
            for (op, hash, val) in ops {
                match op {
                    0 if !t.is_full() && !model.iter().any(|m| m.1 == val) => {
                        put(&mut t, hash, val);
                        model.push((hash, val));
                    }
                    1 if !model.is_empty() => {
                        let (h, v) = model[val as usize % model.len()];
                        let s = t.find(h, |e| *e == v).expect("present");
                        prop_assert_eq!(*t.remove(s), v);
                        model.retain(|m| m.1 != v);
                    }
                    _ => {
                        if let Some(s) = t.oldest() {
                            prop_assert_eq!(*t.get(s), model[0].1);
                        }
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                for &(h, v) in &model {
                    prop_assert!(t.find(h, |e| *e == v).is_some());
                }
            }
        }
    }
}
