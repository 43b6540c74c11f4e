//! Buffers allocated with gpu-allocator: device-local field storage and host staging.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::{AllocationError, MemoryLocation};
use mpm_core::backend::Buffer;
use mpm_core::{Error, Result};

use crate::context::{backend_err, vk_err, Context};

/// A Vulkan buffer and its memory; frees itself on drop (it keeps the device alive).
pub(crate) struct GpuBuffer {
    pub ctx: Arc<Context>,
    pub buffer: vk::Buffer,
    allocation: Mutex<Option<Allocation>>,
    /// Size of the Vulkan buffer in bytes (at least 4).
    pub bytes: u64,
    /// Words as seen by the engine (may be 0).
    pub words: usize,
    /// Bytes of device-local memory this buffer holds (0 for staging buffers).
    device_bytes: u64,
}

impl GpuBuffer {
    /// Creates a buffer of `words` 32-bit words (a zero-word buffer gets 4 bytes of storage).
    pub fn new(
        ctx: &Arc<Context>,
        words: usize,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
        name: &str,
    ) -> Result<GpuBuffer> {
        let bytes = (words as u64).max(1) * 4;
        if usage.contains(vk::BufferUsageFlags::STORAGE_BUFFER)
            && bytes > ctx.caps.max_storage_buffer_range as u64
        {
            return Err(backend_err(format!(
                "a field of {words} words ({bytes} bytes) exceeds this device's maxStorageBufferRange of {} bytes \
                 ({}); use a smaller field or split it",
                ctx.caps.max_storage_buffer_range, ctx.info.name
            )));
        }
        let ci = vk::BufferCreateInfo::default()
            .size(bytes)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let device = &ctx.device;
        // SAFETY: valid device and create info.
        let buffer = unsafe { device.create_buffer(&ci, None) }.map_err(|r| match r {
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                Error::OutOfMemory {
                    requested: bytes,
                    context: format!("vkCreateBuffer `{name}`"),
                }
            }
            r => vk_err("vkCreateBuffer", r),
        })?;
        // SAFETY: `buffer` was just created from `device`.
        let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
        let alloc = {
            let mut guard = ctx
                .allocator
                .lock()
                .map_err(|_| backend_err("allocator lock poisoned"))?;
            match guard.as_mut() {
                Some(a) => a.allocate(&AllocationCreateDesc {
                    name,
                    requirements,
                    location,
                    linear: true,
                    allocation_scheme: AllocationScheme::GpuAllocatorManaged,
                }),
                None => Err(AllocationError::Internal(
                    "allocator already dropped".into(),
                )),
            }
        };
        let allocation = match alloc {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer is unused and unbound.
                unsafe { device.destroy_buffer(buffer, None) };
                return Err(match e {
                    AllocationError::OutOfMemory => Error::OutOfMemory {
                        requested: bytes,
                        context: format!("buffer `{name}` ({location:?})"),
                    },
                    e => backend_err(format!("allocating buffer `{name}` of {bytes} bytes: {e}")),
                });
            }
        };
        // SAFETY: the allocation satisfies the buffer's requirements and is not bound elsewhere.
        let bound =
            unsafe { device.bind_buffer_memory(buffer, allocation.memory(), allocation.offset()) };
        let device_bytes = if location == MemoryLocation::GpuOnly {
            allocation.size()
        } else {
            0
        };
        let now = ctx.device_bytes.fetch_add(device_bytes, Ordering::Relaxed) + device_bytes;
        ctx.device_peak.fetch_max(now, Ordering::Relaxed);
        let out = GpuBuffer {
            ctx: ctx.clone(),
            buffer,
            allocation: Mutex::new(Some(allocation)),
            bytes,
            words,
            device_bytes,
        };
        bound.map_err(|r| vk_err("vkBindBufferMemory", r))?;
        Ok(out)
    }

    /// Host-visible staging buffer.
    pub fn staging(ctx: &Arc<Context>, words: usize, upload: bool) -> Result<GpuBuffer> {
        let (usage, loc, name) = if upload {
            (
                vk::BufferUsageFlags::TRANSFER_SRC,
                MemoryLocation::CpuToGpu,
                "staging upload",
            )
        } else {
            (
                vk::BufferUsageFlags::TRANSFER_DST,
                MemoryLocation::GpuToCpu,
                "staging readback",
            )
        };
        GpuBuffer::new(ctx, words, usage, loc, name)
    }

    /// Runs `f` on the mapped bytes of a host-visible buffer.
    pub fn with_mapped<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let mut guard = self
            .allocation
            .lock()
            .map_err(|_| backend_err("allocation lock poisoned"))?;
        let slice = guard
            .as_mut()
            .and_then(|a| a.mapped_slice_mut())
            .ok_or_else(|| backend_err("buffer memory is not host-visible"))?;
        Ok(f(&mut slice[..self.bytes as usize]))
    }
}

impl Buffer for GpuBuffer {
    fn words(&self) -> usize {
        self.words
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        // SAFETY: every command buffer that used this buffer was waited on (the backend waits on
        // its fence after each submit), so the buffer is idle.
        unsafe { self.ctx.device.destroy_buffer(self.buffer, None) };
        self.ctx
            .device_bytes
            .fetch_sub(self.device_bytes, Ordering::Relaxed);
        if let (Ok(mut a), Ok(mut alloc)) = (self.ctx.allocator.lock(), self.allocation.lock()) {
            if let (Some(a), Some(m)) = (a.as_mut(), alloc.take()) {
                let _ = a.free(m);
            }
        }
    }
}
