//! GRO core under arbitrary frames and bursts: see `grorx_fuzz::run`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    grorx_fuzz::run(data);
});
