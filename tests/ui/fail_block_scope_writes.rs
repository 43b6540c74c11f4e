//! Outside `lanes` loops a block's statements run on every lane, so writes there are refused.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn tiled(counts: &mut Field<u32>, out: &mut Field<f32>, n: u32) {
    for b in blocks(0..n) {
        let tile = shared([0.0f32; 16]);
        out[b] = 1.0;
        tile[0] = 2.0;
        let old = atomic_add(counts, b, 1u32);
        for k in lanes(0..16) {
            out[b] += tile[k];
        }
    }
}

fn main() {}
