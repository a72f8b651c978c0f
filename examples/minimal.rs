//! The smallest stage: count what GRO delivers, then free it.
//!
//!     cargo run --release -p grorx-examples --example minimal
//!
//! Runs two seconds on the embedded TCP generator (no NIC, no flags).

use grorx::{start_with, Ctx, RunOptions, Skb, Stage};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Packets out of GRO, shared with `main` (one stage per RX queue).
struct Count(Arc<AtomicU64>);

impl Stage for Count {
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        self.0.fetch_add(1, Relaxed);
        ctx.consume(skb);
    }
}

fn run(opts: &RunOptions) -> anyhow::Result<(u64, grorx::Report)> {
    let merged = Arc::new(AtomicU64::new(0));
    let running = start_with(opts, |_queue| Ok(Count(merged.clone())))?;
    let report = running.wait()?;
    Ok((merged.load(Relaxed), report))
}

fn main() -> anyhow::Result<()> {
    let opts = RunOptions {
        duration: Some(2.0),
        ..RunOptions::default()
    };
    let (merged, report) = run(&opts)?;
    println!(
        "{} segments in, {merged} packets out of GRO",
        report.rx_packets
    );
    grorx::shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_what_gro_delivers() {
        let opts = grorx::RunOptions {
            gen: grorx::GenConfig {
                count: 20_000,
                ..Default::default()
            },
            eal: grorx::EalSetup::Start {
                user_args: vec![],
                no_huge: true,
            },
            ..Default::default()
        };
        let (merged, report) = super::run(&opts).unwrap();
        assert_eq!(report.rx_packets, 20_000);
        assert_eq!(merged, report.delivered.packets);
        assert!(merged < 20_000 / 4, "GRO merged: {merged} packets out");
        assert_eq!(report.stage.consumed, merged);
        assert_eq!(report.mbufs_leaked, 0);
    }
}
