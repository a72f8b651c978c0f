#!/usr/bin/env bash
# Instructions a segment in the GRO core's `held` cases (flows round-robin,
# 64 B segments held across bursts of 32, trusting checksums), counted by
# callgrind: one flow and two against 1024, new to the table and known to it. A
# count is the same from run to run whatever else the machine does, so it
# tells a change to the lookup path apart from this VM's noise; the time a
# segment takes also waits on memory, which the held bench measures
# (cargo bench -p grorx-gro --features traffic --bench held).
#
#   scripts/held-instructions.sh           # instructions a segment
#   scripts/held-instructions.sh --cache   # and the L1 and L2 misses a segment
#
# With --cache, callgrind also simulates this machine's L1 data cache and
# its L2 (as its last level, the sizes read from getconf): how many lines a
# segment misses in each, the same from run to run, where the held bench's
# times tell how long the misses were waited for. Needs valgrind
# (apt-get install valgrind).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
CACHE=()
case "${1:-}" in
"") ;;
--cache)
    # A cache: SIZE,WAYS,LINE (callgrind wants sets a power of two).
    geom() {
        local size ways line
        size=$(getconf "$1_SIZE") ways=$(getconf "$1_ASSOC") line=$(getconf "$1_LINESIZE")
        [ -n "$size" ] && [ -n "$ways" ] && [ -n "$line" ] && [ "$size" -gt 0 ] || {
            echo "held-instructions.sh: getconf does not know this machine's $1 (size, ways, line)" >&2
            exit 1
        }
        echo "$size,$ways,$line"
    }
    D1=$(geom LEVEL1_DCACHE)
    L2=$(geom LEVEL2_CACHE)
    CACHE=(--cache-sim=yes "--D1=$D1" "--LL=$L2")
    ;;
*)
    echo "usage: held-instructions.sh [--cache]" >&2
    exit 2
    ;;
esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
cd "$HERE"
command -v valgrind >/dev/null || {
    echo "held-instructions.sh: valgrind is missing: apt-get install valgrind" >&2
    exit 1
}
# The bench binary cargo builds (its path carries a hash: ask cargo for it).
BIN=$(cargo bench -p grorx-gro --features traffic --bench held --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="held" and m.get("executable"):
        print(m["executable"])')
[ -x "$BIN" ] || { echo "held-instructions.sh: could not build the held bench" >&2; exit 1; }
SEGMENTS=16384
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
declare -A PER
for case in 0 1 2 3 4 5; do
    name=$(GRORX_HELD_CASE=$case valgrind --tool=callgrind "${CACHE[@]}" \
        --toggle-collect='*held::counted*' \
        --callgrind-out-file="$OUT/cg.$case" "$BIN" 2>/dev/null | sed 's/:.*//')
    # The events line names the summary's columns (Ir first; with the
    # cache simulated, the misses: D1mr, D1mw, DLmr, DLmw, ...).
    read -r ir misses < <(python3 - "$OUT/cg.$case" "$SEGMENTS" <<'PY'
import sys
ev = s = None
for l in open(sys.argv[1]):
    if l.startswith("events:"):
        ev = l.split()[1:]
    elif l.startswith("summary:"):
        s = [int(x) for x in l.split()[1:]]
d, n = dict(zip(ev, s)), int(sys.argv[2])
m = ""
if "D1mr" in d:
    m = "L1 misses %.2f (of them L2 misses %.2f)" % (
        (d["D1mr"] + d["D1mw"]) / n, (d["DLmr"] + d["DLmw"]) / n)
print(round(d["Ir"] / n, 1), m)
PY
    )
    PER[$case]=$ir
    printf '%-18s %8s instructions a segment  %s\n' "$name" "$ir" "$misses"
done
# Cases: 1 flow new, known; 2 flows new, known; 1024 flows new, known.
python3 -c "print('1024 flows x one flow: new %.2f, known %.2f; x two flows: new %.2f, known %.2f' % (
    ${PER[4]} / ${PER[0]}, ${PER[5]} / ${PER[1]}, ${PER[4]} / ${PER[2]}, ${PER[5]} / ${PER[3]}))"
