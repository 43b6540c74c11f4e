//! `*=` on a field element: only `=`, `+=` and `-=` (atomic) are allowed on fields.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn scale(f: &mut Field<f32>) {
    for i in f.indices() {
        f[i] *= 2.0;
    }
}

fn main() {}
