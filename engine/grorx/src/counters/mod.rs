//! What the workers count, without DPDK: per-queue counters, written by one
//! worker and read by the stats thread, and the latency and size histograms.

pub mod hist;
pub mod stats;
pub mod table;
