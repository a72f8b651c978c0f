//! BIG TCP packets (GRO's past 64 KiB) on their way out: no TSO request,
//! virtio header or tunnel carries one whole, so the forwarder cuts them
//! into TSO pieces within 64 KiB where the port has TSO, else into
//! segments, the IPv6 jumbo header (RFC 2675) taken out first; each piece's
//! or segment's IP length is written as any segment's is.

use crate::gro::GroBuf;
use crate::skb::Skb;
use crate::wire::field::{ipv6, ipv6_jumbo as jumbo};

pub(super) use crate::gro::big::IP_MAX;

/// Takes the jumbo hop-by-hop header out of an IPv6 packet whose IPv6
/// header starts at `l3`, if it carries one: the Ethernet and IPv6 headers
/// move 8 bytes later, over it, and the IPv6 header leads to what it led
/// to. Returns the bytes taken out (0 for IPv4, or IPv6 without one).
pub(super) fn strip_jumbo(skb: &mut Skb, l3: usize) -> usize {
    let hdrs = l3 + ipv6::HEADER_LEN;
    let b = skb.head_mut();
    let is_jumbo = b.len() >= hdrs + jumbo::HEADER_LEN
        && b[l3] >> 4 == 6
        && b[l3 + ipv6::NEXT_HEADER] == jumbo::HOP_BY_HOP
        && b[hdrs + jumbo::LEN] == 0
        && b[hdrs + jumbo::OPT_TYPE] == jumbo::JUMBO;
    if !is_jumbo {
        return 0;
    }
    let next = b[hdrs + jumbo::NEXT_HEADER];
    b.copy_within(0..hdrs, jumbo::HEADER_LEN);
    // The head holds the jumbo header and more (checked above), so the
    // pull cannot fail once the headers have moved.
    let pulled = skb.pull(jumbo::HEADER_LEN as u16);
    debug_assert!(pulled, "the head held the jumbo header");
    skb.head_mut()[l3 + ipv6::NEXT_HEADER] = next;
    jumbo::HEADER_LEN
}
