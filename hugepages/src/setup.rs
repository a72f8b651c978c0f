//! Reserving hugepages and mounting hugetlbfs (root only).

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::files::{read_count, with_path};
use crate::plan::needed_pages;
use crate::size::{format_size, short_size};
use crate::status::Status;
use crate::syscalls::{is_root, mount_hugetlbfs};
use crate::sysfs::pool_dir_name;

/// What [`setup`] did; `Display` gives one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupReport {
    pub page_size: u64,
    /// Unreserved free pages the caller asked for.
    pub pages_needed: u64,
    /// `nr_hugepages` before setup.
    pub total_before: u64,
    /// `nr_hugepages` we wrote (equals `total_before` if nothing was needed).
    pub total_asked: u64,
    /// `nr_hugepages` read back: what the kernel granted.
    pub total_after: u64,
    /// Unreserved free pages after setup.
    pub pages_free: u64,
    /// The hugetlbfs mount for this size.
    pub mount: PathBuf,
    /// True if this call mounted `mount` (`setup_at` only creates the directory).
    pub new_mount: bool,
}

impl SetupReport {
    /// The kernel granted fewer pages than needed.
    pub fn is_short(&self) -> bool {
        self.pages_free < self.pages_needed
    }
}

impl fmt::Display for SetupReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = format_size(self.page_size);
        let (free, needed) = (self.pages_free, self.pages_needed);
        if self.is_short() && self.total_after < self.total_asked {
            write!(
                f,
                "hugepages: asked the kernel for {} {size} pages in total but it granted {} \
                 ({free} free, {needed} needed): physical memory is too fragmented or too small; \
                 reserve them at boot (kernel command line: hugepagesz={} hugepages={}) \
                 or free memory and retry",
                self.total_asked,
                self.total_after,
                short_size(self.page_size),
                self.total_asked,
            )?;
        } else if self.is_short() {
            write!(
                f,
                "hugepages: raised {size} pages to {} but only {free} are free ({needed} needed): \
                 other processes hold the rest; retry when they exit",
                self.total_after
            )?;
        } else if self.total_after != self.total_before {
            write!(
                f,
                "hugepages: raised {size} pages from {} to {} ({free} free, {needed} needed)",
                self.total_before, self.total_after
            )?;
        } else {
            write!(
                f,
                "hugepages: {free} {size} pages already free ({needed} needed)"
            )?;
        }
        if self.new_mount {
            write!(f, "; mounted hugetlbfs at {}", self.mount.display())?;
        }
        Ok(())
    }
}

/// Makes at least `total_bytes` of `page_size` pages free and mounted:
/// raises `nr_hugepages` (never lowers it) and mounts hugetlbfs with the
/// right `pagesize=` if no mount serves that size. Needs root.
///
/// The kernel may grant fewer pages than asked; that is not an error:
/// check [`SetupReport::is_short`].
pub fn setup(page_size: u64, total_bytes: u64) -> io::Result<SetupReport> {
    if !is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "needs root: run as root (e.g. sudo grorx hugepages --setup 1G)",
        ));
    }
    setup_with(Path::new("/"), page_size, total_bytes, mount_hugetlbfs)
}

/// [`setup`] against a fake tree under `root` (for tests): writes
/// `root/sys/...`, creates the mount directory under `root`, does not
/// mount and does not check for root.
pub fn setup_at(root: &Path, page_size: u64, total_bytes: u64) -> io::Result<SetupReport> {
    setup_with(root, page_size, total_bytes, |_, _| Ok(()))
}

pub(crate) fn setup_with(
    root: &Path,
    page_size: u64,
    total_bytes: u64,
    mount: impl FnOnce(&Path, &str) -> io::Result<()>,
) -> io::Result<SetupReport> {
    let status = Status::read_from(root)?;
    let Some(pool) = status.pool(page_size) else {
        let offered: Vec<String> = status
            .pools
            .iter()
            .map(|p| format_size(p.page_size))
            .collect();
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "the kernel has no {} hugepages; pick one of the offered sizes: {}",
                format_size(page_size),
                if offered.is_empty() {
                    "none".to_string()
                } else {
                    offered.join(", ")
                }
            ),
        ));
    };
    let pages_needed = needed_pages(total_bytes, page_size);
    let shortfall = pages_needed.saturating_sub(pool.available());
    let pool_dir = root
        .join("sys/kernel/mm/hugepages")
        .join(pool_dir_name(page_size));
    let (total_asked, total_after, pages_free) = if shortfall == 0 {
        (pool.total, pool.total, pool.available())
    } else {
        let asked = pool.total.saturating_add(shortfall);
        write_nr_hugepages(&pool_dir.join("nr_hugepages"), asked)?;
        let count = |file: &str| read_count(&pool_dir.join(file)).map_err(io::Error::other);
        let free = count("free_hugepages")?.saturating_sub(count("resv_hugepages")?);
        (asked, count("nr_hugepages")?, free)
    };
    let (mount_path, new_mount) = match status.mount_for(page_size) {
        Some(existing) => (existing.path.clone(), false),
        None => {
            let path = status.mount_point(page_size);
            let dir = root.join(path.strip_prefix("/").unwrap_or(&path));
            fs::create_dir_all(&dir).map_err(|e| with_path(&dir, e))?;
            mount(&dir, &format!("pagesize={}", short_size(page_size)))?;
            (path, true)
        }
    };
    Ok(SetupReport {
        page_size,
        pages_needed,
        total_before: pool.total,
        total_asked,
        total_after,
        pages_free,
        mount: mount_path,
        new_mount,
    })
}

fn write_nr_hugepages(path: &Path, pages: u64) -> io::Result<()> {
    fs::write(path, format!("{pages}\n")).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EROFS | libc::EACCES | libc::EPERM) => {
                " (in a container /sys is read-only: reserve hugepages on the host)"
            }
            _ => "",
        };
        io::Error::new(
            e.kind(),
            format!("writing {pages} to {}: {e}{hint}", path.display()),
        )
    })
}
