//! Which ports the workers may poll, and the handshake that tells whoever
//! closes a port that no worker is inside its RX burst any more.
//!
//! A port is polled while every bit of its `allow` word is set: `LINK` (its
//! link is up) and `HELD` (for a PMD that tears its queues down on EAL's
//! interrupt thread: that thread is held, see `run::link`). Whoever changes
//! a word bumps the epoch; a worker loads the epoch once per loop (a plain
//! load on x86, from a line nobody writes in steady state), and only when it
//! moved re-reads the words of its ports and acknowledges the epoch in its
//! own line. `close` returns once every worker has acknowledged: its next
//! RX call on that port, if any, comes after the port is allowed again.
//!
//! Output ports have words too: a stage transmits on one only while its
//! word allows it ([`TxGate`], read before each transmit burst). The
//! acknowledgement covers those calls as well (a worker acknowledges at the
//! top of its loop, after the stage calls of the loop before), so a closer
//! knows no transmit burst is under way either.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The port's link is up.
pub const LINK: u8 = 1;
/// The interrupt thread is held (always set on ports that need no holding).
pub const HELD: u8 = 2;
const ALL: u8 = LINK | HELD;

/// What a worker acknowledges when it has left for good.
const GONE: u64 = u64::MAX;

#[repr(align(128))]
#[derive(Default)]
struct Line(AtomicU64);

/// The allow words of a run's ports and its workers' acknowledgements.
pub struct PollGate {
    epoch: Line,
    /// Indexed by port id.
    allow: Box<[AtomicU8]>,
    /// One per worker, each in its own line.
    acks: Box<[Line]>,
}

impl PollGate {
    /// Ports `0..=max_port` all allowed, for `workers` workers.
    pub fn new(max_port: u16, workers: usize) -> PollGate {
        PollGate {
            epoch: Line(AtomicU64::new(1)),
            allow: (0..=max_port).map(|_| AtomicU8::new(ALL)).collect(),
            acks: (0..workers).map(|_| Line::default()).collect(),
        }
    }

    /// The epoch now (a worker's once-per-loop look).
    #[inline(always)]
    pub fn epoch(&self) -> u64 {
        // Acquire: the allow words written before the bump are visible to
        // the re-read that follows.
        self.epoch.0.load(Ordering::Acquire)
    }

    /// Whether port `id` may be polled (re-read after the epoch moved).
    #[inline]
    pub fn polls(&self, id: u16) -> bool {
        self.allow
            .get(id as usize)
            .is_some_and(|a| a.load(Ordering::Relaxed) == ALL)
    }

    /// Worker `w` has seen `epoch` and acts on it from now on.
    #[inline]
    pub fn ack(&self, w: usize, epoch: u64) {
        // Release: the worker's RX calls before this are ordered before a
        // closer's acquire load that sees it.
        self.acks[w].0.store(epoch, Ordering::Release);
    }

    /// Worker `w` polls no more (its loop ended): nobody waits for it.
    pub fn leave(&self, w: usize) {
        self.ack(w, GONE);
    }

    /// Sets `bit` of port `id`; the workers pick it up at their next loop.
    pub fn open(&self, id: u16, bit: u8) {
        if let Some(a) = self.allow.get(id as usize) {
            a.fetch_or(bit, Ordering::Relaxed);
            self.bump();
        }
    }

    /// Clears `bit` of port `id` without waiting (see `quiesce`).
    pub fn clear(&self, id: u16, bit: u8) -> u64 {
        if let Some(a) = self.allow.get(id as usize) {
            a.fetch_and(!bit, Ordering::Relaxed);
        }
        self.bump()
    }

    /// Clears `bit` of port `id` and returns once no worker is inside an RX
    /// call on it, nor will be until the bit is set again.
    pub fn close(&self, id: u16, bit: u8) {
        let e = self.clear(id, bit);
        self.quiesce(e);
    }

    /// Whether `bit` of port `id` is set.
    pub fn is_set(&self, id: u16, bit: u8) -> bool {
        self.allow
            .get(id as usize)
            .is_some_and(|a| a.load(Ordering::Relaxed) & bit != 0)
    }

    /// Makes every worker look at its ports and its stop flag again (a
    /// worker reads its stop flag only when the epoch moved).
    pub fn wake(&self) {
        self.bump();
    }

    /// Waits until every worker has acknowledged `epoch` or left. Workers
    /// look once per loop, so this takes about one loop (microseconds);
    /// it sleeps between looks once it has waited a while.
    pub fn quiesce(&self, epoch: u64) {
        let mut spins = 0u32;
        while self
            .acks
            .iter()
            .any(|a| a.0.load(Ordering::Acquire) < epoch)
        {
            spins += 1;
            if spins < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    fn bump(&self) -> u64 {
        // Release: the allow word changed before is seen by a worker that
        // loads this epoch (or a later one: the bumps form one release
        // sequence).
        self.epoch.0.fetch_add(1, Ordering::Release) + 1
    }
}

/// Whether a stage may transmit on one output port now (see the module's
/// comment): a relaxed load of the port's word, once per transmit burst.
#[derive(Clone)]
pub struct TxGate {
    gate: Arc<PollGate>,
    port: u16,
}

impl TxGate {
    /// The gate of `port` in `gate`.
    pub fn new(gate: Arc<PollGate>, port: u16) -> TxGate {
        TxGate { gate, port }
    }

    /// Whether the port may be transmitted on.
    #[inline(always)]
    pub fn open(&self) -> bool {
        self.gate.polls(self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_port_is_polled_only_with_every_bit_set() {
        let g = PollGate::new(2, 0);
        assert!(g.polls(1));
        g.close(1, HELD);
        assert!(!g.polls(1) && g.polls(0) && g.polls(2));
        g.close(1, LINK);
        g.open(1, HELD);
        assert!(!g.polls(1), "link still down");
        g.open(1, LINK);
        assert!(g.polls(1));
        assert!(!g.polls(7), "an unknown port is never polled");
    }

    #[test]
    fn after_close_no_worker_enters_the_port_until_it_opens() {
        let g = Arc::new(PollGate::new(0, 1));
        let stop = Arc::new(AtomicBool::new(false));
        // Stands for the worker's RX call on port 0.
        let inside = Arc::new(AtomicBool::new(false));
        let worker = {
            let (g, stop, inside) = (g.clone(), stop.clone(), inside.clone());
            std::thread::spawn(move || {
                let (mut seen, mut polls) = (0, false);
                while !stop.load(Ordering::Relaxed) {
                    let e = g.epoch();
                    if e != seen {
                        seen = e;
                        polls = g.polls(0);
                        g.ack(0, e);
                    }
                    if polls {
                        inside.store(true, Ordering::SeqCst);
                        std::hint::spin_loop();
                        inside.store(false, Ordering::SeqCst);
                    }
                }
                g.leave(0);
            })
        };
        for _ in 0..2000 {
            g.close(0, LINK);
            for _ in 0..50 {
                assert!(!inside.load(Ordering::SeqCst), "polled a closed port");
            }
            g.open(0, LINK);
        }
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        // A worker that left never holds anyone up.
        g.close(0, LINK);
    }
}
