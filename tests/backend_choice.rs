//! `MPM_BACKEND` and `MPM_VK_DEVICE` select backends or fail with a clear message.
//! One test function: it changes process environment variables, which must not race.

use mpm::{backend, BackendKind};

#[test]
fn environment_selects_or_fails_clearly() {
    std::env::set_var("MPM_BACKEND", "cpu");
    assert_eq!(
        backend::auto().expect("cpu always works").kind(),
        BackendKind::Cpu
    );

    std::env::set_var("MPM_BACKEND", "quantum");
    let err = backend::auto()
        .err()
        .expect("an unknown backend is refused")
        .to_string();
    assert!(
        err.contains("quantum") && err.contains("cpu, vulkan or auto"),
        "{err}"
    );

    // A device that does not exist: `vulkan` fails naming the variable, `auto` falls back.
    std::env::set_var("MPM_VK_DEVICE", "no-such-gpu-anywhere");
    std::env::set_var("MPM_BACKEND", "vulkan");
    let err = backend::auto()
        .err()
        .expect("vulkan cannot be honoured")
        .to_string();
    assert!(
        err.contains("Vulkan") && err.contains("no-such-gpu-anywhere"),
        "{err}"
    );
    std::env::set_var("MPM_BACKEND", "auto");
    assert_eq!(
        backend::auto().expect("auto falls back").kind(),
        BackendKind::Cpu
    );
    std::env::remove_var("MPM_VK_DEVICE");

    let vk = mpm_vulkan::backend_for_tests(mpm::VulkanOptions::from_env(), "choosing Vulkan");
    let vk = vk.unwrap_or_else(|e| panic!("creating the Vulkan backend failed: {e}"));
    if let Some(vk) = vk {
        std::env::set_var("MPM_BACKEND", "vulkan");
        assert_eq!(
            backend::auto().expect("a device works").kind(),
            BackendKind::Vulkan
        );
        // auto takes a GPU, but not a Vulkan device that runs on the CPU (lavapipe): the
        // CPU backend is faster there, unless MPM_VK_DEVICE names that device.
        let software = vk.device_info().device_type == "cpu";
        std::env::set_var("MPM_BACKEND", "auto");
        let expected = if software {
            BackendKind::Cpu
        } else {
            BackendKind::Vulkan
        };
        assert_eq!(backend::auto().expect("a backend works").kind(), expected);
        std::env::set_var("MPM_VK_DEVICE", vk.device_info().index.to_string());
        assert_eq!(
            backend::auto().expect("the named device works").kind(),
            BackendKind::Vulkan
        );
        std::env::remove_var("MPM_VK_DEVICE");
    }
    std::env::remove_var("MPM_BACKEND");
}
