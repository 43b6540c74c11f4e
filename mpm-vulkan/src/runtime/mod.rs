//! The Vulkan backend's exclusive state and how it runs kernels, split by job: transfers,
//! pipelines and their caches, launching (validation, sizing, recording, timestamps) and the
//! sparse passes around a launch. Every unsafe block carries its SAFETY note.

mod dispatch;
mod pipelines;
mod sparse_passes;
mod transfer;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use ash::vk;
use gpu_allocator::MemoryLocation;
use mpm_core::backend::{Buffer, LoopTiming};
use mpm_core::ir::Kernel;
use mpm_core::layout::Structure;
use mpm_core::{Error, Result};

use crate::cache::Lru;
use crate::compile::{load_pipeline_cache, pipeline_cache_path, save_pipeline_cache, ShaderCache};
use crate::context::{backend_err, vk_err, Context};
use crate::memory::GpuBuffer;
use crate::CompiledShader;

pub use dispatch::LOCAL_SIZE;
pub use pipelines::COMPILED_KEPT;
use pipelines::{
    destroy_passes, destroy_pipelines, KernelKey, KernelPipelines, PassPipelines, CACHED_PER_KIND,
};

/// Everything of the backend that needs exclusive access (command pool, caches, profile).
pub(crate) struct Runtime {
    ctx: Arc<Context>,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    status: GpuBuffer,
    queries: vk::QueryPool,
    query_capacity: u32,
    pipeline_cache: vk::PipelineCache,
    pipeline_cache_file: Option<PathBuf>,
    pub shaders: ShaderCache,
    traced: HashMap<String, Arc<Kernel>>,
    kernels: Lru<KernelKey, KernelPipelines>,
    maintenance: Lru<(Structure, Vec<usize>), PassPipelines<3>>,
    /// Compaction pipelines of `active()` loops, per tree plan.
    active_pipelines: Lru<Structure, PassPipelines<2>>,
    /// Active-block buffers, one per tree plan (the loops of a launch run one after another,
    /// so trees of the same plan share it).
    active_buffers: Lru<Structure, GpuBuffer>,
    /// Descriptor sets of the compaction passes, reset at every launch.
    active_pool: vk::DescriptorPool,
    active_pool_sets: u32,
    /// Descriptor sets of the maintenance passes, reset at every launch.
    maint_pool: vk::DescriptorPool,
    maint_pool_size: (u32, u32),
    /// The indirect dispatches of the deactivation passes of a launch, one per tree with a
    /// queue, `DISPATCH_STRIDE` bytes apart (written on the device from each queue's length).
    maint_dispatch: Option<GpuBuffer>,
    /// Host-visible copies of each tree's STATUS word after a launch.
    tree_status: Option<GpuBuffer>,
    pub profile: Vec<LoopTiming>,
    /// The most recent shaders built, at most `COMPILED_KEPT` (a long run builds new ones as
    /// sparse trees grow; keeping them all would grow without bound).
    pub compiled: VecDeque<CompiledShader>,
}

/// A descriptor for all of `buffer`.
fn whole(buffer: vk::Buffer) -> [vk::DescriptorBufferInfo; 1] {
    [vk::DescriptorBufferInfo {
        buffer,
        offset: 0,
        range: vk::WHOLE_SIZE,
    }]
}

/// Layout bindings of storage buffers for a compute stage, one per binding number.
fn storage_layout(
    bindings: impl IntoIterator<Item = u32>,
) -> Vec<vk::DescriptorSetLayoutBinding<'static>> {
    bindings
        .into_iter()
        .map(|b| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(b)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect()
}

/// Points storage-buffer bindings of `set` at buffers, `(binding, info)` each.
///
/// # Safety
/// `set` must be a live descriptor set that no pending command buffer uses.
unsafe fn write_storage_bindings<'a>(
    device: &ash::Device,
    set: vk::DescriptorSet,
    infos: impl IntoIterator<Item = (u32, &'a [vk::DescriptorBufferInfo; 1])>,
) {
    let writes: Vec<vk::WriteDescriptorSet> = infos
        .into_iter()
        .map(|(b, info)| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(b)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(info)
        })
        .collect();
    // SAFETY: the caller guarantees `set` is live and idle; the infos outlive the call.
    unsafe { device.update_descriptor_sets(&writes, &[]) };
}

fn downcast<'a>(ctx: &Arc<Context>, b: &'a dyn Buffer, kernel: &str) -> Result<&'a GpuBuffer> {
    match b.as_any().downcast_ref::<GpuBuffer>() {
        Some(g) if Arc::ptr_eq(&g.ctx, ctx) => Ok(g),
        _ => Err(Error::MixedBackends {
            kernel: kernel.into(),
        }),
    }
}

impl Runtime {
    pub fn new(ctx: Arc<Context>) -> Result<Runtime> {
        let d = &ctx.device;
        let pci = vk::CommandPoolCreateInfo::default()
            .queue_family_index(ctx.queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid device and create info.
        let pool = unsafe { d.create_command_pool(&pci, None) }
            .map_err(|r| vk_err("vkCreateCommandPool", r))?;
        // From here on, a failure drops `rt` which destroys what was made (null handles are ignored).
        let status = GpuBuffer::new(
            &ctx,
            1,
            vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuToCpu,
            "out-of-bounds status",
        );
        let status = match status {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: the pool is unused.
                unsafe { d.destroy_command_pool(pool, None) };
                return Err(e);
            }
        };
        let mut rt = Runtime {
            ctx: ctx.clone(),
            pool,
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            status,
            queries: vk::QueryPool::null(),
            query_capacity: 0,
            pipeline_cache: vk::PipelineCache::null(),
            pipeline_cache_file: pipeline_cache_path(&ctx.pipeline_cache_id),
            shaders: ShaderCache::new(format!(
                "float_atomics={};subgroup={};local_size={LOCAL_SIZE}",
                ctx.caps.float_atomic_add, ctx.caps.subgroup_size
            )),
            traced: HashMap::new(),
            kernels: Lru::new(CACHED_PER_KIND),
            maintenance: Lru::new(CACHED_PER_KIND),
            active_pipelines: Lru::new(CACHED_PER_KIND),
            active_buffers: Lru::new(CACHED_PER_KIND),
            active_pool: vk::DescriptorPool::null(),
            active_pool_sets: 0,
            maint_pool: vk::DescriptorPool::null(),
            maint_pool_size: (0, 0),
            maint_dispatch: None,
            tree_status: None,
            profile: Vec::new(),
            compiled: VecDeque::new(),
        };
        let ai = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: `pool` is a valid command pool of this device.
        rt.cmd = unsafe { d.allocate_command_buffers(&ai) }
            .map_err(|r| vk_err("vkAllocateCommandBuffers", r))?[0];
        // SAFETY: valid device.
        rt.fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(|r| vk_err("vkCreateFence", r))?;
        rt.status.with_mapped(|b| b.fill(0))?;
        let initial = rt
            .pipeline_cache_file
            .as_ref()
            .map(|p| load_pipeline_cache(p, &rt.ctx.pipeline_cache_id))
            .unwrap_or_default();
        let ci = vk::PipelineCacheCreateInfo::default().initial_data(&initial);
        // SAFETY: the initial data is only a hint: drivers validate its header and ignore foreign
        // data; on failure we retry without it.
        rt.pipeline_cache = match unsafe { d.create_pipeline_cache(&ci, None) } {
            Ok(c) => c,
            Err(_) => {
                // SAFETY: as above, with no initial data.
                unsafe { d.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None) }
                    .map_err(|r| vk_err("vkCreatePipelineCache", r))?
            }
        };
        Ok(rt)
    }

    /// Records commands with `record`, submits them and waits for completion.
    pub fn one_shot(&mut self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<()> {
        let d = &self.ctx.device;
        let cmd = self.cmd;
        // SAFETY: the command buffer is not pending (we always wait on the fence after a
        // submit), its pool allows resets, and everything recorded refers to live objects.
        unsafe {
            d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                .map_err(|r| vk_err("vkResetCommandBuffer", r))?;
            d.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(|r| vk_err("vkBeginCommandBuffer", r))?;
            record(d, cmd);
            // Make every write of this submission visible to later submissions and to the host.
            let barrier = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
                .dst_access_mask(
                    vk::AccessFlags::MEMORY_READ
                        | vk::AccessFlags::MEMORY_WRITE
                        | vk::AccessFlags::HOST_READ,
                );
            d.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::ALL_COMMANDS | vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[barrier],
                &[],
                &[],
            );
            d.end_command_buffer(cmd)
                .map_err(|r| vk_err("vkEndCommandBuffer", r))?;
            d.reset_fences(&[self.fence])
                .map_err(|r| vk_err("vkResetFences", r))?;
            let cmds = [cmd];
            let submit = vk::SubmitInfo::default().command_buffers(&cmds);
            {
                let queue = self
                    .ctx
                    .queue
                    .lock()
                    .map_err(|_| backend_err("queue lock poisoned"))?;
                d.queue_submit(*queue, &[submit], self.fence)
                    .map_err(|r| vk_err("vkQueueSubmit", r))?;
            }
            d.wait_for_fences(&[self.fence], true, u64::MAX)
                .map_err(|r| vk_err("vkWaitForFences", r))?;
        }
        Ok(())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let d = &self.ctx.device;
        // SAFETY: wait until the device is idle, then destroy objects in reverse creation order;
        // the context (device) outlives this because we hold an `Arc` to it.
        unsafe {
            let _ = d.device_wait_idle();
            for kp in self.kernels.drain() {
                destroy_pipelines(d, &kp);
            }
            for mp in self.maintenance.drain() {
                destroy_passes(d, &mp);
            }
            for ap in self.active_pipelines.drain() {
                destroy_passes(d, &ap);
            }
            self.active_buffers.drain().for_each(drop);
            d.destroy_descriptor_pool(self.active_pool, None);
            d.destroy_descriptor_pool(self.maint_pool, None);
            self.maint_dispatch = None;
            self.tree_status = None;
            if self.pipeline_cache != vk::PipelineCache::null() {
                if let (Some(path), Ok(data)) = (
                    &self.pipeline_cache_file,
                    d.get_pipeline_cache_data(self.pipeline_cache),
                ) {
                    save_pipeline_cache(path, &self.ctx.pipeline_cache_id, &data);
                }
                d.destroy_pipeline_cache(self.pipeline_cache, None);
            }
            d.destroy_query_pool(self.queries, None);
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}
