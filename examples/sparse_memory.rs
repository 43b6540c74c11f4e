//! Memory of a sparse grid: 1,000,000 particles in a 2048^3 virtual grid.
//!
//! A dense grid of mass (f32) and velocity (Vec3) at that resolution needs 2048^3 * 16 bytes,
//! about 137 GB. Here the grid is `pointer [64^3] -> pointer [8^3] -> dense [4^3]`, and a P2G
//! pass activates only the blocks around the particles.
//!
//! `cargo run --release --example sparse_memory -- --backend cpu`

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use mpm::backend::{self, Choice};
use mpm::glam::{IVec3, Vec3};
use mpm::{kernel, Field, Layout, Tree};

/// Scatters particle mass and momentum onto the grid with quadratic B-spline weights.
#[kernel]
fn p2g_mass(
    x: &Field<Vec3>,
    v: &Field<Vec3>,
    grid_m: &mut Field<f32, 3>,
    grid_v: &mut Field<Vec3, 3>,
    inv_dx: f32,
) {
    for p in x.indices() {
        let xp = x[p] * inv_dx;
        let base = (xp - Vec3::splat(0.5)).as_ivec3();
        let fx = xp - base.as_vec3();
        let a = Vec3::splat(1.5) - fx;
        let b = fx - Vec3::splat(1.0);
        let c = fx - Vec3::splat(0.5);
        let w = [0.5 * a * a, Vec3::splat(0.75) - b * b, 0.5 * c * c];
        for i in 0..3 {
            for j in 0..3 {
                for k in 0..3 {
                    let weight = w[i].x * w[j].y * w[k].z;
                    let cell = base + IVec3::new(i, j, k);
                    grid_m[cell] += weight;
                    grid_v[cell] += weight * v[p];
                }
            }
        }
    }
}

#[derive(Parser)]
struct Cli {
    #[arg(long, value_enum, default_value_t = Choice::Cpu)]
    backend: Choice,
    /// Particles per axis of the cubic blob (100 gives 1,000,000).
    #[arg(long, default_value_t = 100)]
    side: u32,
}

fn run(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    let be = backend::select(cli.backend)?;
    let n_grid = 2048u32;
    let dx = 1.0 / n_grid as f32;
    // Two particles per cell along each axis, a blob in the middle of the domain.
    let side = cli.side;
    let x: Vec<Vec3> = (0..side * side * side)
        .map(|k| {
            let c = Vec3::new(
                (k % side) as f32,
                ((k / side) % side) as f32,
                (k / (side * side)) as f32,
            );
            Vec3::splat(0.5) + (c + Vec3::splat(0.25)) * (0.5 * dx)
        })
        .collect();
    let n = x.len() as u32;
    let layout = Layout::<3>::root()
        .pointer([64, 64, 64])
        .pointer([8, 8, 8])
        .dense([4, 4, 4])
        .reserve(4096);
    let tree = Tree::new(&be, layout)?;
    let mut grid_m = Field::<f32, 3>::place(&tree)?;
    let mut grid_v = Field::<Vec3, 3>::place(&tree)?;
    let xs = Field::from_slice(&be, [n], &x)?;
    let vs = Field::from_slice(&be, [n], &vec![Vec3::new(0.0, -1.0, 0.0); n as usize])?;
    let start = Instant::now();
    p2g_mass(&xs, &vs, &mut grid_m, &mut grid_v, n_grid as f32)?;
    let secs = start.elapsed().as_secs_f64();
    let m = tree.memory()?;
    let dense = (n_grid as u64).pow(3) * 16;
    println!("backend: {}", be.describe());
    println!(
        "particles: {n}, virtual grid {n_grid}^3, P2G with activation in {:.2} s",
        secs
    );
    println!(
        "grid memory: {:.1} MB reserved, {:.1} MB in use; a dense grid of mass and velocity: {:.1} GB",
        m.reserved as f64 / 1e6,
        m.in_use as f64 / 1e6,
        dense as f64 / 1e9
    );
    if m.reserved >= 100_000_000 {
        return Err(format!("grid memory {} bytes is not under 100 MB", m.reserved).into());
    }
    Ok(())
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    mpm::cli::report(run(&Cli::parse()))
}
