//! Granular column collapse: a column of dry sand (`Material::sand()`, Drucker-Prager after
//! Klar et al. 2016) stands against the left wall on a frictional floor and is released at
//! t = 0, as in the experiments of Lube et al. 2005 ("Collapses of two-dimensional granular
//! columns", Phys. Rev. E 72): the column slumps into a wedge whose run-out grows with the
//! aspect ratio `HEIGHT / WIDTH`.

use mpm_core::solver::{Condition, Material, Region, Sampling, Settings, Solver2, Walls};
use mpm_core::{BackendRef, Result};

use crate::scenes::seeded::{add_region, region_seed};
use crate::scenes::SolverScene;

/// The grid resolution the example uses.
pub const N_GRID: u32 = 256;

/// The time step at `N_GRID`. Klar et al.'s sand (E = 3.537e5, nu = 0.3, 2200 kg/m^3)
/// carries elastic waves at sqrt((lambda + 2 mu) / rho) = 14.7 m/s: 0.38 of a cell per
/// step.
pub const DT: f32 = 1e-4;

/// Column width and height (aspect ratio 2) in the unit square; the column stands on the
/// floor against the left wall.
pub const WIDTH: f32 = 0.12;
pub const HEIGHT: f32 = 0.24;

/// Coulomb friction of the floor and walls, about tan of the sand's 30 degree friction angle.
pub const WALL_FRICTION: f32 = 0.5;

/// Builds the scene on an `n_grid`^2 grid of the unit square (the time step scales with the
/// cell size); `seed` jitters the particles.
pub fn new(backend: &BackendRef, n_grid: u32, seed: u32) -> Result<SolverScene<Solver2>> {
    let dt = DT * N_GRID as f32 / n_grid as f32;
    let mut settings = Settings::<2>::new(n_grid, dt);
    settings.walls = Walls {
        thickness: 3,
        condition: Condition::Separate {
            friction: WALL_FRICTION,
        },
    };
    let floor = settings.walls.thickness as f32 * settings.dx;
    let spacing = settings.dx / 2.0;
    let mut solver = Solver2::new(backend, settings)?;
    let sand = solver.add_material(Material::sand())?;
    add_region(
        &mut solver,
        &Region::Box {
            min: [floor, floor],
            max: [floor + WIDTH, floor + HEIGHT],
        },
        Sampling::Jittered,
        spacing,
        sand,
        [0.0, 0.0],
        region_seed(seed, 0),
    )?;
    Ok(SolverScene {
        solver,
        // A frame every 10 ms of simulated time.
        substeps_per_frame: (1e-2 / dt).round() as usize,
    })
}
