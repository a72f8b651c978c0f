//! The skb and GRO on real mbufs (one EAL, 4 KiB pages): chains built by
//! merging are valid (nb_segs, pkt_len, data_len), bytes survive, prepend
//! uses the headroom or chains a counted header mbuf, copy mode works, and
//! every mbuf goes back to its pool.

mod common;

use dpdk_sys::{self as sys, inline as mb};
use grorx::gro::{Gro, GroBuf, GroConfig};
use grorx::mempool::{Mempool, PoolParams};
use grorx::run::{self, EalSetup, RunOptions, SkbOptions, StageOptions};
use grorx::skb::{self, Skb, SkbConf, SkbMode, SkbStats};
use grorx::traffic::{segment_stream, FlowSpec};
use grorx::wire::{Fields, Tcp};
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn pool(room: u16) -> Mempool {
    Mempool::create(&PoolParams {
        name: format!("t-skb-{}", SEQ.fetch_add(1, Ordering::Relaxed)),
        elements: 1023,
        cache: 0,
        priv_size: skb::PRIV_SIZE,
        data_room: room,
        socket: -1,
    })
    .unwrap()
}

fn conf(p: &Mempool, head: Option<&Mempool>, headroom: u16) -> SkbConf {
    SkbConf {
        mode: if head.is_some() {
            SkbMode::Copy
        } else {
            SkbMode::Build
        },
        headroom,
        buf_truesize: skb::truesize_of(p),
        head_pool: head.map(|h| h.as_ptr()).unwrap_or(std::ptr::null_mut()),
        head_truesize: head.map(skb::truesize_of).unwrap_or(0),
        copy_len: 128,
    }
}

/// A frame in one mbuf, or split over mbufs of `room` bytes each.
fn mbuf_of(p: &Mempool, frame: &[u8], room: usize) -> *mut sys::rte_mbuf {
    common::chain(p, frame.chunks(room))
}

/// Checks an mbuf chain's bookkeeping and returns its bytes.
fn chain_bytes(m: *mut sys::rte_mbuf) -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = 0;
    let mut s = m;
    // SAFETY: walking a chain we own.
    unsafe {
        while !s.is_null() {
            out.extend_from_slice(std::slice::from_raw_parts(
                mb::mtod(s),
                mb::data_len(s) as usize,
            ));
            n += 1;
            s = mb::next(s);
        }
        assert_eq!(n, mb::nb_segs(m) as usize, "nb_segs matches the chain");
        assert_eq!(
            out.len(),
            mb::pkt_len(m) as usize,
            "pkt_len matches the data"
        );
    }
    out
}

fn verify(bytes: &[u8]) -> Tcp {
    let t = Tcp::parse(bytes, bytes.len(), true).expect("parses, IP checksum valid");
    let f = Fields::new(bytes, t);
    let tcp = &bytes[t.l4 as usize..];
    let s = grorx::csum::add(f.pseudo_sum(tcp.len() as u32), grorx::csum::sum(tcp));
    assert_eq!(s, 0xffff, "TCP checksum of the merged packet");
    t
}

/// The frames through GRO one at a time (`burst` 1), or in bursts, where a
/// run of one flow's segments is appended to its held chain at once.
fn run_gro(
    p: &Mempool,
    sc: &SkbConf,
    frames: &[Vec<u8>],
    room: usize,
    cfg: GroConfig,
    burst: usize,
) -> Vec<Skb> {
    let mut gro: Gro<Skb> = Gro::new(cfg);
    let mut stats = SkbStats::default();
    let mut out = Vec::new();
    let mut skbs = Vec::new();
    for f in frames.chunks(burst) {
        for f in f {
            // SAFETY: a fresh chain from our pool, given to the skb.
            skbs.push(unsafe { Skb::build(mbuf_of(p, f, room), sc, &mut stats) });
        }
        if burst == 1 {
            gro.receive(skbs.pop().expect("one frame"), 0, &mut |o| out.push(o));
        } else {
            gro.receive_burst(&mut skbs, 0, &mut |o| out.push(o));
        }
    }
    gro.flush_all(&mut |o| out.push(o));
    out
}

/// The last buffer of a chain.
fn last_of(mut m: *mut sys::rte_mbuf) -> *mut sys::rte_mbuf {
    // SAFETY: walking a chain we own.
    unsafe {
        while !mb::next(m).is_null() {
            m = mb::next(m);
        }
    }
    m
}

#[test]
fn merged_chains_are_valid_and_bytes_survive() {
    let _e = common::eal();
    let p = pool(2176);
    let sc = conf(&p, None, 128);
    for (ipv6, burst) in [(false, 1), (true, 1), (false, 32), (true, 32)] {
        let spec = FlowSpec::numbered(1, ipv6);
        let frames = segment_stream(&spec, 1, 42, 20 * 1448, 1448);
        let out = run_gro(&p, &sc, &frames, 4096, GroConfig::default(), burst);
        // 20 segments, the last with PSH: 17 + 3 with max_frags 17.
        assert_eq!(
            out.iter().map(|s| s.meta().gso_segs).collect::<Vec<_>>(),
            vec![17, 3]
        );
        let mut payload = Vec::new();
        for s in out {
            let bytes = chain_bytes(s.as_ptr());
            let t = verify(&bytes);
            payload.extend_from_slice(&bytes[t.payload as usize..]);
            let m = s.meta();
            assert_eq!(
                m.tail,
                last_of(s.as_ptr()),
                "the tail is the chain's last buffer"
            );
            assert_eq!(m.gso_size, 1448);
            assert_eq!(
                (m.l2_len, m.l3_len, m.l4_len),
                (14, if ipv6 { 40 } else { 20 }, 32)
            );
            assert_eq!(
                m.truesize,
                m.gso_segs as u32 * skb::truesize_of(&p),
                "truesize per buffer"
            );
            // The TX offload fields say how to segment it again.
            // SAFETY: field reads of the live head mbuf the skb `s` owns.
            unsafe {
                let w = mb::tx_offload(s.as_ptr());
                assert_eq!(
                    w,
                    mb::tx_offload_word(14, if ipv6 { 40 } else { 20 }, 32, 1448)
                );
            }
        }
        let want: Vec<u8> = frames
            .iter()
            .flat_map(|f| f[spec.header_len()..].to_vec())
            .collect();
        assert_eq!(payload, want);
    }
    assert_eq!(p.in_use(), 0, "every mbuf back in the pool");
}

#[test]
fn multi_segment_frames_count_every_buffer() {
    let _e = common::eal();
    let p = pool(1152);
    let sc = conf(&p, None, 128);
    let spec = FlowSpec::numbered(2, false);
    let frames = segment_stream(&spec, 2, 0, 16 * 1448, 1448);
    // 1514 B frames in 1024 B buffers: 2 buffers each, so 17 frags hold 8 frames.
    let out = run_gro(&p, &sc, &frames, 1024, GroConfig::default(), 1);
    assert_eq!(out[0].meta().gso_segs, 8);
    assert!(out.iter().all(|s| s.segs() <= 17));
    let mut payload = Vec::new();
    for s in out {
        let b = chain_bytes(s.as_ptr());
        let t = verify(&b);
        payload.extend_from_slice(&b[t.payload as usize..]);
    }
    assert_eq!(payload.len(), 16 * 1448);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn header_only_first_buffers_are_dropped_when_merged() {
    let _e = common::eal();
    let p = pool(2176);
    let sc = conf(&p, None, 128);
    let spec = FlowSpec::numbered(3, false);
    let frames = segment_stream(&spec, 3, 0, 4 * 1448, 1448);
    // Each frame as a buffer of exactly its 66 B of headers, then its payload.
    let mut gro: Gro<Skb> = Gro::new(GroConfig::default());
    let mut st = SkbStats::default();
    let mut out = Vec::new();
    for f in &frames {
        let m = common::chain(&p, [&f[..66], &f[66..]]);
        // SAFETY: a fresh chain from our pool (skb private area), given to the skb.
        let s = unsafe { Skb::build(m, &sc, &mut st) };
        gro.receive(s, 0, &mut |o| out.push(o));
    }
    gro.flush_all(&mut |o| out.push(o));
    assert_eq!(out.len(), 1);
    // The head keeps its header buffer; the others' were freed: 2 + 3 buffers.
    assert_eq!(out[0].segs(), 5);
    assert_eq!(out[0].meta().truesize, 5 * skb::truesize_of(&p));
    let b = chain_bytes(out[0].as_ptr());
    verify(&b);
    drop(out);
    assert_eq!(
        p.in_use(),
        0,
        "trimmed header buffers were freed, not leaked"
    );
}

#[test]
fn prepend_uses_headroom_then_chains_a_counted_header() {
    let _e = common::eal();
    let p = pool(2176);
    let spec = FlowSpec::numbered(4, false);
    let frame = segment_stream(&spec, 4, 0, 1000, 1448).remove(0);
    let mut st = SkbStats::default();
    // Enough headroom: a pointer move.
    let sc = conf(&p, None, 128);
    // SAFETY: a fresh chain from our pool (skb private area), given to the skb.
    let mut s = unsafe { Skb::build(mbuf_of(&p, &frame, 4096), &sc, &mut st) };
    let vxlan = [0xabu8; 50];
    s.prepend(50, &p, &mut st).unwrap().copy_from_slice(&vxlan);
    assert_eq!(st.headroom_miss, 0);
    assert_eq!(s.segs(), 1);
    assert_eq!(s.headroom(), 78);
    let b = chain_bytes(s.as_ptr());
    assert_eq!(&b[..50], &vxlan[..]);
    assert_eq!(&b[50..], &frame[..]);
    drop(s);
    // No headroom allowed: a header mbuf is chained in front, and counted.
    let sc = conf(&p, None, 0);
    // SAFETY: a fresh chain from our pool (skb private area), given to the skb.
    let mut s = unsafe { Skb::build(mbuf_of(&p, &frame, 4096), &sc, &mut st) };
    s.prepend(12, &p, &mut st)
        .unwrap()
        .copy_from_slice(&[7u8; 12]);
    assert_eq!(st.headroom_miss, 1);
    assert_eq!(s.segs(), 2);
    let b = chain_bytes(s.as_ptr());
    assert_eq!(&b[..12], &[7u8; 12]);
    assert_eq!(&b[12..], &frame[..]);
    assert!(s.meta().truesize >= 2 * skb::truesize_of(&p));
    // A second prepend fits the new head's room.
    s.prepend(12, &p, &mut st).unwrap();
    assert_eq!(st.headroom_miss, 1);
    drop(s);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn copy_mode_copies_headers_into_a_separate_head() {
    let _e = common::eal();
    let p = pool(2176);
    let heads = pool(128 + 256);
    let sc = conf(&p, Some(&heads), 128);
    let spec = FlowSpec::numbered(5, false);
    let frames = segment_stream(&spec, 5, 0, 6 * 1448, 1448);
    let out = run_gro(&p, &sc, &frames, 4096, GroConfig::default(), 1);
    assert_eq!(out.len(), 1);
    let s = &out[0];
    assert_ne!(s.meta().flags & skb::SKB_COPIED_HEAD, 0);
    // One separate head plus one buffer per frame; headers live in the head.
    let ts = s.meta().truesize;
    assert_eq!(ts, skb::truesize_of(&heads) + 6 * skb::truesize_of(&p));
    let b = chain_bytes(s.as_ptr());
    let t = verify(&b);
    assert_eq!(t.payload_len, 6 * 1448);
    drop(out);
    assert_eq!(p.in_use() + heads.in_use(), 0);
}

#[test]
fn capture_writes_what_gro_delivers() {
    let _e = common::eal();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    let n = 50_000;
    let r = run::run(&RunOptions {
        eal: EalSetup::Existing,
        stage: StageOptions {
            capture: Some(path.clone()),
            ..StageOptions::default()
        },
        gen: grorx::gen::GenConfig {
            count: n,
            flows: 3,
            psh_every: 16,
            ..Default::default()
        },
        ..RunOptions::default()
    })
    .unwrap();
    assert_eq!(r.rx_packets, n);
    assert_eq!(r.mbufs_leaked, 0, "{}", r.text());
    let cap = r.capture.as_ref().unwrap();
    assert_eq!(cap.packets, r.delivered.packets);
    let gro = r.gro.as_ref().unwrap();
    assert_eq!(gro.segments_in, n);
    assert_eq!(gro.packets_out, cap.packets);
    assert!(gro.avg_segments_per_packet > 4.0, "{}", r.text());
    let recs = grorx::pcap::read_all(&path).unwrap();
    assert_eq!(recs.len() as u64, cap.packets);
    let mut segs = 0u64;
    for rec in &recs {
        let t = verify(rec);
        segs += (t.payload_len as u64).div_ceil(1448);
    }
    assert_eq!(segs, n, "every segment's payload is in the capture");
}

#[test]
fn copy_mode_and_headroom_settings_run_end_to_end() {
    let _e = common::eal();
    for (mode, headroom) in [(SkbMode::Copy, 128), (SkbMode::Build, 0)] {
        let r = run::run(&RunOptions {
            eal: EalSetup::Existing,
            skb: SkbOptions { mode, headroom },
            gen: grorx::gen::GenConfig {
                count: 20_000,
                ..Default::default()
            },
            ..RunOptions::default()
        })
        .unwrap();
        assert_eq!((r.rx_packets, r.mbufs_leaked), (20_000, 0), "{}", r.text());
        assert_eq!(r.skb.headroom, headroom);
        assert!(r.delivered.truesize_per_byte > 1.0);
    }
    let e = run::run(&RunOptions {
        eal: EalSetup::Existing,
        skb: SkbOptions {
            headroom: 200,
            ..SkbOptions::default()
        },
        ..RunOptions::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("RTE_PKTMBUF_HEADROOM"), "{e}");
}
