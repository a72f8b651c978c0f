//! Hugepages for the grorx engine: what the machine has ([`Status`]), how
//! a run gets its memory ([`decide`] -> [`Decision`]), reserving and
//! mounting when root ([`setup`]), and the `--no-huge` fallback.
//!
//! The engine calls [`decide`], prints [`Decision::summary`], calls
//! [`Decision::apply`] for a `Setup`, and passes [`Decision::eal_args`]
//! to the DPDK EAL.

mod decision;
mod display;
mod files;
mod plan;
mod procfs;
mod setup;
mod size;
mod status;
mod syscalls;
mod sysfs;

#[cfg(test)]
mod tests;

pub use plan::{decide, needed_pages, Decision, Request};
pub use setup::{setup, setup_at, SetupReport};
pub use size::{format_size, parse_size};
pub use status::{Mount, NodePool, Pool, Status};
pub use syscalls::is_root;

/// The machine's memory in bytes (`MemTotal`), if `/proc/meminfo` says.
pub fn memory_total() -> Option<u64> {
    procfs::read_memory_total(std::path::Path::new("/"))
}
