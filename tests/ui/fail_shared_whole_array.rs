//! A shared array is used element by element: no copies of it, no assignment to all of it,
//! and no component of an element as a place.
#![allow(unused_imports)]

use mpm::{kernel, Field};
use mpm::glam::Vec2;

#[kernel]
fn tiled(out: &mut Field<f32>, n: u32) {
    for b in blocks(0..n) {
        let tile = shared([Vec2::ZERO; 16]);
        for k in lanes(0..16) {
            let copy = tile;
            tile = [Vec2::ONE; 16];
            tile[k].x = 1.0;
            out[b] += copy[k].x;
        }
    }
}

fn main() {}
