//! The block size of a binned loop is computed before the launch, like a range's bounds.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn binned(order: &Field<u32>, starts: &Field<u32>, sizes: &Field<i32>, grid: &mut Field<f32, 2>) {
    for p in grid.bins(order, starts, sizes[0]) {
        grid[ivec2(0, 0)] += 1.0;
    }
}

fn main() {}
