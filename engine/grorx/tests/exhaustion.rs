//! An RX pool run dry by a stage that keeps every packet: the port counts
//! what it could not receive for want of an mbuf (rx_nombuf), and when the
//! stage lets go, receiving resumes and every mbuf comes back.

mod common;

use grorx::port_spec::PortSpec;
use grorx::run::{self, EalSetup, RunOptions};
use grorx::stage::{Ctx, Stage};
use grorx::Skb;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Drops that net_pcap counts before the stage lets go.
const NOMBUF_BEFORE_RELEASE: u64 = 1000;

/// Keeps every packet until the port has counted `NOMBUF_BEFORE_RELEASE`
/// failed allocations, then lets them all go and consumes what follows.
struct KeepAll {
    port: u16,
    kept: Vec<Skb>,
    released: bool,
    /// Packets kept at the release, and the port's rx_nombuf then.
    at_release: Arc<(AtomicU64, AtomicU64)>,
}

impl Stage for KeepAll {
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        if self.released {
            ctx.consume(skb);
        } else {
            self.kept.push(skb);
        }
    }

    fn end_of_poll(&mut self, ctx: &mut Ctx<'_>) {
        if self.released {
            return;
        }
        let nombuf = grorx::port::stats(self.port).rx_nombuf;
        if nombuf >= NOMBUF_BEFORE_RELEASE {
            self.at_release.0.store(self.kept.len() as u64, Relaxed);
            self.at_release.1.store(nombuf, Relaxed);
            for s in self.kept.drain(..) {
                ctx.consume(s);
            }
            self.released = true;
        }
    }
}

#[test]
fn a_dry_pool_is_counted_as_no_mbuf_and_receiving_resumes_when_mbufs_return() {
    let _e = common::eal();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.pcap");
    let frames = 20_000u64;
    common::write_pcap(&path, &vec![vec![0u8; 60]; frames as usize]);
    let spec = format!("net_pcap9,rx_pcap={}", path.display());
    let at_release = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let opts = RunOptions {
        eal: EalSetup::Existing,
        ports: vec![PortSpec::parse(&spec).unwrap()],
        duration: Some(2.0),
        ..RunOptions::default()
    };
    let r = run::start_with(&opts, |q| {
        Ok(KeepAll {
            port: q.port,
            kept: Vec::with_capacity(1 << 16),
            released: false,
            at_release: at_release.clone(),
        })
    })
    .unwrap()
    .wait()
    .unwrap();

    let (kept, nombuf_then) = (at_release.0.load(Relaxed), at_release.1.load(Relaxed));
    let pool = r.pools.iter().find(|p| p.role == "rx").unwrap();
    assert!(
        nombuf_then >= NOMBUF_BEFORE_RELEASE,
        "the stage let go: {}",
        r.text()
    );
    assert!(
        kept > pool.size as u64 / 2 && kept <= pool.size as u64,
        "the stage held most of the pool ({kept} of {})",
        pool.size
    );
    let nombuf = r.ports[0].stats.rx_nombuf;
    assert!(nombuf >= nombuf_then, "{}", r.text());
    // net_pcap drops the frame it could not put in an mbuf: each frame was
    // received or counted as no-mbuf.
    assert_eq!(r.rx_packets + nombuf, frames, "{}", r.text());
    assert!(
        r.rx_packets > kept + 1000,
        "receiving resumed after the release: {} received, {kept} were held",
        r.rx_packets
    );
    assert_eq!(r.stage.consumed, r.delivered.packets);
    assert_eq!(
        (r.mbufs_leaked, r.mbufs_freed_twice),
        (0, 0),
        "{:?}",
        r.pools
    );
}
