//! Particle positions that fill a region: on a regular lattice, jittered inside lattice
//! cells, or by Poisson-disk sampling (Bridson 2007, "Fast Poisson disk sampling in
//! arbitrary dimensions").

use super::error::{Result, SolverError};
use crate::rng::rand_f32;

/// A region to fill, in `D` dimensions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Region<const D: usize> {
    Box { min: [f32; D], max: [f32; D] },
    Sphere { centre: [f32; D], radius: f32 },
}

impl<const D: usize> Region<D> {
    pub fn contains(&self, p: [f32; D]) -> bool {
        match self {
            Region::Box { min, max } => (0..D).all(|a| p[a] >= min[a] && p[a] < max[a]),
            Region::Sphere { centre, radius } => {
                (0..D).map(|a| (p[a] - centre[a]).powi(2)).sum::<f32>() < radius * radius
            }
        }
    }

    /// The bounding box `(min, max)`.
    pub fn bounds(&self) -> ([f32; D], [f32; D]) {
        match *self {
            Region::Box { min, max } => (min, max),
            Region::Sphere { centre, radius } => {
                (centre.map(|c| c - radius), centre.map(|c| c + radius))
            }
        }
    }

    fn validate(&self) -> Result<()> {
        let ok = match self {
            Region::Box { min, max } => {
                (0..D).all(|a| min[a].is_finite() && max[a].is_finite() && min[a] < max[a])
            }
            Region::Sphere { centre, radius } => {
                centre.iter().all(|c| c.is_finite()) && radius.is_finite() && *radius > 0.0
            }
        };
        if ok {
            Ok(())
        } else {
            Err(SolverError::InvalidParameter(format!(
                "seeding region ({self}) is empty or not finite"
            )))
        }
    }
}

impl<const D: usize> std::fmt::Display for Region<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Region::Box { min, max } => write!(f, "box {min:?}..{max:?}"),
            Region::Sphere { centre, radius } => {
                write!(f, "sphere at {centre:?} of radius {radius}")
            }
        }
    }
}

/// How particles are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// Cell centres of a lattice of the given spacing.
    Regular,
    /// One random point in each lattice cell.
    Jittered,
    /// Random points no closer than the spacing (about 0.6 to 0.7 of a lattice's density).
    PoissonDisk,
}

/// Positions filling `region` with particles `spacing` apart; `seed` drives the random
/// placements. Each particle stands for `spacing^D` of volume on a lattice; Poisson-disk
/// callers should divide the region's volume by the count instead.
pub fn fill<const D: usize>(
    region: &Region<D>,
    spacing: f32,
    sampling: Sampling,
    seed: u32,
) -> Result<Vec<[f32; D]>> {
    region.validate()?;
    if !(spacing.is_finite() && spacing > 0.0) {
        return Err(SolverError::InvalidParameter(format!(
            "particle spacing {spacing} must be finite and > 0"
        )));
    }
    let (lo, hi) = region.bounds();
    let cells: [u64; D] =
        std::array::from_fn(|a| ((hi[a] - lo[a]) / spacing).ceil().max(1.0) as u64);
    let total: u64 = cells.iter().product();
    if total > 1 << 32 {
        return Err(SolverError::InvalidParameter(format!(
            "seeding the {region} at spacing {spacing} needs {total} lattice cells (more than 2^32)"
        )));
    }
    Ok(match sampling {
        Sampling::Regular | Sampling::Jittered => {
            let mut out = Vec::new();
            for i in 0..total {
                let mut rest = i;
                let p: [f32; D] = std::array::from_fn(|a| {
                    let k = rest % cells[a];
                    rest /= cells[a];
                    let offset = match sampling {
                        Sampling::Regular => 0.5,
                        _ => rand_f32(seed, (i as u32).wrapping_mul(D as u32) + a as u32),
                    };
                    lo[a] + (k as f32 + offset) * spacing
                });
                if region.contains(p) {
                    out.push(p);
                }
            }
            out
        }
        Sampling::PoissonDisk => poisson_disk(region, spacing, seed, lo, hi),
    })
}

/// Bridson's algorithm: grow from an active list, trying 30 candidates in the annulus
/// `[r, 2r)` around each active point; a background grid of cells `r / sqrt(D)` holds at most
/// one point each, so the distance test looks at a few neighbours only.
fn poisson_disk<const D: usize>(
    region: &Region<D>,
    r: f32,
    seed: u32,
    lo: [f32; D],
    hi: [f32; D],
) -> Vec<[f32; D]> {
    const TRIES: u32 = 30;
    let cell = r / (D as f32).sqrt();
    let dims: [usize; D] =
        std::array::from_fn(|a| ((hi[a] - lo[a]) / cell).ceil().max(1.0) as usize);
    let mut grid = vec![u32::MAX; dims.iter().product()];
    let index = |p: &[f32; D]| -> usize {
        let mut i = 0;
        for a in (0..D).rev() {
            let k = (((p[a] - lo[a]) / cell) as usize).min(dims[a] - 1);
            i = i * dims[a] + k;
        }
        i
    };
    let mut counter = 0u32;
    let mut random = || {
        counter = counter.wrapping_add(1);
        rand_f32(seed, counter)
    };
    let mut points: Vec<[f32; D]> = Vec::new();
    let mut active = Vec::new();
    // The first point: random tries until one falls inside the region.
    for _ in 0..1000 {
        let p: [f32; D] = std::array::from_fn(|a| lo[a] + random() * (hi[a] - lo[a]));
        if region.contains(p) {
            grid[index(&p)] = 0;
            points.push(p);
            active.push(0u32);
            break;
        }
    }
    let reach = (D as f32).sqrt().ceil() as isize + 1;
    while let Some(&current) = active.last() {
        let centre = points[current as usize];
        let mut placed = false;
        for _ in 0..TRIES {
            // A uniform direction (normalised Gaussian-free: rejection from the unit cube).
            let mut dir = [0.0f32; D];
            loop {
                for d in dir.iter_mut() {
                    *d = 2.0 * random() - 1.0;
                }
                let n2: f32 = dir.iter().map(|x| x * x).sum();
                if n2 > 1e-6 && n2 <= 1.0 {
                    let n = n2.sqrt();
                    dir.iter_mut().for_each(|d| *d /= n);
                    break;
                }
            }
            let dist = r * (1.0 + random());
            let p: [f32; D] = std::array::from_fn(|a| centre[a] + dir[a] * dist);
            if !region.contains(p) {
                continue;
            }
            let home: [isize; D] = std::array::from_fn(|a| ((p[a] - lo[a]) / cell) as isize);
            let mut clear = true;
            let neighbours = (2 * reach + 1).pow(D as u32);
            'scan: for n in 0..neighbours {
                let mut rest = n;
                let mut flat = 0usize;
                for a in (0..D).rev() {
                    let k = home[a] + rest % (2 * reach + 1) - reach;
                    rest /= 2 * reach + 1;
                    if k < 0 || k >= dims[a] as isize {
                        continue 'scan;
                    }
                    flat = flat * dims[a] + k as usize;
                }
                let other = grid[flat];
                if other != u32::MAX {
                    let q = points[other as usize];
                    let d2: f32 = (0..D).map(|a| (p[a] - q[a]).powi(2)).sum();
                    if d2 < r * r {
                        clear = false;
                        break;
                    }
                }
            }
            if clear {
                let id = points.len() as u32;
                grid[index(&p)] = id;
                points.push(p);
                active.push(id);
                placed = true;
                break;
            }
        }
        if !placed {
            active.pop();
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_box_has_the_lattice_count() {
        let region = Region::Box {
            min: [0.0, 0.0],
            max: [0.5, 0.25],
        };
        let p = fill(&region, 0.05, Sampling::Regular, 0).unwrap();
        assert_eq!(p.len(), 10 * 5);
        assert!(p.iter().all(|q| region.contains(*q)));
    }

    #[test]
    fn sphere_count_matches_its_volume() {
        let region = Region::Sphere {
            centre: [0.5; 3],
            radius: 0.2,
        };
        let spacing = 0.01;
        let p = fill(&region, spacing, Sampling::Jittered, 3).unwrap();
        let expected = 4.0 / 3.0 * std::f32::consts::PI * 0.2f32.powi(3) / spacing.powi(3);
        assert!(
            (p.len() as f32 / expected - 1.0).abs() < 0.02,
            "{} vs {expected}",
            p.len()
        );
        assert!(p.iter().all(|q| region.contains(*q)));
    }

    #[test]
    fn poisson_disk_keeps_its_distance_and_fills() {
        let region = Region::Box {
            min: [0.1, 0.1],
            max: [0.4, 0.3],
        };
        let r = 0.01;
        let p = fill(&region, r, Sampling::PoissonDisk, 7).unwrap();
        for (i, a) in p.iter().enumerate() {
            for b in &p[i + 1..] {
                let d2 = (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2);
                assert!(d2 >= r * r * 0.999, "points {a:?} and {b:?} are too close");
            }
        }
        // Maximal Poisson-disk sets in 2D cover 0.55-0.75 of the hexagonal packing density.
        let lattice = 0.3 * 0.2 / (r * r);
        let ratio = p.len() as f32 / lattice;
        assert!(ratio > 0.5 && ratio < 1.2, "density ratio {ratio}");
    }

    #[test]
    fn bad_regions_and_spacings_are_errors() {
        let empty = Region::Box {
            min: [0.5, 0.0],
            max: [0.5, 1.0],
        };
        assert!(fill(&empty, 0.1, Sampling::Regular, 0).is_err());
        let ok = Region::Sphere {
            centre: [0.0, 0.0],
            radius: 1.0,
        };
        assert!(fill(&ok, f32::NAN, Sampling::Regular, 0).is_err());
        assert!(fill(&ok, 0.0, Sampling::Regular, 0).is_err());
    }
}
