#!/usr/bin/env bash
# Instructions a packet the worker spends after RX (what `--cycles` calls
# process + stage: skb build, GRO, the stage, the bulk free), counted by
# callgrind on a capture replayed from memory, for GRO off, DPDK's rte_gro,
# grorx's GRO trusting checksums and verifying them. A count is the same
# from run to run whatever else the machine does: it tells a change to the
# worker's path apart from this VM's noise, where the paired cycles of
# scripts/ab-cycles.sh tell what the instructions cost in time (they also
# wait on memory, which a count does not see).
#
#   scripts/worker-instructions.sh [BIN] [PCAP] [-- SINK ARGS]
#
# BIN: a grorx binary (default target/release/grorx, built when missing);
# PCAP: the capture (default captures/tcp_1flow.pcap, made, as root, by
# scripts/captures/make-captures.sh --anchors when missing). SINK ARGS are
# added to every cell. Each cell runs 4 s under valgrind on 4 KiB pages
# (no hugepages), a few hundred thousand packets; the worker's start-up is
# a small share of them. rte_gro zeroes its tables on every call (`rep
# stos`), which callgrind counts as an instruction a byte: its count overstates its
# time more than the others' do. Valgrind hides AVX-512 from the program,
# so verifying sums with the AVX2 kernel here. Needs valgrind (apt-get
# install valgrind).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=$HERE/target/release/grorx
PCAP=$HERE/captures/tcp_1flow.pcap
for v in BIN PCAP; do
    if [ $# -gt 0 ] && [ "$1" != "--" ]; then
        printf -v "$v" '%s' "$1"
        shift
    fi
done
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
command -v valgrind >/dev/null || {
    echo "worker-instructions.sh: valgrind is missing: apt-get install valgrind" >&2
    exit 1
}
if [ "$BIN" = "$HERE/target/release/grorx" ] && [ ! -x "$BIN" ]; then
    (cd "$HERE" && cargo build --release --quiet -p grorx-cli)
fi
[ -x "$BIN" ] || { echo "worker-instructions.sh: $BIN is not an executable grorx" >&2; exit 1; }
if [ ! -e "$PCAP" ] && [ "$(realpath -m "$PCAP")" = "$(realpath -m "$HERE/captures/tcp_1flow.pcap")" ]; then
    [ "$(id -u)" = 0 ] || {
        echo "worker-instructions.sh: $PCAP missing; make it (root) with: sudo $HERE/scripts/captures/make-captures.sh --anchors $HERE/captures" >&2
        exit 1
    }
    "$HERE/scripts/captures/make-captures.sh" --anchors "$HERE/captures" >&2
fi
[ -r "$PCAP" ] || { echo "worker-instructions.sh: cannot read the capture $PCAP" >&2; exit 1; }
PORT="net_pcap0,rx_pcap=$(realpath "$PCAP"),infinite_rx=1"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# One cell: its name and its sink arguments.
cell() {
    local name=$1
    shift
    # The loop's own function, by its exact name: a pattern that also
    # matches a closure named under it (run::{{closure}}) turns collection
    # off inside that closure, and what it does goes uncounted.
    valgrind --tool=callgrind --toggle-collect='grorx::worker::run' \
        --callgrind-out-file="$OUT/cg.$name" \
        "$BIN" sink --port "$PORT" --duration 4 --json "$@" "${EXTRA[@]}" \
        -- --no-huge -m 1024 --no-shconf >"$OUT/$name.json" 2>"$OUT/$name.err" || {
        echo "worker-instructions.sh: the $name cell failed:" >&2
        tail -5 "$OUT/$name.err" >&2
        exit 1
    }
    # The worker's loop, inclusive, less the RX call (the PMD's work).
    callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$OUT/cg.$name" >"$OUT/$name.ann" 2>/dev/null
    python3 - "$name" "$OUT/$name.json" "$OUT/$name.ann" <<'PY'
import json, re, sys
name, report, ann = sys.argv[1:]
n = json.load(open(report))["rx_packets"]
def incl(pattern):
    best = 0
    for l in open(ann):
        m = re.match(r"\s*([\d,]+) .*" + pattern, l)
        if m:
            best = max(best, int(m.group(1).replace(",", "")))
    return best
total = incl(r"grorx::worker::run")
rx = incl(r"rte_eth_rx_burst__extern")
print(f"{name:<8} {n:>9} packets  {(total - rx) / n:7.1f} instructions a packet after RX")
PY
}

cell off --gro off
cell rte --gro rte
cell trust --gro on --gro-csum trust
cell verify --gro on
