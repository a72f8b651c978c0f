//! What the `grorx` command is made of besides its argument parsing: one
//! run as the command shows it (`watch`, `monitor`, `signal`), and
//! `grorx bench` (experiments from TOML, interleaved runs, tables, CSV, JSON
//! and charts). The engine itself is the `grorx` library.

pub mod bench;
pub mod monitor;
pub mod out;
pub mod signal;
pub mod watch;
