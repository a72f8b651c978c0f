//! The GRO fuzz target's input format and invariants, shared by the
//! cargo-fuzz target (`fuzz_targets/gro.rs`), the corpus replay test
//! (`tests/replay.rs`) and the `replay` example, so a corpus or a crash input
//! replays on stable Rust without cargo-fuzz.
//!
//! An input decodes into a `GroConfig` and a list of operations: receive a
//! frame (arbitrary bytes, or a valid TCP segment built by `grorx_gro::traffic`
//! with fuzzer-chosen fields, optionally corrupted), laid out in buffers of a
//! fuzzer-chosen size with fuzzer-chosen NIC checksum hints; `flush_all`;
//! `flush_older`. GRO runs on `FuzzBuf` (`VecBuf`'s list of buffers, without
//! a copy per buffer) with a fixed hash key, so an input replays the same
//! way every time. After a final `flush_all`, `check` asserts
//! (independently of GRO's own code where it can):
//!
//! - every input id comes out exactly once; `packets_out` and `segments_in`
//!   match; nothing is held; `flush_older` leaves nothing older than its deadline;
//! - an output of one input is that input, byte for byte;
//! - an output of several inputs: all are TCP segments GRO accepts, of one
//!   flow, consecutive in sequence, never one GRO had to refuse (a bad IPv4
//!   header checksum, in either mode; a TCP checksum it verified and found
//!   bad); its headers are the first input's but for the IP
//!   length/checksum, TCP checksum and the PSH/FIN bits; its payload is the
//!   inputs' payloads in order; its IPv4 header checksum verifies; its TCP
//!   checksum verifies (unless some input's wrong checksum was trusted, by
//!   `CsumMode::Trust` or a NIC hint) or holds the pseudo-header sum
//!   (`OutCsum::Pseudo`); at most `max_frags` buffers and `max_size` bytes
//!   of IP packet (IPv6: of IPv6 payload); past 64 KiB (BIG TCP, one input
//!   in 16 allows it) an IPv4 total length of 0, an IPv6 jumbo header (RFC
//!   2675) with the length (`FuzzBuf` has no headroom for one: only real
//!   mbufs make them);
//! - per flow (Linux's identity: MACs, VLAN tags with their types, IP
//!   version, flow label, addresses, ports), the output payload bytes, in
//!   output order, equal the input payload bytes in arrival order (frames GRO
//!   parses as TCP only); with the reorder window on (half the inputs), the
//!   flow's data steps back in sequence (starts before the end of the data
//!   before it) no more often out than in;
//! - a frame GRO turns away but that still tells its flow (a TCP fragment,
//!   IP options, a bad IP checksum, IPv6 extension headers...) comes out
//!   after every earlier segment of that flow: the flow it names, MACs and
//!   ports included (Linux's identity), or, for a fragment past the first
//!   (no ports), any flow between its addresses.
//!
//! The flows are told by this harness's own parse (`flow::flow_of`), not by
//! GRO's code: a flow identity GRO gets wrong shows as an order it broke.
//!
//! Histograms (`Gro::enable_histograms`) are switched on by the input too.
//!
//! A known finding can be tolerated to fuzz past it: see `allowed`.

pub mod buf;
pub mod checksums;
pub mod flow;
pub mod frames;
pub mod gen;
#[cfg(feature = "mbuf")]
pub mod mbuf;
pub mod tunnel;
pub mod udp;

use arbitrary::{Arbitrary, Unstructured};
use buf::FuzzBuf;
use flow::{flow_of, FxMap, Ident, Key};
use grorx_gro::csum;
use grorx_gro::key::HashKey;
use grorx_gro::traffic::{TCP_ACK, TCP_FIN, TCP_PSH};
use grorx_gro::wire::{Fields, Tcp};
use grorx_gro::{CsumHint, CsumMode, Gro, GroBuf, GroConfig, GroStats, GsoInfo, OutCsum, RxHints};

/// Operations decoded from one input at most (keeps an execution short).
pub const MAX_OPS: usize = 256;
/// Largest generated TCP payload (a jumbo frame).
pub const MAX_PAYLOAD: u16 = 9000;
/// Largest arbitrary frame.
pub const MAX_RAW: u16 = 2048;
/// Frame bytes one input may feed (later receives are skipped): keeps an
/// execution in the millisecond range; a 64 KiB merge needs 45 frames.
pub const MAX_BYTES: usize = 160 * 1024;

#[derive(Arbitrary, Debug, Clone)]
struct RawCfg {
    max_frags: u8,
    flows: u8,
    trust: bool,
    pseudo: bool,
    max_size: u16,
    /// Histograms on, with this TSC rate.
    hist_hz: Option<u32>,
}

/// A decoded input.
#[derive(Debug, Clone)]
pub struct Input {
    pub cfg: GroConfig,
    /// `Gro::enable_histograms(hz)` first.
    pub hist_hz: Option<u64>,
    /// With the reorder window off: frames are taken a poll at a time
    /// (`Gro::receive_poll`), each poll ending at a flush.
    pub polls: bool,
    pub ops: Vec<Op>,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Op {
    Tcp(TcpFrame),
    /// `1 + n % 64` segments of one flow: the first as described, the rest
    /// the flow's next in-order segments (ACK only, next IP ID, same layout).
    Stream {
        n: u8,
        first: TcpFrame,
    },
    Raw(RawFrame),
    FlushAll,
    /// `flush_older(now - age)`.
    FlushOlder {
        age: u16,
    },
}

/// How a frame is laid out in buffers, what the NIC says about it, and the
/// time that passes before it arrives.
#[derive(Arbitrary, Debug, Clone)]
pub struct Layout {
    /// Buffer size (0: one buffer).
    pub room: u16,
    /// How big the first buffer is (then `room`-sized ones).
    pub head: HeadSplit,
    /// Bits 0-1: IP hint, bits 2-3: L4 hint (Unknown, Good, Bad, DataGood).
    pub hints: Option<u8>,
    /// TSC ticks since the previous receive.
    pub dt: u8,
}

/// The first buffer of a frame.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum HeadSplit {
    /// `room` bytes, like the rest.
    Room,
    /// This many bytes (at least 1).
    At(u16),
    /// The headers and `d` more bytes (header split RX, e.g. DPDK's buffer
    /// split offload: headers alone when d = 0), if the frame parses as TCP.
    Headers(i8),
}

/// Arbitrary bytes as a frame.
#[derive(Debug, Clone)]
pub struct RawFrame {
    pub layout: Layout,
    pub bytes: Vec<u8>,
}

impl<'a> Arbitrary<'a> for RawFrame {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let layout = Layout::arbitrary(u)?;
        // A length prefix (not arbitrary's length-at-the-end): a mutation of
        // a frame stays local in the input.
        let n = (u16::arbitrary(u)? % (MAX_RAW + 1)) as usize;
        let bytes = u.bytes(n.min(u.len()))?.to_vec();
        Ok(RawFrame { layout, bytes })
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SeqChoice {
    /// The next byte of the flow's stream.
    Next,
    Back(u16),
    /// A gap before this segment: with the top bit set, one segment of the
    /// flow's size (a gap one late segment fills whole), else this many
    /// bytes.
    Ahead(u16),
    Set(u32),
    /// Into the flow's last gap (left by `Ahead`), from its start, at most
    /// its length, with the IP ID its sender gave it (`IdChoice::Next`): a
    /// segment that came late. With no gap open, as `Next`.
    Late,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum FlagChoice {
    Ack,
    AckPsh,
    AckFin,
    Other(u8),
}

impl FlagChoice {
    fn bits(self) -> u8 {
        match self {
            FlagChoice::Ack => TCP_ACK,
            FlagChoice::AckPsh => TCP_ACK | TCP_PSH,
            FlagChoice::AckFin => TCP_ACK | TCP_FIN,
            FlagChoice::Other(b) => b,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum IdChoice {
    Next,
    Same,
    Set(u16),
}

/// Per-frame changes of fields that are not the flow's identity (but for
/// the IPv6 flow label, which is).
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct IpTweak {
    pub tos: u8,
    pub ttl: u8,
    pub no_df: bool,
    pub window: u16,
    pub no_timestamps: bool,
    pub flow_label: u8,
}

/// A valid TCP segment of one of a few flows (each keeps its stream state:
/// next seq, ACK, IP ID, TSval, segment size), with fuzzer-chosen fields.
#[derive(Arbitrary, Debug, Clone)]
pub struct TcpFrame {
    /// Flow number (mod 16).
    pub flow: u8,
    pub ipv6: bool,
    /// VLAN tags: count (mod 3).
    pub vlans: u8,
    pub tags: u16,
    pub seq: SeqChoice,
    /// A new ACK number (kept for the flow's later segments).
    pub ack: Option<u32>,
    pub flags: FlagChoice,
    pub ip_id: IdChoice,
    /// A new TSval (kept).
    pub tsval: Option<u32>,
    /// A new segment size (mod MAX_PAYLOAD + 1; kept).
    pub len: Option<u16>,
    pub ip: Option<IpTweak>,
    /// XOR the byte at (offset mod frame length) with (value, or 1 if 0).
    pub corrupt: Option<(u16, u8)>,
    pub layout: Layout,
}

/// Known findings to tolerate, named in the environment variable
/// `GRORX_FUZZ_ALLOW` (comma-separated), so fuzzing can go on past a bug
/// already reported. Recognised:
/// - `head-buffer`: a merged packet whose first input's first buffer holds
///   headers only may have `max_frags + 1` buffers (GRO before 4671e14
///   counted only the held packet's buffers holding payload; see
///   artifacts/README.md). Not needed since that fix.
fn allowed(what: &str) -> bool {
    static ALLOW: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    ALLOW
        .get_or_init(|| {
            std::env::var("GRORX_FUZZ_ALLOW")
                .unwrap_or_default()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .iter()
        .any(|a| a == what)
}

/// Decodes an input: the config, then operations until the bytes run out.
pub fn decode(data: &[u8]) -> Input {
    let mut u = Unstructured::new(data);
    let rc = RawCfg::arbitrary(&mut u).unwrap_or(RawCfg {
        max_frags: 16,
        flows: 63,
        trust: false,
        pseudo: false,
        max_size: 65535,
        hist_hz: None,
    });
    let cfg = GroConfig {
        max_frags: 1 + (rc.max_frags % 64) as u16,
        flows: 1 + (rc.flows % 64) as usize,
        // The top two bits: how many flushed flows the table remembers
        // (none, a few so that ghosts are taken over, or the default).
        flow_cache: [0, 3, 16, 1024][(rc.flows >> 6) as usize],
        csum: if rc.trust {
            CsumMode::Trust
        } else {
            CsumMode::Verify
        },
        out_csum: if rc.pseudo {
            OutCsum::Pseudo
        } else {
            OutCsum::Full
        },
        // One input in 16 past 64 KiB (BIG TCP), up to 512 KiB.
        max_size: match rc.max_size {
            n @ 0xf000.. => 65536 + (n - 0xf000) as u32 * 112,
            n => 1500 + (n as u32 % (65535 - 1500 + 1)),
        },
        // The harness keeps its own clock: the hold time is its, not the
        // config's.
        hold_us: 0,
        // The top two bits of max_frags: the reorder window, off for half
        // the inputs (then every flow is held to arrival order; with it,
        // to leaving no more reordered than it came). Off, half of those
        // take each poll whole (`Harness::polls`).
        reorder: grorx_gro::ReorderWindow {
            segments: [0, 0, 3, grorx_gro::MAX_REORDER][(rc.max_frags >> 6) as usize],
            ..Default::default()
        },
        // Off: the oracle knows TCP's merges only.
        udp: false,
        // Off: the oracle reads plain TCP only; the `tunnel` target holds
        // GRO through tunnels to an oracle of its own.
        tunnels: grorx_gro::wire::Tunnels {
            on: false,
            ..Default::default()
        },
    };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < MAX_OPS {
        match Op::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    Input {
        cfg,
        hist_hz: rc.hist_hz.map(|h| h as u64),
        polls: rc.max_frags >> 6 == 1,
        ops,
    }
}

/// Decodes and checks one input; panics (with the reason) if an invariant
/// fails. The fuzz target calls this.
pub fn run(data: &[u8]) {
    let input = decode(data);
    if let Err(e) = check(&input) {
        panic!("GRO invariant violated: {e}\nconfig: {:?}", input.cfg);
    }
}

/// Runs the operations through a `Gro<FuzzBuf>` and checks every invariant.
pub fn check(input: &Input) -> Result<Summary, String> {
    let fed = feed(input, &mut Plain)?;
    check_outputs(&fed, &fed.out)
}

/// What one execution did (for replay summaries).
#[derive(Debug, Default, Clone, Copy)]
pub struct Summary {
    pub inputs: usize,
    pub outputs: usize,
    /// Outputs made of more than one input.
    pub merged: usize,
    /// GRO's own counters (flush and pass-through reasons: what was reached).
    pub stats: GroStats,
}

/// The hash key of every `Gro` here: fixed, so that an input replays the
/// same way (a random key could change which lookups reach the probe limit).
pub const HASH_KEY: HashKey = HashKey::fixed([
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
]);

/// How a harness hands a frame to GRO: the buffer it lays the frame out in.
pub trait Rx {
    type Buf: GroBuf;
    /// Frame `id` (numbered in the order GRO receives them), laid out as
    /// `layout` says, with the NIC's `hints`. Err: an invariant broke.
    fn make(
        &mut self,
        id: u32,
        frame: &[u8],
        layout: &Layout,
        hints: RxHints,
    ) -> Result<Made<Self::Buf>, String>;
}

/// What `Rx::make` did with a frame.
pub enum Made<B> {
    /// A buffer for GRO; `head_len` bytes of the frame in its first buffer,
    /// `len` in all (fewer than the frame's when the backend's layout,
    /// lengths consistent, holds less: a short write its driver reported).
    Buf { buf: B, head_len: usize, len: usize },
    /// Turned away before GRO (counted by the backend).
    Refused,
    /// Not fed: the backend's budget for one execution is spent.
    Skipped,
}

/// `FuzzBuf`s, laid out as the input says.
pub struct Plain;

impl Rx for Plain {
    type Buf = FuzzBuf;
    fn make(
        &mut self,
        id: u32,
        frame: &[u8],
        layout: &Layout,
        hints: RxHints,
    ) -> Result<Made<FuzzBuf>, String> {
        let mut buf = FuzzBuf::new(id, frame.to_vec(), gen::split(frame, layout));
        buf.hints = hints;
        let head_len = buf.head_len();
        Ok(Made::Buf {
            buf,
            head_len,
            len: frame.len(),
        })
    }
}

/// A packet GRO let out, as the checks read it.
pub trait Output {
    /// The inputs it is made of, in order.
    fn ids(&self) -> &[u32];
    /// Whether its bytes are `b`.
    fn eq_bytes(&self, b: &[u8]) -> bool;
    /// Its bytes.
    fn bytes(&self) -> Vec<u8>;
    /// Bytes in its first buffer.
    fn head_len(&self) -> usize;
    /// Buffers it spans.
    fn nsegs(&self) -> usize;
    /// The layout GRO gave it.
    fn gso(&self) -> Option<GsoInfo>;
}

impl Output for FuzzBuf {
    fn ids(&self) -> &[u32] {
        &self.ids
    }
    fn eq_bytes(&self, b: &[u8]) -> bool {
        FuzzBuf::eq_bytes(self, b)
    }
    fn bytes(&self) -> Vec<u8> {
        FuzzBuf::bytes(self)
    }
    fn head_len(&self) -> usize {
        FuzzBuf::head_len(self)
    }
    fn nsegs(&self) -> usize {
        FuzzBuf::nsegs(self)
    }
    fn gso(&self) -> Option<GsoInfo> {
        self.gso
    }
}

/// What the harness knows of one input frame.
struct Rec {
    bytes: Vec<u8>,
    hints: RxHints,
    /// GRO's parse (of the first buffer, with GRO's IP checksum rule), and
    /// the frame's flow (an index into `Fed::keys`).
    tcp: Option<(Tcp, u32)>,
    ip_ok: bool,
    tcp_ok: bool,
    /// For a frame GRO turns away (`tcp` is None): the flow it still tells.
    hint: Option<(Ident, Option<u32>)>,
}

impl Rec {
    fn payload(&self) -> &[u8] {
        let (t, _) = self.tcp.as_ref().expect("a TCP input");
        &self.bytes[t.payload as usize..]
    }
    fn seq(&self) -> u32 {
        let (t, _) = self.tcp.as_ref().expect("a TCP input");
        Fields::new(&self.bytes, *t).seq()
    }
}

/// A BIG TCP IPv6 packet (its IPv6 header at `l3`, TCP right after it)
/// with its jumbo header checked and taken out: the packet as it would be
/// but for its length, its payload length field 0.
fn big_ipv6(b: &[u8], l3: usize) -> Result<Vec<u8>, String> {
    let hbh = l3 + 40;
    let plen = u16::from_be_bytes([b[l3 + 4], b[l3 + 5]]);
    let jlen = u32::from_be_bytes([b[hbh + 4], b[hbh + 5], b[hbh + 6], b[hbh + 7]]) as usize;
    if b[l3 + 6] != 0 || plen != 0 || b[hbh + 1..hbh + 4] != [0, 0xc2, 4] {
        return Err("IPv6 past 64 KiB without a jumbo header and a payload length of 0".into());
    }
    if jlen != b.len() - hbh {
        return Err(format!(
            "jumbo length {jlen}, {} bytes follow",
            b.len() - hbh
        ));
    }
    let mut out = Vec::with_capacity(b.len() - 8);
    out.extend_from_slice(&b[..hbh]);
    out.extend_from_slice(&b[hbh + 8..]);
    out[l3 + 6] = b[hbh];
    Ok(out)
}

/// The TCP checksum of a frame parsed as `t`, the slow way: true if it verifies.
fn tcp_sum_ok(bytes: &[u8], t: Tcp) -> bool {
    let f = Fields::new(bytes, t);
    let tcp = &bytes[t.l4 as usize..];
    csum::add(f.pseudo_sum(tcp.len() as u32), csum::sum(tcp)) == 0xffff
}

/// An execution's operations, done: what GRO was given and gave back.
pub struct Fed<B> {
    pub cfg: GroConfig,
    /// GRO's outputs, in order.
    pub out: Vec<B>,
    /// GRO's counters.
    pub stats: GroStats,
    /// Frames the backend turned away before GRO.
    pub refused: usize,
    recs: Vec<Rec>,
    /// Every flow seen (by `flow_of`), numbered in order of arrival.
    keys: Vec<Key>,
    key_ids: FxMap<Key, u32>,
}

impl<B> Fed<B> {
    /// Frames GRO received.
    pub fn inputs(&self) -> usize {
        self.recs.len()
    }
    /// The bytes of input `id`.
    pub fn frame(&self, id: u32) -> &[u8] {
        &self.recs[id as usize].bytes
    }
}

/// The GRO under test and what it was given and gave back.
struct Harness<'r, R: Rx> {
    rx: &'r mut R,
    verify: bool,
    /// The reorder window is on.
    window: bool,
    /// Frames wait for the poll's end to be taken whole (`receive_poll`),
    /// which then flushes everything (`end_of_poll`), as the engine's
    /// worker does without `--gro-flush-us`.
    polls: bool,
    burst: Vec<R::Buf>,
    gro: Gro<R::Buf>,
    fed: Fed<R::Buf>,
    flows: gen::Flows,
    now: u64,
    bytes: usize,
}

impl<R: Rx> Harness<'_, R> {
    /// Gives GRO one frame, laid out as `layout` says.
    fn feed(&mut self, mut frame: Vec<u8>, layout: &Layout) -> Result<(), String> {
        self.bytes += frame.len();
        if self.bytes > MAX_BYTES {
            return Ok(());
        }
        let verify = self.verify;
        let id = self.fed.recs.len() as u32;
        let hints = gen::hints(layout);
        let (buf, head_len) = match self.rx.make(id, &frame, layout, hints)? {
            Made::Buf { buf, head_len, len } => {
                // What GRO is given is what the buffer holds.
                frame.truncate(len);
                (buf, head_len.min(len))
            }
            Made::Refused => {
                self.fed.refused += 1;
                return Ok(());
            }
            Made::Skipped => return Ok(()),
        };
        // GRO's view: the first buffer, its IP checksum rule.
        let head = &frame[..head_len];
        let gro_parses = !(verify && hints.ip == CsumHint::Bad);
        let tcp = if gro_parses {
            Tcp::parse(head, frame.len(), verify && hints.ip == CsumHint::Unknown)
                .ok()
                .map(|t| (t, self.flow_id(&frame)))
        } else {
            None
        };
        let hint = if tcp.is_none() { flow_of(head) } else { None };
        let loose = Tcp::parse(&frame, frame.len(), false).ok();
        let (ip_ok, tcp_ok) = match loose {
            Some(t) => (
                t.ipv6 || csum::sum(&frame[t.l3 as usize..t.l4 as usize]) == 0xffff,
                tcp_sum_ok(&frame, t),
            ),
            None => (false, false),
        };
        self.fed.recs.push(Rec {
            bytes: frame,
            hints,
            tcp,
            ip_ok,
            tcp_ok,
            hint,
        });
        self.now += layout.dt as u64;
        if self.polls {
            self.burst.push(buf);
            return Ok(());
        }
        let out = &mut self.fed.out;
        self.gro.receive(buf, self.now, &mut |b| out.push(b));
        self.held_ok()
    }

    /// The frames of the poll, taken whole.
    fn take_poll(&mut self) -> Result<(), String> {
        let out = &mut self.fed.out;
        self.gro
            .receive_poll(&mut self.burst, self.now, &mut |b| out.push(b));
        self.held_ok()
    }

    fn held_ok(&self) -> Result<(), String> {
        if self.gro.held() > self.fed.cfg.flows {
            return Err(format!(
                "{} packets held, table of {}",
                self.gro.held(),
                self.fed.cfg.flows
            ));
        }
        Ok(())
    }

    /// The number of the flow of a frame GRO parsed as a TCP segment.
    fn flow_id(&mut self, frame: &[u8]) -> u32 {
        let (id, ports) = flow_of(frame).expect("a TCP segment tells its flow");
        let key = Key::of(frame, id, ports.expect("a TCP segment has its ports"));
        let f = &mut self.fed;
        let next = f.keys.len() as u32;
        let k = *f.key_ids.entry(key).or_insert(next);
        if k == next {
            f.keys.push(key);
        }
        k
    }

    fn tcp(&mut self, t: &TcpFrame) -> Result<(), String> {
        if self.bytes > MAX_BYTES {
            return Ok(());
        }
        let f = gen::tcp_frame(t, &mut self.flows);
        self.feed(f, &t.layout)
    }

    fn flush_all(&mut self) -> Result<(), String> {
        self.take_poll()?;
        self.gro.tick(self.now);
        let out = &mut self.fed.out;
        self.gro.flush_all(&mut |b| out.push(b));
        if self.gro.held() != 0 {
            return Err(format!("{} packets held after flush_all", self.gro.held()));
        }
        Ok(())
    }

    fn run(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Tcp(t) => self.tcp(t)?,
            Op::Raw(r) => self.feed(r.bytes.clone(), &r.layout)?,
            Op::Stream { n, first } => {
                self.tcp(first)?;
                let next = gen::next_of(first);
                for _ in 0..n % 64 {
                    self.tcp(&next)?;
                }
            }
            Op::FlushAll => self.flush_all()?,
            Op::FlushOlder { .. } if self.polls => {
                // The end of a poll taken whole.
                self.take_poll()?;
                self.gro.tick(self.now);
                let out = &mut self.fed.out;
                self.gro.end_of_poll(&mut |b| out.push(b));
                if self.gro.held() != 0 {
                    return Err(format!(
                        "{} packets held after end_of_poll",
                        self.gro.held()
                    ));
                }
            }
            Op::FlushOlder { age } if self.window => {
                // The engine's poll with the window on: waits older than the
                // deadline given up, then the end-of-poll or age flush,
                // either of which leaves the flows still waiting held.
                let deadline = self.now.saturating_sub(*age as u64);
                self.gro.tick(self.now);
                let out = &mut self.fed.out;
                self.gro.expire_reorder(deadline, &mut |b| out.push(b));
                if age % 2 == 0 {
                    self.gro.end_of_poll(&mut |b| out.push(b));
                } else {
                    self.gro.flush_older(deadline, &mut |b| out.push(b));
                }
            }
            Op::FlushOlder { age } => {
                let deadline = self.now.saturating_sub(*age as u64);
                self.gro.tick(self.now);
                let out = &mut self.fed.out;
                self.gro.flush_older(deadline, &mut |b| out.push(b));
                if let Some(s) = self.gro.oldest_since() {
                    if s <= deadline {
                        return Err(format!(
                            "flush_older({deadline}) left a packet held since {s}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs the operations through a `Gro` on `rx`'s buffers, then flushes
/// everything: GRO's outputs, for `check_outputs`.
pub fn feed<R: Rx>(input: &Input, rx: &mut R) -> Result<Fed<R::Buf>, String> {
    let cfg = input.cfg;
    cfg.validate().map_err(|e| e.to_string())?;
    let mut h = Harness {
        rx,
        verify: cfg.csum == CsumMode::Verify,
        window: cfg.reorder.segments > 0,
        polls: cfg.reorder.segments == 0 && input.polls,
        burst: Vec::new(),
        gro: Gro::with_hash_key(cfg, HASH_KEY),
        fed: Fed {
            cfg,
            out: Vec::new(),
            stats: GroStats::default(),
            refused: 0,
            recs: Vec::new(),
            keys: Vec::new(),
            key_ids: FxMap::default(),
        },
        flows: gen::Flows::default(),
        now: 0,
        bytes: 0,
    };
    if let Some(hz) = input.hist_hz {
        h.gro.enable_histograms(hz);
    }
    for op in &input.ops {
        h.run(op)?;
    }
    h.flush_all()?;
    h.fed.stats = *h.gro.stats();
    Ok(h.fed)
}

/// A flow's input payload bytes, in arrival order, read off as outputs
/// bring theirs: the inputs (with payload) and a position in them.
#[derive(Default)]
struct Stream {
    recs: Vec<u32>,
    at: usize,
    off: usize,
    /// Bytes read off so far.
    read: usize,
}

impl Stream {
    /// Reads `out` off the stream: Err(the stream offset where they differ).
    fn take(&mut self, recs: &[Rec], mut out: &[u8]) -> Result<(), usize> {
        while !out.is_empty() {
            let Some(&i) = self.recs.get(self.at) else {
                return Err(self.read);
            };
            let whole = recs[i as usize].payload();
            let p = &whole[self.off..];
            let n = p.len().min(out.len());
            if p[..n] != out[..n] {
                let d = p.iter().zip(out).position(|(a, b)| a != b).unwrap_or(0);
                return Err(self.read + d);
            }
            self.off += n;
            self.read += n;
            out = &out[n..];
            if self.off == whole.len() {
                self.at += 1;
                self.off = 0;
            }
        }
        Ok(())
    }

    /// Input payload bytes not read off.
    fn left(&self, recs: &[Rec]) -> usize {
        self.recs[self.at.min(self.recs.len())..]
            .iter()
            .map(|&i| recs[i as usize].payload().len())
            .sum::<usize>()
            - self.off
    }
}

/// Checks GRO's outputs (`outs`, in order: `fed.out` or views of them)
/// against what it was given.
pub fn check_outputs<B, O: Output>(fed: &Fed<B>, outs: &[O]) -> Result<Summary, String> {
    let (cfg, recs, keys) = (&fed.cfg, &fed.recs, &fed.keys);

    // Conservation.
    let n = recs.len();
    let mut seen = vec![0u32; n];
    for o in outs {
        if o.ids().is_empty() {
            return Err("an output made of no input".into());
        }
        for &id in o.ids() {
            let i = id as usize;
            if i >= n {
                return Err(format!("an output holds unknown id {id}"));
            }
            seen[i] += 1;
        }
    }
    if let Some(i) = seen.iter().position(|&c| c != 1) {
        return Err(format!("input {i} came out {} times", seen[i]));
    }
    let st = &fed.stats;
    if st.packets_out != outs.len() as u64 {
        return Err(format!(
            "packets_out {} but {} outputs",
            st.packets_out,
            outs.len()
        ));
    }
    if st.segments_in != n as u64 {
        return Err(format!("segments_in {} but {} inputs", st.segments_in, n));
    }

    // Each output; per flow, payload bytes in arrival order (with the
    // reorder window: data no more often behind what came before it, in
    // sequence, than it arrived).
    // Per flow, its inputs with payload: their sequence ranges (window on)
    // or the stream outputs are read off (off).
    let window = cfg.reorder.segments > 0;
    let flows = keys.len();
    let mut seen_in: Vec<Vec<(u32, u32)>> = vec![Vec::new(); if window { flows } else { 0 }];
    let mut seen_out = seen_in.clone();
    let mut streams: Vec<Stream> = (0..if window { 0 } else { flows })
        .map(|_| Stream::default())
        .collect();
    for (i, r) in recs.iter().enumerate() {
        if let Some((_, k)) = r.tcp.filter(|_| !r.payload().is_empty()) {
            if window {
                seen_in[k as usize].push((r.seq(), r.payload().len() as u32));
            } else {
                streams[k as usize].recs.push(i as u32);
            }
        }
    }
    let mut merged = 0;
    for (oi, o) in outs.iter().enumerate() {
        let ids = o.ids();
        let first = &recs[ids[0] as usize];
        let ob: Vec<u8>;
        let (flow, payload) = if ids.len() == 1 {
            if !o.eq_bytes(&first.bytes) {
                return Err(format!("output {oi} (input {}) alone but changed", ids[0]));
            }
            if let Some(g) = o.gso() {
                if g.segs != 1 {
                    return Err(format!("output {oi}: one input but gso.segs {}", g.segs));
                }
            }
            let Some((_, k)) = first.tcp else { continue };
            (k, first.payload())
        } else {
            merged += 1;
            ob = o.bytes();
            check_merged(cfg, oi, o, &ob, recs)?;
            let (t0, k) = first.tcp.unwrap();
            // A BIG TCP packet (checked above) does not parse: the first
            // input's layout, past the jumbo header of an IPv6 one.
            let at = match Tcp::parse(&ob, ob.len(), false) {
                Ok(ot) => ot.payload as usize,
                Err(_) => t0.payload as usize + if t0.ipv6 { 8 } else { 0 },
            };
            (k, &ob[at..])
        };
        if window {
            if !payload.is_empty() {
                seen_out[flow as usize].push((first.seq(), payload.len() as u32));
            }
            continue;
        }
        let s = &mut streams[flow as usize];
        if let Err(at) = s.take(recs, payload) {
            let total: usize = s
                .recs
                .iter()
                .map(|&i| recs[i as usize].payload().len())
                .sum();
            return Err(format!(
                "flow {:?}: output {oi} brings payload that differs from the input's at \
                 stream byte {at} ({total} bytes in)",
                keys[flow as usize]
            ));
        }
    }
    for (k, (i, o)) in seen_in.iter().zip(&seen_out).enumerate() {
        let (back_in, back_out) = (frames::backsteps(i), frames::backsteps(o));
        if back_out > back_in {
            return Err(format!(
                "flow {:?}: {back_out} steps back in sequence out, {back_in} in: \
                 in {i:?}, out {o:?}",
                keys[k]
            ));
        }
    }
    for (k, s) in streams.iter().enumerate() {
        let left = s.left(recs);
        if left > 0 {
            return Err(format!(
                "flow {:?}: {} payload bytes out, {} in",
                keys[k],
                s.read,
                s.read + left
            ));
        }
    }

    // A frame GRO turned away comes out after every earlier segment of the
    // flow it tells: its whole key when it has ports, else (a fragment past
    // the first) any flow of its IP identity, whatever the MACs.
    let mut out_pos = vec![0usize; n];
    for (oi, o) in outs.iter().enumerate() {
        for &id in o.ids() {
            out_pos[id as usize] = oi;
        }
    }
    let mut last_full: Vec<Option<usize>> = vec![None; keys.len()];
    let mut last_any: FxMap<Ident, usize> = FxMap::default();
    for (i, r) in recs.iter().enumerate() {
        if let Some((_, k)) = r.tcp {
            let p = out_pos[i];
            let e = &mut last_full[k as usize];
            *e = Some(e.map_or(p, |e| e.max(p)));
            let e = last_any.entry(keys[k as usize].ident).or_insert(p);
            *e = (*e).max(p);
        } else if let Some((h, ports)) = &r.hint {
            let m = match ports {
                Some(p) => fed
                    .key_ids
                    .get(&Key::of(&r.bytes, *h, *p))
                    .and_then(|&k| last_full[k as usize]),
                None => last_any.get(h).copied(),
            };
            if let Some(m) = m {
                if m >= out_pos[i] {
                    return Err(format!(
                        "input {i}, turned away, came out (output {}) before output {m}, \
                         made of an earlier segment of its flow {h:?} ports {ports:?}",
                        out_pos[i]
                    ));
                }
            }
        }
    }
    Ok(Summary {
        inputs: n,
        outputs: outs.len(),
        merged,
        stats: fed.stats,
    })
}

/// The invariants of an output made of several inputs.
fn check_merged<O: Output>(
    cfg: &GroConfig,
    oi: usize,
    o: &O,
    ob: &[u8],
    recs: &[Rec],
) -> Result<(), String> {
    let verify = cfg.csum == CsumMode::Verify;
    let ids = o.ids();
    let e = |m: String| Err(format!("merged output {oi} (inputs {ids:?}): {m}"));
    let parts: Vec<&Rec> = ids.iter().map(|&i| &recs[i as usize]).collect();
    let first = parts[0];
    let Some((t0, k0)) = &first.tcp else {
        return e("holds a frame GRO does not parse as TCP".into());
    };
    for (j, p) in parts.iter().enumerate() {
        let id = ids[j];
        let Some((_, k)) = &p.tcp else {
            return e(format!("input {id} does not parse as TCP"));
        };
        if k != k0 {
            return e(format!("input {id} is of another flow"));
        }
        // Checksums GRO had to check and reject: an IPv4 header's in
        // either mode (trust covers the L4 checksum only), the TCP one
        // verifying.
        if p.hints.ip == CsumHint::Bad {
            return e(format!("input {id} has the NIC's bad-IP-checksum flag"));
        }
        if verify && p.hints.l4 == CsumHint::Bad {
            return e(format!("input {id} has the NIC's bad-L4-checksum flag"));
        }
        if p.hints.ip == CsumHint::Unknown && !p.ip_ok {
            return e(format!("input {id} has a bad IPv4 header checksum"));
        }
        if verify && p.hints.l4 == CsumHint::Unknown && !p.tcp_ok {
            return e(format!("input {id} has a bad TCP checksum"));
        }
        if j > 0 {
            let prev = parts[j - 1];
            let want = prev.seq().wrapping_add(prev.payload().len() as u32);
            if p.seq() != want {
                return e(format!(
                    "input {id} has seq {} after one that ends at {want}",
                    p.seq()
                ));
            }
        }
    }
    // Parses whole, IPv4 header checksum included, with the first's layout.
    // Past 64 KiB (BIG TCP), IPv4 states a total length of 0, its header
    // checksum made with it; IPv6 a payload length of 0 and a jumbo
    // hop-by-hop header (RFC 2675), checked, then taken out of `ob` for
    // the checks below.
    let (l3_0, l4_0) = (t0.l3 as usize, t0.l4 as usize);
    let unjumbo;
    let (ob, t) = if !t0.ipv6 && ob.len() - l3_0 > 65535 {
        let total = u16::from_be_bytes([ob[l3_0 + 2], ob[l3_0 + 3]]);
        if total != 0 {
            return e(format!(
                "a BIG TCP packet with a total length of {total}, not 0"
            ));
        }
        if csum::sum(&ob[l3_0..l4_0]) != 0xffff {
            return e("a BIG TCP packet whose IPv4 header checksum does not verify".into());
        }
        (ob, *t0)
    } else if t0.ipv6 && ob.len() - l3_0 - 48 > 65535 {
        match big_ipv6(ob, l3_0) {
            Ok(b) => unjumbo = b,
            Err(m) => return e(m),
        }
        (&unjumbo[..], *t0)
    } else {
        match Tcp::parse(ob, ob.len(), true) {
            Ok(t) => (ob, t),
            Err(why) => return e(format!("does not parse with its IP checksum: {why:?}")),
        }
    };
    if (t.l3, t.l4, t.payload, t.ipv6, t.vlans, t.tci)
        != (t0.l3, t0.l4, t0.payload, t0.ipv6, t0.vlans, t0.tci)
    {
        return e(format!("header layout {t:?}, first input's {t0:?}"));
    }
    // Payload: the inputs', in order.
    let want = parts.iter().map(|p| p.payload().len()).sum::<usize>();
    let mut at = t.payload as usize;
    let same = ob.len() - at == want
        && parts.iter().all(|p| {
            let n = p.payload().len();
            at += n;
            ob[at - n..at] == *p.payload()
        });
    if !same {
        return e(format!(
            "payload of {} bytes is not its inputs' {want} bytes in order",
            ob.len() - t.payload as usize,
        ));
    }
    // Headers: the first's but for lengths, checksums, PSH/FIN.
    let (l3, l4) = (t.l3 as usize, t.l4 as usize);
    let mut free: Vec<usize> = if t.ipv6 {
        vec![l3 + 4, l3 + 5]
    } else {
        vec![l3 + 2, l3 + 3, l3 + 10, l3 + 11]
    };
    free.extend([l4 + 13, l4 + 16, l4 + 17]);
    let hl = t.payload as usize;
    for (i, (&o, &f)) in ob[..hl].iter().zip(&first.bytes[..hl]).enumerate() {
        if o != f && !free.contains(&i) {
            return e(format!(
                "header byte {i} is {o:#04x}, the first input's {f:#04x}"
            ));
        }
    }
    let or_flags = parts[1..]
        .iter()
        .fold(0u8, |a, p| a | (p.bytes[l4 + 13] & 0x09));
    if ob[l4 + 13] != first.bytes[l4 + 13] | or_flags {
        return e(format!(
            "TCP flags {:#04x}, want {:#04x}",
            ob[l4 + 13],
            first.bytes[l4 + 13] | or_flags
        ));
    }
    // Limits.
    let header_only_head = o.head_len() <= t.payload as usize;
    let frag_limit = cfg.max_frags as usize + (header_only_head && allowed("head-buffer")) as usize;
    if o.nsegs() > frag_limit {
        return e(format!(
            "{} buffers, max_frags {}{}",
            o.nsegs(),
            cfg.max_frags,
            if header_only_head {
                " (its first buffer holds headers only)"
            } else {
                ""
            }
        ));
    }
    let ip_payload = ob.len() - l3 - if t.ipv6 { 40 } else { 0 };
    if ip_payload > cfg.max_size as usize {
        return e(format!(
            "{} bytes of IP {}, max_size {}",
            ip_payload,
            if t.ipv6 { "payload" } else { "packet" },
            cfg.max_size
        ));
    }
    // TCP checksum.
    let f = Fields::new(ob, t);
    let field = f.tcp_csum();
    match cfg.out_csum {
        OutCsum::Pseudo => {
            let want = csum::add(csum::sum(f.addrs()), 6);
            if field != want {
                return e(format!(
                    "TSO checksum field {field:#06x}, want pseudo-header sum {want:#06x}"
                ));
            }
        }
        OutCsum::Full => {
            // A wrong checksum that was trusted (Trust mode, or the NIC said
            // Good) is carried into the merged one; otherwise it must verify.
            let trusted_bad = parts.iter().any(|p| {
                !p.tcp_ok
                    && match p.hints.l4 {
                        CsumHint::Good => true,
                        CsumHint::DataGood => false,
                        CsumHint::Unknown | CsumHint::Bad => !verify,
                    }
            });
            if !trusted_bad && !tcp_sum_ok(ob, t) {
                return e("TCP checksum does not verify".into());
            }
        }
    }
    match o.gso() {
        Some(g) if g.segs as usize == parts.len() && g.mss as usize == first.payload().len() => {}
        g => {
            return e(format!(
                "gso {g:?}, want segs {} mss {}",
                parts.len(),
                first.payload().len()
            ))
        }
    }
    Ok(())
}
