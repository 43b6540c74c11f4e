//! The sparse passes around a launch: compaction of live leaf blocks for `active()` loops
//! and the maintenance passes (deactivation queue, block recycling) after the loops.

use std::sync::Arc;

use ash::vk;
use gpu_allocator::MemoryLocation;
use mpm_core::backend::{Buffer, TreeArg};
use mpm_core::layout::Structure;
use mpm_core::Result;

use crate::context::{backend_err, vk_err};
use crate::memory::GpuBuffer;
use crate::sparse;

use super::dispatch::{workgroups, LOCAL_SIZE};
use super::pipelines::{destroy_passes, PassPipelines};
use super::{downcast, whole, write_storage_bindings, Runtime};

/// Bytes between the deactivation dispatches of a launch in `Runtime::maint_dispatch`: the
/// largest `minStorageBufferOffsetAlignment` Vulkan allows, so any device can bind each one.
pub(super) const DISPATCH_STRIDE: u64 = 256;

/// What an `active()` loop over a sparse tree needs in one launch.
#[derive(Clone, Copy)]
pub(super) struct ActiveStep {
    pub(super) set: vk::DescriptorSet,
    pub(super) layout: vk::PipelineLayout,
    pub(super) pipelines: [vk::Pipeline; 2],
    /// The active-block buffer (its first words are the indirect dispatch).
    pub(super) buffer: vk::Buffer,
    /// Workgroups of the compaction pass (one invocation per leaf block).
    pub(super) groups: (u32, u32),
}

impl Runtime {
    /// For each tree of the launch that drives an `active()` loop: builds (or finds) its
    /// compaction pipelines and active-block buffer, and writes a descriptor set for them.
    pub(super) fn prepare_active(
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
                whole(downcast(&self.ctx, trees[t].structure(), qname)?.buffer),
                whole(buffer),
            ];
            // SAFETY: the set was just allocated and is not in use.
            unsafe { write_storage_bindings(&d, set, (0..).zip(&infos)) };
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

    pub(super) fn build_active(&mut self, plan: &Structure) -> Result<PassPipelines<2>> {
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
    pub(super) fn prepare_maintenance(
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
            let mut infos = vec![whole(
                downcast(&self.ctx, trees[t].structure(), qname)?.buffer,
            )];
            for (b, _) in &fields {
                infos.push(whole(downcast(&self.ctx, &**b, qname)?.buffer));
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
            // SAFETY: the set was just allocated and is not in use.
            unsafe { write_storage_bindings(&d, set, (0..).zip(&infos)) };
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

    pub(super) fn build_maintenance(
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
}

/// Words each tree of a launch gets in the tree-status read-back: its STATUS word, then each
/// pool's `counter` and `free_len` (adjacent in the structure) in level order.
pub(super) fn status_stride(trees: &[&dyn TreeArg]) -> usize {
    let pools = |t: &&dyn TreeArg| t.plan().levels.iter().filter(|p| p.pool.is_some()).count();
    1 + 2 * trees.iter().map(pools).max().unwrap_or(0)
}

/// One tree's maintenance in a launch.
pub(super) struct MaintStep {
    pub(super) tree: usize,
    /// The word offsets of each pool's counters (`PoolPlan::counter`), in level order.
    pub(super) counters: Vec<u32>,
    pub(super) set: vk::DescriptorSet,
    pub(super) layout: vk::PipelineLayout,
    pub(super) pipelines: [Option<vk::Pipeline>; 3],
    /// Where pass 0 writes the indirect dispatch of pass 1 (with pass 1).
    pub(super) dispatch: Option<(vk::Buffer, u64)>,
    /// Keeps the tree's field buffers alive until the launch has completed.
    pub(super) _fields: Vec<(Arc<dyn Buffer>, usize)>,
}

/// Records the maintenance passes of every tree after a kernel's loops (whose writes a barrier
/// already made visible), then copies each maintained tree's STATUS word and pool counters to
/// `status` (`stride` words per tree, see [`status_stride`]).
///
/// # Safety
/// All handles are live; `status` has `stride` words per tree of the launch.
pub(super) unsafe fn record_maintenance(
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
pub(super) unsafe fn record_compaction(d: &ash::Device, cmd: vk::CommandBuffer, a: &ActiveStep) {
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
