//! The GRO fuzz target's input format and invariants, shared by the
//! cargo-fuzz target (`fuzz_targets/gro.rs`), the corpus replay test
//! (`tests/replay.rs`) and the `replay` example, so a corpus or a crash input
//! replays on stable Rust without cargo-fuzz.
//!
//! An input decodes into a `GroConfig` and a list of operations: receive a
//! frame (arbitrary bytes, or a valid TCP segment built by `grorx_gro::traffic`
//! with fuzzer-chosen fields, optionally corrupted), laid out in buffers of a
//! fuzzer-chosen size with fuzzer-chosen NIC checksum hints; `flush_all`;
//! `flush_older`. After a final `flush_all`, `check` asserts (independently
//! of GRO's own code where it can):
//!
//! - every input id comes out exactly once; `packets_out` and `segments_in`
//!   match; nothing is held; `flush_older` leaves nothing older than its deadline;
//! - an output of one input is that input, byte for byte;
//! - an output of several inputs: all are TCP segments GRO accepts, of one
//!   flow, consecutive in sequence, never one GRO had to refuse (a checksum it
//!   verified and found bad); its headers are the first input's but for the IP
//!   length/checksum, TCP checksum and the PSH/FIN bits; its payload is the
//!   inputs' payloads in order; its IPv4 header checksum verifies; its TCP
//!   checksum verifies (unless some input's wrong checksum was trusted, by
//!   `CsumMode::Trust` or a NIC hint) or holds the pseudo-header sum
//!   (`OutCsum::Pseudo`); at most `max_frags` buffers and `max_size` bytes
//!   of IP packet (IPv6: of IPv6 payload);
//! - per flow (Linux's identity: MACs, VLAN tags with their types, IP
//!   version, flow label, addresses, ports), the output payload bytes, in
//!   output order, equal the input payload bytes in arrival order (frames GRO
//!   parses as TCP only);
//! - a frame GRO turns away but that still tells its flow (a TCP fragment,
//!   IP options, a bad IP checksum, IPv6 extension headers...) comes out
//!   after every earlier segment of that flow (matched by IP identity and
//!   ports).
//!
//! The flows are told by this harness's own parse (`flow_of`), not by GRO's
//! code: a flow identity GRO gets wrong shows as an order it broke.
//!
//! Histograms (`Gro::enable_histograms`) are switched on by the input too.
//!
//! A known finding can be tolerated to fuzz past it: see `allowed`.

use arbitrary::{Arbitrary, Unstructured};
use grorx_gro::csum;
use grorx_gro::{CsumHint, CsumMode, Gro, GroConfig, GroStats, OutCsum, RxHints, VecBuf};
use grorx_gro::traffic::{pattern_byte, FlowSpec, Segment, TCP_ACK, TCP_FIN, TCP_PSH};
use grorx_gro::wire::{Fields, Tcp};
use std::collections::HashMap;

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
    Ahead(u16),
    Set(u32),
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
        max_size: 1500 + (rc.max_size as u32 % (65535 - 1500 + 1)),
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

/// A flow's identity as GRO sees it (computed here, not with GRO's FlowKey).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    macs: [u8; 12],
    /// VLAN tags: (tag type, TCI), outermost first.
    tags: Vec<(u16, u16)>,
    ipv6: bool,
    label: u32,
    addrs: Vec<u8>,
    ports: u32,
}

/// What the harness knows of one input frame.
struct Rec {
    bytes: Vec<u8>,
    hints: RxHints,
    /// GRO's parse (of the first buffer, with GRO's IP checksum rule).
    tcp: Option<(Tcp, Key)>,
    ip_ok: bool,
    tcp_ok: bool,
    /// For a frame GRO turns away (`tcp` is None): the flow it still tells.
    hint: Option<(Ident, Option<u32>)>,
}

/// A flow's IP identity (GRO's key without the MACs and ports): what a frame
/// GRO turned away is matched by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Ident {
    tags: Vec<(u16, u16)>,
    ipv6: bool,
    label: u32,
    addrs: Vec<u8>,
}

impl Key {
    fn ident(&self) -> Ident {
        Ident {
            tags: self.tags.clone(),
            ipv6: self.ipv6,
            label: self.label,
            addrs: self.addrs.clone(),
        }
    }
}

/// The flow a frame tells by its protocol fields alone (TCP over IPv4 or
/// IPv6, at most two VLAN tags, IPv6 extension headers stepped over), and
/// its ports unless it is a non-first fragment. Written here, apart from
/// GRO's parser, so the checks do not share its mistakes.
fn flow_of(head: &[u8]) -> Option<(Ident, Option<u32>)> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*head.get(at)?, *head.get(at + 1)?]));
    let mut off = 12;
    let mut tags = Vec::new();
    let mut et = be16(off)?;
    while et == 0x8100 || et == 0x88a8 {
        if tags.len() == 2 {
            return None;
        }
        tags.push((et, be16(off + 2)?));
        off += 4;
        et = be16(off)?;
    }
    let l3 = off + 2;
    let (ipv6, label, addrs, l4) = match et {
        0x0800 => {
            let ip = head.get(l3..l3 + 20)?;
            if ip[0] >> 4 != 4 || ip[9] != 6 {
                return None;
            }
            let frag_off = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
            let l4 = (frag_off == 0).then_some(l3 + (ip[0] & 0x0f) as usize * 4);
            (false, 0, ip[12..20].to_vec(), l4)
        }
        0x86dd => {
            let ip = head.get(l3..l3 + 40)?;
            if ip[0] >> 4 != 6 {
                return None;
            }
            let label = u32::from_be_bytes([0, ip[1] & 0x0f, ip[2], ip[3]]);
            let (mut next, mut at, mut l4) = (ip[6], l3 + 40, None);
            for _ in 0..8 {
                match next {
                    6 => {
                        l4 = Some(at);
                        break;
                    }
                    44 => {
                        if be16(at + 2)? & 0xfff8 != 0 {
                            break; // a later fragment: no TCP header here
                        }
                        next = *head.get(at)?;
                        at += 8;
                    }
                    51 => {
                        next = *head.get(at)?;
                        at += (*head.get(at + 1)? as usize + 2) * 4;
                    }
                    0 | 43 | 60 => {
                        next = *head.get(at)?;
                        at += (*head.get(at + 1)? as usize + 1) * 8;
                    }
                    _ => return None,
                }
            }
            if next != 6 && l4.is_none() && next != 44 {
                return None;
            }
            (true, label, ip[8..40].to_vec(), l4)
        }
        _ => return None,
    };
    let ports = l4
        .and_then(|l4| head.get(l4..l4 + 4))
        .map(|p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
    Some((
        Ident {
            tags,
            ipv6,
            label,
            addrs,
        },
        ports,
    ))
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

/// The flow of a frame GRO parsed as a TCP segment, by `flow_of`.
fn key_of(bytes: &[u8]) -> Key {
    let (id, ports) = flow_of(bytes).expect("a TCP segment tells its flow");
    Key {
        macs: bytes[..12].try_into().unwrap(),
        tags: id.tags,
        ipv6: id.ipv6,
        label: id.label,
        addrs: id.addrs,
        ports: ports.expect("a TCP segment has its ports"),
    }
}

/// The TCP checksum of a frame parsed as `t`, the slow way: true if it verifies.
fn tcp_sum_ok(bytes: &[u8], t: Tcp) -> bool {
    let f = Fields::new(bytes, t);
    let tcp = &bytes[t.l4 as usize..];
    csum::add(f.pseudo_sum(tcp.len() as u32), csum::sum(tcp)) == 0xffff
}

fn hint(b: u8) -> CsumHint {
    match b & 3 {
        0 => CsumHint::Unknown,
        1 => CsumHint::Good,
        2 => CsumHint::Bad,
        _ => CsumHint::DataGood,
    }
}

fn make_buf(id: u64, frame: &[u8], l: &Layout) -> VecBuf {
    let room = if l.room == 0 {
        usize::MAX
    } else {
        l.room as usize
    };
    let mut segs = Vec::new();
    let mut rest = frame;
    let head = match l.head {
        HeadSplit::Room => None,
        HeadSplit::At(h) => Some(h as usize),
        HeadSplit::Headers(d) => Tcp::parse(frame, frame.len(), false)
            .ok()
            .map(|t| (t.payload as isize + d as isize).max(1) as usize),
    };
    if let Some(h) = head {
        let h = h.max(1).min(rest.len());
        if h > 0 {
            segs.push(rest[..h].to_vec());
            rest = &rest[h..];
        }
    }
    segs.extend(rest.chunks(room).map(|c| c.to_vec()));
    if segs.is_empty() {
        segs.push(Vec::new());
    }
    let hints = l
        .hints
        .map(|b| RxHints {
            ip: hint(b),
            l4: hint(b >> 2),
        })
        .unwrap_or_default();
    VecBuf {
        segs,
        hints,
        gso: None,
        ids: vec![id],
    }
}

/// One flow's stream state.
struct FlowState {
    seq: u32,
    ack: u32,
    ip_id: u16,
    tsval: u32,
    len: u16,
}

/// Builds the frame a `TcpFrame` describes and advances its flow's state.
fn tcp_frame(op: &TcpFrame, flows: &mut HashMap<(u8, bool, u8, u16), FlowState>) -> Vec<u8> {
    let idx = op.flow % 16;
    let nv = op.vlans % 3;
    let tags = if nv == 0 { 0 } else { op.tags };
    let mut spec = FlowSpec::numbered(idx as u32, op.ipv6);
    spec.vlans = match nv {
        0 => vec![],
        1 => vec![tags & 0x0fff],
        _ => vec![tags & 0x0fff, (tags >> 4) ^ 0x5a5],
    };
    if let Some(tw) = op.ip {
        spec.tos = tw.tos;
        spec.ttl = tw.ttl;
        spec.df = !tw.no_df;
        spec.window = tw.window;
        spec.timestamps = !tw.no_timestamps;
        spec.flow_label = tw.flow_label as u32;
    }
    let st = flows
        .entry((idx, op.ipv6, nv, tags))
        .or_insert_with(|| FlowState {
            // Flow 1 starts just before the sequence space wraps.
            seq: (idx as u32).wrapping_mul(0x9e37_79b9) ^ if idx == 1 { 0xffff_f000 } else { 0 },
            ack: 1,
            ip_id: 100,
            tsval: 1000,
            len: 1448,
        });
    let seq = match op.seq {
        SeqChoice::Next => st.seq,
        SeqChoice::Back(d) => st.seq.wrapping_sub(d as u32),
        SeqChoice::Ahead(d) => st.seq.wrapping_add(d as u32),
        SeqChoice::Set(s) => s,
    };
    if let Some(a) = op.ack {
        st.ack = a;
    }
    if let Some(t) = op.tsval {
        st.tsval = t;
    }
    if let Some(n) = op.len {
        st.len = n % (MAX_PAYLOAD + 1);
    }
    let ip_id = match op.ip_id {
        IdChoice::Next => st.ip_id,
        IdChoice::Same => st.ip_id.wrapping_sub(1),
        IdChoice::Set(i) => i,
    };
    let s = Segment {
        seq,
        ack: st.ack,
        flags: op.flags.bits(),
        ip_id,
        tsval: st.tsval,
        tsecr: 500,
        payload_len: st.len,
    };
    let payload: Vec<u8> = (0..st.len as u32)
        .map(|k| pattern_byte(idx as u32, seq.wrapping_add(k) as u64))
        .collect();
    let mut f = spec.frame(&s, &payload);
    st.seq = seq.wrapping_add(st.len as u32);
    st.ip_id = ip_id.wrapping_add(1);
    if let Some((at, x)) = op.corrupt {
        let n = f.len();
        f[at as usize % n] ^= x.max(1);
    }
    f
}

/// The GRO under test and what it was given and gave back.
struct Harness {
    cfg: GroConfig,
    verify: bool,
    gro: Gro<VecBuf>,
    recs: Vec<Rec>,
    out: Vec<VecBuf>,
    flows: HashMap<(u8, bool, u8, u16), FlowState>,
    now: u64,
    bytes: usize,
}

impl Harness {
    /// Gives GRO one frame, laid out as `layout` says.
    fn feed(&mut self, frame: Vec<u8>, layout: &Layout) -> Result<(), String> {
        self.bytes += frame.len();
        if self.bytes > MAX_BYTES {
            return Ok(());
        }
        let verify = self.verify;
        let id = self.recs.len() as u64;
        let buf = make_buf(id, &frame, layout);
        let hints = buf.hints;
        // GRO's view: the first buffer, its IP checksum rule.
        let head = &buf.segs[0];
        let gro_parses = !(verify && hints.ip == CsumHint::Bad);
        let tcp = if gro_parses {
            Tcp::parse(head, frame.len(), verify && hints.ip == CsumHint::Unknown)
                .ok()
                .map(|t| (t, key_of(&frame)))
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
        self.recs.push(Rec {
            bytes: frame,
            hints,
            tcp,
            ip_ok,
            tcp_ok,
            hint,
        });
        self.now += layout.dt as u64;
        let out = &mut self.out;
        self.gro.receive(buf, self.now, &mut |b| out.push(b));
        if self.gro.held() > self.cfg.flows {
            return Err(format!(
                "{} packets held, table of {}",
                self.gro.held(),
                self.cfg.flows
            ));
        }
        Ok(())
    }

    fn tcp(&mut self, t: &TcpFrame) -> Result<(), String> {
        if self.bytes > MAX_BYTES {
            return Ok(());
        }
        let f = tcp_frame(t, &mut self.flows);
        self.feed(f, &t.layout)
    }

    fn flush_all(&mut self) -> Result<(), String> {
        self.gro.tick(self.now);
        let out = &mut self.out;
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
                let next = TcpFrame {
                    seq: SeqChoice::Next,
                    ack: None,
                    flags: FlagChoice::Ack,
                    ip_id: IdChoice::Next,
                    tsval: None,
                    len: None,
                    corrupt: None,
                    ..first.clone()
                };
                for _ in 0..n % 64 {
                    self.tcp(&next)?;
                }
            }
            Op::FlushAll => self.flush_all()?,
            Op::FlushOlder { age } => {
                let deadline = self.now.saturating_sub(*age as u64);
                self.gro.tick(self.now);
                let out = &mut self.out;
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

/// Runs the operations through a `Gro<VecBuf>` and checks every invariant.
pub fn check(input: &Input) -> Result<Summary, String> {
    let cfg = input.cfg;
    cfg.validate()?;
    let mut h = Harness {
        cfg,
        verify: cfg.csum == CsumMode::Verify,
        gro: Gro::new(cfg),
        recs: Vec::new(),
        out: Vec::new(),
        flows: HashMap::new(),
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
    let Harness { gro, recs, out, .. } = h;

    // Conservation.
    let n = recs.len();
    let mut seen = vec![0u32; n];
    for o in &out {
        if o.ids.is_empty() {
            return Err("an output made of no input".into());
        }
        for &id in &o.ids {
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
    let st = gro.stats();
    if st.packets_out != out.len() as u64 {
        return Err(format!(
            "packets_out {} but {} outputs",
            st.packets_out,
            out.len()
        ));
    }
    if st.segments_in != n as u64 {
        return Err(format!("segments_in {} but {} inputs", st.segments_in, n));
    }

    // Each output.
    let mut merged = 0;
    let mut got: HashMap<Key, Vec<u8>> = HashMap::new();
    for (oi, o) in out.iter().enumerate() {
        let ob = o.bytes();
        let first = &recs[o.ids[0] as usize];
        if o.ids.len() == 1 {
            if ob != first.bytes {
                return Err(format!(
                    "output {oi} (input {}) alone but changed",
                    o.ids[0]
                ));
            }
            if let Some(g) = o.gso {
                if g.segs != 1 {
                    return Err(format!("output {oi}: one input but gso.segs {}", g.segs));
                }
            }
            if let Some((_, k)) = &first.tcp {
                got.entry(k.clone())
                    .or_default()
                    .extend_from_slice(first.payload());
            }
            continue;
        }
        merged += 1;
        check_merged(&cfg, oi, o, &ob, &recs)?;
        let (_, k) = first.tcp.as_ref().unwrap();
        let ot = Tcp::parse(&ob, ob.len(), false).unwrap();
        got.entry(k.clone())
            .or_default()
            .extend_from_slice(&ob[ot.payload as usize..]);
    }

    // A frame GRO turned away comes out after every earlier segment of the
    // flow it tells (matched by IP identity and ports, any MACs).
    let mut out_pos = vec![0usize; n];
    for (oi, o) in out.iter().enumerate() {
        for &id in &o.ids {
            out_pos[id as usize] = oi;
        }
    }
    let mut last_full: HashMap<(Ident, u32), usize> = HashMap::new();
    let mut last_any: HashMap<Ident, usize> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if let Some((_, k)) = &r.tcp {
            let id = k.ident();
            let p = out_pos[i];
            let e = last_full.entry((id.clone(), k.ports)).or_insert(p);
            *e = (*e).max(p);
            let e = last_any.entry(id).or_insert(p);
            *e = (*e).max(p);
        } else if let Some((h, ports)) = &r.hint {
            let m = match ports {
                Some(p) => last_full.get(&(h.clone(), *p)),
                None => last_any.get(h),
            };
            if let Some(&m) = m {
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

    // Per flow, bytes in arrival order.
    let mut expect: HashMap<Key, Vec<u8>> = HashMap::new();
    for r in &recs {
        if let Some((_, k)) = &r.tcp {
            expect
                .entry(k.clone())
                .or_default()
                .extend_from_slice(r.payload());
        }
    }
    for (k, e) in &expect {
        let g = got.get(k).map(|v| v.as_slice()).unwrap_or(&[]);
        if g != e.as_slice() {
            let at = g.iter().zip(e).position(|(a, b)| a != b);
            return Err(format!(
                "flow {k:?}: {} payload bytes out, {} in; first difference at {at:?}",
                g.len(),
                e.len()
            ));
        }
    }
    if let Some(k) = got.keys().find(|k| !expect.contains_key(*k)) {
        return Err(format!("payload out for flow {k:?} that never came in"));
    }
    Ok(Summary {
        inputs: n,
        outputs: out.len(),
        merged,
        stats: *gro.stats(),
    })
}

/// The invariants of an output made of several inputs.
fn check_merged(
    cfg: &GroConfig,
    oi: usize,
    o: &VecBuf,
    ob: &[u8],
    recs: &[Rec],
) -> Result<(), String> {
    let verify = cfg.csum == CsumMode::Verify;
    let e = |m: String| Err(format!("merged output {oi} (inputs {:?}): {m}", o.ids));
    let parts: Vec<&Rec> = o.ids.iter().map(|&i| &recs[i as usize]).collect();
    let first = parts[0];
    let Some((t0, k0)) = &first.tcp else {
        return e("holds a frame GRO does not parse as TCP".into());
    };
    for (j, p) in parts.iter().enumerate() {
        let id = o.ids[j];
        let Some((_, k)) = &p.tcp else {
            return e(format!("input {id} does not parse as TCP"));
        };
        if k != k0 {
            return e(format!("input {id} is of another flow"));
        }
        // Checksums GRO had to check and reject.
        if verify && p.hints.ip == CsumHint::Bad {
            return e(format!("input {id} has the NIC's bad-IP-checksum flag"));
        }
        if verify && p.hints.l4 == CsumHint::Bad {
            return e(format!("input {id} has the NIC's bad-L4-checksum flag"));
        }
        if verify && p.hints.ip == CsumHint::Unknown && !p.ip_ok {
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
    let t = match Tcp::parse(ob, ob.len(), true) {
        Ok(t) => t,
        Err(why) => return e(format!("does not parse with its IP checksum: {why:?}")),
    };
    if (t.l3, t.l4, t.payload, t.ipv6, t.vlans, t.tci)
        != (t0.l3, t0.l4, t0.payload, t0.ipv6, t0.vlans, t0.tci)
    {
        return e(format!("header layout {t:?}, first input's {t0:?}"));
    }
    // Payload: the inputs', in order.
    let want: Vec<u8> = parts
        .iter()
        .flat_map(|p| p.payload().iter().copied())
        .collect();
    if ob[t.payload as usize..] != want[..] {
        return e(format!(
            "payload of {} bytes is not its inputs' {} bytes in order",
            ob.len() - t.payload as usize,
            want.len()
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
    let header_only_head = o.segs[0].len() <= t.payload as usize;
    let frag_limit = cfg.max_frags as usize + (header_only_head && allowed("head-buffer")) as usize;
    if o.segs.len() > frag_limit {
        return e(format!(
            "{} buffers, max_frags {}{}",
            o.segs.len(),
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
    match o.gso {
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
