#!/usr/bin/env bash
# The whole test suite; GPU tests run on lavapipe where no GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace
