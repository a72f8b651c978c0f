//! `Skb::build_checked` on chains a buggy driver could hand over (one EAL,
//! 4 KiB pages): a chain whose lengths do not hold never reaches GRO. It is
//! freed and counted; a valid chain, empty segments and all, is built as
//! `Skb::build` builds it.
//!
//! The first case is the one that crashed GRO: the second segment of a
//! flow held in Verify mode, in one buffer one byte short of its `pkt_len`,
//! matches the flow's template, whose fast path then reads the payload out
//! of the first buffer by `pkt_len` and panics (the worker aborts).
//!
//! Empty buffers after a frame's payload stay linked when GRO merges it, so
//! they count toward `max_frags` (`GroBuf::segs_from`).
//!
//! Last, `Skb::pop_vlan` on a built QinQ frame: tag by tag, to the untagged
//! frame.

mod common;

use dpdk_sys as sys;
use grorx::gro::{Gro, GroBuf, GroConfig};
use grorx::mempool::{Mempool, PoolParams};
use grorx::skb::{self, Skb, SkbConf, SkbMode, SkbStats};
use grorx::traffic::{segment_stream, FlowSpec};
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn pool() -> Mempool {
    Mempool::create(&PoolParams {
        name: format!("t-skbc-{}", SEQ.fetch_add(1, Ordering::Relaxed)),
        elements: 255,
        cache: 0,
        priv_size: skb::PRIV_SIZE,
        data_room: 2176,
        socket: -1,
    })
    .unwrap()
}

fn conf(p: &Mempool, heads: Option<&Mempool>) -> SkbConf {
    SkbConf {
        mode: if heads.is_some() {
            SkbMode::Copy
        } else {
            SkbMode::Build
        },
        headroom: 128,
        buf_truesize: skb::truesize_of(p),
        head_pool: heads.map_or(std::ptr::null_mut(), |h| h.as_ptr()),
        head_truesize: heads.map_or(0, skb::truesize_of),
        copy_len: 128,
    }
}

/// Two in-order 1448 B segments of one flow, each in one buffer.
fn two_segments() -> Vec<Vec<u8>> {
    segment_stream(&FlowSpec::numbered(1, false), 1, 7, 3 * 1448, 1448)[..2].to_vec()
}

/// Builds `frame` (in buffers of `room` bytes), lets `twist` change the
/// chain, then hands it to `build_checked`.
fn build(
    p: &Mempool,
    sc: &SkbConf,
    st: &mut SkbStats,
    frame: &[u8],
    room: usize,
    twist: impl FnOnce(*mut sys::rte_mbuf),
) -> Option<Skb> {
    let m = common::chain(p, frame.chunks(room));
    twist(m);
    // SAFETY: a chain of our pool's mbufs (skb private area), pointers valid.
    unsafe { Skb::build_checked(m, sc, st) }
}

#[test]
fn a_frame_shorter_than_its_pkt_len_is_refused_before_gro() {
    let _e = common::eal();
    let p = pool();
    let heads = pool();
    for copy in [false, true] {
        let sc = conf(&p, copy.then_some(&heads));
        let mut st = SkbStats::default();
        let mut gro: Gro<Skb> = Gro::new(GroConfig::default());
        let mut out = Vec::new();
        let f = two_segments();
        let a = build(&p, &sc, &mut st, &f[0], 4096, |_| {}).expect("a valid frame");
        gro.receive(a, 0, &mut |o| out.push(o));
        let b = build(&p, &sc, &mut st, &f[1], 4096, |m| {
            // SAFETY: a field write on the chain we just built.
            unsafe { (*m).data_len -= 1 };
        });
        assert!(
            b.is_none(),
            "a chain one byte short of its pkt_len is refused"
        );
        assert_eq!(st.malformed, 1);
        gro.flush_all(&mut |o| out.push(o));
        assert_eq!(out.len(), 1);
        drop(out);
    }
    assert_eq!(p.in_use(), 0, "a refused chain is freed");
    assert_eq!(heads.in_use(), 0);
}

#[test]
fn chains_whose_lengths_lie_are_refused_and_counted() {
    let _e = common::eal();
    let p = pool();
    let sc = conf(&p, None);
    let mut st = SkbStats::default();
    let f = &two_segments()[0];
    let twists = [
        "pkt_len one more",
        "pkt_len one less",
        "nb_segs one more",
        "nb_segs one less",
        "nb_segs 0",
        "data past the buffer",
    ];
    for (k, what) in twists.iter().enumerate() {
        for room in [4096, 1000] {
            let s = build(&p, &sc, &mut st, f, room, |m| {
                // SAFETY: field writes on the chain just built, ours.
                unsafe {
                    match k {
                        0 => (*m).pkt_len += 1,
                        1 => (*m).pkt_len -= 1,
                        2 => (*m).nb_segs += 1,
                        3 => (*m).nb_segs -= 1,
                        4 => (*m).nb_segs = 0,
                        _ => {
                            let extra = (*m).buf_len - (*m).data_off - (*m).data_len + 1;
                            (*m).data_len += extra;
                            (*m).pkt_len += extra as u32;
                        }
                    }
                }
            });
            assert!(s.is_none(), "{what}, buffers of {room}: refused");
        }
        assert_eq!(st.malformed, 2 * (k as u64 + 1), "{what}: counted");
    }
    assert_eq!(p.in_use(), 0, "refused chains are freed");
}

#[test]
fn valid_chains_with_empty_segments_are_built() {
    let _e = common::eal();
    let p = pool();
    let sc = conf(&p, None);
    let mut st = SkbStats::default();
    let f = &two_segments()[0];
    for parts in [
        vec![&f[..0], &f[..]],
        vec![&f[..66], &f[66..66], &f[66..]],
        vec![&f[..], &f[..0], &f[..0]],
    ] {
        let n = parts.len();
        let m = common::chain(&p, parts);
        // SAFETY: a valid chain of our pool's mbufs.
        let s = unsafe { Skb::build_checked(m, &sc, &mut st) }.expect("valid");
        assert_eq!(s.len(), f.len());
        assert_eq!(s.segs() as usize, n);
        let mut b = Vec::new();
        s.for_each_chunk(|c| b.extend_from_slice(c));
        assert_eq!(&b, f);
        // SAFETY: walking the chain the skb owns.
        let last = unsafe {
            let mut x = s.as_ptr();
            while !(*x).next.is_null() {
                x = (*x).next;
            }
            x
        };
        assert_eq!(s.meta().tail, last, "the tail is the last segment");
    }
    assert_eq!(st.malformed, 0);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn empty_buffers_count_toward_max_frags() {
    let _e = common::eal();
    let p = pool();
    let sc = conf(&p, None);
    let mut st = SkbStats::default();
    let frames = segment_stream(&FlowSpec::numbered(2, false), 2, 0, 6 * 1448, 1448);
    let cfg = GroConfig {
        max_frags: 3,
        ..GroConfig::default()
    };
    let mut gro: Gro<Skb> = Gro::new(cfg);
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        // Every other frame ends with an empty buffer.
        let parts: Vec<&[u8]> = if i % 2 == 1 {
            vec![f, &f[..0]]
        } else {
            vec![f]
        };
        let m = common::chain(&p, parts);
        // SAFETY: a valid chain of our pool's mbufs.
        let s = unsafe { Skb::build_checked(m, &sc, &mut st) }.expect("valid");
        gro.receive(s, 0, &mut |o| out.push(o));
    }
    gro.flush_all(&mut |o| out.push(o));
    let mut payload = 0;
    for s in &out {
        assert!(s.segs() <= 3, "{} buffers, max_frags 3", s.segs());
        payload += s.len() - 66;
    }
    assert_eq!(payload, 6 * 1448);
    assert!(out.len() < frames.len(), "merged");
    drop(out);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn pop_vlan_takes_off_the_outer_tag_and_gives_its_tci() {
    let _e = common::eal();
    let p = pool();
    let sc = conf(&p, None);
    let mut st = SkbStats::default();
    let mut spec = FlowSpec::numbered(1, false);
    let plain = segment_stream(&spec, 1, 7, 1448, 1448).remove(0);
    spec.vlans = vec![100, 200];
    let qinq = segment_stream(&spec, 1, 7, 1448, 1448).remove(0);
    let mut s = build(&p, &sc, &mut st, &qinq, 4096, |_| {}).expect("a valid frame");
    assert_eq!(s.pop_vlan(), Some(100), "the outer tag first");
    assert_eq!(s.len(), qinq.len() - 4);
    assert_eq!(s.pop_vlan(), Some(200));
    assert_eq!(s.data(), &plain[..], "the untagged frame, MACs kept");
    assert_eq!(s.pop_vlan(), None, "no tag left: nothing changes");
    assert_eq!(s.data(), &plain[..]);
    drop(s);
    assert_eq!(p.in_use(), 0);
}
