//! DPDK's own GRO (`rte_gro`, 22.11) as a baseline for benchmarks and the
//! differential test: lightweight (burst) mode, TCP over IPv4 and TCP/IPv4
//! inside VXLAN over IPv4 (what it supports).
//!
//! What a DPDK application on grorx's vdev PMDs must do to get any merge out
//! of rte_gro, and nothing more:
//! 1. [`classify`] fills `packet_type` and `l2_len/l3_len/l4_len` (no vdev
//!    PMD does; without them rte_gro merges nothing), and for VXLAN the
//!    tunnel's type and outer lengths, which `rte_net_get_ptype` does not
//!    give (it stops at the outer UDP header).
//! 2. [`RteGro::reassemble`] calls `rte_gro_reassemble_burst`.
//! 3. [`fix_checksums`] on what it returns, before the packets go anywhere that
//!    reads checksums: rte_gro rewrites the IPv4 total length of a merged
//!    packet but leaves its IPv4 header checksum and TCP checksum stale.
//!
//! Behaviour of rte_gro 22.11 worth knowing when comparing (from its
//! sources, confirmed by `tests/differential.rs`): it merges only segments
//! whose flags are exactly ACK; a PSH segment is returned unprocessed, and in
//! burst mode unprocessed packets come back at the END of the array, after
//! everything the table held: a PSH segment followed by more data of its flow
//! in the same burst leaves after that data (out of order). It knows no IPv6;
//! it keys flows on the ACK number too; it validates no checksum; it holds at
//! most `RTE_GRO_MAX_BURST_ITEM_NUM` (128) packets per call, the rest pass
//! unmerged.
//!
//! These functions take raw mbuf pointers because that is rte_gro's currency;
//! they are `unsafe` for that reason only: each says what the pointers must be.

use crate::csum;
use crate::dpdk::gro::ptype;
pub use crate::dpdk::gro::{RteGro, MAX_ITEMS};
use crate::dpdk::mbuf::{field as mb, rte_mbuf};
use crate::wire::field::{self, ipv4, ipv6, tcp, udp};
use crate::wire::{NotTcp, Tcp, Tunnels};

/// Sets each mbuf's `packet_type` and `l2_len/l3_len/l4_len` from its headers,
/// with `rte_net_get_ptype`: one FFI call per packet. That cost is inherent to
/// this baseline: it is what any DPDK application must pay before rte_gro on
/// PMDs that do not classify (every vdev here), so a fair comparison pays it.
///
/// # Safety
/// Every pointer is a valid mbuf the caller owns and may write.
pub unsafe fn classify(pkts: &mut [*mut rte_mbuf]) {
    for &m in pkts.iter() {
        // SAFETY: m is a valid mbuf the caller owns and lets us write (its
        // contract).
        unsafe {
            let (t, [l2, l3, l4]) = crate::dpdk::gro::packet_type(m);
            mb::set_packet_type(m, t);
            mb::set_tx_offload(m, l2, l3, l4, 0);
            if t & ptype::L4_MASK == ptype::L4_UDP {
                classify_vxlan(m, t);
            }
        }
    }
}

/// The tunnels rte_gro merges through: VXLAN on its IANA port.
const VXLAN_ONLY: Tunnels = Tunnels {
    on: true,
    vxlan: [crate::wire::VXLAN_PORT, 0, 0, 0],
    geneve: [0, 0],
};

/// Types a UDP frame that is TCP/IPv4 inside VXLAN over IPv4 as rte_gro's
/// VXLAN table wants it: the tunnel and inner types in `packet_type`,
/// `outer_l2_len`/`outer_l3_len`, and `l2_len` from the outer UDP header
/// to the inner IP header.
///
/// # Safety
/// `m` is a valid mbuf the caller owns and may write, `ptype` its type.
unsafe fn classify_vxlan(m: *mut rte_mbuf, ptype: u32) {
    // SAFETY: the first segment's data_len bytes belong to m (the caller's
    // contract); the borrow ends before m is written.
    let (t, o) = unsafe {
        let head = std::slice::from_raw_parts(mb::mtod(m), mb::data_len(m) as usize);
        match Tcp::parse_tunnel(head, mb::pkt_len(m) as usize, false, &VXLAN_ONLY) {
            Ok((t, o)) if !t.ipv6 && !o.ipv6 => (t, o),
            _ => return,
        }
    };
    let ptype = ptype
        | ptype::TUNNEL_VXLAN
        | ptype::INNER_L2_ETHER
        | ptype::INNER_L3_IPV4
        | ptype::INNER_L4_TCP;
    let (l2, l3, l4) = ((t.l3 - o.l4) as u64, t.l3_len() as u64, t.l4_len() as u64);
    // SAFETY: field writes on the mbuf the caller lets us write.
    unsafe {
        mb::set_packet_type(m, ptype);
        mb::set_tx_offload(m, l2, l3, l4, 0);
        (*m).__bindgen_anon_3.tx_offload |=
            ((o.l4 - o.l3) as u64 & 0x1ff) << 40 | (o.l3 as u64 & 0x7f) << 49;
    }
}

/// Recomputes, in place, the IPv4 header checksum and the full TCP checksum
/// (pseudo-header, TCP header and payload over the whole chain) of a packet
/// rte_gro may have merged; IPv6 gets its TCP checksum only (it has no header
/// checksum). Inside VXLAN over IPv4, the inner ones, then the outer IPv4
/// header checksum and, when one is set, the outer UDP checksum. A packet
/// that is neither (see [`NotTcp`]) is left untouched and the reason
/// returned. Correct on unmerged packets too.
///
/// Reads only mbuf fields and bytes: it makes no DPDK call.
///
/// # Safety
/// `m` is a valid mbuf chain head the caller owns and may write, with its
/// headers contiguous in the first segment (rte_gro's output always has them
/// there: it chains payload behind the first packet's head).
pub unsafe fn fix_checksums(m: *mut rte_mbuf) -> Result<(), NotTcp> {
    // SAFETY: the caller guarantees `m` is a valid chain head.
    let pkt_len = unsafe { mb::pkt_len(m) } as usize;
    let (t, outer) = {
        // SAFETY: the first segment's data_len bytes from mtod belong to m;
        // this borrow ends with the block.
        let head = unsafe { std::slice::from_raw_parts(mb::mtod(m), mb::data_len(m) as usize) };
        match Tcp::parse(head, pkt_len, false) {
            Ok(t) => (t, None),
            Err(NotTcp::NotTcp) => match Tcp::parse_tunnel(head, pkt_len, false, &VXLAN_ONLY) {
                Ok((t, o)) => (t, Some(o)),
                Err(_) => return Err(NotTcp::NotTcp),
            },
            Err(e) => return Err(e),
        }
    };
    // SAFETY: the parse put both headers inside the first segment, which
    // the caller lets us write; the chain is the caller's to read.
    unsafe {
        fix_l4(m, t.l3 as usize, t.l4 as usize, t.ipv6, tcp::CHECKSUM.start);
        if let Some(o) = outer {
            let l4 = o.l4 as usize;
            let head = std::slice::from_raw_parts(mb::mtod(m), l4 + 8);
            if field::read16(head, l4, udp::CHECKSUM) != 0 {
                fix_l4(m, o.l3 as usize, l4, o.ipv6, udp::CHECKSUM.start);
            } else if !o.ipv6 {
                fix_ipv4_header(m, o.l3 as usize);
            }
        }
    }
    Ok(())
}

/// The IPv4 header checksum (unless `ipv6`) of the IP header at `l3`, then
/// the L4 checksum at `l4 + csum_at` over the pseudo-header and the chain
/// from `l4` (TCP, or UDP: a computed 0 is written 0xffff).
///
/// # Safety
/// `m` is a valid chain head the caller may write, whose first segment
/// holds both headers.
unsafe fn fix_l4(m: *mut rte_mbuf, l3: usize, l4: usize, ipv6: bool, csum_at: usize) {
    // SAFETY: the caller's contract: the headers lie in the first segment.
    unsafe {
        if !ipv6 {
            fix_ipv4_header(m, l3);
        }
        let l4_len = mb::pkt_len(m) - l4 as u32;
        let head = std::slice::from_raw_parts_mut(mb::mtod(m), l4 + csum_at + 2);
        let proto = if csum_at == udp::CHECKSUM.start {
            crate::wire::IPPROTO_UDP
        } else {
            crate::wire::IPPROTO_TCP
        };
        let addrs = if ipv6 {
            field::at(l3, ipv6::ADDRS)
        } else {
            field::at(l3, ipv4::ADDRS)
        };
        let pseudo = csum::pseudo(&head[addrs], proto, l4_len);
        head[l4 + csum_at..l4 + csum_at + 2].copy_from_slice(&[0, 0]);
        let c = match csum::finish(csum::add(pseudo, chain_sum(m, l4))) {
            0 if proto == crate::wire::IPPROTO_UDP => 0xffff,
            c => c,
        };
        let head = std::slice::from_raw_parts_mut(mb::mtod(m), l4 + csum_at + 2);
        head[l4 + csum_at..l4 + csum_at + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// Rewrites the checksum of the IPv4 header (without options) at `l3`.
///
/// # Safety
/// `m` is a valid mbuf the caller may write whose first segment holds the
/// header.
unsafe fn fix_ipv4_header(m: *mut rte_mbuf, l3: usize) {
    // SAFETY: the caller's contract.
    let head = unsafe { std::slice::from_raw_parts_mut(mb::mtod(m), l3 + ipv4::MIN_LEN) };
    field::write16(head, l3, ipv4::CHECKSUM, 0);
    let c = csum::ipv4_header(&head[l3..l3 + ipv4::MIN_LEN]);
    field::write16(head, l3, ipv4::CHECKSUM, c);
}

/// One's-complement sum of a chain's bytes from packet offset `off` to its
/// end. A segment that starts at an odd offset of the summed range has its
/// sum byte-swapped into place (RFC 1071's byte-order independence).
///
/// # Safety
/// `m` is a valid mbuf chain head the caller may read.
unsafe fn chain_sum(mut m: *const rte_mbuf, mut off: usize) -> u16 {
    let mut s = csum::Chained::default();
    // SAFETY: the caller guarantees a readable chain: each segment is read only
    // when non-null, and [off, dl) lies inside its data.
    unsafe {
        while !m.is_null() {
            let dl = mb::data_len(m) as usize;
            if off < dl {
                s.add(std::slice::from_raw_parts(mb::mtod(m).add(off), dl - off));
                off = 0;
            } else {
                off -= dl;
            }
            m = mb::next(m);
        }
    }
    s.value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{pattern_byte, FlowSpec, Segment, TCP_ACK};

    /// Chains of fake mbufs over plain vectors: enough for code that reads
    /// only mbuf fields (no pool, no EAL).
    struct FakeChain {
        mbufs: Vec<rte_mbuf>,
        bufs: Vec<Vec<u8>>,
    }

    impl FakeChain {
        fn new(mut bufs: Vec<Vec<u8>>) -> FakeChain {
            let total: usize = bufs.iter().map(|p| p.len()).sum();
            let segs = bufs.len();
            let mut mbufs: Vec<rte_mbuf> = bufs
                .iter_mut()
                .enumerate()
                .map(|(i, p)| {
                    // SAFETY: rte_mbuf is plain C data (integers, pointers,
                    // unions of them): all-zero bytes are a valid value.
                    let mut m: rte_mbuf = unsafe { std::mem::zeroed() };
                    m.buf_addr = p.as_mut_ptr().cast();
                    m.buf_len = p.len() as u16;
                    m.data_len = p.len() as u16;
                    m.pkt_len = if i == 0 { total } else { p.len() } as u32;
                    m.nb_segs = if i == 0 { segs } else { 1 } as u16;
                    m
                })
                .collect();
            // Link once the vector is complete, so the addresses hold.
            let base = mbufs.as_mut_ptr();
            for i in 0..segs - 1 {
                // SAFETY: i + 1 < segs: both inside the vector.
                unsafe { (*base.add(i)).next = base.add(i + 1) };
            }
            FakeChain { mbufs, bufs }
        }

        fn head(&mut self) -> *mut rte_mbuf {
            self.mbufs.as_mut_ptr()
        }

        fn bytes(&self) -> Vec<u8> {
            self.bufs.concat()
        }
    }

    /// A merged packet as rte_gro leaves it: the first frame's head, the
    /// payloads of the others chained behind it, the IP (or IPv6 payload)
    /// length rewritten, both checksums those of the first frame (stale).
    fn merged(ipv6: bool, vlans: Vec<u16>, sizes: &[usize]) -> (FakeChain, FlowSpec) {
        let mut spec = FlowSpec::numbered(3, ipv6);
        spec.vlans = vlans;
        let first: Vec<u8> = (0..sizes[0] as u64).map(|o| pattern_byte(3, o)).collect();
        let s = Segment {
            seq: 77,
            ack: 1,
            flags: TCP_ACK,
            ip_id: 9,
            tsval: 5,
            tsecr: 6,
            payload_len: 0,
        };
        let mut parts = vec![spec.frame(&s, &first)];
        let mut off = sizes[0] as u64;
        for &n in &sizes[1..] {
            parts.push((off..off + n as u64).map(|o| pattern_byte(3, o)).collect());
            off += n as u64;
        }
        let l3 = spec.l2_len();
        let total = spec.header_len() as u64 + off;
        let h = &mut parts[0];
        if ipv6 {
            let plen = (total as usize - l3 - ipv6::HEADER_LEN) as u16;
            field::write16(h, l3, ipv6::PAYLOAD_LEN, plen);
        } else {
            let tot = (total as usize - l3) as u16;
            field::write16(h, l3, ipv4::TOTAL_LEN, tot);
        }
        (FakeChain::new(parts), spec)
    }

    /// (IPv4 header valid, TCP checksum valid) of a contiguous frame.
    fn valid(spec: &FlowSpec, f: &[u8]) -> (bool, bool) {
        let l3 = spec.l2_len();
        let (ip_ok, l4, pseudo) = if f[l3] >> 4 == 6 {
            let l4 = l3 + ipv6::HEADER_LEN;
            let tcp = (f.len() - l4) as u32;
            (
                true,
                l4,
                csum::pseudo(&f[field::at(l3, ipv6::ADDRS)], 6, tcp),
            )
        } else {
            let l4 = l3 + ipv4::MIN_LEN;
            let tcp = (f.len() - l4) as u32;
            let ok = csum::sum(&f[l3..l4]) == 0xffff;
            (ok, l4, csum::pseudo(&f[field::at(l3, ipv4::ADDRS)], 6, tcp))
        };
        (ip_ok, csum::add(pseudo, csum::sum(&f[l4..])) == 0xffff)
    }

    #[test]
    fn fixes_stale_checksums_across_odd_segment_boundaries() {
        for ipv6 in [false, true] {
            for vlans in [vec![], vec![42], vec![1, 2]] {
                // Odd sizes put later segments at odd offsets of the TCP range.
                for sizes in [vec![1448, 1448, 1448], vec![1001, 333, 1, 1448, 7]] {
                    let (mut c, spec) = merged(ipv6, vlans.clone(), &sizes);
                    let (ip0, tcp0) = valid(&spec, &c.bytes());
                    assert!(!tcp0, "the set-up leaves the TCP checksum stale");
                    assert!(ipv6 || !ip0, "the set-up leaves the IP checksum stale");
                    // SAFETY: a well-formed fake chain we own.
                    unsafe { fix_checksums(c.head()) }.unwrap();
                    assert_eq!(valid(&spec, &c.bytes()), (true, true), "{ipv6} {sizes:?}");
                }
            }
        }
    }

    #[test]
    fn valid_packets_stay_valid_and_non_tcp_is_untouched() {
        let (mut c, spec) = merged(false, vec![], &[500]);
        let before = c.bytes();
        assert_eq!(valid(&spec, &before), (true, true));
        // SAFETY: a well-formed fake chain we own.
        unsafe { fix_checksums(c.head()) }.unwrap();
        assert_eq!(
            c.bytes(),
            before,
            "recomputing a valid packet changes nothing"
        );

        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut c = FakeChain::new(vec![arp.clone()]);
        // SAFETY: a well-formed fake chain we own.
        assert_eq!(unsafe { fix_checksums(c.head()) }, Err(NotTcp::NotIp));
        assert_eq!(c.bytes(), arp);
    }
}
