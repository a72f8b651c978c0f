//! The `tunnel` target's corpus and findings replayed, then a deterministic
//! smoke run of pseudo-random inputs (as `replay.rs` does for `gro`).

mod common;

use common::{files, smoke_inputs};
use std::path::Path;

fn replay(p: &Path) {
    let data = std::fs::read(p).unwrap();
    let input = grorx_fuzz::tunnel::decode(&data);
    if let Err(e) = grorx_fuzz::tunnel::check(&input) {
        panic!("{}: {e}\nconfig: {:?}", p.display(), input.cfg);
    }
}

#[test]
fn corpus_and_findings_replay_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for dir in ["corpus/tunnel", "artifacts/tunnel"] {
        for p in files(&root.join(dir)) {
            replay(&p);
            n += 1;
        }
    }
    eprintln!("replayed {n} tunnel inputs");
}

/// Pseudo-random inputs, biased towards valid streams (zero bytes: the
/// first choice of every field, a full segment, the next sequence number
/// and outer ID, no edit, no damage).
#[test]
fn random_smoke() {
    let mut merged = 0;
    for data in smoke_inputs(0x9e37_79b9_7f4a_7c15, 2000, 800, 4) {
        let input = grorx_fuzz::tunnel::decode(&data);
        match grorx_fuzz::tunnel::check(&input) {
            Ok(sum) => merged += sum.merged,
            Err(e) => {
                let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tunnel-smoke-failure.bin");
                std::fs::write(&p, &data).unwrap();
                panic!(
                    "{e}\nconfig: {:?}\ninput saved as {}",
                    input.cfg,
                    p.display()
                );
            }
        }
    }
    assert!(merged > 0, "the smoke inputs merged nothing");
}
