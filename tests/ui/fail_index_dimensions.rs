//! A 2-D index into a 1-D field: the error is at the index and names the field's dimensions.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn flat(x: &mut Field<f32>) {
    for i in x.indices() {
        x[ivec2(i as i32, 0)] = 1.0;
    }
}

fn main() {}
