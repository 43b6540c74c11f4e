//! Benchmark scenes reproduced from Taichi's examples.

pub mod mpm99;
