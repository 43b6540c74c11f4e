//! Buffers: allocation, zeroing, uploads and read-backs through staging copies.

use ash::vk;
use gpu_allocator::MemoryLocation;
use mpm_core::backend::Buffer;
use mpm_core::Result;

use crate::context::backend_err;
use crate::memory::GpuBuffer;

use super::{downcast, Runtime};

impl Runtime {
    pub fn alloc(&mut self, words: usize) -> Result<GpuBuffer> {
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let buf = GpuBuffer::new(&self.ctx, words, usage, MemoryLocation::GpuOnly, "field")?;
        let (b, bytes) = (buf.buffer, buf.bytes);
        // SAFETY: `b` is a live buffer with TRANSFER_DST usage; size is a multiple of 4.
        self.one_shot(|d, cmd| unsafe { d.cmd_fill_buffer(cmd, b, 0, bytes, 0) })?;
        Ok(buf)
    }

    pub fn fill_zero(&mut self, buffer: &dyn Buffer, words: usize) -> Result<()> {
        let dst = downcast(&self.ctx, buffer, "fill")?;
        if words > dst.words {
            return Err(backend_err(format!(
                "zeroing {words} words of a buffer of {}",
                dst.words
            )));
        }
        if words == 0 {
            return Ok(());
        }
        let (b, bytes) = (dst.buffer, words as u64 * 4);
        // SAFETY: `b` is a live buffer with TRANSFER_DST usage; the size is a nonzero
        // multiple of 4 within it.
        self.one_shot(|d, cmd| unsafe { d.cmd_fill_buffer(cmd, b, 0, bytes, 0) })
    }

    pub fn write(&mut self, buffer: &dyn Buffer, offset: usize, words: &[u32]) -> Result<()> {
        let dst = downcast(&self.ctx, buffer, "write")?;
        if offset + words.len() > dst.words {
            return Err(backend_err(format!(
                "write of {} words at word {offset} into a buffer of {} words",
                words.len(),
                dst.words
            )));
        }
        if words.is_empty() {
            return Ok(());
        }
        let staging = GpuBuffer::staging(&self.ctx, words.len(), true)?;
        staging
            .with_mapped(|b| b[..words.len() * 4].copy_from_slice(bytemuck::cast_slice(words)))?;
        let (src, dstb, size) = (staging.buffer, dst.buffer, words.len() as u64 * 4);
        // SAFETY: both buffers are live with the right usages and at least `size` bytes.
        self.one_shot(|d, cmd| unsafe {
            d.cmd_copy_buffer(
                cmd,
                src,
                dstb,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: offset as u64 * 4,
                    size,
                }],
            )
        })
    }

    pub fn read(&mut self, buffer: &dyn Buffer) -> Result<Vec<u32>> {
        let src = downcast(&self.ctx, buffer, "read")?;
        if src.words == 0 {
            return Ok(Vec::new());
        }
        let staging = GpuBuffer::staging(&self.ctx, src.words, false)?;
        let (s, dst, size) = (src.buffer, staging.buffer, src.words as u64 * 4);
        // SAFETY: both buffers are live with the right usages and at least `size` bytes.
        self.one_shot(|d, cmd| unsafe {
            d.cmd_copy_buffer(
                cmd,
                s,
                dst,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size,
                }],
            )
        })?;
        staging.with_mapped(|b| {
            b[..size as usize]
                .chunks_exact(4)
                .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
    }
}
