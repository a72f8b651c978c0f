//! Small file helpers that treat "not there" as normal: containers and
//! kernels without hugetlb support simply lack these files.

use std::fs;
use std::io;
use std::path::Path;

/// Adds the path to an I/O error so the message says which file failed.
pub(crate) fn with_path(path: &Path, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

/// The file's content, or `None` if it does not exist.
pub(crate) fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(with_path(path, e)),
    }
}

/// Sorted UTF-8 entry names of a directory, or `None` if it does not exist.
pub(crate) fn list_dir(path: &Path) -> io::Result<Option<Vec<String>>> {
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(with_path(path, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| with_path(path, e))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    names.sort();
    Ok(Some(names))
}

/// Reads a sysfs counter file holding one decimal number. Any failure is
/// returned as a one-line description so the caller can skip the entry.
pub(crate) fn read_count(path: &Path) -> Result<u64, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.trim().parse().map_err(|_| {
        format!(
            "{}: expected a number, found {:?}",
            path.display(),
            text.trim()
        )
    })
}
