//! The reorder window: segments ahead of a gap wait for it and merge in
//! sequence order; nothing merges across a gap that does not fill; what
//! waited leaves in sequence order when the wait ends; a retransmission of
//! delivered data passes at once.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn window(n: u16) -> GroConfig {
    GroConfig {
        reorder: ReorderWindow {
            segments: n,
            ..ReorderWindow::default()
        },
        ..GroConfig::default()
    }
}

/// One flow's segments 0..n, each `MSS` bytes.
fn segments(f: &mut Flow, n: usize) -> Vec<VecBuf> {
    (0..n).map(|_| f.next(MSS)).collect()
}

/// One flow's next `n` segments of `len` bytes.
fn segments_of(f: &mut Flow, n: usize, len: usize) -> Vec<VecBuf> {
    (0..n).map(|_| f.next(len)).collect()
}

/// `segs` in the order `order` gives (indices into it).
fn arrange(segs: &[VecBuf], order: &[usize]) -> Vec<VecBuf> {
    order.iter().map(|&i| segs[i].clone()).collect()
}

fn end_of_poll(g: &mut Gro<VecBuf>) -> Vec<VecBuf> {
    let mut out = Vec::new();
    g.end_of_poll(&mut |b| out.push(b));
    out
}

/// Each packet's segment count, and that its bytes are its flow's at its
/// sequence numbers (so no merge crossed a gap) with valid checksums.
fn check(f: &Flow, out: &[VecBuf]) -> Vec<usize> {
    out.iter()
        .map(|o| {
            let bytes = o.bytes();
            let t = verify(&bytes).expect("valid headers and checksums");
            let seq = seq_of(o);
            let payload = &bytes[t.payload as usize..];
            assert_eq!(payload, f.payload(seq, payload.len()), "bytes at seq {seq}");
            o.ids.len()
        })
        .collect()
}

#[test]
fn a_segment_one_place_late_merges_in_sequence_order() {
    for ipv6 in [false, true] {
        let mut f = Flow::new(1, ipv6);
        let segs = segments(&mut f, 6);
        let input = arrange(&segs, &[0, 1, 3, 2, 4, 5]);
        let mut g = gro(window(4));
        let mut out = feed(&mut g, input.clone());
        out.extend(end_of_poll(&mut g));
        assert_eq!(check(&f, &out), [6], "one packet, in sequence order");
        let ids: Vec<u64> = segs.iter().map(|s| s.ids[0]).collect();
        assert_eq!(out[0].ids, ids);
        assert_eq!((g.stats().reorder_held, g.stats().reorder_filled), (1, 1));
        // Without the window, the gap flushes as in Linux.
        let mut g = gro(GroConfig::default());
        let mut out = feed(&mut g, input);
        out.extend(flush(&mut g));
        assert_eq!(check(&f, &out), [2, 1, 1, 2]);
    }
}

#[test]
fn segments_one_to_three_places_late_merge_as_if_in_order() {
    let mut f = Flow::new(2, false);
    let segs = segments(&mut f, 51);
    let mut order: Vec<usize> = (0..51).collect();
    // Late by 1, 2 and 3 places (and two swaps back to back).
    order.swap(4, 5);
    let late = order.remove(10);
    order.insert(12, late);
    let late = order.remove(20);
    order.insert(23, late);
    order.swap(30, 31);
    order.swap(32, 33);
    let mut g = gro(window(4));
    let mut out = feed(&mut g, arrange(&segs, &order));
    out.extend(end_of_poll(&mut g));
    assert_eq!(check(&f, &out), [17, 17, 17], "as an in-order flow");
    assert_eq!(g.stats().reorder_filled, g.stats().reorder_held);
    assert_eq!(g.held(), 0);
}

#[test]
fn a_gap_that_never_fills_is_never_merged_across() {
    let mut f = Flow::new(3, false);
    let segs = segments(&mut f, 6);
    let mut g = gro(window(4));
    // Segment 2 is lost; 3, 4, 5 wait for it, across the end of a poll.
    let mut out = Vec::new();
    for (i, s) in arrange(&segs, &[0, 1, 3, 4, 5]).into_iter().enumerate() {
        g.receive(s, 10 + i as u64, &mut |b| out.push(b));
    }
    out.extend(end_of_poll(&mut g));
    assert!(out.is_empty(), "the flow waits for its gap");
    g.expire_reorder(11, &mut |b| out.push(b));
    assert!(out.is_empty(), "the segments waiting arrived after 11");
    g.expire_reorder(12, &mut |b| out.push(b));
    out.extend(end_of_poll(&mut g));
    assert_eq!(check(&f, &out), [2, 3], "before the gap, then after it");
    assert_eq!(seq_of(&out[1]), seq_of(&segs[3]));
    assert_eq!(flush_count(&g, Flush::ReorderTimeout), 1);
    assert_eq!(g.stats().reorder_filled, 0);
}

#[test]
fn a_gap_filled_in_a_later_poll_merges() {
    let mut f = Flow::new(4, true);
    let segs = segments(&mut f, 5);
    let mut g = gro(window(4));
    let mut out = feed(&mut g, arrange(&segs, &[0, 1, 3]));
    out.extend(end_of_poll(&mut g));
    assert!(out.is_empty());
    out.extend(feed(&mut g, arrange(&segs, &[2, 4])));
    out.extend(end_of_poll(&mut g));
    assert_eq!(check(&f, &out), [5]);
}

#[test]
fn one_more_segment_than_the_window_holds_gives_the_wait_up() {
    let mut f = Flow::new(5, false);
    let segs = segments(&mut f, 6);
    let mut g = gro(window(2));
    // 1 is lost: 2 and 3 wait, 4 is one too many.
    let mut out = feed(&mut g, arrange(&segs, &[0, 2, 3, 4, 5]));
    assert_eq!(check(&f, &out), [1], "the held packet left at the third");
    out.extend(end_of_poll(&mut g));
    assert_eq!(
        check(&f, &out),
        [1, 4],
        "then what waited, and what followed"
    );
    assert_eq!(flush_count(&g, Flush::ReorderFull), 1);
}

/// Every packet starts past the one before it.
fn assert_in_sequence(out: &[VecBuf]) {
    let seqs: Vec<u32> = out.iter().map(seq_of).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "in sequence order: {seqs:?}"
    );
}

/// The segment that fills a gap starts where the held packet ends: it
/// comes before what waits in sequence, whether or not it can join the held
/// packet (here the sender's timestamp ticked at the gap, as a real sender's
/// does every millisecond or so).
#[test]
fn a_filler_that_cannot_join_the_held_packet_still_leaves_before_what_waited() {
    for ipv6 in [false, true] {
        let mut f = Flow::new(8, ipv6);
        let mut segs = segments(&mut f, 3);
        segs.extend((0..3).map(|_| f.next_with(MSS, |s| s.tsval += 1)));
        let mut g = gro(window(4));
        // 0-2 held; 4 and 5 wait for 3, which carries 4's timestamp.
        let mut out = feed(&mut g, arrange(&segs, &[0, 1, 2, 4, 5, 3]));
        out.extend(end_of_poll(&mut g));
        assert_in_sequence(&out);
        assert_eq!(check(&f, &out), [3, 3], "0-2, then 3-5 merged after it");
        assert_eq!(g.stats().reorder_held, 2);
    }
}

/// A flow whose packet left early (PSH, here) restarts ahead of a gap: the
/// segment that fills that gap exactly comes before the held packet in
/// sequence, so it leaves at once, before it, and the held packet stays held.
#[test]
fn a_segment_filling_the_gap_before_the_held_packet_leaves_ahead_of_it() {
    for ipv6 in [false, true] {
        let mut f = Flow::new(9, ipv6);
        let mut segs = segments(&mut f, 2);
        segs.push(f.next_with(MSS, |s| s.flags |= TCP_PSH));
        segs.extend(segments(&mut f, 3));
        let mut g = gro(window(4));
        // 4 waits for 2 and 3; 2 joins 0-1 and ends the packet (PSH), so 4
        // starts the next one ahead of 3 and 5 joins it; then 3 fills that
        // gap exactly.
        let mut out = feed(&mut g, arrange(&segs, &[0, 1, 4, 2, 5, 3]));
        out.extend(end_of_poll(&mut g));
        assert_in_sequence(&out);
        assert_eq!(check(&f, &out), [3, 1, 2], "0-2, 3 at once, then 4-5");
        assert_eq!(g.stats().pass[Pass::BeforeHeld.index()], 1);
        assert_eq!(g.held(), 0);
    }
    // Without the window, the gap flushes: 4-5 leave before 3, as they
    // arrived.
    let mut f = Flow::new(9, false);
    let mut segs = segments(&mut f, 2);
    segs.push(f.next_with(MSS, |s| s.flags |= TCP_PSH));
    segs.extend(segments(&mut f, 3));
    let mut g = gro(GroConfig::default());
    let mut out = feed(&mut g, arrange(&segs, &[0, 1, 4, 2, 5, 3]));
    out.extend(flush(&mut g));
    assert_eq!(check(&f, &out), [2, 1, 1, 1, 1]);
}

/// A segment that passes unheld once its flow's packet left (with a bad
/// checksum; or with PSH and a new ACK, so that it could neither join that
/// packet nor start one) was delivered: the gap it leaves before the flow's
/// next packet is none, and a copy of it is a retransmission, which leaves
/// after that packet (it arrived first), not ahead of it.
#[test]
fn a_copy_of_a_segment_passed_unheld_does_not_overtake_the_packet_after_it() {
    // How 1 differs: its ACK (2's too), its flags, its checksum.
    for (how, ack, flags, corrupt) in [
        ("bad checksum", 0, 0, true),
        ("bad checksum, new ACK", 1, 0, true),
        ("PSH, new ACK", 1, TCP_PSH, false),
    ] {
        let mut f = Flow::new(11, false);
        let a = f.next(MSS);
        let b = f.next_with(MSS, |s| {
            s.ack += ack;
            s.flags |= flags;
        });
        let c = f.next_with(MSS, |s| s.ack += ack);
        let mut passed = b.clone();
        if corrupt {
            *passed.segs[0].last_mut().unwrap() ^= 0xff;
        }
        // 1 passes unheld, 2 is held; then copies of 1 and 2.
        let input = vec![a, passed, c.clone(), b, c];
        let seen_in: Vec<(u32, u32)> = input.iter().map(seq_len).collect();
        let mut g = gro(window(4));
        let mut out = feed(&mut g, input);
        out.extend(end_of_poll(&mut g));
        let seen: Vec<(u32, u32)> = out.iter().map(seq_len).collect();
        assert_eq!(backsteps(&seen), backsteps(&seen_in), "{how}: {seen:?}");
        assert_eq!(g.stats().pass[Pass::BeforeHeld.index()], 0, "{how}");
    }
}

#[test]
fn a_retransmission_of_delivered_data_passes_at_once() {
    let mut f = Flow::new(6, false);
    let segs = segments(&mut f, 4);
    let mut g = gro(window(4));
    let mut out = feed(&mut g, arrange(&segs, &[0, 1]));
    out.extend(end_of_poll(&mut g));
    out.extend(feed(&mut g, arrange(&segs, &[2, 3, 0])));
    assert_eq!(
        check(&f, &out),
        [2, 2, 1],
        "2-3 left before the copy of 0 (it arrived first), the copy not held"
    );
    assert_eq!(g.held(), 0);
    assert_eq!(g.stats().pass[Pass::Retransmission.index()], 1);
    // The flow goes on where 2-3 ended, not from the copy: 4 and 5 merge,
    // nothing waits.
    let more = segments(&mut f, 2);
    out.extend(feed(&mut g, more));
    out.extend(end_of_poll(&mut g));
    assert_eq!(check(&f, &out), [2, 2, 1, 2]);
    assert_eq!(g.stats().reorder_held, 0);
}

#[test]
fn a_segment_overlapping_one_that_waits_gives_the_wait_up() {
    let mut f = Flow::new(7, false);
    let segs = segments(&mut f, 3);
    let mut g = gro(window(16));
    // 0 held, 2 waits for 1; then the bytes from inside 1 to inside 2 (a
    // retransmission cut at other boundaries).
    let mut out = feed(&mut g, arrange(&segs, &[0, 2]));
    assert!(out.is_empty());
    let mut cut = Flow::new(7, false);
    cut.seq = seq_of(&segs[1]) + 400;
    let cut = cut.next(MSS);
    let input: Vec<(u32, u32)> = [&segs[0], &segs[2], &cut]
        .iter()
        .map(|b| seq_len(b))
        .collect();
    out.extend(feed(&mut g, vec![cut]));
    // What waited leaves before it, in sequence order.
    assert_eq!(check(&f, &out), [1, 1], "0, then 2");
    assert_eq!(seq_of(&out[1]), seq_of(&segs[2]));
    assert_eq!(flush_count(&g, Flush::ReorderFull), 1);
    out.extend(end_of_poll(&mut g));
    assert_eq!(out.len(), 3);
    let seen: Vec<(u32, u32)> = out.iter().map(seq_len).collect();
    assert_eq!(backsteps(&seen), backsteps(&input), "{seen:?}");
}

#[test]
fn a_segment_continuing_the_held_data_into_one_that_waits_gives_the_wait_up() {
    // 0 held; a segment 500 bytes past its end waits; then the bytes right
    // after 0, running into the waiting one: merged (or, with a size limit
    // that stops the merge, starting the next packet) they would leave
    // before the segment that waited, which arrived first.
    for max_size in [65535, 2000] {
        let mut f = Flow::new(9, false);
        let a = f.next(MSS);
        let mut ahead = Flow::new(9, false);
        ahead.seq = seq_of(&a) + MSS as u32 + 500;
        ahead.ip_id = 102;
        let w = ahead.next(MSS);
        let c = f.next(MSS);
        let input = vec![a, w, c];
        let seen_in: Vec<(u32, u32)> = input.iter().map(seq_len).collect();
        let mut g = gro(GroConfig {
            max_size,
            ..window(4)
        });
        let mut out = feed(&mut g, input);
        out.extend(end_of_poll(&mut g));
        let seen: Vec<(u32, u32)> = out.iter().map(seq_len).collect();
        assert_eq!(
            check(&f, &out),
            [1, 1, 1],
            "max_size {max_size}: each alone"
        );
        assert_eq!(
            backsteps(&seen),
            backsteps(&seen_in),
            "max_size {max_size}: {seen:?}"
        );
        assert_eq!(flush_count(&g, Flush::ReorderFull), 1);
    }
}

#[test]
fn segments_let_go_twice_are_taken_again_in_sequence_order() {
    // 0 held; after a gap, a 9-byte segment, another gap of 9 bytes, then
    // three of 253: all wait. A padded ACK of the flow lets them go: the
    // 9-byte one starts a packet (its size bounds how far the window
    // reaches), the next waits again for the 9 bytes, the one after is too
    // far ahead and gives that wait up: it must not be taken after the
    // last one, which was let go with it the first time.
    let mut f = Flow::new(8, false);
    let a = f.next(MSS);
    f.next(MSS);
    let b = f.next(9);
    f.next(9);
    let rest = segments_of(&mut f, 3, 253);
    let mut ack = f.next_with(0, |_| {});
    ack.segs[0].extend_from_slice(&[0; 6]);
    let ack_id = ack.ids[0];
    let mut input = vec![a, b];
    input.extend(rest);
    let seen_in: Vec<(u32, u32)> = input.iter().map(seq_len).collect();
    let mut g = gro(window(16));
    let mut out = feed(&mut g, input);
    assert!(out.is_empty(), "the first held, the rest waiting");
    out.extend(feed(&mut g, vec![ack]));
    out.extend(end_of_poll(&mut g));
    // The padded ACK (it leaves after the data before it) aside.
    out.retain(|o| o.ids != [ack_id]);
    let seen: Vec<(u32, u32)> = out.iter().map(seq_len).collect();
    assert_eq!(backsteps(&seen), backsteps(&seen_in), "{seen:?}");
    assert_eq!(
        check(&f, &out),
        [1, 1, 3],
        "0, the 9 bytes, the 253-byte ones"
    );
}

#[test]
fn a_segment_ahead_that_will_not_merge_waits_and_starts_the_next_packet() {
    let mut f = Flow::new(7, false);
    let a = f.next(MSS);
    let b = f.next(MSS);
    let c = f.next_with(MSS, |s| s.tsval += 1);
    let mut g = gro(window(4));
    let mut out = feed(&mut g, vec![a, c, b]);
    out.extend(end_of_poll(&mut g));
    assert_eq!(check(&f, &out), [2, 1], "in sequence order");
    assert_eq!(seq_of(&out[1]), seq_of(&out[0]) + 2 * MSS as u32);
    assert_eq!(flush_count(&g, Flush::OptionMismatch), 1);
}

#[test]
fn a_reset_ahead_of_a_gap_does_not_wait() {
    let mut f = Flow::new(9, false);
    let a = f.next(MSS);
    let _lost = f.next(MSS);
    let rst = f.next_with(MSS, |s| s.flags |= TCP_RST);
    let mut g = gro(window(4));
    let out = feed(&mut g, vec![a, rst]);
    assert_eq!(out.len(), 2, "the held data, then the RST");
    assert_eq!(g.stats().reorder_held, 0);
}

#[test]
fn a_flow_that_starts_again_far_behind_gets_its_window_back() {
    // The same addresses and ports, sequence numbers from far behind (a
    // new connection, or a capture replayed in a loop): what GRO knew of
    // the old stream does not keep the window shut.
    let mut f = Flow::new(10, false);
    let first = segments(&mut f, 3);
    let mut g = gro(window(4));
    let mut out = feed(&mut g, first);
    out.extend(end_of_poll(&mut g));
    f.seq = f.seq.wrapping_sub(1 << 25);
    let again = segments(&mut f, 6);
    out.extend(feed(&mut g, arrange(&again, &[0, 1, 3, 2, 4, 5])));
    out.extend(end_of_poll(&mut g));
    assert_eq!(check(&f, &out[1..]), [6], "in sequence order, one packet");
    assert_eq!(g.stats().reorder_filled, 1);
}

#[test]
fn flush_all_lets_the_waiting_segments_out_too() {
    let mut f = Flow::new(8, false);
    let segs = segments(&mut f, 5);
    let mut g = gro(window(4));
    let mut out = feed(&mut g, arrange(&segs, &[0, 2, 4, 3]));
    out.extend(flush(&mut g));
    assert_eq!(check(&f, &out), [1, 3], "0, then 2-4 in sequence order");
    assert_eq!(g.held(), 0);
}

#[test]
fn the_window_is_refused_past_its_bound() {
    assert!(window(MAX_REORDER).validate().is_ok());
    let e = window(MAX_REORDER + 1).validate().unwrap_err();
    assert_eq!(e.setting, crate::Setting::ReorderSegments, "{e}");
    assert_eq!(
        e.to_string(),
        "GroConfig::reorder.segments 17: out of range: give 0..=16 (0 turns it off)"
    );
}

/// How often a flow's segments step back in sequence (start before the end
/// of the one before), given as (seq, len) in the order seen.
fn backsteps(segs: &[(u32, u32)]) -> usize {
    segs.windows(2)
        .filter(|w| w[1].1 > 0 && w[1].0.wrapping_sub(w[0].0.wrapping_add(w[0].1)) >= 1 << 31)
        .count()
}

fn seq_len(b: &VecBuf) -> (u32, u32) {
    let bytes = b.bytes();
    let t = Tcp::parse(&bytes, bytes.len(), false).unwrap();
    (Fields::new(&bytes, t).seq(), t.payload_len)
}

#[derive(Debug, Clone)]
struct Case {
    flows: u32,
    segs: usize,
    /// One segment in this many arrives late, by 1..=`late` places.
    late_one_in: u32,
    late: usize,
    /// One segment in this many is lost (0: none).
    loss_one_in: u32,
    reorder: u16,
    bursts: Vec<usize>,
    /// Polls a segment may wait.
    wait: u64,
    /// The timestamp ticks every this many segments of a flow (0: never),
    /// as in a slow flow: a late segment carries its older one.
    tick: u32,
    /// One segment in this many has PSH (0: none), as at the end of a
    /// sender's write.
    psh_one_in: u32,
    /// Checksums trusted (else verified in software).
    trust: bool,
    max_frags: u16,
    table: usize,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u32..=6,
        1usize..120,
        2u32..12,
        1usize..=4,
        prop_oneof![Just(0u32), 3u32..20],
        1u16..=MAX_REORDER,
        proptest::collection::vec(1usize..40, 1..8),
        0u64..4,
        (
            prop_oneof![Just(0u32), 1u32..6],
            any::<bool>(),
            prop_oneof![Just(0u32), 2u32..16],
        ),
        prop_oneof![Just(17u16), 2u16..=64],
        prop_oneof![Just(64usize), 1usize..4],
        any::<u64>(),
    )
        .prop_map(
            |(
                flows,
                segs,
                late_one_in,
                late,
                loss_one_in,
                reorder,
                bursts,
                wait,
                (tick, trust, psh_one_in),
                max_frags,
                table,
                seed,
            )| Case {
                flows,
                segs,
                late_one_in,
                late,
                loss_one_in,
                reorder,
                bursts,
                wait,
                tick,
                trust,
                psh_one_in,
                max_frags,
                table,
                seed,
            },
        )
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// How `run` gives GRO its input.
#[derive(Clone, Copy, PartialEq)]
enum Take {
    /// Segment by segment (`receive`).
    Segments,
    /// The same, with the fast path off.
    FullPathOnly,
    /// Each burst whole (`receive_poll`: a burst's runs of one flow merge
    /// in a loop of their own).
    Polls,
}

/// Feeds `input` in the case's bursts, one clock tick a poll, the window's
/// wait given up after `c.wait` polls; everything out at the end.
fn run(c: &Case, input: Vec<VecBuf>, take: Take) -> (Gro<VecBuf>, Vec<VecBuf>) {
    let mut g = gro(GroConfig {
        reorder: ReorderWindow {
            segments: c.reorder,
            ..ReorderWindow::default()
        },
        max_frags: c.max_frags,
        flows: c.table,
        csum: if c.trust {
            CsumMode::Trust
        } else {
            CsumMode::Verify
        },
        ..GroConfig::default()
    });
    g.full_path_only = take == Take::FullPathOnly;
    let mut out = Vec::new();
    let mut it = input.into_iter().peekable();
    let mut poll = 0u64;
    while it.peek().is_some() {
        poll += 1;
        let n = c.bursts[poll as usize % c.bursts.len()];
        if take == Take::Polls {
            let mut burst: Vec<VecBuf> = it.by_ref().take(n).collect();
            g.receive_poll(&mut burst, poll, &mut |b| out.push(b));
            assert!(g.held() <= c.table, "more held than --gro-flows");
        }
        for p in it.by_ref().take(if take == Take::Polls { 0 } else { n }) {
            g.receive(p, poll, &mut |b| out.push(b));
            assert!(g.held() <= c.table, "more held than --gro-flows");
        }
        g.expire_reorder(poll.saturating_sub(c.wait), &mut |b| out.push(b));
        g.end_of_poll(&mut |b| out.push(b));
    }
    g.flush_all(&mut |b| out.push(b));
    (g, out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Flows with local reordering, losses, PSH now and then and timestamps
    /// that tick, in random bursts, the clock one tick a poll: every
    /// segment comes out once; every packet is one flow's bytes at their
    /// sequence numbers (nothing merged across a gap), valid and within the
    /// limits; no flow comes out more reordered than it went in; nothing is
    /// held at the end.
    #[test]
    fn reordered_streams_survive_the_window(c in case()) {
        let mut seed = c.seed | 1;
        let mut flows: Vec<Flow> = (0..c.flows).map(|i| Flow::new(i, i % 2 == 1)).collect();
        let mut queues: Vec<Vec<VecBuf>> = Vec::new();
        let mut flow_of = HashMap::new();
        for (i, f) in flows.iter_mut().enumerate() {
            let ts = |k: usize| 5000 + k as u32 / c.tick.max(1) * (c.tick != 0) as u32;
            let mut q: Vec<VecBuf> = (0..c.segs)
                .map(|k| {
                    let psh = c.psh_one_in != 0
                        && rng(&mut seed).is_multiple_of(c.psh_one_in as u64);
                    f.next_with(MSS, |s| {
                        s.tsval = ts(k);
                        if psh {
                            s.flags |= TCP_PSH;
                        }
                    })
                })
                .collect();
            if c.loss_one_in > 0 {
                q.retain(|_| !rng(&mut seed).is_multiple_of(c.loss_one_in as u64));
            }
            for k in 0..q.len() {
                if rng(&mut seed).is_multiple_of(c.late_one_in as u64) {
                    let to = (k + 1 + rng(&mut seed) as usize % c.late).min(q.len() - 1);
                    let s = q.remove(k);
                    q.insert(to, s);
                }
            }
            for s in &q {
                flow_of.insert(s.ids[0], i);
            }
            q.reverse();
            queues.push(q);
        }
        let mut input = Vec::new();
        while queues.iter().any(|q| !q.is_empty()) {
            let live: Vec<usize> = (0..queues.len()).filter(|&i| !queues[i].is_empty()).collect();
            let i = live[rng(&mut seed) as usize % live.len()];
            for _ in 0..1 + rng(&mut seed) % 6 {
                if let Some(s) = queues[i].pop() {
                    input.push(s);
                }
            }
        }
        let mut seen_in: HashMap<usize, Vec<(u32, u32)>> = HashMap::new();
        for s in &input {
            seen_in.entry(flow_of[&s.ids[0]]).or_default().push(seq_len(s));
        }
        let n_in = input.len();
        let (g, out) = run(&c, input.clone(), Take::Segments);
        let packets = |v: &[VecBuf]| v.iter().map(|o| (o.ids.clone(), o.bytes())).collect::<Vec<_>>();
        // The fast path decides as the full path does, window and all; so
        // does a poll taken whole, its runs merged in a loop.
        let (full, b) = run(&c, input.clone(), Take::FullPathOnly);
        prop_assert_eq!(g.stats(), full.stats());
        prop_assert_eq!(packets(&out), packets(&b));
        let (polls, p) = run(&c, input, Take::Polls);
        prop_assert_eq!(g.stats(), polls.stats());
        prop_assert_eq!(packets(&out), packets(&p));
        prop_assert_eq!(g.held(), 0);
        let mut ids: Vec<u64> = out.iter().flat_map(|o| o.ids.clone()).collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), n_in, "every segment once");
        prop_assert_eq!(out.iter().map(|o| o.ids.len()).sum::<usize>(), n_in);
        prop_assert_eq!(g.stats().packets_out, out.len() as u64);
        let mut seen_out: HashMap<usize, Vec<(u32, u32)>> = HashMap::new();
        for o in &out {
            let flow = flow_of[&o.ids[0]];
            prop_assert!(o.ids.iter().all(|id| flow_of[id] == flow), "one flow a packet");
            prop_assert!(o.segs.len() <= c.max_frags as usize || o.ids.len() == 1);
            let bytes = o.bytes();
            let t = verify(&bytes).map_err(TestCaseError::fail)?;
            let (seq, len) = seq_len(o);
            prop_assert_eq!(
                &bytes[t.payload as usize..],
                &flows[flow].payload(seq, len as usize)[..],
                "bytes at their sequence numbers"
            );
            seen_out.entry(flow).or_default().push((seq, len));
        }
        for (flow, segs) in &seen_in {
            let back_in = backsteps(segs);
            let back_out = backsteps(&seen_out[flow]);
            prop_assert!(
                back_out <= back_in,
                "flow {}: {} steps back out, {} in: in {:?}, out {:?}",
                flow, back_out, back_in, segs, seen_out[flow]
            );
        }
    }
}
