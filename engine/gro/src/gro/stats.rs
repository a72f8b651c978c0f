//! GRO counters of one queue (plain integers: the queue's lcore owns them;
//! the worker publishes a copy for the stats thread).

use crate::wire::NotTcp;
use serde::Serialize;

/// Why a held packet left the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Flush {
    /// Merged a segment with PSH.
    Psh = 0,
    /// Merged a segment with FIN.
    Fin,
    /// Flags, data offset or window differ (or CWR set).
    Flags,
    /// The next segment is not the next byte.
    SeqGap,
    /// The ACK number differs.
    AckChange,
    /// TCP options (timestamps included) differ.
    OptionMismatch,
    /// TOS/TTL/DF (IPv4) or traffic class / hop limit (IPv6) differ.
    IpMismatch,
    /// The IPv4 ID neither increments nor stays fixed.
    IpId,
    /// A segment larger than the first one's payload.
    LargerThanMss,
    /// Merged a segment shorter than the first one's payload.
    ShortSegment,
    /// A segment of this flow without payload.
    PureAck,
    /// A segment of this flow failed its checksum (it passes through after).
    BadChecksum,
    /// Merging would exceed max_frags buffers.
    FragLimit,
    /// Merging would exceed the size limit.
    SizeLimit,
    /// Held longer than `GroConfig::hold_us`.
    Age,
    /// Evicted (the oldest) to make room for a new flow.
    TableFull,
    /// Let out by `Gro::flush_all` (the end of a poll, or of the run).
    EndOfPoll,
    /// A frame of this flow GRO cannot merge (IP fragment, IP options, bad IP
    /// checksum, malformed TCP, padding) passes through: the flow's held data
    /// leaves first, so the flow keeps its order.
    Unmergeable,
    /// Segments waited ahead of a sequence gap longer than the reorder
    /// window's time (`GroConfig::reorder.wait_us`): the held packet left,
    /// then they did, in sequence order.
    ReorderTimeout,
    /// One more segment came ahead of a gap than the reorder window holds
    /// (`GroConfig::reorder.segments`): as `ReorderTimeout`.
    ReorderFull,
    /// A tunnelled segment whose outer headers differ from the head's in a
    /// field that must not change (outer TOS/TTL/DF, traffic class, hop
    /// limit, flow label; the UDP checksum set on one and not the other).
    OuterMismatch,
    /// A tunnelled segment's outer IPv4 ID does not follow (it must count
    /// up by one a segment or stay fixed, as the inner one).
    OuterIpId,
}

impl Flush {
    /// How many reasons there are (the length of `GroStats::flush`).
    pub const N: usize = 22;
    /// Every reason, in index order.
    pub const ALL: [Flush; Flush::N] = [
        Flush::Psh,
        Flush::Fin,
        Flush::Flags,
        Flush::SeqGap,
        Flush::AckChange,
        Flush::OptionMismatch,
        Flush::IpMismatch,
        Flush::IpId,
        Flush::LargerThanMss,
        Flush::ShortSegment,
        Flush::PureAck,
        Flush::BadChecksum,
        Flush::FragLimit,
        Flush::SizeLimit,
        Flush::Age,
        Flush::TableFull,
        Flush::EndOfPoll,
        Flush::Unmergeable,
        Flush::ReorderTimeout,
        Flush::ReorderFull,
        Flush::OuterMismatch,
        Flush::OuterIpId,
    ];
    /// Whether a packet that leaves for this reason met no later segment
    /// of its flow while held: the end of its poll, its age or an
    /// eviction let it out, not a segment of its own flow.
    pub fn met_none_of_its_flow(self) -> bool {
        matches!(self, Flush::EndOfPoll | Flush::Age | Flush::TableFull)
    }

    /// The reason's name in the report's `flush_reasons`.
    pub fn name(self) -> &'static str {
        match self {
            Flush::Psh => "psh",
            Flush::Fin => "fin",
            Flush::Flags => "flags",
            Flush::SeqGap => "seq_gap",
            Flush::AckChange => "ack_change",
            Flush::OptionMismatch => "option_mismatch",
            Flush::IpMismatch => "ip_mismatch",
            Flush::IpId => "ip_id",
            Flush::LargerThanMss => "larger_than_mss",
            Flush::ShortSegment => "short_segment",
            Flush::PureAck => "pure_ack",
            Flush::BadChecksum => "bad_checksum",
            Flush::FragLimit => "frag_limit",
            Flush::SizeLimit => "size_limit",
            Flush::Age => "age",
            Flush::TableFull => "table_full",
            Flush::EndOfPoll => "end_of_poll",
            Flush::Unmergeable => "unmergeable_same_flow",
            Flush::ReorderTimeout => "reorder_timeout",
            Flush::ReorderFull => "reorder_full",
            Flush::OuterMismatch => "outer_mismatch",
            Flush::OuterIpId => "outer_ip_id",
        }
    }
}

/// Why a packet passed through without being held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pass {
    /// Not a TCP segment GRO considers (see `NotTcp`).
    Frame(NotTcp),
    /// The TCP checksum is wrong.
    BadTcpChecksum,
    /// TCP without payload (a pure ACK, a bare SYN...).
    NoPayload,
    /// A first segment with SYN, RST, URG, PSH or FIN: delivered at once.
    Flags,
    /// A new flow the table could not index within `MAX_PROBE` of its
    /// hash's home (flows made to collide).
    ProbeLimit,
    /// With the reorder window on: a segment wholly before its flow's held
    /// data (a retransmission of what was delivered), passed after the held
    /// data, not held.
    Retransmission,
    /// UDP GRO: the UDP checksum is wrong.
    BadUdpChecksum,
    /// UDP GRO: a datagram without a checksum (0, IPv4): never merged, as
    /// in Linux.
    UdpNoChecksum,
    /// UDP GRO: a datagram without payload.
    UdpNoPayload,
    /// A segment that would start a packet, taken with its whole poll
    /// (`Gro::receive_poll`), that no later packet of the poll could join:
    /// sent at once rather than held to the poll's end.
    Alone,
    /// With the reorder window on: a segment that is exactly the gap before
    /// its flow's held packet (the flow started that packet ahead of where
    /// its delivered data ends), passed at once, before it; the held packet
    /// stays held.
    BeforeHeld,
}

impl Pass {
    /// How many reasons there are (the length of `GroStats::pass`).
    pub const N: usize = NotTcp::ALL.len() + 10;
    /// The reason's index in `GroStats::pass`.
    pub fn index(self) -> usize {
        match self {
            Pass::Frame(r) => r as usize,
            Pass::BadTcpChecksum => NotTcp::ALL.len(),
            Pass::NoPayload => NotTcp::ALL.len() + 1,
            Pass::Flags => NotTcp::ALL.len() + 2,
            Pass::ProbeLimit => NotTcp::ALL.len() + 3,
            Pass::Retransmission => NotTcp::ALL.len() + 4,
            Pass::BadUdpChecksum => NotTcp::ALL.len() + 5,
            Pass::UdpNoChecksum => NotTcp::ALL.len() + 6,
            Pass::UdpNoPayload => NotTcp::ALL.len() + 7,
            Pass::Alone => NotTcp::ALL.len() + 8,
            Pass::BeforeHeld => NotTcp::ALL.len() + 9,
        }
    }
    /// Every reason, in index order.
    pub fn all() -> impl Iterator<Item = Pass> {
        NotTcp::ALL.iter().map(|&r| Pass::Frame(r)).chain([
            Pass::BadTcpChecksum,
            Pass::NoPayload,
            Pass::Flags,
            Pass::ProbeLimit,
            Pass::Retransmission,
            Pass::BadUdpChecksum,
            Pass::UdpNoChecksum,
            Pass::UdpNoPayload,
            Pass::Alone,
            Pass::BeforeHeld,
        ])
    }
    /// The reason's name in the report's `passthrough`.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Frame(r) => r.name(),
            Pass::BadTcpChecksum => "bad_tcp_checksum",
            Pass::NoPayload => "tcp_no_payload",
            Pass::Flags => "tcp_unmergeable_flags",
            Pass::ProbeLimit => "probe_limit",
            Pass::Retransmission => "tcp_retransmission",
            Pass::BadUdpChecksum => "bad_udp_checksum",
            Pass::UdpNoChecksum => "udp_no_checksum",
            Pass::UdpNoPayload => "udp_no_payload",
            Pass::Alone => "tcp_alone_in_poll",
            Pass::BeforeHeld => "tcp_before_held",
        }
    }
}

/// One queue's GRO counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroStats {
    /// Every packet given to GRO.
    pub segments_in: u64,
    /// Every packet GRO gave back (merged, held-and-flushed alone, passed through).
    pub packets_out: u64,
    /// Segments appended to a held packet.
    pub merged_segments: u64,
    /// Held packets started afresh: in a new table entry (parsed, hashed,
    /// its template built), or two segments merged at once without one.
    pub heads_built: u64,
    /// Held packets started in the entry a remembered flow left
    /// (`GroConfig::flow_cache`): nothing rebuilt.
    pub heads_cached: u64,
    /// Largest number of segments in one output packet.
    pub max_segments: u64,
    /// Segments that waited ahead of a sequence gap (the reorder window).
    pub reorder_held: u64,
    /// Of those, segments merged in sequence once their gap filled.
    pub reorder_filled: u64,
    /// Held packets let out, by reason (indexed by `Flush as usize`).
    pub flush: [u64; Flush::N],
    /// Packets passed through without being held, by reason (indexed by `Pass::index`).
    pub pass: [u64; Pass::N],
}

impl Default for GroStats {
    fn default() -> Self {
        GroStats {
            segments_in: 0,
            packets_out: 0,
            merged_segments: 0,
            heads_built: 0,
            heads_cached: 0,
            max_segments: 0,
            reorder_held: 0,
            reorder_filled: 0,
            flush: [0; Flush::N],
            pass: [0; Pass::N],
        }
    }
}

/// What the reorder window did.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq, Eq)]
pub struct ReorderReport {
    /// Segments that waited ahead of a sequence gap.
    pub held: u64,
    /// Of those, segments merged in sequence once their gap filled.
    pub filled: u64,
}

/// The report form (names instead of indices).
#[derive(Debug, Clone, Serialize, Default)]
pub struct GroReport {
    /// Packets given to GRO.
    pub segments_in: u64,
    /// Packets GRO gave back (merged, held and flushed alone, passed through).
    pub packets_out: u64,
    /// Segments appended to a held packet.
    pub merged_segments: u64,
    /// Held packets started afresh: in a new table entry (parsed, hashed,
    /// its template built), or two segments merged at once without one.
    pub heads_built: u64,
    /// Held packets started in the entry a remembered flow left (`GroConfig::flow_cache`).
    pub heads_cached: u64,
    /// Packets in per packet out (`segments_in / packets_out`; 0 when none left).
    pub avg_segments_per_packet: f64,
    /// Most segments in one packet out.
    pub max_segments_per_packet: u64,
    /// The reorder window (`GroConfig::reorder`): segments that waited ahead of a
    /// gap, and those merged once it filled (timeouts are flush reasons).
    pub reorder: ReorderReport,
    /// Held packets let out, by reason (every reason, zeros included).
    pub flush_reasons: std::collections::BTreeMap<String, u64>,
    /// Packets passed through without being held, by reason (zeros included).
    pub passthrough: std::collections::BTreeMap<String, u64>,
    /// Frames shorter than their headers or with contradictory lengths (also in `passthrough`).
    pub malformed: u64,
    /// Frames with a wrong IPv4 header or TCP checksum (also in `passthrough`).
    pub bad_checksum: u64,
}

impl GroStats {
    /// Adds another queue's counters (saturating: a sum for a report or
    /// the telemetry thread never panics).
    pub fn add(&mut self, o: &GroStats) {
        self.segments_in = self.segments_in.saturating_add(o.segments_in);
        self.packets_out = self.packets_out.saturating_add(o.packets_out);
        self.merged_segments = self.merged_segments.saturating_add(o.merged_segments);
        self.heads_built = self.heads_built.saturating_add(o.heads_built);
        self.heads_cached = self.heads_cached.saturating_add(o.heads_cached);
        self.max_segments = self.max_segments.max(o.max_segments);
        self.reorder_held = self.reorder_held.saturating_add(o.reorder_held);
        self.reorder_filled = self.reorder_filled.saturating_add(o.reorder_filled);
        for (x, y) in self.flush.iter_mut().zip(o.flush) {
            *x = x.saturating_add(y);
        }
        for (x, y) in self.pass.iter_mut().zip(o.pass) {
            *x = x.saturating_add(y);
        }
    }

    /// The report form: reasons by name, the average worked out.
    pub fn report(&self) -> GroReport {
        GroReport {
            segments_in: self.segments_in,
            packets_out: self.packets_out,
            merged_segments: self.merged_segments,
            heads_built: self.heads_built,
            heads_cached: self.heads_cached,
            avg_segments_per_packet: if self.packets_out > 0 {
                self.segments_in as f64 / self.packets_out as f64
            } else {
                0.0
            },
            max_segments_per_packet: self.max_segments,
            reorder: ReorderReport {
                held: self.reorder_held,
                filled: self.reorder_filled,
            },
            flush_reasons: Flush::ALL
                .iter()
                .map(|f| (f.name().to_string(), self.flush[*f as usize]))
                .collect(),
            passthrough: Pass::all()
                .map(|p| (p.name().to_string(), self.pass[p.index()]))
                .collect(),
            malformed: self.pass[Pass::Frame(NotTcp::Malformed).index()],
            bad_checksum: self.pass[Pass::BadTcpChecksum.index()]
                + self.pass[Pass::Frame(NotTcp::BadIpChecksum).index()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_sums_add_every_counter_and_saturate() {
        let mut a = GroStats {
            segments_in: u64::MAX - 1,
            heads_cached: 2,
            max_segments: 9,
            ..GroStats::default()
        };
        a.flush[Flush::Psh as usize] = 3;
        a.pass[1] = u64::MAX;
        let mut b = GroStats {
            segments_in: 5,
            packets_out: 4,
            merged_segments: 6,
            heads_built: 7,
            heads_cached: 1,
            max_segments: 17,
            ..GroStats::default()
        };
        b.flush[Flush::Psh as usize] = 2;
        b.pass[1] = 1;
        a.add(&b);
        assert_eq!(a.segments_in, u64::MAX, "saturates, never panics");
        assert_eq!(
            (
                a.packets_out,
                a.merged_segments,
                a.heads_built,
                a.heads_cached
            ),
            (4, 6, 7, 3)
        );
        assert_eq!(a.max_segments, 17);
        assert_eq!(a.flush[Flush::Psh as usize], 5);
        assert_eq!(a.pass[1], u64::MAX);
    }
}
