//! BIG TCP end to end: `grorx sink --capture` with `--gro-max-size 262144`
//! on a replayed capture of one IPv4 and one IPv6 bulk flow, held across
//! polls so packets grow past 64 KiB. The output must hold to Linux's rules
//! (tests/tools/grocheck.py, which reads BIG TCP lengths), tshark must find
//! nothing wrong in it, and the IPv4 packets must state a total length of 0
//! and the IPv6 ones carry a jumbo header; forward segments them back to
//! the very segments that came in.

use grorx_gro::traffic::{FlowSpec, Segment, TCP_ACK};
use std::path::{Path, PathBuf};
use std::process::Command;

const MSS: usize = 1448;
const SEGMENTS: u32 = 400;
/// The size limit: an IP packet of up to 256 KiB whose frame (Ethernet and,
/// for IPv6, the jumbo header included) stays within the 262144 bytes pcap
/// readers take whole (tshark refuses longer records).
const BIG: &str = "262100";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("engine/cli is inside the repository")
        .to_path_buf()
}

/// A capture of `SEGMENTS` full-size segments of one IPv4 flow, then as many
/// of one IPv6 flow.
fn write_input(path: &Path) {
    let mut w = grorx::pcap::Writer::new(std::fs::File::create(path).unwrap()).unwrap();
    for (i, ipv6) in [(1, false), (2, true)] {
        let spec = FlowSpec::numbered(i, ipv6);
        for k in 0..SEGMENTS {
            let payload: Vec<u8> = (0..MSS).map(|b| (b as u32 * 7 + k) as u8).collect();
            let s = Segment {
                seq: 1 + k * MSS as u32,
                ack: 1,
                flags: TCP_ACK,
                ip_id: k as u16,
                tsval: 7,
                tsecr: 9,
                payload_len: MSS as u16,
            };
            let f = spec.frame(&s, &payload);
            w.packet(k as u64 * 1000, f.len() as u32, std::iter::once(&f[..]))
                .unwrap();
        }
    }
}

/// `grorx CMD` on `input` replayed, its packets to `stage` (`--capture
/// FILE` or `--to PORT`), held across polls so that they grow past 64 KiB;
/// the run's JSON report, after what every run must show: success, every
/// frame received, 0 leaked, a packet past 64 KiB.
fn run_big(cmd: &str, input: &Path, stage: [&str; 2]) -> serde_json::Value {
    let port = format!("net_pcap0,rx_pcap={}", input.display());
    let o = grorx(&[
        cmd,
        "--port",
        &port,
        stage[0],
        stage[1],
        "--gro-max-size",
        BIG,
        "--max-frags",
        "256",
        "--gro-flush-us",
        "5000",
        "--json",
        "-q",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "grorx {cmd} failed: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON report");
    assert_eq!(report["mbufs_leaked"], 0, "{report}");
    assert_eq!(report["rx_packets"], 2 * SEGMENTS as u64, "{report}");
    let most = report["gro"]["max_segments_per_packet"].as_u64().unwrap();
    assert!(
        most > 46,
        "no packet past 64 KiB: at most {most} segments ({report})"
    );
    report
}

/// Runs grorx under an instance name of this test's own (`args[0]`, the
/// subcommand, tells the tests apart).
fn grorx(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_grorx"))
        .env(
            "GRORX_NAME",
            format!("test-big-{}-{}", args[0], std::process::id()),
        )
        .args(args)
        .args(["--", "--no-huge", "-m", "512"])
        .output()
        .expect("grorx runs")
}

fn python(tool: &str, args: &[&Path], extra: &[&str]) -> (bool, String) {
    let o = Command::new("python3")
        .arg(repo().join("tests/tools").join(tool))
        .args(args)
        .args(extra)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text)
}

#[test]
fn packets_of_up_to_256k_leave_the_capture_valid_and_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    write_input(&input);
    run_big("sink", &input, ["--capture", output.to_str().unwrap()]);

    let (ok, text) = python(
        "grocheck.py",
        &[&input, &output],
        &["--strict-order", "--max-frags", "256", "--max-size", BIG],
    );
    assert!(ok, "grocheck:\n{text}");
    let (ok, text) = python("tshark_check.py", &[&input, &output], &[]);
    assert!(ok, "tshark:\n{text}");

    // Past 64 KiB: IPv4 states a total length of 0, IPv6 carries a jumbo
    // header (next header 0, payload length 0).
    let frames = grorx::pcap::read_all(&output).unwrap();
    let big: Vec<&Vec<u8>> = frames.iter().filter(|f| f.len() > 14 + 65535).collect();
    let v4 = big.iter().filter(|f| f[12..14] == [0x08, 0x00]).count();
    let v6 = big.iter().filter(|f| f[12..14] == [0x86, 0xdd]).count();
    assert!(
        v4 > 0 && v6 > 0,
        "{v4} IPv4 and {v6} IPv6 packets past 64 KiB"
    );
    for f in big {
        if f[12..14] == [0x08, 0x00] {
            assert_eq!(f[16..18], [0, 0], "IPv4 total length");
        } else {
            assert_eq!((f[14 + 6], &f[18..20]), (0, &[0u8, 0][..]), "IPv6 jumbo");
        }
    }
}

#[test]
fn forward_segments_big_tcp_packets_back_to_the_very_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    write_input(&input);
    let to = format!("net_pcap1,tx_pcap={}", output.display());
    let report = run_big("forward", &input, ["--to", &to]);
    let fwd = &report["forward"];
    assert_eq!(fwd["tx_packets"], 2 * SEGMENTS as u64, "{fwd}");
    assert_eq!(fwd["tx_dropped"], 0, "{fwd}");
    let (ok, text) = python(
        "grocheck.py",
        &[&input, &output],
        &["--same-segments", "--strict-order"],
    );
    assert!(ok, "forwarded segments differ:\n{text}");
    // Byte for byte: the jumbo header gone, every length and checksum as
    // the sender wrote it, each flow's frames in arrival order (the two
    // flows, one IPv4 and one IPv6, told apart by their ethertype).
    let by_flow = |path: &Path, ipv6: bool| -> Vec<Vec<u8>> {
        let et = if ipv6 { [0x86, 0xdd] } else { [0x08, 0x00] };
        let frames = grorx::pcap::read_all(path).unwrap();
        frames.into_iter().filter(|f| f[12..14] == et).collect()
    };
    for ipv6 in [false, true] {
        let (sent, got) = (by_flow(&input, ipv6), by_flow(&output, ipv6));
        assert_eq!(got.len(), sent.len(), "ipv6 {ipv6}");
        for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
            assert!(
                g == s,
                "ipv6 {ipv6}, frame {i}: {} B out, {} B in, or other bytes",
                g.len(),
                s.len()
            );
        }
    }
}
