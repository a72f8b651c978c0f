//! Frames from decoded operations: valid TCP segments of a few flows, each
//! with its stream state, and how a frame is laid out in buffers.

use crate::flow::FxMap;
use crate::{FlagChoice, HeadSplit, IdChoice, Layout, SeqChoice, TcpFrame, MAX_PAYLOAD};
use grorx_gro::traffic::{pattern_byte, FlowSpec, Segment};
use grorx_gro::wire::Tcp;
use grorx_gro::{CsumHint, RxHints};
use std::sync::OnceLock;

/// One flow's stream state.
pub struct FlowState {
    seq: u32,
    ack: u32,
    ip_id: u16,
    tsval: u32,
    len: u16,
    /// The last gap `Ahead` left: where it starts, its length, and the IP
    /// ID kept for the segment that fills it.
    gap: Option<(u32, u32, u16)>,
}

/// The flows of one execution, by (number, IPv6, tag count, tags).
pub type Flows = FxMap<(u8, bool, u8, u16), FlowState>;

/// The payload pattern repeats after this many bytes (a prime: a stream
/// offset and its flow's shift never line two flows' patterns up for long).
const PERIOD: usize = 65521;

/// Payload bytes of flow `flow` from sequence number `seq`: a window of a
/// table built once, so a segment's payload is one copy. Reordered or
/// duplicated bytes stay visible: equal windows are PERIOD bytes apart.
pub fn payload(flow: u8, seq: u32, len: usize) -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    let t = TABLE.get_or_init(|| {
        (0..PERIOD + MAX_PAYLOAD as usize)
            .map(|i| pattern_byte(0, i as u64))
            .collect()
    });
    let at = (seq as usize % PERIOD + flow as usize * 4099) % PERIOD;
    &t[at..at + len]
}

/// Builds the frame a `TcpFrame` describes and advances its flow's state.
pub fn tcp_frame(op: &TcpFrame, flows: &mut Flows) -> Vec<u8> {
    let idx = op.flow % 16;
    let nv = op.vlans % 3;
    let tags = if nv == 0 { 0 } else { op.tags };
    let mut spec = FlowSpec::numbered(idx as u32, op.ipv6);
    spec.vlans = match nv {
        0 => vec![],
        1 => vec![tags & 0x0fff],
        _ => vec![tags & 0x0fff, (tags >> 4) ^ 0x5a5],
    };
    if let Some(tw) = op.ip {
        spec.tos = tw.tos;
        spec.ttl = tw.ttl;
        spec.df = !tw.no_df;
        spec.window = tw.window;
        spec.timestamps = !tw.no_timestamps;
        spec.flow_label = tw.flow_label as u32;
    }
    let st = flows
        .entry((idx, op.ipv6, nv, tags))
        .or_insert_with(|| FlowState {
            // Flow 1 starts just before the sequence space wraps.
            seq: (idx as u32).wrapping_mul(0x9e37_79b9) ^ if idx == 1 { 0xffff_f000 } else { 0 },
            ack: 1,
            ip_id: 100,
            tsval: 1000,
            len: 1448,
            gap: None,
        });
    // A segment that came late: its seq, length and ID.
    let mut late = None;
    let seq = match (op.seq, st.gap) {
        (SeqChoice::Late, Some((at, n, id))) => {
            let len = (st.len as u32).min(n);
            st.gap = (len < n).then(|| (at.wrapping_add(len), n - len, id.wrapping_add(1)));
            late = Some((len as u16, id));
            at
        }
        (SeqChoice::Next | SeqChoice::Late, _) => st.seq,
        (SeqChoice::Back(d), _) => st.seq.wrapping_sub(d as u32),
        (SeqChoice::Ahead(d), _) => {
            let d = if d & 0x8000 != 0 {
                st.len as u32
            } else {
                d as u32
            };
            // The sender gave the gap's segment the ID before this one's.
            st.gap = Some((st.seq, d, st.ip_id));
            st.ip_id = st.ip_id.wrapping_add(1);
            st.seq.wrapping_add(d)
        }
        (SeqChoice::Set(s), _) => s,
    };
    if let Some(a) = op.ack {
        st.ack = a;
    }
    if let Some(t) = op.tsval {
        st.tsval = t;
    }
    if let Some(n) = op.len {
        st.len = n % (MAX_PAYLOAD + 1);
    }
    let ip_id = match (op.ip_id, late) {
        (IdChoice::Next, Some((_, id))) => id,
        (IdChoice::Next, None) => st.ip_id,
        (IdChoice::Same, _) => st.ip_id.wrapping_sub(1),
        (IdChoice::Set(i), _) => i,
    };
    let len = late.map_or(st.len, |(n, _)| n);
    let s = Segment {
        seq,
        ack: st.ack,
        flags: op.flags.bits(),
        ip_id,
        tsval: st.tsval,
        tsecr: 500,
        payload_len: len,
    };
    let mut f = spec.frame(&s, payload(idx, seq, len as usize));
    // A late segment leaves the stream where it was.
    if late.is_none() {
        st.seq = seq.wrapping_add(st.len as u32);
        st.ip_id = ip_id.wrapping_add(1);
    }
    if let Some((at, x)) = op.corrupt {
        let n = f.len();
        f[at as usize % n] ^= x.max(1);
    }
    f
}

/// The frame a `TcpFrame` describes, for the rest of a stream: the flow's
/// next in-order segments (ACK only, next IP ID, same layout).
pub fn next_of(first: &TcpFrame) -> TcpFrame {
    TcpFrame {
        seq: SeqChoice::Next,
        ack: None,
        flags: FlagChoice::Ack,
        ip_id: IdChoice::Next,
        tsval: None,
        len: None,
        corrupt: None,
        ..first.clone()
    }
}

fn hint(b: u8) -> CsumHint {
    match b & 3 {
        0 => CsumHint::Unknown,
        1 => CsumHint::Good,
        2 => CsumHint::Bad,
        _ => CsumHint::DataGood,
    }
}

/// What the NIC says about a frame laid out as `l`.
pub fn hints(l: &Layout) -> RxHints {
    l.hints
        .map(|b| RxHints {
            ip: hint(b),
            l4: hint(b >> 2),
        })
        .unwrap_or_default()
}

/// The sizes of the buffers `l` lays `frame` out in: the first as `l.head`
/// says (at least 1 byte), then `l.room` bytes each (0: no limit). None for
/// an empty frame.
pub fn split(frame: &[u8], l: &Layout) -> Splits {
    let room = if l.room == 0 {
        usize::MAX
    } else {
        l.room as usize
    };
    let first = match l.head {
        HeadSplit::Room => None,
        HeadSplit::At(h) => Some(h as usize),
        HeadSplit::Headers(d) => Tcp::parse(frame, frame.len(), false)
            .ok()
            .map(|t| (t.payload as isize + d as isize).max(1) as usize),
    };
    Splits {
        first: first.map(|h| h.max(1).min(frame.len())),
        rest: frame.len(),
        room,
    }
}

/// Buffer sizes, in order (see `split`).
pub struct Splits {
    first: Option<usize>,
    rest: usize,
    room: usize,
}

impl Iterator for Splits {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.rest == 0 {
            return None;
        }
        let n = self.first.take().unwrap_or(self.room).min(self.rest);
        self.rest -= n;
        Some(n)
    }
}
