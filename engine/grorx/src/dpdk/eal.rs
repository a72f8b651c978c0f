//! The DPDK Environment Abstraction Layer: started once per process.
//!
//! `rte_eal_init` can run only once in a process, ever (a second call fails
//! with EALREADY even after cleanup), so the result lives in a OnceLock and
//! every later caller gets the same `Eal` (or the same error).

use anyhow::{anyhow, bail, Result};
use dpdk_sys as sys;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

/// A running EAL. There is at most one per process.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
    tsc_hz: u64,
    main_lcore: u32,
    /// Per lcore id: the CPU its thread is pinned to (-1: none).
    cpus: Vec<i32>,
}

/// The lowest CPU the calling thread may run on (-1 if it cannot be told).
fn first_cpu() -> c_int {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return -1;
        }
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .map_or(-1, |c| c as c_int)
    }
}

static EAL: OnceLock<Result<Eal, String>> = OnceLock::new();
static INIT_LOCK: Mutex<()> = Mutex::new(());

/// DPDK's text for an errno value.
pub fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or per-lcore buffer.
    unsafe { CStr::from_ptr(sys::rte_strerror(errno.abs())) }
        .to_string_lossy()
        .into_owned()
}

/// The current rte_errno (read through a C getter: it is a per-lcore variable).
pub fn rte_errno() -> i32 {
    // SAFETY: plain read of a thread-local int.
    unsafe { sys::grorx_rte_errno() }
}

impl Eal {
    /// Starts EAL with `argv` (argv[0] is the program name). A second call in
    /// the same process returns the running EAL if the arguments are equal.
    pub fn init(argv: &[String]) -> Result<&'static Eal> {
        let _g = INIT_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let r = EAL.get_or_init(|| Self::start(argv));
        match r {
            Ok(eal) if eal.args == argv => Ok(eal),
            Ok(eal) => bail!(
                "EAL already runs in this process with other arguments ({}); EAL starts once per process",
                eal.args.join(" ")
            ),
            Err(e) => Err(anyhow!("{e}")),
        }
    }

    /// The EAL of this process, if it was started.
    pub fn get() -> Option<&'static Eal> {
        EAL.get().and_then(|r| r.as_ref().ok())
    }

    fn start(argv: &[String]) -> Result<Eal, String> {
        // EAL may keep pointers into argv: the strings live for the process
        // (this runs once).
        let cstrs: Vec<CString> = argv
            .iter()
            .map(|a| {
                CString::new(a.as_str()).map_err(|_| format!("EAL argument '{a}' has a NUL byte"))
            })
            .collect::<Result<_, _>>()?;
        let mut ptrs: Vec<*mut c_char> = cstrs.into_iter().map(|c| c.into_raw()).collect();
        let argc = ptrs.len() as c_int;
        ptrs.push(std::ptr::null_mut());
        let ptrs = Box::leak(ptrs.into_boxed_slice());
        let caught = super::eal_log::Caught::start();
        // SAFETY: argc/argv are valid, NUL-terminated, and live forever.
        let ret = unsafe { sys::rte_eal_init(argc, ptrs.as_mut_ptr()) };
        let errno = rte_errno();
        let log = caught.map(|c| c.finish()).unwrap_or_default();
        // EAL's own lines, as it would have written them: grorx's caller
        // sees them where it always did.
        {
            use std::io::Write;
            let _ = std::io::stderr().write_all(log.as_bytes());
        }
        if ret < 0 {
            let why = match (super::eal_log::reason(&log), errno) {
                (Some(r), 0) => r,
                (Some(r), e) => format!("{r} ({}, errno {e})", strerror(e)),
                (None, e) => format!("{} (errno {e})", strerror(e)),
            };
            return Err(format!(
                "DPDK EAL failed to start: {why}. Check the EAL arguments ({}), hugepages \
                 (grorx hugepages) or run on 4 KiB pages ({})",
                argv[1..].join(" "),
                crate::setting::Setting::NoHuge
            ));
        }
        // SAFETY: EAL is up.
        let (tsc_hz, main_lcore, max_simd_bits) = unsafe {
            (
                sys::rte_get_tsc_hz(),
                sys::rte_get_main_lcore(),
                sys::rte_vect_get_max_simd_bitwidth(),
            )
        };
        // DPDK's cap on vector width (`--force-max-simd-bitwidth`) holds for
        // the whole process: the checksum kernels keep to it too.
        crate::csum::Kernel::limit(max_simd_bits);
        let mut eal = Eal {
            args: argv.to_vec(),
            tsc_hz,
            main_lcore,
            cpus: Vec::new(),
        };
        eal.cpus = eal.pinned_cpus();
        Ok(eal)
    }

    /// The CPU each lcore's thread is pinned to, asked of each thread (a
    /// short job on every worker lcore). DPDK's own `rte_lcore_to_cpu_id`
    /// gives the core of the CPU numbered as the lcore, which is not the
    /// lcore's CPU once `--lcores` maps them apart (`1@0`).
    fn pinned_cpus(&self) -> Vec<i32> {
        extern "C" fn own_cpu(_: *mut c_void) -> c_int {
            first_cpu()
        }
        let mut cpus = vec![-1; sys::RTE_MAX_LCORE as usize];
        cpus[self.main_lcore as usize] = first_cpu();
        for l in self.worker_lcores() {
            // SAFETY: EAL is up, the lcore waits for a job (none was given
            // one yet); own_cpu only reads the thread's affinity.
            if unsafe { sys::rte_eal_remote_launch(Some(own_cpu), std::ptr::null_mut(), l) } == 0 {
                // SAFETY: the job launched above; this waits for its end.
                cpus[l as usize] = unsafe { sys::rte_eal_wait_lcore(l) };
            }
        }
        cpus
    }

    pub fn args(&self) -> &[String] {
        &self.args
    }

    pub fn tsc_hz(&self) -> u64 {
        self.tsc_hz
    }

    pub fn main_lcore(&self) -> u32 {
        self.main_lcore
    }

    /// Worker lcores (every enabled lcore but the main one), in id order.
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut v = Vec::new();
        // SAFETY: EAL is up; rte_get_next_lcore walks its lcore table.
        let mut i = unsafe { sys::rte_get_next_lcore(u32::MAX, 1, 0) };
        while i < sys::RTE_MAX_LCORE {
            v.push(i);
            // SAFETY: EAL is up; i is an lcore id from its own walk.
            i = unsafe { sys::rte_get_next_lcore(i, 1, 0) };
        }
        v
    }

    /// The CPU an lcore is pinned to (the lowest of its CPUs if it has
    /// several; -1 if unknown).
    pub fn lcore_cpu(&self, lcore: u32) -> i32 {
        self.cpus.get(lcore as usize).copied().unwrap_or(-1)
    }

    pub fn lcore_socket(&self, lcore: u32) -> u32 {
        // SAFETY: plain table lookup.
        unsafe { sys::rte_lcore_to_socket_id(lcore) }
    }

    /// Runs `f` on a worker lcore (pinned by EAL). Join with `wait`.
    pub fn launch<F>(&self, lcore: u32, f: F) -> Result<Launched>
    where
        F: FnOnce() -> i32 + Send + 'static,
    {
        type Job = Box<dyn FnOnce() -> i32 + Send>;
        extern "C" fn trampoline(arg: *mut c_void) -> c_int {
            // SAFETY: arg is the Box<Job> leaked below, taken exactly once.
            let job: Box<Job> = unsafe { Box::from_raw(arg as *mut Job) };
            job()
        }
        let job: Box<Job> = Box::new(Box::new(f));
        let arg = Box::into_raw(job) as *mut c_void;
        // SAFETY: the trampoline owns arg once launched.
        let ret = unsafe { sys::rte_eal_remote_launch(Some(trampoline), arg, lcore) };
        if ret != 0 {
            // Not launched: take the job back so it is dropped.
            // SAFETY: the lcore did not take arg.
            drop(unsafe { Box::from_raw(arg as *mut Job) });
            bail!(
                "cannot launch on lcore {lcore}: {} (is it a worker lcore, and idle?)",
                strerror(ret)
            );
        }
        Ok(Launched { lcore })
    }

    /// TSC ticks now (no FFI call).
    #[inline(always)]
    pub fn tsc() -> u64 {
        tsc()
    }
}

/// The TSC, read directly.
#[inline(always)]
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: EAL's generic cycle counter.
    unsafe {
        sys::rte_rdtsc()
    }
}

/// A job running on a worker lcore.
#[must_use = "wait for the lcore"]
pub struct Launched {
    lcore: u32,
}

impl Launched {
    pub fn lcore(&self) -> u32 {
        self.lcore
    }
    /// Blocks until the job returns; its return value.
    pub fn wait(self) -> i32 {
        // SAFETY: the lcore was launched by us.
        unsafe { sys::rte_eal_wait_lcore(self.lcore) }
    }
}

/// A C string from a Rust one, or an error naming what it was for.
pub fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| anyhow!("{what} '{s}' contains a NUL byte"))
}

/// The NUMA socket of the calling thread.
pub fn socket_id() -> i32 {
    // SAFETY: plain query of the calling thread's socket.
    unsafe { sys::rte_socket_id() as i32 }
}

/// Releases what EAL holds (hugepages, devices, its threads' state).
///
/// # Safety
/// No lcore is running a job any more, and EAL is not used after this.
pub unsafe fn cleanup() {
    // SAFETY: the caller's promise above.
    unsafe { sys::rte_eal_cleanup() };
}

/// EAL's runtime directory (`/var/run/dpdk/<prefix>`), for cleanup at exit.
pub fn runtime_dir() -> Option<std::path::PathBuf> {
    // SAFETY: returns a pointer to EAL's static buffer.
    let p = unsafe { sys::rte_eal_get_runtime_dir() };
    if p.is_null() {
        return None;
    }
    // SAFETY: p is non-null and points to EAL's NUL-terminated static buffer.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (!s.is_empty()).then(|| s.into())
}

/// A callback EAL's alarms call, on its interrupt thread.
pub type AlarmFn = unsafe extern "C" fn(*mut c_void);

/// Arms a one-shot EAL alarm: `cb(arg)` on the interrupt thread in `us`
/// microseconds. Returns 0, or a negative errno.
///
/// # Safety
/// `arg` stays valid for `cb` until the alarm has fired or
/// [`alarm_cancel`] has returned.
pub unsafe fn alarm_set(us: u64, cb: AlarmFn, arg: *mut c_void) -> i32 {
    // SAFETY: the caller keeps arg alive for cb (its promise).
    unsafe { sys::rte_eal_alarm_set(us, Some(cb), arg) }
}

/// Cancels the alarms armed with `cb` and `arg`, waiting for one that is
/// running. Returns how many were cancelled, or a negative errno.
///
/// # Safety
/// Not called from `cb` itself (it would wait for itself).
pub unsafe fn alarm_cancel(cb: AlarmFn, arg: *mut c_void) -> i32 {
    // SAFETY: a plain cancel; the caller is not the callback.
    unsafe { sys::rte_eal_alarm_cancel(Some(cb), arg) }
}
