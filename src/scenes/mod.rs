//! Benchmark scenes reproduced from Taichi's examples.

pub mod blob;
pub mod mpm99;
