use std::sync::Arc;

use mpm_core::glam::{IVec2, Mat3, Vec2, Vec3};
use mpm_core::{func, kernel, BackendRef, Field};

#[func]
fn twice(x: f32) -> f32 {
    x * 2.0
}

#[kernel]
fn axpy(a: &Field<f32>, b: &mut Field<f32>, s: f32) {
    for i in a.indices() {
        b[i] = twice(a[i]) + s;
    }
}

#[kernel]
fn scatter(g: &mut Field<f32, 2>, n: i32) {
    for i in 0..n {
        let c = ivec2(i % 4, 0);
        g[c] += 1.0;
    }
}

#[kernel]
fn vecs(v: &mut Field<Vec2>) {
    for i in v.indices() {
        let mut acc = Vec2::ZERO;
        for k in 0..3 {
            if k == 1 {
                continue;
            }
            acc.x += k as f32;
        }
        let w = [1.0, 2.0, 3.0];
        acc.y = w[i as i32 % 3];
        v[i] = acc;
    }
}

/// Each invocation stores into `y` and `m` only at its own index, which the CPU does with
/// plain writes (`mpm_core::host::Owned`), and reads its stores back; the range runs past
/// the fields' end.
#[kernel]
fn own_index(x: &Field<f32>, y: &mut Field<f32>, m: &mut Field<Mat3>, n: u32) {
    for p in 0..n {
        y[p] = x[p] * 2.0;
        y[p] = y[p] + 1.0;
        m[p] = Mat3::from_diagonal(Vec3::splat(y[p]));
    }
}

#[test]
fn stores_at_the_invocations_own_index_land_and_out_of_range_ones_are_refused() {
    let be: BackendRef = Arc::new(mpm_cpu::CpuBackend::new());
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|k| k as f32).collect();
    let x = Field::<f32>::from_slice(&be, [n], &x).unwrap();
    let mut y = Field::<f32>::new(&be, [n]).unwrap();
    let mut m = Field::<Mat3>::new(&be, [n]).unwrap();
    let err = own_index(&x, &mut y, &mut m, n + 3).unwrap_err();
    assert!(matches!(err, mpm_core::Error::OutOfBounds { .. }), "{err}");
    let want: Vec<f32> = (0..n).map(|k| 2.0 * k as f32 + 1.0).collect();
    assert_eq!(y.download().unwrap(), want);
    let diag: Vec<Mat3> = want
        .iter()
        .map(|&d| Mat3::from_diagonal(Vec3::splat(d)))
        .collect();
    assert_eq!(m.download().unwrap(), diag);
}

#[test]
fn kernels_run_on_cpu() {
    let be: BackendRef = Arc::new(mpm_cpu::CpuBackend::new());
    let a = Field::<f32>::from_slice(&be, [4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let mut b = Field::<f32>::new(&be, [4]).unwrap();
    axpy(&a, &mut b, 0.5).unwrap();
    assert_eq!(b.download().unwrap(), vec![2.5, 4.5, 6.5, 8.5]);
    let mut g = Field::<f32, 2>::new(&be, [4, 1]).unwrap();
    scatter(&mut g, 1000).unwrap();
    assert_eq!(g.download().unwrap(), vec![250.0; 4]);
    let mut v = Field::<Vec2>::new(&be, [3]).unwrap();
    vecs(&mut v).unwrap();
    assert_eq!(
        v.download().unwrap(),
        vec![
            Vec2::new(2.0, 1.0),
            Vec2::new(2.0, 2.0),
            Vec2::new(2.0, 3.0)
        ]
    );
    let _ = IVec2::ZERO;
}

/// A backend that only traces kernels, to check the GPU lowering builds.
struct TraceOnly(std::sync::Mutex<Vec<mpm_core::ir::Kernel>>);
impl mpm_core::Backend for TraceOnly {
    fn kind(&self) -> mpm_core::BackendKind {
        mpm_core::BackendKind::Cpu
    }
    fn describe(&self) -> String {
        "trace".into()
    }
    fn alloc(&self, words: usize) -> mpm_core::Result<Arc<dyn mpm_core::backend::Buffer>> {
        mpm_cpu::CpuBackend::new().alloc(words)
    }
    fn write(
        &self,
        _: &dyn mpm_core::backend::Buffer,
        _: usize,
        _: &[u32],
    ) -> mpm_core::Result<()> {
        Ok(())
    }
    fn read(&self, _: &dyn mpm_core::backend::Buffer) -> mpm_core::Result<Vec<u32>> {
        Ok(vec![])
    }
    fn fill_zero(&self, _: &dyn mpm_core::backend::Buffer, _: usize) -> mpm_core::Result<()> {
        Ok(())
    }
    fn launch(
        &self,
        k: &mpm_core::KernelDesc,
        args: &mpm_core::backend::LaunchArgs<'_>,
    ) -> mpm_core::backend::LaunchReport {
        let outcome = (k.trace)().map(|ir| self.0.lock().unwrap().push(ir));
        mpm_core::backend::LaunchReport {
            outcome,
            pools: vec![None; args.trees.len()],
        }
    }
    fn profile(&self) -> Vec<mpm_core::backend::LoopTiming> {
        vec![]
    }
    fn reset_profile(&self) {}
}

#[test]
fn kernels_trace() {
    let t = Arc::new(TraceOnly(Default::default()));
    let be: BackendRef = t.clone();
    let a = Field::<f32>::new(&be, [4]).unwrap();
    let mut b = Field::<f32>::new(&be, [4]).unwrap();
    axpy(&a, &mut b, 0.5).unwrap();
    let mut v = Field::<Vec2>::new(&be, [3]).unwrap();
    vecs(&mut v).unwrap();
    let ks = t.0.lock().unwrap();
    println!("{:#?}", ks[1]);
    assert_eq!(ks[0].funcs.len(), 1);
}
