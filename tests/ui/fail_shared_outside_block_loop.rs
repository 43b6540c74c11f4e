//! `shared` arrays and `lanes` loops belong to block loops (`for b in blocks(a..b)`).
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn plain(out: &mut Field<f32>) {
    for i in out.indices() {
        let tile = shared([0.0f32; 16]);
        for k in lanes(0..4) {
            out[i] += 1.0;
        }
    }
}

fn main() {}
