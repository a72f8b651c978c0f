//! The experiment file (TOML): what to run, on what traffic, how often, and
//! what to show. See `bench-configs/*.toml` for examples.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One experiment.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// File stem of the outputs (`DIR/<name>.csv|json|png`).
    pub name: String,
    pub title: String,
    /// The seed (lesson) it reproduces, e.g. "000 MAX_SKB_FRAGS".
    #[serde(default)]
    pub seed: String,
    /// What the seed measured / the rule it teaches.
    #[serde(default)]
    pub lesson: String,
    /// The direction the result should show.
    #[serde(default)]
    pub expect: String,
    pub source: Source,
    /// Seconds measured per run (after the warm-up).
    #[serde(default = "default_duration")]
    pub duration: f64,
    #[serde(default = "default_repetitions")]
    pub repetitions: u32,
    /// Seconds at the start of each run that are not measured (rates are
    /// taken from the `--json-interval` stream after it).
    #[serde(default = "default_warmup")]
    pub warmup: f64,
    /// `--quick`: seconds per run (one repetition, no warm-up).
    #[serde(default = "default_quick_duration")]
    pub quick_duration: f64,
    /// Metrics to show: paths into the sink's JSON report (`rx_pps`,
    /// `gro.avg_segments_per_packet`, `ports.0.stats.imissed`, ...).
    #[serde(default = "default_metrics")]
    pub metrics: Vec<String>,
    /// More report fields recorded per run (CSV, JSON, medians under the
    /// table) but not charted.
    #[serde(default)]
    pub record: Vec<String>,
    /// The cell every median is compared with.
    pub baseline: Option<String>,
    /// Also report each cell's added cost per packet over this cell
    /// (1/rate - 1/rate(cost_base), per repetition; see `bench::cost`).
    pub cost_base: Option<String>,
    /// ... and each added cost's ratio to this cell's.
    pub cost_reference: Option<String>,
    /// `grorx sink` arguments for every cell (a cell's own win, flag by flag).
    #[serde(default)]
    pub args: Vec<String>,
    /// EAL arguments for every process (same cores for all); default
    /// `-l 0,1`, or `--lcores 0@0,1@1,2@0` with the embedded generator.
    pub eal: Option<Vec<String>>,
    /// The whole experiment waits on something (the reason).
    pub pending: Option<String>,
    /// Free text carried into the JSON and the table header.
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default)]
    pub cells: Vec<CellSpec>,
    pub sweep: Option<Sweep>,
}

fn default_duration() -> f64 {
    5.0
}
fn default_repetitions() -> u32 {
    3
}
fn default_warmup() -> f64 {
    1.0
}
fn default_quick_duration() -> f64 {
    1.0
}
fn default_metrics() -> Vec<String> {
    vec!["rx_pps".into()]
}

/// Where the traffic comes from.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// The embedded generator (no --port): its `--gen-*` options.
    Generator {
        #[serde(default = "default_gen_flows")]
        flows: u32,
        #[serde(default = "default_mss")]
        mss: u16,
        #[serde(default)]
        ipv6: bool,
        /// Packets per second, 0 = as fast as the sink takes them.
        #[serde(default)]
        rate: u64,
        /// UDP datagrams of `mss` bytes instead of TCP segments.
        #[serde(default)]
        udp: bool,
    },
    /// A capture replayed from memory (net_pcap, infinite_rx=1): `path`
    /// (relative to the config file), or `synth`, written by the bench into
    /// the output directory. Never one in place of the other: a missing
    /// `path` is made with `make` (as root) or refused.
    Pcap {
        path: Option<PathBuf>,
        synth: Option<Synth>,
        #[serde(default)]
        make: Option<Vec<String>>,
    },
    /// net_null: endless 64 B zero-filled frames.
    NetNull,
    /// A memif link to a peer process started for every run.
    Memif {
        #[serde(default)]
        peer: Peer,
        /// Frame length the txonly peer sends.
        #[serde(default = "default_frame_len")]
        frame_len: u16,
        /// The capture a `testpmd-pcap` peer replays (as for `pcap`).
        path: Option<PathBuf>,
        synth: Option<Synth>,
        #[serde(default)]
        make: Option<Vec<String>>,
    },
}

/// A capture source's `path`, `synth` and `make`.
pub type CaptureSpec<'a> = (Option<&'a Path>, Option<&'a Synth>, Option<&'a [String]>);

impl Source {
    /// What a source that replays a capture names (None: no capture).
    pub fn capture(&self) -> Option<CaptureSpec<'_>> {
        match self {
            Source::Pcap { path, synth, make }
            | Source::Memif {
                peer: Peer::TestpmdPcap,
                path,
                synth,
                make,
                ..
            } => Some((path.as_deref(), synth.as_ref(), make.as_deref())),
            _ => None,
        }
    }
}

fn default_gen_flows() -> u32 {
    1
}
fn default_mss() -> u16 {
    1448
}
fn default_frame_len() -> u16 {
    1514
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    /// `dpdk-testpmd --forward-mode=txonly` as the memif server (UDP).
    #[default]
    TestpmdTxonly,
    /// `dpdk-testpmd --forward-mode=io` from a capture replayed from memory
    /// (net_pcap infinite_rx) into the memif: TCP traffic, and the sink's
    /// memif RX can split frames over several mbufs (net_pcap's
    /// infinite_rx cannot).
    TestpmdPcap,
    /// grorx itself as the sending peer (pending: grorx has no transmit mode).
    Grorx,
}

/// A capture the bench writes from `grorx::traffic`: `flows` TCP flows of
/// `segments` MSS-sized segments each, interleaved `interleave` segments at
/// a time, PSH only on each flow's last segment.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Synth {
    #[serde(default = "default_gen_flows")]
    pub flows: u32,
    #[serde(default = "default_segments")]
    pub segments: u32,
    #[serde(default = "default_mss")]
    pub mss: u16,
    #[serde(default)]
    pub ipv6: bool,
    #[serde(default = "default_interleave")]
    pub interleave: u32,
}

fn default_segments() -> u32 {
    4096
}
fn default_interleave() -> u32 {
    8
}

/// What runs in a cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Command {
    /// `grorx sink ... --json -q` (this binary).
    #[default]
    Sink,
    /// `grorx forward ... --json -q` (this binary).
    Forward,
    /// `dpdk-testpmd --forward-mode=rxonly` on the same port and cores: the
    /// DPDK floor.
    TestpmdRxonly,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CellSpec {
    pub name: String,
    /// Extra `grorx sink` arguments (for testpmd: testpmd application args).
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub command: Command,
    /// Skip this cell, with the reason (what it waits on).
    pub pending: Option<String>,
    /// A remark shown with the cell.
    pub note: Option<String>,
}

impl Command {
    /// The grorx subcommand a cell runs, or None (not grorx).
    pub fn grorx(self) -> Option<&'static str> {
        match self {
            Command::Sink => Some("sink"),
            Command::Forward => Some("forward"),
            Command::TestpmdRxonly => None,
        }
    }
}

/// One flag over a list of values -> one cell per value, named
/// `<flag without dashes>=<value>` unless `name` (with `{}` for the value).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    pub flag: String,
    pub values: Vec<toml::Value>,
    pub name: Option<String>,
    /// Axis label for the chart (default: the flag).
    pub label: Option<String>,
    /// Arguments added to every swept cell.
    #[serde(default)]
    pub args: Vec<String>,
}

/// A cell after expansion.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub name: String,
    pub command: Command,
    pub args: Vec<String>,
    /// The swept value, for sweep cells.
    pub sweep_value: Option<String>,
    pub pending: Option<String>,
    pub note: Option<String>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Config> {
        let c: Config = toml::from_str(text)?;
        c.validate()?;
        Ok(c)
    }

    fn validate(&self) -> Result<()> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!(
                "name {:?}: letters, digits, - and _ only (it names the output files)",
                self.name
            );
        }
        for (key, v, min, max) in [
            ("duration", self.duration, f64::MIN_POSITIVE, 86400.0),
            (
                "quick_duration",
                self.quick_duration,
                f64::MIN_POSITIVE,
                86400.0,
            ),
            ("warmup", self.warmup, 0.0, 3600.0),
        ] {
            // Also refuses nan and inf (no comparison holds for nan).
            if !(v >= min && v <= max) {
                bail!("{key} = {v} is out of range: give seconds, more than 0 and at most {max}");
            }
        }
        if self.repetitions == 0 {
            bail!("repetitions must be at least 1");
        }
        if self.metrics.is_empty() {
            bail!("metrics: name at least one (e.g. \"rx_pps\")");
        }
        let cells = self.cells();
        if cells.is_empty() {
            bail!("no cells: give [[cells]] or a [sweep]");
        }
        for (i, c) in cells.iter().enumerate() {
            if cells[..i].iter().any(|d| d.name == c.name) {
                bail!("two cells named {:?}", c.name);
            }
            if c.name.is_empty() {
                bail!("a cell without a name");
            }
        }
        for (key, v) in [
            ("baseline", &self.baseline),
            ("cost_base", &self.cost_base),
            ("cost_reference", &self.cost_reference),
        ] {
            if let Some(b) = v {
                if !cells.iter().any(|c| &c.name == b) {
                    bail!(
                        "{key} {b:?} is not a cell (cells: {})",
                        cells
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
            }
        }
        if self.cost_reference.is_some() && self.cost_base.is_none() {
            bail!("cost_reference needs cost_base (the cell costs are added to)");
        }
        if let Some(s) = &self.sweep {
            if !s.flag.starts_with("--") {
                bail!(
                    "sweep.flag {:?} must be a long option (--max-frags)",
                    s.flag
                );
            }
            if s.values.is_empty() {
                bail!("sweep.values is empty");
            }
        }
        let needs_port = cells.iter().any(|c| c.command == Command::TestpmdRxonly);
        if needs_port && matches!(self.source, Source::Generator { .. }) {
            bail!("testpmd-rxonly cells need a port source (pcap, net_null, memif), not the embedded generator");
        }
        if let Some((path, synth, make)) = self.source.capture() {
            match (path, synth) {
                (None, None) => bail!("a capture source needs `path` or `synth`"),
                // Figures said to be on a real capture must not quietly
                // come from a synthetic one.
                (Some(_), Some(_)) => bail!(
                    "give `path` or `synth`, not both: synth is no stand-in for a missing \
                     capture (`make` names the command that makes it)"
                ),
                _ => {}
            }
            if let Some(m) = make {
                if path.is_none() {
                    bail!("`make` makes the capture `path` names: give `path`");
                }
                if m.first().is_none_or(|p| p.is_empty()) {
                    bail!("`make` is a command line: [\"program\", \"arg\", ...]");
                }
            }
        }
        crate::args::check_reserved(&self.args)?;
        for c in &cells {
            if c.command.grorx().is_some() {
                crate::args::check_reserved(&c.args)
                    .with_context(|| format!("cell {:?}", c.name))?;
            }
        }
        Ok(())
    }

    /// The explicit cells, then the swept ones.
    pub fn cells(&self) -> Vec<Cell> {
        let mut out: Vec<Cell> = self
            .cells
            .iter()
            .map(|c| Cell {
                name: c.name.clone(),
                command: c.command,
                args: c.args.clone(),
                sweep_value: None,
                pending: c.pending.clone(),
                note: c.note.clone(),
            })
            .collect();
        if let Some(s) = &self.sweep {
            let bare = s.flag.trim_start_matches('-');
            for v in &s.values {
                let v = value_text(v);
                let name = match &s.name {
                    Some(pat) => pat.replace("{}", &v),
                    None => format!("{bare}={v}"),
                };
                let mut args = s.args.clone();
                args.push(s.flag.clone());
                args.push(v.clone());
                out.push(Cell {
                    name,
                    command: Command::Sink,
                    args,
                    sweep_value: Some(v),
                    pending: None,
                    note: None,
                });
            }
        }
        out
    }
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWEEP: &str = r#"
name = "mf"
title = "t"
metrics = ["rx_pps", "gro.avg_segments_per_packet"]
baseline = "max-frags=17"
source = { kind = "pcap", synth = { flows = 1, segments = 64 } }
[[cells]]
name = "floor"
command = "testpmd-rxonly"
[sweep]
flag = "--max-frags"
values = [3, 17, "45"]
"#;

    #[test]
    fn sweep_expands_to_cells() {
        let c = Config::parse(SWEEP).unwrap();
        let cells = c.cells();
        let names: Vec<_> = cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["floor", "max-frags=3", "max-frags=17", "max-frags=45"]
        );
        assert_eq!(cells[2].args, ["--max-frags", "17"]);
        assert_eq!(cells[3].sweep_value.as_deref(), Some("45"));
        assert_eq!(cells[0].command, Command::TestpmdRxonly);
        assert_eq!(c.repetitions, 3);
        match &c.source {
            Source::Pcap {
                synth: Some(s),
                path: None,
                make: None,
            } => assert_eq!((s.flows, s.segments, s.mss), (1, 64, 1448)),
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn rejects_what_cannot_run() {
        let bad_baseline = SWEEP.replace("max-frags=17\"", "nope\"");
        assert!(Config::parse(&bad_baseline)
            .unwrap_err()
            .to_string()
            .contains("not a cell"));
        let gen_testpmd = SWEEP.replace(
            "source = { kind = \"pcap\", synth = { flows = 1, segments = 64 } }",
            "source = { kind = \"generator\" }",
        );
        assert!(Config::parse(&gen_testpmd).is_err());
        let reserved = SWEEP.replace(
            "values = [3, 17, \"45\"]",
            "values = [3]\nargs = [\"--json\"]",
        );
        assert!(Config::parse(&reserved).is_err());
        let unknown = format!("{SWEEP}\n[extra]\nx = 1\n");
        assert!(Config::parse(&unknown).is_err());
        let src = "source = { kind = \"pcap\", synth = { flows = 1, segments = 64 } }";
        let both = SWEEP.replace(
            src,
            "source = { kind = \"pcap\", path = \"a.pcap\", synth = { flows = 1 } }",
        );
        assert!(Config::parse(&both)
            .unwrap_err()
            .to_string()
            .contains("not both"));
        let make_no_path = SWEEP.replace(
            src,
            "source = { kind = \"pcap\", synth = { flows = 1 }, make = [\"mk\"] }",
        );
        assert!(Config::parse(&make_no_path).is_err());
        let made = SWEEP.replace(
            src,
            "source = { kind = \"pcap\", path = \"a.pcap\", make = [\"./mk.sh\", \"../x\"] }",
        );
        assert!(Config::parse(&made).is_ok());
    }
}
