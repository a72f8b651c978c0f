//! The grorx command line: `grorx <command> [options] [-- <EAL arguments>]`.

use anyhow::{Context, Result};
use clap::{Args, CommandFactory, Parser, Subcommand};
use grorx::forward::Encap;
use grorx::gen::GenConfig;
use grorx::gro::{CsumMode, GroConfig, ReorderWindow};
use grorx::lcores::parse_cpu_list;
use grorx::measure::Measure;
use grorx::port_spec::PortSpec;
use grorx::run::{
    EalSetup, ForwardOptions, PoolOptions, PoolScope, RunOptions, RxOptions, SkbOptions,
    StageOptions, Topology,
};
use grorx::skb::SkbMode;
use grorx::wire::Tunnels;
use std::process::ExitCode;

use grorx_bench as bench;
use grorx_cli::watch::{self, Output};

mod flags;

#[derive(Parser)]
#[command(
    name = "grorx",
    version,
    about = "DPDK poll-mode receive engine with per-queue software GRO",
    after_help = "Anything after `--` goes to DPDK's EAL as written and wins over grorx's own choices,\n\
                  e.g. grorx sink --port net_null0 -- -l 0,1 --no-huge -m 512"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Receive, count and free: a packet sink. Without --port it runs on the
    /// embedded TCP generator (no NIC, no hugepages needed).
    Sink(SinkArgs),
    /// Receive, merge, and forward: encapsulated (--encap), segmented for the
    /// TX port (TSO where it has it, software GSO where not). RX port i goes
    /// to the i-th --to, or all to the one given; --port-topology paired
    /// forwards between two ports both ways (a bump in the wire).
    Forward(ForwardArgs),
    /// Show hugepages (sizes, free pages, mounts), or reserve them.
    Hugepages(HugeArgs),
    /// Run an experiment (bench-configs/*.toml): every cell a `grorx sink`
    /// process, interleaved repetitions; a table, CSV, JSON and a PNG chart.
    Bench(BenchArgs),
    /// Print a shell completion script, e.g. `grorx completions bash >
    /// /etc/bash_completion.d/grorx`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `grorx man > grorx.1; man ./grorx.1`.
    Man,
}

// The harness (grorx-bench) takes plain `Options`; its flags live here, in
// the command's one clap tree, which the completions and the manual page
// are made from.
#[derive(Args)]
struct BenchArgs {
    /// The experiment file (TOML).
    config: std::path::PathBuf,
    /// A smoke run: short runs, one repetition, no warm-up.
    #[arg(long)]
    quick: bool,
    /// Where the CSV, JSON, PNG (and any synthetic capture) go.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: std::path::PathBuf,
}

/// A CPU list as one value (clap would read `Option<Vec<_>>` as many values).
#[derive(Clone, Debug)]
struct CpuList(Vec<usize>);

#[derive(Args)]
struct SinkArgs {
    #[command(flatten)]
    run: RunArgs,
    /// How the sink frees: in bulk, once per burst (default), or one call per
    /// packet (for comparison).
    #[arg(long, value_enum, default_value = "bulk", help_heading = "Stage")]
    free: FreeArg,
    /// Write every packet GRO outputs (merged or passed through) to this pcap file.
    #[arg(long, value_name = "FILE", help_heading = "Stage")]
    capture: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct ForwardArgs {
    #[command(flatten)]
    run: RunArgs,
    /// An output port (PORTSPEC, as --port; an RX port may be one too);
    /// repeat to pair one with each --port, in order.
    #[arg(long = "to", value_name = "PORTSPEC", value_parser = PortSpec::parse, required_unless_present = "port_topology", help_heading = "Stage")]
    to: Vec<PortSpec>,
    /// Instead of --to, as testpmd's --port-topology: paired (ports two by
    /// two, both ways: a bump in the wire), chained (each to the next, the
    /// last to the first) or loop (each back out of itself).
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        conflicts_with = "to",
        help_heading = "Stage"
    )]
    port_topology: Option<TopologyArg>,
    /// Headers prepended: none, virtio (12 B virtio-net header: the peer
    /// segments) or vxlan (50 B of outer Ethernet, IPv4, UDP and VXLAN).
    #[arg(long, value_enum, default_value = "none", help_heading = "Stage")]
    encap: EncapArg,
    /// The VXLAN network identifier (--encap vxlan).
    #[arg(long, default_value_t = 1, help_heading = "Stage")]
    vni: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TopologyArg {
    Paired,
    Chained,
    Loop,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EncapArg {
    None,
    Virtio,
    Vxlan,
}

#[derive(Args)]
struct RunArgs {
    /// A port: PCI address (0000:3b:00.0), virtual device (net_null0,
    /// net_pcap0,rx_pcap=FILE, ...) or a port id. Repeat for several.
    #[arg(long = "port", value_name = "SPEC", value_parser = PortSpec::parse, help_heading = "Ports and cores")]
    ports: Vec<PortSpec>,
    /// Worker CPUs, e.g. 1 or 2-5 (default: the last CPU).
    #[arg(long, value_name = "LIST", value_parser = |s: &str| parse_cpu_list(s).map(CpuList), help_heading = "Ports and cores")]
    cores: Option<CpuList>,
    /// RX queues per port.
    #[arg(long, default_value_t = 1, help_heading = "Ports and cores")]
    queues: u16,
    /// RX descriptors per queue.
    #[arg(long, default_value_t = 1024, help_heading = "Ports and cores")]
    rx_desc: u16,
    /// Packets per RX burst.
    #[arg(long, default_value_t = 32, help_heading = "Ports and cores")]
    burst: u16,
    /// Port MTU (default: the port's own).
    #[arg(long, help_heading = "Ports and cores")]
    mtu: Option<u16>,
    /// Leave promiscuous mode off.
    #[arg(long, help_heading = "Ports and cores")]
    no_promisc: bool,
    /// mbuf data room in bytes, headroom included (default: one frame at the MTU per mbuf).
    #[arg(long, help_heading = "Memory")]
    data_room: Option<u16>,
    /// Per-lcore mempool cache (0 disables it).
    #[arg(long, default_value_t = 256, help_heading = "Memory")]
    pool_cache: u32,
    /// One mbuf pool per NUMA socket, per port, or per RX queue.
    #[arg(long, value_enum, default_value = "socket", help_heading = "Memory")]
    pool_scope: ScopeArg,
    /// Run on 4 KiB pages (no hugepages).
    #[arg(long, help_heading = "Memory")]
    no_huge: bool,
    #[command(flatten)]
    gro: GroArgs,
    /// Stop after this many seconds (default: at Ctrl-C, or when a one-shot pcap is consumed).
    #[arg(long, value_name = "SECS", help_heading = "Reporting")]
    duration: Option<f64>,
    /// Print the final report as one JSON object on stdout.
    #[arg(long, help_heading = "Reporting")]
    json: bool,
    /// Stream one JSON object per interval (seconds) on stdout, newline-delimited.
    #[arg(long, value_name = "SECS", help_heading = "Reporting")]
    json_interval: Option<f64>,
    /// No live stats line.
    #[arg(long, short, help_heading = "Reporting")]
    quiet: bool,
    /// A per-queue table under the live stats line.
    #[arg(long, short, help_heading = "Reporting")]
    verbose: bool,
    /// Count TSC cycles per packet in RX, GRO and the stage (four clock reads
    /// per poll): where the time goes.
    #[arg(long, help_heading = "Reporting")]
    cycles: bool,
    /// Write burst, segments-per-packet and hold-time histograms to FILE in the
    /// HdrHistogram interval log format (HistogramLogAnalyzer reads it).
    #[arg(long, value_name = "FILE", help_heading = "Reporting")]
    hdr_log: Option<std::path::PathBuf>,
    /// Serve Prometheus metrics over HTTP at http://ADDR:PORT/metrics while
    /// the run goes on (e.g. 127.0.0.1:9464; docs/metrics.md lists them).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen_addr, help_heading = "Reporting")]
    metrics: Option<std::net::SocketAddr>,
    /// Serve metrics only to peers in this address block (e.g. 10.0.0.0/8,
    /// 192.0.2.7, ::1/128); repeat for more. Others are closed at once.
    #[arg(long, value_name = "CIDR", value_parser = grorx_cli::http::Cidr::parse, requires = "metrics", help_heading = "Reporting")]
    metrics_allow: Vec<grorx_cli::http::Cidr>,
    /// This instance's name: EAL's file prefix (its telemetry socket is
    /// /var/run/dpdk/NAME/dpdk_telemetry.v2) and the `name` label of its
    /// metrics. One running process per name.
    #[arg(
        long,
        env = "GRORX_NAME",
        default_value = "grorx",
        help_heading = "Reporting"
    )]
    name: String,
    #[command(flatten)]
    gen: GenArgs,
    /// EAL arguments (after --).
    #[arg(last = true, value_name = "EAL ARGS")]
    eal: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FreeArg {
    Bulk,
    PerPacket,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ScopeArg {
    Socket,
    Port,
    Queue,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
    /// DPDK's rte_gro (lightweight mode, packets classified with
    /// rte_net_get_ptype first): the baseline to compare with.
    Rte,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CsumArg {
    /// Validate IPv4 and TCP checksums in software unless the NIC vouches.
    Verify,
    /// Trust TCP and UDP checksums (as DPDK's rte_gro does); IPv4 header
    /// checksums are still validated unless the NIC vouches.
    Trust,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SkbArg {
    /// The skb is built in place in the received mbuf.
    Build,
    /// A separate head, headers copied (the pre-build_skb way, for comparison).
    Copy,
}

#[derive(Args)]
#[command(next_help_heading = "GRO and the skb")]
struct GroArgs {
    /// Software GRO per RX queue (rte: DPDK's rte_gro, for comparison).
    #[arg(long, value_enum, default_value = "on")]
    gro: OnOff,
    /// Buffers one merged packet may span (1-512; Linux's MAX_SKB_FRAGS is 17; past 64 for BIG TCP packets).
    #[arg(long, default_value_t = 17)]
    max_frags: u16,
    /// Largest merged IP packet in bytes (1500-524288; past 65535 plain TCP merges into BIG TCP packets, as Linux's; forward segments them back in software).
    #[arg(long, default_value_t = 65535)]
    gro_max_size: u32,
    /// Flows held at once per queue (the oldest is flushed when full).
    #[arg(long, default_value_t = 64)]
    gro_flows: usize,
    /// Flows per queue whose state GRO remembers after their packet left, so
    /// their next packet starts without a parse or a template build.
    #[arg(long, default_value_t = 1024)]
    gro_flow_cache: usize,
    /// Hold packets across polls up to this many microseconds (0: flush at the end of each poll).
    #[arg(long, default_value_t = 0)]
    gro_flush_us: u32,
    /// Segments per flow that may wait ahead of a sequence gap for it to
    /// fill, then merge in sequence order (0-16; 0: off, gaps flush as in Linux).
    #[arg(long, default_value_t = 0)]
    gro_reorder: u16,
    /// The longest a segment waits ahead of a gap, in microseconds (with --gro-reorder).
    #[arg(long, default_value_t = 100)]
    gro_reorder_us: u32,
    /// Merge UDP datagrams of a flow too (same size, the last may be shorter),
    /// as Linux's UDP GRO does for forwarding; forward segments them back.
    #[arg(long)]
    gro_udp: bool,
    /// Merge TCP segments carried by VXLAN (UDP 4789 and each --vxlan-port)
    /// and Geneve (UDP 6081) tunnels, under the outer rules Linux applies.
    #[arg(long, value_enum, default_value = "on")]
    gro_tunnels: Switch,
    /// Another UDP port that carries VXLAN (Linux's own default is 8472);
    /// repeat for more (up to 3 besides 4789).
    #[arg(long, value_name = "PORT")]
    vxlan_port: Vec<u16>,
    /// Checksum validation.
    #[arg(long, value_enum, default_value = "verify")]
    gro_csum: CsumArg,
    /// Headroom a prepend may use, in bytes (at most DPDK's 128).
    #[arg(long, default_value_t = 128)]
    headroom: u16,
    /// How the skb is built.
    #[arg(long, value_enum, default_value = "build")]
    skb_mode: SkbArg,
}

#[derive(Args)]
#[command(next_help_heading = "Embedded generator (when no --port is given)")]
struct GenArgs {
    /// TCP flows.
    #[arg(long, default_value_t = 4)]
    gen_flows: u32,
    /// TCP payload bytes per segment.
    #[arg(long, default_value_t = 1448)]
    gen_mss: u16,
    /// Packets per second (0: as fast as the sink takes them).
    #[arg(long, default_value_t = 0)]
    gen_rate: u64,
    /// IPv6 instead of IPv4.
    #[arg(long)]
    gen_ipv6: bool,
    /// 802.1Q VLAN tag on every frame.
    #[arg(long)]
    gen_vlan: Option<u16>,
    /// PSH on every Nth segment of a flow (0: never).
    #[arg(long, default_value_t = 0)]
    gen_psh_every: u32,
    /// Segments of one flow in a row before the next flow's.
    #[arg(long, default_value_t = 8)]
    gen_interleave: u32,
    /// Stop after this many packets (0: never).
    #[arg(long, default_value_t = 0)]
    gen_count: u64,
    /// Send UDP datagrams of --gen-mss payload bytes instead of TCP segments
    /// (as Pktgen does by default).
    #[arg(long)]
    gen_udp: bool,
    /// Flag every frame's checksums good, as a NIC with RX checksum offload
    /// does for frames it checked.
    #[arg(long)]
    gen_nic_csum: bool,
}

#[derive(Args)]
struct HugeArgs {
    /// Reserve this much hugepage memory (e.g. 512M, 1G) and mount hugetlbfs; needs root.
    #[arg(long, value_name = "SIZE", value_parser = hugepages::parse_size)]
    setup: Option<u64>,
    /// Page size to reserve (default: the system's default, usually 2M).
    #[arg(long, value_name = "SIZE", value_parser = hugepages::parse_size)]
    page_size: Option<u64>,
}

/// An IP address and port to listen on.
fn parse_listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not ADDR:PORT: give an IP address and a port, e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464")
    })
}

/// The run's options from the arguments every run command shares.
fn run_options(a: RunArgs) -> Result<(RunOptions, Output)> {
    if a.gro.gro_udp && a.gro.gro != OnOff::On {
        return Err(grorx_cli::usage(
            "--gro-udp is part of grorx's GRO: use it with --gro on (the default)",
        ));
    }
    let mut tunnels = Tunnels {
        on: a.gro.gro_tunnels == Switch::On,
        ..Tunnels::default()
    };
    if !a.gro.vxlan_port.is_empty() && (!tunnels.on || a.gro.gro != OnOff::On) {
        return Err(grorx_cli::usage(
            "--vxlan-port names a port grorx's GRO looks inside: use it with --gro on and --gro-tunnels on (the defaults)",
        ));
    }
    for &p in &a.gro.vxlan_port {
        tunnels
            .add_vxlan(p)
            .map_err(|e| grorx_cli::usage(e.to_string()))?;
    }
    if let Some(d) = a.json_interval {
        if !(0.01..=86400.0).contains(&d) {
            return Err(grorx_cli::usage(format!(
                "--json-interval {d} is out of range: give 0.01..=86400 seconds"
            )));
        }
    }
    let out = Output {
        json: a.json,
        quiet: a.quiet,
        verbose: a.verbose,
        json_interval: a.json_interval,
        hdr_log: a.hdr_log,
        gro: a.gro.gro != OnOff::Off,
        metrics: a.metrics,
        metrics_allow: a.metrics_allow,
    };
    let opts = RunOptions {
        name: a.name,
        eal: EalSetup::Start {
            user_args: a.eal,
            no_huge: a.no_huge,
        },
        duration: a.duration,
        ports: a.ports,
        cores: a.cores.map(|c| c.0),
        rx: RxOptions {
            queues: a.queues,
            desc: a.rx_desc,
            burst: a.burst,
            mtu: a.mtu,
            promisc: !a.no_promisc,
        },
        pools: PoolOptions {
            data_room: a.data_room,
            cache: a.pool_cache,
            scope: match a.pool_scope {
                ScopeArg::Socket => PoolScope::Socket,
                ScopeArg::Port => PoolScope::Port,
                ScopeArg::Queue => PoolScope::Queue,
            },
            ..PoolOptions::default()
        },
        gen: GenConfig {
            flows: a.gen.gen_flows,
            mss: a.gen.gen_mss,
            rate_pps: a.gen.gen_rate,
            ipv6: a.gen.gen_ipv6,
            vlan: a.gen.gen_vlan,
            psh_every: a.gen.gen_psh_every,
            interleave: a.gen.gen_interleave,
            count: a.gen.gen_count,
            udp: a.gen.gen_udp,
            nic_csum: a.gen.gen_nic_csum,
            ..GenConfig::default()
        },
        gro: (a.gro.gro == OnOff::On).then_some(GroConfig {
            max_frags: a.gro.max_frags,
            max_size: a.gro.gro_max_size,
            flows: a.gro.gro_flows,
            flow_cache: a.gro.gro_flow_cache,
            csum: match a.gro.gro_csum {
                CsumArg::Verify => CsumMode::Verify,
                CsumArg::Trust => CsumMode::Trust,
            },
            hold_us: a.gro.gro_flush_us,
            reorder: ReorderWindow {
                segments: a.gro.gro_reorder,
                wait_us: a.gro.gro_reorder_us,
            },
            udp: a.gro.gro_udp,
            tunnels,
            ..GroConfig::default()
        }),
        skb: SkbOptions {
            mode: match a.gro.skb_mode {
                SkbArg::Build => SkbMode::Build,
                SkbArg::Copy => SkbMode::Copy,
            },
            headroom: a.gro.headroom,
        },
        stage: StageOptions {
            measure: (a.gro.gro == OnOff::Rte).then_some(Measure::RteGro),
            ..StageOptions::default()
        },
        cycles: a.cycles,
    };
    Ok((opts, out))
}

fn sink(a: SinkArgs) -> Result<()> {
    let (mut opts, out) = run_options(a.run)?;
    opts.stage.capture = a.capture;
    if a.free == FreeArg::PerPacket {
        if opts.stage.measure.is_some() {
            return Err(grorx_cli::usage(
                "--free per-packet is a sink of its own: use it without --gro rte",
            ));
        }
        opts.stage.measure = Some(Measure::FreePerPacket);
    }
    watch::run("sink", &opts, &out)
}

fn forward(a: ForwardArgs) -> Result<()> {
    let (mut opts, out) = run_options(a.run)?;
    let to = match a.port_topology {
        None => a.to,
        Some(t) => {
            let t = match t {
                TopologyArg::Paired => Topology::Paired,
                TopologyArg::Chained => Topology::Chained,
                TopologyArg::Loop => Topology::Loop,
            };
            t.outputs(&opts.ports)
                .map_err(|e| grorx_cli::usage(format!("--port-topology {}: {e}", t.name())))?
        }
    };
    opts.stage.forward = Some(ForwardOptions {
        to,
        encap: match a.encap {
            EncapArg::None => Encap::None,
            EncapArg::Virtio => Encap::VirtioNet,
            EncapArg::Vxlan => Encap::parse("vxlan", a.vni).map_err(grorx_cli::usage)?,
        },
    });
    watch::run("forward", &opts, &out)
}

fn huge(a: HugeArgs) -> Result<()> {
    let status = hugepages::Status::read()?;
    match a.setup {
        None => grorx_cli::out::say_out(&status.to_string())?,
        Some(bytes) => {
            if !hugepages::is_root() {
                anyhow::bail!("reserving hugepages needs root: run as root (e.g. sudo grorx hugepages --setup 1G)");
            }
            let size = a.page_size.or(status.default_page_size).unwrap_or(2 << 20);
            let r = hugepages::setup(size, bytes)?;
            grorx_cli::out::say_out(&format!("{r}\n{}", hugepages::Status::read()?))?;
            if r.is_short() {
                anyhow::bail!("the kernel granted fewer pages than asked (memory fragmentation?)");
            }
        }
    }
    Ok(())
}

fn bench(a: BenchArgs) -> Result<()> {
    let o = bench::run(&bench::Options {
        config: a.config,
        quick: a.quick,
        out: a.out,
        grorx: std::env::current_exe().context("finding the grorx executable")?,
    })?;
    if o.failed_runs > 0 {
        anyhow::bail!("{} of {} run(s) failed (see above)", o.failed_runs, o.runs);
    }
    Ok(())
}

/// Flags of DPDK's EAL a user may put where grorx's own go.
const EAL_FLAGS: &[&str] = &[
    "-l",
    "--lcores",
    "-c",
    "--main-lcore",
    "-a",
    "--allow",
    "-b",
    "--block",
    "--vdev",
    "-m",
    "--socket-mem",
    "--file-prefix",
    "--in-memory",
    "--log-level",
    "-n",
    "--iova-mode",
    "--huge-dir",
    "--proc-type",
    "--no-pci",
    "--no-shconf",
    "-d",
];

/// The arguments, or clap's error, with a hint when the unknown one is an
/// EAL flag (they go after `--`).
fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|e| {
        use clap::error::{ContextKind, ContextValue, ErrorKind};
        if e.kind() == ErrorKind::UnknownArgument {
            if let Some(ContextValue::String(a)) = e.get(ContextKind::InvalidArg) {
                let flag = a.split('=').next().unwrap_or(a);
                if EAL_FLAGS.contains(&flag) {
                    grorx_cli::out::sayln(&format!(
                        "grorx: error: {flag} is an argument of DPDK's EAL: give EAL arguments after \
                         `--`, e.g. grorx sink --port net_null0 -- {a} ..."
                    ));
                    std::process::exit(2);
                }
            }
        }
        e.exit()
    })
}

fn main() -> ExitCode {
    let cli = parse();
    let r = match cli.cmd {
        Cmd::Sink(a) => sink(a),
        Cmd::Forward(a) => forward(a),
        Cmd::Hugepages(a) => huge(a),
        Cmd::Bench(a) => bench(a),
        Cmd::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "grorx", &mut buf);
            grorx_cli::out::say_out(&String::from_utf8_lossy(&buf)).map_err(Into::into)
        }
        Cmd::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut buf)
                .map_err(anyhow::Error::from)
                .and_then(|()| {
                    grorx_cli::out::say_out(&String::from_utf8_lossy(&buf)).map_err(Into::into)
                })
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The libraries name settings; the user gave flags.
            let msg = flags::in_flags(&format!("{e:#}"));
            grorx_cli::out::sayln(&format!("grorx: error: {msg}"));
            ExitCode::from(grorx_cli::exit_code(&e))
        }
    }
}
