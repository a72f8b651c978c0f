//! The capture stage: workers hand output packets to a writer thread through
//! a multi-producer ring (no syscall on a worker), the thread writes them to a
//! pcap file and frees them in bulk. When the ring is full a worker waits
//! (and counts it): a capture loses nothing.

use crate::eal::{cstring, rte_errno, strerror};
use crate::mbuf::{BulkFree, Burst};
use crate::pcap::Writer;
use crate::ring_port::RingPtr;
use anyhow::{bail, Context, Result};
use dpdk_sys::{self as sys, inline as mb};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CaptureReport {
    pub path: PathBuf,
    pub packets: u64,
    pub bytes: u64,
}

pub struct Capture {
    ring: RingPtr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<CaptureReport>>>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Capture {
    /// Creates the file and starts the writer (ring of `slots` packets),
    /// pinned to `cpu` (the main lcore's: never a worker's).
    pub fn start(path: &Path, slots: u32, cpu: Option<usize>) -> Result<Capture> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("--capture {}: cannot create the file", path.display()))?;
        let name = format!("grx-cap{}", SEQ.fetch_add(1, Ordering::Relaxed));
        let c = cstring("ring name", &name)?;
        // SAFETY: valid name; multi-producer (workers), single consumer (writer).
        let r = unsafe {
            sys::rte_ring_create(
                c.as_ptr(),
                slots.next_power_of_two(),
                -1,
                sys::RING_F_SC_DEQ,
            )
        };
        if r.is_null() {
            bail!("cannot create the capture ring: {}", strerror(rte_errno()));
        }
        let ring = RingPtr(r);
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let p = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("grorx-capture".into())
            .spawn(move || {
                if let Some(id) = cpu {
                    // A plain thread: placed with core_affinity, off the workers' CPUs.
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                write_loop(ring, st, p, file)
            })
            .context("cannot start the capture thread")?;
        Ok(Capture {
            ring,
            stop,
            thread: Some(thread),
        })
    }

    /// Where workers send packets.
    pub fn tx(&self) -> RingPtr {
        self.ring
    }

    /// After every worker stopped: drains the ring, closes the file.
    pub fn finish(mut self) -> Result<CaptureReport> {
        self.stop.store(true, Ordering::Release);
        let r = self
            .thread
            .take()
            .unwrap()
            .join()
            .map_err(|_| anyhow::anyhow!("capture thread panicked"))?;
        Ok(r?)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // SAFETY: the writer has drained the ring and exited.
        unsafe { sys::rte_ring_free(self.ring.0) };
    }
}

fn write_loop(
    ring: RingPtr,
    stop: Arc<AtomicBool>,
    path: PathBuf,
    file: std::fs::File,
) -> std::io::Result<CaptureReport> {
    let mut w = Writer::new(BufWriter::with_capacity(4 << 20, file))?;
    let mut rep = CaptureReport {
        path,
        ..Default::default()
    };
    let mut b: Burst<64> = Burst::new();
    let mut freer = BulkFree::new();
    let mut err = None;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        // SAFETY: the capture ring carries mbuf chains the workers gave up.
        let n = unsafe { b.dequeue(ring.0) };
        if n == 0 {
            if stopping {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
            continue;
        }
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        for &m in b.as_slice() {
            // SAFETY: a chain we own until freed below.
            let len = unsafe { mb::pkt_len(m) };
            if err.is_none() {
                if let Err(e) = w.packet(ts, len, Chunks(m)) {
                    err = Some(e);
                }
            }
            rep.packets += 1;
            rep.bytes += len as u64;
            // SAFETY: written (or not: after an I/O error packets are still freed).
            unsafe { freer.chain(m) };
        }
        freer.flush();
        b.clear_moved();
    }
    use std::io::Write;
    let mut inner = w.into_inner();
    inner.flush()?;
    match err {
        Some(e) => Err(e),
        None => Ok(rep),
    }
}

/// The segments of an mbuf chain as byte slices.
#[derive(Clone, Copy)]
struct Chunks(*mut sys::rte_mbuf);

impl Iterator for Chunks {
    type Item = &'static [u8];
    fn next(&mut self) -> Option<&'static [u8]> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: the chain stays alive until the writer frees it, after the
        // slices are written (the 'static is local to that span).
        unsafe {
            let s = std::slice::from_raw_parts(mb::mtod(self.0), mb::data_len(self.0) as usize);
            self.0 = mb::next(self.0);
            Some(s)
        }
    }
}
