//! A labeled loop inside a kernel.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn search(x: &mut Field<f32>) {
    for i in x.indices() {
        'outer: for j in 0..4 {
            for k in 0..4 {
                if j + k > 3 {
                    break 'outer;
                }
            }
        }
        x[i] = 1.0;
    }
}

fn main() {}
