//! docs/json.md and the JSON grorx writes, held to each other: every key of
//! every object the runs below write is documented with its type, every
//! documented key is written by one of them, the GRO reason names match, and
//! the exit codes are what the document says.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;

// Each run pins lcores to the same CPUs: one at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn grorx(args: &[&str]) -> Output {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args(args)
        .args(["--name", &format!("json-schema-{}", std::process::id())])
        .output()
        .expect("runs")
}

fn doc() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/json.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A documented key: its type column and its meaning.
#[derive(Debug)]
struct Key {
    ty: String,
    meaning: String,
}

/// The document's key tables by section (`envelope`, `interval`, `report`,
/// `summary`), and its sections' text.
struct Doc {
    keys: BTreeMap<&'static str, BTreeMap<String, Key>>,
    text: BTreeMap<String, String>,
}

fn parse_doc(md: &str) -> Doc {
    let mut keys: BTreeMap<&'static str, BTreeMap<String, Key>> = BTreeMap::new();
    let mut text: BTreeMap<String, String> = BTreeMap::new();
    let mut section: Option<&'static str> = None;
    let mut heading = String::new();
    for line in md.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            heading = h.to_string();
            section = match h {
                "Envelope (every object)" => Some("envelope"),
                "`\"type\": \"interval\"`" => Some("interval"),
                "`\"type\": \"report\"`" => Some("report"),
                "Summary objects" => Some("summary"),
                _ => None,
            };
            continue;
        }
        text.entry(heading.clone()).or_default().push_str(line);
        text.entry(heading.clone()).or_default().push('\n');
        let Some(sec) = section else { continue };
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        if cols.len() < 5 || !cols[1].starts_with('`') {
            continue;
        }
        let key = cols[1].trim_matches('`').to_string();
        let prev = keys.entry(sec).or_default().insert(
            key.clone(),
            Key {
                ty: cols[2].to_string(),
                meaning: cols[3].to_string(),
            },
        );
        assert!(prev.is_none(), "{key} documented twice in {sec}");
    }
    Doc { keys, text }
}

/// The key a documented object's children are found under: its own, or
/// the one its meaning says it is like ("as `gro`, for the queue").
fn children_of<'a>(key: &'a str, k: &'a Key) -> &'a str {
    k.meaning
        .strip_prefix("as `")
        .and_then(|r| r.split('`').next())
        .filter(|_| k.ty.starts_with("object"))
        .unwrap_or(key)
}

struct Checker<'a> {
    doc: &'a Doc,
    seen: BTreeSet<(String, String)>,
    errors: Vec<String>,
}

impl Checker<'_> {
    fn object(&mut self, sec: &'static str, prefix: &str, obj: &serde_json::Map<String, Value>) {
        for (k, v) in obj {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            let (sec_found, d) = match self.doc.keys[sec].get(&key) {
                Some(d) => (sec, d),
                None if prefix.is_empty() => match self.doc.keys["envelope"].get(&key) {
                    Some(d) => ("envelope", d),
                    None => {
                        self.errors
                            .push(format!("{sec}: `{key}` is not documented"));
                        continue;
                    }
                },
                None => {
                    self.errors
                        .push(format!("{sec}: `{key}` is not documented"));
                    continue;
                }
            };
            self.seen.insert((sec_found.to_string(), key.clone()));
            self.value(sec, &key, d, v);
        }
    }

    fn value(&mut self, sec: &'static str, key: &str, d: &Key, v: &Value) {
        let ty = d.ty.as_str();
        let bad = |what: &str| format!("{sec}: `{key}` is documented as {what} but is {v}");
        if v.is_null() {
            if !ty.ends_with("or null") {
                self.errors.push(bad(ty));
            }
            return;
        }
        match ty {
            "integer" if !(v.is_u64() || v.is_i64()) => self.errors.push(bad(ty)),
            "number" if !v.is_number() => self.errors.push(bad(ty)),
            "string" if !v.is_string() => self.errors.push(bad(ty)),
            "boolean" if !v.is_boolean() => self.errors.push(bad(ty)),
            "array of strings" => {
                if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
                    self.errors.push(bad(ty));
                }
            }
            "map" => {
                if !v
                    .as_object()
                    .is_some_and(|m| m.values().all(|x| x.is_u64()))
                {
                    self.errors.push(bad(ty));
                }
            }
            "summary" => match v.as_object() {
                Some(m) => {
                    for (k, x) in m {
                        match self.doc.keys["summary"].get(k) {
                            Some(sd) => {
                                self.seen.insert(("summary".into(), k.clone()));
                                let sd_ty = sd.ty.clone();
                                let ok = match sd_ty.as_str() {
                                    "integer" => x.is_u64(),
                                    _ => x.is_number(),
                                };
                                if !ok {
                                    self.errors.push(format!("summary `{k}` of `{key}` is {x}"));
                                }
                            }
                            None => self
                                .errors
                                .push(format!("summary key `{k}` (in `{key}`) is not documented")),
                        }
                    }
                }
                None => self.errors.push(bad(ty)),
            },
            "object" | "object or null" => match v.as_object() {
                Some(m) => {
                    let under = children_of(key, d).to_string();
                    self.object(sec, &under, m);
                }
                None => self.errors.push(bad(ty)),
            },
            "array of objects" => match v.as_array() {
                Some(a) => {
                    for x in a {
                        match x.as_object() {
                            Some(m) => self.object(sec, &format!("{key}[]"), m),
                            None => self.errors.push(bad(ty)),
                        }
                    }
                }
                None => self.errors.push(bad(ty)),
            },
            "integer" | "number" | "string" | "boolean" => {}
            other => self.errors.push(format!(
                "{sec}: `{key}` has an unknown documented type '{other}'"
            )),
        }
    }
}

fn json_lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is one JSON object"))
        .collect()
}

#[test]
fn every_key_written_is_documented_and_every_documented_key_is_written() {
    let doc = parse_doc(&doc());
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("c.pcap");
    let mut objects = Vec::new();
    // The generator, GRO on, the intervals, cycles and a capture.
    objects.extend(json_lines(&grorx(&[
        "sink",
        "--duration",
        "1.6",
        "--json-interval",
        "0.5",
        "--json",
        "-q",
        "--cycles",
        "--capture",
        cap.to_str().unwrap(),
    ])));
    // A port as the source, forwarding, GRO off.
    objects.extend(json_lines(&grorx(&[
        "forward",
        "--port",
        "net_null0",
        "--to",
        "net_null1",
        "--encap",
        "vxlan",
        "--duration",
        "1",
        "--json",
        "--json-interval",
        "0.5",
        "-q",
        "--no-huge",
        "--gro",
        "off",
    ])));
    let mut c = Checker {
        doc: &doc,
        seen: BTreeSet::new(),
        errors: Vec::new(),
    };
    let mut kinds = BTreeSet::new();
    for o in &objects {
        assert_eq!(o["schema_version"], 1, "{o}");
        let sec = match o["type"].as_str() {
            Some("interval") => "interval",
            Some("report") => "report",
            other => panic!("unknown type {other:?}"),
        };
        kinds.insert(sec);
        c.object(sec, "", o.as_object().unwrap());
    }
    assert_eq!(kinds.len(), 2, "both kinds written");
    for (sec, keys) in &doc.keys {
        for k in keys.keys() {
            if !c.seen.contains(&(sec.to_string(), k.clone())) {
                c.errors
                    .push(format!("{sec}: `{k}` is documented but no run wrote it"));
            }
        }
    }
    // The reason names: each written one is named in the reasons section,
    // and the section names no other.
    let reasons = &doc.text["GRO reasons"];
    let named: BTreeSet<String> = reasons
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            w.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
        })
        .map(String::from)
        .collect();
    let report = objects
        .iter()
        .find(|o| o["type"] == "report" && !o["gro"].is_null());
    let g = &report.expect("a report with GRO")["gro"];
    let mut written = BTreeSet::new();
    for m in ["flush_reasons", "passthrough"] {
        for k in g[m].as_object().unwrap().keys() {
            written.insert(k.clone());
        }
    }
    for w in written.difference(&named) {
        c.errors.push(format!(
            "reason `{w}` is written but not explained under GRO reasons"
        ));
    }
    for n in named.difference(&written) {
        c.errors.push(format!(
            "GRO reasons names `{n}`, which is no reason grorx writes"
        ));
    }
    assert!(
        c.errors.is_empty(),
        "docs/json.md vs output:\n{}",
        c.errors.join("\n")
    );
}

#[test]
fn exit_codes_are_the_documented_ones() {
    let doc = parse_doc(&doc());
    let codes: BTreeSet<i32> = doc.text["Exit codes"]
        .lines()
        .filter_map(|l| l.split('|').nth(1)?.trim().parse().ok())
        .collect();
    // 130 (a second signal) is held to the document by tests/signals.rs.
    assert_eq!(codes, BTreeSet::from([0, 1, 2, 130]));
    let code = |args: &[&str]| {
        let o = grorx(args);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // 0: the run ended as asked.
    let (c, e) = code(&["sink", "--duration", "0.5", "-q"]);
    assert_eq!(c, Some(0), "{e}");
    // 2: refused before anything started, by clap or by grorx's own checks.
    for args in [
        &["sink", "--no-such-option"][..],
        &["sink", "--queues", "0"],
        &["sink", "--json-interval", "0"],
        &["sink", "--burst", "0"],
        &[
            "forward",
            "--port",
            "net_null0",
            "--port-topology",
            "paired",
        ],
        &["sink", "--gro", "rte", "--free", "per-packet"],
    ] {
        let (c, e) = code(args);
        assert_eq!(c, Some(2), "{args:?}: {e}");
        assert!(
            e.lines().last().unwrap_or("").starts_with("grorx: error:") || e.contains("error:"),
            "{args:?}: {e}"
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_grorx"))
        .args(["sink", "--name", "a/b"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // 1: the run failed once started (a device EAL does not know).
    let (c, e) = code(&[
        "sink",
        "--port",
        "net_nosuch0",
        "--duration",
        "1",
        "--no-huge",
    ]);
    assert_eq!(c, Some(1), "{e}");
}
