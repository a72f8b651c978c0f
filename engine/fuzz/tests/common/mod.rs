//! What the replay tests share: the files of a corpus directory, and the
//! deterministic pseudo-random inputs of their smoke runs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The files in `dir`, sorted (none when it does not exist).
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `count` inputs from a xorshift seeded with `seed`, each shorter than
/// `max_len` bytes, one byte in `one_in` random and the rest zero (the
/// first choice of every field: valid, in-order streams).
pub fn smoke_inputs(seed: u64, count: usize, max_len: u64, one_in: u64) -> Vec<Vec<u8>> {
    let mut s = seed;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..count)
        .map(|_| {
            let n = (next() % max_len) as usize;
            (0..n)
                .map(|_| {
                    let r = next();
                    if r % one_in == 0 {
                        (r >> 8) as u8
                    } else {
                        0
                    }
                })
                .collect()
        })
        .collect()
}

/// Replays every file of `dirs` (below the crate) with `check`, which
/// returns the input's configuration on failure too, for the message.
pub fn replay_dirs(name: &str, dirs: &[&str], check: impl Fn(&[u8]) -> Result<(), String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for dir in dirs {
        for p in files(&root.join(dir)) {
            let data = std::fs::read(&p).unwrap();
            if let Err(e) = check(&data) {
                panic!("{}: {e}", p.display());
            }
            n += 1;
        }
    }
    eprintln!("replayed {n} {name} inputs");
}

/// `smoke_inputs` through `check` (the packets it merged, or what broke);
/// a failing input is saved under the target's temporary directory.
pub fn smoke(name: &str, seed: u64, check: impl Fn(&[u8]) -> Result<usize, String>) {
    let mut merged = 0;
    for data in smoke_inputs(seed, 2000, 800, 4) {
        match check(&data) {
            Ok(m) => merged += m,
            Err(e) => {
                let p = Path::new(env!("CARGO_TARGET_TMPDIR"))
                    .join(format!("{name}-smoke-failure.bin"));
                std::fs::write(&p, &data).unwrap();
                panic!("{e}\ninput saved as {}", p.display());
            }
        }
    }
    assert!(merged > 0, "the smoke inputs merged nothing");
}
