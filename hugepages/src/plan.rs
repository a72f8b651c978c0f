//! Deciding how a run gets its memory: existing hugepages, reserving more,
//! or the `--no-huge` fallback.

use std::path::PathBuf;

use crate::size::{format_size, short_size};
use crate::status::Status;

/// What a run needs and what it is allowed to do to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Hugepage memory the run needs, in bytes.
    pub bytes: u64,
    /// Page size to use; `None` picks one (see [`decide`]).
    pub page_size: Option<u64>,
    /// Reserve pages and mount hugetlbfs if needed; set only when root.
    pub allow_setup: bool,
    /// Fall back to `--no-huge` instead of refusing.
    pub allow_fallback: bool,
    /// `-m` for the `--no-huge` fallback, in MiB; must be non-zero for EAL.
    pub no_huge_mem_mb: u64,
}

/// The outcome of [`decide`]; [`Decision::summary`] describes it in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Enough unreserved free pages and a hugetlbfs mount already exist.
    UseExisting {
        page_size: u64,
        mount: PathBuf,
        pages_needed: u64,
        /// Unreserved free pages of this size.
        pages_free: u64,
    },
    /// Not ready, but we may fix it: call [`Decision::apply`].
    Setup {
        page_size: u64,
        /// The existing mount, or where setup will mount hugetlbfs.
        mount: PathBuf,
        /// True when setup has to mount hugetlbfs at `mount`.
        new_mount: bool,
        pages_needed: u64,
        /// Pages to add to the pool (0 when only the mount is missing).
        pages_to_add: u64,
    },
    /// Run without hugepages: `--no-huge -m <mem_mb>`.
    NoHuge { reason: String, mem_mb: u64 },
    /// Hugepages are missing and neither setup nor fallback is allowed.
    Refuse { reason: String },
}

/// Pages of `page_size` bytes needed to hold `bytes`, rounded up.
/// Returns 0 for a zero `page_size` rather than dividing by zero.
pub fn needed_pages(bytes: u64, page_size: u64) -> u64 {
    if page_size == 0 {
        0
    } else {
        bytes.div_ceil(page_size)
    }
}

/// Decides how to get `request.bytes` of hugepage memory.
///
/// The page size is the requested one; else the default size if it is
/// usable as is; else the largest mounted size with enough free pages;
/// else the default size (the one setup would reserve); else the largest
/// size the kernel offers. Per-NUMA-node placement is not considered.
pub fn decide(status: &Status, request: &Request) -> Decision {
    let Some(page_size) = choose_page_size(status, request).filter(|_| !status.pools.is_empty())
    else {
        return without_hugepages(
            request,
            "the kernel offers no hugepages".to_string(),
            "in a container, reserve hugepages on the host and mount hugetlbfs into it",
        );
    };
    let Some(pool) = status.pool(page_size) else {
        let offered: Vec<String> = status
            .pools
            .iter()
            .map(|p| format_size(p.page_size))
            .collect();
        return without_hugepages(
            request,
            format!("the kernel has no {} hugepages", format_size(page_size)),
            &format!("pick one of the offered sizes: {}", offered.join(", ")),
        );
    };
    let pages_needed = needed_pages(request.bytes, page_size);
    let pages_free = pool.available();
    let mount = status.mount_for(page_size).map(|m| m.path.clone());
    let enough = pages_free >= pages_needed;
    if let (true, Some(mount)) = (enough, &mount) {
        return Decision::UseExisting {
            page_size,
            mount: mount.clone(),
            pages_needed,
            pages_free,
        };
    }
    if request.allow_setup {
        return Decision::Setup {
            page_size,
            new_mount: mount.is_none(),
            mount: mount.unwrap_or_else(|| status.mount_point(page_size)),
            pages_needed,
            pages_to_add: pages_needed.saturating_sub(pages_free),
        };
    }
    let size = format_size(page_size);
    let missing = match (enough, mount.is_some()) {
        (false, false) => {
            format!("{pages_free} of {pages_needed} needed {size} pages free, no hugetlbfs mount")
        }
        (false, true) => format!("only {pages_free} of {pages_needed} needed {size} pages free"),
        _ => format!("no hugetlbfs mount for {size} pages"),
    };
    let total = short_size(pages_needed.saturating_mul(page_size));
    without_hugepages(
        request,
        missing,
        &format!("reserve them as root (sudo grorx hugepages --setup {total})"),
    )
}

fn choose_page_size(status: &Status, request: &Request) -> Option<u64> {
    if request.page_size.is_some() {
        return request.page_size;
    }
    let ready = |size: u64| {
        status.mount_for(size).is_some()
            && status
                .pool(size)
                .is_some_and(|p| p.available() >= needed_pages(request.bytes, size))
    };
    let default = status
        .default_page_size
        .filter(|&d| status.pool(d).is_some());
    default
        .filter(|&d| ready(d))
        .or_else(|| {
            status
                .pools
                .iter()
                .rev()
                .map(|p| p.page_size)
                .find(|&s| ready(s))
        })
        .or(default)
        .or_else(|| status.pools.last().map(|p| p.page_size))
}

/// Falls back to `--no-huge` if allowed, else refuses with a hint.
fn without_hugepages(request: &Request, missing: String, hint: &str) -> Decision {
    if request.allow_fallback {
        Decision::NoHuge {
            reason: missing,
            mem_mb: request.no_huge_mem_mb,
        }
    } else {
        Decision::Refuse {
            reason: format!("{missing}; {hint}, or allow the --no-huge fallback"),
        }
    }
}
