//! What the `grorx` command is made of besides its argument parsing:
//! `grorx bench` (experiments from TOML, interleaved runs, tables, CSV, JSON
//! and charts). The engine itself is the `grorx` library.

pub mod bench;
