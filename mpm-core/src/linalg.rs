//! Singular value and polar decompositions of 2x2 and 3x3 matrices, written as `#[func]`s so
//! that both backends run the same algorithm.
//!
//! Conventions (those MPM material models need): `F = U diag(sigma) V^T` with `U` and `V`
//! rotations (determinant +1); the smallest singular value carries the sign of `det F`.
//!
//! * 2x2: closed form from `F`'s rotation and reflection parts (see [`svd2`]).
//! * 3x3: cyclic Jacobi eigen-decomposition of `F^T F` (Golub and Van Loan, Matrix
//!   Computations, 4th ed., section 8.5) of `F` scaled by a power of two, singular vectors
//!   sorted, then `U` by Gram-Schmidt on `F V` (the QR step of McAdams et al., "Computing
//!   the Singular Value Decomposition of 3x3 matrices with minimal branching and elementary
//!   floating point operations", 2011).

use glam::{Mat2, Mat3, Vec2, Vec3, Vec4};

use crate::func;

/// Polar decomposition `F = R S` of a 2x2 matrix: `R` a rotation, `S` symmetric.
#[func]
pub fn polar2(f: Mat2) -> (Mat2, Mat2) {
    let x = f.x_axis.x + f.y_axis.y;
    let y = f.x_axis.y - f.y_axis.x;
    let r = sqrt(x * x + y * y);
    let mut c = 1.0;
    let mut s = 0.0;
    if r > 1e-30 {
        c = x / r;
        s = y / r;
    }
    let rot = mat2(vec2(c, s), vec2(-s, c));
    (rot, transpose(rot) * f)
}

/// A 2x2 matrix as a scaled rotation plus a scaled reflection, `F = q R(a) + r R(b) diag(1,
/// -1)` (Blinn, "Consider the lowly 2x2 matrix", 1996): `q (cos a, sin a)` and
/// `r (cos b, sin b)`. Its singular values are `q + r` and `q - r`, and `U V^T = R(a)`.
#[func]
pub fn rotation_reflection2(f: Mat2) -> (Vec2, Vec2) {
    (
        0.5 * vec2(f.x_axis.x + f.y_axis.y, f.x_axis.y - f.y_axis.x),
        0.5 * vec2(f.x_axis.x - f.y_axis.y, f.x_axis.y + f.y_axis.x),
    )
}

/// `U diag(clamp(sigma, lo, hi)) V^T` of a 2x2 `F = U diag(sigma) V^T` (a return mapping
/// such as snow's, Stomakhin et al. 2013), without `U` and `V`: with `F`'s parts from
/// [`rotation_reflection2`], new singular values `s` scale the rotation part to
/// `(s0 + s1) / 2` and the reflection part to `(s0 - s1) / 2`, as the singular vectors only
/// turn the parts. Two square roots, no half angles (half of [`svd2`]'s chain). Returns the
/// new matrix, `sigma` and the clamped values (`xy` and `zw`), and `U V^T`. Clamping never
/// widens the gap between two values, so the reflection's scale stays within [0, 1] as `r`
/// vanishes; without a rotation part (`q = 0`) `U V^T` is any rotation, and this takes
/// [`svd2`]'s.
#[func]
pub fn clamp_singular_values2(f: Mat2, lo: f32, hi: f32) -> (Mat2, Vec4, Mat2) {
    let (rotation, reflection) = rotation_reflection2(f);
    let q = length(rotation);
    let r = length(reflection);
    let sig = vec2(q + r, q - r);
    let new_sig = vec2(min(max(sig.x, lo), hi), min(max(sig.y, lo), hi));
    let mut turn = vec2(1.0, 0.0);
    if q > 1e-30 {
        turn = rotation * (1.0 / q);
    } else if r > 1e-30 {
        turn = reflection * (1.0 / r);
    }
    let rot = mat2(turn, vec2(-turn.y, turn.x));
    let mut scale = 0.0;
    if r > 1e-30 {
        scale = 0.5 * (new_sig.x - new_sig.y) / r;
    }
    let g = reflection.x;
    let k = reflection.y;
    let clamped = (0.5 * (new_sig.x + new_sig.y)) * rot + scale * mat2(vec2(g, k), vec2(k, -g));
    (clamped, vec4(sig.x, sig.y, new_sig.x, new_sig.y), rot)
}

/// SVD of a 2x2 matrix, singular values in decreasing order of magnitude.
///
/// `F = q R(a) + r R(b) diag(1, -1)` (see [`rotation_reflection2`]), so
/// `F = R(phi) diag(q + r, q - r) R(psi)^T` with
/// `phi = (a + b) / 2` and `psi = (b - a) / 2`. The angles stay unit vectors: `phi` is half
/// of `a + b` (a complex product), `psi` is `b - phi`. Two square roots and two divisions
/// in a row; the polar decomposition and a Jacobi rotation of its symmetric factor took
/// three and four, a quarter of mpm99's time.
#[func]
pub fn svd2(f: Mat2) -> (Mat2, Vec2, Mat2) {
    let (rotation, reflection) = rotation_reflection2(f);
    let e = rotation.x;
    let h = rotation.y;
    let g = reflection.x;
    let k = reflection.y;
    let q = length(rotation);
    let r = length(reflection);
    let qr = q * r;
    let u: Vec2;
    let v: Vec2;
    // `a + b`, and half of it up to a turn of pi (the sign of U, which V then shares): the
    // bisector of `(1, 0)` and `w = (cos, sin)(a + b)`, from `(1 + cos, sin)` or, away from
    // `cos = -1`, `(sin, 1 - cos)`; either has length at least 1.
    if qr > 1e-15 && qr < 1e15 {
        // Both parts present: `q r w` is the complex product of `(e, h)` and `(g, k)`, and
        // the bisector scaled by `q r` (length at least `q r`, squared within f32's range)
        // needs no direction normalised first, a square root and a division off the chain
        // (mpm99 spends a tenth of its CPU time here).
        let p = vec2(e * g - h * k, e * k + h * g);
        let mut half = vec2(p.y, qr - p.x);
        if p.x >= 0.0 {
            half = vec2(qr + p.x, p.y);
        }
        u = half * (1.0 / length(half));
        // `psi = b - phi`, with `b`'s direction `(g, k) / r`.
        v = vec2(u.x * g + u.y * k, u.x * k - u.y * g) * (1.0 / r);
    } else {
        // The directions `a` and `b`; a part that vanishes takes the other's (then
        // `R(psi) = I`).
        let mut za = vec2(1.0, 0.0);
        let mut zb = vec2(1.0, 0.0);
        if q > 1e-30 {
            za = vec2(e, h) * (1.0 / q);
        }
        if r > 1e-30 {
            zb = vec2(g, k) * (1.0 / r);
        }
        if q <= 1e-30 {
            za = zb;
        } else if r <= 1e-30 {
            zb = za;
        }
        let w = vec2(za.x * zb.x - za.y * zb.y, za.x * zb.y + za.y * zb.x);
        let mut half = vec2(w.y, 1.0 - w.x);
        if w.x >= 0.0 {
            half = vec2(1.0 + w.x, w.y);
        }
        u = half * (1.0 / length(half));
        v = vec2(u.x * zb.x + u.y * zb.y, u.x * zb.y - u.y * zb.x);
    }
    (
        mat2(vec2(u.x, u.y), vec2(-u.y, u.x)),
        vec2(q + r, q - r),
        mat2(vec2(v.x, v.y), vec2(-v.y, v.x)),
    )
}

/// One Jacobi rotation of a symmetric 3x3 matrix `A` in the plane of axes `p` and `q`, the
/// one that zeroes `a_pq` (Golub and Van Loan, section 8.5.2): from `a_pp`, `a_qq`, `a_pq`
/// and the third axis' `a_rp`, `a_rq`, the new `(a_pp, a_qq, a_rp, a_rq)`, and the columns
/// `p` and `q` of `V` turned with it. Entry by entry: as products of whole matrices (a
/// rotation matrix built with dynamic indices, `J^T A J` and `V J`) the rotations took half
/// of a 3D multi-material scene's time.
#[func]
fn jacobi_rotate(
    app: f32,
    aqq: f32,
    apq: f32,
    arp: f32,
    arq: f32,
    vp: Vec3,
    vq: Vec3,
) -> (Vec4, Vec3, Vec3) {
    let mut out = vec4(app, aqq, arp, arq);
    let mut out_p = vp;
    let mut out_q = vq;
    // `svd3` scales `A` to diagonal entries of order 1: a smaller `a_pq` is below f32's
    // resolution there, and a larger one keeps `d^2 + e^2` in f32's normal range.
    if abs(apq) > 1e-18 {
        // `t = tan(theta)`, the root of smaller magnitude of `t^2 + 2 tau t - 1 = 0` with
        // `tau = d / e`, written with `d` and `e` so that one division remains.
        let d = aqq - app;
        let e = 2.0 * apq;
        let t = select(d >= 0.0, e, -e) / (abs(d) + sqrt(d * d + e * e));
        let c = 1.0 / sqrt(1.0 + t * t);
        let s = t * c;
        out = vec4(
            app - t * apq,
            aqq + t * apq,
            c * arp - s * arq,
            s * arp + c * arq,
        );
        out_p = c * vp - s * vq;
        out_q = s * vp + c * vq;
    }
    (out, out_p, out_q)
}

/// SVD of a 3x3 matrix.
#[func]
pub fn svd3(f: Mat3) -> (Mat3, Vec3, Mat3) {
    // `F` scaled by a power of two (exactly) to a largest entry in [1, 2), so that `F^T F`
    // and the rotations' squares neither overflow nor underflow for any finite `F`.
    let big = max(max(abs(f.x_axis), abs(f.y_axis)), abs(f.z_axis));
    let exponent = ((to_bits(max(max(big.x, big.y), big.z)) >> 23u32) & 255u32) as i32;
    let scale = from_bits((max(254 - exponent, 1) as u32) << 23u32);
    let fs = scale * f;
    let a = transpose(fs) * fs;
    let mut a00 = a.x_axis.x;
    let mut a11 = a.y_axis.y;
    let mut a22 = a.z_axis.z;
    let mut a01 = a.y_axis.x;
    let mut a02 = a.z_axis.x;
    let mut a12 = a.z_axis.y;
    let mut v0 = vec3(1.0, 0.0, 0.0);
    let mut v1 = vec3(0.0, 1.0, 0.0);
    let mut v2 = vec3(0.0, 0.0, 1.0);
    // Cyclic Jacobi converges quadratically: three sweeps leave off-diagonal entries at
    // f32's resolution (2.5e-7 of the largest, over random and near-identity matrices in
    // f32), the fourth a margin for clustered eigenvalues.
    for _sweep in 0..4 {
        let (d, p, q) = jacobi_rotate(a00, a11, a01, a02, a12, v0, v1);
        a00 = d.x;
        a11 = d.y;
        a02 = d.z;
        a12 = d.w;
        a01 = 0.0;
        v0 = p;
        v1 = q;
        let (d, p, q) = jacobi_rotate(a00, a22, a02, a01, a12, v0, v2);
        a00 = d.x;
        a22 = d.y;
        a01 = d.z;
        a12 = d.w;
        a02 = 0.0;
        v0 = p;
        v2 = q;
        let (d, p, q) = jacobi_rotate(a11, a22, a12, a01, a02, v1, v2);
        a11 = d.x;
        a22 = d.y;
        a01 = d.z;
        a02 = d.w;
        a12 = 0.0;
        v1 = p;
        v2 = q;
    }
    // The eigenvalues of `F^T F` (squared singular values) in decreasing order, by three
    // compare-and-swaps; a swapped column of V changes sign, so that V stays a rotation.
    let mut e0 = a00;
    let mut e1 = a11;
    if e0 < e1 {
        let (e, v) = (e0, v0);
        e0 = e1;
        v0 = v1;
        e1 = e;
        v1 = -v;
    }
    // Only the order matters from here: the smaller eigenvalues are not needed again.
    if e1 < a22 {
        e1 = a22;
        let v = v1;
        v1 = v2;
        v2 = -v;
    }
    if e0 < e1 {
        let v = v0;
        v0 = v1;
        v1 = -v;
    }
    let mut v = mat3(v0, v1, v2);
    if determinant(v) < 0.0 {
        v.z_axis = -v.z_axis;
    }
    // U by Gram-Schmidt on the columns of `F V`, the singular values their lengths.
    let b1 = fs * v.x_axis;
    let sigma1 = length(b1);
    let mut u1 = vec3(1.0, 0.0, 0.0);
    if sigma1 > 1e-20 {
        u1 = b1 / sigma1;
    }
    let b2 = fs * v.y_axis;
    let r2 = b2 - dot(u1, b2) * u1;
    let sigma2 = length(r2);
    // Below 1e-12 of sigma1 the direction is rounding noise: any unit vector orthogonal
    // to u1 does (the cross product with the axis least aligned with it).
    let u2 = if sigma2 > 1e-12 * sigma1 {
        r2 / sigma2
    } else {
        let mut axis = vec3(1.0, 0.0, 0.0);
        if abs(u1.x) > 0.57 {
            axis = vec3(0.0, 1.0, 0.0);
        }
        normalize(cross(u1, axis))
    };
    let u3 = cross(u1, u2);
    let sigma3 = dot(u3, fs * v.z_axis);
    // Scaled back, exactly (the reciprocal of a power of two).
    (
        mat3(u1, u2, u3),
        vec3(sigma1, sigma2, sigma3) * (1.0 / scale),
        v,
    )
}

/// Polar decomposition `F = R S` of a 3x3 matrix via its SVD: `R = U V^T`, `S = V diag V^T`.
#[func]
pub fn polar3(f: Mat3) -> (Mat3, Mat3) {
    let (u, sig, v) = svd3(f);
    (
        u * transpose(v),
        v * Mat3::from_diagonal(sig) * transpose(v),
    )
}

/// Matrices with an SVD: `svd(m)` in kernels.
pub trait Svd: Sized {
    type Vector;
    fn svd_(self) -> (Self, Self::Vector, Self);
    fn polar_(self) -> (Self, Self);
}
impl Svd for Mat2 {
    type Vector = Vec2;
    fn svd_(self) -> (Self, Vec2, Self) {
        svd2(self)
    }
    fn polar_(self) -> (Self, Self) {
        polar2(self)
    }
}
impl Svd for Mat3 {
    type Vector = Vec3;
    fn svd_(self) -> (Self, Vec3, Self) {
        svd3(self)
    }
    fn polar_(self) -> (Self, Self) {
        polar3(self)
    }
}

/// `(U, sigma, V)` with `m = U diag(sigma) V^T`.
pub fn svd<M: Svd>(m: M) -> (M, M::Vector, M) {
    m.svd_()
}

/// `(R, S)` with `m = R S`, `R` a rotation and `S` symmetric.
pub fn polar<M: Svd>(m: M) -> (M, M) {
    m.polar_()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close3(a: Mat3, b: Mat3, tol: f32) -> bool {
        a.to_cols_array()
            .iter()
            .zip(b.to_cols_array())
            .all(|(x, y)| (x - y).abs() <= tol)
    }

    fn matrices3() -> Vec<Mat3> {
        let mut out = vec![
            Mat3::IDENTITY,
            Mat3::ZERO,
            Mat3::from_diagonal(Vec3::new(2.0, 2.0, 0.5)),
            Mat3::from_diagonal(Vec3::new(1.0, -1.0, 1.0)),
            Mat3::from_cols(Vec3::X, Vec3::X, Vec3::Z),
        ];
        for k in 0..200u32 {
            let r = |j: u32| crate::rng::rand_f32(k, j) * 4.0 - 2.0;
            out.push(Mat3::from_cols_array(&[
                r(0),
                r(1),
                r(2),
                r(3),
                r(4),
                r(5),
                r(6),
                r(7),
                r(8),
            ]));
        }
        out
    }

    #[test]
    fn svd3_reconstructs_with_rotations() {
        for f in matrices3() {
            let (u, s, v) = svd(f);
            let back = u * Mat3::from_diagonal(s) * v.transpose();
            assert!(close3(back, f, 1e-4), "F = {f:?}\nU S V^T = {back:?}");
            assert!(
                close3(u.transpose() * u, Mat3::IDENTITY, 1e-4),
                "U not orthonormal for {f:?}"
            );
            assert!(close3(v.transpose() * v, Mat3::IDENTITY, 1e-4));
            assert!((u.determinant() - 1.0).abs() < 1e-4 && (v.determinant() - 1.0).abs() < 1e-4);
            assert!(
                s.x >= s.y - 1e-5 && s.y >= s.z.abs() - 1e-5,
                "sigma not sorted: {s:?}"
            );
        }
    }

    #[test]
    fn svd3_holds_at_any_scale() {
        // Unscaled, F^T F of the smallest underflows and that of the largest overflows.
        for f in matrices3().into_iter().take(60) {
            let (_, s, _) = svd(f);
            for k in [1e-30f32, 1e-10, 1e10, 1e30] {
                let (u, sk, v) = svd(k * f);
                let back = u * Mat3::from_diagonal(sk) * v.transpose();
                assert!(
                    close3(back * (1.0 / k), f, 1e-4),
                    "F = {k:e} {f:?}\nU S V^T = {back:?}"
                );
                assert!(
                    (sk * (1.0 / k) - s).abs().max_element() <= 1e-5 * s.x,
                    "sigma of {k:e} {f:?}: {sk:?} against {s:?}"
                );
            }
        }
    }

    #[test]
    fn svd2_and_polar2_reconstruct() {
        // The special cases first: equal diagonal with no shear (q = 0 and b = 0), a shear
        // alone (q = 0), tiny shears on either side of the identity, a reflection, zero.
        let mut matrices = vec![
            Mat2::IDENTITY,
            Mat2::ZERO,
            Mat2::from_diagonal(Vec2::new(2.0, 2.0)),
            Mat2::from_diagonal(Vec2::new(1.0, -1.0)),
            Mat2::from_cols_array(&[1.0, 0.5, 0.5, 1.0]),
            Mat2::from_cols_array(&[1.0, -0.5, -0.5, 1.0]),
            Mat2::from_cols_array(&[1.0, 1e-7, 0.0, 1.0]),
            Mat2::from_cols_array(&[1.0, 0.0, -1e-7, 1.0 + 1e-7]),
            Mat2::from_cols_array(&[1e-8, 0.0, 3e-9, 1e-8]),
            // Rotations by pi and near it (`a + b` near pi), a reflection across a diagonal.
            Mat2::from_diagonal(Vec2::new(-1.0, -1.0)),
            Mat2::from_cols_array(&[-1.0, 1e-6, -1e-6, -1.0]),
            Mat2::from_cols_array(&[0.0, 1.0, 1.0, 0.0]),
            Mat2::from_cols_array(&[0.0, -2.0, 1.0, 0.0]),
        ];
        for k in 0..200u32 {
            let r = |j: u32| crate::rng::rand_f32(k, j) * 4.0 - 2.0;
            matrices.push(Mat2::from_cols_array(&[r(0), r(1), r(2), r(3)]));
        }
        // Scaled to either side of the range where both parts are taken unnormalised
        // (`1e-15 < q r < 1e15`) and past it.
        for k in 0..200u32 {
            let scale = [1e-7, 1e-9, 1e7, 1e8][k as usize % 4];
            let r = |j: u32| scale * (crate::rng::rand_f32(k + 1000, j) * 4.0 - 2.0);
            matrices.push(Mat2::from_cols_array(&[r(0), r(1), r(2), r(3)]));
        }
        for f in matrices {
            let (u, s, v) = svd(f);
            let back = u * Mat2::from_diagonal(s) * v.transpose();
            let scale = f
                .to_cols_array()
                .iter()
                .fold(1e-30f32, |m, x| m.max(x.abs()));
            assert!(
                (back - f)
                    .to_cols_array()
                    .iter()
                    .all(|x| x.abs() <= 1e-5 * scale),
                "{f:?} vs {back:?}"
            );
            assert!((u.determinant() - 1.0).abs() < 1e-4 && (v.determinant() - 1.0).abs() < 1e-4);
            assert!(s.x >= s.y.abs(), "sigma of {f:?} not sorted: {s:?}");
            assert!(
                s.y * f.determinant() >= 0.0,
                "the sign of det {f:?} is not sigma's last: {s:?}"
            );
            assert!(
                (u.transpose() * u - Mat2::IDENTITY)
                    .to_cols_array()
                    .iter()
                    .all(|x| x.abs() < 1e-5),
                "U of {f:?} is not orthonormal"
            );
            // Absolute below 1, relative above.
            let (rot, sym) = polar(f);
            assert!((rot * sym - f)
                .to_cols_array()
                .iter()
                .all(|x| x.abs() < 1e-4 * scale.max(1.0)));
            assert!((sym.x_axis.y - sym.y_axis.x).abs() < 1e-5 * scale.max(1.0));
        }
    }

    /// Against [`svd2`]: the singular values, `U diag(clamp(sigma)) V^T` and `U V^T`, for
    /// gradients a snow model sees (within a few percent of a rotation, some past the clamp
    /// on either side), general and inverted ones, and the degenerate shapes: a scaled
    /// rotation (no reflection part), a reflection (no rotation part), zero.
    #[test]
    fn clamped_singular_values_are_the_svds() {
        let mut matrices = vec![
            Mat2::IDENTITY,
            Mat2::ZERO,
            Mat2::from_angle(0.7) * 1.01,
            Mat2::from_cols(Vec2::new(0.6, 0.8), Vec2::new(0.8, -0.6)),
            Mat2::from_diagonal(Vec2::new(1.02, 0.97)),
            Mat2::from_diagonal(Vec2::new(1.0, -1.0)),
        ];
        for k in 0..300u32 {
            let r = |j: u32| crate::rng::rand_f32(k, j) * 2.0 - 1.0;
            let strain = [0.003, 0.03, 0.3, 2.0][k as usize % 4];
            let stretch = Mat2::IDENTITY
                + strain * Mat2::from_cols(Vec2::new(r(0), r(1)), Vec2::new(r(2), r(3)));
            matrices.push(Mat2::from_angle(3.0 * r(4)) * stretch);
        }
        let close = |a: Mat2, b: Mat2| {
            let scale = 1.0
                + b.abs()
                    .to_cols_array()
                    .iter()
                    .fold(0.0f32, |m, x| m.max(*x));
            (a - b)
                .abs()
                .to_cols_array()
                .iter()
                .all(|d| *d <= 1e-5 * scale)
        };
        let (lo, hi) = (1.0 - 2.5e-2, 1.0 + 4.5e-3);
        for f in matrices {
            let (u, sig, v) = svd2(f);
            let new_sig = sig.clamp(Vec2::splat(lo), Vec2::splat(hi));
            let (clamped, values, rot) = clamp_singular_values2(f, lo, hi);
            assert!(
                (Vec2::new(values.x, values.y) - sig).abs().max_element()
                    <= 1e-5 * (1.0 + sig.x.abs()),
                "sigma of {f:?}: {values:?} against {sig:?}"
            );
            assert_eq!(Vec2::new(values.z, values.w), new_sig, "{f:?}");
            let expected = u * Mat2::from_diagonal(new_sig) * v.transpose();
            assert!(
                close(clamped, expected),
                "{f:?} clamped: {clamped:?} against {expected:?}"
            );
            let uv = u * v.transpose();
            assert!(close(rot, uv), "U V^T of {f:?}: {rot:?} against {uv:?}");
            assert!(close(rot * rot.transpose(), Mat2::IDENTITY));
            assert!((rot.determinant() - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn polar3_is_rotation_times_symmetric() {
        for f in matrices3() {
            let (r, s) = polar(f);
            assert!(close3(r * s, f, 1e-4));
            assert!(close3(s, s.transpose(), 1e-4));
            assert!((r.determinant() - 1.0).abs() < 1e-4);
        }
    }
}
