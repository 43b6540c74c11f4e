//! A `lanes` loop cannot be left with `break`, does not nest and declares no shared arrays.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn tiled(out: &mut Field<f32>, n: u32) {
    for b in blocks(0..n) {
        for k in lanes(0..16) {
            if k > 3 {
                break;
            }
            for j in lanes(0..4) {
                out[b] += 1.0;
            }
            let tile = shared([0.0f32; 4]);
        }
    }
}

fn main() {}
