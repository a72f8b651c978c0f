//! Builds a fake filesystem root with the sysfs/procfs files the crate reads.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

pub(crate) const MIB2: u64 = 2 << 20;
pub(crate) const GIB1: u64 = 1 << 30;

pub(crate) struct FakeTree {
    dir: TempDir,
}

impl FakeTree {
    pub(crate) fn new() -> FakeTree {
        FakeTree {
            dir: tempfile::tempdir().expect("create tempdir"),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, relative: &str, content: &str) -> &Self {
        let path = self.root().join(relative);
        fs::create_dir_all(path.parent().expect("file has a parent")).expect("mkdir");
        fs::write(&path, content).expect("write fake file");
        self
    }

    pub(crate) fn read(&self, relative: &str) -> String {
        fs::read_to_string(self.root().join(relative)).expect("read fake file")
    }

    pub(crate) fn pool_dir(page_size: u64) -> String {
        format!("sys/kernel/mm/hugepages/hugepages-{}kB", page_size / 1024)
    }

    /// A pool with `nr`, `free`, `resv` and zero surplus pages.
    pub(crate) fn pool(&self, page_size: u64, nr: u64, free: u64, resv: u64) -> &Self {
        let dir = Self::pool_dir(page_size);
        self.write(&format!("{dir}/nr_hugepages"), &format!("{nr}\n"))
            .write(&format!("{dir}/free_hugepages"), &format!("{free}\n"))
            .write(&format!("{dir}/resv_hugepages"), &format!("{resv}\n"))
            .write(&format!("{dir}/surplus_hugepages"), "0\n")
    }

    pub(crate) fn node_pool(&self, node: u32, page_size: u64, nr: u64, free: u64) -> &Self {
        let dir = format!(
            "sys/devices/system/node/node{node}/hugepages/hugepages-{}kB",
            page_size / 1024
        );
        self.write(&format!("{dir}/nr_hugepages"), &format!("{nr}\n"))
            .write(&format!("{dir}/free_hugepages"), &format!("{free}\n"))
    }

    pub(crate) fn default_size_kb(&self, kb: u64) -> &Self {
        self.write(
            "proc/meminfo",
            &format!(
                "MemTotal:       16318412 kB\nHugePages_Total:       0\n\
                 Hugepagesize:       {kb} kB\nHugetlb:               0 kB\n"
            ),
        )
    }

    pub(crate) fn mounts(&self, lines: &[&str]) -> &Self {
        let mut text = String::from("proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n");
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        self.write("proc/mounts", &text)
    }
}

pub(crate) fn path(p: &str) -> PathBuf {
    PathBuf::from(p)
}
