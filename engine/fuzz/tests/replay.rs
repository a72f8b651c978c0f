//! Replays the kept corpus (and any files named in GRORX_FUZZ_REPLAY,
//! colon-separated) through the fuzz target's checks, then a quick
//! deterministic smoke run of pseudo-random inputs: the CI-friendly form of
//! the fuzz target, on stable Rust, without cargo-fuzz or libFuzzer.

mod common;

use common::{files, smoke_inputs};
use std::path::Path;

fn replay(p: &Path) {
    let data = std::fs::read(p).unwrap();
    let input = grorx_fuzz::decode(&data);
    if let Err(e) = grorx_fuzz::check(&input) {
        panic!("{}: {e}\nconfig: {:?}", p.display(), input.cfg);
    }
}

#[test]
fn corpus_replays_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/gro");
    let fs = files(&dir);
    for p in &fs {
        replay(p);
    }
    eprintln!("replayed {} corpus files from {}", fs.len(), dir.display());
}

/// The minimized inputs of past findings (artifacts/gro/, see
/// artifacts/README.md): regression inputs, they must stay clean.
#[test]
fn findings_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts/gro");
    for p in files(&dir) {
        replay(&p);
    }
}

#[test]
fn named_files_replay_clean() {
    let Ok(list) = std::env::var("GRORX_FUZZ_REPLAY") else {
        return;
    };
    for p in list.split(':').filter(|s| !s.is_empty()) {
        replay(Path::new(p));
    }
}

/// Pseudo-random inputs, biased towards valid TCP streams: a few thousand
/// executions in a second or two.
#[test]
fn random_smoke() {
    let mut merged = 0;
    // Many zero bytes: Next/None/ACK choices, i.e. in-order streams.
    for data in smoke_inputs(0x9e37_79b9_7f4a_7c15, 2000, 600, 3) {
        let input = grorx_fuzz::decode(&data);
        match grorx_fuzz::check(&input) {
            Ok(sum) => merged += sum.merged,
            Err(e) => {
                let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join("smoke-failure.bin");
                std::fs::write(&p, &data).unwrap();
                panic!(
                    "{e}\nconfig: {:?}\ninput saved as {} (replay: cargo run --release --example replay -- -v FILE)",
                    input.cfg,
                    p.display()
                );
            }
        }
    }
    assert!(merged > 0, "the smoke inputs merged nothing");
}
