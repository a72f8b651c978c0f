#!/usr/bin/env bash
# Two grorx builds, A and B, on the same capture replayed from memory (net_pcap
# infinite_rx), alternating in pairs (A B, B A, A B, ...) so drift on a noisy
# host hits both alike. Each run reports the worker's TSC cycles per packet
# after RX (`--cycles`: GRO plus the stage, the PMD's copy left out); the
# result is the median of the per-pair differences B - A and ratios B / A, and
# how many pairs B won. This is how code changes to the GRO path are judged
# here: a change that does not win most pairs is noise.
#
# usage: scripts/ab-cycles.sh BIN_A BIN_B [PAIRS] [SECS] [PCAP] [-- SINK ARGS]
#   defaults: 10 pairs of 2 s, captures/tcp_1flow.pcap (made, as root, by
#   scripts/captures/make-captures.sh --anchors when missing),
#   sink args `--gro on --gro-csum trust`; PCAP `gen` takes the embedded
#   generator instead of a capture (its `--gen-*` options in the sink args)
# e.g. cp target/release/grorx /tmp/grorx-before; (change, build);
#      scripts/ab-cycles.sh /tmp/grorx-before target/release/grorx
# CMD_A / CMD_B replace the subcommand (default `sink`) with words of their
# own, e.g. the forward stage against the sink of the same binary:
#      CMD_B="forward --to net_null1" scripts/ab-cycles.sh G G
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
A=${1:?usage: ab-cycles.sh BIN_A BIN_B [PAIRS] [SECS] [PCAP] [-- SINK ARGS]}
B=${2:?usage: ab-cycles.sh BIN_A BIN_B [PAIRS] [SECS] [PCAP] [-- SINK ARGS]}
shift 2
PAIRS=10
SECS=2
DEFAULT_PCAP=$HERE/captures/tcp_1flow.pcap
PCAP=$DEFAULT_PCAP
for v in PAIRS SECS PCAP; do
    if [ $# -gt 0 ] && [ "$1" != "--" ]; then
        printf -v "$v" '%s' "$1"
        shift
    fi
done
[ "${1:-}" = "--" ] && shift
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--gro on --gro-csum trust)
for b in "$A" "$B"; do
    [ -x "$b" ] || { echo "ab-cycles.sh: $b is not an executable grorx" >&2; exit 1; }
done
# The default capture (by any path) is made when missing.
if [ "$PCAP" = gen ]; then
    SRC=()
elif [ "$(realpath -m "$PCAP")" = "$(realpath -m "$DEFAULT_PCAP")" ] && [ ! -e "$PCAP" ]; then
    MAKE=("$HERE/scripts/captures/make-captures.sh" --anchors "$HERE/captures")
    [ "$(id -u)" = 0 ] || {
        echo "ab-cycles.sh: $PCAP missing; make it (root, a few seconds) with: sudo ${MAKE[*]}" >&2
        exit 1
    }
    echo "ab-cycles.sh: $PCAP missing: making it: ${MAKE[*]}" >&2
    "${MAKE[@]}" >&2
fi
if [ "$PCAP" != gen ]; then
    [ -r "$PCAP" ] || { echo "ab-cycles.sh: cannot read the capture $PCAP" >&2; exit 1; }
    SRC=(--port "net_pcap0,rx_pcap=$(realpath "$PCAP"),infinite_rx=1")
fi

# One run: the cycles per packet after RX (process + stage).
run() {
    local bin=$1 cmd=$2
    # shellcheck disable=SC2086
    "$bin" $cmd "${SRC[@]}" --duration "$SECS" \
        --cycles --json "${ARGS[@]}" 2>/dev/null |
        python3 -c 'import json,sys; c=json.load(sys.stdin)["cycles"]; print(c["process"]+c["stage"])'
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq "$PAIRS"); do
    if [ $((i % 2)) = 1 ]; then
        a=$(run "$A" "${CMD_A:-sink}"); b=$(run "$B" "${CMD_B:-sink}")
    else
        b=$(run "$B" "${CMD_B:-sink}"); a=$(run "$A" "${CMD_A:-sink}")
    fi
    echo "$a $b" >>"$out"
    echo "pair $i/$PAIRS: A $a  B $b" >&2
done
python3 - "$out" "$A ${CMD_A:-sink}" "$B ${CMD_B:-sink}" "${ARGS[*]}" <<'PY'
import statistics as st, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
d = [b - a for a, b in rows]
r = [b / a for a, b in rows if a > 0]
print(f"args: {sys.argv[4]}")
print(f"A {sys.argv[2]}: median {st.median(a for a, _ in rows):.1f} cycles/packet after RX")
print(f"B {sys.argv[3]}: median {st.median(b for _, b in rows):.1f}")
print(f"paired: B - A median {st.median(d):+.1f} cycles, B / A median {st.median(r):.3f}, "
      f"B lower in {sum(x < 0 for x in d)} of {len(d)} pairs")
PY
