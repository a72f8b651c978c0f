//! A whole poll at once: with the burst in hand, GRO can tell that a
//! segment has nothing to merge with. When everything held leaves at the
//! poll's end (`end_of_poll`), a segment that starts a packet can only merge
//! with segments after it in the same burst; if none of them can be of its
//! flow, holding it would only delay it, so it leaves at once
//! (`Pass::Alone`), without a table entry, a head or a flush. Traffic of
//! short flows (RPCs, scans, many flows one segment each) pays no more than
//! the lookup that says the flow is new.
//!
//! "Can be of its flow" is read cheaply: each packet's addresses and ports,
//! at the offsets of a layout seen before, folded into one of 1024 buckets;
//! a segment whose bucket no later packet shares is alone. A wrong answer
//! errs one way only: packets of other flows sharing a bucket (or frames
//! of other layouts read at the wrong offsets) make a segment look
//! accompanied, and it is held as without the look-ahead; a segment of the
//! same flow and layout always shares its bucket, so no merge is lost, and
//! leaving earlier keeps every flow's order.
//!
//! The buckets are filled only when at least one in sixteen packets of
//! the previous poll left alone (held and flushed as one segment with
//! nothing of their flow met, or passed alone): bulk traffic, whose
//! packets merge or are ended by their own flow's next segment, never pays
//! for them, nor a flow whose poll ends with the first segment of its next
//! packet.

use crate::gro::*;

/// The most packets one look-ahead covers; a larger burst is taken without.
pub const LOOK_MAX: usize = 256;

/// Buckets: 2^10, so that a burst of 32 packets of as many flows seldom
/// puts two in one.
const BUCKET_BITS: u32 = 10;

/// A poll is looked ahead in when at least one in this many packets of
/// the last left alone: the buckets cost each packet of a poll about what
/// one in sixteen leaving alone saves (its entry, head and flush).
const ALONE_SHARE: u32 = 16;

/// Where a flow's addresses and ports sit (the IP and TCP header offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct At {
    l3: u16,
    l4: u16,
    ipv6: bool,
}

impl At {
    fn of(t: &Tcp) -> At {
        At {
            l3: t.l3,
            l4: t.l4,
            ipv6: t.ipv6,
        }
    }

    /// The bucket of a frame's addresses and ports read at these offsets
    /// (bucket 0 for a frame too short to have them).
    #[inline(always)]
    fn bucket(self, b: &[u8]) -> u16 {
        let word = |f: field::Field| {
            b.get(f)
                .map_or(0, |w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        };
        // The last word of each address (IPv4: the whole of each).
        let addrs = field::at(
            self.l3 as usize,
            if self.ipv6 { ipv6::ADDRS } else { ipv4::ADDRS },
        );
        let (src, dst) = (addrs.start + addrs.len() / 2 - 4, addrs.end - 4);
        let x = word(src..src + 4)
            ^ word(dst..dst + 4).rotate_left(16)
            ^ word(field::at(self.l4 as usize, tcp::PORTS));
        (x.wrapping_mul(0x9e37_79b9) >> (32 - BUCKET_BITS)) as u16
    }
}

/// The look-ahead over one burst.
pub(in crate::gro) struct Look {
    /// Buckets are filled for the burst being taken.
    on: bool,
    /// The layout buckets are read at; `next_at` the one the latest
    /// packet that left alone had, for the next burst.
    at: At,
    next_at: At,
    /// Packets that left alone since the last burst began.
    alone: u32,
    /// Packets in the last burst taken whole.
    polled: u32,
    /// Packets of the burst taken so far.
    pos: usize,
    /// The bucket of the packet being taken.
    cur: u16,
    /// Each packet's bucket.
    bucket: [u16; LOOK_MAX],
    /// Packets of each bucket still to be taken after the current one.
    left: [u16; 1 << BUCKET_BITS],
}

impl Default for Look {
    fn default() -> Self {
        Look {
            on: false,
            at: At::default(),
            next_at: At::default(),
            alone: 0,
            polled: 0,
            pos: 0,
            cur: 0,
            bucket: [0; LOOK_MAX],
            left: [0; 1 << BUCKET_BITS],
        }
    }
}

impl Look {
    /// With the buckets on, the burst's next packet is taken: one fewer
    /// left in its bucket, which is the current one.
    #[inline(always)]
    fn take_next(&mut self) {
        let b = self.bucket[self.pos];
        self.left[b as usize] -= 1;
        self.cur = b;
        self.pos += 1;
    }

    /// With the buckets on, the burst's next `n` packets were taken at
    /// once (a run merged into the current packet).
    #[inline(always)]
    pub(in crate::gro) fn take_run(&mut self, n: usize) {
        if self.on {
            for _ in 0..n {
                self.take_next();
            }
        }
    }

    /// The burst's next packet is taken with the current one (a pair's
    /// second segment).
    #[inline(always)]
    pub(in crate::gro) fn take_with_current(&mut self) {
        if self.on {
            self.take_next();
        }
    }

    /// A packet of layout `t` left alone (held and flushed as one segment,
    /// nothing of its flow met; or passed): the next burst is looked at
    /// with its layout.
    #[inline(always)]
    pub(in crate::gro) fn left_alone(&mut self, t: &Tcp) {
        // Not reset while bursts are taken packet by packet (held across
        // polls): it may count for long.
        self.alone = self.alone.saturating_add(1);
        self.next_at = At::of(t);
    }

    /// Whether a segment of layout `t` that would start a packet has no
    /// later packet of the burst in its bucket.
    #[inline(always)]
    pub(in crate::gro) fn alone(&mut self, t: &Tcp) -> bool {
        if !self.on {
            return false;
        }
        let at = At::of(t);
        if at != self.at {
            // Held; its flush teaches the next burst its layout.
            return false;
        }
        self.left[self.cur as usize] == 0
    }
}

impl<B: GroBuf> Gro<B> {
    /// Whether a segment of layout `t` that would start a packet leaves
    /// alone instead, as nothing later in its poll can join it; if so, the
    /// next poll is looked at with its layout.
    #[inline(always)]
    pub(in crate::gro) fn leaves_alone(&mut self, t: &Tcp) -> bool {
        if !self.look.alone(t) {
            return false;
        }
        self.look.left_alone(t);
        // No slot to look in first for the next segment.
        self.last = None;
        self.first = None;
        true
    }

    /// `leaves_alone` for a head about to start a packet in its flow's slot
    /// `s`, a ghost or the live slot its packet just left (the fast path's
    /// `head_at`), whose layout is read only while a poll is looked ahead
    /// in.
    #[inline(always)]
    pub(in crate::gro) fn leaves_alone_at(&mut self, s: u16) -> bool {
        if !self.look.on {
            return false;
        }
        let t = self.table.entry(s).core.t;
        self.leaves_alone(&t)
    }

    /// Whether `receive_poll` would look ahead in the next poll (at least
    /// one in `ALONE_SHARE` of the last one's packets left alone; no
    /// reorder window). When it would not, it takes each packet as
    /// `receive` does.
    #[inline(always)]
    pub fn looks_ahead(&self) -> bool {
        let look = &self.look;
        let share = look.polled.div_ceil(ALONE_SHARE).max(1);
        look.alone >= share && self.reorder.is_none()
    }

    /// Takes one poll's packets, in arrival order, as `receive` takes each
    /// (`burst` is left empty, its capacity kept). The caller must then let
    /// everything held go (`end_of_poll` or `flush_all`) before the next
    /// poll: a segment that starts a packet and that no later packet of
    /// the burst can join then leaves at once (`Pass::Alone`). A caller
    /// that holds packets across polls (`flush_older`) takes them with
    /// `receive_burst`: taken whole, such a segment would leave before a
    /// later poll's segments could join it (each flow's order is kept
    /// either way).
    pub fn receive_poll(&mut self, burst: &mut Vec<B>, now: u64, out: &mut impl FnMut(B)) {
        self.take(burst, now, true, out)
    }

    /// Takes one poll's packets, in arrival order, each as `receive` takes
    /// it (`burst` is left empty, its capacity kept): for a caller that
    /// holds packets across polls.
    pub fn receive_burst(&mut self, burst: &mut Vec<B>, now: u64, out: &mut impl FnMut(B)) {
        self.take(burst, now, false, out)
    }

    /// A burst whole (`receive_poll`) or packet by packet (`receive_burst`).
    #[inline(always)]
    fn take(&mut self, burst: &mut Vec<B>, now: u64, whole: bool, out: &mut impl FnMut(B)) {
        let on = whole && self.looks_ahead() && burst.len() <= LOOK_MAX;
        if whole {
            let look = &mut self.look;
            look.on = on;
            look.alone = 0;
            look.polled = burst.len() as u32;
            look.pos = 0;
            look.at = look.next_at;
        }
        if on {
            let look = &mut self.look;
            for (i, p) in burst.iter().enumerate() {
                let b = look.at.bucket(p.head());
                look.bucket[i] = b;
                look.left[b as usize] += 1;
            }
        }
        // Runs of one flow (what bulk traffic's bursts hold) go through
        // `merge_run` after their first segment. With the reorder window
        // on too: a flow it works on has its template off, and a run
        // stops at a segment ahead of a gap.
        // A poll taken whole, without the reorder window: a head may take
        // the next packet with it at once (`try_pair`).
        let pairs = whole && self.reorder.is_none();
        let mut rest = burst.drain(..);
        while let Some(p) = rest.next() {
            if on {
                self.look.take_next();
            }
            let next = if pairs { Some(&mut rest) } else { None };
            self.receive_before(p, next, now, out);
            if let Some(s) = self.first {
                self.merge_run(s, &mut rest, out);
            }
        }
        // Every bucket is back to 0: nothing to clear.
        self.look.on = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_of_packets_left_alone_stops_at_its_largest() {
        // Bursts taken packet by packet never reset it.
        let mut look = Look {
            alone: u32::MAX - 1,
            ..Look::default()
        };
        for _ in 0..2 {
            look.left_alone(&Tcp::default());
        }
        assert_eq!(look.alone, u32::MAX);
    }
}
