//! The other processes of a run shared across MPI ranks, as the `mpm` program needs them:
//! outputs gathered on rank 0, decisions (stop, checkpoint) that all ranks take together,
//! figures summed over the ranks. A process alone has no peers (`Option<Peers>` is `None`).

use mpm_core::solver::{Ranks, Result, SolverError};

pub struct Peers {
    ranks: Box<dyn Ranks>,
    make: fn() -> Box<dyn Ranks>,
}

impl Peers {
    /// Peers on the ranks `make` hands out (each call a handle on the same processes).
    pub fn new(make: fn() -> Box<dyn Ranks>) -> Peers {
        Peers {
            ranks: make(),
            make,
        }
    }

    /// Another handle on the same ranks, for a solver to decompose on.
    pub fn ranks(&self) -> Box<dyn Ranks> {
        (self.make)()
    }

    pub fn rank(&self) -> usize {
        self.ranks.rank()
    }

    pub fn size(&self) -> usize {
        self.ranks.size()
    }

    /// Rank 0 writes the outputs.
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// Every rank's `words`, in rank order, on rank 0; `None` on the others.
    pub fn gather(&self, words: Vec<u32>) -> Result<Option<Vec<Vec<u32>>>> {
        let mut to = vec![Vec::new(); self.size()];
        to[0] = words;
        let from = self.ranks.exchange(to)?;
        Ok(self.is_root().then_some(from))
    }

    /// Whether any rank says yes.
    pub fn any(&self, yes: bool) -> Result<bool> {
        Ok(self.ranks.max(f64::from(u8::from(yes)))? > 0.0)
    }

    /// Each value summed over the ranks.
    pub fn sum(&self, values: &mut [f64]) -> Result<()> {
        self.ranks.sum(values)
    }

    /// The largest value of any rank.
    pub fn max(&self, value: f64) -> Result<f64> {
        self.ranks.max(value)
    }
}

/// Whether this process writes the outputs and prints: alone, or rank 0 of a run.
pub fn writes_outputs(peers: Option<&Peers>) -> bool {
    peers.is_none_or(Peers::is_root)
}

/// Where a rank runs among those on its machine: the Vulkan device it takes (`None`: as a
/// process alone would choose) and how many ranks share the machine's cores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub device: Option<String>,
    pub ranks_on_machine: usize,
}

/// A frame's particles as one rank sends them to rank 0: positions, velocities, material
/// ids and the colouring's values (empty when the colouring needs none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameParticles<const D: usize> {
    pub x: Vec<[f32; D]>,
    pub v: Vec<[f32; D]>,
    pub materials: Vec<i32>,
    pub values: Vec<f32>,
}

impl<const D: usize> FrameParticles<D> {
    fn to_words(&self) -> Vec<u32> {
        let mut w = vec![self.x.len() as u32, self.values.len() as u32];
        w.extend(self.x.iter().flatten().map(|c| c.to_bits()));
        w.extend(self.v.iter().flatten().map(|c| c.to_bits()));
        w.extend(self.materials.iter().map(|&m| m as u32));
        w.extend(self.values.iter().map(|c| c.to_bits()));
        w
    }

    fn append_words(&mut self, w: &[u32]) -> Option<()> {
        let (&n, rest) = w.split_first()?;
        let (&k, rest) = rest.split_first()?;
        let (n, k) = (n as usize, k as usize);
        if rest.len() != n * (2 * D + 1) + k || (k != 0 && k != n) {
            return None;
        }
        let (x, rest) = rest.split_at(n * D);
        let (v, rest) = rest.split_at(n * D);
        let (m, values) = rest.split_at(n);
        let vector = |c: &[u32]| std::array::from_fn(|a| f32::from_bits(c[a]));
        self.x.extend(x.chunks_exact(D).map(vector));
        self.v.extend(v.chunks_exact(D).map(vector));
        self.materials.extend(m.iter().map(|&m| m as i32));
        self.values
            .extend(values.iter().map(|&c| f32::from_bits(c)));
        Some(())
    }

    /// Every rank's particles on rank 0 (`None` on the others); alone, these.
    pub fn gather(self, peers: Option<&Peers>) -> Result<Option<FrameParticles<D>>> {
        let Some(peers) = peers else {
            return Ok(Some(self));
        };
        let Some(parts) = peers.gather(self.to_words())? else {
            return Ok(None);
        };
        let mut all = FrameParticles::default();
        for (rank, words) in parts.iter().enumerate() {
            all.append_words(words).ok_or_else(|| {
                SolverError::InvalidParameter(format!(
                    "rank {rank} sent a frame of {} words that is no whole set of particles",
                    words.len()
                ))
            })?;
        }
        Ok(Some(all))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_go_through_words_whole() {
        let f = FrameParticles::<2> {
            x: vec![[0.5, 0.25], [1.0, -2.0]],
            v: vec![[3.0, 4.0], [-1.5, 0.0]],
            materials: vec![0, -3],
            values: vec![7.0, 8.0],
        };
        let mut back = FrameParticles::default();
        back.append_words(&f.to_words()).expect("whole");
        back.append_words(&FrameParticles::<2>::default().to_words())
            .expect("an empty rank");
        assert_eq!(back, f);
        assert!(back.append_words(&f.to_words()[..5]).is_none());
    }
}
