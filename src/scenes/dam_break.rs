//! Dam break against an elastic obstacle, after the fluid-solid coupling benchmark of Walhorn
//! et al. 2005 ("Fluid-structure coupling within a monolithic model involving free surface
//! flows", Computers & Structures 83) with the numbers asked for here: a 128^2 grid,
//! dt = 2e-4, water of 1000 kg/m^3 and an elastic block of 2000 kg/m^3 with E = 1e6. Water and
//! solid share one grid, which couples them; a sticky box under the block holds its foot to
//! the floor.
//!
//! The domain size follows from stability. An explicit step should not let a wave cross
//! more than about half a cell: `c dt < dx / 2`. The block's fastest elastic wave is
//! `sqrt((lambda + 2 mu) / rho) = 25.9 m/s` (nu = 0.3); in a unit square (dx = 1/128) that is
//! 0.66 of a cell per step (it still ran 6000 substeps there, but with no margin, and the
//! block hardly bends: the water's pressure grows with the column's height, E does not). A
//! 2 m square (dx = 1/64) brings it to 0.33. The water's bulk modulus 5e4 with gamma 7 gives a
//! sound speed of sqrt(bulk gamma / rho) = 18.7 m/s (0.24 of a cell per step), four times the
//! fastest flow (about sqrt(2 g h) = 4.4 m/s from a 1 m column), so the water stays within a
//! few percent of its volume.

use mpm_core::solver::{
    Collider, Condition, Material, Region, Sampling, Settings, Shape, Solver2, Walls,
};
use mpm_core::{BackendRef, Result};

use crate::scenes::seeded::{add_region, region_seed};
use crate::scenes::SolverScene;

/// Grid cells per axis.
pub const N_GRID: u32 = 128;
/// The time step.
pub const DT: f32 = 2e-4;
/// The side of the square domain, in metres (see the module's notes on stability).
pub const DOMAIN: f32 = 2.0;

/// The water: Tait's equation of state, soft enough for `DT` (see the module's notes).
pub fn water() -> Material {
    Material::Water {
        density: 1000.0,
        bulk: 5e4,
        gamma: 7.0,
        viscosity: 0.0,
    }
}

/// The obstacle: neo-Hookean, E = 1e6, nu = 0.3, 2000 kg/m^3.
pub fn elastic() -> Material {
    Material::NeoHookean {
        density: 2000.0,
        youngs: 1e6,
        poisson: 0.3,
    }
}

/// Builds the scene in a square of side `domain` metres on the 128^2 grid; `seed` jitters
/// the particles. Lengths scale with the domain: the water column is a quarter of it wide and
/// half of it high against the left wall, the block stands in the middle of the floor.
pub fn new(backend: &BackendRef, domain: f32, seed: u32) -> Result<SolverScene<Solver2>> {
    let mut settings = Settings::<2>::new(N_GRID, DT);
    settings.dx = domain / N_GRID as f32;
    settings.walls = Walls {
        thickness: 3,
        condition: Condition::Separate { friction: 0.0 },
    };
    let dx = settings.dx;
    let floor = settings.walls.thickness as f32 * dx;
    let spacing = dx / 2.0;
    let mut solver = Solver2::new(backend, settings)?;
    let water = solver.add_material(water())?;
    let elastic = solver.add_material(elastic())?;
    add_region(
        &mut solver,
        &Region::Box {
            min: [floor, floor],
            max: [floor + 0.25 * domain, floor + 0.5 * domain],
        },
        Sampling::Jittered,
        spacing,
        water,
        [0.0, 0.0],
        region_seed(seed, 0),
    )?;
    let (centre, half_width, height) = (0.6 * domain, 0.025 * domain, 0.2 * domain);
    add_region(
        &mut solver,
        &Region::Box {
            min: [centre - half_width, floor],
            max: [centre + half_width, floor + height],
        },
        Sampling::Jittered,
        spacing,
        elastic,
        [0.0, 0.0],
        region_seed(seed, 1),
    )?;
    // The block's foot: the two node rows above the floor under it do not move.
    solver.add_collider(Collider::fixed(
        Shape::Box {
            centre: [centre, 0.0, 0.0],
            half: [half_width, floor + 1.5 * dx, 1.0],
        },
        Condition::Sticky,
    ))?;
    Ok(SolverScene {
        solver,
        // A frame every 10 ms of simulated time.
        substeps_per_frame: (1e-2 / DT).round() as usize,
    })
}
