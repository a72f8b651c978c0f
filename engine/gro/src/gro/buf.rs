//! What GRO needs of a packet buffer. The engine implements it for skbs
//! built on mbuf chains; `VecBuf` implements it on plain vectors so the GRO
//! core is tested, property-tested and fuzzed without EAL.

/// What the NIC said about a checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CsumHint {
    /// The NIC said nothing: check in software.
    #[default]
    Unknown,
    /// The NIC checked it: correct.
    Good,
    /// The NIC checked it: wrong.
    Bad,
    /// The data was verified but the checksum field is not final (DPDK's
    /// `..._CKSUM_NONE`, e.g. virtio's NEEDS_CSUM): sum the bytes, compare nothing.
    DataGood,
}

/// What the NIC said about a received frame's checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxHints {
    /// The IPv4 header checksum.
    pub ip: CsumHint,
    /// The TCP checksum.
    pub l4: CsumHint,
}

/// How a packet leaving GRO is laid out (for TX offloads and the skb).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GsoInfo {
    /// Ethernet header bytes, VLAN tags included.
    pub l2_len: u16,
    /// IP header bytes.
    pub l3_len: u16,
    /// TCP header bytes, options included.
    pub l4_len: u16,
    /// Payload bytes per original segment (the first segment's size).
    pub mss: u16,
    /// Segments merged into this packet (1: not merged).
    pub segs: u16,
    /// TCP over IPv6 (else IPv4).
    pub ipv6: bool,
    /// The L4 checksum field holds the pseudo-header sum for the port's
    /// segmentation (TSO, or UDP segmentation), not the full checksum (see
    /// `OutCsum::Pseudo`).
    pub tso: bool,
    /// UDP datagrams merged (`GroConfig::udp`; `l4_len` is 8, `mss` the
    /// datagrams' payload size), else TCP segments.
    pub udp: bool,
    /// Inside a tunnel (VXLAN, Geneve): the outer Ethernet (with tags) and
    /// IP header bytes; 0 outside one. `l2_len` then spans the outer UDP
    /// header, the tunnel header and the inner Ethernet header, as DPDK's
    /// TX offloads count a tunnel.
    pub outer_l2_len: u16,
    /// Outer IP header bytes (0 outside a tunnel).
    pub outer_l3_len: u16,
    /// The outer IP header is IPv6.
    pub outer_ipv6: bool,
    /// The outer IPv4 ID stayed the same from segment to segment:
    /// segmentation repeats it instead of counting up.
    pub outer_id_fixed: bool,
}

/// A packet GRO can hold and extend. Headers are contiguous in the first
/// segment (every PMD and pool grorx uses guarantees that: the first segment
/// holds at least 1 KiB).
pub trait GroBuf {
    /// The first segment's bytes.
    fn head(&self) -> &[u8];
    /// The first segment's bytes, to rewrite headers in place.
    fn head_mut(&mut self) -> &mut [u8];
    /// Bytes in all segments.
    fn len(&self) -> usize;
    /// Whether the packet has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Buffers in the chain.
    fn segs(&self) -> u16;
    /// What the NIC said about the frame's checksums.
    fn rx_hints(&self) -> RxHints;
    /// Calls `f` on the bytes `[off, off + len)`, chunk by chunk, in order.
    fn for_each_chunk<F: FnMut(&[u8])>(&self, off: usize, len: usize, f: F);
    /// Buffers that hold bytes at or after `off`.
    fn segs_from(&self, off: usize) -> u16;
    /// Appends `other` without its first `off` bytes (its headers).
    fn append(&mut self, other: Self, off: usize);
    /// `append` for a one-buffer `other` longer than `off` (the fast path's
    /// segments): nothing to walk or free.
    fn append_one(&mut self, other: Self, off: usize)
    where
        Self: Sized,
    {
        self.append(other, off)
    }
    /// `append_one` for each of `run`, in order: a run of one flow's
    /// segments merged at once, so the chain's totals are written once.
    fn append_run<I: Iterator<Item = Self>>(&mut self, run: I, off: usize)
    where
        Self: Sized,
    {
        for other in run {
            self.append_one(other, off);
        }
    }
    /// The packet leaves GRO laid out like this.
    fn set_gso(&mut self, info: &GsoInfo);
    /// Bytes free in front of the first segment's data that `push_head`
    /// may take: an IPv6 packet merged past 64 KiB needs 8 for its jumbo
    /// header. None by default: such packets stay within 64 KiB.
    fn headroom(&self) -> usize {
        0
    }
    /// Moves the first segment's start `n` bytes earlier, into its headroom
    /// (`head()` then begins there; the bytes are the buffer's old ones).
    /// False, and nothing done, when `headroom()` is less than `n`.
    fn push_head(&mut self, n: usize) -> bool {
        let _ = n;
        false
    }
}

/// A packet as a list of byte vectors (one per "buffer"), for tests and fuzzing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VecBuf {
    /// The buffers, in order.
    pub segs: Vec<Vec<u8>>,
    /// What a NIC would have said about the checksums.
    pub hints: RxHints,
    /// The layout GRO gave the packet when it let it out (`set_gso`).
    pub gso: Option<GsoInfo>,
    /// Ids of the input packets this one is made of, in order.
    pub ids: Vec<u64>,
    /// Bytes `push_head` may add in front (a buffer's headroom).
    pub headroom: usize,
}

impl VecBuf {
    /// A one-buffer packet, input id `id`.
    pub fn new(id: u64, frame: Vec<u8>) -> VecBuf {
        VecBuf {
            segs: vec![frame],
            ids: vec![id],
            ..Default::default()
        }
    }

    /// A frame split into buffers of at most `room` bytes (multi-segment RX).
    pub fn split(id: u64, frame: &[u8], room: usize) -> VecBuf {
        let segs = frame.chunks(room.max(1)).map(|c| c.to_vec()).collect();
        VecBuf {
            segs,
            ids: vec![id],
            ..Default::default()
        }
    }

    /// The whole packet, buffers joined.
    pub fn bytes(&self) -> Vec<u8> {
        self.segs.concat()
    }
}

impl GroBuf for VecBuf {
    fn head(&self) -> &[u8] {
        self.segs.first().map(|s| s.as_slice()).unwrap_or(&[])
    }
    fn head_mut(&mut self) -> &mut [u8] {
        self.segs
            .first_mut()
            .map(|s| s.as_mut_slice())
            .unwrap_or(&mut [])
    }
    fn len(&self) -> usize {
        self.segs.iter().map(|s| s.len()).sum()
    }
    fn segs(&self) -> u16 {
        self.segs.len() as u16
    }
    fn rx_hints(&self) -> RxHints {
        self.hints
    }
    fn for_each_chunk<F: FnMut(&[u8])>(&self, mut off: usize, mut len: usize, mut f: F) {
        for s in &self.segs {
            if len == 0 {
                break;
            }
            if off >= s.len() {
                off -= s.len();
                continue;
            }
            let n = (s.len() - off).min(len);
            f(&s[off..off + n]);
            len -= n;
            off = 0;
        }
    }
    fn segs_from(&self, mut off: usize) -> u16 {
        let mut n = 0;
        for s in &self.segs {
            if off >= s.len() {
                off -= s.len();
            } else {
                n += 1;
                off = 0;
            }
        }
        n
    }
    fn append(&mut self, other: VecBuf, mut off: usize) {
        for s in other.segs {
            if off >= s.len() {
                off -= s.len();
                continue;
            }
            self.segs.push(s[off..].to_vec());
            off = 0;
        }
        self.ids.extend(other.ids);
    }
    fn set_gso(&mut self, info: &GsoInfo) {
        self.gso = Some(*info);
    }
    fn headroom(&self) -> usize {
        self.headroom
    }
    fn push_head(&mut self, n: usize) -> bool {
        if n > self.headroom || self.segs.is_empty() {
            return false;
        }
        self.headroom -= n;
        self.segs[0].splice(0..0, std::iter::repeat_n(0, n));
        true
    }
}
