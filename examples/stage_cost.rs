//! What the stage API costs: a stage of the caller's that counts and frees,
//! run like `grorx sink` with `--cycles`, so the worker's cycles per packet
//! can be set side by side with the built-in sink's (scripts/ab-cycles.sh).
//!
//!     stage_cost sink --port SPEC [--duration SECS] [--gro on|off] [--gro-csum verify|trust]
//!                [--cycles] [--json] [-q] [-- EAL ARGS]
//!
//! Prints the run's JSON report on stdout (other flags are accepted and
//! ignored so the same command line fits both binaries).

use grorx::{start_with, CsumMode, Ctx, EalSetup, GroConfig, PortSpec, RunOptions, Skb, Stage};

/// Counts packets and bytes, frees every packet.
struct CountAndFree {
    packets: u64,
    bytes: u64,
}

impl Stage for CountAndFree {
    #[inline(always)]
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        self.packets += 1;
        self.bytes += skb.len() as u64;
        ctx.consume(skb);
    }
}

fn main() -> anyhow::Result<()> {
    let mut opts = RunOptions {
        cycles: true,
        ..RunOptions::default()
    };
    let mut eal = Vec::new();
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("sink") {
        args.next();
    }
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--port" => opts
                .ports
                .push(PortSpec::parse(&value()?).map_err(anyhow::Error::msg)?),
            "--duration" => opts.duration = Some(value()?.parse()?),
            "--gro" => opts.gro = (value()? == "on").then(GroConfig::default),
            "--gro-csum" => {
                let csum = if value()? == "trust" {
                    CsumMode::Trust
                } else {
                    CsumMode::Verify
                };
                if let Some(g) = &mut opts.gro {
                    g.csum = csum;
                }
            }
            "--" => eal.extend(args.by_ref()),
            _ => {}
        }
    }
    opts.eal = EalSetup::Start {
        user_args: eal,
        no_huge: false,
    };
    let running = start_with(&opts, |_| {
        Ok(CountAndFree {
            packets: 0,
            bytes: 0,
        })
    })?;
    let report = running.wait()?;
    grorx::shutdown();
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
