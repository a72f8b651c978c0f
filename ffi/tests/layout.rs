//! The Rust view of DPDK must match the C compiler's: struct layout of the
//! mbuf (read per packet by plain field reads), the hand-written RTE_BIT64
//! constants and the tx_offload bit-field packing. No EAL needed.

use dpdk_sys::*;
use std::ffi::{CStr, CString};
use std::mem::{offset_of, size_of};

#[test]
fn mbuf_layout_matches_c() {
    // SAFETY: a C function with no arguments that only returns a constant.
    assert_eq!(size_of::<rte_mbuf>(), unsafe { grorx_sizeof_rte_mbuf() });
    assert_eq!(size_of::<rte_mbuf>(), 128, "two cache lines in 22.11");
    let rust: &[(&str, usize)] = &[
        ("buf_addr", offset_of!(rte_mbuf, buf_addr)),
        ("data_off", offset_of!(rte_mbuf, data_off)),
        ("refcnt", offset_of!(rte_mbuf, refcnt)),
        ("nb_segs", offset_of!(rte_mbuf, nb_segs)),
        ("port", offset_of!(rte_mbuf, port)),
        ("ol_flags", offset_of!(rte_mbuf, ol_flags)),
        ("packet_type", offset_of!(rte_mbuf, __bindgen_anon_1)),
        ("pkt_len", offset_of!(rte_mbuf, pkt_len)),
        ("data_len", offset_of!(rte_mbuf, data_len)),
        ("vlan_tci", offset_of!(rte_mbuf, vlan_tci)),
        ("hash", offset_of!(rte_mbuf, __bindgen_anon_2)),
        ("buf_len", offset_of!(rte_mbuf, buf_len)),
        ("pool", offset_of!(rte_mbuf, pool)),
        ("next", offset_of!(rte_mbuf, next)),
        ("tx_offload", offset_of!(rte_mbuf, __bindgen_anon_3)),
        ("priv_size", offset_of!(rte_mbuf, priv_size)),
        ("timesync", offset_of!(rte_mbuf, timesync)),
    ];
    for (name, off) in rust {
        let c = CString::new(*name).unwrap();
        // SAFETY: `c` is a NUL-terminated string that outlives the call, which
        // only reads it.
        let c_off = unsafe { grorx_offsetof_rte_mbuf(c.as_ptr()) };
        assert_eq!(*off, c_off, "offset of rte_mbuf.{name}");
    }
}

#[test]
fn bit64_constants_match_c() {
    // SAFETY: helpers.c defines `grorx_consts` as a static array of exactly
    // `grorx_consts_len` entries, never written.
    let table = unsafe { std::slice::from_raw_parts(grorx_consts.as_ptr(), grorx_consts_len) };
    let c: std::collections::HashMap<String, u64> = table
        .iter()
        .map(|e| {
            // SAFETY: every entry's `name` is a static NUL-terminated string literal.
            let n = unsafe { CStr::from_ptr(e.name) }
                .to_str()
                .unwrap()
                .to_owned();
            (n, e.value)
        })
        .collect();
    let mut checked = 0;
    for (name, v) in BIT64_CONSTS.iter().chain(PLAIN_CONSTS) {
        let cv = c
            .get(*name)
            .unwrap_or_else(|| panic!("{name} missing from helpers.c"));
        assert_eq!(v, cv, "{name}");
        checked += 1;
    }
    assert_eq!(checked, c.len(), "every C constant has a Rust twin");
}

#[test]
fn tx_offload_packing_matches_bitfields() {
    let mut m: rte_mbuf = Default::default();
    // SAFETY: `m` is a zeroed, owned rte_mbuf; both union views are plain
    // integer bits, so any value is valid to read through either.
    unsafe {
        let bf = &mut m.__bindgen_anon_3.__bindgen_anon_1;
        bf.set_l2_len(14);
        bf.set_l3_len(40);
        bf.set_l4_len(32);
        bf.set_tso_segsz(1448);
        assert_eq!(
            m.__bindgen_anon_3.tx_offload,
            inline::tx_offload_word(14, 40, 32, 1448)
        );
    }
}

#[test]
fn mbuf_flag_constants_are_bound() {
    // Plain shifts bindgen evaluates; spot-check the ones GRO relies on.
    assert_eq!(RTE_MBUF_F_RX_L4_CKSUM_GOOD, 1 << 8);
    assert_eq!(RTE_MBUF_F_RX_IP_CKSUM_GOOD, 1 << 7);
    assert_eq!(RTE_MBUF_F_TX_TCP_SEG, 1 << 50);
    assert_eq!(RTE_PKTMBUF_HEADROOM, 128);
}
