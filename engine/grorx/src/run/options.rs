//! What a run is asked to do, and the checks that refuse bad settings with a
//! message that says what to do.

use crate::dpdk::mbuf::RTE_PKTMBUF_HEADROOM;
use crate::gen::{self, GenConfig};
use crate::gro::GroConfig;
#[cfg(feature = "measure")]
use crate::measure::Measure;
use crate::pool_sizing::{self, Demand};
use crate::port::spec::PortSpec;
use crate::setting::{Setting as S, SettingError};
use crate::skb::{self, SkbMode};
use crate::worker;
use anyhow::Result;

/// How EAL is brought up.
#[derive(Debug, Clone)]
pub enum EalSetup {
    /// Start it from grorx's options plus the user's arguments (after `--`).
    Start {
        /// EAL arguments of the caller's, after grorx's own: they win.
        user_args: Vec<String>,
        /// Run on 4 KiB pages (`--no-huge`) instead of hugepages.
        no_huge: bool,
    },
    /// It is already running in this process (tests, embedding).
    Existing,
}

/// What a run is asked to do, grouped by what each part configures: where
/// packets come from (`ports`, or the generator), how they are received
/// (`rx`, `cores`), the buffers (`pools`, `skb`), GRO (`gro`) and what runs
/// after it (`stage`). `RunOptions::default()` is the quick start's run: the
/// embedded generator, one queue, GRO on with Linux's limits.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The instance's name (default `grorx`): EAL's file prefix when EAL
    /// starts here, so the telemetry socket is
    /// `/var/run/dpdk/<name>/dpdk_telemetry.v2`. One process at a time
    /// holds a name; a second is refused before EAL starts.
    pub name: String,
    /// How EAL is brought up (started here, or already running).
    pub eal: EalSetup,
    /// Stop after this many seconds; None: when stopped, a one-shot replay
    /// is consumed, or the generator's count is received.
    pub duration: Option<f64>,
    /// Ports to receive on; none means the embedded generator.
    pub ports: Vec<PortSpec>,
    /// The embedded generator's traffic (used when `ports` is empty).
    pub gen: GenConfig,
    /// Worker CPUs; None: one, the last CPU.
    pub cores: Option<Vec<usize>>,
    /// How the ports receive: queues, rings, bursts, MTU.
    pub rx: RxOptions,
    /// The mbuf pools.
    pub pools: PoolOptions,
    /// GRO per RX queue, with how long it may hold packets; None: GRO off.
    pub gro: Option<GroConfig>,
    /// How skbs are built in the mbufs.
    pub skb: SkbOptions,
    /// What takes the packets GRO delivers (the sink unless set here).
    pub stage: StageOptions,
    /// Count TSC cycles per phase (RX, GRO, stage) per packet.
    pub cycles: bool,
}

/// How the RX ports receive (`RunOptions::rx`).
#[derive(Debug, Clone)]
pub struct RxOptions {
    /// RX queues per port (RSS spreads flows over them).
    pub queues: u16,
    /// RX descriptors per queue.
    pub desc: u16,
    /// Packets per RX burst (at most `worker::MAX_BURST`, 256).
    pub burst: u16,
    /// Port MTU; None keeps the port's own.
    pub mtu: Option<u16>,
    /// Promiscuous mode on the RX ports.
    pub promisc: bool,
}

/// The mbuf pools (`RunOptions::pools`).
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Force a data room (to split frames over several mbufs); None: one
    /// frame at the MTU per mbuf.
    pub data_room: Option<u16>,
    /// Per-lcore mempool cache, in mbufs (0: none).
    pub cache: u32,
    /// How widely mbuf pools are shared.
    pub scope: PoolScope,
    /// mbufs a port keeps for itself (net_pcap infinite_rx caches its file);
    /// filled in by `run`.
    pub cached_frames: u32,
}

/// How skbs are built (`RunOptions::skb`).
#[derive(Debug, Clone)]
pub struct SkbOptions {
    /// In place, or copy mode for the experiment.
    pub mode: SkbMode,
    /// Headroom a prepend may use (at most DPDK's RTE_PKTMBUF_HEADROOM).
    pub headroom: u16,
}

/// What takes the packets GRO delivers (`RunOptions::stage`): the sink
/// unless one of these is set, or `start_with` is given a stage.
#[derive(Debug, Clone, Default)]
pub struct StageOptions {
    /// Forward what GRO delivers, encapsulated (the built-in forward stage).
    pub forward: Option<ForwardOptions>,
    /// Write every packet the GRO stage outputs to this pcap file.
    pub capture: Option<std::path::PathBuf>,
    /// Ports a stage of the caller's forwards to, in order: TX-only ports
    /// (each with a pool for header mbufs) or RX ports of the run (a bump in
    /// the wire); every worker has a TX queue of its own on each. A stage
    /// reaches them through [`crate::QueueSetup`].
    pub outputs: Vec<PortSpec>,
    /// A measurement-only stage instead of the sink (`start` only).
    #[cfg(feature = "measure")]
    pub measure: Option<Measure>,
}

/// The built-in forward stage: where to, and how encapsulated.
#[derive(Debug, Clone)]
pub struct ForwardOptions {
    /// Output ports: RX port i forwards to `to[i]`, or all to the one given.
    /// An RX port may be an output: `ports: [A, B]`, `to: [B, A]` forwards
    /// both ways between A and B ([`Topology::Paired`]).
    pub to: Vec<PortSpec>,
    /// Headers prepended to every packet (none, virtio-net, VXLAN).
    pub encap: crate::forward::Encap,
}

impl RunOptions {
    /// The output ports of the run: the forward stage's `to`, or `stage.outputs`
    /// (RX ports among them too).
    pub(super) fn output_ports(&self) -> &[PortSpec] {
        match &self.stage.forward {
            Some(f) => &f.to,
            None => &self.stage.outputs,
        }
    }
}

impl ForwardOptions {
    /// The output (index into `to`) of RX port number `rx` (in `RunOptions::ports` order).
    pub fn output_of(&self, rx: usize) -> usize {
        if self.to.len() == 1 {
            0
        } else {
            rx
        }
    }
}

/// How RX ports forward to each other when no output is named one by one:
/// testpmd's `--port-topology`, VPP's cross-connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Ports in pairs, both ways: 0 <-> 1, 2 <-> 3, ... (a bump in the wire).
    Paired,
    /// Each port to the next, the last to the first: 0 -> 1 -> ... -> 0.
    Chained,
    /// Each port back out of itself (a hairpin).
    Loop,
}

impl Topology {
    /// The name testpmd gives it (`paired`, `chained`, `loop`).
    pub fn name(self) -> &'static str {
        match self {
            Topology::Paired => "paired",
            Topology::Chained => "chained",
            Topology::Loop => "loop",
        }
    }

    /// The output of each RX port of `ports`, in order (`ForwardOptions::to`).
    pub fn outputs(self, ports: &[PortSpec]) -> Result<Vec<PortSpec>, String> {
        let n = ports.len();
        match self {
            Topology::Paired if n == 0 || n % 2 == 1 => Err(format!(
                "the paired topology forwards between ports two by two: {n} port(s) given, give an even number"
            )),
            Topology::Chained if n < 2 => Err(format!(
                "the chained topology forwards each port to the next: {n} port(s) given, give two or more"
            )),
            Topology::Loop if n == 0 => {
                Err("the loop topology sends each port's packets back out of it: give a port".into())
            }
            Topology::Paired => Ok((0..n).map(|i| ports[i ^ 1].clone()).collect()),
            Topology::Chained => Ok((0..n).map(|i| ports[(i + 1) % n].clone()).collect()),
            Topology::Loop => Ok(ports.to_vec()),
        }
    }
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
            name: "grorx".to_string(),
            eal: EalSetup::Start {
                user_args: Vec::new(),
                no_huge: false,
            },
            duration: None,
            ports: Vec::new(),
            gen: GenConfig::default(),
            cores: None,
            rx: RxOptions::default(),
            pools: PoolOptions::default(),
            gro: Some(GroConfig::default()),
            skb: SkbOptions::default(),
            stage: StageOptions::default(),
            cycles: false,
        }
    }
}

impl Default for RxOptions {
    fn default() -> Self {
        RxOptions {
            queues: 1,
            desc: 1024,
            burst: 32,
            mtu: None,
            promisc: true,
        }
    }
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            data_room: None,
            cache: 256,
            scope: PoolScope::Socket,
            cached_frames: 0,
        }
    }
}

impl Default for SkbOptions {
    fn default() -> Self {
        SkbOptions {
            mode: SkbMode::Build,
            headroom: RTE_PKTMBUF_HEADROOM as u16,
        }
    }
}

/// A [`SettingError`] as the `anyhow::Error` `validate` returns.
fn refuse(setting: S, value: impl std::fmt::Display, problem: impl Into<String>) -> anyhow::Error {
    SettingError::new(setting, value, problem).into()
}

impl RxOptions {
    fn validate(&self) -> Result<()> {
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(refuse(
                S::Queues,
                self.queues,
                format!("out of range: give 1..={MAX_QUEUES} (RTE_MAX_QUEUES_PER_PORT)"),
            ));
        }
        if self.burst == 0 || self.burst as usize > worker::MAX_BURST {
            return Err(refuse(
                S::Burst,
                self.burst,
                format!("out of range: give 1..={}", worker::MAX_BURST),
            ));
        }
        if self.desc < 32 {
            return Err(refuse(
                S::RxDesc,
                self.desc,
                "too small: give 32 or more (512-4096 is usual)",
            ));
        }
        Ok(())
    }
}

impl PoolOptions {
    fn validate(&self) -> Result<()> {
        if self.cache > MAX_POOL_CACHE {
            return Err(refuse(
                S::PoolCache,
                self.cache,
                format!("out of range: give 0..={MAX_POOL_CACHE} (RTE_MEMPOOL_CACHE_MAX_SIZE)"),
            ));
        }
        if let Some(r) = self.data_room {
            if (r as u32) < RTE_PKTMBUF_HEADROOM + 64 {
                return Err(refuse(
                    S::DataRoom,
                    r,
                    format!(
                        "leaves no room for a frame after the {RTE_PKTMBUF_HEADROOM} B headroom"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl SkbOptions {
    fn validate(&self, gro: bool) -> Result<()> {
        if self.headroom as u32 > RTE_PKTMBUF_HEADROOM {
            return Err(refuse(
                S::Headroom,
                self.headroom,
                format!(
                    "more than DPDK leaves in front of received data ({RTE_PKTMBUF_HEADROOM} B, \
                     RTE_PKTMBUF_HEADROOM, fixed when DPDK is built): give 0..={RTE_PKTMBUF_HEADROOM}"
                ),
            ));
        }
        if self.mode == SkbMode::Copy && !gro {
            return Err(refuse(
                S::SkbMode,
                "copy",
                format!("builds skbs for GRO: use it with GRO on ({})", S::Gro),
            ));
        }
        Ok(())
    }
}

impl StageOptions {
    /// The stages' rules, for a run with `rx_ports` RX ports.
    fn validate(&self, rx_ports: usize) -> Result<()> {
        if let Some((a, b)) = twice(&self.outputs) {
            return Err(refuse(
                S::Outputs,
                format!("{a}, {b}"),
                "both name the same device: give each output once",
            ));
        }
        if let Some(f) = &self.forward {
            if !self.outputs.is_empty() {
                return Err(refuse(
                    S::Outputs,
                    "",
                    format!(
                        "the forward stage's outputs are its {}: give {} only with a stage of your own",
                        S::ForwardTo,
                        S::Outputs
                    ),
                ));
            }
            if self.capture.is_some() {
                return Err(refuse(
                    S::Capture,
                    "",
                    "forward and capture are stages of their own: give one of them",
                ));
            }
            f.validate(rx_ports)?;
        }
        if let Some(p) = &self.capture {
            if p.is_dir() {
                return Err(refuse(
                    S::Capture,
                    p.display(),
                    format!(
                        "is a directory: give a file in it (e.g. {})",
                        p.join("out.pcap").display()
                    ),
                ));
            }
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(d) = dir.filter(|d| !d.is_dir()) {
                return Err(refuse(
                    S::Capture,
                    p.display(),
                    format!("directory {} does not exist", d.display()),
                ));
            }
        }
        Ok(())
    }
}

impl ForwardOptions {
    fn validate(&self, rx_ports: usize) -> Result<()> {
        if self.to.is_empty() {
            return Err(refuse(
                S::ForwardTo,
                "",
                "name an output port (e.g. net_null1)",
            ));
        }
        let rx = rx_ports.max(1);
        if self.to.len() != 1 && self.to.len() != rx {
            return Err(refuse(
                S::ForwardTo,
                "",
                format!(
                    "{} outputs for {rx} RX port(s): give one for all, or one per RX port \
                     ({}), in order",
                    self.to.len(),
                    S::Ports
                ),
            ));
        }
        if let Some((a, b)) = twice(&self.to) {
            return Err(refuse(
                S::ForwardTo,
                format!("{a}, {b}"),
                "both name the same device: give each output once (RX ports that share \
                 an output: give that one alone)",
            ));
        }
        Ok(())
    }
}

/// RX queues a port may have (DPDK 22.11's RTE_MAX_QUEUES_PER_PORT).
pub(super) const MAX_QUEUES: u16 = 1024;
/// The largest per-lcore mempool cache (RTE_MEMPOOL_CACHE_MAX_SIZE).
pub(super) const MAX_POOL_CACHE: u32 = 512;

/// Bytes of EAL memory a run needs beyond its pools (rings, memzones, heap).
pub(super) const EAL_OVERHEAD: u64 = 64 << 20;
/// Memory for `--no-huge -m` when falling back.
pub(super) const NO_HUGE_MIN_MB: u64 = 256;
/// Packets the capture ring holds between workers and the writer.
pub(super) const CAPTURE_SLOTS: u32 = 8192;
/// Bytes copy mode copies into its separate head (a driver's copy-break).
pub(super) const COPY_BREAK: u16 = 128;

impl RunOptions {
    /// Refuses settings that cannot work, with an error that names the
    /// setting ([`SettingError`], or the GRO core's) and says what to give
    /// instead. `start` calls it first.
    pub fn validate(&self) -> Result<()> {
        super::instance::check_name(&self.name)?;
        self.rx.validate()?;
        if let Some(d) = self.duration {
            if !(d > 0.0 && d.is_finite()) {
                return Err(refuse(S::Duration, d, "give a positive number of seconds"));
            }
        }
        self.pools.validate()?;
        // The data room at the MTU asked for (the generator's port has 1500),
        // and the generator's frames in it: known before any port exists.
        if let Some(mtu) = self.rx.mtu {
            self.data_room_for(mtu)?;
        }
        if self.ports.is_empty() {
            self.gen.validate()?;
            let room = self.data_room_for(self.rx.mtu.unwrap_or(1500))?;
            gen::fits(&self.gen, room).map_err(anyhow::Error::msg)?;
        }
        if let Some(g) = &self.gro {
            g.validate()?;
        }
        self.skb.validate(self.gro.is_some())?;
        if let Some((a, b)) = twice(&self.ports) {
            return Err(refuse(
                S::Ports,
                format!("{a}, {b}"),
                "both name the same device: give each port once",
            ));
        }
        #[cfg(feature = "measure")]
        if let Some(m) = &self.stage.measure {
            m.validate(&self.stage, self.gro.is_some())?;
        }
        self.stage.validate(self.ports.len())
    }

    /// What errors call an output: the forward stage's `to`, or the
    /// `outputs` of a stage of the caller's.
    pub(super) fn output_setting(&self) -> S {
        if self.stage.forward.is_some() {
            S::ForwardTo
        } else {
            S::Outputs
        }
    }

    /// Outputs that are RX ports of the run too.
    pub(super) fn rx_outputs(&self) -> usize {
        (self.output_ports().iter())
            .filter(|o| self.ports.iter().any(|p| p.same_device(o)))
            .count()
    }

    pub(super) fn uses_generator(&self) -> bool {
        self.ports.is_empty()
    }

    pub(super) fn data_room_for(&self, mtu: u16) -> Result<u16> {
        match self.pools.data_room {
            Some(r) => Ok(r),
            None => pool_sizing::auto_data_room(mtu as u32, RTE_PKTMBUF_HEADROOM)
                .map_err(anyhow::Error::msg),
        }
    }

    pub(super) fn demand(&self, lcores: u32, queues: u32, extra: u32) -> Demand {
        let gen = self.uses_generator();
        Demand {
            rx_queues: queues,
            rx_desc: self.rx.desc as u32,
            // The TX rings its mbufs may wait in: a stage's own per queue,
            // and every worker's on each RX port the run forwards to.
            tx_queues: queues.max(self.rx_outputs() as u32 * lcores),
            tx_desc: self.rx.desc as u32,
            lcores,
            cache: self.pools.cache,
            burst: self.rx.burst.max(gen::MAX_BURST as u16) as u32,
            // GRO holds at most a burst when it flushes every poll, else up to
            // every flow's packet at its frag budget.
            held_per_queue: match &self.gro {
                Some(g) if g.hold_us > 0 || g.reorder.segments > 0 => {
                    g.flows as u32 * (g.max_frags + g.reorder.segments) as u32
                }
                _ => 0,
            },
            // The generator's rings: RX rings hold up to rx_desc each, plus its pending bursts.
            extra: if gen {
                self.rx.queues as u32 * (self.rx.desc as u32 + gen::MAX_BURST as u32)
            } else {
                0
            } + if self.stage.capture.is_some() {
                CAPTURE_SLOTS
            } else {
                0
            } + extra,
        }
    }

    /// Hugepage memory the run needs (pools at the expected MTU + EAL).
    pub(super) fn memory_needed(&self, lcores: u32) -> Result<u64> {
        let mtu = self.rx.mtu.unwrap_or(1500);
        let room = self.data_room_for(mtu)?;
        let capture = if self.stage.capture.is_some() {
            CAPTURE_SLOTS
        } else {
            0
        };
        let n = pool_sizing::element_count(&self.demand(
            lcores,
            self.rx.queues as u32,
            self.pools.cached_frames + capture,
        ));
        let ports = self.ports.len().max(1) as u64;
        Ok(ports * pool_sizing::pool_bytes(n, PRIV_SIZE as u32, room as u32) + EAL_OVERHEAD)
    }
}

/// Two ports of `specs` that name the same device, if any.
fn twice(specs: &[PortSpec]) -> Option<(&PortSpec, &PortSpec)> {
    specs.iter().enumerate().find_map(|(i, a)| {
        specs[i + 1..]
            .iter()
            .find(|b| a.same_device(b))
            .map(|b| (a, b))
    })
}

/// The mbuf private area reserved for the skb (built in place).
pub const PRIV_SIZE: u16 = skb::PRIV_SIZE;

// Which runs a measurement stage fits is a rule of the options, stated
// here with the others: measure/ sits below run/ and does not see them.
#[cfg(feature = "measure")]
impl Measure {
    pub(crate) fn validate(&self, stage: &StageOptions, gro: bool) -> Result<()> {
        let setting = match self {
            Measure::RteGro => S::RteGro,
            Measure::FreePerPacket => S::FreePerPacket,
        };
        if stage.forward.is_some() {
            return Err(refuse(
                setting,
                "",
                "forward is a stage of its own: use it without a measurement stage",
            ));
        }
        match self {
            Measure::RteGro if gro => Err(refuse(
                setting,
                "",
                format!(
                    "DPDK's rte_gro and grorx's GRO are alternatives: give one ({} None)",
                    S::Gro
                ),
            )),
            Measure::FreePerPacket if stage.capture.is_some() => Err(refuse(
                setting,
                "",
                format!("a sink: use it without {}", S::Capture),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> PortSpec {
        PortSpec::parse(s).unwrap()
    }

    fn forward(rx: &[&str], to: &[&str]) -> RunOptions {
        RunOptions {
            ports: rx.iter().map(|s| spec(s)).collect(),
            stage: StageOptions {
                forward: Some(ForwardOptions {
                    to: to.iter().map(|s| spec(s)).collect(),
                    encap: crate::forward::Encap::None,
                }),
                ..StageOptions::default()
            },
            ..RunOptions::default()
        }
    }

    fn refusal(o: &RunOptions) -> SettingError {
        let e = o.validate().expect_err("refused");
        e.downcast::<SettingError>().expect("a setting refused")
    }

    #[test]
    fn an_rx_port_may_be_an_output_both_ways_or_back_out_of_itself() {
        assert!(
            forward(&["3b:00.0", "3b:00.1"], &["0000:3B:00.1", "3b:00.0"])
                .validate()
                .is_ok()
        );
        assert!(forward(&["net_null0"], &["net_null0"]).validate().is_ok());
        assert!(forward(&["3b:00.0"], &["3b:00.1"]).validate().is_ok());
        let o = RunOptions {
            ports: vec![spec("net_null0"), spec("net_null1")],
            stage: StageOptions {
                outputs: vec![spec("net_null1"), spec("net_null0")],
                ..StageOptions::default()
            },
            ..RunOptions::default()
        };
        assert!(o.validate().is_ok());
    }

    #[test]
    fn topologies_name_each_ports_output_as_testpmd_does() {
        let ports: Vec<PortSpec> = ["net_null0", "net_null1", "net_null2", "net_null3"]
            .iter()
            .map(|s| spec(s))
            .collect();
        let names = |t: Topology, n: usize| -> Vec<String> {
            t.outputs(&ports[..n])
                .unwrap()
                .iter()
                .map(|p| p.to_string())
                .collect()
        };
        assert_eq!(
            names(Topology::Paired, 4),
            ["net_null1", "net_null0", "net_null3", "net_null2"]
        );
        assert_eq!(
            names(Topology::Chained, 3),
            ["net_null1", "net_null2", "net_null0"]
        );
        assert_eq!(names(Topology::Loop, 2), ["net_null0", "net_null1"]);
        let e = Topology::Paired.outputs(&ports[..3]).unwrap_err();
        assert!(e.contains("3 port(s) given, give an even number"), "{e}");
        assert!(Topology::Chained.outputs(&ports[..1]).is_err());
        assert!(Topology::Loop.outputs(&[]).is_err());
    }

    #[test]
    fn a_device_named_twice_among_rx_or_outputs_is_refused() {
        let e = refusal(&forward(&["3b:00.0", "0000:3b:00.0"], &["5e:00.0"]));
        assert_eq!(e.setting, S::Ports, "{e}");
        assert!(e.problem.contains("name the same device"), "{e}");
        let e = refusal(&forward(
            &["3b:00.0", "3b:00.1"],
            &["5e:00.0", "0000:5e:00.0"],
        ));
        assert_eq!(e.setting, S::ForwardTo, "{e}");
        assert_eq!(e.value, "5e:00.0, 0000:5e:00.0");
        let e = refusal(&RunOptions {
            ports: vec![spec("net_null0")],
            stage: StageOptions {
                outputs: vec![spec("3b:00.0"), spec("0000:3b:00.0")],
                ..StageOptions::default()
            },
            ..RunOptions::default()
        });
        assert_eq!(e.setting, S::Outputs, "{e}");
        assert!(e.problem.contains("give each output once"), "{e}");
    }

    #[test]
    fn a_refusal_names_the_setting_and_the_value() {
        let e = refusal(&RunOptions {
            rx: RxOptions {
                queues: 2000,
                ..RxOptions::default()
            },
            ..RunOptions::default()
        });
        assert_eq!(
            e.to_string(),
            "RunOptions::rx.queues 2000: out of range: give 1..=1024 (RTE_MAX_QUEUES_PER_PORT)"
        );
        let gro = RunOptions {
            gro: Some(GroConfig {
                max_frags: 0,
                ..GroConfig::default()
            }),
            ..RunOptions::default()
        }
        .validate()
        .unwrap_err();
        let e = gro.downcast_ref::<crate::gro::SettingError>().unwrap();
        assert_eq!(e.setting, crate::gro::Setting::MaxFrags);
    }
}
