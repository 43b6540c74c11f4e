//! The Vulkan backend's exclusive state and how it runs kernels, split by job: transfers,
//! pipelines and their caches, launching (validation, sizing, recording, timestamps) and the
//! sparse passes around a launch. Every unsafe block carries its SAFETY note.

mod dispatch;
mod pipelines;
mod sparse_passes;
mod transfer;

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::ThreadId;

use ash::vk;
use gpu_allocator::MemoryLocation;
use mpm_core::abi;
use mpm_core::backend::{Buffer, LoopTiming};
use mpm_core::ir::Kernel;
use mpm_core::layout::Structure;
use mpm_core::{Error, KernelDesc, Result};

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

/// Launches a batch holds before it submits them (see `mpm_core::batched`); each has its own
/// word of the status buffer.
const BATCH_LAUNCHES: u32 = 64;

/// Timestamps a batch may write (two per loop of each launch).
const BATCH_QUERIES: u32 = 4096;

/// Storage-buffer descriptors of a batch's descriptor sets (a launch takes one per field,
/// plus the status word).
const BATCH_DESCRIPTORS: u32 = 2048;

/// A launch recorded into the open command buffer and not yet waited for.
struct Pending {
    desc: KernelDesc,
    name: String,
    /// The kernel's field names, for its status error.
    fields: Vec<String>,
    /// The loops that ran, and the first of the `2 * loops` timestamps of the launch.
    loops: Range<usize>,
    first_query: u32,
}

/// Work recorded into the command buffer and not yet submitted (see `mpm_core::batched`).
/// A batch belongs to the thread that opened it: another thread's launches run at once (after
/// the batch's, which they wait for) and its batches are no-ops, so that no thread gets
/// another's errors.
#[derive(Default)]
struct Batch {
    owner: Option<ThreadId>,
    /// Nesting depth of the owner's open batches.
    depth: u32,
    /// The command buffer has begun and holds commands.
    recording: bool,
    /// Launch `k` writes its status into word `k * status_stride` of the status buffer.
    launches: Vec<Pending>,
    /// The buffers the recorded launches use, kept alive until they have run.
    keep: Vec<Arc<dyn Buffer>>,
    /// Timestamps and descriptors the recorded launches take (a set each: one per launch).
    queries: u32,
    descriptors: u32,
    /// A failure of a batched launch found where its owner could not take it (`profile`,
    /// another thread's wait), for the owner's next call that can.
    failed: Option<Error>,
}

impl Batch {
    /// Whether the calling thread owns the open batch.
    fn mine(&self) -> bool {
        self.owner == Some(std::thread::current().id())
    }
}

/// Everything of the backend that needs exclusive access (command pool, caches, profile).
pub(crate) struct Runtime {
    ctx: Arc<Context>,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// One status word per launch of a batch, `status_stride` words apart.
    status: GpuBuffer,
    status_stride: usize,
    batch: Batch,
    /// Descriptor sets of a batch's launches, reset when it has run.
    batch_pool: vk::DescriptorPool,
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
        let status_stride = (ctx.caps.storage_offset_alignment / 4) as usize;
        let status = GpuBuffer::new(
            &ctx,
            status_stride * BATCH_LAUNCHES as usize,
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
            status_stride,
            batch: Batch::default(),
            batch_pool: vk::DescriptorPool::null(),
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

    /// Runs a batch's launches first (reporting their failure, if any, instead), then
    /// records commands with `record`, submits them and waits.
    pub fn one_shot(&mut self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<()> {
        self.flush()?;
        self.record(record)?;
        self.submit_and_wait()
    }

    /// Appends commands to the command buffer (beginning it if needed), then a barrier that
    /// makes their writes visible to whatever follows, in this submission or later, and to
    /// the host.
    fn record(&mut self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<()> {
        let d = &self.ctx.device;
        let cmd = self.cmd;
        // SAFETY: the command buffer is not pending (every submit is waited on), its pool
        // allows resets, and everything recorded refers to live objects, kept alive until
        // the submission has run (`Batch::keep`).
        unsafe {
            if !self.batch.recording {
                d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                    .map_err(|r| vk_err("vkResetCommandBuffer", r))?;
                d.begin_command_buffer(
                    cmd,
                    &vk::CommandBufferBeginInfo::default()
                        .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .map_err(|r| vk_err("vkBeginCommandBuffer", r))?;
                self.batch.recording = true;
            }
            record(d, cmd);
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
        }
        Ok(())
    }

    /// Submits what was recorded and waits for it.
    fn submit_and_wait(&mut self) -> Result<()> {
        if !self.batch.recording {
            return Ok(());
        }
        self.batch.recording = false;
        let d = &self.ctx.device;
        let cmd = self.cmd;
        // SAFETY: the command buffer is recording (begun by `record`); the fence is unsignalled
        // after its reset and waited on before anything reuses the buffer.
        unsafe {
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

    /// Opens a batch, or one more level of the calling thread's (see [`Batch`]).
    pub fn begin_batch(&mut self) {
        if !self.ctx.caps.batches {
            return;
        }
        let me = std::thread::current().id();
        if self.batch.owner.is_none() {
            self.batch.owner = Some(me);
        }
        if self.batch.owner == Some(me) {
            self.batch.depth += 1;
        }
    }

    /// Closes a level of the calling thread's batch; the outermost one submits what it
    /// deferred, waits and reports its first failure.
    pub fn end_batch(&mut self) -> Result<()> {
        if !self.batch.mine() {
            return Ok(());
        }
        self.batch.depth -= 1;
        if self.batch.depth > 0 {
            return Ok(());
        }
        let out = self.flush();
        self.batch.owner = None;
        out
    }

    /// Submits what was recorded and waits for it: the batch's launches' times go into the
    /// profile and the first of them that failed (or a failure kept from earlier) is
    /// reported, to the batch's thread only (another's call keeps it for the batch's).
    pub fn flush(&mut self) -> Result<()> {
        let found = self.flush_batch();
        match (found, self.batch.owner.is_some() && !self.batch.mine()) {
            (Err(e), true) => {
                self.batch.failed.get_or_insert(e);
                Ok(())
            }
            (found, _) => found,
        }
    }

    fn flush_batch(&mut self) -> Result<()> {
        let submitted = self.submit_and_wait();
        let launches = std::mem::take(&mut self.batch.launches);
        self.batch.keep.clear();
        self.batch.queries = 0;
        self.batch.descriptors = 0;
        if self.batch_pool != vk::DescriptorPool::null() {
            // SAFETY: no set of the pool is in use by a pending command buffer (just waited).
            unsafe {
                self.ctx
                    .device
                    .reset_descriptor_pool(self.batch_pool, vk::DescriptorPoolResetFlags::empty())
            }
            .map_err(|r| vk_err("vkResetDescriptorPool", r))?;
        }
        submitted?;
        for p in &launches {
            self.read_times(&p.desc, &p.name, p.loops.clone(), p.first_query)?;
        }
        let flags = self.take_status(launches.len())?;
        if let Some(e) = self.batch.failed.take() {
            return Err(e);
        }
        for (p, flag) in launches.iter().zip(flags) {
            let fields = &p.fields;
            abi::status_error(flag, p.name.clone(), |k| {
                fields.get(k).cloned().unwrap_or_default()
            })?;
        }
        Ok(())
    }

    /// The status words of the first `launches` launches of a submission (see [`Batch`]),
    /// cleared for the next.
    fn take_status(&self, launches: usize) -> Result<Vec<u32>> {
        let bytes = 4 * self.status_stride;
        self.status.with_mapped(|b| {
            let flags = (0..launches)
                .map(|k| {
                    let w = &b[k * bytes..k * bytes + 4];
                    u32::from_ne_bytes([w[0], w[1], w[2], w[3]])
                })
                .collect();
            b[..bytes * launches].fill(0);
            flags
        })
    }

    /// [`Self::flush`] where no caller takes its error: kept for the next call that can.
    pub fn flush_or_keep_error(&mut self) {
        if let Err(e) = self.flush() {
            self.batch.failed.get_or_insert(e);
        }
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
            d.destroy_descriptor_pool(self.batch_pool, None);
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
