//! Hugepage pools from `/sys/kernel/mm/hugepages` and the per-node copies
//! under `/sys/devices/system/node`.

use std::io;
use std::path::Path;

use crate::files::{list_dir, read_count};
use crate::status::{NodePool, Pool};

const POOL_FILES: [&str; 4] = [
    "nr_hugepages",
    "free_hugepages",
    "resv_hugepages",
    "surplus_hugepages",
];

/// All pools under `root`, smallest page size first, with node counts.
pub(crate) fn read_pools(root: &Path, problems: &mut Vec<String>) -> io::Result<Vec<Pool>> {
    let dir = root.join("sys/kernel/mm/hugepages");
    let Some(names) = list_dir(&dir)? else {
        return Ok(Vec::new());
    };
    let mut pools = Vec::new();
    for name in names {
        let Some(page_size) = pool_page_size(&name) else {
            problems.push(format!(
                "{}: not a hugepages-<N>kB pool directory, skipped",
                dir.join(&name).display()
            ));
            continue;
        };
        match read_counts(&dir.join(&name), &POOL_FILES) {
            Ok([total, free, reserved, surplus]) => pools.push(Pool {
                page_size,
                total,
                free,
                reserved,
                surplus,
                nodes: Vec::new(),
            }),
            Err(problem) => problems.push(format!("{problem}; pool skipped")),
        }
    }
    pools.sort_by_key(|p| p.page_size);
    add_node_counts(root, &mut pools, problems)?;
    Ok(pools)
}

/// `hugepages-2048kB` -> 2 MiB in bytes.
pub(crate) fn pool_page_size(dir_name: &str) -> Option<u64> {
    let kb: u64 = dir_name
        .strip_prefix("hugepages-")?
        .strip_suffix("kB")?
        .parse()
        .ok()?;
    kb.checked_mul(1024).filter(|&bytes| bytes > 0)
}

/// The directory name the kernel uses for a page size (`hugepages-2048kB`).
pub(crate) fn pool_dir_name(page_size: u64) -> String {
    format!("hugepages-{}kB", page_size / 1024)
}

fn read_counts<const N: usize>(dir: &Path, files: &[&str; N]) -> Result<[u64; N], String> {
    let mut counts = [0; N];
    for (count, file) in counts.iter_mut().zip(files) {
        *count = read_count(&dir.join(file))?;
    }
    Ok(counts)
}

fn add_node_counts(root: &Path, pools: &mut [Pool], problems: &mut Vec<String>) -> io::Result<()> {
    let dir = root.join("sys/devices/system/node");
    let Some(names) = list_dir(&dir)? else {
        return Ok(());
    };
    // Other entries here (possible, online, has_memory, ...) are not nodes.
    let mut nodes: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix("node")?.parse().ok())
        .collect();
    nodes.sort_unstable();
    for pool in pools {
        for &node in &nodes {
            let node_dir = dir
                .join(format!("node{node}/hugepages"))
                .join(pool_dir_name(pool.page_size));
            if !node_dir.is_dir() {
                continue;
            }
            match read_counts(&node_dir, &["nr_hugepages", "free_hugepages"]) {
                Ok([total, free]) => pool.nodes.push(NodePool { node, total, free }),
                Err(problem) => problems.push(format!("{problem}; node count skipped")),
            }
        }
    }
    Ok(())
}
