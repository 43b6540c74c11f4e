//! Water, jelly, snow and sand together in 3D on a sparse grid: a water column slumps
//! from the left wall, a jelly cube falls into it, a snow ball is thrown at the jelly and a
//! sand column collapses on the right. At the default 256^3 grid the scene holds about
//! 1.2 million particles (eight per cell, spacing dx / 2), which fill under 1% of the domain:
//! a dense grid of that size would hold 470 MB of grid fields, the sparse one allocates blocks
//! of 4^3 cells only around the material.

use mpm_core::solver::{
    seeding, GridLayout, Material, Particles, Region, Sampling, Settings, Solver3, Walls,
};
use mpm_core::{BackendRef, Error, Result};

use crate::scenes::seeded::region_seed;
use crate::scenes::SolverScene;

/// The grid resolution the example uses.
pub const N_GRID: u32 = 256;

/// Cells per axis of a grid block.
pub const BLOCK: u32 = 4;

/// The time step at `N_GRID` (it scales with the cell size). Material::water()'s sound
/// speed, 26.5 m/s, is the fastest wave: 0.34 of a cell per step; snow's hardening under
/// compression stays below it.
pub const DT: f32 = 5e-5;

/// The materials in the order of their ids (and colours).
pub fn materials() -> [Material; 4] {
    [
        Material::water(),
        Material::FixedCorotated {
            density: 1000.0,
            youngs: 2e5,
            poisson: 0.3,
        },
        Material::snow(),
        Material::sand(),
    ]
}

/// The scene and what its sparse grid was sized from.
pub struct MultiMaterial {
    pub scene: SolverScene<Solver3>,
    /// Grid blocks the initial particles touch.
    pub initial_blocks: u32,
    /// Blocks in the grid's pool.
    pub reserve: u32,
}

/// Builds the scene on an `n_grid`^3 grid of the unit cube (`n_grid` a multiple of
/// `BLOCK`); `seed` jitters the particles. Objects keep their size in metres, so the
/// particle count grows as `n_grid^3` (about 1.2 million at 256, 150,000 at 128).
pub fn new(backend: &BackendRef, n_grid: u32, seed: u32) -> Result<MultiMaterial> {
    if !n_grid.is_multiple_of(BLOCK) || n_grid < 8 * BLOCK {
        return Err(Error::InvalidParameter(format!(
            "grid resolution {n_grid} must be a multiple of {BLOCK} and at least {}",
            8 * BLOCK
        )));
    }
    let dx = 1.0 / n_grid as f32;
    let floor = 3.0 * dx + 1e-4;
    let spacing = dx / 2.0;
    // (region, velocity) of each material, in the order of `materials()`.
    let bodies: [(Region<3>, [f32; 3]); 4] = [
        (
            Region::Box {
                min: [floor, floor, 0.42],
                max: [floor + 0.12, floor + 0.2, 0.58],
            },
            [0.0; 3],
        ),
        (
            Region::Box {
                min: [0.3, 0.4, 0.445],
                max: [0.41, 0.51, 0.555],
            },
            [0.0, -1.0, 0.0],
        ),
        (
            Region::Sphere {
                centre: [0.62, 0.5, 0.5],
                radius: 0.075,
            },
            [-2.0, -0.5, 0.0],
        ),
        (
            Region::Box {
                min: [0.8, floor, 0.45],
                max: [0.9, floor + 0.22, 0.55],
            },
            [0.0; 3],
        ),
    ];
    let mut positions = Vec::with_capacity(bodies.len());
    for (i, (region, _)) in bodies.iter().enumerate() {
        positions.push(seeding::fill(
            region,
            spacing,
            Sampling::Jittered,
            region_seed(seed, i as u32),
        )?);
    }
    let total: usize = positions.iter().map(Vec::len).sum();

    let blocks_per_axis = n_grid / BLOCK;
    let initial_blocks = touched_blocks(&positions, dx, blocks_per_axis);
    // Room for the material to spread: four times the initial blocks, plus two layers of
    // blocks over the whole floor for the water once it has run out into a thin sheet.
    let all_blocks = blocks_per_axis.pow(3);
    let reserve = (4 * initial_blocks + 2 * blocks_per_axis * blocks_per_axis).min(all_blocks);

    let mut settings = Settings::<3>::new(n_grid, DT * N_GRID as f32 / n_grid as f32);
    settings.walls = Walls::default();
    settings.grid = GridLayout::Sparse {
        block: BLOCK,
        bitmasked: false,
        reserve,
    };
    let mut solver = Solver3::new(backend, settings)?;
    // Room for every particle at once: adding to a full particle store doubles it.
    let capacity = u32::try_from(total)
        .map_err(|_| Error::InvalidParameter(format!("{total} particles are too many")))?;
    solver.particles = Particles::new(backend, capacity)?;
    for ((material, (_, velocity)), x) in materials().into_iter().zip(&bodies).zip(&positions) {
        let id = solver.add_material(material)?;
        solver.add_positions(x, spacing.powi(3), id, *velocity)?;
    }
    let dt = solver.next_dt();
    Ok(MultiMaterial {
        scene: SolverScene {
            solver,
            // A frame every 10 ms of simulated time.
            substeps_per_frame: (1e-2 / dt).round() as usize,
        },
        initial_blocks,
        reserve,
    })
}

/// How many blocks of `BLOCK`^3 cells the quadratic stencils of the particles reach.
fn touched_blocks(positions: &[Vec<[f32; 3]>], dx: f32, blocks_per_axis: u32) -> u32 {
    let n = blocks_per_axis as usize;
    let mut touched = vec![false; n * n * n];
    let block = |cell: f32| ((cell.max(0.0) as usize) / BLOCK as usize).min(n - 1);
    for p in positions.iter().flatten() {
        // Nodes base .. base + 2 along each axis, base = floor(x / dx - 0.5).
        let lo = p.map(|x| block((x / dx - 0.5).floor()));
        let hi = p.map(|x| block((x / dx - 0.5).floor() + 2.0));
        for i in lo[0]..=hi[0] {
            for j in lo[1]..=hi[1] {
                for k in lo[2]..=hi[2] {
                    touched[(i * n + j) * n + k] = true;
                }
            }
        }
    }
    touched.iter().filter(|&&t| t).count() as u32
}
