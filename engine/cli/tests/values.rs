//! No value of any numeric option panics or aborts grorx. Every option of
//! `grorx sink` and `grorx forward` that takes a number (found from `--help`:
//! those that refuse `abc` as a number) is given the awkward values (nan,
//! inf, negatives, 0, the integer types' edges, 1e300, subnormals) and
//! random ones from a seeded generator (`GRORX_VALUES_SEED` picks another
//! seed; the seed is printed). Each run must end on its own, or on SIGINT
//! after a few seconds, with status 0, 1, 2 or 130: refused with one
//! `error:` line on stderr, or run; never a panic, an abort or a signal.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SPECIAL: &[&str] = &[
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "1",
    "2",
    "0.001",
    "5e-324",
    "1e300",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
];

/// A small seeded generator (xorshift64*), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// An integer of random width, or a float of random magnitude.
    fn value(&mut self) -> String {
        let r = self.next();
        match r % 4 {
            0 => (r >> 8 & ((1u64 << (r >> 2 & 63)) - 1).max(1)).to_string(),
            1 => format!("{}", (r >> 8) as u16),
            2 => format!("{}", (r >> 8) as u32),
            _ => format!("{:e}", f64::from_bits(r >> 1).abs()),
        }
    }
}

fn grorx() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_grorx"));
    c.env("GRORX_NAME", format!("values-{}", std::process::id()));
    c
}

/// The options of `cmd` that take a number.
fn numeric_options(cmd: &str) -> Vec<String> {
    let help = grorx().args([cmd, "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let mut found = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        let Some(flag) = t.strip_prefix("--").and_then(|r| r.split(' ').next()) else {
            continue;
        };
        if !t.contains(" <") {
            continue;
        }
        // clap checks the value before it prints the help: nothing runs.
        let o = grorx()
            .args([cmd, &format!("--{flag}"), "abc", "--help"])
            .output()
            .expect("runs");
        let e = String::from_utf8_lossy(&o.stderr);
        if e.contains("invalid digit") || e.contains("invalid float") {
            found.push(format!("--{flag}"));
        }
    }
    found
}

/// Waits for `c` up to `d`; then SIGINT, then up to 20 s more.
fn finish(mut c: Child, d: Duration) -> (Option<i32>, Option<i32>, String) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if c.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if c.try_wait().unwrap().is_none() {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        let end = Instant::now() + Duration::from_secs(20);
        while c.try_wait().unwrap().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
    }
    let st = c.wait().unwrap();
    let mut err = String::new();
    c.stderr.take().unwrap().read_to_string(&mut err).ok();
    use std::os::unix::process::ExitStatusExt;
    (st.code(), st.signal(), err)
}

/// One run of `cmd` with `flag value`; a problem, if any.
fn check(cmd: &str, flag: &str, value: &str) -> Option<String> {
    let mut args: Vec<String> = vec![cmd.into(), format!("{flag}={value}"), "-q".into()];
    if flag != "--duration" {
        args.extend(["--duration".into(), "0.3".into()]);
    }
    if cmd == "forward" {
        args.extend(["--to".into(), "net_null1".into()]);
    }
    if !flag.starts_with("--gen-") {
        args.extend(["--port".into(), "net_null0".into()]);
    }
    args.extend(["--no-huge".into()]);
    let child = grorx()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let (code, sig, err) = finish(child, Duration::from_secs(4));
    let what = format!("grorx {}", args.join(" "));
    if let Some(s) = sig {
        return Some(format!("{what}: killed by signal {s}: {err}"));
    }
    if err.contains("panicked") || err.contains("memory allocation") {
        return Some(format!("{what}: {err}"));
    }
    match code {
        Some(0) | Some(130) => None,
        Some(1) | Some(2) => {
            // One error line; after it, at most clap's hint.
            let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
            let at = lines.iter().position(|l| l.contains("error:"));
            let ok = at.is_some_and(|i| {
                lines[i + 1..]
                    .iter()
                    .all(|l| l.starts_with("For more information"))
                    && lines.iter().filter(|l| l.contains("error:")).count() == 1
            });
            (!ok).then(|| format!("{what}: exit {code:?} without one error line at the end: {err}"))
        }
        c => Some(format!("{what}: exit {c:?}: {err}")),
    }
}

#[test]
fn no_numeric_value_panics_or_aborts() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (runs that are accepted start DPDK)");
        return;
    }
    let seed = std::env::var("GRORX_VALUES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
    eprintln!("seed {seed} (GRORX_VALUES_SEED)");
    let mut rng = Rng(seed | 1);
    let mut problems = Vec::new();
    let mut runs = 0;
    for cmd in ["sink", "forward"] {
        let flags = numeric_options(cmd);
        assert!(flags.len() >= 20, "{cmd}: only {flags:?} found");
        for flag in &flags {
            // forward adds only its own; the rest were tried with sink.
            if cmd == "forward" && flag != "--vni" {
                continue;
            }
            let randoms: Vec<String> = (0..3).map(|_| rng.value()).collect();
            for v in SPECIAL.iter().map(|s| s.to_string()).chain(randoms) {
                runs += 1;
                problems.extend(check(cmd, flag, &v));
            }
        }
    }
    eprintln!("{runs} runs");
    assert!(
        problems.is_empty(),
        "{} of {runs}:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
