//! Checkpoints: a solver's evolving state in a versioned binary file with a checksum.
//!
//! Layout (little endian): the magic `MPMCKPT\0`, a format version, the dimension, a hash of
//! the scene file the run came from, the frames done, the solver's counters, colliders,
//! emitter schedule and status words, the particle arrays, and last an FNV-1a 64 checksum
//! of everything before it. A checkpoint is written to a temporary file and renamed into
//! place, so an interrupted write never leaves a broken one behind.

use std::path::{Path, PathBuf};

use mpm_core::solver::{Collider, Condition, HeatBoundary, HostParticles, SdfId, Shape, Snapshot};
use mpm_core::types::{from_words, to_words};
use mpm_core::Elem;

const MAGIC: &[u8; 8] = b"MPMCKPT\0";
/// Bumped whenever the layout changes; older files are refused with a clear message.
/// Version 2: particles hold the displacement gradient `F - I` instead of `F`, and the
/// count of particles removed so far follows the seed. Version 3: colliders carry a
/// distance field's id, rotation and spin. Version 4: colliders carry their heat boundary,
/// particles their temperature.
pub const VERSION: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a checkpoint ({why})")]
    Invalid { path: PathBuf, why: String },
    #[error("{path}: made from {what}, but this run is {expected}")]
    Mismatch {
        path: PathBuf,
        what: String,
        expected: String,
    },
}

/// A checkpoint's contents besides the solver state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub dimension: u32,
    /// FNV-1a 64 of the scene file's text.
    pub scene_hash: u64,
    /// Frames completed when it was written.
    pub frame: u32,
}

/// The scene hash a checkpoint records.
pub fn scene_hash(source: &str) -> u64 {
    mpm_core::hash::fnv1a64(&[source.as_bytes()])
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f32(&mut self, v: f32) {
        self.u32(v.to_bits());
    }
    fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    fn words<T: Elem>(&mut self, values: &[T]) {
        self.u64(values.len() as u64);
        for w in to_words(values) {
            self.u32(w);
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], CheckpointError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(CheckpointError::Invalid {
                path: self.path.into(),
                why: format!(
                    "it ends early, at byte {} of {}",
                    self.data.len(),
                    self.at + n
                ),
            });
        };
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32, CheckpointError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, CheckpointError> {
        let lo = self.u32()? as u64;
        let hi = self.u32()? as u64;
        Ok(lo | hi << 32)
    }
    fn f32(&mut self) -> Result<f32, CheckpointError> {
        self.u32().map(f32::from_bits)
    }
    fn f64(&mut self) -> Result<f64, CheckpointError> {
        self.u64().map(f64::from_bits)
    }
    fn words<T: Elem>(&mut self) -> Result<Vec<T>, CheckpointError> {
        let n = self.u64()? as usize;
        let bytes = n
            .checked_mul(T::WORDS * 4)
            .filter(|&b| b <= self.data.len() - self.at)
            .ok_or_else(|| CheckpointError::Invalid {
                path: self.path.into(),
                why: format!("an array of {n} elements does not fit the file"),
            })?;
        let raw = self.take(bytes)?;
        let words: Vec<u32> = raw
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(from_words(&words))
    }
}

fn write_collider(w: &mut Writer, c: &Collider) {
    let (mut sdf, mut rotation, mut spin) = (0, [0.0, 0.0, 0.0, 1.0], [0.0; 3]);
    let (kind, a, b, r) = match c.shape {
        Shape::Plane { point, normal } => (0, point, normal, 0.0),
        Shape::Box { centre, half } => (1, centre, half, 0.0),
        Shape::Sphere { centre, radius } => (2, centre, [0.0; 3], radius),
        Shape::Sdf {
            sdf: id,
            position,
            rotation: q,
            angular_velocity,
        } => {
            (sdf, rotation, spin) = (id.0, q, angular_velocity);
            (3, position, [0.0; 3], 0.0)
        }
    };
    let (cond, friction) = match c.condition {
        Condition::Sticky => (0, 0.0),
        Condition::Slip { friction } => (1, friction),
        Condition::Separate { friction } => (2, friction),
    };
    w.u32(kind);
    w.u32(cond);
    w.f32(friction);
    for v in a.iter().chain(&b).chain(&c.velocity) {
        w.f32(*v);
    }
    w.f32(r);
    w.u32(sdf);
    for v in rotation.iter().chain(&spin) {
        w.f32(*v);
    }
    let (held, temperature) = match c.heat {
        HeatBoundary::Insulated => (0, 0.0),
        HeatBoundary::Fixed(t) => (1, t),
    };
    w.u32(held);
    w.f32(temperature);
}

fn read_collider(r: &mut Reader) -> Result<Collider, CheckpointError> {
    let kind = r.u32()?;
    let cond = r.u32()?;
    let friction = r.f32()?;
    let mut v = [0.0f32; 9];
    for x in &mut v {
        *x = r.f32()?;
    }
    let radius = r.f32()?;
    let sdf = r.u32()?;
    let mut turn = [0.0f32; 7];
    for x in &mut turn {
        *x = r.f32()?;
    }
    let heat = match (r.u32()?, r.f32()?) {
        (0, _) => HeatBoundary::Insulated,
        (1, t) => HeatBoundary::Fixed(t),
        (k, _) => {
            return Err(CheckpointError::Invalid {
                path: r.path.into(),
                why: format!("unknown collider heat boundary {k}"),
            })
        }
    };
    let (a, b, velocity) = ([v[0], v[1], v[2]], [v[3], v[4], v[5]], [v[6], v[7], v[8]]);
    let shape = match kind {
        0 => Shape::Plane {
            point: a,
            normal: b,
        },
        1 => Shape::Box { centre: a, half: b },
        2 => Shape::Sphere { centre: a, radius },
        3 => Shape::Sdf {
            sdf: SdfId(sdf),
            position: a,
            rotation: [turn[0], turn[1], turn[2], turn[3]],
            angular_velocity: [turn[4], turn[5], turn[6]],
        },
        k => {
            return Err(CheckpointError::Invalid {
                path: r.path.into(),
                why: format!("unknown collider shape {k}"),
            })
        }
    };
    let condition = match cond {
        0 => Condition::Sticky,
        1 => Condition::Slip { friction },
        2 => Condition::Separate { friction },
        k => {
            return Err(CheckpointError::Invalid {
                path: r.path.into(),
                why: format!("unknown collider condition {k}"),
            })
        }
    };
    Ok(Collider {
        shape,
        condition,
        velocity,
        heat,
    })
}

/// Writes a checkpoint atomically.
pub fn save<V: Elem, M: Elem>(
    path: &Path,
    header: Header,
    s: &Snapshot<V, M>,
) -> Result<(), CheckpointError> {
    let mut w = Writer(Vec::new());
    w.0.extend_from_slice(MAGIC);
    w.u32(VERSION);
    w.u32(header.dimension);
    w.u64(header.scene_hash);
    w.u32(header.frame);
    w.u64(s.step);
    w.f64(s.time);
    w.f32(s.dt);
    w.f32(s.speed_bound);
    w.u32(s.seed);
    w.u64(s.removed);
    w.words(&s.status);
    w.u32(s.colliders.len() as u32);
    for c in &s.colliders {
        write_collider(&mut w, c);
    }
    w.u32(s.emitter_times.len() as u32);
    for t in &s.emitter_times {
        w.f64(*t);
    }
    let p = &s.particles;
    w.words(&p.x);
    w.words(&p.v);
    w.words(&p.c);
    w.words(&p.grad_u);
    w.words(&p.tau);
    w.words(&p.jp);
    w.words(&p.mass);
    w.words(&p.vol);
    w.words(&p.material);
    w.words(&p.temperature);
    let sum = mpm_core::hash::fnv1a64(&[&w.0]);
    w.u64(sum);
    let io = |source| CheckpointError::Io {
        path: path.into(),
        source,
    };
    crate::files::write_atomically(path, |f| {
        use std::io::Write;
        f.write_all(&w.0)
    })
    .map_err(io)
}

/// Reads a checkpoint, checking its magic, version, checksum and dimension.
pub fn load<V: Elem, M: Elem>(
    path: &Path,
    dimension: u32,
) -> Result<(Header, Snapshot<V, M>), CheckpointError> {
    let data = crate::files::read_bounded(path, crate::files::CHECKPOINT_LIMIT, "checkpoint")
        .map_err(|source| CheckpointError::Io {
            path: path.into(),
            source,
        })?;
    let invalid = |why: String| CheckpointError::Invalid {
        path: path.into(),
        why,
    };
    if data.len() < MAGIC.len() + 8 || &data[..MAGIC.len()] != MAGIC {
        return Err(invalid(
            "it does not start with the checkpoint magic".into(),
        ));
    }
    let (body, tail) = data.split_at(data.len() - 8);
    let stored = u64::from_le_bytes(tail.try_into().unwrap_or([0; 8]));
    if mpm_core::hash::fnv1a64(&[body]) != stored {
        return Err(invalid(
            "its checksum does not match: the file is damaged".into(),
        ));
    }
    let mut r = Reader {
        data: body,
        at: MAGIC.len(),
        path,
    };
    let version = r.u32()?;
    if version != VERSION {
        return Err(invalid(format!(
            "format version {version}; this program reads version {VERSION}"
        )));
    }
    let header = Header {
        dimension: r.u32()?,
        scene_hash: r.u64()?,
        frame: r.u32()?,
    };
    if header.dimension != dimension {
        return Err(CheckpointError::Mismatch {
            path: path.into(),
            what: format!("a {}D scene", header.dimension),
            expected: format!("{dimension}D"),
        });
    }
    let step = r.u64()?;
    let time = r.f64()?;
    let dt = r.f32()?;
    let speed_bound = r.f32()?;
    let seed = r.u32()?;
    let removed = r.u64()?;
    let status = r.words()?;
    let n = r.u32()?;
    let colliders = (0..n)
        .map(|_| read_collider(&mut r))
        .collect::<Result<_, _>>()?;
    let n = r.u32()?;
    let emitter_times = (0..n).map(|_| r.f64()).collect::<Result<_, _>>()?;
    let particles = HostParticles {
        x: r.words()?,
        v: r.words()?,
        c: r.words()?,
        grad_u: r.words()?,
        tau: r.words()?,
        jp: r.words()?,
        mass: r.words()?,
        vol: r.words()?,
        material: r.words()?,
        temperature: r.words()?,
    };
    let n = particles.x.len();
    let lens = [
        particles.v.len(),
        particles.c.len(),
        particles.grad_u.len(),
        particles.tau.len(),
        particles.jp.len(),
        particles.mass.len(),
        particles.vol.len(),
        particles.material.len(),
        particles.temperature.len(),
    ];
    if lens.iter().any(|&l| l != n) {
        return Err(invalid(format!(
            "particle arrays of different lengths ({n} positions, {lens:?})"
        )));
    }
    if r.at != body.len() {
        return Err(invalid(format!(
            "{} bytes follow the particle arrays",
            body.len() - r.at
        )));
    }
    Ok((
        header,
        Snapshot {
            particles,
            status,
            step,
            time,
            dt,
            speed_bound,
            seed,
            removed,
            colliders,
            emitter_times,
        },
    ))
}
