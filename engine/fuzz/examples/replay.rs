//! Replays fuzz inputs (files or directories) through the GRO checks on
//! stable Rust, without libFuzzer:
//!   cargo run --release --example replay -- corpus/gro artifacts/gro/crash-...
//! With -v, prints each decoded input. With --mbuf (built with the `mbuf`
//! feature), replays `mbuf` target inputs.

use std::path::{Path, PathBuf};

fn main() {
    let mut verbose = false;
    let mut mbuf = false;
    let mut paths: Vec<PathBuf> = Vec::new();
    for a in std::env::args().skip(1) {
        if a == "-v" {
            verbose = true;
            continue;
        }
        if a == "--mbuf" {
            mbuf = true;
            continue;
        }
        let p = PathBuf::from(a);
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&p)
                .expect("readable directory")
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            v.sort();
            paths.extend(v);
        } else {
            paths.push(p);
        }
    }
    if mbuf {
        return replay_mbuf(&paths, verbose);
    }
    let mut failed = 0;
    let (mut ins, mut outs, mut merged) = (0, 0, 0);
    let mut stats = grorx_gro::GroStats::default();
    for p in &paths {
        let data = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let input = grorx_fuzz::decode(&data);
        if verbose {
            println!("{}: {:#?}", p.display(), input);
        }
        match grorx_fuzz::check(&input) {
            Ok(s) => {
                ins += s.inputs;
                outs += s.outputs;
                merged += s.merged;
                stats.add(&s.stats);
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {}: {e}\n  config: {:?}", display(p), input.cfg);
            }
        }
    }
    let r = stats.report();
    println!("flush reasons reached: {:?}", r.flush_reasons);
    println!("pass-through reasons reached: {:?}", r.passthrough);
    println!(
        "max segments per packet {}, merged segments {}",
        r.max_segments_per_packet, r.merged_segments
    );
    println!(
        "reorder window: {} segments waited, {} merged once their gap filled",
        stats.reorder_held, stats.reorder_filled
    );
    println!(
        "{} files, {} failed; {ins} frames in, {outs} out, {merged} merged outputs",
        paths.len(),
        failed
    );
    std::process::exit(if failed > 0 { 1 } else { 0 });
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(feature = "mbuf")]
fn replay_mbuf(paths: &[PathBuf], verbose: bool) {
    use grorx_fuzz::mbuf::{check, decode_mbuf};
    let mut failed = 0;
    let (mut ins, mut merged, mut refused, mut sent, mut rewritten) = (0, 0, 0, 0, 0);
    let mut fwd = grorx::forward::ForwardStats::default();
    for p in paths {
        let data = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let (mc, input) = decode_mbuf(&data);
        if verbose {
            println!("{}: {mc:#?}\n{input:#?}", p.display());
        }
        match check(&mc, &input) {
            Ok(s) => {
                ins += s.gro.inputs;
                merged += s.gro.merged;
                refused += s.refused;
                sent += s.transmitted;
                rewritten += s.rewritten;
                fwd.add(&s.forward);
            }
            Err(e) => {
                failed += 1;
                println!(
                    "FAIL {}: {e}\n  config: {:?}\n  {mc:?}",
                    display(p),
                    input.cfg
                );
            }
        }
    }
    println!("forward stage: {fwd:?}");
    println!(
        "{} files, {failed} failed; {ins} frames into GRO, {refused} refused before it, \
         {merged} merged outputs, {sent} frames sent ({rewritten} rewritten)",
        paths.len()
    );
    std::process::exit(if failed > 0 { 1 } else { 0 });
}

#[cfg(not(feature = "mbuf"))]
fn replay_mbuf(_: &[PathBuf], _: bool) {
    eprintln!("replay: --mbuf needs the `mbuf` feature (cargo run --features mbuf ...)");
    std::process::exit(2);
}
