//! The capture stage's writer: workers hand output packets to a writer thread
//! through a multi-producer ring (no syscall on a worker); the thread copies
//! them into its buffer, frees them in bulk, and writes the buffer to a pcap
//! file. When the ring is full a worker waits (and counts it): a capture
//! loses nothing while it can write.
//!
//! When it cannot: a write error (a full disk) stops the writing at the last
//! whole record (the file is cut there, so it stays a valid pcap), the rest
//! is freed and counted as dropped, and the run is told to stop. A writer
//! that makes no progress for [`STALL`] while the run stops (a write that
//! does not return) is left behind: its ring is drained here, and a waiting
//! worker frees what the ring cannot take. The writer never holds an mbuf
//! while it writes, so leaving it behind leaves no mbuf out.

#[doc(hidden)]
pub mod pcap;

use crate::dpdk::eal::{cstring, rte_errno, strerror, tsc, Eal};
use crate::dpdk::mbuf::{field as mb, rte_mbuf};
use crate::dpdk::mbuf::{BulkFree, Burst};
use crate::dpdk::ring_port::{RingPtr, SINGLE_CONSUMER};
use anyhow::{bail, Context, Result};
use pcap::Writer;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a writer may make no progress while the run stops before it is
/// left behind (a write to a pipe nobody reads, a hung filesystem).
pub const STALL: Duration = Duration::from_secs(2);
/// Buffer bytes written at once.
const FLUSH_AT: usize = 4 << 20;

/// What a capture wrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CaptureReport {
    /// The pcap file.
    pub path: PathBuf,
    /// Packets written: whole records in the file.
    pub packets: u64,
    /// Bytes of packet data written.
    pub bytes: u64,
    /// Packets handed to the capture and not written: after a write error,
    /// or given up with a writer that made no progress at the stop.
    pub dropped: u64,
    /// Why the capture stopped writing, if it did: the run failed.
    pub error: Option<String>,
}

/// What the stages, the writer thread and the run share.
pub(crate) struct Link {
    ring: RingPtr,
    path: PathBuf,
    /// The writer drains what is left and ends.
    stop: AtomicBool,
    /// The run is stopping: a worker waiting on a full ring gives up on a
    /// writer that makes no progress.
    stopping: AtomicBool,
    /// Bumped at every step the writer makes: how a stalled writer is seen.
    progress: AtomicU64,
    /// A worker, or the run at its end, gave up on the writer (no progress
    /// for `STALL`): packets were freed unwritten.
    given_up: AtomicBool,
    packets: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    /// Records in the writer's buffer, not yet known to be in the file.
    /// Changed only under `abandoned`'s lock, with the counts above.
    buffered: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    /// Held while the ring, its mbufs or the counts are touched; true once
    /// the writer is left behind, after which it touches none of them.
    abandoned: Mutex<bool>,
    /// `STALL` in TSC ticks, for the workers.
    stall_tsc: u64,
}

/// The capture as its errors name it (they may surface in a report, long
/// after the settings were checked).
fn named(path: &Path) -> String {
    format!("capture {}", path.display())
}

impl Link {
    fn fail(&self, msg: String) {
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        e.get_or_insert(msg);
        self.failed.store(true, Ordering::Release);
    }

    fn ring_lock(&self) -> MutexGuard<'_, bool> {
        self.abandoned.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A stage's end of the capture ring.
#[derive(Clone)]
pub struct CaptureTx(pub(crate) Arc<Link>);

impl CaptureTx {
    pub(crate) fn ring(&self) -> RingPtr {
        self.0.ring
    }

    /// True once the run is stopping and the writer has not moved since
    /// `*seen` was taken at `*since` (TSC) for longer than `STALL`.
    pub(crate) fn writer_stalled(&self, seen: &mut u64, since: &mut u64) -> bool {
        if !self.0.stopping.load(Ordering::Relaxed) {
            return false;
        }
        let p = self.0.progress.load(Ordering::Relaxed);
        let now = tsc();
        if p != *seen || *since == 0 {
            (*seen, *since) = (p, now);
            return false;
        }
        now.wrapping_sub(*since) > self.0.stall_tsc
    }

    /// Packets a stage gave up on (freed, not written).
    pub(crate) fn gave_up(&self, n: u64) {
        self.0.dropped.fetch_add(n, Ordering::Relaxed);
        self.0.given_up.store(true, Ordering::Relaxed);
    }
}

/// The capture writer of a run.
pub struct Capture {
    link: Arc<Link>,
    thread: Option<JoinHandle<()>>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Capture {
    /// Creates (or truncates) the capture file. Called before EAL starts, so
    /// a path that cannot be written is refused early; a FIFO nobody reads
    /// is refused rather than waited for.
    pub fn create_file(path: &Path) -> Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .with_context(|| {
                format!(
                    "{}: cannot create the file (a writable path, or a FIFO with a reader)",
                    named(path)
                )
            })?;
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on a descriptor `f` owns; clearing O_NONBLOCK makes
        // writes block again (the writer thread handles a stalled write).
        let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, 0) };
        if r < 0 {
            bail!("{}: {}", named(path), io::Error::last_os_error());
        }
        Ok(f)
    }

    /// Starts the writer on `file` (ring of `slots` packets), pinned to
    /// `cpu` (the main lcore's: never a worker's).
    pub fn start(path: &Path, file: File, slots: u32, cpu: Option<usize>) -> Result<Capture> {
        let name = format!("grx-cap{}", SEQ.fetch_add(1, Ordering::Relaxed));
        let c = cstring("ring name", &name)?;
        // Multi-producer (workers), single consumer (the writer, or the run
        // once the writer is left behind: under `abandoned`).
        let Some(r) = RingPtr::create(&c, slots.next_power_of_two(), -1, SINGLE_CONSUMER) else {
            bail!("cannot create the capture ring: {}", strerror(rte_errno()));
        };
        let hz = Eal::get().map(|e| e.tsc_hz()).unwrap_or(1_000_000_000);
        let link = Arc::new(Link {
            ring: r,
            path: path.to_path_buf(),
            stop: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            progress: AtomicU64::new(0),
            given_up: AtomicBool::new(false),
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            buffered: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            abandoned: Mutex::new(false),
            stall_tsc: STALL.as_secs() * hz,
        });
        let l = link.clone();
        let thread = std::thread::Builder::new()
            .name("grorx-capture".into())
            .spawn(move || {
                if let Some(id) = cpu {
                    // A plain thread: placed with core_affinity, off the workers' CPUs.
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                write_loop(&l, file)
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                // SAFETY: nothing else has the ring yet.
                unsafe { r.free() };
                return Err(e).context("cannot start the capture thread");
            }
        };
        Ok(Capture {
            link,
            thread: Some(thread),
        })
    }

    /// Where stages send packets.
    pub fn tx(&self) -> CaptureTx {
        CaptureTx(self.link.clone())
    }

    /// The writer could not write: the run should stop.
    pub fn failed(&self) -> bool {
        self.link.failed.load(Ordering::Acquire)
    }

    /// The run is stopping: from now on a worker waiting on a full ring
    /// gives up after `STALL` without writer progress.
    pub fn stopping(&self) {
        self.link.stopping.store(true, Ordering::Relaxed);
    }

    /// After every worker stopped: the writer drains the ring and closes the
    /// file (or, stalled for `STALL`, is left behind); what was written.
    pub fn finish(mut self) -> CaptureReport {
        self.end()
    }

    fn end(&mut self) -> CaptureReport {
        let l = &self.link;
        l.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // A writer a worker gave up on has had its `STALL` already.
            let stall = if l.given_up.load(Ordering::Relaxed) {
                Duration::from_millis(100)
            } else {
                STALL
            };
            let (mut seen, mut since) = (l.progress.load(Ordering::Relaxed), Instant::now());
            loop {
                if t.is_finished() {
                    if t.join().is_err() {
                        l.fail(format!("{}: the writer thread panicked", named(&l.path)));
                    }
                    break;
                }
                let p = l.progress.load(Ordering::Relaxed);
                if p != seen {
                    (seen, since) = (p, Instant::now());
                } else if since.elapsed() > stall {
                    self.abandon();
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            if l.given_up.load(Ordering::Relaxed) {
                // Packets were freed unwritten: the capture is not whole.
                l.fail(format!(
                    "{}: the writer made no progress for {} s at the stop (a write that \
                     does not return: a pipe nobody reads, a hung filesystem?); {} packet(s) were \
                     not written",
                    named(&l.path),
                    STALL.as_secs(),
                    l.dropped.load(Ordering::Relaxed)
                ));
            }
        }
        CaptureReport {
            path: l.path.clone(),
            packets: l.packets.load(Ordering::Relaxed),
            bytes: l.bytes.load(Ordering::Relaxed),
            dropped: l.dropped.load(Ordering::Relaxed),
            error: l.error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// Leaves a stalled writer behind: takes the ring from it, frees what
    /// is queued; that and what its buffer holds are counted as dropped.
    fn abandon(&self) {
        let l = &self.link;
        let mut g = l.ring_lock();
        *g = true;
        let mut b: Burst<64> = Burst::new();
        let mut n = 0;
        loop {
            // SAFETY: the writer no longer touches the ring (`abandoned` is
            // set under the lock it takes first); its entries are mbuf chains.
            let k = unsafe { b.dequeue(l.ring.0) };
            if k == 0 {
                break;
            }
            n += k as u64;
            b.free_all();
        }
        n += l.buffered.swap(0, Ordering::Relaxed);
        l.dropped.fetch_add(n, Ordering::Relaxed);
        l.given_up.store(true, Ordering::Relaxed);
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.end();
        // SAFETY: the writer has exited, or was left behind and no longer
        // touches the ring; the stages that fed it are gone (they go with
        // the workers, before the capture).
        unsafe { self.link.ring.free() };
    }
}

/// The buffer of pcap records not yet in the file, and where each ends.
struct Out {
    file: File,
    w: Writer<Vec<u8>>,
    /// Per record in the buffer: where it ends, and its packet's length.
    recs: Vec<(usize, u32)>,
    /// Where the file header ends in the buffer (0 once it is written).
    header_end: usize,
    /// Bytes in the file.
    flushed: u64,
}

impl Out {
    /// Writes the buffer out. On an error, cuts the file after its last
    /// whole record and fails the capture; only whole records are counted.
    fn flush(&mut self, l: &Link) {
        let buf = self.w.get_mut();
        let mut off = 0;
        let mut err = None;
        while off < buf.len() {
            match self.file.write(&buf[off..]) {
                Ok(0) => {
                    err = Some(io::Error::from(io::ErrorKind::WriteZero));
                    break;
                }
                Ok(k) => off += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
            l.progress.fetch_add(1, Ordering::Relaxed);
        }
        let whole = self.recs.partition_point(|&(end, _)| end <= off);
        let bytes: u64 = self.recs[..whole].iter().map(|&(_, n)| n as u64).sum();
        let g = l.ring_lock();
        if *g {
            return; // left behind: its records were counted as dropped then
        }
        l.buffered.store(0, Ordering::Relaxed);
        l.packets.fetch_add(whole as u64, Ordering::Relaxed);
        l.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(e) = err {
            l.dropped
                .fetch_add((self.recs.len() - whole) as u64, Ordering::Relaxed);
            let keep = match self.recs[..whole].last() {
                Some(&(end, _)) => end,
                None if self.header_end <= off => self.header_end,
                None => 0,
            };
            // A FIFO cannot be cut: then the reader sees a partial record.
            let _ = self.file.set_len(self.flushed + keep as u64);
            let hint = if e.kind() == io::ErrorKind::StorageFull {
                " (free space on that filesystem, or capture elsewhere)"
            } else {
                ""
            };
            l.fail(format!(
                "{}: write failed: {e}; the file holds the {} packet(s) written before, \
                 whole{hint}",
                named(&l.path),
                l.packets.load(Ordering::Relaxed)
            ));
        }
        drop(g);
        self.flushed += off as u64;
        buf.clear();
        self.recs.clear();
        self.header_end = 0;
    }
}

fn write_loop(l: &Link, file: File) {
    // The file header goes out with the first records.
    let w = Writer::new(Vec::with_capacity(2 * FLUSH_AT)).expect("a Vec takes any write");
    let header_end = w.get_ref().len();
    let mut out = Out {
        file,
        w,
        recs: Vec::with_capacity(1 << 16),
        header_end,
        flushed: 0,
    };
    let mut b: Burst<64> = Burst::new();
    let mut freer = BulkFree::new();
    loop {
        let stopping = l.stop.load(Ordering::Acquire);
        let n = {
            let g = l.ring_lock();
            if *g {
                return; // left behind: the ring and its mbufs are not ours any more
            }
            // SAFETY: the capture ring carries mbuf chains the workers gave up;
            // we are its only consumer while we hold the lock.
            let n = unsafe { b.dequeue(l.ring.0) };
            let ts = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let failed = l.failed.load(Ordering::Relaxed);
            for &m in b.as_slice() {
                // SAFETY: a chain we own until freed below.
                let len = unsafe { mb::pkt_len(m) };
                if failed {
                    l.dropped.fetch_add(1, Ordering::Relaxed);
                } else if let Err(e) = out.w.packet(ts, len, Chunks(m)) {
                    l.dropped.fetch_add(1, Ordering::Relaxed);
                    l.fail(format!("{}: {e}", named(&l.path)));
                } else {
                    out.recs.push((out.w.get_ref().len(), len));
                    l.buffered.fetch_add(1, Ordering::Relaxed);
                }
                // SAFETY: copied (or not to be written); freed once.
                unsafe { freer.chain(m) };
            }
            freer.flush();
            b.clear_moved();
            n
        };
        l.progress.fetch_add(1, Ordering::Relaxed);
        if n == 0 {
            if stopping {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        if out.w.get_ref().len() >= FLUSH_AT {
            out.flush(l);
        }
    }
    out.flush(l);
}

/// The segments of an mbuf chain as byte slices.
#[derive(Clone, Copy)]
struct Chunks(*mut rte_mbuf);

impl Iterator for Chunks {
    type Item = &'static [u8];
    fn next(&mut self) -> Option<&'static [u8]> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: the chain stays alive until the writer frees it, after the
        // slices are copied (the 'static is local to that span).
        unsafe {
            let s = std::slice::from_raw_parts(mb::mtod(self.0), mb::data_len(self.0) as usize);
            self.0 = mb::next(self.0);
            Some(s)
        }
    }
}
