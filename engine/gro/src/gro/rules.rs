//! Linux's merge rules on the full path: the fields of a segment they
//! compare (`Seg`), the decision (`mergeable`) and the rule that said no
//! (`why_not`).

use super::*;

/// PSH, FIN and CWR in the offset/flags/window word: allowed to differ.
pub(super) const WORD_FREE: u32 = ((PSH | FIN | CWR) as u32) << 16;

/// The fields of an incoming segment the rules compare.
pub(super) struct Seg {
    pub(super) seq: u32,
    pub(super) ack: u32,
    pub(super) word: u32,
    pub(super) ip_word: u32,
    pub(super) id: u16,
    pub(super) df: bool,
    pub(super) flags: u8,
    pub(super) payload: u32,
    pub(super) frags: u16,
    pub(super) csum: u16,
    pub(super) urg: u16,
}

/// PSH, FIN and CWR in the flags byte: the part of the header that may differ
/// within a merged packet (besides seq, checksum and urgent pointer).
pub(super) const VAR_FLAGS: u8 = PSH | FIN | CWR;

impl Seg {
    #[inline(always)]
    pub(super) fn read(f: &Fields, frags: u16) -> Seg {
        let h = f.tcp_header();
        Seg {
            seq: f.seq(),
            ack: f.ack(),
            word: f.flag_word(),
            ip_word: f.ip_word(),
            id: f.ip_id(),
            df: f.df(),
            flags: f.flags(),
            payload: f.layout().payload_len,
            frags,
            csum: f.tcp_csum(),
            urg: u16::from_be_bytes([h[18], h[19]]),
        }
    }

    /// This segment's TCP header sum (checksum field excluded), unfolded,
    /// from the constant part it shares with its flow.
    #[inline(always)]
    pub(super) fn var_sum(&self, hconst: u16) -> u64 {
        tcp_header_sum(hconst, self.seq, self.urg, self.flags)
    }
}

/// Options compared as 32-bit words (their length is a multiple of 4).
#[inline(always)]
pub(super) fn opts_equal(held: &[u32], opts: &[u8]) -> bool {
    if held.len() * 4 != opts.len() {
        return false;
    }
    // Timestamps alone (NOP, NOP, TS): what nearly every segment carries.
    if let (Ok(o), [a, b, c]) = (<&[u8; 12]>::try_from(opts), held) {
        let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
        return ((a ^ w(0)) | (b ^ w(4)) | (c ^ w(8))) == 0;
    }
    let mut d = 0;
    for (h, w) in held.iter().zip(opts.chunks_exact(4)) {
        d |= h ^ u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
    }
    d == 0
}

impl<B: GroBuf> Gro<B> {
    /// Linux's merge rules, all at once: the common answer (merge) costs a
    /// few compares; `why_not` names the rule when it is no.
    #[inline(always)]
    pub(super) fn mergeable(&self, h: &Held<B>, seg: &Seg, opts: &[u8], ext: &[u8]) -> bool {
        let same = (seg.ack ^ h.ack)
            | ((seg.word ^ h.word) & !WORD_FREE)
            | (seg.ip_word ^ h.ip_word)
            | (seg.seq ^ h.next_seq)
            | (seg.flags & CWR) as u32;
        if same != 0 || seg.payload == 0 || seg.payload > h.mss {
            return false;
        }
        let next = h.last_id.wrapping_add(1);
        let id_ok = h.t.ipv6
            || match h.id_mode {
                IdMode::Open => seg.id == next || seg.id == h.last_id,
                IdMode::Incrementing => seg.id == next,
                IdMode::Fixed => seg.id == h.last_id,
            };
        id_ok
            && h.frags as u32 + seg.frags as u32 <= self.cfg.max_frags as u32
            && h.ip_len + seg.payload <= h.max_ip
            && opts_equal(&h.opts[..h.opt_words as usize], opts)
            && h.same_ext(ext)
    }

    /// Which rule refused a merge, in Linux's order of checks.
    #[cold]
    pub(super) fn why_not(&self, h: &Held<B>, seg: &Seg, opts: &[u8], ext: &[u8]) -> Flush {
        if seg.ack != h.ack {
            return Flush::AckChange;
        }
        if (seg.word ^ h.word) & !WORD_FREE != 0 || seg.flags & CWR != 0 {
            return Flush::Flags;
        }
        if !opts_equal(&h.opts[..h.opt_words as usize], opts) {
            return Flush::OptionMismatch;
        }
        if seg.ip_word != h.ip_word || !h.same_ext(ext) {
            return Flush::IpMismatch;
        }
        if seg.payload == 0 {
            return Flush::PureAck;
        }
        if seg.seq != h.next_seq {
            return Flush::SeqGap;
        }
        if seg.payload > h.mss {
            return Flush::LargerThanMss;
        }
        if h.frags as u32 + seg.frags as u32 > self.cfg.max_frags as u32 {
            return Flush::FragLimit;
        }
        if h.ip_len + seg.payload > h.max_ip {
            return Flush::SizeLimit;
        }
        Flush::IpId
    }
}
