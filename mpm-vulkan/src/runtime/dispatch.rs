//! Launching a kernel: argument checks, workgroup sizing (one split for every dispatch),
//! descriptor writes, recording every loop into one command buffer, timestamps, and reading
//! back the out-of-bounds and pool status.

use std::ops::Range;
use std::time::Duration;

use ash::vk;
use mpm_core::abi;
use mpm_core::backend::{LaunchArgs, LoopTiming, TreeArg};
use mpm_core::ir::LoopDomain;
use mpm_core::layout::Structure;
use mpm_core::sparse::PoolUse;
use mpm_core::{Error, KernelDesc, Result};

use crate::context::{backend_err, vk_err};
use crate::glsl::{self};
use crate::sparse;

use super::pipelines::{destroy_pipelines, KernelKey};
use super::sparse_passes::{record_compaction, record_maintenance, status_stride};
use super::{
    downcast, whole, write_storage_bindings, Pending, Runtime, BATCH_DESCRIPTORS, BATCH_LAUNCHES,
    BATCH_QUERIES,
};

/// The names of a kernel's fields in parameter order, for its errors.
fn field_names(desc: &KernelDesc, kernel: &mpm_core::ir::Kernel) -> Vec<String> {
    (0..kernel.fields.len())
        .map(|k| match desc.field_names.get(k) {
            Some(name) => name.to_string(),
            None => kernel.fields[k].name.clone(),
        })
        .collect()
}

/// Workgroup size of every generated shader.
pub const LOCAL_SIZE: u32 = 64;

/// Work groups for `invocations` threads of `LOCAL_SIZE`, spread over x and y when x alone
/// would exceed the device's limit; `None` when even that does not fit.
pub(super) fn workgroups(invocations: u32, max_count: [u32; 3]) -> Option<(u32, u32, u32)> {
    let groups = invocations.div_ceil(LOCAL_SIZE);
    let gx = groups.clamp(1, max_count[0]);
    let gy = groups.div_ceil(gx);
    (gy <= max_count[1]).then_some((groups, gx, gy))
}

impl Runtime {
    pub(super) fn ensure_queries(&mut self, count: u32) -> Result<()> {
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
        let frozen: Vec<bool> = trees.iter().map(|t| t.frozen()).collect();
        let pushed = glsl::push_scalar_words(&kernel, args.scalars);
        let offsets = abi::scalar_offsets(&kernel.scalars);
        let specialized = kernel
            .specialized
            .iter()
            .map(|&n| args.scalars[offsets[n as usize] as usize])
            .collect();
        let key = KernelKey {
            name: qname.clone(),
            shapes,
            field_trees,
            plans,
            frozen,
            specialized,
        };
        // A launch on a sparse tree needs the host after it (pool use, growth): it runs at
        // once, after what a batch deferred; so does one with more bindings than a batch
        // holds. The others join the open batch, if any (see `mpm_core::batched`).
        let bindings = 1 + bufs.len() as u32;
        let batched = self.batch.mine() && trees.is_empty() && bindings <= BATCH_DESCRIPTORS;
        if !batched {
            self.flush()?;
        }
        if !self.kernels.touch(&key) {
            // A new kernel may push an old one's pipelines out of the cache: none may be in
            // use by recorded commands.
            self.flush()?;
            let kp = self.build(&kernel, &key)?;
            if let Some(old) = self.kernels.insert(key.clone(), kp) {
                destroy_pipelines(&self.ctx.device, &old);
            }
        }
        let loop_trees = glsl::active_loop_trees(&kernel, &key.field_trees, &key.plans);
        let active_steps = self.prepare_active(&qname, &trees, &loop_trees)?;
        let kp = self
            .kernels
            .peek(&key)
            .ok_or_else(|| backend_err(format!("kernel `{qname}`: pipelines missing")))?;
        let (set, set_layout, layout, pipelines) =
            (kp.set, kp.set_layout, kp.layout, kp.pipelines.clone());
        let caps = self.ctx.caps.clone();
        let loops = pipelines.len() as u32;
        let ts = caps.timestamps;
        // Room in the batch for this launch: a status word, timestamps and descriptors.
        if batched {
            let queries_full = ts && self.batch.queries + 2 * loops > self.query_capacity;
            if self.batch.launches.len() as u32 == BATCH_LAUNCHES
                || (queries_full && !self.batch.launches.is_empty())
                || self.batch.descriptors + bindings > BATCH_DESCRIPTORS
            {
                self.flush()?;
            }
            if ts {
                self.ensure_queries(BATCH_QUERIES.max(2 * loops))?;
            }
        } else if ts {
            self.ensure_queries(2 * loops)?;
        }
        let slot = self.batch.launches.len();
        let first_query = self.batch.queries;
        let set = match batched {
            true => self.batch_set(set_layout, bindings)?,
            false => set,
        };
        let n = bufs.len();
        // Descriptor writes: the launch's own status word, then its fields and trees.
        let status = [vk::DescriptorBufferInfo {
            buffer: self.status.buffer,
            offset: (slot * self.status_stride * 4) as u64,
            range: 4,
        }];
        let mut infos: Vec<(u32, [vk::DescriptorBufferInfo; 1])> =
            vec![(glsl::STATUS_BINDING, status)];
        for (k, (b, _)) in bufs.iter().enumerate() {
            infos.push((glsl::field_binding(k), whole(*b)));
        }
        let mut tree_bufs = Vec::with_capacity(trees.len());
        for (t, tree) in trees.iter().enumerate() {
            let g = downcast(&self.ctx, tree.structure(), &qname)?;
            tree_bufs.push(g.buffer);
            infos.push((glsl::tree_binding(t, n), whole(g.buffer)));
        }
        for (t, step) in active_steps.iter().enumerate() {
            if let Some(step) = step {
                infos.push((glsl::active_binding(t, n, trees.len()), whole(step.buffer)));
            }
        }
        // SAFETY: the set is not in use by a pending command buffer: a kernel's own set only
        // serves launches that ran at once (waited on), a batch's sets are new.
        unsafe {
            write_storage_bindings(&self.ctx.device, set, infos.iter().map(|(b, i)| (*b, i)))
        };

        let mut dispatches = Vec::with_capacity(pipelines.len());
        for (l, r) in args.ranges.iter().enumerate() {
            if r.count > u32::MAX as u64 {
                return Err(bad(format!(
                    "loop {l} has {} invocations; at most {} are supported",
                    r.count,
                    u32::MAX
                )));
            }
            // A block loop runs one workgroup per block.
            let invocations = match kernel.loops[l].domain {
                LoopDomain::Blocks => r.count.saturating_mul(LOCAL_SIZE as u64),
                _ => r.count,
            };
            let fits = u32::try_from(invocations).ok();
            let Some((groups, gx, gy)) = fits.and_then(|n| workgroups(n, caps.max_workgroup_count))
            else {
                return Err(bad(format!(
                    "loop {l}: {} invocations exceed the device's dispatch limits",
                    r.count
                )));
            };
            let push = abi::push_constants(r, &pushed);
            // A loop outside the launch's window (`only_loops`) records nothing.
            let (groups, active) = match args.loops.contains(&l) {
                true => (groups, loop_trees[l].and_then(|t| active_steps[t])),
                false => (0, None),
            };
            dispatches.push((groups, gx, gy, push, active));
        }
        let maint = self.prepare_maintenance(&qname, &trees)?;
        let stride = status_stride(&trees);
        let status_buf = self.tree_status.as_ref().map(|b| (b.buffer, stride));
        let queries = self.queries;
        let record = |d: &ash::Device, cmd: vk::CommandBuffer| {
            // SAFETY: all handles are live objects of this device; the push constants match the
            // layout's range; the query pool has at least `first_query + 2 * loops` queries.
            unsafe {
                if ts {
                    d.cmd_reset_query_pool(cmd, queries, first_query, 2 * loops);
                }
                for (l, (groups, gx, gy, push, active)) in dispatches.iter().enumerate() {
                    if ts {
                        d.cmd_write_timestamp(
                            cmd,
                            vk::PipelineStageFlags::TOP_OF_PIPE,
                            queries,
                            first_query + 2 * l as u32,
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
                            first_query + 2 * l as u32 + 1,
                        );
                    }
                    // An empty loop (a launch's unused branch, say) dispatches nothing and
                    // needs no barrier: the loop before it ends with one.
                    if *groups == 0 && active.is_none() {
                        continue;
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
        if batched {
            self.record(record)?;
            self.batch.queries += if ts { 2 * loops } else { 0 };
            self.batch
                .keep
                .extend(args.fields.iter().map(|f| f.buffer.clone()));
            self.batch.launches.push(Pending {
                desc: *desc,
                name: qname,
                fields: field_names(desc, &kernel),
                loops: args.loops.clone(),
                first_query,
            });
            return Ok(());
        }
        self.one_shot(record)?;
        self.read_times(desc, &qname, args.loops.clone(), 0)?;

        // The launch ran alone: its status is the first word.
        let flag = self.take_status(1)?[0];
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
        let names = field_names(desc, &kernel);
        abi::status_error(flag, qname, |k| names.get(k).cloned().unwrap_or_default())
    }

    /// Adds the times of a launch's loops `loops`, from its timestamps from `first_query` on
    /// (two per loop of the kernel), to the profile.
    pub(super) fn read_times(
        &mut self,
        desc: &KernelDesc,
        qname: &str,
        loops: Range<usize>,
        first_query: u32,
    ) -> Result<()> {
        let caps = &self.ctx.caps;
        if !caps.timestamps || loops.is_empty() {
            for l in loops {
                self.record_time(desc, qname, l, Duration::ZERO);
            }
            return Ok(());
        }
        let mut stamps = vec![0u64; 2 * loops.end];
        // SAFETY: the queries of the launch's loops were written by a completed submission.
        unsafe {
            self.ctx.device.get_query_pool_results(
                self.queries,
                first_query,
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
        let period = caps.timestamp_period_ns as f64;
        for l in loops {
            let ticks = stamps[2 * l + 1].wrapping_sub(stamps[2 * l]) & mask;
            let t = Duration::from_nanos((ticks as f64 * period) as u64);
            self.record_time(desc, qname, l, t);
        }
        Ok(())
    }

    /// A descriptor set of `layout` for a launch of the batch, from the batch's pool (made at
    /// the first batched launch), of `bindings` descriptors.
    fn batch_set(
        &mut self,
        layout: vk::DescriptorSetLayout,
        bindings: u32,
    ) -> Result<vk::DescriptorSet> {
        let d = &self.ctx.device;
        if self.batch_pool == vk::DescriptorPool::null() {
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: BATCH_DESCRIPTORS,
            }];
            // SAFETY: valid device and create info.
            self.batch_pool = unsafe {
                d.create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(BATCH_LAUNCHES)
                        .pool_sizes(&sizes),
                    None,
                )
            }
            .map_err(|r| vk_err("vkCreateDescriptorPool", r))?;
        }
        let layouts = [layout];
        // SAFETY: the pool and layout are live; the batch keeps within the pool's sets and
        // descriptors (the caller submitted it before it would not).
        let set = unsafe {
            d.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(self.batch_pool)
                    .set_layouts(&layouts),
            )
        }
        .map_err(|r| vk_err("vkAllocateDescriptorSets", r))?[0];
        self.batch.descriptors += bindings;
        Ok(set)
    }

    pub(super) fn record_time(
        &mut self,
        desc: &KernelDesc,
        kernel: &str,
        loop_index: usize,
        t: Duration,
    ) {
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
                name: desc.loop_name(loop_index),
                calls: 1,
                total: t,
            }),
        }
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
