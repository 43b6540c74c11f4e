//! Images of particle sets: 2D dots in the unit square and 3D splats seen through an orbit
//! camera, coloured by material, speed, temperature or damage.

use std::path::Path;

use image::{Rgb, RgbImage};
use mpm_core::glam::{Vec2, Vec3};

/// Colours of materials 0, 1, 2, ... (Taichi's mpm99 palette first), then cycled.
const PALETTE: [[u8; 3]; 6] = [
    [0x06, 0x85, 0x87],
    [0xED, 0x55, 0x3B],
    [0xEE, 0xEE, 0xF0],
    [0xE8, 0xC0, 0x5A],
    [0x8A, 0xC9, 0x26],
    [0xB0, 0x7A, 0xD9],
];
const BACKGROUND: [u8; 3] = [0x11, 0x2F, 0x41];

/// Viridis sampled at t = 0, 1/8, ..., 1: perceptually uniform and readable in grey scale, so
/// speed differences look like what they are. Linear interpolation between these nine points
/// stays within a few levels of the real map.
const VIRIDIS: [[u8; 3]; 9] = [
    [68, 1, 84],
    [72, 40, 120],
    [62, 73, 137],
    [49, 104, 142],
    [38, 130, 142],
    [31, 158, 137],
    [53, 183, 121],
    [109, 205, 89],
    [253, 231, 37],
];

/// What decides a particle's colour.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Colouring {
    /// The material palette, by material id.
    #[default]
    Material,
    /// Viridis over |v| / max: dark purple at rest, yellow at `max` and above. `None` takes
    /// the frame's 99th percentile of speeds, so a few outliers do not wash the frame out.
    Speed { max: Option<f32> },
    /// Viridis from the cold end of `range` (dark purple) to its hot end (yellow); `None`
    /// takes the frame's 1st and 99th percentiles of temperature.
    Temperature { range: Option<(f32, f32)> },
    /// Viridis over a brittle particle's damage, 0 (intact) to 1 (broken).
    Damage,
}

impl Colouring {
    /// Whether it reads per-particle values (speeds or temperatures) rather than materials.
    pub fn reads_values(self) -> bool {
        !matches!(self, Colouring::Material)
    }
}

impl From<&crate::scene_file::Output> for Colouring {
    fn from(o: &crate::scene_file::Output) -> Self {
        use crate::scene_file::ColorBy;
        match o.color {
            ColorBy::Material => Colouring::Material,
            ColorBy::Speed => Colouring::Speed {
                max: o.color_range.map(|r| r[1]),
            },
            ColorBy::Temperature => Colouring::Temperature {
                range: o.color_range.map(|r| (r[0], r[1])),
            },
            ColorBy::Damage => Colouring::Damage,
        }
    }
}

/// The colour of material `m` (ids beyond the palette cycle through it).
pub fn material_colour(m: i32) -> [u8; 3] {
    PALETTE[m.rem_euclid(PALETTE.len() as i32) as usize]
}

/// Viridis at `t`, clamped to [0, 1] (NaN counts as 0).
pub fn colormap(t: f32) -> [u8; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (VIRIDIS.len() - 1) as f32;
    let i = (x as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f32;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    std::array::from_fn(|c| (a[c] as f32 + (b[c] as f32 - a[c] as f32) * f).round() as u8)
}

/// The `q` quantile of `values` (non-finite ones ignored), `None` for none.
fn quantile(values: &[f32], q: f64) -> Option<f32> {
    let mut s: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    let k = ((s.len() - 1) as f64 * q).round() as usize;
    let (_, v, _) = s.select_nth_unstable_by(k, f32::total_cmp);
    Some(*v)
}

/// The 99th percentile of `speeds` (non-finite ones ignored), or 1 when that is not positive,
/// so that normalising by it never divides by zero.
pub fn speed_scale(speeds: &[f32]) -> f32 {
    quantile(speeds, 0.99).filter(|v| *v > 0.0).unwrap_or(1.0)
}

/// A colouring resolved for one frame: the scale of speeds or temperatures is fixed once per
/// frame.
enum Painter<'a> {
    Material(&'a [i32]),
    /// Viridis over `(value - low) * inv_span`.
    Values {
        values: &'a [f32],
        low: f32,
        inv_span: f32,
    },
}

impl<'a> Painter<'a> {
    fn new(colouring: Colouring, materials: &'a [i32], values: &'a [f32]) -> Self {
        let (low, high) = match colouring {
            Colouring::Material => return Painter::Material(materials),
            Colouring::Speed { max } => match max {
                Some(m) if m > 0.0 && m.is_finite() => (0.0, m),
                _ => (0.0, speed_scale(values)),
            },
            Colouring::Temperature { range } => match range {
                Some((a, b)) if a.is_finite() && b.is_finite() && b > a => (a, b),
                _ => {
                    let a = quantile(values, 0.01).unwrap_or(0.0);
                    let b = quantile(values, 0.99).unwrap_or(1.0);
                    // A uniform frame sits at the bottom of the map.
                    (a, if b > a { b } else { a + 1.0 })
                }
            },
            Colouring::Damage => (0.0, 1.0),
        };
        Painter::Values {
            values,
            low,
            inv_span: 1.0 / (high - low),
        }
    }

    fn colour(&self, i: usize) -> [u8; 3] {
        match self {
            Painter::Material(m) => material_colour(m[i]),
            Painter::Values {
                values,
                low,
                inv_span,
            } => colormap((values[i] - low) * inv_span),
        }
    }
}

/// Checks the slice lengths a colouring needs; a mismatch is a caller's bug.
fn check_lengths(n: usize, values: usize, materials: usize, colouring: Colouring) {
    if colouring.reads_values() {
        assert_eq!(
            values, n,
            "{n} positions but {values} values ({colouring:?})"
        );
    } else {
        assert_eq!(
            materials, n,
            "{n} positions but {materials} material ids (colouring by material)"
        );
    }
}

/// Per-particle colours: `values[i]` is particle `i`'s speed or temperature (only read when
/// colouring by one, may then be empty otherwise), `materials[i]` its material id (only read
/// when colouring by material).
pub fn particle_colours(values: &[f32], materials: &[i32], colouring: Colouring) -> Vec<[u8; 3]> {
    let n = match colouring.reads_values() {
        true => values.len(),
        false => materials.len(),
    };
    let painter = Painter::new(colouring, materials, values);
    (0..n).map(|i| painter.colour(i)).collect()
}

/// Draws particles of the unit square (y up) as 2x2-pixel dots coloured by material.
pub fn particles_2d(positions: &[Vec2], materials: &[i32], size: u32) -> RgbImage {
    let n = positions.len().min(materials.len());
    particles_2d_by(
        &positions[..n],
        &[],
        &materials[..n],
        size,
        Colouring::Material,
    )
}

/// Draws particles of the unit square (y up) as 2x2-pixel dots coloured by material, speed or
/// temperature. Scale positions of a larger domain into the unit square first. `values` (the
/// particles' speeds or temperatures) may be empty when colouring by material, `materials`
/// when colouring by values.
///
/// # Panics
/// When the slice the colouring reads is not as long as `positions`.
pub fn particles_2d_by(
    positions: &[Vec2],
    values: &[f32],
    materials: &[i32],
    size: u32,
    colouring: Colouring,
) -> RgbImage {
    check_lengths(positions.len(), values.len(), materials.len(), colouring);
    let painter = Painter::new(colouring, materials, values);
    let mut img = RgbImage::from_pixel(size, size, Rgb(BACKGROUND));
    for (i, p) in positions.iter().enumerate() {
        let colour = Rgb(painter.colour(i));
        let px = (p.x * size as f32) as i64;
        let py = ((1.0 - p.y) * size as f32) as i64;
        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let (x, y) = (px + dx, py + dy);
            if (0..size as i64).contains(&x) && (0..size as i64).contains(&y) {
                img.put_pixel(x as u32, y as u32, colour);
            }
        }
    }
    img
}

/// Writes a PNG atomically (see [`crate::files::write_atomically`]).
pub fn save_png(img: &RgbImage, path: &Path) -> std::io::Result<()> {
    crate::files::write_atomically(path, |w| {
        img.write_to(w, image::ImageFormat::Png)
            .map_err(std::io::Error::other)
    })
}

/// An orbit camera (y up): it sits `distance` from `target`, turned `yaw` about the y axis and
/// raised `pitch` above the x-z plane, and looks at the target with perspective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Camera {
    pub target: Vec3,
    /// Radians about +y; 0 puts the eye on the +z side looking towards -z.
    pub yaw: f32,
    /// Radians of elevation; positive looks down on the target. Kept within +-89.9 degrees
    /// so that "up" stays defined.
    pub pitch: f32,
    pub distance: f32,
    /// Vertical field of view in radians.
    pub fov_y: f32,
}

impl Camera {
    /// A three-quarter view from above that fits the whole box `min..max` (its bounding
    /// sphere) in an image of the given width / height.
    pub fn framing(min: Vec3, max: Vec3, aspect: f32) -> Camera {
        let fov_y = 40f32.to_radians();
        let half_y = 0.5 * fov_y;
        let half_x = (half_y.tan() * aspect.max(1e-3)).atan();
        let radius = (0.5 * (max - min).length()).max(1e-6);
        Camera {
            target: 0.5 * (min + max),
            yaw: 35f32.to_radians(),
            pitch: 25f32.to_radians(),
            // 5% margin so that splats on the box's corners are not clipped.
            distance: 1.05 * radius / half_y.min(half_x).sin(),
            fov_y,
        }
    }

    fn clamped_pitch(&self) -> f32 {
        let limit = 89.9f32.to_radians();
        self.pitch.clamp(-limit, limit)
    }

    /// Where the camera sits.
    pub fn eye(&self) -> Vec3 {
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.clamped_pitch().sin_cos();
        self.target + self.distance * Vec3::new(cp * sy, sp, cp * cy)
    }

    /// Unit vectors (right, up, forward) of the view.
    fn basis(&self) -> (Vec3, Vec3, Vec3) {
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.clamped_pitch().sin_cos();
        let forward = -Vec3::new(cp * sy, sp, cp * cy);
        let right = forward.cross(Vec3::Y).normalize();
        (right, right.cross(forward), forward)
    }
}

/// How to see a 3D particle set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View3d {
    pub width: u32,
    pub height: u32,
    pub camera: Camera,
    /// The domain: it sets the range of depth shading (its nearest corner is brightest) and
    /// the default splat size.
    pub min: Vec3,
    pub max: Vec3,
    /// Splat radius in domain units; `None` picks half the spacing that `n` particles filling
    /// the domain would have, at most 1% of its diagonal.
    pub radius: Option<f32>,
    pub colouring: Colouring,
}

impl View3d {
    /// The default view of the domain `min..max`: a framing camera, coloured by material.
    pub fn new(min: Vec3, max: Vec3, width: u32, height: u32) -> View3d {
        View3d {
            width,
            height,
            camera: Camera::framing(min, max, width as f32 / height.max(1) as f32),
            min,
            max,
            radius: None,
            colouring: Colouring::Material,
        }
    }

    /// The default view of the unit cube in a square image.
    pub fn unit_cube(size: u32) -> View3d {
        View3d::new(Vec3::ZERO, Vec3::ONE, size, size)
    }

    /// The splat radius used for `n` particles.
    pub fn splat_radius(&self, n: usize) -> f32 {
        if let Some(r) = self.radius {
            return r;
        }
        let extent = (self.max - self.min).abs().max(Vec3::splat(1e-6));
        let spacing = (extent.x * extent.y * extent.z / n.max(1) as f32).cbrt();
        (0.5 * spacing).min(0.01 * extent.length())
    }
}

/// Renders 3D particles as depth-tested splats: each particle is a disc facing the camera
/// whose pixel radius shrinks with distance, with the depth of a sphere's front so that
/// touching splats intersect like balls. Shading needs no normals: brightness falls off with
/// depth across the domain, and pixels with nearer neighbours in the depth buffer (creases,
/// parts behind an edge) darken a little, which reads as ambient occlusion.
///
/// `values` (the particles' speeds or temperatures) may be empty when colouring by material,
/// `materials` when colouring by values.
///
/// # Panics
/// When the slice the colouring reads is not as long as `positions`.
pub fn particles_3d(
    positions: &[Vec3],
    values: &[f32],
    materials: &[i32],
    view: &View3d,
) -> RgbImage {
    check_lengths(
        positions.len(),
        values.len(),
        materials.len(),
        view.colouring,
    );
    let (w, h) = (view.width.max(1) as usize, view.height.max(1) as usize);
    let cam = view.camera;
    let (right, up, forward) = cam.basis();
    let eye = cam.eye();
    let focal = 0.5 * h as f32 / (0.5 * cam.fov_y).tan();
    let r = view.splat_radius(positions.len());
    let near_clip = 1e-4 * cam.distance.max(1e-6);
    let (cx, cy) = (0.5 * w as f32, 0.5 * h as f32);

    // Depth (distance along the view axis) and the particle that owns each pixel.
    let mut depth = vec![f32::INFINITY; w * h];
    let mut owner = vec![u32::MAX; w * h];
    for (i, p) in positions.iter().enumerate() {
        let d = *p - eye;
        let z = d.dot(forward);
        if z.is_nan() || z <= near_clip {
            continue; // behind the camera
        }
        let s = focal / z;
        let sx = cx + d.dot(right) * s;
        let sy = cy - d.dot(up) * s;
        let rad = r * s;
        let on_screen =
            (-rad..w as f32 + rad).contains(&sx) && (-rad..h as f32 + rad).contains(&sy);
        if !on_screen {
            continue; // also NaN positions
        }
        if rad < 0.75 {
            // Too small to cover a pixel centre reliably: one pixel, so nothing vanishes.
            let (x, y) = (sx as usize, sy as usize);
            if x < w && y < h && z < depth[y * w + x] {
                depth[y * w + x] = z;
                owner[y * w + x] = i as u32;
            }
            continue;
        }
        let x0 = (sx - rad).floor().max(0.0) as usize;
        let x1 = ((sx + rad).ceil() as usize).min(w - 1);
        let y0 = (sy - rad).floor().max(0.0) as usize;
        let y1 = ((sy + rad).ceil() as usize).min(h - 1);
        let inv_r2 = 1.0 / (rad * rad);
        for y in y0..=y1 {
            let dy = y as f32 + 0.5 - sy;
            let row = y * w;
            for x in x0..=x1 {
                let dx = x as f32 + 0.5 - sx;
                let q = (dx * dx + dy * dy) * inv_r2;
                if q > 1.0 {
                    continue;
                }
                let zz = z - r * (1.0 - q).sqrt();
                if zz < depth[row + x] {
                    depth[row + x] = zz;
                    owner[row + x] = i as u32;
                }
            }
        }
    }

    // Depth shading spans the domain's corners along the view axis.
    let (mut near, mut far) = (f32::INFINITY, f32::NEG_INFINITY);
    for c in 0..8 {
        let corner = Vec3::new(
            if c & 1 == 0 { view.min.x } else { view.max.x },
            if c & 2 == 0 { view.min.y } else { view.max.y },
            if c & 4 == 0 { view.min.z } else { view.max.z },
        );
        let z = (corner - eye).dot(forward);
        near = near.min(z);
        far = far.max(z);
    }
    let near = near.max(near_clip);
    let inv_span = 1.0 / (far - near).max(1e-6);

    // Ambient occlusion samples: eight directions at two radii that grow with the image.
    let step = (h.min(w) / 256).max(1) as isize;
    let samples: [(isize, isize); 8] = [
        (2, 0),
        (-2, 0),
        (0, 2),
        (0, -2),
        (1, 1),
        (-1, 1),
        (1, -1),
        (-1, -1),
    ]
    .map(|(x, y)| (x * step, y * step));
    // A neighbour closer by more than a few splat radii fully occludes; one much closer (a
    // separate object in front) does not, which avoids dark halos around silhouettes.
    let occ_full = 3.0 * r;
    let occ_cut = 0.15 * (far - near).max(1e-6);

    let painter = Painter::new(view.colouring, materials, values);
    let mut img = RgbImage::from_pixel(w as u32, h as u32, Rgb(BACKGROUND));
    for y in 0..h {
        for x in 0..w {
            let k = y * w + x;
            if owner[k] == u32::MAX {
                continue;
            }
            let z = depth[k];
            let t = ((z - near) * inv_span).clamp(0.0, 1.0);
            let mut occlusion = 0.0;
            for (sx, sy) in samples {
                let (nx, ny) = (x as isize + sx, y as isize + sy);
                if nx < 0 || ny < 0 || nx >= w as isize || ny >= h as isize {
                    continue;
                }
                let dz = z - depth[ny as usize * w + nx as usize];
                if dz > 0.0 && dz < occ_cut {
                    occlusion += (dz / occ_full).min(1.0);
                }
            }
            let shade = (1.0 - 0.6 * t) * (1.0 - 0.45 * occlusion / samples.len() as f32);
            let base = painter.colour(owner[k] as usize);
            img.put_pixel(
                x as u32,
                y as u32,
                Rgb(base.map(|c| (c as f32 * shade).round() as u8)),
            );
        }
    }
    img
}
