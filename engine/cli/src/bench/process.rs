//! Child processes with captured output, a deadline, and a polite stop
//! (SIGINT, then SIGKILL).

use anyhow::{Context, Result};
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Running {
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// What a finished process left.
pub struct Finished {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    /// Killed at its deadline.
    pub timed_out: bool,
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> Option<JoinHandle<String>> {
    r.map(|mut r| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
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
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    Ok(Running { child, out, err })
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
        mut self,
        deadline: Instant,
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
            if Instant::now() >= deadline {
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
