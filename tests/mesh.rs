//! Mesh seeding against meshes of known volume and lattice counts known exactly: every mesh is
//! written as an OBJ or STL file (text or bytes) and parsed back, then filled.
//!
//! Where mesh vertices sit on lattice points, an independent integer reference decides each
//! lattice point: for a convex solid, a point is inside when it is strictly inside every face
//! plane, or on a plane and moving it by (e1, e2, e3) (e1 >> e2 >> e3 > 0) goes inwards, i.e.
//! the first non-zero component of that face's outward normal is negative. That is the
//! simulation-of-simplicity rule the module promises, computed without its code.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use mpm::core::solver::{Material, Sampling, Settings, Solver3};
use mpm::mesh::{FillOptions, MeshError, TriMesh};

type Mesh = (Vec<[f64; 3]>, Vec<[u32; 3]>);

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("mesh")
        .join(test);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn obj_text((v, t): &Mesh) -> String {
    let mut s = String::from("# written by tests/mesh.rs\n");
    for p in v {
        s += &format!("v {:?} {:?} {:?}\n", p[0], p[1], p[2]);
    }
    for f in t {
        s += &format!("f {} {} {}\n", f[0] + 1, f[1] + 1, f[2] + 1);
    }
    s
}

fn stl_ascii((v, t): &Mesh) -> String {
    let mut s = String::from("solid test\n");
    for f in t {
        s += "  facet normal 0 0 0\n    outer loop\n";
        for &i in f {
            let p = v[i as usize];
            s += &format!("      vertex {:e} {:e} {:e}\n", p[0], p[1], p[2]);
        }
        s += "    endloop\n  endfacet\n";
    }
    s + "endsolid test\n"
}

fn stl_binary((v, t): &Mesh, header: &str) -> Vec<u8> {
    let mut b = vec![b' '; 80];
    b[..header.len()].copy_from_slice(header.as_bytes());
    b.extend_from_slice(&(t.len() as u32).to_le_bytes());
    for f in t {
        b.extend_from_slice(&[0u8; 12]);
        for &i in f {
            for c in v[i as usize] {
                b.extend_from_slice(&(c as f32).to_le_bytes());
            }
        }
        b.extend_from_slice(&[0u8; 2]);
    }
    b
}

/// Writes the mesh in the format of `name`'s extension and loads it back.
fn round_trip(test: &str, name: &str, mesh: &Mesh) -> TriMesh {
    let path = dir(test).join(name);
    if name.ends_with(".obj") {
        std::fs::write(&path, obj_text(mesh)).expect("write");
    } else {
        std::fs::write(&path, stl_ascii(mesh)).expect("write");
    }
    TriMesh::load(&path).expect("load")
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

/// Turns every triangle of a convex solid to face away from its centroid.
fn orient_outward(mut m: Mesh) -> Mesh {
    let n = m.0.len() as f64;
    let c = m.0.iter().fold([0.0; 3], |s, p| {
        [s[0] + p[0] / n, s[1] + p[1] / n, s[2] + p[2] / n]
    });
    for t in &mut m.1 {
        let [a, b, d] = t.map(|i| m.0[i as usize]);
        if dot(cross(sub(b, a), sub(d, a)), sub(a, c)) < 0.0 {
            t.swap(1, 2);
        }
    }
    m
}

/// An axis-aligned box; `flip` picks the other diagonal of every face.
fn cuboid(lo: [f64; 3], hi: [f64; 3], flip: bool) -> Mesh {
    let v: Vec<[f64; 3]> = (0..8)
        .map(|i| {
            [
                if i & 1 == 0 { lo[0] } else { hi[0] },
                if i & 2 == 0 { lo[1] } else { hi[1] },
                if i & 4 == 0 { lo[2] } else { hi[2] },
            ]
        })
        .collect();
    let quads = [
        [0, 2, 6, 4],
        [1, 3, 7, 5],
        [0, 1, 5, 4],
        [2, 3, 7, 6],
        [0, 1, 3, 2],
        [4, 5, 7, 6],
    ];
    let mut t = Vec::new();
    for [a, b, c, d] in quads {
        if flip {
            t.push([b, c, d]);
            t.push([b, d, a]);
        } else {
            t.push([a, b, c]);
            t.push([a, c, d]);
        }
    }
    orient_outward((v, t))
}

fn tetrahedron(v: [[f64; 3]; 4]) -> Mesh {
    orient_outward((v.to_vec(), vec![[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]))
}

fn icosphere(centre: [f64; 3], r: f64, subdivisions: u32) -> Mesh {
    let g = (1.0 + 5f64.sqrt()) / 2.0;
    let mut v: Vec<[f64; 3]> = vec![
        [-1.0, g, 0.0],
        [1.0, g, 0.0],
        [-1.0, -g, 0.0],
        [1.0, -g, 0.0],
        [0.0, -1.0, g],
        [0.0, 1.0, g],
        [0.0, -1.0, -g],
        [0.0, 1.0, -g],
        [g, 0.0, -1.0],
        [g, 0.0, 1.0],
        [-g, 0.0, -1.0],
        [-g, 0.0, 1.0],
    ];
    let mut t: Vec<[u32; 3]> = vec![
        [0, 11, 5],
        [0, 5, 1],
        [0, 1, 7],
        [0, 7, 10],
        [0, 10, 11],
        [1, 5, 9],
        [5, 11, 4],
        [11, 10, 2],
        [10, 7, 6],
        [7, 1, 8],
        [3, 9, 4],
        [3, 4, 2],
        [3, 2, 6],
        [3, 6, 8],
        [3, 8, 9],
        [4, 9, 5],
        [2, 4, 11],
        [6, 2, 10],
        [8, 6, 7],
        [9, 8, 1],
    ];
    let unit = |p: [f64; 3]| {
        let n = dot(p, p).sqrt();
        p.map(|c| c / n)
    };
    v = v.into_iter().map(unit).collect();
    for _ in 0..subdivisions {
        let mut mid = std::collections::HashMap::new();
        let mut next = Vec::new();
        for [a, b, c] in t {
            let mut m = |i: u32, j: u32| {
                *mid.entry((i.min(j), i.max(j))).or_insert_with(|| {
                    let (p, q) = (v[i as usize], v[j as usize]);
                    v.push(unit([p[0] + q[0], p[1] + q[1], p[2] + q[2]]));
                    (v.len() - 1) as u32
                })
            };
            let (ab, bc, ca) = (m(a, b), m(b, c), m(c, a));
            next.extend([[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]);
        }
        t = next;
    }
    let v = v
        .into_iter()
        .map(|p| [0, 1, 2].map(|a| centre[a] + r * p[a]))
        .collect();
    orient_outward((v, t))
}

/// A torus around the z axis through `centre`.
fn torus(centre: [f64; 3], big: f64, small: f64, m: u32, n: u32) -> Mesh {
    let mut v = Vec::new();
    for i in 0..m {
        let u = std::f64::consts::TAU * i as f64 / m as f64;
        for j in 0..n {
            let w = std::f64::consts::TAU * j as f64 / n as f64;
            let rho = big + small * w.cos();
            v.push([
                centre[0] + rho * u.cos(),
                centre[1] + rho * u.sin(),
                centre[2] + small * w.sin(),
            ]);
        }
    }
    let id = |i: u32, j: u32| (i % m) * n + j % n;
    let mut t = Vec::new();
    for i in 0..m {
        for j in 0..n {
            t.push([id(i, j), id(i + 1, j), id(i + 1, j + 1)]);
            t.push([id(i, j), id(i + 1, j + 1), id(i, j + 1)]);
        }
    }
    let vol: f64 = t
        .iter()
        .map(|f| {
            let [a, b, c] = f.map(|k| v[k as usize]);
            dot(a, cross(b, c))
        })
        .sum();
    if vol < 0.0 {
        t.iter_mut().for_each(|f| f.swap(1, 2));
    }
    (v, t)
}

/// The lattice index of a point of a lattice with origin 0: `p = (k + 0.5) s`.
fn index(p: [f32; 3], s: f64) -> [i64; 3] {
    p.map(|c| {
        let k = c as f64 / s - 0.5;
        assert_eq!(k, k.round(), "{p:?} is not a lattice point");
        k as i64
    })
}

/// The integer reference: a convex mesh whose vertices are lattice points `(I + 0.5) s`.
struct Reference {
    /// Per face: outward normal and offset, in integer lattice units.
    faces: Vec<([i64; 3], i64)>,
    lo: [i64; 3],
    hi: [i64; 3],
}

impl Reference {
    fn new((v, t): &Mesh, s: f64) -> Self {
        let iv: Vec<[i64; 3]> = v
            .iter()
            .map(|p| {
                p.map(|c| {
                    let k = c / s - 0.5;
                    assert_eq!(k, k.round(), "vertex {p:?} is not a lattice point");
                    k as i64
                })
            })
            .collect();
        let faces = t
            .iter()
            .map(|f| {
                let [a, b, c] = f.map(|i| iv[i as usize]);
                let (e, g) = (
                    [0, 1, 2].map(|k| b[k] - a[k]),
                    [0, 1, 2].map(|k| c[k] - a[k]),
                );
                let n = [
                    e[1] * g[2] - e[2] * g[1],
                    e[2] * g[0] - e[0] * g[2],
                    e[0] * g[1] - e[1] * g[0],
                ];
                (n, n[0] * a[0] + n[1] * a[1] + n[2] * a[2])
            })
            .collect();
        let lo = [0, 1, 2].map(|k| iv.iter().map(|p| p[k]).min().unwrap_or(0));
        let hi = [0, 1, 2].map(|k| iv.iter().map(|p| p[k]).max().unwrap_or(0));
        Reference { faces, lo, hi }
    }

    fn inside(&self, p: [i64; 3]) -> bool {
        self.faces.iter().all(|(n, d)| {
            let v = n[0] * p[0] + n[1] * p[1] + n[2] * p[2] - d;
            let first = n.iter().copied().find(|&c| c != 0).unwrap_or(0);
            v < 0 || (v == 0 && first < 0)
        })
    }

    fn points(&self) -> HashSet<[i64; 3]> {
        let mut out = HashSet::new();
        for z in self.lo[2]..=self.hi[2] {
            for y in self.lo[1]..=self.hi[1] {
                for x in self.lo[0]..=self.hi[0] {
                    if self.inside([x, y, z]) {
                        out.insert([x, y, z]);
                    }
                }
            }
        }
        out
    }
}

fn aligned(s: f64) -> FillOptions {
    FillOptions {
        origin: Some([0.0; 3]),
        ..FillOptions::new(s as f32)
    }
}

/// Fills with a lattice of origin 0 and returns the lattice indices (checking there are no
/// duplicates).
fn aligned_indices(mesh: &TriMesh, s: f64) -> HashSet<[i64; 3]> {
    let points = mesh.fill_with(&aligned(s)).expect("fill");
    let set: HashSet<[i64; 3]> = points.iter().map(|p| index(*p, s)).collect();
    assert_eq!(set.len(), points.len(), "duplicate particles");
    set
}

#[test]
fn unit_cube_count_is_exact() {
    let s = 0.125;
    let mesh = round_trip("cube", "cube.obj", &cuboid([0.25; 3], [1.25; 3], false));
    assert_eq!(mesh.vertices().len(), 8);
    assert_eq!(mesh.triangles().len(), 12);
    assert_eq!(mesh.volume(), 1.0);
    assert!(mesh.edge_report().is_watertight());
    for sampling in [Sampling::Regular, Sampling::Jittered] {
        let p = mesh.fill(s as f32, sampling, 3).expect("fill");
        println!("cube {sampling:?}: {} particles, expected 512", p.len());
        assert_eq!(p.len(), 512, "{sampling:?}");
        assert!(p
            .iter()
            .all(|q| q.iter().all(|&c| (0.25..1.25).contains(&c))));
    }
    // The cell centres of `seeding::fill` on the same box.
    let p = mesh.fill(s as f32, Sampling::Regular, 0).expect("fill");
    assert_eq!(p[0], [0.3125; 3]);
    assert_eq!(p[1], [0.4375, 0.3125, 0.3125]);
    // Side 1 at spacing 0.1 (not a power of two): 10^3, the lattice is half a cell from faces.
    let mesh = round_trip("cube", "cube01.stl", &cuboid([0.05; 3], [1.05; 3], true));
    assert_eq!(
        mesh.fill(0.1, Sampling::Regular, 0).expect("fill").len(),
        1000
    );
}

#[test]
fn cube_with_faces_on_lattice_points_is_half_open() {
    // Lattice points at (k + 0.5) / 8 and faces at 1/16 and 17/16: the faces, their diagonals,
    // edges and corners all pass through lattice points. 9 points per axis touch the closed
    // cube; the half-open rule keeps 8: [min, max) on every axis, as `Region::Box` does.
    let s = 0.125;
    for flip in [false, true] {
        let raw = cuboid([0.0625; 3], [1.0625; 3], flip);
        let mesh = round_trip("cube_on_lattice", "cube.obj", &raw);
        let got = aligned_indices(&mesh, s);
        println!(
            "cube on lattice (flip {flip}): {} particles, expected 512",
            got.len()
        );
        assert_eq!(got.len(), 512);
        assert_eq!(got, Reference::new(&raw, s).points());
        let lo = (0..3)
            .map(|a| got.iter().map(|k| k[a]).min())
            .collect::<Vec<_>>();
        let hi = (0..3)
            .map(|a| got.iter().map(|k| k[a]).max())
            .collect::<Vec<_>>();
        assert_eq!(lo, vec![Some(0); 3]);
        assert_eq!(hi, vec![Some(7); 3]);
        assert!(mesh.contains([0.0625, 0.5625, 0.5625]));
        assert!(!mesh.contains([1.0625, 0.5625, 0.5625]));
        assert!(mesh.contains([0.0625; 3]));
        assert!(!mesh.contains([1.0625; 3]));
    }
}

#[test]
fn kuhn_tetrahedra_partition_the_cube_exactly() {
    // The six tetrahedra around the cube's diagonal, each a closed mesh with vertices on
    // lattice points: their fills must be disjoint and add up to the cube's, point for point.
    let s = 0.0625;
    let n = 12.0;
    let corner = |c: [f64; 3]| c.map(|x| (x * n + 0.5) * s);
    let mut union = HashSet::new();
    let mut total = 0;
    for perm in [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ] {
        let mut v = [[0.0; 3]; 4];
        for k in 0..3 {
            v[k + 1] = v[k];
            v[k + 1][perm[k]] = 1.0;
        }
        let raw = tetrahedron(v.map(corner));
        let mesh = round_trip("kuhn", "tet.stl", &raw);
        let got = aligned_indices(&mesh, s);
        assert_eq!(
            got,
            Reference::new(&raw, s).points(),
            "tetrahedron {perm:?}"
        );
        total += got.len();
        union.extend(got);
    }
    let cube = round_trip(
        "kuhn",
        "cube.obj",
        &cuboid(corner([0.0; 3]), corner([1.0; 3]), false),
    );
    let whole = aligned_indices(&cube, s);
    println!(
        "Kuhn: 6 tetrahedra {total} particles, union {}, cube {}",
        union.len(),
        whole.len()
    );
    assert_eq!(total, union.len(), "tetrahedra overlap");
    assert_eq!(union, whole);
    assert_eq!(whole.len(), 12 * 12 * 12);
}

#[test]
fn tilted_lattice_parallelepipeds_hold_their_determinant() {
    // A parallelepiped spanned by integer vectors from a lattice point tiles space by the
    // lattice those vectors span, so any generic translate of it, and hence the perturbed
    // lattice, holds exactly |det| points, though its faces and edges pass through many
    // lattice points at odd angles.
    let s = 1.0 / 64.0;
    let bases: [[[i64; 3]; 3]; 2] = [
        [[4, 8, 8], [8, 4, -8], [8, -8, 4]],
        [[6, 2, 0], [2, 8, 2], [0, 4, 10]],
    ];
    for (basis, det) in bases.into_iter().zip([1728usize, 392]) {
        let o = [20i64, 20, 14];
        let v: Vec<[f64; 3]> = (0..8)
            .map(|c| {
                [0, 1, 2].map(|a| {
                    let k: i64 = o[a]
                        + (0..3)
                            .filter(|&b| c >> b & 1 == 1)
                            .map(|b| basis[b][a])
                            .sum::<i64>();
                    (k as f64 + 0.5) * s
                })
            })
            .collect();
        let (_, t) = cuboid([0.0; 3], [1.0; 3], false);
        let raw = orient_outward((v, t));
        let mesh = round_trip("parallelepiped", "p.obj", &raw);
        let got = aligned_indices(&mesh, s);
        println!(
            "parallelepiped {basis:?}: {} particles, expected {det} (volume/s^3 {})",
            got.len(),
            mesh.volume() / (s * s * s)
        );
        assert_eq!(got.len(), det);
        assert_eq!(got, Reference::new(&raw, s).points());
    }
}

#[test]
fn tetrahedron_counts() {
    // The corner tetrahedron x, y, z >= 0, x + y + z <= 1 at spacing 1/32: lattice points
    // (k + 0.5) / 32 are inside when kx + ky + kz <= 30, i.e. C(33, 3) = 5456 of them
    // (volume / s^3 = 5461.3).
    let s = 1.0 / 32.0;
    let raw = tetrahedron([[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]);
    let mesh = round_trip("tetrahedron", "tet.obj", &raw);
    assert!((mesh.volume() - 1.0 / 6.0).abs() < 1e-15);
    let got = aligned_indices(&mesh, s);
    println!(
        "tetrahedron: {} particles, expected 5456 (volume/s^3 = 5461.3)",
        got.len()
    );
    assert_eq!(got.len(), 5456);
    // Vertices on lattice points, legs of 32 spacings: the three legs' faces are kept, the
    // slanted face (kx + ky + kz = 32) is not: C(34, 3) = 5984.
    let c = |k: [f64; 3]| k.map(|x| (x + 0.5) * s);
    let raw = tetrahedron([
        c([0.0; 3]),
        c([32.0, 0.0, 0.0]),
        c([0.0, 32.0, 0.0]),
        c([0.0, 0.0, 32.0]),
    ]);
    let mesh = round_trip("tetrahedron", "tet_lattice.stl", &raw);
    let got = aligned_indices(&mesh, s);
    println!(
        "tetrahedron on lattice: {} particles, expected 5984",
        got.len()
    );
    assert_eq!(got.len(), 5984);
    assert_eq!(got, Reference::new(&raw, s).points());
}

#[test]
fn octahedron_with_vertices_on_lattice_lines() {
    // Rays through the six vertices (each shared by four triangles) and along its edges.
    let s = 0.0625;
    let c = |k: [f64; 3]| k.map(|x| (x + 8.5) * s);
    let l = 7.0;
    let v = vec![
        c([l, 0.0, 0.0]),
        c([-l, 0.0, 0.0]),
        c([0.0, l, 0.0]),
        c([0.0, -l, 0.0]),
        c([0.0, 0.0, l]),
        c([0.0, 0.0, -l]),
    ];
    let mut t = Vec::new();
    for x in [0, 1] {
        for y in [2, 3] {
            for z in [4, 5] {
                t.push([x, y, z]);
            }
        }
    }
    let raw = orient_outward((v, t));
    let mesh = round_trip("octahedron", "octahedron.obj", &raw);
    let got = aligned_indices(&mesh, s);
    // |i| + |j| + |k| < 7, plus the boundary points with i < 0 (moving by +x leaves the
    // solid unless x < 0).
    let mut expected = 0;
    for i in -7i64..=7 {
        for j in -7i64..=7 {
            for k in -7i64..=7 {
                let m = i.abs() + j.abs() + k.abs();
                if m < 7 || (m == 7 && i < 0) {
                    expected += 1;
                }
            }
        }
    }
    println!("octahedron: {} particles, expected {expected}", got.len());
    assert_eq!(got.len(), expected);
    assert_eq!(got, Reference::new(&raw, s).points());
}

#[test]
fn icosphere_volume() {
    let (centre, r) = ([0.5; 3], 0.4);
    let raw = icosphere(centre, r, 4);
    let mesh = round_trip("icosphere", "sphere.stl", &raw);
    assert_eq!(mesh.triangles().len(), 5120);
    assert!(mesh.edge_report().is_watertight());
    let polyhedron = mesh.volume();
    let sphere = 4.0 / 3.0 * std::f64::consts::PI * r * r * r;
    let s = 0.01f32;
    let cell = (s as f64).powi(3);
    let start = Instant::now();
    let p = mesh.fill(s, Sampling::Regular, 0).expect("fill");
    let regular_time = start.elapsed();
    let start = Instant::now();
    let j = mesh.fill(s, Sampling::Jittered, 5).expect("fill");
    let jitter_time = start.elapsed();
    let (er, ej) = (
        p.len() as f64 * cell / polyhedron - 1.0,
        j.len() as f64 * cell / polyhedron - 1.0,
    );
    println!(
        "icosphere: polyhedron {:.1} cells, sphere {:.1}; regular {} ({:+.3}%, {regular_time:?}), \
         jittered {} ({:+.3}%, {jitter_time:?})",
        polyhedron / cell,
        sphere / cell,
        p.len(),
        100.0 * er,
        j.len(),
        100.0 * ej
    );
    assert!(er.abs() < 0.002, "regular {er}");
    assert!(ej.abs() < 0.005, "jittered {ej}");
    assert!((p.len() as f64 * cell / sphere - 1.0).abs() < 0.02);
    let dist = |q: &[f32; 3]| {
        dot(
            sub(q.map(|c| c as f64), centre),
            sub(q.map(|c| c as f64), centre),
        )
        .sqrt()
    };
    assert!(p.iter().chain(&j).all(|q| dist(q) < r));
    // Poisson-disk: all inside, no two closer than the spacing.
    let coarse = 0.04f32;
    let poisson = mesh.fill(coarse, Sampling::PoissonDisk, 9).expect("fill");
    let lattice = polyhedron / (coarse as f64).powi(3);
    let ratio = poisson.len() as f64 / lattice;
    println!(
        "icosphere Poisson-disk: {} particles, {ratio:.3} of the lattice count",
        poisson.len()
    );
    assert!(ratio > 0.5 && ratio < 1.0, "{ratio}");
    for (i, a) in poisson.iter().enumerate() {
        assert!(dist(a) < r);
        for b in &poisson[i + 1..] {
            let d2: f32 = (0..3).map(|k| (a[k] - b[k]).powi(2)).sum();
            assert!(d2 >= coarse * coarse * 0.999);
        }
    }
}

#[test]
fn column_fill_agrees_with_point_queries() {
    // The column sweep (regular lattices) and the per-point test (`contains`, jittered and
    // Poisson-disk sampling) must decide every lattice point alike.
    let raw = icosphere([0.5; 3], 0.4, 2);
    let mesh = round_trip("columns", "sphere.obj", &raw);
    let s = 0.03125;
    let got = aligned_indices(&mesh, s);
    let mut expected = HashSet::new();
    for z in 0..32 {
        for y in 0..32 {
            for x in 0..32 {
                let p = [x, y, z].map(|k| (k as f64 + 0.5) * s);
                if mesh.contains(p) {
                    expected.insert([x, y, z]);
                }
            }
        }
    }
    println!("columns vs points: {} and {}", got.len(), expected.len());
    assert_eq!(got, expected);
}

#[test]
fn thin_slab_has_exactly_its_layers() {
    // A slab 1.5 spacings thick holds two layers or one depending on where it sits; all of
    // them, and nothing above or below.
    let s = 0.0625;
    for (z0, layers) in [(0.3, vec![0, 1]), (0.6, vec![1]), (0.5, vec![0, 1])] {
        let raw = cuboid([0.0, 0.0, z0 * s], [1.0, 1.0, (z0 + 1.5) * s], false);
        let mesh = round_trip("slab", "slab.stl", &raw);
        let got = aligned_indices(&mesh, s);
        // z0 = 0.3: points at z = 0.5 s and 1.5 s; z0 = 0.6: 1.5 s only; z0 = 0.5: the
        // bottom face passes through 0.5 s (kept) and the top at 2 s (no point).
        println!(
            "slab at {z0} s: {} particles, expected {}",
            got.len(),
            256 * layers.len()
        );
        assert_eq!(got.len(), 256 * layers.len());
        let zs: HashSet<i64> = got.iter().map(|k| k[2]).collect();
        assert_eq!(zs, layers.into_iter().collect());
    }
    // The same slab tilted: every lattice point is decided as the exact box test says.
    let (a, b) = (0.3f64, 0.5f64);
    let rot = [
        [a.cos(), -a.sin() * b.cos(), a.sin() * b.sin()],
        [a.sin(), a.cos() * b.cos(), -a.cos() * b.sin()],
        [0.0, b.sin(), b.cos()],
    ];
    let s = 1.0 / 64.0;
    let thick = 1.5 * s;
    let origin = [0.2, 0.15, 0.3];
    let world = |u: [f64; 3]| -> [f64; 3] {
        [0, 1, 2].map(|i| origin[i] + (0..3).map(|j| rot[i][j] * u[j]).sum::<f64>())
    };
    let (v, t) = cuboid([0.0; 3], [0.6, 0.6, thick], false);
    let raw = (v.into_iter().map(world).collect::<Vec<_>>(), t);
    let mesh = round_trip("slab", "tilted.obj", &raw);
    let got = aligned_indices(&mesh, s);
    let mut expected = HashSet::new();
    let mut close = 0;
    for z in -5..80 {
        for y in -5..80 {
            for x in -5..80 {
                let p = [x, y, z].map(|k| (k as f64 + 0.5) * s);
                let d = sub(p, origin);
                let u: [f64; 3] = [0, 1, 2].map(|j| (0..3).map(|i| rot[i][j] * d[i]).sum());
                let margins = [u[0], 0.6 - u[0], u[1], 0.6 - u[1], u[2], thick - u[2]];
                if margins.iter().any(|m| m.abs() < 1e-9) {
                    close += 1;
                } else if margins.iter().all(|&m| m > 0.0) {
                    expected.insert([x, y, z]);
                }
            }
        }
    }
    let volume = 0.6 * 0.6 * thick / (s * s * s);
    println!(
        "tilted slab: {} particles, {} by the box test, volume/s^3 {volume:.1}",
        got.len(),
        expected.len()
    );
    assert_eq!(close, 0);
    assert_eq!(got, expected);
}

#[test]
fn torus_hole_stays_empty() {
    let (centre, big, small) = ([0.5; 3], 0.3, 0.1);
    let raw = torus(centre, big, small, 96, 48);
    let mesh = round_trip("torus", "torus.obj", &raw);
    assert!(mesh.edge_report().is_watertight());
    let s = 0.01f32;
    let cell = (s as f64).powi(3);
    let p = mesh.fill(s, Sampling::Regular, 0).expect("fill");
    let exact = 2.0 * std::f64::consts::PI.powi(2) * big * small * small;
    let err = p.len() as f64 * cell / mesh.volume() - 1.0;
    println!(
        "torus: {} particles, polyhedron {:.1} cells ({:+.3}%), torus {:.1}",
        p.len(),
        mesh.volume() / cell,
        100.0 * err,
        exact / cell
    );
    assert!(err.abs() < 0.01, "{err}");
    assert!((p.len() as f64 * cell / exact - 1.0).abs() < 0.02);
    // A regular lattice centred on the torus aliases with it (59095 to 59304 particles as the
    // origin moves); jittered sampling averages that out.
    let jittered: usize = (0..4)
        .map(|seed| mesh.fill(s, Sampling::Jittered, seed).expect("fill").len())
        .sum();
    let err = jittered as f64 / 4.0 * cell / mesh.volume() - 1.0;
    println!("torus jittered, mean of 4 seeds: {:+.3}%", 100.0 * err);
    assert!(err.abs() < 0.003, "{err}");
    let mut hole = 0;
    for q in &p {
        let d = sub(q.map(|c| c as f64), centre);
        let rho = (d[0] * d[0] + d[1] * d[1]).sqrt();
        // Chords on the inner side lie up to 1.1e-4 outside the true torus.
        assert!(
            (rho - big).powi(2) + d[2].powi(2) < small * small * 1.005,
            "{q:?} outside"
        );
        if rho < big - small - 1e-3 {
            hole += 1;
        }
    }
    assert_eq!(hole, 0);
    assert!(!mesh.contains(centre));
}

#[test]
fn binary_stl_that_starts_with_solid() {
    let raw = cuboid([0.25; 3], [1.25; 3], false);
    let bytes = stl_binary(&raw, "solid cube, but binary");
    assert!(bytes.starts_with(b"solid"));
    let path = dir("binary").join("cube.stl");
    std::fs::write(&path, &bytes).expect("write");
    let mesh = TriMesh::load(&path).expect("binary STL");
    assert_eq!(mesh.vertices().len(), 8, "STL vertices are welded");
    assert_eq!(mesh.triangles().len(), 12);
    assert_eq!(mesh.volume(), 1.0);
    assert_eq!(
        mesh.fill(0.125, Sampling::Regular, 0).expect("fill").len(),
        512
    );
    // The same mesh in ASCII STL and OBJ is the same mesh.
    let ascii = round_trip("binary", "cube_ascii.stl", &raw);
    let obj = round_trip("binary", "cube.obj", &raw);
    let corners = |m: &TriMesh| {
        let mut t: Vec<[[u64; 3]; 3]> = m
            .triangles()
            .iter()
            .map(|f| {
                let c = f.map(|i| m.vertices()[i as usize].map(f64::to_bits));
                // The same triangle from whichever vertex.
                let k = (0..3).min_by_key(|&k| c[k]).unwrap_or(0);
                [c[k], c[(k + 1) % 3], c[(k + 2) % 3]]
            })
            .collect();
        t.sort();
        t
    };
    assert_eq!(corners(&ascii), corners(&mesh));
    assert_eq!(corners(&obj), corners(&mesh));
    // A binary file that does not start with `solid` and has no header text at all.
    let mut plain = stl_binary(&raw, "");
    plain[..80].fill(0);
    let mesh = TriMesh::parse_stl(&plain, "plain.stl").expect("binary");
    assert_eq!(mesh.triangles().len(), 12);
}

#[test]
fn obj_face_forms_polygons_and_negative_indices() {
    let text = "# a cube of side 2 written every way OBJ allows\r\n\
        mtllib none.mtl\r\n\
        o cube\r\n\
        v 0 0 0\r\nv 2 0 0\r\nv 0 2 0\r\nv 2 2 0\r\n\
        v 0 0 2\r\nv 2 0 2 1.0\r\nv 0 2 2\r\nv 2 2 2   # w ignored above\r\n\
        vt 0 0\r\nvn 0 0 1\r\n\
        s off\r\n\
        f 1 3 4 2\r\n\
        f 5/1 6/1 8/1 7/1\r\n\
        f 1/1/1 2/1/1 6/1/1 5/1/1\r\n\
        f 3//1 7//1 8//1 4//1\r\n\
        f -8 -4 -2 -6\r\n\
        f 2 4 8 6\r\n";
    let path = dir("obj_forms").join("cube.obj");
    std::fs::write(&path, text).expect("write");
    let mesh = TriMesh::load(&path).expect("OBJ");
    assert_eq!(mesh.vertices().len(), 8);
    assert_eq!(mesh.triangles().len(), 12);
    mesh.check_watertight().expect("watertight");
    assert_eq!(mesh.volume(), 8.0);
    let p = mesh.fill(0.25, Sampling::Regular, 0).expect("fill");
    assert_eq!(p.len(), 512);
}

#[test]
fn transforms_place_the_mesh() {
    let raw = icosphere([0.0; 3], 1.0, 2);
    let mut mesh = round_trip("transform", "sphere.obj", &raw);
    let v0 = mesh.volume();
    let (lo0, hi0) = mesh.bounds();
    let factor = 0.4 / (hi0[0] - lo0[0]);
    mesh.fit_into([0.1, 0.2, 0.3], [0.5, 0.9, 0.7])
        .expect("fit");
    let (lo, hi) = mesh.bounds();
    // The smallest side (0.4) decides the scale; the sphere is centred in the box.
    for a in 0..3 {
        assert!(
            (hi[a] - lo[a] - 0.4).abs() < 1e-12,
            "axis {a}: {lo:?} {hi:?}"
        );
    }
    assert!((0.5 * (lo[1] + hi[1]) - 0.55).abs() < 1e-12);
    assert!((mesh.volume() - v0 * factor.powi(3)).abs() < 1e-12);
    // A mirroring scale keeps the normals outward (positive volume) and the fill alike.
    let count = mesh.fill(0.01, Sampling::Regular, 0).expect("fill").len();
    mesh.transform([-1.0, 1.0, 1.0], [1.0, 0.0, 0.0])
        .expect("mirror");
    assert!(mesh.volume() > 0.0);
    mesh.check_watertight().expect("still watertight");
    let mirrored = mesh.fill(0.01, Sampling::Regular, 0).expect("fill").len();
    assert!((mirrored as i64 - count as i64).abs() < count as i64 / 100);
    mesh.transform([2.0; 3], [0.0; 3]).expect("scale");
    assert!(mesh.transform([0.0, 1.0, 1.0], [0.0; 3]).is_err());
    assert!(mesh.transform([1.0; 3], [f64::NAN, 0.0, 0.0]).is_err());
    assert!(mesh.fit_into([0.0; 3], [1.0, 0.0, 1.0]).is_err());
    assert!(mesh.fill(0.0, Sampling::Regular, 0).is_err());
    assert!(mesh.fill(f32::NAN, Sampling::Regular, 0).is_err());
    assert!(
        mesh.fill(1e-6, Sampling::Regular, 0).is_err(),
        "more than 2^32 cells"
    );
}

#[test]
fn open_meshes_are_refused() {
    let (v, mut t) = cuboid([0.0; 3], [1.0; 3], false);
    t.pop();
    let path = dir("open").join("open.obj");
    std::fs::write(&path, obj_text(&(v.clone(), t))).expect("write");
    let mesh = TriMesh::load(&path).expect("parses");
    let report = mesh.edge_report();
    assert_eq!(
        (report.boundary, report.non_manifold, report.misoriented),
        (3, 0, 0)
    );
    let err = mesh.fill(0.1, Sampling::Regular, 0).expect_err("open");
    let message = err.to_string();
    println!("{message}");
    assert!(matches!(err, MeshError::NotWatertight { .. }));
    assert!(message.contains("open.obj") && message.contains("not watertight"));
    // Still usable on purpose.
    let options = FillOptions {
        allow_open: true,
        ..FillOptions::new(0.1)
    };
    assert!(mesh.fill_with(&options).is_ok());
    // A flipped face: every edge is used twice, but three of them the same way round.
    let (v, mut t) = cuboid([0.0; 3], [1.0; 3], false);
    t[3].swap(0, 1);
    let mesh = TriMesh::new("flipped", v.clone(), t).expect("mesh");
    let report = mesh.edge_report();
    assert_eq!(
        (report.boundary, report.non_manifold, report.misoriented),
        (0, 0, 3)
    );
    let message = mesh.check_watertight().expect_err("flipped").to_string();
    println!("{message}");
    assert!(message.contains("flipped") && message.contains("same orientation"));
    // Two cubes sharing an edge: four triangles on it.
    let (v2, t2) = cuboid([1.0; 3], [2.0; 3], false);
    let (_, t1) = cuboid([0.0; 3], [1.0; 3], false);
    let mut verts = v.clone();
    verts.extend(v2);
    let mut tris = t1;
    tris.extend(t2.into_iter().map(|f| f.map(|i| i + 8)));
    let mesh = TriMesh::new("touching", verts, tris).expect("mesh");
    assert!(mesh.edge_report().is_watertight(), "corner contact only");
    let (v3, t3) = cuboid([1.0, 1.0, 0.0], [2.0, 2.0, 1.0], false);
    let (_, t1) = cuboid([0.0; 3], [1.0; 3], false);
    let mut verts = v;
    verts.extend(v3);
    let mut tris = t1;
    tris.extend(t3.into_iter().map(|f| f.map(|i| i + 8)));
    let mesh = TriMesh::new("edge", verts, tris).expect("mesh");
    assert_eq!(mesh.edge_report().non_manifold, 1);
}

/// The error's text and its line.
fn parse_error(result: Result<TriMesh, MeshError>) -> (String, usize) {
    let err = result.expect_err("malformed");
    let line = match &err {
        MeshError::Parse { line, .. } => *line,
        _ => 0,
    };
    let text = err.to_string();
    println!("{text}");
    (text, line)
}

#[test]
fn malformed_files_name_file_and_line() {
    let d = dir("malformed");
    let write = |name: &str, body: &[u8]| {
        let p = d.join(name);
        std::fs::write(&p, body).expect("write");
        TriMesh::load(&p)
    };
    let (t, l) = parse_error(write(
        "number.obj",
        b"v 0 0 0\nv 1 0 0\nv 0 1 zero\nf 1 2 3\n",
    ));
    assert_eq!(l, 3);
    assert!(t.contains("number.obj:3:") && t.contains("`zero`") && t.contains("number (z)"));
    let (t, l) = parse_error(write("short.obj", b"v 0 0 0\nv 1 0\n"));
    assert_eq!(l, 2);
    assert!(t.contains("end of the line"));
    let (t, l) = parse_error(write(
        "range.obj",
        b"v 0 0 0\nv 1 0 0\nv 0 1 0\n\nf 1 2 4\n",
    ));
    assert_eq!(l, 5);
    assert!(t.contains("from 1 to 3") && t.contains("`4`"));
    let (_, l) = parse_error(write("zero.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n"));
    assert_eq!(l, 4);
    let (_, l) = parse_error(write("neg.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf -1 -2 -4\n"));
    assert_eq!(l, 4);
    let (t, l) = parse_error(write("two.obj", b"v 0 0 0\nv 1 0 0\nf 1 2\n"));
    assert_eq!(l, 3);
    assert!(t.contains("at least 3"));
    let (t, l) = parse_error(write(
        "slash.obj",
        b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1/x 2 3\n",
    ));
    assert_eq!(l, 4);
    assert!(t.contains("`1/x`"));
    let (t, _) = parse_error(write("empty.obj", b"# nothing\n"));
    assert!(t.contains("empty.obj") && t.contains("no triangles"));

    let good = stl_ascii(&cuboid([0.0; 3], [1.0; 3], false));
    let mut lines: Vec<&str> = good.lines().collect();
    let broken = lines[10].replace("vertex", "vertx");
    lines[10] = &broken;
    let bad = lines.join("\n");
    let (t, l) = parse_error(write("vertx.stl", bad.as_bytes()));
    // Line 1 `solid`, 2 `facet`, 3 `outer loop`, 4-6 the first facet's vertices, 7 `endloop`,
    // 8 `endfacet`, 9 `facet`, 10 `outer loop`, 11 the second facet's first vertex.
    assert_eq!(l, 11);
    assert!(t.contains("vertx.stl:11:") && t.contains("`vertx`"));
    let bad = good.replacen("1e0", "one", 1);
    let (t, l) = parse_error(write("value.stl", bad.as_bytes()));
    assert!(l > 1 && t.contains("`one`"), "{t}");
    let truncated = &good[..good.len() / 2];
    let cut = truncated.rfind("endfacet").expect("endfacet") + "endfacet".len();
    let (t, l) = parse_error(write("truncated.stl", &truncated.as_bytes()[..cut]));
    assert!(
        l > 1 && t.contains("end of the file") && t.contains("`endsolid`"),
        "{t}"
    );

    // Binary: a truncated file that does not start with `solid`, and one that does.
    let binary = stl_binary(&cuboid([0.0; 3], [1.0; 3], false), "exported");
    let (t, _) = parse_error(write("cut.stl", &binary[..binary.len() - 7]));
    assert!(
        t.contains("cut.stl") && t.contains("684 bytes") && t.contains("677"),
        "{t}"
    );
    let binary = stl_binary(&cuboid([0.0; 3], [1.0; 3], false), "solid but binary");
    let (t, _) = parse_error(write("solid_cut.stl", &binary[..binary.len() - 1]));
    assert!(t.contains("not text") && t.contains("684 bytes"), "{t}");
    let (t, _) = parse_error(write("tiny.stl", b"abc"));
    assert!(t.contains("too short"), "{t}");

    let (t, _) = parse_error(TriMesh::load(d.join("missing.obj")));
    assert!(t.contains("missing.obj") && t.contains("cannot read"));
    let (t, _) = parse_error(write("mesh.ply", b"ply\n"));
    assert!(t.contains("mesh.ply") && t.contains(".obj or .stl"));
    assert!(TriMesh::new("bad", vec![[0.0; 3]], vec![[0, 1, 2]]).is_err());
    assert!(TriMesh::new("nan", vec![[f64::NAN; 3]; 3], vec![[0, 1, 2]]).is_err());
}

#[test]
fn particles_go_into_a_solver() {
    let mesh = round_trip("solver", "cube.obj", &cuboid([0.25; 3], [0.75; 3], false));
    let spacing = 1.0 / 64.0;
    let points = mesh.fill(spacing, Sampling::Regular, 0).expect("fill");
    assert_eq!(points.len(), 32 * 32 * 32);
    let mut solver = Solver3::new(&mpm::backend::cpu(), Settings::new(32, 1e-4)).expect("solver");
    let m = solver.add_material(Material::water()).expect("material");
    solver
        .add_positions(&points, spacing.powi(3), m, [0.0; 3])
        .expect("add");
    let (x, _) = solver.positions().expect("positions");
    assert_eq!(x.len(), points.len());
    // The program's error type takes mesh errors through `?`.
    let engine: mpm::Error = MeshError::InvalidParameter("x".into()).into();
    assert!(engine.to_string().contains('x'));
}

/// A mesh's distance field against the shape's own: a unit cube's exact box distance (to
/// rounding; the cube's triangles are its faces), and a torus's analytic distance within the
/// polygon's chord error (under 5e-4 for 96 x 48 facets), both clamped to the margin as the
/// field is, at every sample of the lattice.
#[test]
fn mesh_distance_fields_match_the_shapes() {
    let clamp = |d: f64, margin: f64| d.clamp(-margin, margin);
    let cube = round_trip("sdf_cube", "cube.obj", &cuboid([0.25; 3], [1.25; 3], false));
    let (spacing, margin) = (0.05, 0.15);
    let sdf = cube.signed_distance(spacing, margin).expect("cube field");
    assert_eq!(sdf.dims, [27; 3]);
    let box_distance = |p: [f64; 3]| {
        let q = p.map(|c| (c - 0.75).abs() - 0.5);
        let outside = q.iter().map(|c| c.max(0.0).powi(2)).sum::<f64>().sqrt();
        outside + q[0].max(q[1]).max(q[2]).min(0.0)
    };
    let torus_distance = |p: [f64; 3]| {
        let rho = ((p[0] - 0.5).powi(2) + (p[1] - 0.5).powi(2)).sqrt() - 0.3;
        (rho * rho + (p[2] - 0.5).powi(2)).sqrt() - 0.1
    };
    let torus_mesh = round_trip("sdf_torus", "torus.obj", &torus([0.5; 3], 0.3, 0.1, 96, 48));
    let torus_sdf = torus_mesh.signed_distance(0.02, 0.06).expect("torus field");
    for (sdf, reference, margin, tolerance) in [
        (
            &sdf,
            &box_distance as &dyn Fn([f64; 3]) -> f64,
            margin,
            1e-6,
        ),
        (&torus_sdf, &torus_distance, 0.06, 5e-4),
    ] {
        let mut worst = 0.0f64;
        for k in 0..sdf.dims[2] as usize {
            for j in 0..sdf.dims[1] as usize {
                for i in 0..sdf.dims[0] as usize {
                    let at = [i, j, k];
                    let p = std::array::from_fn(|a| {
                        f64::from(sdf.origin[a]) + at[a] as f64 * f64::from(sdf.spacing)
                    });
                    let got = f64::from(
                        sdf.values[i + sdf.dims[0] as usize * (j + sdf.dims[1] as usize * k)],
                    );
                    worst = worst.max((got - clamp(reference(p), margin)).abs());
                }
            }
        }
        assert!(worst < tolerance, "{:?} samples: off by {worst}", sdf.dims);
    }
}
