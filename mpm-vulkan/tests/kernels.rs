//! End-to-end tests of the Vulkan backend on hand-built kernel IR.

mod common;

use common::*;
use mpm_core::ir::*;
use mpm_core::types::{Scalar, Ty};
use mpm_core::{Backend, Error, Result};
use mpm_vulkan::glsl::{generate, GlslOptions};
use mpm_vulkan::{VulkanBackend, VulkanOptions};

/// `for i in a.indices() { a[i] = b[i] * 2.0 + s }`
fn trace_scale() -> Result<Kernel> {
    let mut k = Kb::new("scale");
    let a = k.field("a", Ty::F32, 1);
    let b = k.field("b", Ty::F32, 1);
    let s = k.scalar(Ty::F32);
    let i = k.par_indices(a, Ty::U32);
    let iv = k.v(i);
    let bi = k.load(b, iv);
    let two = k.f(2.0);
    let m = k.bin(BinOp::Mul, bi, two);
    let val = k.bin(BinOp::Add, m, s);
    k.push(Stmt::Store {
        field: a,
        index: iv,
        value: val,
    });
    k.finish()
}

#[test]
fn scale_loop() {
    let Some(be) = backend_or_skip() else { return };
    let n = 1000u32;
    let bvals: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let a = fbuf(&be, &vec![0.0; n as usize]);
    let b = fbuf(&be, &bvals);
    let d = desc!("scale", ["a", "b"], trace_scale);
    run(
        &be,
        &d,
        &[(&a, &[n]), (&b, &[n])],
        &[0.25f32.to_bits()],
        &[(0, n as u64)],
    )
    .unwrap();
    let out = read_f(&be, &a);
    for (o, b) in out.iter().zip(&bvals) {
        assert_eq!(*o, b * 2.0 + 0.25);
    }
    // A second launch hits the pipeline cache; the profile counts both.
    run(
        &be,
        &d,
        &[(&a, &[n]), (&b, &[n])],
        &[1.0f32.to_bits()],
        &[(0, n as u64)],
    )
    .unwrap();
    assert_eq!(read_f(&be, &a)[3], bvals[3] * 2.0 + 1.0);
    let prof = be.profile();
    assert_eq!(prof.len(), 1);
    assert_eq!(prof[0].calls, 2);
    assert_eq!(be.compiled_shaders().len(), 1);
    be.reset_profile();
    assert!(be.profile().is_empty());
    final_checks(&be);
}

/// `for i in 0..n { acc[()] += 1.0; vacc[()] += vec2(1, 2); iacc[()] += 3 }`
fn trace_atomics() -> Result<Kernel> {
    let mut k = Kb::new("atomics");
    let acc = k.field("acc", Ty::F32, 0);
    let vacc = k.field("vacc", Ty::Vector(Scalar::F32, 2), 0);
    let iacc = k.field("iacc", Ty::I32, 0);
    let _i = k.par_range(Ty::I32);
    let zero = k.u(0);
    let one = k.f(1.0);
    k.push(Stmt::AtomicAdd {
        field: acc,
        index: zero,
        value: one,
    });
    let two = k.f(2.0);
    let v = k.construct(&[one, two], Ty::Vector(Scalar::F32, 2));
    k.push(Stmt::AtomicAdd {
        field: vacc,
        index: zero,
        value: v,
    });
    let three = k.i(3);
    k.push(Stmt::AtomicAdd {
        field: iacc,
        index: zero,
        value: three,
    });
    k.finish()
}

fn atomics_on(be: &VulkanBackend) {
    let acc = fbuf(be, &[0.0]);
    let vacc = fbuf(be, &[0.0, 0.0]);
    let iacc = ibuf(be, &[5]);
    let d = desc!("atomics", ["acc", "vacc", "iacc"], trace_atomics);
    let n = 20_000u64;
    run(
        be,
        &d,
        &[(&acc, &[]), (&vacc, &[]), (&iacc, &[])],
        &[],
        &[(-7, n)],
    )
    .unwrap();
    assert_eq!(read_f(be, &acc), vec![n as f32]);
    assert_eq!(read_f(be, &vacc), vec![n as f32, 2.0 * n as f32]);
    assert_eq!(read_i(be, &iacc), vec![5 + 3 * n as i32]);
    final_checks(be);
}

#[test]
fn atomic_add_float_atomics() {
    let Some(be) = backend_with(true) else { return };
    if !be.caps().float_atomic_add {
        eprintln!("note: device has no float atomics; this runs the CAS path");
    } else {
        assert!(be.compiled_shaders().is_empty());
    }
    atomics_on(&be);
    let glsl = &be.compiled_shaders()[0].glsl;
    if be.caps().float_atomic_add {
        assert!(
            glsl.contains("#extension GL_EXT_shader_atomic_float : require"),
            "{glsl}"
        );
        assert!(glsl.contains("atomicAdd(f0f.d[b + 0u], v)"), "{glsl}");
    }
}

#[test]
fn atomic_add_cas_fallback() {
    let Some(be) = backend_with(false) else {
        return;
    };
    assert!(!be.caps().float_atomic_add);
    atomics_on(&be);
    let glsl = &be.compiled_shaders()[0].glsl;
    assert!(glsl.contains("atomicCompSwap(f0.d[j], old"), "{glsl}");
    assert!(!glsl.contains("GL_EXT_shader_atomic_float"), "{glsl}");
}

/// `for ij in g.indices() { g[ij] = ij.x * 100 + ij.y }` on a 2-D i32 field, and a 3-D one.
fn trace_grid() -> Result<Kernel> {
    let mut k = Kb::new("grid");
    let g = k.field("g", Ty::I32, 2);
    let h = k.field("h", Ty::I32, 3);
    let ij = k.par_indices(g, Ty::Vector(Scalar::I32, 2));
    let v = k.v(ij);
    let x = k.member(v, 0, Ty::I32);
    let y = k.member(v, 1, Ty::I32);
    let c = k.i(100);
    let xm = k.bin(BinOp::Mul, x, c);
    let val = k.bin(BinOp::Add, xm, y);
    k.push(Stmt::Store {
        field: g,
        index: v,
        value: val,
    });
    let ijk = k.par_indices(h, Ty::Vector(Scalar::I32, 3));
    let v = k.v(ijk);
    let x = k.member(v, 0, Ty::I32);
    let y = k.member(v, 1, Ty::I32);
    let z = k.member(v, 2, Ty::I32);
    let c = k.i(100);
    let c10 = k.i(10);
    let xm = k.bin(BinOp::Mul, x, c);
    let ym = k.bin(BinOp::Mul, y, c10);
    let s = k.bin(BinOp::Add, xm, ym);
    let val = k.bin(BinOp::Add, s, z);
    k.push(Stmt::Store {
        field: h,
        index: v,
        value: val,
    });
    k.finish()
}

#[test]
fn indices_2d_3d() {
    let Some(be) = backend_or_skip() else { return };
    let g = ibuf(&be, &[0; 15]);
    let h = ibuf(&be, &[0; 24]);
    let d = desc!("grid", ["g", "h"], trace_grid);
    run(
        &be,
        &d,
        &[(&g, &[3, 5]), (&h, &[2, 3, 4])],
        &[],
        &[(0, 15), (0, 24)],
    )
    .unwrap();
    let want: Vec<i32> = (0..3)
        .flat_map(|x| (0..5).map(move |y| x * 100 + y))
        .collect();
    assert_eq!(read_i(&be, &g), want);
    let want: Vec<i32> = (0..2)
        .flat_map(|x| (0..3).flat_map(move |y| (0..4).map(move |z| x * 100 + y * 10 + z)))
        .collect();
    assert_eq!(read_i(&be, &h), want);
    assert_eq!(be.profile().len(), 2);
    final_checks(&be);
}

/// `for i in 0..4 { a[i + 2] = 1.0 }` on a field of 4: out of bounds for i >= 2.
fn trace_oob() -> Result<Kernel> {
    let mut k = Kb::new("oob");
    let _b = k.field("b", Ty::F32, 1);
    let a = k.field("a", Ty::F32, 1);
    let i = k.par_range(Ty::I32);
    let iv = k.v(i);
    let two = k.i(2);
    let idx = k.bin(BinOp::Add, iv, two);
    let one = k.f(1.0);
    k.push(Stmt::Store {
        field: a,
        index: idx,
        value: one,
    });
    k.finish()
}

#[test]
fn out_of_bounds_is_an_error() {
    let Some(be) = backend_or_skip() else { return };
    let a = fbuf(&be, &[0.0; 4]);
    let b = fbuf(&be, &[0.0; 4]);
    let d = desc!("oob", ["b", "a"], trace_oob);
    let err = run(&be, &d, &[(&b, &[4]), (&a, &[4])], &[], &[(0, 4)]).unwrap_err();
    match &err {
        Error::OutOfBounds { kernel, field } => {
            assert_eq!(kernel, "vk_tests::oob");
            assert_eq!(field, "a");
        }
        e => panic!("wrong error {e}"),
    }
    assert_eq!(read_f(&be, &a), vec![0.0, 0.0, 1.0, 1.0]);
    // The flag was reset: an in-bounds launch succeeds.
    run(&be, &d, &[(&b, &[4]), (&a, &[4])], &[], &[(-2, 4)]).unwrap();
    final_checks(&be);
}

const INT_PAIRS: [(i32, i32); 12] = [
    (7, 2),
    (-7, 2),
    (7, -2),
    (-7, -2),
    (5, 0),
    (-5, 0),
    (i32::MIN, -1),
    (i32::MIN, 1),
    (i32::MAX, -1),
    (123456789, 1000),
    (-1, 33),
    (i32::MIN, 7),
];

/// Integer semantics: div, rem, mul, shl, shr, neg, not on i32 and u32.
fn trace_ints() -> Result<Kernel> {
    let mut k = Kb::new("ints");
    let x = k.field("x", Ty::I32, 1);
    let y = k.field("y", Ty::I32, 1);
    let out = k.field("out", Ty::I32, 2);
    let uout = k.field("uout", Ty::U32, 2);
    let i = k.par_indices(x, Ty::U32);
    let iv = k.v(i);
    let xv = k.load(x, iv);
    let yv = k.load(y, iv);
    let ops = [
        BinOp::Div,
        BinOp::Rem,
        BinOp::Mul,
        BinOp::Shl,
        BinOp::Shr,
        BinOp::Add,
        BinOp::Sub,
    ];
    let ii = k.cast(iv, Ty::I32);
    for (n, op) in ops.iter().enumerate() {
        let r = k.bin(*op, xv, yv);
        let col = k.i(n as i32);
        let idx = k.construct(&[ii, col], Ty::Vector(Scalar::I32, 2));
        k.push(Stmt::Store {
            field: out,
            index: idx,
            value: r,
        });
    }
    let neg = k.un(UnOp::Neg, xv);
    let not = k.un(UnOp::Not, xv);
    for (n, r) in [neg, not].into_iter().enumerate() {
        let col = k.i(7 + n as i32);
        let idx = k.construct(&[ii, col], Ty::Vector(Scalar::I32, 2));
        k.push(Stmt::Store {
            field: out,
            index: idx,
            value: r,
        });
    }
    let xu = k.cast(xv, Ty::U32);
    let yu = k.cast(yv, Ty::U32);
    for (n, op) in [BinOp::Div, BinOp::Rem, BinOp::Shr, BinOp::Mul]
        .iter()
        .enumerate()
    {
        let r = k.bin(*op, xu, yu);
        let col = k.u(n as u32);
        let idx = k.construct(&[iv, col], Ty::Vector(Scalar::U32, 2));
        k.push(Stmt::Store {
            field: uout,
            index: idx,
            value: r,
        });
    }
    k.finish()
}

#[test]
fn integer_semantics() {
    let Some(be) = backend_or_skip() else { return };
    let n = INT_PAIRS.len();
    let x = ibuf(&be, &INT_PAIRS.map(|p| p.0));
    let y = ibuf(&be, &INT_PAIRS.map(|p| p.1));
    let out = ibuf(&be, &vec![0; n * 9]);
    let uout = buf(&be, &vec![0; n * 4]);
    let d = desc!("ints", ["x", "y", "out", "uout"], trace_ints);
    run(
        &be,
        &d,
        &[
            (&x, &[n as u32]),
            (&y, &[n as u32]),
            (&out, &[n as u32, 9]),
            (&uout, &[n as u32, 4]),
        ],
        &[],
        &[(0, n as u64)],
    )
    .unwrap();
    let got = read_i(&be, &out);
    let ugot = be.read(&*uout).unwrap();
    for (r, &(a, b)) in INT_PAIRS.iter().enumerate() {
        let div = if b == 0 { 0 } else { a.wrapping_div(b) };
        let rem = if b == 0 { 0 } else { a.wrapping_rem(b) };
        let want = [
            div,
            rem,
            a.wrapping_mul(b),
            a.wrapping_shl(b as u32),
            a.wrapping_shr(b as u32),
            a.wrapping_add(b),
            a.wrapping_sub(b),
            a.wrapping_neg(),
            !a,
        ];
        assert_eq!(&got[r * 9..r * 9 + 9], &want, "i32 ops on ({a}, {b})");
        let (ua, ub) = (a as u32, b as u32);
        let uwant = [
            ua.checked_div(ub).unwrap_or(0),
            ua.checked_rem(ub).unwrap_or(0),
            ua.wrapping_shr(ub),
            ua.wrapping_mul(ub),
        ];
        assert_eq!(&ugot[r * 4..r * 4 + 4], &uwant, "u32 ops on ({ua}, {ub})");
    }
    final_checks(&be);
}

/// Funcs: `fn sq(x) -> f32 { let mut t = x * x; t = t + 1.0; return t }`,
/// `fn both(x, y) -> (f32, f32) { return (sq(x), x - y) }`; out[i] = both(b[i], 2).0 + .1
fn trace_funcs() -> Result<Kernel> {
    let mut k = Kb::new("funcs");
    // func 0: sq
    let x = k.var("x", Ty::F32);
    let t = k.var("t", Ty::F32);
    let xv = k.v(x);
    let xx = k.bin(BinOp::Mul, xv, xv);
    let tv = k.v(t);
    let one = k.f(1.0);
    let t1 = k.bin(BinOp::Add, tv, one);
    k.k.funcs.push(Func {
        key: "my::sq".into(),
        params: vec![x],
        ret: Ty::F32,
        body: vec![
            Stmt::Let {
                var: t,
                init: Some(xx),
            },
            Stmt::Assign {
                place: Place::Var(t),
                value: t1,
            },
            Stmt::Return(Some(tv)),
        ],
    });
    // func 1: both
    let tup = Ty::Tuple(vec![Ty::F32, Ty::F32]);
    let p = k.var("p", Ty::F32);
    let q = k.var("q", Ty::F32);
    let pv = k.v(p);
    let qv = k.v(q);
    let c = k.e(ExprKind::Call(0, vec![pv]), Ty::F32);
    let d = k.bin(BinOp::Sub, pv, qv);
    let r = k.construct(&[c, d], tup.clone());
    // Params are copies and may be assigned.
    let ten = k.f(10.0);
    k.k.funcs.push(Func {
        key: "my::both".into(),
        params: vec![p, q],
        ret: tup.clone(),
        body: vec![
            Stmt::Assign {
                place: Place::Var(q),
                value: ten,
            },
            Stmt::Return(Some(r)),
        ],
    });
    let out = k.field("out", Ty::F32, 1);
    let b = k.field("b", Ty::F32, 1);
    let i = k.par_indices(out, Ty::U32);
    let iv = k.v(i);
    let bi = k.load(b, iv);
    let two = k.f(2.0);
    let call = k.e(ExprKind::Call(1, vec![bi, two]), tup.clone());
    let res = k.var("res", tup);
    k.push(Stmt::Let {
        var: res,
        init: Some(call),
    });
    let rv = k.v(res);
    let m0 = k.member(rv, 0, Ty::F32);
    let m1 = k.member(rv, 1, Ty::F32);
    let sum = k.bin(BinOp::Add, m0, m1);
    k.push(Stmt::Store {
        field: out,
        index: iv,
        value: sum,
    });
    k.finish()
}

#[test]
fn func_calls() {
    let Some(be) = backend_or_skip() else { return };
    let bv = [1.0f32, 2.0, -3.0, 0.5];
    let out = fbuf(&be, &[0.0; 4]);
    let b = fbuf(&be, &bv);
    let d = desc!("funcs", ["out", "b"], trace_funcs);
    run(&be, &d, &[(&out, &[4]), (&b, &[4])], &[], &[(0, 4)]).unwrap();
    let want: Vec<f32> = bv.iter().map(|x| (x * x + 1.0) + (x - 10.0)).collect();
    assert_eq!(read_f(&be, &out), want);
    final_checks(&be);
}

/// Local array, vectors, matrices: Construct / Member / Index (clamped), For, If, While,
/// Select, Return(None), Mat*Vec, builtins.
fn trace_mix() -> Result<Kernel> {
    let mut k = Kb::new("mix");
    let out = k.field("out", Ty::F32, 2);
    let m = k.field("m", Ty::Matrix(2), 1);
    let i = k.par_range(Ty::I32);
    let iv = k.v(i);
    // if i >= 3 { return; }
    let three = k.i(3);
    let ge = k.bin(BinOp::Ge, iv, three);
    k.push(Stmt::If {
        cond: ge,
        then: vec![Stmt::Return(None)],
        otherwise: vec![],
    });
    let row = |k: &mut Kb, col: i32, val: ExprId| {
        let iv = k.v(i);
        let c = k.i(col);
        let idx = k.construct(&[iv, c], Ty::Vector(Scalar::I32, 2));
        Stmt::Store {
            field: out,
            index: idx,
            value: val,
        }
    };
    // let mut arr = [0.0; 3]; for j in 0..3 { arr[j] = j as f32 * 1.5 }
    let arr_t = Ty::Array(Box::new(Ty::F32), 3);
    let arr = k.var("arr", arr_t.clone());
    let z = k.f(0.0);
    let splat = k.construct(&[z], arr_t.clone());
    k.push(Stmt::Let {
        var: arr,
        init: Some(splat),
    });
    let j = k.var("j", Ty::I32);
    let s0 = k.i(0);
    let e3 = k.i(3);
    let jv = k.v(j);
    let jf = k.cast(jv, Ty::F32);
    let c15 = k.f(1.5);
    let val = k.bin(BinOp::Mul, jf, c15);
    k.push(Stmt::For {
        var: j,
        start: s0,
        end: e3,
        body: vec![Stmt::Assign {
            place: Place::Index(Box::new(Place::Var(arr)), jv),
            value: val,
        }],
    });
    // out[i, 0] = arr[i + 1] (clamped: i = 2 reads arr[2])
    let av = k.v(arr);
    let one_i = k.i(1);
    let ip1 = k.bin(BinOp::Add, iv, one_i);
    let ai = k.index(av, ip1, Ty::F32);
    let s = row(&mut k, 0, ai);
    k.push(s);
    // let v = vec3(i as f32, 2, 3); v.y = -1; out[i, 1] = v[5] (clamped to z) + v.y
    let v3 = Ty::Vector(Scalar::F32, 3);
    let vv = k.var("v", v3.clone());
    let ifl = k.cast(iv, Ty::F32);
    let two = k.f(2.0);
    let thr = k.f(3.0);
    let cons = k.construct(&[ifl, two, thr], v3.clone());
    k.push(Stmt::Let {
        var: vv,
        init: Some(cons),
    });
    let m1 = k.f(-1.0);
    k.push(Stmt::Assign {
        place: Place::Member(Box::new(Place::Var(vv)), 1),
        value: m1,
    });
    let vve = k.v(vv);
    let five = k.u(5);
    let vz = k.index(vve, five, Ty::F32);
    let vy = k.member(vve, 1, Ty::F32);
    let sum = k.bin(BinOp::Add, vz, vy);
    let s = row(&mut k, 1, sum);
    k.push(s);
    // let mm = m[i]; let w = mm * vec2(1, 10); out[i, 2] = w.x + w.y + mm[1].x (column 1)
    let mm = k.var("mm", Ty::Matrix(2));
    let ld = k.load(m, iv);
    k.push(Stmt::Let {
        var: mm,
        init: Some(ld),
    });
    let one = k.f(1.0);
    let ten = k.f(10.0);
    let v2 = k.construct(&[one, ten], Ty::Vector(Scalar::F32, 2));
    let mme = k.v(mm);
    let w = k.bin(BinOp::Mul, mme, v2);
    let wx = k.member(w, 0, Ty::F32);
    let wy = k.member(w, 1, Ty::F32);
    let col1 = k.member(mme, 1, Ty::Vector(Scalar::F32, 2));
    let c1x = k.member(col1, 0, Ty::F32);
    let s1 = k.bin(BinOp::Add, wx, wy);
    let s2 = k.bin(BinOp::Add, s1, c1x);
    let s = row(&mut k, 2, s2);
    k.push(s);
    // while-loop counting and select: let mut n = 0; while n < i*2 { n += 1 } out[i,3] = n > 2 ? trace(mm) : round(-2.5)
    let n = k.var("n", Ty::I32);
    let zero = k.i(0);
    k.push(Stmt::Let {
        var: n,
        init: Some(zero),
    });
    let nv = k.v(n);
    let two_i = k.i(2);
    let lim = k.bin(BinOp::Mul, iv, two_i);
    let cond = k.bin(BinOp::Lt, nv, lim);
    let one_i = k.i(1);
    let inc = k.bin(BinOp::Add, nv, one_i);
    k.push(Stmt::While {
        cond,
        body: vec![Stmt::Assign {
            place: Place::Var(n),
            value: inc,
        }],
    });
    let gt = k.bin(BinOp::Gt, nv, two_i);
    let tr = k.builtin(Builtin::Trace, &[mme], Ty::F32);
    let m25 = k.f(-2.5);
    let rd = k.builtin(Builtin::Round, &[m25], Ty::F32);
    let sel = k.e(ExprKind::Select(gt, tr, rd), Ty::F32);
    let s = row(&mut k, 3, sel);
    k.push(s);
    // f32 rem: out[i, 4] = (-7.5) % 2.0 + determinant(mm)
    let a = k.f(-7.5);
    let b = k.f(2.0);
    let r = k.bin(BinOp::Rem, a, b);
    let det = k.builtin(Builtin::Determinant, &[mme], Ty::F32);
    let s3 = k.bin(BinOp::Add, r, det);
    let s = row(&mut k, 4, s3);
    k.push(s);
    k.finish()
}

#[test]
fn construct_member_index_mix() {
    let Some(be) = backend_or_skip() else { return };
    let out = fbuf(&be, &[9.0; 15]);
    // m[i] = columns (i, 1), (2, 3)
    let mats: Vec<f32> = (0..3).flat_map(|i| [i as f32, 1.0, 2.0, 3.0]).collect();
    let m = fbuf(&be, &mats);
    let d = desc!("mix", ["out", "m"], trace_mix);
    run(&be, &d, &[(&out, &[3, 5]), (&m, &[3])], &[], &[(0, 5)]).unwrap();
    let got = read_f(&be, &out);
    for i in 0..3 {
        let fi = i as f32;
        let arr = [0.0, 1.5, 3.0];
        let mm = mpm_core::glam::Mat2::from_cols_array(&[fi, 1.0, 2.0, 3.0]);
        let w = mm * mpm_core::glam::Vec2::new(1.0, 10.0);
        let want = [
            arr[(i + 1).min(2)],
            3.0 + -1.0,
            w.x + w.y + 2.0,
            if i * 2 > 2 { fi + 3.0 } else { -3.0 },
            -1.5 + mm.determinant(),
        ];
        assert_eq!(&got[i * 5..i * 5 + 5], &want, "row {i}");
    }
    final_checks(&be);
}

/// Two loops in one launch: the second reads what the first wrote (barrier), and a
/// third loop with count 0 is skipped.
fn trace_two_loops() -> Result<Kernel> {
    let mut k = Kb::new("two_loops");
    let a = k.field("a", Ty::U32, 1);
    let b = k.field("b", Ty::U32, 1);
    let n = k.scalar(Ty::U32);
    let i = k.par_indices(a, Ty::U32);
    let iv = k.v(i);
    let sq = k.bin(BinOp::Mul, iv, iv);
    k.push(Stmt::Store {
        field: a,
        index: iv,
        value: sq,
    });
    let j = k.par_range(Ty::U32);
    let jv = k.v(j);
    let one = k.u(1);
    let jp = k.bin(BinOp::Add, jv, one);
    let idx = k.bin(BinOp::Rem, jp, n);
    let ld = k.load(a, idx);
    k.push(Stmt::Store {
        field: b,
        index: jv,
        value: ld,
    });
    let _z = k.par_range(Ty::I32);
    let zero = k.u(0);
    k.push(Stmt::Store {
        field: b,
        index: zero,
        value: zero,
    });
    k.finish()
}

#[test]
fn loops_in_one_command_buffer() {
    let Some(be) = backend_or_skip() else { return };
    let n = 100_000u32;
    let a = buf(&be, &vec![0; n as usize]);
    let b = buf(&be, &vec![0; n as usize]);
    let d = desc!("two_loops", ["a", "b"], trace_two_loops);
    run(
        &be,
        &d,
        &[(&a, &[n]), (&b, &[n])],
        &[n],
        &[(0, n as u64), (0, n as u64), (0, 0)],
    )
    .unwrap();
    let got = be.read(&*b).unwrap();
    for (j, g) in got.iter().enumerate() {
        let src = (j as u32 + 1) % n;
        assert_eq!(*g, src.wrapping_mul(src), "b[{j}]");
    }
    let prof = be.profile();
    assert_eq!(prof.len(), 3);
    if be.caps().timestamps {
        assert!(prof[0].total.as_nanos() > 0, "{prof:?}");
    }
    final_checks(&be);
}

/// A kernel whose GLSL does not compile: `cross` of two scalars.
fn trace_bad() -> Result<Kernel> {
    let mut k = Kb::new("bad");
    let a = k.field("a", Ty::F32, 1);
    let i = k.par_indices(a, Ty::U32);
    let iv = k.v(i);
    let one = k.f(1.0);
    let c = k.builtin(Builtin::Cross, &[one, one], Ty::F32);
    k.push(Stmt::Store {
        field: a,
        index: iv,
        value: c,
    });
    k.finish()
}

#[test]
fn compile_error_quotes_the_line() {
    let Some(be) = backend_or_skip() else { return };
    let a = fbuf(&be, &[0.0; 2]);
    let d = desc!("bad", ["a"], trace_bad);
    match run(&be, &d, &[(&a, &[2])], &[], &[(0, 2)]) {
        Err(Error::ShaderCompile { kernel, message }) => {
            assert_eq!(kernel, "vk_tests::bad");
            assert!(message.contains("cross(1.0, 1.0)"), "{message}");
        }
        r => panic!("expected a compile error, got {r:?}"),
    }
}

/// Options for dense fields of `shapes`, 64 invocations per workgroup, no subgroups.
fn dense_options(
    shapes: &[Vec<u32>],
    float_atomics: bool,
    inf_nan_preserve: bool,
) -> GlslOptions<'_> {
    GlslOptions {
        shapes,
        specialized: &[],
        float_atomics,
        shared_float_atomics: float_atomics,
        local_size: 64,
        field_trees: &[],
        trees: &[],
        frozen: &[],
        subgroups: false,
        inf_nan_preserve,
        aggregate_adds: false,
    }
}

#[test]
fn generated_glsl_contains_expected_pieces() {
    let k = trace_scale().unwrap();
    let shapes = [vec![8], vec![8]];
    let src = generate(&k, &dense_options(&shapes, true, false)).unwrap();
    assert_eq!(src.len(), 1);
    let s = &src[0];
    for piece in [
        "#version 450",
        "layout(local_size_x = 64) in;",
        "layout(push_constant) uniform MpmPush { uint w[3]; } pc;",
        "const int F0_S0 = 8;",
        "#define mpm_s0 (uintBitsToFloat(pc.w[2]))",
        "uint i_0 = uint(mpm_id);",
        "f0_store(int(i_0), ((f1_load(int(i_0)) * 2.0) + mpm_s0));",
        "if (mpm_id >= pc.w[1])",
    ] {
        assert!(s.contains(piece), "missing `{piece}` in\n{s}");
    }
    assert!(!s.contains("#extension"), "{s}");
    assert!(!s.contains("f0_load"), "unused helper emitted:\n{s}");
    let preserving = generate(&k, &dense_options(&shapes, true, true)).unwrap();
    assert!(
        preserving[0].contains("capabilities = [4466], 4461, 32);"),
        "no SignedZeroInfNanPreserve mode:\n{}",
        preserving[0]
    );

    let k = trace_atomics().unwrap();
    let shapes = [vec![], vec![], vec![]];
    let with = generate(&k, &dense_options(&shapes, true, false)).unwrap();
    assert!(with[0].contains("#extension GL_EXT_shader_atomic_float : require"));
    let without = generate(&k, &dense_options(&shapes, false, false)).unwrap();
    assert!(without[0].contains("void f0_cas_add(uint j, float x)"));
    assert!(without[0].contains("atomicAdd(f2.d[b + 0u], uint(v));"));
    // Aggregated: float adds sum within the subgroup first; integer adds stay one each.
    let aggregated = generate(
        &k,
        &GlslOptions {
            aggregate_adds: true,
            ..dense_options(&shapes, true, false)
        },
    )
    .unwrap();
    let a = &aggregated[0];
    for piece in [
        "#extension GL_KHR_shader_subgroup_arithmetic : require",
        "if (b == subgroupBroadcastFirst(b)) {",
        "v = subgroupAdd(v);",
        "if (subgroupElect()) {",
    ] {
        assert!(a.contains(piece), "missing `{piece}` in\n{a}");
    }
    assert_eq!(
        a.matches("subgroupAdd").count(),
        2,
        "only the float fields aggregate:\n{a}"
    );
    assert!(a.contains("atomicAdd(f2.d[b + 0u], uint(v));"));
}

#[test]
fn unknown_device_is_a_clear_error() {
    let opts = VulkanOptions {
        device: Some("nonexistent".into()),
        ..VulkanOptions::default()
    };
    match VulkanBackend::new(opts) {
        Err(Error::DeviceNotFound { asked, available }) => {
            assert_eq!(asked, "nonexistent");
            assert!(!available.is_empty());
        }
        Err(e) if mpm_vulkan::may_skip(&e) => {
            eprintln!("SKIP: no Vulkan device: {e}");
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a device named `nonexistent` was selected"),
    }
}

#[test]
fn too_large_buffer_is_refused() {
    let Some(be) = backend_or_skip() else { return };
    let max = be.caps().max_storage_buffer_range as usize;
    match be.alloc(max / 4 + 1) {
        Err(Error::Backend { message, .. }) => {
            assert!(
                message.contains("maxStorageBufferRange") && message.contains(&max.to_string()),
                "{message}"
            );
        }
        r => panic!("expected a size error, got {:?}", r.map(|b| b.words())),
    }
    // Zero-sized buffers work.
    let z = be.alloc(0).unwrap();
    assert_eq!(be.read(&*z).unwrap(), Vec::<u32>::new());
}

#[test]
fn devices_are_listed() {
    match mpm_vulkan::list_devices() {
        Ok(list) => {
            for d in &list {
                eprintln!(
                    "device {}: {} ({}) subgroup {} float atomics {}",
                    d.index, d.name, d.device_type, d.subgroup_size, d.float_atomic_add
                );
            }
        }
        Err(e) if mpm_vulkan::may_skip(&e) => {
            eprintln!("SKIP: {e}")
        }
        Err(e) => panic!("listing devices failed: {e}"),
    }
}

/// Fields of `trace_many_fields`: more storage buffers than lavapipe's 32 per shader.
const MANY: usize = 40;
const MANY_NAMES: [&str; MANY] = [
    "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12", "f13", "f14",
    "f15", "f16", "f17", "f18", "f19", "f20", "f21", "f22", "f23", "f24", "f25", "f26", "f27",
    "f28", "f29", "f30", "f31", "f32", "f33", "f34", "f35", "f36", "f37", "f38", "f39",
];

/// `f0[i] = f1[i] + f2[i] + ... + f39[i]`.
fn trace_many_fields() -> Result<Kernel> {
    let mut k = Kb::new("many");
    let fields: Vec<u32> = MANY_NAMES.iter().map(|n| k.field(n, Ty::F32, 1)).collect();
    let i = k.par_indices(fields[0], Ty::U32);
    let iv = k.v(i);
    let mut sum = k.load(fields[1], iv);
    for &f in &fields[2..] {
        let x = k.load(f, iv);
        sum = k.bin(BinOp::Add, sum, x);
    }
    k.push(Stmt::Store {
        field: fields[0],
        index: iv,
        value: sum,
    });
    k.finish()
}

/// A kernel that binds more storage buffers than the device allows is refused with the
/// counts (the driver would otherwise run it with some bindings missing: the validation
/// layer's VUID-VkPipelineLayoutCreateInfo-pSetLayouts-00289, and wrong results).
#[test]
fn too_many_fields_are_refused() {
    let Some(be) = backend_or_skip() else { return };
    let n = 4u32;
    let bufs: Vec<_> = (0..MANY)
        .map(|f| fbuf(&be, &vec![f as f32; n as usize]))
        .collect();
    let shape = [n];
    let fields: Vec<_> = bufs.iter().map(|b| (b, &shape[..])).collect();
    let d = desc!("many", [], trace_many_fields);
    let d = mpm_core::KernelDesc {
        field_names: &MANY_NAMES,
        ..d
    };
    let limit = be.caps().max_storage_buffers as usize;
    match run(&be, &d, &fields, &[], &[(0, n as u64)]) {
        Err(Error::Backend { message, .. }) if limit <= MANY => {
            assert!(
                message.contains("storage buffers") && message.contains(&limit.to_string()),
                "{message}"
            );
        }
        Ok(()) if limit > MANY => {
            let want: f32 = (1..MANY).map(|f| f as f32).sum();
            assert_eq!(read_f(&be, &bufs[0]), vec![want; n as usize]);
        }
        Err(e) => panic!("the device allows {limit} storage buffers; the launch failed: {e}"),
        Ok(()) => panic!("the device allows {limit} storage buffers, but {MANY} fields ran"),
    }
}
