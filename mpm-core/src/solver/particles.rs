//! Particles as structure-of-arrays fields with a capacity and a count.

use super::error::Result;
use crate::{BackendRef, Elem, Field};

/// The particle fields. Entries `count..capacity` are unused; a negative `material` marks a
/// dead particle (`-1 - id`) that the solver removes at its next check.
pub struct Particles<V: Elem, M: Elem> {
    pub x: Field<V>,
    pub v: Field<V>,
    /// APIC's affine velocity (the velocity gradient).
    pub c: Field<M>,
    /// The elastic deformation as the displacement gradient `F - I` (`F` the elastic
    /// deformation gradient). Stored instead of `F` because near `F = I` an f32 keeps only
    /// increments above 6e-8: a slow strain rate would never accumulate in `F`.
    pub grad_u: Field<M>,
    /// Kirchhoff stress, written after each substep and read by the next P2G.
    pub tau: Field<M>,
    /// The model's scalar state, 1 at the start: snow's plastic volume ratio (hardening), a
    /// brittle particle's integrity (1 - damage).
    pub jp: Field<f32>,
    pub mass: Field<f32>,
    /// Initial volume.
    pub vol: Field<f32>,
    pub material: Field<i32>,
    /// Temperature (see `Settings::heat`).
    pub temperature: Field<f32>,
    count: u32,
}

/// Particle data on the host: new particles, snapshots, compaction.
#[derive(Clone, Debug, PartialEq)]
pub struct HostParticles<V, M> {
    pub x: Vec<V>,
    pub v: Vec<V>,
    pub c: Vec<M>,
    pub grad_u: Vec<M>,
    pub tau: Vec<M>,
    pub jp: Vec<f32>,
    pub mass: Vec<f32>,
    pub vol: Vec<f32>,
    pub material: Vec<i32>,
    pub temperature: Vec<f32>,
}

impl<V, M> Default for HostParticles<V, M> {
    fn default() -> Self {
        HostParticles {
            x: Vec::new(),
            v: Vec::new(),
            c: Vec::new(),
            grad_u: Vec::new(),
            tau: Vec::new(),
            jp: Vec::new(),
            mass: Vec::new(),
            vol: Vec::new(),
            material: Vec::new(),
            temperature: Vec::new(),
        }
    }
}

impl<V: Elem, M: Elem> HostParticles<V, M> {
    pub fn len(&self) -> usize {
        self.x.len()
    }

    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Drops dead particles (negative material), keeping the others' order.
    pub fn retain_alive(&mut self) {
        let keep: Vec<bool> = self.material.iter().map(|&m| m >= 0).collect();
        fn filter<T: Copy>(v: &mut Vec<T>, keep: &[bool]) {
            let mut k = keep.iter();
            v.retain(|_| *k.next().unwrap_or(&false));
        }
        filter(&mut self.x, &keep);
        filter(&mut self.v, &keep);
        filter(&mut self.c, &keep);
        filter(&mut self.grad_u, &keep);
        filter(&mut self.tau, &keep);
        filter(&mut self.jp, &keep);
        filter(&mut self.mass, &keep);
        filter(&mut self.vol, &keep);
        filter(&mut self.material, &keep);
        filter(&mut self.temperature, &keep);
    }
}

impl<V: Elem, M: Elem> HostParticles<V, M> {
    /// Splits the particles by `owner` (one per particle, each below `parts`), keeping their
    /// order within each part.
    pub fn split(&self, owner: &[usize], parts: usize) -> Vec<HostParticles<V, M>> {
        let mut out: Vec<HostParticles<V, M>> = (0..parts).map(|_| Self::default()).collect();
        for (i, &o) in owner.iter().enumerate() {
            let p = &mut out[o];
            p.x.push(self.x[i]);
            p.v.push(self.v[i]);
            p.c.push(self.c[i]);
            p.grad_u.push(self.grad_u[i]);
            p.tau.push(self.tau[i]);
            p.jp.push(self.jp[i]);
            p.mass.push(self.mass[i]);
            p.vol.push(self.vol[i]);
            p.material.push(self.material[i]);
            p.temperature.push(self.temperature[i]);
        }
        out
    }

    /// The particles as words, for sending to another process: the count, then each field's
    /// elements.
    pub fn to_words(&self) -> Vec<u32> {
        fn put<T: Elem>(out: &mut Vec<u32>, v: &[T]) {
            let at = out.len();
            out.resize(at + v.len() * T::WORDS, 0);
            for (e, w) in v.iter().zip(out[at..].chunks_exact_mut(T::WORDS)) {
                e.write_words(w);
            }
        }
        let mut out = vec![self.len() as u32];
        put(&mut out, &self.x);
        put(&mut out, &self.v);
        put(&mut out, &self.c);
        put(&mut out, &self.grad_u);
        put(&mut out, &self.tau);
        put(&mut out, &self.jp);
        put(&mut out, &self.mass);
        put(&mut out, &self.vol);
        put(&mut out, &self.material);
        put(&mut out, &self.temperature);
        out
    }

    /// Particles from [`HostParticles::to_words`]; `None` when the words are not a whole
    /// set of particles.
    pub fn from_words(words: &[u32]) -> Option<Self> {
        let (&n, mut rest) = words.split_first()?;
        let n = n as usize;
        let per = 2 * V::WORDS + 3 * M::WORDS + 5;
        if rest.len() != n.checked_mul(per)? {
            return None;
        }
        fn take<T: Elem>(rest: &mut &[u32], n: usize) -> Vec<T> {
            let (mine, later) = rest.split_at(n * T::WORDS);
            *rest = later;
            mine.chunks_exact(T::WORDS).map(T::read_words).collect()
        }
        Some(HostParticles {
            x: take(&mut rest, n),
            v: take(&mut rest, n),
            c: take(&mut rest, n),
            grad_u: take(&mut rest, n),
            tau: take(&mut rest, n),
            jp: take(&mut rest, n),
            mass: take(&mut rest, n),
            vol: take(&mut rest, n),
            material: take(&mut rest, n),
            temperature: take(&mut rest, n),
        })
    }
}

impl<V: Elem, M: Elem> Particles<V, M> {
    /// Room for `capacity` particles (at least one), none in use.
    pub fn new(backend: &BackendRef, capacity: u32) -> Result<Self> {
        let n = [capacity.max(1)];
        Ok(Particles {
            x: Field::new(backend, n)?,
            v: Field::new(backend, n)?,
            c: Field::new(backend, n)?,
            grad_u: Field::new(backend, n)?,
            tau: Field::new(backend, n)?,
            jp: Field::new(backend, n)?,
            mass: Field::new(backend, n)?,
            vol: Field::new(backend, n)?,
            material: Field::new(backend, n)?,
            temperature: Field::new(backend, n)?,
            count: 0,
        })
    }

    /// Particles in use (dead ones included until the next compaction).
    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn capacity(&self) -> u32 {
        self.x.len() as u32
    }

    /// Bytes of the particle fields.
    pub fn bytes(&self) -> usize {
        self.x.bytes()
            + self.v.bytes()
            + self.c.bytes()
            + self.grad_u.bytes()
            + self.tau.bytes()
            + self.jp.bytes()
            + self.mass.bytes()
            + self.vol.bytes()
            + self.material.bytes()
            + self.temperature.bytes()
    }

    /// The particles in use, copied to the host.
    pub fn download(&self) -> Result<HostParticles<V, M>> {
        let n = self.count as usize;
        fn take<T>(mut v: Vec<T>, n: usize) -> Vec<T> {
            v.truncate(n);
            v
        }
        Ok(HostParticles {
            x: take(self.x.download()?, n),
            v: take(self.v.download()?, n),
            c: take(self.c.download()?, n),
            grad_u: take(self.grad_u.download()?, n),
            tau: take(self.tau.download()?, n),
            jp: take(self.jp.download()?, n),
            mass: take(self.mass.download()?, n),
            vol: take(self.vol.download()?, n),
            material: take(self.material.download()?, n),
            temperature: take(self.temperature.download()?, n),
        })
    }

    /// New, empty fields for `capacity` particles when the present ones hold fewer (their
    /// contents are dropped: download them first).
    pub fn grow_to(&mut self, capacity: usize) -> Result<()> {
        if capacity > self.capacity() as usize {
            let capacity = u32::try_from(capacity).map_err(|_| {
                super::SolverError::InvalidParameter(format!(
                    "{capacity} particles do not fit a u32 count"
                ))
            })?;
            *self = Particles::new(self.x.backend(), capacity)?;
        }
        Ok(())
    }

    /// Replaces the particles in use, growing the fields when they do not fit: by a quarter
    /// at least, so that emitters adding small batches reallocate rarely, while one large
    /// body wastes little (`Solver::reserve_particles` avoids even that).
    pub fn upload(&mut self, host: &HostParticles<V, M>) -> Result<()> {
        let n = host.len();
        if n > self.capacity() as usize {
            self.grow_to(self.grown(n))?;
        }
        self.write_at(0, host)?;
        self.count = n as u32;
        Ok(())
    }

    /// Makes room for `total` particles, keeping those in use: when they do not fit, the
    /// fields grow (by a quarter at least, so that emitters adding small batches reallocate
    /// rarely) and the particles in use are copied once.
    pub fn reserve(&mut self, total: usize) -> Result<()> {
        if total > self.capacity() as usize {
            self.reserve_exact(self.grown(total))?;
        }
        Ok(())
    }

    /// The capacity to grow to for `total` particles: a quarter more at least.
    fn grown(&self, total: usize) -> usize {
        let capacity = self.capacity() as usize;
        total.max(capacity + capacity / 4)
    }

    /// Makes room for exactly `total` particles when they do not fit, keeping those in use.
    pub fn reserve_exact(&mut self, total: usize) -> Result<()> {
        if total > self.capacity() as usize {
            let old = self.download()?;
            self.grow_to(total)?;
            self.write_at(0, &old)?;
            self.count = old.len() as u32;
        }
        Ok(())
    }

    /// Adds particles after those in use, writing only theirs (see `reserve` for growth).
    pub fn append(&mut self, new: &HostParticles<V, M>) -> Result<()> {
        let at = self.count as usize;
        let n = at + new.len();
        self.reserve(n)?;
        self.write_at(at, new)?;
        self.count = n as u32;
        Ok(())
    }

    /// Writes `host`'s particles into slots `at..` of every field (elements past them keep
    /// what they hold: only `..count` is ever read).
    fn write_at(&mut self, at: usize, host: &HostParticles<V, M>) -> Result<()> {
        self.x.upload_at(at, &host.x)?;
        self.v.upload_at(at, &host.v)?;
        self.c.upload_at(at, &host.c)?;
        self.grad_u.upload_at(at, &host.grad_u)?;
        self.tau.upload_at(at, &host.tau)?;
        self.jp.upload_at(at, &host.jp)?;
        self.mass.upload_at(at, &host.mass)?;
        self.vol.upload_at(at, &host.vol)?;
        self.material.upload_at(at, &host.material)?;
        self.temperature.upload_at(at, &host.temperature)?;
        Ok(())
    }
}
