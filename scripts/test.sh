#!/usr/bin/env bash
# The test suite: installs what is missing, checks formatting, lints and the
# crates' layers, builds the docs, runs every test (unit, property, doc, the
# examples, and integration tests that start a real EAL on 4 KiB pages with
# virtual devices: no NIC and no hugepages needed).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
cd "$HERE"
# prometheus: the metrics test scrapes a running grorx with a real server
# (about 22 MB to fetch; left out of the quick start's setup).
# ethtool, iproute2: the live tests put grorx between two network namespaces.
scripts/setup.sh prometheus ethtool iproute2
# kubernetes-validate (PyPI): the deploy test holds the manifests to
# Kubernetes' own schemas, offline.
python3 -m pip --version >/dev/null 2>&1 || scripts/setup.sh python3-pip
pip_install() { python3 -m pip install --quiet --disable-pip-version-check "$@"; }
pip_install kubernetes-validate==1.37.0 2>/dev/null \
    || pip_install --break-system-packages kubernetes-validate==1.37.0
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The engine library alone, without the features the command turns on.
cargo clippy -p grorx --quiet -- -D warnings
# The libraries' documentation builds without a warning (every public item
# documented, every link resolving); its examples run with the tests.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet -p grorx -p grorx-gro
# The harness's documentation: it builds and its links resolve.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet -p grorx-bench
# The layers hold: the GRO core builds without DPDK (its tree has neither
# dpdk-sys nor hugepages, and its tests run with libdpdk and libclang out of
# sight); the engine library pulls in no CLI crates.
scripts/check-layers.sh
# Every function reads in one screen: the engine library's within 100
# lines, the GRO core's within 80.
python3 scripts/check-fn-length.py --max 100 engine/grorx/src
python3 scripts/check-fn-length.py --max 80 engine/gro/src
PKG_CONFIG_LIBDIR=/nonexistent LIBCLANG_PATH=/nonexistent cargo test -p grorx-gro "$@"
cargo test --workspace --exclude grorx-gro "$@"
# The fuzz crate (outside the workspace): every target's corpus and findings
# replayed and seeded random smoke runs, with the harness's invariants (every
# buffer back, the held limit, valid output; for real mbufs, every pool back
# to zero in use).
(cd engine/fuzz && cargo test --quiet --features mbuf)
# A short soak (docs/performance.md has the 10-minute one): sink and
# forward, steady rate, no memory growth, no mbuf leaked. On the binary the
# tests above built (debug assertions on; its rate is judged against its own
# median), not a release build of its own.
GRORX="$HERE/target/debug/grorx" scripts/soak.sh 15
# The container image, where podman and mmdebstrap are installed (a few
# minutes; docs/deploy.md): built from this checkout, run, 0 leaked.
if command -v podman >/dev/null && command -v mmdebstrap >/dev/null; then
    scripts/container-check.sh
fi
