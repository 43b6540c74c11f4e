#!/usr/bin/env bash
# The main job on its built-in default: Taichi's mpm99 scene, frames written to out/mpm99.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release -- --out out/mpm99 "$@"
