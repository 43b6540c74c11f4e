//! A field parameter taken by value: fields are passed by reference.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn by_value(x: Field<f32>, y: &mut Field<f32>) {
    for i in y.indices() {
        y[i] = 1.0;
    }
}

fn main() {}
