//! The table `grorx hugepages` prints, with hints on how to get hugepages.

use std::fmt;

use crate::size::{format_size, short_size};
use crate::status::{Pool, Status};

const SETUP_HINT: &str = "run `sudo grorx hugepages --setup 1G` as root to reserve 1 GiB \
                          and mount hugetlbfs";

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pools.is_empty() {
            writeln!(
                f,
                "no hugepages: the kernel exposes no hugepage pools (no /sys/kernel/mm/hugepages); \
                 in a container, reserve hugepages on the host and mount hugetlbfs into it"
            )?;
        } else {
            self.fmt_table(f)?;
            if self.pools.iter().all(|p| p.total == 0 && p.surplus == 0) {
                writeln!(f, "no hugepages reserved: {SETUP_HINT}")?;
            }
            for pool in self.pools.iter().filter(|p| p.total > 0) {
                if self.mount_for(pool.page_size).is_none() {
                    writeln!(
                        f,
                        "{} pages are unusable without a hugetlbfs mount: as root, \
                         `mount -t hugetlbfs -o pagesize={} nodev {}` (or grorx hugepages --setup)",
                        format_size(pool.page_size),
                        short_size(pool.page_size),
                        self.mount_point(pool.page_size).display()
                    )?;
                }
            }
        }
        match self.default_page_size {
            Some(size) => writeln!(f, "default page size: {}", format_size(size))?,
            None => writeln!(
                f,
                "default page size: unknown (no Hugepagesize in /proc/meminfo)"
            )?,
        }
        for problem in &self.problems {
            writeln!(f, "skipped: {problem}")?;
        }
        Ok(())
    }
}

impl Status {
    fn fmt_table(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with_nodes = self.pools.iter().any(|p| !p.nodes.is_empty());
        write!(
            f,
            "{:<8} {:>8} {:>8} {:>8}  {:<24}",
            "size", "total", "free", "reserved", "mount"
        )?;
        if with_nodes {
            write!(f, "  per node (free/total)")?;
        }
        writeln!(f)?;
        for pool in &self.pools {
            let mount = self
                .mount_for(pool.page_size)
                .map_or_else(|| "-".to_string(), |m| m.path.display().to_string());
            write!(
                f,
                "{:<8} {:>8} {:>8} {:>8}  {:<24}",
                format_size(pool.page_size),
                pool.total,
                pool.free,
                pool.reserved,
                mount
            )?;
            if with_nodes {
                write!(f, "  {}", node_counts(pool))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

fn node_counts(pool: &Pool) -> String {
    let counts: Vec<String> = pool
        .nodes
        .iter()
        .map(|n| format!("node{} {}/{}", n.node, n.free, n.total))
        .collect();
    counts.join(", ")
}
