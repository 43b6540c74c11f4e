#!/usr/bin/env bash
# Strong and weak scaling of `mpm run` across MPI ranks (the feature `mpi`), on the CPU
# backend with the machine's cores shared evenly among the ranks. Prints, per rank count:
# particles, milliseconds per substep, halo kilobytes per substep (all ranks), the load
# imbalance (the most particles on one rank over the mean) and the parallel efficiency.
#
#   bash scripts/scaling.sh [MAX_RANKS] [FRAMES]    (defaults: 4 ranks, 4 frames)
#
# Strong: the 3D water block of scenes/mpm3d.toml (64,000 particles, 64^3) on 1..MAX ranks.
# Weak: a 3D dam break whose domain and water grow along x with the ranks, 48 cells and
# about 37,000 particles per rank. Past the machine's cores the ranks share cores
# (--oversubscribe): the figures then show the communication, not the speed-up. On a
# cluster, give mpirun a hostfile (see README, "Across machines").
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-4}
frames=${2:-4}
cores=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release --features mpi --bin mpm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs a scene on N ranks; prints "particles ms_per_substep halo_kB imbalance".
measure() {
    local n=$1 scene=$2 threads=$(( cores / $1 > 0 ? cores / $1 : 1 ))
    local log="$work/log"
    mpirun --oversubscribe -n "$n" target/release/mpm run "$scene" --backend cpu \
        --threads "$threads" --frames "$frames" --out "$work/out" >"$log" 2>&1
    awk '
        / frames, [0-9]+ substeps of / {
            for (i = 1; i <= NF; i++) {
                if ($i == "substeps") steps = $(i - 1)
                if ($i == "particles") particles = $(i - 1)
                if ($i == "s:") seconds = $(i - 1)
            }
        }
        / ranks, cut across x at / {
            for (i = 1; i <= NF; i++) {
                if ($i == "mean;") imbalance = $(i - 2)
                if ($i == "kB") halo = $(i - 1)
            }
        }
        END {
            if (imbalance == "") imbalance = "1.00x"
            if (halo == "") halo = 0
            printf "%s %.3f %s %s\n", particles, 1000 * seconds / steps, halo, imbalance
        }' "$log"
}

table() {
    local kind=$1
    printf '%-6s %-6s %10s %12s %14s %10s %10s\n' "$kind" ranks particles "ms/substep" \
        "halo kB/step" imbalance efficiency
}

table strong
base=""
for n in $(seq 1 "$max"); do
    read -r particles ms halo imbalance < <(measure "$n" scenes/mpm3d.toml)
    base=${base:-$ms}
    eff=$(awk -v b="$base" -v t="$ms" -v n="$n" 'BEGIN { printf "%.2f", b / (n * t) }')
    printf '%-6s %-6s %10s %12s %14s %10s %10s\n' "" "$n" "$particles" "$ms" "$halo" \
        "$imbalance" "$eff"
done

table weak
base=""
for n in $(seq 1 "$max"); do
    scene="$work/weak$n.toml"
    cat >"$scene" <<EOF
[simulation]
dimension = 3
resolution = [$((48 * n)), 48, 48]
dx = 0.0208333
gravity = [0.0, -9.8, 0.0]
dt = 2e-4
frame_time = 0.005
frames = $frames
walls = { thickness = 3, condition = "separate", friction = 0.0 }

[[materials]]
name = "water"
model = "water"
density = 1000.0
bulk = 2e5
gamma = 7.0

[[bodies]]
material = "water"
shape = "box"
min = [0.07, 0.07, 0.07]
max = [$(awk -v n="$n" 'BEGIN { print n - 0.07 }'), 0.5, 0.93]
spacing = 0.0208333
sampling = "regular"

[output]
png = false
EOF
    read -r particles ms halo imbalance < <(measure "$n" "$scene")
    base=${base:-$ms}
    eff=$(awk -v b="$base" -v t="$ms" 'BEGIN { printf "%.2f", b / t }')
    printf '%-6s %-6s %10s %12s %14s %10s %10s\n' "" "$n" "$particles" "$ms" "$halo" \
        "$imbalance" "$eff"
done
