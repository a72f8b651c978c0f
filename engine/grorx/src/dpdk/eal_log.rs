//! What EAL logs while it starts, caught in memory: the lines go to stderr
//! afterwards as EAL would have written them, and when EAL fails they are
//! its reason (`rte_errno` then often says 0, "Success").

use dpdk_sys as sys;
use std::ffi::c_char;

/// A memory stream EAL logs into until `finish`.
pub struct Caught {
    file: *mut libc::FILE,
    /// Where open_memstream keeps the buffer and its length (boxed: the
    /// stream holds their addresses).
    place: Box<(*mut c_char, libc::size_t)>,
}

impl Caught {
    /// Points EAL's log at a new memory stream; None if there is none to
    /// be had (EAL then logs to stderr as usual).
    pub fn start() -> Option<Caught> {
        let mut place = Box::new((std::ptr::null_mut::<c_char>(), 0 as libc::size_t));
        // SAFETY: both out-pointers point into the box, which lives as long
        // as the stream (closed in `finish` or on drop, before the box).
        let file = unsafe { libc::open_memstream(&mut place.0, &mut place.1) };
        if file.is_null() {
            return None;
        }
        // SAFETY: a valid, open stream; DPDK's FILE is libc's FILE.
        unsafe { sys::rte_openlog_stream(file as *mut sys::FILE) };
        Some(Caught { file, place })
    }

    /// Gives EAL's log back to stderr and returns what was caught.
    pub fn finish(mut self) -> String {
        self.close()
    }

    fn close(&mut self) -> String {
        if self.file.is_null() {
            return String::new();
        }
        // SAFETY: EAL stops using the stream before it is closed; closing
        // settles the buffer and its length in `place`; the buffer is ours
        // to free after.
        unsafe {
            sys::rte_openlog_stream(std::ptr::null_mut());
            libc::fclose(self.file);
            self.file = std::ptr::null_mut();
            let (buf, len) = *self.place;
            if buf.is_null() {
                return String::new();
            }
            let text = String::from_utf8_lossy(std::slice::from_raw_parts(buf as *const u8, len))
                .into_owned();
            libc::free(buf as *mut libc::c_void);
            self.place.0 = std::ptr::null_mut();
            text
        }
    }
}

impl Drop for Caught {
    fn drop(&mut self) {
        self.close();
    }
}

/// The reason in a failed start's log: its last lines, without the `EAL: `
/// prefix and repeats, joined (at most three).
pub fn reason(log: &str) -> Option<String> {
    let mut lines: Vec<&str> = Vec::new();
    for l in log
        .lines()
        .map(|l| l.trim().trim_start_matches("EAL: ").trim())
    {
        if !l.is_empty() && !lines.contains(&l) {
            lines.push(l);
        }
    }
    let n = lines.len();
    (n > 0).then(|| lines[n.saturating_sub(3)..].join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_is_the_last_lines_once_each() {
        let log =
            "EAL: Detected CPU lcores: 2\nEAL: Cannot create lock on '/var/run/dpdk/x/config'. \
                   Is another primary process running?\nEAL: FATAL: Cannot init config\n\
                   EAL: Cannot init config\n";
        assert_eq!(
            reason(log).unwrap(),
            "Cannot create lock on '/var/run/dpdk/x/config'. Is another primary process running?; \
             FATAL: Cannot init config; Cannot init config"
        );
        assert_eq!(reason("\n  \n"), None);
    }
}
