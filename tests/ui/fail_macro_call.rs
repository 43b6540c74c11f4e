//! A macro call (`println!`) inside a kernel.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn debug_print(x: &mut Field<f32>) {
    for i in x.indices() {
        println!("{}", x[i]);
    }
}

fn main() {}
