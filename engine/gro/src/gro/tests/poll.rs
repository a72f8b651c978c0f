//! Polls taken whole (`receive_poll`): a segment no later packet of its
//! poll can join leaves at once; everything else is as segment by segment.

use super::*;

/// What leaves while the poll is taken.
fn poll(g: &mut Gro<VecBuf>, pkts: Vec<VecBuf>) -> Vec<VecBuf> {
    let mut burst = pkts;
    let mut out = Vec::new();
    g.receive_poll(&mut burst, 0, &mut |b| out.push(b));
    assert!(burst.is_empty());
    out
}

/// What leaves at the poll's end.
fn end(g: &mut Gro<VecBuf>) -> Vec<VecBuf> {
    let mut out = Vec::new();
    g.end_of_poll(&mut |b| out.push(b));
    out
}

fn alone(g: &Gro<VecBuf>) -> u64 {
    g.stats().pass[Pass::Alone.index()]
}

#[test]
fn a_segment_nothing_later_in_its_poll_can_join_leaves_at_once() {
    for ipv6 in [false, true] {
        let mut g = gro(GroConfig::default());
        // A poll whose one packet leaves as one segment: the next polls
        // look ahead.
        let mut x = Flow::new(9, ipv6);
        assert!(poll(&mut g, vec![x.next(MSS)]).is_empty(), "held");
        assert_eq!(end(&mut g).len(), 1);
        let (mut a, mut b) = (Flow::new(1, ipv6), Flow::new(2, ipv6));
        let a0 = a.next(MSS);
        let a0_bytes = a0.bytes();
        let mut burst = vec![b.next(MSS), a0];
        burst.extend((0..2).map(|_| b.next(MSS)));
        let out = poll(&mut g, burst);
        assert_eq!(out.len(), 1, "a's segment, at once");
        assert_eq!(out[0].bytes(), a0_bytes, "unchanged");
        assert_eq!(alone(&g), 1);
        let held = end(&mut g);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].ids.len(), 3, "b's three segments merged");
        verify(&held[0].bytes()).unwrap();
        assert_eq!(g.stats().packets_out, 3);
    }
}

#[test]
fn a_known_flow_whose_options_moved_on_leaves_at_once_as_on_the_full_path() {
    // A remembered flow's next head, its timestamps moved on, that no
    // later packet of its poll can join: it leaves at once, as a flow new
    // to the table would.
    let run = |full: bool| {
        let mut g = gro(GroConfig {
            csum: CsumMode::Trust,
            ..Default::default()
        });
        g.full_path_only = full;
        let mut out = Vec::new();
        let (mut a, mut b, mut x) = (
            Flow::new(1, false),
            Flow::new(2, false),
            Flow::new(9, false),
        );
        out.extend(poll(&mut g, (0..2).map(|_| a.next(MSS)).collect()));
        out.extend(end(&mut g));
        // One segment left alone: the next poll looks ahead.
        out.extend(poll(&mut g, vec![x.next(MSS)]));
        out.extend(end(&mut g));
        let mut burst = vec![b.next(MSS), a.next_with(MSS, |s| s.tsval += 1)];
        burst.extend((0..2).map(|_| b.next(MSS)));
        out.extend(poll(&mut g, burst));
        out.extend(end(&mut g));
        (out, alone(&g), g.stats().heads_cached)
    };
    let fast = run(false);
    assert_eq!((fast.1, fast.2), (1, 0), "a's segment left alone");
    assert_eq!(fast, run(true));
}

#[test]
fn after_a_poll_whose_packets_all_merged_new_flows_are_held_as_before() {
    let mut g = gro(GroConfig::default());
    let mut b = Flow::new(2, false);
    assert!(poll(&mut g, (0..4).map(|_| b.next(MSS)).collect()).is_empty());
    assert_eq!(end(&mut g).len(), 1);
    held_as_new(&mut g, 1);
}

/// A new flow's one segment, in a poll of its own, is held (the poll is
/// not looked ahead in) and leaves at the poll's end.
fn held_as_new(g: &mut Gro<VecBuf>, id: u32) {
    let mut x = Flow::new(id, false);
    assert!(poll(g, vec![x.next(MSS)]).is_empty(), "held: no look-ahead");
    assert_eq!(alone(g), 0);
    assert_eq!(end(g).len(), 1);
}

#[test]
fn the_look_ahead_needs_one_packet_in_sixteen_of_the_last_poll_left_alone() {
    // A bulk flow's poll of 30 segments (two packets at the frag limit),
    // and after them the first segments of `singles` other flows, each
    // left at the poll's end as one segment.
    let looks_after = |singles: u32| {
        let mut g = gro(GroConfig::default());
        let mut a = Flow::new(1, false);
        let mut burst: Vec<VecBuf> = (0..30).map(|_| a.next(MSS)).collect();
        burst.extend((0..singles).map(|i| Flow::new(10 + i, false).next(MSS)));
        let n = burst.len();
        assert_eq!(poll(&mut g, burst).len(), 1, "a's first packet, full");
        let left = end(&mut g);
        assert_eq!(left.len(), 1 + singles as usize);
        assert_eq!(left.iter().map(|p| p.ids.len()).sum::<usize>(), n - 17);
        g.looks_ahead()
    };
    assert!(!looks_after(1), "1 of 31 left alone: not worth the buckets");
    assert!(looks_after(2), "2 of 32");
    assert!(looks_after(3), "3 of 33");
}

#[test]
fn one_segment_packets_that_their_own_flow_ended_leave_the_look_ahead_off() {
    // A bulk flow whose timestamps move on at each of its first segments:
    // each leaves as a packet of one, ended by the next. Looking ahead
    // would have held each all the same, so the next poll does not.
    let mut g = gro(GroConfig::default());
    let mut a = Flow::new(1, false);
    let mut burst: Vec<VecBuf> = (0..3).map(|k| a.next_with(MSS, |s| s.tsval += k)).collect();
    burst.push(a.next_with(MSS, |s| s.tsval += 2));
    let out = poll(&mut g, burst);
    assert_eq!(out.len(), 2, "two packets of one, each ended by the next");
    assert!(out.iter().all(|p| p.ids.len() == 1));
    assert_eq!(end(&mut g).len(), 1);
    assert!(!g.looks_ahead());
    // Left at the poll's end as one segment, a new flow's turns it on.
    held_as_new(&mut g, 9);
    assert!(g.looks_ahead());
}

#[test]
fn a_segment_whose_flow_comes_again_in_the_poll_is_held_for_it() {
    let mut g = gro(GroConfig::default());
    let mut x = Flow::new(9, false);
    poll(&mut g, vec![x.next(MSS)]);
    end(&mut g);
    // Many flows in between: the later segment of a's flow still shares
    // its bucket.
    let mut a = Flow::new(1, false);
    let mut burst = vec![a.next(MSS)];
    let mut others: Vec<Flow> = (100..130).map(|i| Flow::new(i, false)).collect();
    burst.extend(others.iter_mut().map(|f| f.next(MSS)));
    burst.push(a.next(MSS));
    let out = poll(&mut g, burst);
    assert!(out.iter().all(|o| o.ids.len() == 1));
    assert!(
        !out.iter().any(|o| seq_of(o) == 2000),
        "a's first segment waited"
    );
    let held = end(&mut g);
    let a_out: Vec<_> = held.iter().filter(|o| seq_of(o) == 2000).collect();
    assert_eq!(a_out.len(), 1);
    assert_eq!(a_out[0].ids.len(), 2, "a's two segments merged");
}

#[test]
fn another_layout_is_looked_at_from_the_next_poll() {
    let mut g = gro(GroConfig::default());
    let mut x = Flow::new(9, false);
    poll(&mut g, vec![x.next(MSS)]);
    end(&mut g);
    // IPv4 buckets; IPv6 flows' first head is held, and teaches the layout.
    let mut v6: Vec<Flow> = (1..4).map(|i| Flow::new(i, true)).collect();
    let first = poll(&mut g, v6.iter_mut().map(|f| f.next(MSS)).collect());
    assert!(first.is_empty(), "held: buckets read at IPv4's offsets");
    end(&mut g);
    let out = poll(&mut g, v6.iter_mut().map(|f| f.next(MSS)).collect());
    assert_eq!(out.len(), 3, "all alone, at once");
    assert!(end(&mut g).is_empty());
}

#[test]
fn the_reorder_window_takes_polls_segment_by_segment() {
    let mut g = gro(GroConfig {
        reorder: ReorderWindow {
            segments: 4,
            ..ReorderWindow::default()
        },
        ..GroConfig::default()
    });
    let mut x = Flow::new(9, false);
    poll(&mut g, vec![x.next(MSS)]);
    end(&mut g);
    let mut a = Flow::new(1, false);
    assert!(poll(&mut g, vec![a.next(MSS)]).is_empty(), "held");
    assert_eq!(alone(&g), 0);
}

/// A run of one flow's segments in a burst (merged after its first one in a
/// loop of their own) ends wherever segment by segment the held packet
/// would leave or a segment would not merge into it: after a PSH segment,
/// at the frag limit or the size limit, another flow, a gap, a short
/// segment, another ACK, an ID that does not follow, a bad checksum.
/// The packets, their order and the counters are those of `receive` on
/// each segment, trusting checksums or verifying them.
#[test]
fn a_run_of_one_flow_in_a_burst_ends_where_a_segment_would_not_merge() {
    // The frag limit (4 buffers), or the size limit (an IP packet of at most
    // four segments' payload and 100 bytes of headers) reached first.
    let limits = [
        (4, GroConfig::default().max_size),
        (17, 4 * MSS as u32 + 100),
    ];
    for ipv6 in [false, true] {
        for (csum, (max_frags, max_size)) in [CsumMode::Trust, CsumMode::Verify]
            .into_iter()
            .flat_map(|c| limits.map(|l| (c, l)))
        {
            let (mut a, mut b) = (Flow::new(1, ipv6), Flow::new(2, ipv6));
            let mut burst = Vec::new();
            burst.extend((0..3).map(|_| a.next(MSS)));
            burst.push(a.next_with(MSS, |s| s.flags |= TCP_PSH));
            // Past the limit within the run.
            burst.extend((0..6).map(|_| a.next(MSS)));
            burst.push(b.next(MSS));
            burst.extend((0..3).map(|_| a.next(MSS)));
            a.seq = a.seq.wrapping_add(MSS as u32);
            burst.extend((0..3).map(|_| a.next(MSS)));
            burst.push(a.next(MSS / 2));
            burst.extend((0..2).map(|_| a.next(MSS)));
            burst.push(a.next_with(MSS, |s| s.ack += 1));
            burst.extend((0..2).map(|_| a.next_with(MSS, |s| s.ack += 1)));
            a.ip_id = a.ip_id.wrapping_add(3);
            burst.extend((0..2).map(|_| a.next_with(MSS, |s| s.ack += 1)));
            let mut bad = a.next_with(MSS, |s| s.ack += 1);
            let last = bad.segs[0].len() - 1;
            bad.segs[0][last] ^= 0x5a;
            burst.push(bad);
            burst.extend((0..3).map(|_| a.next_with(MSS, |s| s.ack += 1)));
            let cfg = GroConfig {
                max_frags,
                max_size,
                csum,
                ..Default::default()
            };
            let (mut one, mut runs) = (gro(cfg), gro(cfg));
            let mut want = feed(&mut one, burst.clone());
            want.extend(flush(&mut one));
            let mut got = Vec::new();
            runs.receive_burst(&mut burst, 0, &mut |p| got.push(p));
            got.extend(flush(&mut runs));
            let packets = |v: &[VecBuf]| -> Vec<(Vec<u64>, Vec<u8>)> {
                v.iter().map(|p| (p.ids.clone(), p.bytes())).collect()
            };
            assert!(
                packets(&got) == packets(&want),
                "ipv6 {ipv6}, {csum:?}, {max_frags} frags: packets differ"
            );
            assert_eq!(
                runs.stats(),
                one.stats(),
                "ipv6 {ipv6}, {csum:?}, {max_frags} frags: counters differ"
            );
            assert!(one.stats().merged_segments >= 15, "the runs merged");
            let limit = if max_frags == 4 {
                Flush::FragLimit
            } else {
                Flush::SizeLimit
            };
            assert!(flush_count(&one, limit) > 0, "{limit:?} reached");
        }
    }
}

/// The packets a poll taken whole gave (`a`, by `g`) are those the same
/// segments gave one by one, each head held in the table (`b`, by `h`):
/// in order, byte for byte, with the same GSO and counters; each merged
/// one valid when `valid`.
fn same_as_held(
    case: &str,
    (g, a): (&Gro<VecBuf>, &[VecBuf]),
    (h, b): (&Gro<VecBuf>, &[VecBuf]),
    valid: bool,
) {
    assert_eq!(a.len(), b.len(), "{case}");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.ids, y.ids, "{case}");
        assert_eq!(x.bytes(), y.bytes(), "{case}");
        assert_eq!(x.gso, y.gso, "{case}");
        if x.ids.len() > 1 && valid {
            verify(&x.bytes())
                .map_err(|e| format!("{case}: {e}"))
                .unwrap();
        }
    }
    let (s, t) = (g.stats(), h.stats());
    assert_eq!(s.flush, t.flush, "{case}");
    assert_eq!(s.pass, t.pass, "{case}");
    assert_eq!(s.merged_segments, t.merged_segments, "{case}");
    assert_eq!(s.packets_out, t.packets_out, "{case}");
}

/// How a pair's second segment is made from its flow's next one.
type Second<'a> = &'a dyn Fn(&mut Flow, usize) -> VecBuf;

/// A poll of flows new to GRO, two segments each in a row, the second as
/// `second` makes it.
fn pairs(ipv6: bool, len: usize, second: Second) -> Vec<VecBuf> {
    let mut pkts = Vec::new();
    for i in 0..12 {
        let mut f = Flow::new(i, ipv6);
        pkts.push(f.next(len));
        pkts.push(second(&mut f, len));
    }
    pkts
}

#[test]
fn a_new_flows_two_segments_in_a_row_leave_as_when_its_head_is_held() {
    let psh = |f: &mut Flow, len: usize| f.next_with(len, |s| s.flags |= TCP_PSH);
    let seconds: [(&str, Second); 12] = [
        ("PSH", &psh),
        ("no PSH", &|f, len| f.next(len)),
        ("FIN", &|f, len| {
            f.next_with(len, |s| s.flags |= TCP_FIN | TCP_PSH)
        }),
        ("shorter", &|f, len| {
            f.next_with(len - 7, |s| s.flags |= TCP_PSH)
        }),
        ("shorter, no PSH", &|f, len| f.next(len - 300)),
        ("one byte", &|f, _| f.next_with(1, |s| s.flags |= TCP_PSH)),
        ("a trailer", &|f, len| {
            let mut p = f.next_with(len - 9, |s| s.flags |= TCP_PSH);
            p.segs[0].extend_from_slice(&[0xee; 4]);
            p
        }),
        ("bad IP checksum", &|f, len| {
            let mut p = psh(f, len);
            if p.bytes()[12] == 0x08 {
                break_ip_checksum(&mut p);
            }
            p
        }),
        ("bad TCP checksum", &|f, len| {
            let mut p = psh(f, len);
            let end = p.len() - 1;
            p.head_mut()[end] ^= 0x5a;
            p
        }),
        ("same IP ID", &|f, len| {
            let id = f.ip_id.wrapping_sub(1);
            f.next_with(len, |s| {
                s.flags |= TCP_PSH;
                s.ip_id = id
            })
        }),
        ("a gap", &|f, len| {
            f.next_with(len, |s| {
                s.flags |= TCP_PSH;
                s.seq += 1
            })
        }),
        ("another ACK", &|f, len| {
            f.next_with(len, |s| {
                s.flags |= TCP_PSH;
                s.ack += 1
            })
        }),
    ];
    for csum in [CsumMode::Trust, CsumMode::Verify] {
        for ipv6 in [false, true] {
            for len in [MSS, 1001] {
                for (what, second) in &seconds {
                    let cfg = GroConfig {
                        csum,
                        ..GroConfig::default()
                    };
                    // Taken whole, and segment by segment (each head held
                    // in the table): the same packets, in the same order.
                    let mut g = gro(cfg);
                    let mut a = poll(&mut g, pairs(ipv6, len, second));
                    a.extend(end(&mut g));
                    let mut h = gro(cfg);
                    let mut b = feed(&mut h, pairs(ipv6, len, second));
                    b.extend(flush(&mut h));
                    let case = format!("{csum:?}, IPv6 {ipv6}, {len} B, second {what}");
                    // Trusted, a bad TCP checksum stays bad merged.
                    let trusted_bad = csum == CsumMode::Trust && *what == "bad TCP checksum";
                    same_as_held(&case, (&g, &a), (&h, &b), !trusted_bad);
                    if *what == "PSH" {
                        assert_eq!(g.stats().merged_segments, 12, "{case}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_pairs_head_split_over_two_buffers_counts_both_against_the_frag_limit() {
    // Each head comes as headers | payload (a header-split NIC), its PSH
    // second segment in one buffer: merged, three buffers. Under a limit
    // of two the pair must not merge; under three it must. Taken whole
    // and segment by segment: the same packets and counters.
    let split = |f: &mut Flow, len: usize| {
        let p = f.next(len);
        let bytes = p.bytes();
        let at = bytes.len() - len;
        VecBuf {
            segs: vec![bytes[..at].to_vec(), bytes[at..].to_vec()],
            ids: p.ids,
            ..Default::default()
        }
    };
    for csum in [CsumMode::Trust, CsumMode::Verify] {
        for ipv6 in [false, true] {
            for max_frags in [2, 3] {
                let pkts = || {
                    let mut v = Vec::new();
                    for i in 0..12 {
                        let mut f = Flow::new(i, ipv6);
                        v.push(split(&mut f, MSS));
                        v.push(f.next_with(300, |s| s.flags |= TCP_PSH));
                    }
                    v
                };
                let cfg = GroConfig {
                    csum,
                    max_frags,
                    ..GroConfig::default()
                };
                let (mut g, mut h) = (gro(cfg), gro(cfg));
                let mut a = poll(&mut g, pkts());
                a.extend(end(&mut g));
                let mut b = feed(&mut h, pkts());
                b.extend(flush(&mut h));
                let case = format!("{csum:?}, IPv6 {ipv6}, max_frags {max_frags}");
                same_as_held(&case, (&g, &a), (&h, &b), true);
                assert!(
                    a.iter().all(|x| x.segs.len() <= max_frags as usize),
                    "{case}"
                );
                let s = g.stats();
                let (merged, frag_flushes) = if max_frags == 2 { (0, 12) } else { (12, 0) };
                assert_eq!(s.merged_segments, merged, "{case}");
                assert_eq!(flush_count(&g, Flush::FragLimit), frag_flushes, "{case}");
                // Merged as pairs, the heads took no table entry: none is
                // left for a flow's next packet to start again in, where
                // the heads held segment by segment left theirs.
                if max_frags == 3 {
                    let next = || -> Vec<VecBuf> {
                        let mut v = Vec::new();
                        for i in 0..12 {
                            let mut f = Flow::new(i, ipv6);
                            f.seq += 10_000;
                            v.push(f.next(MSS));
                            v.push(f.next(MSS));
                        }
                        v
                    };
                    for (gro, pairs) in [(&mut g, true), (&mut h, false)] {
                        poll(gro, next());
                        end(gro);
                        let cached = gro.stats().heads_cached;
                        assert_eq!(cached == 0, pairs, "{case}: {cached} heads in left entries");
                    }
                }
            }
        }
    }
}

#[test]
fn a_pair_merged_at_once_leaves_no_table_entry_behind() {
    // The same flow's next pair, a poll later (a full-size second segment,
    // then a shorter one): a head held in the table would have left a
    // ghost there to start again in; merged at once, the pair left none,
    // and the next one is new again.
    let mut g = gro(GroConfig::default());
    let mut f = Flow::new(3, false);
    for len in [MSS, 200, MSS] {
        let pair = vec![f.next(MSS), f.next_with(len, |s| s.flags |= TCP_PSH)];
        let out = poll(&mut g, pair);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].ids.len(), 2);
        verify(&out[0].bytes()).unwrap();
        assert!(end(&mut g).is_empty());
    }
    assert_eq!(g.stats().heads_built, 3);
    assert_eq!(g.stats().heads_cached, 0);
}

#[test]
fn a_pair_of_a_flow_the_table_remembers_leaves_as_when_its_head_is_held() {
    // A flow's packet leaves its ghost in the table; its next segments
    // come as a pair that acknowledges more (as an RPC's next request
    // does, so that the ghost's template turns it away), then as a run,
    // and so on. With nothing held, a pair merges at once and leaves the
    // ghost as it was; segment by segment, each head starts again in the
    // ghost's slot. The same packets leave either way, and the runs after
    // a pair still merge.
    for ipv6 in [false, true] {
        let polls = |f: &mut Flow| -> Vec<Vec<VecBuf>> {
            let acked = |f: &mut Flow, len, ack: u32, psh: bool| {
                f.next_with(len, |s| {
                    s.ack += ack;
                    if psh {
                        s.flags |= TCP_PSH;
                    }
                })
            };
            let run = |f: &mut Flow, ack| (0..4).map(|_| acked(f, MSS, ack, false)).collect();
            vec![
                run(f, 0),
                vec![acked(f, MSS, 1, false), acked(f, MSS, 1, true)],
                run(f, 2),
                vec![acked(f, MSS, 3, false), acked(f, 300, 3, true)],
                run(f, 4),
            ]
        };
        let (mut g, mut h) = (gro(GroConfig::default()), gro(GroConfig::default()));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut f, mut f2) = (Flow::new(4, ipv6), Flow::new(4, ipv6));
        for (p, q) in polls(&mut f).into_iter().zip(polls(&mut f2)) {
            a.extend(poll(&mut g, p));
            a.extend(end(&mut g));
            b.extend(feed(&mut h, q));
            b.extend(flush(&mut h));
        }
        assert_eq!(a.len(), 5, "IPv6 {ipv6}: one packet a poll");
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.ids, y.ids, "IPv6 {ipv6}");
            assert_eq!(x.bytes(), y.bytes(), "IPv6 {ipv6}");
            assert_eq!(x.gso, y.gso, "IPv6 {ipv6}");
            verify(&x.bytes()).unwrap();
        }
        let (s, t) = (g.stats(), h.stats());
        assert_eq!(s.merged_segments, t.merged_segments);
        assert_eq!(s.flush, t.flush);
        // Each pair's head counts as built; the table's way takes the
        // ghost back for it.
        assert_eq!((s.heads_built, s.heads_cached), (3, 2), "IPv6 {ipv6}");
        assert_eq!((t.heads_built, t.heads_cached), (1, 4), "IPv6 {ipv6}");
    }
}

#[test]
fn a_run_goes_on_into_its_flows_next_packets_as_on_the_full_path() {
    // One flow's poll whose packets end every way a run meets within a
    // burst: timestamps that move on and a gap (the next head taken where
    // the run stopped, and a run into its packet), PSH, the frag limit.
    // The packets, their order and every counter are the full path's.
    let run = |full: bool, csum: CsumMode| {
        let mut g = gro(GroConfig {
            csum,
            max_frags: 5,
            ..Default::default()
        });
        g.full_path_only = full;
        let mut a = Flow::new(1, false);
        let mut burst = Vec::new();
        for k in 0..60u32 {
            if k == 22 {
                a.next(MSS); // lost
            }
            let tick = if k < 40 { k / 3 } else { 13 };
            let psh = k == 31 || k == 33;
            burst.push(a.next_with(MSS, |s| {
                s.tsval += tick;
                if psh {
                    s.flags |= TCP_PSH;
                }
            }));
        }
        let mut out = poll(&mut g, burst);
        out.extend(end(&mut g));
        (out, *g.stats())
    };
    for csum in [CsumMode::Trust, CsumMode::Verify] {
        let (out, stats) = run(false, csum);
        for why in [
            Flush::OptionMismatch,
            Flush::SeqGap,
            Flush::Psh,
            Flush::FragLimit,
        ] {
            assert!(stats.flush[why as usize] > 0, "no packet ended by {why:?}");
        }
        assert_eq!(stats.segments_in, 60);
        assert_eq!(out.iter().map(|p| p.ids.len()).sum::<usize>(), 60);
        for p in &out {
            verify(&p.bytes()).unwrap();
        }
        assert_eq!((out, stats), run(true, csum));
    }
}
