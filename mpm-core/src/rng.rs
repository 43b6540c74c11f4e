//! Counter-based random numbers: the same stream for the same (seed, index) on every backend.
//!
//! The hash is PCG-RXS-M-XS as recommended for GPUs by Jarzynski and Olano, "Hash Functions
//! for GPU Rendering", JCGT 9(3), 2020. It is a `#[func]`, so both lowerings share the source.

use crate::func;

/// PCG hash of one word.
#[func]
pub fn pcg_hash(v: u32) -> u32 {
    let state = v * 747796405u32 + 2891336453u32;
    let word = ((state >> ((state >> 28u32) + 4u32)) ^ state) * 277803737u32;
    (word >> 22u32) ^ word
}

/// A random u32 for (seed, index).
#[func]
pub fn rand_u32(seed: u32, index: u32) -> u32 {
    pcg_hash(index + pcg_hash(seed))
}

/// A random f32 in [0, 1) for (seed, index), with 24 random bits.
#[func]
pub fn rand_f32(seed: u32, index: u32) -> f32 {
    (rand_u32(seed, index) >> 8u32) as f32 * (1.0 / 16777216.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_and_deterministic() {
        assert_eq!(rand_u32(7, 3), rand_u32(7, 3));
        let n = 100_000u32;
        let mean: f64 = (0..n).map(|i| rand_f32(42, i) as f64).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert!((0..n).all(|i| (0.0..1.0).contains(&rand_f32(1, i))));
        assert_ne!(rand_u32(1, 0), rand_u32(2, 0));
    }
}
