//! The `mbuf` target's checks on stable Rust, without libFuzzer (feature
//! `mbuf`, needs libdpdk; one EAL on 4 KiB pages for the whole binary): its
//! kept corpus, past findings, files named in GRORX_FUZZ_MBUF_REPLAY
//! (colon-separated), a deterministic smoke run, and each way a driver can
//! get a chain wrong, refused and counted.

use grorx_fuzz::mbuf::{check, decode_mbuf, MbufCfg, Twist};
use grorx_fuzz::{decode, FlagChoice, HeadSplit, IdChoice, Input, Layout, Op, SeqChoice, TcpFrame};
use grorx_gro::GroConfig;
use std::path::Path;

mod common;

use common::{files, smoke_inputs};

fn replay(p: &Path) {
    let data = std::fs::read(p).unwrap();
    let (mc, input) = decode_mbuf(&data);
    if let Err(e) = check(&mc, &input) {
        panic!("{}: {e}\nconfig: {:?}\n{mc:?}", p.display(), input.cfg);
    }
}

#[test]
fn corpus_replays_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/mbuf");
    let fs = files(&dir);
    for p in &fs {
        replay(p);
    }
    eprintln!("replayed {} corpus files from {}", fs.len(), dir.display());
}

/// Minimized inputs of past findings (artifacts/mbuf/): they stay clean.
#[test]
fn findings_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts/mbuf");
    for p in files(&dir) {
        replay(&p);
    }
}

#[test]
fn named_files_replay_clean() {
    let Ok(list) = std::env::var("GRORX_FUZZ_MBUF_REPLAY") else {
        return;
    };
    for p in list.split(':').filter(|s| !s.is_empty()) {
        replay(Path::new(p));
    }
}

/// Pseudo-random inputs, biased towards valid TCP streams.
#[test]
fn random_smoke() {
    let mut merged = 0;
    for data in smoke_inputs(0x2545_f491_4f6c_dd1d, 300, 600, 3) {
        let (mc, input) = decode_mbuf(&data);
        match check(&mc, &input) {
            Ok(sum) => merged += sum.gro.merged,
            Err(e) => {
                let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mbuf-smoke-failure.bin");
                std::fs::write(&p, &data).unwrap();
                panic!("{e}\n{mc:?}\ninput saved as {}", p.display());
            }
        }
    }
    assert!(merged > 0, "the smoke inputs merged nothing");
}

/// One flow's in-order segments, `n` of them, in 2 KiB buffers.
fn stream(n: u8) -> Input {
    let mut input = decode(&[]);
    input.cfg = GroConfig::default();
    input.ops = vec![Op::Stream {
        n,
        first: TcpFrame {
            flow: 0,
            ipv6: false,
            vlans: 0,
            tags: 0,
            seq: SeqChoice::Next,
            ack: None,
            flags: FlagChoice::Ack,
            ip_id: IdChoice::Next,
            tsval: None,
            len: None,
            ip: None,
            corrupt: None,
            layout: Layout {
                room: 0,
                head: HeadSplit::Room,
                hints: None,
                dt: 0,
            },
        },
    }];
    input
}

fn twisted(copy: bool, twists: Vec<(u16, Twist)>) -> MbufCfg {
    MbufCfg {
        copy,
        headroom: 128,
        vxlan: false,
        twists,
    }
}

#[test]
fn chains_whose_lengths_lie_are_refused_and_counted() {
    let lies = [
        Twist::PktLen(1),
        Twist::PktLen(-1),
        Twist::PktLen(-1448),
        Twist::NbSegs(1),
        Twist::NbSegs(-1),
        Twist::Overrun { s: 0, n: 0 },
        Twist::Short(0),
        Twist::Short(200),
    ];
    for copy in [false, true] {
        for t in lies {
            let mc = twisted(copy, vec![(3, t), (5, t)]);
            let s = check(&mc, &stream(9)).unwrap_or_else(|e| panic!("{t:?}: {e}"));
            assert_eq!(s.refused, 2, "{t:?}");
            assert_eq!(s.gro.inputs, 8, "{t:?}");
        }
    }
}

#[test]
fn empty_buffers_anywhere_in_a_chain_are_valid() {
    for copy in [false, true] {
        let mc = twisted(copy, (0..10).map(|f| (f, Twist::Empty(f as u8))).collect());
        let s = check(&mc, &stream(9)).unwrap();
        assert_eq!(s.refused, 0);
        assert_eq!(s.transmitted, 10);
    }
}
