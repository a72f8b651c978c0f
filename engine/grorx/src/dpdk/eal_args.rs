//! Builds the EAL command line from grorx's own options, then appends what the
//! user wrote after `--`. The user's arguments win: when they name an option of
//! a family (lcores, memory, devices, file prefix, logging), grorx leaves out
//! its own option of that family instead of relying on EAL's "last one wins",
//! which does not hold for every option (e.g. `-l` together with `--lcores`).

/// Option families: if the user passes any flag of a family, grorx's flags of
/// that family are dropped.
const FAMILIES: &[&[&str]] = &[
    &["-l", "-c", "--lcores", "--main-lcore"],
    &[
        "-m",
        "--socket-mem",
        "--no-huge",
        "--huge-dir",
        "--in-memory",
        "--legacy-mem",
    ],
    &["--file-prefix", "--no-shconf", "--in-memory"],
    &["--no-pci", "-a", "--allow", "-b", "--block"],
    &["--log-level"],
    &["--huge-unlink", "--no-huge", "--in-memory"],
];

/// One option grorx wants to give EAL, with its value(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EalOpt {
    pub flag: &'static str,
    pub value: Option<String>,
}

impl EalOpt {
    pub fn flag(flag: &'static str) -> Self {
        EalOpt { flag, value: None }
    }
    pub fn with(flag: &'static str, value: impl Into<String>) -> Self {
        EalOpt {
            flag,
            value: Some(value.into()),
        }
    }
}

/// The flag part of an argument: `--log-level=8` -> `--log-level`; `-l0,1` -> `-l`.
fn flag_of(arg: &str) -> Option<&str> {
    if let Some(rest) = arg.strip_prefix("--") {
        let name = rest.split('=').next().unwrap_or(rest);
        Some(&arg[..2 + name.len()])
    } else if arg.starts_with('-') && arg.len() >= 2 {
        Some(&arg[..2])
    } else {
        None
    }
}

fn family_of(flag: &str) -> Vec<usize> {
    FAMILIES
        .iter()
        .enumerate()
        .filter(|(_, f)| f.contains(&flag))
        .map(|(i, _)| i)
        .collect()
}

/// Does the user's EAL command line mention this flag (or one of its family)?
pub fn user_overrides(user: &[String], flag: &str) -> bool {
    let fams = family_of(flag);
    user.iter()
        .filter_map(|a| flag_of(a))
        .any(|uf| uf == flag || family_of(uf).iter().any(|f| fams.contains(f)))
}

/// `argv` for rte_eal_init: program name, grorx's options not overridden by
/// the user, then the user's arguments verbatim.
pub fn build(program: &str, ours: &[EalOpt], user: &[String]) -> Vec<String> {
    let mut argv = vec![program.to_string()];
    for o in ours {
        if user_overrides(user, o.flag) {
            continue;
        }
        argv.push(o.flag.to_string());
        if let Some(v) = &o.value {
            argv.push(v.clone());
        }
    }
    argv.extend(user.iter().cloned());
    argv
}

/// The value the final command line gives a flag (the user's if any).
pub fn value_of(argv: &[String], flag: &str) -> Option<String> {
    let mut found = None;
    let mut it = argv.iter().peekable();
    while let Some(a) = it.next() {
        if a == flag {
            found = it.peek().map(|s| s.to_string());
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            found = Some(v.to_string());
        }
    }
    found
}

pub fn has_flag(argv: &[String], flag: &str) -> bool {
    argv.iter().any(|a| flag_of(a) == Some(flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn ours_then_user() {
        let ours = [
            EalOpt::with("--lcores", "0@0,1@1"),
            EalOpt::with("--file-prefix", "grorx-1"),
            EalOpt::flag("--no-pci"),
        ];
        let argv = build("grorx", &ours, &s(&["--vdev", "net_null0"]));
        assert_eq!(
            argv,
            s(&[
                "grorx",
                "--lcores",
                "0@0,1@1",
                "--file-prefix",
                "grorx-1",
                "--no-pci",
                "--vdev",
                "net_null0"
            ])
        );
    }

    #[test]
    fn user_family_wins() {
        let ours = [
            EalOpt::with("--lcores", "0@0,1@1"),
            EalOpt::with("--huge-dir", "/dev/hugepages"),
            EalOpt::flag("--huge-unlink"),
            EalOpt::with("--file-prefix", "grorx-1"),
            EalOpt::flag("--no-pci"),
            EalOpt::with("--log-level", "warning"),
        ];
        let user = s(&[
            "-l",
            "0,1",
            "--no-huge",
            "-m",
            "512",
            "-a",
            "0000:3b:00.0",
            "--log-level=debug",
        ]);
        let argv = build("grorx", &ours, &user);
        // Only the file prefix survives: -l, --no-huge, -a and --log-level override the rest.
        assert_eq!(argv[..3], s(&["grorx", "--file-prefix", "grorx-1"])[..]);
        assert_eq!(&argv[3..], &user[..]);
    }

    #[test]
    fn glued_short_flags_and_equals() {
        assert!(user_overrides(&s(&["-l0-3"]), "--lcores"));
        assert!(user_overrides(&s(&["--file-prefix=x"]), "--file-prefix"));
        assert!(!user_overrides(&s(&["--vdev", "net_null0"]), "--lcores"));
        assert!(user_overrides(&s(&["--in-memory"]), "--file-prefix"));
    }

    #[test]
    fn value_lookup() {
        let argv = s(&["grorx", "--file-prefix", "a", "--file-prefix=b"]);
        assert_eq!(value_of(&argv, "--file-prefix").as_deref(), Some("b"));
        assert!(has_flag(&argv, "--file-prefix"));
        assert!(!has_flag(&argv, "--no-huge"));
    }
}
