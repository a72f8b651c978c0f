//! The packet buffer GRO runs on in the `gro` target: `VecBuf`'s model (a
//! list of buffers, header-only ones and all) with the bytes kept once per
//! input frame and each buffer a range of them. Laying a frame out in many
//! buffers, or appending one packet to another, allocates and copies no
//! bytes, where `VecBuf` copies each buffer into a vector of its own.

use grorx_gro::{GroBuf, GsoInfo, RxHints};

/// One buffer: `frames[frame][start..end]` of its packet.
#[derive(Debug, Clone, Copy)]
struct Span {
    frame: u32,
    start: u32,
    end: u32,
}

impl Span {
    fn len(&self) -> usize {
        (self.end - self.start) as usize
    }
}

/// A packet as buffers over the bytes of the frames it is made of.
#[derive(Debug, Default)]
pub struct FuzzBuf {
    frames: Vec<Vec<u8>>,
    segs: Vec<Span>,
    len: usize,
    /// What a NIC would have said about the checksums.
    pub hints: RxHints,
    /// The layout GRO gave the packet when it let it out (`set_gso`).
    pub gso: Option<GsoInfo>,
    /// Ids of the input frames this packet is made of, in order.
    pub ids: Vec<u32>,
}

impl FuzzBuf {
    /// Frame `id` laid out in buffers of the given sizes (which sum to its
    /// length; an empty frame is one empty buffer).
    pub fn new(id: u32, frame: Vec<u8>, sizes: impl IntoIterator<Item = usize>) -> FuzzBuf {
        let mut segs = Vec::new();
        let mut at = 0u32;
        for n in sizes {
            segs.push(Span {
                frame: 0,
                start: at,
                end: at + n as u32,
            });
            at += n as u32;
        }
        debug_assert_eq!(at as usize, frame.len());
        if segs.is_empty() {
            segs.push(Span {
                frame: 0,
                start: 0,
                end: 0,
            });
        }
        FuzzBuf {
            len: frame.len(),
            frames: vec![frame],
            segs,
            ids: vec![id],
            ..Default::default()
        }
    }

    fn bytes_of(&self, s: &Span) -> &[u8] {
        &self.frames[s.frame as usize][s.start as usize..s.end as usize]
    }

    /// Buffers in the packet.
    pub fn nsegs(&self) -> usize {
        self.segs.len()
    }

    /// Bytes in the first buffer.
    pub fn head_len(&self) -> usize {
        self.segs.first().map_or(0, |s| s.len())
    }

    /// The whole packet, buffers joined.
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for s in &self.segs {
            v.extend_from_slice(self.bytes_of(s));
        }
        v
    }

    /// Whether the packet's bytes are `b`, compared buffer by buffer.
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        if self.len != b.len() {
            return false;
        }
        let mut at = 0;
        self.segs.iter().all(|s| {
            let x = self.bytes_of(s);
            at += x.len();
            *x == b[at - x.len()..at]
        })
    }
}

impl GroBuf for FuzzBuf {
    fn head(&self) -> &[u8] {
        self.segs.first().map_or(&[], |s| self.bytes_of(s))
    }
    fn head_mut(&mut self) -> &mut [u8] {
        match self.segs.first() {
            Some(s) => &mut self.frames[s.frame as usize][s.start as usize..s.end as usize],
            None => &mut [],
        }
    }
    fn len(&self) -> usize {
        self.len
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
            f(&self.bytes_of(s)[off..off + n]);
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
    /// As `VecBuf::append`: buffers left empty once the first `off` bytes
    /// are cut go.
    fn append(&mut self, other: FuzzBuf, mut off: usize) {
        let base = self.frames.len() as u32;
        for s in &other.segs {
            if off >= s.len() {
                off -= s.len();
                continue;
            }
            self.segs.push(Span {
                frame: base + s.frame,
                start: s.start + off as u32,
                end: s.end,
            });
            self.len += s.len() - off;
            off = 0;
        }
        self.frames.extend(other.frames);
        self.ids.extend(other.ids);
    }
    fn set_gso(&mut self, info: &GsoInfo) {
        self.gso = Some(*info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_cuts_headers_and_keeps_the_layout() {
        let mut a = FuzzBuf::new(0, (0..10).collect(), [4, 6]);
        let b = FuzzBuf::new(1, (10..20).collect(), [3, 0, 2, 5]);
        a.append(b, 4);
        assert_eq!(
            a.bytes(),
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 15, 16, 17, 18, 19]
        );
        assert_eq!(GroBuf::len(&a), 16);
        assert_eq!(a.nsegs(), 4);
        assert_eq!(a.segs_from(10), 2);
        assert_eq!(a.ids, [0, 1]);
        assert!(a.eq_bytes(&a.bytes()));
        let mut got = Vec::new();
        a.for_each_chunk(3, 9, |c| got.extend_from_slice(c));
        assert_eq!(got, [3, 4, 5, 6, 7, 8, 9, 14, 15]);
        a.head_mut()[0] = 99;
        assert_eq!(a.head(), [99, 1, 2, 3]);
    }
}
