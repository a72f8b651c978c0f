//! The `csum` target: checksum-only damage. Valid, in-order streams of a
//! few flows (TCP over IPv4 and IPv6, UDP datagrams, TCP inside VXLAN and
//! Geneve with the outer UDP checksum zero or set), in which the input
//! picks segments and damages checksum fields of them, one or several
//! (IPv4 header, TCP or UDP, a tunnel's outer IPv4 header and UDP, its inner
//! IPv4 header and TCP) and nothing else, under random bursts and flushes,
//! run verifying and then trusting. The oracle knows each frame's layout
//! from how it was built and sums its checksums itself (not with GRO's
//! parser):
//!
//! - every frame out once, in arrival order in its flow, untouched when it
//!   left alone; GRO's counters those of what came out;
//! - a merged packet is consecutive segments of one flow, none of which had
//!   a bad IPv4 header checksum (outer or inner: never, in either mode) or,
//!   verifying, any bad checksum; its payload is theirs; its IPv4 header
//!   checksums verify; if every segment's TCP (or UDP) checksum held, its
//!   own does, and so does its outer UDP one (trusting, a wrong outer UDP
//!   checksum alone is taken at its word: the merged one is made from the
//!   inner one); if exactly one segment's was wrong (trusting), its own is
//!   wrong too: the damage is carried, not made right;
//! - a frame with a bad IPv4 header checksum leaves alone (so untouched),
//!   and `bad_ip_checksum` counts exactly those frames; trusting, no L4
//!   checksum is counted bad; verifying, no more than were damaged.

use crate::frames::{self, After, Summary};
use arbitrary::{Arbitrary, Unstructured};
use grorx_gro::traffic::{pattern_byte, FlowSpec, Segment, TunnelSpec, TCP_ACK, TCP_PSH};
use grorx_gro::wire::NotTcp;
use grorx_gro::{csum, CsumMode, GroConfig, OutCsum, Pass};

/// Operations per execution at most.
const MAX_OPS: usize = 300;
/// Flows an input may use (see `Kind::of`).
const FLOWS: usize = 8;
const MSS: usize = 1400;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    Full,
    /// 1 + n % MSS: ends its packet.
    Short(u16),
}

/// One segment of a flow, the checksums it damages, and what follows it.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Op {
    flow: u8,
    size: Size,
    psh: bool,
    /// Bit i: the flow's checksum field i (`Kind::fields`) made wrong.
    damage: u8,
    /// How: the field XORed with this (made neither 0 nor its twin).
    xor: u16,
    after: After,
    dt: u8,
}

/// A decoded input: the settings (its checksum mode aside: both run) and
/// the segments.
#[derive(Debug, Clone)]
pub struct Input {
    pub cfg: GroConfig,
    ops: Vec<Op>,
}

/// Decodes arbitrary bytes (never fails: what is missing is a default).
pub fn decode(data: &[u8]) -> Input {
    let mut u = Unstructured::new(data);
    let b: [u8; 4] = Arbitrary::arbitrary(&mut u).unwrap_or_default();
    let cfg = GroConfig {
        udp: true,
        // Merged checksums in full, so the oracle can sum them.
        out_csum: OutCsum::Full,
        ..frames::config(b, FLOWS as u8)
    };
    let ops = frames::ops(&mut u, MAX_OPS);
    Input { cfg, ops }
}

/// The fuzz target's body: panics on a broken invariant.
pub fn run(data: &[u8]) {
    let input = decode(data);
    if let Err(e) = check(&input) {
        panic!("invariant violated: {e}\nconfig: {:?}", input.cfg);
    }
}

/// What a checksum field is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// An IPv4 header checksum, outer or inner.
    Ip,
    /// The TCP or UDP checksum (in a tunnel, the inner TCP one).
    L4,
    /// A tunnel's outer UDP checksum.
    OuterUdp,
}

/// Where a flow's headers are, as it was built.
#[derive(Debug, Clone)]
struct Kind {
    /// The tunnel around it, if any.
    tun: Option<TunnelSpec>,
    inner: FlowSpec,
    udp: bool,
    /// Where the (inner) IP header and L4 start.
    l3: usize,
    l4: usize,
    /// Bytes before the payload.
    hl: usize,
}

impl Kind {
    /// Flow i: 0-1 TCP over IPv4, IPv6; 2-3 UDP over IPv4, IPv6; 4 VXLAN
    /// over IPv4 without a UDP checksum; 5 the same with one; 6 Geneve with
    /// options over IPv4, UDP checksum set, around IPv6; 7 VXLAN over IPv6
    /// (checksum set) around IPv4.
    fn of(i: usize) -> Kind {
        let inner_v6 = matches!(i, 1 | 3 | 6);
        let inner = FlowSpec::numbered(i as u32, inner_v6);
        let tun = match i {
            4 => Some(TunnelSpec::vxlan(i as u32, false)),
            5 => Some(TunnelSpec {
                udp_csum: true,
                ..TunnelSpec::vxlan(i as u32, false)
            }),
            6 => Some(TunnelSpec {
                udp_csum: true,
                ..TunnelSpec::geneve(i as u32, false, vec![0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4])
            }),
            7 => Some(TunnelSpec {
                udp_csum: true,
                ..TunnelSpec::vxlan(i as u32, true)
            }),
            _ => None,
        };
        let udp = matches!(i, 2 | 3);
        let off = tun.as_ref().map_or(0, |t| t.header_len());
        let l3 = off + inner.l2_len();
        let l4 = l3 + inner.l3_len();
        let hl = l4 + if udp { 8 } else { inner.l4_len() };
        Kind {
            tun,
            inner,
            udp,
            l3,
            l4,
            hl,
        }
    }

    fn v4(s: &FlowSpec) -> bool {
        s.l3_len() == 20
    }

    /// The flow's checksum fields: where each is, and what it is.
    fn fields(&self) -> Vec<(usize, Field)> {
        let mut v = Vec::new();
        if let Some(t) = &self.tun {
            if Self::v4(&t.outer) {
                v.push((t.outer.l2_len() + 10, Field::Ip));
            }
            if t.udp_csum {
                v.push((t.outer.udp_header_len() - 2, Field::OuterUdp));
            }
        }
        if Self::v4(&self.inner) {
            v.push((self.l3 + 10, Field::Ip));
        }
        v.push((self.l4 + if self.udp { 6 } else { 16 }, Field::L4));
        v
    }
}

/// The frames the operations describe, and for each its flow and its
/// number in that flow.
fn frames(kinds: &[Kind], ops: &[Op]) -> Vec<(Vec<u8>, usize, u32)> {
    let mut seq = [0u32; FLOWS];
    let mut id = [100u16; FLOWS];
    let mut n = [0u32; FLOWS];
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let f = op.flow as usize % FLOWS;
        let k = &kinds[f];
        let len = match op.size {
            Size::Full => MSS,
            Size::Short(s) => 1 + s as usize % MSS,
        };
        let payload: Vec<u8> = (0..len as u64)
            .map(|i| pattern_byte(f as u32, seq[f] as u64 + i))
            .collect();
        let inner = if k.udp {
            k.inner.udp_frame(id[f], &payload, true)
        } else {
            let s = Segment {
                seq: seq[f],
                ack: 9,
                flags: TCP_ACK | if op.psh { TCP_PSH } else { 0 },
                ip_id: id[f],
                tsval: 5,
                tsecr: 6,
                payload_len: len as u16,
            };
            k.inner.frame(&s, &payload)
        };
        let mut fr = match &k.tun {
            Some(t) => t.encapsulate(&inner, id[f]),
            None => inner,
        };
        // Inner fields first: an outer UDP checksum damaged with them is
        // damaged whatever they did to the sum.
        for (i, &(at, _)) in k.fields().iter().enumerate().rev() {
            if op.damage >> i & 1 == 1 {
                damage(&mut fr, at, op.xor);
            }
        }
        seq[f] = seq[f].wrapping_add(len as u32);
        id[f] = id[f].wrapping_add(1);
        out.push((fr, f, n[f]));
        n[f] += 1;
    }
    out
}

/// Makes the checksum at `at` wrong by `xor`: never the same value, nor
/// its one's-complement twin (0 and 0xffff sum alike), nor 0 (a UDP
/// checksum of 0 is none).
fn damage(f: &mut [u8], at: usize, xor: u16) {
    let old = u16::from_be_bytes([f[at], f[at + 1]]);
    let mut x = xor;
    while x == 0 || x == 0xffff || old ^ x == 0 {
        x = x.wrapping_add(0x0101);
    }
    f[at..at + 2].copy_from_slice(&(old ^ x).to_be_bytes());
}

/// What the oracle reads of a frame, or of a merged packet, by its flow's
/// layout.
#[derive(Debug)]
struct Read {
    flow: [u8; 1],
    /// The frame's number in its flow.
    n: u32,
    psh: bool,
    /// Every IPv4 header checksum (outer and inner) holds.
    ip_ok: bool,
    /// The TCP or UDP (inner) checksum holds.
    l4_ok: bool,
    /// The outer UDP checksum holds (or is 0, or there is no tunnel).
    outer_ok: bool,
    payload: Vec<u8>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The IP addresses of the header at `l3`, for a pseudo-header.
fn addrs(b: &[u8], l3: usize, v4: bool) -> &[u8] {
    if v4 {
        &b[l3 + 12..l3 + 20]
    } else {
        &b[l3 + 8..l3 + 40]
    }
}

/// Reads `b`, a frame of flow `f` (of layout `k`) or a packet merged from
/// them, with lengths that are the packet's. None if it is shorter than its
/// headers.
fn read(k: &Kind, f: usize, n: u32, b: &[u8]) -> Option<Read> {
    if b.len() < k.hl {
        return None;
    }
    let v4 = Kind::v4(&k.inner);
    let mut ip_ok = !v4 || csum::sum(&b[k.l3..k.l3 + 20]) == 0xffff;
    let proto = if k.udp { 17 } else { 6 };
    let l4_len = (b.len() - k.l4) as u32;
    let l4_ok = csum::add(
        csum::pseudo(addrs(b, k.l3, v4), proto, l4_len),
        csum::sum(&b[k.l4..]),
    ) == 0xffff;
    let mut outer_ok = true;
    if let Some(t) = &k.tun {
        let (ol3, ol4) = (t.outer.l2_len(), t.outer.udp_header_len() - 8);
        let ov4 = Kind::v4(&t.outer);
        ip_ok &= !ov4 || csum::sum(&b[ol3..ol3 + 20]) == 0xffff;
        if be16(b, ol4 + 6) != 0 {
            let p = csum::pseudo(addrs(b, ol3, ov4), 17, (b.len() - ol4) as u32);
            outer_ok = csum::add(p, csum::sum(&b[ol4..])) == 0xffff;
        }
    }
    Some(Read {
        flow: [f as u8],
        n,
        psh: !k.udp && b[k.l4 + 13] & TCP_PSH != 0,
        ip_ok,
        l4_ok,
        outer_ok,
        payload: b[k.hl..].to_vec(),
    })
}

/// Runs the input through GRO, verifying and trusting, and holds what came
/// out to the oracle.
pub fn check(input: &Input) -> Result<Summary, String> {
    let kinds: Vec<Kind> = (0..FLOWS).map(Kind::of).collect();
    let built = frames(&kinds, &input.ops);
    let frames: Vec<Vec<u8>> = built.iter().map(|(b, _, _)| b.clone()).collect();
    let reads: Vec<Read> = built
        .iter()
        .map(|(b, f, n)| read(&kinds[*f], *f, *n, b).expect("a whole frame"))
        .collect();
    let mut total = Summary::default();
    for mode in [CsumMode::Verify, CsumMode::Trust] {
        let cfg = GroConfig {
            csum: mode,
            ..input.cfg
        };
        let steps = input.ops.iter().map(|op| (op.dt, op.after));
        // TCP's table and UDP's, each bounded by `flows`.
        let (g, outs) = frames::run(cfg, &frames, steps, 2 * cfg.flows)?;
        // `check_outputs` reads each input once, in order: the oracle's
        // reading of the frame it is given (which it knows from how it
        // was built, not from its bytes).
        let next = std::cell::Cell::new(0);
        let by_id = |b: &[u8]| -> Option<&Read> {
            let i = next.replace(next.get() + 1);
            (frames.get(i).map(|f| &f[..]) == Some(b)).then(|| &reads[i])
        };
        let s = frames::check_outputs(
            &frames,
            &g,
            &outs,
            cfg.max_frags,
            by_id,
            |x| &x.flow,
            |ins, bytes| check_merged(&cfg, &kinds, ins, bytes),
            frames::Order::Arrival,
        )
        .map_err(|e| format!("{mode:?}: {e}"))?;
        let pass = |p: Pass| g.stats().pass[p.index()];
        let bad_ip = reads.iter().filter(|r| !r.ip_ok).count() as u64;
        if pass(Pass::Frame(NotTcp::BadIpChecksum)) != bad_ip {
            return Err(format!(
                "{mode:?}: bad_ip_checksum {}, {bad_ip} frames had one",
                pass(Pass::Frame(NotTcp::BadIpChecksum))
            ));
        }
        let bad_l4 = pass(Pass::BadTcpChecksum) + pass(Pass::BadUdpChecksum);
        let damaged = (reads.iter())
            .filter(|r| r.ip_ok && !(r.l4_ok && r.outer_ok))
            .count() as u64;
        if (mode == CsumMode::Trust && bad_l4 != 0) || bad_l4 > damaged {
            return Err(format!(
                "{mode:?}: {bad_l4} counted with a bad L4 checksum, {damaged} had one"
            ));
        }
        total.inputs += s.inputs;
        total.outputs += s.outputs;
        total.merged += s.merged;
    }
    Ok(total)
}

/// The invariants of an output made of several segments.
fn check_merged(
    cfg: &GroConfig,
    kinds: &[Kind],
    ins: &[&&Read],
    bytes: &[u8],
) -> Result<(), String> {
    let first = *ins[0];
    let verify = cfg.csum == CsumMode::Verify;
    for (k, s) in ins.iter().enumerate() {
        if s.flow != first.flow || s.n != first.n + k as u32 {
            return Err(format!("segment {k}: not the next of the first's flow"));
        }
        if !s.ip_ok {
            return Err(format!("segment {k}: a bad IPv4 header checksum, merged"));
        }
        if verify && !(s.l4_ok && s.outer_ok) {
            return Err(format!("segment {k}: a bad checksum, verifying"));
        }
        let last = k + 1 == ins.len();
        if !last && (s.psh || s.payload.len() != first.payload.len()) {
            return Err(format!("segment {k}: PSH or short, not the last"));
        }
    }
    let f = first.flow[0] as usize;
    let Some(out) = read(&kinds[f], f, first.n, bytes) else {
        return Err("shorter than its headers".into());
    };
    let want: Vec<u8> = ins.iter().flat_map(|s| s.payload.iter().copied()).collect();
    if out.payload != want {
        return Err("payload not the segments'".into());
    }
    if !out.ip_ok {
        return Err("an IPv4 header checksum wrong".into());
    }
    match ins.iter().filter(|s| !s.l4_ok).count() {
        0 if !(out.l4_ok && out.outer_ok) => Err("a checksum wrong, all were right".into()),
        1 if out.l4_ok => Err("one segment's bad L4 checksum made right".into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(flow: u8, damage: u8) -> Op {
        Op {
            flow,
            size: Size::Full,
            psh: false,
            damage,
            xor: 0x0100,
            after: After::Nothing,
            dt: 1,
        }
    }

    fn input(ops: Vec<Op>) -> Input {
        Input {
            cfg: GroConfig {
                udp: true,
                ..GroConfig::default()
            },
            ops,
        }
    }

    #[test]
    fn the_oracle_reads_its_frames_and_sees_each_damage() {
        let kinds: Vec<Kind> = (0..FLOWS).map(Kind::of).collect();
        for (f, k) in kinds.iter().enumerate() {
            for (i, &(_, field)) in k.fields().iter().enumerate() {
                let ops = [op(f as u8, 0), op(f as u8, 1 << i)];
                let b = frames(&kinds, &ops);
                let good = read(k, f, 0, &b[0].0).unwrap();
                assert!(good.ip_ok && good.l4_ok && good.outer_ok, "flow {f}");
                let r = read(k, f, 1, &b[1].0).unwrap();
                let saw = match field {
                    Field::Ip => !r.ip_ok,
                    Field::L4 => !r.l4_ok,
                    Field::OuterUdp => !r.outer_ok && r.l4_ok,
                };
                assert!(saw, "flow {f}, field {i} ({field:?}): {r:?}");
            }
        }
    }

    /// Full segments merge in every flow; one damaged in the middle splits
    /// the run verifying, and trusting unless its damage is L4 only.
    #[test]
    fn one_damaged_segment_splits_the_run_as_the_mode_says() {
        let kinds: Vec<Kind> = (0..FLOWS).map(Kind::of).collect();
        for (f, k) in kinds.iter().enumerate() {
            let s = check(&input((0..5).map(|_| op(f as u8, 0)).collect())).unwrap();
            assert_eq!((s.inputs, s.outputs, s.merged), (10, 2, 2), "flow {f}");
            for (i, &(_, field)) in k.fields().iter().enumerate() {
                let mut ops: Vec<Op> = (0..5).map(|_| op(f as u8, 0)).collect();
                ops[2].damage = 1 << i;
                let s = check(&input(ops)).unwrap_or_else(|e| panic!("flow {f}: {e}"));
                // Verifying: 2, 1, 2; trusting, the same, or one packet.
                let trusting = if field == Field::Ip { 3 } else { 1 };
                assert_eq!(s.outputs, 3 + trusting, "flow {f}, {field:?}");
            }
        }
    }
}
