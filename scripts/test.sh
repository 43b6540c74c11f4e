#!/usr/bin/env bash
# The whole test suite; GPU tests run on lavapipe where no GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The engine as a library, without the program's window, progress bars and signal handling.
cargo check -p mpm --lib --no-default-features
# With MPI: tests/ranks.rs runs itself under mpirun on 2 and 3 ranks.
cargo test --workspace --features mpi
