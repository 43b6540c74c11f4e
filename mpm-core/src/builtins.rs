//! The kernel language's builtin functions, one table row each.
//!
//! A builtin has the shape of a `#[func]`: a plain function (the CPU lowering calls it) and a
//! module of the same name whose `expand` traces a call (the GPU lowering). The macro lowers
//! every call `f(a, b)` the same way, as `f(a, b)` or `f::expand(a, b)` with this module
//! glob-imported into the body, so it needs no list of builtin names; methods (`x.floor()`)
//! are calls of [`methods`].
//!
//! Adding a builtin that the IR carries (say `tanh`) is one row of the table below (its IR
//! variant, its CPU semantics, its method name if it has one), one arm in the GLSL printer
//! (`mpm-vulkan/src/glsl.rs`, checked by the compiler) and one case in `tests/equivalence.rs`.
//! The CPU body is the language's definition; the GPU must agree with it.

use glam::Vec3;

use crate::lang::{floor_f32, Float, FloatVec, Matrix, Num, NumScalar, Outer};

/// Builtins that are not IR calls (they trace to constructions, selects, casts and funcs):
/// the CPU function from `lang`, the tracer from `trace`.
macro_rules! lowered_elsewhere {
    ($($name:ident),*) => {$(
        pub use crate::lang::$name;
        #[doc(hidden)]
        pub mod $name {
            pub use crate::lang::$name as cpu;
            pub use crate::trace::$name as expand;
        }
    )*};
}

/// One table row: `Variant name[.method] <generics>(args) -> ret { CPU body }`.
macro_rules! builtins {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $name:ident $(.$method:ident)?
        <$($g:ident: $bound:ident),*> ($($arg:ident: $aty:ty),*) -> $ret:ty { $($body:tt)* }
    )*) => {
        /// The builtin functions the IR carries (see [`crate::builtins`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Builtin {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Builtin {
            /// Every builtin, in table order.
            pub const ALL: &'static [Builtin] = &[$(Builtin::$variant),*];

            /// The name kernels call it by.
            pub fn name(self) -> &'static str {
                match self {
                    $(Builtin::$variant => stringify!($name),)*
                }
            }
        }

        $(
            $(#[doc = $doc])*
            #[inline(always)]
            pub fn $name<$($g: $bound),*>($($arg: $aty),*) -> $ret { $($body)* }

            #[doc(hidden)]
            pub mod $name {
                #[allow(unused_imports)]
                use glam::{Mat2, Mat3, Vec2, Vec3, Vec4};
                #[allow(unused_imports)]
                use crate::trace::{Expr, Float, FloatVec, IntoExpr, Matrix, Num, Outer};

                /// The CPU function, as method calls reach it (so that a method that does
                /// not exist is one error, not one per lowering).
                #[inline(always)]
                pub fn cpu<$($g: crate::lang::$bound),*>($($arg: $aty),*) -> $ret {
                    super::$name($($arg),*)
                }

                /// Traces a call (the GPU lowering).
                pub fn expand<$($g: $bound),*>($($arg: impl IntoExpr<$aty>),*) -> Expr<$ret> {
                    crate::trace::builtin(super::Builtin::$variant, vec![$($arg.into_expr().id()),*])
                }
            }
        )*

        /// The methods of the kernel language (`x.floor()` means `floor(x)`).
        pub mod methods {
            $($(pub use super::$name as $method;)?)*
            lowered_elsewhere!(as_vec2, as_ivec2, as_uvec2, as_vec3, as_ivec3, as_uvec3);
            pub use crate::lang::index as col;
            #[doc(hidden)]
            pub mod col {
                pub use crate::lang::index as cpu;
                pub use crate::trace::index as expand;
            }
        }
    };
}

builtins! {
    Abs abs.abs <T: Num>(a: T) -> T { a.map(NumScalar::abs_) }
    Floor floor.floor <T: Float>(a: T) -> T { a.map(floor_f32) }
    Ceil ceil.ceil <T: Float>(a: T) -> T { a.map(f32::ceil) }
    /// Rounds half away from zero (Rust's `round`).
    Round round.round <T: Float>(a: T) -> T { a.map(f32::round) }
    /// `x - floor(x)`.
    Fract fract.fract <T: Float>(a: T) -> T { a.map(|x| x - floor_f32(x)) }
    Sqrt sqrt.sqrt <T: Float>(a: T) -> T { a.map(f32::sqrt) }
    Exp exp.exp <T: Float>(a: T) -> T { a.map(f32::exp) }
    /// Natural logarithm.
    Ln ln.ln <T: Float>(a: T) -> T { a.map(f32::ln) }
    /// `powf`, with C99's `pow(x, 0) = pow(1, y) = 1` for every `x` and `y`, signaling NaNs
    /// included (where C libraries differ).
    Pow pow.powf <T: Float>(a: T, b: T) -> T {
        a.zip(b, |x, y| if y == 0.0 || x == 1.0 { 1.0 } else { x.powf(y) })
    }
    Sin sin.sin <T: Float>(a: T) -> T { a.map(f32::sin) }
    Cos cos.cos <T: Float>(a: T) -> T { a.map(f32::cos) }
    Tan tan.tan <T: Float>(a: T) -> T { a.map(f32::tan) }
    Tanh tanh.tanh <T: Float>(a: T) -> T { a.map(f32::tanh) }
    /// `atan2(y, x)`.
    Atan2 atan2.atan2 <T: Float>(y: T, x: T) -> T { y.zip(x, f32::atan2) }
    Min min.min <T: Num>(a: T, b: T) -> T { a.zip(b, |x, y| if y < x { y } else { x }) }
    Max max.max <T: Num>(a: T, b: T) -> T { a.zip(b, |x, y| if y > x { y } else { x }) }
    /// `min(max(a, lo), hi)`, as GLSL defines it.
    Clamp clamp.clamp <T: Num>(a: T, lo: T, hi: T) -> T { min(max(a, lo), hi) }
    /// -1, 0 or 1 (0 for 0.0).
    Sign sign.signum <T: Num>(a: T) -> T { a.map(NumScalar::sign_) }
    Length length.length <T: FloatVec>(a: T) -> f32 { a.dot_(a).sqrt() }
    Normalize normalize.normalize <T: FloatVec>(a: T) -> T {
        let inv = 1.0 / length(a);
        a.map(|c| c * inv)
    }
    Dot dot.dot <T: FloatVec>(a: T, b: T) -> f32 { a.dot_(b) }
    /// The sum of a vector's components, left to right.
    Sum sum <T: FloatVec>(a: T) -> f32 { a.sum_() }
    /// The product of a vector's components, left to right.
    Product product <T: FloatVec>(a: T) -> f32 { a.product_() }
    Cross cross.cross <>(a: Vec3, b: Vec3) -> Vec3 { a.cross(b) }
    /// `a * b^T`.
    Outer outer <T: Outer>(a: T, b: T) -> T::M { a.outer_(b) }
    Transpose transpose.transpose <M: Matrix>(m: M) -> M { m.transpose_() }
    Determinant determinant.determinant <M: Matrix>(m: M) -> f32 { m.determinant_() }
    Inverse inverse.inverse <M: Matrix>(m: M) -> M { m.inverse_() }
    Trace trace <M: Matrix>(m: M) -> f32 { m.trace_() }
    /// An f32's bits as a u32.
    FloatToBits to_bits.to_bits <>(a: f32) -> u32 { a.to_bits() }
    /// The f32 with a u32's bits.
    FloatFromBits from_bits <>(a: u32) -> f32 { f32::from_bits(a) }
}

lowered_elsewhere!(select, vec2, vec3, vec4, ivec2, ivec3, uvec2, uvec3, mat2, mat3, svd, polar);

// Funcs written in the language itself.
pub use crate::rng::{rand_f32, rand_u32};

#[cfg(test)]
mod tests {
    #[test]
    fn floor_is_libms_bit_for_bit() {
        let mut values = vec![
            0.0f32,
            -0.0,
            0.5,
            -0.5,
            1.0,
            -1.0,
            2.5,
            -2.5,
            8388607.5,
            -8388607.5,
            8388608.0,
            -8388609.0,
            1e30,
            -1e30,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        // And a spread of bit patterns over the whole range.
        values.extend((0..200_000u32).map(|k| f32::from_bits(k.wrapping_mul(2_654_435_761))));
        for x in values {
            // Both forms: the one this target runs, and truncation (baseline x86-64's).
            for floor in [super::floor_f32, crate::lang::floor_by_truncation] {
                // A NaN stays a NaN; its payload's quiet bit depends on the instruction set
                // (SSE4.1's `roundss` quiets a signalling NaN, libm's floor does not).
                if x.is_nan() {
                    assert!(floor(x).is_nan(), "floor({x:e})");
                    continue;
                }
                assert_eq!(floor(x).to_bits(), x.floor().to_bits(), "floor({x:e})");
            }
        }
    }

    use super::*;
    use glam::{Mat2, Vec2};

    #[test]
    fn names_are_unique_and_match_the_functions() {
        let mut names: Vec<&str> = Builtin::ALL.iter().map(|b| b.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Builtin::ALL.len());
        assert_eq!(Builtin::Ln.name(), "ln");
        assert_eq!(Builtin::FloatToBits.name(), "to_bits");
    }

    #[test]
    fn cpu_semantics_are_the_languages() {
        assert_eq!(round(-2.5f32), -3.0);
        assert_eq!(sign(-0.0f32), 0.0);
        assert_eq!(abs(i32::MIN), i32::MIN);
        assert_eq!(sign(7u32), 1);
        assert_eq!(
            clamp(Vec2::new(-3.0, 3.0), Vec2::splat(-1.0), Vec2::ONE),
            Vec2::new(-1.0, 1.0)
        );
        assert_eq!(
            trace(Mat2::from_cols(Vec2::new(1.0, 5.0), Vec2::new(7.0, 2.0))),
            3.0
        );
        assert_eq!(
            outer(Vec2::X, Vec2::Y),
            Mat2::from_cols(Vec2::ZERO, Vec2::X)
        );
        assert_eq!(methods::powf(4.0f32, 0.5), 2.0);
        // A signaling NaN (glibc's powf gives NaN for it).
        let snan = f32::from_bits(0x7fa0_0000);
        assert_eq!(pow(snan, std::hint::black_box(-0.0f32)), 1.0);
        assert_eq!(pow(1.0, snan), 1.0);
        assert_eq!(sum(glam::Vec3::new(1e8, -1e8, 1.0)), 1.0);
        assert_eq!(product(glam::Vec4::new(2.0, 3.0, 4.0, 0.5)), 12.0);
        assert_eq!(from_bits(to_bits(1.5)), 1.5);
    }
}
