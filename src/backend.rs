//! Choosing a backend: `auto` prefers a working Vulkan GPU and falls back to the CPU backend,
//! also when the only Vulkan device is itself a CPU implementation (lavapipe, SwiftShader),
//! which runs kernels slower than the native CPU backend.

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

/// The CPU backend on all cores; called from a program's main thread, that thread is one
/// of them (see [`CpuBackend::on_main_thread`]).
pub fn cpu() -> BackendRef {
    // Without a thread count the fallback is the global pool, which cannot fail.
    Arc::new(CpuBackend::on_main_thread(None).unwrap_or_default())
}

/// The Vulkan backend (device and switches from `MPM_VK_*` variables).
pub fn vulkan() -> mpm_core::Result<BackendRef> {
    Ok(Arc::new(VulkanBackend::new(VulkanOptions::from_env())?))
}

/// The backend `MPM_BACKEND` asks for (cpu, vulkan or auto; auto when unset).
pub fn auto() -> crate::Result<BackendRef> {
    select(choice(None)?)
}

/// A `--backend` flag's choice, or when it is absent `MPM_BACKEND`'s (auto when unset); an
/// unknown value is an error naming it.
pub fn choice(flag: Option<Choice>) -> crate::Result<Choice> {
    match (flag, std::env::var("MPM_BACKEND")) {
        (Some(c), _) => Ok(c),
        (None, Ok(v)) => v.parse(),
        (None, Err(_)) => Ok(Choice::Auto),
    }
}

/// The backend for an explicit choice; `Auto` logs one line saying which and why.
pub fn select(choice: Choice) -> crate::Result<BackendRef> {
    select_with(choice, VulkanOptions::from_env())
}

/// [`select`] with Vulkan options of the caller's (one device per MPI rank, say).
pub fn select_with(choice: Choice, options: VulkanOptions) -> crate::Result<BackendRef> {
    match choice {
        Choice::Cpu => Ok(cpu()),
        // The error says what is missing (no device, no such device, ...).
        Choice::Vulkan => Ok(Arc::new(VulkanBackend::new(options)?)),
        Choice::Auto => {
            let named = options.device.is_some();
            match VulkanBackend::new(options) {
                // The preferred device is a CPU one only when no GPU is there; a device named in
                // `MPM_VK_DEVICE` is taken as asked.
                Ok(vk) if vk.device_info().device_type == "cpu" && !named => {
                    let (b, name) = (cpu(), &vk.device_info().name);
                    eprintln!(
                        "mpm: backend {}: the only Vulkan device, {name}, runs on the CPU, \
                         slower than the CPU backend (--backend vulkan runs on it)",
                        b.describe(),
                    );
                    Ok(b)
                }
                Ok(vk) => {
                    let b: BackendRef = Arc::new(vk);
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
            }
        }
    }
}
