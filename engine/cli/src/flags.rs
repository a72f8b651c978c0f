//! The libraries name a setting as Rust code writes it (`GroConfig::max_frags`,
//! `RunOptions::rx.queues`); the command's user gave a flag. This is the one
//! place that maps one to the other, for the messages the command prints.

use grorx::gro::Setting as Gro;
use grorx::Setting as Run;

/// The flag that sets a setting of the engine's; None for those the
/// command has no flag of its own for.
pub fn run_flag(s: Run) -> Option<&'static str> {
    Some(match s {
        Run::Name => "--name",
        Run::Duration => "--duration",
        Run::NoHuge => "--no-huge",
        Run::Ports => "--port",
        Run::Cores => "--cores",
        Run::Queues => "--queues",
        Run::RxDesc => "--rx-desc",
        Run::Burst => "--burst",
        Run::Mtu => "--mtu",
        Run::DataRoom => "--data-room",
        Run::PoolCache => "--pool-cache",
        Run::Gro => "--gro",
        Run::Headroom => "--headroom",
        Run::SkbMode => "--skb-mode",
        Run::Capture => "--capture",
        Run::ForwardTo => "--to",
        Run::Encap => "--encap",
        Run::Vni => "--vni",
        Run::RteGro => "--gro rte",
        Run::FreePerPacket => "--free per-packet",
        Run::GenFlows => "--gen-flows",
        Run::GenMss => "--gen-mss",
        Run::GenInterleave => "--gen-interleave",
        Run::GenVlan => "--gen-vlan",
        // A stage of the command's is built in; the generator's burst is
        // its own.
        Run::Outputs | Run::GenBurst => return None,
    })
}

/// The flag that sets a setting of the GRO core's.
pub fn gro_flag(s: Gro) -> &'static str {
    match s {
        Gro::MaxFrags => "--max-frags",
        Gro::MaxSize => "--gro-max-size",
        Gro::Flows => "--gro-flows",
        Gro::FlowCache => "--gro-flow-cache",
        Gro::ReorderSegments => "--gro-reorder",
        Gro::VxlanPorts => "--vxlan-port",
    }
}

/// Every setting's name and the flag it reads as.
fn pairs() -> impl Iterator<Item = (&'static str, &'static str)> {
    let run = Run::ALL
        .into_iter()
        .filter_map(|s| run_flag(s).map(|f| (s.name(), f)));
    let gro = Gro::ALL.into_iter().map(|s| (s.name(), gro_flag(s)));
    run.chain(gro)
}

/// A message of the libraries' in the command's words: every setting it
/// names (the one refused, and any it says to change instead) as its flag.
/// No name begins another (a test holds them to it), so the order of the
/// replacements does not matter.
pub fn in_flags(message: &str) -> String {
    pairs().fold(message.to_string(), |m, (name, flag)| {
        if m.contains(name) {
            m.replace(name, flag)
        } else {
            m
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_setting_reads_as_its_flag() {
        let e = grorx::GroConfig {
            max_frags: 600,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            in_flags(&e.to_string()),
            "--max-frags 600: out of range: give 1..=512 (Linux uses 17)"
        );
        let e = grorx::SettingError::new(Run::Queues, 0, format!("lower {}", Gro::Flows));
        assert_eq!(in_flags(&e.to_string()), "--queues 0: lower --gro-flows");
    }

    #[test]
    fn no_name_begins_another_and_every_flag_is_the_commands() {
        let names: Vec<_> = pairs().collect();
        for (i, (a, _)) in names.iter().enumerate() {
            for (b, _) in &names[i + 1..] {
                assert!(!a.starts_with(b) && !b.starts_with(a), "{a}, {b}");
            }
        }
        let cmd = <crate::Cli as clap::CommandFactory>::command();
        let mut longs = Vec::new();
        for sub in cmd.get_subcommands() {
            longs.extend(sub.get_arguments().filter_map(|a| a.get_long()));
        }
        for (name, flag) in names {
            let long = flag.trim_start_matches("--").split(' ').next().unwrap();
            assert!(
                longs.contains(&long),
                "{name}: {flag} is no flag of grorx's"
            );
        }
    }
}
