//! Shared helpers of the CPU/GPU equivalence tests: the backends under test, tolerant
//! comparison of downloaded fields, and the end-of-test validation-layer check.
#![allow(dead_code)]

use std::fmt::Debug;
use std::sync::{Arc, OnceLock};

use mpm::core::types::{to_words, Scalar};
use mpm::core::Elem;
use mpm::glam::{IVec2, IVec3, Mat2, Mat3, UVec2, UVec3, Vec2, Vec3, Vec4};
use mpm::{func, BackendRef, VulkanBackend, VulkanOptions};
use proptest::strategy::Strategy;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};

/// The backends every equivalence test runs on.
pub struct Backends {
    /// The reference: the CPU lowering on rayon.
    pub cpu: BackendRef,
    /// Vulkan with the validation layer, float atomics where the device has them (unless
    /// `MPM_VK_NO_FLOAT_ATOMICS=1`).
    pub vk: BackendRef,
    /// Vulkan with `float_atomics: false`: f32 `+=` on fields is a compare-and-swap loop,
    /// and with `aggregate_adds` (where the device has subgroup arithmetic) the invocations
    /// of a subgroup that add into one element sum their shares first.
    pub vk_cas: BackendRef,
    vk_impl: Arc<VulkanBackend>,
    vk_cas_impl: Arc<VulkanBackend>,
}

static BACKENDS: OnceLock<Option<Backends>> = OnceLock::new();

/// Vulkan options with the validation layer; `float_atomics: None` keeps the environment's
/// choices (`MPM_VK_NO_FLOAT_ATOMICS`, `MPM_VK_AGGREGATE`), `Some(false)` forces the
/// compare-and-swap fallback and aggregated adds.
fn options(float_atomics: Option<bool>) -> VulkanOptions {
    let env = VulkanOptions::from_env();
    VulkanOptions {
        validation: true,
        float_atomics: float_atomics.unwrap_or(env.float_atomics),
        aggregate_adds: float_atomics.is_some() || env.aggregate_adds,
        ..env
    }
}

/// The backends, created once per test process (instances with the validation layer are
/// slow to create on lavapipe). `None`, with the reason printed, only when this machine has
/// no Vulkan device at all and `MPM_REQUIRE_GPU` is not 1 (see
/// `mpm_vulkan::backend_for_tests`): the test then checks nothing and passes.
pub fn backends() -> Option<&'static Backends> {
    let b = BACKENDS.get_or_init(|| {
        let vk = match mpm_vulkan::backend_for_tests(options(None), "CPU/GPU equivalence") {
            Ok(Some(b)) => Arc::new(b),
            Ok(None) => return None,
            Err(e) => panic!("creating the Vulkan backend failed: {e}"),
        };
        let vk_cas = VulkanBackend::new(options(Some(false)))
            .map(Arc::new)
            .unwrap_or_else(|e| panic!("creating the compare-and-swap Vulkan backend failed: {e}"));
        assert!(
            !vk_cas.caps().float_atomic_add,
            "float_atomics: false must disable float atomics"
        );
        eprintln!(
            "equivalence: {} ({}), validation layer {}, float atomics {} / fallback backend {}, \
             aggregated adds {} / fallback backend {}",
            vk.device_info().name,
            vk.device_info().device_type,
            if vk.validation_enabled() { "on" } else { "off" },
            vk.caps().float_atomic_add,
            vk_cas.caps().float_atomic_add,
            vk.caps().aggregate_adds,
            vk_cas.caps().aggregate_adds,
        );
        if !vk.validation_enabled() {
            eprintln!(
                "note: the Vulkan validation layer is not installed; validation messages are not checked"
            );
        }
        Some(Backends {
            cpu: mpm::backend::cpu(),
            vk: vk.clone(),
            vk_cas: vk_cas.clone(),
            vk_impl: vk,
            vk_cas_impl: vk_cas,
        })
    });
    if b.is_none() {
        eprintln!("SKIP: no Vulkan device");
    }
    b.as_ref()
}

impl Backends {
    /// The GPU backends to compare with the CPU: plain Vulkan, and with `atomics` also the
    /// compare-and-swap fallback.
    pub fn gpus(&self, atomics: bool) -> Vec<(&'static str, &BackendRef)> {
        let mut v = vec![("vulkan", &self.vk)];
        if atomics {
            v.push(("vulkan-cas", &self.vk_cas));
        }
        v
    }

    /// Fails the test when the validation layer (if present) reported anything. Messages are
    /// collected process-wide, so a message makes every later check fail too: the first
    /// failing test is the one to look at.
    pub fn check_validation(&self) {
        if !self.vk_impl.validation_enabled() && !self.vk_cas_impl.validation_enabled() {
            return;
        }
        let msgs = VulkanBackend::validation_messages();
        assert!(
            msgs.is_empty(),
            "the Vulkan validation layer reported {} message(s):\n{}",
            msgs.len(),
            msgs.join("\n")
        );
    }
}

/// Runs `body` with the backends, then checks the validation layer. Skips (returns) when no
/// Vulkan device exists.
pub fn with_backends(body: impl FnOnce(&Backends)) {
    let Some(b) = backends() else { return };
    body(b);
    b.check_validation();
}

/// Runs a property: `cases` random inputs from `strategy`, each checked by `test` (which runs
/// the kernel on the CPU and on the GPU backends and compares). Panics with the (shrunk)
/// failing input; afterwards checks the validation layer. Skips when no Vulkan device exists.
pub fn property<S>(
    cases: u32,
    strategy: S,
    test: impl Fn(&Backends, S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    with_backends(|b| {
        let mut runner = TestRunner::new(config(cases));
        if let Err(e) = runner.run(&strategy, |v| test(b, v)) {
            panic!(
                "{e}
{runner}"
            );
        }
    });
}

/// Proptest settings: `cases` cases (every case runs the GPU; `PROPTEST_CASES` overrides it
/// for a longer soak), few shrink steps, and no regression files written into the source tree.
pub fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        max_shrink_iters: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// How closely two values must agree.
#[derive(Clone, Copy, Debug)]
pub enum Tol {
    /// Integers and bools bit for bit; floats equal as values (-0.0 == 0.0, NaN == NaN, a
    /// subnormal CPU value == a GPU zero).
    Exact,
    /// `|a - b| <= abs + rel * max(|a|, |b|)` per float component; non-float components exact.
    Close { rel: f32, abs: f32 },
}

impl Tol {
    pub const fn close(rel: f32, abs: f32) -> Tol {
        Tol::Close { rel, abs }
    }
}

/// The f32 components of an element (None for integer and bool elements).
pub fn float_parts<T: Elem>(v: &T) -> Option<Vec<f32>> {
    if T::ty().scalar() != Some(Scalar::F32) {
        return None;
    }
    Some(
        to_words(std::slice::from_ref(v))
            .into_iter()
            .map(f32::from_bits)
            .collect(),
    )
}

pub fn close_f32(a: f32, b: f32, rel: f32, abs: f32) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    let d = (a as f64 - b as f64).abs();
    d <= abs as f64 + rel as f64 * (a.abs().max(b.abs()) as f64)
}

/// Compares two downloaded fields element by element; the error names the field, the first
/// few differing indices (linear, last axis fastest) and both values.
pub fn compare<T: Elem + Debug>(
    what: &str,
    cpu: &[T],
    gpu: &[T],
    tol: Tol,
    inputs: &dyn Fn(usize) -> String,
) -> Result<(), TestCaseError> {
    if cpu.len() != gpu.len() {
        return Err(TestCaseError::fail(format!(
            "{what}: lengths differ, cpu {} gpu {}",
            cpu.len(),
            gpu.len()
        )));
    }
    let mut bad = Vec::new();
    for (i, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        let ok = match (tol, float_parts(c), float_parts(g)) {
            (Tol::Close { rel, abs }, Some(cs), Some(gs)) => {
                cs.iter().zip(&gs).all(|(x, y)| close_f32(*x, *y, rel, abs))
            }
            (Tol::Exact, Some(cs), Some(gs)) => {
                // Float components: equal values (0.0 == -0.0: a GPU compiler may fold
                // `float(int(x))` into `trunc(x)`, which keeps the sign of a zero), both NaN,
                // or a subnormal CPU result that the GPU flushed to zero (Vulkan leaves f32
                // denormals to the implementation; NVIDIA flushes them).
                cs.iter().zip(&gs).all(|(x, y)| {
                    x == y || (x.is_nan() && y.is_nan()) || (x.is_subnormal() && *y == 0.0)
                })
            }
            _ => {
                // Integers and bools: the stored words, bit for bit.
                to_words(std::slice::from_ref(c)) == to_words(std::slice::from_ref(g))
            }
        };
        if !ok {
            bad.push(i);
        }
    }
    if bad.is_empty() {
        return Ok(());
    }
    let mut msg = format!(
        "{what}: {} of {} elements differ (tolerance {tol:?})",
        bad.len(),
        cpu.len()
    );
    for &i in bad.iter().take(6) {
        msg.push_str(&format!(
            "\n  [{i}] cpu {:?}  gpu {:?}  inputs: {}",
            cpu[i],
            gpu[i],
            inputs(i)
        ));
    }
    Err(TestCaseError::fail(msg))
}

/// `compare` without an input description.
pub fn same<T: Elem + Debug>(
    what: &str,
    cpu: &[T],
    gpu: &[T],
    tol: Tol,
) -> Result<(), TestCaseError> {
    compare(what, cpu, gpu, tol, &|_| String::new())
}

/// Turns an engine or solver error into a test failure that names the backend.
pub fn ok<T, E: std::fmt::Display>(backend: &str, r: Result<T, E>) -> Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(format!("{backend}: {e}")))
}

/// Runs `run` on the CPU and on each GPU backend (with `atomics`, also on the
/// compare-and-swap one) and checks every GPU result against the CPU result with `check`.
pub fn agree<R>(
    b: &Backends,
    atomics: bool,
    run: impl Fn(&BackendRef) -> mpm::core::Result<R>,
    check: impl Fn(&R, &R) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let cpu = ok("cpu", run(&b.cpu))?;
    for (name, be) in b.gpus(atomics) {
        let gpu = ok(name, run(be))?;
        check(&cpu, &gpu).map_err(|e| match e {
            TestCaseError::Fail(r) => TestCaseError::fail(format!("cpu vs {name}: {r}")),
            other => other,
        })?;
    }
    Ok(())
}

/// A small deterministic generator for tests that need many typed inputs from one seed.
pub struct Gen(u64);
impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn f(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn i(&mut self) -> i32 {
        self.next() as i32
    }
    pub fn u(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
    pub fn b(&mut self) -> bool {
        self.next() & 1 == 1
    }
    pub fn v2(&mut self) -> Vec2 {
        Vec2::new(self.f(-100.0, 100.0), self.f(-100.0, 100.0))
    }
    pub fn v3(&mut self) -> Vec3 {
        Vec3::new(
            self.f(-100.0, 100.0),
            self.f(-100.0, 100.0),
            self.f(-100.0, 100.0),
        )
    }
    pub fn v4(&mut self) -> Vec4 {
        Vec4::new(
            self.f(-100.0, 100.0),
            self.f(-100.0, 100.0),
            self.f(-100.0, 100.0),
            self.f(-100.0, 100.0),
        )
    }
    pub fn iv2(&mut self) -> IVec2 {
        IVec2::new(self.i(), self.i())
    }
    pub fn iv3(&mut self) -> IVec3 {
        IVec3::new(self.i(), self.i(), self.i())
    }
    pub fn uv2(&mut self) -> UVec2 {
        UVec2::new(self.u(), self.u())
    }
    pub fn uv3(&mut self) -> UVec3 {
        UVec3::new(self.u(), self.u(), self.u())
    }
    pub fn m2(&mut self) -> Mat2 {
        Mat2::from_cols(self.v2(), self.v2())
    }
    pub fn m3(&mut self) -> Mat3 {
        Mat3::from_cols(self.v3(), self.v3(), self.v3())
    }
    pub fn many<T>(&mut self, n: usize, f: impl Fn(&mut Gen) -> T) -> Vec<T> {
        (0..n).map(|_| f(self)).collect()
    }
}

/// Quadratic B-spline weights per axis of a particle `fx` cells past its stencil's base.
#[func]
pub fn weights(fx: Vec2) -> [Vec2; 3] {
    let a = Vec2::splat(1.5) - fx;
    let b = fx - Vec2::splat(1.0);
    let c = fx - Vec2::splat(0.5);
    [0.5 * a * a, Vec2::splat(0.75) - b * b, 0.5 * c * c]
}

/// A quadratic P2G of unit-mass particles at `x` with velocities `v` onto a `res`^2 grid
/// (cells `1 / res` wide), summed in f64 on the host: per node the mass, the momentum and
/// the sum of the terms' magnitudes (for the bound `2 n 2^-24 sum |terms|` that any order
/// of f32 additions stays within).
pub fn exact_p2g(x: &[Vec2], v: &[Vec2], res: u32) -> ExactP2g {
    let cells = (res * res) as usize;
    let (mut m, mut mv, mut mag) = (vec![0f64; cells], vec![[0f64; 2]; cells], vec![0f64; cells]);
    for (xp, vp) in x.iter().zip(v) {
        let xp = *xp * res as f32;
        let base = (xp - 0.5).floor().as_ivec2();
        let fx = xp - base.as_vec2();
        let (a, b, c) = (Vec2::splat(1.5) - fx, fx - Vec2::ONE, fx - Vec2::splat(0.5));
        let w = [0.5 * a * a, Vec2::splat(0.75) - b * b, 0.5 * c * c];
        for i in 0..3 {
            for j in 0..3 {
                let c = base + IVec2::new(i, j);
                let k = (c.x as u32 * res + c.y as u32) as usize;
                let weight = (w[i as usize].x * w[j as usize].y) as f64;
                m[k] += weight;
                mv[k][0] += weight * vp.x as f64;
                mv[k][1] += weight * vp.y as f64;
                mag[k] += weight * (1.0 + vp.length() as f64);
            }
        }
    }
    ExactP2g { m, mv, mag }
}

/// A P2G's sums in f64 (see [`exact_p2g`]).
pub struct ExactP2g {
    pub m: Vec<f64>,
    pub mv: Vec<[f64; 2]>,
    pub mag: Vec<f64>,
}

impl ExactP2g {
    /// Every node of a P2G of `n` particles that `backend` computed (`gm`, `gmv`) is within
    /// the order-independent bound `2 n 2^-24 sum |terms|` of the exact sums.
    pub fn check(
        &self,
        backend: &str,
        n: usize,
        gm: &[f32],
        gmv: &[Vec2],
    ) -> Result<(), TestCaseError> {
        for k in 0..self.m.len() {
            let bound = 2.0 * n as f64 * self.mag[k] / 16777216.0 + 1e-9;
            let err = (gm[k] as f64 - self.m[k])
                .abs()
                .max((gmv[k].x as f64 - self.mv[k][0]).abs())
                .max((gmv[k].y as f64 - self.mv[k][1]).abs());
            if err > bound {
                return Err(TestCaseError::fail(format!(
                    "{backend}: node {k}: mass {} mv {:?}, exact {} {:?}",
                    gm[k], gmv[k], self.m[k], self.mv[k]
                )));
            }
        }
        Ok(())
    }
}
