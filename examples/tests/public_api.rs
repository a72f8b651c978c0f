//! The library from outside, through its public API only: a stage of our
//! own on two net_null ports transmits some packets on the other port,
//! drops some under named reasons, keeps some across polls, consumes the
//! rest; the report accounts for every packet and every mbuf comes back.

use grorx::{start_with, Ctx, EalSetup, PortSpec, QueueSetup, RunOptions, Skb, Stage, TxQueue};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What the stages did, all queues, added up when they finish.
#[derive(Default)]
struct Tally {
    seen: AtomicU64,
    sent: AtomicU64,
    tx_dropped: AtomicU64,
    kept_max: AtomicU64,
}

struct Mixed {
    n: u64,
    tx: TxQueue,
    /// Packets held back across polls (up to 16), released at the end.
    kept: Vec<Skb>,
    kept_max: usize,
    tally: Arc<Tally>,
}

const ODD: usize = 0;
const SEVENTH: usize = 1;

impl Mixed {
    fn new(q: &QueueSetup, tally: Arc<Tally>) -> anyhow::Result<Mixed> {
        // net_null0 is port 0, net_null1 port 1: send to the other one.
        let other = 1 - q.port;
        Ok(Mixed {
            n: 0,
            tx: q.tx(other)?,
            kept: Vec::with_capacity(16),
            kept_max: 0,
            tally,
        })
    }
}

impl Stage for Mixed {
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        self.n += 1;
        match self.n % 8 {
            0 | 2 | 4 => self.tx.push(skb),
            1 => ctx.drop(skb, ODD),
            7 => ctx.drop(skb, SEVENTH),
            5 if self.kept.len() < 16 => {
                self.kept.push(skb);
                self.kept_max = self.kept_max.max(self.kept.len());
            }
            _ => ctx.consume(skb),
        }
    }

    fn end_of_poll(&mut self, ctx: &mut Ctx<'_>) {
        self.tx.flush();
        if self.n % 1024 < 8 {
            // Now and then, let what was kept go (consumed, counted).
            for s in self.kept.drain(..) {
                ctx.consume(s);
            }
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.tx.flush();
        for s in self.kept.drain(..) {
            ctx.consume(s);
        }
        let t = &self.tally;
        t.seen.fetch_add(self.n, Relaxed);
        t.sent.fetch_add(self.tx.stats().packets, Relaxed);
        t.tx_dropped.fetch_add(self.tx.stats().dropped, Relaxed);
        t.kept_max.fetch_max(self.kept_max as u64, Relaxed);
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        &["odd", "seventh"]
    }
}

#[test]
fn a_stage_of_our_own_accounts_for_every_packet_and_mbuf() {
    let opts = RunOptions {
        ports: vec![
            PortSpec::parse("net_null0").unwrap(),
            PortSpec::parse("net_null1").unwrap(),
        ],
        duration: Some(1.0),
        eal: EalSetup::Start {
            user_args: vec![],
            no_huge: true,
        },
        ..RunOptions::default()
    };
    let tally = Arc::new(Tally::default());
    let running = start_with(&opts, |q| Mixed::new(q, tally.clone())).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let live = running.stats();
    assert_eq!(live.queues.len(), 2, "one queue per port");
    assert!(live.rx().0 > 0, "live stats move while it runs");
    let r = running.wait().unwrap();
    grorx::shutdown();

    assert!(r.rx_packets > 10_000, "{}", r.rx_packets);
    assert_eq!(r.stage.name, "Mixed");
    let seen = tally.seen.load(Relaxed);
    assert_eq!(
        seen, r.delivered.packets,
        "the stage saw every packet GRO delivered"
    );
    let dropped = |k: &str| r.stage.dropped.get(k).copied().unwrap_or(0);
    let sent = tally.sent.load(Relaxed) + tally.tx_dropped.load(Relaxed);
    assert_eq!(
        r.stage.consumed + dropped("odd") + dropped("seventh") + sent,
        seen,
        "consumed + dropped + transmitted = delivered: {:?}",
        r.stage
    );
    assert!(dropped("odd") > 0 && dropped("seventh") > 0);
    assert!(
        tally.kept_max.load(Relaxed) > 0,
        "packets were kept across polls"
    );
    assert_eq!(
        r.mbufs_leaked, 0,
        "every mbuf back in its pool: {:?}",
        r.notes
    );
}
