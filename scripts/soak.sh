#!/usr/bin/env bash
# Soak: runs the sink (embedded generator) and the forward stage (net_null0
# to net_null1) for SECS seconds each, and checks what a run of weeks needs:
# a steady rate, no memory growth, no mbuf leaked.
#
#   scripts/soak.sh [SECS]      # default 300 per mode (10 minutes in all)
#
# Per mode it records Mpps per second (--json-interval 1) and the process's
# resident memory (VmRSS, once a second), then fails when:
#   - the report's mbufs_leaked (or mbufs_freed_twice) is not 0, or grorx
#     does not exit 0;
#   - resident memory grew by more than 4 MiB from the end of the first
#     quarter of the run to its end (pools and EAL are mapped by then);
#   - an interval after the first quarter ran below a tenth of the median
#     rate (a stall: on a shared VM, rates move by tens of percent, not 10x).
# It prints one line per mode: median and lowest Mpps, RSS at the quarter and
# at the end, leaked mbufs. GRORX=path picks the binary.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
SECS=${1:-300}
[[ $SECS =~ ^[1-9][0-9]*$ ]] || { echo "$(basename "$0"): SECS must be a whole number of seconds (got '$SECS'); --help says more" >&2; exit 2; }
GRORX=${GRORX:-$HERE/target/release/grorx}
[ -x "$GRORX" ] || cargo build --release --quiet --manifest-path "$HERE/Cargo.toml" -p grorx-cli
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONDONTWRITEBYTECODE=1

fail=0
for mode in sink forward; do
    case $mode in
        sink) args=(sink) ;;
        forward) args=(forward --port net_null0 --to net_null1) ;;
    esac
    out=$WORK/$mode.ndjson rss=$WORK/$mode.rss
    "$GRORX" "${args[@]}" --duration "$SECS" --json-interval 1 --json -q \
        --name "soak-$$-$mode" >"$out" 2>"$WORK/$mode.err" &
    pid=$!
    : >"$rss"
    while kill -0 "$pid" 2>/dev/null; do
        awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null >>"$rss" || true
        sleep 1
    done
    status=0
    wait "$pid" || status=$?
    if ! python3 - "$mode" "$out" "$rss" "$status" "$WORK/$mode.err" <<'EOF'
import json, statistics, sys
mode, out, rss_path, status, err = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
lines = [json.loads(l) for l in open(out) if l.strip()]
intervals = [l for l in lines if l.get("type") == "interval"]
reports = [l for l in lines if l.get("type") == "report"]
rss = [int(x) for x in open(rss_path).read().split() if x.isdigit()]
problems = []
if status != 0 or not reports:
    problems.append(f"exit {status}, {len(reports)} report(s): {open(err).read().strip()[-300:]}")
r = reports[-1] if reports else {}
leaked, twice = r.get("mbufs_leaked", -1), r.get("mbufs_freed_twice", 0)
if leaked != 0 or twice:
    problems.append(f"{leaked} mbufs leaked, {twice} freed twice")
q = len(intervals) // 4
steady = [i["rx_pps"] / 1e6 for i in intervals[q:]]
if len(steady) < 3:
    problems.append(f"only {len(intervals)} intervals")
    med = low = 0.0
else:
    med, low = statistics.median(steady), min(steady)
    if low < med / 10:
        problems.append(f"a stall: {low:.2f} Mpps against a median of {med:.2f}")
rq = rss[len(rss) // 4] if rss else 0
rend = rss[-1] if rss else 0
if rend - rq > 4096:
    problems.append(f"resident memory grew {rend - rq} KiB")
print(f"soak {mode}: {len(intervals)} s, median {med:.2f} Mpps, lowest {low:.2f} Mpps; "
      f"RSS {rq // 1024} MiB at a quarter, {rend // 1024} MiB at the end; leaked {leaked}"
      + ("" if not problems else "; FAILED: " + "; ".join(problems)))
sys.exit(1 if problems else 0)
EOF
    then
        fail=1
    fi
done
exit "$fail"
