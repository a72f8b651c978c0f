//! A laid-out frame's header fields read by name: the layout checked
//! against the bytes once, each read one line.

use super::field::{self, ipv4, ipv6, tcp};
use super::*;

/// Typed reads of a parsed segment's fields (big-endian on the wire).
///
/// `new` checks once that the header layout lies inside the bytes; every
/// read below is then within `[0, payload)` and needs no bounds check.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    b: &'a [u8],
    t: Tcp,
}

impl<'a> Fields<'a> {
    /// The fields of `b` laid out as `t` says. Panics if `t` does not fit `b`
    /// (it always does when `t` comes from `Tcp::parse(b, ..)`).
    #[inline(always)]
    pub fn new(b: &'a [u8], t: Tcp) -> Fields<'a> {
        let l3_min = if t.ipv6 { 40 } else { 20 };
        // One branch: `&`, not `&&`, as every check is cheap and all pass.
        assert!(
            (t.l3 >= 14)
                & (t.l3 as usize + l3_min <= t.l4 as usize)
                & (t.l4 as usize + 20 <= t.payload as usize)
                & (t.payload as usize <= b.len()),
            "header layout outside the frame"
        );
        Fields { b, t }
    }

    /// The header layout the reads follow.
    #[inline(always)]
    pub fn layout(&self) -> Tcp {
        self.t
    }

    #[inline(always)]
    fn u8_at(&self, at: usize) -> u8 {
        debug_assert!(at < self.t.payload as usize);
        // SAFETY: at < payload <= b.len() (checked in new).
        unsafe { *self.b.get_unchecked(at) }
    }
    #[inline(always)]
    fn u16_at(&self, at: usize) -> u16 {
        debug_assert!(at + 2 <= self.t.payload as usize);
        // SAFETY: at + 2 <= payload <= b.len().
        u16::from_be_bytes(unsafe { self.b.as_ptr().add(at).cast::<[u8; 2]>().read() })
    }
    #[inline(always)]
    fn u32_at(&self, at: usize) -> u32 {
        debug_assert!(at + 4 <= self.t.payload as usize);
        // SAFETY: at + 4 <= payload <= b.len().
        u32::from_be_bytes(unsafe { self.b.as_ptr().add(at).cast::<[u8; 4]>().read() })
    }
    #[inline(always)]
    fn slice(&self, from: usize, to: usize) -> &'a [u8] {
        debug_assert!(from <= to && to <= self.t.payload as usize);
        // SAFETY: from <= to <= payload <= b.len().
        unsafe { self.b.get_unchecked(from..to) }
    }
    /// The whole first buffer, headers and what follows.
    #[inline(always)]
    pub fn frame(&self) -> &'a [u8] {
        self.b
    }
    /// Every header byte, Ethernet to the end of TCP's options.
    #[inline(always)]
    pub fn header(&self) -> &'a [u8] {
        self.slice(0, self.t.payload as usize)
    }
    /// The 12 bytes of MAC addresses at the start of the frame (a tunnel's
    /// outer ones).
    #[inline(always)]
    pub fn macs(&self) -> &'a [u8] {
        self.slice(0, field::eth::MACS.end)
    }
    /// TCP sequence number.
    #[inline(always)]
    pub fn seq(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::SEQ.start)
    }
    /// TCP acknowledgment number.
    #[inline(always)]
    pub fn ack(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::ACK.start)
    }
    /// Data offset, flags and window: the word Linux compares whole.
    #[inline(always)]
    pub fn flag_word(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::OFF_FLAGS_WINDOW.start)
    }
    /// TCP flags byte.
    #[inline(always)]
    pub fn flags(&self) -> u8 {
        self.u8_at(self.t.l4 as usize + tcp::FLAGS)
    }
    /// TCP urgent pointer.
    #[inline(always)]
    pub fn urgent(&self) -> u16 {
        self.u16_at(self.t.l4 as usize + tcp::URGENT.start)
    }
    /// Source and destination ports, as one big-endian word.
    #[inline(always)]
    pub fn ports(&self) -> u32 {
        self.u32_at(self.t.l4 as usize + tcp::PORTS.start)
    }
    /// TCP options: the header bytes after the first 20.
    #[inline(always)]
    pub fn options(&self) -> &'a [u8] {
        self.slice(self.t.l4 as usize + tcp::MIN_LEN, self.t.payload as usize)
    }
    /// The TCP header, options included.
    #[inline(always)]
    pub fn tcp_header(&self) -> &'a [u8] {
        self.slice(self.t.l4 as usize, self.t.payload as usize)
    }
    /// The TCP checksum field.
    #[inline(always)]
    pub fn tcp_csum(&self) -> u16 {
        self.u16_at(self.t.l4 as usize + tcp::CHECKSUM.start)
    }
    /// IPv4 ID (0 for IPv6).
    #[inline(always)]
    pub fn ip_id(&self) -> u16 {
        if self.t.ipv6 {
            0
        } else {
            self.u16_at(self.t.l3 as usize + ipv4::ID.start)
        }
    }
    /// IPv4 DF bit.
    #[inline(always)]
    pub fn df(&self) -> bool {
        !self.t.ipv6 && self.u8_at(self.t.l3 as usize + ipv4::FLAGS_FRAG.start) & ipv4::DF != 0
    }
    /// What must not change within a merged packet (`ip_word`).
    #[inline(always)]
    pub fn ip_word(&self) -> u32 {
        let l3 = self.t.l3 as usize;
        ip_word(|at| self.u8_at(l3 + at), self.t.ipv6)
    }
    /// The IPv6 flow label (part of a flow's identity, as in Linux).
    #[inline(always)]
    pub fn flow_label(&self) -> u32 {
        if self.t.ipv6 {
            self.u32_at(self.t.l3 as usize + ipv6::VER_TC_FLOW.start) & ipv6::FLOW_LABEL
        } else {
            0
        }
    }
    /// The IPv6 extension headers in front of TCP (empty for IPv4, and for
    /// IPv6 without them).
    #[inline(always)]
    pub fn ipv6_ext(&self) -> &'a [u8] {
        let at = self.t.l3 as usize + ipv6::HEADER_LEN;
        if self.t.ipv6 && (self.t.l4 as usize) > at {
            self.slice(at, self.t.l4 as usize)
        } else {
            &[]
        }
    }
    /// Source and destination addresses (8 or 32 bytes).
    #[inline(always)]
    pub fn addrs(&self) -> &'a [u8] {
        let l3 = self.t.l3 as usize;
        if self.t.ipv6 {
            self.slice(l3 + ipv6::ADDRS.start, l3 + ipv6::ADDRS.end)
        } else {
            self.slice(l3 + ipv4::ADDRS.start, l3 + ipv4::ADDRS.end)
        }
    }
    /// One's-complement sum of the addresses and the protocol: the part of
    /// the pseudo-header that is the same for every segment of a flow.
    #[inline(always)]
    pub fn pseudo_base(&self) -> u16 {
        csum::pseudo_base(self.addrs(), IPPROTO_TCP)
    }
    /// Sum of the pseudo-header for a TCP length of `tcp_len`.
    #[inline(always)]
    pub fn pseudo_sum(&self, tcp_len: u32) -> u16 {
        csum::fold(csum::pseudo_with_len(self.pseudo_base(), tcp_len))
    }
}

/// What must not change within a merged packet, from the IP header whose
/// byte at offset `at` is `byte(at)`: IPv4 TOS, TTL and DF; IPv6 traffic
/// class and hop limit. TCP and UDP segments alike.
#[inline(always)]
pub(crate) fn ip_word(byte: impl Fn(usize) -> u8, ipv6: bool) -> u32 {
    if ipv6 {
        // Traffic class: the low nibble of byte 0, the high one of byte 1.
        let tc = ((byte(0) as u32 & 0x0f) << 4) | (byte(1) as u32 >> 4);
        (tc << 8) | byte(ipv6::HOP_LIMIT) as u32
    } else {
        ((byte(ipv4::TOS) as u32) << 16)
            | ((byte(ipv4::TTL) as u32) << 8)
            | (byte(ipv4::FLAGS_FRAG.start) & ipv4::DF) as u32
    }
}
