//! One process per instance name. The name is EAL's file prefix, so it fixes
//! the runtime directory and the telemetry socket
//! (`/var/run/dpdk/<name>/dpdk_telemetry.v2` as root): a second process with
//! the same name would take over the socket path while the first still runs.
//! An advisory lock in that directory, taken before EAL starts, refuses it
//! with a message that names the holder; the kernel drops the lock when the
//! holder exits, however it exits.

use crate::setting::Setting;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Mutex;

/// The lock this process holds, and the runtime directory it named.
static HELD: Mutex<Option<(File, PathBuf)>> = Mutex::new(None);

/// Refuses names EAL or a metrics label would mangle.
pub(super) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.');
    if !ok {
        bail!(
            "{} '{name}': not an instance name: use 1-64 letters, digits, '-', '_' or '.' (e.g. rx-a)",
            Setting::Name
        );
    }
    Ok(())
}

/// Where EAL puts a prefix's runtime files: `/var/run/dpdk` for root,
/// `$XDG_RUNTIME_DIR/dpdk` (or `/tmp/dpdk`) for others.
pub(super) fn runtime_dir(name: &str) -> PathBuf {
    let base = if hugepages::is_root() {
        PathBuf::from("/var/run/dpdk")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"))
            .join("dpdk")
    };
    base.join(name)
}

/// Takes the name for this process (again is fine: EAL starts once).
pub(super) fn claim(name: &str) -> Result<()> {
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let dir = runtime_dir(name);
    if held.as_ref().is_some_and(|(_, d)| *d == dir) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the runtime directory {}", dir.display()))?;
    let path = dir.join("grorx.lock");
    let mut f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    if !try_lock(&f) {
        let mut pid = String::new();
        let _ = f.read_to_string(&mut pid);
        let pid = pid.trim();
        bail!(
            "another grorx named '{name}' is running{}: give this one another name ({})",
            if pid.is_empty() {
                String::new()
            } else {
                format!(" (pid {pid})")
            },
            Setting::Name
        );
    }
    f.set_len(0)?;
    f.rewind()?;
    writeln!(f, "{}", std::process::id())?;
    *held = Some((f, dir));
    Ok(())
}

/// The runtime directory this process claimed, if any.
pub(super) fn claimed_dir() -> Option<PathBuf> {
    HELD.lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|(_, d)| d.clone())
}

/// Lets the name go (at shutdown, after EAL's cleanup). `tidy`: EAL never
/// started, so the directory holds nothing of EAL's: remove what we made.
pub(super) fn release(tidy: bool) {
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let (true, Some((_, dir))) = (tidy, held) {
        let _ = std::fs::remove_file(dir.join("grorx.lock"));
        let _ = std::fs::remove_dir(dir);
    }
}

/// An exclusive, non-blocking `flock` on `f`; false when another holds it.
fn try_lock(f: &File) -> bool {
    // SAFETY: flock on a descriptor `f` owns for the whole call; it touches
    // no memory of ours.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_mangle_a_path_or_a_label_are_refused() {
        for bad in ["", "a/b", "..", ".hidden", "x y", "é", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["grorx", "rx-a", "host_1.queue0"] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn a_held_lock_is_refused_to_another_descriptor() {
        let d = tempfile_dir();
        let p = d.join("grorx.lock");
        let a = File::create(&p).unwrap();
        let b = File::open(&p).unwrap();
        assert!(try_lock(&a));
        // flock locks belong to the open file description: a second open
        // is another holder, as another process would be.
        assert!(!try_lock(&b));
        drop(a);
        assert!(try_lock(&b));
        let _ = std::fs::remove_dir_all(&d);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("grorx-instance-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
