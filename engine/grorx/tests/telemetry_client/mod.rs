//! A client of EAL's telemetry socket for tests: DPDK's own
//! `dpdk-telemetry.py`, fed on stdin. Shared by the library's and the
//! command's telemetry tests.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CLIENT: &str = "dpdk-telemetry.py";

/// Runs the client once for `prefix`, one command per stdin line; returns
/// one JSON object per command (`{"<cmd>": reply}`).
///
/// Non-interactive use: the client prints nothing but one compact JSON line
/// per line that starts with '/', and exits 0 even when it cannot connect
/// (it then prints "Error connecting to PATH"): count the replies.
pub fn query(prefix: &str, cmds: &[&str]) -> Vec<Value> {
    let mut child = Command::new(CLIENT)
        .args(["-f", prefix])
        // Importing readline may write terminal escapes to stdout.
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {CLIENT} ({e}): install Debian's dpdk-dev"));
    let mut input = cmds.join("\n");
    input.push('\n');
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    // stdin is closed: the client ends at EOF.
    let mut out = String::new();
    let mut err = String::new();
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut e = String::new();
        se.read_to_string(&mut e).ok();
        e
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let t = std::thread::spawn(move || {
        so.read_to_string(&mut out).ok();
        out
    });
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("{CLIENT} -f {prefix} did not finish in 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = t.join().unwrap();
    err.push_str(&reader.join().unwrap());
    let replies: Vec<Value> = out
        .lines()
        .filter_map(|l| l.find('{').map(|i| &l[i..]))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(
        replies.len(),
        cmds.len(),
        "{CLIENT} -f {prefix}: {cmds:?}\nstdout:\n{out}\nstderr:\n{err}"
    );
    replies
}

/// The reply of `cmd` (the part before the comma keys the object).
pub fn body<'a>(reply: &'a Value, cmd: &str) -> &'a Value {
    let key = cmd.split(',').next().unwrap();
    reply
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {reply}"))
}

/// Removes the runtime directory when the test ends, passing or not.
pub struct RuntimeDir(pub PathBuf);

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
