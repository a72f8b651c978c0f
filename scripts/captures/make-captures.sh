#!/usr/bin/env bash
# make-captures.sh OUTDIR [--quick] [--rx-only] [--reorder-only | --udp-only]
# make-captures.sh --anchors [DIR]      (DIR: default captures/ in the repository)
# make-captures.sh --tunnels [DIR]      (the anchor tcp_4flows.pcap in tunnels)
#
# Makes classic-pcap captures of real TCP traffic for grorx's tests: iperf3
# over a veth pair between two network namespaces this script creates
# (sender <-> receiver), MTU 1500, sender and receiver with checksum/TSO/GSO
# offload off (every checksum real, MSS-sized segments) and GRO off, captured
# with tcpdump on the receiver's veth (the data direction and the ACK
# direction; --rx-only keeps only the frames sent by the sender's veth, as
# in the anchor captures tcp_1flow.pcap / tcp_4flows.pcap of --anchors).
#
#   tcp4.pcap        IPv4, 1 flow (the untagged source of the two below)
#   tcp4_loss.pcap   IPv4, 1 flow through a sender-side tbf with a small queue
#                    (100 kB): real drops and retransmissions (checked with tshark)
#   tcp6.pcap        IPv6 (fd00:99::/64), 2 parallel flows (iperf3 -P 2)
#   tcp4_vlan.pcap   tcp4.pcap with an 802.1Q tag, VLAN 100, in every frame
#   tcp4_qinq.pcap   tcp4.pcap with 802.1ad 0x88a8 VLAN 200 + 802.1Q VLAN 100
#   mixed_junk.pcap  a short IPv4 capture with non-TCP, malformed and odd
#                    frames mixed in (mix_junk.py, seed 1); mixed_junk.txt lists them
#   tcp4_reorder.pcap IPv4, 1 flow sprayed per packet over two paths, one of
#                    them slower: ~4.7% of the data segments arrive 1-3 places
#                    late (real reordering), no loss; receive direction only
#   udp4.pcap        IPv4 UDP, iperf3 -u -P 4 -l 1400 (4 flows of 1400-byte
#                    datagrams, paced); the UDP datagrams only
#   udp6.pcap        the same over IPv6
#   vxlan4.pcap      tcp4.pcap in VXLAN over IPv4 (outer DF, UDP checksum 0)
#   vxlan6.pcap      tcp6.pcap in VXLAN over IPv6 (UDP checksum set)
#   geneve4.pcap     tcp6.pcap in Geneve over IPv4 (an 8-byte option, UDP
#                    checksum set, no DF: outer IDs count per outer flow)
#   geneve6.pcap     tcp4.pcap in Geneve over IPv6 (UDP checksum 0)
#                    (tunnel_encap.py: this kernel has no VXLAN/Geneve devices)
#
# --quick: about 1 s / a few thousand packets per capture instead of ~25k.
# --reorder-only: makes only tcp4_reorder.pcap (with --quick: ~2.8k segments).
# --udp-only: makes only udp4.pcap and udp6.pcap.
#
# tcp4_reorder.pcap: three namespaces, sender (10.99.2.1) -> router ->
# receiver (10.99.1.2, the same veth, MACs and address as above; the frames
# come from the router, 10.99.1.1 / 02:00:00:00:99:01, TTL 63). The sender
# has two veths to the router: its route (vsnd) and a slow path (vsndb, tbf
# 36 Mbit/s with one packet of burst). A tc u32 filter on vsnd's egress
# (clsact) redirects (mirred) the full-sized TCP segments whose IPv4 ID is 0,
# 1, 3, 32, 33 or 34 (mod 64; Linux gives a TCP socket's packets consecutive
# IDs) to vsndb, whose tbf passes the first of each run at once and holds the
# next one ~2.75 packet times: per 64 segments one arrives 1, one 2 and one 3
# places late. The router's ends of both paths share one MAC, and it forwards
# them into the one veth to the receiver, where tcpdump captures (the
# router's frames only). The sender paces at 100 Mbit/s with TCP's own
# per-packet pacing (iperf3 --fq-rate; with -b they leave in bursts), and has
# gso_max_segs 1 on vsnd (TCP always builds GSO packets, segmented only after
# the filter: it would redirect runs of them), SACK off and tcp_reordering 10
# (this kernel's only SACK loss detection, RACK, would retransmit every late
# segment: the RTT, 10-20 us, is far below the slow path's delay; without
# SACK the dupack threshold is tcp_reordering). No netem, bonding, dummy or
# skbedit here; multipath routes spread per flow, not per packet.
#
# --anchors makes only the two captures the anchor benchmarks replay
# (bench-configs/anchors*.toml, scripts/ab-cycles.sh, scripts/measure.sh),
# receive direction only (the frames sent by the sender's veth):
#   tcp_1flow.pcap   IPv4 iperf3, 1 flow, 20 MiB paced at 3 Gbit/s (+ the
#                    control connection's frames in that direction): ~14.5k frames
#   tcp_4flows.pcap  IPv4 iperf3 -P 4, 20 MiB over 4 data flows (+ control):
#                    ~14.5k frames
# --tunnels wraps DIR/tcp_4flows.pcap (made with --anchors first when
# missing) in tunnels for the tunnel benchmarks (bench-configs/tunnels.toml):
#   tcp_4flows_vxlan4.pcap   VXLAN over IPv4, outer DF, UDP checksum 0 (the
#                            case DPDK's rte_gro merges)
#   tcp_4flows_geneve6.pcap  Geneve over IPv6, an 8-byte option, UDP checksum set
# A capture is retried (3 runs at most) when tcpdump did not write every
# packet it saw, or the loss capture shows no retransmission, or in the
# reorder capture fewer than 1% or more than 15% of the data segments are
# late or any is retransmitted or missing (reorder_stats.py); an anchor
# (5 runs at most) when it carries less than the 20 MiB.
# MAKE_CAPTURES_KEEP_WORK=1 keeps OUTDIR/.make-captures.PID (logs) for debugging.
# Idempotent (files are replaced; a run killed with SIGKILL leaves namespaces
# that the next run removes). Needs root. Installs missing tools with apt-get.
# Traffic stays inside the namespaces it creates (no route leaves them).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ next to the helpers
PROG=make-captures
die() { echo "$PROG: $*" >&2; exit 1; }
log() { echo "$PROG: $*" >&2; }
usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

OUT="" QUICK=0 RXONLY=0 ANCHORS=0 REORDER_ONLY=0 UDP_ONLY=0 TUNNELS=0
for a in "$@"; do
    case "$a" in
        --quick) QUICK=1 ;;
        --rx-only) RXONLY=1 ;;
        --anchors) ANCHORS=1 ;;
        --reorder-only) REORDER_ONLY=1 ;;
        --udp-only) UDP_ONLY=1 ;;
        --tunnels) TUNNELS=1 ;;
        -h|--help) usage ;;
        -*) die "unknown option $a" ;;
        *) [ -z "$OUT" ] || usage; OUT=$a ;;
    esac
done
if [ "$TUNNELS" = 1 ]; then
    [ "$ANCHORS$QUICK$REORDER_ONLY$UDP_ONLY" = 0000 ] || die "--tunnels takes no other option"
    [ -n "$OUT" ] || OUT=$HERE/../../captures
    [ -f "$OUT/tcp_4flows.pcap" ] || "$0" --anchors "$OUT"
    python3 "$HERE/tunnel_encap.py" "$OUT/tcp_4flows.pcap" "$OUT/tcp_4flows_vxlan4.pcap" --kind vxlan --df
    python3 "$HERE/tunnel_encap.py" "$OUT/tcp_4flows.pcap" "$OUT/tcp_4flows_geneve6.pcap" \
        --kind geneve --outer 6 --udp-csum
    log "tcp_4flows_vxlan4.pcap, tcp_4flows_geneve6.pcap in $OUT"
    exit 0
fi
if [ "$ANCHORS" = 1 ]; then
    # The anchors' sizes are part of what the figures in docs/ measure.
    [ "$QUICK" = 0 ] || die "--anchors makes full-size captures only (no --quick)"
    [ "$REORDER_ONLY" = 0 ] || die "--anchors and --reorder-only exclude each other"
    [ "$UDP_ONLY" = 0 ] || die "--anchors and --udp-only exclude each other"
    RXONLY=1
    [ -n "$OUT" ] || OUT=$HERE/../../captures
fi
[ -n "$OUT" ] || usage
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, tcpdump)"

# ---- tools -----------------------------------------------------------------
need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v tcpdump >/dev/null || need+=(tcpdump)
command -v tshark >/dev/null || need+=(tshark)
command -v capinfos >/dev/null || need+=(wireshark-common)
command -v ethtool >/dev/null || need+=(ethtool)
{ command -v ip && command -v tc; } >/dev/null || need+=(iproute2)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    printf '%s\n' 'wireshark-common wireshark-common/install-setuid boolean false' \
        'iperf3 iperf3/start_daemon boolean false' | debconf-set-selections
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# ---- sizes -----------------------------------------------------------------
if [ "$QUICK" = 1 ]; then
    UDP_RATE=15M    # per flow, 1 s: ~5.4k datagrams in all
    BYTES=4M        # tcp4 / tcp6: ~2.9k data segments
    LOSS_T=1 LOSS_RATE=40mbit
    JUNK_BYTES=1M JUNK_PER_KIND=5
else
    UDP_RATE=60M    # per flow, 1 s: ~21k datagrams in all
    BYTES=30M       # ~21.7k data segments
    LOSS_T=2 LOSS_RATE=100mbit
    JUNK_BYTES=4M JUNK_PER_KIND=10
fi
LOSS_LIMIT=100000   # tbf queue in bytes (~66 full frames): a few % of segments lost
# tcp4_reorder: the sender's pace (TCP pacing: 1448-byte segments, one every
# 116 us) and the slow path's tbf rate, which holds a segment that follows
# another one there (1600-byte burst: 1428 bytes of tokens to wait for) 318 us,
# 2.75 segment times. Change them together.
REORDER_RATE=100M REORDER_SLOW=36mbit

# ---- names, cleanup ----------------------------------------------------------
TAG=grxcap$$
NS_S=${TAG}s NS_R=${TAG}r        # sender, receiver
NS_M=${TAG}m                     # the router of tcp4_reorder
V_S=vsnd V_R=vrcv                # veth ends (each in its own namespace)
V_SB=vsndb                       # tcp4_reorder: the sender's slow path,
V_MA=vrta V_MB=vrtb V_MR=vrtr    # the router's ends (from vsnd, vsndb; to vrcv)
MAC_S=02:00:00:00:99:01 MAC_R=02:00:00:00:99:02
# tcp4_reorder: the sender's ends of both paths, the router's (one MAC for both)
MAC_SA=02:00:00:00:99:11 MAC_SB=02:00:00:00:99:13 MAC_MA=02:00:00:00:99:12
# What --rx-only keeps: the frames from the sender's veth; the anchors keep
# only its TCP frames (no ARP, no IPv6 neighbour or MLD chatter).
RX_FILTER="ether src $MAC_S"
[ "$ANCHORS" = 0 ] || RX_FILTER="$RX_FILTER and ip and tcp"
IP4_S=10.99.1.1 IP4_R=10.99.1.2
IP6_S=fd00:99::1 IP6_R=fd00:99::2
IP4_SA=10.99.2.1 IP4_MA=10.99.2.2  # tcp4_reorder: sender, router (the router is $IP4_S to the receiver)
PORT=5201
TD_PID="" SRV_PID=""

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/.make-captures.$$

ns_kill() {  # end what still runs in one of our namespaces, then delete it
    local ns=$1 p
    ip netns list | awk '{print $1}' | grep -qx "$ns" || return 0
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    sleep 0.2
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
}

stop_tcpdump() {  # SIGINT so tcpdump flushes and closes the file, then wait
    [ -n "$TD_PID" ] || return 0
    kill -INT "$TD_PID" 2>/dev/null || true
    local i
    for i in $(seq 50); do kill -0 "$TD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$TD_PID" 2>/dev/null || true
    wait "$TD_PID" 2>/dev/null || true
    TD_PID=""
}

net_down() {
    stop_tcpdump
    if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; SRV_PID=""; fi
    ns_kill "$NS_S"; ns_kill "$NS_R"; ns_kill "$NS_M"
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM HUP
    net_down
    if [ -n "${MAKE_CAPTURES_KEEP_WORK:-}" ]; then log "work files kept in $WORK"; else rm -rf "$WORK"; fi
    [ $rc -eq 0 ] || log "failed (exit $rc); cleaned up"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Leftovers of runs that were killed without a chance to clean up.
for ns in $(ip netns list | awk '{print $1}' | grep -E '^grxcap[0-9]+[srm]$' || true); do
    pid=${ns#grxcap}; pid=${pid%?}
    kill -0 "$pid" 2>/dev/null || { log "removing stale namespace $ns"; ns_kill "$ns"; }
done
for d in "$OUT"/.make-captures.*; do
    [ -d "$d" ] || continue
    kill -0 "${d##*.}" 2>/dev/null || rm -rf "$d"
done
mkdir -p "$WORK"

# ---- network ---------------------------------------------------------------
ns_new() {  # ns_new NS: a fresh namespace, lo up, no DAD or router solicitations
    ip netns add "$1"
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
        net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0 \
        net.ipv4.tcp_no_metrics_save=1
    ip -n "$1" link set lo up
}

dev_prep() {  # dev_prep NS DEV: MTU 1500, checksum/TSO/GSO/GRO offloads off
    ip -n "$1" link set "$2" mtu 1500
    ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null
}

net_up() {  # net_up [tbf|reorder]: fresh namespaces + veth pair, addresses, offloads
    if [ "${1:-}" = reorder ]; then net_up_reorder; return; fi
    ns_new "$NS_S"
    ns_new "$NS_R"
    ip link add "$V_S" netns "$NS_S" address $MAC_S type veth peer name "$V_R" netns "$NS_R" address $MAC_R
    dev_prep "$NS_S" $V_S
    dev_prep "$NS_R" $V_R
    ip -n "$NS_S" addr add $IP4_S/24 dev $V_S
    ip -n "$NS_R" addr add $IP4_R/24 dev $V_R
    ip -n "$NS_S" addr add $IP6_S/64 dev $V_S nodad
    ip -n "$NS_R" addr add $IP6_R/64 dev $V_R nodad
    if [ "${1:-}" = tbf ]; then
        ip netns exec "$NS_S" tc qdisc add dev $V_S root tbf rate $LOSS_RATE burst 16k limit $LOSS_LIMIT
    fi
    ip -n "$NS_S" link set $V_S up
    ip -n "$NS_R" link set $V_R up
    wait_for 5 eval "ip -n $NS_S -br link show $V_S | grep -qw UP && ip -n $NS_R -br link show $V_R | grep -qw UP" \
        || die "veth pair did not come up"
}

# net_up_reorder: sender -> router -> receiver for tcp4_reorder (see the top):
# two paths from the sender to the router, the second through a tbf, and a
# filter spraying segments onto it; one veth from the router to the receiver.
# Everything (qdiscs, filters) lives on veths in our namespaces: deleting
# the namespaces (net_down) removes it.
net_up_reorder() {
    ns_new "$NS_S"
    ns_new "$NS_M"
    ns_new "$NS_R"
    ip link add "$V_S" netns "$NS_S" address $MAC_SA type veth peer name "$V_MA" netns "$NS_M" address $MAC_MA
    # the router's end of the slow path has the MAC of vrta, where the sender's
    # frames are addressed, so that it takes the redirected ones in as well
    ip link add "$V_SB" netns "$NS_S" address $MAC_SB type veth peer name "$V_MB" netns "$NS_M" address $MAC_MA
    ip link add "$V_MR" netns "$NS_M" address $MAC_S type veth peer name "$V_R" netns "$NS_R" address $MAC_R
    local x
    for x in "$NS_S $V_S" "$NS_S $V_SB" "$NS_M $V_MA" "$NS_M $V_MB" "$NS_M $V_MR" "$NS_R $V_R"; do
        dev_prep $x
    done
    # TCP hands single segments to the filter (it builds GSO packets even
    # with GSO off, and those are segmented after the egress filter)
    ip -n "$NS_S" link set $V_S gso_max_segs 1
    ip -n "$NS_S" addr add $IP4_SA/24 dev $V_S
    ip -n "$NS_M" addr add $IP4_MA/24 dev $V_MA
    ip -n "$NS_M" addr add $IP4_S/24 dev $V_MR
    ip -n "$NS_R" addr add $IP4_R/24 dev $V_R
    # forwarding; no reverse-path check (the slow path's source is routed via vrta)
    ip netns exec "$NS_M" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
        net.ipv4.conf.default.rp_filter=0 net.ipv4.conf.$V_MB.rp_filter=0
    # no SACK (RACK would retransmit each late segment), dupack threshold 10
    ip netns exec "$NS_S" sysctl -qw net.ipv4.tcp_sack=0 net.ipv4.tcp_reordering=10
    ip netns exec "$NS_S" tc qdisc add dev $V_SB root tbf rate $REORDER_SLOW burst 1600 limit 200000
    ip netns exec "$NS_S" tc qdisc add dev $V_S clsact
    # full-sized (IPv4 total length has bit 0x400) TCP segments whose ID is
    # 0, 1, 32, 33 / 3 / 34 mod 64: runs 0,1,3 and 32,33,34 take the slow path
    local m
    for m in "0x0000 0x001e" "0x0003 0x003f" "0x0022 0x003f"; do
        ip netns exec "$NS_S" tc filter add dev $V_S egress protocol ip u32 \
            match ip protocol 6 0xff match u16 $m at 4 match u16 0x0400 0x0400 at 2 \
            action mirred egress redirect dev $V_SB
    done
    for x in "$NS_S $V_S" "$NS_S $V_SB" "$NS_M $V_MA" "$NS_M $V_MB" "$NS_M $V_MR" "$NS_R $V_R"; do
        ip -n ${x% *} link set ${x#* } up
    done
    wait_for 5 eval "ip -n $NS_S -br link show $V_S | grep -qw UP && ip -n $NS_S -br link show $V_SB | grep -qw UP \
        && ip -n $NS_R -br link show $V_R | grep -qw UP" || die "veth pairs did not come up"
    ip -n "$NS_S" route add ${IP4_R%.*}.0/24 via $IP4_MA dev $V_S
    ip -n "$NS_R" route add ${IP4_SA%.*}.0/24 via $IP4_S dev $V_R
}

wait_for() {  # wait_for SECONDS CMD...: poll until CMD succeeds
    local t=$1 i; shift
    for i in $(seq $((t * 20))); do "$@" && return 0; sleep 0.05; done
    return 1
}

# capture NAME [tbf|reorder] -- IPERF3_CLIENT_ARGS...: one iperf3 run captured
# on the receiver's veth into $WORK/NAME.pcap. Retried (up to 3 runs) when
# tcpdump reports kernel drops or, for a tbf run, when no retransmission was
# captured, or a reorder run (receive direction only) is not reordered as
# meant (reorder_check).
capture() {
    local name=$1 mode=""; shift
    if [ "$1" = tbf ] || [ "$1" = reorder ] || [ "$1" = udp ]; then mode=$1; shift; fi
    [ "$1" = -- ] && shift
    local file=$WORK/$name.pcap try drops retx
    for try in 1 2 3; do
        net_up $mode
        rm -f "$file"
        ip netns exec "$NS_R" iperf3 -s -1 -p $PORT >"$WORK/$name.server.log" 2>&1 &
        SRV_PID=$!
        ip netns exec "$NS_R" tcpdump -i $V_R -s 0 -B 65536 --immediate-mode -Z root -n -w "$file" \
            >"$WORK/$name.tcpdump.log" 2>&1 &
        TD_PID=$!
        wait_for 10 grep -q 'listening on' "$WORK/$name.tcpdump.log" || die "tcpdump did not start: $(cat "$WORK/$name.tcpdump.log")"
        wait_for 10 eval "ip netns exec $NS_R ss -Hltn 'sport = :$PORT' | grep -q LISTEN" || die "iperf3 server did not start"
        ip netns exec "$NS_S" timeout 120 iperf3 -p $PORT "$@" >"$WORK/$name.client.log" 2>&1 \
            || die "iperf3 failed: $(tail -5 "$WORK/$name.client.log")"
        wait_for 10 eval "! kill -0 $SRV_PID 2>/dev/null" || true
        sleep 0.3            # the last ACKs and FINs
        stop_tcpdump
        net_down
        # Complete only if tcpdump wrote every packet it received and the
        # kernel dropped none (and, through tbf, some were retransmitted).
        local tdlog=$WORK/$name.tcpdump.log got seen ok=1
        drops=$(sed -n 's/^\([0-9]*\) packets\{0,1\} dropped by kernel$/\1/p' "$tdlog")
        got=$(sed -n 's/^\([0-9]*\) packets\{0,1\} captured$/\1/p' "$tdlog")
        seen=$(sed -n 's/^\([0-9]*\) packets\{0,1\} received by filter$/\1/p' "$tdlog")
        [ "$drops" = 0 ] && [ -n "$got" ] && [ "$got" = "$seen" ] || ok=0
        retx=""
        if [ "$mode" = tbf ]; then
            retx=$(tshark -r "$file" -Y tcp.analysis.retransmission 2>/dev/null | wc -l)
            [ "$retx" -gt 0 ] || ok=0
        fi
        if [ $ok = 1 ]; then
            if [ "$mode" = udp ]; then
                # the datagrams only (not iperf3's TCP control connection)
                tcpdump -r "$file" -w "$file.rx" -Z root "ether src $MAC_S and udp" 2>/dev/null && mv -f "$file.rx" "$file"
                got="$(capinfos -c -M "$file" | awk '/Number of packets/{print $NF}') udp"
            elif [ "$RXONLY" = 1 ] || [ "$mode" = reorder ]; then
                # keep what arrived from the sender's veth (reorder: the router's)
                tcpdump -r "$file" -w "$file.rx" -Z root "$RX_FILTER" 2>/dev/null && mv -f "$file.rx" "$file"
                got="$(capinfos -c -M "$file" | awk '/Number of packets/{print $NF}') rx-only"
            fi
            if [ "$mode" != reorder ]; then
                log "$name: $got packets${retx:+, $retx retransmissions}"
                return 0
            fi
            if reorder_check "$file"; then log "$name: $got packets, $REO"; return 0; fi
            log "$name: try $try: $REO; again"
            continue
        fi
        log "$name: try $try: wrote ${got:-?} of ${seen:-?} packets, ${drops:-?} dropped by kernel${retx:+, $retx retransmissions}; again"
    done
    die "$name: no clean capture in 3 tries"
}

# reorder_check FILE: sets REO to what reorder_stats.py counts in FILE; true
# when 1-15% of its data segments arrived late and none was retransmitted or
# is missing.
REO=""
reorder_check() {
    local tot
    tot=$(python3 "$HERE/reorder_stats.py" "$1" | tail -1) || tot=""
    REO=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%d data segments, %s%% late (by 1/2/3/>3 places: %d/%d/%d/%d), %d retransmitted, %d bytes missing",
            v["segments"], v["late_pct"], v["by1"], v["by2"], v["by3"], v["over3"], v["retx"], v["missing"] }' <<<"$tot")
    awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        exit !(v["segments"] + 0 > 0 && v["late_pct"] + 0 >= 1 && v["late_pct"] + 0 <= 15 &&
               v["retx"] + 0 == 0 && v["missing"] + 0 == 0) }' <<<"$tot"
}

# publish FILE...: moves the finished files from $WORK to $OUT and lists them.
publish() {
    local f
    for f in "$@"; do mv -f "$WORK/$f" "$OUT/$f"; done
    for f in "$@"; do
        case $f in
            *.pcap) printf '%-17s %7s packets %10s bytes\n' "$f" \
                "$(capinfos -c -M "$OUT/$f" | awk '/Number of packets/{print $NF}')" "$(stat -c %s "$OUT/$f")" ;;
        esac
    done
}

# data_flows FILE: TCP connections with more than 100 data segments (the
# iperf3 control connection carries a handful).
data_flows() {
    tshark -r "$1" -Y 'tcp.len > 0' -T fields -e tcp.stream 2>/dev/null | sort | uniq -c | awk '$1 > 100' | wc -l
}

# data_bytes FILE: TCP payload bytes in the capture.
data_bytes() {
    tshark -r "$1" -T fields -e tcp.len 2>/dev/null | awk '{ n += $1 } END { print n + 0 }'
}

# anchor NAME IPERF3_CLIENT_ARGS...: capture NAME until its data reaches
# the 20 MiB (5 tries; the last one is kept, said so, whatever it holds).
anchor() {
    local name=$1 try sent; shift
    for try in 1 2 3 4 5; do
        capture "$name" -- "$@"
        sent=$(data_bytes "$WORK/$name.pcap")
        [ "$sent" -lt 20500000 ] || return 0
        if [ "$try" = 5 ]; then
            log "$name: WARNING: kept with $sent bytes of data, short of the 20 MiB (the machine busy?)"
        else
            log "$name: try $try: $sent bytes of data, short of the 20 MiB; again"
        fi
    done
}

# udp_flows FILE: UDP flows with more than 100 datagrams.
udp_flows() {
    tshark -r "$1" -Y 'udp' -T fields -e udp.srcport 2>/dev/null | sort | uniq -c | awk '$1 > 100' | wc -l
}

# udp_captures: udp4.pcap and udp6.pcap, 4 flows each.
udp_captures() {
    capture udp4 udp -- -u -c $IP4_R -P 4 -l 1400 -b $UDP_RATE -t 1
    capture udp6 udp -- -u -6 -c $IP6_R -P 4 -l 1400 -b $UDP_RATE -t 1
    [ "$(udp_flows "$WORK/udp4.pcap")" = 4 ] || die "udp4.pcap: not four UDP flows"
    [ "$(udp_flows "$WORK/udp6.pcap")" = 4 ] || die "udp6.pcap: not four UDP flows"
}

START=$SECONDS
if [ "$UDP_ONLY" = 1 ]; then
    udp_captures
    publish udp4.pcap udp6.pcap
    log "done in $((SECONDS - START)) s: $OUT"
    exit 0
fi
if [ "$REORDER_ONLY" = 1 ]; then
    capture tcp4_reorder reorder -- -c $IP4_R -n $BYTES --fq-rate $REORDER_RATE
    publish tcp4_reorder.pcap
    log "done in $((SECONDS - START)) s: $OUT"
    exit 0
fi
if [ "$ANCHORS" = 1 ]; then
    # iperf3 -n counts what it writes into the socket; when it ends the test
    # the server closes with the bytes still on their way unread (RST), so a
    # capture can miss a tail of random length. One flow is paced (-b), its
    # socket buffer (a few MB unpaced) then holds little; four flows are
    # not (paced, they end short more often). A capture short of the 20 MiB
    # (most often on a busy machine) is taken again.
    anchor tcp_1flow -c $IP4_R -n 20M -b 3G
    anchor tcp_4flows -c $IP4_R -n 20M -P 4
    [ "$(data_flows "$WORK/tcp_1flow.pcap")" = 1 ] || die "tcp_1flow.pcap: not one data flow"
    [ "$(data_flows "$WORK/tcp_4flows.pcap")" = 4 ] || die "tcp_4flows.pcap: not four data flows"
    publish tcp_1flow.pcap tcp_4flows.pcap
    log "done in $((SECONDS - START)) s: $OUT"
    exit 0
fi
capture tcp4 -- -c $IP4_R -n $BYTES
capture tcp4_loss tbf -- -c $IP4_R -t $LOSS_T
capture tcp6 -- -6 -c $IP6_R -n $BYTES -P 2
capture junkbase -- -c $IP4_R -n $JUNK_BYTES
capture tcp4_reorder reorder -- -c $IP4_R -n $BYTES --fq-rate $REORDER_RATE
udp_captures

python3 "$HERE/vlan_tag.py" "$WORK/tcp4.pcap" "$WORK/tcp4_vlan.pcap" --vid 100 >/dev/null
python3 "$HERE/vlan_tag.py" "$WORK/tcp4.pcap" "$WORK/tcp4_qinq.pcap" --vid 100 --outer-vid 200 --outer-tpid 0x88a8 >/dev/null
python3 "$HERE/mix_junk.py" "$WORK/junkbase.pcap" "$WORK/mixed_junk.pcap" --seed 1 \
    --per-kind $JUNK_PER_KIND --summary "$WORK/mixed_junk.txt" | sed "s#$WORK/##g"
sed -i "s#$WORK/##g" "$WORK/mixed_junk.txt"
encap() { python3 "$HERE/tunnel_encap.py" "$WORK/$1.pcap" "$WORK/$2.pcap" "${@:3}"; }
encap tcp4 vxlan4 --kind vxlan --df
encap tcp6 vxlan6 --kind vxlan --outer 6 --udp-csum
encap tcp6 geneve4 --kind geneve --udp-csum
encap tcp4 geneve6 --kind geneve --outer 6

# Sanity checks, then publish.
[ "$(tshark -r "$WORK/tcp6.pcap" -Y 'ipv6 && tcp.len > 0' 2>/dev/null | wc -l)" -gt 0 ] || die "tcp6.pcap: no IPv6 TCP data"
[ "$(tshark -r "$WORK/tcp4_vlan.pcap" -T fields -e vlan.id 2>/dev/null | sort -u)" = 100 ] || die "tcp4_vlan.pcap: VLAN ids wrong"
[ "$(tshark -r "$WORK/tcp4_qinq.pcap" -T fields -e eth.type -e ieee8021ad.id -e vlan.id 2>/dev/null | sort -u)" = "$(printf '0x88a8\t200\t100')" ] || die "tcp4_qinq.pcap: VLAN ids wrong"
publish tcp4.pcap tcp4_loss.pcap tcp6.pcap tcp4_vlan.pcap tcp4_qinq.pcap mixed_junk.pcap mixed_junk.txt tcp4_reorder.pcap \
    udp4.pcap udp6.pcap vxlan4.pcap vxlan6.pcap geneve4.pcap geneve6.pcap
log "done in $((SECONDS - START)) s: $OUT"
