//! CPU/GPU equivalence: every kernel here is written once with `#[kernel]`, run on the CPU
//! backend (the reference) and on the Vulkan backend (lavapipe on CI, with the validation
//! layer), and the downloaded fields are compared within the tolerance stated next to each
//! property. Atomic tests also run on the Vulkan backend with `float_atomics: false` (the
//! compare-and-swap fallback).
//!
//! Most properties draw inputs from ranges that exercise the arithmetic; section 35 draws
//! from the whole f32 range (NaN, infinities, signed zeros, every magnitude, the edges of
//! the integer casts) for every conversion and float builtin, where the GPU lowering must
//! give Rust's answers. Two things stay out of it: subnormals (GPUs may flush them to zero:
//! lavapipe flushes inputs, NVIDIA inputs and results, so inputs are never subnormal and a
//! subnormal result may read zero) and fused multiply-adds (a GPU compiler may contract
//! `a * b + c`, which changes the last bit, and a cancelling determinant arbitrarily; NVIDIA
//! does), so exact properties keep products and sums apart and matrix builtins take
//! well-conditioned matrices.
#![allow(clippy::type_complexity)] // tuples of downloaded fields

mod common;

use common::*;
use mpm::core::rng;
use mpm::core::Result;
use mpm::glam::{IVec2, IVec3, Mat2, Mat3, UVec2, UVec3, Vec2, Vec3, Vec4};
use mpm::{func, kernel, BackendRef, Field};
use proptest::collection::vec;
use proptest::prelude::*;

/// Elements per 1-D test field: several workgroups, not a multiple of the workgroup size.
const N: usize = 300;

fn f32s(lo: f32, hi: f32, n: usize) -> impl Strategy<Value = Vec<f32>> {
    vec(lo..hi, n)
}
fn vec2s(lo: f32, hi: f32, n: usize) -> impl Strategy<Value = Vec<Vec2>> {
    vec((lo..hi, lo..hi).prop_map(|(x, y)| Vec2::new(x, y)), n)
}
fn vec3s(lo: f32, hi: f32, n: usize) -> impl Strategy<Value = Vec<Vec3>> {
    vec(
        (lo..hi, lo..hi, lo..hi).prop_map(|(x, y, z)| Vec3::new(x, y, z)),
        n,
    )
}
fn vec4s(lo: f32, hi: f32, n: usize) -> impl Strategy<Value = Vec<Vec4>> {
    vec(
        (lo..hi, lo..hi, lo..hi, lo..hi).prop_map(|(x, y, z, w)| Vec4::new(x, y, z, w)),
        n,
    )
}
/// Random matrices with entries in [-2, 2] plus `shift` on the diagonal.
fn mat2s(shift: f32, n: usize) -> impl Strategy<Value = Vec<Mat2>> {
    vec(
        proptest::array::uniform4(-2.0f32..2.0)
            .prop_map(move |a| Mat2::from_cols_array(&a) + Mat2::from_diagonal(Vec2::splat(shift))),
        n,
    )
}
fn mat3s(shift: f32, n: usize) -> impl Strategy<Value = Vec<Mat3>> {
    vec(
        proptest::array::uniform9(-2.0f32..2.0)
            .prop_map(move |a| Mat3::from_cols_array(&a) + Mat3::from_diagonal(Vec3::splat(shift))),
        n,
    )
}
/// Integers: mostly the full range, with the usual suspects mixed in.
fn i32_any() -> impl Strategy<Value = i32> {
    prop_oneof![
        4 => any::<i32>(),
        2 => -40i32..40,
        1 => prop::sample::select(vec![0, 1, -1, 2, 31, 32, 33, -31, -32, i32::MIN, i32::MAX, i32::MIN + 1]),
    ]
}
fn u32_any() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => any::<u32>(),
        2 => 0u32..80,
        1 => prop::sample::select(vec![0u32, 1, 2, 31, 32, 33, u32::MAX, u32::MAX - 1, 1 << 31]),
    ]
}

// =========================================================================================
// 1. Float builtins on scalars, exact ones: floor ceil fract abs sign min max clamp
// =========================================================================================

#[kernel]
fn k_float_exact(x: &Field<f32>, y: &Field<f32>, out: &mut Field<Vec4>, out2: &mut Field<Vec4>) {
    for i in x.indices() {
        let a = x[i];
        let b = y[i];
        out[i] = vec4(floor(a), ceil(a), fract(a), abs(a));
        out2[i] = Vec4::new(sign(a), min(a, b), max(a, b), clamp(a, -0.5, 0.75));
    }
}

/// Exact: floor, ceil, fract (x - floor x), abs, sign, min, max and clamp are exact operations
/// in IEEE arithmetic on both sides.
#[test]
fn float_exact_builtins() {
    let x = || {
        prop_oneof![
            6 => -1e3f32..1e3,
            1 => prop::sample::select(vec![0.0f32, -0.0, -1e-10, 1e-10, -1e-30, -0.5, 0.75, -1.0, 1e7 + 0.5, -8388607.5]),
        ]
    };
    property(16, (vec(x(), N), vec(x(), N)), |b, (xs, ys)| {
        agree(
            b,
            false,
            |be| {
                let x = Field::from_slice(be, [N as u32], &xs)?;
                let y = Field::from_slice(be, [N as u32], &ys)?;
                let mut o = Field::<Vec4>::new(be, [N as u32])?;
                let mut o2 = Field::<Vec4>::new(be, [N as u32])?;
                k_float_exact(&x, &y, &mut o, &mut o2)?;
                Ok((o.download()?, o2.download()?))
            },
            |c, g| {
                let inp = |i: usize| format!("x={} y={}", xs[i], ys[i]);
                compare("floor/ceil/fract/abs", &c.0, &g.0, Tol::Exact, &inp)?;
                compare("sign/min/max/clamp", &c.1, &g.1, Tol::Exact, &inp)
            },
        )
    });
}

// =========================================================================================
// 2. round (own property: GLSL has no round-half-away-from-zero, the backend emulates it)
// =========================================================================================

#[kernel]
fn k_round(x: &Field<f32>, v: &Field<Vec2>, out: &mut Field<f32>, outv: &mut Field<Vec2>) {
    for i in x.indices() {
        out[i] = round(x[i]);
        outv[i] = v[i].round();
    }
}

/// Values where rounding is delicate: halves, just below a half, large odd integers.
fn round_inputs() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -1e3f32..1e3,
        2 => (-1000i32..1000).prop_map(|k| k as f32 + 0.5),
        1 => prop::sample::select(vec![
            0.5f32, -0.5, 1.5, 2.5, -2.5, 0.49999997, -0.49999997, 8388609.0, -8388609.0,
            4194304.5, 16777215.0, 1e-8, -0.0,
        ]),
    ]
}

/// Exact: `round` is half away from zero (Rust's `f32::round`) on both sides; it is exact.
/// (Regression: the GLSL emulation was `sign(x) * floor(abs(x) + 0.5)`, which rounds
/// 0.49999997 to 1 and odd integers in [2^23, 2^24) up by one.)
#[test]
fn round_half_away_from_zero() {
    property(
        16,
        (vec(round_inputs(), N), vec(round_inputs(), N)),
        |b, (xs, ys)| {
            let vs: Vec<Vec2> = xs.iter().zip(&ys).map(|(x, y)| Vec2::new(*y, *x)).collect();
            agree(
                b,
                false,
                |be| {
                    let x = Field::from_slice(be, [N as u32], &xs)?;
                    let v = Field::from_slice(be, [N as u32], &vs)?;
                    let mut o = Field::<f32>::new(be, [N as u32])?;
                    let mut ov = Field::<Vec2>::new(be, [N as u32])?;
                    k_round(&x, &v, &mut o, &mut ov)?;
                    Ok((o.download()?, ov.download()?))
                },
                |c, g| {
                    compare("round(f32)", &c.0, &g.0, Tol::Exact, &|i| {
                        format!("x={:?}", xs[i])
                    })?;
                    compare("Vec2::round", &c.1, &g.1, Tol::Exact, &|i| {
                        format!("v={:?}", vs[i])
                    })
                },
            )
        },
    );
}

// =========================================================================================
// 3. Transcendental builtins on f32 (functions and methods), results in a 2-D field
// =========================================================================================

#[kernel]
fn k_transcendental(x: &Field<f32>, p: &Field<f32>, out: &mut Field<f32, 2>) {
    for i in x.indices() {
        let a = x[i]; // [-10, 10]
        let q = p[i]; // [0.1, 10]
        let r = [
            sqrt(q),
            q.sqrt(),
            ln(q),
            q.ln(),
            exp(a),
            a.exp(),
            pow(q, a * 0.25),
            q.powf(0.5 * a),
            sin(a),
            a.sin(),
            cos(a),
            a.cos(),
            tan(a * 0.14),
            (a * 0.14).tan(),
            atan2(a, q - 5.0),
            a.atan2(q - 5.0),
            tanh(a * q),
            (a * 0.3).tanh(),
        ];
        let row = i as i32;
        for k in 0..18 {
            out[ivec2(row, k)] = r[k];
        }
    }
}

/// Transcendentals: relative 1e-4 with an absolute floor of 1e-5 (sin/cos/atan2 near their
/// zeros). Vulkan only requires a few ulp (exp, ln, pow: 3 + 2|x| ulp) or an absolute 2^-11
/// for sin/cos; llvmpipe and Rust's libm both stay within this bound on these ranges.
#[test]
fn transcendental_builtins() {
    property(
        16,
        (f32s(-10.0, 10.0, N), f32s(0.1, 10.0, N)),
        |b, (xs, ps)| {
            agree(
                b,
                false,
                |be| {
                    let x = Field::from_slice(be, [N as u32], &xs)?;
                    let p = Field::from_slice(be, [N as u32], &ps)?;
                    let mut o = Field::<f32, 2>::new(be, [N as u32, 18])?;
                    k_transcendental(&x, &p, &mut o)?;
                    o.download()
                },
                |c, g| {
                    const NAMES: [&str; 18] = [
                        "sqrt", "sqrt()", "ln", "ln()", "exp", "exp()", "pow", "powf()", "sin",
                        "sin()", "cos", "cos()", "tan", "tan()", "atan2", "atan2()", "tanh",
                        "tanh()",
                    ];
                    compare("transcendentals", c, g, Tol::close(1e-4, 1e-5), &|k| {
                        format!("{} x={} p={}", NAMES[k % 18], xs[k / 18], ps[k / 18])
                    })
                },
            )
        },
    );
}

// =========================================================================================
// 4. Float builtins on Vec2 / Vec3 / Vec4
// =========================================================================================

#[kernel]
fn k_vector_float(
    a: &Field<Vec3>,
    b: &Field<Vec3>,
    c: &Field<Vec4>,
    d: &Field<Vec2>,
    exact3: &mut Field<Vec3, 2>,
    approx3: &mut Field<Vec3, 2>,
    out4: &mut Field<Vec4, 2>,
    out2: &mut Field<Vec2, 2>,
) {
    for i in a.indices() {
        let x = a[i];
        let y = b[i];
        let row = i as i32;
        let e = [
            floor(x),
            x.ceil(),
            fract(x),
            x.abs(),
            sign(x),
            x.signum(),
            min(x, y),
            x.max(y),
            clamp(x, Vec3::splat(-0.5), Vec3::ONE),
            x.clamp(-Vec3::ONE, y.abs()),
            -x,
        ];
        for k in 0..11 {
            exact3[ivec2(row, k)] = e[k];
        }
        let px = abs(x) + Vec3::splat(0.1);
        let ap = [
            sqrt(px),
            px.ln(),
            exp(y * 0.5),
            pow(px, y * 0.2),
            px.powf(Vec3::splat(1.5)),
            sin(x),
            x.cos(),
            tan(x * 0.14),
            atan2(x, y),
            x.atan2(y),
        ];
        for k in 0..10 {
            approx3[ivec2(row, k)] = ap[k];
        }
        let v = c[i];
        let pv = v.abs() + Vec4::splat(0.25);
        let f4 = [
            floor(v),
            v.fract(),
            clamp(v, Vec4::splat(-1.0), Vec4::splat(2.0)),
            min(v, pv),
            sqrt(pv),
            exp(v * 0.3),
            ln(pv),
            pow(pv, Vec4::splat(0.7)),
            sin(v),
            cos(v),
        ];
        for k in 0..10 {
            out4[ivec2(row, k)] = f4[k];
        }
        let w = d[i];
        let pw = w.abs() + Vec2::ONE;
        let f2 = [
            w.floor(),
            w.ceil(),
            sign(w),
            max(w, -w),
            pw.sqrt(),
            w.exp(),
            pw.ln(),
            w.sin(),
            atan2(w, pw),
            tan(w * 0.1),
        ];
        for k in 0..10 {
            out2[ivec2(row, k)] = f2[k];
        }
    }
}

/// Rows 0..11 of `exact3` and the floor/fract/clamp/min rows of `out4` and floor/ceil/sign/max
/// rows of `out2` are exact; the transcendental rows: relative 1e-4, absolute 1e-5.
#[test]
fn vector_float_builtins() {
    let n = 200usize;
    property(
        12,
        (
            vec3s(-10.0, 10.0, n),
            vec3s(-10.0, 10.0, n),
            vec4s(-10.0, 10.0, n),
            vec2s(-10.0, 10.0, n),
        ),
        move |bk, (a, b, c, d)| {
            agree(
                bk,
                false,
                |be| {
                    let fa = Field::from_slice(be, [n as u32], &a)?;
                    let fb = Field::from_slice(be, [n as u32], &b)?;
                    let fc = Field::from_slice(be, [n as u32], &c)?;
                    let fd = Field::from_slice(be, [n as u32], &d)?;
                    let mut e3 = Field::<Vec3, 2>::new(be, [n as u32, 11])?;
                    let mut a3 = Field::<Vec3, 2>::new(be, [n as u32, 10])?;
                    let mut o4 = Field::<Vec4, 2>::new(be, [n as u32, 10])?;
                    let mut o2 = Field::<Vec2, 2>::new(be, [n as u32, 10])?;
                    k_vector_float(&fa, &fb, &fc, &fd, &mut e3, &mut a3, &mut o4, &mut o2)?;
                    Ok((
                        e3.download()?,
                        a3.download()?,
                        o4.download()?,
                        o2.download()?,
                    ))
                },
                |cv, gv| {
                    let inp3 =
                        |k: usize, w: usize| format!("row {} a={} b={}", k % w, a[k / w], b[k / w]);
                    compare("Vec3 exact builtins", &cv.0, &gv.0, Tol::Exact, &|k| {
                        inp3(k, 11)
                    })?;
                    compare(
                        "Vec3 transcendentals",
                        &cv.1,
                        &gv.1,
                        Tol::close(1e-4, 1e-5),
                        &|k| inp3(k, 10),
                    )?;
                    for (k, (x, y)) in cv.2.iter().zip(&gv.2).enumerate() {
                        let tol = if k % 10 < 4 {
                            Tol::Exact
                        } else {
                            Tol::close(1e-4, 1e-5)
                        };
                        compare("Vec4 builtins", &[*x], &[*y], tol, &|_| {
                            format!("row {} c={}", k % 10, c[k / 10])
                        })?;
                    }
                    for (k, (x, y)) in cv.3.iter().zip(&gv.3).enumerate() {
                        let tol = if k % 10 < 4 {
                            Tol::Exact
                        } else {
                            Tol::close(1e-4, 1e-5)
                        };
                        compare("Vec2 builtins", &[*x], &[*y], tol, &|_| {
                            format!("row {} d={}", k % 10, d[k / 10])
                        })?;
                    }
                    Ok(())
                },
            )
        },
    );
}

// =========================================================================================
// 5. Integer min / max / clamp / abs / sign (i32, u32 and their vectors)
// =========================================================================================

#[kernel]
fn k_int_minmax(
    a: &Field<i32>,
    b: &Field<i32>,
    ua: &Field<u32>,
    ub: &Field<u32>,
    oi: &mut Field<i32, 2>,
    ou: &mut Field<u32, 2>,
    oiv2: &mut Field<IVec2, 2>,
    oiv3: &mut Field<IVec3, 2>,
    ouv2: &mut Field<UVec2, 2>,
    ouv3: &mut Field<UVec3, 2>,
) {
    for i in a.indices() {
        let x = a[i];
        let y = b[i];
        let r = i as i32;
        oi[ivec2(r, 0)] = min(x, y);
        oi[ivec2(r, 1)] = x.max(y);
        oi[ivec2(r, 2)] = clamp(x, -1000, 1000);
        oi[ivec2(r, 3)] = abs(x);
        oi[ivec2(r, 4)] = sign(x);
        oi[ivec2(r, 5)] = x.abs() + y.signum();
        let u = ua[i];
        let v = ub[i];
        ou[ivec2(r, 0)] = min(u, v);
        ou[ivec2(r, 1)] = u.max(v);
        ou[ivec2(r, 2)] = clamp(u, 10u32, 1000000u32);
        ou[ivec2(r, 3)] = u.min(v).clamp(5u32, 4000000000u32);
        let p = ivec2(x, y);
        let q = ivec2(y, x / 3);
        oiv2[ivec2(r, 0)] = min(p, q);
        oiv2[ivec2(r, 1)] = max(p, q);
        oiv2[ivec2(r, 2)] = clamp(p, IVec2::splat(-5), IVec2::splat(5000));
        oiv2[ivec2(r, 3)] = abs(p);
        oiv2[ivec2(r, 4)] = sign(q);
        let p3 = ivec3(x, y, x ^ y);
        oiv3[ivec2(r, 0)] = min(p3, IVec3::ZERO);
        oiv3[ivec2(r, 1)] = p3.max(ivec3(0, 1, 2));
        oiv3[ivec2(r, 2)] = p3.abs();
        oiv3[ivec2(r, 3)] = p3.signum();
        oiv3[ivec2(r, 4)] = p3.clamp(IVec3::splat(-7), IVec3::splat(7));
        let s2 = uvec2(u, v);
        ouv2[ivec2(r, 0)] = min(s2, uvec2(v, u / 2u32));
        ouv2[ivec2(r, 1)] = s2.max(UVec2::splat(1000u32));
        ouv2[ivec2(r, 2)] = clamp(s2, UVec2::splat(3u32), UVec2::splat(300000u32));
        let s3 = uvec3(u, v, u ^ v);
        ouv3[ivec2(r, 0)] = s3.min(UVec3::splat(77u32));
        ouv3[ivec2(r, 1)] = max(s3, uvec3(v, u, 5u32));
        ouv3[ivec2(r, 2)] = s3.clamp(UVec3::ONE, UVec3::splat(2000000000u32));
    }
}

/// Exact (integers; `abs(i32::MIN)` wraps to `i32::MIN` on both).
#[test]
fn integer_min_max_clamp_abs_sign() {
    property(
        16,
        (
            vec(i32_any(), N),
            vec(i32_any(), N),
            vec(u32_any(), N),
            vec(u32_any(), N),
        ),
        |bk, (a, b, ua, ub)| {
            agree(
                bk,
                false,
                |be| {
                    let n = N as u32;
                    let fa = Field::from_slice(be, [n], &a)?;
                    let fb = Field::from_slice(be, [n], &b)?;
                    let fua = Field::from_slice(be, [n], &ua)?;
                    let fub = Field::from_slice(be, [n], &ub)?;
                    let mut oi = Field::<i32, 2>::new(be, [n, 6])?;
                    let mut ou = Field::<u32, 2>::new(be, [n, 4])?;
                    let mut oiv2 = Field::<IVec2, 2>::new(be, [n, 5])?;
                    let mut oiv3 = Field::<IVec3, 2>::new(be, [n, 5])?;
                    let mut ouv2 = Field::<UVec2, 2>::new(be, [n, 3])?;
                    let mut ouv3 = Field::<UVec3, 2>::new(be, [n, 3])?;
                    k_int_minmax(
                        &fa, &fb, &fua, &fub, &mut oi, &mut ou, &mut oiv2, &mut oiv3, &mut ouv2,
                        &mut ouv3,
                    )?;
                    Ok((
                        oi.download()?,
                        ou.download()?,
                        oiv2.download()?,
                        oiv3.download()?,
                        ouv2.download()?,
                        ouv3.download()?,
                    ))
                },
                |c, g| {
                    let (a, b, ua, ub) = (&a, &b, &ua, &ub);
                    let ii = |w: usize| {
                        move |k: usize| {
                            format!(
                                "row {} a={} b={} ua={} ub={}",
                                k % w,
                                a[k / w],
                                b[k / w],
                                ua[k / w],
                                ub[k / w]
                            )
                        }
                    };
                    compare("i32", &c.0, &g.0, Tol::Exact, &ii(6))?;
                    compare("u32", &c.1, &g.1, Tol::Exact, &ii(4))?;
                    compare("IVec2", &c.2, &g.2, Tol::Exact, &ii(5))?;
                    compare("IVec3", &c.3, &g.3, Tol::Exact, &ii(5))?;
                    compare("UVec2", &c.4, &g.4, Tol::Exact, &ii(3))?;
                    compare("UVec3", &c.5, &g.5, Tol::Exact, &ii(3))
                },
            )
        },
    );
}

#[kernel]
fn k_uint_abs_sign(a: &Field<u32>, out: &mut Field<u32>, outv: &mut Field<UVec3>) {
    for i in a.indices() {
        let u = a[i];
        out[i] = abs(u) + sign(u) * 2u32;
        outv[i] = abs(uvec3(u, 0u32, 7u32)) + sign(uvec3(u, 0u32, 7u32));
    }
}

/// Exact: `abs` of an unsigned value is itself, `sign` is 0 or 1. The language accepts both
/// (`NumTy` includes u32 / UVec2 / UVec3). (Regression: GLSL has no abs / sign on unsigned
/// types; printed unchanged they made the shader fail to compile.)
#[test]
fn unsigned_abs_sign() {
    property(8, vec(u32_any(), N), |bk, a| {
        agree(
            bk,
            false,
            |be| {
                let fa = Field::from_slice(be, [N as u32], &a)?;
                let mut o = Field::<u32>::new(be, [N as u32])?;
                let mut ov = Field::<UVec3>::new(be, [N as u32])?;
                k_uint_abs_sign(&fa, &mut o, &mut ov)?;
                Ok((o.download()?, ov.download()?))
            },
            |c, g| {
                same("abs+sign u32", &c.0, &g.0, Tol::Exact)?;
                same("abs+sign UVec3", &c.1, &g.1, Tol::Exact)
            },
        )
    });
}

// =========================================================================================
// 6. Vector geometry: length normalize dot cross outer sum product
// =========================================================================================

#[kernel]
fn k_geometry(
    a: &Field<Vec3>,
    b: &Field<Vec3>,
    c: &Field<Vec4>,
    d: &Field<Vec2>,
    scal: &mut Field<f32, 2>,
    v3: &mut Field<Vec3, 2>,
    v4: &mut Field<Vec4>,
    v2: &mut Field<Vec2, 2>,
    m2: &mut Field<Mat2>,
    m3: &mut Field<Mat3>,
    red: &mut Field<f32, 2>,
) {
    for i in a.indices() {
        let x = a[i];
        let y = b[i];
        let z = c[i];
        let w = d[i];
        let r = i as i32;
        scal[ivec2(r, 0)] = length(x);
        scal[ivec2(r, 1)] = x.length();
        scal[ivec2(r, 2)] = dot(x, y);
        scal[ivec2(r, 3)] = x.dot(y);
        scal[ivec2(r, 4)] = length(z) + z.dot(z);
        scal[ivec2(r, 5)] = w.length() + dot(w, w);
        v3[ivec2(r, 0)] = cross(x, y);
        v3[ivec2(r, 1)] = x.cross(y);
        v3[ivec2(r, 2)] = normalize(x);
        v3[ivec2(r, 3)] = y.normalize();
        v4[i] = normalize(z);
        v2[ivec2(r, 0)] = w.normalize();
        v2[ivec2(r, 1)] = w * length(w);
        m2[i] = outer(w, vec2(x.x, y.y));
        m3[i] = outer(x, y);
        red[ivec2(r, 0)] = sum(x);
        red[ivec2(r, 1)] = product(x);
        red[ivec2(r, 2)] = sum(z) + product(w);
        red[ivec2(r, 3)] = product(z) - sum(w);
    }
}

/// Dot products, lengths, cross and outer products: relative 1e-5 with an absolute floor of
/// 1e-5 (inputs in [-4, 4], so products are at most 48; a fused multiply-add on the GPU
/// changes the last bits, and cancellation in dot/cross turns that into absolute error
/// ~ 2^-24 * 48 * 3 < 1e-5).
#[test]
fn vector_geometry() {
    let n = 256usize;
    let away = |v: Vec<Vec3>| {
        v.into_iter()
            .map(|x| if x.length() < 0.1 { x + Vec3::ONE } else { x })
            .collect::<Vec<_>>()
    };
    property(
        16,
        (
            vec3s(-4.0, 4.0, n),
            vec3s(-4.0, 4.0, n),
            vec4s(-4.0, 4.0, n),
            vec2s(-4.0, 4.0, n),
        ),
        move |bk, (a, b, c, d)| {
            let (a, b) = (away(a), away(b));
            let c: Vec<Vec4> = c
                .into_iter()
                .map(|x| if x.length() < 0.1 { x + Vec4::ONE } else { x })
                .collect();
            let d: Vec<Vec2> = d
                .into_iter()
                .map(|x| if x.length() < 0.1 { x + Vec2::ONE } else { x })
                .collect();
            agree(
                bk,
                false,
                |be| {
                    let m = n as u32;
                    let fa = Field::from_slice(be, [m], &a)?;
                    let fb = Field::from_slice(be, [m], &b)?;
                    let fc = Field::from_slice(be, [m], &c)?;
                    let fd = Field::from_slice(be, [m], &d)?;
                    let mut s = Field::<f32, 2>::new(be, [m, 6])?;
                    let mut o3 = Field::<Vec3, 2>::new(be, [m, 4])?;
                    let mut o4 = Field::<Vec4>::new(be, [m])?;
                    let mut o2 = Field::<Vec2, 2>::new(be, [m, 2])?;
                    let mut om2 = Field::<Mat2>::new(be, [m])?;
                    let mut om3 = Field::<Mat3>::new(be, [m])?;
                    let mut red = Field::<f32, 2>::new(be, [m, 4])?;
                    k_geometry(
                        &fa, &fb, &fc, &fd, &mut s, &mut o3, &mut o4, &mut o2, &mut om2, &mut om3,
                        &mut red,
                    )?;
                    Ok((
                        s.download()?,
                        o3.download()?,
                        o4.download()?,
                        o2.download()?,
                        om2.download()?,
                        om3.download()?,
                        red.download()?,
                    ))
                },
                |cv, gv| {
                    let t = Tol::close(1e-5, 1e-5);
                    let (a, b, c, d) = (&a, &b, &c, &d);
                    let inp = |w: usize| {
                        move |k: usize| {
                            format!(
                                "row {} a={} b={} c={} d={}",
                                k % w,
                                a[k / w],
                                b[k / w],
                                c[k / w],
                                d[k / w]
                            )
                        }
                    };
                    compare("length/dot", &cv.0, &gv.0, t, &inp(6))?;
                    compare("cross/normalize Vec3", &cv.1, &gv.1, t, &inp(4))?;
                    compare("normalize Vec4", &cv.2, &gv.2, t, &inp(1))?;
                    compare("Vec2", &cv.3, &gv.3, t, &inp(2))?;
                    compare("outer Vec2", &cv.4, &gv.4, t, &inp(1))?;
                    compare("outer Vec3", &cv.5, &gv.5, t, &inp(1))?;
                    // Sums and products run left to right on both backends: alone exact
                    // (rows 0 and 1), added together within a contracted multiply-add's
                    // rounding (rows 2 and 3).
                    let rows = |v: &[f32], fused: bool| -> Vec<f32> {
                        v.chunks(4)
                            .flat_map(|r| r[fused as usize * 2..][..2].to_vec())
                            .collect()
                    };
                    let inp2 = |k: usize| inp(4)(k / 2 * 4);
                    compare(
                        "sum/product",
                        &rows(&cv.6, false),
                        &rows(&gv.6, false),
                        Tol::Exact,
                        &inp2,
                    )?;
                    compare(
                        "sum + product",
                        &rows(&cv.6, true),
                        &rows(&gv.6, true),
                        t,
                        &inp2,
                    )
                },
            )
        },
    );
}

// =========================================================================================
// 7. Matrices: transpose determinant inverse trace, products, columns, dynamic indexing
// =========================================================================================

#[kernel]
fn k_matrices(
    a2: &Field<Mat2>,
    a3: &Field<Mat3, 2>,
    v: &Field<Vec3, 2>,
    k: &Field<i32, 2>,
    o2: &mut Field<Mat2, 2>,
    o3: &mut Field<Mat3, 3>,
    ov: &mut Field<Vec3, 2>,
    os: &mut Field<f32, 2>,
) {
    for c in a3.indices() {
        let m = a3[c];
        let lin = c.x * 8 + c.y;
        let p = a2[lin];
        let x = v[c];
        let j = k[c];
        o2[ivec2(lin, 0)] = transpose(p);
        o2[ivec2(lin, 1)] = p.inverse();
        o2[ivec2(lin, 2)] = p * inverse(p) - Mat2::IDENTITY;
        o2[ivec2(lin, 3)] = 2.0 * p + p * 0.5 - p / 4.0;
        o2[ivec2(lin, 4)] = -p + p.transpose() * p;
        o3[ivec3(c.x, c.y, 0)] = m.transpose();
        o3[ivec3(c.x, c.y, 1)] = inverse(m);
        o3[ivec3(c.x, c.y, 2)] = m * transpose(m) + m - Mat3::IDENTITY;
        o3[ivec3(c.x, c.y, 3)] = (m * 3.0 - m / 2.0) * 0.25;
        o3[ivec3(c.x, c.y, 4)] = -m;
        ov[ivec2(lin, 0)] = m * x;
        ov[ivec2(lin, 1)] = m.col(j);
        ov[ivec2(lin, 2)] = m[j] + m.x_axis + vec3(m.y_axis.z, m[2][j], m.z_axis[j]);
        ov[ivec2(lin, 3)] = transpose(m) * x;
        os[ivec2(lin, 0)] = determinant(m);
        os[ivec2(lin, 1)] = p.determinant();
        os[ivec2(lin, 2)] = trace(m);
        os[ivec2(lin, 3)] = trace(p) + m.determinant();
        os[ivec2(lin, 4)] = (p * p.col(j)).x + p[j][1 - j];
    }
}

/// Exact: transpose, negation, column reads (`col`, `m[j]`, dynamic `m[2][j]`, index clamped
/// into range on both sides). trace: 2 ulp (three positive terms, maybe reordered).
/// Products, scaling by non-powers of two and division: relative 1e-5, absolute 1e-5 times
/// the size of the entries (up to 6, so 1e-4). inverse and determinant: matrices are
/// diagonally dominant (entries in [-2, 2] plus 6 on the diagonal, condition number below
/// ~5), relative 1e-4, absolute 1e-4. p * inverse(p) - I is compared with absolute 1e-5.
#[test]
fn matrix_builtins() {
    // a3 is [5, 8]: 40 matrices; a2 holds 40 Mat2.
    property(
        16,
        (
            mat2s(6.0, 40),
            mat3s(6.0, 40),
            vec3s(-3.0, 3.0, 40),
            vec(-1i32..4, 40),
        ),
        |bk, (a2, a3, v, k)| {
            agree(
                bk,
                false,
                |be| {
                    let f2 = Field::from_slice(be, [40], &a2)?;
                    let f3 = Field::from_slice(be, [5, 8], &a3)?;
                    let fv = Field::from_slice(be, [5, 8], &v)?;
                    let fk = Field::from_slice(be, [5, 8], &k)?;
                    let mut o2 = Field::<Mat2, 2>::new(be, [40, 5])?;
                    let mut o3 = Field::<Mat3, 3>::new(be, [5, 8, 5])?;
                    let mut ov = Field::<Vec3, 2>::new(be, [40, 4])?;
                    let mut os = Field::<f32, 2>::new(be, [40, 5])?;
                    k_matrices(&f2, &f3, &fv, &fk, &mut o2, &mut o3, &mut ov, &mut os)?;
                    Ok((
                        o2.download()?,
                        o3.download()?,
                        ov.download()?,
                        os.download()?,
                    ))
                },
                |c, g| {
                    let t = Tol::close(1e-4, 1e-4);
                    for (i, (x, y)) in c.0.iter().zip(&g.0).enumerate() {
                        let tol = if i % 5 == 0 {
                            Tol::Exact
                        } else if i % 5 == 2 {
                            Tol::close(0.0, 1e-5)
                        } else {
                            t
                        };
                        compare("Mat2 ops", &[*x], &[*y], tol, &|_| {
                            format!("op {} p={:?}", i % 5, a2[i / 5])
                        })?;
                    }
                    for (i, (x, y)) in c.1.iter().zip(&g.1).enumerate() {
                        let tol = if i % 5 == 0 || i % 5 == 4 {
                            Tol::Exact
                        } else {
                            t
                        };
                        compare("Mat3 ops", &[*x], &[*y], tol, &|_| {
                            format!("op {} m={:?}", i % 5, a3[i / 5])
                        })?;
                    }
                    for (i, (x, y)) in c.2.iter().zip(&g.2).enumerate() {
                        let tol = if i % 4 == 1 { Tol::Exact } else { t };
                        compare("Mat3 * Vec3, columns", &[*x], &[*y], tol, &|_| {
                            format!(
                                "op {} m={:?} v={} j={}",
                                i % 4,
                                a3[i / 4],
                                v[i / 4],
                                k[i / 4]
                            )
                        })?;
                    }
                    for (i, (x, y)) in c.3.iter().zip(&g.3).enumerate() {
                        // trace: the same additions in the same order, all positive (the
                        // diagonal is dominant); 2 ulp in case the compiler reorders them.
                        let tol = if i % 5 == 2 {
                            Tol::close(2.4e-7, 0.0)
                        } else {
                            t
                        };
                        compare("det/trace", &[*x], &[*y], tol, &|_| {
                            format!(
                                "op {} m={:?} p={:?} j={}",
                                i % 5,
                                a3[i / 5],
                                a2[i / 5],
                                k[i / 5]
                            )
                        })?;
                    }
                    Ok(())
                },
            )
        },
    );
}

// =========================================================================================
// 8. svd and polar (2x2 and 3x3), tuple lets
// =========================================================================================

#[kernel]
fn k_svd_polar(
    a2: &Field<Mat2>,
    a3: &Field<Mat3>,
    u2: &mut Field<Mat2>,
    s2: &mut Field<Vec2>,
    v2: &mut Field<Mat2>,
    r2: &mut Field<Mat2>,
    p2: &mut Field<Mat2>,
    u3: &mut Field<Mat3>,
    s3: &mut Field<Vec3>,
    v3: &mut Field<Mat3>,
    r3: &mut Field<Mat3>,
    p3: &mut Field<Mat3>,
) {
    for i in a2.indices() {
        let (u, s, v) = svd(a2[i]);
        u2[i] = u;
        s2[i] = s;
        v2[i] = v;
        let (r, p) = polar(a2[i]);
        r2[i] = r;
        p2[i] = p;
        let (uu, mut ss, vv) = svd(a3[i]);
        ss.x += 0.0;
        u3[i] = uu;
        s3[i] = ss;
        v3[i] = vv;
        let (rr, pp) = polar(a3[i]);
        r3[i] = rr;
        p3[i] = pp;
    }
}

fn max_abs2(m: Mat2) -> f32 {
    m.to_cols_array().iter().fold(0.0f32, |a, x| a.max(x.abs()))
}
fn max_abs3(m: Mat3) -> f32 {
    m.to_cols_array().iter().fold(0.0f32, |a, x| a.max(x.abs()))
}

/// svd / polar are compared through what they must satisfy, not entry by entry (singular
/// vectors are not unique): on every backend U diag(s) V^T and R S reconstruct the input
/// within 1e-4 absolute (entries in [-2, 2]), U, V and R are rotations within 1e-4, and the
/// singular values agree between CPU and GPU within 1e-4 absolute (they are well conditioned:
/// a perturbation of the matrix by e moves them by at most e).
#[test]
fn svd_and_polar() {
    let n = 128usize;
    property(12, (mat2s(0.0, n), mat3s(0.0, n)), move |bk, (a2, a3)| {
        agree(
            bk,
            false,
            |be| {
                let m = n as u32;
                let f2 = Field::from_slice(be, [m], &a2)?;
                let f3 = Field::from_slice(be, [m], &a3)?;
                let mut u2 = Field::<Mat2>::new(be, [m])?;
                let mut s2 = Field::<Vec2>::new(be, [m])?;
                let mut v2 = Field::<Mat2>::new(be, [m])?;
                let mut r2 = Field::<Mat2>::new(be, [m])?;
                let mut p2 = Field::<Mat2>::new(be, [m])?;
                let mut u3 = Field::<Mat3>::new(be, [m])?;
                let mut s3 = Field::<Vec3>::new(be, [m])?;
                let mut v3 = Field::<Mat3>::new(be, [m])?;
                let mut r3 = Field::<Mat3>::new(be, [m])?;
                let mut p3 = Field::<Mat3>::new(be, [m])?;
                k_svd_polar(
                    &f2, &f3, &mut u2, &mut s2, &mut v2, &mut r2, &mut p2, &mut u3, &mut s3,
                    &mut v3, &mut r3, &mut p3,
                )?;
                let d2 = (
                    u2.download()?,
                    s2.download()?,
                    v2.download()?,
                    r2.download()?,
                    p2.download()?,
                );
                let d3 = (
                    u3.download()?,
                    s3.download()?,
                    v3.download()?,
                    r3.download()?,
                    p3.download()?,
                );
                Ok((d2, d3))
            },
            |c, g| {
                for (name, out) in [("cpu", c), ("gpu", g)] {
                    let (d2, d3) = out;
                    for i in 0..n {
                        let f = a2[i];
                        let back = d2.0[i] * Mat2::from_diagonal(d2.1[i]) * d2.2[i].transpose();
                        let rs = d2.3[i] * d2.4[i];
                        let e = [
                            max_abs2(back - f),
                            max_abs2(rs - f),
                            max_abs2(d2.0[i].transpose() * d2.0[i] - Mat2::IDENTITY),
                            max_abs2(d2.2[i].transpose() * d2.2[i] - Mat2::IDENTITY),
                            (d2.3[i].determinant() - 1.0).abs(),
                        ];
                        prop_assert!(
                            e.iter().all(|x| *x < 1e-4),
                            "{name} 2x2 svd/polar of {f:?}: errors {e:?}"
                        );
                        let f = a3[i];
                        let back = d3.0[i] * Mat3::from_diagonal(d3.1[i]) * d3.2[i].transpose();
                        let rs = d3.3[i] * d3.4[i];
                        let e = [
                            max_abs3(back - f),
                            max_abs3(rs - f),
                            max_abs3(d3.0[i].transpose() * d3.0[i] - Mat3::IDENTITY),
                            max_abs3(d3.2[i].transpose() * d3.2[i] - Mat3::IDENTITY),
                            (d3.3[i].determinant() - 1.0).abs(),
                        ];
                        prop_assert!(
                            e.iter().all(|x| *x < 1e-4),
                            "{name} 3x3 svd/polar of {f:?}: errors {e:?}"
                        );
                    }
                }
                compare("sigma 2x2", &c.0 .1, &g.0 .1, Tol::close(0.0, 1e-4), &|i| {
                    format!("{:?}", a2[i])
                })?;
                compare("sigma 3x3", &c.1 .1, &g.1 .1, Tol::close(0.0, 1e-4), &|i| {
                    format!("{:?}", a3[i])
                })?;
                let rec2 =
                    |d: &(Vec<Mat2>, Vec<Vec2>, Vec<Mat2>, Vec<Mat2>, Vec<Mat2>)| -> Vec<Mat2> {
                        (0..n)
                            .map(|i| d.0[i] * Mat2::from_diagonal(d.1[i]) * d.2[i].transpose())
                            .collect()
                    };
                let rec3 =
                    |d: &(Vec<Mat3>, Vec<Vec3>, Vec<Mat3>, Vec<Mat3>, Vec<Mat3>)| -> Vec<Mat3> {
                        (0..n)
                            .map(|i| d.0[i] * Mat3::from_diagonal(d.1[i]) * d.2[i].transpose())
                            .collect()
                    };
                compare(
                    "U S V^T 2x2",
                    &rec2(&c.0),
                    &rec2(&g.0),
                    Tol::close(0.0, 1e-4),
                    &|i| format!("{:?}", a2[i]),
                )?;
                compare(
                    "U S V^T 3x3",
                    &rec3(&c.1),
                    &rec3(&g.1),
                    Tol::close(0.0, 1e-4),
                    &|i| format!("{:?}", a3[i]),
                )
            },
        )
    });
}

// =========================================================================================
// 9. select, to_bits, from_bits
// =========================================================================================

#[kernel]
fn k_bits_select(
    x: &Field<f32>,
    u: &Field<u32>,
    flag: &Field<bool>,
    ou: &mut Field<u32>,
    of: &mut Field<f32>,
    ov: &mut Field<Vec3>,
    om: &mut Field<Mat2>,
    oi: &mut Field<IVec2>,
    ob: &mut Field<bool>,
) {
    for i in x.indices() {
        let a = x[i];
        let f = flag[i];
        let bits = to_bits(a);
        ou[i] = (bits >> 3u32) ^ a.to_bits() ^ to_bits(-a);
        of[i] = from_bits((u[i] & 0x807fffffu32) | 0x3f800000u32) + from_bits(to_bits(a));
        ov[i] = select(f, vec3(a, 1.0, 2.0), Vec3::ZERO);
        om[i] = select(!f, Mat2::IDENTITY, Mat2::from_cols(vec2(a, a), Vec2::Y));
        oi[i] = select(a > 0.0, ivec2(1, 2), IVec2::splat(-3));
        ob[i] = select(f, a > 0.0, !f) != select(a < 1.0, true, false);
    }
}

/// Exact (bit manipulation and selection; from_bits only builds normal floats in [1, 2),
/// since a GPU may canonicalise NaN payloads).
#[test]
fn bits_and_select() {
    property(
        16,
        (
            f32s(-1e6, 1e6, N),
            vec(any::<u32>(), N),
            vec(any::<bool>(), N),
        ),
        |bk, (x, u, fl)| {
            agree(
                bk,
                false,
                |be| {
                    let n = N as u32;
                    let fx = Field::from_slice(be, [n], &x)?;
                    let fu = Field::from_slice(be, [n], &u)?;
                    let ff = Field::from_slice(be, [n], &fl)?;
                    let mut ou = Field::<u32>::new(be, [n])?;
                    let mut of = Field::<f32>::new(be, [n])?;
                    let mut ov = Field::<Vec3>::new(be, [n])?;
                    let mut om = Field::<Mat2>::new(be, [n])?;
                    let mut oi = Field::<IVec2>::new(be, [n])?;
                    let mut ob = Field::<bool>::new(be, [n])?;
                    k_bits_select(
                        &fx, &fu, &ff, &mut ou, &mut of, &mut ov, &mut om, &mut oi, &mut ob,
                    )?;
                    Ok((
                        ou.download()?,
                        of.download()?,
                        ov.download()?,
                        om.download()?,
                        oi.download()?,
                        ob.download()?,
                    ))
                },
                |c, g| {
                    let inp = |i: usize| format!("x={} u={} flag={}", x[i], u[i], fl[i]);
                    compare("to_bits", &c.0, &g.0, Tol::Exact, &inp)?;
                    compare("from_bits", &c.1, &g.1, Tol::Exact, &inp)?;
                    compare("select Vec3", &c.2, &g.2, Tol::Exact, &inp)?;
                    compare("select Mat2", &c.3, &g.3, Tol::Exact, &inp)?;
                    compare("select IVec2", &c.4, &g.4, Tol::Exact, &inp)?;
                    compare("select bool", &c.5, &g.5, Tol::Exact, &inp)
                },
            )
        },
    );
}

// =========================================================================================
// 10. Counter-based random numbers
// =========================================================================================

#[kernel]
fn k_rand(out_u: &mut Field<u32>, out_f: &mut Field<f32, 2>, seed: u32) {
    for i in out_u.indices() {
        out_u[i] = rand_u32(seed, i);
        out_f[ivec2(i as i32, 0)] = rand_f32(seed ^ 0x9e3779b9u32, i * 7u32 + 1u32);
        out_f[ivec2(i as i32, 1)] = rng::rand_f32(seed, i);
    }
}

/// Exact: the same (seed, index) gives the same stream on every backend (integer hash; the
/// f32 is 24 random bits times 2^-24, exact).
#[test]
fn random_numbers() {
    property(16, any::<u32>(), |bk, seed| {
        agree(
            bk,
            false,
            |be| {
                let mut u = Field::<u32>::new(be, [1000])?;
                let mut f = Field::<f32, 2>::new(be, [1000, 2])?;
                k_rand(&mut u, &mut f, seed)?;
                Ok((u.download()?, f.download()?))
            },
            |c, g| {
                same("rand_u32", &c.0, &g.0, Tol::Exact)?;
                same("rand_f32", &c.1, &g.1, Tol::Exact)?;
                prop_assert!(c.1.iter().all(|x| (0.0..1.0).contains(x)));
                Ok(())
            },
        )
    });
}

// =========================================================================================
// 11. Constructors and constants
// =========================================================================================

#[kernel]
fn k_constructors(
    x: &Field<f32>,
    k: &Field<i32>,
    m2: &mut Field<Mat2>,
    m3: &mut Field<Mat3>,
    v4: &mut Field<Vec4>,
    v3: &mut Field<Vec3>,
    iv3: &mut Field<IVec3>,
    uv3: &mut Field<UVec3>,
    iv2: &mut Field<IVec2>,
    uv2: &mut Field<UVec2>,
) {
    for i in x.indices() {
        let a = x[i];
        let n = k[i];
        let p =
            vec2(a, 2.0) + Vec2::new(1.0, a) + Vec2::splat(a) + Vec2::ZERO + Vec2::ONE + Vec2::X;
        let q = vec3(a, -a, 0.5) + Vec3::new(1.0, 2.0, 3.0) + Vec3::splat(a) + Vec3::Y + Vec3::ONE;
        m2[i] = mat2(p, vec2(a, 1.0))
            + Mat2::from_cols(Vec2::X, Vec2::Y)
            + Mat2::IDENTITY
            + Mat2::from_diagonal(p)
            + Mat2::ZERO;
        m3[i] = mat3(q, Vec3::Z, vec3(a, a, a))
            + Mat3::from_cols(q, q, Vec3::X)
            + Mat3::IDENTITY
            + Mat3::from_diagonal(Vec3::new(1.0, a, 3.0))
            + Mat3::ZERO;
        v4[i] = vec4(a, 1.0, 2.0, 3.0)
            + Vec4::new(p.x, p.y, q.z, core::f32::consts::PI)
            + Vec4::splat(0.25)
            + Vec4::W
            + Vec4::ZERO;
        v3[i] = Vec3::X
            + Vec3::NEG_ONE
            + Vec3::splat(core::f32::consts::E)
            + vec3(f32::EPSILON, 0.0, 1.0);
        iv3[i] = ivec3(n, -n, 7)
            + IVec3::new(1, 2, 3)
            + IVec3::splat(n)
            + IVec3::ONE
            + IVec3::ZERO
            + IVec3::NEG_ONE;
        uv3[i] = uvec3(n as u32, 3u32, 9u32)
            + UVec3::new(1, 2, 3)
            + UVec3::splat(5)
            + UVec3::ONE
            + UVec3::MAX;
        iv2[i] =
            ivec2(n, 3) + IVec2::new(-1, n) + IVec2::splat(2) + IVec2::X + IVec2::Y + IVec2::MIN;
        uv2[i] =
            uvec2(4u32, n as u32) + UVec2::new(1, 1) + UVec2::splat(3) + UVec2::ONE + UVec2::ZERO;
    }
}

/// Integers exact. Floats: constructors and constants only move values, but the sums in
/// this kernel are not `precise` GLSL, so the GPU compiler may reassociate them (lavapipe
/// folds `(-a + 2) + a` into `2`): a few ulps of the largest intermediate, which is below
/// 400 here: absolute 1e-4, relative 1e-6.
#[test]
fn constructors_and_constants() {
    property(
        12,
        (f32s(-100.0, 100.0, N), vec(i32_any(), N)),
        |bk, (x, k)| {
            agree(
                bk,
                false,
                |be| {
                    let n = N as u32;
                    let fx = Field::from_slice(be, [n], &x)?;
                    let fk = Field::from_slice(be, [n], &k)?;
                    let mut m2 = Field::<Mat2>::new(be, [n])?;
                    let mut m3 = Field::<Mat3>::new(be, [n])?;
                    let mut v4 = Field::<Vec4>::new(be, [n])?;
                    let mut v3 = Field::<Vec3>::new(be, [n])?;
                    let mut i3 = Field::<IVec3>::new(be, [n])?;
                    let mut u3 = Field::<UVec3>::new(be, [n])?;
                    let mut i2 = Field::<IVec2>::new(be, [n])?;
                    let mut u2 = Field::<UVec2>::new(be, [n])?;
                    k_constructors(
                        &fx, &fk, &mut m2, &mut m3, &mut v4, &mut v3, &mut i3, &mut u3, &mut i2,
                        &mut u2,
                    )?;
                    Ok((
                        m2.download()?,
                        m3.download()?,
                        v4.download()?,
                        v3.download()?,
                        i3.download()?,
                        u3.download()?,
                        i2.download()?,
                        u2.download()?,
                    ))
                },
                |c, g| {
                    let inp = |i: usize| format!("x={} k={}", x[i], k[i]);
                    let t = Tol::close(1e-6, 1e-4);
                    compare("Mat2", &c.0, &g.0, t, &inp)?;
                    compare("Mat3", &c.1, &g.1, t, &inp)?;
                    compare("Vec4", &c.2, &g.2, t, &inp)?;
                    compare("Vec3", &c.3, &g.3, t, &inp)?;
                    compare("IVec3", &c.4, &g.4, Tol::Exact, &inp)?;
                    compare("UVec3", &c.5, &g.5, Tol::Exact, &inp)?;
                    compare("IVec2", &c.6, &g.6, Tol::Exact, &inp)?;
                    compare("UVec2", &c.7, &g.7, Tol::Exact, &inp)
                },
            )
        },
    );
}

// =========================================================================================
// 12. Casts: `as` between f32 / i32 / u32 / bool, and as_vec2 / as_ivec2 / ... on vectors
// =========================================================================================

#[kernel]
fn k_casts(
    f: &Field<f32>,
    i: &Field<i32>,
    u: &Field<u32>,
    b: &Field<bool>,
    v2: &Field<Vec2>,
    v3: &Field<Vec3>,
    oi: &mut Field<IVec3>,
    ou: &mut Field<UVec3>,
    of: &mut Field<Vec3>,
    o2: &mut Field<Vec2, 2>,
    oi2: &mut Field<IVec2, 2>,
    ou2: &mut Field<UVec2, 2>,
    o3: &mut Field<Vec3, 2>,
    oi3: &mut Field<IVec3, 2>,
    ou3: &mut Field<UVec3, 2>,
) {
    for k in f.indices() {
        let x = f[k];
        let n = i[k];
        let m = u[k];
        let t = b[k];
        let r = k as i32;
        oi[k] = ivec3(x as i32, m as i32, t as i32 + (x > 0.0) as i32);
        ou[k] = uvec3(abs(x) as u32, n as u32, t as u32);
        of[k] = vec3((n >> 8) as f32, (m >> 8) as f32, x as f32);
        let w = v2[k];
        let w3 = v3[k];
        let iw = w.as_ivec2();
        let uw = w.abs().as_uvec2();
        let iw3 = w3.as_ivec3();
        let uw3 = abs(w3).as_uvec3();
        o2[ivec2(r, 0)] = iw.as_vec2();
        o2[ivec2(r, 1)] = uw.as_vec2();
        o2[ivec2(r, 2)] = w.as_vec2();
        oi2[ivec2(r, 0)] = iw;
        oi2[ivec2(r, 1)] = uw.as_ivec2();
        oi2[ivec2(r, 2)] = iw.as_ivec2();
        ou2[ivec2(r, 0)] = uw;
        ou2[ivec2(r, 1)] = iw.as_uvec2();
        ou2[ivec2(r, 2)] = uw.as_uvec2();
        o3[ivec2(r, 0)] = iw3.as_vec3();
        o3[ivec2(r, 1)] = uw3.as_vec3();
        o3[ivec2(r, 2)] = w3.as_vec3();
        oi3[ivec2(r, 0)] = iw3;
        oi3[ivec2(r, 1)] = uw3.as_ivec3();
        oi3[ivec2(r, 2)] = iw3.as_ivec3();
        ou3[ivec2(r, 0)] = uw3;
        ou3[ivec2(r, 1)] = iw3.as_uvec3();
        ou3[ivec2(r, 2)] = uw3.as_uvec3();
    }
}

/// Exact: float -> int truncates toward zero (inputs in (-1e6, 1e6) so in range on both),
/// int <-> uint reinterpret the bits, bool gives 0/1, int -> float of values below 2^24 is exact.
#[test]
fn casts() {
    property(
        16,
        (
            f32s(-1e6, 1e6, N),
            vec(i32_any(), N),
            vec(u32_any(), N),
            vec(any::<bool>(), N),
            vec2s(-1e5, 1e5, N),
            vec3s(-1e5, 1e5, N),
        ),
        |bk, (f, i, u, b, v2, v3)| {
            agree(
                bk,
                false,
                |be| {
                    let n = N as u32;
                    let ff = Field::from_slice(be, [n], &f)?;
                    let fi = Field::from_slice(be, [n], &i)?;
                    let fu = Field::from_slice(be, [n], &u)?;
                    let fb = Field::from_slice(be, [n], &b)?;
                    let f2 = Field::from_slice(be, [n], &v2)?;
                    let f3 = Field::from_slice(be, [n], &v3)?;
                    let mut oi = Field::<IVec3>::new(be, [n])?;
                    let mut ou = Field::<UVec3>::new(be, [n])?;
                    let mut of = Field::<Vec3>::new(be, [n])?;
                    let mut o2 = Field::<Vec2, 2>::new(be, [n, 3])?;
                    let mut oi2 = Field::<IVec2, 2>::new(be, [n, 3])?;
                    let mut ou2 = Field::<UVec2, 2>::new(be, [n, 3])?;
                    let mut o3 = Field::<Vec3, 2>::new(be, [n, 3])?;
                    let mut oi3 = Field::<IVec3, 2>::new(be, [n, 3])?;
                    let mut ou3 = Field::<UVec3, 2>::new(be, [n, 3])?;
                    k_casts(
                        &ff, &fi, &fu, &fb, &f2, &f3, &mut oi, &mut ou, &mut of, &mut o2, &mut oi2,
                        &mut ou2, &mut o3, &mut oi3, &mut ou3,
                    )?;
                    Ok((
                        (oi.download()?, ou.download()?, of.download()?),
                        (o2.download()?, oi2.download()?, ou2.download()?),
                        (o3.download()?, oi3.download()?, ou3.download()?),
                    ))
                },
                |c, g| {
                    let inp = |k: usize| format!("f={} i={} u={} b={}", f[k], i[k], u[k], b[k]);
                    let inp2 =
                        |k: usize| format!("row {} v2={} v3={}", k % 3, v2[k / 3], v3[k / 3]);
                    compare("scalar casts -> IVec3", &c.0 .0, &g.0 .0, Tol::Exact, &inp)?;
                    compare("scalar casts -> UVec3", &c.0 .1, &g.0 .1, Tol::Exact, &inp)?;
                    compare("scalar casts -> Vec3", &c.0 .2, &g.0 .2, Tol::Exact, &inp)?;
                    compare("as_vec2", &c.1 .0, &g.1 .0, Tol::Exact, &inp2)?;
                    compare("as_ivec2", &c.1 .1, &g.1 .1, Tol::Exact, &inp2)?;
                    compare("as_uvec2", &c.1 .2, &g.1 .2, Tol::Exact, &inp2)?;
                    compare("as_vec3", &c.2 .0, &g.2 .0, Tol::Exact, &inp2)?;
                    compare("as_ivec3", &c.2 .1, &g.2 .1, Tol::Exact, &inp2)?;
                    compare("as_uvec3", &c.2 .2, &g.2 .2, Tol::Exact, &inp2)
                },
            )
        },
    );
}

#[kernel]
fn k_int_to_float(i: &Field<i32>, u: &Field<u32>, out: &mut Field<Vec2>) {
    for k in i.indices() {
        out[k] = vec2(i[k] as f32, u[k] as f32);
    }
}

/// Exact: i32 / u32 -> f32 of any value rounds to nearest even (Rust `as`; SPIR-V
/// OpConvertSToF / OpConvertUToF with the default rounding of Vulkan, which is RTE).
#[test]
fn large_int_to_float_casts() {
    property(8, (vec(i32_any(), N), vec(u32_any(), N)), |bk, (i, u)| {
        agree(
            bk,
            false,
            |be| {
                let fi = Field::from_slice(be, [N as u32], &i)?;
                let fu = Field::from_slice(be, [N as u32], &u)?;
                let mut o = Field::<Vec2>::new(be, [N as u32])?;
                k_int_to_float(&fi, &fu, &mut o)?;
                o.download()
            },
            |c, g| {
                compare("int -> f32", c, g, Tol::Exact, &|k| {
                    format!("i={} u={}", i[k], u[k])
                })
            },
        )
    });
}

// =========================================================================================
// 13. i32 arithmetic: wrapping, division and remainder by zero, shifts, bit ops
// =========================================================================================

#[kernel]
fn k_i32_ops(a: &Field<i32>, b: &Field<i32>, out: &mut Field<i32, 2>) {
    for i in a.indices() {
        let x = a[i];
        let y = b[i];
        let r = [
            x + y,
            x - y,
            x * y,
            x / y,
            x % y,
            x / 0,
            x % 0,
            x & y,
            x | y,
            x ^ y,
            x << y,
            x >> y,
            x << 3,
            x >> 35,
            -x,
            !x,
            (x < y) as i32,
            (x <= y) as i32 + 2 * (x == y) as i32 + 4 * (x != y) as i32,
            (x > y) as i32 + 2 * (x >= y) as i32,
            x * 1103515245 + 12345,
            (x - 7) / -3 + (x % -5) * 100,
            i32::MIN / x + i32::MAX % (y | 1),
        ];
        let row = i as i32;
        for k in 0..22 {
            out[ivec2(row, k)] = r[k];
        }
    }
}

/// Exact. The language defines: wrapping + - * and negation, x / 0 == x % 0 == 0,
/// i32::MIN / -1 == i32::MIN, i32::MIN % -1 == 0, shift amounts taken modulo 32, `>>`
/// arithmetic on i32, `!` bitwise.
#[test]
fn i32_arithmetic() {
    property(20, (vec(i32_any(), N), vec(i32_any(), N)), |bk, (a, b)| {
        agree(
            bk,
            false,
            |be| {
                let fa = Field::from_slice(be, [N as u32], &a)?;
                let fb = Field::from_slice(be, [N as u32], &b)?;
                let mut o = Field::<i32, 2>::new(be, [N as u32, 22])?;
                k_i32_ops(&fa, &fb, &mut o)?;
                o.download()
            },
            |c, g| {
                compare("i32 ops", c, g, Tol::Exact, &|k| {
                    format!("op {} x={} y={}", k % 22, a[k / 22], b[k / 22])
                })
            },
        )
    });
}

// =========================================================================================
// 14. u32 arithmetic
// =========================================================================================

#[kernel]
fn k_u32_ops(a: &Field<u32>, b: &Field<u32>, out: &mut Field<u32, 2>) {
    for i in a.indices() {
        let x = a[i];
        let y = b[i];
        let r = [
            x + y,
            x - y,
            x * y,
            x / y,
            x % y,
            x / 0,
            x % 0u32,
            x & y,
            x | y,
            x ^ y,
            x << y,
            x >> y,
            x << 31u32,
            x >> 32,
            !x,
            (x < y) as u32 + 2 * (x <= y) as u32 + 4 * (x == y) as u32 + 8 * (x != y) as u32,
            (x > y) as u32 + 2u32 * (x >= y) as u32,
            x * 2654435761u32 + 1013904223,
            0u32 - x,
            4000000000u32 / (y | 1u32) + x % 7u32,
        ];
        for k in 0..20 {
            out[ivec2(i as i32, k)] = r[k];
        }
    }
}

/// Exact: wrapping arithmetic, x / 0 == x % 0 == 0, shifts modulo 32, `>>` logical.
#[test]
fn u32_arithmetic() {
    property(20, (vec(u32_any(), N), vec(u32_any(), N)), |bk, (a, b)| {
        agree(
            bk,
            false,
            |be| {
                let fa = Field::from_slice(be, [N as u32], &a)?;
                let fb = Field::from_slice(be, [N as u32], &b)?;
                let mut o = Field::<u32, 2>::new(be, [N as u32, 20])?;
                k_u32_ops(&fa, &fb, &mut o)?;
                o.download()
            },
            |c, g| {
                compare("u32 ops", c, g, Tol::Exact, &|k| {
                    format!("op {} x={} y={}", k % 20, a[k / 20], b[k / 20])
                })
            },
        )
    });
}

// =========================================================================================
// 15. Integer vectors: arithmetic with vectors and scalars on either side
// =========================================================================================

#[kernel]
fn k_int_vectors(
    a: &Field<IVec3>,
    b: &Field<IVec3>,
    ua: &Field<UVec3>,
    ub: &Field<UVec3>,
    oi3: &mut Field<IVec3, 2>,
    oi2: &mut Field<IVec2, 2>,
    ou3: &mut Field<UVec3, 2>,
    ou2: &mut Field<UVec2, 2>,
) {
    for i in a.indices() {
        let x = a[i];
        let y = b[i];
        let s = y.x;
        let r = i as i32;
        let v3 = [
            x + y,
            x - y,
            x * y,
            x / y,
            x % y,
            x + s,
            s - x,
            x * 3,
            x / s,
            s % x,
            -x,
            x / IVec3::ZERO,
        ];
        for k in 0..12 {
            oi3[ivec2(r, k)] = v3[k];
        }
        let p = ivec2(x.x, x.y);
        let q = ivec2(y.z, y.y);
        let v2 = [p + q, p - q, p * q, p / q, p % q, 7 - p, p * s, p % 0, -p];
        for k in 0..9 {
            oi2[ivec2(r, k)] = v2[k];
        }
        let u = ua[i];
        let w = ub[i];
        let t = w.z;
        let w3 = [
            u + w,
            u - w,
            u * w,
            u / w,
            u % w,
            u + t,
            t - u,
            u * 5u32,
            u / t,
            t % u,
            u / UVec3::ZERO,
        ];
        for k in 0..11 {
            ou3[ivec2(r, k)] = w3[k];
        }
        let m = uvec2(u.x, w.y);
        let n = uvec2(w.x, u.z);
        let w2 = [
            m + n,
            m - n,
            m * n,
            m / n,
            m % n,
            m * 3u32,
            100u32 / m,
            m % 0u32,
        ];
        for k in 0..8 {
            ou2[ivec2(r, k)] = w2[k];
        }
    }
}

/// Exact: component-wise wrapping arithmetic with the scalar rules (division by zero gives 0).
#[test]
fn integer_vector_arithmetic() {
    let n = 200usize;
    let iv3 = || (i32_any(), i32_any(), i32_any()).prop_map(|(x, y, z)| IVec3::new(x, y, z));
    let uv3 = || (u32_any(), u32_any(), u32_any()).prop_map(|(x, y, z)| UVec3::new(x, y, z));
    property(
        16,
        (vec(iv3(), n), vec(iv3(), n), vec(uv3(), n), vec(uv3(), n)),
        move |bk, (a, b, ua, ub)| {
            agree(
                bk,
                false,
                |be| {
                    let m = n as u32;
                    let fa = Field::from_slice(be, [m], &a)?;
                    let fb = Field::from_slice(be, [m], &b)?;
                    let fua = Field::from_slice(be, [m], &ua)?;
                    let fub = Field::from_slice(be, [m], &ub)?;
                    let mut oi3 = Field::<IVec3, 2>::new(be, [m, 12])?;
                    let mut oi2 = Field::<IVec2, 2>::new(be, [m, 9])?;
                    let mut ou3 = Field::<UVec3, 2>::new(be, [m, 11])?;
                    let mut ou2 = Field::<UVec2, 2>::new(be, [m, 8])?;
                    k_int_vectors(&fa, &fb, &fua, &fub, &mut oi3, &mut oi2, &mut ou3, &mut ou2)?;
                    Ok((
                        oi3.download()?,
                        oi2.download()?,
                        ou3.download()?,
                        ou2.download()?,
                    ))
                },
                |c, g| {
                    let (a, b, ua, ub) = (&a, &b, &ua, &ub);
                    let inp = |w: usize| {
                        move |k: usize| {
                            format!(
                                "op {} a={} b={} ua={} ub={}",
                                k % w,
                                a[k / w],
                                b[k / w],
                                ua[k / w],
                                ub[k / w]
                            )
                        }
                    };
                    compare("IVec3", &c.0, &g.0, Tol::Exact, &inp(12))?;
                    compare("IVec2", &c.1, &g.1, Tol::Exact, &inp(9))?;
                    compare("UVec3", &c.2, &g.2, Tol::Exact, &inp(11))?;
                    compare("UVec2", &c.3, &g.3, Tol::Exact, &inp(8))
                },
            )
        },
    );
}

// =========================================================================================
// 16. bool: logic, comparisons, bool fields (1-D and 2-D) and a bool scalar
// =========================================================================================

#[kernel]
fn k_bools(p: &Field<bool>, q: &Field<bool>, x: &Field<i32>, out: &mut Field<bool, 2>, flag: bool) {
    for i in p.indices() {
        let a = p[i];
        let c = q[i];
        let n = x[i];
        let r = [
            a && c,
            a || c,
            !a,
            a & c,
            a | c,
            a ^ c,
            a == c,
            a != c,
            (n > 0) && !c || flag,
            select(a, c, flag),
            if a { c } else { !c },
            n % 3 == 0 || a && n / 0 == 0,
            !(a && (c || flag)) == (!a || !c && !flag),
            (n < 5) != a,
        ];
        for k in 0..14 {
            out[ivec2(i as i32, k)] = r[k];
        }
    }
}

/// Exact.
#[test]
fn bool_logic() {
    property(
        16,
        (
            vec(any::<bool>(), N),
            vec(any::<bool>(), N),
            vec(-20i32..20, N),
            any::<bool>(),
        ),
        |bk, (p, q, x, flag)| {
            agree(
                bk,
                false,
                |be| {
                    let fp = Field::from_slice(be, [N as u32], &p)?;
                    let fq = Field::from_slice(be, [N as u32], &q)?;
                    let fx = Field::from_slice(be, [N as u32], &x)?;
                    let mut o = Field::<bool, 2>::new(be, [N as u32, 14])?;
                    k_bools(&fp, &fq, &fx, &mut o, flag)?;
                    o.download()
                },
                |c, g| {
                    compare("bool ops", c, g, Tol::Exact, &|k| {
                        format!(
                            "op {} p={} q={} x={} flag={flag}",
                            k % 14,
                            p[k / 14],
                            q[k / 14],
                            x[k / 14]
                        )
                    })
                },
            )
        },
    );
}

// =========================================================================================
// 17. Compound assignment on locals (every operator) and on field elements
// =========================================================================================

#[kernel]
fn k_compound(
    xi: &Field<i32>,
    yi: &Field<i32>,
    xu: &Field<u32>,
    yu: &Field<u32>,
    xf: &Field<f32>,
    yf: &Field<f32>,
    oi: &mut Field<i32>,
    ou: &mut Field<u32>,
    of: &mut Field<f32>,
    ov: &mut Field<Vec3>,
    om: &mut Field<Mat2>,
    oiv: &mut Field<IVec2>,
    ouv: &mut Field<UVec3>,
) {
    for i in xi.indices() {
        let b = yi[i];
        let mut a = xi[i];
        a += b;
        a -= 3;
        a *= b;
        a /= 7;
        a %= 1000;
        a &= 0x7fff;
        a |= 0x10000;
        a ^= b;
        a <<= 3;
        a >>= 2;
        oi[i] = a;
        let w = yu[i];
        let mut u = xu[i];
        u += w;
        u -= 5u32;
        u *= w;
        u /= 3u32;
        u %= 100000u32;
        u &= w | 0xffu32;
        u |= 0x100u32;
        u ^= w;
        u <<= 4u32;
        u >>= w;
        ou[i] = u;
        let g = yf[i];
        let mut f = xf[i];
        f += g;
        f -= 1.5;
        f *= 0.5;
        f /= g;
        of[i] = f;
        let mut v = Vec3::splat(f);
        v += Vec3::ONE;
        v -= vec3(1.0, 2.0, 3.0);
        v *= 2.0;
        v /= 4.0;
        v *= vec3(g, 1.0, -1.0);
        v /= Vec3::splat(g);
        v += 1.0;
        ov[i] = v;
        let mut m = Mat2::IDENTITY;
        m *= Mat2::from_cols(vec2(g, 1.0), vec2(0.5, f));
        m += Mat2::IDENTITY;
        m -= Mat2::from_diagonal(vec2(0.25, 0.5));
        m *= 2.0;
        m /= 4.0;
        om[i] = m;
        let mut iv = ivec2(a, b);
        iv += 1;
        iv -= ivec2(3, -3);
        iv *= ivec2(2, 3);
        iv /= 2;
        iv %= ivec2(5, 0);
        oiv[i] = iv;
        let mut uv = uvec3(u, w, 7u32);
        uv += UVec3::ONE;
        uv -= 2u32;
        uv *= uvec3(3u32, 5u32, w);
        uv /= uvec3(2u32, 0u32, 3u32);
        uv %= 1000u32;
        ouv[i] = uv;
        // On field elements: a read and a write (`+=` and `-=` alone are atomic).
        oi[i] *= b;
        oi[i] >>= 1;
        oi[i] %= 977;
        ou[i] ^= w;
        ou[i] |= 1u32;
        ou[i] /= 3u32;
        of[i] *= g;
        of[i] /= 2.0;
        ov[i] *= g;
        om[i] *= 2.0;
        oiv[i] *= ivec2(b, 2);
        ouv[i] *= 3u32;
    }
}

/// Integers exact. Floats: a chain of roundings, each at most a few ulps apart between CPU
/// and GPU (division is 2.5 ulp on Vulkan; operations may be fused): relative 1e-5 and
/// absolute 1e-5 (inputs below 100, divisors in [0.5, 4]).
#[test]
fn compound_assignment() {
    property(
        16,
        (
            vec(i32_any(), N),
            vec(i32_any(), N),
            vec(u32_any(), N),
            vec(u32_any(), N),
            f32s(-100.0, 100.0, N),
            f32s(0.5, 4.0, N),
        ),
        |bk, (xi, yi, xu, yu, xf, yf)| {
            agree(
                bk,
                false,
                |be| {
                    let n = N as u32;
                    let (a, b) = (
                        Field::from_slice(be, [n], &xi)?,
                        Field::from_slice(be, [n], &yi)?,
                    );
                    let (c, d) = (
                        Field::from_slice(be, [n], &xu)?,
                        Field::from_slice(be, [n], &yu)?,
                    );
                    let (e, f) = (
                        Field::from_slice(be, [n], &xf)?,
                        Field::from_slice(be, [n], &yf)?,
                    );
                    let mut oi = Field::<i32>::new(be, [n])?;
                    let mut ou = Field::<u32>::new(be, [n])?;
                    let mut of = Field::<f32>::new(be, [n])?;
                    let mut ov = Field::<Vec3>::new(be, [n])?;
                    let mut om = Field::<Mat2>::new(be, [n])?;
                    let mut oiv = Field::<IVec2>::new(be, [n])?;
                    let mut ouv = Field::<UVec3>::new(be, [n])?;
                    k_compound(
                        &a, &b, &c, &d, &e, &f, &mut oi, &mut ou, &mut of, &mut ov, &mut om,
                        &mut oiv, &mut ouv,
                    )?;
                    Ok((
                        oi.download()?,
                        ou.download()?,
                        of.download()?,
                        ov.download()?,
                        om.download()?,
                        oiv.download()?,
                        ouv.download()?,
                    ))
                },
                |c, g| {
                    let inp = |i: usize| {
                        format!(
                            "xi={} yi={} xu={} yu={} xf={} yf={}",
                            xi[i], yi[i], xu[i], yu[i], xf[i], yf[i]
                        )
                    };
                    let t = Tol::close(1e-5, 1e-5);
                    compare("i32 compound", &c.0, &g.0, Tol::Exact, &inp)?;
                    compare("u32 compound", &c.1, &g.1, Tol::Exact, &inp)?;
                    compare("f32 compound", &c.2, &g.2, t, &inp)?;
                    compare("Vec3 compound", &c.3, &g.3, t, &inp)?;
                    compare("Mat2 compound", &c.4, &g.4, t, &inp)?;
                    compare("IVec2 compound", &c.5, &g.5, Tol::Exact, &inp)?;
                    compare("UVec3 compound", &c.6, &g.6, Tol::Exact, &inp)
                },
            )
        },
    );
}

// =========================================================================================
// 18. Places: component assignment, matrix column / entry assignment, local arrays
// =========================================================================================

#[kernel]
fn k_places(
    x: &Field<Vec3>,
    k: &Field<i32>,
    ov: &mut Field<Vec4>,
    om: &mut Field<Mat3>,
    oa: &mut Field<f32, 2>,
    og: &mut Field<i32, 2>,
) {
    for i in x.indices() {
        let v = x[i];
        let j = k[i]; // in [-2, 6]: indices are clamped into range on both sides
        let mut w = Vec4::ZERO;
        w.x = v.y;
        w.y = v.z * 2.0;
        w.z = v.x;
        w.w = 1.0;
        w[j] = 5.0;
        w[j + 1] += v.x;
        w.y -= 1.0;
        ov[i] = w;
        let mut m = Mat3::IDENTITY;
        m.x_axis = v;
        m.y_axis.z = v.x;
        m.z_axis.x = 3.0;
        m[j][0] = -1.0;
        m[2][j] += 2.0;
        m.y_axis[j - 1] *= 4.0;
        om[i] = m;
        let mut arr = [0.0; 5];
        let mut b3 = [v.x, v.y, v.z];
        arr[j] = v.x;
        arr[(j + 2) % 5] += 1.5;
        b3[j] *= 2.0;
        b3[0] -= b3[2];
        arr[4] = b3[0] + b3[1] + b3[2];
        let r = i as i32;
        for t in 0..5 {
            oa[ivec2(r, t)] = arr[t];
        }
        let mut grid = [[0i32; 3]; 3];
        grid[j][j + 1] = j;
        grid[1][1] += 10;
        let mut row = grid[2];
        row[0] = 7;
        grid[0] = row;
        let mut pts = [Vec2::ZERO; 2];
        pts[1].y = 3.0;
        pts[0] = vec2(1.0, 2.0);
        pts[j].x += 0.5;
        let cnt: [i32; 4] = [1, 2, 3, 4];
        for a in 0..3 {
            for b in 0..3 {
                og[ivec2(r, a * 3 + b)] = grid[a][b] + cnt[a + b];
            }
        }
        og[ivec2(r, 9)] = (pts[0].x * 2.0 + pts[1].y * 4.0 + pts[1].x * 8.0) as i32;
    }
}

/// Exact: moves and single roundings (the same on both sides), except the array slot holding
/// a sum of three values, which the GPU compiler may reorder: relative 1e-6, absolute 1e-5
/// (values below 40).
#[test]
fn component_and_element_assignment() {
    property(
        16,
        (vec3s(-10.0, 10.0, N), vec(-2i32..7, N)),
        |bk, (x, k)| {
            agree(
                bk,
                false,
                |be| {
                    let n = N as u32;
                    let fx = Field::from_slice(be, [n], &x)?;
                    let fk = Field::from_slice(be, [n], &k)?;
                    let mut ov = Field::<Vec4>::new(be, [n])?;
                    let mut om = Field::<Mat3>::new(be, [n])?;
                    let mut oa = Field::<f32, 2>::new(be, [n, 5])?;
                    let mut og = Field::<i32, 2>::new(be, [n, 10])?;
                    k_places(&fx, &fk, &mut ov, &mut om, &mut oa, &mut og)?;
                    Ok((
                        ov.download()?,
                        om.download()?,
                        oa.download()?,
                        og.download()?,
                    ))
                },
                |c, g| {
                    let (x, k) = (&x, &k);
                    let inp = |w: usize| {
                        move |i: usize| format!("slot {} v={} j={}", i % w, x[i / w], k[i / w])
                    };
                    compare("Vec4 components", &c.0, &g.0, Tol::Exact, &inp(1))?;
                    compare("Mat3 columns/entries", &c.1, &g.1, Tol::Exact, &inp(1))?;
                    compare("f32 array", &c.2, &g.2, Tol::close(1e-6, 1e-5), &inp(5))?;
                    compare("nested arrays", &c.3, &g.3, Tol::Exact, &inp(10))
                },
            )
        },
    );
}

// =========================================================================================
// 19. if / else if / else, if as a value, block values, shadowing, typed and tuple lets
// =========================================================================================

#[kernel]
fn k_branches(x: &Field<f32>, n: &Field<i32>, out: &mut Field<f32>, cls: &mut Field<i32>) {
    for i in x.indices() {
        let a = x[i];
        let m = n[i];
        let mut c: i32 = 0;
        if a < -1.0 {
            c = 1;
        } else if a < 0.0 {
            c = 2;
        } else if a == 0.0 {
            c += 3;
        } else {
            c = 4;
        }
        if m % 2 == 0 {
            c += 10;
        }
        if m > 5 {
            if a > 0.0 {
                c += 100;
            } else {
                c -= 100;
            }
        }
        let v = if a > 0.5 {
            a * 2.0
        } else if a > -0.5 {
            if m > 0 {
                1.0
            } else {
                -1.0
            }
        } else {
            let t = a * a;
            t + 1.0
        };
        let y = {
            let t = v * 2.0;
            let t = t + 1.0;
            t * 0.5
        };
        let (p, q) = (y, c);
        let (s, mut t, u) = (p + 1.0, q * 2, m);
        t += u;
        let _ = t * 2;
        let z: f32 = if t > 0 { s } else { -s };
        let a = z + 1.0;
        out[i] = a;
        cls[i] = t;
    }
}

/// Classes exact. Values: `a * a + 1` may be fused on a GPU: relative 1e-6, absolute 1e-6.
#[test]
fn branches_and_values() {
    let xs = prop_oneof![4 => -3.0f32..3.0, 1 => prop::sample::select(vec![0.0f32, -1.0, 0.5, -0.5, 1.0])];
    property(16, (vec(xs, N), vec(-10i32..10, N)), |bk, (x, n)| {
        agree(
            bk,
            false,
            |be| {
                let fx = Field::from_slice(be, [N as u32], &x)?;
                let fn_ = Field::from_slice(be, [N as u32], &n)?;
                let mut o = Field::<f32>::new(be, [N as u32])?;
                let mut c = Field::<i32>::new(be, [N as u32])?;
                k_branches(&fx, &fn_, &mut o, &mut c)?;
                Ok((o.download()?, c.download()?))
            },
            |c, g| {
                let inp = |i: usize| format!("x={} n={}", x[i], n[i]);
                compare("if values", &c.0, &g.0, Tol::close(1e-6, 1e-6), &inp)?;
                compare("if classes", &c.1, &g.1, Tol::Exact, &inp)
            },
        )
    });
}

// =========================================================================================
// 20. Loops: a..b, a..=b, while, loop + break, continue (nested and top-level), data-dependent
// =========================================================================================

#[kernel]
fn k_loops(n: &Field<i32>, m: &Field<u32>, out: &mut Field<i32, 2>, outu: &mut Field<u32, 2>) {
    for i in n.indices() {
        let a = n[i];
        let r = i as i32;
        if a < -15 {
            continue; // top-level continue: this invocation writes nothing
        }
        let mut s0 = 0;
        for k in a..(a * 2 + 3) {
            s0 += k;
        }
        out[ivec2(r, 0)] = s0;
        let mut s1 = 0;
        for k in 1..=4 {
            s1 += k * a;
        }
        for k in -2..=a {
            s1 += k;
        }
        out[ivec2(r, 1)] = s1;
        let mut t = 0;
        loop {
            t += 3;
            if t > a * 5 {
                break;
            }
        }
        out[ivec2(r, 2)] = t;
        let mut s3 = 0;
        for p in 0..5 {
            for q in 0..5 {
                if (p + q) % 3 == 0 {
                    continue;
                }
                if q > p + 2 {
                    break;
                }
                s3 += p * q;
            }
            if p == 3 {
                continue;
            }
            s3 += 1;
        }
        out[ivec2(r, 3)] = s3;
        let mut s4 = 0;
        for p in 0..(abs(a) % 7) {
            let mut q = p;
            while q > 0 {
                s4 += q;
                q -= 2;
            }
        }
        out[ivec2(r, 4)] = s4;
        let u = m[i];
        let mut v = u % 1000u32 + 1u32;
        let mut steps = 0u32;
        while v != 1u32 && steps < 500u32 {
            if v % 2u32 == 0u32 {
                v /= 2u32;
            } else {
                v = 3u32 * v + 1u32;
            }
            steps += 1u32;
        }
        outu[ivec2(r, 0)] = steps;
        let mut s5 = 0u32;
        for k in 0u32..=(u % 17u32) {
            s5 += k * k;
        }
        outu[ivec2(r, 1)] = s5;
        let mut w = 0u32;
        let mut hits = 0u32;
        while (if w < 5u32 { w } else { w * 2u32 }) < u % 40u32 {
            w += 1u32;
            if w % 3u32 == 0u32 {
                continue;
            }
            hits += w;
        }
        outu[ivec2(r, 2)] = hits + w * 1000u32;
    }
}

/// Exact. Outputs start at a sentinel so that the top-level `continue` (no writes) shows.
#[test]
fn loops_and_jumps() {
    property(
        16,
        (vec(-20i32..20, N), vec(any::<u32>(), N)),
        |bk, (n, m)| {
            agree(
                bk,
                false,
                |be| {
                    let sz = N as u32;
                    let fnn = Field::from_slice(be, [sz], &n)?;
                    let fm = Field::from_slice(be, [sz], &m)?;
                    let mut o = Field::<i32, 2>::from_slice(be, [sz, 5], &vec![-12345; N * 5])?;
                    let mut ou = Field::<u32, 2>::from_slice(be, [sz, 3], &vec![777; N * 3])?;
                    k_loops(&fnn, &fm, &mut o, &mut ou)?;
                    Ok((o.download()?, ou.download()?))
                },
                |c, g| {
                    compare("i32 loops", &c.0, &g.0, Tol::Exact, &|k| {
                        format!("slot {} n={}", k % 5, n[k / 5])
                    })?;
                    compare("u32 loops", &c.1, &g.1, Tol::Exact, &|k| {
                        format!("slot {} n={} m={}", k % 3, n[k / 3], m[k / 3])
                    })
                },
            )
        },
    );
}

// =========================================================================================
// 21. #[func]s calling #[func]s, in nested modules, called by path
// =========================================================================================

mod helpers {
    use mpm::func;

    #[func]
    pub fn smoothstep01(x: f32) -> f32 {
        let t = clamp(x, 0.0, 1.0);
        t * t * (3.0 - 2.0 * t)
    }

    pub mod inner {
        use mpm::func;
        use mpm::glam::Vec2;

        /// Calls a func of the parent module by absolute path.
        #[func]
        pub fn poly(x: f32, a: f32) -> f32 {
            crate::helpers::smoothstep01(x) * a + x
        }

        /// Early returns from inside a branch and from inside a loop.
        #[func]
        pub fn early(x: i32) -> i32 {
            if x < 0 {
                return -x * 2;
            }
            let mut s = 0;
            for k in 0..x {
                if k > 10 {
                    return s + 1000;
                }
                s += k;
            }
            s
        }

        #[func]
        pub fn swap_pair(a: Vec2) -> (f32, f32) {
            (a.y, a.x)
        }

        #[func]
        pub fn weights(fx: f32) -> [f32; 3] {
            let a = 1.5 - fx;
            let b = fx - 1.0;
            let c = fx - 0.5;
            [0.5 * a * a, 0.75 - b * b, 0.5 * c * c]
        }

        /// A mutable parameter and a while loop.
        #[func]
        pub fn halve_until(mut x: f32, limit: f32) -> f32 {
            let mut n = 0;
            while x > limit {
                x = x * 0.5;
                n += 1;
            }
            x + n as f32
        }
    }
}

#[func]
fn chain(x: f32) -> f32 {
    helpers::inner::poly(x, 2.0) + helpers::smoothstep01(x * 0.5)
}

#[func]
fn deep(n: i32) -> i32 {
    helpers::inner::early(n) + helpers::inner::early(n - 5) * 3
}

#[func]
fn pick(c: bool, a: i32, b: i32) -> i32 {
    if c {
        a
    } else {
        b
    }
}

#[kernel]
fn k_funcs(x: &Field<f32>, n: &Field<i32>, of: &mut Field<f32, 2>, oi: &mut Field<i32>) {
    for i in x.indices() {
        let a = x[i];
        let r = i as i32;
        let w = helpers::inner::weights(fract(a));
        let (p, q) = helpers::inner::swap_pair(vec2(a, w[1]));
        of[ivec2(r, 0)] = chain(a);
        of[ivec2(r, 1)] = w[0] + w[1] * 2.0 + w[2] * 4.0;
        of[ivec2(r, 2)] = p - q;
        of[ivec2(r, 3)] = helpers::inner::halve_until(abs(a) * 100.0, 1.5);
        oi[i] = deep(n[i]) + pick(a > 0.0, 1, -1) + pick(n[i] > 3, deep(2), 0);
    }
}

/// Integers exact. Floats: relative and absolute 1e-5 (a handful of roundings, maybe fused).
#[test]
fn funcs_calling_funcs() {
    property(
        16,
        (f32s(-2.0, 2.0, N), vec(-20i32..20, N)),
        |bk, (x, n)| {
            agree(
                bk,
                false,
                |be| {
                    let fx = Field::from_slice(be, [N as u32], &x)?;
                    let fnn = Field::from_slice(be, [N as u32], &n)?;
                    let mut of = Field::<f32, 2>::new(be, [N as u32, 4])?;
                    let mut oi = Field::<i32>::new(be, [N as u32])?;
                    k_funcs(&fx, &fnn, &mut of, &mut oi)?;
                    Ok((of.download()?, oi.download()?))
                },
                |c, g| {
                    compare("float funcs", &c.0, &g.0, Tol::close(1e-5, 1e-5), &|k| {
                        format!("slot {} x={}", k % 4, x[k / 4])
                    })?;
                    compare("int funcs", &c.1, &g.1, Tol::Exact, &|k| {
                        format!("x={} n={}", x[k], n[k])
                    })
                },
            )
        },
    );
}

// =========================================================================================
// 22. Several top-level loops (a barrier after each), top-level lets, 0-D fields
// =========================================================================================

#[kernel]
fn k_multi_loop(
    a: &mut Field<f32>,
    b: &mut Field<f32>,
    total: &mut Field<f32, 0>,
    count: &mut Field<i32, 0>,
    s: f32,
    n: i32,
) {
    let scale = s * 2.0;
    let half: f32 = 0.5;
    let last = n - 1;
    for i in a.indices() {
        a[i] = a[i] * scale + half;
    }
    for i in 0..n {
        // Reads neighbours written by the previous loop.
        let l = if i > 0 { a[i - 1] } else { 0.0 };
        let r = if i < last { a[i + 1] } else { 0.0 };
        b[i] = l + a[i] + r;
    }
    for _once in 0..1 {
        let mut acc = 0.0;
        let mut cnt = 0;
        for k in 0..n {
            acc += b[k];
            if b[k] > 0.0 {
                cnt += 1;
            }
        }
        total[()] = acc;
        count[()] = cnt;
    }
    for i in a.indices() {
        a[i] = b[i] - total[()] / n as f32;
    }
}

/// Inputs are multiples of 1/8 and `s` a multiple of 1/4, so every sum and product is exact
/// in f32 on both sides; only the final division by n differs (2.5 ulp on Vulkan): that
/// output relative 1e-6, absolute 1e-5; everything else exact.
#[test]
fn several_loops_with_barriers() {
    let n = 300usize;
    property(16, (vec(-80i32..80, n), -8i32..8), move |bk, (ks, s4)| {
        let xs: Vec<f32> = ks.iter().map(|k| *k as f32 / 8.0).collect();
        let s = s4 as f32 / 4.0;
        agree(
            bk,
            false,
            |be| {
                let mut a = Field::from_slice(be, [n as u32], &xs)?;
                let mut b = Field::<f32>::new(be, [n as u32])?;
                let mut t = Field::<f32, 0>::new(be, [])?;
                let mut c = Field::<i32, 0>::from_slice(be, [], &[-1])?;
                k_multi_loop(&mut a, &mut b, &mut t, &mut c, s, n as i32)?;
                Ok((a.download()?, b.download()?, t.download()?, c.download()?))
            },
            |c, g| {
                compare("stencil after barrier", &c.1, &g.1, Tol::Exact, &|i| {
                    format!("x={}", xs[i])
                })?;
                same("0-D sum after barrier", &c.2, &g.2, Tol::Exact)?;
                same("0-D count", &c.3, &g.3, Tol::Exact)?;
                compare("fourth loop", &c.0, &g.0, Tol::close(1e-6, 1e-5), &|i| {
                    format!("x={}", xs[i])
                })
            },
        )
    });
}

#[kernel]
fn k_let_between(a: &mut Field<i32>, out: &mut Field<i32>, k: i32) {
    let base = k * 10;
    for i in a.indices() {
        a[i] = a[i] + base;
    }
    let mid = base + 1;
    let (p, q) = (mid * 2, 3);
    for i in out.indices() {
        out[i] = a[i] * q + p;
    }
}

/// An inclusive top-level range and `let`s without a value, assigned on every path.
#[kernel]
fn k_inclusive_deferred(x: &Field<i32>, out: &mut Field<i32>, first: i32, last: i32) {
    for i in first..=last {
        let v = x[i];
        let kind: i32;
        if v > 0 {
            kind = 1;
        } else if v < 0 {
            kind = -1;
        } else {
            kind = 0;
        }
        let mut scaled: Vec2;
        scaled = vec2(v as f32, 2.0);
        scaled *= 0.5;
        out[i] = kind * 100 + scaled.x as i32 + scaled.y as i32;
    }
}

/// Exact: `first..=last` runs `last` too (and nothing when last < first), and a `let x: T;`
/// assigned on every branch holds the branch's value.
#[test]
fn inclusive_ranges_and_deferred_lets() {
    let n = N as i32;
    property(
        12,
        (vec(-50i32..50, N), 0..n, -1..n),
        |bk, (xs, first, last)| {
            agree(
                bk,
                false,
                |be| {
                    let x = Field::from_slice(be, [N as u32], &xs)?;
                    let mut o = Field::<i32>::from_slice(be, [N as u32], &vec![-7; N])?;
                    k_inclusive_deferred(&x, &mut o, first, last)?;
                    o.download()
                },
                |c, g| {
                    let expected: Vec<i32> = (0..n)
                        .map(|i| {
                            let v = xs[i as usize];
                            if i < first || i > last {
                                -7
                            } else {
                                v.signum() * 100 + ((v as f32) * 0.5) as i32 + 1
                            }
                        })
                        .collect();
                    same("cpu against Rust", c, &expected, Tol::Exact)?;
                    same("gpu against cpu", g, c, Tol::Exact)
                },
            )
        },
    );
}

/// Exact: `let`s before and between the loops (pure values) mean the same on both sides.
#[test]
fn top_level_lets() {
    property(12, (vec(-1000i32..1000, N), -100i32..100), |bk, (xs, k)| {
        agree(
            bk,
            false,
            |be| {
                let mut a = Field::from_slice(be, [N as u32], &xs)?;
                let mut o = Field::<i32>::new(be, [N as u32])?;
                k_let_between(&mut a, &mut o, k)?;
                Ok((a.download()?, o.download()?))
            },
            |c, g| {
                same("a", &c.0, &g.0, Tol::Exact)?;
                same("out", &c.1, &g.1, Tol::Exact)
            },
        )
    });
}

// A top-level `let` that reads a field (`let before = acc[()];`) used to diverge: the GPU
// re-read it at the start of every loop, after earlier loops had written the field, while the
// CPU read it once. The macro now rejects it ("a top-level `let` runs before each parallel
// loop and cannot read fields"), so it is not part of this suite.

// =========================================================================================
// 23. A scalar parameter of every kind (two kernels: push constants hold 30 words)
// =========================================================================================

#[kernel]
fn k_scalars_a(
    of: &mut Field<f32>,
    oi: &mut Field<i32>,
    ou: &mut Field<u32>,
    sf: f32,
    si: i32,
    su: u32,
    sb: bool,
    s2: Vec2,
    s3: Vec3,
    s4: Vec4,
    si2: IVec2,
) {
    for i in 0..64 {
        if i == 0 {
            let f = [
                sf,
                s2.x,
                s2.y,
                s3.x,
                s3.y,
                s3.z,
                s4.x,
                s4.y,
                s4.z,
                s4.w,
                s3.length(),
            ];
            for k in 0..11 {
                of[k] = f[k];
            }
            let n = [si, si2.x, si2.y, sb as i32, select(sb, 5, 6)];
            for k in 0..5 {
                oi[k] = n[k];
            }
            ou[0] = su;
            ou[1] = su * 3u32;
        }
        // Every invocation sees the same push constants.
        ou[i + 2] = (sf == s2.x + 0.0) as u32 + su + (si2.y as u32) + i as u32;
    }
}

#[kernel]
fn k_scalars_b(
    of: &mut Field<f32>,
    oi: &mut Field<i32>,
    ou: &mut Field<u32>,
    si3: IVec3,
    sb: bool,
    su2: UVec2,
    su3: UVec3,
    sm2: Mat2,
    sm3: Mat3,
) {
    for i in of.indices() {
        if i == 0u32 {
            let f = [
                sm2.x_axis.x,
                sm2.x_axis.y,
                sm2.y_axis.x,
                sm2.y_axis.y,
                sm3.x_axis.x,
                sm3.x_axis.y,
                sm3.x_axis.z,
                sm3.y_axis.x,
                sm3.y_axis.y,
                sm3.y_axis.z,
                sm3.z_axis.x,
                sm3.z_axis.y,
                sm3.z_axis.z,
            ];
            for k in 0..13 {
                of[k] = f[k];
            }
            oi[0] = si3.x;
            oi[1] = si3.y;
            oi[2] = si3.z;
            oi[3] = !sb as i32;
            ou[0] = su2.x;
            ou[1] = su2.y;
            ou[2] = su3.x;
            ou[3] = su3.y;
            ou[4] = su3.z;
        }
    }
}

/// Exact: scalars travel as push-constant words and are only read.
#[test]
fn scalar_parameters_of_every_kind() {
    let strat = (
        (-1e6f32..1e6, any::<i32>(), any::<u32>(), any::<bool>()),
        (
            proptest::array::uniform2(-1e3f32..1e3),
            proptest::array::uniform3(-1e3f32..1e3),
            proptest::array::uniform4(-1e3f32..1e3),
        ),
        (
            proptest::array::uniform2(any::<i32>()),
            proptest::array::uniform3(any::<i32>()),
            proptest::array::uniform2(any::<u32>()),
            proptest::array::uniform3(any::<u32>()),
        ),
        (
            proptest::array::uniform4(-1e3f32..1e3),
            proptest::array::uniform9(-1e3f32..1e3),
        ),
    );
    property(
        12,
        strat,
        |bk, ((sf, si, su, sb), (v2, v3, v4), (i2, i3, u2, u3), (m2, m3))| {
            let (s2, s3, s4) = (
                Vec2::from_array(v2),
                Vec3::from_array(v3),
                Vec4::from_array(v4),
            );
            let (si2, si3, su2, su3) = (
                IVec2::from_array(i2),
                IVec3::from_array(i3),
                UVec2::from_array(u2),
                UVec3::from_array(u3),
            );
            let (sm2, sm3) = (Mat2::from_cols_array(&m2), Mat3::from_cols_array(&m3));
            agree(
                bk,
                false,
                |be| {
                    let mut of = Field::<f32>::new(be, [16])?;
                    let mut oi = Field::<i32>::new(be, [8])?;
                    let mut ou = Field::<u32>::new(be, [80])?;
                    k_scalars_a(&mut of, &mut oi, &mut ou, sf, si, su, sb, s2, s3, s4, si2)?;
                    let a = (of.download()?, oi.download()?, ou.download()?);
                    k_scalars_b(&mut of, &mut oi, &mut ou, si3, sb, su2, su3, sm2, sm3)?;
                    Ok((a, (of.download()?, oi.download()?, ou.download()?)))
                },
                |c, g| {
                    prop_assert_eq!(
                        c.1 .0[4],
                        sm3.x_axis.x,
                        "CPU reads Mat3 scalars column-major"
                    );
                    // length() of s3 is the only computed float: relative 1e-6.
                    compare(
                        "f32/vec scalars",
                        &c.0 .0,
                        &g.0 .0,
                        Tol::close(1e-6, 0.0),
                        &|k| format!("slot {k}"),
                    )?;
                    same("i32/ivec/bool scalars", &c.0 .1, &g.0 .1, Tol::Exact)?;
                    same("u32 scalars", &c.0 .2, &g.0 .2, Tol::Exact)?;
                    same("mat scalars", &c.1 .0, &g.1 .0, Tol::Exact)?;
                    same("ivec3/bool scalars", &c.1 .1, &g.1 .1, Tol::Exact)?;
                    same("uvec scalars", &c.1 .2, &g.1 .2, Tol::Exact)
                },
            )
        },
    );
}

// =========================================================================================
// 24. Every element type in fields of 0, 1, 2 and 3 dimensions
// =========================================================================================

#[func]
fn t_f32(x: f32) -> f32 {
    x * 2.0 - 1.0
}
#[func]
fn t_i32(x: i32) -> i32 {
    x * 3 + 1
}
#[func]
fn t_u32(x: u32) -> u32 {
    (x ^ 0xdeadbeefu32) >> 1u32
}
#[func]
fn t_bool(x: bool) -> bool {
    !x
}
#[func]
fn t_v2(v: Vec2) -> Vec2 {
    vec2(v.y, -v.x)
}
#[func]
fn t_v3(v: Vec3) -> Vec3 {
    v * 2.0 + Vec3::ONE
}
#[func]
fn t_v4(v: Vec4) -> Vec4 {
    vec4(v.w, v.z, v.y, v.x) * 0.5
}
#[func]
fn t_iv2(v: IVec2) -> IVec2 {
    -v + 1
}
#[func]
fn t_iv3(v: IVec3) -> IVec3 {
    v * ivec3(1, -1, 2)
}
#[func]
fn t_uv2(v: UVec2) -> UVec2 {
    v + 7u32
}
#[func]
fn t_uv3(v: UVec3) -> UVec3 {
    v / 3u32
}
#[func]
fn t_m2(m: Mat2) -> Mat2 {
    transpose(m)
}
#[func]
fn t_m3(m: Mat3) -> Mat3 {
    transpose(m) * 2.0
}

#[kernel]
fn k_types_0d(
    f: &mut Field<f32, 0>,
    i: &mut Field<i32, 0>,
    u: &mut Field<u32, 0>,
    b: &mut Field<bool, 0>,
    v2: &mut Field<Vec2, 0>,
    v3: &mut Field<Vec3, 0>,
    v4: &mut Field<Vec4, 0>,
    iv2: &mut Field<IVec2, 0>,
    iv3: &mut Field<IVec3, 0>,
    uv2: &mut Field<UVec2, 0>,
    uv3: &mut Field<UVec3, 0>,
    m2: &mut Field<Mat2, 0>,
    m3: &mut Field<Mat3, 0>,
) {
    for _k in 0..1 {
        f[()] = t_f32(f[()]);
        i[()] = t_i32(i[()]);
        u[()] = t_u32(u[()]);
        b[()] = t_bool(b[()]);
        v2[()] = t_v2(v2[()]);
        v3[()] = t_v3(v3[()]);
        v4[()] = t_v4(v4[()]);
        iv2[()] = t_iv2(iv2[()]);
        iv3[()] = t_iv3(iv3[()]);
        uv2[()] = t_uv2(uv2[()]);
        uv3[()] = t_uv3(uv3[()]);
        m2[()] = t_m2(m2[()]);
        m3[()] = t_m3(m3[()]);
    }
}

#[kernel]
fn k_types_1d(
    f: &mut Field<f32>,
    i: &mut Field<i32>,
    u: &mut Field<u32>,
    b: &mut Field<bool>,
    v2: &mut Field<Vec2>,
    v3: &mut Field<Vec3>,
    v4: &mut Field<Vec4>,
    iv2: &mut Field<IVec2>,
    iv3: &mut Field<IVec3>,
    uv2: &mut Field<UVec2>,
    uv3: &mut Field<UVec3>,
    m2: &mut Field<Mat2>,
    m3: &mut Field<Mat3>,
) {
    for k in f.indices() {
        let s = k as i32;
        f[k] = t_f32(f[k]);
        i[s] = t_i32(i[s]);
        u[k] = t_u32(u[s]);
        b[s] = t_bool(b[k]);
        v2[k] = t_v2(v2[k]);
        v3[s] = t_v3(v3[s]);
        v4[k] = t_v4(v4[k]);
        iv2[k] = t_iv2(iv2[k]);
        iv3[s] = t_iv3(iv3[k]);
        uv2[k] = t_uv2(uv2[k]);
        uv3[k] = t_uv3(uv3[s]);
        m2[k] = t_m2(m2[k]);
        m3[s] = t_m3(m3[s]);
    }
}

#[kernel]
fn k_types_2d(
    f: &mut Field<f32, 2>,
    i: &mut Field<i32, 2>,
    u: &mut Field<u32, 2>,
    b: &mut Field<bool, 2>,
    v2: &mut Field<Vec2, 2>,
    v3: &mut Field<Vec3, 2>,
    v4: &mut Field<Vec4, 2>,
    iv2: &mut Field<IVec2, 2>,
    iv3: &mut Field<IVec3, 2>,
    uv2: &mut Field<UVec2, 2>,
    uv3: &mut Field<UVec3, 2>,
    m2: &mut Field<Mat2, 2>,
    m3: &mut Field<Mat3, 2>,
) {
    for c in f.indices() {
        let q = c.as_uvec2();
        f[c] = t_f32(f[c]);
        i[q] = t_i32(i[q]);
        u[c] = t_u32(u[q]);
        b[q] = t_bool(b[c]);
        v2[c] = t_v2(v2[c]);
        v3[q] = t_v3(v3[q]);
        v4[c] = t_v4(v4[c]);
        iv2[c] = t_iv2(iv2[c]);
        iv3[q] = t_iv3(iv3[c]);
        uv2[c] = t_uv2(uv2[c]);
        uv3[c] = t_uv3(uv3[q]);
        m2[c] = t_m2(m2[c]);
        m3[q] = t_m3(m3[q]);
    }
}

#[kernel]
fn k_types_3d(
    f: &mut Field<f32, 3>,
    i: &mut Field<i32, 3>,
    u: &mut Field<u32, 3>,
    b: &mut Field<bool, 3>,
    v2: &mut Field<Vec2, 3>,
    v3: &mut Field<Vec3, 3>,
    v4: &mut Field<Vec4, 3>,
    iv2: &mut Field<IVec2, 3>,
    iv3: &mut Field<IVec3, 3>,
    uv2: &mut Field<UVec2, 3>,
    uv3: &mut Field<UVec3, 3>,
    m2: &mut Field<Mat2, 3>,
    m3: &mut Field<Mat3, 3>,
) {
    for c in f.indices() {
        let q = c.as_uvec3();
        f[c] = t_f32(f[c]);
        i[q] = t_i32(i[q]);
        u[c] = t_u32(u[q]);
        b[q] = t_bool(b[c]);
        v2[c] = t_v2(v2[c]);
        v3[q] = t_v3(v3[q]);
        v4[c] = t_v4(v4[c]);
        iv2[c] = t_iv2(iv2[c]);
        iv3[q] = t_iv3(iv3[c]);
        uv2[c] = t_uv2(uv2[c]);
        uv3[c] = t_uv3(uv3[q]);
        m2[c] = t_m2(m2[c]);
        m3[q] = t_m3(m3[q]);
    }
}

/// The 13 element types' random contents, all of one length.
struct AllTypes {
    f: Vec<f32>,
    i: Vec<i32>,
    u: Vec<u32>,
    b: Vec<bool>,
    v2: Vec<Vec2>,
    v3: Vec<Vec3>,
    v4: Vec<Vec4>,
    iv2: Vec<IVec2>,
    iv3: Vec<IVec3>,
    uv2: Vec<UVec2>,
    uv3: Vec<UVec3>,
    m2: Vec<Mat2>,
    m3: Vec<Mat3>,
}

impl AllTypes {
    fn random(seed: u64, n: usize) -> AllTypes {
        let mut g = Gen::new(seed);
        AllTypes {
            f: g.many(n, |g| g.f(-100.0, 100.0)),
            i: g.many(n, Gen::i),
            u: g.many(n, Gen::u),
            b: g.many(n, Gen::b),
            v2: g.many(n, Gen::v2),
            v3: g.many(n, Gen::v3),
            v4: g.many(n, Gen::v4),
            iv2: g.many(n, Gen::iv2),
            iv3: g.many(n, Gen::iv3),
            uv2: g.many(n, Gen::uv2),
            uv3: g.many(n, Gen::uv3),
            m2: g.many(n, Gen::m2),
            m3: g.many(n, Gen::m3),
        }
    }

    /// What every kernel above computes, on the host (the funcs are plain Rust there too).
    fn transformed(&self) -> AllTypes {
        AllTypes {
            f: self.f.iter().map(|x| t_f32(*x)).collect(),
            i: self.i.iter().map(|x| t_i32(*x)).collect(),
            u: self.u.iter().map(|x| t_u32(*x)).collect(),
            b: self.b.iter().map(|x| t_bool(*x)).collect(),
            v2: self.v2.iter().map(|x| t_v2(*x)).collect(),
            v3: self.v3.iter().map(|x| t_v3(*x)).collect(),
            v4: self.v4.iter().map(|x| t_v4(*x)).collect(),
            iv2: self.iv2.iter().map(|x| t_iv2(*x)).collect(),
            iv3: self.iv3.iter().map(|x| t_iv3(*x)).collect(),
            uv2: self.uv2.iter().map(|x| t_uv2(*x)).collect(),
            uv3: self.uv3.iter().map(|x| t_uv3(*x)).collect(),
            m2: self.m2.iter().map(|x| t_m2(*x)).collect(),
            m3: self.m3.iter().map(|x| t_m3(*x)).collect(),
        }
    }

    /// Every pair compared exactly (the transforms are exact: moves, negation, scaling by
    /// powers of two, x * 2 + 1, wrapping integer arithmetic).
    fn check(&self, other: &AllTypes, what: &str) -> std::result::Result<(), TestCaseError> {
        let e = Tol::Exact;
        same(&format!("{what} f32"), &self.f, &other.f, e)?;
        same(&format!("{what} i32"), &self.i, &other.i, e)?;
        same(&format!("{what} u32"), &self.u, &other.u, e)?;
        same(&format!("{what} bool"), &self.b, &other.b, e)?;
        same(&format!("{what} Vec2"), &self.v2, &other.v2, e)?;
        same(&format!("{what} Vec3"), &self.v3, &other.v3, e)?;
        same(&format!("{what} Vec4"), &self.v4, &other.v4, e)?;
        same(&format!("{what} IVec2"), &self.iv2, &other.iv2, e)?;
        same(&format!("{what} IVec3"), &self.iv3, &other.iv3, e)?;
        same(&format!("{what} UVec2"), &self.uv2, &other.uv2, e)?;
        same(&format!("{what} UVec3"), &self.uv3, &other.uv3, e)?;
        same(&format!("{what} Mat2"), &self.m2, &other.m2, e)?;
        same(&format!("{what} Mat3"), &self.m3, &other.m3, e)
    }
}

/// Uploads `data` into fields of `shape`, runs `launch` on them and downloads the result.
macro_rules! run_all_types {
    ($be:expr, $data:expr, $shape:expr, $d:literal, $kern:ident) => {{
        let be: &BackendRef = $be;
        let t: &AllTypes = $data;
        let s: [u32; $d] = $shape;
        let mut f = Field::<f32, $d>::from_slice(be, s, &t.f)?;
        let mut i = Field::<i32, $d>::from_slice(be, s, &t.i)?;
        let mut u = Field::<u32, $d>::from_slice(be, s, &t.u)?;
        let mut b = Field::<bool, $d>::from_slice(be, s, &t.b)?;
        let mut v2 = Field::<Vec2, $d>::from_slice(be, s, &t.v2)?;
        let mut v3 = Field::<Vec3, $d>::from_slice(be, s, &t.v3)?;
        let mut v4 = Field::<Vec4, $d>::from_slice(be, s, &t.v4)?;
        let mut iv2 = Field::<IVec2, $d>::from_slice(be, s, &t.iv2)?;
        let mut iv3 = Field::<IVec3, $d>::from_slice(be, s, &t.iv3)?;
        let mut uv2 = Field::<UVec2, $d>::from_slice(be, s, &t.uv2)?;
        let mut uv3 = Field::<UVec3, $d>::from_slice(be, s, &t.uv3)?;
        let mut m2 = Field::<Mat2, $d>::from_slice(be, s, &t.m2)?;
        let mut m3 = Field::<Mat3, $d>::from_slice(be, s, &t.m3)?;
        $kern(
            &mut f, &mut i, &mut u, &mut b, &mut v2, &mut v3, &mut v4, &mut iv2, &mut iv3,
            &mut uv2, &mut uv3, &mut m2, &mut m3,
        )?;
        Result::Ok(AllTypes {
            f: f.download()?,
            i: i.download()?,
            u: u.download()?,
            b: b.download()?,
            v2: v2.download()?,
            v3: v3.download()?,
            v4: v4.download()?,
            iv2: iv2.download()?,
            iv3: iv3.download()?,
            uv2: uv2.download()?,
            uv3: uv3.download()?,
            m2: m2.download()?,
            m3: m3.download()?,
        })
    }};
}

/// Exact, and the CPU result also equals the funcs applied on the host (checks the indexing
/// of every dimension count: last axis fastest, u32 / i32 / IVec / UVec indices alike).
#[test]
fn every_element_type_in_every_dimension() {
    property(8, (any::<u64>(), 0usize..3), |bk, (seed, pick)| {
        let s2 = [[7u32, 9], [1, 33], [16, 2]][pick];
        let s3 = [[3u32, 4, 5], [1, 1, 40], [6, 2, 3]][pick];
        for (d, len) in [
            (0usize, 1usize),
            (1, 150),
            (2, (s2[0] * s2[1]) as usize),
            (3, (s3[0] * s3[1] * s3[2]) as usize),
        ] {
            let input = AllTypes::random(seed ^ d as u64, len);
            let expect = input.transformed();
            agree(
                bk,
                false,
                |be| match d {
                    0 => run_all_types!(be, &input, [], 0, k_types_0d),
                    1 => run_all_types!(be, &input, [len as u32], 1, k_types_1d),
                    2 => run_all_types!(be, &input, s2, 2, k_types_2d),
                    _ => run_all_types!(be, &input, s3, 3, k_types_3d),
                },
                |c, g| {
                    c.check(&expect, &format!("{d}-D cpu vs host:"))?;
                    c.check(g, &format!("{d}-D"))
                },
            )?;
        }
        Ok(())
    });
}

// =========================================================================================
// 25. Atomics under heavy contention: += and -= of f32, float vectors and matrices, i32,
//     u32 and integer vectors, into a few cells from thousands of invocations
// =========================================================================================

#[kernel]
fn k_atomics(
    vals: &Field<f32>,
    ivals: &Field<i32>,
    uvals: &Field<u32>,
    af: &mut Field<f32>,
    av2: &mut Field<Vec2>,
    av3: &mut Field<Vec3, 2>,
    av4: &mut Field<Vec4>,
    am2: &mut Field<Mat2>,
    am3: &mut Field<Mat3, 0>,
    a0: &mut Field<f32, 0>,
    ai: &mut Field<i32>,
    au: &mut Field<u32>,
    aiv: &mut Field<IVec3>,
    auv: &mut Field<UVec2, 2>,
    aiv2: &mut Field<IVec2, 0>,
    auv3: &mut Field<UVec3>,
) {
    for i in vals.indices() {
        let x = vals[i];
        let c = i % 3u32;
        af[c] += x;
        af[c + 3u32] -= x;
        av2[i % 2u32] += vec2(x, -x);
        av2[2] -= vec2(x, 1.0);
        av3[ivec2((i % 2u32) as i32, 1)] += vec3(x, 1.0, -x);
        av4[0] += vec4(x, x, 1.0, 0.5);
        am2[0] += Mat2::from_cols(vec2(x, 1.0), vec2(-x, 0.25));
        am3[()] -= Mat3::from_diagonal(vec3(x, 1.0, -1.0));
        a0[()] += x;
        let n = ivals[i];
        ai[i % 4u32] += n;
        ai[4] -= n;
        let m = uvals[i];
        au[i % 2u32] += m;
        au[2] -= m;
        aiv[0] += ivec3(n, 1, -1);
        aiv[1] -= ivec3(n, 2, 0);
        auv[ivec2(0, (i % 2u32) as i32)] += uvec2(m, 1u32);
        aiv2[()] -= ivec2(n, 1);
        auv3[0] -= uvec3(m, 1u32, 0u32);
    }
}

/// Host reference of float atomics: per word, the exact sum (f64), the sum of magnitudes
/// and the number of terms.
struct FloatRef {
    sum: Vec<f64>,
    mag: Vec<f64>,
    terms: Vec<u32>,
}
impl FloatRef {
    fn new(init: &[f32]) -> FloatRef {
        FloatRef {
            sum: init.iter().map(|x| *x as f64).collect(),
            mag: init.iter().map(|x| x.abs() as f64).collect(),
            terms: vec![0; init.len()],
        }
    }
    fn add(&mut self, word: usize, x: f32) {
        self.sum[word] += x as f64;
        self.mag[word] += x.abs() as f64;
        self.terms[word] += 1;
    }
    fn add_words(&mut self, first: usize, xs: &[f32]) {
        for (k, x) in xs.iter().enumerate() {
            self.add(first + k, *x);
        }
    }
    /// Any order of k f32 additions is within k * 2^-24 * (sum of magnitudes) of the exact
    /// sum (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4).
    fn check(&self, what: &str, got: &[f32]) -> std::result::Result<(), TestCaseError> {
        for (w, g) in got.iter().enumerate() {
            let bound = self.terms[w] as f64 * (1.0 / 16777216.0) * self.mag[w] * 1.0001;
            let err = (*g as f64 - self.sum[w]).abs();
            prop_assert!(
                err <= bound,
                "{what}: word {w} = {g}, exact {}, error {err:e} > bound {bound:e} ({} terms)",
                self.sum[w],
                self.terms[w]
            );
        }
        Ok(())
    }
}

fn words_f32<T: mpm::core::Elem>(v: &[T]) -> Vec<f32> {
    mpm::core::types::to_words(v)
        .into_iter()
        .map(f32::from_bits)
        .collect()
}

/// Floats: every backend (CPU, Vulkan with float atomics, Vulkan with the compare-and-swap
/// fallback) is within the order-independent bound k * 2^-24 * sum|terms| of the exact sum
/// computed on the host in f64 (the order of the additions is up to the scheduler).
/// Integers: exact, wrapping (compared with a host reference and between backends).
#[test]
fn atomics_under_contention() {
    let n = 4096usize;
    property(
        8,
        (
            f32s(-1.0, 1.0, n),
            vec(i32_any(), n),
            vec(u32_any(), n),
            any::<u64>(),
        ),
        move |bk, (x, iv, uv, seed)| {
            let mut g = Gen::new(seed);
            let init_f: Vec<f32> = g.many(6, |g| g.f(-10.0, 10.0));
            let init_v2: Vec<Vec2> = g.many(3, |g| g.v2() * 0.1);
            let init_v3: Vec<Vec3> = g.many(4, |g| g.v3() * 0.1);
            let init_v4: Vec<Vec4> = g.many(1, |g| g.v4() * 0.1);
            let init_m2: Vec<Mat2> = g.many(1, |g| g.m2() * 0.1);
            let init_m3: Vec<Mat3> = g.many(1, |g| g.m3() * 0.1);
            let init_0 = vec![g.f(-10.0, 10.0)];
            let init_i: Vec<i32> = g.many(5, Gen::i);
            let init_u: Vec<u32> = g.many(3, Gen::u);
            let init_iv: Vec<IVec3> = g.many(2, Gen::iv3);
            let init_uv: Vec<UVec2> = g.many(2, Gen::uv2);
            let init_iv2: Vec<IVec2> = g.many(1, Gen::iv2);
            let init_uv3: Vec<UVec3> = g.many(1, Gen::uv3);

            // Host reference, mirroring the kernel.
            let mut rf = FloatRef::new(&init_f);
            let mut r2 = FloatRef::new(&words_f32(&init_v2));
            let mut r3 = FloatRef::new(&words_f32(&init_v3));
            let mut r4 = FloatRef::new(&words_f32(&init_v4));
            let mut rm2 = FloatRef::new(&words_f32(&init_m2));
            let mut rm3 = FloatRef::new(&words_f32(&init_m3));
            let mut r0 = FloatRef::new(&init_0);
            let (mut ri, mut ru) = (init_i.clone(), init_u.clone());
            let (mut riv, mut ruv, mut riv2, mut ruv3) = (
                init_iv.clone(),
                init_uv.clone(),
                init_iv2.clone(),
                init_uv3.clone(),
            );
            for i in 0..n {
                let v = x[i];
                rf.add(i % 3, v);
                rf.add(i % 3 + 3, -v);
                r2.add_words((i % 2) * 2, &[v, -v]);
                r2.add_words(4, &[-v, -1.0]);
                r3.add_words(((i % 2) * 2 + 1) * 3, &[v, 1.0, -v]);
                r4.add_words(0, &[v, v, 1.0, 0.5]);
                rm2.add_words(0, &[v, 1.0, -v, 0.25]);
                rm3.add_words(0, &[-v, -0.0, -0.0, -0.0, -1.0, -0.0, -0.0, -0.0, 1.0]);
                r0.add(0, v);
                let (a, m) = (iv[i], uv[i]);
                ri[i % 4] = ri[i % 4].wrapping_add(a);
                ri[4] = ri[4].wrapping_sub(a);
                ru[i % 2] = ru[i % 2].wrapping_add(m);
                ru[2] = ru[2].wrapping_sub(m);
                riv[0] = riv[0].wrapping_add(IVec3::new(a, 1, -1));
                riv[1] = riv[1].wrapping_sub(IVec3::new(a, 2, 0));
                ruv[i % 2] = ruv[i % 2].wrapping_add(UVec2::new(m, 1));
                riv2[0] = riv2[0].wrapping_sub(IVec2::new(a, 1));
                ruv3[0] = ruv3[0].wrapping_sub(UVec3::new(m, 1, 0));
            }

            let mut ints = Vec::new();
            for (name, be) in [
                ("cpu", &bk.cpu),
                ("vulkan", &bk.vk),
                ("vulkan-cas", &bk.vk_cas),
            ] {
                let run = || -> Result<_> {
                    let fx = Field::from_slice(be, [n as u32], &x)?;
                    let fi = Field::from_slice(be, [n as u32], &iv)?;
                    let fu = Field::from_slice(be, [n as u32], &uv)?;
                    let mut af = Field::from_slice(be, [6], &init_f)?;
                    let mut av2 = Field::from_slice(be, [3], &init_v2)?;
                    let mut av3 = Field::<Vec3, 2>::from_slice(be, [2, 2], &init_v3)?;
                    let mut av4 = Field::from_slice(be, [1], &init_v4)?;
                    let mut am2 = Field::from_slice(be, [1], &init_m2)?;
                    let mut am3 = Field::<Mat3, 0>::from_slice(be, [], &init_m3)?;
                    let mut a0 = Field::<f32, 0>::from_slice(be, [], &init_0)?;
                    let mut ai = Field::from_slice(be, [5], &init_i)?;
                    let mut au = Field::from_slice(be, [3], &init_u)?;
                    let mut aiv = Field::from_slice(be, [2], &init_iv)?;
                    let mut auv = Field::<UVec2, 2>::from_slice(be, [1, 2], &init_uv)?;
                    let mut aiv2 = Field::<IVec2, 0>::from_slice(be, [], &init_iv2)?;
                    let mut auv3 = Field::from_slice(be, [1], &init_uv3)?;
                    k_atomics(
                        &fx, &fi, &fu, &mut af, &mut av2, &mut av3, &mut av4, &mut am2, &mut am3,
                        &mut a0, &mut ai, &mut au, &mut aiv, &mut auv, &mut aiv2, &mut auv3,
                    )?;
                    let floats = (
                        af.download()?,
                        words_f32(&av2.download()?),
                        words_f32(&av3.download()?),
                        words_f32(&av4.download()?),
                        words_f32(&am2.download()?),
                        words_f32(&am3.download()?),
                        a0.download()?,
                    );
                    let ints = (
                        ai.download()?,
                        au.download()?,
                        aiv.download()?,
                        auv.download()?,
                        aiv2.download()?,
                        auv3.download()?,
                    );
                    Ok((floats, ints))
                };
                let (f, i) = ok(name, run())?;
                rf.check(&format!("{name} f32 +=/-="), &f.0)?;
                r2.check(&format!("{name} Vec2 +=/-="), &f.1)?;
                r3.check(&format!("{name} Vec3 += (2-D field)"), &f.2)?;
                r4.check(&format!("{name} Vec4 +="), &f.3)?;
                rm2.check(&format!("{name} Mat2 +="), &f.4)?;
                rm3.check(&format!("{name} Mat3 -= (0-D field)"), &f.5)?;
                r0.check(&format!("{name} f32 += (0-D field)"), &f.6)?;
                same(&format!("{name} i32 +=/-="), &i.0, &ri, Tol::Exact)?;
                same(&format!("{name} u32 +=/-="), &i.1, &ru, Tol::Exact)?;
                same(&format!("{name} IVec3 +=/-="), &i.2, &riv, Tol::Exact)?;
                same(&format!("{name} UVec2 +="), &i.3, &ruv, Tol::Exact)?;
                same(&format!("{name} IVec2 -= (0-D)"), &i.4, &riv2, Tol::Exact)?;
                same(&format!("{name} UVec3 -="), &i.5, &ruv3, Tol::Exact)?;
                ints.push(i);
            }
            Ok(())
        },
    );
}

// =========================================================================================
// 26. Mini P2G (the example of DESIGN.md section 3): a #[func] returning an array, scattered
//     float atomics into a 2-D grid
// =========================================================================================

#[func]
fn quadratic_weights(fx: Vec2) -> [Vec2; 3] {
    let a = Vec2::splat(1.5) - fx;
    let b = fx - Vec2::splat(1.0);
    let c = fx - Vec2::splat(0.5);
    [0.5 * a * a, Vec2::splat(0.75) - b * b, 0.5 * c * c]
}

#[kernel]
fn k_p2g(
    x: &Field<Vec2>,
    v: &Field<Vec2>,
    c: &Field<Mat2>,
    grid_mv: &mut Field<Vec2, 2>,
    grid_m: &mut Field<f32, 2>,
    inv_dx: f32,
    p_mass: f32,
) {
    for p in x.indices() {
        let xp = x[p] * inv_dx;
        let base = (xp - 0.5).floor().as_ivec2();
        let fx = xp - base.as_vec2();
        let w = quadratic_weights(fx);
        for i in 0..3 {
            for j in 0..3 {
                let off = ivec2(i, j);
                let dpos = (off.as_vec2() - fx) / inv_dx;
                let weight = w[i].x * w[j].y;
                grid_mv[base + off] += weight * (p_mass * v[p] + p_mass * c[p] * dpos);
                grid_m[base + off] += weight * p_mass;
            }
        }
    }
}

/// Order-dependent float sums of up to n terms per cell, and each term may differ by a few
/// ulps between backends (fused operations): grid_m within 2 n 2^-24 of the total mass per
/// cell (all terms positive), grid_mv within 2 n 2^-24 m_cell (|v| + 4 |C| dx), the bound
/// on sum |terms| (|weight| <= 1, |dpos| <= 2 dx per axis).
#[test]
fn p2g_scatter() {
    let n = 2000usize;
    property(
        8,
        (vec2s(0.1, 0.9, n), vec2s(-1.0, 1.0, n), mat2s(0.0, n)),
        move |bk, (x, v, c)| {
            let (res, p_mass) = (16u32, 0.01f32);
            agree(
                bk,
                true,
                |be| {
                    let fx = Field::from_slice(be, [n as u32], &x)?;
                    let fv = Field::from_slice(be, [n as u32], &v)?;
                    let fc = Field::from_slice(be, [n as u32], &c)?;
                    let mut gmv = Field::<Vec2, 2>::new(be, [res, res])?;
                    let mut gm = Field::<f32, 2>::new(be, [res, res])?;
                    k_p2g(&fx, &fv, &fc, &mut gmv, &mut gm, res as f32, p_mass)?;
                    Ok((gmv.download()?, gm.download()?))
                },
                |cp, gp| {
                    let k = 2.0 * n as f32 / 16777216.0;
                    let cmax = c.iter().map(|m| max_abs2(*m)).fold(0.0, f32::max) * 2.0;
                    for cell in 0..(res * res) as usize {
                        let m = cp.1[cell].max(gp.1[cell]);
                        let bm = k * m + 1e-12;
                        let bmv = k * m * (1.5 + 4.0 * cmax / res as f32) + 1e-12;
                        compare(
                            "grid_m",
                            &cp.1[cell..=cell],
                            &gp.1[cell..=cell],
                            Tol::close(0.0, bm),
                            &|_| format!("cell {cell}"),
                        )?;
                        compare(
                            "grid_mv",
                            &cp.0[cell..=cell],
                            &gp.0[cell..=cell],
                            Tol::close(0.0, bmv),
                            &|_| format!("cell {cell}"),
                        )?;
                    }
                    let total: f32 = cp.1.iter().sum();
                    prop_assert!(
                        (total - n as f32 * p_mass).abs() < 1e-3,
                        "mass not conserved on the CPU: {total}"
                    );
                    Ok(())
                },
            )
        },
    );
}

// =========================================================================================
// 27. Stencils over 2-D and 3-D fields (indices() with IVec2 / IVec3, neighbours, `continue`)
// =========================================================================================

#[kernel]
fn k_stencil_2d(
    src: &Field<f32, 2>,
    dst: &mut Field<f32, 2>,
    counts: &mut Field<i32, 2>,
    nx: i32,
    ny: i32,
) {
    for c in src.indices() {
        let mut s = 0.0;
        let mut n = 0;
        for dx in -1..=1 {
            for dy in -1..=1 {
                let q = c + ivec2(dx, dy);
                if q.x < 0 || q.y < 0 || q.x >= nx || q.y >= ny {
                    continue;
                }
                s += src[q];
                n += 1;
            }
        }
        dst[c] = s / n as f32;
        counts[c.as_uvec2()] = n * 100 + c.x * 10 + c.y;
    }
}

#[kernel]
fn k_stencil_3d(
    src: &Field<f32, 3>,
    dst: &mut Field<f32, 3>,
    counts: &mut Field<i32, 3>,
    shape: IVec3,
) {
    for c in src.indices() {
        let mut s = 0.0;
        let mut n = 0;
        for dx in -1..2 {
            for dy in -1..2 {
                for dz in -1..2 {
                    let q = c + ivec3(dx, dy, dz);
                    let inside = q.x >= 0
                        && q.y >= 0
                        && q.z >= 0
                        && q.x < shape.x
                        && q.y < shape.y
                        && q.z < shape.z;
                    if inside && (dx == 0 || dy == 0 || dz == 0) {
                        s += src[q] * (1 + abs(dx) + abs(dy) + abs(dz)) as f32;
                        n += 1;
                    }
                }
            }
        }
        dst[c] = s / n as f32;
        counts[c.as_uvec3()] = n * 1000 + (c.x * 100 + c.y * 10 + c.z);
    }
}

/// Sums of multiples of 1/16 (exact in f32, same order on both sides); the division by the
/// neighbour count: relative 1e-6 (2.5 ulp on Vulkan). Counts and indices exact.
#[test]
fn stencils_2d_and_3d() {
    property(12, (any::<u64>(), 0usize..3), |bk, (seed, pick)| {
        let s2 = [[13u32, 17], [1, 40], [32, 5]][pick];
        let s3 = [[5u32, 6, 7], [1, 1, 30], [8, 3, 2]][pick];
        let mut g = Gen::new(seed);
        let d2: Vec<f32> = g.many((s2[0] * s2[1]) as usize, |g| (g.i() % 200) as f32 / 16.0);
        let d3: Vec<f32> = g.many((s3[0] * s3[1] * s3[2]) as usize, |g| {
            (g.i() % 200) as f32 / 16.0
        });
        agree(
            bk,
            false,
            |be| {
                let src = Field::<f32, 2>::from_slice(be, s2, &d2)?;
                let mut dst = Field::<f32, 2>::new(be, s2)?;
                let mut cnt = Field::<i32, 2>::new(be, s2)?;
                k_stencil_2d(&src, &mut dst, &mut cnt, s2[0] as i32, s2[1] as i32)?;
                let src3 = Field::<f32, 3>::from_slice(be, s3, &d3)?;
                let mut dst3 = Field::<f32, 3>::new(be, s3)?;
                let mut cnt3 = Field::<i32, 3>::new(be, s3)?;
                k_stencil_3d(
                    &src3,
                    &mut dst3,
                    &mut cnt3,
                    UVec3::from_array(s3).as_ivec3(),
                )?;
                Ok((
                    dst.download()?,
                    cnt.download()?,
                    dst3.download()?,
                    cnt3.download()?,
                ))
            },
            |c, g| {
                compare("2-D stencil", &c.0, &g.0, Tol::close(1e-6, 0.0), &|i| {
                    format!("shape {s2:?} cell {i}")
                })?;
                same("2-D counts", &c.1, &g.1, Tol::Exact)?;
                compare("3-D stencil", &c.2, &g.2, Tol::close(1e-6, 0.0), &|i| {
                    format!("shape {s3:?} cell {i}")
                })?;
                same("3-D counts", &c.3, &g.3, Tol::Exact)?;
                // The CPU's indices are in row-major order, last axis fastest.
                if s2[0] > 1 {
                    prop_assert_eq!(
                        c.1[s2[1] as usize] % 100,
                        10,
                        "2-D index order: [1, 0] follows the first row"
                    );
                }
                let b = (s2[0] as i32 - 1) * 10 + (s2[1] as i32 - 1);
                let corner = (s2[0].min(2) * s2[1].min(2)) as i32;
                prop_assert_eq!(
                    c.1.last().copied(),
                    Some(corner * 100 + b),
                    "2-D last index"
                );
                Ok(())
            },
        )
    });
}

// =========================================================================================
// 28. Local arrays: bubble sort with dynamic indexing, a `while` on a flag
// =========================================================================================

#[kernel]
fn k_sort(x: &Field<f32, 2>, out: &mut Field<f32, 2>, swaps: &mut Field<i32>, n: i32) {
    for i in 0..n {
        let mut a = [0.0; 8];
        for k in 0..8 {
            a[k] = x[ivec2(i, k)];
        }
        let mut swapped = true;
        let mut count = 0;
        while swapped {
            swapped = false;
            for k in 0..7 {
                if a[k] > a[k + 1] {
                    let t = a[k];
                    a[k] = a[k + 1];
                    a[k + 1] = t;
                    swapped = true;
                    count += 1;
                }
            }
        }
        for k in 0..8 {
            out[ivec2(i, k)] = a[k];
        }
        swaps[i] = count;
    }
}

/// Exact (comparisons and moves only); the CPU result is also checked to be sorted.
#[test]
fn local_array_sort() {
    let rows = 100usize;
    property(12, f32s(-50.0, 50.0, rows * 8), move |bk, x| {
        agree(
            bk,
            false,
            |be| {
                let fx = Field::<f32, 2>::from_slice(be, [rows as u32, 8], &x)?;
                let mut o = Field::<f32, 2>::new(be, [rows as u32, 8])?;
                let mut s = Field::<i32>::new(be, [rows as u32])?;
                k_sort(&fx, &mut o, &mut s, rows as i32)?;
                Ok((o.download()?, s.download()?))
            },
            |c, g| {
                prop_assert!(
                    c.0.chunks(8).all(|r| r.windows(2).all(|w| w[0] <= w[1])),
                    "CPU rows not sorted"
                );
                same("sorted rows", &c.0, &g.0, Tol::Exact)?;
                same("swap counts", &c.1, &g.1, Tol::Exact)
            },
        )
    });
}

// =========================================================================================
// 29. Top-level range loops with i32 and u32 variables, non-zero and negative starts, empty
// =========================================================================================

#[kernel]
fn k_ranges(
    out: &mut Field<i32>,
    outu: &mut Field<u32>,
    hits: &mut Field<i32>,
    lo: i32,
    hi: i32,
    ulo: u32,
    uhi: u32,
) {
    for i in lo..hi {
        out[i + 64] = i * i - 3;
    }
    for j in ulo..uhi {
        outu[j] = j * 3u32 + 1u32;
    }
    for k in (lo - 10)..(hi + 10) {
        hits[(k + 74) % 16] += 1;
    }
}

/// Exact. Ranges may be empty (hi <= lo): nothing runs.
#[test]
fn parallel_ranges() {
    property(
        16,
        (-64i32..1, -64i32..64, 0u32..100, 0u32..200),
        |bk, (lo, hi, ulo, uhi)| {
            agree(
                bk,
                false,
                |be| {
                    let mut o = Field::<i32>::from_slice(be, [128], &[-1; 128])?;
                    let mut ou = Field::<u32>::from_slice(be, [200], &[9; 200])?;
                    let mut h = Field::<i32>::new(be, [16])?;
                    k_ranges(&mut o, &mut ou, &mut h, lo, hi, ulo, uhi)?;
                    Ok((o.download()?, ou.download()?, h.download()?))
                },
                |c, g| {
                    same("i32 range", &c.0, &g.0, Tol::Exact)?;
                    same("u32 range", &c.1, &g.1, Tol::Exact)?;
                    same("hits", &c.2, &g.2, Tol::Exact)
                },
            )
        },
    );
}

// =========================================================================================
// 30. Float remainder
// =========================================================================================

#[kernel]
fn k_float_rem(x: &Field<f32>, y: &Field<f32>, out: &mut Field<f32>, outv: &mut Field<Vec3>) {
    for i in x.indices() {
        let a = x[i];
        let b = y[i];
        out[i] = a % b;
        let mut v = vec3(a, -a, a * 0.5);
        v %= b;
        outv[i] = v + vec3(a, b, 1.0) % Vec3::splat(b);
    }
}

/// `%` on floats is Rust's: the exact remainder a - b trunc(a / b), sign of a, |r| < |b|.
/// Tolerance absolute 4e-5 (a few ulps of |a| <= 100): an emulation may lose a few ulps, but
/// must not be off by a whole |b|.
#[test]
fn float_remainder() {
    // Values just below multiples of b stress the rounding of a / b.
    let pair = prop_oneof![
        2 => (-100.0f32..100.0, 0.1f32..10.0),
        1 => (1i32..50, 0.1f32..10.0).prop_map(|(k, b)| (f32::from_bits((k as f32 * b).to_bits() - 1), b)),
        1 => (1i32..50, 1i32..8).prop_map(|(k, b)| (f32::from_bits((k as f32 * b as f32).to_bits() - 1), b as f32)),
    ];
    property(16, vec(pair, N), |bk, xy| {
        let (x, y): (Vec<f32>, Vec<f32>) = xy.into_iter().unzip();
        agree(
            bk,
            false,
            |be| {
                let fx = Field::from_slice(be, [N as u32], &x)?;
                let fy = Field::from_slice(be, [N as u32], &y)?;
                let mut o = Field::<f32>::new(be, [N as u32])?;
                let mut ov = Field::<Vec3>::new(be, [N as u32])?;
                k_float_rem(&fx, &fy, &mut o, &mut ov)?;
                Ok((o.download()?, ov.download()?))
            },
            |c, g| {
                compare("f32 %", &c.0, &g.0, Tol::close(0.0, 4e-5), &|i| {
                    format!("{:?} % {:?}", x[i], y[i])
                })?;
                compare("Vec3 %", &c.1, &g.1, Tol::close(0.0, 4e-5), &|i| {
                    format!("a={:?} b={:?}", x[i], y[i])
                })
            },
        )
    });
}

// =========================================================================================
// 31. A launch larger than one row of workgroups (65535 x 64 invocations on lavapipe), so
//     the backend dispatches a 2-D grid of workgroups
// =========================================================================================

#[kernel]
fn k_large(out: &mut Field<u32>, salt: u32) {
    for i in out.indices() {
        out[i] = i * 2654435761u32 ^ salt;
    }
}

/// Exact: every one of 4.3 million invocations writes its own index hash.
#[test]
fn launch_larger_than_one_dispatch_row() {
    let n = 4_300_000u32;
    property(2, any::<u32>(), move |bk, salt| {
        agree(
            bk,
            false,
            |be| {
                let mut o = Field::<u32>::new(be, [n])?;
                k_large(&mut o, salt)?;
                o.download()
            },
            |c, g| {
                prop_assert_eq!(c[n as usize - 1], (n - 1).wrapping_mul(2654435761) ^ salt);
                same("large launch", c, g, Tol::Exact)
            },
        )
    });
}

// =========================================================================================
// 32. Out-of-bounds field access is an error on both backends
// =========================================================================================

#[kernel]
fn k_oob(src: &Field<f32>, dst: &mut Field<f32, 2>, shift: i32) {
    for i in src.indices() {
        dst[ivec2(i as i32 + shift, 0)] = src[i];
    }
}

/// Both backends succeed when every access is inside the field and both report
/// `Error::OutOfBounds` naming the field when one is not.
#[test]
fn out_of_bounds_is_an_error_on_both() {
    property(8, -3i32..4, |bk, shift| {
        let expect_err = shift != 0;
        for (name, be) in [("cpu", &bk.cpu), ("vulkan", &bk.vk)] {
            let src = ok(name, Field::<f32>::from_slice(be, [64], &[1.0; 64]))?;
            let mut dst = ok(name, Field::<f32, 2>::new(be, [64, 1]))?;
            match k_oob(&src, &mut dst, shift) {
                Ok(()) => {
                    prop_assert!(!expect_err, "{name}: shift {shift} should be out of bounds")
                }
                Err(mpm::core::Error::OutOfBounds { field, .. }) => {
                    prop_assert!(expect_err, "{name}: shift 0 reported out of bounds");
                    prop_assert_eq!(field, "dst", "{}: wrong field named", name);
                }
                Err(e) => prop_assert!(false, "{name}: unexpected error {e}"),
            }
        }
        Ok(())
    });
}

/// Recursion through other funcs (which the macro cannot see; a func calling itself is a
/// compile error) fails on both backends the same way, at the first launch, before anything
/// runs: the field keeps its contents.
#[func]
fn ping(n: i32) -> i32 {
    if n <= 0 {
        0
    } else {
        pong(n - 1) + 1
    }
}

#[func]
fn pong(n: i32) -> i32 {
    ping(n)
}

#[kernel]
fn k_recursive(out: &mut Field<i32>) {
    for i in out.indices() {
        out[i] = ping(i as i32);
    }
}

#[test]
fn recursion_through_funcs_fails_on_both_before_running() {
    with_backends(|bk| {
        for (name, be) in [("cpu", &bk.cpu), ("vulkan", &bk.vk)] {
            let mut out = Field::<i32>::from_slice(be, [4], &[-7; 4]).expect("field");
            match k_recursive(&mut out) {
                Err(mpm::core::Error::Trace { message, .. }) => {
                    assert!(message.contains("recursion"), "{name}: {message}")
                }
                other => panic!("{name}: expected a trace error, got {other:?}"),
            }
            assert_eq!(out.download().expect("download"), vec![-7; 4], "{name} ran");
        }
    });
}

// =========================================================================================
// 33. `&&` / `||` short-circuit when the right operand needs statements (an `if` value)
// =========================================================================================

#[kernel]
fn k_short_circuit(a: &Field<f32>, out: &mut Field<i32>, left: bool) {
    for i in a.indices() {
        let guarded = i > 0u32 && (if left { a[i - 1u32] } else { a[i] }) > 0.0;
        let other = i == 0u32 || (if left { a[i - 1u32] } else { 1.0 }) < 0.5;
        out[i] = guarded as i32 + 2 * other as i32;
    }
}

/// Exact. The right operand of `&&` / `||` is evaluated only when needed, so the guarded
/// read `a[i - 1]` never happens for i == 0 (it would be out of bounds).
#[test]
fn short_circuit_with_branchy_right_operand() {
    property(8, (f32s(-1.0, 1.0, 128), any::<bool>()), |bk, (a, left)| {
        agree(
            bk,
            false,
            |be| {
                let fa = Field::from_slice(be, [128], &a)?;
                let mut o = Field::<i32>::new(be, [128])?;
                k_short_circuit(&fa, &mut o, left)?;
                o.download()
            },
            |c, g| same("short circuit", c, g, Tol::Exact),
        )
    });
}

// =========================================================================================
// 34. Odds and ends: arrays of matrices and vectors, select on arrays, funcs without
//     parameters, a func in a top-level let, funcs of the same name in different modules,
//     special float constants, nested blocks with shadowing
// =========================================================================================

/// Same name as `helpers::smoothstep01`, different body: the two must not be confused.
#[func]
fn smoothstep01(x: f32) -> f32 {
    x * 0.25
}

#[func]
fn three() -> f32 {
    3.0
}

#[kernel]
fn k_odds(x: &Field<f32>, k: &Field<i32>, of: &mut Field<f32, 2>, om: &mut Field<Mat2>, s: f32) {
    let c = three() * s + smoothstep01(s);
    for i in x.indices() {
        let a = x[i];
        let j = k[i];
        let r = i as i32;
        let mut ms = [Mat2::IDENTITY; 3];
        ms[j] = Mat2::from_cols(vec2(a, 1.0), vec2(2.0, a));
        ms[j].x_axis.y = -a;
        ms[2][1] = vec2(5.0, 6.0);
        ms[1][j][j] += 0.5;
        om[i] = ms[0] + ms[1] * 2.0 + ms[2] * 4.0;
        let arr = select(a > 0.0, [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]);
        let mut y = 1.0;
        {
            let y = 10.0;
            let a = a + y;
            of[ivec2(r, 0)] = a;
        }
        y += a;
        of[ivec2(r, 1)] = y;
        of[ivec2(r, 2)] = arr[j] + c;
        of[ivec2(r, 3)] = smoothstep01(a) + helpers::smoothstep01(a);
        of[ivec2(r, 4)] =
            min(a * f32::MAX, f32::INFINITY) + select(a > 0.9, f32::NEG_INFINITY, 0.0);
        // Separate slots: `(A + B) + C` with constants B, C may be folded as A + (B + C).
        of[ivec2(r, 5)] = (i32::MAX - j) as f32;
        of[ivec2(r, 6)] = (u32::MAX / 2u32) as f32 - a;
        of[ivec2(r, 7)] = f32::MIN_POSITIVE * (2.0 + a);
    }
}

/// Floats: moves and single roundings (the same on both sides), except `c` = 3 s + s / 4,
/// where the GPU may fuse (|c| <= 33, so a few ulps are below 1e-5, and arr[j] + c may
/// cancel): relative 1e-6, absolute 1e-5; infinities compare equal. (Non-`precise` GLSL
/// may be reassociated, so no slot relies on a cancellation.)
#[test]
fn odds_and_ends() {
    property(
        12,
        (f32s(-1.0, 1.0, N), vec(-1i32..4, N), -10.0f32..10.0),
        |bk, (x, k, s)| {
            agree(
                bk,
                false,
                |be| {
                    let fx = Field::from_slice(be, [N as u32], &x)?;
                    let fk = Field::from_slice(be, [N as u32], &k)?;
                    let mut of = Field::<f32, 2>::new(be, [N as u32, 8])?;
                    let mut om = Field::<Mat2>::new(be, [N as u32])?;
                    k_odds(&fx, &fk, &mut of, &mut om, s)?;
                    Ok((of.download()?, om.download()?))
                },
                |c, g| {
                    compare("odds", &c.0, &g.0, Tol::close(1e-6, 1e-5), &|i| {
                        format!("slot {} x={} k={} s={s}", i % 8, x[i / 8], k[i / 8])
                    })?;
                    compare("array of Mat2", &c.1, &g.1, Tol::close(1e-6, 0.0), &|i| {
                        format!("x={} k={}", x[i], k[i])
                    })
                },
            )
        },
    );
}

// =========================================================================================
// 35. The whole f32 range: NaN, infinities, signed zeros, huge and tiny values, and the
//     edges of the integer casts, into every conversion and float builtin
// =========================================================================================

/// Values that sit on an edge of some conversion or builtin.
const EDGES: &[f32] = &[
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    f32::MAX,
    f32::MIN,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    1.0,
    -1.0,
    0.5,
    -0.5,
    0.99,
    -0.99,
    2.5,
    -2.5,
    2147483520.0,  // the largest f32 below 2^31
    2147483648.0,  // 2^31: saturates to i32::MAX
    -2147483648.0, // i32::MIN exactly
    -2147483904.0, // the next f32 below: saturates
    4294967040.0,  // the largest f32 below 2^32
    4294967296.0,  // 2^32: saturates to u32::MAX
    16777217.0,
    88.72,
    89.0,
    -104.0,
    std::f32::consts::PI,
];

/// Any f32 except subnormals (a GPU may flush those to zero; see the module doc): all bit
/// patterns (so every magnitude, and NaNs with payloads), moderate values, and [`EDGES`].
fn f32_full() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => any::<u32>().prop_map(|b| {
            let x = f32::from_bits(b);
            if x.is_subnormal() { 0.0 } else { x }
        }),
        2 => -1e3f32..1e3,
        2 => prop::sample::select(EDGES),
    ]
}

#[kernel]
fn k_full_exact(
    x: &Field<f32>,
    y: &Field<f32>,
    z: &Field<f32>,
    of: &mut Field<f32, 2>,
    oi: &mut Field<i32>,
    ou: &mut Field<u32>,
    ov: &mut Field<Vec3, 2>,
    oiv: &mut Field<IVec3>,
    ouv: &mut Field<UVec3>,
    oi2: &mut Field<IVec2>,
    ou2: &mut Field<UVec2>,
) {
    for i in x.indices() {
        let a = x[i];
        let b = y[i];
        let v = vec3(a, b, z[i]);
        let w = vec3(z[i], a, b);
        let row = i as i32;
        let s = [
            floor(a),
            ceil(a),
            fract(a),
            abs(a),
            sign(a),
            round(a),
            min(a, b),
            max(a, b),
            clamp(a, -0.5, 0.75),
            clamp(a, b, 1.0),
            -a,
            a + b,
            a * b,
            a - b,
        ];
        for k in 0..14 {
            of[ivec2(row, k)] = s[k];
        }
        let vs = [
            floor(v),
            v.fract(),
            sign(v),
            min(v, w),
            v.max(w),
            clamp(v, Vec3::splat(-1.0), w),
            v.round(),
        ];
        for k in 0..7 {
            ov[ivec2(row, k)] = vs[k];
        }
        oi[i] = a as i32;
        ou[i] = a as u32;
        oiv[i] = v.as_ivec3();
        ouv[i] = v.as_uvec3();
        oi2[i] = vec2(a, b).as_ivec2();
        ou2[i] = vec2(b, a).as_uvec2();
    }
}

/// Exact on the whole range: float -> int casts saturate as Rust's `as` (NaN to 0), and
/// floor ceil fract abs sign round min max clamp, negation, +, - and * are exact IEEE
/// operations with the CPU's definitions also for NaN (`min(NaN, 1)` is NaN, `min(1, NaN)`
/// is 1: the second operand when it is smaller, else the first).
#[test]
fn whole_range_exact_builtins_and_casts() {
    property(
        12,
        (vec(f32_full(), N), vec(f32_full(), N), vec(f32_full(), N)),
        |bk, (xs, ys, zs)| {
            agree(
                bk,
                false,
                |be| {
                    let n = N as u32;
                    let x = Field::from_slice(be, [n], &xs)?;
                    let y = Field::from_slice(be, [n], &ys)?;
                    let z = Field::from_slice(be, [n], &zs)?;
                    let mut of = Field::<f32, 2>::new(be, [n, 14])?;
                    let mut oi = Field::<i32>::new(be, [n])?;
                    let mut ou = Field::<u32>::new(be, [n])?;
                    let mut ov = Field::<Vec3, 2>::new(be, [n, 7])?;
                    let mut oiv = Field::<IVec3>::new(be, [n])?;
                    let mut ouv = Field::<UVec3>::new(be, [n])?;
                    let mut oi2 = Field::<IVec2>::new(be, [n])?;
                    let mut ou2 = Field::<UVec2>::new(be, [n])?;
                    k_full_exact(
                        &x, &y, &z, &mut of, &mut oi, &mut ou, &mut ov, &mut oiv, &mut ouv,
                        &mut oi2, &mut ou2,
                    )?;
                    Ok((
                        (of.download()?, ov.download()?),
                        (oi.download()?, ou.download()?),
                        (oiv.download()?, ouv.download()?),
                        (oi2.download()?, ou2.download()?),
                    ))
                },
                |c, g| {
                    const NAMES: [&str; 14] = [
                        "floor",
                        "ceil",
                        "fract",
                        "abs",
                        "sign",
                        "round",
                        "min",
                        "max",
                        "clamp(a, -0.5, 0.75)",
                        "clamp(a, b, 1)",
                        "-a",
                        "a + b",
                        "a * b",
                        "a - b",
                    ];
                    const VNAMES: [&str; 7] =
                        ["floor", "fract", "sign", "min", "max", "clamp", "round"];
                    let inp = |k: usize| format!("x={:?} y={:?} z={:?}", xs[k], ys[k], zs[k]);
                    compare("scalar builtins", &c.0 .0, &g.0 .0, Tol::Exact, &|k| {
                        format!("{} {}", NAMES[k % 14], inp(k / 14))
                    })?;
                    compare("Vec3 builtins", &c.0 .1, &g.0 .1, Tol::Exact, &|k| {
                        format!("{} {}", VNAMES[k % 7], inp(k / 7))
                    })?;
                    compare("f32 as i32", &c.1 .0, &g.1 .0, Tol::Exact, &inp)?;
                    compare("f32 as u32", &c.1 .1, &g.1 .1, Tol::Exact, &inp)?;
                    compare("as_ivec3", &c.2 .0, &g.2 .0, Tol::Exact, &inp)?;
                    compare("as_uvec3", &c.2 .1, &g.2 .1, Tol::Exact, &inp)?;
                    compare("as_ivec2", &c.3 .0, &g.3 .0, Tol::Exact, &inp)?;
                    compare("as_uvec2", &c.3 .1, &g.3 .1, Tol::Exact, &inp)
                },
            )
        },
    );
}

#[kernel]
fn k_full_approx(x: &Field<f32>, y: &Field<f32>, out: &mut Field<f32, 2>) {
    for i in x.indices() {
        let a = x[i];
        let b = y[i];
        let v = vec3(a, b, 1.0);
        let r = [
            sqrt(a),
            ln(a),
            exp(a),
            pow(a, b),
            a.powf(2.0),
            pow(a, -3.0),
            sin(a),
            cos(a),
            tan(a),
            tanh(a),
            atan2(a, b),
            a / b,
            a % b,
            length(v),
            normalize(v).x,
            dot(v, v),
        ];
        let row = i as i32;
        for k in 0..16 {
            out[ivec2(row, k)] = r[k];
        }
    }
}

/// Which of the approximate builtins a slot of `k_full_approx` holds.
const APPROX: [&str; 16] = [
    "sqrt",
    "ln",
    "exp",
    "pow(a, b)",
    "a.powf(2)",
    "pow(a, -3)",
    "sin",
    "cos",
    "tan",
    "tanh",
    "atan2",
    "a / b",
    "a % b",
    "length",
    "normalize.x",
    "dot",
];

/// Whether the GPU's `g` may stand for the CPU's `c` in slot `k` for inputs `a`, `b`: NaN
/// where the CPU has NaN, the same infinity (or a value past 1e38 next to one: exp and pow
/// may overflow a little earlier or later), and otherwise relative 1e-4, absolute 1e-5
/// (the transcendental property's tolerance; tan's grows as sin / cos amplifies their
/// error) where the GPU's accuracy is specified: sin, cos and tan for finite |a| <= 100
/// (beyond, any value of the right kind: GLSL only bounds their error on [-pi, pi]; tan
/// also near its poles), `/` and `%` for divisors within
/// [2^-126, 2^126] in magnitude (Vulkan's precision of `x / y` holds only there: beyond,
/// NVIDIA's reciprocal is subnormal and flushes, `inf / -3e38` reads NaN), and `%` (exact,
/// as Rust's) within a few ulps of |a|.
fn full_range_agrees(k: usize, a: f32, b: f32, c: f32, g: f32) -> bool {
    let unbounded = match APPROX[k] {
        "sin" | "cos" => a.is_finite() && a.abs() > 100.0,
        "tan" => a.is_finite() && (a.abs() > 100.0 || c.abs() > 1e3),
        "a / b" | "a % b" => b.is_finite() && b.abs() > 2f32.powi(126),
        _ => false,
    };
    if unbounded {
        return match APPROX[k] {
            "sin" | "cos" => g.abs() <= 1.0,
            _ => true,
        };
    }
    if c.is_nan() || g.is_nan() {
        return c.is_nan() && g.is_nan();
    }
    if c.is_infinite() || g.is_infinite() {
        return c == g || (c.signum() == g.signum() && c.abs().min(g.abs()) > 1e38);
    }
    let extra = match APPROX[k] {
        // a % b is a - b trunc(a / b): its error is relative to a.
        "a % b" => 1e-6 * a.abs(),
        // tan is sin / cos (GLSL defines its precision so), each within the absolute 1e-5:
        // an error of up to 1e-5 (1 + |tan|) / |cos| (NVIDIA reaches 1.3e-4 relative at
        // tan(-55.04) = 15.7, where that bound is 1.7e-4).
        "tan" => 1e-5 * (1.0 + c.abs()) * (1.0 + c * c).sqrt(),
        _ => 0.0,
    };
    common::close_f32(c, g, 1e-4, 1e-5 + extra)
}

/// Approximate builtins on the whole range: special values (NaN, infinities, zeros of
/// either sign, negative bases of `pow`, `atan2(0, 0)`) give what Rust's f32 gives, finite
/// results agree within the transcendental tolerance where GLSL bounds the GPU's error (see
/// [`full_range_agrees`]).
#[test]
fn whole_range_approximate_builtins() {
    property(
        12,
        (vec(f32_full(), N), vec(f32_full(), N)),
        |bk, (xs, ys)| {
            agree(
                bk,
                false,
                |be| {
                    let x = Field::from_slice(be, [N as u32], &xs)?;
                    let y = Field::from_slice(be, [N as u32], &ys)?;
                    let mut o = Field::<f32, 2>::new(be, [N as u32, 16])?;
                    k_full_approx(&x, &y, &mut o)?;
                    o.download()
                },
                |c, g| {
                    let agrees =
                        |i: usize| full_range_agrees(i % 16, xs[i / 16], ys[i / 16], c[i], g[i]);
                    let bad: Vec<String> = (0..c.len())
                        .filter(|&i| !agrees(i))
                        .take(6)
                        .map(|i| {
                            format!(
                                "{}(a={:?}, b={:?}): cpu {:?} gpu {:?}",
                                APPROX[i % 16],
                                xs[i / 16],
                                ys[i / 16],
                                c[i],
                                g[i]
                            )
                        })
                        .collect();
                    prop_assert!(
                        bad.is_empty(),
                        "whole-range builtins differ:\n{}",
                        bad.join("\n")
                    );
                    Ok(())
                },
            )
        },
    );
}

// =========================================================================================
// 36. Host constants of types outside the language cast in a kernel (`LEN as i32` of a
//     `usize` length, a `u64`), converted where they stand as Rust's `as` does on the CPU;
//     a shift of two constants
// =========================================================================================

const LEN: usize = 5;
const SHIFT: i32 = 3;
const BIG: u64 = 1 << 40;

#[kernel]
fn k_host_constants(a: &Field<i32>, out: &mut Field<i32>, fout: &mut Field<f32>) {
    for i in a.indices() {
        let mut lanes = [0i32; LEN];
        for k in 0..LEN as i32 {
            lanes[k] = a[i] + k;
        }
        out[i] = lanes[LEN as i32 - 1] + (1i32 << SHIFT) + (BIG as i32) + (LEN as u32) as i32;
        fout[i] = LEN as f32 + (BIG as f32) * 1e-12;
    }
}

/// Exact: the constants convert on the host, wrapping like Rust's `as` (`BIG as i32` is 0).
#[test]
fn host_constants_cast_in_kernels() {
    property(4, vec(-1000i32..1000, 16), |bk, a| {
        agree(
            bk,
            false,
            |be| {
                let fa = Field::from_slice(be, [16], &a)?;
                let mut o = Field::<i32>::new(be, [16])?;
                let mut f = Field::<f32>::new(be, [16])?;
                k_host_constants(&fa, &mut o, &mut f)?;
                Ok((o.download()?, f.download()?))
            },
            |c, g| {
                let expected: Vec<i32> = a.iter().map(|v| v + 4 + 8 + 5).collect();
                prop_assert_eq!(&c.0, &expected, "the CPU against Rust's own arithmetic");
                same("host constants (i32)", &c.0, &g.0, Tol::Exact)?;
                same("host constants (f32)", &c.1, &g.1, Tol::Exact)
            },
        )
    });
}

// =========================================================================================
// 37. `#[specialize]` scalars: the GPU compiles their values into the code, a pipeline set
//     per value, and the CPU a copy of a loop's body per value of the flags it tests in an
//     inner loop (two at most: `negate`, the third, stays a parameter there); calls that
//     alternate between values get each value's code
// =========================================================================================

#[kernel]
fn k_specialized(
    out: &mut Field<i32>,
    #[specialize] mode: i32,
    #[specialize] doubled: bool,
    #[specialize] odd_only: bool,
    #[specialize] negate: bool,
    #[specialize] terms: u32,
    scale: i32,
) {
    for i in out.indices() {
        let mut v = 0;
        for k in 0..terms {
            let mut t = k as i32 + 1;
            if doubled {
                t *= 2;
            }
            if odd_only && k % 2 == 1 {
                t = 0;
            }
            if negate {
                t = -t;
            }
            v += t;
        }
        if mode == 1 {
            v += 100;
        } else if mode < 0 {
            v = v - 1000 + mode % 7;
        }
        out[i] = v * scale + i as i32;
    }
}

/// The flags of a call of `k_specialized`.
#[derive(Clone, Copy, Debug)]
struct Flags {
    doubled: bool,
    odd_only: bool,
    negate: bool,
}

/// The kernel's arithmetic in Rust.
fn specialized_model(mode: i32, f: Flags, terms: u32, scale: i32, i: i32) -> i32 {
    let mut v: i32 = (1..=terms as i32)
        .filter(|t| !f.odd_only || t % 2 == 1)
        .map(|t| if f.doubled { 2 * t } else { t })
        .sum();
    if f.negate {
        v = -v;
    }
    if mode == 1 {
        v += 100;
    } else if mode < 0 {
        v = v - 1000 + mode % 7;
    }
    v.wrapping_mul(scale).wrapping_add(i)
}

/// Exact: a sequence of calls with values drawn from a few (i32::MIN among them, which GLSL
/// cannot write as a literal), each call's result that of its own values.
#[test]
fn specialized_scalars_take_each_call_its_own_value() {
    let flags = (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(d, o, n)| Flags {
        doubled: d,
        odd_only: o,
        negate: n,
    });
    let call = (
        prop_oneof![Just(0), Just(1), Just(-3), Just(i32::MIN)],
        flags,
        0u32..5,
        -50i32..50,
    );
    property(6, vec(call, 2..6), |bk, calls| {
        agree(
            bk,
            false,
            |be| {
                let mut out = Field::<i32>::new(be, [N as u32])?;
                let mut results = Vec::new();
                for &(mode, f, terms, scale) in &calls {
                    k_specialized(
                        &mut out, mode, f.doubled, f.odd_only, f.negate, terms, scale,
                    )?;
                    results.push(out.download()?);
                }
                Ok(results)
            },
            |c, g| {
                for (k, &(mode, f, terms, scale)) in calls.iter().enumerate() {
                    let expected: Vec<i32> = (0..N as i32)
                        .map(|i| specialized_model(mode, f, terms, scale, i))
                        .collect();
                    prop_assert_eq!(&c[k], &expected, "the CPU, call {} {:?}", k, calls[k]);
                    same(
                        &format!("call {k} {:?}", calls[k]),
                        &c[k],
                        &g[k],
                        Tol::Exact,
                    )?;
                }
                Ok(())
            },
        )
    });
}

// =========================================================================================
// 38. `only_loops`: a kernel run in parts, with host work between them, as one launch would
//     run it with that work done at the same point
// =========================================================================================

const SUMS: usize = 4;

#[kernel]
fn k_parts(out: &mut Field<i32>, sums: &mut Field<i32>, scale: i32) {
    'fill: for i in out.indices() {
        out[i] = i as i32 * scale;
    }
    'clear: for s in sums.active() {
        sums[s] = 0;
    }
    'sum: for i in out.indices() {
        sums[i % 4] += out[i];
    }
    'double: for s in sums.active() {
        sums[s] = 2 * sums[s] + 1;
    }
}

/// Exact: `'fill` alone, the host adds `bump` to `out`, then `'clear..='double`; the sums
/// are the model's, and running `'clear..='sum` and `'double` apart gives the same.
#[test]
fn a_kernel_runs_in_parts_with_host_work_between() {
    property(
        6,
        (-20i32..20, -5i32..5, any::<bool>()),
        |bk, (scale, bump, split)| {
            agree(
                bk,
                false,
                |be| {
                    let mut out = Field::<i32>::new(be, [N as u32])?;
                    let mut sums = Field::<i32>::new(be, [SUMS as u32])?;
                    sums.upload(&[7; SUMS])?;
                    mpm::only_loops("fill", "fill", || k_parts(&mut out, &mut sums, scale))?;
                    let untouched = sums.download()?;
                    let bumped: Vec<i32> = out.download()?.iter().map(|v| v + bump).collect();
                    out.upload(&bumped)?;
                    match split {
                        true => {
                            mpm::only_loops("clear", "sum", || k_parts(&mut out, &mut sums, 0))?;
                            mpm::only_loops("double", "double", || {
                                k_parts(&mut out, &mut sums, 0)
                            })?;
                        }
                        false => {
                            mpm::only_loops("clear", "double", || k_parts(&mut out, &mut sums, 0))?
                        }
                    }
                    Ok((untouched, out.download()?, sums.download()?))
                },
                |c, g| {
                    let out: Vec<i32> = (0..N as i32).map(|i| i * scale + bump).collect();
                    let mut sums = [0i32; SUMS];
                    for (i, v) in out.iter().enumerate() {
                        sums[i % SUMS] += v;
                    }
                    let sums: Vec<i32> = sums.iter().map(|s| 2 * s + 1).collect();
                    prop_assert_eq!(&c.0, &vec![7; SUMS], "'fill alone left the sums alone");
                    prop_assert_eq!(&c.1, &out, "out after the parts");
                    prop_assert_eq!(&c.2, &sums, "the sums after the parts");
                    same("the sums of 'fill alone", &c.0, &g.0, Tol::Exact)?;
                    same("out", &c.1, &g.1, Tol::Exact)?;
                    same("the sums", &c.2, &g.2, Tol::Exact)
                },
            )
        },
    );
}

/// A window naming a loop the kernel lacks, or running backwards, is an error that names it.
#[test]
fn only_loops_refuses_unknown_or_reversed_labels() {
    with_backends(|b| {
        for be in [&b.cpu, &b.vk] {
            let mut out = Field::<i32>::new(be, [N as u32]).unwrap();
            let mut sums = Field::<i32>::new(be, [SUMS as u32]).unwrap();
            let unknown = mpm::only_loops("fill", "p2g", || k_parts(&mut out, &mut sums, 1));
            let message = unknown.unwrap_err().to_string();
            assert!(
                message.contains("no loop labelled `p2g`") && message.contains("`double`"),
                "{message}"
            );
            let reversed = mpm::only_loops("sum", "fill", || k_parts(&mut out, &mut sums, 1));
            let message = reversed.unwrap_err().to_string();
            assert!(message.contains("`fill` comes before `sum`"), "{message}");
            // Outside the window every loop runs again.
            k_parts(&mut out, &mut sums, 1).unwrap();
            assert_eq!(out.download().unwrap()[3], 3);
        }
    });
}

// =========================================================================================
// 39. Short loops between integer literals: the CPU lowering copies their bodies (one per
//     iteration, `emit_cpu::unrolled`) unless they `break` or `continue`
// =========================================================================================

#[kernel]
fn k_short_loops(
    x: &Field<i32>,
    nest: &mut Field<i32>,
    skipped: &mut Field<i32>,
    stopped: &mut Field<i32>,
    empty: &mut Field<i32>,
    shadowed: &mut Field<i32>,
) {
    'short: for i in x.indices() {
        let v = x[i];
        let mut n = 0;
        for a in 0..3 {
            for b in 0u32..2u32 {
                n += (a + 1) * (b as i32 + 2) * v;
            }
        }
        nest[i] = n;
        let mut s = 0;
        for a in 0..3 {
            if a == v % 3 {
                continue;
            }
            s += a + 10;
        }
        skipped[i] = s;
        let mut t = 0;
        for a in 0..4 {
            if a * a > v {
                break;
            }
            t += 1;
        }
        stopped[i] = t;
        let mut e = 5;
        for a in 0..0 {
            e = a;
        }
        empty[i] = e;
        let mut h = 0;
        for a in 1..3 {
            let a = a * 10;
            h += a;
        }
        shadowed[i] = h;
    }
}

/// Exact, against the loops run on the host: nested literal loops (one with `u32` bounds),
/// loops that `continue` or `break` (kept as loops), an empty one, and a body that shadows
/// the index.
#[test]
fn short_literal_loops_run_every_iteration_once() {
    with_backends(|b| {
        let xs: Vec<i32> = (0..N as i32).map(|i| (i * 7) % 20).collect();
        for be in [&b.cpu, &b.vk] {
            let mut x = Field::<i32>::new(be, [N as u32]).unwrap();
            x.upload(&xs).unwrap();
            let mut outs: Vec<Field<i32>> = (0..5)
                .map(|_| Field::<i32>::new(be, [N as u32]).unwrap())
                .collect();
            let [nest, skipped, stopped, empty, shadowed] = &mut outs[..] else {
                unreachable!()
            };
            k_short_loops(&x, nest, skipped, stopped, empty, shadowed).unwrap();
            let got: Vec<Vec<i32>> = outs.iter().map(|f| f.download().unwrap()).collect();
            for (k, &v) in xs.iter().enumerate() {
                let stopped = (0..4).take_while(|a| a * a <= v).count() as i32;
                let want = [30 * v, 33 - (v % 3 + 10), stopped, 5, 30];
                let seen: Vec<i32> = got.iter().map(|g| g[k]).collect();
                assert_eq!(seen, want, "x = {v} on {}", be.describe());
            }
        }
    });
}

// =========================================================================================
// 40. Evaluation order: left to right on both backends, also where a later operand or the
//     value of an assignment runs statements that change what an earlier part reads
// =========================================================================================

#[func]
fn minus(a: i32, b: i32) -> i32 {
    a - b
}

#[kernel]
fn k_order(x: &Field<i32>, out: &mut Field<i32, 2>, mem: &mut Field<i32>) {
    for i in x.indices() {
        let (v, r) = (x[i], i as i32);
        let mut a = v;
        out[ivec2(r, 0)] = a + {
            a += 1;
            a
        };
        let mut b = v;
        out[ivec2(r, 1)] = b * 3
            - if v > 5 {
                b += 2;
                b
            } else {
                b -= 1;
                b
            };
        let mut c = v;
        out[ivec2(r, 2)] = minus(c, {
            c += 10;
            c
        });
        let mut d = v;
        d += {
            d += 1;
            d
        };
        out[ivec2(r, 3)] = d;
        let mut arr = [0, 0, 0, 0];
        let mut j = 1;
        arr[j] = {
            j += 1;
            7 + v
        };
        arr[j] += {
            j += 1;
            5
        };
        arr[j] -= {
            arr[j] = 100;
            3
        };
        out[ivec2(r, 4)] = arr[0] + 10 * arr[1] + 1000 * arr[2] + 100000 * arr[3];
        let e = [v, v + 1, v + 2];
        let mut k = 0;
        out[ivec2(r, 5)] = e[k] * 100
            + e[{
                k += 2;
                k
            }];
        let mut lo = v % 4;
        let mut n = 0;
        for t in lo..({
            lo += 2;
            lo + 1
        }) {
            n += t;
        }
        out[ivec2(r, 6)] = n;
        mem[i] = v;
        out[ivec2(r, 7)] = mem[i] * 10 + {
            mem[i] = 3;
            mem[i]
        };
    }
}

/// Exact, against the order Rust gives operands and arguments (left to right) and that the
/// kernel language gives assignments (the place, and for `op=` its old value, before the
/// value, unlike Rust for primitives): a traced read is lazy, so without care Vulkan read
/// `a` after the block that moved it.
#[test]
fn operands_evaluate_left_to_right() {
    with_backends(|b| {
        let xs: Vec<i32> = (0..N as i32).map(|i| (i * 5) % 13).collect();
        for be in [&b.cpu, &b.vk] {
            let x = Field::from_slice(be, [N as u32], &xs).unwrap();
            let mut out = Field::<i32, 2>::new(be, [N as u32, 8]).unwrap();
            let mut mem = Field::<i32>::new(be, [N as u32]).unwrap();
            k_order(&x, &mut out, &mut mem).unwrap();
            let got = out.download().unwrap();
            for (k, &v) in xs.iter().enumerate() {
                let want = [
                    2 * v + 1,
                    3 * v - if v > 5 { v + 2 } else { v - 1 },
                    -10,
                    2 * v + 1,
                    10 * (7 + v) + 1000 * 5 - 100000 * 3,
                    v * 100 + v + 2,
                    3 * (v % 4) + 3,
                    10 * v + 3,
                ];
                assert_eq!(&got[k * 8..k * 8 + 8], want, "x = {v} on {}", be.describe());
            }
        }
    });
}

#[kernel]
fn k_shared_order(out: &mut Field<i32>, n: u32) {
    for blk in blocks(0..n) {
        let tile = shared([0i32; 8]);
        for l in lanes(0u32..4) {
            let mut j = l * 2;
            tile[j] = {
                j += 1;
                j as i32 * 10
            };
            tile[j] = j as i32;
        }
        for l in lanes(0u32..8) {
            out[blk * 8 + l] = tile[l];
        }
    }
}

/// Exact: a store into a shared array takes its index before the value's statements, as a
/// field store does.
#[test]
fn shared_store_takes_its_index_first() {
    with_backends(|b| {
        for be in [&b.cpu, &b.vk] {
            let mut out = Field::<i32>::new(be, [16]).unwrap();
            k_shared_order(&mut out, 2).unwrap();
            let want: Vec<i32> = (0..16)
                .map(|k| match k % 2 {
                    0 => (k % 8 + 1) * 10,
                    _ => k % 8,
                })
                .collect();
            assert_eq!(out.download().unwrap(), want, "on {}", be.describe());
        }
    });
}
