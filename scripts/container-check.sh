#!/usr/bin/env bash
# Builds deploy/Containerfile with podman and runs the image's grorx on the
# embedded default, on a machine without a container registry: both base
# images are made with mmdebstrap from the Debian mirror apt uses, the build
# stage gets this machine's Rust toolchain, and cargo builds offline from
# this machine's crate cache. Fails when the build fails, the runtime image
# is 150 MB or more, or `grorx sink --duration 2` does not exit 0 with 0
# mbufs leaked. Takes a few minutes; as root.
#
#   scripts/container-check.sh [--keep]     # --keep: leave the images
#
# The image's grorx runs with `podman run` where the host allows it, else
# (a sandbox that refuses a container's setrlimit) from the image's root
# file system through `podman mount` and chroot, as user 10001.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
KEEP=${1:-}
command -v podman >/dev/null && command -v mmdebstrap >/dev/null || {
    echo "container-check: needs podman and mmdebstrap (apt-get install podman mmdebstrap)" >&2
    exit 2
}
WORK=$(mktemp -d)
MNT=
cleanup() {
    if [ -n "$MNT" ]; then
        for d in dev/pts dev proc sys; do umount "$MNT/$d" 2>/dev/null || true; done
        podman umount grorx-check >/dev/null 2>&1 || true
    fi
    podman rm -f grorx-check >/dev/null 2>&1 || true
    if [ "$KEEP" != --keep ]; then
        podman rmi -f localhost/grorx:check localhost/grorx-builder:check \
            localhost/grorx-base:check >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# The mirror apt uses (deb822 or one-line sources), else Debian's own.
MIRROR=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | awk '{print $2}' | grep -E '/debian/?$' | head -1 || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# Small bases: merged /usr without the usrmerge package (and its perl), no
# manuals, translations or docs but the copyrights.
SLIM=(--variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright')

echo "container-check: runtime base from $MIRROR"
mmdebstrap --quiet "${SLIM[@]}" bookworm "$WORK/base.tar" "$MIRROR"
podman import --quiet "$WORK/base.tar" localhost/grorx-base:check >/dev/null

echo "container-check: build base, with this machine's Rust ($(rustc --version))"
SYSROOT=$(rustc --print sysroot)
mmdebstrap --quiet "${SLIM[@]}" \
    --include=ca-certificates,gcc,libc6-dev,pkg-config,libclang-dev,libdpdk-dev,dpdk-dev \
    --customize-hook="mkdir -p \"\$1/usr/local/rust\" && cp -a $SYSROOT/bin $SYSROOT/lib \"\$1/usr/local/rust/\"" \
    bookworm "$WORK/builder.tar" "$MIRROR"
podman import --quiet \
    --change 'ENV PATH=/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV CARGO_HOME=/usr/local/cargo' \
    "$WORK/builder.tar" localhost/grorx-builder:check >/dev/null

echo "container-check: podman build (crates from this machine's cargo cache, offline)"
CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
(cd "$HERE" && cargo fetch --locked --quiet)
podman build --quiet --isolation chroot -f "$HERE/deploy/Containerfile" \
    --build-arg BASE=localhost/grorx-base:check \
    --build-arg BUILDER=localhost/grorx-builder:check \
    --build-arg CARGO_FLAGS=--offline \
    -v "$CARGO_HOME/registry:/usr/local/cargo/registry:ro" \
    -t localhost/grorx:check "$HERE" >/dev/null

size=$(podman image inspect --format '{{.Size}}' localhost/grorx:check)
echo "container-check: runtime image $((size / 1000000)) MB"
fail=0
if [ "$size" -ge 150000000 ]; then
    echo "container-check: FAILED: the runtime image is 150 MB or more" >&2
    fail=1
fi

out="$WORK/report.json"
if podman run --rm localhost/grorx:check sink --duration 2 --json -q >"$out" 2>"$WORK/err"; then
    how="podman run"
else
    # The sandbox refused to start the container: the image's root file
    # system, run through chroot as the image's user.
    podman create --name grorx-check localhost/grorx:check >/dev/null
    MNT=$(podman mount grorx-check)
    for d in proc sys dev dev/pts; do mount --bind "/$d" "$MNT/$d"; done
    how="chroot into the image (podman run: $(tail -1 "$WORK/err"))"
    chroot --userspec=10001:10001 "$MNT" /usr/local/bin/grorx sink --duration 2 --json -q \
        >"$out" 2>"$WORK/err" || true
fi
if python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r["mbufs_leaked"] != 0 or r["rx_packets"] == 0)' "$out" 2>/dev/null; then
    echo "container-check: grorx sink --duration 2 in the image ($how): $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["rx_packets"], "packets, mbufs leaked", r["mbufs_leaked"], "|", r["hugepages"])' "$out")"
else
    echo "container-check: FAILED: grorx in the image ($how):" >&2
    cat "$WORK/err" >&2
    fail=1
fi
exit $fail
