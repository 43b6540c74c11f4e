//! Element types of the kernel language and their IR types.
//!
//! Every storable value is made of 32-bit words (f32, i32, u32, bool as 0/1), so both backends
//! keep fields as plain word arrays and convert with bit casts.

use glam::{IVec2, IVec3, Mat2, Mat3, UVec2, UVec3, Vec2, Vec3, Vec4};

/// The scalar kinds of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    F32,
    I32,
    U32,
    Bool,
}

/// The IR type of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Scalar(Scalar),
    /// A vector of 2 to 4 scalars.
    Vector(Scalar, u8),
    /// A square column-major f32 matrix of size 2 or 3.
    Matrix(u8),
    /// A local fixed-size array.
    Array(Box<Ty>, u32),
    /// A tuple (returned by funcs such as `svd`).
    Tuple(Vec<Ty>),
}

impl Ty {
    pub const F32: Ty = Ty::Scalar(Scalar::F32);
    pub const I32: Ty = Ty::Scalar(Scalar::I32);
    pub const U32: Ty = Ty::Scalar(Scalar::U32);
    pub const BOOL: Ty = Ty::Scalar(Scalar::Bool);

    /// The scalar kind that the components of this type have (None for arrays and tuples).
    pub fn scalar(&self) -> Option<Scalar> {
        match self {
            Ty::Scalar(s) | Ty::Vector(s, _) => Some(*s),
            Ty::Matrix(_) => Some(Scalar::F32),
            _ => None,
        }
    }

    /// Number of 32-bit words a value of this type occupies in a field.
    pub fn words(&self) -> u32 {
        match self {
            Ty::Scalar(_) => 1,
            Ty::Vector(_, n) => *n as u32,
            Ty::Matrix(n) => (*n as u32) * (*n as u32),
            Ty::Array(t, n) => t.words() * n,
            Ty::Tuple(ts) => ts.iter().map(Ty::words).sum(),
        }
    }
}

/// A type that can be a value inside a kernel (elements, local arrays, tuples).
pub trait Value: Copy + 'static {
    fn ty() -> Ty;
}

/// A type that can be stored in a field or passed as a scalar kernel parameter.
pub trait Elem: Value + PartialEq + std::fmt::Debug + Send + Sync {
    /// Number of 32-bit words per element.
    const WORDS: usize;
    /// The scalar kind of every word.
    const SCALAR: Scalar;
    fn write_words(&self, out: &mut [u32]);
    fn read_words(words: &[u32]) -> Self;
    /// All words zero (unlike glam's `Default`, which makes matrices the identity).
    fn zero() -> Self {
        Self::read_words(&[0u32; 16][..Self::WORDS])
    }
}

impl Elem for f32 {
    const WORDS: usize = 1;
    const SCALAR: Scalar = Scalar::F32;
    #[inline(always)]
    fn write_words(&self, out: &mut [u32]) {
        out[0] = self.to_bits();
    }
    #[inline(always)]
    fn read_words(w: &[u32]) -> Self {
        f32::from_bits(w[0])
    }
}
impl Elem for i32 {
    const WORDS: usize = 1;
    const SCALAR: Scalar = Scalar::I32;
    #[inline(always)]
    fn write_words(&self, out: &mut [u32]) {
        out[0] = *self as u32;
    }
    #[inline(always)]
    fn read_words(w: &[u32]) -> Self {
        w[0] as i32
    }
}
impl Elem for u32 {
    const WORDS: usize = 1;
    const SCALAR: Scalar = Scalar::U32;
    #[inline(always)]
    fn write_words(&self, out: &mut [u32]) {
        out[0] = *self;
    }
    #[inline(always)]
    fn read_words(w: &[u32]) -> Self {
        w[0]
    }
}
impl Elem for bool {
    const WORDS: usize = 1;
    const SCALAR: Scalar = Scalar::Bool;
    #[inline(always)]
    fn write_words(&self, out: &mut [u32]) {
        out[0] = *self as u32;
    }
    #[inline(always)]
    fn read_words(w: &[u32]) -> Self {
        w[0] != 0
    }
}

impl Value for f32 {
    fn ty() -> Ty {
        Ty::F32
    }
}
impl Value for i32 {
    fn ty() -> Ty {
        Ty::I32
    }
}
impl Value for u32 {
    fn ty() -> Ty {
        Ty::U32
    }
}
impl Value for bool {
    fn ty() -> Ty {
        Ty::BOOL
    }
}

macro_rules! vector_elem {
    ($t:ty, $s:ident, $n:expr, $comp:ty, [$($f:ident),*]) => {
        impl Value for $t {
            fn ty() -> Ty {
                Ty::Vector(Scalar::$s, $n)
            }
        }
        impl Elem for $t {
            const WORDS: usize = $n;
            const SCALAR: Scalar = Scalar::$s;
            #[inline(always)]
    fn write_words(&self, out: &mut [u32]) {
                let mut k = 0;
                $( self.$f.write_words(&mut out[k..]); k += 1; )*
                let _ = k;
            }
            #[inline(always)]
    fn read_words(w: &[u32]) -> Self {
                let mut k = 0;
                $( let $f = <$comp>::read_words(&w[k..]); k += 1; )*
                let _ = k;
                <$t>::new($($f),*)
            }
        }
    };
}
vector_elem!(Vec2, F32, 2, f32, [x, y]);
vector_elem!(Vec3, F32, 3, f32, [x, y, z]);
vector_elem!(Vec4, F32, 4, f32, [x, y, z, w]);
vector_elem!(IVec2, I32, 2, i32, [x, y]);
vector_elem!(IVec3, I32, 3, i32, [x, y, z]);
vector_elem!(UVec2, U32, 2, u32, [x, y]);
vector_elem!(UVec3, U32, 3, u32, [x, y, z]);

macro_rules! matrix_elem {
    ($t:ty, $n:expr) => {
        impl Value for $t {
            fn ty() -> Ty {
                Ty::Matrix($n)
            }
        }
        impl Elem for $t {
            const WORDS: usize = $n * $n;
            const SCALAR: Scalar = Scalar::F32;
            #[inline(always)]
            fn write_words(&self, out: &mut [u32]) {
                for (o, v) in out.iter_mut().zip(self.to_cols_array()) {
                    *o = v.to_bits();
                }
            }
            #[inline(always)]
            fn read_words(w: &[u32]) -> Self {
                let mut a = [0.0f32; $n * $n];
                for (d, s) in a.iter_mut().zip(w) {
                    *d = f32::from_bits(*s);
                }
                <$t>::from_cols_array(&a)
            }
        }
    };
}
matrix_elem!(Mat2, 2);
matrix_elem!(Mat3, 3);

impl<T: Value, const N: usize> Value for [T; N] {
    fn ty() -> Ty {
        Ty::Array(Box::new(T::ty()), N as u32)
    }
}
impl<A: Value, B: Value> Value for (A, B) {
    fn ty() -> Ty {
        Ty::Tuple(vec![A::ty(), B::ty()])
    }
}
impl<A: Value, B: Value, C: Value> Value for (A, B, C) {
    fn ty() -> Ty {
        Ty::Tuple(vec![A::ty(), B::ty(), C::ty()])
    }
}

/// Packs a slice of elements into words.
pub fn to_words<T: Elem>(values: &[T]) -> Vec<u32> {
    let mut out = vec![0u32; values.len() * T::WORDS];
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(T::WORDS.max(1))) {
        v.write_words(chunk);
    }
    out
}

/// Unpacks words into elements.
pub fn from_words<T: Elem>(words: &[u32]) -> Vec<T> {
    words.chunks_exact(T::WORDS).map(T::read_words).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        let m = Mat3::from_cols_array(&[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        assert_eq!(from_words::<Mat3>(&to_words(&[m])), vec![m]);
        let v = [IVec3::new(-1, 2, -3), IVec3::new(4, -5, 6)];
        assert_eq!(from_words::<IVec3>(&to_words(&v)), v.to_vec());
        assert_eq!(
            from_words::<bool>(&to_words(&[true, false])),
            vec![true, false]
        );
        assert_eq!(<[Vec2; 3]>::ty().words(), 6);
    }
}
