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
    /// Plastic volume ratio (snow hardening).
    pub jp: Field<f32>,
    pub mass: Field<f32>,
    /// Initial volume.
    pub vol: Field<f32>,
    pub material: Field<i32>,
    count: u32,
}

/// Particle data on the host, for appending and compacting.
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

    /// Appends all of `other`.
    pub fn append(&mut self, mut other: Self) {
        self.x.append(&mut other.x);
        self.v.append(&mut other.v);
        self.c.append(&mut other.c);
        self.grad_u.append(&mut other.grad_u);
        self.tau.append(&mut other.tau);
        self.jp.append(&mut other.jp);
        self.mass.append(&mut other.mass);
        self.vol.append(&mut other.vol);
        self.material.append(&mut other.material);
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
            let grown = self.capacity() as usize + self.capacity() as usize / 4;
            self.grow_to(n.max(grown))?;
        }
        let cap = self.capacity() as usize;
        fn padded<T: Elem>(data: &[T], cap: usize) -> Vec<T> {
            let mut v = data.to_vec();
            v.resize(cap, T::zero());
            v
        }
        self.x.upload(&padded(&host.x, cap))?;
        self.v.upload(&padded(&host.v, cap))?;
        self.c.upload(&padded(&host.c, cap))?;
        self.grad_u.upload(&padded(&host.grad_u, cap))?;
        self.tau.upload(&padded(&host.tau, cap))?;
        self.jp.upload(&padded(&host.jp, cap))?;
        self.mass.upload(&padded(&host.mass, cap))?;
        self.vol.upload(&padded(&host.vol, cap))?;
        self.material.upload(&padded(&host.material, cap))?;
        self.count = n as u32;
        Ok(())
    }
}
