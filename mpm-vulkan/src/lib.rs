//! Vulkan backend of the mpm engine: kernel IR -> GLSL -> SPIR-V (shaderc), dispatched with ash.
//!
//! * [`context`]: instance, validation layer, device selection, logical device.
//! * [`memory`]: gpu-allocator buffers (fields, staging).
//! * [`glsl`]: the IR -> GLSL printer.
//! * [`compile`]: shaderc with in-memory and on-disk SPIR-V caches, pipeline-cache persistence.
//! * [`launch`]: pipelines, descriptor sets, command recording and submission.

mod cache;
mod compile;
mod context;
pub mod glsl;
mod memory;
mod runtime;
mod sparse;

use std::sync::{Arc, Mutex, MutexGuard};

use mpm_core::backend::{Buffer, DeviceMemory, LaunchArgs, LaunchReport, LoopTiming};
use mpm_core::{Backend, BackendKind, Error, KernelDesc, Result};

pub use compile::{cache_dir, CompileStats};
pub use context::{list_devices, named_device, preferred_device};
pub use runtime::{COMPILED_KEPT, LOCAL_SIZE};

use context::{backend_err, Context};
use runtime::Runtime;

/// How to create a [`VulkanBackend`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VulkanOptions {
    /// Device index or case-insensitive substring of its name; `None` picks the best device
    /// (discrete > integrated > virtual > CPU).
    pub device: Option<String>,
    /// Enable the Khronos validation layer (when installed) and collect its messages.
    pub validation: bool,
    /// Use `VK_EXT_shader_atomic_float` where the device supports it (else compare-and-swap).
    pub float_atomics: bool,
    /// Aggregate `+=` on float fields within subgroups where the device has subgroup
    /// arithmetic (see [`DeviceCaps::aggregate_adds`]). Off by default: on lavapipe, whose
    /// subgroup operations are loops over the lanes, it doubled mpm3d.toml's P2G.
    pub aggregate_adds: bool,
    /// Defer the launches of a batch (see [`mpm_core::batched`]) into one submission. Off,
    /// every launch is submitted and waited for, as outside a batch: a way to compare.
    pub batches: bool,
}

impl Default for VulkanOptions {
    fn default() -> Self {
        VulkanOptions {
            device: None,
            validation: false,
            float_atomics: true,
            aggregate_adds: false,
            batches: true,
        }
    }
}

impl VulkanOptions {
    /// `MPM_VK_DEVICE` (index or name substring), `MPM_VK_VALIDATION=1`,
    /// `MPM_VK_NO_FLOAT_ATOMICS=1` (forces the compare-and-swap fallback),
    /// `MPM_VK_AGGREGATE=1`, `MPM_VK_NO_BATCHES=1` (every launch waited for).
    pub fn from_env() -> Self {
        let flag = |k: &str| {
            std::env::var(k)
                .map(|v| v == "1" || v.eq_ignore_ascii_case("true"))
                .unwrap_or(false)
        };
        VulkanOptions {
            device: std::env::var("MPM_VK_DEVICE")
                .ok()
                .filter(|s| !s.trim().is_empty()),
            validation: flag("MPM_VK_VALIDATION"),
            float_atomics: !flag("MPM_VK_NO_FLOAT_ATOMICS"),
            aggregate_adds: flag("MPM_VK_AGGREGATE"),
            batches: !flag("MPM_VK_NO_BATCHES"),
        }
    }
}

/// Whether an error of [`VulkanBackend::new`] means that this machine has no Vulkan device at
/// all (no loader, no driver, no physical device), as opposed to a device that failed or an
/// `MPM_VK_DEVICE` that matched nothing.
pub fn no_device_at_all(e: &Error) -> bool {
    matches!(e, Error::NoDevice(_))
}

/// Whether `MPM_REQUIRE_GPU=1`: CI sets it, so that GPU checks fail instead of skipping.
pub fn gpu_required() -> bool {
    std::env::var("MPM_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Whether a test may skip its GPU part after this error: no device at all, and none
/// required.
pub fn may_skip(e: &Error) -> bool {
    no_device_at_all(e) && !gpu_required()
}

/// A Vulkan backend for test suites: `Ok(None)`, announced on stderr with `what` goes
/// unchecked, only where this machine has no Vulkan device at all and `MPM_REQUIRE_GPU` is
/// not `1`. Every other failure is an error, so that a broken driver (or no driver under
/// CI) fails the suite instead of letting it compare nothing.
pub fn backend_for_tests(options: VulkanOptions, what: &str) -> Result<Option<VulkanBackend>> {
    match VulkanBackend::new(options) {
        Ok(b) => Ok(Some(b)),
        Err(e) if may_skip(&e) => {
            eprintln!("SKIP: no Vulkan device, {what} not checked: {e}");
            Ok(None)
        }
        Err(e) if no_device_at_all(&e) => {
            Err(Error::NoDevice(format!("MPM_REQUIRE_GPU=1, but {e}")))
        }
        Err(e) => Err(e),
    }
}

/// Checks shaders with `spirv-val` against Vulkan 1.1's rules (for test suites). Returns how
/// many it checked; a shader that fails is an error naming its kernel and loop, with the
/// validator's message and the GLSL. Without the tool it checks nothing and says so on
/// stderr, unless `MPM_REQUIRE_GPU=1` (CI installs it), where that is an error too.
pub fn spirv_val(shaders: &[CompiledShader]) -> std::result::Result<usize, String> {
    use std::process::Command;
    if Command::new("spirv-val").arg("--version").output().is_err() {
        if gpu_required() {
            return Err("MPM_REQUIRE_GPU=1, but spirv-val is not installed".into());
        }
        eprintln!("note: spirv-val not found; SPIR-V not validated");
        return Ok(0);
    }
    // One folder per call: test threads validate at the same time.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mpm-spirv-val-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (i, s) in shaders.iter().enumerate() {
        let path = dir.join(format!("{i}.spv"));
        std::fs::write(&path, bytemuck::cast_slice::<u32, u8>(&s.spirv))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let out = Command::new("spirv-val")
            .args(["--target-env", "vulkan1.1"])
            .arg(&path)
            .output()
            .map_err(|e| format!("spirv-val: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "spirv-val failed for {} loop {}: {}\n{}",
                s.kernel,
                s.loop_index,
                String::from_utf8_lossy(&out.stderr),
                s.glsl
            ));
        }
    }
    // The files only matter while they are checked.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(shaders.len())
}

/// A Vulkan device as listed by [`list_devices`].
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    /// Index in the loader's enumeration order (what `MPM_VK_DEVICE=<n>` selects).
    pub index: usize,
    pub name: String,
    /// "discrete", "integrated", "virtual", "cpu" or "other".
    pub device_type: String,
    pub max_storage_buffer_range: u32,
    pub max_compute_work_group_count: [u32; 3],
    pub max_push_constants_size: u32,
    /// Bytes of workgroup-shared memory a compute shader may declare (a block loop's
    /// `shared` arrays).
    pub max_shared_memory: u32,
    /// Storage buffers one compute shader may bind (a kernel's fields, their float views and
    /// its trees'; 32 on lavapipe).
    pub max_storage_buffers: u32,
    pub subgroup_size: u32,
    /// The device supports `shaderBufferFloat32AtomicAdd`.
    pub float_atomic_add: bool,
    /// Shaders can ask the device to keep f32 infinities, NaNs and signed zeros
    /// (`shaderSignedZeroInfNanPreserveFloat32`); without it a driver may assume there are
    /// none, and NaN checks and saturating casts lose their meaning.
    pub inf_nan_preserve: bool,
}

/// What the selected device can do, as used by code generation and launches.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceCaps {
    /// f32 atomic add on storage buffers is enabled (supported and allowed).
    pub float_atomic_add: bool,
    /// f32 atomic add on workgroup memory is enabled (a block loop's `shared` arrays).
    pub shared_float_atomic_add: bool,
    /// Every shader runs in the `SignedZeroInfNanPreserve` float mode (see
    /// [`DeviceInfo::inf_nan_preserve`]).
    pub inf_nan_preserve: bool,
    pub subgroup_size: u32,
    /// Subgroup basic and ballot operations are supported in compute shaders (used to let one
    /// invocation per pointer slot allocate a block, instead of every contender).
    pub subgroup_ballot: bool,
    /// `+=` on float fields is aggregated (asked for in [`VulkanOptions::aggregate_adds`],
    /// and the device has subgroup arithmetic): the invocations of a subgroup that add into
    /// one element sum their shares, and one atomic per word adds the sum.
    pub aggregate_adds: bool,
    pub max_storage_buffer_range: u32,
    pub max_workgroup_count: [u32; 3],
    pub max_push_constants_size: u32,
    pub max_shared_memory: u32,
    pub max_storage_buffers: u32,
    /// Timestamps can be written on the compute queue.
    pub timestamps: bool,
    pub timestamp_valid_bits: u32,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period_ns: f32,
    /// Bytes a storage-buffer binding's offset is a multiple of (each launch of a batch
    /// binds its own word of the status buffer).
    pub storage_offset_alignment: u64,
    /// Launches inside a batch are deferred (asked for in [`VulkanOptions::batches`]).
    pub batches: bool,
}

/// One compiled shader (one parallel loop of a kernel), for inspection and tests.
#[derive(Clone, Debug)]
pub struct CompiledShader {
    pub kernel: String,
    pub loop_index: usize,
    pub glsl: String,
    pub spirv: Vec<u32>,
}

/// The Vulkan backend. Buffers it allocates keep the device alive, so they may outlive it.
pub struct VulkanBackend {
    ctx: Arc<Context>,
    rt: Mutex<Runtime>,
}

impl VulkanBackend {
    pub fn new(options: VulkanOptions) -> Result<Self> {
        let ctx = Arc::new(Context::new(&options)?);
        let rt = Runtime::new(ctx.clone())?;
        Ok(VulkanBackend {
            ctx,
            rt: Mutex::new(rt),
        })
    }

    /// The capabilities of the selected device.
    pub fn caps(&self) -> &DeviceCaps {
        &self.ctx.caps
    }

    /// The selected device.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.ctx.info
    }

    /// Whether the validation layer is active for this backend.
    pub fn validation_enabled(&self) -> bool {
        self.ctx.validation
    }

    /// Messages of severity WARNING or above reported by the validation layer of any backend
    /// in this process so far.
    pub fn validation_messages() -> Vec<String> {
        context::VALIDATION_MESSAGES
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// The shaders this backend compiled (or loaded from cache), oldest first: the most
    /// recent [`COMPILED_KEPT`].
    pub fn compiled_shaders(&self) -> Vec<CompiledShader> {
        self.lock()
            .map(|r| r.compiled.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Shader cache counters.
    pub fn compile_stats(&self) -> CompileStats {
        self.lock()
            .map(|r| r.shaders.stats.clone())
            .unwrap_or_default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, Runtime>> {
        self.rt
            .lock()
            .map_err(|_| backend_err("backend state lock poisoned by a panic"))
    }
}

impl Backend for VulkanBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Vulkan
    }

    fn describe(&self) -> String {
        format!(
            "Vulkan: {} ({})",
            self.ctx.info.name, self.ctx.info.device_type
        )
    }

    fn alloc(&self, words: usize) -> Result<Arc<dyn Buffer>> {
        Ok(Arc::new(self.lock()?.alloc(words)?))
    }

    fn write(&self, buffer: &dyn Buffer, offset: usize, words: &[u32]) -> Result<()> {
        self.lock()?.write(buffer, offset, words)
    }

    fn read(&self, buffer: &dyn Buffer) -> Result<Vec<u32>> {
        self.lock()?.read(buffer)
    }

    fn fill_zero(&self, buffer: &dyn Buffer, words: usize) -> Result<()> {
        self.lock()?.fill_zero(buffer, words)
    }

    fn launch(&self, kernel: &KernelDesc, args: &LaunchArgs<'_>) -> LaunchReport {
        let mut pools = vec![None; args.trees.len()];
        let outcome = self
            .lock()
            .and_then(|mut r| r.launch(kernel, args, &mut pools));
        LaunchReport { outcome, pools }
    }

    fn begin_batch(&self) {
        if let Ok(mut r) = self.lock() {
            r.begin_batch();
        }
    }

    fn end_batch(&self) -> Result<()> {
        self.lock()?.end_batch()
    }

    /// Waits for a batch's pending launches first, so that their times count (a failure
    /// among them is reported by the next call that can).
    fn profile(&self) -> Vec<LoopTiming> {
        self.lock()
            .map(|mut r| {
                r.flush_or_keep_error();
                r.profile.clone()
            })
            .unwrap_or_default()
    }

    fn reset_profile(&self) {
        if let Ok(mut r) = self.lock() {
            r.flush_or_keep_error();
            r.profile.clear();
        }
    }

    fn device_memory(&self) -> Option<DeviceMemory> {
        use std::sync::atomic::Ordering::Relaxed;
        Some(DeviceMemory {
            in_use: self.ctx.device_bytes.load(Relaxed),
            peak: self.ctx.device_peak.load(Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_device_counts_as_no_device() {
        let missing = Error::NoDevice("no Vulkan driver is installed".into());
        let unmatched = Error::DeviceNotFound {
            asked: "x".into(),
            available: "0: llvmpipe (cpu)".into(),
        };
        let lost = Error::DeviceLost("vkQueueSubmit".into());
        assert!(no_device_at_all(&missing));
        assert!(!no_device_at_all(&unmatched));
        assert!(!no_device_at_all(&lost));
    }
}
