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
    if vk.is_some() {
        std::env::set_var("MPM_BACKEND", "vulkan");
        assert_eq!(
            backend::auto().expect("a device works").kind(),
            BackendKind::Vulkan
        );
        std::env::set_var("MPM_BACKEND", "auto");
        assert_eq!(
            backend::auto().expect("a device works").kind(),
            BackendKind::Vulkan
        );
    }
    std::env::remove_var("MPM_BACKEND");
}
