#!/usr/bin/env bash
# Instructions a segment in the GRO core's `held` cases (flows round-robin,
# 64 B segments held across bursts of 32, trusting checksums), counted by
# callgrind: one flow against 1024, new to the table and known to it. A
# count is the same from run to run whatever else the machine does, so it
# tells a change to the lookup path apart from this VM's noise; the time a
# segment takes also waits on memory, which the held bench measures
# (cargo bench -p grorx-gro --features traffic --bench held).
#
#   scripts/held-instructions.sh
#
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
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
for case in 0 1 2 3; do
    name=$(GRORX_HELD_CASE=$case valgrind --tool=callgrind --toggle-collect='*held::counted*' \
        --callgrind-out-file="$OUT/cg.$case" "$BIN" 2>/dev/null | sed 's/:.*//')
    total=$(sed -n 's/^summary: //p' "$OUT/cg.$case")
    PER[$case]=$(python3 -c "print(round($total / $SEGMENTS, 1))")
    printf '%-18s %8s instructions a segment\n' "$name" "${PER[$case]}"
done
python3 -c "print('1024 flows x one flow: new %.2f, known %.2f' % (${PER[1]} / ${PER[0]}, ${PER[3]} / ${PER[2]}))"
