//! Brittle fracture (`Material::Brittle`): the softening law dissipates the fracture energy
//! per crack area whatever the cell (the crack band, Bazant and Oh 1983); a bar pulled apart
//! fails at its strength; a notched bar cracks along the notch, at a load that does not
//! depend on the cell size.

use mpm::backend;
use mpm::core::glam::{Mat2, Vec2, Vec4};
use mpm::core::materials::dim2;
use mpm::core::solver::{
    seeding, Collider, Condition, Material, Region, Sampling, Settings, Shape, Solver2, TimeStep,
    Walls,
};

const STRENGTH: f32 = 100.0;
const YOUNGS: f32 = 1e5;
const ENERGY: f32 = 0.05;

fn brittle() -> Material {
    Material::Brittle {
        density: 1000.0,
        youngs: YOUNGS,
        poisson: 0.0,
        strength: STRENGTH,
        fracture_energy: ENERGY,
    }
}

/// Stretched along x (no Poisson effect), the update's stress rises to the strength and falls
/// as the damage grows; the area under the curve times the cell is the fracture energy.
#[test]
fn the_softening_law_dissipates_the_fracture_energy_per_cell() {
    let mu = YOUNGS / 2.0;
    for cell in [0.02f32, 0.01, 0.005] {
        let onset = STRENGTH / YOUNGS;
        let soft = ENERGY / (cell * STRENGTH) - 0.5 * onset;
        let row = Vec4::new(STRENGTH, YOUNGS, soft, 0.0);
        let (mut jp, mut work, mut peak, mut last) = (1.0f32, 0.0f64, 0.0f32, 0.0f32);
        let steps = 200_000;
        let end = onset + 30.0 * soft;
        for k in 1..=steps {
            let strain = end * k as f32 / steps as f32;
            let h = Mat2::from_diagonal(Vec2::new(strain, 0.0));
            let (_h, tau, integrity) = dim2::brittle_update(h, jp, mu, 0.0, row);
            jp = integrity;
            // Cauchy stress over the stretched length: the work per reference volume.
            let stress = tau.x_axis.x / (1.0 + strain);
            work += 0.5 * (stress + last) as f64 * (end / steps as f32) as f64;
            last = stress;
            peak = peak.max(stress);
        }
        let dissipated = work * cell as f64;
        assert!(
            (peak - STRENGTH).abs() < 0.01 * STRENGTH,
            "cell {cell}: peak {peak} against the strength {STRENGTH}"
        );
        assert!(
            (dissipated - ENERGY as f64).abs() < 0.03 * ENERGY as f64,
            "cell {cell}: {dissipated} J/m^2 dissipated against G_f = {ENERGY}"
        );
        assert!(jp < 1e-6, "cell {cell}: integrity {jp} left");
    }
}

/// A bar from x = 0.2 to 0.8, `height` tall, gripped at both ends by sticky boxes pulled
/// apart at 0.5 mm/s each, optionally with a notch two cells of 1/64 wide at x = 0.5 from the
/// top down to `notch` of its height; damping keeps the loading quasi-static. Returns the
/// peak of the far-field stress (mean tau_xx over x in 0.3..0.35) and the brittle particles'
/// position and integrity at the end.
fn pull(n: u32, notch: f32) -> (f32, Vec<(Vec2, f32)>) {
    let dx = 1.0 / n as f32;
    let (y0, y1) = (0.15f32, 0.35f32);
    let settings = Settings {
        gravity: [0.0, 0.0],
        damping: 20.0,
        time_step: TimeStep::Adaptive {
            cfl: 0.4,
            max: 1e-3,
        },
        walls: Walls {
            thickness: 3,
            condition: Condition::Slip { friction: 0.0 },
        },
        ..Settings::new(n, 1e-3)
    };
    let b = backend::cpu();
    let mut s = Solver2::new(&b, settings).expect("solver");
    let m = s.add_material(brittle()).expect("material");
    // The gripped ends are of an elastic solid as stiff, which does not crack where the
    // grips concentrate the stress.
    let grip = s
        .add_material(Material::FixedCorotated {
            density: 1000.0,
            youngs: YOUNGS,
            poisson: 0.0,
        })
        .expect("material");
    let bar = Region::Box {
        min: [0.2, y0],
        max: [0.8, y1],
    };
    let cut = |p: &[f32; 2]| (p[0] - 0.5).abs() < 1.0 / 64.0 && p[1] > y1 - notch * (y1 - y0);
    let positions: Vec<[f32; 2]> = seeding::fill(&bar, dx / 2.0, Sampling::Regular, 0)
        .expect("fill")
        .into_iter()
        .filter(|p| !cut(p))
        .collect();
    let (middle, ends): (Vec<[f32; 2]>, Vec<[f32; 2]>) = positions
        .into_iter()
        .partition(|p| (p[0] - 0.5).abs() < 0.2);
    s.add_positions(&middle, dx * dx / 4.0, m, [0.0, 0.0])
        .expect("bar");
    s.add_positions(&ends, dx * dx / 4.0, grip, [0.0, 0.0])
        .expect("ends");
    let speed = 5e-4;
    for (centre, v) in [(0.125f32, -speed), (0.875, speed)] {
        s.add_collider(Collider {
            velocity: [v, 0.0, 0.0],
            ..Collider::fixed(
                Shape::Box {
                    centre: [centre, 0.25, 0.0],
                    half: [0.075, 0.15, 1.0],
                },
                Condition::Sticky,
            )
        })
        .expect("grip");
    }
    // Far-field strain at failure about 1e-3: 0.6 s of pulling; run to twice that.
    let mut peak = 0.0f32;
    while s.time() < 1.5 {
        for _ in 0..10 {
            s.substep().expect("substep");
        }
        let p = s.particles.download().expect("particles");
        let (mut sum, mut count) = (0.0f32, 0);
        for (x, tau) in p.x.iter().zip(&p.tau) {
            if x.x > 0.3 && x.x < 0.35 {
                sum += tau.x_axis.x;
                count += 1;
            }
        }
        peak = peak.max(sum / count as f32);
    }
    let p = s.particles.download().expect("particles");
    let brittle = p.material.iter().map(|&id| id == m.0);
    let out = p.x.iter().zip(&p.jp).zip(brittle);
    (
        peak,
        out.filter(|q| q.1).map(|((x, &jp), _)| (*x, jp)).collect(),
    )
}

#[test]
fn a_bar_fails_at_its_strength() {
    let (peak, particles) = pull(64, 0.0);
    println!("unnotched bar: peak far-field stress {peak:.1} Pa (strength {STRENGTH})");
    assert!(
        (peak - STRENGTH).abs() < 0.1 * STRENGTH,
        "the bar failed at {peak} Pa, its strength is {STRENGTH}"
    );
    let broken = particles.iter().filter(|p| p.1 < 0.1).count();
    assert!(broken > 0, "nothing broke");
}

#[test]
fn a_notched_bar_cracks_along_its_notch() {
    let mut peaks = Vec::new();
    for n in [64u32, 128] {
        let (peak, particles) = pull(n, 0.3);
        let dx = 1.0 / n as f32;
        let broken: Vec<Vec2> = particles
            .iter()
            .filter(|p| p.1 < 0.1)
            .map(|p| p.0)
            .collect();
        let off = broken
            .iter()
            .map(|x| (x.x - 0.5).abs())
            .fold(0.0f32, f32::max);
        // The crack runs through: every row of particles under the notch has a broken one.
        let rows = |filter: &dyn Fn(&Vec2) -> bool| {
            let mut r: Vec<i32> = particles
                .iter()
                .map(|p| p.0)
                .filter(|x| filter(x))
                .map(|x| (x.y / (0.5 * dx)).floor() as i32)
                .collect();
            r.sort_unstable();
            r.dedup();
            r
        };
        let ligament = rows(&|x: &Vec2| x.y < 0.35 - 0.3 * 0.2 - 0.5 * dx);
        let cracked =
            rows(&|x: &Vec2| broken.iter().any(|b| b == x) && x.y < 0.35 - 0.3 * 0.2 - 0.5 * dx);
        assert_eq!(cracked, ligament, "dx 1/{n}: the crack stops short");
        println!(
            "notched bar, dx 1/{n}: peak far-field stress {peak:.1} Pa, {} broken particles, \
             the farthest {:.2} cells from the notch plane",
            broken.len(),
            off / dx
        );
        assert!(!broken.is_empty(), "dx 1/{n}: nothing broke");
        assert!(
            off <= 2.0 / 64.0 + 2.0 * dx,
            "dx 1/{n}: a particle {:.2} cells from the notch plane broke",
            off / dx
        );
        peaks.push(peak);
    }
    let change = (peaks[1] - peaks[0]).abs() / peaks[0];
    assert!(
        change < 0.15,
        "halving dx moved the failure load from {} to {} Pa ({:.1}%)",
        peaks[0],
        peaks[1],
        100.0 * change
    );
}
