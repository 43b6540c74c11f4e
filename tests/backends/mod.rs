//! One test body per backend (CubeCL's idea): [`per_backend!`] turns checks of the form
//! `fn(&BackendRef)` into one test per backend, `cpu::name` and `vulkan::name`, so a report
//! says which backend failed. The Vulkan backend runs with the validation layer; after each
//! check its messages must be empty and every shader must pass `spirv-val`. It is skipped
//! only where this machine has no Vulkan device and `MPM_REQUIRE_GPU` is not 1.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use mpm::{backend, BackendRef, VulkanBackend, VulkanOptions};

pub fn cpu() -> BackendRef {
    backend::cpu()
}

/// The Vulkan backend with the validation layer, created once per test process; `None`
/// (with the reason printed) where this machine has no Vulkan device.
pub fn vulkan_impl() -> Option<Arc<VulkanBackend>> {
    static VK: OnceLock<Option<Arc<VulkanBackend>>> = OnceLock::new();
    VK.get_or_init(|| {
        let options = VulkanOptions {
            validation: true,
            ..VulkanOptions::from_env()
        };
        mpm_vulkan::backend_for_tests(options, "this suite's Vulkan half")
            .unwrap_or_else(|e| panic!("creating the Vulkan backend failed: {e}"))
            .map(Arc::new)
    })
    .clone()
}

pub fn vulkan() -> Option<BackendRef> {
    vulkan_impl().map(|b| b as BackendRef)
}

/// Every backend (the CPU, then Vulkan where a device exists), for checks that compare them.
pub fn all() -> Vec<BackendRef> {
    let mut v = vec![cpu()];
    v.extend(vulkan());
    v
}

/// No validation-layer message was reported (by any test of this process so far).
pub fn no_validation_messages() {
    let messages = VulkanBackend::validation_messages();
    assert!(messages.is_empty(), "validation messages: {messages:#?}");
}

/// Every shader the Vulkan backend compiled so far passes `spirv-val`.
pub fn spirv_valid() {
    let Some(vk) = vulkan_impl() else { return };
    if let Err(e) = mpm_vulkan::spirv_val(&vk.compiled_shaders()) {
        panic!("{e}");
    }
}

/// Both checks above.
pub fn vulkan_was_clean() {
    no_validation_messages();
    spirv_valid();
}

/// `per_backend! { test_name => check, ... }`: a test per backend for each check.
#[macro_export]
macro_rules! per_backend {
    ($($name:ident => $check:ident),* $(,)?) => {
        mod cpu {
            $(
                #[test]
                fn $name() {
                    super::$check(&$crate::backends::cpu());
                }
            )*
        }
        mod vulkan {
            $(
                #[test]
                fn $name() {
                    if let Some(b) = $crate::backends::vulkan() {
                        super::$check(&b);
                        $crate::backends::vulkan_was_clean();
                    }
                }
            )*
        }
    };
}
