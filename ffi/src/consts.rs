//! Constants DPDK defines with `RTE_BIT64(n)`, which bindgen cannot evaluate.
//! Each is checked against the C compiler's value by `tests/layout.rs`.

macro_rules! bits {
    ($($name:ident = $bit:expr;)*) => {
        $(pub const $name: u64 = 1u64 << $bit;)*
        /// Every constant of this module, by its C name (for the layout test).
        pub const BIT64_CONSTS: &[(&str, u64)] = &[$((stringify!($name), $name)),*];
    };
}

bits! {
    RTE_ETH_RX_OFFLOAD_VLAN_STRIP = 0;
    RTE_ETH_RX_OFFLOAD_IPV4_CKSUM = 1;
    RTE_ETH_RX_OFFLOAD_UDP_CKSUM = 2;
    RTE_ETH_RX_OFFLOAD_TCP_CKSUM = 3;
    RTE_ETH_RX_OFFLOAD_TCP_LRO = 4;
    RTE_ETH_RX_OFFLOAD_SCATTER = 13;
    RTE_ETH_RX_OFFLOAD_RSS_HASH = 19;
    RTE_ETH_TX_OFFLOAD_VLAN_INSERT = 0;
    RTE_ETH_TX_OFFLOAD_IPV4_CKSUM = 1;
    RTE_ETH_TX_OFFLOAD_UDP_CKSUM = 2;
    RTE_ETH_TX_OFFLOAD_TCP_CKSUM = 3;
    RTE_ETH_TX_OFFLOAD_TCP_TSO = 5;
    RTE_ETH_TX_OFFLOAD_MULTI_SEGS = 15;
    RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE = 16;
    RTE_ETH_RSS_IPV4 = 2;
    RTE_ETH_RSS_FRAG_IPV4 = 3;
    RTE_ETH_RSS_NONFRAG_IPV4_TCP = 4;
    RTE_ETH_RSS_NONFRAG_IPV4_UDP = 5;
    RTE_ETH_RSS_NONFRAG_IPV4_OTHER = 7;
    RTE_ETH_RSS_IPV6 = 8;
    RTE_ETH_RSS_FRAG_IPV6 = 9;
    RTE_ETH_RSS_NONFRAG_IPV6_TCP = 10;
    RTE_ETH_RSS_NONFRAG_IPV6_UDP = 11;
    RTE_ETH_RSS_NONFRAG_IPV6_OTHER = 13;
    RTE_ETH_RSS_IPV6_EX = 15;
    RTE_ETH_RSS_IPV6_TCP_EX = 16;
}

/// `RTE_ETH_RSS_IP`: every IP hash type.
pub const RTE_ETH_RSS_IP: u64 = RTE_ETH_RSS_IPV4
    | RTE_ETH_RSS_FRAG_IPV4
    | RTE_ETH_RSS_NONFRAG_IPV4_OTHER
    | RTE_ETH_RSS_IPV6
    | RTE_ETH_RSS_FRAG_IPV6
    | RTE_ETH_RSS_NONFRAG_IPV6_OTHER
    | RTE_ETH_RSS_IPV6_EX;
/// `RTE_ETH_RSS_TCP`: every TCP hash type.
pub const RTE_ETH_RSS_TCP: u64 =
    RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV6_TCP | RTE_ETH_RSS_IPV6_TCP_EX;
/// The non-bit constants, also checked against C.
/// (Plain defines such as RTE_ETHER_MTU come from bindgen itself.)
pub const PLAIN_CONSTS: &[(&str, u64)] = &[
    ("RTE_ETH_RSS_IP", RTE_ETH_RSS_IP),
    ("RTE_ETH_RSS_TCP", RTE_ETH_RSS_TCP),
];
