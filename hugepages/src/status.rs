//! What hugepages the machine has: per-size pools, per-node counts, mounts.

use std::io;
use std::path::{Path, PathBuf};

use crate::{procfs, sysfs};

/// A snapshot of the machine's hugepage pools and hugetlbfs mounts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// `Hugepagesize:` from `/proc/meminfo`, in bytes; `None` if unknown.
    pub default_page_size: Option<u64>,
    /// One pool per page size the kernel offers, smallest first.
    pub pools: Vec<Pool>,
    /// Writable hugetlbfs mounts, in `/proc/mounts` order.
    pub mounts: Vec<Mount>,
    /// Entries that were skipped because their content made no sense,
    /// one human-readable line each.
    pub problems: Vec<String>,
}

/// The kernel's pool of pages of one size (`/sys/kernel/mm/hugepages/hugepages-<N>kB`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Page size in bytes.
    pub page_size: u64,
    /// `nr_hugepages`: pages reserved in the pool.
    pub total: u64,
    /// `free_hugepages`: pages not yet faulted in; includes `reserved`.
    pub free: u64,
    /// `resv_hugepages`: free pages already promised to a mapping.
    pub reserved: u64,
    /// `surplus_hugepages`: pages allocated beyond `total` by overcommit.
    pub surplus: u64,
    /// Per-NUMA-node counts, by node number; empty if not exposed.
    pub nodes: Vec<NodePool>,
}

/// One NUMA node's share of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePool {
    pub node: u32,
    pub total: u64,
    pub free: u64,
}

/// A hugetlbfs mount, which is what DPDK allocates hugepages from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub path: PathBuf,
    /// Page size in bytes (`pagesize=` option, else the default size).
    pub page_size: u64,
}

impl Pool {
    /// Free pages nobody has reserved: what a new process can take.
    pub fn available(&self) -> u64 {
        self.free.saturating_sub(self.reserved)
    }
}

impl Status {
    /// Reads the running machine's status from `/sys` and `/proc`.
    pub fn read() -> io::Result<Status> {
        Status::read_from(Path::new("/"))
    }

    /// Reads `root/sys/...`, `root/proc/meminfo` and `root/proc/mounts`.
    ///
    /// Missing files or directories (containers often lack them) yield an
    /// empty part of the status, not an error; unparsable entries are
    /// skipped and described in [`Status::problems`]. Errors are other I/O
    /// failures such as permission denied.
    pub fn read_from(root: &Path) -> io::Result<Status> {
        let mut problems = Vec::new();
        let default_page_size = procfs::read_default_page_size(root, &mut problems)?;
        let pools = sysfs::read_pools(root, &mut problems)?;
        let mounts = procfs::read_mounts(root, default_page_size, &mut problems)?;
        Ok(Status {
            default_page_size,
            pools,
            mounts,
            problems,
        })
    }

    /// The pool of pages of `page_size` bytes, if the kernel offers it.
    pub fn pool(&self, page_size: u64) -> Option<&Pool> {
        self.pools.iter().find(|p| p.page_size == page_size)
    }

    /// The first hugetlbfs mount serving `page_size` pages.
    pub fn mount_for(&self, page_size: u64) -> Option<&Mount> {
        self.mounts.iter().find(|m| m.page_size == page_size)
    }

    /// Bytes a new process can get in `page_size` pages right now: the
    /// unreserved free pages, or 0 if there is no mount for that size.
    pub fn usable_bytes(&self, page_size: u64) -> u64 {
        match (self.pool(page_size), self.mount_for(page_size)) {
            (Some(pool), Some(_)) => pool.available().saturating_mul(page_size),
            _ => 0,
        }
    }

    /// Where `setup` mounts hugetlbfs for `page_size` pages: `/dev/hugepages`
    /// for the default size, `/dev/hugepages-<size>` (e.g. `-1G`) otherwise,
    /// or when `/dev/hugepages` already holds a mount of another size.
    pub fn mount_point(&self, page_size: u64) -> PathBuf {
        let plain = PathBuf::from("/dev/hugepages");
        let taken = self.mounts.iter().any(|m| m.path == plain);
        if self.default_page_size == Some(page_size) && !taken {
            plain
        } else {
            PathBuf::from(format!(
                "/dev/hugepages-{}",
                crate::size::short_size(page_size)
            ))
        }
    }
}
