//! How big an mbuf and how many of them: pure arithmetic, tested without EAL.
//!
//! Single-segment sizing (the mlx4 lesson, seed 001): the data room holds the
//! headroom plus one whole frame at the port's MTU with two VLAN tags, so a
//! full-size frame lands in one mbuf and costs GRO one frag, not two or three.

/// Ethernet header, two VLAN tags (QinQ) and the FCS some PMDs keep.
pub const L2_OVERHEAD: u32 = 14 + 2 * 4 + 4;
/// Several NICs program their RX buffer size in 1 KiB units (ixgbe) or 128 B
/// units (i40e) and round it DOWN: a room of 1526 B would become 1 KiB and
/// split every full frame. Rounding up to 1 KiB keeps one frame per buffer.
pub const RX_BUF_ALIGN: u32 = 1024;
/// The largest data room an mbuf can describe (buf_len is 16 bits).
pub const MAX_DATA_ROOM: u32 = u16::MAX as u32;

/// Bytes one frame needs at this MTU, L2 header and tags included.
pub fn frame_len(mtu: u32) -> u32 {
    mtu + L2_OVERHEAD
}

/// The data room (headroom + buffer) for one frame per mbuf.
pub fn auto_data_room(mtu: u32, headroom: u32) -> Result<u16, String> {
    let buf = frame_len(mtu).div_ceil(RX_BUF_ALIGN) * RX_BUF_ALIGN;
    let room = headroom + buf;
    if room > MAX_DATA_ROOM {
        return Err(format!(
            "MTU {mtu} needs a {room} B data room, more than one mbuf can hold ({MAX_DATA_ROOM}): \
             give a smaller one ({}) to receive frames in several segments",
            crate::setting::Setting::DataRoom
        ));
    }
    Ok(room as u16)
}

/// Segments a full frame at `mtu` takes with this data room.
pub fn segments_per_frame(mtu: u32, data_room: u16, headroom: u32) -> u32 {
    let first = (data_room as u32).saturating_sub(headroom).max(1);
    // PMDs place later segments at the same headroom.
    frame_len(mtu).div_ceil(first)
}

/// What a pool must hold so that no queue starves while everything it can
/// hold in flight is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    pub rx_queues: u32,
    pub rx_desc: u32,
    pub tx_queues: u32,
    pub tx_desc: u32,
    /// lcores that allocate from or free into this pool (each has a cache).
    pub lcores: u32,
    pub cache: u32,
    pub burst: u32,
    /// mbufs GRO may hold per queue between polls (flows x max_frags).
    pub held_per_queue: u32,
    /// Anything else in flight: a generator's ring, a capture queue.
    pub extra: u32,
}

/// Element count: everything that can be out at once, rounded up to
/// 2^k - 1 (ring-backed pools use a 2^k ring: that count wastes nothing).
/// Settings far past any machine's memory give the largest count, never an
/// overflow: the memory check that follows refuses them.
pub fn element_count(d: &Demand) -> u32 {
    let w = |x: u32| x as u64;
    let caches = w(d.lcores) * (w(d.cache) + w(d.cache) / 2); // a cache can hold 1.5x its size
    let need = w(d.rx_queues) * (w(d.rx_desc) + w(d.held_per_queue) + w(d.burst))
        + w(d.tx_queues) * (w(d.tx_desc) + w(d.burst))
        + caches
        + w(d.lcores) * w(d.burst)
        + w(d.extra);
    let n = need.clamp(1023, MAX_ELEMENTS as u64) + 1;
    (n.next_power_of_two() - 1).min(MAX_ELEMENTS as u64) as u32
}

/// The most mbufs one pool is sized for (2^31 - 1).
pub const MAX_ELEMENTS: u32 = (1 << 31) - 1;

/// A mempool cache must be at most RTE_MEMPOOL_CACHE_MAX_SIZE (512) and
/// n / 1.5; DPDK refuses larger ones.
pub fn cache_size(requested: u32, elements: u32) -> u32 {
    requested.min(512).min(elements * 2 / 3)
}

/// Bytes one element takes: mbuf header, private area, data room, and the
/// mempool's per-object header and trailer (rounded to a cache line).
pub fn element_bytes(priv_size: u32, data_room: u32) -> u64 {
    let obj = 128 + priv_size as u64 + data_room as u64;
    obj.div_ceil(64) * 64 + 64
}

pub fn pool_bytes(elements: u32, priv_size: u32, data_room: u32) -> u64 {
    elements as u64 * element_bytes(priv_size, data_room)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_1500_is_one_segment() {
        let room = auto_data_room(1500, 128).unwrap();
        assert_eq!(room, 128 + 2048);
        assert_eq!(segments_per_frame(1500, room, 128), 1);
    }

    #[test]
    fn mtu_9000_is_one_segment() {
        let room = auto_data_room(9000, 128).unwrap();
        assert!(room as u32 >= 128 + 9000 + 14 + 8);
        assert_eq!(segments_per_frame(9000, room, 128), 1);
        assert_eq!((room as u32 - 128) % RX_BUF_ALIGN, 0);
    }

    #[test]
    fn headroom_is_added_not_taken() {
        let a = auto_data_room(1500, 0).unwrap();
        let b = auto_data_room(1500, 256).unwrap();
        assert_eq!(b - a, 256);
        assert_eq!(segments_per_frame(1500, b, 256), 1);
    }

    #[test]
    fn small_rooms_split_frames() {
        // The mlx4 case: 512 + 1024 B fragments for a 1500 B MTU.
        assert_eq!(segments_per_frame(1500, 128 + 1024, 128), 2);
        assert_eq!(segments_per_frame(1500, 128 + 600, 128), 3);
    }

    #[test]
    fn too_big_is_refused_with_advice() {
        let e = auto_data_room(65000, 128).unwrap_err();
        assert!(e.contains("RunOptions::pools.data_room"), "{e}");
    }

    #[test]
    fn element_count_covers_everything_in_flight() {
        let d = Demand {
            rx_queues: 2,
            rx_desc: 1024,
            tx_queues: 2,
            tx_desc: 1024,
            lcores: 3,
            cache: 256,
            burst: 32,
            held_per_queue: 64 * 17,
            extra: 0,
        };
        let n = element_count(&d);
        let floor = 2 * (1024 + 64 * 17 + 32) + 2 * (1024 + 32) + 3 * 384 + 3 * 32;
        assert!(n >= floor, "{n} < {floor}");
        assert!((n + 1).is_power_of_two());
        assert!(n < 2 * floor + 1024, "not wildly oversized");
        assert_eq!(
            element_count(&Demand {
                rx_queues: 0,
                tx_queues: 0,
                lcores: 0,
                ..d
            }),
            1023
        );
    }

    #[test]
    fn cache_is_clamped() {
        assert_eq!(cache_size(256, 8191), 256);
        assert_eq!(cache_size(1024, 8191), 512);
        assert_eq!(cache_size(256, 255), 170);
    }
}
