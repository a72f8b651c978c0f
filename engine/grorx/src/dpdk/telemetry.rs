//! DPDK telemetry, wrapped: the values a reply may hold (as 22.11 can
//! express them), writing a reply into DPDK's `rte_tel_data`, and
//! registering commands whose replies a Rust function builds. What the
//! replies say is the engine's (`report::telemetry`).

use dpdk_sys as sys;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

/// DPDK 22.11's limit (lib/telemetry) on a name or a string value, bytes
/// with its NUL.
pub const MAX_STRING_LEN: usize = sys::RTE_TEL_MAX_STRING_LEN as usize;
/// DPDK 22.11's limit on the entries of a dict.
pub const MAX_DICT_ENTRIES: usize = sys::RTE_TEL_MAX_DICT_ENTRIES as usize;

/// A telemetry value as 22.11 can express it.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// An unsigned counter.
    U64(u64),
    /// A signed integer (also 0/1 for a flag: 22.11 has no booleans).
    Int(i32),
    /// ASCII, under 128 bytes (enforced when written).
    Str(String),
    /// A nested dict.
    Dict(Dict),
}

/// A telemetry dict: names `[A-Za-z0-9_/]` (enforced when written).
pub type Dict = Vec<(String, Val)>;

/// Builds the reply to a command (its name, its parameter); None for a
/// command it does not know.
pub type Handler = fn(&[u8], Option<&str>) -> Option<Dict>;

/// The one handler of the commands registered here.
static HANDLER: OnceLock<Handler> = OnceLock::new();

/// Registers `cmd` with its `help`; `handler` builds its replies (the
/// first handler given is the one every command here answers through).
/// Err: DPDK's negative errno.
pub fn register_command(cmd: &str, help: &str, handler: Handler) -> Result<(), i32> {
    HANDLER.get_or_init(|| handler);
    const EINVAL: i32 = 22;
    let c = CString::new(cmd).map_err(|_| -EINVAL)?;
    let h = CString::new(help).map_err(|_| -EINVAL)?;
    // SAFETY: both strings are NUL-terminated; DPDK copies them. The
    // callback is a plain function living for the process.
    let ret = unsafe { sys::rte_telemetry_register_cmd(c.as_ptr(), Some(callback), h.as_ptr()) };
    if ret != 0 {
        return Err(ret);
    }
    Ok(())
}

/// A dict name DPDK accepts: `[A-Za-z0-9_/]`, under 128 bytes.
fn tel_name(k: &str) -> CString {
    let v: Vec<u8> = k
        .bytes()
        .take(MAX_STRING_LEN - 1)
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'/' {
                b
            } else {
                b'_'
            }
        })
        .collect();
    // No NUL can be left: every byte is one of the allowed ones.
    CString::new(v).unwrap_or_default()
}

/// A string value DPDK can print: printable ASCII, under 128 bytes.
fn tel_str(v: &str) -> CString {
    let v: Vec<u8> = v
        .bytes()
        .take(MAX_STRING_LEN - 1)
        .map(|b| if (0x20..0x7f).contains(&b) { b } else { b'?' })
        .collect();
    CString::new(v).unwrap_or_default()
}

/// Writes `dict` into `d`, which becomes a dict.
///
/// # Safety
/// `d` points to a valid `rte_tel_data` (the callback's, or one from
/// `rte_tel_data_alloc`) that nothing else uses during the call.
unsafe fn emit(d: *mut sys::rte_tel_data, dict: &Dict) {
    // SAFETY: d is valid (the caller's contract).
    unsafe { sys::rte_tel_data_start_dict(d) };
    for (k, v) in dict.iter().take(MAX_DICT_ENTRIES) {
        let name = tel_name(k);
        match v {
            // SAFETY: d is a valid dict (the caller's contract, started above);
            // name is NUL-terminated and DPDK copies it before returning.
            Val::U64(x) => unsafe {
                sys::rte_tel_data_add_dict_u64(d, name.as_ptr(), *x);
            },
            // SAFETY: d is a valid dict (the caller's contract, started above);
            // name is NUL-terminated and DPDK copies it before returning.
            Val::Int(x) => unsafe {
                sys::rte_tel_data_add_dict_int(d, name.as_ptr(), *x);
            },
            Val::Str(x) => {
                let val = tel_str(x);
                // SAFETY: d is a valid dict (the caller's contract); name and val
                // are NUL-terminated and DPDK copies them before returning.
                unsafe { sys::rte_tel_data_add_dict_string(d, name.as_ptr(), val.as_ptr()) };
            }
            Val::Dict(sub) => {
                // SAFETY: a fresh allocation (malloc) or NULL.
                let c = unsafe { sys::rte_tel_data_alloc() };
                if c.is_null() {
                    continue;
                }
                // SAFETY: c is ours until handed over below.
                unsafe { emit(c, sub) };
                // SAFETY: keep = 0: DPDK frees c after writing the reply.
                // If it refuses c (it cannot: the name is valid, the entry
                // count capped), c is still ours to free.
                let ret = unsafe { sys::rte_tel_data_add_dict_container(d, name.as_ptr(), c, 0) };
                if ret < 0 {
                    // SAFETY: c was not taken.
                    unsafe { sys::rte_tel_data_free(c) };
                }
            }
        }
    }
}

/// The callback of every command registered here (runs on DPDK's
/// per-client telemetry thread): the command's handler builds the reply.
extern "C" fn callback(
    cmd: *const c_char,
    params: *const c_char,
    d: *mut sys::rte_tel_data,
) -> c_int {
    if cmd.is_null() || d.is_null() {
        return -1;
    }
    // SAFETY: DPDK passes NUL-terminated strings (params may be NULL) that
    // stay valid for the call.
    let cmd = unsafe { CStr::from_ptr(cmd) }.to_bytes();
    let param = (!params.is_null())
        // SAFETY: params is non-null here, and DPDK passes it NUL-terminated,
        // valid for the call.
        .then(|| unsafe { CStr::from_ptr(params) }.to_string_lossy());
    let Some(handler) = HANDLER.get() else {
        return -1;
    };
    let built = std::panic::catch_unwind(|| handler(cmd, param.as_deref()));
    match built {
        Ok(Some(dict)) => {
            // SAFETY: d is the zeroed rte_tel_data DPDK gave this call.
            unsafe { emit(d, &dict) };
            0
        }
        _ => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_strings_are_made_safe() {
        assert_eq!(tel_name("a-b c/9_").to_bytes(), b"a_b_c/9_");
        assert_eq!(tel_str("caf\u{e9}\n").to_bytes(), b"caf???");
        assert_eq!(tel_str(&"x".repeat(300)).to_bytes().len(), 127);
    }
}
