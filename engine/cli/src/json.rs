//! The machine output's envelope: every JSON object grorx writes on stdout
//! starts with `schema_version` and `type`, so a reader of a mixed stream
//! (`--json-interval` lines, then the `--json` report) knows what each line
//! is and whether it understands it. `docs/json.md` documents every key.

use serde::Serialize;

/// Bumped when a key is renamed, removed or changes meaning; new keys do not
/// bump it (readers ignore keys they do not know).
pub const SCHEMA_VERSION: u32 = 1;

/// What a line on stdout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One `--json-interval` period: counts are for the period only.
    Interval,
    /// The final report (`--json`): counts are for the whole run.
    Report,
}

#[derive(Serialize)]
struct Tagged<'a, T: Serialize> {
    schema_version: u32,
    #[serde(rename = "type")]
    kind: Kind,
    #[serde(flatten)]
    body: &'a T,
}

/// `body` as one line of JSON, its keys after the envelope's.
pub fn line<T: Serialize>(kind: Kind, body: &T) -> serde_json::Result<String> {
    serde_json::to_string(&Tagged {
        schema_version: SCHEMA_VERSION,
        kind,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Body {
        rx_packets: u64,
    }

    #[test]
    fn the_envelope_comes_first() {
        let s = line(Kind::Interval, &Body { rx_packets: 3 }).unwrap();
        assert_eq!(
            s,
            r#"{"schema_version":1,"type":"interval","rx_packets":3}"#
        );
    }
}
