//! Snow balls breaking apart (the scene of Stomakhin et al. 2013, "A material point method
//! for snow simulation", in 2D): one ball is thrown at the right wall, a second one is thrown
//! down onto the floor. Both are the paper's snow (`Material::snow()`); they are two
//! materials only so that the frames tell them apart.

use mpm_core::solver::{Condition, Material, Region, Sampling, Settings, Solver2, Walls};
use mpm_core::{BackendRef, Result};

use crate::scenes::seeded::{add_region, region_seed};
use crate::scenes::SolverScene;

/// The grid resolution the example uses.
pub const N_GRID: u32 = 256;

/// The time step at `N_GRID`. The paper's snow (E = 1.4e5, nu = 0.2, 400 kg/m^3) carries
/// elastic waves at sqrt((lambda + 2 mu) / rho) = 19.7 m/s: 0.25 of a cell per step, which
/// leaves room for hardening to stiffen compressed snow.
pub const DT: f32 = 5e-5;

/// Builds the scene on an `n_grid`^2 grid of the unit square (the time step scales with the
/// cell size); `seed` jitters the particles.
pub fn new(backend: &BackendRef, n_grid: u32, seed: u32) -> Result<SolverScene<Solver2>> {
    let dt = DT * N_GRID as f32 / n_grid as f32;
    let mut settings = Settings::<2>::new(n_grid, dt);
    // Snow sticks a little to what it hits: Coulomb friction on the walls.
    settings.walls = Walls {
        thickness: 3,
        condition: Condition::Separate { friction: 0.5 },
    };
    let spacing = settings.dx / 2.0;
    let mut solver = Solver2::new(backend, settings)?;
    let thrown = solver.add_material(Material::snow())?;
    let dropped = solver.add_material(Material::snow())?;
    add_region(
        &mut solver,
        &Region::Sphere {
            centre: [0.25, 0.6],
            radius: 0.1,
        },
        Sampling::Jittered,
        spacing,
        thrown,
        [7.0, 1.0],
        region_seed(seed, 0),
    )?;
    add_region(
        &mut solver,
        &Region::Sphere {
            centre: [0.6, 0.25],
            radius: 0.08,
        },
        Sampling::Jittered,
        spacing,
        dropped,
        [0.0, -5.0],
        region_seed(seed, 1),
    )?;
    Ok(SolverScene {
        solver,
        // A frame every 5 ms of simulated time.
        substeps_per_frame: (5e-3 / dt).round() as usize,
    })
}
