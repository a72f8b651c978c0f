//! Linux's GRO conformance cases (tools/testing/selftests/net/gro.c: data,
//! ack, flags, tcp, ip, large), for IPv4 and IPv6, written from their
//! description, as frames: each case is a few segments of one flow (no TCP
//! options unless the case is about them, 100-byte payloads, DF on IPv4),
//! then a FIN that ends the flow; what comes out before the FIN must have
//! the payload sizes Linux delivers, in that order.
//!
//! Every case has a flow of its own (its own addresses and ports), so all
//! of them can go through one GRO instance, or one capture replayed once,
//! and each case's output still be told apart ([`Case::delivered`]).

use crate::csum;
use crate::traffic::{
    pattern_byte, FlowSpec, Segment, ETH_P_IPV6, TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN,
    TCP_URG,
};
use crate::wire::field::{self, eth, ipv4, ipv6, ipv6_ext, tcp};
use crate::wire::IPPROTO_TCP;

/// One case of the selftest.
#[derive(Debug, Clone)]
pub struct Case {
    /// What the case checks ("data: same size coalesces").
    pub name: &'static str,
    /// IPv6 rather than IPv4.
    pub ipv6: bool,
    /// The frames in the order sent; the last is the FIN that ends the flow.
    pub frames: Vec<Vec<u8>>,
    /// TCP payload bytes of each packet Linux delivers before the FIN.
    pub expected: Vec<usize>,
}

impl Case {
    /// The payload sizes of this case's packets in `out` (a run's output,
    /// every case's packets mixed, in the order delivered), up to its FIN;
    /// an error unless the FIN comes last and alone.
    pub fn delivered<'a>(
        &self,
        out: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vec<usize>, String> {
        let mine = addrs(&self.frames[0]);
        let mut sizes = Vec::new();
        let mut fin_seen = false;
        for f in out.into_iter().filter(|f| addrs(f) == mine) {
            if fin_seen {
                return Err("a packet of the flow after its FIN".into());
            }
            let len = payload_len(f).ok_or("a packet of the flow that is not TCP")?;
            let (l4, _) = tcp_span(f).unwrap();
            fin_seen = f[l4 + tcp::FLAGS] & TCP_FIN != 0;
            sizes.push(len);
        }
        match sizes.pop() {
            Some(0) if fin_seen => Ok(sizes),
            _ => Err(format!(
                "the FIN does not come last and alone (payload sizes {sizes:?})"
            )),
        }
    }
}

/// Every case, IPv4 then IPv6 (25 and 19), each on a flow of its own.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for ipv6 in [false, true] {
        for (name, expected, make) in family(ipv6) {
            let mut f = Flow::new(v.len() as u32, ipv6);
            let mut frames = make(&mut f);
            frames.push(f.next_with(0, |s| s.flags |= TCP_FIN));
            v.push(Case {
                name,
                ipv6,
                frames,
                expected,
            });
        }
    }
    v
}

/// TCP payload bytes of an untagged frame, as its IP and TCP headers say
/// (past IPv4 options and IPv6 extension headers); None if not TCP.
pub fn payload_len(frame: &[u8]) -> Option<usize> {
    let (l4, end) = tcp_span(frame)?;
    end.checked_sub(l4 + (*frame.get(l4 + 12)? >> 4) as usize * 4)
}

/// Checks an untagged TCP frame: its IP length covers the frame to the
/// byte, and its IPv4 header and TCP checksums verify.
pub fn check_frame(f: &[u8]) -> Result<(), String> {
    let (l4, end) = tcp_span(f).ok_or("not a TCP frame")?;
    if end != f.len() || l4 + 20 > end {
        return Err(format!(
            "the IP length says {end} bytes, the frame has {}",
            f.len()
        ));
    }
    if !is_ipv6(f) && csum::sum(&f[L3..l4]) != 0xffff {
        return Err("bad IPv4 header checksum".into());
    }
    if csum::add(pseudo(f, l4), csum::sum(&f[l4..])) != 0xffff {
        return Err("bad TCP checksum".into());
    }
    Ok(())
}

/// Where the IP header of the selftest's frames starts: they are untagged.
const L3: usize = eth::HEADER_LEN;

/// Whether the frame carries IPv6 (else IPv4).
fn is_ipv6(f: &[u8]) -> bool {
    f.get(eth::ETHERTYPE) == Some(&ETH_P_IPV6.to_be_bytes()[..])
}

/// Where TCP starts in an untagged frame and where the IP packet ends.
fn tcp_span(f: &[u8]) -> Option<(usize, usize)> {
    let be16 = |o: usize| Some(u16::from_be_bytes([*f.get(o)?, *f.get(o + 1)?]) as usize);
    if is_ipv6(f) {
        let ext = L3 + ipv6::HEADER_LEN;
        let (mut next, mut l4) = (*f.get(L3 + ipv6::NEXT_HEADER)?, ext);
        while next != IPPROTO_TCP {
            let len = match next {
                44 => 8,
                0 | 43 | 60 => (*f.get(l4 + ipv6_ext::LEN)? as usize + 1) * 8,
                _ => return None,
            };
            next = *f.get(l4 + ipv6_ext::NEXT_HEADER)?;
            l4 += len;
        }
        Some((l4, ext + be16(L3 + ipv6::PAYLOAD_LEN.start)?))
    } else {
        if *f.get(L3 + ipv4::PROTOCOL)? != IPPROTO_TCP {
            return None;
        }
        let ihl = (f[L3 + ipv4::VER_IHL] & 0x0f) as usize * 4;
        Some((L3 + ihl, L3 + be16(L3 + ipv4::TOTAL_LEN.start)?))
    }
}

/// The TCP pseudo-header sum of a frame whose TCP header is at `l4`.
fn pseudo(f: &[u8], l4: usize) -> u16 {
    csum::pseudo(addrs(f), IPPROTO_TCP, (f.len() - l4) as u32)
}

/// The frame's IP source and destination addresses.
fn addrs(f: &[u8]) -> &[u8] {
    let r = if is_ipv6(f) {
        field::at(L3, ipv6::ADDRS)
    } else {
        field::at(L3, ipv4::ADDRS)
    };
    f.get(r).unwrap_or(&[])
}

/// Builds one flow's frames with full control of each field, as the
/// selftest sends them: no options, DF, TTL 8.
struct Flow {
    spec: FlowSpec,
    id: u32,
    seq: u32,
    ip_id: u16,
}

impl Flow {
    fn new(id: u32, ipv6: bool) -> Flow {
        let mut spec = FlowSpec::numbered(id, ipv6);
        spec.timestamps = false;
        spec.ttl = 8;
        Flow {
            spec,
            id,
            seq: 1000 * (id + 1),
            ip_id: 100,
        }
    }

    /// The next in-order segment, `len` bytes, with `edit` applied to the fields.
    fn next_with(&mut self, len: usize, edit: impl FnOnce(&mut Segment)) -> Vec<u8> {
        let mut s = Segment {
            seq: self.seq,
            ack: 77,
            flags: TCP_ACK,
            ip_id: self.ip_id,
            tsval: 5000,
            tsecr: 4000,
            payload_len: len as u16,
        };
        edit(&mut s);
        let payload: Vec<u8> = (0..len as u32)
            .map(|k| pattern_byte(self.id, s.seq.wrapping_add(k) as u64))
            .collect();
        self.seq = s.seq.wrapping_add(len as u32);
        self.ip_id = s.ip_id.wrapping_add(1);
        self.spec.frame(&s, &payload)
    }

    fn next(&mut self, len: usize) -> Vec<u8> {
        self.next_with(len, |_| {})
    }
}

/// Sets the IP lengths and both checksums from the frame's bytes, after a
/// case changed its headers.
fn fix_sums(f: &mut [u8]) {
    let ipv6 = is_ipv6(f);
    if ipv6 {
        let plen = (f.len() - L3 - ipv6::HEADER_LEN) as u16;
        field::write16(f, L3, ipv6::PAYLOAD_LEN, plen);
    } else {
        field::write16(f, L3, ipv4::TOTAL_LEN, (f.len() - L3) as u16);
    }
    let (l4, _) = tcp_span(f).expect("a TCP frame");
    if !ipv6 {
        field::write16(f, L3, ipv4::CHECKSUM, 0);
        let c = csum::ipv4_header(&f[L3..l4]);
        field::write16(f, L3, ipv4::CHECKSUM, c);
    }
    field::write16(f, l4, tcp::CHECKSUM, 0);
    let c = csum::finish(csum::add(pseudo(f, l4), csum::sum(&f[l4..])));
    field::write16(f, l4, tcp::CHECKSUM, c);
}

/// Replaces the TCP options with `opts` (a multiple of 4 bytes).
fn set_tcp_options(f: &mut Vec<u8>, opts: &[u8]) {
    let (l4, _) = tcp_span(f).expect("a TCP frame");
    let doff = (f[l4 + tcp::DATA_OFF] >> 4) as usize * 4;
    f.splice(l4 + tcp::MIN_LEN..l4 + doff, opts.iter().copied());
    f[l4 + tcp::DATA_OFF] = (((tcp::MIN_LEN + opts.len()) / 4) as u8) << 4;
    fix_sums(f);
}

/// Inserts bytes after the fixed IP header: IPv4 options, or an IPv6
/// extension header (`next` its type) whose own next header is TCP.
fn insert_after_ip(f: &mut Vec<u8>, bytes: &[u8], next: u8) {
    if is_ipv6(f) {
        let at = L3 + ipv6::HEADER_LEN;
        f.splice(at..at, bytes.iter().copied());
        f[L3 + ipv6::NEXT_HEADER] = next;
    } else {
        let at = L3 + ipv4::MIN_LEN;
        f.splice(at..at, bytes.iter().copied());
        f[L3 + ipv4::VER_IHL] = 0x40 | ((ipv4::MIN_LEN + bytes.len()) / 4) as u8;
    }
    fix_sums(f);
}

/// Payload bytes of the selftest's segments.
const P: usize = 100;
/// The selftest's segment size for the size limit: 4096 bytes less the
/// TCP and IPv6 headers, for both families.
const LARGE_MSS: usize = 4096 - 20 - 40;

/// A case before it has a flow: its name, the payload sizes expected, and
/// what it sends on the flow it is given.
type Make = Box<dyn Fn(&mut Flow) -> Vec<Vec<u8>>>;

/// A case before it has a flow: its name, the payload sizes expected, and
/// what it sends (`Make`).
type Unmade = (&'static str, Vec<usize>, Make);

/// One family's cases, in the selftest's order.
fn family(ipv6: bool) -> Vec<Unmade> {
    let mut v = data_cases();
    v.extend(flag_cases());
    v.extend(tcp_cases());
    v.extend(ip_cases(ipv6));
    v.extend(if ipv6 { ipv6_cases() } else { ipv4_cases() });
    v.extend(large_cases(ipv6));
    v
}

/// The data and ACK cases.
fn data_cases() -> Vec<Unmade> {
    vec![
        (
            "data: same size coalesces",
            vec![2 * P],
            Box::new(|f| vec![f.next(P), f.next(P)]),
        ),
        (
            "data: a smaller last one coalesces",
            vec![P + P / 2],
            Box::new(|f| vec![f.next(P), f.next(P / 2)]),
        ),
        (
            "data: a larger one after a small one does not",
            vec![P / 2, P],
            Box::new(|f| vec![f.next(P / 2), f.next(P)]),
        ),
        (
            "ack: pure and duplicate ACKs do not coalesce",
            vec![0, 0, 0],
            Box::new(|f| {
                let a = f.next(0);
                vec![a.clone(), a, f.next_with(0, |s| s.ack += 1)]
            }),
        ),
    ]
}

/// PSH, SYN, RST and URG.
fn flag_cases() -> Vec<Unmade> {
    let mut v: Vec<Unmade> = Vec::new();
    for (name, flag, sizes) in [
        ("flags: PSH ends coalescing", TCP_PSH, vec![3 * P, 2 * P]),
        ("flags: SYN ends coalescing", TCP_SYN, vec![2 * P, 0, 2 * P]),
        ("flags: RST ends coalescing", TCP_RST, vec![2 * P, 0, 2 * P]),
        ("flags: URG ends coalescing", TCP_URG, vec![2 * P, 0, 2 * P]),
    ] {
        v.push((
            name,
            sizes,
            Box::new(move |f| {
                (0..5)
                    .map(|i| match i {
                        2 if flag == TCP_PSH => f.next_with(P, |s| s.flags |= TCP_PSH),
                        2 => f.next_with(0, |s| s.flags |= flag),
                        _ => f.next(P),
                    })
                    .collect()
            }),
        ));
    }
    v
}

/// The TCP header's cases: checksum, sequence, options.
fn tcp_cases() -> Vec<Unmade> {
    let mut v: Vec<Unmade> = Vec::new();
    v.push((
        "tcp: a changed checksum does not coalesce",
        vec![P, P],
        Box::new(|f| {
            let a = f.next(P);
            let mut b = f.next(P);
            let (l4, _) = tcp_span(&b).unwrap();
            let c = field::read16(&b, l4, tcp::CHECKSUM);
            field::write16(&mut b, l4, tcp::CHECKSUM, c.wrapping_sub(1));
            vec![a, b]
        }),
    ));
    v.push((
        "tcp: a wrong sequence number does not coalesce",
        vec![P, P],
        Box::new(|f| vec![f.next(P), f.next_with(P, |s| s.seq += 1)]),
    ));
    v.push((
        "tcp: other timestamps, or options in another order, do not coalesce",
        vec![2 * P, P, P, P],
        Box::new(|f| {
            // NOP, NOP and the timestamps option (TSval `t`), in order `o`.
            let options = |t: u32, o: usize| -> Vec<u8> {
                let mut ts = vec![8, 10];
                ts.extend(t.to_be_bytes());
                ts.extend([0, 0, 0, 0]);
                match o {
                    0 => [vec![1, 1], ts].concat(),
                    1 => [vec![1], ts, vec![1]].concat(),
                    _ => [ts, vec![1, 1]].concat(),
                }
            };
            [(0, 0), (0, 0), (100, 0), (100, 1), (100, 2)]
                .iter()
                .map(|&(t, o)| {
                    let mut p = f.next(P);
                    set_tcp_options(&mut p, &options(t, o));
                    p
                })
                .collect()
        }),
    ));
    v.push((
        "tcp: other options do not coalesce",
        vec![2 * P, P],
        Box::new(|f| {
            let ts = [1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0];
            let mut a = f.next(P);
            set_tcp_options(&mut a, &ts);
            let mut b = f.next(P);
            set_tcp_options(&mut b, &ts);
            let mut c = f.next(P);
            set_tcp_options(&mut c, &[1, 3, 3, 0]);
            vec![a, b, c]
        }),
    ));
    v
}

/// The IP cases both families share (ECN, TOS).
fn ip_cases(ipv6: bool) -> Vec<Unmade> {
    let mut v: Vec<Unmade> = Vec::new();
    v.push((
        "ip: another ECN does not coalesce",
        vec![P, P],
        Box::new(move |f| {
            let a = f.next(P);
            let mut b = f.next(P);
            // IPv6's traffic class spans its first two bytes (ECN in 0x30
            // of the second); IPv4's TOS byte has ECN in 0x03.
            let (at, ecn) = if ipv6 {
                (ipv6::VER_TC_FLOW.start + 1, 0x20)
            } else {
                (ipv4::TOS, 0x02)
            };
            b[L3 + at] ^= ecn;
            fix_sums(&mut b);
            vec![a, b]
        }),
    ));
    v.push((
        "ip: another TOS does not coalesce",
        vec![P, P],
        Box::new(move |f| {
            let a = f.next(P);
            let mut b = f.next(P);
            if ipv6 {
                // The traffic class's DSCP bits, in the first byte.
                b[L3 + ipv6::VER_TC_FLOW.start] |= 0x0f;
            } else {
                b[L3 + ipv4::TOS] = 1;
            }
            fix_sums(&mut b);
            vec![a, b]
        }),
    ));
    v
}

/// IPv4's own: TTL, options, fragments, then DF and IDs.
fn ipv4_cases() -> Vec<Unmade> {
    let mut v: Vec<Unmade> = Vec::new();
    v.push((
        "ip: another TTL does not coalesce",
        vec![P, P],
        Box::new(|f| {
            let a = f.next(P);
            let mut b = f.next(P);
            b[L3 + ipv4::TTL] = 7;
            fix_sums(&mut b);
            vec![a, b]
        }),
    ));
    v.push((
        "ip: IP options do not coalesce",
        vec![P, P, P],
        Box::new(|f| {
            let a = f.next(P);
            let mut b = f.next(P);
            insert_after_ip(&mut b, &[0x44, 8, 5, 0, 0, 0, 0, 0], 0);
            vec![a, b, f.next(P)]
        }),
    ));
    v.push((
        "ip: a fragment does not coalesce",
        vec![P, P],
        Box::new(|f| {
            let a = f.next(P);
            let mut b = f.next(P);
            // DF and MF: the first fragment of several.
            b[L3 + ipv4::FLAGS_FRAG.start] = 0x60;
            fix_sums(&mut b);
            vec![a, b]
        }),
    ));
    v.extend(ipv4_id_cases());
    v
}

/// DF and IPv4 IDs: incrementing or fixed, with or without DF.
fn ipv4_id_cases() -> Vec<Unmade> {
    let mut v: Vec<Unmade> = Vec::new();
    for (name, df, ids, sizes) in [
        (
            "ip: DF, incrementing IDs coalesce",
            true,
            vec![8u16, 9],
            vec![2 * P],
        ),
        ("ip: DF, fixed IDs coalesce", true, vec![8, 8], vec![2 * P]),
        (
            "ip: no DF, incrementing IDs coalesce",
            false,
            vec![8, 9],
            vec![2 * P],
        ),
        (
            "ip: no DF, fixed IDs coalesce",
            false,
            vec![8, 8],
            vec![2 * P],
        ),
        (
            "ip: DF, two incrementing then fixed: the first two",
            true,
            vec![8, 9, 9],
            vec![2 * P, P],
        ),
        (
            "ip: DF, two fixed then incrementing: the first two",
            true,
            vec![8, 8, 9],
            vec![2 * P, P],
        ),
    ] {
        v.push((
            name,
            sizes,
            Box::new(move |f| {
                f.spec.df = df;
                ids.iter()
                    .map(|&id| f.next_with(P, |s| s.ip_id = id))
                    .collect()
            }),
        ));
    }
    v
}

/// IPv6's own: extension headers.
fn ipv6_cases() -> Vec<Unmade> {
    let mut v: Vec<Unmade> = Vec::new();
    v.push((
        "ip: a fragment header does not coalesce and keeps its place",
        vec![2 * P, P, P],
        Box::new(|f| {
            let (a, b) = (f.next(P), f.next(P));
            let mut c = f.next(P);
            insert_after_ip(&mut c, &[6, 0, 0, 0, 0, 0, 0, 0], 44);
            vec![a, b, c, f.next(P)]
        }),
    ));
    v.push((
        "ip: the same extension headers coalesce",
        vec![2 * P],
        Box::new(|f| {
            let mut a = f.next(P);
            insert_after_ip(&mut a, &[6, 0, 0, 0, 0, 0, 0, 0], 0);
            let mut b = f.next(P);
            insert_after_ip(&mut b, &[6, 0, 0, 0, 0, 0, 0, 0], 0);
            vec![a, b]
        }),
    ));
    v.push((
        "ip: extension headers that differ do not coalesce",
        vec![P, P],
        Box::new(|f| {
            let mut a = f.next(P);
            insert_after_ip(&mut a, &[6, 0, 0, 0, 0, 0, 0, 0], 0);
            let mut b = f.next(P);
            insert_after_ip(&mut b, &[6, 0, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11], 0);
            vec![a, b]
        }),
    ));
    v
}

/// The size limit: up to the IP maximum, and one byte past it.
fn large_cases(ipv6: bool) -> Vec<Unmade> {
    let mut v: Vec<Unmade> = Vec::new();
    for extra in [0, 1] {
        // The largest packet: 16 segments and a remainder fill the IP
        // packet to 65535 bytes; one byte more does not fit.
        let max_payload = 65535 - 20 - if ipv6 { 40 } else { 20 };
        let rem = max_payload % LARGE_MSS + extra;
        let full = max_payload / LARGE_MSS * LARGE_MSS;
        let (name, sizes) = if extra == 0 {
            (
                "large: up to the IP maximum coalesces",
                vec![full + rem, rem],
            )
        } else {
            ("large: past the IP maximum does not", vec![full, rem, rem])
        };
        v.push((
            name,
            sizes,
            Box::new(move |f| {
                let mut s: Vec<Vec<u8>> = (0..max_payload / LARGE_MSS)
                    .map(|_| f.next(LARGE_MSS))
                    .collect();
                s.push(f.next(rem));
                // The selftest's next segment leaves a gap after the last.
                f.seq = f.seq.wrapping_add((LARGE_MSS - rem) as u32);
                s.push(f.next(rem));
                s
            }),
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_checks_but_the_one_sent_with_a_changed_checksum() {
        let bad: Vec<(bool, &str)> = cases()
            .iter()
            .flat_map(|c| {
                let bad = c.frames.iter().filter(|f| check_frame(f).is_err());
                bad.map(|_| (c.ipv6, c.name))
            })
            .collect();
        let name = "tcp: a changed checksum does not coalesce";
        assert_eq!(bad, [(false, name), (true, name)]);
    }

    #[test]
    fn a_case_finds_its_own_packets_among_all_and_wants_its_fin_last() {
        let cases = cases();
        let all = cases
            .iter()
            .flat_map(|c| c.frames.iter().map(Vec::as_slice));
        assert_eq!(cases[0].delivered(all.clone()), Ok(vec![P, P]));
        let large = cases.iter().find(|c| c.name.starts_with("large")).unwrap();
        assert_eq!(large.delivered(all).unwrap().len(), large.frames.len() - 1);
        let fin_first = cases[0].frames.iter().rev().map(Vec::as_slice);
        assert!(cases[0].delivered(fin_first).is_err());
    }
}
