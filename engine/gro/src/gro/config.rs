//! GRO's settings for one queue, and the checksum modes.

use crate::setting::{Setting, SettingError};

/// Software checksum validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CsumMode {
    /// Validate IPv4 header and TCP checksums, unless the NIC vouches.
    #[default]
    Verify,
    /// Trust the TCP and UDP checksums (as rte_gro does, and as behind a
    /// NIC's RX checksum offload); IPv4 header checksums, outer and inner,
    /// are still validated unless the NIC vouches, as Linux's
    /// `inet_gro_receive` does.
    Trust,
}

/// What a merged packet's TCP checksum field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutCsum {
    /// The full checksum over the merged payload.
    #[default]
    Full,
    /// The pseudo-header sum without length, for a TX port doing TSO.
    Pseudo,
}

/// GRO's settings for one queue: what a merge may build, what the table
/// holds, and how long packets may be held (the two times are the caller's
/// to apply: it passes `Gro::flush_older` and `Gro::expire_reorder` the
/// deadlines they give on its own clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroConfig {
    /// Buffers one merged packet may span (1..=`MAX_FRAGS`; Linux's
    /// MAX_SKB_FRAGS is 17, 45 at most, past which it chains a frag_list).
    pub max_frags: u16,
    /// Largest IP packet (IP + TCP headers + payload) a merge may build:
    /// 1500..=524288; past 65535, plain TCP merges into BIG TCP packets
    /// (see the `big` module): what a stage does with them is its own.
    pub max_size: u32,
    /// Flows held at once per queue.
    pub flows: usize,
    /// Flows whose state (key, template, sums) the table keeps after their
    /// packet left, so their next packet restarts without being rebuilt
    /// (ghosts; the least recently flushed is forgotten first). At least
    /// `flows` are: the table has `max(flows, flow_cache)` entries.
    pub flow_cache: usize,
    /// Software checksum validation of the segments received.
    pub csum: CsumMode,
    /// What a merged packet's TCP checksum field holds.
    pub out_csum: OutCsum,
    /// Hold packets across polls up to this many microseconds (0: flush at
    /// the end of every poll).
    pub hold_us: u32,
    /// The window in which segments ahead of a sequence gap wait for it to
    /// fill: how many, and how long.
    pub reorder: ReorderWindow,
    /// Merge UDP datagrams too (see the `udp` module), in a table of their
    /// own as large as TCP's.
    pub udp: bool,
    /// The UDP ports of the tunnels (VXLAN, Geneve) whose TCP segments
    /// merge (see the `tunnel` module); on by default.
    pub tunnels: crate::wire::Tunnels,
}

/// The reorder window (`GroConfig::reorder`): its size and its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReorderWindow {
    /// Segments per flow that may wait ahead of a sequence gap for it to
    /// fill (0: off, gaps flush as in Linux; at most `MAX_REORDER`).
    pub segments: u16,
    /// The longest a segment waits ahead of a gap, in microseconds (across
    /// polls): then its flow gives up the wait (`Gro::expire_reorder`).
    pub wait_us: u32,
}

impl Default for ReorderWindow {
    fn default() -> Self {
        ReorderWindow {
            segments: 0,
            wait_us: 100,
        }
    }
}

/// The most segments a flow may hold ahead of a gap
/// (`GroConfig::reorder.segments`).
pub const MAX_REORDER: u16 = 16;

/// The most buffers a merged packet may span (`GroConfig::max_frags`): room
/// for a BIG TCP packet of `big::BIG_MAX` bytes in 1448-byte segments.
pub const MAX_FRAGS: u16 = 512;

impl Default for GroConfig {
    fn default() -> Self {
        GroConfig {
            max_frags: 17,
            max_size: 65535,
            flows: 64,
            flow_cache: 1024,
            csum: CsumMode::Verify,
            out_csum: OutCsum::Full,
            hold_us: 0,
            reorder: ReorderWindow::default(),
            udp: false,
            tunnels: crate::wire::Tunnels::default(),
        }
    }
}

impl GroConfig {
    /// Checks every setting's range; the error names the setting and what
    /// to give instead.
    pub fn validate(&self) -> Result<(), SettingError> {
        let out_of_range = |setting, value: &dyn std::fmt::Display, range: String| {
            Err(SettingError::new(
                setting,
                value,
                format!("out of range: give {range}"),
            ))
        };
        if !(1..=MAX_FRAGS).contains(&self.max_frags) {
            return out_of_range(
                Setting::MaxFrags,
                &self.max_frags,
                format!("1..={MAX_FRAGS} (Linux uses 17)"),
            );
        }
        if !(1500..=super::big::BIG_MAX).contains(&self.max_size) {
            return out_of_range(
                Setting::MaxSize,
                &self.max_size,
                format!("1500..={} (past 65535: BIG TCP)", super::big::BIG_MAX),
            );
        }
        if !(1..=16384).contains(&self.flows) {
            return out_of_range(Setting::Flows, &self.flows, "1..=16384".into());
        }
        if self.reorder.segments > MAX_REORDER {
            return out_of_range(
                Setting::ReorderSegments,
                &self.reorder.segments,
                format!("0..={MAX_REORDER} (0 turns it off)"),
            );
        }
        if self.flow_cache > 16384 {
            return out_of_range(Setting::FlowCache, &self.flow_cache, "0..=16384".into());
        }
        Ok(())
    }

    /// Entries in a queue's table: held flows and remembered ones.
    pub fn table_entries(&self) -> usize {
        self.flows.max(self.flow_cache)
    }
}
