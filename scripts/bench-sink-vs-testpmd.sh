#!/usr/bin/env bash
# grorx sink vs dpdk-testpmd --forward-mode=rxonly on the same vdev and core,
# interleaved (testpmd, grorx, testpmd, grorx, ...) so drift on a noisy
# machine hits both alike. Each run's rate is the median of its per-second
# rates (the first second, ramp-up, is dropped). Prints both medians and the
# ratio grorx / testpmd. grorx runs with `--gro off` (the sink itself, what
# rxonly does) unless GRO=on (net_null's frames are not IP: GRO passes them).
#
# usage: [GRO=off|on] scripts/bench-sink-vs-testpmd.sh [ROUNDS] [SECS] [VDEV]
#   defaults: 5 rounds, 6 s each, net_null0
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
ROUNDS=${1:-5}
SECS=${2:-6}
VDEV=${3:-net_null0}
GRO=${GRO:-off}
HERE=$(cd "$(dirname "$0")/.." && pwd)
GRORX=${GRORX:-$HERE/target/release/grorx}
[ -x "$GRORX" ] || { echo "build first: cargo build --release" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing: apt-get install -y dpdk-dev" >&2; exit 1; }
# Both need hugepages for a fair comparison (and testpmd's pool).
"$GRORX" hugepages --setup 1G >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

run_testpmd() {
    timeout -s INT "$((SECS + 1))" dpdk-testpmd -l 0,1 --no-pci --vdev "$VDEV" --file-prefix "tpb$$" --huge-unlink \
        --log-level=lib.eal:warning -- --forward-mode=rxonly --auto-start --stats-period=1 \
        --total-num-mbufs=8191 2>/dev/null | tr -d '\033' | awk '/Rx-pps:/ {print $2}' | tail -n +3 | median || true
}

run_grorx() {
    "$GRORX" sink --port "$VDEV" --gro "$GRO" --duration "$SECS" -- -l 0,1 2>&1 >/dev/null |
        awk '/^\[ *[0-9.]+s\] rx/ { for (i = 1; i < NF; i++) if ($i == "rx") { v = $(i+1); u = $(i+2) }
              if (u == "Mpps") v *= 1e6; else if (u == "kpps") v *= 1e3; print v }' |
        tail -n +2 | median || true
}

printf "%-6s %14s %14s %8s\n" round testpmd_pps grorx_pps ratio
T=(); G=(); R=()
for r in $(seq 1 "$ROUNDS"); do
    # Alternate who goes first, so an order effect shows up as noise, not bias.
    if [ $((r % 2)) -eq 1 ]; then t=$(run_testpmd); g=$(run_grorx); else g=$(run_grorx); t=$(run_testpmd); fi
    ratio=$(echo "$g $t" | awk '{print ($2>0)?$1/$2:0}')
    T+=("$t"); G+=("$g"); R+=("$ratio")
    printf "%-6s %14.0f %14.0f %8.3f\n" "$r" "$t" "$g" "$ratio"
done
tm=$(printf "%s\n" "${T[@]}" | median); gm=$(printf "%s\n" "${G[@]}" | median)
printf "%-6s %14.0f %14.0f %8.3f   (ratio of medians)\n" median "$tm" "$gm" "$(echo "$gm $tm" | awk '{print ($2>0)?$1/$2:0}')"
printf "median of per-round ratios (adjacent runs): %.3f\n" "$(printf "%s\n" "${R[@]}" | median)"
echo "grorx sink --gro $GRO; source $VDEV, worker on lcore 1 (cpu 1) for both, burst 32, $SECS s runs, $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
