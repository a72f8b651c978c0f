//! A stateful firewall in the wire: two ports forwarded both ways, traffic
//! from the inside always let out, traffic from the outside let in only when
//! it belongs to a connection the inside opened (TCP and UDP, by their five
//! tuple). ARP passes both ways; other IPv4 and IPv6 pass from the inside
//! and are dropped from the outside. Everything dropped is counted by reason.
//!
//!     cargo run --release -p grorx-examples --example stateful_firewall -- INSIDE OUTSIDE [SECS]
//!
//! e.g. `net_af_packet0,iface=h0 net_af_packet1,iface=h1 60` on two veths
//! (the README's bump-in-the-wire recipe), or two PCI ports. It prints a
//! summary and, last, one JSON line of its counts.
//!
//! What it shows:
//! - the two-way path: RX port i forwards to the other (`stage.outputs` are the
//!   RX ports in the other order), each queue through a `Forwarder` on its
//!   worker's own TX queue (merged packets cut back into their segments);
//! - state kept per connection in both directions, shared by every queue of
//!   both ports, without a lock: a table of atomics (an open-addressing hash
//!   of 64-bit connection keys and the second each was last seen), which
//!   the inside's queues write and both sides read. A flow's two directions
//!   may land on different lcores; they still meet in the table;
//! - GRO first: the firewall looks at one header per merged packet, not per
//!   segment (a bulk flow's 12-17 segments cost one lookup).
//!
//! The key is a keyed 64-bit hash of the tuple, not the tuple itself: a
//! stranger's packet is let in by a collision with probability about 2^-64
//! per lookup, given a per-run random key. A production firewall would store
//! the whole tuple (and track TCP state, and more than IPv4).

use grorx::forward::{Encap, Forwarder};
use grorx::{start_with, Ctx, PortSpec, QueueSetup, RunOptions, Skb, Stage, StageOptions};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;
use std::time::Instant;

/// Connections the table holds (a power of two), and how far a key looks.
const SLOTS: usize = 1 << 16;
const PROBE: usize = 16;
/// A connection unseen this many seconds is gone (its slot reusable).
const IDLE_S: u32 = 120;

// Drop reasons, in `drop_reasons` order.
const NOT_ESTABLISHED: usize = 0;
const TABLE_FULL: usize = 1;
const NOT_TRACKED: usize = 2;
const REASONS: &[&str] = &["not established", "table full", "not tracked"];

/// The connections the inside opened: shared by every queue's stage.
struct Conns {
    /// 0: empty; else a connection's key.
    keys: Box<[AtomicU64]>,
    /// When each was last seen, in seconds since the run began (+1).
    seen: Box<[AtomicU32]>,
    hasher: std::collections::hash_map::RandomState,
    opened: AtomicU64,
}

impl Conns {
    fn new() -> Conns {
        Conns {
            keys: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            seen: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            hasher: Default::default(),
            opened: AtomicU64::new(0),
        }
    }

    /// A connection's key, the same from both sides (never 0).
    fn key(&self, t: &Tuple) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(&[t.proto]);
        h.write(&t.inside.0);
        h.write(&t.outside.0);
        h.write_u16(t.inside.1);
        h.write_u16(t.outside.1);
        h.finish() | 1
    }

    fn slots(key: u64) -> impl Iterator<Item = usize> {
        (0..PROBE).map(move |i| (key as usize).wrapping_add(i) & (SLOTS - 1))
    }

    /// Marks the connection seen now, first adding it when it is new; false
    /// when its probe window is full of live connections.
    fn open(&self, key: u64, now: u32) -> bool {
        if self.touch(key, now) {
            return true;
        }
        for i in Self::slots(key) {
            let old = self.keys[i].load(Relaxed);
            let stale = old != 0 && now.saturating_sub(self.seen[i].load(Relaxed)) > IDLE_S;
            // Claim an empty or a stale slot; another lcore may race us to it.
            if (old == 0 || stale)
                && self.keys[i]
                    .compare_exchange(old, key, Release, Relaxed)
                    .is_ok()
            {
                self.seen[i].store(now, Relaxed);
                self.opened.fetch_add(1, Relaxed);
                return true;
            }
        }
        false
    }

    /// Whether the connection is known and live; if so, it was seen now.
    fn touch(&self, key: u64, now: u32) -> bool {
        for i in Self::slots(key) {
            if self.keys[i].load(Relaxed) == key {
                let seen = self.seen[i].load(Relaxed);
                if now.saturating_sub(seen) > IDLE_S {
                    return false;
                }
                // A store a second at most: the line stays shared while a
                // flow is busy.
                if seen != now {
                    self.seen[i].store(now, Relaxed);
                }
                return true;
            }
        }
        false
    }
}

/// A TCP or UDP conversation, oriented inside -> outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tuple {
    proto: u8,
    inside: ([u8; 4], u16),
    outside: ([u8; 4], u16),
}

/// What a frame is, to the firewall.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// ARP: let through both ways (nothing works without it).
    Arp,
    /// TCP or UDP over IPv4, as (source, destination).
    Flow(u8, ([u8; 4], u16), ([u8; 4], u16)),
    /// Anything else (ICMP, IPv6, fragments, VLAN-tagged, short frames).
    Other,
}

/// Reads the headers of an untagged Ethernet frame.
fn classify(f: &[u8]) -> Kind {
    if f.len() < 14 {
        return Kind::Other;
    }
    match u16::from_be_bytes([f[12], f[13]]) {
        0x0806 => return Kind::Arp,
        0x0800 => {}
        _ => return Kind::Other,
    }
    let ip = &f[14..];
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Kind::Other;
    }
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let (proto, frag) = (ip[9], u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff);
    // A later fragment has no ports: not a flow this firewall can place.
    if !(proto == 6 || proto == 17) || frag != 0 || ip.len() < ihl + 4 {
        return Kind::Other;
    }
    let addr = |at: usize| [ip[at], ip[at + 1], ip[at + 2], ip[at + 3]];
    let port = |at: usize| u16::from_be_bytes([ip[ihl + at], ip[ihl + at + 1]]);
    Kind::Flow(proto, (addr(12), port(0)), (addr(16), port(2)))
}

struct Firewall {
    /// Whether this queue receives from the inside.
    inside: bool,
    /// To the other port.
    fwd: Forwarder,
    conns: Arc<Conns>,
    started: Instant,
    /// Seconds since the run began (+1), read once per poll.
    now: u32,
    passed: u64,
    tally: Arc<AtomicU64>,
}

impl Firewall {
    fn new(q: &QueueSetup, conns: Arc<Conns>, tally: Arc<AtomicU64>) -> anyhow::Result<Firewall> {
        // outputs are [outside, inside]: the queue forwards to the other one.
        let inside_port = q.output(1).expect("two outputs");
        let inside = q.port == inside_port;
        Ok(Firewall {
            inside,
            fwd: q.forwarder(if inside { 0 } else { 1 }, Encap::None)?,
            conns,
            started: Instant::now(),
            now: 1,
            passed: 0,
            tally,
        })
    }

    /// Which reason to drop the frame for, if any.
    fn verdict(&self, frame: &[u8]) -> Option<usize> {
        match (classify(frame), self.inside) {
            (Kind::Arp, _) | (Kind::Other, true) => None,
            (Kind::Other, false) => Some(NOT_TRACKED),
            (Kind::Flow(proto, src, dst), true) => {
                let t = Tuple {
                    proto,
                    inside: src,
                    outside: dst,
                };
                (!self.conns.open(self.conns.key(&t), self.now)).then_some(TABLE_FULL)
            }
            (Kind::Flow(proto, src, dst), false) => {
                let t = Tuple {
                    proto,
                    inside: dst,
                    outside: src,
                };
                (!self.conns.touch(self.conns.key(&t), self.now)).then_some(NOT_ESTABLISHED)
            }
        }
    }
}

impl Stage for Firewall {
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        match self.verdict(skb.data()) {
            None => {
                self.passed += 1;
                self.fwd.push(skb);
            }
            Some(reason) => ctx.drop(skb, reason),
        }
    }

    fn end_of_poll(&mut self, _ctx: &mut Ctx<'_>) {
        self.fwd.flush();
        self.now = self.started.elapsed().as_secs() as u32 + 1;
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        self.fwd.finish();
        self.tally.fetch_add(self.passed, Relaxed);
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        REASONS
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        anyhow::bail!(
            "give the inside and the outside port, and optionally seconds: \
             stateful_firewall net_af_packet0,iface=h0 net_af_packet1,iface=h1 60"
        );
    }
    let port = |s: &str| PortSpec::parse(s).map_err(anyhow::Error::msg);
    let (inside, outside) = (port(&args[0])?, port(&args[1])?);
    let opts = RunOptions {
        // The instance's name (EAL's file prefix): one run at a time holds it.
        name: std::env::var("GRORX_NAME").unwrap_or_else(|_| "stateful-firewall".into()),
        ports: vec![inside.clone(), outside.clone()],
        stage: StageOptions {
            outputs: vec![outside, inside],
            ..StageOptions::default()
        },
        duration: Some(args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(60.0)),
        ..RunOptions::default()
    };
    let conns = Arc::new(Conns::new());
    let passed = Arc::new(AtomicU64::new(0));
    let running = start_with(&opts, |q| Firewall::new(q, conns.clone(), passed.clone()))?;
    let report = running.wait()?;
    let dropped = &report.stage.dropped;
    println!(
        "{} packets in ({} segments), {} passed, connections opened {}, dropped {:?}; mbufs leaked {}",
        report.delivered.packets,
        report.rx_packets,
        passed.load(Relaxed),
        conns.opened.load(Relaxed),
        dropped,
        report.mbufs_leaked
    );
    println!(
        "{}",
        serde_json::json!({
            "passed": passed.load(Relaxed),
            "connections_opened": conns.opened.load(Relaxed),
            "dropped": dropped,
            "gro_segments_in": report.rx_packets,
            "delivered": report.delivered.packets,
            "mbufs_leaked": report.mbufs_leaked,
        })
    );
    grorx::shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(proto: u8, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = proto;
        f[14 + 12..14 + 16].copy_from_slice(&src);
        f[14 + 16..14 + 20].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn headers_are_read_as_flows_arp_or_other() {
        let f = frame(6, [10, 0, 0, 1], 40000, [10, 0, 0, 2], 80);
        assert_eq!(
            classify(&f),
            Kind::Flow(6, ([10, 0, 0, 1], 40000), ([10, 0, 0, 2], 80))
        );
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(classify(&arp), Kind::Arp);
        assert_eq!(
            classify(&frame(1, [1; 4], 0, [2; 4], 0)),
            Kind::Other,
            "ICMP"
        );
        let mut frag = f.clone();
        frag[14 + 7] = 8;
        assert_eq!(
            classify(&frag),
            Kind::Other,
            "a later fragment has no ports"
        );
        assert_eq!(classify(&f[..30]), Kind::Other, "cut short");
    }

    #[test]
    fn the_outside_gets_in_only_on_what_the_inside_opened() {
        let c = Conns::new();
        let out = Tuple {
            proto: 6,
            inside: ([10, 0, 0, 1], 40000),
            outside: ([10, 0, 0, 2], 80),
        };
        assert!(!c.touch(c.key(&out), 1), "nothing opened yet");
        assert!(c.open(c.key(&out), 1));
        assert!(c.touch(c.key(&out), 2), "the reply belongs to it");
        let udp = Tuple { proto: 17, ..out };
        assert!(
            !c.touch(c.key(&udp), 2),
            "another protocol is another connection"
        );
        assert!(!c.touch(c.key(&out), 3 + IDLE_S), "idle too long: gone");
        assert_eq!(c.opened.load(Relaxed), 1);
    }

    #[test]
    fn a_full_probe_window_refuses_and_a_stale_slot_is_reused() {
        let c = Conns::new();
        // Keys that all start at the same slot.
        let keys: Vec<u64> = (0..=PROBE as u64).map(|i| 1 | (i << 40)).collect();
        for &k in &keys[..PROBE] {
            assert!(c.open(k, 1));
        }
        assert!(!c.open(keys[PROBE], 1), "every slot it may use is live");
        assert!(c.open(keys[PROBE], 2 + IDLE_S), "a stale one is taken over");
    }
}
