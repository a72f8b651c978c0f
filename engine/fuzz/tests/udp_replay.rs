//! The `udp` target's corpus and findings replayed, then a deterministic
//! smoke run of pseudo-random inputs, biased towards valid streams (zero
//! bytes: the first choice of every field, a flow's own size, the next IP ID, a good
//! checksum, no damage).

mod common;

use grorx_fuzz::udp::{check, decode};

fn run(data: &[u8]) -> Result<usize, String> {
    let input = decode(data);
    check(&input)
        .map(|s| s.merged)
        .map_err(|e| format!("{e}\nconfig: {:?}", input.cfg))
}

#[test]
fn corpus_and_findings_replay_clean() {
    common::replay_dirs("udp", &["corpus/udp", "artifacts/udp"], |d| {
        run(d).map(|_| ())
    });
}

#[test]
fn random_smoke() {
    common::smoke("udp", 0x2545_f491_4f6c_dd1d, run);
}
