//! The `csum` target's corpus and findings replayed, then a deterministic
//! smoke run of pseudo-random inputs, biased towards valid streams (zero
//! bytes: the first flow, full segments, nothing damaged).

mod common;

use grorx_fuzz::checksums::{check, decode};

fn run(data: &[u8]) -> Result<usize, String> {
    let input = decode(data);
    check(&input)
        .map(|s| s.merged)
        .map_err(|e| format!("{e}\nconfig: {:?}", input.cfg))
}

#[test]
fn corpus_and_findings_replay_clean() {
    common::replay_dirs("csum", &["corpus/csum", "artifacts/csum"], |d| {
        run(d).map(|_| ())
    });
}

#[test]
fn random_smoke() {
    common::smoke("csum", 0x3c6e_f372_fe94_f82b, run);
}
