//! The per-queue table of held packets: at most `cap` entries, found by hash
//! in O(1) (open addressing, linear probing over an index four times the size,
//! backward-shift deletion, no tombstones; each index place holds its slot
//! and the upper half of the slot's hash, so a probe is one load), and kept
//! in arrival order (an intrusive list) so the oldest is evicted when full and
//! flushed first.
//! Everything is allocated once, when the table is built, and entries live
//! in place: an insert hands out a slot to fill, a remove hands back the
//! entry to take from, so a large entry is never moved.
//!
//! A removed entry stays findable under its hash as a ghost (free, still
//! holding what its flow left) until its slot is taken for another: free
//! slots are taken least recently freed first, so the flows flushed last
//! (at the end of a poll, say) can come back to their slot and its state
//! (`reclaim`) without a new one being built. The index holds each slot at
//! most once, so it is never more than a quarter full: probe runs stay
//! short even when every slot is live or a ghost (at half full, taking a
//! ghost out of the index, with its backward shift, cost a new flow ~40
//! cycles more).

const NIL: u16 = u16::MAX;

/// An index place: a slot (`NIL`: empty) and the upper half of its hash.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Place(u32);

impl Place {
    const EMPTY: Place = Place(NIL as u32);

    #[inline(always)]
    fn new(slot: u16, hash: u32) -> Place {
        Place(hash & 0xffff_0000 | slot as u32)
    }

    #[inline(always)]
    fn slot(self) -> u16 {
        self.0 as u16
    }

    /// Whether a slot here may be indexed under `hash` (its hash has the
    /// same upper half; the lower one put it in this probe run).
    #[inline(always)]
    fn may_be(self, hash: u32) -> bool {
        (self.0 ^ hash) >> 16 == 0
    }
}

/// The farthest an entry sits from its hash's home position in the index,
/// and so the longest any lookup walks. Under a hash key nobody knows, at
/// most a quarter of the index used, a run this long practically never
/// forms (an insert that would need one is refused); with a key an
/// attacker found, it caps what each of their flows costs.
pub const MAX_PROBE: usize = 32;

/// The two ends of a list threaded through `prev`/`next`.
#[derive(Clone, Copy)]
struct Ends {
    first: u16,
    last: u16,
}

impl Ends {
    const EMPTY: Ends = Ends {
        first: NIL,
        last: NIL,
    };
}

/// Appends `s` to the list `l`.
#[inline(always)]
fn push_last(prev: &mut [u16], next: &mut [u16], l: &mut Ends, s: u16) {
    prev[s as usize] = l.last;
    next[s as usize] = NIL;
    if l.last != NIL {
        next[l.last as usize] = s;
    } else {
        l.first = s;
    }
    l.last = s;
}

/// Takes `s` out of the list `l`.
#[inline(always)]
fn unlink(prev: &mut [u16], next: &mut [u16], l: &mut Ends, s: u16) {
    let (p, n) = (prev[s as usize], next[s as usize]);
    if p != NIL {
        next[p as usize] = n;
    } else {
        l.first = n;
    }
    if n != NIL {
        prev[n as usize] = p;
    } else {
        l.last = p;
    }
}

/// The per-queue table of held packets: bounded, O(1) by hash, in arrival
/// order, with the ghosts of flushed flows kept until their slot is needed.
pub struct Table<E> {
    /// Every slot holds an entry; `used` says which are live.
    entries: Vec<E>,
    used: Vec<bool>,
    /// In the index under `hashes`: live, or a ghost.
    indexed: Vec<bool>,
    hashes: Vec<u32>,
    /// Slots (and their hashes' upper halves) by hash position.
    index: Vec<Place>,
    mask: usize,
    /// Two lists share `prev`/`next` (a slot is on one of them): the live
    /// slots in arrival order, the free ones in the order they were freed.
    prev: Vec<u16>,
    next: Vec<u16>,
    live: Ends,
    free: Ends,
    len: usize,
}

impl<E: Default> Table<E> {
    /// A table of `cap` entries (1..65534), all allocated now.
    pub fn new(cap: usize) -> Table<E> {
        assert!((1..NIL as usize).contains(&cap), "table capacity 1..65534");
        let isize = (cap * 4).next_power_of_two();
        let mut t = Table {
            entries: (0..cap).map(|_| E::default()).collect(),
            used: vec![false; cap],
            indexed: vec![false; cap],
            hashes: vec![0; cap],
            index: vec![Place::EMPTY; isize],
            mask: isize - 1,
            prev: vec![NIL; cap],
            next: vec![NIL; cap],
            live: Ends::EMPTY,
            free: Ends::EMPTY,
            len: 0,
        };
        for s in 0..cap as u16 {
            push_last(&mut t.prev, &mut t.next, &mut t.free, s);
        }
        t
    }

    /// Calls `f` on every entry: live, remembered or free.
    pub fn for_each_entry(&mut self, f: impl FnMut(&mut E)) {
        self.entries.iter_mut().for_each(f);
    }

    /// Live entries.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is live.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every slot is live (an insert needs a removal first).
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.free.first == NIL
    }

    /// Slots in the table.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// The first slot, live or ghost, in the probe run of `hash` whose
    /// hash has the same upper half (nearly always: the same hash) and for
    /// which `eq` holds. Exact for an `eq` that tells keys apart; with
    /// one that holds for any entry, a hint the caller checks.
    #[inline(always)]
    pub fn find(&self, hash: u32, mut eq: impl FnMut(&E) -> bool) -> Option<u16> {
        let mut i = hash as usize & self.mask;
        // No entry sits farther than MAX_PROBE from its home (insert refuses,
        // unindex only shifts entries closer).
        for _ in 0..MAX_PROBE {
            let p = self.index[i];
            if p == Place::EMPTY {
                return None;
            }
            // The index only ever names indexed slots (insert and unindex keep it so).
            if p.may_be(hash) && eq(&self.entries[p.slot() as usize]) {
                return Some(p.slot());
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// Calls `f` on each slot, live or ghost, indexed under `hash` (the
    /// run `find` walks), in index order.
    pub fn each_with_hash(&self, hash: u32, mut f: impl FnMut(u16, &E)) {
        let mut i = hash as usize & self.mask;
        for _ in 0..MAX_PROBE {
            let s = self.index[i].slot();
            if s == NIL {
                return;
            }
            if self.hashes[s as usize] == hash {
                f(s, &self.entries[s as usize]);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Whether the slot holds a live entry (not free, not a ghost).
    #[inline(always)]
    pub fn is_live(&self, slot: u16) -> bool {
        self.used[slot as usize]
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

    /// A live entry (the slot came from `insert` and was not removed since).
    #[inline(always)]
    pub fn get(&self, slot: u16) -> &E {
        debug_assert!(self.used[slot as usize]);
        &self.entries[slot as usize]
    }

    /// Claims the least recently freed slot as the newest, indexed under
    /// `hash`, for the caller to fill in place: it still holds whatever its
    /// previous entry left (whose ghost it no longer is). The caller makes
    /// room first (`is_full`). `None` when the index has no place within
    /// `MAX_PROBE` of the hash's home: the slot stays free.
    #[inline(always)]
    pub fn insert(&mut self, hash: u32) -> Option<(u16, &mut E)> {
        let s = self.free.first;
        assert!(s != NIL, "insert into a full GRO table");
        if self.indexed[s as usize] {
            self.unindex(s);
        }
        let mut i = hash as usize & self.mask;
        let mut probes = 1;
        while self.index[i] != Place::EMPTY {
            if probes == MAX_PROBE {
                return None;
            }
            probes += 1;
            i = (i + 1) & self.mask;
        }
        self.hashes[s as usize] = hash;
        self.index[i] = Place::new(s, hash);
        self.indexed[s as usize] = true;
        let e = self.reclaim(s).expect("a free slot");
        Some((s, e))
    }

    /// The entry of a slot, live or not (a free one holds what its last
    /// use left, or the default).
    #[inline(always)]
    pub fn entry(&self, slot: u16) -> &E {
        &self.entries[slot as usize]
    }

    /// The entry of a ghost slot: free, still indexed under its old hash.
    #[inline(always)]
    pub fn ghost(&self, slot: u16) -> Option<&E> {
        let s = slot as usize;
        (!self.used[s] && self.indexed[s]).then(|| &self.entries[s])
    }

    /// The entry of a ghost slot, to change what its next use reads back.
    #[inline(always)]
    pub fn ghost_mut(&mut self, slot: u16) -> Option<&mut E> {
        let s = slot as usize;
        (!self.used[s] && self.indexed[s]).then(|| &mut self.entries[s])
    }

    /// Takes back a ghost's slot, if it still is one, as the newest, under
    /// the hash it had: the entry still holds what its previous use left (a
    /// flow's state, for a restart without a new one being built).
    #[inline(always)]
    pub fn reclaim(&mut self, slot: u16) -> Option<&mut E> {
        let s = slot as usize;
        if self.used[s] || !self.indexed[s] {
            return None;
        }
        unlink(&mut self.prev, &mut self.next, &mut self.free, slot);
        push_last(&mut self.prev, &mut self.next, &mut self.live, slot);
        self.used[s] = true;
        self.len += 1;
        Some(&mut self.entries[s])
    }

    /// Keeps a live entry for its next use, as the newest: what `remove`
    /// and then `reclaim` would leave, without the walk through the free
    /// list. Hands it back, in place.
    #[inline(always)]
    pub fn renew(&mut self, slot: u16) -> &mut E {
        let s = slot as usize;
        assert!(self.used[s], "renew of an empty slot");
        if self.live.last != slot {
            unlink(&mut self.prev, &mut self.next, &mut self.live, slot);
            push_last(&mut self.prev, &mut self.next, &mut self.live, slot);
        }
        &mut self.entries[s]
    }

    /// An entry, live or not, to take from or write to in place: a slot
    /// just removed, whose entry the caller still reads, or a live one
    /// whose packet leaves while the slot stays its flow's.
    #[inline(always)]
    pub fn entry_mut(&mut self, slot: u16) -> &mut E {
        &mut self.entries[slot as usize]
    }

    /// Takes an entry out, leaving its ghost; hands it back, in place, for
    /// the caller to take what it needs.
    #[inline(always)]
    pub fn remove(&mut self, slot: u16) -> &mut E {
        let s = slot as usize;
        assert!(self.used[s], "remove of an empty slot");
        self.used[s] = false;
        unlink(&mut self.prev, &mut self.next, &mut self.live, slot);
        push_last(&mut self.prev, &mut self.next, &mut self.free, slot);
        self.len -= 1;
        &mut self.entries[s]
    }

    /// Takes a slot out of the index, shifting later members of its probe
    /// run back.
    fn unindex(&mut self, slot: u16) {
        let mut i = self.hashes[slot as usize] as usize & self.mask;
        while self.index[i].slot() != slot {
            i = (i + 1) & self.mask;
        }
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let pj = self.index[j];
            let sj = pj.slot();
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
                self.index[i] = pj;
                i = j;
            }
        }
        self.index[i] = Place::EMPTY;
        self.indexed[slot as usize] = false;
    }

    /// The live slot after `s` in arrival order (`None`: the oldest), if
    /// any: a walk that may remove the slot it stands on.
    pub fn next_live(&self, s: Option<u16>) -> Option<u16> {
        let n = match s {
            None => self.live.first,
            Some(s) => self.next[s as usize],
        };
        (n != NIL).then_some(n)
    }

    /// The entry held longest.
    #[inline(always)]
    pub fn oldest(&self) -> Option<u16> {
        (self.live.first != NIL).then_some(self.live.first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn put(t: &mut Table<u32>, hash: u32, v: u32) -> u16 {
        let (s, e) = t.insert(hash).expect("room within the probe bound");
        *e = v;
        s
    }

    #[test]
    fn no_entry_sits_farther_than_the_probe_bound() {
        let mut t: Table<u32> = Table::new(64);
        for v in 0..MAX_PROBE as u32 {
            put(&mut t, 5, v);
        }
        // Another flow with the same home: refused, nothing changed.
        assert!(t.insert(5).is_none());
        assert_eq!(t.len(), MAX_PROBE);
        for v in 0..MAX_PROBE as u32 {
            assert!(t.find(5, |e| *e == v).is_some(), "{v}");
        }
        // One leaves: its ghost keeps its place until its slot is taken.
        let first = t.oldest().unwrap();
        t.remove(first);
        assert!(t.insert(5).is_none(), "the ghost still crowds the run");
        // Far homes take the never used slots; the ghost's slot is next,
        // and taking it opens the run.
        for k in 0..(64 - MAX_PROBE) as u32 {
            put(&mut t, 128 + k, 3000 + k);
        }
        let (s, e) = t.insert(5).expect("a place within the bound");
        *e = 2000;
        assert_eq!(s, first, "the ghost's slot");
        assert_eq!(t.find(5, |e| *e == 2000), Some(s));
    }

    #[test]
    fn a_home_inside_a_run_is_placed_at_its_end_within_its_own_bound() {
        let mut t: Table<u32> = Table::new(64);
        for v in 0..MAX_PROBE as u32 - 1 {
            put(&mut t, 5, v);
        }
        // The run fills 5..36: home 6 lands at 36, 30 past its home.
        let s = put(&mut t, 6, 1000);
        assert_eq!(t.find(6, |e| *e == 1000), Some(s));
        // Home 5 would need 37: 32 past it, beyond the bound.
        assert!(t.insert(5).is_none());
        // Home 7 lands at 37, 30 past its home.
        let s = put(&mut t, 7, 1001);
        assert_eq!(t.find(7, |e| *e == 1001), Some(s));
    }

    #[test]
    fn a_probe_passes_places_whose_hash_differs_in_its_upper_half() {
        let mut t: Table<u32> = Table::new(8);
        // One home, one probe run; the hashes differ only above the index's bits.
        let (a, b) = (put(&mut t, 5, 50), put(&mut t, 5 | 0x7_0000, 51));
        assert_eq!(
            t.find(5 | 0x7_0000, |_| true),
            Some(b),
            "not the first place"
        );
        assert_eq!(t.find(5, |_| true), Some(a));
        assert_eq!(t.find(5 | 0x8_0000, |_| true), None);
        t.remove(a);
        put(&mut t, 1, 10);
        assert_eq!(t.find(5 | 0x7_0000, |e| *e == 51), Some(b));
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
        assert_eq!(t.find(7, |e| *e == 70), Some(a), "a ghost is found");
        assert!(!t.is_live(a) && t.is_live(b));
        put(&mut t, 1, 10); // the never used slot 3
        let d = put(&mut t, 2, 20); // takes a, least recently freed
        assert_eq!(d, a);
        assert!(t.is_full());
        assert_eq!(t.find(7, |e| *e == 70), None, "its ghost is gone");
        assert_eq!(t.find(7, |e| *e == 71), Some(b), "after a backward shift");
        assert_eq!(*t.remove(c), 30);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn reclaim_takes_back_a_ghost_as_the_newest() {
        let mut t: Table<u32> = Table::new(4);
        let a = put(&mut t, 5, 50);
        let b = put(&mut t, 5, 51);
        t.remove(a);
        t.remove(b);
        assert_eq!(t.ghost(a).copied(), Some(50));
        assert_eq!(t.reclaim(a).copied(), Some(50), "its entry is as it was");
        assert!(t.ghost(a).is_none(), "live again");
        assert!(t.reclaim(a).is_none(), "a live slot is not free");
        assert_eq!(t.find(5, |e| *e == 50), Some(a), "under its old hash");
        assert_eq!(t.oldest(), Some(a));
        put(&mut t, 9, 90); // the never used slots go first
        put(&mut t, 9, 91);
        assert_eq!(put(&mut t, 8, 80), b, "then the least recently freed");
        assert!(t.ghost(b).is_none() && t.find(5, |e| *e == 51).is_none());
        assert_eq!(t.len(), 4);
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Model {
        Never,
        Live(u32, u32),
        Ghost(u32, u32),
    }

    proptest! {
        /// Against a model: random inserts, removes, reclaims and renewals
        /// with colliding hashes; which slot an insert takes, what is
        /// found, live or ghost, and the arrival order.
        #[test]
        fn behaves_like_a_model(ops in proptest::collection::vec((0u8..4, 0u32..16, 0u32..1000), 1..400)) {
            let cap = 8;
            let mut t: Table<u32> = Table::new(cap);
            let mut slots = [Model::Never; 8];
            let mut free: VecDeque<u16> = (0..cap as u16).collect();
            let mut order: Vec<u16> = Vec::new(); // live slots, oldest first
            let known = |slots: &[Model; 8], v: u32| {
                slots.iter().any(|m| matches!(m, Model::Live(_, x) | Model::Ghost(_, x) if *x == v))
            };
            for (op, hash, val) in ops {
                match op {
                    0 if !t.is_full() && !known(&slots, val) => {
                        let want = free.pop_front().unwrap();
                        prop_assert_eq!(put(&mut t, hash, val), want);
                        slots[want as usize] = Model::Live(hash, val);
                        order.push(want);
                    }
                    1 if !order.is_empty() => {
                        let s = order.remove(val as usize % order.len());
                        let Model::Live(h, v) = slots[s as usize] else { unreachable!() };
                        prop_assert_eq!(*t.remove(s), v);
                        slots[s as usize] = Model::Ghost(h, v);
                        free.push_back(s);
                    }
                    2 => {
                        let s = (val % cap as u32) as u16;
                        match slots[s as usize] {
                            Model::Ghost(h, v) => {
                                prop_assert_eq!(t.ghost(s).copied(), Some(v));
                                prop_assert_eq!(t.reclaim(s).copied(), Some(v));
                                slots[s as usize] = Model::Live(h, v);
                                free.retain(|&f| f != s);
                                order.push(s);
                            }
                            Model::Live(..) => prop_assert!(t.ghost(s).is_none()),
                            Model::Never => {
                                prop_assert!(t.ghost(s).is_none());
                                prop_assert!(t.reclaim(s).is_none(), "never indexed");
                            }
                        }
                    }
                    3 if !order.is_empty() => {
                        let s = order.remove(val as usize % order.len());
                        let Model::Live(_, v) = slots[s as usize] else { unreachable!() };
                        prop_assert_eq!(*t.renew(s), v);
                        order.push(s);
                    }
                    _ => {}
                }
                prop_assert_eq!(t.len(), order.len());
                let mut walked = Vec::new();
                let mut at = t.next_live(None);
                while let Some(s) = at {
                    walked.push(s);
                    at = t.next_live(Some(s));
                }
                prop_assert_eq!(&walked, &order, "live slots, oldest first");
                for (s, m) in slots.iter().enumerate() {
                    match *m {
                        Model::Live(h, v) | Model::Ghost(h, v) => {
                            prop_assert_eq!(t.find(h, |e| *e == v), Some(s as u16));
                            prop_assert_eq!(t.is_live(s as u16), matches!(m, Model::Live(..)));
                        }
                        Model::Never => prop_assert!(!t.is_live(s as u16)),
                    }
                }
            }
        }
    }
}
