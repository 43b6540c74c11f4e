//! Domain decomposition: one run shared by several processes (MPI ranks), each holding the
//! particles of one slab of the grid across x.
//!
//! The grid is cut across x into slabs, one per rank, at multiples of a grid block. A rank
//! holds the particles whose cell lies in its slab and scatters them into its own grid. The
//! nodes within [`HALO`] planes of a cut receive particles of both ranks beside it, so after
//! each scatter (P2G, the conducted heat, F-bar's sums) the two ranks swap their shares of
//! those planes and each adds the other's (`halo_pack`, `halo_add`): both then hold the
//! whole sums, `a + b` on one side and `b + a` on the other, the same float. The grid update
//! is per node, so both sides update their shared nodes alike, and every node a rank's
//! particles read in G2P is whole without a second exchange. After the substep, particles
//! whose cell left the slab go to its owner.
//!
//! Why three planes: a particle in cell `c` touches nodes `c - 1 ..= c + 2`, and the surface
//! tension's curvature at a node reads its neighbours, so a rank whose slab is `lo..hi` needs
//! whole nodes from `lo - 2` to `hi + 2`; the planes `b - 3 .. b + 3` around a cut `b` hold
//! them, and a slab of at least [`MIN_SLAB`] cells keeps every node of them within reach of
//! the two ranks beside the cut only.
//!
//! Shared planes travel with their runs of zeros squeezed ([`squeeze`]): the bytes per
//! substep follow the material on the cuts, not the grid's cross-section.
//!
//! The transport is the caller's: [`Ranks`] is what the solver asks of it (the `mpm` crate
//! implements it on MPI).

use super::error::{Result, SolverError};

/// Planes on each side of a cut that the two ranks beside it share.
pub const HALO: u32 = 3;

/// The narrowest slab, in cells: the planes shared at its two cuts must not overlap, and
/// the particles that reach a shared node must lie in the two slabs beside its cut.
pub const MIN_SLAB: u32 = 8;

/// What the solver needs of the processes that share a run: collective calls, which every
/// rank makes in the same order.
pub trait Ranks {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Sends `to[r]` to each rank `r` (`to` has `size()` entries) and returns what each rank
    /// sent this one.
    fn exchange(&self, to: Vec<Vec<u32>>) -> Result<Vec<Vec<u32>>>;
    /// Replaces each value by its sum over the ranks.
    fn sum(&self, values: &mut [f64]) -> Result<()>;
    /// The largest `value` of any rank.
    fn max(&self, value: f64) -> Result<f64>;
}

/// Where the grid is cut: rank `r` holds the cells `cuts[r]..cuts[r + 1]` across x.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slabs {
    pub cuts: Vec<u32>,
}

impl Slabs {
    /// Cuts at multiples of `unit` cells, no slab narrower than [`MIN_SLAB`], that share the
    /// `weights` (one per cell across x: the particles in it) as evenly as they can; without
    /// weight the slabs are even.
    pub fn balanced(weights: &[f64], ranks: usize, unit: u32) -> Result<Slabs> {
        let res = weights.len() as u32;
        let unit = unit.max(1);
        let min = MIN_SLAB.div_ceil(unit) * unit;
        if ranks == 0 || ranks as u32 * min > res {
            return Err(SolverError::InvalidParameter(format!(
                "{ranks} ranks need at least {} cells across x (a slab of {min} cells each, \
                 cut at multiples of {unit}), and the grid has {res}",
                ranks as u32 * min
            )));
        }
        // A little weight in every cell, so that empty stretches are shared evenly.
        let total: f64 = weights.iter().sum();
        let floor = total.max(1.0) * 1e-3 / res as f64;
        let mut prefix = vec![0.0; res as usize + 1];
        for (i, w) in weights.iter().enumerate() {
            prefix[i + 1] = prefix[i] + w + floor;
        }
        let whole = prefix[res as usize];
        let mut cuts = vec![0u32];
        for k in 1..ranks as u32 {
            let last = *cuts.last().unwrap_or(&0);
            // Room for this slab and for every later one.
            let lo = last + min;
            let hi = (res - (ranks as u32 - k) * min) / unit * unit;
            let target = whole * k as f64 / ranks as f64;
            let mut best = lo;
            let mut c = lo;
            while c <= hi {
                if (prefix[c as usize] - target).abs() < (prefix[best as usize] - target).abs() {
                    best = c;
                }
                c += unit;
            }
            cuts.push(best);
        }
        cuts.push(res);
        Ok(Slabs { cuts })
    }

    /// The rank whose slab holds cell `cell` across x (cells outside the grid belong to the
    /// first or the last).
    pub fn owner(&self, cell: i64) -> usize {
        let inner = &self.cuts[1..self.cuts.len() - 1];
        inner.partition_point(|&c| c as i64 <= cell)
    }

    pub fn ranks(&self) -> usize {
        self.cuts.len() - 1
    }
}

/// Shared planes as sent: runs of zero words (the nodes no particle reaches, most of a
/// plane in a sparse scene) as their length, so that the bytes on the wire follow the
/// material on the cut, not the grid's cross-section. Pairs `(zeros, n)` each followed by
/// `n` words.
pub fn squeeze(words: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let zeros = words[i..].iter().take_while(|&&w| w == 0).count();
        i += zeros;
        let n = words[i..].iter().take_while(|&&w| w != 0).count();
        out.extend([zeros as u32, n as u32]);
        out.extend_from_slice(&words[i..i + n]);
        i += n;
    }
    out
}

/// The `len` words [`squeeze`] made `squeezed` of; `None` when they do not fit.
pub fn unsqueeze(squeezed: &[u32], len: usize) -> Option<Vec<u32>> {
    let mut out = Vec::with_capacity(len);
    let mut rest = squeezed;
    while let [zeros, n, tail @ ..] = rest {
        let n = *n as usize;
        if tail.len() < n || out.len() + *zeros as usize + n > len {
            return None;
        }
        out.resize(out.len() + *zeros as usize, 0);
        out.extend_from_slice(&tail[..n]);
        rest = &tail[n..];
    }
    (rest.is_empty() && out.len() == len).then_some(out)
}

/// A solver's share of a decomposed run.
pub(super) struct Decomposition {
    pub ranks: Box<dyn Ranks>,
    pub slabs: Slabs,
    /// Bytes this rank sent to others so far: shared planes, migrating particles.
    pub halo_bytes: u64,
    pub migrated_bytes: u64,
    /// The field the shared planes are packed into and added from, kept between exchanges
    /// (as large as the largest so far).
    pub halo: Option<crate::Field<f32>>,
}

impl Decomposition {
    pub fn rank(&self) -> usize {
        self.ranks.rank()
    }

    /// Whether a particle at `x` (its first coordinate, in length) is this rank's.
    pub fn owns(&self, x0: f32, dx: f32) -> bool {
        self.slabs.owner(cell_of(x0, dx)) == self.rank()
    }
}

/// The cell across x of a particle at `x0`.
pub(super) fn cell_of(x0: f32, dx: f32) -> i64 {
    (x0 / dx).floor() as i64
}

/// How a decomposed run stands: what [`super::Solver::decomposition`] reports.
#[derive(Clone, Debug, PartialEq)]
pub struct RankReport {
    pub rank: usize,
    pub slabs: Slabs,
    /// Live and dead particles this rank holds.
    pub particles: u32,
    /// Bytes this rank sent in halo exchanges so far.
    pub halo_bytes: u64,
    /// Bytes of particles this rank sent to others so far.
    pub migrated_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_weights_give_even_slabs_at_block_multiples() {
        let s = Slabs::balanced(&[1.0; 64], 4, 8).unwrap();
        assert_eq!(s.cuts, vec![0, 16, 32, 48, 64]);
        let s = Slabs::balanced(&[0.0; 64], 2, 4).unwrap();
        assert_eq!(s.cuts, vec![0, 32, 64]);
    }

    #[test]
    fn weights_on_one_side_pull_the_cuts_there_within_the_minimum_width() {
        let mut w = vec![0.0; 128];
        w[..32].fill(10.0);
        let s = Slabs::balanced(&w, 2, 4).unwrap();
        assert_eq!(s.cuts, vec![0, 16, 128]);
        // Three ranks over 32 loaded cells: near thirds of the load, 8 cells at least.
        let s = Slabs::balanced(&w, 3, 4).unwrap();
        assert_eq!(s.cuts, vec![0, 12, 20, 128]);
        // All weight in the first cells: the first slab shrinks to the minimum.
        let mut w = vec![0.0; 64];
        w[0] = 100.0;
        let s = Slabs::balanced(&w, 2, 8).unwrap();
        assert_eq!(s.cuts, vec![0, 8, 64]);
    }

    #[test]
    fn squeezed_planes_come_back_whole() {
        let cases: [&[u32]; 5] = [&[], &[0, 0, 0], &[5, 6], &[0, 0, 7, 0, 8, 9, 0], &[1, 0, 2]];
        for words in cases {
            let s = squeeze(words);
            assert_eq!(unsqueeze(&s, words.len()).as_deref(), Some(words));
        }
        // A plane with one node in use takes a few words, not the plane.
        let mut plane = vec![0u32; 1000];
        plane[500] = 3;
        assert_eq!(squeeze(&plane), vec![500, 1, 3, 499, 0]);
        assert_eq!(unsqueeze(&[2, 5, 1], 3), None);
        assert_eq!(unsqueeze(&[2, 1, 1], 2), None);
    }

    #[test]
    fn owners_follow_the_cuts_and_clamp_outside() {
        let s = Slabs {
            cuts: vec![0, 16, 40, 64],
        };
        let owners: Vec<usize> = [-3, 0, 15, 16, 39, 40, 63, 70]
            .iter()
            .map(|&c| s.owner(c))
            .collect();
        assert_eq!(owners, vec![0, 0, 0, 1, 1, 2, 2, 2]);
    }

    #[test]
    fn too_many_ranks_for_the_grid_is_an_error_naming_the_need() {
        let e = Slabs::balanced(&[1.0; 32], 5, 8).unwrap_err().to_string();
        assert!(e.contains("5 ranks need at least 40 cells"), "{e}");
    }
}
