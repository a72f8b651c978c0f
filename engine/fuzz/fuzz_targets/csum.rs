//! Checksum-only damage in valid streams, verifying and trusting: see
//! `grorx_fuzz::checksums::run`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    grorx_fuzz::checksums::run(data);
});
