//! One run of the engine, start to finish: hugepages and EAL, ports and
//! pools, workers on their lcores, the live stats loop on the main lcore,
//! then a clean stop, teardown with every mbuf accounted, and the report.

use crate::capture::{Capture, CaptureReport};
use crate::eal::{self, Eal};
use crate::eal_args::{self, EalOpt};
use crate::gen::{self, GenConfig, GenStats};
use crate::gro::{GroConfig, GroStats};
use crate::hist::{HdrLog, HistReport, QueueHist};
use crate::lcores::{self, LcorePlan};
use crate::mempool::{Mempool, PoolParams};
use crate::monitor::{Monitor, MonitorConf, SlotInfo};
use crate::pcap;
use crate::pool_sizing::{self, Demand};
use crate::port::{self, Port, PortConf};
use crate::port_spec::PortSpec;
use crate::report::{
    Delivered, PoolReport, PortReport, QueueReport, Report, SkbReport, SourceReport,
};
use crate::ring_port::RingPort;
use crate::signal;
use crate::skb::{self, SkbConf, SkbMode};
use crate::stats::{rates, QueueCounters};
use crate::worker::{self, Assignment, StageKind, WorkerConf};
use anyhow::{bail, Context, Result};
use dpdk_sys as sys;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How EAL is brought up.
#[derive(Debug, Clone)]
pub enum EalSetup {
    /// Start it from grorx's options plus the user's arguments (after `--`).
    Start {
        user_args: Vec<String>,
        no_huge: bool,
    },
    /// It is already running in this process (tests, embedding).
    Existing,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Ports to receive on; none means the embedded generator.
    pub ports: Vec<PortSpec>,
    pub queues: u16,
    /// Worker CPUs (`--cores`).
    pub cores: Option<Vec<usize>>,
    pub rx_desc: u16,
    pub burst: u16,
    pub mtu: Option<u16>,
    /// Force a data room (to split frames over several mbufs).
    pub data_room: Option<u16>,
    pub pool_cache: u32,
    pub duration: Option<f64>,
    pub promisc: bool,
    pub gen: GenConfig,
    pub eal: EalSetup,
    /// Print a stats line every second (to stderr).
    pub live: bool,
    /// None: GRO off.
    pub gro: Option<GroConfig>,
    /// Hold packets across polls up to this long (0: flush every poll).
    pub gro_flush_us: u32,
    /// Headroom a prepend may use (at most DPDK's RTE_PKTMBUF_HEADROOM).
    pub headroom: u16,
    pub skb_mode: SkbMode,
    /// Write every packet the GRO stage outputs to this pcap file.
    pub capture: Option<std::path::PathBuf>,
    /// mbufs a port keeps for itself (net_pcap infinite_rx caches its file);
    /// filled in by `run`.
    pub cached_frames: u32,
    /// A per-queue table under the live line.
    pub verbose: bool,
    /// Stream one JSON object per interval of this many seconds (stdout).
    pub json_interval: Option<f64>,
    /// Write the histograms in the HdrHistogram interval log format.
    pub hdr_log: Option<std::path::PathBuf>,
    /// How widely mbuf pools are shared.
    pub pool_scope: PoolScope,
}

/// How widely an mbuf pool is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolScope {
    /// One pool per NUMA socket, shared by the ports there (the default).
    #[default]
    Socket,
    /// One pool per port.
    Port,
    /// One pool per RX queue (no sharing at all between lcores).
    Queue,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            ports: Vec::new(),
            queues: 1,
            cores: None,
            rx_desc: 1024,
            burst: 32,
            mtu: None,
            data_room: None,
            pool_cache: 256,
            duration: None,
            promisc: true,
            gen: GenConfig::default(),
            eal: EalSetup::Start {
                user_args: Vec::new(),
                no_huge: false,
            },
            live: true,
            gro: Some(GroConfig::default()),
            gro_flush_us: 0,
            headroom: sys::RTE_PKTMBUF_HEADROOM as u16,
            skb_mode: SkbMode::Build,
            capture: None,
            cached_frames: 0,
            verbose: false,
            json_interval: None,
            hdr_log: None,
            pool_scope: PoolScope::Socket,
        }
    }
}

/// Bytes of EAL memory a run needs beyond its pools (rings, memzones, heap).
const EAL_OVERHEAD: u64 = 64 << 20;
/// Memory for `--no-huge -m` when falling back.
const NO_HUGE_MIN_MB: u64 = 256;
/// Packets the capture ring holds between workers and the writer.
const CAPTURE_SLOTS: u32 = 8192;
/// Bytes copy mode copies into its separate head (a driver's copy-break).
const COPY_BREAK: u16 = 128;

static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

impl RunOptions {
    pub fn validate(&self) -> Result<()> {
        if self.queues == 0 {
            bail!("--queues 0: a port needs at least one RX queue (give --queues 1 or more)");
        }
        if self.burst == 0 || self.burst as usize > worker::MAX_BURST {
            bail!(
                "--burst {} is out of range: give 1..={}",
                self.burst,
                worker::MAX_BURST
            );
        }
        if self.rx_desc < 32 {
            bail!(
                "--rx-desc {} is too small: give 32 or more (512-4096 is usual)",
                self.rx_desc
            );
        }
        if let Some(d) = self.duration {
            if !(d > 0.0 && d.is_finite()) {
                bail!("--duration must be a positive number of seconds");
            }
        }
        if let Some(d) = self.json_interval {
            if !(d >= 0.01 && d.is_finite()) {
                bail!("--json-interval must be at least 0.01 seconds");
            }
        }
        if let Some(r) = self.data_room {
            if (r as u32) < sys::RTE_PKTMBUF_HEADROOM + 64 {
                bail!(
                    "--data-room {r} leaves no room for a frame after the {} B headroom",
                    sys::RTE_PKTMBUF_HEADROOM
                );
            }
        }
        if self.ports.is_empty() {
            self.gen.validate().map_err(anyhow::Error::msg)?;
        }
        if let Some(g) = &self.gro {
            g.validate().map_err(anyhow::Error::msg)?;
        }
        if self.headroom as u32 > sys::RTE_PKTMBUF_HEADROOM {
            bail!(
                "--headroom {} is more than DPDK leaves in front of received data ({} B, RTE_PKTMBUF_HEADROOM, \
                 fixed when DPDK is built): give 0..={}",
                self.headroom,
                sys::RTE_PKTMBUF_HEADROOM,
                sys::RTE_PKTMBUF_HEADROOM
            );
        }
        if self.skb_mode == SkbMode::Copy && self.gro.is_none() {
            bail!("--skb-mode copy builds skbs for GRO: use it with --gro on");
        }
        if let Some(p) = &self.capture {
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(d) = dir.filter(|d| !d.is_dir()) {
                bail!(
                    "--capture {}: directory {} does not exist",
                    p.display(),
                    d.display()
                );
            }
        }
        Ok(())
    }

    fn uses_generator(&self) -> bool {
        self.ports.is_empty()
    }

    fn data_room_for(&self, mtu: u16) -> Result<u16> {
        match self.data_room {
            Some(r) => Ok(r),
            None => pool_sizing::auto_data_room(mtu as u32, sys::RTE_PKTMBUF_HEADROOM)
                .map_err(anyhow::Error::msg),
        }
    }

    fn demand(&self, lcores: u32, queues: u32, extra: u32) -> Demand {
        let gen = self.uses_generator();
        Demand {
            rx_queues: queues,
            rx_desc: self.rx_desc as u32,
            tx_queues: queues,
            tx_desc: self.rx_desc as u32,
            lcores,
            cache: self.pool_cache,
            burst: self.burst.max(gen::MAX_BURST as u16) as u32,
            // GRO holds at most a burst when it flushes every poll, else up to
            // every flow's packet at its frag budget.
            held_per_queue: match &self.gro {
                Some(g) if self.gro_flush_us > 0 => g.flows as u32 * g.max_frags as u32,
                _ => 0,
            },
            // The generator's rings: RX rings hold up to rx_desc each, plus its pending bursts.
            extra: if gen {
                self.queues as u32 * (self.rx_desc as u32 + gen::MAX_BURST as u32)
            } else {
                0
            } + if self.capture.is_some() {
                CAPTURE_SLOTS
            } else {
                0
            } + extra,
        }
    }

    /// Hugepage memory the run needs (pools at the expected MTU + EAL).
    fn memory_needed(&self, lcores: u32) -> Result<u64> {
        let mtu = self.mtu.unwrap_or(1500);
        let room = self.data_room_for(mtu)?;
        let capture = if self.capture.is_some() {
            CAPTURE_SLOTS
        } else {
            0
        };
        let n = pool_sizing::element_count(&self.demand(
            lcores,
            self.queues as u32,
            self.cached_frames + capture,
        ));
        let ports = self.ports.len().max(1) as u64;
        Ok(ports * pool_sizing::pool_bytes(n, PRIV_SIZE as u32, room as u32) + EAL_OVERHEAD)
    }
}

/// The mbuf private area reserved for the skb (built in place).
pub const PRIV_SIZE: u16 = skb::PRIV_SIZE;

/// Starts EAL from the options; returns it and the hugepage summary.
fn start_eal(
    opts: &RunOptions,
    user_args: &[String],
    no_huge: bool,
) -> Result<(&'static Eal, String)> {
    let mut ours: Vec<EalOpt> = Vec::new();
    let gen = opts.uses_generator();
    let user_lcores = eal_args::user_overrides(user_args, "--lcores");
    let plan_lcores = if user_lcores {
        None
    } else {
        let avail = lcores::available_cpus();
        Some(LcorePlan::new(&avail, opts.cores.as_deref(), gen).map_err(anyhow::Error::msg)?)
    };
    if let Some(p) = &plan_lcores {
        ours.push(EalOpt::with("--lcores", p.eal_lcores()));
    }
    let lcore_count = plan_lcores
        .as_ref()
        .map(|p| 1 + p.worker_cpus.len() + p.generator_cpu.is_some() as usize)
        .unwrap_or(3) as u32;

    // Hugepages: use what is there, reserve more when root, else fall back.
    let user_mem = eal_args::user_overrides(user_args, "-m");
    let need = opts.memory_needed(lcore_count)?;
    let no_huge_mb = (need >> 20).max(NO_HUGE_MIN_MB);
    let summary;
    if user_mem {
        summary = "hugepages: as the EAL arguments say".to_string();
    } else if no_huge {
        summary = format!(
            "hugepages: off (--no-huge): 4 KiB pages, -m {no_huge_mb} (expect a lower packet rate from TLB misses)"
        );
        ours.push(EalOpt::flag("--no-huge"));
        ours.push(EalOpt::with("-m", no_huge_mb.to_string()));
    } else {
        let status = hugepages::Status::read().unwrap_or_else(|_| hugepages::Status {
            default_page_size: None,
            pools: Vec::new(),
            mounts: Vec::new(),
            problems: Vec::new(),
        });
        let req = hugepages::Request {
            bytes: need,
            page_size: None,
            allow_setup: hugepages::is_root(),
            allow_fallback: true,
            no_huge_mem_mb: no_huge_mb,
        };
        let mut d = hugepages::decide(&status, &req);
        if matches!(d, hugepages::Decision::Setup { .. }) {
            d = match d.apply() {
                Ok(d) => d,
                Err(e) => hugepages::Decision::NoHuge {
                    reason: format!("reserving failed: {e}"),
                    mem_mb: no_huge_mb,
                },
            };
        }
        summary = d.summary();
        let args = d.eal_args();
        let mut it = args.into_iter().peekable();
        while let Some(flag) = it.next() {
            let flag: &'static str = match flag.as_str() {
                "--huge-dir" => "--huge-dir",
                "--no-huge" => "--no-huge",
                "-m" => "-m",
                other => bail!("unexpected hugepage EAL argument {other}"),
            };
            let value = it.next_if(|v| !v.starts_with('-'));
            ours.push(EalOpt { flag, value });
        }
        if matches!(d, hugepages::Decision::UseExisting { .. }) {
            // Hugepage files are unlinked once mapped: nothing lingers after exit.
            ours.push(EalOpt::flag("--huge-unlink"));
        }
    }
    ours.push(EalOpt::with(
        "--file-prefix",
        format!("grorx-{}", std::process::id()),
    ));
    let pci: Vec<String> = opts
        .ports
        .iter()
        .filter_map(|p| match p {
            PortSpec::Pci { .. } => Some(p.to_string()),
            _ => None,
        })
        .collect();
    if pci.is_empty() {
        ours.push(EalOpt::flag("--no-pci"));
    }
    // EAL and telemetry chatter at start-up is noise here; the user's own
    // --log-level wins.
    ours.push(EalOpt::with("--log-level", "lib.eal:warning"));
    ours.push(EalOpt::with("--log-level", "lib.telemetry:error"));
    // PCI allow-list entries are added whatever the user passes (they are
    // what --port asked for), then the user's own arguments.
    let mut user: Vec<String> = pci
        .iter()
        .flat_map(|a| ["-a".to_string(), a.clone()])
        .collect();
    user.extend(user_args.iter().cloned());
    let argv = eal_args::build("grorx", &ours, &user);
    let eal = Eal::init(&argv)?;
    Ok((eal, summary))
}

/// Queues that share one pool: same socket and data room (and the same port
/// or queue, by `--pool-scope`).
struct PoolGroup {
    key: (i32, u16, u16, u16),
    queues: u32,
    /// mbufs a port of the group keeps for itself, and the capture ring.
    extra: u32,
}

/// A configured port and the pool of each of its RX queues (an index into
/// the run's pools; ports close before pools are freed).
struct PortSlot {
    port: Port,
    pools: Vec<usize>,
    segments_per_frame: u32,
    /// Frames a one-shot pcap replay holds.
    pcap_frames: Option<u64>,
}

/// Runs the engine until a stop condition; returns the report.
pub fn run(opts: &RunOptions) -> Result<Report> {
    opts.validate()?;
    // Files named by --port are checked before EAL starts.
    // A one-shot replay ends when every frame arrived; an infinite one keeps
    // the whole file in mbufs (net_pcap's infinite_rx), which the pool must hold.
    let mut pcap_frames: Vec<Option<u64>> = Vec::new();
    let mut cached: Vec<u32> = Vec::new();
    for p in &opts.ports {
        let file = p
            .arg("rx_pcap")
            .filter(|_| p.dev_name().is_some_and(|n| n.starts_with("net_pcap")));
        let frames = match file {
            Some(f) => Some(
                pcap::count_frames(std::path::Path::new(f))
                    .with_context(|| format!("--port '{p}'"))?,
            ),
            None => None,
        };
        let once = p.pcap_replay_once().is_some();
        pcap_frames.push(frames.filter(|_| once));
        cached.push(if once { 0 } else { frames.unwrap_or(0) as u32 });
    }
    let opts = &RunOptions {
        cached_frames: cached.iter().copied().max().unwrap_or(0),
        ..opts.clone()
    };
    let (eal, huge_summary) = match &opts.eal {
        EalSetup::Start { user_args, no_huge } => start_eal(opts, user_args, *no_huge)?,
        EalSetup::Existing => (
            Eal::get().context("EAL is not running in this process")?,
            "hugepages: as the running EAL has them".to_string(),
        ),
    };
    if opts.live {
        eprintln!("{huge_summary}");
    }
    let hugepages_on = !eal_args::has_flag(eal.args(), "--no-huge");

    // Lcores: workers, and the generator's own when it runs.
    let mut workers = eal.worker_lcores();
    let gen_lcore = if opts.uses_generator() {
        if workers.len() < 2 {
            bail!(
                "the embedded generator needs its own lcore besides the workers: EAL has {} worker lcore(s); \
                 give e.g. -- --lcores 0@0,1@1,2@0 or name a port with --port",
                workers.len()
            );
        }
        workers.pop()
    } else {
        None
    };
    if workers.is_empty() {
        bail!("no worker lcore: give EAL at least two lcores (e.g. -- -l 0,1)");
    }
    let lcore_count = (workers.len() + 1 + gen_lcore.is_some() as usize) as u32;

    // Ports: the embedded ring port, or what --port names.
    let mut ring_port = None;
    let mut ids = Vec::new();
    if opts.uses_generator() {
        // SAFETY: plain query of the calling thread's socket.
        let socket = unsafe { sys::rte_socket_id() } as i32;
        let rp = RingPort::create(opts.queues, opts.rx_desc as u32, socket)?;
        ids.push(rp.port_id);
        pcap_frames.push(None);
        cached.push(0);
        ring_port = Some(rp);
    } else {
        for p in &opts.ports {
            ids.push(port::open(p)?);
        }
    }
    if ids.is_empty() || port::count_avail() == 0 {
        bail!("no port to receive on: name one with --port (e.g. --port net_null0) or run without --port for the embedded generator");
    }

    // Pools: one per NUMA socket by default (per port or per queue when
    // asked), placed on the socket of the ports they serve; then the ports.
    let mut plans = Vec::new();
    for &id in &ids {
        let mut cur = 0u16;
        // SAFETY: valid out-pointer.
        unsafe { sys::rte_eth_dev_get_mtu(id, &mut cur) };
        let mtu = opts.mtu.unwrap_or(if cur == 0 { 1500 } else { cur });
        let room = opts.data_room_for(mtu)?;
        // SAFETY: plain query.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) };
        plans.push((id, mtu, room, socket));
    }
    let mut groups: Vec<PoolGroup> = Vec::new();
    let mut queue_pool: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for (pi, &(id, _, room, socket)) in plans.iter().enumerate() {
        for q in 0..opts.queues {
            let key = match opts.pool_scope {
                PoolScope::Socket => (socket, room, u16::MAX, u16::MAX),
                PoolScope::Port => (socket, room, id, u16::MAX),
                PoolScope::Queue => (socket, room, id, q),
            };
            let g = match groups.iter().position(|g| g.key == key) {
                Some(g) => g,
                None => {
                    groups.push(PoolGroup {
                        key,
                        queues: 0,
                        extra: 0,
                    });
                    groups.len() - 1
                }
            };
            groups[g].queues += 1;
            if q == 0 {
                groups[g].extra += cached[pi];
            }
            queue_pool[pi].push(g);
        }
    }
    if opts.capture.is_some() {
        groups[0].extra += CAPTURE_SLOTS;
    }
    let mut pools: Vec<Mempool> = Vec::new();
    let mut head_pools: Vec<Mempool> = Vec::new();
    for g in &groups {
        let (socket, room, _, _) = g.key;
        let n = pool_sizing::element_count(&opts.demand(lcore_count, g.queues, g.extra));
        let seq = POOL_SEQ.fetch_add(1, Relaxed);
        pools.push(Mempool::create(&PoolParams {
            name: format!("grorx-s{}-{seq}", socket.max(0)),
            elements: n,
            cache: pool_sizing::cache_size(opts.pool_cache, n),
            priv_size: PRIV_SIZE,
            data_room: room,
            socket,
        })?);
        if opts.skb_mode == SkbMode::Copy {
            head_pools.push(Mempool::create(&PoolParams {
                name: format!("grorx-h{}-{seq}", socket.max(0)),
                elements: n,
                cache: pool_sizing::cache_size(opts.pool_cache, n),
                priv_size: PRIV_SIZE,
                data_room: (sys::RTE_PKTMBUF_HEADROOM as u16) + 2 * COPY_BREAK,
                socket,
            })?);
        }
    }
    let mut slots: Vec<PortSlot> = Vec::new();
    for (pi, &(id, mtu, room, _)) in plans.iter().enumerate() {
        let segs = pool_sizing::segments_per_frame(mtu as u32, room, sys::RTE_PKTMBUF_HEADROOM);
        let conf = PortConf {
            rx_queues: opts.queues,
            tx_queues: opts.queues,
            rx_desc: opts.rx_desc,
            tx_desc: opts.rx_desc,
            mtu: Some(mtu),
            promisc: opts.promisc,
            rx_csum: true,
            scatter: segs > 1,
            source_steers: ring_port.is_some(),
        };
        let qp: Vec<&Mempool> = queue_pool[pi].iter().map(|&g| &pools[g]).collect();
        let port = Port::configure(id, &conf, &qp)?;
        slots.push(PortSlot {
            port,
            pools: queue_pool[pi].clone(),
            segments_per_frame: segs,
            pcap_frames: pcap_frames[pi],
        });
    }
    let payload_sum = match &ring_port {
        Some(_) => {
            Some(gen::payload(&pools[slots[0].pools[0]], &opts.gen).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    for s in &mut slots {
        s.port.start(opts.promisc)?;
        if opts.live {
            eprintln!("{}", s.port.describe());
            for n in &s.port.notes {
                eprintln!("  {n}");
            }
        }
    }

    // Queues to lcores.
    let queue_list: Vec<(u16, u16)> = slots
        .iter()
        .flat_map(|s| (0..s.port.rx_queues).map(move |q| (s.port.id, q)))
        .collect();
    let plan: Vec<Assignment> = worker::assign(&queue_list, &workers);
    let counters: Arc<[QueueCounters]> = (0..queue_list.len())
        .map(|_| QueueCounters::default())
        .collect();
    if opts.live {
        for a in &plan {
            let qs: Vec<String> = a
                .queues
                .iter()
                .map(|q| format!("port {} queue {}", q.port, q.queue))
                .collect();
            eprintln!(
                "lcore {} (cpu {}): {}",
                a.lcore,
                eal.lcore_cpu(a.lcore),
                qs.join(", ")
            );
        }
        if let Some(g) = gen_lcore {
            eprintln!(
                "lcore {g} (cpu {}): generator, {} TCP flow(s), MSS {}, {}",
                eal.lcore_cpu(g),
                opts.gen.flows,
                opts.gen.mss,
                if opts.gen.rate_pps == 0 {
                    "max rate".to_string()
                } else {
                    format!("{} pps", opts.gen.rate_pps)
                }
            );
        }
    }

    let capture = match &opts.capture {
        Some(p) => Some(Capture::start(p, CAPTURE_SLOTS)?),
        None => None,
    };
    let worker_stop = Arc::new(AtomicBool::new(false));
    let gen_stop = Arc::new(AtomicBool::new(false));
    let gen_stats = Arc::new(GenStats::default());
    let wc = WorkerConf {
        burst: opts.burst,
        drain_rounds: opts.rx_desc as u32 / opts.burst.max(1) as u32 + 4,
        gro: opts.gro,
        gro_hold_tsc: opts.gro_flush_us as u64 * eal.tsc_hz() / 1_000_000,
        stage: match &capture {
            Some(c) => StageKind::Capture(c.tx()),
            None => StageKind::Sink,
        },
        tsc_hz: eal.tsc_hz(),
    };
    let hists: Arc<[Mutex<QueueHist>]> = (0..queue_list.len())
        .map(|_| Mutex::new(QueueHist::default()))
        .collect();
    let skb_conf = |id: u16, q: u16| -> SkbConf {
        let s = slots
            .iter()
            .find(|s| s.port.id == id)
            .expect("queue of a known port");
        let g = s.pools[q as usize];
        let head = head_pools.get(g);
        SkbConf {
            mode: opts.skb_mode,
            headroom: opts.headroom,
            buf_truesize: skb::truesize_of(&pools[g]),
            head_pool: head.map(|p| p.as_ptr()).unwrap_or(std::ptr::null_mut()),
            head_truesize: head.map(skb::truesize_of).unwrap_or(0),
            copy_len: COPY_BREAK,
        }
    };
    let mut launched = Vec::new();
    let t_start = Instant::now();
    for a in &plan {
        let qs: Vec<_> = a
            .queues
            .iter()
            .map(|q| (*q, skb_conf(q.port, q.queue)))
            .collect();
        let (c, h, st) = (counters.clone(), hists.clone(), worker_stop.clone());
        launched.push(eal.launch(a.lcore, move || worker::run(qs, c, h, st, wc))?);
    }
    let gen_launched = match (gen_lcore, &ring_port) {
        (Some(l), Some(rp)) => {
            let rings = (0..rp.queues()).map(|q| rp.rx_ring(q)).collect();
            let pool = crate::ring_port::PoolPtr(pools[slots[0].pools[0]].as_ptr());
            let (cfg, st, stop, hz) = (
                opts.gen.clone(),
                gen_stats.clone(),
                gen_stop.clone(),
                eal.tsc_hz(),
            );
            let (payload, psum) = payload_sum.clone().unwrap_or_default();
            Some(eal.launch(l, move || {
                gen::run(gen::GenJob {
                    cfg,
                    rings,
                    pool,
                    payload,
                    payload_sum: psum,
                    stats: st,
                    stop,
                    tsc_hz: hz,
                })
            })?)
        }
        _ => None,
    };

    // The main lcore watches: stats once a second, stop conditions.
    let total = |c: &[QueueCounters]| {
        c.iter()
            .map(|q| q.read())
            .fold((0u64, 0u64), |a, l| (a.0 + l.rx_packets, a.1 + l.rx_bytes))
    };
    let port_rx = |c: &[QueueCounters], id: u16| -> u64 {
        queue_list
            .iter()
            .zip(c.iter())
            .filter(|((p, _), _)| *p == id)
            .map(|(_, q)| q.read().rx_packets)
            .sum()
    };
    let slot_info: Vec<SlotInfo> = {
        let mut v = vec![
            SlotInfo {
                port: 0,
                queue: 0,
                lcore: 0
            };
            queue_list.len()
        ];
        for a in &plan {
            for q in &a.queues {
                v[q.slot] = SlotInfo {
                    port: q.port,
                    queue: q.queue,
                    lcore: a.lcore,
                };
            }
        }
        v
    };
    // Live state over DPDK telemetry (/grorx/stats, /grorx/queues, /grorx/gro)
    // until this guard drops at the end of run(), early returns included.
    if let Err(e) = crate::telemetry::register() {
        eprintln!("note: {e:#}");
    }
    let _telemetry = crate::telemetry::live_scope(crate::telemetry::Live::new(
        eal,
        &plan,
        counters.clone(),
        slots
            .iter()
            .map(|s| (s.port.id, s.port.name.clone()))
            .collect(),
        t_start,
        opts.gro.is_some(),
    ));
    let mut monitor = Monitor::new(
        &counters,
        &hists,
        slot_info,
        slots.iter().map(|s| s.port.id).collect(),
        MonitorConf {
            live: opts.live,
            verbose: opts.verbose,
            gro: opts.gro.is_some(),
            json_every: opts.json_interval.map(Duration::from_secs_f64),
            hdr: match &opts.hdr_log {
                Some(p) => Some(HdrLog::create(p)?),
                None => None,
            },
        },
        t_start,
    );
    let mut last_progress = t_start;
    let mut last_seen = 0u64;
    let stop_reason;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        let (pk, _) = total(&counters);
        if pk != last_seen {
            last_seen = pk;
            last_progress = now;
        }
        if signal::requested() {
            stop_reason = "signal".to_string();
            break;
        }
        if let Some(d) = opts.duration {
            if now.duration_since(t_start).as_secs_f64() >= d {
                stop_reason = "duration".to_string();
                break;
            }
        }
        // One-shot pcap replays end when every frame arrived (or nothing
        // more came for a while: a PMD may drop what it cannot take).
        let replays: Vec<&PortSlot> = slots.iter().filter(|s| s.pcap_frames.is_some()).collect();
        if !replays.is_empty() && replays.len() == slots.len() {
            let all_in = replays
                .iter()
                .all(|s| port_rx(&counters, s.port.id) >= s.pcap_frames.unwrap());
            if all_in {
                stop_reason = "pcap replay complete".to_string();
                break;
            }
            if now.duration_since(last_progress) > Duration::from_secs(3) {
                stop_reason = "pcap replay idle for 3 s (frames missing)".to_string();
                break;
            }
        }
        if opts.gen.count != 0 && gen_launched.is_some() && gen_stats.done.load(Relaxed) {
            let sent = gen_stats.sent.load(Relaxed);
            if pk >= sent {
                stop_reason = "generator count reached".to_string();
                break;
            }
            if now.duration_since(last_progress) > Duration::from_secs(2) {
                stop_reason = "generator count reached (queues idle)".to_string();
                break;
            }
        }
        monitor.tick(now)?;
    }

    // Stop the source first, then let the workers take what is queued.
    gen_stop.store(true, Relaxed);
    if let Some(g) = gen_launched {
        g.wait();
    }
    worker_stop.store(true, Relaxed);
    for l in launched {
        l.wait();
    }
    let duration_s = t_start.elapsed().as_secs_f64();
    let slot_hists = monitor.finish()?;
    let mut all_hist = QueueHist::default();
    for h in &slot_hists {
        all_hist.add(h);
    }
    let capture_report: Option<CaptureReport> = match capture {
        Some(c) => Some(c.finish()?),
        None => None,
    };

    // Report, then teardown with accounting.
    let (rx_packets, rx_bytes) = total(&counters);
    let (rx_pps, rx_gbps) = rates(rx_packets, rx_bytes, duration_s);
    let mut queues = Vec::new();
    let mut gro_total = GroStats::default();
    let (
        mut out_packets,
        mut out_bytes,
        mut truesize,
        mut headroom_miss,
        mut head_alloc_fail,
        mut capture_waits,
    ) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for a in &plan {
        for q in &a.queues {
            let l = counters[q.slot].read();
            let g = counters[q.slot].read_gro();
            gro_total.add(&g);
            out_packets += l.out_packets;
            out_bytes += l.out_bytes;
            truesize += l.truesize;
            headroom_miss += l.headroom_miss;
            head_alloc_fail += l.head_alloc_fail;
            capture_waits += l.capture_waits;
            let (pps, gbps) = rates(l.rx_packets, l.rx_bytes, duration_s);
            queues.push(QueueReport {
                port: q.port,
                queue: q.queue,
                lcore: a.lcore,
                cpu: eal.lcore_cpu(a.lcore),
                rx_packets: l.rx_packets,
                rx_bytes: l.rx_bytes,
                rx_pps: pps,
                rx_gbps: gbps,
                rx_bursts: l.rx_bursts,
                rx_polls: l.rx_polls,
                avg_burst: if l.rx_bursts > 0 {
                    l.rx_packets as f64 / l.rx_bursts as f64
                } else {
                    0.0
                },
                out_packets: l.out_packets,
                gro: opts.gro.map(|_| g.report()),
                histograms: HistReport::of(&slot_hists[q.slot]),
            });
        }
    }
    queues.sort_by_key(|q| (q.port, q.queue));
    let mut ports = Vec::new();
    let mut notes = Vec::new();
    for s in &slots {
        let id = s.port.id;
        let rxp: u64 = queues
            .iter()
            .filter(|q| q.port == id)
            .map(|q| q.rx_packets)
            .sum();
        let rxb: u64 = queues
            .iter()
            .filter(|q| q.port == id)
            .map(|q| q.rx_bytes)
            .sum();
        if let Some(f) = s.pcap_frames {
            if rxp < f {
                notes.push(format!(
                    "port {id}: pcap replay delivered {rxp} of {f} frames"
                ));
            }
        }
        ports.push(PortReport {
            id,
            name: s.port.name.clone(),
            driver: s.port.driver.clone(),
            link: s.port.link(),
            mtu: s.port.mtu,
            rx_queues: s.port.rx_queues,
            rx_desc: s.port.rx_desc,
            rx_offloads: port::rx_offload_names(s.port.rx_offloads),
            pool: PoolReport {
                name: pools[s.pools[0]].name().to_string(),
                mbufs: pools[s.pools[0]].size(),
                cache: pools[s.pools[0]].cache(),
                data_room: pools[s.pools[0]].data_room(),
                priv_size: pools[s.pools[0]].priv_size(),
                segments_per_frame: s.segments_per_frame,
                hugepages: hugepages_on,
            },
            rx_packets: rxp,
            rx_bytes: rxb,
            stats: s.port.stats(),
            xstats: s
                .port
                .xstats()
                .into_iter()
                .filter(|(_, v)| *v != 0)
                .collect(),
        });
    }
    let source = ring_port.as_ref().map(|_| {
        let sent = gen_stats.sent.load(Relaxed);
        SourceReport {
            kind: "generator".into(),
            flows: opts.gen.flows,
            mss: opts.gen.mss,
            frame_len: opts.gen.frame_len(),
            sent,
            sent_bytes: gen_stats.bytes.load(Relaxed),
            ring_full_waits: gen_stats.ring_full.load(Relaxed),
            alloc_fail: gen_stats.alloc_fail.load(Relaxed),
            cycles_per_packet: gen_stats.busy_cycles.load(Relaxed) as f64 / sent.max(1) as f64,
        }
    });

    let delivered = Delivered {
        packets: out_packets,
        bytes: out_bytes,
        truesize_per_byte: if out_bytes > 0 && opts.gro.is_some() {
            truesize as f64 / out_bytes as f64
        } else {
            0.0
        },
    };
    let skb_report = SkbReport {
        mode: match opts.skb_mode {
            SkbMode::Build => "build".into(),
            SkbMode::Copy => "copy".into(),
        },
        headroom: opts.headroom,
        headroom_miss,
        head_alloc_fail,
    };
    if capture_waits > 0 {
        notes.push(format!(
            "capture: workers waited {capture_waits} times for the writer (nothing was lost)"
        ));
    }

    // Close ports (their queues give mbufs back), free what sits in the
    // embedded rings, then count what is still out of each pool.
    for s in &mut slots {
        s.port.close();
    }
    let freed_at_teardown = ring_port.as_ref().map(|r| r.drain_and_free()).unwrap_or(0);
    let mbufs_leaked: u64 = pools
        .iter()
        .chain(&head_pools)
        .map(|p| p.in_use() as u64)
        .sum();
    if mbufs_leaked > 0 {
        notes.push(format!(
            "{mbufs_leaked} mbuf(s) not back in their pool: the pool is kept (not freed)"
        ));
    }
    // Ports before their rings and pools; a pool with mbufs out is leaked on
    // purpose rather than freed under someone's feet.
    drop(slots);
    drop(ring_port);
    for p in pools.into_iter().chain(head_pools) {
        if p.in_use() == 0 {
            drop(p);
        } else {
            std::mem::forget(p);
        }
    }

    Ok(Report {
        command: "sink".into(),
        duration_s,
        rx_packets,
        rx_bytes,
        rx_pps,
        rx_gbps,
        mbufs_leaked,
        freed_at_teardown,
        stop_reason,
        hugepages: huge_summary,
        eal_args: eal.args().to_vec(),
        tsc_hz: eal.tsc_hz(),
        ports,
        queues,
        source,
        notes,
        gro: opts.gro.map(|_| gro_total.report()),
        histograms: HistReport::of(&all_hist),
        delivered,
        skb: skb_report,
        capture: capture_report,
    })
}

/// Stops EAL and removes its runtime directory (a unique prefix per run
/// would otherwise leave one behind each time). Call once, at exit.
pub fn shutdown() {
    if Eal::get().is_none() {
        return;
    }
    let dir = eal::runtime_dir();
    // SAFETY: no lcore is running a job any more; EAL is not used after this.
    unsafe { sys::rte_eal_cleanup() };
    if let Some(d) = dir {
        let ours = d
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("grorx-"));
        if ours {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
