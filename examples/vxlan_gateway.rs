//! A VLAN-to-VXLAN gateway: each RX queue takes 802.1Q-tagged TCP traffic,
//! merges it with GRO, pops the tag, and sends the inner frame to the
//! overlay in VXLAN with the tenant's VNI (VLAN 10 -> VNI 5010, ...).
//! Untagged frames and unknown VLANs are dropped, counted by reason.
//! Written against grorx's public API only.
//!
//!     cargo run --release -p grorx-examples --example vxlan_gateway [-- IN OUT [SECS]]
//!
//! Without ports: the embedded generator (VLAN 10) into net_null1. With
//! them, e.g. `net_pcap0,rx_pcap=in.pcap net_pcap1,tx_pcap=out.pcap`.
//!
//! The outer headers go in the headroom (a pointer move); a merged packet
//! leaves as one VXLAN TSO packet where the port segments tunnels, and is
//! cut back into its segments in software where it does not: the port
//! sees exactly the segments that came in, each encapsulated.

use grorx::forward::{Encap, Forwarder, VxlanConf};
use grorx::{
    start_with, Ctx, GenConfig, PortSpec, QueueSetup, RunOptions, Skb, Stage, StageOptions,
};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Tenants: VLAN id -> VNI.
const TENANTS: &[(u16, u32)] = &[(10, 5010), (20, 5020)];

const UNTAGGED: usize = 0;
const NO_TENANT: usize = 1;

struct Gateway {
    /// One forwarder per tenant, all on this queue's TX queue of the output.
    tenants: Vec<(u16, Forwarder)>,
    /// Frames the output took, all queues (added when the run stops).
    sent: Arc<AtomicU64>,
}

impl Gateway {
    fn new(q: &QueueSetup, sent: Arc<AtomicU64>) -> anyhow::Result<Gateway> {
        let mut tenants = Vec::new();
        for &(vlan, vni) in TENANTS {
            let outer = VxlanConf {
                vni,
                src_ip: [192, 0, 2, 1],
                dst_ip: [192, 0, 2, 2],
                ..VxlanConf::default()
            };
            tenants.push((vlan, q.forwarder(0, Encap::Vxlan(outer))?));
        }
        Ok(Gateway { tenants, sent })
    }
}

impl Stage for Gateway {
    fn packet(&mut self, mut skb: Skb, ctx: &mut Ctx<'_>) {
        let Some(tci) = skb.pop_vlan() else {
            return ctx.drop(skb, UNTAGGED);
        };
        match self.tenants.iter_mut().find(|(v, _)| *v == tci & 0x0fff) {
            Some((_, fwd)) => fwd.push(skb),
            None => ctx.drop(skb, NO_TENANT),
        }
    }

    fn end_of_poll(&mut self, _ctx: &mut Ctx<'_>) {
        for (_, fwd) in &mut self.tenants {
            fwd.flush();
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.end_of_poll(ctx);
        let sent: u64 = self.tenants.iter().map(|(_, f)| f.stats().tx_packets).sum();
        self.sent.fetch_add(sent, Relaxed);
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        &["untagged", "no tenant"]
    }
}

/// Runs; returns the report and the frames sent to the overlay.
fn run(opts: &RunOptions) -> anyhow::Result<(grorx::Report, u64)> {
    let sent = Arc::new(AtomicU64::new(0));
    let running = start_with(opts, |q| Gateway::new(q, sent.clone()))?;
    let report = running.wait()?;
    Ok((report, sent.load(Relaxed)))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = |s: &String| PortSpec::parse(s).map_err(anyhow::Error::msg);
    let mut opts = RunOptions {
        duration: Some(2.0),
        gen: GenConfig {
            vlan: Some(10),
            ..GenConfig::default()
        },
        stage: StageOptions {
            outputs: vec![port(&"net_null1".to_string())?],
            ..StageOptions::default()
        },
        ..RunOptions::default()
    };
    if let [input, output, rest @ ..] = args.as_slice() {
        opts.ports = vec![port(input)?];
        opts.stage.outputs = vec![port(output)?];
        opts.duration = rest.first().map(|s| s.parse()).transpose()?.or(Some(5.0));
    }
    let (r, sent) = run(&opts)?;
    println!(
        "{} segments in, {} packets out of GRO, {sent} VXLAN frames out; dropped: {:?}; {} mbufs leaked",
        r.rx_packets, r.delivered.packets, r.stage.dropped, r.mbufs_leaked
    );
    grorx::shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use grorx::{EalSetup, GenConfig, PortSpec, RunOptions, StageOptions};

    fn opts(vlan: Option<u16>, count: u64) -> RunOptions {
        RunOptions {
            gen: GenConfig {
                vlan,
                count,
                ..Default::default()
            },
            stage: StageOptions {
                outputs: vec![PortSpec::parse("net_null1").unwrap()],
                ..StageOptions::default()
            },
            eal: EalSetup::Start {
                user_args: vec![],
                no_huge: true,
            },
            ..Default::default()
        }
    }

    #[test]
    fn tagged_traffic_goes_to_the_overlay_and_the_rest_is_dropped_by_reason() {
        let (r, sent) = super::run(&opts(Some(10), 20_000)).unwrap();
        assert_eq!(r.rx_packets, 20_000);
        assert!(r.delivered.packets < 20_000 / 4, "GRO merged");
        assert_eq!(sent, 20_000, "cut back into the segments that came in");
        assert!(r.stage.dropped.is_empty(), "{:?}", r.stage.dropped);
        assert_eq!(r.mbufs_leaked, 0);
        // EAL starts once per process: the other cases run in the same one.
        let again = |vlan, count| RunOptions {
            eal: EalSetup::Existing,
            ..opts(vlan, count)
        };
        let (r, _) = super::run(&again(Some(30), 5_000)).unwrap();
        assert_eq!(
            r.stage.dropped.get("no tenant").copied(),
            Some(r.delivered.packets)
        );
        assert_eq!(r.mbufs_leaked, 0);
        let (r, _) = super::run(&again(None, 5_000)).unwrap();
        assert_eq!(
            r.stage.dropped.get("untagged").copied(),
            Some(r.delivered.packets)
        );
        assert_eq!(r.mbufs_leaked, 0);
        grorx::shutdown();
    }
}
