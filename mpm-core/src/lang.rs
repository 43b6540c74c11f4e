//! The CPU lowering's runtime: operators, conversions and indexing with the language's
//! semantics (the builtin functions are in [`crate::builtins`]).
//!
//! Integer arithmetic wraps and division by zero gives 0, as on the GPU backend; the
//! operator implementations are generated together with the traced ones in `trace.rs` from
//! one table, so both lowerings accept exactly the same type combinations.

pub use crate::linalg::{polar, svd};

use glam::{IVec2, IVec3, Mat2, Mat3, UVec2, UVec3, Vec2, Vec3, Vec4};

macro_rules! binary_trait {
    ($tr:ident, $f:ident, $message:literal) => {
        #[doc = concat!("The `", stringify!($f), "` operator of the kernel language.")]
        #[diagnostic::on_unimplemented(
            message = $message,
            label = "both sides need the same scalar type, or a vector or matrix and its scalar; convert with `as`",
            note = "the language has no implicit conversions: an i32 and a u32, or an f32 and an integer, do not mix"
        )]
        pub trait $tr<R> {
            type Output;
            fn apply(self, rhs: R) -> Self::Output;
        }
        #[doc = concat!("`", stringify!($f), "` with the kernel language's semantics.")]
        #[inline(always)]
        pub fn $f<L: $tr<R>, R>(l: L, r: R) -> L::Output {
            l.apply(r)
        }
    };
}
binary_trait!(
    KAdd,
    add,
    "`{Self} + {R}` is not part of the kernel language"
);
binary_trait!(
    KSub,
    sub,
    "`{Self} - {R}` is not part of the kernel language"
);
binary_trait!(
    KMul,
    mul,
    "`{Self} * {R}` is not part of the kernel language"
);
binary_trait!(
    KDiv,
    div,
    "`{Self} / {R}` is not part of the kernel language"
);
binary_trait!(
    KRem,
    rem,
    "`{Self} % {R}` is not part of the kernel language"
);
binary_trait!(
    KBitAnd,
    bitand,
    "`{Self} & {R}` is not part of the kernel language"
);
binary_trait!(
    KBitOr,
    bitor,
    "`{Self} | {R}` is not part of the kernel language"
);
binary_trait!(
    KBitXor,
    bitxor,
    "`{Self} ^ {R}` is not part of the kernel language"
);
binary_trait!(
    KShl,
    shl,
    "`{Self} << {R}` is not part of the kernel language"
);
binary_trait!(
    KShr,
    shr,
    "`{Self} >> {R}` is not part of the kernel language"
);

/// `-a` (wrapping on integers).
pub trait KNeg {
    fn kneg(self) -> Self;
}
#[inline(always)]
pub fn neg<T: KNeg>(a: T) -> T {
    a.kneg()
}
macro_rules! kneg_native {
    ($($t:ty),*) => {$(impl KNeg for $t { #[inline(always)] fn kneg(self) -> Self { -self } })*};
}
kneg_native!(f32, Vec2, Vec3, Vec4, Mat2, Mat3);
impl KNeg for i32 {
    #[inline(always)]
    fn kneg(self) -> Self {
        self.wrapping_neg()
    }
}
impl KNeg for IVec2 {
    #[inline(always)]
    fn kneg(self) -> Self {
        IVec2::new(self.x.wrapping_neg(), self.y.wrapping_neg())
    }
}
impl KNeg for IVec3 {
    #[inline(always)]
    fn kneg(self) -> Self {
        IVec3::new(
            self.x.wrapping_neg(),
            self.y.wrapping_neg(),
            self.z.wrapping_neg(),
        )
    }
}

/// Scalars and vectors, viewed component by component.
pub trait Components: Copy {
    type S: Copy;
    fn map(self, f: impl Fn(Self::S) -> Self::S) -> Self;
    fn zip(self, o: Self, f: impl Fn(Self::S, Self::S) -> Self::S) -> Self;
}
macro_rules! scalar_components {
    ($($t:ty),*) => {$(
        impl Components for $t {
            type S = $t;
            #[inline(always)]
            fn map(self, f: impl Fn($t) -> $t) -> Self { f(self) }
            #[inline(always)]
            fn zip(self, o: Self, f: impl Fn($t, $t) -> $t) -> Self { f(self, o) }
        }
    )*};
}
scalar_components!(f32, i32, u32);
macro_rules! vector_components {
    ($($v:ty, $s:ty, [$($c:ident),*]);*) => {$(
        impl Components for $v {
            type S = $s;
            #[inline(always)]
            fn map(self, f: impl Fn($s) -> $s) -> Self { <$v>::new($(f(self.$c)),*) }
            #[inline(always)]
            fn zip(self, o: Self, f: impl Fn($s, $s) -> $s) -> Self { <$v>::new($(f(self.$c, o.$c)),*) }
        }
    )*};
}
vector_components!(Vec2, f32, [x, y]; Vec3, f32, [x, y, z]; Vec4, f32, [x, y, z, w];
    IVec2, i32, [x, y]; IVec3, i32, [x, y, z]; UVec2, u32, [x, y]; UVec3, u32, [x, y, z]);

/// f32 and float vectors.
pub trait Float: Components<S = f32> {}
impl Float for f32 {}
impl Float for Vec2 {}
impl Float for Vec3 {}
impl Float for Vec4 {}

/// Scalar semantics shared by abs / min / max / clamp / sign.
pub trait NumScalar: Copy + PartialOrd {
    fn abs_(self) -> Self;
    fn sign_(self) -> Self;
}
impl NumScalar for f32 {
    fn abs_(self) -> Self {
        self.abs()
    }
    fn sign_(self) -> Self {
        if self > 0.0 {
            1.0
        } else if self < 0.0 {
            -1.0
        } else {
            0.0
        }
    }
}
impl NumScalar for i32 {
    fn abs_(self) -> Self {
        self.wrapping_abs()
    }
    fn sign_(self) -> Self {
        self.signum()
    }
}
impl NumScalar for u32 {
    fn abs_(self) -> Self {
        self
    }
    fn sign_(self) -> Self {
        (self > 0) as u32
    }
}

/// Scalars and vectors of numbers: what `abs`, `sign`, `min`, `max` and `clamp` take.
pub trait Num: Components<S: NumScalar> {}
impl<T: Components<S: NumScalar>> Num for T {}

/// Float vectors with their geometric operations and component reductions (summed and
/// multiplied left to right, as the GPU helpers do: the order is part of the result).
pub trait FloatVec: Float {
    fn dot_(self, o: Self) -> f32;
    fn sum_(self) -> f32;
    fn product_(self) -> f32;
}
macro_rules! float_vec {
    ($($v:ty: $first:ident $(, $c:ident)*);*) => {$(
        impl FloatVec for $v {
            #[inline(always)]
            fn dot_(self, o: Self) -> f32 {
                self.dot(o)
            }
            #[inline(always)]
            fn sum_(self) -> f32 {
                self.$first $(+ self.$c)*
            }
            #[inline(always)]
            fn product_(self) -> f32 {
                self.$first $(* self.$c)*
            }
        }
    )*};
}
float_vec!(Vec2: x, y; Vec3: x, y, z; Vec4: x, y, z, w);

/// Square matrices.
pub trait Matrix: Copy {
    type V;
    fn transpose_(self) -> Self;
    fn inverse_(self) -> Self;
    fn determinant_(self) -> f32;
    fn trace_(self) -> f32;
}
impl Matrix for Mat2 {
    type V = Vec2;
    fn transpose_(self) -> Self {
        self.transpose()
    }
    fn inverse_(self) -> Self {
        self.inverse()
    }
    fn determinant_(self) -> f32 {
        self.determinant()
    }
    fn trace_(self) -> f32 {
        self.x_axis.x + self.y_axis.y
    }
}
impl Matrix for Mat3 {
    type V = Vec3;
    fn transpose_(self) -> Self {
        self.transpose()
    }
    fn inverse_(self) -> Self {
        self.inverse()
    }
    fn determinant_(self) -> f32 {
        self.determinant()
    }
    fn trace_(self) -> f32 {
        self.x_axis.x + self.y_axis.y + self.z_axis.z
    }
}

/// Vectors with an outer product.
pub trait Outer: Copy {
    type M;
    fn outer_(self, b: Self) -> Self::M;
}
impl Outer for Vec2 {
    type M = Mat2;
    fn outer_(self, b: Self) -> Mat2 {
        Mat2::from_cols(self * b.x, self * b.y)
    }
}
impl Outer for Vec3 {
    type M = Mat3;
    fn outer_(self, b: Self) -> Mat3 {
        Mat3::from_cols(self * b.x, self * b.y, self * b.z)
    }
}

#[inline(always)]
pub fn select<T>(c: bool, a: T, b: T) -> T {
    if c {
        a
    } else {
        b
    }
}

// Constructors
pub use glam::{ivec2, ivec3, uvec2, uvec3, vec2, vec3, vec4};
#[inline(always)]
pub fn mat2(c0: Vec2, c1: Vec2) -> Mat2 {
    Mat2::from_cols(c0, c1)
}
#[inline(always)]
pub fn mat3(c0: Vec3, c1: Vec3, c2: Vec3) -> Mat3 {
    Mat3::from_cols(c0, c1, c2)
}
/// Vectors built from one scalar.
pub trait Splat: Components {
    fn splat_(s: Self::S) -> Self;
}
macro_rules! splat_impl {
    ($($v:ty),*) => {$(impl Splat for $v { fn splat_(s: Self::S) -> Self { <$v>::splat(s) } })*};
}
splat_impl!(Vec2, Vec3, Vec4, IVec2, IVec3, UVec2, UVec3);
#[inline(always)]
pub fn splat<T: Splat>(s: T::S) -> T {
    T::splat_(s)
}
/// Diagonal matrices.
pub trait Diagonal: Matrix {
    fn from_diagonal_(d: Self::V) -> Self;
}
impl Diagonal for Mat2 {
    fn from_diagonal_(d: Vec2) -> Self {
        Mat2::from_diagonal(d)
    }
}
impl Diagonal for Mat3 {
    fn from_diagonal_(d: Vec3) -> Self {
        Mat3::from_diagonal(d)
    }
}
#[inline(always)]
pub fn from_diagonal<M: Diagonal>(d: M::V) -> M {
    M::from_diagonal_(d)
}

/// Component-wise vector conversion to `T` (Rust `as` per component).
pub trait CastVec<T> {
    fn cast(self) -> T;
}
macro_rules! cast_vec {
    ($t:ty, $s:ty, $cs:tt: $($from:ty),*) => {$(cast_vec!(@one $t, $s, $from, $cs);)*};
    (@one $t:ty, $s:ty, $from:ty, [$($c:ident),*]) => {
        impl CastVec<$t> for $from {
            #[inline(always)]
            fn cast(self) -> $t {
                <$t>::new($(self.$c as $s),*)
            }
        }
    };
}
cast_vec!(Vec2, f32, [x, y]: IVec2, UVec2, Vec2);
cast_vec!(IVec2, i32, [x, y]: Vec2, UVec2, IVec2);
cast_vec!(UVec2, u32, [x, y]: Vec2, IVec2, UVec2);
cast_vec!(Vec3, f32, [x, y, z]: IVec3, UVec3, Vec3);
cast_vec!(IVec3, i32, [x, y, z]: Vec3, UVec3, IVec3);
cast_vec!(UVec3, u32, [x, y, z]: Vec3, IVec3, UVec3);
macro_rules! as_fns {
    ($($f:ident -> $t:ty),*) => {$(
        #[doc = concat!("Converts to `", stringify!($t), "` component-wise.")]
        #[inline(always)]
        pub fn $f<V: CastVec<$t>>(v: V) -> $t {
            v.cast()
        }
    )*};
}
as_fns!(as_vec2 -> Vec2, as_ivec2 -> IVec2, as_uvec2 -> UVec2, as_vec3 -> Vec3, as_ivec3 -> IVec3, as_uvec3 -> UVec3);

/// `floor` for f32, one instruction where the target has one: SSE4.1's `roundss` (the
/// builds for this machine, `.cargo/config.toml`), AArch64's `frintm`. Baseline x86-64
/// (SSE2) has none, and there `f32::floor` calls libm's `floorf` (3% of mpm99's CPU time in
/// its stencil), so it truncates instead: below zero a non-integer goes one further down;
/// floats of magnitude 2^23 and more, infinities and NaN are integers (or NaN) already. That
/// form costs a round trip through an integer register and a branch on the stencil's
/// critical path, where `roundss` costs one instruction (mpm99's substep, alternating runs:
/// see README). Bit for bit `floorf` either way, the sign of zero included.
#[inline(always)]
pub fn floor_f32(x: f32) -> f32 {
    #[cfg(any(not(target_arch = "x86_64"), target_feature = "sse4.1"))]
    {
        x.floor()
    }
    #[cfg(all(target_arch = "x86_64", not(target_feature = "sse4.1")))]
    {
        floor_by_truncation(x)
    }
}

/// [`floor_f32`] from truncation, for targets without a rounding instruction (and the
/// tests, which hold it to `f32::floor` on every target).
#[inline(always)]
#[cfg(any(test, all(target_arch = "x86_64", not(target_feature = "sse4.1"))))]
pub(crate) fn floor_by_truncation(x: f32) -> f32 {
    if x.abs() < 8_388_608.0 {
        let t = x as i32 as f32;
        if t > x {
            t - 1.0
        } else if t == x {
            x
        } else {
            t
        }
    } else {
        x
    }
}

/// Index types for local arrays, vectors and matrices.
pub trait LocalIndex: Copy {
    fn clamped(self, len: usize) -> usize;
}
impl LocalIndex for i32 {
    #[inline(always)]
    fn clamped(self, len: usize) -> usize {
        (self.max(0) as usize).min(len - 1)
    }
}
impl LocalIndex for u32 {
    #[inline(always)]
    fn clamped(self, len: usize) -> usize {
        (self as usize).min(len - 1)
    }
}

/// Values that `a[i]` indexes (the index is clamped into range, as on the GPU). The impls
/// are inlined always: kernels in other crates index weights and vectors in their inner
/// loops, where a call per access cost mpm3d 9% of its CPU time.
pub trait Indexable {
    type Item: Copy;
    fn at(&self, i: usize) -> Self::Item;
    fn at_mut(&mut self, i: usize) -> &mut Self::Item;
    fn len_() -> usize;
}
impl<T: Copy, const N: usize> Indexable for [T; N] {
    type Item = T;
    #[inline(always)]
    fn at(&self, i: usize) -> T {
        self[i]
    }
    #[inline(always)]
    fn at_mut(&mut self, i: usize) -> &mut T {
        &mut self[i]
    }
    #[inline(always)]
    fn len_() -> usize {
        N
    }
}
macro_rules! vector_indexable {
    ($($v:ty, $s:ty, $n:expr);*) => {$(
        impl Indexable for $v {
            type Item = $s;
            // Through the components as an array: an indexed load, where glam's `Index`
            // matches on the index (a branch per component in a stencil loop's weights).
            #[inline(always)]
            fn at(&self, i: usize) -> $s { AsRef::<[$s; $n]>::as_ref(self)[i] }
            #[inline(always)]
            fn at_mut(&mut self, i: usize) -> &mut $s { &mut AsMut::<[$s; $n]>::as_mut(self)[i] }
            #[inline(always)]
            fn len_() -> usize { $n }
        }
    )*};
}
vector_indexable!(Vec2, f32, 2; Vec3, f32, 3; Vec4, f32, 4; IVec2, i32, 2; IVec3, i32, 3; UVec2, u32, 2; UVec3, u32, 3);
impl Indexable for Mat2 {
    type Item = Vec2;
    #[inline(always)]
    fn at(&self, i: usize) -> Vec2 {
        self.col(i)
    }
    #[inline(always)]
    fn at_mut(&mut self, i: usize) -> &mut Vec2 {
        self.col_mut(i)
    }
    #[inline(always)]
    fn len_() -> usize {
        2
    }
}
impl Indexable for Mat3 {
    type Item = Vec3;
    #[inline(always)]
    fn at(&self, i: usize) -> Vec3 {
        self.col(i)
    }
    #[inline(always)]
    fn at_mut(&mut self, i: usize) -> &mut Vec3 {
        self.col_mut(i)
    }
    #[inline(always)]
    fn len_() -> usize {
        3
    }
}
/// `a[i]`.
#[inline(always)]
pub fn index<T: Indexable>(a: T, i: impl LocalIndex) -> T::Item {
    a.at(i.clamped(T::len_()))
}
/// Bytes a block loop's shared array may take: GPUs give a workgroup 32 to 64 KiB (checked
/// per device at launch), and on the CPU the array lives on a worker's stack.
pub const MAX_SHARED_BYTES: usize = 1 << 20;

/// A block's shared array on the CPU (the worker's own: one worker runs the whole block);
/// one larger than [`MAX_SHARED_BYTES`] does not compile, rather than overflow the stack.
#[inline(always)]
pub fn shared_array<T, const N: usize>(a: [T; N]) -> [T; N] {
    const {
        assert!(
            N * std::mem::size_of::<T>() <= MAX_SHARED_BYTES,
            "a shared array takes at most 1 MiB (GPUs allow 32 to 64 KiB per block)"
        )
    };
    a
}

/// `a[i]` read in place (a block's shared array, which may be too large to copy per read).
#[inline(always)]
pub fn index_ref<T: Indexable>(a: &T, i: impl LocalIndex) -> T::Item {
    a.at(i.clamped(T::len_()))
}
/// The place `a[i]`.
#[inline(always)]
pub fn index_mut<T: Indexable>(a: &mut T, i: impl LocalIndex) -> &mut T::Item {
    a.at_mut(i.clamped(T::len_()))
}
