//! Files a run leaves behind: binary PLY point clouds for Houdini / Blender and an animated
//! GIF preview. Every file is written to a temporary file in the same folder and renamed into
//! place, so a reader (or a crash) never sees half a file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use image::codecs::gif::{GifEncoder, Repeat};
use image::imageops::{self, FilterType};
use image::{Delay, Frame, RgbImage};
use mpm_core::glam::{Vec2, Vec3};

/// What went wrong writing an output file; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A file operation failed; `action` says which (creating, writing, renaming).
    #[error("{}: {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: String,
        #[source]
        source: std::io::Error,
    },
    /// The GIF encoder refused a frame.
    #[error("{}: encoding GIF frame {frame}: {source}", path.display())]
    Gif {
        path: PathBuf,
        frame: usize,
        #[source]
        source: image::ImageError,
    },
    /// The data cannot make the file (slices of different lengths, no frames).
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Writes `path` atomically (see [`crate::files::write_atomically`]).
fn write_atomically(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), OutputError> {
    crate::files::write_atomically(path, body).map_err(|source| OutputError::Io {
        path: path.to_path_buf(),
        action: "saving".into(),
        source,
    })
}

/// The PLY header shared by the 2D and 3D writers.
fn ply_header(n: usize) -> String {
    format!(
        "ply\nformat binary_little_endian 1.0\ncomment written by mpm\n\
         element vertex {n}\n\
         property float x\nproperty float y\nproperty float z\n\
         property float vx\nproperty float vy\nproperty float vz\n\
         property int material\nend_header\n"
    )
}

/// Checks that positions, velocities and materials describe the same particles.
fn check_ply_lengths(path: &Path, n: usize, nv: usize, nm: usize) -> Result<(), OutputError> {
    if nv != n || nm != n {
        return Err(OutputError::Invalid {
            path: path.to_path_buf(),
            message: format!(
                "{n} positions, {nv} velocities and {nm} materials: expected as many of each"
            ),
        });
    }
    Ok(())
}

/// Writes the PLY body: 28 bytes per particle, little-endian.
fn write_ply_body(
    w: &mut impl Write,
    n: usize,
    record: impl Fn(usize) -> ([f32; 6], i32),
) -> std::io::Result<()> {
    w.write_all(ply_header(n).as_bytes())?;
    let mut buf = [0u8; 28];
    for i in 0..n {
        let (floats, material) = record(i);
        for (k, f) in floats.iter().enumerate() {
            buf[4 * k..4 * k + 4].copy_from_slice(&f.to_le_bytes());
        }
        buf[24..28].copy_from_slice(&material.to_le_bytes());
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Writes 2D particles as a binary little-endian PLY point cloud: `x y z vx vy vz` floats
/// (z and vz are 0) and `int material`, one vertex per particle.
pub fn write_ply_2d(
    path: &Path,
    positions: &[Vec2],
    velocities: &[Vec2],
    materials: &[i32],
) -> Result<(), OutputError> {
    let n = positions.len();
    check_ply_lengths(path, n, velocities.len(), materials.len())?;
    write_atomically(path, |w| {
        write_ply_body(w, n, |i| {
            let (p, v) = (positions[i], velocities[i]);
            ([p.x, p.y, 0.0, v.x, v.y, 0.0], materials[i])
        })
    })
}

/// Writes 3D particles as a binary little-endian PLY point cloud: `x y z vx vy vz` floats
/// and `int material`, one vertex per particle.
pub fn write_ply_3d(
    path: &Path,
    positions: &[Vec3],
    velocities: &[Vec3],
    materials: &[i32],
) -> Result<(), OutputError> {
    let n = positions.len();
    check_ply_lengths(path, n, velocities.len(), materials.len())?;
    write_atomically(path, |w| {
        write_ply_body(w, n, |i| {
            let (p, v) = (positions[i], velocities[i]);
            ([p.x, p.y, p.z, v.x, v.y, v.z], materials[i])
        })
    })
}

/// A `Write` into a buffer the recorder keeps a handle on: the image crate's encoder owns its
/// writer and gives no way back to it.
#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An animated GIF preview built frame by frame. Frames are shrunk (longest side at most
/// `max_side`) and compressed as they come, so a long run costs tens of kilobytes a frame,
/// not a full image; [`GifRecorder::write`] puts what has been recorded so far on disk
/// atomically and may be called again later (e.g. every few frames, and at the end).
pub struct GifRecorder {
    path: PathBuf,
    max_side: u32,
    delay_ms: u32,
    /// Width and height of every frame, fixed by the first one.
    size: Option<(u32, u32)>,
    frames: usize,
    buffer: SharedBuffer,
    encoder: GifEncoder<SharedBuffer>,
}

impl GifRecorder {
    /// A recorder for `path` that shows each frame for `delay_ms` milliseconds (GIF keeps
    /// hundredths of a second, and many viewers slow delays under 20 ms to 100 ms) and loops
    /// forever.
    pub fn new(path: impl Into<PathBuf>, max_side: u32, delay_ms: u32) -> GifRecorder {
        let buffer = SharedBuffer::default();
        // Speed 10 of 30: the quantiser's usual trade; speed 1 takes seconds per frame.
        let mut encoder = GifEncoder::new_with_speed(buffer.clone(), 10);
        // Only records the setting before the first frame; it cannot fail then.
        let _ = encoder.set_repeat(Repeat::Infinite);
        GifRecorder {
            path: path.into(),
            max_side: max_side.clamp(1, u16::MAX as u32),
            delay_ms,
            size: None,
            frames: 0,
            buffer,
            encoder,
        }
    }

    /// The file [`GifRecorder::write`] writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Frames recorded so far.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Width and height of the frames, once the first one is in.
    pub fn frame_size(&self) -> Option<(u32, u32)> {
        self.size
    }

    /// Adds a frame: shrunk to fit `max_side` (never enlarged); frames after the first are
    /// resized to the first one's size.
    pub fn push(&mut self, frame: &RgbImage) -> Result<(), OutputError> {
        let (fw, fh) = frame.dimensions();
        if fw == 0 || fh == 0 {
            return Err(OutputError::Invalid {
                path: self.path.clone(),
                message: format!("frame {} is empty ({fw}x{fh})", self.frames),
            });
        }
        let (w, h) = *self.size.get_or_insert_with(|| {
            let scale = (self.max_side as f32 / fw.max(fh) as f32).min(1.0);
            (
                ((fw as f32 * scale).round() as u32).max(1),
                ((fh as f32 * scale).round() as u32).max(1),
            )
        });
        let small = if (w, h) == (fw, fh) {
            frame.clone()
        } else {
            imageops::resize(frame, w, h, FilterType::Triangle)
        };
        let rgba = image::DynamicImage::ImageRgb8(small).into_rgba8();
        let delay = Delay::from_numer_denom_ms(self.delay_ms, 1);
        self.encoder
            .encode_frame(Frame::from_parts(rgba, 0, 0, delay))
            .map_err(|source| OutputError::Gif {
                path: self.path.clone(),
                frame: self.frames,
                source,
            })?;
        self.frames += 1;
        Ok(())
    }

    /// Writes the frames recorded so far as a complete GIF, atomically.
    pub fn write(&self) -> Result<(), OutputError> {
        if self.frames == 0 {
            return Err(OutputError::Invalid {
                path: self.path.clone(),
                message: "no frames were recorded for the GIF preview".into(),
            });
        }
        let bytes = self.buffer.0.lock().unwrap_or_else(PoisonError::into_inner);
        write_atomically(&self.path, |w| {
            w.write_all(&bytes)?;
            // The trailer the encoder would write when dropped: ends the GIF stream here.
            w.write_all(&[0x3B])
        })
    }
}
