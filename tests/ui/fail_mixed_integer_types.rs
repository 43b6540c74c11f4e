//! Adding an i32 to a u32: the error names both types, at the `+`.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn mix(x: &mut Field<f32>, n: u32) {
    for i in x.indices() {
        let k: i32 = 3;
        x[i] = (k + n) as f32;
    }
}

fn main() {}
