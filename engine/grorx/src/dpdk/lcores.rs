//! Which CPU each EAL lcore runs on.
//!
//! Workers get the CPUs the user lists (or every CPU but the main one). The
//! main lcore (stats, control) goes on a CPU no worker uses when there is one.
//! The embedded traffic generator needs its own lcore: it shares the main
//! lcore's CPU when no spare CPU exists, since the main lcore mostly sleeps.

use crate::setting::Setting;

/// The lcore plan: lcore ids are dense from 0 (main), then workers, then the
/// generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LcorePlan {
    pub main_cpu: usize,
    pub worker_cpus: Vec<usize>,
    pub generator_cpu: Option<usize>,
}

impl LcorePlan {
    /// `available`: CPUs this process may run on; `workers`: the user's
    /// `RunOptions::cores`, if any; `generator`: whether the built-in source runs.
    pub fn new(
        available: &[usize],
        workers: Option<&[usize]>,
        generator: bool,
    ) -> Result<Self, String> {
        if available.is_empty() {
            return Err("no CPU is available to this process".into());
        }
        let worker_cpus: Vec<usize> = match workers {
            Some(w) => {
                if w.is_empty() {
                    return Err(format!(
                        "{}: lists no CPU: give one or more (e.g. 1, or 2-5)",
                        Setting::Cores
                    ));
                }
                if let Some(bad) = w.iter().find(|c| !available.contains(c)) {
                    return Err(format!(
                        "{}: CPU {bad} is not available to this process (available: {})",
                        Setting::Cores,
                        format_cpus(available)
                    ));
                }
                w.to_vec()
            }
            // Default: one worker, on the last CPU (the first is where the
            // OS tends to put interrupts and everything else).
            None => vec![*available.last().unwrap()],
        };
        let spare: Vec<usize> = available
            .iter()
            .copied()
            .filter(|c| !worker_cpus.contains(c))
            .collect();
        let main_cpu = spare.first().copied().unwrap_or(available[0]);
        let generator_cpu = generator.then(|| spare.get(1).copied().unwrap_or(main_cpu));
        Ok(LcorePlan {
            main_cpu,
            worker_cpus,
            generator_cpu,
        })
    }

    /// EAL's `--lcores` value: `0@main,1@w1,2@w2,...,G@gen`.
    pub fn eal_lcores(&self) -> String {
        let mut parts = vec![format!("0@{}", self.main_cpu)];
        for (i, c) in self.worker_cpus.iter().enumerate() {
            parts.push(format!("{}@{}", i + 1, c));
        }
        if let Some(g) = self.generator_cpu {
            parts.push(format!("{}@{}", self.worker_cpus.len() + 1, g));
        }
        parts.join(",")
    }
}

/// Parses a CPU list: `3`, `1-4`, `0,2,4-6`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let err = || format!("'{s}' is not a CPU list: give e.g. 1, 1-3 or 0,2,4-6");
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(err());
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| err())?;
                let b: usize = b.trim().parse().map_err(|_| err())?;
                if a > b || b - a > 4096 {
                    return Err(err());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| err())?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

pub fn format_cpus(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// CPUs this process may run on (its affinity mask), read before EAL pins
/// the thread.
pub fn available_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cpus_default() {
        let p = LcorePlan::new(&[0, 1], None, true).unwrap();
        assert_eq!(p.main_cpu, 0);
        assert_eq!(p.worker_cpus, vec![1]);
        assert_eq!(p.generator_cpu, Some(0), "generator shares the main CPU");
        assert_eq!(p.eal_lcores(), "0@0,1@1,2@0");
    }

    #[test]
    fn spare_cpu_goes_to_generator() {
        let p = LcorePlan::new(&[0, 1, 2, 3], Some(&[2, 3]), true).unwrap();
        assert_eq!(p.main_cpu, 0);
        assert_eq!(p.generator_cpu, Some(1));
        assert_eq!(p.eal_lcores(), "0@0,1@2,2@3,3@1");
    }

    #[test]
    fn one_cpu_shares_everything() {
        let p = LcorePlan::new(&[0], None, false).unwrap();
        assert_eq!(p.eal_lcores(), "0@0,1@0");
    }

    #[test]
    fn bad_cores_refused() {
        assert!(LcorePlan::new(&[0, 1], Some(&[5]), false)
            .unwrap_err()
            .contains("not available"));
        assert!(LcorePlan::new(&[0, 1], Some(&[]), false).is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2,4-6").unwrap(), vec![0, 2, 4, 5, 6]);
        assert_eq!(parse_cpu_list("3").unwrap(), vec![3]);
        for bad in ["", "a", "3-1", "1,,2", "-1"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }
}
