//! Linux's GRO conformance cases (tools/testing/selftests/net/gro.c: data,
//! ack, flags, tcp, ip, large), for IPv4 and IPv6, written from their
//! description: each case is a few segments of one flow (no TCP options
//! unless the case is about them, 100-byte payloads, DF on IPv4), held in
//! one poll, then a FIN that ends the flow; what comes out before the FIN
//! must have the payload sizes Linux delivers, in that order.

use super::*;

/// A case: its name, the payload sizes Linux delivers, and its segments.
type Case = (
    &'static str,
    Vec<usize>,
    Box<dyn Fn(&mut Flow) -> Vec<VecBuf>>,
);

const P: usize = 100;
/// The selftest's segment size for the size limit: 4096 bytes less the
/// TCP and IPv6 headers, for both families.
const LARGE_MSS: usize = 4096 - 20 - 40;

/// One case's flow: no options, DF, TTL 8, as the selftest sends.
fn flow(ipv6: bool) -> Flow {
    let mut f = Flow::new(7, ipv6);
    f.spec.timestamps = false;
    f.spec.ttl = 8;
    f
}

/// Sets the IP lengths and both checksums from the frame's bytes (after a
/// case changed headers); IPv6 extension headers of 8 bytes are skipped.
fn fix_sums(f: &mut [u8]) {
    let ipv6 = f[12..14] == [0x86, 0xdd];
    let (l4, pseudo) = if ipv6 {
        let plen = (f.len() - 54) as u16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        let mut l4 = 54;
        let mut next = f[20];
        while next != 6 {
            next = f[l4];
            l4 += if f[20] == 44 {
                8
            } else {
                (f[l4 + 1] as usize + 1) * 8
            };
        }
        let src: [u8; 16] = f[22..38].try_into().unwrap();
        let dst: [u8; 16] = f[38..54].try_into().unwrap();
        (l4, csum::pseudo_v6(&src, &dst, 6, (f.len() - l4) as u32))
    } else {
        let ihl = (f[14] & 0x0f) as usize * 4;
        let tot = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&tot.to_be_bytes());
        f[24..26].copy_from_slice(&[0, 0]);
        let c = csum::ipv4_header(&f[14..14 + ihl]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let l4 = 14 + ihl;
        let src: [u8; 4] = f[26..30].try_into().unwrap();
        let dst: [u8; 4] = f[30..34].try_into().unwrap();
        (l4, csum::pseudo_v4(src, dst, 6, (f.len() - l4) as u16))
    };
    f[l4 + 16..l4 + 18].copy_from_slice(&[0, 0]);
    let c = csum::finish(csum::add(pseudo, csum::sum(&f[l4..])));
    f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
}

/// Where TCP starts in an untagged frame (past IPv4 options or IPv6
/// extension headers of 8 bytes).
fn l4_of(f: &[u8]) -> usize {
    if f[12..14] == [0x86, 0xdd] {
        if f[20] == 6 {
            54
        } else {
            54 + (f[55] as usize + 1) * 8
        }
    } else {
        14 + (f[14] & 0x0f) as usize * 4
    }
}

/// Replaces the TCP options with `opts` (a multiple of 4 bytes).
fn set_tcp_options(b: &mut VecBuf, opts: &[u8]) {
    let f = &mut b.segs[0];
    let l4 = l4_of(f);
    let doff = (f[l4 + 12] >> 4) as usize * 4;
    f.splice(l4 + 20..l4 + doff, opts.iter().copied());
    f[l4 + 12] = (((20 + opts.len()) / 4) as u8) << 4;
    fix_sums(f);
}

/// Inserts bytes after the fixed IP header: IPv4 options, or an IPv6
/// extension header (`next` its type) whose own next header is TCP.
fn insert_after_ip(b: &mut VecBuf, bytes: &[u8], next: u8) {
    let f = &mut b.segs[0];
    if f[12..14] == [0x86, 0xdd] {
        f.splice(54..54, bytes.iter().copied());
        f[20] = next;
    } else {
        f.splice(34..34, bytes.iter().copied());
        f[14] = 0x40 | (5 + bytes.len() / 4) as u8;
    }
    fix_sums(f);
}

/// Feeds one case's segments and the FIN that ends it; returns the payload
/// sizes of what came out before the FIN, in order.
fn run(ipv6: bool, f: &mut Flow, segs: Vec<VecBuf>) -> Vec<usize> {
    let mut g = gro(GroConfig::default());
    let payload_of: HashMap<u64, usize> = segs
        .iter()
        .map(|s| {
            (
                s.ids[0],
                s.len()
                    - l4_of(&s.segs[0])
                    - ((s.segs[0][l4_of(&s.segs[0]) + 12] >> 4) as usize * 4),
            )
        })
        .collect();
    let fin = f.next_with(0, |s| s.flags |= TCP_FIN);
    let fin_id = fin.ids[0];
    let mut out = feed(&mut g, segs);
    out.extend(feed(&mut g, vec![fin]));
    out.extend(flush(&mut g));
    let end = out.iter().position(|o| o.ids.contains(&fin_id));
    assert_eq!(end, Some(out.len() - 1), "ipv6 {ipv6}: the FIN comes last");
    out[..out.len() - 1]
        .iter()
        .map(|o| o.ids.iter().map(|i| payload_of[i]).sum())
        .collect()
}

use std::collections::HashMap;

/// Every case: its name, the segments, and the payload sizes expected.
fn cases(ipv6: bool) -> Vec<Case> {
    let mut v: Vec<Case> = vec![
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
                let mut dup = a.clone();
                dup.ids = vec![a.ids[0] + 100];
                vec![a, dup, f.next_with(0, |s| s.ack += 1)]
            }),
        ),
    ];
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
    v.push((
        "tcp: a changed checksum does not coalesce",
        vec![P, P],
        Box::new(|f| {
            let a = f.next(P);
            let mut b = f.next(P);
            let l4 = l4_of(&b.segs[0]);
            b.segs[0][l4 + 17] = b.segs[0][l4 + 17].wrapping_sub(1);
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
            let ts = |t: u32| t.to_be_bytes();
            let orders = |t: u32, o: usize| -> Vec<u8> {
                let mut opt = vec![8, 10];
                opt.extend(ts(t));
                opt.extend([0, 0, 0, 0]);
                match o {
                    0 => [vec![1, 1], opt].concat(),
                    1 => [vec![1], opt, vec![1]].concat(),
                    _ => [opt, vec![1, 1]].concat(),
                }
            };
            [(0, 0), (0, 0), (100, 0), (100, 1), (100, 2)]
                .iter()
                .map(|&(t, o)| {
                    let mut p = f.next(P);
                    set_tcp_options(&mut p, &orders(t, o));
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
    v.push((
        "ip: another ECN does not coalesce",
        vec![P, P],
        Box::new(move |f| {
            let a = f.next(P);
            let mut b = f.next(P);
            b.segs[0][15] ^= if ipv6 { 0x20 } else { 0x02 };
            fix_sums(&mut b.segs[0]);
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
                b.segs[0][14] |= 0x0f;
            } else {
                b.segs[0][15] = 1;
            }
            fix_sums(&mut b.segs[0]);
            vec![a, b]
        }),
    ));
    if !ipv6 {
        v.push((
            "ip: another TTL does not coalesce",
            vec![P, P],
            Box::new(|f| {
                vec![f.next(P), {
                    let mut b = f.next(P);
                    b.segs[0][22] = 7;
                    fix_sums(&mut b.segs[0]);
                    b
                }]
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
                b.segs[0][20] = 0x60;
                fix_sums(&mut b.segs[0]);
                vec![a, b]
            }),
        ));
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
    } else {
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
    }
    for extra in [0, 1] {
        // The largest packet: 16 segments and a remainder fill the IP
        // packet to 65535 bytes; one byte more does not fit.
        let max_payload = 65535 - 20 - if ipv6 { 40 } else { 20 };
        let rem = max_payload % LARGE_MSS + extra;
        let full = max_payload / LARGE_MSS * LARGE_MSS;
        let sizes = if extra == 0 {
            vec![full + rem, rem]
        } else {
            vec![full, rem, rem]
        };
        let name = if extra == 0 {
            "large: up to the IP maximum coalesces"
        } else {
            "large: past the IP maximum does not"
        };
        v.push((
            name,
            sizes,
            Box::new(move |f| {
                let mut s: Vec<VecBuf> = (0..max_payload / LARGE_MSS)
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

#[test]
fn linux_selftest_cases_give_linux_results() {
    let mut failed = Vec::new();
    let mut n = 0;
    for ipv6 in [false, true] {
        for (name, want, make) in cases(ipv6) {
            n += 1;
            let mut f = flow(ipv6);
            let segs = make(&mut f);
            let got = run(ipv6, &mut f, segs);
            if got != want {
                failed.push(format!(
                    "{} {name}: got {got:?}, Linux gives {want:?}",
                    if ipv6 { "IPv6" } else { "IPv4" }
                ));
            }
        }
    }
    assert_eq!(n, 25 + 19, "every case of both families");
    assert!(
        failed.is_empty(),
        "{} of {n} cases differ:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
