//! `MPM_REQUIRE_GPU=1` (set by CI) turns "no Vulkan device" from a skip into a failure. The
//! test hides every driver from the Vulkan loader (its own process: the environment is
//! process-wide), so it runs the same on machines with and without a GPU.

use mpm_vulkan::{backend_for_tests, VulkanOptions};

#[test]
fn a_missing_device_skips_only_when_no_gpu_is_required() {
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/icd.json");

    std::env::set_var("MPM_REQUIRE_GPU", "1");
    let err = match backend_for_tests(VulkanOptions::default(), "this check") {
        Err(e) => e.to_string(),
        Ok(b) => panic!("no driver, yet a backend: {:?}", b.is_some()),
    };
    assert!(err.contains("MPM_REQUIRE_GPU=1"), "{err}");

    std::env::remove_var("MPM_REQUIRE_GPU");
    match backend_for_tests(VulkanOptions::default(), "this check") {
        Ok(None) => {}
        Ok(Some(_)) => panic!("no driver, yet a device"),
        Err(e) => panic!("without MPM_REQUIRE_GPU a missing device must skip: {e}"),
    }
}
