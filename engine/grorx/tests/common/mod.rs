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
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = grorx::pcap::Writer::new(file).unwrap();
    for (i, f) in frames.iter().enumerate() {
        // A millisecond apart.
        let ts_ns = i as u64 * 1_000_000;
        w.packet(ts_ns, f.len() as u32, std::iter::once(f.as_slice()))
            .unwrap();
    }
    std::io::Write::flush(w.get_mut()).unwrap();
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
