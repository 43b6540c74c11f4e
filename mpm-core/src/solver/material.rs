//! Materials as the host describes them, and their table on the device.

use glam::Vec4;

use super::kernels;
use crate::materials::lame;
use crate::materials::{dim2, dim3};
use crate::{BackendRef, Error, Field, Result};

/// A material. Densities are in kg/m^3 (or per m^2 in 2D), moduli in Pa.
#[derive(Clone, Debug, PartialEq)]
pub enum Material {
    /// Weakly compressible water: Tait's `p = bulk (J^-gamma - 1)` and optional viscosity.
    Water {
        density: f32,
        bulk: f32,
        gamma: f32,
        viscosity: f32,
        /// Water that holds no tension: `J` is clamped to at most 1, so pressure never goes
        /// negative and water neither hangs from walls nor sticks together in jets (the
        /// density threshold of Taichi's tuning advice). Off, Tait's law pulls expanded
        /// water back together, as a liquid with surface cohesion would.
        free_surface: bool,
    },
    /// Neo-Hookean elastic solid.
    NeoHookean {
        density: f32,
        youngs: f32,
        poisson: f32,
    },
    /// Fixed-corotated elastic solid (jelly).
    FixedCorotated {
        density: f32,
        youngs: f32,
        poisson: f32,
    },
    /// Snow: fixed-corotated with plasticity and hardening (Stomakhin et al. 2013).
    Snow {
        density: f32,
        youngs: f32,
        poisson: f32,
        /// Critical compression, 2.5e-2 in the paper.
        theta_c: f32,
        /// Critical stretch, 7.5e-3 in the paper.
        theta_s: f32,
        /// Hardening coefficient, 10 in the paper.
        hardening: f32,
    },
    /// Sand: Drucker-Prager plasticity (Klar et al. 2016).
    Sand {
        density: f32,
        youngs: f32,
        poisson: f32,
        /// Friction angle in degrees (30-35 for dry sand).
        friction_angle: f32,
        /// Cohesion as a tensile strain (0 for dry sand).
        cohesion: f32,
    },
    /// A material whose stress a user kernel writes into `Particles::tau` (registered with
    /// `Solver::add_stress_hook`). `params` reach the kernels in the material's `params` row;
    /// `youngs` and `poisson` set its Lamé row and bound the time step.
    User {
        name: String,
        density: f32,
        youngs: f32,
        poisson: f32,
        params: [f32; 4],
    },
}

impl Material {
    /// Water as in Taichi's examples' scale: density 1000, bulk modulus 1e5 (a tenth of real
    /// water's stiffness divided by gamma keeps the sound speed near 26 m/s), gamma 7, with
    /// a free surface (no tension).
    pub fn water() -> Self {
        Material::Water {
            density: 1000.0,
            bulk: 1e5,
            gamma: 7.0,
            viscosity: 0.0,
            free_surface: true,
        }
    }

    /// Snow with the paper's parameters (E = 1.4e5, nu = 0.2, density 400).
    pub fn snow() -> Self {
        Material::Snow {
            density: 400.0,
            youngs: 1.4e5,
            poisson: 0.2,
            theta_c: 2.5e-2,
            theta_s: 7.5e-3,
            hardening: 10.0,
        }
    }

    /// Dry sand (E = 3.537e5, nu = 0.3, friction angle 30 degrees, density 2200; Klar et
    /// al.'s values).
    pub fn sand() -> Self {
        Material::Sand {
            density: 2200.0,
            youngs: 3.537e5,
            poisson: 0.3,
            friction_angle: 30.0,
            cohesion: 0.0,
        }
    }

    /// A short name for messages.
    pub fn name(&self) -> String {
        match self {
            Material::Water { .. } => "water".into(),
            Material::NeoHookean { .. } => "neo-Hookean".into(),
            Material::FixedCorotated { .. } => "fixed-corotated".into(),
            Material::Snow { .. } => "snow".into(),
            Material::Sand { .. } => "sand".into(),
            Material::User { name, .. } => name.clone(),
        }
    }

    pub fn density(&self) -> f32 {
        match self {
            Material::Water { density, .. }
            | Material::NeoHookean { density, .. }
            | Material::FixedCorotated { density, .. }
            | Material::Snow { density, .. }
            | Material::Sand { density, .. }
            | Material::User { density, .. } => *density,
        }
    }

    /// Checks the parameters' ranges; the error names the material and the parameter.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str, value: f32, range: &str| {
            Err(Error::InvalidParameter(format!(
                "{} material: {what} = {value} is out of range ({range})",
                self.name()
            )))
        };
        let positive = |what: &str, value: f32| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                bad(what, value, "finite and > 0")
            }
        };
        positive("density", self.density())?;
        if let Some((youngs, poisson)) = self.moduli() {
            positive("youngs", youngs)?;
            if !(poisson.is_finite() && poisson > -1.0 && poisson < 0.5) {
                return bad("poisson", poisson, "-1 < nu < 0.5");
            }
        }
        match self {
            Material::Water {
                bulk,
                gamma,
                viscosity,
                ..
            } => {
                positive("bulk", *bulk)?;
                positive("gamma", *gamma)?;
                if !(viscosity.is_finite() && *viscosity >= 0.0) {
                    return bad("viscosity", *viscosity, "finite and >= 0");
                }
            }
            Material::Snow {
                theta_c,
                theta_s,
                hardening,
                ..
            } => {
                if !(*theta_c > 0.0 && *theta_c < 1.0) {
                    return bad("theta_c", *theta_c, "0 < theta_c < 1");
                }
                positive("theta_s", *theta_s)?;
                if !(hardening.is_finite() && *hardening >= 0.0) {
                    return bad("hardening", *hardening, "finite and >= 0");
                }
            }
            Material::Sand {
                friction_angle,
                cohesion,
                ..
            } => {
                if !(*friction_angle >= 0.0 && *friction_angle < 90.0) {
                    return bad("friction_angle", *friction_angle, "0 <= degrees < 90");
                }
                if !(cohesion.is_finite() && *cohesion >= 0.0) {
                    return bad("cohesion", *cohesion, "finite and >= 0");
                }
            }
            Material::User { params, .. } => {
                if let Some(p) = params.iter().find(|p| !p.is_finite()) {
                    return bad("params", *p, "finite");
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The fastest elastic wave: `sqrt((lambda + 2 mu) / rho)` for solids, the sound speed
    /// `sqrt(bulk gamma / rho)` for Tait water. Snow's hardening can raise it while it is
    /// compressed; the bound uses the unhardened moduli.
    pub fn wave_speed(&self) -> f32 {
        match self {
            Material::Water {
                density,
                bulk,
                gamma,
                ..
            } => (bulk * gamma / density).sqrt(),
            _ => {
                let (mu, lambda) = self.lame();
                ((lambda + 2.0 * mu) / self.density()).sqrt()
            }
        }
    }

    /// `(mu, lambda)`; water has none.
    pub fn lame(&self) -> (f32, f32) {
        match self.moduli() {
            Some((youngs, poisson)) => lame(youngs, poisson),
            None => (0.0, 0.0),
        }
    }

    /// Young's modulus and Poisson's ratio of the solid models.
    fn moduli(&self) -> Option<(f32, f32)> {
        match self {
            Material::Water { .. } => None,
            Material::NeoHookean {
                youngs, poisson, ..
            }
            | Material::FixedCorotated {
                youngs, poisson, ..
            }
            | Material::Snow {
                youngs, poisson, ..
            }
            | Material::Sand {
                youngs, poisson, ..
            }
            | Material::User {
                youngs, poisson, ..
            } => Some((*youngs, *poisson)),
        }
    }

    /// The three table rows the kernels read in `dimension`: kind, `(mu, lambda, density, 0)`
    /// and the model's own parameters.
    fn rows(&self, dimension: usize) -> (i32, Vec4, Vec4) {
        let (mu, lambda) = self.lame();
        let elastic = Vec4::new(mu, lambda, self.density(), 0.0);
        match self {
            Material::Water {
                bulk,
                gamma,
                viscosity,
                free_surface,
                ..
            } => (
                kernels::WATER,
                elastic,
                Vec4::new(
                    *bulk,
                    *gamma,
                    *viscosity,
                    f32::from(u8::from(*free_surface)),
                ),
            ),
            Material::NeoHookean { .. } => (kernels::NEO_HOOKEAN, elastic, Vec4::ZERO),
            Material::FixedCorotated { .. } => (kernels::FIXED_COROTATED, elastic, Vec4::ZERO),
            Material::Snow {
                theta_c,
                theta_s,
                hardening,
                ..
            } => (
                kernels::SNOW,
                elastic,
                Vec4::new(*theta_c, *theta_s, *hardening, 0.0),
            ),
            Material::Sand {
                friction_angle,
                cohesion,
                ..
            } => (
                kernels::SAND,
                elastic,
                Vec4::new(
                    if dimension == 2 {
                        dim2::drucker_prager_alpha(friction_angle.to_radians())
                    } else {
                        dim3::drucker_prager_alpha(friction_angle.to_radians())
                    },
                    *cohesion,
                    0.0,
                    0.0,
                ),
            ),
            Material::User { params, .. } => (kernels::USER, elastic, Vec4::from_array(*params)),
        }
    }
}

/// The index of a material in a solver's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaterialId(pub i32);

/// The materials of a solver on the device, one row each in three fields.
pub struct MaterialTable {
    pub materials: Vec<Material>,
    /// 2 or 3: sand's cone coefficient depends on it.
    dimension: usize,
    pub kinds: Field<i32>,
    pub elastic: Field<Vec4>,
    pub params: Field<Vec4>,
}

/// Materials one solver holds at most.
pub const MAX_MATERIALS: usize = 64;

impl MaterialTable {
    pub fn new(backend: &BackendRef, dimension: usize) -> Result<Self> {
        let n = [MAX_MATERIALS as u32];
        Ok(MaterialTable {
            materials: Vec::new(),
            dimension,
            kinds: Field::new(backend, n)?,
            elastic: Field::new(backend, n)?,
            params: Field::new(backend, n)?,
        })
    }

    /// Validates and adds a material, uploading the table.
    pub fn add(&mut self, material: Material) -> Result<MaterialId> {
        material.validate()?;
        if self.materials.len() == MAX_MATERIALS {
            return Err(Error::InvalidParameter(format!(
                "a solver holds at most {MAX_MATERIALS} materials"
            )));
        }
        self.materials.push(material);
        let mut kinds = vec![0; MAX_MATERIALS];
        let mut elastic = vec![Vec4::ZERO; MAX_MATERIALS];
        let mut params = vec![Vec4::ZERO; MAX_MATERIALS];
        for (i, m) in self.materials.iter().enumerate() {
            (kinds[i], elastic[i], params[i]) = m.rows(self.dimension);
        }
        self.kinds.upload(&kinds)?;
        self.elastic.upload(&elastic)?;
        self.params.upload(&params)?;
        Ok(MaterialId(self.materials.len() as i32 - 1))
    }

    pub fn get(&self, id: MaterialId) -> Option<&Material> {
        usize::try_from(id.0)
            .ok()
            .and_then(|i| self.materials.get(i))
    }
}
