//! Traffic sources: the `grorx sink` arguments each one becomes, the
//! captures the bench writes itself, and what every source costs itself
//! (said in the table header and the JSON).

use crate::config::{Peer, Source, Synth};
use anyhow::{bail, Context, Result};
use grorx::pcap;
use grorx_gro::traffic::{segment_stream, FlowSpec};
use serde::Serialize;
use std::path::{Component, Path, PathBuf};

/// Placeholder for the per-run memif socket path in port specs.
pub const SOCKET: &str = "{socket}";

/// A source made ready to run.
#[derive(Debug, Clone, Serialize)]
pub struct Prepared {
    pub kind: String,
    /// `grorx sink` arguments that select it (`--port ...` or `--gen-*`).
    pub sink_args: Vec<String>,
    /// The DPDK vdev spec (testpmd `--vdev`), when it is a port.
    pub port_spec: Option<String>,
    /// What it is, in one line.
    pub description: String,
    /// What the source costs itself, and whether that is in the measurement.
    pub cost: String,
    /// EAL arguments when the config names none.
    pub default_eal: Vec<String>,
    /// Frames in the replayed capture (sizes testpmd's pool).
    pub frames: Option<u64>,
    pub pcap: Option<PathBuf>,
    /// A peer process started for every run (memif).
    pub peer: Option<Peer>,
    /// Frame length the peer sends.
    pub peer_frame_len: u16,
    /// Report fields about the source recorded on every sink run.
    pub extra_metrics: Vec<String>,
    /// The source cannot run yet (why).
    pub pending: Option<String>,
}

/// Lcores for one sink process: main 0, worker 1.
fn two_cores() -> Vec<String> {
    vec!["-l".into(), "0,1".into()]
}

/// Resolves a source; writes a synthetic capture into `out` if asked.
pub fn prepare(src: &Source, config_dir: &Path, out: &Path) -> Result<Prepared> {
    Ok(match src {
        Source::Generator {
            flows,
            mss,
            ipv6,
            rate,
            udp,
        } => {
            let mut args = vec![
                "--gen-flows".to_string(),
                flows.to_string(),
                "--gen-mss".into(),
                mss.to_string(),
            ];
            if *ipv6 {
                args.push("--gen-ipv6".into());
            }
            if *rate > 0 {
                args.push("--gen-rate".into());
                args.push(rate.to_string());
            }
            if *udp {
                args.push("--gen-udp".into());
            }
            Prepared {
                kind: "generator".into(),
                sink_args: args,
                port_spec: None,
                description: format!(
                    "embedded generator: {flows} {}/{} flow(s), {} {mss}{}",
                    if *udp { "UDP" } else { "TCP" },
                    if *ipv6 { "IPv6" } else { "IPv4" },
                    if *udp { "datagrams of" } else { "MSS" },
                    if *rate > 0 { format!(", {rate} pps") } else { ", max rate".into() }
                ),
                cost: "the generator runs on its own lcore (lcore 2, sharing CPU 0 with the sleeping \
                       main lcore) and writes every payload byte as a NIC's DMA would; its own cost is \
                       source.cycles_per_packet (TSC cycles per packet, not in the sink's); when \
                       source.ring_full_waits is 0 the generator, not the sink, was the limit"
                    .into(),
                default_eal: vec!["--lcores".into(), "0@0,1@1,2@0".into()],
                frames: None,
                pcap: None,
                peer: None,
                peer_frame_len: 0,
                extra_metrics: vec![
                    "source.cycles_per_packet".into(),
                    "source.ring_full_waits".into(),
                ],
                pending: None,
            }
        }
        Source::Pcap { .. } => {
            let (file, origin, frames) = capture(src, config_dir, out)?;
            let spec = format!("net_pcap0,rx_pcap={},infinite_rx=1", file.display());
            Prepared {
                kind: "pcap".into(),
                sink_args: vec!["--port".into(), spec.clone()],
                port_spec: Some(spec),
                description: format!(
                    "{} ({frames} frames, {origin}) replayed from memory by net_pcap (infinite_rx=1)",
                    file.display()
                ),
                cost: "the pcap PMD copies every frame into a fresh mbuf on the RX lcore: that copy \
                       is part of every measured cost (sink and PMD together)"
                    .into(),
                default_eal: two_cores(),
                frames: Some(frames),
                pcap: Some(file),
                peer: None,
                peer_frame_len: 0,
                extra_metrics: Vec::new(),
                pending: None,
            }
        }
        Source::NetNull => Prepared {
            kind: "net_null".into(),
            sink_args: vec!["--port".into(), "net_null0".into()],
            port_spec: Some("net_null0".into()),
            description: "net_null0: endless 64 B zero-filled frames".into(),
            cost: "net_null writes no data (a refcount and a length per mbuf): the floor of RX \
                   cost; its frames are not TCP, GRO passes them all through"
                .into(),
            default_eal: two_cores(),
            frames: None,
            pcap: None,
            peer: None,
            peer_frame_len: 0,
            extra_metrics: Vec::new(),
            pending: None,
        },
        Source::Memif {
            peer, frame_len, ..
        } => {
            let spec = format!("net_memif0,role=client,socket={SOCKET}");
            let (mut pcap_file, mut frames, mut what) = (None, None, format!("{peer:?}"));
            if *peer == Peer::TestpmdPcap {
                let (f, origin, n) = capture(src, config_dir, out)?;
                what = format!(
                    "dpdk-testpmd io-forwarding {} ({n} frames, {origin})",
                    f.display()
                );
                pcap_file = Some(f);
                frames = Some(n);
            }
            let (cost, pending) = match peer {
                Peer::TestpmdPcap => (
                    "a dpdk-testpmd peer (io forwarding, its lcore on CPU 0) replays the capture \
                     from memory (net_pcap copies each frame) into memif shared memory; the memif \
                     PMD copies each frame into the sink's mbufs (one or several, per --data-room) \
                     on the RX lcore: that copy is part of the measured cost, and the peer's rate \
                     caps the sink's"
                        .to_string(),
                    None,
                ),
                Peer::TestpmdTxonly => (
                    format!(
                        "a dpdk-testpmd txonly peer ({frame_len} B UDP frames, TX on lcore 0 / CPU 0) \
                         writes every frame into memif shared memory; the memif PMD copies it into \
                         an mbuf on the RX lcore: that copy is part of the measured cost, and the \
                         peer's rate caps the sink's"
                    ),
                    None,
                ),
                Peer::Grorx => (
                    "grorx as the memif peer".to_string(),
                    Some(
                        "grorx has no transmit mode to act as the memif peer yet (owner: forward stage)"
                            .to_string(),
                    ),
                ),
            };
            Prepared {
                kind: "memif".into(),
                sink_args: vec!["--port".into(), spec.clone()],
                port_spec: Some(spec),
                description: format!("memif client of a peer started for every run: {what}"),
                cost,
                default_eal: two_cores(),
                frames,
                pcap: pcap_file,
                peer: Some(*peer),
                peer_frame_len: *frame_len,
                extra_metrics: vec!["ports.0.stats.imissed".into()],
                pending,
            }
        }
    })
}

/// The capture to replay: `path`, made with `make` when it is missing, or
/// `synth` written into `out`. Returns the file, where it came from, and its
/// frame count.
fn capture(src: &Source, config_dir: &Path, out: &Path) -> Result<(PathBuf, String, u64)> {
    let (path, synth, make) = src.capture().context("this source replays no capture")?;
    let (file, origin) = match (path, synth) {
        (Some(p), _) => {
            let file = resolve(config_dir, p);
            let origin = if file.exists() {
                "capture".to_string()
            } else {
                // SAFETY: geteuid has no preconditions and cannot fail.
                let root = unsafe { libc::geteuid() } == 0;
                let cmd = make_capture(&file, make, config_dir, root)?;
                format!("capture made now by {cmd}")
            };
            (file, origin)
        }
        (None, Some(s)) => (
            write_synth(s, out)?,
            format!("SYNTHETIC capture {}, written by the bench", synth_text(s)),
        ),
        (None, None) => bail!("a capture source needs `path` or `synth`"),
    };
    let file = std::fs::canonicalize(&file).unwrap_or(file);
    let frames =
        pcap::count_frames(&file).with_context(|| format!("reading {}", file.display()))?;
    Ok((file, origin, frames))
}

/// `p` relative to the config file's directory, without `.` and `..`.
fn resolve(config_dir: &Path, p: &Path) -> PathBuf {
    let base = std::fs::canonicalize(config_dir).unwrap_or_else(|_| config_dir.to_path_buf());
    let mut out = PathBuf::new();
    for c in base.join(p).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// How a path is shown in a command to copy: relative to the current
/// directory when inside it.
fn shown(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .and_then(|d| p.strip_prefix(d).ok().map(Path::to_path_buf))
        .filter(|r| !r.as_os_str().is_empty())
        .unwrap_or_else(|| p.to_path_buf())
        .display()
        .to_string()
}

/// A word as a shell reads it back.
fn quoted(w: String) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-=:,+@%".contains(c);
    if !w.is_empty() && w.chars().all(plain) {
        w
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// Makes the missing capture `file` with the config's `make` command (its
/// program, and arguments that start with `./` or `../`, are relative to
/// the config file); returns the command as run. Refuses without root
/// (the capture scripts need it), saying the command to run.
fn make_capture(
    file: &Path,
    make: Option<&[String]>,
    config_dir: &Path,
    root: bool,
) -> Result<String> {
    let Some((prog, args)) = make.and_then(|m| m.split_first()) else {
        bail!(
            "capture {} not found, and the config names no `make` command for it",
            file.display()
        );
    };
    let is_rel = |a: &str| a.starts_with("./") || a.starts_with("../");
    let prog = if prog.contains('/') {
        resolve(config_dir, Path::new(prog))
    } else {
        PathBuf::from(prog)
    };
    let args: Vec<PathBuf> = args
        .iter()
        .map(|a| {
            if is_rel(a) {
                resolve(config_dir, Path::new(a))
            } else {
                PathBuf::from(a)
            }
        })
        .collect();
    let cmd = std::iter::once(&prog)
        .chain(&args)
        .map(|p| quoted(shown(p)))
        .collect::<Vec<_>>()
        .join(" ");
    if !root {
        bail!(
            "capture {} not found. Make it (root: network namespaces and tcpdump; a few \
             seconds) with\n    sudo {cmd}\nand run the bench again (it never replays \
             synthetic traffic in place of a missing capture)",
            file.display()
        );
    }
    eprintln!("bench: {} not found: making it: {cmd}", file.display());
    let t0 = std::time::Instant::now();
    // Its output goes to stderr: stdout carries the bench's table.
    let status = std::process::Command::new(&prog)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("starting {cmd}"))?;
    if !status.success() {
        bail!(
            "`{cmd}` failed ({status}): capture {} not made",
            file.display()
        );
    }
    if !file.exists() {
        bail!("`{cmd}` ran but did not make {}", file.display());
    }
    eprintln!("bench: made in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(cmd)
}

fn synth_text(s: &Synth) -> String {
    format!(
        "{} TCP/{} flow(s) x {} segments of {} B, {} in a row",
        s.flows,
        if s.ipv6 { "IPv6" } else { "IPv4" },
        s.segments,
        s.mss,
        s.interleave
    )
}

/// Writes the synthetic capture (deterministic) and returns its path.
pub fn write_synth(s: &Synth, out: &Path) -> Result<PathBuf> {
    anyhow::ensure!(
        s.flows >= 1 && s.segments >= 1 && s.mss >= 1 && s.interleave >= 1,
        "synth: flows, segments, mss and interleave must be at least 1"
    );
    let file = out.join(format!(
        "synth-{}f-{}s-mss{}-{}-i{}.pcap",
        s.flows,
        s.segments,
        s.mss,
        if s.ipv6 { "v6" } else { "v4" },
        s.interleave
    ));
    std::fs::create_dir_all(out)?;
    let streams: Vec<Vec<Vec<u8>>> = (0..s.flows)
        .map(|f| {
            let spec = FlowSpec::numbered(f, s.ipv6);
            let isn = 1_000_000u32.wrapping_mul(f + 1);
            segment_stream(
                &spec,
                f,
                isn,
                s.segments as usize * s.mss as usize,
                s.mss as usize,
            )
        })
        .collect();
    let tmp = file.with_extension("pcap.tmp");
    let w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    let mut w = pcap::Writer::new(w)?;
    let mut next = vec![0usize; streams.len()];
    let mut ts = 1_000_000_000u64;
    let step = s.interleave as usize;
    loop {
        let mut any = false;
        for (f, st) in streams.iter().enumerate() {
            let end = (next[f] + step).min(st.len());
            for fr in &st[next[f]..end] {
                w.packet(ts, fr.len() as u32, std::iter::once(&fr[..]))?;
                ts += 1_000;
                any = true;
            }
            next[f] = end;
        }
        if !any {
            break;
        }
    }
    use std::io::Write;
    w.into_inner().flush()?;
    std::fs::rename(&tmp, &file)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synth_capture_interleaves_flows() {
        let dir = tempfile::tempdir().unwrap();
        let s = Synth {
            flows: 2,
            segments: 10,
            mss: 1448,
            ipv6: false,
            interleave: 4,
        };
        let f = write_synth(&s, dir.path()).unwrap();
        let frames = pcap::read_all(&f).unwrap();
        assert_eq!(frames.len(), 20);
        assert!(frames.iter().all(|f| f.len() == 1514));
        // Source port (flow) of each frame: 4 of flow 0, 4 of flow 1, ...
        let sport = |fr: &Vec<u8>| u16::from_be_bytes([fr[34], fr[35]]);
        let order: Vec<u16> = frames.iter().map(sport).collect();
        assert_eq!(
            &order[..9],
            &[10000, 10000, 10000, 10000, 10001, 10001, 10001, 10001, 10000]
        );
        let p = prepare(
            &Source::Pcap {
                path: None,
                synth: Some(s),
                make: None,
            },
            dir.path(),
            dir.path(),
        )
        .unwrap();
        assert_eq!(p.frames, Some(20));
        assert!(p.description.contains("SYNTHETIC"), "{}", p.description);
        assert!(p.sink_args[1].ends_with(",infinite_rx=1"));
    }

    /// A missing capture is made by `make` (as root) or refused with the
    /// command; never replaced by synthetic traffic.
    #[test]
    fn missing_capture_is_made_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("configs");
        std::fs::create_dir_all(&cfg).unwrap();
        let s = Synth {
            flows: 1,
            segments: 3,
            mss: 1448,
            ipv6: false,
            interleave: 8,
        };
        let made = write_synth(&s, dir.path()).unwrap();
        let want = dir.path().join("caps/made.pcap");
        let missing = |make: Option<Vec<String>>| Source::Pcap {
            path: Some("../caps/made.pcap".into()),
            synth: None,
            make,
        };
        let e = prepare(&missing(None), &cfg, dir.path()).unwrap_err();
        assert!(e.to_string().contains("no `make`"), "{e}");

        let make: Vec<String> = [
            "sh",
            "-c",
            "mkdir -p \"$(dirname \"$1\")\" && cp \"$0\" \"$1\"",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([made.display().to_string(), "../caps/made.pcap".into()])
        .collect();
        let e = make_capture(&want, Some(&make), &cfg, false).unwrap_err();
        let canon = std::fs::canonicalize(dir.path()).unwrap();
        assert!(e.to_string().contains("sudo sh -c 'mkdir -p"), "{e}");
        assert!(
            e.to_string()
                .contains(&canon.join("caps/made.pcap").display().to_string()),
            "{e}"
        );
        assert!(!want.exists());
        let cmd = make_capture(&want, Some(&make), &cfg, true).unwrap();
        assert!(cmd.starts_with("sh -c"), "{cmd}");
        assert_eq!(pcap::count_frames(&want).unwrap(), 3);
        let p = prepare(&missing(Some(make)), &cfg, dir.path()).unwrap();
        assert_eq!(p.frames, Some(3));
        assert!(!p.description.contains("made now"), "{}", p.description);
    }
}
