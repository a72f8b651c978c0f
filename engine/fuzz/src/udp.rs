//! The `udp` target: UDP GRO (`GroConfig::udp`) on datagrams of a few flows
//! (IPv4 and IPv6, untagged and tagged), sizes, IP IDs and checksums chosen
//! by the input, some of them damaged (cut short, a byte overwritten), under
//! random bursts and flushes. The oracle reads the frames with a parser of
//! its own (not GRO's): every frame out once; one that left alone is
//! untouched; a merged packet is consecutive datagrams of one flow that
//! Linux's rules merge (sizes, IDs, checksums present, IPv4 header
//! checksums valid, UDP ones too verifying; at most `max_frags`), its
//! payload theirs, its lengths and checksums right; each flow's datagrams
//! leave in arrival order.

use crate::frames::{self, After, Summary};
use arbitrary::{Arbitrary, Unstructured};
use grorx_gro::traffic::{pattern_byte, FlowSpec};
use grorx_gro::{csum, CsumMode, GroConfig, OutCsum};

/// Operations per execution at most.
const MAX_OPS: usize = 400;
/// Flows an input may use.
const FLOWS: usize = 8;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    /// The flow's own size.
    Same,
    /// Shorter: 1 + n % the flow's size.
    Short(u16),
    /// Any: 1 + n % 1400.
    Other(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum IdStep {
    Next,
    Same,
    Jump(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Check {
    Good,
    /// 0: no checksum.
    Zero,
    /// Off by one.
    Bad,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Damage {
    None,
    /// Cut to this many bytes (modulo the length).
    Cut(u16),
    /// Byte `at` (modulo the length) overwritten.
    Byte(u16, u8),
}

/// One datagram and what follows it.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Op {
    flow: u8,
    size: Size,
    id: IdStep,
    check: Check,
    damage: Damage,
    after: After,
    dt: u8,
}

/// A decoded input: the settings and the datagrams.
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

fn spec(i: usize) -> FlowSpec {
    let mut s = FlowSpec::numbered(i as u32, i % 2 == 1);
    s.vlans = match i {
        4 | 5 => vec![100 + i as u16],
        6 | 7 => vec![200, 7 + i as u16],
        _ => vec![],
    };
    s
}

/// The flow's own datagram size.
fn base_size(i: usize) -> usize {
    [1200, 1400, 512, 64, 1000, 1, 333, 1472][i]
}

/// The frames the operations describe.
fn frames(ops: &[Op]) -> Vec<Vec<u8>> {
    let mut ids = [7u16; FLOWS];
    let mut off = [0u64; FLOWS];
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let f = op.flow as usize % FLOWS;
        let base = base_size(f);
        let len = match op.size {
            Size::Same => base,
            Size::Short(n) => 1 + n as usize % base,
            Size::Other(n) => 1 + n as usize % 1400,
        };
        ids[f] = match op.id {
            IdStep::Next => ids[f].wrapping_add(1),
            IdStep::Same => ids[f],
            IdStep::Jump(j) => ids[f].wrapping_add(2 + j as u16),
        };
        let payload: Vec<u8> = (0..len as u64)
            .map(|k| pattern_byte(f as u32, off[f] + k))
            .collect();
        off[f] += len as u64;
        let s = spec(f);
        let mut fr = s.udp_frame(ids[f], &payload, !matches!(op.check, Check::Zero));
        if matches!(op.check, Check::Bad) {
            let at = s.udp_header_len() - 1;
            fr[at] = fr[at].wrapping_add(1);
        }
        match op.damage {
            Damage::None => {}
            Damage::Cut(n) => fr.truncate(n as usize % (fr.len() + 1)),
            Damage::Byte(at, v) => {
                let i = at as usize % fr.len();
                fr[i] = v;
            }
        }
        out.push(fr);
    }
    out
}

/// A UDP datagram as the oracle reads it.
struct Dg {
    /// Tags (with their types), addresses and ports, MACs.
    flow: Vec<u8>,
    v6: bool,
    ip_fields: (u8, u8, bool),
    ip_id: u16,
    ip_ok: bool,
    /// The checksum field is 0.
    zero: bool,
    /// The UDP checksum verifies (or is 0).
    csum_ok: bool,
    /// The field, and the pseudo-header sum without the length.
    field: u16,
    pseudo0: u16,
    payload: Vec<u8>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Reads a frame as a whole, unfragmented UDP datagram without IP options
/// or IPv6 extension headers, its lengths consistent, or None.
fn parse(f: &[u8]) -> Option<Dg> {
    let mut flow = f.get(..12)?.to_vec();
    let mut off = 12;
    let mut et = be16(f, off)?;
    let mut tags = 0;
    while et == 0x8100 || et == 0x88a8 {
        tags += 1;
        if tags > 2 {
            return None;
        }
        flow.extend_from_slice(f.get(off..off + 4)?);
        off += 4;
        et = be16(f, off)?;
    }
    let l3 = off + 2;
    let (v6, l4, end, ip_fields, ip_id, ip_ok, addrs) = match et {
        0x0800 => {
            let ip = f.get(l3..l3 + 20)?;
            if ip[0] != 0x45 || ip[9] != 17 || be16(ip, 6)? & 0xbfff != 0 {
                return None;
            }
            let end = l3 + be16(ip, 2)? as usize;
            let ok = csum::sum(ip) == 0xffff;
            (
                false,
                l3 + 20,
                end,
                (ip[1], ip[8], ip[6] & 0x40 != 0),
                be16(ip, 4)?,
                ok,
                ip[12..20].to_vec(),
            )
        }
        0x86dd => {
            let ip = f.get(l3..l3 + 40)?;
            if ip[0] >> 4 != 6 || ip[6] != 17 {
                return None;
            }
            let end = l3 + 40 + be16(ip, 4)? as usize;
            let tc = (ip[0] << 4) | (ip[1] >> 4);
            (
                true,
                l3 + 40,
                end,
                (tc, ip[7], false),
                0,
                true,
                ip[8..40].to_vec(),
            )
        }
        _ => return None,
    };
    if end != f.len() || end < l4 + 8 || be16(f, l4 + 4)? as usize != end - l4 {
        return None;
    }
    flow.extend_from_slice(&addrs);
    flow.extend_from_slice(&f[l4..l4 + 4]);
    if v6 {
        // The flow label is part of an IPv6 flow.
        flow.extend_from_slice(&[f[l3 + 1] & 0x0f, f[l3 + 2], f[l3 + 3]]);
    }
    let field = be16(f, l4 + 6)?;
    let zero = field == 0;
    let whole = csum::pseudo(&addrs, 17, (end - l4) as u32);
    let csum_ok = (zero && !v6) || csum::add(whole, csum::sum(&f[l4..end])) == 0xffff;
    Some(Dg {
        flow,
        v6,
        ip_fields,
        ip_id,
        ip_ok,
        zero,
        csum_ok,
        field,
        pseudo0: csum::pseudo(&addrs, 17, 0),
        payload: f[l4 + 8..end].to_vec(),
    })
}

/// Runs the input through GRO and holds what came out to the oracle.
pub fn check(input: &Input) -> Result<Summary, String> {
    let cfg = input.cfg;
    let frames = frames(&input.ops);
    // Each table is bounded by `flows`: a frame damaged into a TCP
    // segment (trusting checksums) may be held in TCP's.
    let steps = input.ops.iter().map(|op| (op.dt, op.after));
    let (g, outs) = frames::run(cfg, &frames, steps, 2 * cfg.flows)?;
    frames::check_outputs(
        &frames,
        &g,
        &outs,
        cfg.max_frags,
        parse,
        |x| &x.flow,
        |ins, bytes| check_merged(&cfg, ins, bytes),
        frames::Order::Arrival,
    )
}

/// The invariants of an output made of several datagrams.
fn check_merged(cfg: &GroConfig, ins: &[&Dg], bytes: &[u8]) -> Result<(), String> {
    let first = &ins[0];
    let verify = cfg.csum == CsumMode::Verify;
    for (k, d) in ins.iter().enumerate() {
        if d.flow != first.flow || d.v6 != first.v6 || d.ip_fields != first.ip_fields {
            return Err(format!("datagram {k}: another flow or other IP fields"));
        }
        if d.zero {
            return Err(format!("datagram {k} has no checksum"));
        }
        if !d.ip_ok {
            return Err(format!("datagram {k}: a bad IPv4 header checksum"));
        }
        if verify && !d.csum_ok {
            return Err(format!("datagram {k}: a bad checksum, verifying"));
        }
        if d.payload.is_empty() || d.payload.len() > first.payload.len() {
            return Err(format!("datagram {k}: size {}", d.payload.len()));
        }
        if k + 1 < ins.len() && d.payload.len() != first.payload.len() {
            return Err(format!("datagram {k} shorter than the first, not the last"));
        }
    }
    if !first.v6 && ins.len() > 1 {
        let fixed = ins[1].ip_id == first.ip_id;
        for (k, d) in ins.iter().enumerate() {
            let want = if fixed {
                first.ip_id
            } else {
                first.ip_id.wrapping_add(k as u16)
            };
            if d.ip_id != want {
                return Err(format!("datagram {k}: IP ID {} breaks the rule", d.ip_id));
            }
        }
    }
    let Some(o) = parse(bytes) else {
        return Err("the merged packet is not a whole UDP datagram".into());
    };
    let want: Vec<u8> = ins.iter().flat_map(|d| d.payload.iter().copied()).collect();
    if o.payload != want {
        return Err("payload is not the datagrams' in order".into());
    }
    if o.flow != first.flow || o.ip_id != first.ip_id || !o.ip_ok {
        return Err("header: flow, IP ID or IPv4 checksum".into());
    }
    let ip_len = o.payload.len() + 8 + if o.v6 { 40 } else { 20 };
    if ip_len > cfg.max_size.min(65535) as usize {
        return Err(format!("IP packet {ip_len} B over the limit"));
    }
    let inputs_good = ins.iter().all(|d| d.csum_ok && d.ip_ok);
    match cfg.out_csum {
        OutCsum::Full if inputs_good && !o.csum_ok => Err("UDP checksum wrong".into()),
        OutCsum::Pseudo if o.field != o.pseudo0 => {
            Err("UDP checksum field is not the pseudo-header sum".into())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(flow: u8, size: Size, id: IdStep, check: Check) -> Op {
        Op {
            flow,
            size,
            id,
            check,
            damage: Damage::None,
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
    fn full_size_datagrams_merge_and_the_oracle_agrees() {
        for flow in 0..FLOWS as u8 {
            let ops = (0..5)
                .map(|_| op(flow, Size::Same, IdStep::Next, Check::Good))
                .collect();
            let s = check(&input(ops)).unwrap();
            assert_eq!((s.inputs, s.outputs, s.merged), (5, 1, 1), "flow {flow}");
        }
    }

    /// What the fast path must refuse though its compare does not see it
    /// (the checksum field): the oracle holds GRO to it.
    #[test]
    fn a_datagram_without_checksum_after_full_ones_stays_alone() {
        for csum in [CsumMode::Verify, CsumMode::Trust] {
            let mut ops: Vec<Op> = (0..3)
                .map(|_| op(0, Size::Same, IdStep::Next, Check::Good))
                .collect();
            ops.push(op(0, Size::Same, IdStep::Next, Check::Zero));
            let mut i = input(ops);
            i.cfg.csum = csum;
            let s = check(&i).unwrap_or_else(|e| panic!("{csum:?}: {e}"));
            assert_eq!((s.outputs, s.merged), (2, 1), "{csum:?}");
        }
    }

    #[test]
    fn the_oracle_reads_what_it_builds() {
        let ops: Vec<Op> = (0..FLOWS as u8)
            .map(|f| op(f, Size::Same, IdStep::Same, Check::Good))
            .collect();
        for (i, f) in frames(&ops).iter().enumerate() {
            let d = parse(f).unwrap_or_else(|| panic!("flow {i}: not read back"));
            assert!(d.csum_ok && d.ip_ok && !d.zero, "flow {i}");
            assert_eq!(d.payload.len(), base_size(i));
        }
    }
}
