#!/usr/bin/env bash
# Fuzzes grorx's GRO (engine/fuzz) for a bounded time, target by target:
#
#   scripts/fuzz.sh [SECONDS]        # default 60, for each target
#
# Targets: `gro` (the GRO core alone, no DPDK needed), `udp` (its UDP GRO,
# alone), `tunnel` (through VXLAN and Geneve, alone), `csum` (checksum
# fields alone damaged in valid streams, verifying and trusting, alone) and,
# when pkg-config finds libdpdk, `mbuf` (GRO on real mbufs under a 4
# KiB-page EAL, then the forward stage's software GSO; cargo feature
# `mbuf`).
#
# Stable Rust only is needed: cargo-fuzz's nightly flags (-Zsanitizer,
# sancov passes) are accepted by stable rustc under RUSTC_BOOTSTRAP=1, and
# the stable toolchain ships the sanitizer runtimes. cargo-fuzz is installed
# from crates.io if missing.
#
# Environment:
#   FUZZ_TARGETS    targets to run, space-separated (default: gro, udp,
#                   tunnel, csum, and mbuf when libdpdk is there)
#   FUZZ_SANITIZER  none (default: several times the executions per second;
#                   Rust's own checks and debug assertions stay on) or
#                   address (ASan; DPDK's own memory, the mbufs, is not
#                   instrumented)
#   FUZZ_JOBS       parallel fuzzing processes per target (default 1; the
#                   machine has 2 cores)
#   GRORX_FUZZ_ALLOW  known findings to tolerate, comma-separated (see
#                   engine/fuzz/src/lib.rs), e.g. head-buffer
#   CARGO_TARGET_DIR  where cargo builds (default engine/fuzz/target)
#
# New inputs are found in a scratch corpus seeded from engine/fuzz/corpus/T/,
# then everything is minimized back into engine/fuzz/corpus/T/ with
# `cargo fuzz cmin` (then a set-cover merge if that is still large), so the
# kept corpus stays small. A crash exits non-zero and prints where its input
# is (engine/fuzz/artifacts/T/), minimized when possible, and how to replay it.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
cd "$HERE/engine"

SECS=${1:-60}
[[ $SECS =~ ^[1-9][0-9]*$ ]] || { echo "$(basename "$0"): SECS must be a whole number of seconds (got '$SECS'); --help says more" >&2; exit 2; }
SAN=${FUZZ_SANITIZER:-none}
JOBS=${FUZZ_JOBS:-1}
FDIR=fuzz
# Corpus limits: files and bytes (a set-cover merge trims past these).
MAX_FILES=${FUZZ_MAX_FILES:-60}
MAX_BYTES=${FUZZ_MAX_BYTES:-100000}
if [ -n "${FUZZ_TARGETS:-}" ]; then
    TARGETS=$FUZZ_TARGETS
elif pkg-config --exists libdpdk 2>/dev/null; then
    TARGETS="gro udp tunnel csum mbuf"
else
    TARGETS="gro udp tunnel csum"
    echo "fuzz.sh: no libdpdk (pkg-config): fuzzing the gro, udp, tunnel and csum targets only"
fi
TDIR=${CARGO_TARGET_DIR:-$HERE/engine/$FDIR/target}
mkdir -p "$TDIR"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz (crates.io)"
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1
# Scratch directories and stamps, removed however the script ends.
CLEAN=""
trap 'rm -rf $CLEAN' EXIT

# fuzz_one TARGET: build, fuzz, minimize the corpus; 1 on a crash.
fuzz_one() {
    local target=$1
    local corpus=$FDIR/corpus/$target arts=$FDIR/artifacts/$target
    local bin=$TDIR/x86_64-unknown-linux-gnu/release/$target
    local log=$TDIR/fuzz-$target.log
    local args=(--fuzz-dir "$FDIR" --sanitizer "$SAN")
    if [ "$target" = mbuf ]; then
        args+=(--features mbuf)
    fi

    echo "fuzz.sh: building $target (sanitizer $SAN)"
    # (set -e does not reach into a function called from `||`: checked here.)
    cargo fuzz build "${args[@]}" "$target" || return 2

    mkdir -p "$corpus" "$arts"
    local scratch stamp before rc
    scratch=$(mktemp -d "$FDIR/corpus/$target.tmp.XXXXXX")
    stamp=$(mktemp)
    CLEAN="$CLEAN $scratch $stamp"
    before=$(find "$corpus" -type f | wc -l)

    echo "fuzz.sh: fuzzing $target for ${SECS}s ($JOBS job(s)), seeds: $before files in $corpus"
    set +e
    # -max_total_time bounds each job; the outer timeout is a safety net.
    timeout --signal=INT $((SECS + 120)) \
        cargo fuzz run "${args[@]}" --jobs "$JOBS" "$target" "$scratch" "$corpus" -- \
        -max_total_time="$SECS" -max_len=4096 -timeout=10 -print_final_stats=1 2>&1 | tee "$log" |
        grep -E --line-buffered '(DONE|pulse|ERROR|panicked|invariant|Test unit written|exec_per_sec|number_of_executed)'
    rc=${PIPESTATUS[0]}
    set -e

    # Keep what was found, minimized (even after a crash: the coverage is real).
    cp -n "$scratch"/* "$corpus"/ 2>/dev/null || true
    rm -rf "$scratch"
    echo "fuzz.sh: minimizing the $target corpus (cargo fuzz cmin)"
    cargo fuzz cmin "${args[@]}" "$target" "$corpus" >"$TDIR/cmin-$target.log" 2>&1 ||
        echo "fuzz.sh: cmin failed (see $TDIR/cmin-$target.log); corpus left as is"
    local files bytes
    files=$(find "$corpus" -type f | wc -l)
    bytes=$(du -sb "$corpus" | cut -f1)
    if [ "$files" -gt "$MAX_FILES" ] || [ "$bytes" -gt "$MAX_BYTES" ]; then
        # cmin keeps every input that adds a coverage feature, edge hit-count
        # buckets included: hundreds of files. A greedy set cover over edges
        # alone (-use_counters=0) keeps every edge in a few dozen.
        echo "fuzz.sh: $files files / $bytes bytes after cmin; set-cover merge over edges"
        local small
        small=$(mktemp -d "$FDIR/corpus/$target.tmp.XXXXXX")
        CLEAN="$CLEAN $small"
        "$bin" -set_cover_merge=1 -use_counters=0 -max_len=4096 "$small" "$corpus" \
            >"$TDIR/merge-$target.log" 2>&1 || true
        if [ -n "$(ls -A "$small")" ]; then
            rm -rf "$corpus" && mv "$small" "$corpus"
        else
            rm -rf "$small"
        fi
    fi
    echo "fuzz.sh: corpus engine/$corpus: $(find "$corpus" -type f | wc -l) files, $(du -sb "$corpus" | cut -f1) bytes (was $before files)"

    if [ "$rc" -ne 0 ]; then
        local crash
        crash=$(find "$arts" -type f -newer "$stamp" \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | head -n1)
        if [ -z "$crash" ]; then
            echo "fuzz.sh: the $target fuzzer failed (exit $rc) without an artifact: see $log" >&2
            rm -f "$stamp"
            return "$rc"
        fi
        echo "fuzz.sh: CRASH in $target (exit $rc): input saved as engine/$crash" >&2
        grep -m1 -A2 'invariant violated\|panicked' "$log" >&2 || true
        echo "fuzz.sh: minimizing it (bounded)" >&2
        if timeout 300 cargo fuzz tmin "${args[@]}" -r 5000 "$target" "$crash" >"$TDIR/tmin-$target.log" 2>&1; then
            local min
            min=$(grep -o "$arts/minimized-from-[0-9a-f]*" "$TDIR/tmin-$target.log" | tail -n1)
            if [ -n "$min" ]; then
                # tmin leaves each intermediate step: keep only the last.
                find "$arts" -type f -name 'minimized-from-*' -newer "$stamp" ! -path "$min" -delete
                echo "fuzz.sh: minimized input: engine/$min" >&2
            fi
        fi
        rm -f "$stamp"
        local replay=(cargo run --release --example replay -- -v)
        if [ "$target" = mbuf ]; then
            replay=(cargo run --release --features mbuf --example replay -- --mbuf -v)
        fi
        echo "fuzz.sh: replay: (cd engine/fuzz && ${replay[*]} ${crash#"$FDIR"/})" >&2
        echo "fuzz.sh:     or: (cd engine && RUSTC_BOOTSTRAP=1 cargo fuzz run ${args[*]} $target $crash)" >&2
        return 1
    fi
    rm -f "$stamp"
    echo "fuzz.sh: $target: no crash"
}

failed=""
for t in $TARGETS; do
    fuzz_one "$t" || failed="$failed $t"
done
if [ -n "$failed" ]; then
    echo "fuzz.sh: crashed:$failed" >&2
    exit 1
fi
echo "fuzz.sh: no crash ($TARGETS)"
