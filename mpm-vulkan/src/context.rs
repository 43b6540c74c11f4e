//! Vulkan instance, optional validation layer, device selection and the logical device.

use std::ffi::{c_void, CStr};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use ash::{ext, khr, vk};
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};
use mpm_core::{Error, Result};

use crate::{DeviceCaps, DeviceInfo, VulkanOptions};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Messages of severity WARNING or above reported by any debug messenger of this process.
pub(crate) static VALIDATION_MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Maps a Vulkan error to the engine's error type.
pub(crate) fn vk_err(what: &str, r: vk::Result) -> Error {
    match r {
        vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost(format!("{what}: {r}")),
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            Error::OutOfMemory {
                requested: 0,
                context: format!("{what}: {r}"),
            }
        }
        _ => backend_err(format!("{what} failed: {r}")),
    }
}

pub(crate) fn backend_err(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: "vulkan",
        message: message.into(),
    }
}

unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the loader passes a valid callback-data pointer (or null) whose message is a
    // NUL-terminated string (or null), both valid for the duration of the call.
    let msg = unsafe { data.as_ref().and_then(|d| d.message_as_c_str()) }
        .map(|m| m.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Ok(mut v) = VALIDATION_MESSAGES.lock() {
        v.push(format!("{severity:?}: {msg}"));
    }
    vk::FALSE
}

fn type_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
        vk::PhysicalDeviceType::CPU => "cpu",
        _ => "other",
    }
}

/// A physical device with a compute queue, as found during enumeration.
struct Candidate {
    physical: vk::PhysicalDevice,
    queue_family: u32,
    info: DeviceInfo,
    has_atomic_float_ext: bool,
    float_add_feature: bool,
    shared_float_add_feature: bool,
    /// `VK_KHR_shader_float_controls` is supported and keeps f32 infinities, NaNs and signed
    /// zeros through arithmetic (`shaderSignedZeroInfNanPreserveFloat32`).
    inf_nan_preserve: bool,
    timestamp_valid_bits: u32,
    subgroup_ballot: bool,
    subgroup_arithmetic: bool,
    pipeline_cache_uuid: [u8; 16],
    vendor_id: u32,
    device_id: u32,
}

fn load_entry() -> Result<ash::Entry> {
    // SAFETY: loading the system Vulkan loader library; its initialisation has no preconditions.
    unsafe { ash::Entry::load() }
        .map_err(|e| Error::NoDevice(format!("no Vulkan loader could be loaded ({e})")))
}

fn create_instance(entry: &ash::Entry, validation: bool) -> Result<(ash::Instance, bool)> {
    // SAFETY: plain enumeration calls on a loaded entry.
    let layers = unsafe { entry.enumerate_instance_layer_properties() }.unwrap_or_default();
    let has_layer = layers
        .iter()
        .any(|l| l.layer_name_as_c_str().ok() == Some(VALIDATION_LAYER));
    // SAFETY: as above.
    let exts = unsafe { entry.enumerate_instance_extension_properties(None) }.unwrap_or_default();
    let has_debug_utils = exts
        .iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(ext::debug_utils::NAME));
    let use_validation = validation && has_layer && has_debug_utils;
    let app = vk::ApplicationInfo::default()
        .application_name(c"mpm")
        .engine_name(c"mpm")
        .api_version(vk::API_VERSION_1_1);
    let layer_names = [VALIDATION_LAYER.as_ptr()];
    let ext_names = [ext::debug_utils::NAME.as_ptr()];
    let mut ci = vk::InstanceCreateInfo::default().application_info(&app);
    if use_validation {
        ci = ci
            .enabled_layer_names(&layer_names)
            .enabled_extension_names(&ext_names);
    }
    // SAFETY: the create info and the arrays it points to live until the call returns.
    let instance = unsafe { entry.create_instance(&ci, None) }.map_err(|r| match r {
        vk::Result::ERROR_INCOMPATIBLE_DRIVER => {
            Error::NoDevice("no Vulkan driver is installed".into())
        }
        r => vk_err("vkCreateInstance", r),
    })?;
    Ok((instance, use_validation))
}

fn candidates(instance: &ash::Instance) -> Result<Vec<Candidate>> {
    // SAFETY: `instance` is a valid instance; all queries below only read device properties.
    let physicals = unsafe { instance.enumerate_physical_devices() }
        .map_err(|r| vk_err("vkEnumeratePhysicalDevices", r))?;
    let mut out = Vec::new();
    for (index, &pd) in physicals.iter().enumerate() {
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        // SAFETY: see above; `props2` chains a structure that lives for the call.
        unsafe { instance.get_physical_device_properties2(pd, &mut props2) };
        let props = props2.properties;
        // Subgroup operations that compute shaders may use.
        let subgroups_have = |ops: vk::SubgroupFeatureFlags| {
            subgroup
                .supported_stages
                .contains(vk::ShaderStageFlags::COMPUTE)
                && subgroup.supported_operations.contains(ops)
        };
        let ballot = vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::BALLOT;
        // SAFETY: see above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let Some(qf) = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
        else {
            continue;
        };
        // SAFETY: see above.
        let exts =
            unsafe { instance.enumerate_device_extension_properties(pd) }.unwrap_or_default();
        let has_atomic_float_ext = exts
            .iter()
            .any(|e| e.extension_name_as_c_str().ok() == Some(ext::shader_atomic_float::NAME));
        let (mut float_add_feature, mut shared_float_add_feature) = (false, false);
        if has_atomic_float_ext {
            let mut af = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default();
            let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut af);
            // SAFETY: see above.
            unsafe { instance.get_physical_device_features2(pd, &mut f2) };
            float_add_feature = af.shader_buffer_float32_atomic_add == vk::TRUE;
            shared_float_add_feature = af.shader_shared_float32_atomic_add == vk::TRUE;
        }
        let inf_nan_preserve = exts
            .iter()
            .any(|e| e.extension_name_as_c_str().ok() == Some(khr::shader_float_controls::NAME))
            && {
                let mut fc = vk::PhysicalDeviceFloatControlsProperties::default();
                let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut fc);
                // SAFETY: see above; the extension that defines the chained structure exists.
                unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
                fc.shader_signed_zero_inf_nan_preserve_float32 == vk::TRUE
            };
        let limits = props.limits;
        let timestamps = limits.timestamp_compute_and_graphics == vk::TRUE
            || families[qf].timestamp_valid_bits > 0;
        let name = props
            .device_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push(Candidate {
            physical: pd,
            queue_family: qf as u32,
            info: DeviceInfo {
                index,
                name,
                device_type: type_name(props.device_type).to_string(),
                max_storage_buffer_range: limits.max_storage_buffer_range,
                max_compute_work_group_count: limits.max_compute_work_group_count,
                max_push_constants_size: limits.max_push_constants_size,
                max_shared_memory: limits.max_compute_shared_memory_size,
                max_storage_buffers: limits
                    .max_per_stage_descriptor_storage_buffers
                    .min(limits.max_descriptor_set_storage_buffers),
                subgroup_size: subgroup.subgroup_size,
                float_atomic_add: float_add_feature,
                inf_nan_preserve,
            },
            has_atomic_float_ext,
            float_add_feature,
            shared_float_add_feature,
            inf_nan_preserve,
            timestamp_valid_bits: if timestamps {
                families[qf].timestamp_valid_bits
            } else {
                0
            },
            subgroup_ballot: subgroups_have(ballot),
            subgroup_arithmetic: subgroups_have(ballot | vk::SubgroupFeatureFlags::ARITHMETIC),
            pipeline_cache_uuid: props.pipeline_cache_uuid,
            vendor_id: props.vendor_id,
            device_id: props.device_id,
        });
    }
    Ok(out)
}

/// Lists the Vulkan devices that have a compute queue.
pub fn list_devices() -> Result<Vec<DeviceInfo>> {
    let entry = load_entry()?;
    let (instance, _) = create_instance(&entry, false)?;
    let list = candidates(&instance).map(|c| c.into_iter().map(|c| c.info).collect());
    // SAFETY: no object created from this instance is alive any more.
    unsafe { instance.destroy_instance(None) };
    list
}

fn pick(cands: Vec<Candidate>, want: Option<&str>) -> Result<Candidate> {
    if cands.is_empty() {
        return Err(Error::NoDevice(
            "no device with a compute queue was found".into(),
        ));
    }
    let listing = || {
        cands
            .iter()
            .map(|c| format!("{}: {} ({})", c.info.index, c.info.name, c.info.device_type))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match want.map(str::trim).filter(|w| !w.is_empty()) {
        Some(w) => {
            let infos: Vec<DeviceInfo> = cands.iter().map(|c| c.info.clone()).collect();
            match named_device(&infos, w) {
                Some(i) => Ok(cands.into_iter().nth(i).expect("index from position")),
                None => Err(Error::DeviceNotFound {
                    asked: w.to_string(),
                    available: listing(),
                }),
            }
        }
        None => {
            let infos: Vec<DeviceInfo> = cands.iter().map(|c| c.info.clone()).collect();
            let i = preferred_device(&infos).unwrap_or(0);
            Ok(cands
                .into_iter()
                .nth(i)
                .expect("a preferred device is listed"))
        }
    }
}

/// The position in `devices` of the one `MPM_VK_DEVICE=want` selects: by index, or the first
/// whose name contains `want` (ignoring case).
pub fn named_device(devices: &[DeviceInfo], want: &str) -> Option<usize> {
    let want = want.trim();
    match want.parse::<usize>() {
        Ok(i) => devices.iter().position(|d| d.index == i),
        Err(_) => {
            let lw = want.to_lowercase();
            devices
                .iter()
                .position(|d| d.name.to_lowercase().contains(&lw))
        }
    }
}

/// The position in `devices` of the one used when `MPM_VK_DEVICE` is unset: discrete GPUs
/// first, then integrated, virtual and CPU devices; the first listed of a kind.
pub fn preferred_device(devices: &[DeviceInfo]) -> Option<usize> {
    devices
        .iter()
        .enumerate()
        .min_by_key(|(_, d)| (device_type_rank_of(&d.device_type), d.index))
        .map(|(i, _)| i)
}

fn device_type_rank_of(t: &str) -> u32 {
    match t {
        "discrete" => 0,
        "integrated" => 1,
        "virtual" => 2,
        "cpu" => 3,
        _ => 4,
    }
}

/// The instance, device and allocator shared by the backend and every buffer it made.
pub(crate) struct Context {
    _entry: ash::Entry,
    pub instance: ash::Instance,
    debug: Option<(ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    pub device: ash::Device,
    pub queue: Mutex<vk::Queue>,
    pub queue_family: u32,
    pub allocator: Mutex<Option<Allocator>>,
    pub info: DeviceInfo,
    pub caps: DeviceCaps,
    pub validation: bool,
    pub pipeline_cache_id: String,
    /// Bytes of device-local memory allocated now and at most (see `GpuBuffer`).
    pub device_bytes: AtomicU64,
    pub device_peak: AtomicU64,
}

impl Context {
    pub fn new(options: &VulkanOptions) -> Result<Context> {
        let entry = load_entry()?;
        let (instance, validation) = create_instance(&entry, options.validation)?;
        // From here on, clean up the instance on failure.
        // `entry` (the loaded library) must outlive the instance, also on failure.
        match Self::with_instance(entry.clone(), instance.clone(), validation, options) {
            Ok(c) => Ok(c),
            Err(e) => {
                // SAFETY: `with_instance` destroyed everything it created before failing.
                unsafe { instance.destroy_instance(None) };
                Err(e)
            }
        }
    }

    fn with_instance(
        entry: ash::Entry,
        instance: ash::Instance,
        validation: bool,
        options: &VulkanOptions,
    ) -> Result<Context> {
        let cand = pick(candidates(&instance)?, options.device.as_deref())?;
        let use_float =
            options.float_atomics && cand.has_atomic_float_ext && cand.float_add_feature;
        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(cand.queue_family)
            .queue_priorities(&prio)];
        let mut ext_names = Vec::new();
        if use_float {
            ext_names.push(ext::shader_atomic_float::NAME.as_ptr());
        }
        if cand.inf_nan_preserve {
            ext_names.push(khr::shader_float_controls::NAME.as_ptr());
        }
        let use_shared_float = use_float && cand.shared_float_add_feature;
        let mut af = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default()
            .shader_buffer_float32_atomic_add(true)
            .shader_shared_float32_atomic_add(use_shared_float);
        let mut dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_extension_names(&ext_names);
        if use_float {
            dci = dci.push_next(&mut af);
        }
        // SAFETY: `cand.physical` belongs to `instance`; the create info outlives the call.
        let device = unsafe { instance.create_device(cand.physical, &dci, None) }
            .map_err(|r| vk_err("vkCreateDevice", r))?;
        // SAFETY: the queue family and index were requested in the create info above.
        let queue = unsafe { device.get_device_queue(cand.queue_family, 0) };
        let allocator = Allocator::new(&AllocatorCreateDesc {
            instance: instance.clone(),
            device: device.clone(),
            physical_device: cand.physical,
            debug_settings: Default::default(),
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        });
        let allocator = match allocator {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: nothing was created from the device yet.
                unsafe { device.destroy_device(None) };
                return Err(backend_err(format!("gpu-allocator: {e}")));
            }
        };
        let debug = if validation {
            let loader = ext::debug_utils::Instance::new(&entry, &instance);
            let ci = vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                        | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                        | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                )
                .pfn_user_callback(Some(debug_callback));
            // SAFETY: the debug-utils extension was enabled on this instance; the callback is a
            // plain function that only touches a static.
            unsafe { loader.create_debug_utils_messenger(&ci, None) }
                .ok()
                .map(|m| (loader, m))
        } else {
            None
        };
        // SAFETY: (also in the timestamp_period read) plain property query.
        let props = unsafe { instance.get_physical_device_properties(cand.physical) };
        let caps = DeviceCaps {
            float_atomic_add: use_float,
            shared_float_atomic_add: use_shared_float,
            inf_nan_preserve: cand.inf_nan_preserve,
            subgroup_size: cand.info.subgroup_size,
            subgroup_ballot: cand.subgroup_ballot,
            aggregate_adds: options.aggregate_adds && cand.subgroup_arithmetic,
            max_storage_buffer_range: cand.info.max_storage_buffer_range,
            max_workgroup_count: cand.info.max_compute_work_group_count,
            max_push_constants_size: cand.info.max_push_constants_size,
            max_shared_memory: cand.info.max_shared_memory,
            max_storage_buffers: cand.info.max_storage_buffers,
            timestamps: cand.timestamp_valid_bits > 0,
            timestamp_valid_bits: cand.timestamp_valid_bits,
            timestamp_period_ns: props.limits.timestamp_period,
            storage_offset_alignment: props.limits.min_storage_buffer_offset_alignment.max(4),
            batches: options.batches,
        };
        let uuid: String = cand
            .pipeline_cache_uuid
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Context {
            _entry: entry,
            instance,
            debug,
            device,
            queue: Mutex::new(queue),
            queue_family: cand.queue_family,
            allocator: Mutex::new(Some(allocator)),
            pipeline_cache_id: format!("{:04x}-{:04x}-{uuid}", cand.vendor_id, cand.device_id),
            info: cand.info,
            caps,
            validation,
            device_bytes: AtomicU64::new(0),
            device_peak: AtomicU64::new(0),
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: this is the last owner: every buffer, pipeline and pool made from the device
        // holds an `Arc<Context>` or was destroyed by the backend before; wait, then tear down in
        // reverse creation order.
        unsafe {
            let _ = self.device.device_wait_idle();
            if let Ok(mut a) = self.allocator.lock() {
                a.take();
            }
            self.device.destroy_device(None);
            if let Some((loader, m)) = self.debug.take() {
                loader.destroy_debug_utils_messenger(m, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}
