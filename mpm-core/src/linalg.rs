//! Singular value and polar decompositions of 2x2 and 3x3 matrices, written as `#[func]`s so
//! that both backends run the same algorithm.
//!
//! Conventions (those MPM material models need): `F = U diag(sigma) V^T` with `U` and `V`
//! rotations (determinant +1); the smallest singular value carries the sign of `det F`.
//!
//! * 2x2: closed form from `F`'s rotation and reflection parts (see [`svd2`]).
//! * 3x3: cyclic Jacobi eigen-decomposition of `F^T F` (Golub and Van Loan, Matrix
//!   Computations, 4th ed., section 8.5), singular vectors sorted, then `U` by Gram-Schmidt on
//!   `F V` (the QR step of McAdams et al., "Computing the Singular Value Decomposition of 3x3
//!   matrices with minimal branching and elementary floating point operations", 2011).

use glam::{Mat2, Mat3, Vec2, Vec3};

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

/// SVD of a 2x2 matrix, singular values in decreasing order of magnitude.
///
/// `F = q R(a) + r R(b) diag(1, -1)`: a scaled rotation plus a scaled reflection (Blinn,
/// "Consider the lowly 2x2 matrix", 1996), so `F = R(phi) diag(q + r, q - r) R(psi)^T` with
/// `phi = (a + b) / 2` and `psi = (b - a) / 2`. The angles stay unit vectors: `phi` is half
/// of `a + b` (a complex product), `psi` is `b - phi`. Two square roots and two divisions
/// in a row; the polar decomposition and a Jacobi rotation of its symmetric factor took
/// three and four, a quarter of mpm99's time.
#[func]
pub fn svd2(f: Mat2) -> (Mat2, Vec2, Mat2) {
    let e = 0.5 * (f.x_axis.x + f.y_axis.y);
    let h = 0.5 * (f.x_axis.y - f.y_axis.x);
    let g = 0.5 * (f.x_axis.x - f.y_axis.y);
    let k = 0.5 * (f.x_axis.y + f.y_axis.x);
    let q = sqrt(e * e + h * h);
    let r = sqrt(g * g + k * k);
    // The directions `a` and `b`; a part that vanishes takes the other's (then `R(psi) = I`).
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
    // `a + b`, and half of it up to a turn of pi (the sign of U, which V then shares): the
    // bisector of `(1, 0)` and `w`, from `(1 + cos, sin)` or, away from `cos = -1`,
    // `(sin, 1 - cos)`; either has length at least 1.
    let w = vec2(za.x * zb.x - za.y * zb.y, za.x * zb.y + za.y * zb.x);
    let mut half = vec2(w.y, 1.0 - w.x);
    if w.x >= 0.0 {
        half = vec2(1.0 + w.x, w.y);
    }
    let u = half * (1.0 / length(half));
    // `psi = b - phi`.
    let v = vec2(u.x * zb.x + u.y * zb.y, u.x * zb.y - u.y * zb.x);
    (
        mat2(vec2(u.x, u.y), vec2(-u.y, u.x)),
        vec2(q + r, q - r),
        mat2(vec2(v.x, v.y), vec2(-v.y, v.x)),
    )
}

/// One Jacobi rotation in the (p, q) plane zeroing `s[q][p]` of symmetric `s`; `v` collects
/// the rotations.
#[func]
fn jacobi_rotate(s: Mat3, v: Mat3, p: i32, q: i32) -> (Mat3, Mat3) {
    let spq = s.col(q)[p];
    let mut out_s = s;
    let mut out_v = v;
    if abs(spq) > 1e-30 {
        let theta = (s.col(q)[q] - s.col(p)[p]) / (2.0 * spq);
        let t = sign(theta) / (abs(theta) + sqrt(theta * theta + 1.0));
        let mut t2 = t;
        if theta == 0.0 {
            t2 = 1.0;
        }
        let c = 1.0 / sqrt(t2 * t2 + 1.0);
        let sn = t2 * c;
        let mut j = Mat3::IDENTITY;
        j[p][p] = c;
        j[q][q] = c;
        j[q][p] = sn;
        j[p][q] = -sn;
        out_s = transpose(j) * s * j;
        out_v = v * j;
    }
    (out_s, out_v)
}

/// SVD of a 3x3 matrix.
#[func]
pub fn svd3(f: Mat3) -> (Mat3, Vec3, Mat3) {
    let mut s = transpose(f) * f;
    let mut v = Mat3::IDENTITY;
    for _sweep in 0..6 {
        let (s1, v1) = jacobi_rotate(s, v, 0, 1);
        let (s2, v2) = jacobi_rotate(s1, v1, 0, 2);
        let (s3, v3) = jacobi_rotate(s2, v2, 1, 2);
        s = s3;
        v = v3;
    }
    // Sort the eigenvalues of F^T F (squared singular values) in decreasing order, swapping
    // columns of V with a sign change so that it stays a rotation.
    let mut e = vec3(s.x_axis.x, s.y_axis.y, s.z_axis.z);
    for k in 0..3 {
        let p = k % 2;
        if e[p] < e[p + 1] {
            let tmp = e[p];
            e[p] = e[p + 1];
            e[p + 1] = tmp;
            let col = v[p];
            v[p] = v[p + 1];
            v[p + 1] = -col;
        }
    }
    if determinant(v) < 0.0 {
        v.z_axis = -v.z_axis;
    }
    let b1 = f * v.x_axis;
    let sigma1 = length(b1);
    let mut u1 = vec3(1.0, 0.0, 0.0);
    if sigma1 > 1e-20 {
        u1 = b1 / sigma1;
    }
    let b2 = f * v.y_axis;
    let r2 = b2 - dot(u1, b2) * u1;
    let sigma2 = length(r2);
    let u2 = if sigma2 > 1e-20 * max(sigma1, 1e-20) {
        r2 / sigma2
    } else {
        // Any unit vector orthogonal to u1: cross with the axis least aligned with it.
        let mut axis = vec3(1.0, 0.0, 0.0);
        if abs(u1.x) > 0.57 {
            axis = vec3(0.0, 1.0, 0.0);
        }
        normalize(cross(u1, axis))
    };
    let u3 = cross(u1, u2);
    let sigma3 = dot(u3, f * v.z_axis);
    (mat3(u1, u2, u3), vec3(sigma1, sigma2, sigma3), v)
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
            let (rot, sym) = polar(f);
            assert!((rot * sym - f)
                .to_cols_array()
                .iter()
                .all(|x| x.abs() < 1e-4));
            assert!((sym.x_axis.y - sym.y_axis.x).abs() < 1e-5);
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
