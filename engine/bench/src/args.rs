//! `grorx sink` argument lists: layering (source < experiment < cell, flag
//! by flag, since clap refuses a flag given twice) and the flags the bench
//! owns.

use anyhow::{bail, Result};

/// Flags the bench sets on every run itself.
const RESERVED: &[&str] = &["--json", "--quiet", "-q", "--duration", "--json-interval"];

/// Refuses arguments the bench owns, and `--` (EAL arguments go in `eal`).
pub fn check_reserved(args: &[String]) -> Result<()> {
    for a in args {
        let flag = a.split('=').next().unwrap_or(a);
        if RESERVED.contains(&flag) {
            bail!("{a}: the bench sets --duration, --json, -q and --json-interval itself");
        }
        if a == "--" {
            bail!("`--` in args: put EAL arguments in `eal = [...]`");
        }
    }
    Ok(())
}

/// An option and its value(s) as written: `["--max-frags", "3"]`,
/// `["--no-huge"]`, `["--gro=on"]`.
fn groups(args: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for a in args {
        if a.starts_with('-') && a.len() > 1 {
            let flag = a.split('=').next().unwrap_or(a).to_string();
            out.push((flag, vec![a.clone()]));
        } else if let Some(last) = out.last_mut() {
            last.1.push(a.clone());
        } else {
            out.push((String::new(), vec![a.clone()]));
        }
    }
    out
}

/// Layers argument lists: a flag in a later list replaces every occurrence
/// of that flag in the earlier ones (so `--port` given by a cell replaces
/// the source's), and keeps its own position at the end.
pub fn layer(lists: &[&[String]]) -> Vec<String> {
    let mut acc: Vec<(String, Vec<String>)> = Vec::new();
    for list in lists {
        let g = groups(list);
        acc.retain(|(f, _)| f.is_empty() || !g.iter().any(|(h, _)| h == f));
        acc.extend(g);
    }
    acc.into_iter().flat_map(|(_, v)| v).collect()
}

/// `--flag` present in `args`?
pub fn has_flag(args: &[String], flag: &str) -> bool {
    groups(args).iter().any(|(f, _)| f == flag)
}

/// The value of `--flag V` / `--flag=V` (the last one).
pub fn flag_value(args: &[String], flag: &str) -> Option<String> {
    groups(args)
        .into_iter()
        .rev()
        .find(|(f, _)| f == flag)
        .and_then(|(_, v)| {
            if let Some((_, val)) = v[0].split_once('=') {
                Some(val.to_string())
            } else {
                v.get(1).cloned()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn later_lists_win_flag_by_flag() {
        let src = s(&["--port", "net_pcap0,rx_pcap=a.pcap,infinite_rx=1"]);
        let exp = s(&["--gro", "on", "--no-huge", "--max-frags", "17"]);
        let cell = s(&["--max-frags=3", "--gro", "off"]);
        assert_eq!(
            layer(&[&src, &exp, &cell]),
            s(&[
                "--port",
                "net_pcap0,rx_pcap=a.pcap,infinite_rx=1",
                "--no-huge",
                "--max-frags=3",
                "--gro",
                "off"
            ])
        );
        assert!(has_flag(&exp, "--no-huge"));
        assert!(!has_flag(&exp, "--no-promisc"));
        assert_eq!(flag_value(&cell, "--max-frags").as_deref(), Some("3"));
        assert_eq!(flag_value(&cell, "--gro").as_deref(), Some("off"));
        assert_eq!(flag_value(&exp, "--no-huge"), None);
    }

    #[test]
    fn reserved_flags_are_refused() {
        assert!(check_reserved(&s(&["--duration", "3"])).is_err());
        assert!(check_reserved(&s(&["--json"])).is_err());
        assert!(check_reserved(&s(&["--", "-l", "0"])).is_err());
        assert!(check_reserved(&s(&["--gro", "off"])).is_ok());
    }
}
