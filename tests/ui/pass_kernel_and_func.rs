// A small valid kernel and func: both lowerings (CPU Rust and the trace) type-check, and the
// kernel runs on the CPU backend.
use mpm::glam::Vec2;
use mpm::{func, kernel, Field};

#[func]
fn damp(v: Vec2, k: f32) -> Vec2 {
    let s = clamp(1.0 - k, 0.0, 1.0);
    v * s
}

#[kernel]
fn step(x: &mut Field<Vec2>, v: &mut Field<Vec2>, hits: &mut Field<i32>, dt: f32, k: f32) {
    let g = Vec2::new(0.0, -9.8);
    for p in x.indices() {
        let mut vp = damp(v[p] + dt * g, k);
        if x[p].y < 0.0 {
            vp.y = abs(vp.y);
            hits[0] += 1;
        }
        for _ in 0..2 {
            vp *= 1.0;
        }
        v[p] = vp;
        x[p] = x[p] + dt * vp;
    }
}

fn main() {
    let cpu = mpm::backend::cpu();
    let start = [Vec2::new(0.5, 1.0), Vec2::new(0.25, -0.5)];
    let mut x = Field::from_slice(&cpu, [2], &start).unwrap();
    let mut v = Field::from_slice(&cpu, [2], &[Vec2::ZERO; 2]).unwrap();
    let mut hits = Field::<i32>::new(&cpu, [1]).unwrap();
    step(&mut x, &mut v, &mut hits, 0.1, 0.0).unwrap();
    let x = x.download().unwrap();
    assert!(x[0].y < 1.0);
    assert_eq!(hits.download().unwrap(), vec![1]);
}
