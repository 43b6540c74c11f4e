//! Particles that fill the inside of a closed triangle mesh (3D), read from Wavefront OBJ or STL.
//!
//! Why not voxelise the surface and flood-fill, as taichi_elements does? Because that leaks
//! through walls thinner than a voxel and adds or drops whole slabs of particles when lattice
//! points fall exactly on a face. Here the inside test is exact:
//!
//! * every lattice column (fixed y, z) is a ray along +x; its crossings with the triangles
//!   (found through a 2D grid over the triangles' (y, z) bounding boxes) give the winding
//!   number of every lattice point of the column at once (non-zero winding = inside);
//! * ties are broken by simulation of simplicity (Edelsbrunner & Mücke, "Simulation of
//!   Simplicity", ACM TOG 9(1), 1990): each query point `p` stands for `p + (e1, e2, e3)` with
//!   `e1 >> e2 >> e3 > 0` infinitesimal, so no ray passes exactly through an edge or a vertex
//!   and no point lies exactly on a face. A ray through an edge shared by two triangles
//!   crosses exactly one of them (or, where the surface folds over along x, both or neither,
//!   which adds nothing), and a point on the surface is inside exactly when moving it
//!   a hair along +x (then +y, then +z) enters the solid: the half-open rule of
//!   `Region::Box` (`min <= p < max`), for any shape;
//! * the signs are computed exactly from the f64 coordinates with Shewchuk's adaptive
//!   predicates (Shewchuk, "Adaptive Precision Floating-Point Arithmetic and Fast Robust
//!   Geometric Predicates", DCG 18, 1997; the `robust` crate), so the rule is applied the same
//!   way to both triangles of an edge and rounding never decides.
//!
//! Meshes must be watertight (every edge used once in each direction by two triangles);
//! `fill` refuses others with [`MeshError::NotWatertight`] saying which edges are open.
//! Lattice sampling follows [`seeding::fill`]: cell centres (or one jittered point per cell)
//! `spacing` apart, each standing for `spacing^3` of volume when passed to
//! `Solver3::add_positions`; Poisson-disk sampling fills the bounding box with
//! [`seeding::fill`] and keeps the inside points (use `mesh.volume() / count` as their volume).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use mpm_core::rng::rand_f32;
use mpm_core::solver::seeding::{self, Region, Sampling};
use mpm_core::solver::Sdf;
use robust::{orient2d, orient3d, Coord, Coord3D};

/// What can go wrong while reading, placing or filling a mesh. Every variant names the file
/// (or the name given to an in-memory mesh).
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("{file}: cannot read the file: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// A malformed line of an OBJ or ASCII STL file.
    #[error("{file}:{line}: expected {expected}, found {found}")]
    Parse {
        file: String,
        line: usize,
        expected: String,
        found: String,
    },
    /// A malformed file that has no line to blame (binary STL, unknown format, bad indices).
    #[error("{file}: {message}")]
    Format { file: String, message: String },
    #[error("{file}: the mesh has no triangles")]
    Empty { file: String },
    #[error("{file}: {report}")]
    NotWatertight { file: String, report: EdgeReport },
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
}

/// How the edges of a mesh are shared. Watertight: each edge is used by exactly two
/// triangles, once in each direction (so the two agree on which side is outside).
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeReport {
    /// Distinct edges.
    pub edges: usize,
    /// Edges of a single triangle: holes.
    pub boundary: usize,
    /// Edges of more than two triangles.
    pub non_manifold: usize,
    /// Edges of two triangles that run them the same way: a flipped face.
    pub misoriented: usize,
    /// The first bad edge found, as its two end points.
    pub example: Option<([f64; 3], [f64; 3])>,
}

impl EdgeReport {
    pub fn is_watertight(&self) -> bool {
        self.boundary == 0 && self.non_manifold == 0 && self.misoriented == 0
    }
}

impl fmt::Display for EdgeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_watertight() {
            return write!(f, "watertight ({} edges)", self.edges);
        }
        write!(
            f,
            "the mesh is not watertight: of {} edges, {} belong to one triangle only (holes), \
             {} to more than two triangles, {} to two triangles of the same orientation \
             (flipped faces)",
            self.edges, self.boundary, self.non_manifold, self.misoriented
        )?;
        if let Some((a, b)) = self.example {
            write!(f, "; e.g. the edge {a:?} - {b:?}")?;
        }
        Ok(())
    }
}

/// How to fill a mesh. [`FillOptions::new`] gives a regular lattice anchored at the mesh's
/// bounding-box minimum, like [`seeding::fill`] on that box.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FillOptions {
    pub spacing: f32,
    pub sampling: Sampling,
    pub seed: u32,
    /// Lattice cells are `[origin + k spacing, origin + (k + 1) spacing)` for integer `k`;
    /// `None`: the mesh's bounding-box minimum. A shared origin makes the lattices of several
    /// meshes line up (meshes that share a face then get disjoint particles).
    pub origin: Option<[f64; 3]>,
    /// Fill meshes that are not watertight anyway (the winding number is then only as
    /// meaningful as the mesh).
    pub allow_open: bool,
}

impl FillOptions {
    pub fn new(spacing: f32) -> Self {
        FillOptions {
            spacing,
            sampling: Sampling::Regular,
            seed: 0,
            origin: None,
            allow_open: false,
        }
    }
}

/// A triangle mesh with f64 vertices. Exactly coincident vertices are merged (OBJ seams and
/// STL's unshared vertices) and triangles with a repeated vertex are dropped, so the edge
/// check sees the true topology.
#[derive(Clone, Debug, PartialEq)]
pub struct TriMesh {
    name: String,
    vertices: Vec<[f64; 3]>,
    triangles: Vec<[u32; 3]>,
}

impl TriMesh {
    /// A mesh from vertices and triangles (indices into `vertices`); `name` is used in errors.
    pub fn new(
        name: impl Into<String>,
        vertices: Vec<[f64; 3]>,
        triangles: Vec<[u32; 3]>,
    ) -> Result<Self, MeshError> {
        let file = name.into();
        let mut index = HashMap::with_capacity(vertices.len());
        let mut merged: Vec<[f64; 3]> = Vec::with_capacity(vertices.len());
        let mut remap = Vec::with_capacity(vertices.len());
        for (i, v) in vertices.iter().enumerate() {
            if !v.iter().all(|c| c.is_finite()) {
                return Err(MeshError::Format {
                    file,
                    message: format!("vertex {} is not finite: {v:?}", i + 1),
                });
            }
            // `+ 0.0` turns -0.0 into 0.0 so that the two merge.
            let key = v.map(|c| (c + 0.0).to_bits());
            let id = *index.entry(key).or_insert_with(|| {
                merged.push(*v);
                (merged.len() - 1) as u32
            });
            remap.push(id);
        }
        let mut kept = Vec::with_capacity(triangles.len());
        for (t, tri) in triangles.iter().enumerate() {
            let mut ids = [0u32; 3];
            for (id, &v) in ids.iter_mut().zip(tri) {
                *id = *remap.get(v as usize).ok_or_else(|| MeshError::Format {
                    file: file.clone(),
                    message: format!(
                        "triangle {} refers to vertex {} but there are {} vertices",
                        t + 1,
                        v as u64 + 1,
                        vertices.len()
                    ),
                })?;
            }
            if ids[0] != ids[1] && ids[1] != ids[2] && ids[2] != ids[0] {
                kept.push(ids);
            }
        }
        if kept.is_empty() {
            return Err(MeshError::Empty { file });
        }
        Ok(TriMesh {
            name: file,
            vertices: merged,
            triangles: kept,
        })
    }

    /// Reads an `.obj` or `.stl` file (chosen by the extension, any case).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, MeshError> {
        let path = path.as_ref();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("obj") => Self::load_obj(path),
            Some("stl") => Self::load_stl(path),
            _ => Err(MeshError::Format {
                file: path.display().to_string(),
                message: "unknown mesh format: expected a file ending in .obj or .stl".into(),
            }),
        }
    }

    pub fn load_obj(path: impl AsRef<Path>) -> Result<Self, MeshError> {
        let (file, bytes) = read(path.as_ref())?;
        Self::parse_obj(&String::from_utf8_lossy(&bytes), file)
    }

    pub fn load_stl(path: impl AsRef<Path>) -> Result<Self, MeshError> {
        let (file, bytes) = read(path.as_ref())?;
        Self::parse_stl(&bytes, file)
    }

    /// Parses Wavefront OBJ text: `v x y z` and `f` with `v`, `v/vt`, `v/vt/vn` or `v//vn`
    /// references (1-based, or negative: relative to the last vertex read); polygons are
    /// fan-triangulated; other statements are ignored.
    pub fn parse_obj(text: &str, name: impl Into<String>) -> Result<Self, MeshError> {
        let file = name.into();
        let mut vertices: Vec<[f64; 3]> = Vec::new();
        let mut triangles = Vec::new();
        let mut face = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("");
            let mut tokens = content.split_whitespace();
            match tokens.next() {
                Some("v") => {
                    let mut p = [0.0; 3];
                    for (c, axis) in p.iter_mut().zip(["x", "y", "z"]) {
                        *c = number(tokens.next(), &file, line, axis)?;
                    }
                    vertices.push(p);
                }
                Some("f") => {
                    face.clear();
                    for token in tokens {
                        face.push(obj_reference(token, vertices.len(), &file, line)?);
                    }
                    if face.len() < 3 {
                        return Err(MeshError::Parse {
                            file,
                            line,
                            expected: "a face of at least 3 vertices".into(),
                            found: format!("{} vertices", face.len()),
                        });
                    }
                    for k in 1..face.len() - 1 {
                        triangles.push([face[0], face[k], face[k + 1]]);
                    }
                }
                _ => {}
            }
        }
        Self::new(file, vertices, triangles)
    }

    /// Parses STL. Binary files may begin with the word `solid` too, so the format is decided
    /// by size: binary when the file is exactly `84 + 50 n` bytes for the `n` triangles its
    /// header announces, ASCII otherwise (then it must begin with `solid`).
    pub fn parse_stl(bytes: &[u8], name: impl Into<String>) -> Result<Self, MeshError> {
        let file = name.into();
        // A byte-order mark can only start an ASCII file; a binary one is sized with it.
        let text_bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let announced = bytes
            .get(80..84)
            .map(|n| u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as u64);
        if let Some(n) = announced {
            if 84 + 50 * n == bytes.len() as u64 {
                return Self::parse_binary_stl(bytes, file);
            }
        }
        let size_note = match announced {
            Some(n) => format!(
                "as binary STL its header announces {n} triangles, so it would be {} bytes, \
                 not {}",
                84 + 50 * n,
                bytes.len()
            ),
            None => format!(
                "it is {} bytes, too short for a binary STL (84 bytes at least)",
                bytes.len()
            ),
        };
        let starts_solid = text_bytes
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .and_then(|start| text_bytes.get(start..start + 5))
            .is_some_and(|w| w.eq_ignore_ascii_case(b"solid"));
        if !starts_solid {
            return Err(MeshError::Format {
                file,
                message: format!(
                    "not an STL file: it does not begin with `solid`, and {size_note}"
                ),
            });
        }
        let text = match std::str::from_utf8(text_bytes) {
            Ok(text) if !text.contains('\0') => text,
            _ => {
                return Err(MeshError::Format {
                    file,
                    message: format!(
                        "begins with `solid` but is not text (a damaged binary STL?): \
                         {size_note}"
                    ),
                })
            }
        };
        Self::parse_ascii_stl(text, file)
    }

    fn parse_binary_stl(bytes: &[u8], file: String) -> Result<Self, MeshError> {
        let body = bytes.get(84..).unwrap_or(&[]);
        let mut vertices = Vec::with_capacity(body.len() / 50 * 3);
        let mut triangles = Vec::with_capacity(body.len() / 50);
        for (t, record) in body.chunks_exact(50).enumerate() {
            // 12 bytes of normal (ignored: the vertex order is what counts), 3 vertices of
            // 3 little-endian f32, 2 bytes of attributes.
            for v in 0..3 {
                let mut p = [0.0f64; 3];
                for (a, c) in p.iter_mut().enumerate() {
                    let o = 12 + 12 * v + 4 * a;
                    let x = f32::from_le_bytes([
                        record[o],
                        record[o + 1],
                        record[o + 2],
                        record[o + 3],
                    ]);
                    if !x.is_finite() {
                        return Err(MeshError::Format {
                            file,
                            message: format!(
                                "binary STL triangle {} has a coordinate that is not finite \
                                 ({x})",
                                t + 1
                            ),
                        });
                    }
                    *c = x as f64;
                }
                vertices.push(p);
            }
            let base = 3 * t as u32;
            triangles.push([base, base + 1, base + 2]);
        }
        Self::new(file, vertices, triangles)
    }

    fn parse_ascii_stl(text: &str, file: String) -> Result<Self, MeshError> {
        let mut tokens = Tokens {
            items: text
                .lines()
                .enumerate()
                .flat_map(|(i, l)| l.split_whitespace().map(move |t| (i + 1, t)))
                .collect(),
            pos: 0,
            lines: text.lines().count().max(1),
            file: &file,
        };
        let mut vertices = Vec::new();
        let mut triangles = Vec::new();
        let mut polygon = Vec::new();
        let line = tokens.keyword("solid")?;
        tokens.skip_line(line);
        loop {
            match tokens.next() {
                Some((line, t)) if t.eq_ignore_ascii_case("facet") => {
                    if tokens.peek_is("normal") {
                        tokens.next();
                        for axis in ["normal x", "normal y", "normal z"] {
                            tokens.number(line, axis)?;
                        }
                    }
                    tokens.keyword("outer")?;
                    tokens.keyword("loop")?;
                    polygon.clear();
                    while tokens.peek_is("vertex") {
                        let line = tokens.keyword("vertex")?;
                        let mut p = [0.0; 3];
                        for (c, axis) in p.iter_mut().zip(["x", "y", "z"]) {
                            *c = tokens.number(line, axis)?;
                        }
                        polygon.push(vertices.len() as u32);
                        vertices.push(p);
                    }
                    if polygon.len() < 3 {
                        return Err(tokens.error("`vertex` (a facet has 3 vertices)"));
                    }
                    tokens.keyword("endloop")?;
                    tokens.keyword("endfacet")?;
                    for k in 1..polygon.len() - 1 {
                        triangles.push([polygon[0], polygon[k], polygon[k + 1]]);
                    }
                }
                Some((line, t)) if t.eq_ignore_ascii_case("endsolid") => {
                    tokens.skip_line(line);
                    if tokens.at_end() {
                        break;
                    }
                    // Several solids in one file: read on.
                    let line = tokens.keyword("solid")?;
                    tokens.skip_line(line);
                }
                Some(_) => {
                    tokens.back();
                    return Err(tokens.error("`facet` or `endsolid`"));
                }
                None => return Err(tokens.error("`facet` or `endsolid`")),
            }
        }
        Self::new(file, vertices, triangles)
    }

    /// The name used in errors (the file's path for loaded meshes).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn vertices(&self) -> &[[f64; 3]] {
        &self.vertices
    }

    pub fn triangles(&self) -> &[[u32; 3]] {
        &self.triangles
    }

    /// The bounding box `(min, max)` of the vertices.
    pub fn bounds(&self) -> ([f64; 3], [f64; 3]) {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for v in &self.vertices {
            for a in 0..3 {
                lo[a] = lo[a].min(v[a]);
                hi[a] = hi[a].max(v[a]);
            }
        }
        (lo, hi)
    }

    /// The enclosed volume by the divergence theorem: positive when the triangles run
    /// counter-clockwise seen from outside (outward normals), exact up to rounding.
    pub fn volume(&self) -> f64 {
        self.triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| self.vertices[i as usize]);
                dot(a, cross(b, c))
            })
            .sum::<f64>()
            / 6.0
    }

    /// How the edges are shared; see [`EdgeReport`].
    pub fn edge_report(&self) -> EdgeReport {
        // Per undirected edge (low, high): uses as low -> high and as high -> low.
        let mut uses: HashMap<(u32, u32), (u32, u32)> = HashMap::new();
        for t in &self.triangles {
            for k in 0..3 {
                let (a, b) = (t[k], t[(k + 1) % 3]);
                let entry = uses.entry((a.min(b), a.max(b))).or_insert((0, 0));
                if a < b {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                }
            }
        }
        let mut report = EdgeReport {
            edges: uses.len(),
            boundary: 0,
            non_manifold: 0,
            misoriented: 0,
            example: None,
        };
        let mut bad: Vec<(u32, u32)> = Vec::new();
        for (&edge, &(forward, backward)) in &uses {
            match forward + backward {
                1 => report.boundary += 1,
                2 if forward == 1 => continue,
                2 => report.misoriented += 1,
                _ => report.non_manifold += 1,
            }
            bad.push(edge);
        }
        // The smallest bad edge, so that the report does not depend on hashing.
        report.example = bad
            .into_iter()
            .min()
            .map(|(a, b)| (self.vertices[a as usize], self.vertices[b as usize]));
        report
    }

    /// `Ok` when every edge is shared by exactly two triangles with opposite orientations.
    pub fn check_watertight(&self) -> Result<(), MeshError> {
        let report = self.edge_report();
        if report.is_watertight() {
            Ok(())
        } else {
            Err(MeshError::NotWatertight {
                file: self.name.clone(),
                report,
            })
        }
    }

    /// `p -> p * scale + offset`, per axis. A mirroring scale (negative product) also reverses
    /// the triangles so that they keep facing outwards.
    pub fn transform(&mut self, scale: [f64; 3], offset: [f64; 3]) -> Result<(), MeshError> {
        if !(scale.iter().all(|s| s.is_finite() && *s != 0.0)
            && offset.iter().all(|o| o.is_finite()))
        {
            return Err(MeshError::InvalidParameter(format!(
                "mesh `{}`: scale {scale:?} must be finite and non-zero, offset {offset:?} finite",
                self.name
            )));
        }
        for v in &mut self.vertices {
            for a in 0..3 {
                v[a] = v[a] * scale[a] + offset[a];
            }
        }
        if scale[0] * scale[1] * scale[2] < 0.0 {
            for t in &mut self.triangles {
                t.swap(1, 2);
            }
        }
        Ok(())
    }

    /// Scales uniformly (keeping the proportions) and translates so that the mesh's bounding
    /// box is as large as fits in `[min, max]`, centred in it.
    pub fn fit_into(&mut self, min: [f64; 3], max: [f64; 3]) -> Result<(), MeshError> {
        if !(0..3).all(|a| min[a].is_finite() && max[a].is_finite() && min[a] < max[a]) {
            return Err(MeshError::InvalidParameter(format!(
                "mesh `{}`: the box {min:?} - {max:?} is empty or not finite",
                self.name
            )));
        }
        let (lo, hi) = self.bounds();
        let scale = (0..3)
            .filter(|&a| hi[a] > lo[a])
            .map(|a| (max[a] - min[a]) / (hi[a] - lo[a]))
            .fold(f64::INFINITY, f64::min);
        if !scale.is_finite() {
            return Err(MeshError::InvalidParameter(format!(
                "mesh `{}` is a single point and cannot be fitted into a box",
                self.name
            )));
        }
        let offset: [f64; 3] =
            std::array::from_fn(|a| 0.5 * (min[a] + max[a]) - scale * 0.5 * (lo[a] + hi[a]));
        self.transform([scale; 3], offset)
    }

    /// The winding number of `p` (perturbed as in the module documentation): 1 inside a mesh
    /// with outward normals, 0 outside. Looks at every triangle; `fill` uses a grid.
    pub fn winding_number(&self, p: [f64; 3]) -> i32 {
        let tris = self.prepare();
        tris.iter()
            .filter(|t| t.covers([p[1], p[2]]))
            .map(|t| if t.left_of_or_at(p) { t.winding } else { 0 })
            .sum()
    }

    /// Whether `p` is inside: a non-zero winding number, with the half-open tie rule.
    pub fn contains(&self, p: [f64; 3]) -> bool {
        self.winding_number(p) != 0
    }

    /// Positions filling the inside, `spacing` apart (see [`FillOptions::new`]).
    pub fn fill(
        &self,
        spacing: f32,
        sampling: Sampling,
        seed: u32,
    ) -> Result<Vec<[f32; 3]>, MeshError> {
        self.fill_with(&FillOptions {
            sampling,
            seed,
            ..FillOptions::new(spacing)
        })
    }

    /// Positions filling the inside, as `options` say. The order is that of
    /// [`seeding::fill`]: x fastest, then y, then z (Poisson-disk: its own order).
    pub fn fill_with(&self, options: &FillOptions) -> Result<Vec<[f32; 3]>, MeshError> {
        let spacing = options.spacing;
        if !(spacing.is_finite() && spacing > 0.0) {
            return Err(MeshError::InvalidParameter(format!(
                "particle spacing {spacing} must be finite and > 0"
            )));
        }
        if !options.allow_open {
            self.check_watertight()?;
        }
        let (lo, hi) = self.bounds();
        let locator = Locator::new(self.prepare());
        if options.sampling == Sampling::PoissonDisk {
            let region = Region::Box {
                min: lo.map(|c| c as f32),
                max: hi.map(|c| c as f32),
            };
            let points = seeding::fill(&region, spacing, Sampling::PoissonDisk, options.seed)
                .map_err(|e| MeshError::InvalidParameter(format!("mesh `{}`: {e}", self.name)))?;
            return Ok(points
                .into_iter()
                .filter(|p| locator.winding(p.map(|c| c as f64)) != 0)
                .collect());
        }
        let lattice = Lattice::new(options.origin.unwrap_or(lo), spacing as f64, lo, hi).map_err(
            |message| MeshError::InvalidParameter(format!("mesh `{}`: {message}", self.name)),
        )?;
        Ok(match options.sampling {
            Sampling::Jittered => jittered(&locator, &lattice, options.seed),
            _ => regular(&locator, &lattice),
        })
    }

    /// The signed distance to the surface (negative inside) on a lattice `spacing` apart
    /// reaching `margin` beyond the mesh's bounds, in the mesh's own coordinates: a
    /// distance-field collider (`Solver::add_sdf`, `Shape::Sdf`). Within `margin` of the
    /// surface the distance is exact (nearest triangle, in f64, rounded to f32) and its sign
    /// the exact inside test of [`fill`](Self::fill); farther away it is clamped to
    /// `+-margin`, since a collider needs only the distance near its surface.
    pub fn signed_distance(&self, spacing: f64, margin: f64) -> Result<Sdf, MeshError> {
        if !(spacing.is_finite() && spacing > 0.0 && margin.is_finite() && margin >= spacing) {
            return Err(MeshError::InvalidParameter(format!(
                "mesh `{}`: distance lattice spacing {spacing} and margin {margin}: both \
                 finite, spacing > 0 and margin >= spacing",
                self.name
            )));
        }
        self.check_watertight()?;
        let (lo, hi) = self.bounds();
        let origin = lo.map(|c| c - margin);
        let dims: [usize; 3] =
            std::array::from_fn(|a| ((hi[a] - lo[a] + 2.0 * margin) / spacing).ceil() as usize + 1);
        let total = dims.iter().map(|&n| n as u128).product::<u128>();
        if total > 1 << 24 {
            return Err(MeshError::InvalidParameter(format!(
                "mesh `{}`: a distance lattice of {dims:?} samples at spacing {spacing} is over \
                 2^24; use a coarser one",
                self.name
            )));
        }
        let at = |a: usize, k: usize| origin[a] + k as f64 * spacing;
        let index = |k: [usize; 3]| k[0] + dims[0] * (k[1] + dims[1] * k[2]);
        // Unsigned distances, each triangle updating the samples within `margin` of its box.
        let mut distance = vec![margin; total as usize];
        for t in &self.triangles {
            let [a, b, c] = t.map(|i| self.vertices[i as usize]);
            let range = |axis: usize| {
                let low = a[axis].min(b[axis]).min(c[axis]) - margin - origin[axis];
                let high = a[axis].max(b[axis]).max(c[axis]) + margin - origin[axis];
                let first = (low / spacing).floor().max(0.0) as usize;
                let last = ((high / spacing).ceil() as usize).min(dims[axis] - 1);
                first..=last
            };
            for kz in range(2) {
                for ky in range(1) {
                    for kx in range(0) {
                        let p = [at(0, kx), at(1, ky), at(2, kz)];
                        let d = distance_to_triangle(p, a, b, c);
                        let slot = &mut distance[index([kx, ky, kz])];
                        *slot = slot.min(d);
                    }
                }
            }
        }
        // Signs, a lattice column at a time.
        let locator = Locator::new(self.prepare());
        let xs: Vec<f64> = (0..dims[0]).map(|k| at(0, k)).collect();
        let mut delta = vec![0i32; dims[0] + 1];
        let mut inside = vec![false; dims[0]];
        for kz in 0..dims[2] {
            for ky in 0..dims[1] {
                column_inside(&locator, &xs, at(1, ky), at(2, kz), &mut delta, &mut inside);
                for (kx, &is_inside) in inside.iter().enumerate() {
                    if is_inside {
                        let d = &mut distance[index([kx, ky, kz])];
                        *d = -*d;
                    }
                }
            }
        }
        Ok(Sdf {
            origin: origin.map(|c| c as f32),
            spacing: spacing as f32,
            dims: dims.map(|n| n as u32),
            values: distance.into_iter().map(|d| d as f32).collect(),
        })
    }

    /// The triangles as the inside test needs them; those seen edge-on along x are dropped
    /// (a perturbed ray never meets them).
    fn prepare(&self) -> Vec<Tri> {
        self.triangles
            .iter()
            .filter_map(|t| {
                let [a, b, c] = t.map(|i| self.vertices[i as usize]);
                let o = orient2d(yz(a), yz(b), yz(c));
                if o == 0.0 {
                    return None;
                }
                let n = cross(sub(b, a), sub(c, a));
                Some(Tri {
                    a,
                    b,
                    c,
                    sign: if o > 0.0 { 1.0 } else { -1.0 },
                    // The x normal is `o`: entering (normal towards -x) counts +1.
                    winding: if o > 0.0 { -1 } else { 1 },
                    normal: n,
                    lo: [a[1].min(b[1]).min(c[1]), a[2].min(b[2]).min(c[2])],
                    hi: [a[1].max(b[1]).max(c[1]), a[2].max(b[2]).max(c[2])],
                })
            })
            .collect()
    }
}

/// A triangle whose (y, z) projection has non-zero area.
struct Tri {
    a: [f64; 3],
    b: [f64; 3],
    c: [f64; 3],
    /// The sign of the projection's orientation (= of the normal's x).
    sign: f64,
    /// What crossing it adds to the winding number of the points beyond it.
    winding: i32,
    /// The (unnormalised, rounded) normal, for a first guess of the crossing.
    normal: [f64; 3],
    lo: [f64; 2],
    hi: [f64; 2],
}

impl Tri {
    /// Whether the ray along x through the perturbed `q = (y, z)` crosses the triangle: `q` is
    /// strictly on the inner side of all three projected edges.
    fn covers(&self, q: [f64; 2]) -> bool {
        if q[0] < self.lo[0] || q[0] > self.hi[0] || q[1] < self.lo[1] || q[1] > self.hi[1] {
            return false;
        }
        let (a, b, c) = (pair(self.a), pair(self.b), pair(self.c));
        let s = self.sign as i8;
        orient2d_sos(a, b, q) == s && orient2d_sos(b, c, q) == s && orient2d_sos(c, a, q) == s
    }

    /// Whether the crossing lies at or before `p` along x (then the perturbed `p` is past it).
    /// `orient3d(a, b, c, p)` is `-(p.x - crossing.x) * orient2d(a, b, c)` in the (y, z)
    /// projection, so the sign is exact.
    fn left_of_or_at(&self, p: [f64; 3]) -> bool {
        orient3d(xyz(self.a), xyz(self.b), xyz(self.c), xyz(p)) * self.sign <= 0.0
    }

    /// The rounded x of the crossing at `(y, z)`: only a first guess.
    fn crossing(&self, y: f64, z: f64) -> f64 {
        let n = self.normal;
        self.a[0] - (n[1] * (y - self.a[1]) + n[2] * (z - self.a[2])) / n[0]
    }
}

/// The sign of `orient2d(p, q, r)` with `r` perturbed to `r + (e, e^2)`: the exact sign when
/// it is not zero, else that of the first non-zero perturbation term. Never zero for `p != q`,
/// and exactly opposite for the reversed edge, so shared edges are decided consistently.
fn orient2d_sos(p: [f64; 2], q: [f64; 2], r: [f64; 2]) -> i8 {
    let d = orient2d(c2(p), c2(q), c2(r));
    // d(r + (e, e^2)) = d + (p.v - q.v) e + (q.u - p.u) e^2.
    let tie = if d != 0.0 {
        d
    } else if p[1] != q[1] {
        p[1] - q[1]
    } else {
        q[0] - p[0]
    };
    if tie > 0.0 {
        1
    } else if tie < 0.0 {
        -1
    } else {
        0
    }
}

/// The triangles binned by their (y, z) bounding boxes on a uniform grid.
struct Locator {
    tris: Vec<Tri>,
    lo: [f64; 2],
    scale: [f64; 2],
    dims: [usize; 2],
    /// Compressed rows: the triangles of cell `i` are `items[start[i]..start[i + 1]]`.
    start: Vec<usize>,
    items: Vec<u32>,
}

impl Locator {
    fn new(tris: Vec<Tri>) -> Self {
        let mut lo = [f64::INFINITY; 2];
        let mut hi = [f64::NEG_INFINITY; 2];
        for t in &tris {
            for a in 0..2 {
                lo[a] = lo[a].min(t.lo[a]);
                hi[a] = hi[a].max(t.hi[a]);
            }
        }
        // About one cell per triangle, square-ish cells.
        let extent = [(hi[0] - lo[0]).max(0.0), (hi[1] - lo[1]).max(0.0)];
        let n = (tris.len() as f64).max(1.0);
        let area = extent[0] * extent[1];
        let dims: [usize; 2] = if area > 0.0 {
            let h = (area / n).sqrt();
            extent.map(|e| ((e / h).ceil() as usize).clamp(1, 4096))
        } else {
            [1, 1]
        };
        let scale: [f64; 2] = std::array::from_fn(|a| {
            if extent[a] > 0.0 {
                dims[a] as f64 / extent[a]
            } else {
                0.0
            }
        });
        let mut locator = Locator {
            tris: Vec::new(),
            lo,
            scale,
            dims,
            start: vec![0; dims[0] * dims[1] + 1],
            items: Vec::new(),
        };
        // Two passes: count, then place.
        let ranges: Vec<[usize; 4]> = tris
            .iter()
            .map(|t| {
                [
                    locator.cell(0, t.lo[0]),
                    locator.cell(0, t.hi[0]),
                    locator.cell(1, t.lo[1]),
                    locator.cell(1, t.hi[1]),
                ]
            })
            .collect();
        for r in &ranges {
            for j in r[2]..=r[3] {
                for i in r[0]..=r[1] {
                    locator.start[j * dims[0] + i + 1] += 1;
                }
            }
        }
        for k in 1..locator.start.len() {
            locator.start[k] += locator.start[k - 1];
        }
        let mut fill = locator.start.clone();
        locator.items = vec![0; locator.start[locator.start.len() - 1]];
        for (t, r) in ranges.iter().enumerate() {
            for j in r[2]..=r[3] {
                for i in r[0]..=r[1] {
                    let c = j * dims[0] + i;
                    locator.items[fill[c]] = t as u32;
                    fill[c] += 1;
                }
            }
        }
        locator.tris = tris;
        locator
    }

    /// The cell of coordinate `v` on axis `a`; monotone in `v`, so a triangle whose box
    /// contains a point is binned in that point's cell.
    fn cell(&self, a: usize, v: f64) -> usize {
        let t = ((v - self.lo[a]) * self.scale[a]).floor();
        if t >= 0.0 {
            (t as usize).min(self.dims[a] - 1)
        } else {
            0
        }
    }

    /// The triangles crossed by the perturbed ray along x through `q = (y, z)`.
    fn crossed(&self, q: [f64; 2]) -> impl Iterator<Item = &Tri> + '_ {
        let c = self.cell(1, q[1]) * self.dims[0] + self.cell(0, q[0]);
        let items = self
            .items
            .get(self.start[c]..self.start[c + 1])
            .unwrap_or(&[]);
        items
            .iter()
            .map(|&t| &self.tris[t as usize])
            .filter(move |t| t.covers(q))
    }

    fn winding(&self, p: [f64; 3]) -> i32 {
        self.crossed([p[1], p[2]])
            .map(|t| if t.left_of_or_at(p) { t.winding } else { 0 })
            .sum()
    }
}

/// The lattice cells that cover a bounding box: cell `k` (per axis) is
/// `[origin + k spacing, origin + (k + 1) spacing)` for `k` in `first..first + count`.
struct Lattice {
    origin: [f64; 3],
    spacing: f64,
    first: [i64; 3],
    count: [usize; 3],
}

impl Lattice {
    fn new(origin: [f64; 3], spacing: f64, lo: [f64; 3], hi: [f64; 3]) -> Result<Self, String> {
        if !origin.iter().all(|c| c.is_finite()) {
            return Err(format!("lattice origin {origin:?} is not finite"));
        }
        let mut first = [0i64; 3];
        let mut count = [0usize; 3];
        for a in 0..3 {
            let k0 = ((lo[a] - origin[a]) / spacing).floor();
            let k1 = ((hi[a] - origin[a]) / spacing).ceil().max(k0 + 1.0);
            if !(k0.abs() < 1e15 && k1.abs() < 1e15) {
                return Err(format!(
                    "lattice of spacing {spacing} from {origin:?} is too far or too fine"
                ));
            }
            first[a] = k0 as i64;
            count[a] = (k1 - k0) as usize;
        }
        let total = count.iter().map(|&n| n as u128).product::<u128>();
        if total > 1 << 32 {
            return Err(format!(
                "spacing {spacing} needs {total} lattice cells (more than 2^32)"
            ));
        }
        Ok(Lattice {
            origin,
            spacing,
            first,
            count,
        })
    }

    /// Coordinate on axis `a` of offset `t` in [0, 1) into the `k`-th covering cell.
    fn at(&self, a: usize, k: usize, t: f64) -> f64 {
        self.origin[a] + ((self.first[a] + k as i64) as f64 + t) * self.spacing
    }
}

/// Cell centres, column by column: the crossings of each column's ray, each located exactly
/// among the column's points, give all the points' winding numbers by a prefix sum.
fn regular(locator: &Locator, lattice: &Lattice) -> Vec<[f32; 3]> {
    let [nx, ny, nz] = lattice.count;
    let xs: Vec<f64> = (0..nx).map(|k| lattice.at(0, k, 0.5)).collect();
    let mut delta = vec![0i32; nx + 1];
    let mut inside = vec![false; nx];
    let mut out = Vec::new();
    for kz in 0..nz {
        let z = lattice.at(2, kz, 0.5);
        for ky in 0..ny {
            let y = lattice.at(1, ky, 0.5);
            column_inside(locator, &xs, y, z, &mut delta, &mut inside);
            for (&x, _) in xs.iter().zip(&inside).filter(|(_, &i)| i) {
                out.push([x as f32, y as f32, z as f32]);
            }
        }
    }
    out
}

/// Which points `(xs[k], y, z)` of a lattice column (`xs` ascending) lie inside: the
/// crossings of the column's ray, each located exactly among the points, give all their
/// winding numbers by a prefix sum. `delta` is scratch of `xs.len() + 1` zeros (left so).
fn column_inside(
    locator: &Locator,
    xs: &[f64],
    y: f64,
    z: f64,
    delta: &mut [i32],
    inside: &mut [bool],
) {
    let mut any = false;
    for t in locator.crossed([y, z]) {
        delta[first_past(t, xs, y, z)] += t.winding;
        any = true;
    }
    let mut w = 0;
    for (k, flag) in inside.iter_mut().enumerate() {
        if any {
            w += delta[k];
        }
        *flag = w != 0;
    }
    if any {
        delta.fill(0);
    }
}

/// The distance from `p` to the triangle `abc`: to its closest point, found by the region
/// of the triangle's plane `p` projects into (Ericson, "Real-Time Collision Detection",
/// 2005, section 5.1.5).
fn distance_to_triangle(p: [f64; 3], a: [f64; 3], b: [f64; 3], c: [f64; 3]) -> f64 {
    let dot = |u: [f64; 3], v: [f64; 3]| u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
    let along =
        |o: [f64; 3], d: [f64; 3], t: f64| [o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2]];
    let (ab, ac, ap) = (sub(b, a), sub(c, a), sub(p, a));
    let (d1, d2) = (dot(ab, ap), dot(ac, ap));
    let closest = if d1 <= 0.0 && d2 <= 0.0 {
        a
    } else {
        let bp = sub(p, b);
        let (d3, d4) = (dot(ab, bp), dot(ac, bp));
        let cp = sub(p, c);
        let (d5, d6) = (dot(ab, cp), dot(ac, cp));
        let vc = d1 * d4 - d3 * d2;
        let vb = d5 * d2 - d1 * d6;
        let va = d3 * d6 - d5 * d4;
        if d3 >= 0.0 && d4 <= d3 {
            b
        } else if d6 >= 0.0 && d5 <= d6 {
            c
        } else if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
            along(a, ab, d1 / (d1 - d3))
        } else if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
            along(a, ac, d2 / (d2 - d6))
        } else if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
            along(b, sub(c, b), (d4 - d3) / ((d4 - d3) + (d5 - d6)))
        } else {
            let denom = 1.0 / (va + vb + vc);
            let (v, w) = (vb * denom, vc * denom);
            [
                a[0] + ab[0] * v + ac[0] * w,
                a[1] + ab[1] * v + ac[1] * w,
                a[2] + ab[2] * v + ac[2] * w,
            ]
        }
    };
    let d = sub(p, closest);
    dot(d, d).sqrt()
}

/// The first index of `xs` (ascending) whose point is at or past the crossing with `t`;
/// `xs.len()` if none. The rounded crossing is a guess, checked and if need be corrected by a
/// binary search on the exact predicate.
fn first_past(t: &Tri, xs: &[f64], y: f64, z: f64) -> usize {
    let past = |i: usize| t.left_of_or_at([xs[i], y, z]);
    let n = xs.len();
    let x = t.crossing(y, z);
    if x.is_finite() && n > 0 {
        let step = xs.get(1).map_or(1.0, |x1| x1 - xs[0]);
        let guess = ((x - xs[0]) / step).ceil().clamp(0.0, n as f64) as usize;
        if (guess == 0 || !past(guess - 1)) && (guess == n || past(guess)) {
            return guess;
        }
    }
    // Binary search for the first `past` (monotone in i).
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if past(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// One random point per lattice cell, with the random stream of [`seeding::fill`]
/// (`rand_f32(seed, 3 cell + axis)`, cells numbered x fastest).
fn jittered(locator: &Locator, lattice: &Lattice, seed: u32) -> Vec<[f32; 3]> {
    let [nx, ny, nz] = lattice.count;
    let mut out = Vec::new();
    let mut cell = 0u32;
    for kz in 0..nz {
        for ky in 0..ny {
            for kx in 0..nx {
                let r = |a: u32| rand_f32(seed, cell.wrapping_mul(3).wrapping_add(a)) as f64;
                let p = [
                    lattice.at(0, kx, r(0)),
                    lattice.at(1, ky, r(1)),
                    lattice.at(2, kz, r(2)),
                ];
                if locator.winding(p) != 0 {
                    out.push(p.map(|c| c as f32));
                }
                cell = cell.wrapping_add(1);
            }
        }
    }
    out
}

/// A whitespace-separated token stream with line numbers, for ASCII STL.
struct Tokens<'a> {
    items: Vec<(usize, &'a str)>,
    pos: usize,
    lines: usize,
    file: &'a str,
}

impl<'a> Tokens<'a> {
    fn next(&mut self) -> Option<(usize, &'a str)> {
        let item = self.items.get(self.pos).copied();
        if item.is_some() {
            self.pos += 1;
        }
        item
    }

    fn back(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn at_end(&self) -> bool {
        self.pos >= self.items.len()
    }

    fn peek_is(&self, keyword: &str) -> bool {
        self.items
            .get(self.pos)
            .is_some_and(|(_, t)| t.eq_ignore_ascii_case(keyword))
    }

    fn skip_line(&mut self, line: usize) {
        while self.items.get(self.pos).is_some_and(|(l, _)| *l == line) {
            self.pos += 1;
        }
    }

    /// An error at the current token.
    fn error(&self, expected: &str) -> MeshError {
        let (line, found) = match self.items.get(self.pos) {
            Some((line, t)) => (*line, format!("`{t}`")),
            None => (self.lines, "the end of the file".to_string()),
        };
        MeshError::Parse {
            file: self.file.to_string(),
            line,
            expected: expected.to_string(),
            found,
        }
    }

    /// Consumes `keyword` (any case) and returns its line.
    fn keyword(&mut self, keyword: &str) -> Result<usize, MeshError> {
        match self.items.get(self.pos) {
            Some((line, t)) if t.eq_ignore_ascii_case(keyword) => {
                self.pos += 1;
                Ok(*line)
            }
            _ => Err(self.error(&format!("`{keyword}`"))),
        }
    }

    /// A number on line `line` (STL is line-oriented: a short line is an error there).
    fn number(&mut self, line: usize, what: &str) -> Result<f64, MeshError> {
        let token = match self.items.get(self.pos) {
            Some((l, t)) if *l == line => {
                self.pos += 1;
                Some(*t)
            }
            _ => None,
        };
        number(token, self.file, line, what)
    }
}

/// A finite number, or an error naming the line and what was expected.
fn number(token: Option<&str>, file: &str, line: usize, what: &str) -> Result<f64, MeshError> {
    let parsed = token.map(|t| (t, t.parse::<f64>()));
    match parsed {
        Some((_, Ok(x))) if x.is_finite() => Ok(x),
        _ => Err(MeshError::Parse {
            file: file.to_string(),
            line,
            expected: format!("a finite number ({what})"),
            found: token.map_or("the end of the line".to_string(), |t| format!("`{t}`")),
        }),
    }
}

/// One OBJ face reference (`v`, `v/vt`, `v/vt/vn`, `v//vn`) resolved to a 0-based vertex.
fn obj_reference(token: &str, vertices: usize, file: &str, line: usize) -> Result<u32, MeshError> {
    let parts: Vec<&str> = token.split('/').collect();
    let well_formed = parts.len() <= 3
        && parts
            .iter()
            .enumerate()
            .all(|(k, p)| (k > 0 && p.is_empty()) || (!p.is_empty() && p.parse::<i64>().is_ok()));
    if !well_formed {
        return Err(MeshError::Parse {
            file: file.to_string(),
            line,
            expected: "a face vertex `v`, `v/vt`, `v/vt/vn` or `v//vn` (integer indices)".into(),
            found: format!("`{token}`"),
        });
    }
    let v: i64 = parts[0].parse().unwrap_or(0);
    let n = vertices as i64;
    let index = if v > 0 { v - 1 } else { n + v };
    if v == 0 || index < 0 || index >= n {
        return Err(MeshError::Parse {
            file: file.to_string(),
            line,
            expected: if n == 0 {
                "a vertex index, but no vertex (`v`) was given before this face".to_string()
            } else {
                format!("a vertex index from 1 to {n} or from -1 to -{n}")
            },
            found: format!("`{token}`"),
        });
    }
    Ok(index as u32)
}

fn read(path: &Path) -> Result<(String, Vec<u8>), MeshError> {
    let file = path.display().to_string();
    match crate::files::read_bounded(path, crate::files::MESH_LIMIT, "mesh") {
        Ok(bytes) => Ok((file, bytes)),
        Err(source) => Err(MeshError::Io { file, source }),
    }
}

fn yz(p: [f64; 3]) -> Coord<f64> {
    Coord { x: p[1], y: p[2] }
}

fn pair(p: [f64; 3]) -> [f64; 2] {
    [p[1], p[2]]
}

fn c2(p: [f64; 2]) -> Coord<f64> {
    Coord { x: p[0], y: p[1] }
}

fn xyz(p: [f64; 3]) -> Coord3D<f64> {
    Coord3D {
        x: p[0],
        y: p[1],
        z: p[2],
    }
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
