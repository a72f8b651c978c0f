//! Bringing EAL up: lcores from `RunOptions::cores`, the hugepage decision (use,
//! reserve when root, or fall back to 4 KiB pages and say so), the
//! instance's name as file prefix (claimed first), device allow-lists, then the user's own EAL arguments.

use super::options::{RunOptions, NO_HUGE_MIN_MB};
use crate::dpdk::eal::Eal;
use crate::dpdk::eal_args::{self, EalOpt};
use crate::dpdk::lcores::{self, LcorePlan};
use crate::gro::Setting as GroSetting;
use crate::setting::Setting;
use anyhow::{bail, Result};

/// Starts EAL from the options; returns it and the hugepage summary.
pub(super) fn start_eal(
    opts: &RunOptions,
    user_args: &[String],
    no_huge: bool,
) -> Result<(&'static Eal, String)> {
    super::instance::check_name(&opts.name)?;
    super::instance::claim(&opts.name)?;
    let mut ours: Vec<EalOpt> = Vec::new();
    let lcore_count = lcore_args(opts, user_args, &mut ours)?;

    // Hugepages: use what is there, reserve more when root, else fall back.
    let user_mem = eal_args::user_overrides(user_args, "-m");
    let need = opts.memory_needed(lcore_count)?;
    if let Some(total) = hugepages::memory_total().filter(|&t| need > t) {
        bail!(
            "the run's mbuf pools need {} MiB, more than this machine's {} MiB of memory: \
             lower {}, {}, {}, {} or {}",
            need >> 20,
            total >> 20,
            Setting::Queues,
            Setting::RxDesc,
            GroSetting::Flows,
            GroSetting::ReorderSegments,
            Setting::PoolCache,
        );
    }
    let no_huge_mb = (need >> 20).max(NO_HUGE_MIN_MB);
    let summary;
    if user_mem {
        summary = "hugepages: as the EAL arguments say".to_string();
    } else if no_huge {
        summary = format!(
            "hugepages: off, as asked: 4 KiB pages, -m {no_huge_mb} (expect a lower packet rate from TLB misses)"
        );
        ours.push(EalOpt::flag("--no-huge"));
        ours.push(EalOpt::with("-m", no_huge_mb.to_string()));
    } else {
        summary = hugepage_args(need, no_huge_mb, &mut ours)?;
    }
    ours.push(EalOpt::with("--file-prefix", opts.name.clone()));
    let (no_pci, allow) = device_args(opts);
    ours.extend(no_pci);
    // EAL and telemetry chatter at start-up is noise here; the user's own
    // --log-level wins.
    ours.push(EalOpt::with("--log-level", "lib.eal:warning"));
    ours.push(EalOpt::with("--log-level", "lib.telemetry:error"));
    // PCI allow-list entries are added whatever the user passes (they are
    // what the RX and output ports name), then the user's own arguments.
    let mut user = allow;
    user.extend(user_args.iter().cloned());
    let argv = eal_args::build("grorx", &ours, &user);
    let eal = Eal::init(&argv)?;
    Ok((eal, summary))
}

/// `--lcores` from `--cores` (unless the user's EAL arguments give it);
/// returns how many lcores the run has.
fn lcore_args(opts: &RunOptions, user_args: &[String], ours: &mut Vec<EalOpt>) -> Result<u32> {
    let gen = opts.uses_generator();
    let user_lcores = eal_args::user_overrides(user_args, "--lcores");
    let plan_lcores = if user_lcores {
        None
    } else {
        let avail = lcores::available_cpus();
        Some(LcorePlan::new(&avail, opts.cores.as_deref(), gen).map_err(anyhow::Error::msg)?)
    };
    if let Some(p) = &plan_lcores {
        ours.push(EalOpt::with("--lcores", p.eal_lcores()));
    }
    Ok(plan_lcores
        .as_ref()
        .map(|p| 1 + p.worker_cpus.len() + p.generator_cpu.is_some() as usize)
        .unwrap_or(3) as u32)
}

/// The hugepage decision for `need` bytes (use what is there, reserve more
/// when root, else 4 KiB pages with `no_huge_mb`) as EAL arguments; returns
/// its summary.
fn hugepage_args(need: u64, no_huge_mb: u64, ours: &mut Vec<EalOpt>) -> Result<String> {
    let status = hugepages::Status::read().unwrap_or_else(|_| hugepages::Status {
        default_page_size: None,
        pools: Vec::new(),
        mounts: Vec::new(),
        problems: Vec::new(),
    });
    let req = hugepages::Request {
        bytes: need,
        page_size: None,
        allow_setup: hugepages::is_root(),
        allow_fallback: true,
        no_huge_mem_mb: no_huge_mb,
    };
    let mut d = hugepages::decide(&status, &req);
    if matches!(d, hugepages::Decision::Setup { .. }) {
        d = match d.apply() {
            Ok(d) => d,
            Err(e) => hugepages::Decision::NoHuge {
                reason: format!("reserving failed: {e}"),
                mem_mb: no_huge_mb,
            },
        };
    }
    let args = d.eal_args();
    let mut it = args.into_iter().peekable();
    while let Some(flag) = it.next() {
        let flag: &'static str = match flag.as_str() {
            "--huge-dir" => "--huge-dir",
            "--no-huge" => "--no-huge",
            "-m" => "-m",
            other => bail!("unexpected hugepage EAL argument {other}"),
        };
        let value = it.next_if(|v| !v.starts_with('-'));
        ours.push(EalOpt { flag, value });
    }
    if matches!(d, hugepages::Decision::UseExisting { .. }) {
        // Hugepage files are unlinked once mapped: nothing lingers after exit.
        ours.push(EalOpt::flag("--huge-unlink"));
    }
    Ok(d.summary())
}

/// EAL's device arguments: `-a` for each PCI device the run names (its RX
/// ports and its output ports, each once, in full form) so that only they
/// are probed, or `--no-pci` when it names none.
fn device_args(opts: &RunOptions) -> (Option<EalOpt>, Vec<String>) {
    let mut pci: Vec<String> = Vec::new();
    for a in opts
        .ports
        .iter()
        .chain(opts.output_ports())
        .filter_map(|p| p.eal_allow())
    {
        if !pci.contains(&a) {
            pci.push(a);
        }
    }
    let no_pci = pci.is_empty().then(|| EalOpt::flag("--no-pci"));
    let allow = pci
        .into_iter()
        .flat_map(|a| ["-a".to_string(), a])
        .collect();
    (no_pci, allow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::spec::PortSpec;
    use crate::run::{ForwardOptions, StageOptions};

    fn spec(s: &str) -> PortSpec {
        PortSpec::parse(s).unwrap()
    }

    /// EAL's argv from the device arguments alone.
    fn argv(opts: &RunOptions) -> Vec<String> {
        let (no_pci, allow) = device_args(opts);
        let ours: Vec<EalOpt> = no_pci.into_iter().collect();
        eal_args::build("grorx", &ours, &allow)
    }

    #[test]
    fn pci_output_ports_are_on_the_allow_list_too() {
        let opts = RunOptions {
            ports: vec![spec("3b:00.0")],
            stage: StageOptions {
                forward: Some(ForwardOptions {
                    to: vec![spec("0000:5E:00.1,txq_inline_max=0")],
                    encap: crate::forward::Encap::None,
                }),
                ..StageOptions::default()
            },
            ..RunOptions::default()
        };
        assert_eq!(
            argv(&opts),
            [
                "grorx",
                "-a",
                "0000:3b:00.0",
                "-a",
                "0000:5e:00.1,txq_inline_max=0"
            ]
        );
    }

    #[test]
    fn a_pci_output_alone_keeps_the_pci_bus() {
        let opts = RunOptions {
            ports: vec![spec("net_null0")],
            stage: StageOptions {
                outputs: vec![spec("3b:00.0")],
                ..StageOptions::default()
            },
            ..RunOptions::default()
        };
        assert_eq!(argv(&opts), ["grorx", "-a", "0000:3b:00.0"]);
        let opts = RunOptions {
            ports: vec![spec("net_null0")],
            ..RunOptions::default()
        };
        assert_eq!(argv(&opts), ["grorx", "--no-pci"]);
    }
}
