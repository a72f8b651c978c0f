//! Linux's GRO conformance cases ([`crate::selftest`]) on the GRO core:
//! each case's frames in one poll of a GRO of its own, its FIN last; what
//! comes out before the FIN must have the payload sizes Linux delivers, in
//! that order. The engine test (grorx-cli's `tests/conformance.rs`) replays
//! the same frames through the `grorx` binary.

use super::*;
use crate::selftest::{self, Case};

/// Feeds one case's frames (the FIN last) and returns the payload sizes of
/// what came out before the FIN, in order, told from the input ids.
fn run(case: &Case) -> Vec<usize> {
    let mut g = gro(GroConfig::default());
    let payload_of: Vec<usize> = case
        .frames
        .iter()
        .map(|f| selftest::payload_len(f).expect("a TCP frame"))
        .collect();
    let fin_id = case.frames.len() as u64 - 1;
    let bufs = (0..)
        .zip(&case.frames)
        .map(|(i, f)| VecBuf::new(i, f.clone()));
    let mut out = feed(&mut g, bufs.collect());
    out.extend(flush(&mut g));
    let end = out.iter().position(|o| o.ids.contains(&fin_id));
    assert_eq!(
        end,
        Some(out.len() - 1),
        "{}: the FIN comes last",
        case.name
    );
    out[..out.len() - 1]
        .iter()
        .map(|o| o.ids.iter().map(|&i| payload_of[i as usize]).sum())
        .collect()
}

#[test]
fn linux_selftest_cases_give_linux_results() {
    let cases = selftest::cases();
    let mut failed = Vec::new();
    for case in &cases {
        let got = run(case);
        if got != case.expected {
            failed.push(format!(
                "{} {}: got {got:?}, Linux gives {:?}",
                if case.ipv6 { "IPv6" } else { "IPv4" },
                case.name,
                case.expected
            ));
        }
    }
    assert_eq!(cases.len(), 25 + 19, "every case of both families");
    assert!(
        failed.is_empty(),
        "{} of {} cases differ:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}
