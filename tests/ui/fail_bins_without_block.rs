//! A binned loop names the particle order, the bins' starts and the block size.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn binned(order: &Field<u32>, starts: &Field<u32>, grid: &mut Field<f32, 2>) {
    for p in grid.bins(order, starts) {
        grid[ivec2(0, 0)] += 1.0;
    }
}

fn main() {}
