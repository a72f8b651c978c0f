#!/usr/bin/env bash
# Fuzzes the GRO core (engine/fuzz, target `gro`) for a bounded time:
#
#   scripts/fuzz.sh [SECONDS]        # default 60
#
# Stable Rust only is needed: cargo-fuzz's nightly flags (-Zsanitizer,
# sancov passes) are accepted by stable rustc under RUSTC_BOOTSTRAP=1, and
# the stable toolchain ships the sanitizer runtimes. cargo-fuzz is installed
# from crates.io if missing.
#
# Environment:
#   FUZZ_SANITIZER  none (default: about 6x the executions per second; Rust's
#                   own checks and debug assertions stay on) or address (ASan)
#   FUZZ_JOBS       parallel fuzzing processes (default 1; the machine has 2 cores)
#   GRORX_FUZZ_ALLOW  known findings to tolerate, comma-separated (see
#                   engine/fuzz/src/lib.rs), e.g. head-buffer
#
# New inputs are found in a scratch corpus seeded from engine/fuzz/corpus/gro/,
# then everything is minimized back into engine/fuzz/corpus/gro/ with
# `cargo fuzz cmin` (then a set-cover merge if that is still large), so the
# kept corpus stays small. A crash exits non-zero and prints where its input is
# (engine/fuzz/artifacts/gro/), minimized when possible, and how to replay it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
cd "$HERE/engine"

SECS=${1:-60}
SAN=${FUZZ_SANITIZER:-none}
JOBS=${FUZZ_JOBS:-1}
TARGET=gro
FDIR=fuzz
CORPUS=$FDIR/corpus/$TARGET
ARTS=$FDIR/artifacts/$TARGET
# Corpus limits: files and bytes (a set-cover merge trims past these).
MAX_FILES=${FUZZ_MAX_FILES:-60}
MAX_BYTES=${FUZZ_MAX_BYTES:-100000}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz (crates.io)"
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1
ARGS=(--fuzz-dir "$FDIR" --sanitizer "$SAN")
BIN=$FDIR/target/x86_64-unknown-linux-gnu/release/$TARGET

echo "fuzz.sh: building $TARGET (sanitizer $SAN)"
cargo fuzz build "${ARGS[@]}" "$TARGET"

mkdir -p "$CORPUS" "$ARTS"
SCRATCH=$(mktemp -d "$FDIR/corpus/$TARGET.tmp.XXXXXX")
STAMP=$(mktemp)
trap 'rm -rf "$SCRATCH" "$STAMP"' EXIT
before=$(find "$CORPUS" -type f | wc -l)

echo "fuzz.sh: fuzzing $TARGET for ${SECS}s ($JOBS job(s)), seeds: $before files in $CORPUS"
set +e
# -max_total_time bounds each job; the outer timeout is a safety net.
timeout --signal=INT $((SECS + 120)) \
    cargo fuzz run "${ARGS[@]}" --jobs "$JOBS" "$TARGET" "$SCRATCH" "$CORPUS" -- \
    -max_total_time="$SECS" -max_len=4096 -timeout=10 -print_final_stats=1 2>&1 | tee "$FDIR/target/fuzz-$TARGET.log" |
    grep -E --line-buffered '(DONE|pulse|ERROR|panicked|invariant|Test unit written|exec_per_sec|number_of_executed)'
rc=${PIPESTATUS[0]}
set -e

# Keep what was found, minimized (even after a crash: the coverage is real).
cp -n "$SCRATCH"/* "$CORPUS"/ 2>/dev/null || true
echo "fuzz.sh: minimizing the corpus (cargo fuzz cmin)"
cargo fuzz cmin "${ARGS[@]}" "$TARGET" "$CORPUS" >"$FDIR/target/cmin-$TARGET.log" 2>&1 ||
    echo "fuzz.sh: cmin failed (see $FDIR/target/cmin-$TARGET.log); corpus left as is"
files=$(find "$CORPUS" -type f | wc -l)
bytes=$(du -sb "$CORPUS" | cut -f1)
if [ "$files" -gt "$MAX_FILES" ] || [ "$bytes" -gt "$MAX_BYTES" ]; then
    # cmin keeps every input that adds a coverage feature, edge hit-count
    # buckets included: hundreds of files. A greedy set cover over edges alone
    # (-use_counters=0) keeps every edge in a few dozen.
    echo "fuzz.sh: $files files / $bytes bytes after cmin; set-cover merge over edges"
    SMALL=$(mktemp -d "$FDIR/corpus/$TARGET.tmp.XXXXXX")
    "$BIN" -set_cover_merge=1 -use_counters=0 -max_len=4096 "$SMALL" "$CORPUS" \
        >"$FDIR/target/merge-$TARGET.log" 2>&1 || true
    if [ -n "$(ls -A "$SMALL")" ]; then
        rm -rf "$CORPUS" && mv "$SMALL" "$CORPUS"
    else
        rm -rf "$SMALL"
    fi
fi
echo "fuzz.sh: corpus engine/$CORPUS: $(find "$CORPUS" -type f | wc -l) files, $(du -sb "$CORPUS" | cut -f1) bytes (was $before files)"

if [ "$rc" -ne 0 ]; then
    crash=$(find "$ARTS" -type f -newer "$STAMP" \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | head -n1)
    if [ -z "$crash" ]; then
        echo "fuzz.sh: the fuzzer failed (exit $rc) without an artifact: see $FDIR/target/fuzz-$TARGET.log" >&2
        exit "$rc"
    fi
    echo "fuzz.sh: CRASH (exit $rc): input saved as engine/$crash" >&2
    grep -m1 -A2 'invariant violated\|panicked' "$FDIR/target/fuzz-$TARGET.log" >&2 || true
    echo "fuzz.sh: minimizing it (bounded)" >&2
    if timeout 300 cargo fuzz tmin "${ARGS[@]}" -r 5000 "$TARGET" "$crash" >"$FDIR/target/tmin-$TARGET.log" 2>&1; then
        min=$(grep -o "$ARTS/minimized-from-[0-9a-f]*" "$FDIR/target/tmin-$TARGET.log" | tail -n1)
        if [ -n "$min" ]; then
            # tmin leaves each intermediate step: keep only the last.
            find "$ARTS" -type f -name 'minimized-from-*' -newer "$STAMP" ! -path "$min" -delete
            echo "fuzz.sh: minimized input: engine/$min" >&2
        fi
    fi
    rm -f "$STAMP"
    echo "fuzz.sh: replay: (cd engine/fuzz && cargo run --release --example replay -- -v ${crash#"$FDIR"/})" >&2
    echo "fuzz.sh:     or: (cd engine && RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz -s $SAN $TARGET $crash)" >&2
    exit 1
fi
rm -f "$STAMP"
echo "fuzz.sh: no crash"
