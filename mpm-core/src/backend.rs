//! The interface every execution backend implements.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::host::HostArgs;
use crate::ir;
use crate::layout::Structure;
use crate::sparse::PoolUse;

/// Which kind of backend this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Vulkan,
}

/// A backend-owned block of 32-bit words holding one field.
pub trait Buffer: Any + Send + Sync {
    fn words(&self) -> usize;
    fn as_any(&self) -> &dyn Any;
}

/// Static description of a kernel, emitted by `#[kernel]`.
#[derive(Clone, Copy)]
pub struct KernelDesc {
    pub name: &'static str,
    /// `module_path!()` of the kernel, which with `name` identifies it.
    pub module: &'static str,
    /// Names of the field parameters, for error messages.
    pub field_names: &'static [&'static str],
    /// Per top-level loop: its label (`'p2g: for ...` gives "p2g"), or "" when it has none.
    pub loop_names: &'static [&'static str],
    /// Builds the kernel IR (the GPU lowering).
    pub trace: fn() -> Result<ir::Kernel>,
    /// Runs the kernel natively (the CPU lowering).
    pub cpu: fn(&HostArgs<'_>),
}

impl KernelDesc {
    pub fn qualified_name(&self) -> String {
        format!("{}::{}", self.module, self.name)
    }

    /// What profiles call loop `index`: its label, else `#index`.
    pub fn loop_name(&self, index: usize) -> String {
        match self.loop_names.get(index) {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => format!("#{index}"),
        }
    }
}

/// A field as handed to a launch.
pub struct FieldArg<'a> {
    /// The field's buffer at the time of the call (a growing tree swaps its fields' buffers
    /// between launches).
    pub buffer: Arc<dyn Buffer>,
    pub shape: &'a [u32],
    /// The layout tree the field is placed on, as an index into [`LaunchArgs::trees`]
    /// (`None` for a plain dense field).
    pub tree: Option<usize>,
}

/// What a backend needs of a layout tree during a launch.
pub trait TreeArg: Send + Sync {
    fn plan(&self) -> &Structure;
    /// The structure words (see [`Structure`]).
    fn structure(&self) -> &dyn Buffer;
    /// Every field placed on the tree, with its words per element (for clearing
    /// deactivated cells in all of them).
    fn fields(&self) -> Vec<(Arc<dyn Buffer>, usize)>;
    /// Whether the tree is frozen (see `Tree::freeze`): launches activate nothing.
    fn frozen(&self) -> bool {
        false
    }
    /// Runs on the host after every launch that used the tree, whatever its outcome, with
    /// each level's pool use as the launch measured it (see [`LaunchReport::pools`]): the
    /// place to grow block pools before they run out.
    fn after_launch(&self, _pools: Option<&[PoolUse]>) -> Result<()> {
        Ok(())
    }
}

/// One parallel loop's index space: `count` invocations starting at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopRange {
    pub start: i64,
    pub count: u64,
}

/// Everything a backend needs to run one kernel call.
pub struct LaunchArgs<'a> {
    pub fields: Vec<FieldArg<'a>>,
    /// The layout trees the fields are placed on, each once.
    pub trees: Vec<Arc<dyn TreeArg>>,
    /// The scalar parameters, as words, in parameter order.
    pub scalars: &'a [u32],
    /// One range per top-level loop, in order.
    pub ranges: &'a [LoopRange],
    /// The top-level loops to run (all of them but for [`crate::kernel::only_loops`]); the
    /// others, and their `let`s, are skipped.
    pub loops: std::ops::Range<usize>,
}

/// What a launch hands back.
pub struct LaunchReport {
    /// Whether the kernel ran to completion.
    pub outcome: Result<()>,
    /// Each tree's pool use after the launch's maintenance, per [`LaunchArgs::trees`] (see
    /// [`crate::sparse::Sparse::pool_use`]); `None` where the launch measured none (it
    /// failed before the maintenance).
    pub pools: Vec<Option<Vec<PoolUse>>>,
}

/// Measured time of one parallel loop of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopTiming {
    pub kernel: String,
    pub loop_index: usize,
    /// The loop's label in the kernel, else `#<loop_index>` (see [`KernelDesc::loop_name`]).
    pub name: String,
    pub calls: u64,
    pub total: Duration,
}

/// Memory a backend holds on its device, outside the process's own memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Bytes allocated now.
    pub in_use: u64,
    /// The most bytes allocated at once since the backend was made.
    pub peak: u64,
}

/// An execution backend: owns field memory and runs kernels.
pub trait Backend: Send + Sync + 'static {
    fn kind(&self) -> BackendKind;
    /// Human-readable description (the device name for GPUs).
    fn describe(&self) -> String;
    /// Allocates a zero-filled buffer of `words` 32-bit words.
    fn alloc(&self, words: usize) -> Result<Arc<dyn Buffer>>;
    /// Writes `words` into the buffer from word `offset` on (an error past its end), so that
    /// appending to a field copies only what is new.
    fn write(&self, buffer: &dyn Buffer, offset: usize, words: &[u32]) -> Result<()>;
    fn read(&self, buffer: &dyn Buffer) -> Result<Vec<u32>>;
    /// Sets the buffer's first `words` words to zero (an error past its end).
    fn fill_zero(&self, buffer: &dyn Buffer, words: usize) -> Result<()>;
    /// Runs the kernel's loops in [`LaunchArgs::loops`] in order, each to completion before
    /// the next, then the trees' maintenance; returns when the results are visible to `read`
    /// (inside a batch, see [`batched`], a GPU backend may only record it).
    fn launch(&self, kernel: &KernelDesc, args: &LaunchArgs<'_>) -> LaunchReport;
    /// Opens a batch (see [`batched`]); batches nest, and only the outermost one's end waits.
    fn begin_batch(&self) {}
    /// Closes a batch: waits for what it deferred and reports the first failure among it.
    fn end_batch(&self) -> Result<()> {
        Ok(())
    }
    /// Accumulated per-loop times since the last reset (GPU timestamps on Vulkan).
    fn profile(&self) -> Vec<LoopTiming>;
    fn reset_profile(&self);
    /// Device-local memory of a GPU backend; `None` where fields live in the process's memory.
    fn device_memory(&self) -> Option<DeviceMemory> {
        None
    }
}

/// Shared handle to a backend.
pub type BackendRef = Arc<dyn Backend>;

/// Runs `f` as one batch of the backend's work: a GPU backend records the launches of
/// kernels that need no answer from the host (no sparse tree to maintain) into one command
/// buffer and submits them together when something waits for the device (a read or write,
/// a launch on a sparse tree, too many launches pending, or the batch's end), instead of a
/// submission and a wait per launch. On a discrete GPU that round trip is often longer than
/// a small kernel; on lavapipe it is about 0.05 ms of an empty launch's 0.15.
///
/// What a batched kernel reports (an out-of-bounds index, a write to an inactive cell)
/// comes back from the call that next waited for the device, or from the batch's end,
/// naming the kernel; that call does nothing else, and the kernels launched after the failed
/// one in the batch have run. A batch belongs to the thread that opened it: another thread's
/// launches meanwhile run at once, and its own batches do nothing. Where both `f`
/// and the batch's end fail, the batch's error is returned: it comes from a launch made
/// before `f` stopped. The CPU backend runs every launch at once and has nothing to defer.
pub fn batched<T, E: From<crate::Error>>(
    backend: &dyn Backend,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    /// Ends the batch also when `f` panics.
    struct Open<'a>(&'a dyn Backend, bool);
    impl Drop for Open<'_> {
        fn drop(&mut self) {
            if self.1 {
                let _ = self.0.end_batch();
            }
        }
    }
    backend.begin_batch();
    let mut open = Open(backend, true);
    let out = f();
    open.1 = false;
    let end = backend.end_batch();
    match (out, end) {
        (_, Err(e)) => Err(e.into()),
        (out, Ok(())) => out,
    }
}
