//! A local may not take the name of a field parameter.
#![allow(unused_imports)]
use mpm::{kernel, Field};

#[kernel]
fn k(x: &Field<f32>, y: &mut Field<f32>) {
    for i in y.indices() {
        let x = 2.0;
        y[i] = x;
    }
}

fn main() {}
