//! Pipelines and their caches: tracing, GLSL and SPIR-V, pipeline layouts and descriptor
//! sets of kernels and of helper passes, and their destruction.

use std::collections::VecDeque;
use std::sync::Arc;

use ash::vk;
use mpm_core::ir::Kernel;
use mpm_core::layout::Structure;
use mpm_core::{KernelDesc, Result};

use crate::context::{backend_err, vk_err};
use crate::glsl::{self, GlslOptions};
use crate::CompiledShader;

use super::dispatch::LOCAL_SIZE;
use super::{storage_layout, Runtime};

/// The pipelines of one kernel specialised for one set of field shapes.
pub(super) struct KernelPipelines {
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) layout: vk::PipelineLayout,
    pub(super) pipelines: Vec<vk::Pipeline>,
    pub(super) pool: vk::DescriptorPool,
    pub(super) set: vk::DescriptorSet,
}

/// What a kernel's pipelines are specialised for: everything its GLSL prints as constants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct KernelKey {
    pub(super) name: String,
    pub(super) shapes: Vec<Vec<u32>>,
    /// Per field, the tree of the launch it is placed on.
    pub(super) field_trees: Vec<Option<u32>>,
    pub(super) plans: Vec<Structure>,
    pub(super) frozen: Vec<bool>,
    /// The values of the kernel's `#[specialize]` scalars, in their order.
    pub(super) specialized: Vec<u32>,
}

/// The pipelines of `N` helper passes over one tree plan: storage buffers at bindings
/// 0.., no push constants, and a pipeline per pass (`None` where the plan needs no pass).
///
/// * maintenance (see `sparse::maintenance_shaders`): pass 0 writes the indirect dispatch of
///   pass 1, which applies the deactivation queue; pass 2 recycles blocks;
/// * compaction (binding 0 the structure, binding 1 the active-block buffer): pass 0 lists
///   the live leaf blocks, pass 1 writes the indirect dispatch.
pub(super) struct PassPipelines<const N: usize> {
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) layout: vk::PipelineLayout,
    pub(super) pipelines: [Option<vk::Pipeline>; N],
}

/// How many specialisations each cache of device objects keeps (kernel pipelines per field
/// shapes and plans, sparse passes and active-block buffers per plan).
pub(super) const CACHED_PER_KIND: usize = 128;

/// How many of the most recent shaders `Runtime::compiled` keeps for inspection.
pub const COMPILED_KEPT: usize = 256;

/// Adds a shader to the inspection list, dropping the oldest beyond `COMPILED_KEPT`.
pub(super) fn keep_compiled(list: &mut VecDeque<CompiledShader>, shader: CompiledShader) {
    if list.len() == COMPILED_KEPT {
        list.pop_front();
    }
    list.push_back(shader);
}

impl Runtime {
    pub(super) fn traced(&mut self, desc: &KernelDesc, qname: &str) -> Result<Arc<Kernel>> {
        if let Some(k) = self.traced.get(qname) {
            return Ok(k.clone());
        }
        let k = Arc::new((desc.trace)()?);
        self.traced.insert(qname.to_string(), k.clone());
        Ok(k)
    }

    pub(super) fn build(&mut self, kernel: &Kernel, key: &KernelKey) -> Result<KernelPipelines> {
        let qname = key.name.as_str();
        let (field_trees, trees) = (&key.field_trees[..], &key.plans[..]);
        let caps = &self.ctx.caps;
        let push_words = glsl::push_words(kernel);
        if push_words * 4 > caps.max_push_constants_size {
            return Err(backend_err(format!(
                "kernel `{qname}` needs {} bytes of push constants; the device allows {}",
                push_words * 4,
                caps.max_push_constants_size
            )));
        }
        for l in 0..kernel.loops.len() {
            let bytes = glsl::shared_bytes(kernel, l);
            if bytes > caps.max_shared_memory as u64 {
                return Err(backend_err(format!(
                    "kernel `{qname}`, loop {l}: its shared arrays take {bytes} bytes; the device \
                     allows {} per block (use smaller tiles)",
                    caps.max_shared_memory
                )));
            }
        }
        let opts = GlslOptions {
            shapes: &key.shapes,
            specialized: &key.specialized,
            float_atomics: caps.float_atomic_add,
            shared_float_atomics: caps.shared_float_atomic_add,
            local_size: LOCAL_SIZE,
            field_trees,
            trees,
            frozen: &key.frozen,
            // `MPM_VK_NO_SUBGROUPS=1`: sparse activation without subgroup election (every
            // contender for an empty pointer slot takes a block), for comparison and debugging.
            subgroups: caps.subgroup_ballot && std::env::var_os("MPM_VK_NO_SUBGROUPS").is_none(),
            inf_nan_preserve: caps.inf_nan_preserve,
            aggregate_adds: caps.aggregate_adds,
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
        let mut bindings = vec![glsl::STATUS_BINDING];
        // A field's float view shares its binding (see `glsl`).
        bindings.extend((0..n).map(glsl::field_binding));
        for t in 0..trees.len() {
            bindings.push(glsl::tree_binding(t, n));
        }
        for t in glsl::active_trees(kernel, field_trees, trees) {
            bindings.push(glsl::active_binding(t, n, trees.len()));
        }
        if bindings.len() > caps.max_storage_buffers as usize {
            return Err(backend_err(format!(
                "kernel `{qname}` binds {} storage buffers (its {n} fields and its trees'); \
                 the device allows {} per shader: pass fewer fields",
                bindings.len(),
                caps.max_storage_buffers
            )));
        }
        let layout_bindings = storage_layout(bindings.iter().copied());
        let d = &self.ctx.device;
        let mut kp = KernelPipelines {
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipelines: Vec::new(),
            pool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
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

    /// Compiles (or finds in the caches) one helper pass and lists it among the compiled
    /// shaders.
    pub(super) fn helper_spirv(
        &mut self,
        name: &str,
        stem: &str,
        pass: usize,
        src: &str,
    ) -> Result<Vec<u32>> {
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
    pub(super) fn build_passes<const N: usize>(
        &self,
        bindings: u32,
        spirv: &[Option<Vec<u32>>; N],
    ) -> Result<PassPipelines<N>> {
        let layout_bindings = storage_layout(0..bindings);
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
}

pub(super) fn destroy_passes<const N: usize>(d: &ash::Device, pp: &PassPipelines<N>) {
    // SAFETY: as for `destroy_pipelines`.
    unsafe {
        for p in pp.pipelines.iter().flatten() {
            d.destroy_pipeline(*p, None);
        }
        d.destroy_pipeline_layout(pp.layout, None);
        d.destroy_descriptor_set_layout(pp.set_layout, None);
    }
}

pub(super) fn destroy_pipelines(d: &ash::Device, kp: &KernelPipelines) {
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

/// Creates a compute pipeline (entry point `main`) from SPIR-V words.
///
/// # Safety
/// `cache` and `layout` must be live objects of the device `d`; the caller destroys the
/// returned pipeline.
pub(super) unsafe fn compute_pipeline(
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
