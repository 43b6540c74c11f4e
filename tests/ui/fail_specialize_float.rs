//! `#[specialize]` takes flags and small counts: a float would compile a shader per value.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn scaled(out: &mut Field<f32>, #[specialize] factor: f32) {
    for i in out.indices() {
        out[i] = factor;
    }
}

fn main() {}
