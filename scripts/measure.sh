#!/usr/bin/env bash
# Reproduces the figures of docs/performance.md into OUT (default
# perf-results/): nothing else may run on the machine meanwhile, since rates
# are compared side by side.
#
#   scripts/measure.sh [OUT] [PART...]
#
# PART (default: all of them, in this order):
#   quality   merge quality (grocheck --strict-order) and segments per packet on
#             the anchor captures: GRO off, DPDK's rte_gro, grorx per poll,
#             grorx held across polls, grorx at rte_gro's frag budget
#   queues    1 worker vs 2 workers on a 2-queue net_null port
#   hist      histogram percentiles of a replay of each anchor capture
#   telemetry /grorx/stats asked with dpdk-telemetry.py from a running sink
#   testpmd   grorx sink (GRO off, then on) vs dpdk-testpmd rxonly on net_null0
#   bench     every bench-configs/*.toml (tables, CSV, JSON, PNG in OUT)
#
# GRORX=path picks the binary (default target/release/grorx); CAPTURES=dir
# the directory holding the anchor captures tcp_1flow.pcap and tcp_4flows.pcap
# for quality and hist (default captures/ in the repository, made as root by
# scripts/captures/make-captures.sh --anchors when missing; the bench part
# replays what bench-configs/ names, the repository's captures/).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
export PYTHONDONTWRITEBYTECODE=1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/perf-results}
shift || true
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(quality queues hist telemetry testpmd bench)
GRORX=${GRORX:-$ROOT/target/release/grorx}
DEFAULT_CAPTURES=$ROOT/captures
CAPTURES=${CAPTURES:-$DEFAULT_CAPTURES}
[ -x "$GRORX" ] || { echo "measure: $GRORX missing: cargo build --release" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/measure.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
log() { echo "measure: $*" >&2; }
host() { echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(uname -r), $(date -u +%FT%TZ)"; }

# The anchor captures in $CAPTURES: made when the default directory lacks
# them (root), else a stop that says how to make them.
anchors() {
    local f missing=0
    for f in tcp_1flow tcp_4flows; do [ -r "$CAPTURES/$f.pcap" ] || missing=1; done
    [ $missing = 1 ] || return 0
    local make=("$ROOT/scripts/captures/make-captures.sh" --anchors "$CAPTURES")
    if [ "$CAPTURES" != "$DEFAULT_CAPTURES" ]; then
        echo "measure: CAPTURES=$CAPTURES lacks tcp_1flow.pcap or tcp_4flows.pcap (make them with: sudo ${make[*]})" >&2
        exit 1
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "measure: the anchor captures are missing in $CAPTURES; make them (root, a few seconds) with: sudo ${make[*]}" >&2
        exit 1
    fi
    log "anchor captures missing in $CAPTURES: making them: ${make[*]}"
    "${make[@]}" >&2
}

# A field of grorx's JSON report (dotted path) from stdin.
jget() { python3 -c "import json,sys
v=json.load(sys.stdin)
for k in sys.argv[1].split('.'): v=v.get(k) if isinstance(v,dict) else None
print(v if v is not None else '-')" "$1"; }

quality() {
    local f=$OUT/quality.md
    {
        echo "# Merge quality on the tcp_1flow and tcp_4flows captures ($(host))"
        echo
        echo "grocheck.py IN OUT (--strict-order for grorx; rte_gro reorders PSH, so it is checked without)."
        echo "merge_quality = (tcp_in - tcp_out) / (tcp_in - ideal_out at --max-frags 17)."
        echo
        echo "| capture | engine | args | packets out | segments/packet | merge quality | reordered flows | problems |"
        echo "|---|---|---|---|---|---|---|---|"
    } >"$f"
    for cap in tcp_1flow tcp_4flows; do
        local in=$CAPTURES/$cap.pcap
        while IFS='|' read -r label args check; do
            # shellcheck disable=SC2086
            "$GRORX" sink --port "net_pcap0,rx_pcap=$in" --capture "$TMP/o.pcap" --json $args \
                -- --no-huge -m 512 2>/dev/null >"$TMP/r.json"
            # shellcheck disable=SC2086
            local line
            line=$(python3 "$ROOT/tests/tools/grocheck.py" $check "$in" "$TMP/o.pcap" | tail -1)
            local v
            v() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$line"; }
            echo "| $cap | $label | \`${args:-}\` | $(v tcp_out) | $(jget gro.avg_segments_per_packet <"$TMP/r.json" | cut -c1-5) | $(v merge_quality) | $(v reordered_flows) | $(v problems) |" >>"$f"
        done <<'EOF'
GRO off|--gro off|--strict-order
DPDK rte_gro (lightweight, burst)|--gro rte|
grorx, flush per poll (default)||--strict-order
grorx, held across polls|--gro-flush-us 200|--strict-order
grorx, per poll, rte_gro's budget|--max-frags 64|--strict-order --max-frags 64
EOF
    done
    cat "$f"
}

queues() {
    local f=$OUT/queues.md reps=5 secs=5
    {
        echo "# 1 worker vs 2 workers, net_null0 with 2 RX queues ($(host))"
        echo
        echo "grorx sink --port net_null0 --queues 2 --cores C --duration $secs --json; $reps rounds interleaved."
        echo
        echo "| round | 1 worker (--cores 1) Mpps | 2 workers (--cores 0,1) Mpps | ratio |"
        echo "|---|---|---|---|"
    } >"$f"
    for r in $(seq $reps); do
        local a b
        a=$("$GRORX" sink --port net_null0 --queues 2 --cores 1 --duration $secs --json 2>/dev/null | jget rx_pps)
        b=$("$GRORX" sink --port net_null0 --queues 2 --cores 0,1 --duration $secs --json 2>/dev/null | jget rx_pps)
        [ "$a" != - ] && [ "$b" != - ] || { log "a queues run failed"; return 1; }
        python3 -c "import sys; a,b=float(sys.argv[2]),float(sys.argv[3]); print(f'| {sys.argv[1]} | {a/1e6:.2f} | {b/1e6:.2f} | {b/a:.2f} |')" "$r" "$a" "$b" >>"$f"
    done
    cat "$f"
}

hist() {
    local f=$OUT/histograms.md
    echo "# Histogram percentiles, tcp_1flow and tcp_4flows replayed once ($(host))" >"$f"
    for cap in tcp_1flow tcp_4flows; do
        local in=$CAPTURES/$cap.pcap
        for args in "" "--gro-flush-us 200"; do
            # shellcheck disable=SC2086
            "$GRORX" sink --port "net_pcap0,rx_pcap=$in" --json $args --hdr-log "$OUT/$cap${args:+-held}.hlog" \
                -- --no-huge -m 512 2>/dev/null >"$TMP/h.json"
            {
                echo
                echo "## $cap, grorx sink ${args:-(flush per poll)}"
                echo
                python3 - "$TMP/h.json" <<'EOF'
import json, sys
h = json.load(open(sys.argv[1]))["histograms"]
cols = ["count", "mean", "p50", "p90", "p99", "p999", "max"]
print("| histogram | count | mean | p50 | p90 | p99 | p99.9 | max |")
print("|---|" + "---|" * len(cols))
for name, v in h.items():
    if isinstance(v, dict) and "p50" in v:
        cells = [f"{v[c]:.1f}" if c == "mean" else str(v.get(c, "-")) for c in cols]
        print(f"| {name} | " + " | ".join(cells) + " |")
EOF
            } >>"$f"
        done
    done
    cat "$f"
}

telemetry() {
    local f=$OUT/telemetry.txt prefix=grorx-measure-$$
    "$GRORX" sink --duration 8 -q --name "$prefix" >/dev/null 2>&1 &
    local pid=$!
    sleep 4
    {
        echo "\$ grorx sink --duration 8 --name $prefix &"
        for cmd in /grorx/stats /grorx/gro /ethdev/stats,0; do
            echo "\$ echo $cmd | dpdk-telemetry.py -f $prefix"
            echo "$cmd" | dpdk-telemetry.py -f "$prefix" 2>&1 | grep -v '^Connecting\|^{"version"' || true
        done
    } >"$f"
    wait "$pid" || true
    cat "$f"
}

testpmd() {
    GRORX=$GRORX "$ROOT/scripts/bench-sink-vs-testpmd.sh" 10 5 | tee "$OUT/sink-vs-testpmd.txt"
    GRORX=$GRORX GRO=on "$ROOT/scripts/bench-sink-vs-testpmd.sh" 5 5 | tee "$OUT/sink-gro-on-vs-testpmd.txt"
}

bench() {
    for c in anchors anchors-4flows anchors-32flows anchors-1024flows anchors-ipv6 anchors-newflows anchors-shortflows anchors-nic-csum \
        fresh-tcp4 fresh-tcp4-loss fresh-tcp4-vlan big-tcp \
        reorder udp-capture udp tunnels tunnels-geneve6 max-frags single-segment hugepages build-skb \
        headroom; do
        log "bench $c"
        "$GRORX" bench "$ROOT/bench-configs/$c.toml" --out "$OUT" | tee "$OUT/$c.txt"
    done
}

for p in "${PARTS[@]}"; do
    case $p in quality | hist) anchors ;; esac
done
for p in "${PARTS[@]}"; do
    case $p in
        quality | queues | hist | telemetry | testpmd | bench) log "$p"; $p ;;
        *) echo "measure: unknown part $p (quality queues hist telemetry testpmd bench)" >&2; exit 2 ;;
    esac
done
log "results in $OUT"
