//! The particle order and the bins' starts of a binned loop are 1-D `Field<u32>`s.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn binned(order: &Field<i32>, starts: &Field<u32>, grid: &mut Field<f32, 2>) {
    for p in grid.bins(order, starts, 4) {
        grid[ivec2(0, 0)] += 1.0;
    }
}

fn main() {}
