//! A kernel calling another kernel: kernels are launched from the host.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn inner(x: &mut Field<f32>) {
    for i in x.indices() {
        x[i] = 1.0;
    }
}

#[kernel]
fn outer(x: &mut Field<f32>) {
    for i in x.indices() {
        inner(x);
    }
}

fn main() {}
