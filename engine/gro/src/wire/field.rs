//! Header fields, each named once: byte ranges (or single bytes) from the
//! start of their own header, as smoltcp's `field` modules name them. Code
//! that reads or writes a header field goes through these, moved to where
//! the header starts with [`at`] or read and written with [`read16`]
//! and its kin.

use core::ops::Range;

/// A field's bytes, from the start of its header.
pub type Field = Range<usize>;

/// `f` moved to a header that starts at `base`.
#[inline(always)]
pub const fn at(base: usize, f: Field) -> Field {
    base + f.start..base + f.end
}

/// A 16-bit field of the header at `base` (network order).
#[inline(always)]
pub fn read16(b: &[u8], base: usize, f: Field) -> u16 {
    debug_assert_eq!(f.len(), 2);
    let at = base + f.start;
    // One bounds check and one load, where two indexings would check twice.
    u16::from_be_bytes(b[at..at + 2].try_into().unwrap())
}

/// A 32-bit field of the header at `base` (network order).
#[inline(always)]
pub fn read32(b: &[u8], base: usize, f: Field) -> u32 {
    debug_assert_eq!(f.len(), 4);
    u32::from_be_bytes(b[at(base, f)].try_into().unwrap())
}

/// Writes a 16-bit field of the header at `base` (network order).
#[inline(always)]
pub fn write16(b: &mut [u8], base: usize, f: Field, v: u16) {
    debug_assert_eq!(f.len(), 2);
    b[at(base, f)].copy_from_slice(&v.to_be_bytes());
}

/// Writes a 32-bit field of the header at `base` (network order).
#[inline(always)]
pub fn write32(b: &mut [u8], base: usize, f: Field, v: u32) {
    debug_assert_eq!(f.len(), 4);
    b[at(base, f)].copy_from_slice(&v.to_be_bytes());
}

/// Ethernet (and 802.1Q/802.1ad tags, 4 bytes each after the MACs).
pub mod eth {
    use super::Field;
    /// Destination then source MAC.
    pub const MACS: Field = 0..12;
    /// The EtherType (or a tag's TPID) right after the MACs.
    pub const ETHERTYPE: Field = 12..14;
    /// A VLAN tag's TCI, from the start of the tag.
    pub const TAG_TCI: Field = 2..4;
    /// Bytes of a VLAN tag.
    pub const TAG_LEN: usize = 4;
    /// Bytes of an untagged Ethernet header.
    pub const HEADER_LEN: usize = 14;
}

/// IPv4 (RFC 791).
pub mod ipv4 {
    use super::Field;
    /// Version and IHL.
    pub const VER_IHL: usize = 0;
    /// DSCP and ECN (TOS).
    pub const TOS: usize = 1;
    /// Total length.
    pub const TOTAL_LEN: Field = 2..4;
    /// Identification.
    pub const ID: Field = 4..6;
    /// Flags (reserved, DF, MF) and fragment offset.
    pub const FLAGS_FRAG: Field = 6..8;
    /// Don't Fragment, in the first byte of `FLAGS_FRAG`.
    pub const DF: u8 = 0x40;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Field = 10..12;
    /// Source then destination address.
    pub const ADDRS: Field = 12..20;
    /// Bytes of a header without options.
    pub const MIN_LEN: usize = 20;
}

/// IPv6 (RFC 8200).
pub mod ipv6 {
    use super::Field;
    /// Version, traffic class, flow label.
    pub const VER_TC_FLOW: Field = 0..4;
    /// The flow label's bits in `VER_TC_FLOW`, read as one word.
    pub const FLOW_LABEL: u32 = 0x000f_ffff;
    /// Payload length (extension headers included).
    pub const PAYLOAD_LEN: Field = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source then destination address.
    pub const ADDRS: Field = 8..40;
    /// Bytes of the fixed header.
    pub const HEADER_LEN: usize = 40;
}

/// An IPv6 extension header (hop-by-hop, routing, fragment, destination
/// options, AH).
pub mod ipv6_ext {
    use super::Field;
    /// The header after this one.
    pub const NEXT_HEADER: usize = 0;
    /// Length: in 8-byte units past the first 8 (AH: 4-byte units past
    /// the first 8).
    pub const LEN: usize = 1;
    /// A fragment header's offset and flags (offset in its top 13 bits).
    pub const FRAG_OFFSET: Field = 2..4;
}

/// A hop-by-hop header holding only a jumbo payload option (RFC 2675), as
/// Linux puts in front of an IPv6 packet past 64 KiB (BIG TCP).
pub mod ipv6_jumbo {
    use super::Field;
    /// The header after this one.
    pub const NEXT_HEADER: usize = 0;
    /// Length in 8-byte units past the first 8: 0.
    pub const LEN: usize = 1;
    /// The option's type: jumbo payload.
    pub const OPT_TYPE: usize = 2;
    /// The option's data length: 4.
    pub const OPT_LEN: usize = 3;
    /// The payload length past the IPv6 header, this header included.
    pub const PAYLOAD_LEN: Field = 4..8;
    /// The header's size.
    pub const HEADER_LEN: usize = 8;
    /// `NEXT_HEADER`'s value for a hop-by-hop header.
    pub const HOP_BY_HOP: u8 = 0;
    /// `OPT_TYPE`'s value.
    pub const JUMBO: u8 = 0xc2;
}

/// TCP (RFC 9293).
pub mod tcp {
    use super::Field;
    /// Source then destination port.
    pub const PORTS: Field = 0..4;
    /// Sequence number.
    pub const SEQ: Field = 4..8;
    /// Acknowledgment number.
    pub const ACK: Field = 8..12;
    /// Data offset, flags and window: the word Linux compares whole.
    pub const OFF_FLAGS_WINDOW: Field = 12..16;
    /// Data offset (high nibble).
    pub const DATA_OFF: usize = 12;
    /// Flags.
    pub const FLAGS: usize = 13;
    /// Checksum.
    pub const CHECKSUM: Field = 16..18;
    /// Urgent pointer.
    pub const URGENT: Field = 18..20;
    /// Bytes of a header without options (where options start).
    pub const MIN_LEN: usize = 20;
}

/// UDP (RFC 768).
pub mod udp {
    use super::Field;
    /// Source then destination port.
    pub const PORTS: Field = 0..4;
    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Length: header and payload.
    pub const LEN: Field = 4..6;
    /// Checksum (0: none, IPv4 only).
    pub const CHECKSUM: Field = 6..8;
    /// Bytes of the header.
    pub const HEADER_LEN: usize = 8;
}

/// VXLAN (RFC 7348), after its UDP header.
pub mod vxlan {
    use super::Field;
    /// Flags (the I flag, 0x08: the VNI is valid) and reserved bits.
    pub const FLAGS: usize = 0;
    /// The VXLAN network identifier (24 bits) and a reserved byte.
    pub const VNI: Field = 4..8;
    /// Bytes of the header; the inner Ethernet frame follows.
    pub const HEADER_LEN: usize = 8;
    /// The I flag.
    pub const FLAG_VNI: u8 = 0x08;
}

/// Geneve (RFC 8926), after its UDP header.
pub mod geneve {
    use super::Field;
    /// Version (top 2 bits) and options length in 4-byte words.
    pub const VER_OPT_LEN: usize = 0;
    /// OAM and critical-options flags.
    pub const FLAGS: usize = 1;
    /// The protocol of the payload (0x6558: Ethernet).
    pub const PROTOCOL: Field = 2..4;
    /// The virtual network identifier (24 bits) and a reserved byte.
    pub const VNI: Field = 4..8;
    /// Bytes of the fixed header; options and then the payload follow.
    pub const HEADER_LEN: usize = 8;
    /// The protocol type of an Ethernet payload (transparent bridging).
    pub const PROTO_ETHERNET: u16 = 0x6558;
}
