#!/usr/bin/env bash
# Installs what grorx needs on Debian 12 (idempotent: a second run installs
# nothing) and, as root, mounts hugetlbfs and reserves 1 GiB of 2 MiB pages
# when fewer are free. Without hugepages grorx still runs (--no-huge fallback).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
# g++: the fuzz crate links libFuzzer (its replay tests run in scripts/test.sh).
PKGS=(dpdk dpdk-dev libdpdk-dev libclang-dev pkg-config gcc g++ python3)
# Packages the caller adds (scripts/test.sh: what only the tests need).
PKGS+=("$@")

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null && SUDO="sudo" || { echo "setup: run as root (or install sudo)" >&2; exit 1; }
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        echo "setup: cargo is in ~/.cargo/bin: add it to PATH (source ~/.cargo/env)" >&2
    else
        echo "setup: Rust is missing: install it with rustup (https://rustup.rs), 1.89 or newer" >&2
    fi
    exit 1
fi

# Hugepages (best effort; grorx falls back to 4 KiB pages and says so).
HP=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
if [ -w "$HP" ] || [ -n "$SUDO" ]; then
    $SUDO mkdir -p /dev/hugepages
    mountpoint -q /dev/hugepages || $SUDO mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages 2>/dev/null || true
    free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages 2>/dev/null || echo 0)
    total=$(cat "$HP" 2>/dev/null || echo 0)
    if [ "$free" -lt 512 ]; then
        echo $((total + 512 - free)) | $SUDO tee "$HP" >/dev/null 2>&1 || true
    fi
fi
exit 0
