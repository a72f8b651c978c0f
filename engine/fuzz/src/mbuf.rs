//! The `mbuf` target: the `gro` target's frames on real mbufs, as a driver
//! hands them over (one EAL per process, on 4 KiB pages), into skbs
//! (`Skb::build_checked`, built in place or with a copied head), through
//! `Gro<Skb>`, then through the forward stage (`Forwarder`, no TX offloads:
//! software GSO) onto a ring-backed port, read back from its ring.
//!
//! An input is an `MbufCfg` (skb mode, headroom setting, encapsulation,
//! and frames laid out the way a buggy driver would: lengths that do not
//! add up, a segment count that lies, data past the buffer; or, valid but
//! unusual, empty segments) followed by a `gro` target input. Beyond that
//! target's checks, held to GRO's outputs here (`check_outputs`):
//!
//! - a chain whose lengths do not hold is refused and counted before GRO
//!   (`SkbStats::malformed`); every other chain is accepted;
//! - every chain GRO lets out, and every chain the port transmits, passes
//!   DPDK's `rte_mbuf_check` (`nb_segs`, `pkt_len`, data inside buffers),
//!   and the skb's tail is the chain's last segment;
//! - what the port transmits is, frame for frame and in order, what went
//!   in: a frame GRO let out alone unchanged, a merged one cut back into its
//!   segments byte for byte (the segments' IPv4 IDs counted up from the
//!   first one's, its urgent pointer in each, their checksums recomputed:
//!   equal to the inputs' whenever those were valid, their IDs counted up
//!   and their urgent pointers equal), each behind the outer headers with
//!   VXLAN; the forward stage drops nothing;
//! - after each execution every pool (RX, copied heads, forward stage) has
//!   no mbuf in use.
//!
//! GRO's outputs are cut on buffer boundaries (each merged segment's
//! payload in buffers of its own), so software GSO's copying path
//! (`ForwardStats::copied_segments`) is not reached from here; nor are TSO
//! and the virtio-net header, which this target does not ask for.
//!
//! Which inputs a GRO output is made of is read from the chain itself:
//! every mbuf of input `i` carries `i` in its RSS hash field, which neither
//! GRO nor the skb touches (and the forward stage ignores without
//! `RTE_MBUF_F_RX_RSS_HASH`).

use crate::{check_outputs, decode, feed, gen, Input, Layout, Made, Output, Rx, Summary};
use arbitrary::{Arbitrary, Unstructured};
use dpdk_sys::{self as sys, inline as mb};
use grorx::csum;
use grorx::eal::Eal;
use grorx::forward::{Encap, ForwardConf, ForwardStats, Forwarder, TxOffloads, VxlanConf};
use grorx::gro::{CsumHint, GsoInfo, RxHints};
use grorx::mbuf::{Burst, Mbuf};
use grorx::mempool::{Mempool, PoolParams};
use grorx::skb::{self, Skb, SkbConf, SkbMode, SkbStats};
use grorx::wire::{Fields, Tcp};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// What the mbuf target adds to a `gro` target input.
#[derive(Arbitrary, Debug, Clone)]
pub struct MbufCfg {
    /// Skbs with a copied head (`SkbMode::Copy`) instead of built in place.
    pub copy: bool,
    /// The headroom setting (mod 129: at most what a received buffer has).
    pub headroom: u8,
    /// VXLAN encapsulation in the forward stage (else none).
    pub vxlan: bool,
    /// Frames laid out unusually: (the frame's number among those fed, how).
    pub twists: Vec<(u16, Twist)>,
}

/// A way a driver may lay a frame out. A frame whose lengths do not hold
/// once its twists are applied must be refused, any other accepted.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Twist {
    /// `pkt_len` off by this much (0: by 1).
    PktLen(i16),
    /// `nb_segs` off by this much (0: by 1).
    NbSegs(i8),
    /// Segment `s` (mod the count) says it holds `1 + n % 64` bytes more
    /// than its buffer has room for (`pkt_len` agreeing).
    Overrun { s: u8, n: u8 },
    /// The chain holds `1 + n` bytes (at most the last segment's) fewer
    /// than `pkt_len` says: a short write the descriptor did not report.
    Short(u8),
    /// An empty mbuf linked in at position `at` (mod the count + 1: 0 is an
    /// empty first buffer), the lengths kept right.
    Empty(u8),
}

/// Decodes an input: the `MbufCfg`, then a `gro` target input.
pub fn decode_mbuf(data: &[u8]) -> (MbufCfg, Input) {
    let mut u = Unstructured::new(data);
    let cfg = MbufCfg::arbitrary(&mut u).unwrap_or(MbufCfg {
        copy: false,
        headroom: 128,
        vxlan: false,
        twists: Vec::new(),
    });
    (cfg, decode(u.take_rest()))
}

/// Decodes and checks one input; panics (with the reason) if an invariant
/// fails. The fuzz target calls this.
pub fn run(data: &[u8]) {
    let (mc, input) = decode_mbuf(data);
    if let Err(e) = check(&mc, &input) {
        panic!(
            "mbuf invariant violated: {e}\nconfig: {:?}\n{mc:?}",
            input.cfg
        );
    }
}

/// What the forward stage did, beyond GRO's `Summary`.
#[derive(Debug, Default, Clone, Copy)]
pub struct MbufSummary {
    pub gro: Summary,
    /// Chains refused before GRO (their lengths did not hold).
    pub refused: usize,
    /// Frames the port transmitted.
    pub transmitted: usize,
    /// Software segments that differ from their input (IDs GRO merged as
    /// fixed, checksums it trusted, urgent pointers without URG).
    pub rewritten: usize,
    pub forward: ForwardStats,
}

/// Largest data room of an RX buffer (the usual 2 KiB), and so of a segment.
const SEG_ROOM: usize = 2048;
/// RX mbufs one execution may use (held by GRO or waiting for the forward
/// stage); frames past this are not fed. A 160 KiB execution in 2 KiB
/// buffers takes about 100; in one-byte buffers it would take 160 000, and
/// cost as many allocations and checks.
const RX_BUDGET: usize = 4096;
/// Slots of the ring the port transmits into (read back after each
/// execution): more than the segments of one execution.
const TX_RING: u32 = 16384;

/// The process's EAL, pools and port (EAL starts once per process).
struct Env {
    rx: Mempool,
    heads: Mempool,
    fwd: Arc<Mempool>,
    port: u16,
    ring: *mut sys::rte_ring,
}

// SAFETY: the ring is used only by whoever holds the Mutex around Env, one
// thread at a time; rte_rings may be used from any thread.
unsafe impl Send for Env {}

fn pool(name: &str, elements: u32, room: usize) -> Mempool {
    Mempool::create(&PoolParams {
        name: name.into(),
        elements,
        cache: 0,
        priv_size: skb::PRIV_SIZE,
        data_room: (sys::RTE_PKTMBUF_HEADROOM as usize + room) as u16,
        socket: -1,
    })
    .unwrap_or_else(|e| panic!("pool {name}: {e:#}"))
}

impl Env {
    fn start() -> Env {
        let cpus = grorx::lcores::available_cpus();
        let lcores = format!("0@({})", grorx::lcores::format_cpus(&cpus));
        // 4 KiB pages, no shared files, nothing probed, no telemetry socket:
        // any number of these processes side by side.
        let argv: Vec<String> = [
            "grorx-fuzz",
            "--no-huge",
            "-m",
            "256",
            "--no-shconf",
            "--no-pci",
            "--no-telemetry",
            "--lcores",
            &lcores,
            "--log-level",
            "*:error",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Eal::init(&argv).unwrap_or_else(|e| panic!("EAL: {e:#}"));
        // No per-lcore caches: `in_use` is exact after each execution.
        let rx = pool("fz_rx", RX_BUDGET as u32 + 1024, SEG_ROOM);
        let heads = pool("fz_heads", 8192, 256);
        let fwd = Arc::new(pool("fz_fwd", 2 * TX_RING, SEG_ROOM));
        // SAFETY: valid names and sizes; the ring and the port live as long
        // as the process (Env is never dropped).
        let (ring, port) = unsafe {
            let ring = sys::rte_ring_create(
                c"fz_tx".as_ptr(),
                TX_RING,
                -1,
                sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
            );
            assert!(!ring.is_null(), "TX ring");
            let rings = [ring];
            let id = sys::rte_eth_from_rings(
                c"fz_port".as_ptr(),
                rings.as_ptr(),
                1,
                rings.as_ptr(),
                1,
                0,
            );
            assert!(id >= 0, "rte_eth_from_rings");
            (ring, id as u16)
        };
        start_port(port, &rx);
        Env {
            rx,
            heads,
            fwd,
            port,
            ring,
        }
    }
}

/// Configures and starts the ring port: one RX queue (never polled: the
/// harness reads the ring itself) and one TX queue.
fn start_port(port: u16, rx: &Mempool) {
    let conf = sys::rte_eth_conf::default();
    let any = u32::MAX; // SOCKET_ID_ANY
                        // SAFETY: a port id from rte_eth_from_rings, a valid config and pool;
                        // null queue configs mean the driver's defaults.
    let r = unsafe {
        [
            sys::rte_eth_dev_configure(port, 1, 1, &conf),
            sys::rte_eth_rx_queue_setup(port, 0, 64, any, std::ptr::null(), rx.as_ptr()),
            sys::rte_eth_tx_queue_setup(port, 0, 64, any, std::ptr::null()),
            sys::rte_eth_dev_start(port),
        ]
    };
    assert!(r.iter().all(|&x| x == 0), "ring port set-up: {r:?}");
}

fn env() -> MutexGuard<'static, Env> {
    static ENV: OnceLock<Mutex<Env>> = OnceLock::new();
    ENV.get_or_init(|| Mutex::new(Env::start()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Skbs built from chains of RX mbufs, laid out (and twisted) as the input says.
struct MbufRx<'a> {
    env: &'a Env,
    cfg: &'a MbufCfg,
    conf: SkbConf,
    stats: SkbStats,
    /// Frames fed so far (what a twist names).
    frames: u16,
    /// RX mbufs this execution has taken.
    used: usize,
}

impl Rx for MbufRx<'_> {
    type Buf = Skb;
    fn make(
        &mut self,
        id: u32,
        frame: &[u8],
        layout: &Layout,
        hints: RxHints,
    ) -> Result<Made<Skb>, String> {
        let n = self.frames;
        self.frames = n.wrapping_add(1);
        let twists: Vec<Twist> = self
            .cfg
            .twists
            .iter()
            .filter(|(f, _)| *f == n)
            .map(|&(_, t)| t)
            .collect();
        let mut sizes: Vec<usize> = gen::split(frame, layout)
            .flat_map(|s| {
                let k = s.div_ceil(SEG_ROOM);
                (0..k).map(move |i| (s - i * SEG_ROOM).min(SEG_ROOM))
            })
            .collect();
        if sizes.is_empty() {
            sizes.push(0);
        }
        for t in &twists {
            if let Twist::Empty(at) = *t {
                sizes.insert(at as usize % (sizes.len() + 1), 0);
            }
        }
        if self.used + sizes.len() > RX_BUDGET {
            return Ok(Made::Skipped);
        }
        self.used += sizes.len();
        let head = chain(&self.env.rx, frame, &sizes, id, ol_flags(hints))?;
        let m = head.into_raw();
        // SAFETY: `m` is the chain just built, ours until build_checked
        // takes it; only length fields change, and are read back.
        let holds = unsafe {
            for &t in &twists {
                lie(m, t);
            }
            lengths_hold(m)
        };
        // SAFETY: a chain of mbufs from our RX pool (PRIV_SIZE private
        // area), its pointers valid; the head pool is ours too.
        let built = unsafe { Skb::build_checked(m, &self.conf, &mut self.stats) };
        match (built, holds) {
            (Some(skb), true) => {
                let head_len = skb.data().len();
                // A short chain whose pkt_len says so too is a shorter
                // frame, lengths right (Short with PktLen to match).
                let len = skb.len();
                Ok(Made::Buf {
                    buf: skb,
                    head_len,
                    len,
                })
            }
            (None, false) => Ok(Made::Refused),
            (Some(_), false) => Err(format!(
                "frame {n} (input {id}) laid out with {twists:?} was accepted"
            )),
            (None, true) => Err(format!(
                "frame {n} (input {id}), its lengths right ({twists:?}), was refused"
            )),
        }
    }
}

/// What the NIC's checksum hints look like in `ol_flags`.
fn ol_flags(h: RxHints) -> u64 {
    let pick = |c: CsumHint, good: u64, bad: u64| match c {
        CsumHint::Unknown => 0,
        CsumHint::Good => good,
        CsumHint::Bad => bad,
        CsumHint::DataGood => good | bad,
    };
    pick(
        h.ip,
        sys::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64,
        sys::RTE_MBUF_F_RX_IP_CKSUM_BAD as u64,
    ) | pick(
        h.l4,
        sys::RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64,
        sys::RTE_MBUF_F_RX_L4_CKSUM_BAD as u64,
    )
}

/// `frame` in a chain of fresh mbufs from `pool`, one per size (the sizes
/// add up to its length, each at most `SEG_ROOM`), each tagged with `tag`,
/// `flags` on the head.
fn chain(
    pool: &Mempool,
    frame: &[u8],
    sizes: &[usize],
    tag: u32,
    flags: u64,
) -> Result<Mbuf, String> {
    let mut ms = vec![std::ptr::null_mut::<sys::rte_mbuf>(); sizes.len()];
    // SAFETY: room for sizes.len() pointers; on failure nothing is taken.
    let r = unsafe { sys::rte_pktmbuf_alloc_bulk(pool.as_ptr(), ms.as_mut_ptr(), ms.len() as u32) };
    if r != 0 {
        return Err("the RX pool ran out".into());
    }
    let mut at = 0;
    for (i, (&m, &n)) in ms.iter().zip(sizes).enumerate() {
        // SAFETY: fresh (reset) mbufs of the pool, ours; `n` bytes fit the
        // SEG_ROOM bytes after each one's headroom; each is linked after the
        // one before it.
        unsafe {
            debug_assert!(mb::tailroom(m) as usize >= n);
            std::ptr::copy_nonoverlapping(frame[at..at + n].as_ptr(), mb::mtod(m), n);
            (*m).data_len = n as u16;
            (*m).__bindgen_anon_2.hash.rss = tag;
            if i > 0 {
                let prev = ms[i - 1];
                (*prev).next = m;
            }
        }
        at += n;
    }
    let h = ms[0];
    // SAFETY: the head of the chain just linked, ours: its lengths say so.
    unsafe {
        (*h).nb_segs = ms.len() as u16;
        (*h).pkt_len = frame.len() as u32;
        (*h).ol_flags |= flags;
        Ok(Mbuf::from_raw(h).expect("a fresh mbuf"))
    }
}

/// Whether the lengths of a chain the harness built hold: `nb_segs`
/// segments, `pkt_len` bytes in them, each segment's data in its buffer.
///
/// # Safety
/// `m` is a chain head the caller may read.
unsafe fn lengths_hold(m: *mut sys::rte_mbuf) -> bool {
    let (mut n, mut len, mut s) = (0u32, 0u64, m);
    // SAFETY: the caller's chain (built here: its `next` pointers end).
    unsafe {
        while !s.is_null() {
            if (*s).data_off as u32 + (*s).data_len as u32 > (*s).buf_len as u32 {
                return false;
            }
            n += 1;
            len += (*s).data_len as u64;
            s = (*s).next;
        }
        n == (*m).nb_segs as u32 && len == (*m).pkt_len as u64
    }
}

/// Makes a length field of the chain `m` lie as `t` says (an empty twist
/// is not a lie: it was laid out already).
///
/// # Safety
/// `m` is a chain head the caller owns.
unsafe fn lie(m: *mut sys::rte_mbuf, t: Twist) {
    // SAFETY: the caller owns the chain; fields are written, no pointer
    // is followed past the chain's end.
    unsafe {
        match t {
            Twist::PktLen(d) => {
                let d = if d == 0 { 1 } else { d as i32 };
                (*m).pkt_len = (*m).pkt_len.wrapping_add_signed(d);
            }
            Twist::NbSegs(d) => {
                let d = if d == 0 { 1 } else { d as i16 };
                (*m).nb_segs = (*m).nb_segs.wrapping_add_signed(d);
            }
            Twist::Overrun { s, n } => {
                let mut x = m;
                for _ in 0..s as usize % (*m).nb_segs.max(1) as usize {
                    if (*x).next.is_null() {
                        break;
                    }
                    x = (*x).next;
                }
                let room = (*x).buf_len - (*x).data_off;
                let want = room + 1 + (n % 64) as u16;
                // Wrapping: another twist may have made pkt_len lie already.
                (*m).pkt_len = (*m)
                    .pkt_len
                    .wrapping_sub((*x).data_len as u32)
                    .wrapping_add(want as u32);
                (*x).data_len = want;
            }
            Twist::Short(n) => {
                let mut x = m;
                while !(*x).next.is_null() {
                    x = (*x).next;
                }
                (*x).data_len -= (1 + n as u16).min((*x).data_len);
            }
            Twist::Empty(_) => {}
        }
    }
}

/// A GRO output, read off its chain before the forward stage takes it.
struct MbufOut {
    ids: Vec<u32>,
    bytes: Vec<u8>,
    head_len: usize,
    nsegs: usize,
    gso: Option<GsoInfo>,
}

impl Output for MbufOut {
    fn ids(&self) -> &[u32] {
        &self.ids
    }
    fn eq_bytes(&self, b: &[u8]) -> bool {
        self.bytes == b
    }
    fn bytes(&self) -> Vec<u8> {
        self.bytes.clone()
    }
    fn head_len(&self) -> usize {
        self.head_len
    }
    fn nsegs(&self) -> usize {
        self.nsegs
    }
    fn gso(&self) -> Option<GsoInfo> {
        self.gso
    }
}

/// DPDK's own check of a chain (`rte_mbuf_check`): its segments, lengths,
/// data inside each buffer.
///
/// # Safety
/// `m` is a chain head the caller may read.
unsafe fn mbuf_check(m: *const sys::rte_mbuf) -> Result<(), String> {
    let mut why: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the caller's chain; `why` is set to a static string on failure.
    unsafe {
        if sys::rte_mbuf_check(m, 1, &mut why) == 0 {
            return Ok(());
        }
        Err(std::ffi::CStr::from_ptr(why).to_string_lossy().into_owned())
    }
}

/// Calls `f` with each mbuf of a chain: the mbuf, its tag, its bytes.
///
/// # Safety
/// `m` is a chain head the caller may read, which `rte_mbuf_check` passed.
unsafe fn segments(m: *mut sys::rte_mbuf, mut f: impl FnMut(*mut sys::rte_mbuf, u32, &[u8])) {
    let mut s = m;
    // SAFETY: a checked chain: each segment's data_len bytes from mtod lie
    // in its buffer, which stays ours for the call.
    unsafe {
        while !s.is_null() {
            let b = std::slice::from_raw_parts(mb::mtod(s), mb::data_len(s) as usize);
            f(s, (*s).__bindgen_anon_2.hash.rss, b);
            s = mb::next(s);
        }
    }
}

/// Reads a GRO output off its chain, checking the chain.
fn snapshot(oi: usize, skb: &Skb) -> Result<MbufOut, String> {
    let m = skb.as_ptr();
    // SAFETY: the skb owns its chain and lends it to us for the call.
    unsafe { mbuf_check(m) }.map_err(|e| format!("GRO output {oi}: {e}"))?;
    let mut ids: Vec<u32> = Vec::new();
    let mut bytes = Vec::with_capacity(skb.len());
    let (mut nsegs, mut last) = (0, std::ptr::null_mut());
    // SAFETY: as above; the chain passed rte_mbuf_check.
    unsafe {
        segments(m, |s, tag, b| {
            if ids.last() != Some(&tag) {
                ids.push(tag);
            }
            bytes.extend_from_slice(b);
            nsegs += 1;
            last = s;
        })
    };
    let meta = *skb.meta();
    if last != meta.tail {
        return Err(format!(
            "GRO output {oi}: the skb's tail is not its last segment"
        ));
    }
    let gso = (meta.gso_size > 0).then_some(GsoInfo {
        l2_len: meta.l2_len,
        l3_len: meta.l3_len,
        l4_len: meta.l4_len,
        mss: meta.gso_size,
        segs: meta.gso_segs,
        ..Default::default()
    });
    Ok(MbufOut {
        ids,
        bytes,
        head_len: skb.data().len(),
        nsegs,
        gso,
    })
}

/// Input `frame` as software GSO rebuilds it as segment `k` of a packet
/// whose first segment is `head`: the head's IPv4 ID plus `k`, the head's
/// urgent pointer (GRO merges segments whose urgent pointers differ, as
/// Linux does: it means nothing without URG, which GRO does not merge),
/// checksums computed.
fn resegmented(frame: &[u8], head: &[u8], k: usize) -> Vec<u8> {
    let mut f = frame.to_vec();
    let t = Tcp::parse(&f, f.len(), false).expect("a merged input parses");
    let (ip, l4) = (t.l3 as usize, t.l4 as usize);
    if !t.ipv6 {
        let id0 = u16::from_be_bytes([head[ip + 4], head[ip + 5]]);
        f[ip + 4..ip + 6].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
        f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
        let c = csum::ipv4_header(&f[ip..l4]);
        f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    }
    f[l4 + 18..l4 + 20].copy_from_slice(&head[l4 + 18..l4 + 20]);
    f[l4 + 16..l4 + 18].copy_from_slice(&[0, 0]);
    let s = csum::add(
        Fields::new(&f, t).pseudo_sum((f.len() - l4) as u32),
        csum::sum(&f[l4..]),
    );
    f[l4 + 16..l4 + 18].copy_from_slice(&csum::finish(s).to_be_bytes());
    f
}

/// Checks a VXLAN frame's outer headers and returns the inner frame.
fn inner_of<'a>(f: &'a [u8], outer: &[u8; 50]) -> Result<&'a [u8], String> {
    if f.len() < 50 {
        return Err(format!("a VXLAN frame of {} bytes", f.len()));
    }
    // Per packet: IPv4 total length, ID, checksum; UDP source port and length.
    let free = [16, 17, 18, 19, 24, 25, 34, 35, 38, 39];
    if let Some(i) = (0..50).find(|i| !free.contains(i) && f[*i] != outer[*i]) {
        return Err(format!(
            "outer header byte {i} is {:#04x}, want {:#04x}",
            f[i], outer[i]
        ));
    }
    let ip_len = u16::from_be_bytes([f[16], f[17]]) as usize;
    let udp_len = u16::from_be_bytes([f[38], f[39]]) as usize;
    if ip_len != f.len() - 14 || udp_len != f.len() - 34 || csum::sum(&f[14..34]) != 0xffff {
        return Err(format!(
            "outer lengths {ip_len}/{udp_len} for {} bytes, or a bad outer IPv4 checksum",
            f.len()
        ));
    }
    Ok(&f[50..])
}

/// The outer headers the forward stage writes, constant fields only.
fn outer_template(v: &VxlanConf) -> [u8; 50] {
    let mut o = [0u8; 50];
    o[0..6].copy_from_slice(&v.dst_mac);
    o[6..12].copy_from_slice(&v.src_mac);
    o[12..14].copy_from_slice(&[0x08, 0x00]);
    o[14] = 0x45;
    o[22] = v.ttl;
    o[23] = 17;
    o[26..30].copy_from_slice(&v.src_ip);
    o[30..34].copy_from_slice(&v.dst_ip);
    o[36..38].copy_from_slice(&v.dst_port.to_be_bytes());
    o[42] = 0x08;
    o[46..49].copy_from_slice(&v.vni.to_be_bytes()[1..4]);
    o
}

/// Runs one input through skbs, GRO and the forward stage; checks it all.
pub fn check(mc: &MbufCfg, input: &Input) -> Result<MbufSummary, String> {
    let env = env();
    let env = &*env;
    let conf = SkbConf {
        mode: if mc.copy {
            SkbMode::Copy
        } else {
            SkbMode::Build
        },
        headroom: (mc.headroom as u16) % (sys::RTE_PKTMBUF_HEADROOM as u16 + 1),
        buf_truesize: skb::truesize_of(&env.rx),
        head_pool: env.heads.as_ptr(),
        head_truesize: skb::truesize_of(&env.heads),
        copy_len: 128,
    };
    let mut rx = MbufRx {
        env,
        cfg: mc,
        conf,
        stats: SkbStats::default(),
        frames: 0,
        used: 0,
    };
    let r = forward_checked(input, mc, &mut rx, env);
    let pools = [
        ("RX", &env.rx),
        ("heads", &env.heads),
        ("forward", &*env.fwd),
    ];
    for (what, p) in pools {
        if p.in_use() != 0 {
            return Err(format!(
                "{}the {what} pool has {} mbufs in use after the execution",
                r.as_ref()
                    .err()
                    .map(|e| format!("{e}; "))
                    .unwrap_or_default(),
                p.in_use()
            ));
        }
    }
    let mut s = r?;
    if rx.stats.malformed as usize != s.refused {
        return Err(format!(
            "{} chains refused, SkbStats::malformed {}",
            s.refused, rx.stats.malformed
        ));
    }
    s.refused = rx.stats.malformed as usize;
    Ok(s)
}

/// `check` but for the pools: GRO, its outputs, the forward stage, what the
/// port sent.
fn forward_checked(
    input: &Input,
    mc: &MbufCfg,
    rx: &mut MbufRx,
    env: &Env,
) -> Result<MbufSummary, String> {
    let mut fed = feed(input, rx)?;
    let outs: Vec<MbufOut> = fed
        .out
        .iter()
        .enumerate()
        .map(|(oi, s)| snapshot(oi, s))
        .collect::<Result<_, _>>()?;
    let gro = check_outputs(&fed, &outs)?;

    let vx = VxlanConf::default();
    let encap = if mc.vxlan {
        Encap::Vxlan(vx)
    } else {
        Encap::None
    };
    let mut fwd = Forwarder::new(
        ForwardConf {
            port: env.port,
            queue: 0,
            encap,
            offloads: TxOffloads::Software,
            tx_retries: 4,
        },
        env.fwd.clone(),
    )
    .map_err(|e| format!("forwarder: {e:#}"))?;
    for s in std::mem::take(&mut fed.out) {
        fwd.push(s);
    }
    fwd.flush();
    let fs = *fwd.stats();
    drop(fwd);
    let sent = drain(env.ring)?;

    // What should have been sent, in order.
    // (GRO output, segment of it, bytes)
    let mut want: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    let mut rewritten = 0;
    for (oi, o) in outs.iter().enumerate() {
        match o.gso {
            Some(g) if g.segs > 1 => {
                let head = fed.frame(o.ids[0]);
                for (k, &i) in o.ids.iter().enumerate() {
                    let f = fed.frame(i);
                    let r = resegmented(f, head, k);
                    rewritten += (r != f) as usize;
                    want.push((oi, k, r));
                }
            }
            _ => want.push((oi, 0, o.bytes.clone())),
        }
    }
    let bad = fs.malformed + fs.no_mbuf + fs.tx_dropped + fs.prepare_failed + fs.link_down;
    if bad > 0 || sent.len() != want.len() {
        return Err(format!(
            "{} frames sent for {} (GRO outputs {}); forward stage {fs:?}",
            sent.len(),
            want.len(),
            outs.len()
        ));
    }
    let outer = outer_template(&vx);
    for (j, (f, (oi, k, w))) in sent.iter().zip(&want).enumerate() {
        let inner = if mc.vxlan {
            inner_of(f, &outer).map_err(|e| format!("frame {j} sent: {e}"))?
        } else {
            f
        };
        if inner != &w[..] {
            let diff: Vec<usize> = (0..inner.len().min(w.len()))
                .filter(|&i| inner[i] != w[i])
                .collect();
            return Err(format!(
                "frame {j} sent (segment {k} of GRO output {oi}, inputs {:?}): {} bytes for \
                 {}, {} differ, from {:?}",
                outs[*oi].ids,
                inner.len(),
                w.len(),
                diff.len(),
                &diff[..diff.len().min(8)]
            ));
        }
    }
    Ok(MbufSummary {
        gro,
        refused: fed.refused,
        transmitted: sent.len(),
        rewritten,
        forward: fs,
    })
}

/// Everything the port sent (read off its ring), each chain checked and
/// copied out, then freed.
fn drain(ring: *mut sys::rte_ring) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut b: Burst<64> = Burst::new();
    let mut err = Ok(());
    loop {
        // SAFETY: the port's TX ring carries mbufs the port handed over;
        // nothing else reads it.
        let n = unsafe { b.dequeue(ring) };
        if n == 0 {
            break;
        }
        for &m in b.as_slice() {
            // SAFETY: a chain the burst owns, read before it is freed.
            match unsafe { mbuf_check(m) } {
                Ok(()) => {
                    let mut f = Vec::new();
                    // SAFETY: as above; the chain passed rte_mbuf_check.
                    unsafe { segments(m, |_, _, b| f.extend_from_slice(b)) };
                    out.push(f);
                }
                Err(e) if err.is_ok() => {
                    err = Err(format!("frame {} sent: {e}", out.len()));
                    out.push(Vec::new());
                }
                Err(_) => out.push(Vec::new()),
            }
        }
        b.free_all();
    }
    err.map(|()| out)
}
