//! Debian's `libshaderc_combined.a` leaves glslang and SPIRV-Tools symbols undefined;
//! link the static libraries that provide them (see DESIGN.md, section 9).
fn main() {
    let dir =
        std::env::var("SHADERC_LIB_DIR").unwrap_or_else(|_| "/usr/lib/x86_64-linux-gnu".into());
    println!("cargo:rerun-if-env-changed=SHADERC_LIB_DIR");
    println!("cargo:rustc-link-search=native={dir}");
    for lib in [
        "glslang",
        "MachineIndependent",
        "GenericCodeGen",
        "OSDependent",
        "OGLCompiler",
        "SPIRV",
        "SPIRV-Tools-opt",
        "SPIRV-Tools",
    ] {
        if std::path::Path::new(&dir)
            .join(format!("lib{lib}.a"))
            .exists()
        {
            println!("cargo:rustc-link-lib=static={lib}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=stdc++");
}
