//! GLSL -> SPIR-V with shaderc, cached in memory and on disk; the persisted pipeline cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpm_core::hash::fnv1a64;
use mpm_core::{Error, Result};

use crate::context::backend_err;

/// The directory for on-disk caches: `$MPM_CACHE_DIR`, `$XDG_CACHE_HOME/mpm` or `$HOME/.cache/mpm`.
pub fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("MPM_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("mpm")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("mpm")))
}

/// Counters of the shader cache, for tests and profiling notes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileStats {
    /// Shaders compiled by shaderc.
    pub compiled: u64,
    /// Shaders found in the in-memory cache.
    pub memory_hits: u64,
    /// Shaders loaded from the on-disk cache.
    pub disk_hits: u64,
    /// Time spent in shaderc.
    pub compile_time: Duration,
}

pub(crate) struct ShaderCache {
    compiler: Option<shaderc::Compiler>,
    memory: HashMap<u64, Vec<u32>>,
    dir: Option<PathBuf>,
    /// Device capabilities and compiler version, mixed into every key.
    salt: String,
    pub stats: CompileStats,
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Quotes the GLSL line that shaderc's message points at (`name:LINE: error: ...`).
fn quote_error(glsl: &str, message: &str) -> String {
    let mut out = message.trim_end().to_string();
    let lines: Vec<&str> = glsl.lines().collect();
    let mut quoted = Vec::new();
    for m in message.lines() {
        // `NAME:LINE: error: ...` where NAME may itself contain colons.
        let Some(pos) = m.find(": error:").or_else(|| m.find(": warning:")) else {
            continue;
        };
        let n = m[..pos].rsplit(':').next().unwrap_or("");
        if let Ok(n) = n.trim().parse::<usize>() {
            if n >= 1 && n <= lines.len() && !quoted.contains(&n) {
                quoted.push(n);
            }
        }
    }
    for n in quoted {
        out.push_str(&format!("\n  line {n}: {}", lines[n - 1].trim()));
    }
    out
}

impl ShaderCache {
    pub fn new(salt: String) -> ShaderCache {
        ShaderCache {
            compiler: None,
            memory: HashMap::new(),
            dir: cache_dir().map(|d| d.join("spirv")),
            salt,
            stats: CompileStats::default(),
        }
    }

    pub fn key(&self, glsl: &str) -> u64 {
        let (v, r) = shaderc::get_spirv_version();
        let version = format!("shaderc-0.8/{v}.{r}/vulkan1.1/O");
        fnv1a64(&[glsl.as_bytes(), version.as_bytes(), self.salt.as_bytes()])
    }

    /// Compiles (or finds) the SPIR-V of one compute shader.
    pub fn spirv(&mut self, kernel: &str, name: &str, glsl: &str) -> Result<Vec<u32>> {
        let key = self.key(glsl);
        if let Some(s) = self.memory.get(&key) {
            self.stats.memory_hits += 1;
            return Ok(s.clone());
        }
        let path = self.dir.as_ref().map(|d| d.join(format!("{key:016x}.spv")));
        if let Some(p) = &path {
            if let Ok(bytes) = std::fs::read(p) {
                if bytes.len() % 4 == 0 && bytes.len() >= 20 {
                    let words: Vec<u32> = bytes
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    if words[0] == 0x0723_0203 {
                        self.stats.disk_hits += 1;
                        self.memory.insert(key, words.clone());
                        return Ok(words);
                    }
                }
            }
        }
        let t0 = Instant::now();
        let words = self.compile(kernel, name, glsl)?;
        self.stats.compile_time += t0.elapsed();
        self.stats.compiled += 1;
        if let Some(p) = &path {
            // A failed cache write only costs a recompile next time.
            let _ = write_atomic(p, bytemuck::cast_slice(&words));
        }
        self.memory.insert(key, words.clone());
        Ok(words)
    }

    fn compile(&mut self, kernel: &str, name: &str, glsl: &str) -> Result<Vec<u32>> {
        if self.compiler.is_none() {
            self.compiler = shaderc::Compiler::new();
        }
        let compiler = self
            .compiler
            .as_ref()
            .ok_or_else(|| backend_err("shaderc could not be initialised"))?;
        let mut opts =
            shaderc::CompileOptions::new().ok_or_else(|| backend_err("shaderc options"))?;
        opts.set_target_env(
            shaderc::TargetEnv::Vulkan,
            shaderc::EnvVersion::Vulkan1_1 as u32,
        );
        opts.set_optimization_level(shaderc::OptimizationLevel::Performance);
        match compiler.compile_into_spirv(
            glsl,
            shaderc::ShaderKind::Compute,
            name,
            "main",
            Some(&opts),
        ) {
            Ok(a) => Ok(a.as_binary().to_vec()),
            Err(shaderc::Error::CompilationError(_, msg)) => Err(Error::ShaderCompile {
                kernel: kernel.into(),
                message: quote_error(glsl, &msg),
            }),
            Err(e) => Err(Error::ShaderCompile {
                kernel: kernel.into(),
                message: e.to_string(),
            }),
        }
    }
}

/// Path of the persisted `VkPipelineCache` of one device.
pub fn pipeline_cache_path(device_id: &str) -> Option<PathBuf> {
    cache_dir().map(|d| d.join(format!("pipeline-cache-{device_id}.bin")))
}

pub fn save_pipeline_cache(path: &Path, data: &[u8]) {
    let _ = write_atomic(path, data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_quotes_line() {
        let glsl = "#version 450\nvoid main() {\n    int x = nope;\n}\n";
        let msg = quote_error(glsl, "k.comp:3: error: 'nope' : undeclared identifier\n");
        assert!(msg.contains("line 3: int x = nope;"), "{msg}");
    }
}
