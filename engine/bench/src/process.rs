//! Child processes with captured output, a deadline, and a polite stop
//! (SIGINT, then SIGKILL).

use anyhow::{Context, Result};
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Running {
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
    /// Standard output as it comes (`stdout_so_far`).
    out_so_far: Arc<Mutex<Vec<u8>>>,
}

/// What a finished process left.
pub struct Finished {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    /// Killed at its deadline.
    pub timed_out: bool,
}

/// Reads `r` to its end on a thread of its own, keeping what came so far
/// in `so_far`.
fn drain<R: Read + Send + 'static>(
    r: Option<R>,
    so_far: Arc<Mutex<Vec<u8>>>,
) -> Option<JoinHandle<String>> {
    r.map(|mut r| {
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                match r.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => so_far
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .extend_from_slice(&chunk[..n]),
                }
            }
            let b = so_far.lock().unwrap_or_else(|p| p.into_inner());
            String::from_utf8_lossy(&b).into_owned()
        })
    })
}

pub fn spawn(argv: &[String]) -> Result<Running> {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().with_context(|| format!("starting {}", argv[0]))?;
    let out_so_far = Arc::new(Mutex::new(Vec::new()));
    let out = drain(child.stdout.take(), out_so_far.clone());
    let err = drain(child.stderr.take(), Arc::new(Mutex::new(Vec::new())));
    Ok(Running {
        child,
        out,
        err,
        out_so_far,
    })
}

impl Running {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on the pid of our own child, not yet reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, sig);
        }
    }

    /// What it wrote to standard output so far.
    pub fn stdout_so_far(&self) -> String {
        let b = self.out_so_far.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&b).into_owned()
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until it exits; at `deadline` it is stopped (SIGINT, then
    /// SIGKILL after `grace`) and marked timed out.
    pub fn wait_until(self, deadline: Instant, grace: Duration) -> Finished {
        self.wait_until_with(deadline, grace, || {})
    }

    /// `wait_until`, calling `tick` every 20 ms meanwhile.
    pub fn wait_until_with(
        self,
        deadline: Instant,
        grace: Duration,
        tick: impl FnMut(),
    ) -> Finished {
        self.wait_until_done(deadline, deadline, |_| true, grace, tick)
    }

    /// As `wait_until_with`, but at `deadline` it is stopped only once
    /// `done` says so of its output so far, or at `latest` at the latest:
    /// for a process whose measured time starts when its output says so.
    pub fn wait_until_done(
        mut self,
        deadline: Instant,
        latest: Instant,
        done: impl Fn(&str) -> bool,
        grace: Duration,
        mut tick: impl FnMut(),
    ) -> Finished {
        let mut timed_out = false;
        let status = loop {
            tick();
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) => {}
                Err(_) => break None,
            }
            let now = Instant::now();
            if now >= latest || (now >= deadline && done(&self.stdout_so_far())) {
                timed_out = true;
                break self.stop(grace);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.collect(status, timed_out)
    }

    /// SIGINT, then SIGKILL if it has not exited after `grace`.
    fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.signal(libc::SIGINT);
        let t = Instant::now();
        while t.elapsed() < grace {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }

    /// Stops it now (SIGINT, SIGKILL after `grace`) and collects its output.
    pub fn interrupt(mut self, grace: Duration) -> Finished {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => Some(s),
            _ => self.stop(grace),
        };
        self.collect(status, false)
    }

    fn collect(mut self, status: Option<ExitStatus>, timed_out: bool) -> Finished {
        let stdout = self
            .out
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let stderr = self
            .err
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        Finished {
            status,
            stdout,
            stderr,
            timed_out,
        }
    }
}

/// The last `n` non-empty lines, joined with " | " (for error messages).
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Is `prog` an executable on PATH?
pub fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `script` with a deadline 50 ms on, done once it printed
    /// "ready", stopped at `latest` at the latest: what it left, and when.
    fn waited(script: &str, latest: Duration) -> (Finished, Duration) {
        let t = Instant::now();
        let p = spawn(&["sh".into(), "-c".into(), script.into()]).expect("sh runs");
        let f = p.wait_until_done(
            t + Duration::from_millis(50),
            t + latest,
            |out| out.contains("ready"),
            Duration::from_secs(2),
            || {},
        );
        (f, t.elapsed())
    }

    #[test]
    fn a_process_runs_past_its_deadline_until_its_output_says_it_is_done() {
        let (f, took) = waited(
            "sleep 0.4; echo ready; exec sleep 30",
            Duration::from_secs(20),
        );
        assert!(f.timed_out);
        assert!(f.stdout.contains("ready"), "{}", f.stdout);
        assert!(took < Duration::from_secs(10), "stopped once done");
    }

    #[test]
    fn a_process_that_never_says_it_is_done_stops_at_the_latest() {
        let (f, took) = waited("echo started; exec sleep 30", Duration::from_millis(600));
        assert!(f.timed_out);
        assert!(f.stdout.contains("started"));
        assert!(took >= Duration::from_millis(600) && took < Duration::from_secs(10));
    }
}
