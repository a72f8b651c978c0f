//! The default page size from `/proc/meminfo` and hugetlbfs mounts from
//! `/proc/mounts`.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use crate::files::read_optional;
use crate::size::parse_size;
use crate::status::Mount;

/// `Hugepagesize:` in bytes; `None` if meminfo or the line is missing.
pub(crate) fn read_default_page_size(
    root: &Path,
    problems: &mut Vec<String>,
) -> io::Result<Option<u64>> {
    let path = root.join("proc/meminfo");
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    let Some(line) = text.lines().find(|l| l.starts_with("Hugepagesize:")) else {
        return Ok(None);
    };
    let value = line["Hugepagesize:".len()..].trim();
    match parse_size(value) {
        Ok(bytes) if bytes > 0 => Ok(Some(bytes)),
        _ => {
            problems.push(format!(
                "{}: cannot read the default page size from {value:?}",
                path.display()
            ));
            Ok(None)
        }
    }
}

/// `MemTotal:` in bytes: all the memory the machine has.
pub(crate) fn read_memory_total(root: &Path) -> Option<u64> {
    let text = read_optional(&root.join("proc/meminfo")).ok()??;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    parse_size(line["MemTotal:".len()..].trim()).ok()
}

/// Writable hugetlbfs mounts. A mount without `pagesize=` serves the
/// default size; one whose size cannot be told is skipped.
pub(crate) fn read_mounts(
    root: &Path,
    default_page_size: Option<u64>,
    problems: &mut Vec<String>,
) -> io::Result<Vec<Mount>> {
    let Some(text) = read_optional(&root.join("proc/mounts"))? else {
        return Ok(Vec::new());
    };
    let mut mounts = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, path, "hugetlbfs", options, ..] = fields[..] else {
            continue;
        };
        let path = unescape(path);
        let options: Vec<&str> = options.split(',').collect();
        if options.contains(&"ro") {
            problems.push(format!(
                "hugetlbfs at {} is read-only, skipped",
                path.display()
            ));
            continue;
        }
        let page_size = match options.iter().find_map(|o| o.strip_prefix("pagesize=")) {
            Some(size) => parse_size(size).ok().filter(|&b| b > 0),
            None => default_page_size,
        };
        match page_size {
            Some(page_size) => mounts.push(Mount { path, page_size }),
            None => problems.push(format!(
                "hugetlbfs at {}: cannot tell its page size, skipped",
                path.display()
            )),
        }
    }
    Ok(mounts)
}

/// Undoes the octal escapes `/proc/mounts` uses for spaces and the like
/// (`\040`).
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal.map(|d| d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'))) {
            Some(value) if value <= 0xff => {
                out.push(value as u8);
                i += 4;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}
