//! Errors of the engine's runtime layers.

/// What can go wrong while creating fields and running kernels.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kernel `{kernel}`: index out of bounds on field `{field}` (the write was not done, reads gave zero)")]
    OutOfBounds { kernel: String, field: String },
    #[error(
        "kernel `{kernel}`: a write into an inactive cell of field `{field}`, whose tree is \
         frozen (the write was not done): activate the cells' blocks before `Tree::freeze`, \
         or thaw the tree"
    )]
    InactiveWrite { kernel: String, field: String },
    #[error("kernel `{kernel}` has no loop labelled `{label}` (its loops: {loops})")]
    NoSuchLoop {
        kernel: String,
        label: String,
        loops: String,
    },
    #[error(
        "kernel `{kernel}`: loop `{last}` comes before `{first}`, so `only_loops` would run none"
    )]
    LoopsReversed {
        kernel: String,
        first: String,
        last: String,
    },
    #[error("kernel `{kernel}`: its fields live on different backends")]
    MixedBackends { kernel: String },
    #[error("data of {got} elements does not fit field of shape {shape:?} ({expected} elements)")]
    SizeMismatch {
        expected: usize,
        got: usize,
        shape: Vec<u32>,
    },
    #[error("kernel `{kernel}` could not be traced: {message}")]
    Trace { kernel: String, message: String },
    /// This machine has no usable Vulkan device: no loader, no driver or no device with a
    /// compute queue.
    #[error("no Vulkan device: {0}")]
    NoDevice(String),
    /// Devices exist, but none matches the one asked for.
    #[error(
        "MPM_VK_DEVICE=`{asked}` matches no Vulkan device (by index or name); available: {available}"
    )]
    DeviceNotFound { asked: String, available: String },
    #[error("invalid layout: {0}")]
    Layout(String),
    #[error(
        "kernel `{kernel}`: the block pool below level {level} of a sparse layout ran out \
         ({capacity} blocks), so some of its writes were not made; the pool has grown for the \
         next launch: repeat the step from a consistent state, or reserve enough up front \
         with `Layout::reserve` or `Tree::reserve`"
    )]
    PoolExhausted {
        kernel: String,
        level: u32,
        capacity: u32,
    },
    #[error("{backend} backend does not support {what}")]
    Unsupported { backend: &'static str, what: String },
    #[error("out of device memory: {requested} bytes requested ({context})")]
    OutOfMemory { requested: u64, context: String },
    #[error("the device was lost: {0}")]
    DeviceLost(String),
    #[error("shader compilation failed for kernel `{kernel}`: {message}")]
    ShaderCompile { kernel: String, message: String },
    #[error("{backend} backend: {message}")]
    Backend {
        backend: &'static str,
        message: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
