//! A 0-D field has one element and no index space to loop over.
#![allow(unused_imports)]
use mpm::{kernel, Field};

#[kernel]
fn k(acc: &mut Field<f32, 0>) {
    for i in acc.indices() {
        acc[()] = 1.0;
    }
}

fn main() {}
