//! GRO through VXLAN and Geneve under arbitrary segments, outer edits,
//! damage and bursts: see `grorx_fuzz::tunnel::run`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    grorx_fuzz::tunnel::run(data);
});
