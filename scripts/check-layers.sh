#!/usr/bin/env bash
# The crates' layers, checked on their dependency trees (normal dependencies):
# grorx-gro (the GRO core) has no DPDK in it; grorx (the engine library) has
# no command-line, config-file, charting or metrics-serving crates; the
# experiment harness (grorx-bench) builds on grorx and grorx-gro, is built on
# by the command only, and has no command-line crate; the command
# (grorx-cli) does not depend on dpdk-sys itself. Inside
# grorx, its folders' layers (scripts/check-modules.py): no import circle
# between them, none up a layer, dpdk-sys only under dpdk/ and where listed.
# The libraries speak their own words (scripts/check-flag-words.py): at most
# 10 of their strings name a flag of the command's.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
fail=0
deps() { cargo tree -q -p "$1" -e normal --prefix none --format '{p}' | cut -d' ' -f1 | sort -u; }
check() {
    local crate=$1; shift
    local tree; tree=$(deps "$crate")
    for bad in "$@"; do
        if grep -qx "$bad" <<<"$tree"; then
            echo "check-layers: $crate depends on $bad:" >&2
            cargo tree -q -p "$crate" -e normal -i "$bad" >&2
            fail=1
        fi
    done
}
check grorx-gro dpdk-sys hugepages
check grorx clap toml plotters dejavu prometheus-client tiny_http
check grorx-bench clap grorx-cli
# The harness is the command's: no other crate of the workspace builds on it.
users=$(cargo tree -q -i grorx-bench -e normal --depth 1 --prefix none --format '{p}' --workspace \
    | cut -d' ' -f1 | sort -u | grep -vx -e grorx-bench -e grorx-cli || true)
if [ -n "$users" ]; then
    echo "check-layers: grorx-bench is the command's harness; these depend on it:" $users >&2
    fail=1
fi
# The command reaches DPDK only through the engine library.
if cargo tree -q -p grorx-cli -e normal --depth 1 --prefix none --format '{p}' | cut -d' ' -f1 | grep -qx dpdk-sys; then
    echo "check-layers: grorx-cli depends on dpdk-sys itself: reach DPDK through grorx" >&2
    fail=1
fi
python3 scripts/check-modules.py || fail=1
python3 scripts/check-flag-words.py || fail=1
[ "$fail" -eq 0 ] && echo "check-layers: grorx-gro has no DPDK; grorx has no CLI crates; grorx-bench sits under the CLI only; the CLI reaches DPDK through grorx; the libraries name settings, not flags"
exit "$fail"
