//! Flow identity as the harness computes it, apart from GRO's parser, so the
//! checks do not share its mistakes; and a cheap hasher for the maps keyed
//! by it (an execution looks a flow up once per frame).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A flow's IP identity (a key without the MACs and ports): what a frame
/// GRO turned away without ports (a fragment past the first) is matched by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ident {
    /// VLAN tags: (tag type, TCI), outermost first; `ntags` are valid.
    pub tags: [(u16, u16); 2],
    pub ntags: u8,
    pub ipv6: bool,
    /// IPv6 flow label (0 for IPv4).
    pub label: u32,
    /// Source then destination address (IPv4: the first 8 bytes).
    pub addrs: [u8; 32],
}

/// A flow's identity as Linux's GRO sees it: MACs, VLAN tags with their
/// types, IP version, flow label, addresses, ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub macs: [u8; 12],
    pub ident: Ident,
    pub ports: u32,
}

impl Key {
    /// The key of `frame`, whose flow `flow_of` told (`ident`, `ports`).
    pub fn of(frame: &[u8], ident: Ident, ports: u32) -> Key {
        Key {
            macs: frame[..12].try_into().unwrap(),
            ident,
            ports,
        }
    }
}

/// The flow a frame tells by its protocol fields alone (TCP over IPv4 or
/// IPv6, at most two VLAN tags, IPv6 extension headers stepped over), and
/// its ports unless it is a non-first fragment.
pub fn flow_of(head: &[u8]) -> Option<(Ident, Option<u32>)> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*head.get(at)?, *head.get(at + 1)?]));
    let mut off = 12;
    let mut id = Ident {
        tags: [(0, 0); 2],
        ntags: 0,
        ipv6: false,
        label: 0,
        addrs: [0; 32],
    };
    let mut et = be16(off)?;
    while et == 0x8100 || et == 0x88a8 {
        if id.ntags == 2 {
            return None;
        }
        id.tags[id.ntags as usize] = (et, be16(off + 2)?);
        id.ntags += 1;
        off += 4;
        et = be16(off)?;
    }
    let l3 = off + 2;
    let l4 = match et {
        0x0800 => {
            let ip = head.get(l3..l3 + 20)?;
            if ip[0] >> 4 != 4 || ip[9] != 6 {
                return None;
            }
            id.addrs[..8].copy_from_slice(&ip[12..20]);
            let frag_off = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
            (frag_off == 0).then_some(l3 + (ip[0] & 0x0f) as usize * 4)
        }
        0x86dd => {
            let ip = head.get(l3..l3 + 40)?;
            if ip[0] >> 4 != 6 {
                return None;
            }
            id.ipv6 = true;
            id.label = u32::from_be_bytes([0, ip[1] & 0x0f, ip[2], ip[3]]);
            id.addrs.copy_from_slice(&ip[8..40]);
            let (mut next, mut at, mut l4) = (ip[6], l3 + 40, None);
            for _ in 0..8 {
                match next {
                    6 => {
                        l4 = Some(at);
                        break;
                    }
                    44 => {
                        if be16(at + 2)? & 0xfff8 != 0 {
                            break; // a later fragment: no TCP header here
                        }
                        next = *head.get(at)?;
                        at += 8;
                    }
                    51 => {
                        next = *head.get(at)?;
                        at += (*head.get(at + 1)? as usize + 2) * 4;
                    }
                    0 | 43 | 60 => {
                        next = *head.get(at)?;
                        at += (*head.get(at + 1)? as usize + 1) * 8;
                    }
                    _ => return None,
                }
            }
            if next != 6 && l4.is_none() && next != 44 {
                return None;
            }
            l4
        }
        _ => return None,
    };
    let ports = l4
        .and_then(|l4| head.get(l4..l4 + 4))
        .map(|p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
    Some((id, ports))
}

/// FxHash (rustc's): a multiply and a rotate per word. The maps here are
/// keyed by the harness's own values, not by an adversary.
#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

impl Fx {
    #[inline]
    fn mix(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut c = bytes.chunks_exact(8);
        for w in &mut c {
            self.mix(u64::from_le_bytes(w.try_into().unwrap()));
        }
        let r = c.remainder();
        if !r.is_empty() {
            let mut w = [0u8; 8];
            w[..r.len()].copy_from_slice(r);
            self.mix(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.mix(i as u64);
    }
    fn write_u16(&mut self, i: u16) {
        self.mix(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.mix(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
}

/// A HashMap with `Fx`.
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;
