//! A flow's identity, as Linux decides "same flow": the MAC header
//! (addresses, VLAN tags and their types), the IP addresses (and the IPv6 flow label) and
//! the TCP ports. Seven words: compared in a few instructions, hashed cheaply.
//! A tunnelled segment's key holds its inner fields, with a keyed digest of
//! the tunnel's identity (outer MAC header, addresses, UDP ports, tunnel
//! header and VNI) and the inner MACs in place of the MACs: GRO compares the
//! outer headers byte for byte before a merge, so a digest that collides
//! can cost merges, never merge two flows.

use crate::wire::field::{self, eth, ipv4, ipv6, tcp, udp};
use crate::wire::{Fields, Outer};

/// A flow's identity (MAC addresses, VLAN tags, IP addresses, IPv6 flow
/// label, TCP ports) packed in seven words.
#[derive(Debug, Clone, Copy, Eq, Default)]
pub struct FlowKey {
    w: [u64; 7],
}

#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

impl PartialEq for FlowKey {
    /// Word by word, without a call to memcmp.
    #[inline(always)]
    fn eq(&self, o: &FlowKey) -> bool {
        let mut d = 0;
        for i in 0..7 {
            d |= self.w[i] ^ o.w[i];
        }
        d == 0
    }
}

impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.w.hash(h)
    }
}

/// The identity fields, wherever they were read from.
struct Parts<'a> {
    /// Destination then source MAC (12 bytes).
    macs: &'a [u8],
    tci: [u16; 2],
    vlans: u8,
    /// Bit i: tag i is 802.1ad.
    ad: u8,
    ipv6: bool,
    flow_label: u32,
    ports: u32,
    /// Source then destination address (8 or 32 bytes).
    addrs: &'a [u8],
    /// Inside a tunnel (`macs` is then the tunnel's digest).
    tunnel: bool,
}

/// Which of a layout's VLAN tags are 802.1ad (bit i: tag i), read from the
/// Ethernet header at `l2`: an 802.1ad tag is another MAC header than an
/// 802.1Q one with the same TCI.
#[inline(always)]
fn tag_types(h: &[u8], l2: usize, t: &crate::wire::Tcp) -> u8 {
    let tpid = |i: u8| field::at(l2 + eth::TAG_LEN * i as usize, eth::ETHERTYPE);
    let ad = |i: u8| (t.vlans > i && h[tpid(i)] == crate::wire::ETH_P_8021AD.to_be_bytes()) as u8;
    ad(0) | ad(1) << 1
}

impl FlowKey {
    /// Does this key belong to a flow between the addresses (and VLANs) a
    /// hint describes, and its ports when it has them? MAC addresses are
    /// not compared: this matches a fragment past the first, which cannot
    /// name its flow, to every flow it may belong to.
    pub fn matches(&self, h: &crate::wire::FlowHint) -> bool {
        let w = &self.w;
        let tci = (w[1] >> 32) as u32;
        let vlans = ((w[2] >> id_bits::VLANS) & 3) as u8;
        let ipv6 = (w[2] >> id_bits::IPV6) & 1 == 1;
        let ad = ((w[2] >> id_bits::AD) & 3) as u8;
        let tunnel = (w[2] >> id_bits::TUNNEL) & 1 == 1;
        if vlans != h.vlans
            || tunnel != h.tunnel
            || ad != h.ad
            || ipv6 != h.ipv6
            || tci != (h.tci[0] as u32 | (h.tci[1] as u32) << 16)
        {
            return false;
        }
        if let Some(p) = h.ports {
            if w[2] as u32 != p {
                return false;
            }
        }
        let n = if ipv6 { 4 } else { 1 };
        (0..n).all(|i| w[3 + i] == word(&h.addrs, i * 8))
            && (!ipv6 || (w[2] >> id_bits::FLOW_LABEL) as u32 & ipv6::FLOW_LABEL == h.flow_label)
    }

    /// The key of a parsed segment outside any tunnel.
    #[inline(always)]
    pub fn new(f: &Fields) -> FlowKey {
        let t = f.layout();
        Self::pack(Parts {
            macs: f.macs(),
            tci: t.tci,
            vlans: t.vlans,
            ad: tag_types(f.header(), 0, &t),
            ipv6: t.ipv6,
            flow_label: f.flow_label(),
            ports: f.ports(),
            addrs: f.addrs(),
            tunnel: false,
        })
    }

    /// The key of a segment inside the tunnel `o` (`Tcp::parse_tunnel`):
    /// its inner fields, and in place of the MACs a digest keyed by `k` of
    /// what makes the tunnel one flow in Linux (the outer MAC header and
    /// ethertype, the outer addresses, the UDP ports, the tunnel header
    /// with its VNI and Geneve options) and of the inner MACs. Fields that
    /// flush rather than part flows (outer TOS, TTL, DF, flow label, ID) are
    /// left out.
    pub fn tunneled(f: &Fields, o: &Outer, k: &HashKey) -> FlowKey {
        let t = f.layout();
        let h = f.header();
        let (l3, l4, inner) = (o.l3 as usize, o.l4 as usize, o.inner as usize);
        let addrs = if o.ipv6 {
            field::at(l3, ipv6::ADDRS)
        } else {
            field::at(l3, ipv4::ADDRS)
        };
        let mut d = Digest::new(k, (l3 | l4 << 16 | inner << 32) as u64);
        d.feed(&h[..l3]);
        d.feed(&h[addrs]);
        d.feed(&h[field::at(l4, udp::PORTS)]);
        // The tunnel header (VNI, Geneve options), then the inner MACs.
        d.feed(&h[l4 + udp::HEADER_LEN..inner + eth::MACS.end]);
        let macs = d.finish();
        Self::pack(Parts {
            macs: &macs,
            tci: t.tci,
            vlans: t.vlans,
            ad: tag_types(h, t.l2(), &t),
            ipv6: t.ipv6,
            flow_label: f.flow_label(),
            ports: f.ports(),
            addrs: f.addrs(),
            tunnel: true,
        })
    }

    /// The key of a UDP datagram laid out as `t` says in `head`
    /// (`Tcp::parse_udp`): the same fields as a TCP segment's key, read
    /// from the same places (the ports are the L4 header's first word).
    pub fn of_layout(head: &[u8], t: &crate::wire::Tcp) -> FlowKey {
        let l3 = t.l3 as usize;
        let addrs = if t.ipv6 {
            &head[field::at(l3, ipv6::ADDRS)]
        } else {
            &head[field::at(l3, ipv4::ADDRS)]
        };
        Self::pack(Parts {
            macs: &head[eth::MACS],
            tci: t.tci,
            vlans: t.vlans,
            ad: tag_types(head, 0, t),
            ipv6: t.ipv6,
            flow_label: if t.ipv6 {
                field::read32(head, l3, ipv6::VER_TC_FLOW) & ipv6::FLOW_LABEL
            } else {
                0
            },
            ports: field::read32(head, t.l4 as usize, udp::PORTS),
            addrs,
            tunnel: false,
        })
    }

    /// The key of the flow a frame GRO turned away belongs to, when the
    /// frame names it (`None` for a fragment past the first: no ports); its
    /// hash finds the probe run of every flow `matches` accepts.
    pub fn of_hint(h: &crate::wire::FlowHint) -> Option<FlowKey> {
        Some(Self::pack(Parts {
            macs: &h.macs,
            tci: h.tci,
            vlans: h.vlans,
            ad: h.ad,
            ipv6: h.ipv6,
            flow_label: h.flow_label,
            ports: h.ports?,
            addrs: if h.ipv6 { &h.addrs } else { &h.addrs[..8] },
            tunnel: h.tunnel,
        }))
    }

    /// The one packing of the identity fields into words (a segment's key
    /// and a hint's must agree bit for bit).
    #[inline(always)]
    fn pack(p: Parts<'_>) -> FlowKey {
        let m = p.macs;
        let mut w = [0u64; 7];
        w[0] = word(m, 0);
        w[1] = u32::from_le_bytes([m[8], m[9], m[10], m[11]]) as u64 | tci_word(p.tci) << 32;
        w[2] = identity_word(p.ports, p.flow_label, p.vlans, p.ipv6, p.ad, p.tunnel);
        if p.ipv6 {
            for (i, wi) in w[3..7].iter_mut().enumerate() {
                *wi = word(p.addrs, i * 8);
            }
        } else {
            w[3] = word(p.addrs, 0);
        }
        FlowKey { w }
    }

    /// A 32-bit hash keyed by `k` (`mix`) of the key's VLAN TCIs, its
    /// identity word (ports, flow label, tag count and types, family) and
    /// its addresses. Without the key, flows chosen offline to land in one
    /// run of the table's index (every lookup and insert then walks it)
    /// cannot be found: each queue has a key of its own, drawn when its GRO
    /// is made.
    ///
    /// The MAC addresses are left out: flows that differ only by them share
    /// a probe run, so a frame GRO turns away finds every held flow with its
    /// tags, addresses and ports (whatever their MACs) in that run, to let
    /// them out before it.
    #[inline(always)]
    pub fn hash(&self, k: &HashKey) -> u32 {
        let w = &self.w;
        // w[1] >> 32: the VLAN TCIs, without the source MAC's last bytes.
        if (w[2] >> id_bits::IPV6) & 1 == 1 {
            mix6(w[1] >> 32, w[2], [w[3], w[4], w[5], w[6]], k)
        } else {
            mix4(w[1] >> 32, w[2], w[3], k)
        }
    }

    /// The hash of the key a segment laid out as `t` in `b` has (the key
    /// `FlowKey::new` makes of it, or `FlowKey::tunneled` inside a
    /// tunnel), read straight from the frame: only what the hash takes (no
    /// MACs, no tunnel digest, no key). The fast path looks a segment up
    /// this way before parsing it, under the layout of the flow before it.
    /// None when `b` is shorter than `t`'s headers.
    #[inline(always)]
    pub fn hash_in(b: &[u8], t: &crate::wire::Tcp, k: &HashKey) -> Option<u32> {
        let b = b.get(..t.payload as usize)?;
        let l3 = t.l3 as usize;
        let ports = field::read32(b, t.l4 as usize, tcp::PORTS);
        let tunnel = t.in_tunnel();
        let ad = tag_types(b, t.l2(), t);
        let tci = tci_word(t.tci);
        Some(if t.ipv6 {
            let a = b.get(field::at(l3, ipv6::ADDRS))?;
            let label = field::read32(b, l3, ipv6::VER_TC_FLOW) & ipv6::FLOW_LABEL;
            let id = identity_word(ports, label, t.vlans, true, ad, tunnel);
            mix6(
                tci,
                id,
                [word(a, 0), word(a, 8), word(a, 16), word(a, 24)],
                k,
            )
        } else {
            let a = b.get(field::at(l3, ipv4::ADDRS))?;
            let id = identity_word(ports, 0, t.vlans, false, ad, tunnel);
            mix4(tci, id, word(a, 0), k)
        })
    }
}

/// The VLAN TCIs in one word, outermost in the low half.
#[inline(always)]
fn tci_word(tci: [u16; 2]) -> u64 {
    tci[0] as u64 | (tci[1] as u64) << 16
}

/// Where each field sits in the key's third word (`identity_word`), the
/// ports in its low 32 bits.
mod id_bits {
    /// The IPv6 flow label (20 bits).
    pub const FLOW_LABEL: u32 = 32;
    /// The tag count (2 bits).
    pub const VLANS: u32 = 52;
    /// IPv6 or not.
    pub const IPV6: u32 = 54;
    /// The tag types (bit i: tag i is 802.1ad).
    pub const AD: u32 = 55;
    /// Inside a tunnel or not.
    pub const TUNNEL: u32 = 57;
}

/// The key's third word: ports, IPv6 flow label, tag count, IPv6 or not,
/// tag types, tunnel or not.
#[inline(always)]
fn identity_word(ports: u32, flow_label: u32, vlans: u8, ipv6: bool, ad: u8, tunnel: bool) -> u64 {
    ports as u64
        | (flow_label as u64) << id_bits::FLOW_LABEL
        | (vlans as u64) << id_bits::VLANS
        | (ipv6 as u64) << id_bits::IPV6
        | (ad as u64) << id_bits::AD
        | (tunnel as u64) << id_bits::TUNNEL
}

/// Two words multiplied out to 128 bits, the halves folded.
#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let r = a as u128 * b as u128;
    r as u64 ^ (r >> 64) as u64
}

/// The words of an IPv4 key's identity mixed with `k` in pairs by full
/// 64x64->128-bit multiplies, folded into 32 bits: `tci` (the TCIs), `id`
/// (the identity word) and `addrs` (the address pair).
#[inline(always)]
fn mix4(tci: u64, id: u64, addrs: u64, k: &HashKey) -> u32 {
    let k = &k.0;
    let x = mum(tci ^ k[0], id ^ k[1]) ^ mum(addrs ^ k[2], k[3]);
    (x ^ (x >> 32)) as u32
}

/// As `mix4`, for an IPv6 key's four words of addresses.
#[inline(always)]
fn mix6(tci: u64, id: u64, a: [u64; 4], k: &HashKey) -> u32 {
    let k = &k.0;
    let x = mum(tci ^ k[0], id ^ k[1])
        ^ mum(a[0] ^ k[2], k[3])
        ^ mum(a[1] ^ k[1], a[2] ^ k[2])
        ^ mum(a[3] ^ k[3], k[0]);
    (x ^ (x >> 32)) as u32
}

/// A keyed digest of byte strings (a tunnel's identity): each 8-byte word,
/// mixed with a key word for its position, multiplied out to 128 bits by a
/// multiplier of that position too; the products summed (independent of
/// each other, so they overlap in the CPU), then mixed once more into 96
/// bits.
struct Digest<'a> {
    lo: u64,
    hi: u64,
    k: &'a [u64; 4],
    i: u64,
}

impl<'a> Digest<'a> {
    fn new(k: &'a HashKey, seed: u64) -> Self {
        let mut d = Digest {
            lo: 0,
            hi: 0,
            k: &k.0,
            i: 0,
        };
        d.word(seed);
        d
    }

    #[inline(always)]
    fn word(&mut self, w: u64) {
        let kw = self.k[(self.i & 3) as usize] ^ self.i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let r = (w ^ kw) as u128 * (kw.rotate_left(31) | 1) as u128;
        self.lo ^= r as u64;
        self.hi = self.hi.wrapping_add((r >> 64) as u64);
        self.i += 1;
    }

    #[inline(always)]
    fn feed(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for c in &mut words {
            self.word(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let w = rest.iter().rev().fold(0u64, |w, &b| w << 8 | b as u64);
            self.word(w);
        }
    }

    fn finish(self) -> [u8; 12] {
        let r = (self.lo ^ self.k[2]) as u128 * (self.hi ^ self.k[3] ^ self.i) as u128;
        let (a, b) = (r as u64 ^ self.hi, (r >> 64) as u64 ^ self.lo);
        let mut out = [0u8; 12];
        out[..8].copy_from_slice(&a.to_le_bytes());
        out[8..].copy_from_slice(&(b as u32 ^ (b >> 32) as u32).to_le_bytes());
        out
    }
}

/// The secret a queue's flow hashes are keyed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashKey([u64; 4]);

impl HashKey {
    /// A key drawn from the process's random source (std's `RandomState`,
    /// seeded by the OS), different for every call.
    pub fn random() -> HashKey {
        use std::hash::BuildHasher;
        let s = std::collections::hash_map::RandomState::new();
        HashKey(std::array::from_fn(|i| s.hash_one(i as u64) | 1))
    }

    /// A key given (tests, benchmarks: a key an attacker would know).
    pub const fn fixed(k: [u64; 4]) -> HashKey {
        HashKey(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{segment_stream, FlowSpec};
    use crate::wire::Tcp;

    fn key(spec: &FlowSpec) -> FlowKey {
        let f = segment_stream(spec, 0, 1, 100, 1448).remove(0);
        let t = Tcp::parse(&f, f.len(), true).unwrap();
        FlowKey::new(&Fields::new(&f, t))
    }

    #[test]
    fn every_identity_field_counts() {
        for ipv6 in [false, true] {
            let base = FlowSpec::numbered(1, ipv6);
            let k = key(&base);
            assert_eq!(k, key(&base));
            let mut s = base.clone();
            s.sport += 1;
            assert_ne!(k, key(&s));
            let mut s = base.clone();
            s.src_mac[5] ^= 1;
            assert_ne!(k, key(&s));
            let mut s = base.clone();
            s.vlans = vec![10];
            assert_ne!(k, key(&s));
            let mut s2 = s.clone();
            s2.vlans = vec![11];
            assert_ne!(key(&s), key(&s2));
            let mut s = base.clone();
            match &mut s.addrs {
                crate::traffic::Addrs::V4 { dst, .. } => dst[3] ^= 1,
                crate::traffic::Addrs::V6 { dst, .. } => dst[15] ^= 1,
            }
            assert_ne!(k, key(&s));
            if ipv6 {
                let mut s = base.clone();
                s.flow_label = 7;
                assert_ne!(k, key(&s));
            }
            // TTL is not identity (a change flushes, it does not make a new flow).
            let mut s = base.clone();
            s.ttl = 3;
            assert_eq!(k, key(&s));
        }
    }

    #[test]
    fn every_tunnel_identity_field_counts_and_the_rest_does_not() {
        use crate::traffic::TunnelSpec;
        let hk = HashKey::random();
        let inner = segment_stream(&FlowSpec::numbered(1, false), 0, 1, 100, 1448).remove(0);
        let key = |t: &TunnelSpec| {
            let f = t.encapsulate(&inner, 7);
            let tunnels = crate::wire::Tunnels::default();
            let (tcp, o) = Tcp::parse_tunnel(&f, f.len(), true, &tunnels).unwrap();
            FlowKey::tunneled(&Fields::new(&f, tcp), &o, &hk)
        };
        for base in [
            TunnelSpec::vxlan(1, false),
            TunnelSpec::geneve(1, true, vec![1, 2, 3, 1, 0, 0, 0, 9]),
        ] {
            let k = key(&base);
            assert_eq!(k, key(&base));
            let plain = {
                let t = Tcp::parse(&inner, inner.len(), true).unwrap();
                FlowKey::new(&Fields::new(&inner, t))
            };
            assert_ne!(k, plain, "inside a tunnel is not outside it");
            let edits: [fn(&mut TunnelSpec); 5] = [
                |t| t.vni += 1,
                |t| t.outer.sport += 1,
                |t| t.outer.src_mac[5] ^= 1,
                |t| t.outer.vlans = vec![5],
                |t| match &mut t.outer.addrs {
                    crate::traffic::Addrs::V4 { dst, .. } => dst[3] ^= 1,
                    crate::traffic::Addrs::V6 { dst, .. } => dst[15] ^= 1,
                },
            ];
            for (i, e) in edits.iter().enumerate() {
                let mut t = base.clone();
                e(&mut t);
                assert_ne!(k, key(&t), "identity edit {i}");
            }
            if !base.options.is_empty() {
                let mut t = base.clone();
                t.options[7] ^= 1;
                assert_ne!(k, key(&t), "Geneve options");
            }
            // Fields that flush, not part flows.
            let mut t = base.clone();
            t.outer.ttl -= 1;
            t.outer.tos = 4;
            t.udp_csum = !t.udp_csum;
            assert_eq!(k, key(&t));
        }
    }

    #[test]
    fn the_hash_read_from_a_frame_is_its_keys_hash_in_every_layout() {
        use crate::traffic::TunnelSpec;
        use crate::wire::Tunnels;
        let hk = HashKey::random();
        let tunnels = Tunnels::default();
        let mut checked = 0;
        for ipv6 in [false, true] {
            for tags in [vec![], vec![10], vec![10, 20]] {
                // A single tag of either type; QinQ's outer one is 802.1ad.
                for ad in [false, true] {
                    if ad && tags.len() != 1 {
                        continue;
                    }
                    for i in [1, 77, 4000] {
                        let mut spec = FlowSpec::numbered(i, ipv6);
                        spec.vlans = tags.clone();
                        spec.flow_label = if ipv6 { 0x5_4321 + i } else { 0 };
                        let mut f = segment_stream(&spec, 0, 1, 100, 1448).remove(0);
                        if ad {
                            f[12..14].copy_from_slice(&[0x88, 0xa8]);
                        }
                        let t = Tcp::parse(&f, f.len(), true).unwrap();
                        let want = FlowKey::new(&Fields::new(&f, t)).hash(&hk);
                        assert_eq!(FlowKey::hash_in(&f, &t, &hk), Some(want), "{spec:?}");
                        // Short of its headers: no hash.
                        assert_eq!(
                            FlowKey::hash_in(&f[..t.payload as usize - 1], &t, &hk),
                            None
                        );
                        for tunnel in [
                            TunnelSpec::vxlan(i, false),
                            TunnelSpec::vxlan(i, true),
                            TunnelSpec::geneve(i, true, vec![1, 2, 3, 1, 0, 0, 0, 9]),
                        ] {
                            let e = tunnel.encapsulate(&f, 7);
                            let (t, o) = Tcp::parse_tunnel(&e, e.len(), true, &tunnels).unwrap();
                            let want = FlowKey::tunneled(&Fields::new(&e, t), &o, &hk).hash(&hk);
                            assert_eq!(FlowKey::hash_in(&e, &t, &hk), Some(want), "{tunnel:?}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 2 * 4 * 3 * 3);
    }

    #[test]
    fn hashes_spread() {
        let mut seen = std::collections::HashSet::new();
        let hk = HashKey::random();
        for i in 0..4096 {
            seen.insert(key(&FlowSpec::numbered(i, false)).hash(&hk) & 1023);
        }
        assert!(
            seen.len() > 900,
            "{} of 1024 buckets used by 4096 flows",
            seen.len()
        );
    }

    #[test]
    fn flows_that_collide_under_one_key_spread_under_another() {
        // An attacker who knew key A: 32 flows in one index position of 4096.
        let (a, b) = (HashKey::fixed([1, 2, 3, 4]), HashKey::random());
        let mut spec = FlowSpec::numbered(0, false);
        let target = key(&spec).hash(&a) & 4095;
        let mut found = Vec::new();
        let mut i = 1u32;
        while found.len() < 32 {
            spec.sport = i as u16;
            spec.dport = (i >> 16) as u16;
            let k = key(&spec);
            if k.hash(&a) & 4095 == target {
                found.push(k);
            }
            i += 1;
        }
        let spread: std::collections::HashSet<u32> =
            found.iter().map(|k| k.hash(&b) & 4095).collect();
        assert!(
            spread.len() >= 28,
            "{} positions of 32 under another key",
            spread.len()
        );
    }
}
