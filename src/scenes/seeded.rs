//! Seeding shared by the solver scenes: particles placed from the run's `--seed`, so that
//! `--seed` changes a jittered scene the same way on every backend.

use mpm_core::solver::{seeding, MaterialId, Region, Sampling, Solver, Space};
use mpm_core::Result;

/// Fills `region` with particles of `material` moving at `velocity`, placed by `sampling`
/// with `seed`; returns how many were added. (`Solver::add_particles` draws its own seeds
/// from 0 on, which would make `--seed` a no-op.)
pub fn add_region<S: Space<D>, const D: usize>(
    solver: &mut Solver<S, D>,
    region: &Region<D>,
    sampling: Sampling,
    spacing: f32,
    material: MaterialId,
    velocity: [f32; D],
    seed: u32,
) -> Result<usize> {
    let positions = seeding::fill(region, spacing, sampling, seed)?;
    let volume = match sampling {
        // A Poisson-disk set has no lattice cell: share the region's volume out.
        Sampling::PoissonDisk => region_volume(region) / positions.len().max(1) as f32,
        Sampling::Regular | Sampling::Jittered => spacing.powi(D as i32),
    };
    solver.add_positions(&positions, volume, material, velocity)?;
    Ok(positions.len())
}

/// The seed of the `index`-th region of a scene run with `--seed seed`: distinct regions get
/// distinct jitter.
pub fn region_seed(seed: u32, index: u32) -> u32 {
    seed.wrapping_mul(0x9E37_79B9).wrapping_add(index)
}

fn region_volume<const D: usize>(region: &Region<D>) -> f32 {
    match region {
        Region::Box { min, max } => (0..D).map(|a| max[a] - min[a]).product(),
        Region::Sphere { radius, .. } if D == 2 => std::f32::consts::PI * radius * radius,
        Region::Sphere { radius, .. } => 4.0 / 3.0 * std::f32::consts::PI * radius.powi(3),
    }
}
