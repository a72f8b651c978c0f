//! One EAL per test binary (EAL starts once per process), on 4 KiB pages so
//! the tests need no hugepages, with a lock: tests that launch lcores take
//! turns.
#![allow(dead_code)]

use grorx::eal::Eal;
use std::sync::{Mutex, MutexGuard, OnceLock};

static LOCK: Mutex<()> = Mutex::new(());
static EAL: OnceLock<&'static Eal> = OnceLock::new();

/// The test binary's EAL (main lcore, 2 workers: enough for a worker and
/// the generator), and the lock that serialises tests using it.
pub fn eal() -> (&'static Eal, MutexGuard<'static, ()>) {
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let eal = EAL.get_or_init(|| {
        let cpus = grorx::lcores::available_cpus();
        let cpu = |i: usize| cpus[i % cpus.len()];
        let lcores = format!("0@{},1@{},2@{}", cpu(0), cpu(1), cpu(0));
        let argv: Vec<String> = [
            "grorx-test",
            "--no-huge",
            "-m",
            "256",
            "--no-shconf",
            "--no-pci",
            "--lcores",
            &lcores,
            "--log-level",
            "lib.eal:error",
            "--log-level",
            "lib.telemetry:error",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Eal::init(&argv).expect("EAL starts with --no-huge")
    });
    (eal, guard)
}

/// Writes frames to a classic pcap file.
pub fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0u8; 8]);
    out.extend_from_slice(&262_144u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(i as u32 / 1000).to_le_bytes());
        out.extend_from_slice(&((i as u32 % 1000) * 1000).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

/// A frame as a chain of mbufs from `p`, one per part (each part fits one).
pub fn chain<'a>(
    p: &grorx::mempool::Mempool,
    parts: impl IntoIterator<Item = &'a [u8]>,
) -> *mut dpdk_sys::rte_mbuf {
    let segs: Vec<_> = parts.into_iter().map(|c| seg(p, c)).collect();
    link(&segs)
}

/// One mbuf from `p` holding `bytes` (which fit it).
pub fn seg(p: &grorx::mempool::Mempool, bytes: &[u8]) -> *mut dpdk_sys::rte_mbuf {
    let mut m = grorx::mbuf::Mbuf::alloc(p).unwrap();
    assert!(m.append(bytes));
    m.into_raw()
}

/// Links `segs` (one-segment mbufs we own, from any pools) into one chain;
/// returns its head.
pub fn link(segs: &[*mut dpdk_sys::rte_mbuf]) -> *mut dpdk_sys::rte_mbuf {
    let h = segs[0];
    // SAFETY: linking mbufs we own, each one segment, into one chain.
    unsafe {
        for w in segs.windows(2) {
            (*w[0]).next = w[1];
        }
        (*h).nb_segs = segs.len() as u16;
        (*h).pkt_len = segs.iter().map(|&m| (*m).data_len as u32).sum();
    }
    h
}
