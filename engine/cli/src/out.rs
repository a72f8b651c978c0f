//! Writing to stdout and stderr without `println!`, which panics when the
//! reader went away (`grorx sink --json-interval 1 | head -1`); with
//! panic=abort that would lose the held packets, the capture's tail, the
//! report and EAL's cleanup. Machine output (stdout) reports a closed pipe
//! so the run can stop cleanly; messages for people (stderr) are dropped
//! when nobody reads them.

use std::io::Write;

/// One line of machine output on stdout, flushed. An error (EPIPE: the
/// reader is gone) tells the caller to stop.
pub fn line(s: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{s}")?;
    o.flush()
}

/// Text on stdout (what a command was asked to show); an error when stdout
/// is closed.
pub fn say_out(s: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())?;
    o.flush()
}

/// Text for people on stderr; lost if stderr is closed.
pub fn say(s: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(s.as_bytes());
    let _ = e.flush();
}

/// A line for people on stderr; lost if stderr is closed.
pub fn sayln(s: &str) {
    say(&format!("{s}\n"));
}
