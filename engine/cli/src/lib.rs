//! What the `grorx` command is made of besides its argument parsing: one
//! run as the command shows it (`watch`, `monitor`, `signal`). The engine
//! itself is the `grorx` library; `grorx bench` (experiments from TOML,
//! interleaved runs, tables, CSV, JSON and charts) is the `grorx-bench`
//! library.

pub mod http;
pub mod json;
pub mod metrics;
pub mod monitor;
pub mod out;
pub mod signal;
pub mod watch;

/// An error in what the command line asked for, found before anything
/// started: the command exits 2 (as for arguments clap refuses), where a
/// failure at run time exits 1.
#[derive(Debug)]
pub struct Usage(String);

/// A [`Usage`] error with this message, which says what to give instead.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(msg.into()))
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The exit status for an error: 2 for [`Usage`], 1 for the rest.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.is::<Usage>() {
        2
    } else {
        1
    }
}
