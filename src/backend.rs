//! Choosing a backend: `auto` prefers a working Vulkan device and falls back to the CPU.

use std::sync::Arc;

use mpm_core::BackendRef;
use mpm_cpu::CpuBackend;
use mpm_vulkan::{VulkanBackend, VulkanOptions};

/// Which backend to run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Choice {
    /// Vulkan when a device works, else the CPU.
    Auto,
    Cpu,
    Vulkan,
}

impl std::str::FromStr for Choice {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Choice::Auto),
            "cpu" => Ok(Choice::Cpu),
            "vulkan" | "gpu" => Ok(Choice::Vulkan),
            other => Err(crate::Error::Usage(format!(
                "unknown backend `{other}`: use cpu, vulkan or auto"
            ))),
        }
    }
}

/// The CPU backend.
pub fn cpu() -> BackendRef {
    Arc::new(CpuBackend::new())
}

/// The Vulkan backend (device and switches from `MPM_VK_*` variables).
pub fn vulkan() -> mpm_core::Result<BackendRef> {
    Ok(Arc::new(VulkanBackend::new(VulkanOptions::from_env())?))
}

/// The backend `MPM_BACKEND` asks for (cpu, vulkan or auto; auto when unset).
pub fn auto() -> crate::Result<BackendRef> {
    let choice = match std::env::var("MPM_BACKEND") {
        Ok(v) => v.parse()?,
        Err(_) => Choice::Auto,
    };
    select(choice)
}

/// The backend for an explicit choice; `Auto` logs one line saying which and why.
pub fn select(choice: Choice) -> crate::Result<BackendRef> {
    match choice {
        Choice::Cpu => Ok(cpu()),
        // The error says what is missing (no device, no such device, ...).
        Choice::Vulkan => Ok(vulkan()?),
        Choice::Auto => match vulkan() {
            Ok(b) => {
                eprintln!(
                    "mpm: backend vulkan ({}): a Vulkan device works",
                    b.describe()
                );
                Ok(b)
            }
            Err(e) => {
                let b = cpu();
                eprintln!(
                    "mpm: backend {}: no usable Vulkan device ({e})",
                    b.describe()
                );
                Ok(b)
            }
        },
    }
}
