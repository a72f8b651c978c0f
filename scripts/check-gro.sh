#!/usr/bin/env bash
# check-gro.sh IN.pcap [grorx sink args...] [-- EAL args...]
#
# Replays one capture through grorx's GRO (`grorx sink --port
# net_pcap0,rx_pcap=IN --capture OUT`), then holds what grorx wrote to Linux's
# GRO rules with tests/tools/grocheck.py --strict-order (conservation, arrival
# order, legal merges, checksums) and asks tshark for checksum, length and
# malformed complaints (tests/tools/tshark_check.py). With a mix_junk.py
# summary next to the capture (IN.txt, e.g. mixed_junk.txt) it also checks that
# every junk frame passed through byte-identical (tests/tools/junkcheck.py).
# Prints grorx's GRO counters, the merge quality and every problem found.
#
#   scripts/check-gro.sh caps/tcp4.pcap
#   scripts/check-gro.sh caps/tcp4.pcap --gro-flush-us 200 --max-frags 8
#
# Without `--`, grorx gets the EAL arguments `-- --no-huge -m 512` (no
# hugepages needed). --max-frags / --gro-max-size are passed on to grocheck.
# GRORX=path picks the binary (default target/release/grorx, built if missing).
# The output capture and logs go to a temporary directory, removed at the end
# unless a check failed or CHECK_GRO_KEEP=1. Exit 0 only when every check holds.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tests/tools
PROG=check-gro
die() { echo "$PROG: $*" >&2; exit 2; }

[ $# -ge 1 ] && [ "$1" != -h ] && [ "$1" != --help ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
IN=$1; shift
[ -f "$IN" ] || die "$IN: no such file"
IN=$(cd "$(dirname "$IN")" && pwd)/$(basename "$IN")
case $IN in *,*) die "$IN: a comma in the path would end the pcap devargs" ;; esac
command -v python3 >/dev/null || die "python3 not found"
command -v tshark >/dev/null || die "tshark not found (apt-get install tshark; scripts/captures/make-captures.sh installs it)"

GRORX=${GRORX:-$ROOT/target/release/grorx}
if [ ! -x "$GRORX" ]; then
    echo "$PROG: $GRORX missing: cargo build --release -p grorx-cli" >&2
    (cd "$ROOT" && cargo build --release -p grorx-cli) || die "build failed"
fi

# grorx's arguments; the GRO limits grocheck must hold the output to.
ARGS=("$@") CHECK_ARGS=() HAVE_EAL=0
for ((i = 0; i < ${#ARGS[@]}; i++)); do
    a=${ARGS[i]}
    case $a in
        --) HAVE_EAL=1; break ;;
        --max-frags) CHECK_ARGS+=(--max-frags "${ARGS[i + 1]:-}") ;;
        --max-frags=*) CHECK_ARGS+=(--max-frags "${a#*=}") ;;
        --gro-max-size) CHECK_ARGS+=(--max-size "${ARGS[i + 1]:-}") ;;
        --gro-max-size=*) CHECK_ARGS+=(--max-size "${a#*=}") ;;
    esac
done
[ $HAVE_EAL = 1 ] || ARGS+=(-- --no-huge -m 512)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/check-gro.XXXXXX")
OUT=$WORK/out.pcap
FAIL=0
finish() {
    local rc=$?
    if [ $FAIL != 0 ] || [ $rc -gt 1 ] || [ -n "${CHECK_GRO_KEEP:-}" ]; then
        echo "$PROG: kept $WORK (out.pcap, report.json, grorx.log)"
    else
        rm -rf "$WORK"
    fi
}
trap finish EXIT

echo "== grorx sink on $(basename "$IN") ${*:-(default GRO settings: flush per poll)}"
if ! "$GRORX" sink --port "net_pcap0,rx_pcap=$IN" --capture "$OUT" --json -q "${ARGS[@]}" \
        >"$WORK/report.json" 2>"$WORK/grorx.log"; then
    tail -20 "$WORK/grorx.log" >&2
    FAIL=1
    die "grorx failed"
fi
python3 - "$WORK/report.json" <<'EOF' || FAIL=1
import json, sys
r = json.load(open(sys.argv[1]))
g = r.get("gro", {})
nz = lambda d: " ".join(f"{k}={v}" for k, v in sorted(d.items()) if v) or "-"
print(f"rx_packets={r.get('rx_packets')} segments_in={g.get('segments_in')} "
      f"packets_out={g.get('packets_out')} avg_segments={g.get('avg_segments_per_packet', 0):.2f} "
      f"max_segments={g.get('max_segments_per_packet')} mbufs_leaked={r.get('mbufs_leaked')} "
      f"captured={r.get('capture', {}).get('packets')}")
print("flush reasons:", nz(g.get("flush_reasons", {})))
print("passthrough:  ", nz(g.get("passthrough", {})))
sys.exit(0 if r.get("mbufs_leaked") == 0 else 1)
EOF

echo "== grocheck --strict-order ${CHECK_ARGS[*]}"
set +e
G=$(python3 "$TOOLS/grocheck.py" --strict-order "${CHECK_ARGS[@]}" "$IN" "$OUT"); GRC=$?
set -e
printf '%s\n' "$G" | grep -v '^flows=' || true
FIG=$(printf '%s\n' "$G" | tail -1)
echo "$FIG"
[ $GRC = 0 ] || FAIL=1

echo "== tshark (IPv4 and TCP checksums validated)"
python3 "$TOOLS/tshark_check.py" "$IN" "$OUT" || FAIL=1

JUNK=${IN%.pcap}.txt
if [ -f "$JUNK" ] && grep -q '^inserted frames' "$JUNK"; then
    echo "== junk frames listed in $(basename "$JUNK")"
    python3 "$TOOLS/junkcheck.py" "$IN" "$OUT" "$JUNK" || FAIL=1
fi

q=$(printf '%s\n' "$FIG" | sed -n 's/.*merge_quality=\([^ ]*\).*/\1/p')
p=$(printf '%s\n' "$FIG" | sed -n 's/.*problems=\([^ ]*\).*/\1/p')
echo "== $(basename "$IN"): merge_quality=${q:-?} grocheck_problems=${p:-?} $([ $FAIL = 0 ] && echo OK || echo FAILED)"
exit $FAIL
