//! The two privileged operations: checking for root and mounting hugetlbfs.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// True when running with effective uid 0, i.e. allowed to set up hugepages.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `mount -t hugetlbfs -o <options> nodev <dir>`.
pub(crate) fn mount_hugetlbfs(dir: &Path, options: &str) -> io::Result<()> {
    let target = CString::new(dir.as_os_str().as_bytes())?;
    let data = CString::new(options)?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"hugetlbfs".as_ptr(),
            0,
            data.as_ptr().cast(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    Err(io::Error::new(
        err.kind(),
        format!(
            "mount -t hugetlbfs -o {options} nodev {}: {err} \
             (in a container, mount hugetlbfs on the host and pass it in)",
            dir.display()
        ),
    ))
}
