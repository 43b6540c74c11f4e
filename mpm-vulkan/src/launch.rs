//! Pipelines, descriptor sets and command recording: one command buffer per launch.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ash::vk;
use gpu_allocator::MemoryLocation;
use mpm_core::abi;
use mpm_core::backend::{Buffer, LaunchArgs, LoopTiming, TreeArg};
use mpm_core::ir::Kernel;
use mpm_core::layout::Structure;
use mpm_core::sparse::PoolUse;
use mpm_core::{Error, KernelDesc, Result};

use crate::cache::Lru;
use crate::compile::{pipeline_cache_path, save_pipeline_cache, ShaderCache};
use crate::context::{backend_err, vk_err, Context};
use crate::glsl::{self, GlslOptions};
use crate::memory::GpuBuffer;
use crate::sparse;
use crate::CompiledShader;

/// Workgroup size of every generated shader.
pub const LOCAL_SIZE: u32 = 64;

/// The pipelines of one kernel specialised for one set of field shapes.
struct KernelPipelines {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipelines: Vec<vk::Pipeline>,
    pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    float_views: Vec<bool>,
}

/// Pipelines of a kernel are specialised for the field shapes and the layout trees.
type KernelKey = (String, Vec<Vec<u32>>, Vec<Option<u32>>, Vec<Structure>);

/// The pipelines of `N` helper passes over one tree plan: storage buffers at bindings
/// 0.., no push constants, and a pipeline per pass (`None` where the plan needs no pass).
///
/// * maintenance (see `sparse::maintenance_shaders`): pass 0 writes the indirect dispatch of
///   pass 1, which applies the deactivation queue; pass 2 recycles blocks;
/// * compaction (binding 0 the structure, binding 1 the active-block buffer): pass 0 lists
///   the live leaf blocks, pass 1 writes the indirect dispatch.
struct PassPipelines<const N: usize> {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipelines: [Option<vk::Pipeline>; N],
}

/// Bytes between the deactivation dispatches of a launch in `Runtime::maint_dispatch`: the
/// largest `minStorageBufferOffsetAlignment` Vulkan allows, so any device can bind each one.
const DISPATCH_STRIDE: u64 = 256;

/// What an `active()` loop over a sparse tree needs in one launch.
#[derive(Clone, Copy)]
struct ActiveStep {
    set: vk::DescriptorSet,
    layout: vk::PipelineLayout,
    pipelines: [vk::Pipeline; 2],
    /// The active-block buffer (its first words are the indirect dispatch).
    buffer: vk::Buffer,
    /// Workgroups of the compaction pass (one invocation per leaf block).
    groups: (u32, u32),
}

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

/// How many specialisations each cache of device objects keeps (kernel pipelines per field
/// shapes and plans, sparse passes and active-block buffers per plan).
const CACHED_PER_KIND: usize = 128;

/// How many of the most recent shaders `Runtime::compiled` keeps for inspection.
pub const COMPILED_KEPT: usize = 256;

/// Adds a shader to the inspection list, dropping the oldest beyond `COMPILED_KEPT`.
fn keep_compiled(list: &mut VecDeque<CompiledShader>, shader: CompiledShader) {
    if list.len() == COMPILED_KEPT {
        list.pop_front();
    }
    list.push_back(shader);
}

/// Work groups for `invocations` threads of `LOCAL_SIZE`, spread over x and y when x alone
/// would exceed the device's limit; `None` when even that does not fit.
fn workgroups(invocations: u32, max_count: [u32; 3]) -> Option<(u32, u32, u32)> {
    let groups = invocations.div_ceil(LOCAL_SIZE);
    let gx = groups.clamp(1, max_count[0]);
    let gy = groups.div_ceil(gx);
    (gy <= max_count[1]).then_some((groups, gx, gy))
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
            .and_then(|p| std::fs::read(p).ok())
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

    pub fn alloc(&mut self, words: usize) -> Result<GpuBuffer> {
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let buf = GpuBuffer::new(&self.ctx, words, usage, MemoryLocation::GpuOnly, "field")?;
        let (b, bytes) = (buf.buffer, buf.bytes);
        // SAFETY: `b` is a live buffer with TRANSFER_DST usage; size is a multiple of 4.
        self.one_shot(|d, cmd| unsafe { d.cmd_fill_buffer(cmd, b, 0, bytes, 0) })?;
        Ok(buf)
    }

    pub fn fill_zero(&mut self, buffer: &dyn Buffer, words: usize) -> Result<()> {
        let dst = downcast(&self.ctx, buffer, "fill")?;
        if words > dst.words {
            return Err(backend_err(format!(
                "zeroing {words} words of a buffer of {}",
                dst.words
            )));
        }
        if words == 0 {
            return Ok(());
        }
        let (b, bytes) = (dst.buffer, words as u64 * 4);
        // SAFETY: `b` is a live buffer with TRANSFER_DST usage; the size is a nonzero
        // multiple of 4 within it.
        self.one_shot(|d, cmd| unsafe { d.cmd_fill_buffer(cmd, b, 0, bytes, 0) })
    }

    pub fn write(&mut self, buffer: &dyn Buffer, words: &[u32]) -> Result<()> {
        let dst = downcast(&self.ctx, buffer, "write")?;
        if words.len() != dst.words {
            return Err(backend_err(format!(
                "write of {} words into a buffer of {} words",
                words.len(),
                dst.words
            )));
        }
        if words.is_empty() {
            return Ok(());
        }
        let staging = GpuBuffer::staging(&self.ctx, words.len(), true)?;
        staging
            .with_mapped(|b| b[..words.len() * 4].copy_from_slice(bytemuck::cast_slice(words)))?;
        let (src, dstb, size) = (staging.buffer, dst.buffer, words.len() as u64 * 4);
        // SAFETY: both buffers are live with the right usages and at least `size` bytes.
        self.one_shot(|d, cmd| unsafe {
            d.cmd_copy_buffer(
                cmd,
                src,
                dstb,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size,
                }],
            )
        })
    }

    pub fn read(&mut self, buffer: &dyn Buffer) -> Result<Vec<u32>> {
        let src = downcast(&self.ctx, buffer, "read")?;
        if src.words == 0 {
            return Ok(Vec::new());
        }
        let staging = GpuBuffer::staging(&self.ctx, src.words, false)?;
        let (s, dst, size) = (src.buffer, staging.buffer, src.words as u64 * 4);
        // SAFETY: both buffers are live with the right usages and at least `size` bytes.
        self.one_shot(|d, cmd| unsafe {
            d.cmd_copy_buffer(
                cmd,
                s,
                dst,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size,
                }],
            )
        })?;
        staging.with_mapped(|b| {
            b[..size as usize]
                .chunks_exact(4)
                .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
    }

    fn traced(&mut self, desc: &KernelDesc, qname: &str) -> Result<Arc<Kernel>> {
        if let Some(k) = self.traced.get(qname) {
            return Ok(k.clone());
        }
        let k = Arc::new((desc.trace)()?);
        self.traced.insert(qname.to_string(), k.clone());
        Ok(k)
    }

    fn build(
        &mut self,
        kernel: &Kernel,
        qname: &str,
        shapes: &[Vec<u32>],
        field_trees: &[Option<u32>],
        trees: &[Structure],
    ) -> Result<KernelPipelines> {
        let caps = &self.ctx.caps;
        let push_words = glsl::push_words(kernel);
        if push_words * 4 > caps.max_push_constants_size {
            return Err(backend_err(format!(
                "kernel `{qname}` needs {} bytes of push constants; the device allows {}",
                push_words * 4,
                caps.max_push_constants_size
            )));
        }
        let opts = GlslOptions {
            shapes,
            float_atomics: caps.float_atomic_add,
            local_size: LOCAL_SIZE,
            field_trees,
            trees,
            // `MPM_VK_NO_SUBGROUPS=1`: sparse activation without subgroup election (every
            // contender for an empty pointer slot takes a block), for comparison and debugging.
            subgroups: caps.subgroup_ballot && std::env::var_os("MPM_VK_NO_SUBGROUPS").is_none(),
        };
        let sources = glsl::generate(kernel, &opts)
            .map_err(|m| backend_err(format!("kernel `{qname}`: {m}")))?;
        let mut spirv = Vec::with_capacity(sources.len());
        for (l, src) in sources.iter().enumerate() {
            let words = self.shaders.spirv(
                qname,
                &format!("{}_loop{l}.comp", qname.replace("::", "_")),
                src,
            )?;
            keep_compiled(
                &mut self.compiled,
                CompiledShader {
                    kernel: qname.to_string(),
                    loop_index: l,
                    glsl: src.clone(),
                    spirv: words.clone(),
                },
            );
            spirv.push(words);
        }
        let n = kernel.fields.len();
        let float_views = glsl::float_views(kernel, caps.float_atomic_add);
        let mut bindings = vec![glsl::STATUS_BINDING];
        for (k, fv) in float_views.iter().enumerate() {
            bindings.push(glsl::field_binding(k));
            if *fv {
                bindings.push(glsl::float_binding(k, n));
            }
        }
        for t in 0..trees.len() {
            bindings.push(glsl::tree_binding(t, n));
        }
        let mut active: Vec<usize> = glsl::active_loop_trees(kernel, field_trees, trees)
            .into_iter()
            .flatten()
            .collect();
        active.sort_unstable();
        active.dedup();
        for t in active {
            bindings.push(glsl::active_binding(t, n, trees.len()));
        }
        let layout_bindings: Vec<vk::DescriptorSetLayoutBinding> = bindings
            .iter()
            .map(|&b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let d = &self.ctx.device;
        let mut kp = KernelPipelines {
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipelines: Vec::new(),
            pool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
            float_views,
        };
        let r = (|| -> Result<()> {
            // SAFETY: all create infos are valid and outlive the calls; handles created here are
            // stored in `kp` and destroyed by `destroy_pipelines` on failure or at drop.
            unsafe {
                kp.set_layout = d
                    .create_descriptor_set_layout(
                        &vk::DescriptorSetLayoutCreateInfo::default().bindings(&layout_bindings),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreateDescriptorSetLayout", r))?;
                let ranges = [vk::PushConstantRange::default()
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
                    .offset(0)
                    .size(push_words * 4)];
                let layouts = [kp.set_layout];
                kp.layout = d
                    .create_pipeline_layout(
                        &vk::PipelineLayoutCreateInfo::default()
                            .set_layouts(&layouts)
                            .push_constant_ranges(&ranges),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreatePipelineLayout", r))?;
                let sizes = [vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: bindings.len() as u32,
                }];
                kp.pool = d
                    .create_descriptor_pool(
                        &vk::DescriptorPoolCreateInfo::default()
                            .max_sets(1)
                            .pool_sizes(&sizes),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreateDescriptorPool", r))?;
                kp.set = d
                    .allocate_descriptor_sets(
                        &vk::DescriptorSetAllocateInfo::default()
                            .descriptor_pool(kp.pool)
                            .set_layouts(&layouts),
                    )
                    .map_err(|r| vk_err("vkAllocateDescriptorSets", r))?[0];
                for words in &spirv {
                    kp.pipelines
                        .push(compute_pipeline(d, self.pipeline_cache, kp.layout, words)?);
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(kp),
            Err(e) => {
                destroy_pipelines(d, &kp);
                Err(e)
            }
        }
    }

    fn ensure_queries(&mut self, count: u32) -> Result<()> {
        if count <= self.query_capacity {
            return Ok(());
        }
        let d = &self.ctx.device;
        let cap = count.next_power_of_two().max(16);
        // SAFETY: the old pool is idle (we waited on the last submit); the new create info is valid.
        unsafe {
            if self.queries != vk::QueryPool::null() {
                d.destroy_query_pool(self.queries, None);
                self.queries = vk::QueryPool::null();
                self.query_capacity = 0;
            }
            self.queries = d
                .create_query_pool(
                    &vk::QueryPoolCreateInfo::default()
                        .query_type(vk::QueryType::TIMESTAMP)
                        .query_count(cap),
                    None,
                )
                .map_err(|r| vk_err("vkCreateQueryPool", r))?;
        }
        self.query_capacity = cap;
        Ok(())
    }

    /// Runs a kernel; each maintained tree's pool use is left in `pool_use`.
    pub fn launch(
        &mut self,
        desc: &KernelDesc,
        args: &LaunchArgs<'_>,
        pool_use: &mut [Option<Vec<PoolUse>>],
    ) -> Result<()> {
        let qname = desc.qualified_name();
        let kernel = self.traced(desc, &qname)?;
        let bad = |m: String| backend_err(format!("kernel `{qname}`: {m}"));
        if args.fields.len() != kernel.fields.len() {
            return Err(bad(format!(
                "{} fields passed, {} expected",
                args.fields.len(),
                kernel.fields.len()
            )));
        }
        if args.ranges.len() != kernel.loops.len() {
            return Err(bad(format!(
                "{} loop ranges passed, {} expected",
                args.ranges.len(),
                kernel.loops.len()
            )));
        }
        let scalar_words = abi::scalar_words(&kernel.scalars);
        if args.scalars.len() != scalar_words as usize {
            return Err(bad(format!(
                "{} scalar words passed, {scalar_words} expected",
                args.scalars.len()
            )));
        }
        let trees: Vec<&dyn TreeArg> = args.trees.iter().map(|t| &**t).collect();
        let field_trees: Vec<Option<u32>> = args
            .fields
            .iter()
            .map(|f| f.tree.map(|t| t as u32))
            .collect();
        let plans: Vec<Structure> = trees.iter().map(|t| t.plan().clone()).collect();
        let mut bufs = Vec::with_capacity(args.fields.len());
        for (k, (fa, fp)) in args.fields.iter().zip(&kernel.fields).enumerate() {
            let g = downcast(&self.ctx, &*fa.buffer, &qname)?;
            let cells = match fa.tree {
                Some(t) => trees[t].plan().elements,
                None => fa.shape.iter().map(|&s| s as u64).product::<u64>(),
            };
            let need = cells * fp.elem.words() as u64;
            if (g.words as u64) < need || fa.shape.len() != fp.dims as usize {
                let name = desc.field_names.get(k).copied().unwrap_or("?");
                return Err(bad(format!(
                    "field `{name}` has shape {:?} ({} words) but the kernel expects {} dims of {:?}",
                    fa.shape, g.words, fp.dims, fp.elem
                )));
            }
            bufs.push((g.buffer, g.bytes));
        }
        let shapes: Vec<Vec<u32>> = args.fields.iter().map(|f| f.shape.to_vec()).collect();
        let key = (qname.clone(), shapes, field_trees, plans);
        if !self.kernels.touch(&key) {
            let kp = self.build(&kernel, &qname, &key.1, &key.2, &key.3)?;
            if let Some(old) = self.kernels.insert(key.clone(), kp) {
                destroy_pipelines(&self.ctx.device, &old);
            }
        }
        let loop_trees = glsl::active_loop_trees(&kernel, &key.2, &key.3);
        let active_steps = self.prepare_active(&qname, &trees, &loop_trees)?;
        let kp = self
            .kernels
            .peek(&key)
            .ok_or_else(|| backend_err(format!("kernel `{qname}`: pipelines missing")))?;
        let (set, layout, pipelines) = (kp.set, kp.layout, kp.pipelines.clone());
        let n = bufs.len();
        // Descriptor writes.
        let mut infos: Vec<(u32, [vk::DescriptorBufferInfo; 1])> = vec![(
            glsl::STATUS_BINDING,
            [vk::DescriptorBufferInfo {
                buffer: self.status.buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            }],
        )];
        for (k, (b, _)) in bufs.iter().enumerate() {
            let info = [vk::DescriptorBufferInfo {
                buffer: *b,
                offset: 0,
                range: vk::WHOLE_SIZE,
            }];
            infos.push((glsl::field_binding(k), info));
            if kp.float_views[k] {
                infos.push((glsl::float_binding(k, n), info));
            }
        }
        let mut tree_bufs = Vec::with_capacity(trees.len());
        for (t, tree) in trees.iter().enumerate() {
            let g = downcast(&self.ctx, tree.structure(), &qname)?;
            tree_bufs.push(g.buffer);
            infos.push((
                glsl::tree_binding(t, n),
                [vk::DescriptorBufferInfo {
                    buffer: g.buffer,
                    offset: 0,
                    range: vk::WHOLE_SIZE,
                }],
            ));
        }
        for (t, step) in active_steps.iter().enumerate() {
            if let Some(step) = step {
                infos.push((
                    glsl::active_binding(t, n, trees.len()),
                    [vk::DescriptorBufferInfo {
                        buffer: step.buffer,
                        offset: 0,
                        range: vk::WHOLE_SIZE,
                    }],
                ));
            }
        }
        let writes: Vec<vk::WriteDescriptorSet> = infos
            .iter()
            .map(|(b, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(*b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        // SAFETY: the set is not in use by a pending command buffer (every submit is waited on).
        unsafe { self.ctx.device.update_descriptor_sets(&writes, &[]) };

        let caps = self.ctx.caps.clone();
        let loops = pipelines.len() as u32;
        if caps.timestamps {
            self.ensure_queries(2 * loops)?;
        }
        let mut dispatches = Vec::with_capacity(pipelines.len());
        for (l, r) in args.ranges.iter().enumerate() {
            if r.count > u32::MAX as u64 {
                return Err(bad(format!(
                    "loop {l} has {} invocations; at most {} are supported",
                    r.count,
                    u32::MAX
                )));
            }
            let Some((groups, gx, gy)) = workgroups(r.count as u32, caps.max_workgroup_count)
            else {
                return Err(bad(format!(
                    "loop {l}: {} invocations exceed the device's dispatch limits",
                    r.count
                )));
            };
            let push = abi::push_constants(r, args.scalars);
            let active = loop_trees[l].and_then(|t| active_steps[t]);
            dispatches.push((groups, gx, gy, push, active));
        }
        let maint = self.prepare_maintenance(&qname, &trees)?;
        let stride = status_stride(&trees);
        let status_buf = self.tree_status.as_ref().map(|b| (b.buffer, stride));
        let queries = self.queries;
        let ts = caps.timestamps;
        let record = |d: &ash::Device, cmd: vk::CommandBuffer| {
            // SAFETY: all handles are live objects of this device; the push constants match the
            // layout's range; the query pool has at least 2 * loops queries.
            unsafe {
                if ts {
                    d.cmd_reset_query_pool(cmd, queries, 0, 2 * loops);
                }
                for (l, (groups, gx, gy, push, active)) in dispatches.iter().enumerate() {
                    if ts {
                        d.cmd_write_timestamp(
                            cmd,
                            vk::PipelineStageFlags::TOP_OF_PIPE,
                            queries,
                            2 * l as u32,
                        );
                    }
                    if let Some(a) = active {
                        record_compaction(d, cmd, a);
                    }
                    if *groups > 0 {
                        d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipelines[l]);
                        d.cmd_bind_descriptor_sets(
                            cmd,
                            vk::PipelineBindPoint::COMPUTE,
                            layout,
                            0,
                            &[set],
                            &[],
                        );
                        d.cmd_push_constants(
                            cmd,
                            layout,
                            vk::ShaderStageFlags::COMPUTE,
                            0,
                            bytemuck::cast_slice(push),
                        );
                        match active {
                            Some(a) => d.cmd_dispatch_indirect(cmd, a.buffer, 0),
                            None => d.cmd_dispatch(cmd, *gx, *gy, 1),
                        }
                    }
                    if ts {
                        d.cmd_write_timestamp(
                            cmd,
                            vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                            queries,
                            2 * l as u32 + 1,
                        );
                    }
                    let barrier = vk::MemoryBarrier::default()
                        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                        .dst_access_mask(
                            vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
                        );
                    d.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &[barrier],
                        &[],
                        &[],
                    );
                }
                record_maintenance(d, cmd, &maint, &tree_bufs, status_buf);
            }
        };
        self.one_shot(record)?;

        if ts && loops > 0 {
            let mut stamps = vec![0u64; 2 * loops as usize];
            // SAFETY: all 2 * loops queries were written by the completed submission.
            unsafe {
                self.ctx.device.get_query_pool_results(
                    queries,
                    0,
                    &mut stamps,
                    vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
                )
            }
            .map_err(|r| vk_err("vkGetQueryPoolResults", r))?;
            let mask = if caps.timestamp_valid_bits >= 64 {
                u64::MAX
            } else {
                (1u64 << caps.timestamp_valid_bits) - 1
            };
            for l in 0..loops as usize {
                let ticks = stamps[2 * l + 1].wrapping_sub(stamps[2 * l]) & mask;
                let t =
                    Duration::from_nanos((ticks as f64 * caps.timestamp_period_ns as f64) as u64);
                self.record_time(&qname, l, t);
            }
        } else {
            for l in 0..loops as usize {
                self.record_time(&qname, l, Duration::ZERO);
            }
        }

        let flag = self.status.with_mapped(|b| {
            let v = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            b[..4].fill(0);
            v
        })?;
        // Each maintained tree's pool use goes into the report (the tree may grow from it); a
        // pool that ran out is reported (like the CPU backend, before out-of-bounds indices) and the tree's
        // STATUS word reset.
        if let (Some(sb), true) = (&self.tree_status, !trees.is_empty()) {
            let words: Vec<u32> = sb.with_mapped(|b| {
                b[..4 * stride * trees.len()]
                    .chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            })?;
            let mut exhausted = None;
            for (t, record) in words.chunks_exact(stride).enumerate() {
                let plan = trees[t].plan();
                if !sparse::needs_maintenance(plan) {
                    continue;
                }
                let mut counters = record[1..].chunks_exact(2);
                let pools: Vec<PoolUse> = plan
                    .levels
                    .iter()
                    .map(|p| match &p.pool {
                        Some(pool) => counters.next().map_or(PoolUse::default(), |c| {
                            PoolUse::from_counters(pool.capacity, c[0], c[1])
                        }),
                        None => PoolUse::default(),
                    })
                    .collect();
                pool_use[t] = Some(pools);
                let level = record[0];
                if level == 0 {
                    continue;
                }
                let b = tree_bufs[t];
                // SAFETY: `b` is a live structure buffer with TRANSFER_DST usage.
                self.one_shot(|d, cmd| unsafe { d.cmd_fill_buffer(cmd, b, 0, 4, 0) })?;
                let capacity = trees[t]
                    .plan()
                    .levels
                    .get(level as usize - 1)
                    .and_then(|p| p.pool.as_ref())
                    .map_or(0, |p| p.capacity);
                exhausted.get_or_insert((level - 1, capacity));
            }
            if let Some((level, capacity)) = exhausted {
                return Err(Error::PoolExhausted {
                    kernel: qname,
                    level,
                    capacity,
                });
            }
        }
        if flag != 0 {
            let idx = flag as usize - 1;
            let field = desc
                .field_names
                .get(idx)
                .map(|s| s.to_string())
                .unwrap_or_else(|| {
                    kernel
                        .fields
                        .get(idx)
                        .map(|f| f.name.clone())
                        .unwrap_or_default()
                });
            return Err(Error::OutOfBounds {
                kernel: qname,
                field,
            });
        }
        Ok(())
    }

    /// For each tree of the launch that drives an `active()` loop: builds (or finds) its
    /// compaction pipelines and active-block buffer, and writes a descriptor set for them.
    fn prepare_active(
        &mut self,
        qname: &str,
        trees: &[&dyn TreeArg],
        loop_trees: &[Option<usize>],
    ) -> Result<Vec<Option<ActiveStep>>> {
        let mut out = vec![None; trees.len()];
        let wanted: Vec<usize> = (0..trees.len())
            .filter(|t| loop_trees.contains(&Some(*t)))
            .collect();
        if wanted.is_empty() {
            return Ok(out);
        }
        let d = self.ctx.device.clone();
        let sets = wanted.len() as u32;
        // SAFETY: no set of the pool is in use by a pending command buffer (every submit is
        // waited on).
        unsafe {
            if self.active_pool == vk::DescriptorPool::null() || self.active_pool_sets < sets {
                d.destroy_descriptor_pool(self.active_pool, None);
                self.active_pool = vk::DescriptorPool::null();
                let size = (sets * 2).max(8);
                let sizes = [vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: 2 * size,
                }];
                self.active_pool = d
                    .create_descriptor_pool(
                        &vk::DescriptorPoolCreateInfo::default()
                            .max_sets(size)
                            .pool_sizes(&sizes),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreateDescriptorPool", r))?;
                self.active_pool_sets = size;
            } else {
                d.reset_descriptor_pool(self.active_pool, vk::DescriptorPoolResetFlags::empty())
                    .map_err(|r| vk_err("vkResetDescriptorPool", r))?;
            }
        }
        let caps = self.ctx.caps.clone();
        for t in wanted {
            let plan = trees[t].plan();
            if !self.active_pipelines.touch(plan) {
                let ap = self.build_active(plan)?;
                if let Some(old) = self.active_pipelines.insert(plan.clone(), ap) {
                    destroy_passes(&self.ctx.device, &old);
                }
            }
            if !self.active_buffers.touch(plan) {
                let buf = GpuBuffer::new(
                    &self.ctx,
                    sparse::active_words(plan),
                    vk::BufferUsageFlags::STORAGE_BUFFER
                        | vk::BufferUsageFlags::INDIRECT_BUFFER
                        | vk::BufferUsageFlags::TRANSFER_DST,
                    MemoryLocation::GpuOnly,
                    "active blocks",
                )?;
                let (b, bytes) = (buf.buffer, buf.bytes);
                // SAFETY: `b` is a live buffer with TRANSFER_DST usage; size is a multiple of 4.
                self.one_shot(|d, cmd| unsafe { d.cmd_fill_buffer(cmd, b, 0, bytes, 0) })?;
                // An evicted buffer is freed when dropped here (no command is in flight).
                drop(self.active_buffers.insert(plan.clone(), buf));
            }
            let missing = || backend_err(format!("kernel `{qname}`: compaction state missing"));
            let ap = self.active_pipelines.peek(plan).ok_or_else(missing)?;
            let buffer = self.active_buffers.peek(plan).ok_or_else(missing)?.buffer;
            let layouts = [ap.set_layout];
            // SAFETY: the pool has room for every set of this launch.
            let set = unsafe {
                d.allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(self.active_pool)
                        .set_layouts(&layouts),
                )
            }
            .map_err(|r| vk_err("vkAllocateDescriptorSets", r))?[0];
            let infos = [
                [vk::DescriptorBufferInfo {
                    buffer: downcast(&self.ctx, trees[t].structure(), qname)?.buffer,
                    offset: 0,
                    range: vk::WHOLE_SIZE,
                }],
                [vk::DescriptorBufferInfo {
                    buffer,
                    offset: 0,
                    range: vk::WHOLE_SIZE,
                }],
            ];
            let writes: Vec<vk::WriteDescriptorSet> = infos
                .iter()
                .enumerate()
                .map(|(b, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            // SAFETY: the set was just allocated and is not in use.
            unsafe { d.update_descriptor_sets(&writes, &[]) };
            let blocks = sparse::leaf_blocks(plan);
            let Some((_, gx, gy)) = workgroups(blocks.max(1), caps.max_workgroup_count) else {
                return Err(backend_err(format!(
                    "kernel `{qname}`: {blocks} leaf blocks exceed the device's dispatch limits"
                )));
            };
            let [Some(list), Some(indirect)] = ap.pipelines else {
                return Err(backend_err(format!(
                    "kernel `{qname}`: compaction pipelines are missing"
                )));
            };
            out[t] = Some(ActiveStep {
                set,
                layout: ap.layout,
                pipelines: [list, indirect],
                buffer,
                groups: (gx, gy),
            });
        }
        Ok(out)
    }

    fn build_active(&mut self, plan: &Structure) -> Result<PassPipelines<2>> {
        let sources =
            sparse::compaction_shaders(plan, LOCAL_SIZE, self.ctx.caps.max_workgroup_count[0]);
        let name = "mpm_vulkan::active_blocks";
        let mut spirv = [None, None];
        for (pass, src) in sources.iter().enumerate() {
            spirv[pass] = Some(self.helper_spirv(name, "active_blocks", pass, src)?);
        }
        self.build_passes(2, &spirv)
    }

    /// Builds (or finds) the maintenance pipelines of the launch's trees, allocates and
    /// writes their descriptor sets, and makes room for the trees' STATUS words.
    fn prepare_maintenance(
        &mut self,
        qname: &str,
        trees: &[&dyn TreeArg],
    ) -> Result<Vec<MaintStep>> {
        let mut steps = Vec::new();
        let mut descriptors = 0u32;
        let mut wanted = Vec::new();
        for (t, tree) in trees.iter().enumerate() {
            let plan = tree.plan();
            if !sparse::needs_maintenance(plan) {
                continue;
            }
            let fields = tree.fields();
            let per_element: Vec<usize> = fields.iter().map(|(_, n)| *n).collect();
            let key = (plan.clone(), per_element);
            if !self.maintenance.touch(&key) {
                let mp = self.build_maintenance(&key.0, &key.1)?;
                if let Some(old) = self.maintenance.insert(key.clone(), mp) {
                    destroy_passes(&self.ctx.device, &old);
                }
            }
            descriptors += 1 + fields.len() as u32 + plan.deactivation.is_some() as u32;
            wanted.push((t, key, fields));
        }
        if wanted.is_empty() {
            return Ok(steps);
        }
        let d = self.ctx.device.clone();
        // Room for the indirect dispatch of each deactivation pass.
        let queues = wanted
            .iter()
            .filter(|(_, key, _)| key.0.deactivation.is_some())
            .count();
        let slot_words = (DISPATCH_STRIDE / 4) as usize;
        if self
            .maint_dispatch
            .as_ref()
            .is_none_or(|b| b.words / slot_words < queues)
        {
            self.maint_dispatch = None;
            self.maint_dispatch = Some(GpuBuffer::new(
                &self.ctx,
                slot_words * queues.next_power_of_two().max(8),
                vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::INDIRECT_BUFFER,
                MemoryLocation::GpuOnly,
                "deactivation dispatches",
            )?);
        }
        let dispatch_buffer = self
            .maint_dispatch
            .as_ref()
            .map_or(vk::Buffer::null(), |b| b.buffer);
        let mut slot = 0u64;
        // Read-back room for STATUS words and pool counters.
        let words = trees.len() * status_stride(trees);
        if self.tree_status.as_ref().is_none_or(|b| b.words < words) {
            self.tree_status = None;
            self.tree_status = Some(GpuBuffer::new(
                &self.ctx,
                words.next_power_of_two().max(8),
                vk::BufferUsageFlags::TRANSFER_DST,
                MemoryLocation::GpuToCpu,
                "tree status",
            )?);
        }
        // Descriptor sets: a pool reset at every launch (the last submit was waited on).
        let sets = wanted.len() as u32;
        let (have_sets, have_descs) = self.maint_pool_size;
        // SAFETY: no set of the pool is in use by a pending command buffer.
        unsafe {
            if self.maint_pool == vk::DescriptorPool::null()
                || have_sets < sets
                || have_descs < descriptors
            {
                d.destroy_descriptor_pool(self.maint_pool, None);
                self.maint_pool = vk::DescriptorPool::null();
                let size = (
                    (sets * 2).max(have_sets).max(8),
                    (descriptors * 2).max(have_descs).max(64),
                );
                let sizes = [vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: size.1,
                }];
                self.maint_pool = d
                    .create_descriptor_pool(
                        &vk::DescriptorPoolCreateInfo::default()
                            .max_sets(size.0)
                            .pool_sizes(&sizes),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreateDescriptorPool", r))?;
                self.maint_pool_size = size;
            } else {
                d.reset_descriptor_pool(self.maint_pool, vk::DescriptorPoolResetFlags::empty())
                    .map_err(|r| vk_err("vkResetDescriptorPool", r))?;
            }
        }
        let caps = self.ctx.caps.clone();
        for (t, key, fields) in wanted {
            let mp = self.maintenance.peek(&key).ok_or_else(|| {
                backend_err(format!("kernel `{qname}`: maintenance passes missing"))
            })?;
            let layouts = [mp.set_layout];
            // SAFETY: the pool has room for every set of this launch.
            let set = unsafe {
                d.allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(self.maint_pool)
                        .set_layouts(&layouts),
                )
            }
            .map_err(|r| vk_err("vkAllocateDescriptorSets", r))?[0];
            let mut infos = vec![[vk::DescriptorBufferInfo {
                buffer: downcast(&self.ctx, trees[t].structure(), qname)?.buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            }]];
            for (b, _) in &fields {
                infos.push([vk::DescriptorBufferInfo {
                    buffer: downcast(&self.ctx, &**b, qname)?.buffer,
                    offset: 0,
                    range: vk::WHOLE_SIZE,
                }]);
            }
            // The queue's pass (pass 1) and its dispatch come together.
            let dispatch = mp.pipelines[1].map(|_| {
                let offset = slot * DISPATCH_STRIDE;
                slot += 1;
                infos.push([vk::DescriptorBufferInfo {
                    buffer: dispatch_buffer,
                    offset,
                    range: 12,
                }]);
                (dispatch_buffer, offset)
            });
            let writes: Vec<vk::WriteDescriptorSet> = infos
                .iter()
                .enumerate()
                .map(|(b, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            // SAFETY: the set was just allocated and is not in use.
            unsafe { d.update_descriptor_sets(&writes, &[]) };
            // A full queue must fit the dispatch that pass 0 writes.
            let invocations = key.0.deactivation.as_ref().map_or(0, |q| q.capacity);
            if workgroups(invocations, caps.max_workgroup_count).is_none() {
                return Err(backend_err(format!(
                    "kernel `{qname}`: a deactivation queue of {invocations} cells exceeds the device's dispatch limits"
                )));
            }
            steps.push(MaintStep {
                tree: t,
                counters: trees[t]
                    .plan()
                    .levels
                    .iter()
                    .filter_map(|p| p.pool.as_ref().map(|pool| pool.counter))
                    .collect(),
                set,
                layout: mp.layout,
                pipelines: mp.pipelines,
                dispatch,
                _fields: fields,
            });
        }
        Ok(steps)
    }

    fn build_maintenance(
        &mut self,
        plan: &Structure,
        per_element: &[usize],
    ) -> Result<PassPipelines<3>> {
        let sources = sparse::maintenance_shaders(
            plan,
            per_element,
            LOCAL_SIZE,
            self.ctx.caps.max_workgroup_count[0],
        );
        let name = "mpm_vulkan::maintenance";
        let mut spirv = [None, None, None];
        for (pass, src) in sources.iter().enumerate() {
            let Some(src) = src else { continue };
            spirv[pass] = Some(self.helper_spirv(name, "maintenance", pass, src)?);
        }
        let dispatch = plan.deactivation.is_some() as u32;
        self.build_passes(per_element.len() as u32 + 1 + dispatch, &spirv)
    }

    /// Compiles (or finds in the caches) one helper pass and lists it among the compiled
    /// shaders.
    fn helper_spirv(&mut self, name: &str, stem: &str, pass: usize, src: &str) -> Result<Vec<u32>> {
        let words = self
            .shaders
            .spirv(name, &format!("{stem}_pass{pass}.comp"), src)?;
        keep_compiled(
            &mut self.compiled,
            CompiledShader {
                kernel: name.to_string(),
                loop_index: pass,
                glsl: src.to_string(),
                spirv: words.clone(),
            },
        );
        Ok(words)
    }

    /// Creates the pipelines of helper passes over `bindings` storage buffers.
    fn build_passes<const N: usize>(
        &self,
        bindings: u32,
        spirv: &[Option<Vec<u32>>; N],
    ) -> Result<PassPipelines<N>> {
        let layout_bindings: Vec<vk::DescriptorSetLayoutBinding> = (0..bindings)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let d = &self.ctx.device;
        let mut pp = PassPipelines {
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipelines: [None; N],
        };
        let r = (|| -> Result<()> {
            // SAFETY: valid create infos; the handles are stored in `pp` and destroyed by
            // `destroy_passes` on failure or at drop.
            unsafe {
                pp.set_layout = d
                    .create_descriptor_set_layout(
                        &vk::DescriptorSetLayoutCreateInfo::default().bindings(&layout_bindings),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreateDescriptorSetLayout", r))?;
                let layouts = [pp.set_layout];
                pp.layout = d
                    .create_pipeline_layout(
                        &vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreatePipelineLayout", r))?;
                for (pass, words) in spirv.iter().enumerate() {
                    let Some(words) = words else { continue };
                    pp.pipelines[pass] =
                        Some(compute_pipeline(d, self.pipeline_cache, pp.layout, words)?);
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(pp),
            Err(e) => {
                destroy_passes(d, &pp);
                Err(e)
            }
        }
    }

    fn record_time(&mut self, kernel: &str, loop_index: usize, t: Duration) {
        match self
            .profile
            .iter_mut()
            .find(|p| p.kernel == kernel && p.loop_index == loop_index)
        {
            Some(p) => {
                p.calls += 1;
                p.total += t;
            }
            None => self.profile.push(LoopTiming {
                kernel: kernel.into(),
                loop_index,
                calls: 1,
                total: t,
            }),
        }
    }
}

/// Words each tree of a launch gets in the tree-status read-back: its STATUS word, then each
/// pool's `counter` and `free_len` (adjacent in the structure) in level order.
fn status_stride(trees: &[&dyn TreeArg]) -> usize {
    let pools = |t: &&dyn TreeArg| t.plan().levels.iter().filter(|p| p.pool.is_some()).count();
    1 + 2 * trees.iter().map(pools).max().unwrap_or(0)
}

/// One tree's maintenance in a launch.
struct MaintStep {
    tree: usize,
    /// The word offsets of each pool's counters (`PoolPlan::counter`), in level order.
    counters: Vec<u32>,
    set: vk::DescriptorSet,
    layout: vk::PipelineLayout,
    pipelines: [Option<vk::Pipeline>; 3],
    /// Where pass 0 writes the indirect dispatch of pass 1 (with pass 1).
    dispatch: Option<(vk::Buffer, u64)>,
    /// Keeps the tree's field buffers alive until the launch has completed.
    _fields: Vec<(Arc<dyn Buffer>, usize)>,
}

/// Records the maintenance passes of every tree after a kernel's loops (whose writes a barrier
/// already made visible), then copies each maintained tree's STATUS word and pool counters to
/// `status` (`stride` words per tree, see [`status_stride`]).
///
/// # Safety
/// All handles are live; `status` has `stride` words per tree of the launch.
unsafe fn record_maintenance(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    steps: &[MaintStep],
    trees: &[vk::Buffer],
    status: Option<(vk::Buffer, usize)>,
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if steps.is_empty() {
            return;
        }
        let compute_barrier = |dst_stage, dst_access| {
            let barrier = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                .dst_access_mask(dst_access);
            d.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                dst_stage,
                vk::DependencyFlags::empty(),
                &[barrier],
                &[],
                &[],
            );
        };
        for pass in 0..3 {
            let mut any = false;
            for s in steps {
                let Some(p) = s.pipelines[pass] else { continue };
                any = true;
                d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, p);
                d.cmd_bind_descriptor_sets(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    s.layout,
                    0,
                    &[s.set],
                    &[],
                );
                match (pass, s.dispatch) {
                    (1, Some((buffer, offset))) => d.cmd_dispatch_indirect(cmd, buffer, offset),
                    _ => d.cmd_dispatch(cmd, 1, 1, 1),
                }
            }
            if !any {
                continue;
            }
            if pass == 0 {
                // Pass 1 reads its dispatch (and the queue, already visible).
                compute_barrier(
                    vk::PipelineStageFlags::DRAW_INDIRECT,
                    vk::AccessFlags::INDIRECT_COMMAND_READ,
                );
            } else {
                compute_barrier(
                    vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_READ
                        | vk::AccessFlags::SHADER_WRITE
                        | vk::AccessFlags::TRANSFER_READ,
                );
            }
        }
        if let Some((status, stride)) = status {
            for s in steps {
                let first = (stride * s.tree) as u64;
                let status_word = vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 4 * first,
                    size: 4,
                };
                let counters = s.counters.iter().enumerate().map(|(j, &w)| vk::BufferCopy {
                    src_offset: 4 * w as u64,
                    dst_offset: 4 * (first + 1 + 2 * j as u64),
                    size: 8,
                });
                let regions: Vec<vk::BufferCopy> =
                    std::iter::once(status_word).chain(counters).collect();
                d.cmd_copy_buffer(cmd, trees[s.tree], status, &regions);
            }
        }
    }
}

/// Records the compaction of a tree's live leaf blocks and the writing of the indirect
/// dispatch of the `active()` loop that follows (with the barriers up to that dispatch).
///
/// # Safety
/// All handles are live; earlier writes to the structure were made visible to compute shaders.
unsafe fn record_compaction(d: &ash::Device, cmd: vk::CommandBuffer, a: &ActiveStep) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let barrier = |dst_stage, dst_access| {
            let b = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                .dst_access_mask(dst_access);
            d.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                dst_stage,
                vk::DependencyFlags::empty(),
                &[b],
                &[],
                &[],
            );
        };
        d.cmd_bind_descriptor_sets(
            cmd,
            vk::PipelineBindPoint::COMPUTE,
            a.layout,
            0,
            &[a.set],
            &[],
        );
        d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, a.pipelines[0]);
        d.cmd_dispatch(cmd, a.groups.0, a.groups.1, 1);
        barrier(
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
        );
        d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, a.pipelines[1]);
        d.cmd_dispatch(cmd, 1, 1, 1);
        barrier(
            vk::PipelineStageFlags::DRAW_INDIRECT | vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::AccessFlags::INDIRECT_COMMAND_READ | vk::AccessFlags::SHADER_READ,
        );
    }
}

fn destroy_passes<const N: usize>(d: &ash::Device, pp: &PassPipelines<N>) {
    // SAFETY: as for `destroy_pipelines`.
    unsafe {
        for p in pp.pipelines.iter().flatten() {
            d.destroy_pipeline(*p, None);
        }
        d.destroy_pipeline_layout(pp.layout, None);
        d.destroy_descriptor_set_layout(pp.set_layout, None);
    }
}

fn destroy_pipelines(d: &ash::Device, kp: &KernelPipelines) {
    // SAFETY: the device is idle with respect to these objects (callers wait first); null
    // handles are ignored by Vulkan.
    unsafe {
        for p in &kp.pipelines {
            d.destroy_pipeline(*p, None);
        }
        d.destroy_descriptor_pool(kp.pool, None);
        d.destroy_pipeline_layout(kp.layout, None);
        d.destroy_descriptor_set_layout(kp.set_layout, None);
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
                    save_pipeline_cache(path, &data);
                }
                d.destroy_pipeline_cache(self.pipeline_cache, None);
            }
            d.destroy_query_pool(self.queries, None);
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}

/// Creates a compute pipeline (entry point `main`) from SPIR-V words.
///
/// # Safety
/// `cache` and `layout` must be live objects of the device `d`; the caller destroys the
/// returned pipeline.
unsafe fn compute_pipeline(
    d: &ash::Device,
    cache: vk::PipelineCache,
    layout: vk::PipelineLayout,
    words: &[u32],
) -> Result<vk::Pipeline> {
    // SAFETY: a valid create info over SPIR-V validated by shaderc; the module is destroyed
    // right after pipeline creation, which keeps no reference to it.
    unsafe {
        let module = d
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
            .map_err(|r| vk_err("vkCreateShaderModule", r))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let ci = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout)];
        let p = d.create_compute_pipelines(cache, &ci, None);
        d.destroy_shader_module(module, None);
        let p = p.map_err(|(_, r)| vk_err("vkCreateComputePipelines", r))?;
        Ok(p[0])
    }
}

#[cfg(test)]
mod tests {
    use super::{workgroups, LOCAL_SIZE};

    #[test]
    fn workgroups_spill_into_y_and_refuse_what_does_not_fit() {
        let max = [65535, 65535, 65535];
        assert_eq!(workgroups(0, max), Some((0, 1, 0)));
        assert_eq!(workgroups(1, max), Some((1, 1, 1)));
        let n = LOCAL_SIZE * 70_000;
        assert_eq!(workgroups(n, max), Some((70_000, 65535, 2)));
        assert_eq!(workgroups(n, [1000, 10, 1]), None);
    }
}
