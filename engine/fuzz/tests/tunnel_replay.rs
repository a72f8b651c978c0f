//! The `tunnel` target's corpus and findings replayed, then a deterministic
//! smoke run of pseudo-random inputs, biased towards valid streams (zero
//! bytes: the first choice of every field, a full segment, the next sequence
//! number and outer ID, no edit, no damage).

mod common;

use grorx_fuzz::tunnel::{check, decode};

fn run(data: &[u8]) -> Result<usize, String> {
    let input = decode(data);
    check(&input)
        .map(|s| s.merged)
        .map_err(|e| format!("{e}\nconfig: {:?}", input.cfg))
}

#[test]
fn corpus_and_findings_replay_clean() {
    common::replay_dirs("tunnel", &["corpus/tunnel", "artifacts/tunnel"], |d| {
        run(d).map(|_| ())
    });
}

#[test]
fn random_smoke() {
    common::smoke("tunnel", 0x9e37_79b9_7f4a_7c15, run);
}
