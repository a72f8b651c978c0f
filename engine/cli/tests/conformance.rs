//! Linux's GRO conformance cases (`grorx_gro::selftest`, which the GRO
//! core's unit test runs on in-memory buffers) through the whole engine.
//!
//! Every case's frames, its FIN last, go into one capture; each case is a
//! flow of its own, so one replay checks them all. The capture is replayed
//! once through `grorx sink --port net_pcap0,rx_pcap=IN --capture OUT`
//! with GRO holding packets across polls for longer than the run lasts:
//! a case's segments merge whichever polls they arrive in, and what is
//! still held leaves when the replay is consumed. It runs twice: one frame
//! per poll (every merge is across polls) and 32-frame polls (cases cut
//! wherever bursts end). Per case, OUT must hold before the FIN the payload
//! sizes Linux delivers, in order; every packet in OUT must have exact
//! lengths and valid checksums (or be an input frame passed through
//! untouched); and `tests/tools/grocheck.py --strict-order IN OUT` must
//! find no problem. A failing run keeps its files and says where.

use grorx_gro::selftest;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Classic pcap, little-endian, microseconds, Ethernet.
fn write_pcap(path: &Path, frames: &[&[u8]]) {
    let mut d = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        d.extend(w.to_le_bytes());
    }
    for f in frames {
        let len = (f.len() as u32).to_le_bytes();
        d.extend([0u8; 8]); // time: net_pcap replays as fast as it is polled
        d.extend(len);
        d.extend(len);
        d.extend(*f);
    }
    std::fs::write(path, d).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A classic pcap's frames (either byte order, micro- or nanoseconds).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let d = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let le = match d.get(..4) {
        Some([0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1]) => true,
        Some([0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d]) => false,
        _ => panic!("{}: not a classic pcap file", path.display()),
    };
    let u32_at = |o: usize| {
        let b: [u8; 4] = d[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let (mut off, mut v) = (24, Vec::new());
    while off + 16 <= d.len() {
        let incl = u32_at(off + 8) as usize;
        off += 16;
        assert!(off + incl <= d.len(), "{}: cut short", path.display());
        v.push(d[off..off + incl].to_vec());
        off += incl;
    }
    v
}

/// grorx replaying `input` into `output`; its JSON report.
fn grorx(input: &Path, output: &Path, burst: &str) -> Result<serde_json::Value, String> {
    let o = Command::new(env!("CARGO_BIN_EXE_grorx"))
        // An instance name of this test's own: other tests run grorx too.
        .env("GRORX_NAME", format!("conformance-{}", std::process::id()))
        .arg("sink")
        .arg("--port")
        .arg(format!("net_pcap0,rx_pcap={}", input.display()))
        .arg("--capture")
        .arg(output)
        // Held longer than the run: only the FINs, the rules and the end
        // of the replay let packets out, as in one long poll.
        .args(["--gro-flush-us", "10000000", "--burst", burst])
        // The size cases send 4096-byte IP packets; at this MTU each frame
        // is one mbuf, so the fragment limit counts segments as Linux does.
        .args(["--mtu", "4096"])
        // A bound in case the replay never ends.
        .args(["--duration", "60", "--json", "-q"])
        .args(["--", "--no-huge", "-m", "512"])
        .output()
        .map_err(|e| format!("cannot start grorx: {e}"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(format!("grorx failed ({}):\n{err}", o.status));
    }
    serde_json::from_slice(&o.stdout).map_err(|e| format!("no JSON report ({e}):\n{err}"))
}

/// Every check of one replay; what failed, one line (or block) each.
fn replay_checks(cases: &[selftest::Case], dir: &Path, burst: &str) -> Vec<String> {
    let frames: Vec<&[u8]> = cases
        .iter()
        .flat_map(|c| c.frames.iter().map(Vec::as_slice))
        .collect();
    let (input, output) = (dir.join("in.pcap"), dir.join(format!("out-{burst}.pcap")));
    write_pcap(&input, &frames);
    let t0 = Instant::now();
    let report = match grorx(&input, &output, burst) {
        Ok(r) => r,
        Err(e) => return vec![e],
    };
    eprintln!(
        "conformance: --burst {burst}: {} frames through grorx in {:.2} s ({})",
        frames.len(),
        t0.elapsed().as_secs_f64(),
        report["stop_reason"]
    );
    let mut failed = Vec::new();
    let n = frames.len() as u64;
    if report["rx_packets"].as_u64() != Some(n) || report["mbufs_leaked"].as_u64() != Some(0) {
        failed.push(format!(
            "rx_packets {} of {n} frames, mbufs_leaked {}",
            report["rx_packets"], report["mbufs_leaked"]
        ));
    }
    let out = read_pcap(&output);
    for c in cases {
        let family = if c.ipv6 { "IPv6" } else { "IPv4" };
        match c.delivered(out.iter().map(Vec::as_slice)) {
            Ok(got) if got == c.expected => {}
            Ok(got) => failed.push(format!(
                "{family} {}: got {got:?}, Linux gives {:?}",
                c.name, c.expected
            )),
            Err(e) => failed.push(format!("{family} {}: {e}", c.name)),
        }
    }
    // A frame passed through untouched keeps what it had (one case sends a
    // wrong TCP checksum); anything GRO wrote must be right.
    let sent: HashSet<&[u8]> = frames.iter().copied().collect();
    for (i, f) in out.iter().enumerate() {
        if let (false, Err(e)) = (sent.contains(&f[..]), selftest::check_frame(f)) {
            failed.push(format!("output packet {i} ({} bytes): {e}", f.len()));
        }
    }
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/tools/grocheck.py");
    match Command::new("python3")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(&tool)
        .arg("--strict-order")
        .args([&input, &output])
        .output()
    {
        Ok(o) if o.status.success() => eprintln!(
            "conformance: --burst {burst}: grocheck {}",
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .unwrap_or("")
        ),
        Ok(o) => failed.push(format!(
            "grocheck.py --strict-order:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => failed.push(format!("cannot run python3 {}: {e}", tool.display())),
    }
    failed
}

#[test]
fn linux_selftest_cases_through_grorx_give_linux_results() {
    let cases = selftest::cases();
    assert_eq!(cases.len(), 25 + 19, "every case of both families");
    let dir = tempfile::Builder::new()
        .prefix("grorx-conformance-")
        .tempdir()
        .expect("temp dir");
    let mut failed = Vec::new();
    for burst in ["1", "32"] {
        for f in replay_checks(&cases, dir.path(), burst) {
            failed.push(format!("--burst {burst}: {f}"));
        }
    }
    if !failed.is_empty() {
        let kept: PathBuf = dir.keep();
        panic!(
            "{} failure(s) (files kept in {}):\n- {}",
            failed.len(),
            kept.display(),
            failed.join("\n- ")
        );
    }
}
