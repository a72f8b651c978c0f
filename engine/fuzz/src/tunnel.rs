//! The `tunnel` target: TCP inside VXLAN and Geneve (IPv4 and IPv6 outside,
//! outer UDP checksums zero and set, outer DF or counting IDs), the same
//! inner flows in two tunnels and one outside any, with segment sizes,
//! sequence steps, flags, outer edits (TTL, TOS, checksum on or off, IDs)
//! and damage (cut short, a byte overwritten, the VXLAN flag cleared, the
//! Geneve option length past the frame, a checksum off) chosen by the
//! input, under random bursts and flushes. The oracle reads every frame
//! with a parser of its own (not GRO's): every frame out once; one that
//! left alone is untouched; a merged packet is consecutive segments of one
//! flow (the tunnel's identity and the inner one) that Linux's rules merge,
//! inner and outer, its payload theirs and its lengths and checksums right
//! at both levels; each flow's segments leave in arrival order (with the
//! reorder window, on for half the inputs: step back in sequence no more
//! often than they came; a segment can come late, into its flow's gap).

use crate::frames::{self, After, Summary};
use arbitrary::{Arbitrary, Unstructured};
use grorx_gro::traffic::{pattern_byte, FlowSpec, Segment, TunnelSpec, TCP_ACK};
use grorx_gro::{csum, CsumMode, GroConfig, OutCsum};

/// Operations per execution at most.
const MAX_OPS: usize = 300;
/// Flows an input may use: 0-6 in tunnels, 7 outside any.
const FLOWS: usize = 8;
const MSS: usize = 1400;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    Full,
    /// 1 + n % MSS.
    Short(u16),
    /// 1 + n % (MSS + 100): may be larger than the first.
    Other(u16),
    NoPayload,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum SeqStep {
    Next,
    /// Back by 1 + n (a retransmission).
    Back(u16),
    /// Ahead by 1 + n % (4 MSS) (a gap: one the reorder window can bridge,
    /// most of the time).
    Ahead(u16),
    /// Into the flow's last gap (from its start, at most its length), with
    /// the inner and outer IPv4 IDs the sender gave it: a segment that came
    /// late. With no gap open, as `Next`.
    Late,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Flags {
    Ack,
    Psh,
    Fin,
    Syn,
    Rst,
    Cwr,
    Urg,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum OuterId {
    Next,
    Same,
    Jump(u8),
}

/// A change to the flow's outer headers (kept for its later segments).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum OuterEdit {
    None,
    Ttl,
    Tos,
    /// The outer UDP checksum set or not, the other way round.
    Csum,
    Df,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Damage {
    None,
    /// Cut to this many bytes (modulo the length).
    Cut(u16),
    /// Byte `at` (modulo the length) overwritten.
    Byte(u16, u8),
    /// The inner TCP checksum off by one.
    InnerCsum,
    /// The outer UDP checksum off by one (when set).
    OuterCsum,
    /// VXLAN: the I flag cleared; Geneve: the option length `n % 64`.
    TunnelHeader(u8),
}

/// One segment and what follows it.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Op {
    flow: u8,
    size: Size,
    seq: SeqStep,
    flags: Flags,
    outer_id: OuterId,
    edit: OuterEdit,
    damage: Damage,
    after: After,
    dt: u8,
}

/// A decoded input: the settings and the segments.
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
        flow_cache: if b[2] & 4 == 4 { 0 } else { 1024 },
        // Half the inputs with the reorder window.
        reorder: grorx_gro::ReorderWindow {
            segments: [0, 0, 3, grorx_gro::MAX_REORDER][(b[2] >> 3 & 3) as usize],
            ..Default::default()
        },
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

/// Flow i's inner flow: flows i and i + 4 carry the same one, in two
/// tunnels; flow 7 carries flow 3's outside any tunnel.
fn inner_spec(i: usize) -> FlowSpec {
    let mut s = FlowSpec::numbered((i % 4) as u32, i % 2 == 1);
    if i % 4 == 2 {
        s.vlans = vec![30];
    }
    s
}

/// Flow i's tunnel (None for flow 7).
fn tunnel_spec(i: usize) -> Option<TunnelSpec> {
    let opts = vec![0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4];
    let mut t = match i % 4 {
        0 => TunnelSpec::vxlan(i as u32, false),
        1 => TunnelSpec {
            udp_csum: true,
            ..TunnelSpec::vxlan(i as u32, true)
        },
        2 => TunnelSpec {
            udp_csum: true,
            ..TunnelSpec::geneve(i as u32, false, opts)
        },
        _ => TunnelSpec::geneve(i as u32, true, Vec::new()),
    };
    if i == 2 {
        t.outer.df = true;
        t.outer.vlans = vec![40];
    }
    (i < 7).then_some(t)
}

/// The frames the operations describe.
fn frames(ops: &[Op]) -> Vec<Vec<u8>> {
    let mut seq = [0u32; FLOWS];
    let mut oid = [1u16; FLOWS];
    let mut iid = [100u16; FLOWS];
    // Each flow's last gap: where it starts, its length, and the inner and
    // outer IDs its sender gave it.
    let mut gap: [Option<(u32, u32, u16, u16)>; FLOWS] = [None; FLOWS];
    let mut tuns: Vec<Option<TunnelSpec>> = (0..FLOWS).map(tunnel_spec).collect();
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let f = op.flow as usize % FLOWS;
        let mut len = match op.size {
            Size::Full => MSS,
            Size::Short(n) => 1 + n as usize % MSS,
            Size::Other(n) => 1 + n as usize % (MSS + 100),
            Size::NoPayload => 0,
        };
        // The IDs of a segment that came late are the ones kept for it.
        let mut late_ids = None;
        let s = match (op.seq, gap[f]) {
            (SeqStep::Late, Some((at, n, i, o))) => {
                len = len.min(n as usize);
                gap[f] = (len < n as usize).then(|| {
                    let l = len as u32;
                    (
                        at.wrapping_add(l),
                        n - l,
                        i.wrapping_add(1),
                        o.wrapping_add(1),
                    )
                });
                late_ids = Some((i, o));
                at
            }
            (SeqStep::Next | SeqStep::Late, _) => seq[f],
            (SeqStep::Back(n), _) => seq[f].wrapping_sub(1 + n as u32),
            (SeqStep::Ahead(n), _) => {
                // The sender's IDs for the gap's segment come before this
                // one's.
                let n = n as u32 % (4 * MSS as u32);
                gap[f] = Some((
                    seq[f],
                    1 + n,
                    iid[f].wrapping_add(1),
                    oid[f].wrapping_add(1),
                ));
                iid[f] = iid[f].wrapping_add(1);
                oid[f] = oid[f].wrapping_add(1);
                seq[f].wrapping_add(1 + n)
            }
        };
        if late_ids.is_none() {
            seq[f] = s.wrapping_add(len as u32);
            iid[f] = iid[f].wrapping_add(1);
        }
        let flags = TCP_ACK
            | match op.flags {
                Flags::Ack => 0,
                Flags::Psh => 0x08,
                Flags::Fin => 0x01,
                Flags::Syn => 0x02,
                Flags::Rst => 0x04,
                Flags::Cwr => 0x80,
                Flags::Urg => 0x20,
            };
        let payload: Vec<u8> = (0..len as u64)
            .map(|k| pattern_byte(f as u32 % 4, s as u64 + k))
            .collect();
        let spec = inner_spec(f);
        let seg = Segment {
            seq: s,
            ack: 9,
            flags,
            ip_id: late_ids.map_or(iid[f], |(i, _)| i),
            tsval: 5,
            tsecr: 6,
            payload_len: len as u16,
        };
        let mut inner = spec.frame(&seg, &payload);
        if matches!(op.damage, Damage::InnerCsum) {
            let at = spec.l2_len() + spec.l3_len() + 16;
            inner[at] ^= 1;
        }
        let mut fr = match &mut tuns[f] {
            None => inner,
            Some(t) => {
                match op.edit {
                    OuterEdit::None => {}
                    OuterEdit::Ttl => t.outer.ttl = t.outer.ttl.wrapping_sub(1),
                    OuterEdit::Tos => t.outer.tos ^= 0x04,
                    OuterEdit::Csum => t.udp_csum = !t.udp_csum,
                    OuterEdit::Df => t.outer.df = !t.outer.df,
                }
                let id = match late_ids {
                    Some((_, o)) => o,
                    None => {
                        oid[f] = match op.outer_id {
                            OuterId::Next => oid[f].wrapping_add(1),
                            OuterId::Same => oid[f],
                            OuterId::Jump(j) => oid[f].wrapping_add(2 + j as u16),
                        };
                        oid[f]
                    }
                };
                let mut fr = t.encapsulate(&inner, id);
                let l4 = t.outer.udp_header_len() - 8;
                match op.damage {
                    Damage::OuterCsum if t.udp_csum => fr[l4 + 7] ^= 1,
                    Damage::TunnelHeader(n) => match t.kind {
                        grorx_gro::wire::TunnelKind::Vxlan => fr[l4 + 8] &= !0x08,
                        grorx_gro::wire::TunnelKind::Geneve => fr[l4 + 8] = n % 64,
                    },
                    _ => {}
                }
                fr
            }
        };
        match op.damage {
            Damage::Cut(n) => fr.truncate(n as usize % (fr.len() + 1)),
            Damage::Byte(at, v) => {
                let i = at as usize % fr.len();
                fr[i] = v;
            }
            _ => {}
        }
        out.push(fr);
    }
    out
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An Ethernet frame's IP layer as the oracle reads it: no IP options or
/// IPv6 extension headers, no fragments, the IP length the frame's.
struct Ip {
    v6: bool,
    /// Where the IP header starts.
    l3: usize,
    /// Where L4 starts.
    l4: usize,
    proto: u8,
    /// MACs, tags with their types, addresses (and IPv6 flow label).
    ident: Vec<u8>,
    /// TOS, TTL, DF (IPv6: class, hop limit).
    fields: (u8, u8, bool),
    id: u16,
    /// The IPv4 header checksum verifies.
    ok: bool,
    addrs: Vec<u8>,
}

fn ip_layer(f: &[u8]) -> Option<Ip> {
    let mut ident = f.get(..12)?.to_vec();
    let mut off = 12;
    let mut et = be16(f, off)?;
    let mut tags = 0;
    while et == 0x8100 || et == 0x88a8 {
        tags += 1;
        if tags > 2 {
            return None;
        }
        ident.extend_from_slice(f.get(off..off + 4)?);
        off += 4;
        et = be16(f, off)?;
    }
    let l3 = off + 2;
    match et {
        0x0800 => {
            let ip = f.get(l3..l3 + 20)?;
            if ip[0] != 0x45 || be16(ip, 6)? & 0xbfff != 0 || l3 + be16(ip, 2)? as usize != f.len()
            {
                return None;
            }
            ident.extend_from_slice(&ip[12..20]);
            Some(Ip {
                v6: false,
                l3,
                l4: l3 + 20,
                proto: ip[9],
                ident,
                fields: (ip[1], ip[8], ip[6] & 0x40 != 0),
                id: be16(ip, 4)?,
                ok: csum::sum(ip) == 0xffff,
                addrs: ip[12..20].to_vec(),
            })
        }
        0x86dd => {
            let ip = f.get(l3..l3 + 40)?;
            if ip[0] >> 4 != 6 || l3 + 40 + be16(ip, 4)? as usize != f.len() {
                return None;
            }
            ident.extend_from_slice(&ip[8..40]);
            ident.extend_from_slice(&[ip[1] & 0x0f, ip[2], ip[3]]);
            Some(Ip {
                v6: true,
                l3,
                l4: l3 + 40,
                proto: ip[6],
                ident,
                fields: ((ip[0] << 4) | (ip[1] >> 4), ip[7], false),
                id: 0,
                ok: true,
                addrs: ip[8..40].to_vec(),
            })
        }
        _ => None,
    }
}

/// A TCP segment (in a tunnel or not) as the oracle reads it.
struct Seg {
    /// The tunnel's identity (empty outside one) and the inner flow's.
    flow: Vec<u8>,
    tunnel: Option<Outer>,
    inner: (bool, (u8, u8, bool), u16, bool),
    seq: u32,
    ack: u32,
    flags: u8,
    /// Data offset and window.
    word: (u8, u16),
    opts: Vec<u8>,
    tcp_ok: bool,
    /// The checksum field, and the pseudo-header sum without the length.
    field: u16,
    pseudo0: u16,
    /// Bytes from the outer (or only) IP header to the TCP payload.
    ip_header: usize,
    payload: Vec<u8>,
}

/// What a tunnelled segment's outer headers say.
struct Outer {
    fields: (u8, u8, bool),
    v6: bool,
    id: u16,
    csum_set: bool,
    /// The IPv4 header checksum verifies (or the header is IPv6).
    ip_ok: bool,
    /// IPv4 header checksum, UDP length and UDP checksum (when set) verify.
    ok: bool,
}

fn parse(f: &[u8]) -> Option<Seg> {
    let ip = ip_layer(f)?;
    let (tunnel, tflow, inner_at, ip_start) = match ip.proto {
        6 => (None, Vec::new(), 0, ip.l3),
        17 => {
            let l4 = ip.l4;
            let dport = be16(f, l4 + 2)?;
            let th = l4 + 8;
            let inner = match dport {
                4789 if f.get(th)? & 0x08 != 0 => th + 8,
                6081 if f.get(th)? >> 6 == 0 && be16(f, th + 2)? == 0x6558 => {
                    th + 8 + (f[th] & 0x3f) as usize * 4
                }
                _ => return None,
            };
            if inner > f.len() {
                return None;
            }
            let ulen = be16(f, l4 + 4)? as usize;
            let field = be16(f, l4 + 6)?;
            let sum_ok = field == 0
                || csum::add(
                    csum::pseudo(&ip.addrs, 17, (f.len() - l4) as u32),
                    csum::sum(&f[l4..]),
                ) == 0xffff;
            let mut tflow = ip.ident.clone();
            tflow.extend_from_slice(&f[l4..l4 + 4]);
            tflow.extend_from_slice(&f[th..inner]);
            let o = Outer {
                fields: ip.fields,
                v6: ip.v6,
                id: ip.id,
                csum_set: field != 0,
                ip_ok: ip.ok,
                ok: ip.ok && ulen == f.len() - l4 && sum_ok,
            };
            (Some(o), tflow, inner, ip.l3)
        }
        _ => return None,
    };
    let g = &f[inner_at..];
    let iip = if tunnel.is_some() { ip_layer(g)? } else { ip };
    if iip.proto != 6 {
        return None;
    }
    let t = iip.l4;
    let doff = (*g.get(t + 12)? >> 4) as usize * 4;
    if doff < 20 || t + doff > g.len() {
        return None;
    }
    let tcp_len = (g.len() - t) as u32;
    let tcp_ok = csum::add(csum::pseudo(&iip.addrs, 6, tcp_len), csum::sum(&g[t..])) == 0xffff;
    let mut flow = tflow;
    flow.extend_from_slice(&iip.ident);
    flow.extend_from_slice(&g[t..t + 4]);
    Some(Seg {
        flow,
        inner: (iip.v6, iip.fields, iip.id, iip.ok),
        seq: be32(g, t + 4)?,
        ack: be32(g, t + 8)?,
        flags: g[t + 13],
        word: (g[t + 12], be16(g, t + 14)?),
        opts: g[t + 20..t + doff].to_vec(),
        tcp_ok,
        field: be16(g, t + 16)?,
        pseudo0: csum::pseudo(&iip.addrs, 6, 0),
        ip_header: inner_at + t + doff - ip_start,
        tunnel,
        payload: g[t + doff..].to_vec(),
    })
}

/// Runs the input through GRO and holds what came out to the oracle.
pub fn check(input: &Input) -> Result<Summary, String> {
    let cfg = input.cfg;
    let frames = frames(&input.ops);
    let steps = input.ops.iter().map(|op| (op.dt, op.after));
    let (g, outs) = frames::run(cfg, &frames, steps, cfg.flows)?;
    frames::check_outputs(
        &frames,
        &g,
        &outs,
        cfg.max_frags,
        parse,
        |x| &x.flow,
        |ins, bytes| check_merged(&cfg, ins, bytes),
        if cfg.reorder.segments > 0 {
            frames::Order::Sequence(&|x: &Seg| (x.seq, x.payload.len() as u32))
        } else {
            frames::Order::Arrival
        },
    )
}

/// The invariants of an output made of several segments.
fn check_merged(cfg: &GroConfig, ins: &[&Seg], bytes: &[u8]) -> Result<(), String> {
    let first = &ins[0];
    let verify = cfg.csum == CsumMode::Verify;
    let outer_of = |s: &Seg| s.tunnel.as_ref().map(|o| (o.fields, o.v6, o.csum_set));
    for (k, s) in ins.iter().enumerate() {
        let last = k + 1 == ins.len();
        if s.flow != first.flow || outer_of(s) != outer_of(first) {
            return Err(format!("segment {k}: another flow or other outer fields"));
        }
        if (s.inner.0, s.inner.1) != (first.inner.0, first.inner.1) {
            return Err(format!("segment {k}: other inner IP fields"));
        }
        if s.ack != first.ack || s.word != first.word || s.opts != first.opts {
            return Err(format!("segment {k}: ACK, data offset, window or options"));
        }
        let want_seq = first
            .seq
            .wrapping_add(ins[..k].iter().map(|x| x.payload.len() as u32).sum::<u32>());
        if s.seq != want_seq {
            return Err(format!("segment {k}: seq {} not {want_seq}", s.seq));
        }
        let bad_flags = 0x02 | 0x04 | 0x20 | if k > 0 { 0x80 } else { 0 };
        if s.flags & bad_flags != 0 || (!last && s.flags & 0x09 != 0) {
            return Err(format!("segment {k}: flags {:#x}", s.flags));
        }
        if k > 0 && (s.flags ^ first.flags) & !0x89 != 0 {
            return Err(format!("segment {k}: flags {:#x} differ", s.flags));
        }
        // An IPv4 header checksum, outer or inner, in either mode: trust
        // covers the L4 checksums only.
        if !(s.inner.3 && s.tunnel.as_ref().is_none_or(|o| o.ip_ok)) {
            return Err(format!("segment {k}: a bad IPv4 header checksum"));
        }
        if verify && !(s.tcp_ok && s.inner.3 && s.tunnel.as_ref().is_none_or(|o| o.ok)) {
            return Err(format!("segment {k}: a bad checksum, verifying"));
        }
        if s.payload.is_empty()
            || s.payload.len() > first.payload.len()
            || (!last && s.payload.len() != first.payload.len())
        {
            return Err(format!("segment {k}: size {}", s.payload.len()));
        }
    }
    let ids_follow = |get: &dyn Fn(&Seg) -> u16, fixed_ok: bool| {
        let fixed = fixed_ok && get(ins[1]) == get(first);
        ins.iter().enumerate().all(|(k, s)| {
            get(s)
                == if fixed {
                    get(first)
                } else {
                    get(first).wrapping_add(k as u16)
                }
        })
    };
    if !first.inner.0 && !ids_follow(&|s: &Seg| s.inner.2, true) {
        return Err("inner IPv4 IDs break the rule".into());
    }
    // The outer ID as the inner one, DF or not.
    if let Some(o) = &first.tunnel {
        if !o.v6 && !ids_follow(&|s: &Seg| s.tunnel.as_ref().unwrap().id, true) {
            return Err("outer IPv4 IDs break the rule".into());
        }
    }
    let Some(out) = parse(bytes) else {
        return Err("the merged packet is not a whole TCP segment".into());
    };
    let want: Vec<u8> = ins.iter().flat_map(|s| s.payload.iter().copied()).collect();
    if out.payload != want || out.flow != first.flow || out.seq != first.seq {
        return Err("flow, seq or payload not the segments'".into());
    }
    if out.ip_header + out.payload.len() > cfg.max_size.min(65535) as usize {
        return Err("IP packet over the size limit".into());
    }
    let good = ins
        .iter()
        .all(|s| s.tcp_ok && s.inner.3 && s.tunnel.as_ref().is_none_or(|o| o.ok));
    if out.tunnel.as_ref().is_some_and(|o| !o.ok && good) || !out.inner.3 {
        return Err("outer headers or inner IPv4 checksum wrong".into());
    }
    let pseudo = cfg.out_csum == OutCsum::Pseudo && out.tunnel.is_none();
    if pseudo && out.field != out.pseudo0 {
        return Err("TCP checksum field is not the pseudo-header sum".into());
    }
    if !pseudo && good && !out.tcp_ok {
        return Err("TCP checksum wrong".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(flow: u8) -> Op {
        Op {
            flow,
            size: Size::Full,
            seq: SeqStep::Next,
            flags: Flags::Ack,
            outer_id: OuterId::Next,
            edit: OuterEdit::None,
            damage: Damage::None,
            after: After::Nothing,
            dt: 1,
        }
    }

    fn input(ops: Vec<Op>) -> Input {
        Input {
            cfg: GroConfig::default(),
            ops,
        }
    }

    #[test]
    fn full_segments_merge_in_every_flow_and_the_oracle_agrees() {
        for flow in 0..FLOWS as u8 {
            let s = check(&input((0..5).map(|_| op(flow)).collect())).unwrap();
            assert_eq!((s.inputs, s.outputs, s.merged), (5, 1, 1), "flow {flow}");
        }
    }

    /// A segment that came late fills its flow's gap: with the reorder
    /// window the flow merges whole, in sequence order; without it, every
    /// segment leaves alone, in arrival order.
    #[test]
    fn a_late_segment_fills_the_gap_with_the_window() {
        for flow in 0..FLOWS as u8 {
            let mut ops = vec![op(flow), op(flow)];
            ops[1].seq = SeqStep::Ahead(MSS as u16 - 1);
            ops.push(Op {
                seq: SeqStep::Late,
                ..op(flow)
            });
            ops.push(op(flow));
            let mut i = input(ops.clone());
            i.cfg.reorder.segments = 4;
            let (g, outs) =
                frames::run(i.cfg, &frames(&ops), ops.iter().map(|o| (o.dt, o.after)), 8).unwrap();
            check(&i).unwrap();
            assert_eq!(g.stats().reorder_filled, 1, "flow {flow}");
            assert_eq!(outs.len(), 1, "flow {flow}: one packet of four");
            let s = check(&input(ops)).unwrap();
            assert_eq!((s.outputs, s.merged), (4, 0), "flow {flow}: each alone");
        }
    }

    #[test]
    fn the_same_inner_flow_in_two_tunnels_and_outside_stays_apart() {
        let ops: Vec<Op> = (0..4).flat_map(|_| [op(3), op(7)]).collect();
        let s = check(&input(ops)).unwrap();
        assert_eq!((s.outputs, s.merged), (2, 2));
    }

    #[test]
    fn the_oracle_reads_what_it_builds() {
        let ops: Vec<Op> = (0..FLOWS as u8).map(op).collect();
        for (i, f) in frames(&ops).iter().enumerate() {
            let s = parse(f).unwrap_or_else(|| panic!("flow {i}: not read back"));
            assert!(s.tcp_ok && s.inner.3, "flow {i}");
            assert!(s.tunnel.as_ref().is_none_or(|o| o.ok), "flow {i}");
            assert_eq!((s.payload.len(), s.tunnel.is_some()), (MSS, i < 7));
        }
    }

    /// A broken outer checksum or tunnel header keeps a segment out of
    /// merges, and the oracle sees that GRO honours it.
    #[test]
    fn damaged_tunnel_frames_stay_alone() {
        for damage in [
            Damage::OuterCsum,
            Damage::InnerCsum,
            Damage::TunnelHeader(63),
        ] {
            let mut ops: Vec<Op> = (0..3).map(|_| op(1)).collect();
            ops[1].damage = damage;
            let s = check(&input(ops)).unwrap_or_else(|e| panic!("{damage:?}: {e}"));
            assert_eq!(s.outputs, 3, "{damage:?}");
        }
    }
}
