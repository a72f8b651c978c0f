//! Packets and bytes per TCP flow after GRO, the top flows at the end: a
//! per-flow counter an NFV datapath would run beside its real work.
//!
//!     cargo run --release -p grorx-examples --example flow_counter [-- PORTSPEC [SECS]]
//!
//! Without a port it counts the embedded generator's flows for two seconds;
//! with one (net_pcap0,rx_pcap=FILE, a PCI address) it counts that port's.
//! Each RX queue's stage keeps its own table (no lock on the data path) and
//! hands it to `main` when the run stops; `main` merges and prints.

use grorx::wire::Fields;
use grorx::{start_with, Ctx, PortSpec, RunOptions, Skb, Stage};
use std::collections::HashMap;
use std::sync::mpsc::{channel, Sender};

/// A flow: the IP addresses (4 or 16 bytes each) and the TCP ports.
type Flow = (Vec<u8>, u32);

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// Packets GRO delivered (a merged packet counts once).
    packets: u64,
    /// Segments they carried, and their bytes on the wire as delivered.
    segments: u64,
    bytes: u64,
}

struct FlowCounter {
    flows: HashMap<Flow, Counts>,
    done: Sender<HashMap<Flow, Counts>>,
}

const NOT_TCP: usize = 0;

impl Stage for FlowCounter {
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        let Some(tcp) = skb.tcp() else {
            return ctx.drop(skb, NOT_TCP);
        };
        let f = Fields::new(skb.data(), tcp);
        // A new flow allocates here; a known one only updates its entry.
        let c = self
            .flows
            .entry((f.addrs().to_vec(), f.ports()))
            .or_default();
        c.packets += 1;
        c.segments += skb.gso_segs() as u64;
        c.bytes += skb.len() as u64;
        ctx.consume(skb);
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        let _ = self.done.send(std::mem::take(&mut self.flows));
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        &["not TCP"]
    }
}

/// Runs, then merges the queues' tables: flows by bytes, largest first.
fn run(opts: &RunOptions) -> anyhow::Result<(Vec<(Flow, Counts)>, grorx::Report)> {
    let (tx, rx) = channel();
    let running = start_with(opts, |_queue| {
        Ok(FlowCounter {
            flows: HashMap::with_capacity(4096),
            done: tx.clone(),
        })
    })?;
    drop(tx);
    let report = running.wait()?;
    let mut all: HashMap<Flow, Counts> = HashMap::new();
    for table in rx {
        for (k, v) in table {
            let c = all.entry(k).or_default();
            c.packets += v.packets;
            c.segments += v.segments;
            c.bytes += v.bytes;
        }
    }
    let mut flows: Vec<_> = all.into_iter().collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.1.bytes));
    Ok((flows, report))
}

fn show(flow: &Flow) -> String {
    let (a, ports) = flow;
    let (src, dst) = a.split_at(a.len() / 2);
    let ip = |b: &[u8]| match b.len() {
        4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(b).unwrap()).to_string(),
        _ => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap()).to_string(),
    };
    format!(
        "{}:{} -> {}:{}",
        ip(src),
        ports >> 16,
        ip(dst),
        ports & 0xffff
    )
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut opts = RunOptions {
        duration: Some(2.0),
        ..RunOptions::default()
    };
    if let Some(p) = args.next() {
        opts.ports = vec![PortSpec::parse(&p).map_err(anyhow::Error::msg)?];
        opts.duration = args.next().map(|s| s.parse()).transpose()?.or(Some(5.0));
    }
    let (flows, report) = run(&opts)?;
    println!(
        "{} flows, {} segments in, {} packets out of GRO",
        flows.len(),
        report.rx_packets,
        report.delivered.packets
    );
    println!(
        "{:>48} {:>10} {:>10} {:>14}",
        "flow", "packets", "segments", "bytes"
    );
    for (f, c) in flows.iter().take(10) {
        println!(
            "{:>48} {:>10} {:>10} {:>14}",
            show(f),
            c.packets,
            c.segments,
            c.bytes
        );
    }
    grorx::shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_every_flow_and_every_byte() {
        let opts = grorx::RunOptions {
            gen: grorx::GenConfig {
                flows: 6,
                count: 30_000,
                ..Default::default()
            },
            eal: grorx::EalSetup::Start {
                user_args: vec![],
                no_huge: true,
            },
            ..Default::default()
        };
        let (flows, report) = super::run(&opts).unwrap();
        assert_eq!(flows.len(), 6, "{flows:?}");
        let sum = |f: fn(&super::Counts) -> u64| flows.iter().map(|(_, c)| f(c)).sum::<u64>();
        assert_eq!(sum(|c| c.segments), 30_000, "every segment in one flow");
        assert_eq!(sum(|c| c.packets), report.delivered.packets);
        assert_eq!(sum(|c| c.bytes), report.delivered.bytes);
        assert!(flows.windows(2).all(|w| w[0].1.bytes >= w[1].1.bytes));
        assert_eq!(report.mbufs_leaked, 0);
    }
}
