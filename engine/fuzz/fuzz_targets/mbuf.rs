//! GRO on real mbufs, then software GSO: see `grorx_fuzz::mbuf`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    grorx_fuzz::mbuf::run(data);
});

/// LeakSanitizer's built-in suppressions (read when built with ASan): EAL
/// keeps its argument strings for the life of the process, so grorx leaks
/// them on purpose when it starts EAL, once.
#[no_mangle]
pub extern "C" fn __lsan_default_suppressions() -> *const std::ffi::c_char {
    c"leak:grorx/src/dpdk/eal.rs\n".as_ptr()
}
