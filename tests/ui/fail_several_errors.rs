//! One compile reports every statement's error, in kernels and funcs alike, not just the
//! first one.
#![allow(unused_imports)]

use mpm::{func, kernel, Field};

#[func]
fn twice(a: f32) -> f32 {
    let b = 2.0f64;
    let c = |x: f32| x;
    a * 2.0
}

#[kernel]
fn several(x: &mut Field<f32>, mode: i32) {
    let scale = 1.5f64;
    for i in x.indices() {
        let y = match mode {
            _ => 1.0,
        };
        x[i] = twice(x[i]) as f64;
    }
    for j in x.indices().rev() {
        x[j] = 0.0;
    }
}

fn main() {}
