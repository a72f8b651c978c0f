//! One UDP flow's held packet, and what the rules read of a datagram.

use super::*;
use crate::wire::field::udp;

/// Header bytes a UDP fast-path compare covers at most (Ethernet, two tags,
/// IPv6, UDP).
const HDR_MAX: usize = 72;

/// One UDP flow's held packet: what every held packet keeps (`Core`,
/// whose `mss` is the first datagram's payload, the size every merged one
/// has; `Base`), and UDP's own.
pub(in crate::gro) struct UdpHeld<B> {
    pub(in crate::gro) core: Core<B>,
    pub(in crate::gro) base: Base,
    /// The ports' sum: with the length, the UDP header's sum.
    pub(super) ports_sum: u16,
    /// The first datagram's frame length: a full-size one has it.
    pub(super) frame_len: u32,
    /// The first datagram's IPv4 header sum without its ID and checksum
    /// (`csum::ipv4_sum_without`): a datagram whose header equals the
    /// head's but for the ID and checksums must carry the IPv4 checksum
    /// this and its ID give.
    pub(super) ip_sum: u16,
    /// The fast path's compare: the first datagram's headers as words
    /// (`hdr`), and which of their bits every datagram of the packet shares
    /// (`mask`: all but the IPv4 ID and checksum, the UDP checksum, and what
    /// lies past the headers); `words` of them cover the headers (0: no fast
    /// path for this flow).
    pub(super) hdr: [u64; WORDS],
    pub(super) mask: [u64; WORDS],
    pub(super) words: u8,
}

/// Words of header a UDP fast-path compare covers at most.
pub(super) const WORDS: usize = HDR_MAX / 8;

#[inline(always)]
fn word(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

/// The bits of an IP header a datagram's compare leaves out: those the
/// rules let vary and the fast path checks on its own (`VARIES`), as for
/// TCP (the IPv4 ID and header checksum).
const IPV4_OWN: [u8; ipv4::MIN_LEN] = own_bits(Hdr::Ipv4);
const IPV6_OWN: [u8; ipv6::HEADER_LEN] = own_bits(Hdr::Ipv6);

/// Clears the `own` bits from the first bytes of `m`.
#[inline(always)]
fn clear_own<const N: usize>(m: &mut [u8], own: &[u8; N]) {
    let m: &mut [u8; N] = m
        .first_chunk_mut()
        .expect("the IP header lies within the compared bytes");
    for i in 0..N {
        m[i] &= !own[i];
    }
}

/// The compare of the head `b` laid out as `t`: its header words and their
/// mask (see `UdpHeld::hdr`), or None when they do not fit `HDR_MAX` or
/// `b` (a frame shorter than its headers rounded up to a word).
pub(super) fn head_words(b: &[u8], t: &Tcp) -> Option<([u64; WORDS], [u64; WORDS], u8)> {
    let hl = t.payload as usize;
    let words = hl.div_ceil(8);
    if words > WORDS || b.len() < words * 8 {
        return None;
    }
    let mut m = [0u8; HDR_MAX];
    m[..hl].fill(0xff);
    let l3 = t.l3 as usize;
    if t.ipv6 {
        clear_own(&mut m[l3..], &IPV6_OWN);
    } else {
        clear_own(&mut m[l3..], &IPV4_OWN);
    }
    // The datagram's checksum, summed for the merged packet.
    m[field::at(t.l4 as usize, udp::CHECKSUM)].fill(0);
    let mask: [u64; WORDS] = std::array::from_fn(|i| word(&m, i));
    let hdr: [u64; WORDS] =
        std::array::from_fn(|i| if i < words { word(b, i) & mask[i] } else { 0 });
    Some((hdr, mask, words as u8))
}

/// Whether `b`'s headers are `h`'s head's but for what may differ.
#[inline(always)]
pub(super) fn same_header<B>(b: &[u8], h: &UdpHeld<B>) -> bool {
    let n = h.words as usize;
    if n == 0 || b.len() < n * 8 {
        return false;
    }
    let mut d = 0u64;
    for i in 0..n {
        d |= (word(b, i) ^ h.hdr[i]) & h.mask[i];
    }
    d == 0
}

impl<B> Default for UdpHeld<B> {
    fn default() -> Self {
        UdpHeld {
            core: Core::default(),
            base: Base::default(),
            ports_sum: 0,
            frame_len: 0,
            ip_sum: 0,
            hdr: [0; WORDS],
            mask: [0; WORDS],
            words: 0,
        }
    }
}

/// The UDP flows of one queue.
pub(in crate::gro) type UdpTable<B> = Table<UdpHeld<B>>;

/// What the rules read of a datagram.
pub(super) struct Dgram {
    pub(super) ip_word: u32,
    pub(super) id: u16,
    pub(super) payload: u32,
    pub(super) frags: u16,
    pub(super) ports_sum: u16,
    pub(super) ulen: u16,
    pub(super) csum: u16,
}

impl Dgram {
    /// Why a datagram laid out as `t` is never merged nor held: no
    /// checksum (a zero one: IPv4 allows it; Linux needs one "for symmetry
    /// with GSO"), no payload, IPv6 extension headers.
    #[inline(always)]
    pub(super) fn never_held(&self, t: &Tcp) -> Option<Pass> {
        if self.csum == 0 {
            Some(Pass::UdpNoChecksum)
        } else if self.payload == 0 {
            Some(Pass::UdpNoPayload)
        } else if t.ipv6 && t.l4 != t.l3 + ipv6::HEADER_LEN as u16 {
            Some(Pass::Frame(NotTcp::Ipv6Ext))
        } else {
            None
        }
    }

    /// Reads `t`'s fields from `b` (the layout `Tcp::parse_udp` found in it).
    pub(super) fn read(b: &[u8], t: &Tcp, frags: u16) -> Dgram {
        let (l3, l4) = (t.l3 as usize, t.l4 as usize);
        let ip_word = crate::wire::ip_word(|at| b[l3 + at], t.ipv6);
        let id = if t.ipv6 {
            0
        } else {
            field::read16(b, l3, ipv4::ID)
        };
        let ports = &b[field::at(l4, udp::PORTS)];
        Dgram {
            ip_word,
            id,
            payload: t.payload_len,
            frags,
            ports_sum: csum::sum(ports),
            ulen: field::read16(b, l4, udp::LEN),
            csum: field::read16(b, l4, udp::CHECKSUM),
        }
    }
}
