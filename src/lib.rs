//! mpm: a Material Point Method engine whose kernels are written once in Rust and run on the
//! CPU (rayon) and on Vulkan GPUs.
//!
//! This facade re-exports the engine's pieces and holds what programs share: backend choice,
//! the benchmark scenes, PNG rendering and the command-line front of the examples. The `mpm`
//! program's subcommands and live window need the default feature `program`.

pub use error::{Error, Result};
pub use mpm_core::{
    self as core, func, glam, kernel, only_loops, Backend, BackendKind, BackendRef, Field, Layout,
    Memory, Tree,
};
pub use mpm_cpu::CpuBackend;
pub use mpm_vulkan::{VulkanBackend, VulkanOptions};

pub mod backend;
pub mod checkpoint;
pub mod cli;
#[cfg(feature = "program")]
pub mod commands;
pub mod demos;
pub mod error;
pub mod files;
pub mod mesh;
pub mod output;
pub mod peers;
#[cfg(feature = "mpi")]
pub mod ranks;
pub mod render;
pub mod scene_file;
pub mod usage;

/// The README's Rust examples, compiled and run as doc tests so that it cannot drift from
/// the engine.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;
#[cfg(feature = "program")]
pub mod view;
