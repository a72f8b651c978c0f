//! Live engine state over DPDK telemetry: `/grorx/stats`, `/grorx/queues`
//! and `/grorx/gro`, answered on EAL's telemetry socket
//! (`<runtime dir>/dpdk_telemetry.v2`, e.g. `dpdk-telemetry.py -f grorx`: the
//! run's name is its file prefix).
//!
//! - [`register`] adds the commands once per process, after EAL started.
//! - [`set_live`] says what they report (`None`: `{"running":0}`).
//!
//! DPDK runs each command on the client's own thread (one per connection),
//! never on a worker lcore. The only lock is the one around the current
//! [`Live`]: taken by [`set_live`] and, for an `Arc` clone, by the callback.
//! Workers never touch it; the callback reads their counters with relaxed
//! loads, as the stats loop does.
//!
//! Limits of DPDK 22.11's telemetry, which the replies respect:
//! - no booleans or floats: `running` is 0/1, averages are integers in
//!   thousandths (`avg_burst_milli` 1500 = 1.5 packets per burst);
//! - dict names only `[A-Za-z0-9_/]`, names and string values under 128
//!   bytes, at most 256 entries per dict; string values must be ASCII
//!   (its JSON escaper indexes a table with a signed char);
//! - a reply is cut at 16 KiB (entries that do not fit are silently left
//!   out): `/grorx/queues` lists as many queues as fit and says so;
//! - containers: dicts nest in dicts; arrays hold no dicts.
//!
//! The release profile aborts on panic, so the callback is built not to
//! panic (no indexing, no unwrap, saturating sums); `catch_unwind` guards
//! the test and debug builds only.

use crate::counters::stats::{QueueCounters, QueueCounts};
use crate::dpdk::eal::{self, Eal};
use crate::dpdk::telemetry::{self, MAX_DICT_ENTRIES, MAX_STRING_LEN};
pub use crate::dpdk::telemetry::{Dict, Val};
use crate::gro::GroStats;
use anyhow::{anyhow, bail, Result};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// One RX queue as the engine placed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueInfo {
    pub port: u16,
    pub queue: u16,
    /// The worker lcore polling it.
    pub lcore: u32,
    /// The CPU that lcore runs on.
    pub cpu: i32,
}

/// What the telemetry commands report while a run is going.
pub struct Live {
    /// `queues[i]` describes `counters[i]` (the engine's slot order).
    pub queues: Vec<QueueInfo>,
    pub counters: Arc<[QueueCounters]>,
    /// Port id and name.
    pub ports: Vec<(u16, String)>,
    pub started: Instant,
    pub gro_on: bool,
}

impl Live {
    /// The engine's view: `plan` places every counter slot on an lcore;
    /// `ports` are (id, name).
    pub fn new(
        eal: &Eal,
        plan: &[crate::worker::Assignment],
        counters: Arc<[QueueCounters]>,
        ports: Vec<(u16, String)>,
        started: Instant,
        gro_on: bool,
    ) -> Live {
        let unplaced = QueueInfo {
            port: 0,
            queue: 0,
            lcore: 0,
            cpu: -1,
        };
        let mut queues = vec![unplaced; counters.len()];
        for a in plan {
            for q in &a.queues {
                if let Some(slot) = queues.get_mut(q.slot) {
                    *slot = QueueInfo {
                        port: q.port,
                        queue: q.queue,
                        lcore: a.lcore,
                        cpu: eal.lcore_cpu(a.lcore),
                    };
                }
            }
        }
        Live {
            queues,
            counters,
            ports,
            started,
            gro_on,
        }
    }
}

/// The commands and their help texts (DPDK takes help under 128 bytes).
pub const CMD_STATS: &str = "/grorx/stats";
pub const CMD_QUEUES: &str = "/grorx/queues";
pub const CMD_GRO: &str = "/grorx/gro";
pub const HELP_STATS: &str =
    "grorx totals: rx/out packets and bytes, uptime, queues, GRO segments per packet. No parameters";
pub const HELP_QUEUES: &str =
    "grorx per RX queue: port, queue, lcore, cpu, packets, bytes, polls, bursts. Parameter: queue (N or PORT:QUEUE)";
pub const HELP_GRO: &str =
    "grorx GRO flush reasons and passthrough counts, summed over queues. Parameter: queue (N or PORT:QUEUE)";

const COMMANDS: [(&str, &str); 3] = [
    (CMD_STATS, HELP_STATS),
    (CMD_QUEUES, HELP_QUEUES),
    (CMD_GRO, HELP_GRO),
];

/// MAX_OUTPUT_LEN in telemetry.c, less the `{"<cmd>":` prefix, the closing
/// brace and a margin.
const REPLY_BUDGET: usize = 16 * 1024 - 128;

static LIVE: Mutex<Option<Arc<Live>>> = Mutex::new(None);
static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();

/// Registers the grorx commands with DPDK telemetry. Once per process; later
/// calls return the first call's result. EAL must be running.
pub fn register() -> Result<()> {
    if Eal::get().is_none() {
        bail!(
            "telemetry: EAL is not running in this process; register the grorx telemetry \
             commands after EAL started (Eal::init)"
        );
    }
    REGISTERED
        .get_or_init(|| {
            for (cmd, help) in COMMANDS {
                telemetry::register_command(cmd, help, reply).map_err(|ret| {
                    format!(
                        "telemetry: registering {cmd} failed: {} ({ret})",
                        eal::strerror(ret)
                    )
                })?;
            }
            Ok(())
        })
        .clone()
        .map_err(|e| anyhow!("{e}"))
}

/// Sets what the commands report; `None` when no run is going.
pub fn set_live(live: Option<Arc<Live>>) {
    let old = {
        let mut g = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::replace(&mut *g, live)
    };
    // The previous state is dropped outside the lock.
    drop(old);
}

/// Reports `live` until dropped (then the commands answer `running: 0`),
/// also when the run ends early with an error.
#[must_use = "the commands stop reporting when this is dropped"]
pub struct LiveGuard(());

/// [`set_live`] for a scope: `let _tele = telemetry::live_scope(live);`
pub fn live_scope(live: Live) -> LiveGuard {
    set_live(Some(Arc::new(live)));
    LiveGuard(())
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        set_live(None);
    }
}

/// The telemetry socket of this process's EAL, if it exists (not with
/// `--no-telemetry`; a second process with the same prefix gets `...v2:1`).
pub fn socket_path() -> Option<std::path::PathBuf> {
    let p = eal::runtime_dir()?.join("dpdk_telemetry.v2");
    p.exists().then_some(p)
}

fn current() -> Option<Arc<Live>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

// ---------------------------------------------------------------------------
// Replies, built in Rust first (pure, testable), then written to DPDK.

fn u(k: &str, v: u64) -> (String, Val) {
    (k.to_string(), Val::U64(v))
}

fn s(k: &str, v: impl Into<String>) -> (String, Val) {
    (k.to_string(), Val::Str(v.into()))
}

fn not_running() -> Dict {
    vec![(String::from("running"), Val::Int(0))]
}

/// `a / b` in thousandths, an integer: 22.11's telemetry has no floats,
/// and a number a reader parses as a string is a trap.
fn milli(a: u64, b: u64) -> u64 {
    if b == 0 {
        0
    } else {
        (a as u128 * 1000 / b as u128).min(u64::MAX as u128) as u64
    }
}

/// The exported per-queue counters by their table names.
fn counts(l: &QueueCounts) -> impl Iterator<Item = (String, Val)> + '_ {
    l.exported().map(|(d, v)| u(d.name, v))
}

/// `/grorx/stats`: totals over every queue.
pub fn stats_reply(live: Option<&Live>) -> Dict {
    let Some(l) = live else {
        return not_running();
    };
    let t = l.counters.iter().fold(QueueCounts::default(), |mut a, c| {
        a.add(&c.read());
        a
    });
    let up = l.started.elapsed();
    let mut d = vec![
        (String::from("running"), Val::Int(1)),
        u("uptime_s", up.as_secs()),
        u("uptime_ms", up.as_millis().min(u64::MAX as u128) as u64),
        u("queues", l.counters.len() as u64),
        (
            String::from("ports"),
            Val::Dict(
                l.ports
                    .iter()
                    .take(MAX_DICT_ENTRIES)
                    .map(|(id, name)| (id.to_string(), Val::Str(name.clone())))
                    .collect(),
            ),
        ),
        s("gro", if l.gro_on { "on" } else { "off" }),
    ];
    d.extend(counts(&t));
    if l.gro_on {
        let g = l.counters.iter().fold(GroStats::default(), |mut a, c| {
            a.add(&c.read_gro());
            a
        });
        d.extend([
            u("gro_segments_in", g.segments_in),
            u("gro_packets_out", g.packets_out),
            u("gro_merged_segments", g.merged_segments),
            u("gro_max_segments_per_packet", g.max_segments),
            u(
                "gro_avg_segments_per_packet_milli",
                milli(g.segments_in, g.packets_out),
            ),
        ]);
    }
    d
}

/// Which queue a parameter names: `N` (the index `/grorx/queues` lists) or
/// `PORT:QUEUE`. `Ok(None)`: no parameter (every queue).
pub fn parse_queue(live: &Live, param: Option<&str>) -> Result<Option<usize>, String> {
    let p = param.map(str::trim).unwrap_or("");
    if p.is_empty() {
        return Ok(None);
    }
    let n = live.queues.len().min(live.counters.len());
    let found = if let Some((port, queue)) = p.split_once(':') {
        let (port, queue) = match (port.trim().parse::<u16>(), queue.trim().parse::<u16>()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return Err(format!("bad queue '{p}': give N or PORT:QUEUE")),
        };
        live.queues
            .iter()
            .take(n)
            .position(|q| q.port == port && q.queue == queue)
    } else {
        match p.parse::<usize>() {
            Ok(i) => (i < n).then_some(i),
            Err(_) => return Err(format!("bad queue '{p}': give N or PORT:QUEUE")),
        }
    };
    found
        .map(Some)
        .ok_or_else(|| format!("no queue '{p}' ({n} queue(s): 0..{})", n.saturating_sub(1)))
}

fn error_reply(msg: &str) -> Dict {
    vec![(String::from("running"), Val::Int(1)), s("error", msg)]
}

fn queue_dict(q: &QueueInfo, c: &QueueCounters, gro_on: bool) -> Dict {
    let l = c.read();
    let mut d = vec![
        u("port", q.port as u64),
        u("queue", q.queue as u64),
        u("lcore", q.lcore as u64),
        (String::from("cpu"), Val::Int(q.cpu)),
        u("avg_burst_milli", milli(l.rx_packets, l.rx_bursts)),
    ];
    d.extend(counts(&l));
    if gro_on {
        let g = c.read_gro();
        d.extend([
            u("gro_segments_in", g.segments_in),
            u("gro_packets_out", g.packets_out),
        ]);
    }
    d
}

/// `/grorx/queues`: one dict per queue, keyed by its index; as many as fit
/// in a reply (`listed` says how many, `truncated` 1 if not all).
pub fn queues_reply(live: Option<&Live>, param: Option<&str>) -> Dict {
    let Some(l) = live else {
        return not_running();
    };
    let pick = match parse_queue(l, param) {
        Ok(p) => p,
        Err(e) => return error_reply(&e),
    };
    let n = l.queues.len().min(l.counters.len());
    let mut d = vec![
        (String::from("running"), Val::Int(1)),
        u("queues", n as u64),
    ];
    // Room for the two trailing counts.
    let mut used = json_len(&d) + 40;
    let mut listed = 0u64;
    let indices: Box<dyn Iterator<Item = usize>> = match pick {
        Some(i) => Box::new(std::iter::once(i)),
        None => Box::new(0..n),
    };
    for i in indices {
        let (Some(q), Some(c)) = (l.queues.get(i), l.counters.get(i)) else {
            continue;
        };
        let e = (i.to_string(), Val::Dict(queue_dict(q, c, l.gro_on)));
        let add = entry_len(&e) + 1;
        if used + add > REPLY_BUDGET || d.len() + 2 >= MAX_DICT_ENTRIES {
            break;
        }
        used += add;
        d.push(e);
        listed += 1;
    }
    let expected = if pick.is_some() { 1 } else { n as u64 };
    d.push(u("listed", listed));
    d.push(u("truncated", (listed < expected) as u64));
    d
}

/// `/grorx/gro`: flush reasons and passthrough counts by name, over every
/// queue or the one the parameter names.
pub fn gro_reply(live: Option<&Live>, param: Option<&str>) -> Dict {
    let Some(l) = live else {
        return not_running();
    };
    let pick = match parse_queue(l, param) {
        Ok(p) => p,
        Err(e) => return error_reply(&e),
    };
    let mut d = vec![
        (String::from("running"), Val::Int(1)),
        s("gro", if l.gro_on { "on" } else { "off" }),
    ];
    let g = match pick {
        None => {
            d.push(s("scope", "all"));
            d.push(u("queues", l.counters.len() as u64));
            l.counters.iter().fold(GroStats::default(), |mut a, c| {
                a.add(&c.read_gro());
                a
            })
        }
        Some(i) => {
            let (Some(q), Some(c)) = (l.queues.get(i), l.counters.get(i)) else {
                return error_reply("queue vanished");
            };
            d.push(s("scope", i.to_string()));
            d.push(u("port", q.port as u64));
            d.push(u("queue", q.queue as u64));
            d.push(u("lcore", q.lcore as u64));
            c.read_gro()
        }
    };
    let r = g.report();
    d.extend([
        u("segments_in", r.segments_in),
        u("packets_out", r.packets_out),
        u("merged_segments", r.merged_segments),
        u("heads_built", r.heads_built),
        u("heads_cached", r.heads_cached),
        u("max_segments_per_packet", r.max_segments_per_packet),
        u("reorder_held", r.reorder.held),
        u("reorder_filled", r.reorder.filled),
        u(
            "avg_segments_per_packet_milli",
            milli(r.segments_in, r.packets_out),
        ),
        (
            String::from("flush_reasons"),
            Val::Dict(
                r.flush_reasons
                    .into_iter()
                    .map(|(k, v)| (k, Val::U64(v)))
                    .collect(),
            ),
        ),
        (
            String::from("passthrough"),
            Val::Dict(
                r.passthrough
                    .into_iter()
                    .map(|(k, v)| (k, Val::U64(v)))
                    .collect(),
            ),
        ),
        u("malformed", r.malformed),
        u("bad_checksum", r.bad_checksum),
    ]);
    d
}

/// The reply to one command, or None for a command that is not ours.
fn reply(cmd: &[u8], param: Option<&str>) -> Option<Dict> {
    let live = current();
    let live = live.as_deref();
    match cmd {
        c if c == CMD_STATS.as_bytes() => Some(stats_reply(live)),
        c if c == CMD_QUEUES.as_bytes() => Some(queues_reply(live, param)),
        c if c == CMD_GRO.as_bytes() => Some(gro_reply(live, param)),
        _ => None,
    }
}

/// Bytes DPDK's JSON for one `"name":value` entry takes (for the budget).
fn entry_len((k, v): &(String, Val)) -> usize {
    let name = k.len().min(MAX_STRING_LEN - 1) + 3;
    name + match v {
        Val::U64(x) => x.to_string().len(),
        Val::Int(x) => x.to_string().len(),
        Val::Str(x) => {
            2 + x
                .bytes()
                .take(MAX_STRING_LEN - 1)
                .map(|b| if b == b'"' || b == b'\\' { 2 } else { 1 })
                .sum::<usize>()
        }
        Val::Dict(d) => json_len(d),
    }
}

/// Bytes DPDK's JSON for a dict takes.
pub fn json_len(d: &Dict) -> usize {
    2 + d.iter().map(entry_len).sum::<usize>() + d.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::stats::QUEUE_COUNTERS;
    use crate::gro::{Flush, Pass};

    fn live(n: usize) -> Live {
        let counters: Arc<[QueueCounters]> = (0..n).map(|_| QueueCounters::default()).collect();
        for (i, c) in counters.iter().enumerate() {
            let i = i as u64 + 1;
            c.publish(&QueueCounts {
                rx_packets: 100 * i,
                rx_bytes: 150_000 * i,
                rx_bursts: 10 * i,
                rx_polls: 40 * i,
                out_bytes: 149_000 * i,
                ..Default::default()
            });
            let mut g = GroStats {
                segments_in: 100 * i,
                packets_out: 50 * i,
                merged_segments: 50 * i,
                max_segments: 4 + i,
                ..Default::default()
            };
            g.flush[Flush::Psh as usize] = 3 * i;
            g.pass[Pass::NoPayload.index()] = i;
            c.publish_gro(&g);
        }
        Live {
            queues: (0..n)
                .map(|i| QueueInfo {
                    port: (i / 4) as u16,
                    queue: (i % 4) as u16,
                    lcore: 1 + i as u32,
                    cpu: i as i32 % 2,
                })
                .collect(),
            counters,
            ports: vec![(0, "net_ring0".into())],
            started: Instant::now(),
            gro_on: true,
        }
    }

    fn get<'a>(d: &'a Dict, k: &str) -> &'a Val {
        &d.iter()
            .find(|(n, _)| n == k)
            .unwrap_or_else(|| panic!("{k}"))
            .1
    }

    #[test]
    fn help_and_names_fit_dpdk_limits() {
        for (c, h) in COMMANDS {
            assert!(c.len() < 56 && c.starts_with('/'));
            assert!(c
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'/'));
            assert!(h.len() < MAX_STRING_LEN, "{c}: help is {} bytes", h.len());
        }
    }

    #[test]
    fn not_running_says_so() {
        for d in [
            stats_reply(None),
            queues_reply(None, None),
            gro_reply(None, Some("0")),
        ] {
            assert_eq!(d, vec![("running".to_string(), Val::Int(0))]);
        }
    }

    #[test]
    fn totals_and_gro_sums() {
        let l = live(3);
        let d = stats_reply(Some(&l));
        assert_eq!(get(&d, "rx_packets"), &Val::U64(600));
        assert_eq!(get(&d, "gro_segments_in"), &Val::U64(600));
        assert_eq!(get(&d, "gro_packets_out"), &Val::U64(300));
        assert_eq!(
            get(&d, "gro_avg_segments_per_packet_milli"),
            &Val::U64(2000)
        );
        let g = gro_reply(Some(&l), None);
        let Val::Dict(f) = get(&g, "flush_reasons") else {
            panic!()
        };
        assert_eq!(get(f, "psh"), &Val::U64(18));
        assert_eq!(get(&g, "max_segments_per_packet"), &Val::U64(7));
        let g1 = gro_reply(Some(&l), Some(" 0:1 "));
        assert_eq!(get(&g1, "segments_in"), &Val::U64(200));
        assert_eq!(get(&g1, "scope"), &Val::Str("1".into()));
        let e = gro_reply(Some(&l), Some("7"));
        assert!(matches!(get(&e, "error"), Val::Str(m) if m.contains("no queue")));
        let e = gro_reply(Some(&l), Some("x"));
        assert!(matches!(get(&e, "error"), Val::Str(m) if m.contains("bad queue")));
    }

    #[test]
    fn every_exported_counter_is_in_the_totals_and_each_queue() {
        let l = live(2);
        let d = stats_reply(Some(&l));
        let q = queues_reply(Some(&l), Some("1"));
        let Val::Dict(q) = get(&q, "1") else { panic!() };
        let t = l.counters[0].read();
        for (def, v) in t.each() {
            let named = |d: &Dict| d.iter().any(|(k, _)| k == def.name);
            assert_eq!(named(&d), def.exported(), "{} in /grorx/stats", def.name);
            assert_eq!(named(q), def.exported(), "{} in a queue", def.name);
            if def.exported() {
                let sum = v + l.counters[1].read().values()
                    [QUEUE_COUNTERS.iter().position(|x| x == def).unwrap()];
                assert_eq!(get(&d, def.name), &Val::U64(sum), "{}", def.name);
            }
        }
    }

    #[test]
    fn many_queues_stay_under_the_reply_limit() {
        let l = live(200);
        let d = queues_reply(Some(&l), None);
        assert!(json_len(&d) <= REPLY_BUDGET, "{}", json_len(&d));
        assert_eq!(get(&d, "truncated"), &Val::U64(1));
        let Val::U64(listed) = get(&d, "listed") else {
            panic!()
        };
        assert!(*listed > 10 && *listed < 200, "{listed}");
        let small = queues_reply(Some(&l), Some("150"));
        assert_eq!(get(&small, "listed"), &Val::U64(1));
        assert_eq!(get(&small, "truncated"), &Val::U64(0));
    }

    #[test]
    fn register_needs_eal() {
        // The lib's unit tests never start EAL.
        let e = register().unwrap_err().to_string();
        assert!(e.contains("EAL is not running"), "{e}");
    }
}
