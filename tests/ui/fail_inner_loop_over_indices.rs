//! An inner (sequential) loop over `indices()`: inner loops run over `a..b` / `a..=b`.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn all_pairs(x: &mut Field<f32>, y: &Field<f32>) {
    for i in x.indices() {
        let mut s = 0.0;
        for j in y.indices() {
            s += y[j];
        }
        x[i] = s;
    }
}

fn main() {}
