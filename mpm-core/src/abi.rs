//! What a kernel call hands a backend, word by word: the one place that fixes the layout of
//! scalar parameters, of a GPU launch's push constants and of each loop's index space.
//!
//! * Scalar parameters are packed in parameter order, `Elem::WORDS` 32-bit words each, with
//!   no padding (a vector's components, then a matrix's columns in order).
//! * A GPU launch's push constants are the loop's first index and invocation count
//!   ([`LOOP_WORDS`]), then the scalar words.
//! * `field.indices()` runs over every index, the last axis fastest; `field.active()` over
//!   every element a sparse field can hold (inactive ones are skipped inside the loop).

use crate::backend::LoopRange;
use crate::error::{Error, Result};
use crate::types::{Elem, Ty};
use crate::Field;

/// A launch's status word: 0, or one more than the index of the first field accessed out of
/// bounds, or that with [`INACTIVE_WRITE`] set for a write into an inactive cell of a
/// frozen tree (`Tree::freeze`).
pub const INACTIVE_WRITE: u32 = 1 << 31;

/// The error a launch's status word reports (see [`INACTIVE_WRITE`]), `field(k)` naming
/// field parameter `k`.
pub fn status_error(status: u32, kernel: String, field: impl Fn(usize) -> String) -> Result<()> {
    match status {
        0 => Ok(()),
        s if s & INACTIVE_WRITE != 0 => Err(Error::InactiveWrite {
            kernel,
            field: field((s & !INACTIVE_WRITE) as usize - 1),
        }),
        s => Err(Error::OutOfBounds {
            kernel,
            field: field(s as usize - 1),
        }),
    }
}

/// Push-constant words in front of the scalars: the loop's first index, then its count.
pub const LOOP_WORDS: u32 = 2;

/// Appends a scalar parameter's words (host code that `#[kernel]` generates).
pub fn push_scalar<T: Elem>(out: &mut Vec<u32>, value: &T) {
    let start = out.len();
    out.resize(start + T::WORDS, 0);
    value.write_words(&mut out[start..]);
}

/// Reads scalar parameters back in parameter order (the CPU lowering).
pub struct ScalarReader<'a> {
    words: &'a [u32],
}

impl<'a> ScalarReader<'a> {
    pub fn new(words: &'a [u32]) -> Self {
        ScalarReader { words }
    }

    /// The next parameter. A launch checks the word count first, so this cannot run short.
    pub fn read<T: Elem>(&mut self) -> T {
        let (head, rest) = self.words.split_at(T::WORDS);
        self.words = rest;
        T::read_words(head)
    }
}

/// The word offset of each scalar parameter among the scalar words.
pub fn scalar_offsets(scalars: &[Ty]) -> Vec<u32> {
    scalars
        .iter()
        .scan(0, |off, t| {
            let here = *off;
            *off += t.words();
            Some(here)
        })
        .collect()
}

/// How many words the scalar parameters take.
pub fn scalar_words(scalars: &[Ty]) -> u32 {
    scalars.iter().map(Ty::words).sum()
}

/// The push constants of one parallel loop.
pub fn push_constants(range: &LoopRange, scalars: &[u32]) -> Vec<u32> {
    let mut words = Vec::with_capacity(LOOP_WORDS as usize + scalars.len());
    // A range may start below 0 (`for i in -3..n` over i32): the shader reads it back as int.
    words.push(range.start as u32);
    words.push(range.count as u32);
    words.extend_from_slice(scalars);
    words
}

/// The index space of `field.indices()`.
pub fn indices_range<const D: usize>(shape: &[u32; D]) -> LoopRange {
    LoopRange {
        start: 0,
        count: shape.iter().map(|&s| s as u64).product(),
    }
}

/// The index space of `field.active()`: every element a sparse field can hold, every index
/// of a dense one.
pub fn active_range<T: Elem, const D: usize>(field: &Field<T, D>) -> LoopRange {
    match field.tree() {
        Some(t) => LoopRange {
            start: 0,
            count: t.elements(),
        },
        None => indices_range(&field.shape()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Scalar;
    use crate::Value;
    use glam::{Mat2, Vec3};

    #[test]
    fn scalars_round_trip_in_parameter_order() {
        let mut words = Vec::new();
        push_scalar(&mut words, &1.5f32);
        push_scalar(&mut words, &Vec3::new(1.0, 2.0, 3.0));
        push_scalar(&mut words, &-7i32);
        push_scalar(&mut words, &Mat2::from_cols_array(&[1.0, 2.0, 3.0, 4.0]));
        let tys = [f32::ty(), Vec3::ty(), i32::ty(), Mat2::ty()];
        assert_eq!(scalar_offsets(&tys), vec![0, 1, 4, 5]);
        assert_eq!(scalar_words(&tys), 9);
        assert_eq!(words.len(), 9);
        let mut r = ScalarReader::new(&words);
        assert_eq!(r.read::<f32>(), 1.5);
        assert_eq!(r.read::<Vec3>(), Vec3::new(1.0, 2.0, 3.0));
        assert_eq!(r.read::<i32>(), -7);
        assert_eq!(r.read::<Mat2>().y_axis.y, 4.0);
        assert_eq!(tys[2], Ty::Scalar(Scalar::I32));
    }

    #[test]
    fn push_constants_put_the_range_first() {
        let range = LoopRange {
            start: -3,
            count: 10,
        };
        let p = push_constants(&range, &[7, 8]);
        assert_eq!(p, vec![(-3i32) as u32, 10, 7, 8]);
        assert_eq!(p.len() as u32, LOOP_WORDS + 2);
    }
}
