#!/usr/bin/env bash
# The main job on its built-in default: `mpm run`, the 2D fluid-solid dam break, frames written
# to out/dam_break/. Extra arguments go to `mpm run` (a scene file, --backend, --frames, --out).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release --bin mpm -- run "$@"
