//! Generates the DPDK bindings from the system's DPDK (found with pkg-config),
//! compiles bindgen's wrappers for DPDK's static inline functions, and links
//! DPDK shared (EAL then loads every PMD from its plugin directory by itself).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const PACKAGES: &str = "dpdk libdpdk-dev libclang-dev pkg-config";

fn fail(msg: &str) -> ! {
    eprintln!("\nerror: dpdk-sys: {msg}\n");
    panic!("dpdk-sys: {msg}");
}

fn pkg_config(args: &[&str]) -> String {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("libdpdk")
        .output()
        .unwrap_or_else(|e| {
            fail(&format!(
                "cannot run pkg-config ({e}); install it: apt-get install -y {PACKAGES}"
            ))
        });
    if !out.status.success() {
        fail(&format!(
            "pkg-config finds no libdpdk ({}); install DPDK's development files: \
             apt-get install -y {PACKAGES}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).expect("pkg-config output is UTF-8")
}

/// bindgen loads libclang at run time and panics with little context when it
/// is missing: look for it first and say which package provides it.
fn check_libclang() {
    if env::var_os("LIBCLANG_PATH").is_some() {
        return;
    }
    let mut dirs: Vec<PathBuf> = vec![
        "/usr/lib/x86_64-linux-gnu".into(),
        "/usr/lib64".into(),
        "/usr/lib".into(),
    ];
    if let Ok(rd) = std::fs::read_dir("/usr/lib") {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("llvm-") {
                dirs.push(e.path().join("lib"));
            }
        }
    }
    let found = dirs.iter().any(|d| {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("libclang"))
            })
            .unwrap_or(false)
    });
    if !found {
        fail(&format!(
            "libclang not found (bindgen needs it); install: apt-get install -y {PACKAGES} \
             or set LIBCLANG_PATH"
        ));
    }
}

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=helpers.h");
    println!("cargo:rerun-if-changed=helpers.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let cflags_raw = pkg_config(&["--cflags"]);
    let libs_raw = pkg_config(&["--libs"]);
    let version = pkg_config(&["--modversion"]);
    let cflags: Vec<String> = cflags_raw.split_whitespace().map(String::from).collect();
    check_libclang();

    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let wrap_src = out.join("static_fns");

    // Only what grorx uses: a broad rte_.* allowlist hits bindgen bugs on some
    // protocol headers (E0588 on rte_l2tpv2_combined_msg_hdr).
    let mut b = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(cflags.iter().filter(|f| !f.starts_with("-march")))
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrap_src)
        .blocklist_item("per_lcore_.*")
        .opaque_type("rte_l2tpv2_combined_msg_hdr")
        .opaque_type("rte_gtp_psc_generic_hdr")
        .derive_default(true)
        .layout_tests(true)
        .generate_comments(false)
        .prepend_enum_name(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in [
        "rte_eal_.*",
        "rte_eth_.*",
        "rte_pktmbuf_.*",
        "rte_mbuf_.*",
        "rte_mempool_.*",
        "rte_lcore_.*",
        "rte_get_.*",
        "rte_thread_.*",
        "rte_ring_.*",
        "rte_telemetry_.*",
        "rte_tel_.*",
        "rte_socket_.*",
        "rte_rdtsc.*",
        "rte_strerror",
        "rte_version",
        "rte_dev_.*",
        "rte_vdev_.*",
        "rte_net_get_ptype",
        "rte_gro_.*",
        "rte_zmalloc.*",
        "rte_free",
        "rte_log_set_global_level",
        "rte_openlog_stream",
        "rte_delay_us_block",
        "rte_lcore_id",
        "rte_lcore_count",
        "rte_ipv4_.*",
        "rte_ipv6_.*",
        "rte_raw_cksum",
        "rte_vect_get_max_simd_bitwidth",
        "grorx_.*",
    ] {
        b = b.allowlist_function(f);
    }
    for t in [
        "rte_mbuf",
        "rte_eth_.*",
        "rte_mempool.*",
        "rte_ring",
        "rte_gro_param",
    ] {
        b = b.allowlist_type(t);
    }
    for v in [
        "RTE_MBUF_.*",
        "RTE_PKTMBUF_.*",
        "RTE_PTYPE_.*",
        "RTE_ETH_.*",
        "RTE_ETHER_.*",
        "RTE_MAX_.*",
        "RTE_MEMPOOL_.*",
        "RTE_RING_.*",
        "RTE_GRO_.*",
        "RTE_TEL_.*",
        "RTE_LOG_.*",
        "RTE_CACHE_LINE_SIZE",
        "RTE_VERSION.*",
        "SOCKET_ID_ANY",
        "LCORE_ID_ANY",
        "RING_F_.*",
        "grorx_.*",
    ] {
        b = b.allowlist_var(v);
    }
    let bindings = b.generate().unwrap_or_else(|e| {
        fail(&format!(
            "bindgen failed on DPDK {}: {e}; are {PACKAGES} installed?",
            version.trim()
        ))
    });
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");

    // bindgen wrote C wrappers for the static inline functions: compile them with
    // DPDK's own raw cflags (-include rte_config.h, -march: rte_memcpy needs it).
    let mut cc = cc::Build::new();
    cc.file(wrap_src.with_extension("c"))
        .file("helpers.c")
        // The generated file includes "wrapper.h" relative to this crate.
        .include(Path::new(env!("CARGO_MANIFEST_DIR")))
        .opt_level(3)
        .warnings(false);
    for f in &cflags {
        cc.flag(f);
    }
    cc.compile("dpdk_sys_wrappers");

    // Link DPDK shared, as pkg-config says; rte_eth_from_rings lives in the
    // ring PMD and rte_vdev_init in the vdev bus, which pkg-config does not
    // list (drivers are plugins EAL loads).
    for tok in libs_raw.split_whitespace() {
        if let Some(dir) = tok.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = tok.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=rte_net_ring");
    println!("cargo:rustc-link-lib=dylib=rte_bus_vdev");
    println!("cargo:version={}", version.trim());
}
