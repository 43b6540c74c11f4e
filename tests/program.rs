//! The `mpm` program's pieces: scene files (errors with positions, range checks, fuzzed
//! input), every shipped scene file, and checkpoints that resume bit for bit on the CPU.

use std::path::PathBuf;

use mpm::commands::{self, RunOptions};
use mpm::scene_file::{Scene, SceneError};
use proptest::prelude::*;

/// A small 2D scene: water and jelly, 32^2 cells, a sphere collider, an emitter; heat
/// conducts from the walls and the collider, and the jelly softens with it.
const SMALL: &str = r#"
[simulation]
dimension = 2
resolution = [32, 32]
dt = 4e-4
frame_time = 0.004
frames = 6
walls = { thickness = 3, condition = "slip", friction = 0.2 }
heat = { wall_temperature = 280.0 }

[[materials]]
name = "water"
model = "water"
bulk = 1e4
conductivity = 5e5

[[materials]]
name = "jelly"
model = "neo-hookean"
youngs = 2e4
poisson = 0.3
temperature = 320.0
conductivity = 2e5
specific_heat = 2000.0
softening = [[300.0, 1.0], [350.0, 0.5]]

[[bodies]]
material = "water"
shape = "box"
min = [0.1, 0.1]
max = [0.4, 0.5]

[[bodies]]
material = "jelly"
shape = "sphere"
centre = [0.7, 0.6]
radius = 0.1
velocity = [-1.0, 0.0]

[[colliders]]
shape = "sphere"
centre = [0.5, 0.2]
radius = 0.08
condition = "separate"
friction = 0.3
temperature = 360.0

[[emitters]]
material = "water"
shape = "box"
min = [0.1, 0.8]
max = [0.15, 0.85]
velocity = [1.0, 0.0]
interval = 0.008
stop = 0.02

[output]
png = false
checkpoint_every = 2
"#;

fn error_of(text: &str) -> String {
    match Scene::parse("test.toml", text) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error for:\n{text}"),
    }
}

#[test]
fn scene_errors_name_file_line_and_column() {
    // Malformed TOML.
    let e = error_of("[simulation\ndimension = 2\n");
    assert!(e.starts_with("test.toml:1:"), "{e}");
    // A typo in a field name: line of the field.
    let text = SMALL.replace("frame_time = 0.004", "frame_tme = 0.004");
    let e = error_of(&text);
    assert!(e.contains("test.toml:") && e.contains("frame_tme"), "{e}");
    // A value out of range: the line of its key.
    let text = SMALL.replace("poisson = 0.3", "poisson = 0.5");
    let e = error_of(&text);
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("poisson"))
        .unwrap_or(0);
    assert!(e.contains("poisson") && e.contains("0.5"), "{e}");
    assert!(
        e.starts_with(&format!("test.toml:{line}:")),
        "line {line}: {e}"
    );
    // A body outside the domain, an unknown material, a parameter the model lacks.
    let e = error_of(&SMALL.replace("max = [0.4, 0.5]", "max = [0.4, 1.5]"));
    assert!(e.contains("outside the domain"), "{e}");
    let e = error_of(&SMALL.replace(
        "material = \"water\"\nshape = \"box\"\nmin = [0.1, 0.1]",
        "material = \"lava\"\nshape = \"box\"\nmin = [0.1, 0.1]",
    ));
    assert!(e.contains("unknown material `lava`"), "{e}");
    let e = error_of(&SMALL.replace("bulk = 1e4", "bulk = 1e4\nyoungs = 5.0"));
    assert!(e.contains("takes no `youngs`"), "{e}");
    // Wrong vector length, negative dt, a sphere given box fields.
    let e = error_of(&SMALL.replace("centre = [0.7, 0.6]", "centre = [0.7, 0.6, 0.1]"));
    assert!(e.contains("expected 2 finite numbers"), "{e}");
    let e = error_of(&SMALL.replace("dt = 4e-4", "dt = -4e-4"));
    assert!(e.contains("time step"), "{e}");
    let e = error_of(&SMALL.replace("radius = 0.1\n", "radius = 0.1\nmin = [0.1, 0.1]\n"));
    assert!(e.contains("a sphere takes"), "{e}");
}

/// The line of the first line of `text` that starts with `prefix`.
fn line_starting(text: &str, prefix: &str) -> usize {
    1 + text
        .lines()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line `{prefix}` in:\n{text}"))
}

/// Asserts that the scene `text` is refused at the line starting with `key_line`, with a
/// message that contains `says`; returns the message.
fn assert_refused_at(text: &str, key_line: &str, says: &str) -> String {
    let e = error_of(text);
    let line = line_starting(text, key_line);
    assert!(
        e.starts_with(&format!("test.toml:{line}:")),
        "`{key_line}`: expected line {line}: {e}"
    );
    assert!(e.contains(says), "`{key_line}`: {e}");
    e
}

/// Range errors point at the key that holds the mistake, also inside an inline table and in
/// `[output]`; a number beyond f32 is named as written, not as `inf`; no message shows a
/// Rust debug dump.
#[test]
fn scene_errors_point_at_the_key() {
    let cases = [
        ("poisson = 0.3", "poisson = 0.5", "poisson = 0.5", "poisson"),
        (
            "max = [0.4, 0.5]",
            "max = [0.4, 1.5]",
            "max = [0.4, 1.5]",
            "outside the domain",
        ),
        (
            "youngs = 2e4",
            "youngs = 1e300",
            "youngs = 1e300",
            "youngs = 1e300",
        ),
        (
            "png = false",
            "png = false\nimage_size = 3",
            "image_size",
            "image_size = 3",
        ),
        (
            "frames = 6",
            "frames = 6\ngrid = { layout = \"sparse\", block = 5 }",
            "grid",
            "block = 5",
        ),
        (
            "interval = 0.008",
            "interval = -1.0",
            "interval",
            "interval = -1",
        ),
        (
            "radius = 0.08",
            "radius = 0.08\nvelocity = [1.0, inf]",
            "velocity = [1.0, inf]",
            "velocity = inf",
        ),
        ("stop = 0.02", "stop = 0.0", "stop", "stop"),
        (
            "frames = 6",
            "frames = 6\nbulk_viscosity = { linear = -1.0 }",
            "bulk_viscosity",
            "linear = -1",
        ),
    ];
    for (from, to, key_line, says) in cases {
        assert!(SMALL.contains(from), "{from}");
        let text = SMALL.replacen(from, to, 1);
        let e = assert_refused_at(&text, key_line, says);
        assert!(!e.contains("inf") || says.contains("inf"), "{e}");
        assert!(!e.contains(" { "), "a debug dump: {e}");
    }
    // Bulk viscosity: the standard coefficients unless given.
    let text = SMALL.replacen(
        "frames = 6",
        "frames = 6\nbulk_viscosity = { quadratic = 2.0 }",
        1,
    );
    let scene = Scene::parse("test.toml", &text).expect("scene");
    let v = scene.settings::<2>().bulk_viscosity;
    assert_eq!((v.linear, v.quadratic), (0.06, 2.0));
    // A zero collider normal: the shape in words.
    let text = SMALL.replace(
        "[[colliders]]\nshape = \"sphere\"\ncentre = [0.5, 0.2]\nradius = 0.08",
        "[[colliders]]\nshape = \"plane\"\npoint = [0.5, 0.2]\nnormal = [0.0, 0.0]",
    );
    let e = error_of(&text);
    assert!(
        e.contains("normal is zero") && e.contains("plane through"),
        "{e}"
    );
    assert!(!e.contains("Collider {") && !e.contains("Plane {"), "{e}");
}

/// Heat in scene files: the keys reach the solver; mistakes name their key and line.
#[test]
fn scene_heat_keys_are_read_and_checked() {
    use mpm::core::solver::{HeatBoundary, Solver2};
    let scene = Scene::parse("test.toml", SMALL).expect("scene");
    let settings = scene.settings::<2>();
    assert_eq!(
        settings.heat.map(|h| h.walls),
        Some(HeatBoundary::Fixed(280.0))
    );
    let solver: Solver2 = scene.build(&mpm::backend::cpu()).expect("solver");
    let jelly = &solver.materials.thermal[1];
    assert_eq!(
        (jelly.temperature, jelly.conductivity, jelly.specific_heat),
        (320.0, 2e5, 2000.0)
    );
    assert_eq!(jelly.softening, vec![(300.0, 1.0), (350.0, 0.5)]);
    assert_eq!(solver.colliders()[0].heat, HeatBoundary::Fixed(360.0));
    let host = solver.particles.download().expect("particles");
    let jelly_t: Vec<f32> = (0..host.len())
        .filter(|&i| host.material[i] == 1)
        .map(|i| host.temperature[i])
        .collect();
    assert!(!jelly_t.is_empty() && jelly_t.iter().all(|&t| t == 320.0));

    let no_heat = SMALL.replace("heat = { wall_temperature = 280.0 }\n", "");
    let cases = [
        (
            no_heat.clone(),
            "conductivity = 5e5",
            "needs heat conduction on",
        ),
        (
            no_heat
                .replace("conductivity = 5e5\n", "")
                .replace("conductivity = 2e5\n", ""),
            "specific_heat",
            "needs heat conduction on",
        ),
        (
            no_heat
                .replace("conductivity = 5e5\n", "")
                .replace("conductivity = 2e5\n", "")
                .replace("specific_heat = 2000.0\n", ""),
            "temperature = 360.0",
            "collider's temperature needs heat",
        ),
        (
            SMALL.replace(
                "[[300.0, 1.0], [350.0, 0.5]]",
                "[[350.0, 1.0], [300.0, 0.5]]",
            ),
            "softening",
            "must increase",
        ),
        (
            SMALL.replace("conductivity = 2e5", "conductivity = -5.0"),
            "conductivity = -5.0",
            "conductivity = -5",
        ),
        (
            SMALL.replace("bulk = 1e4\n", "bulk = 1e4\nsoftening = [[300.0, 0.5]]\n"),
            "softening",
            "shear modulus",
        ),
        (
            SMALL.replace(
                "png = false",
                "png = false\ncolor = \"temperature\"\ncolor_range = [400.0, 300.0]",
            ),
            "color_range",
            "expected finite low < high",
        ),
    ];
    for (text, key_line, says) in cases {
        assert_refused_at(&text, key_line, says);
    }
    let text = no_heat
        .replace("conductivity = 5e5\n", "")
        .replace("conductivity = 2e5\n", "")
        .replace("specific_heat = 2000.0\n", "")
        .replace("temperature = 360.0\n", "")
        .replace("png = false", "png = false\ncolor = \"temperature\"");
    let e = error_of(&text);
    assert!(e.contains("color = \"temperature\" needs heat"), "{e}");
    // A fixed step too long for the conduction: the material's line.
    let text = SMALL.replace("conductivity = 5e5", "conductivity = 1e8");
    let e = match Scene::parse("test.toml", &text)
        .expect("scene")
        .build::<mpm::core::solver::D2, 2>(&mpm::backend::cpu())
    {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a step above the conduction bound was accepted"),
    };
    assert!(e.contains("stable conduction step"), "{e}");
}

#[test]
fn shipped_scene_files_are_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenes");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("scenes folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 1, "no scene files in {}", dir.display());
}

/// A CPU run on two threads: `mpm run` makes CPU runs reproducible.
fn run(out: &std::path::Path, frames: u32, resume: Option<PathBuf>) -> commands::Summary {
    run_text(SMALL, out, frames, resume)
}

fn run_text(
    text: &str,
    out: &std::path::Path,
    frames: u32,
    resume: Option<PathBuf>,
) -> commands::Summary {
    let scene = out.join("small.toml");
    std::fs::write(&scene, text).expect("scene");
    commands::run(&RunOptions {
        scene: Some(scene),
        backend: Some(mpm::backend::Choice::Cpu),
        frames: Some(frames),
        out: Some(out.to_path_buf()),
        resume,
        threads: Some(2),
        view: false,
        energy: false,
        rebalance_every: 10,
    })
    .unwrap_or_else(|e| panic!("run failed: {e}"))
}

#[test]
fn resumed_runs_continue_bit_for_bit() {
    let base = std::env::temp_dir().join(format!("mpm-resume-{}", std::process::id()));
    let (whole, part) = (base.join("whole"), base.join("part"));
    for d in [&whole, &part] {
        std::fs::create_dir_all(d).expect("dir");
    }
    // Six frames in one go, and two then four more from the checkpoint after frame two.
    let a = run(&whole, 6, None);
    run(&part, 2, None);
    let ck = commands::checkpoint_path(&part);
    let saved = part.join("after2.mpmck");
    std::fs::copy(&ck, &saved).expect("copy");
    let b = run(&part, 6, Some(saved));
    assert_eq!(a.steps, 6 * 10);
    assert_eq!(b.steps, 4 * 10, "the resumed run does only what was left");
    let (x, y) = (
        std::fs::read(commands::checkpoint_path(&whole)).expect("whole"),
        std::fs::read(commands::checkpoint_path(&part)).expect("part"),
    );
    assert!(x.len() > 1000);
    assert!(
        x == y,
        "the resumed run's final state differs from the uninterrupted one"
    );
    // Damage is detected.
    let mut bad = y.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    let damaged = part.join("damaged.mpmck");
    std::fs::write(&damaged, &bad).expect("write");
    let scene = part.join("small.toml");
    let e = commands::run(&RunOptions {
        scene: Some(scene),
        backend: Some(mpm::backend::Choice::Cpu),
        frames: Some(6),
        out: Some(part.clone()),
        resume: Some(damaged),
        threads: Some(1),
        view: false,
        energy: false,
        rebalance_every: 10,
    })
    .expect_err("damaged checkpoint");
    assert!(e.to_string().contains("checksum"), "{e}");
    let _ = std::fs::remove_dir_all(&base);
}

/// A checkpoint holds a spinning mesh collider's place and turn: `sand_wheel.toml` run for
/// four frames, and for two then two more from the checkpoint, ends in the same bytes.
#[test]
fn resumed_runs_keep_a_spinning_mesh_collider() {
    let base = std::env::temp_dir().join(format!("mpm-resume-mesh-{}", std::process::id()));
    let (whole, part) = (base.join("whole"), base.join("part"));
    for d in [&whole, &part] {
        std::fs::create_dir_all(d).expect("dir");
    }
    let mesh = concat!(env!("CARGO_MANIFEST_DIR"), "/scenes/meshes/torus.obj");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenes/sand_wheel.toml"
    ))
    .expect("scene")
    .replace("\"meshes/torus.obj\"", &format!("{mesh:?}"))
    .replace("[output]", "[output]\npng = false\ncheckpoint_every = 2");
    run_text(&text, &whole, 4, None);
    run_text(&text, &part, 2, None);
    let saved = part.join("after2.mpmck");
    std::fs::copy(commands::checkpoint_path(&part), &saved).expect("copy");
    run_text(&text, &part, 4, Some(saved));
    let (x, y) = (
        std::fs::read(commands::checkpoint_path(&whole)).expect("whole"),
        std::fs::read(commands::checkpoint_path(&part)).expect("part"),
    );
    assert!(
        x == y,
        "the resumed run's final state differs from the uninterrupted one"
    );
    let _ = std::fs::remove_dir_all(&base);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated scene text never panics the parser; errors point inside the text.
    #[test]
    fn fuzzed_scene_text_gives_errors_not_panics(
        cut in 0usize..SMALL.len(),
        len in 0usize..12,
        insert in "[ -~\n]{0,8}",
    ) {
        let mut text = SMALL.to_string();
        let start = cut.min(text.len());
        let end = (start + len).min(text.len());
        if text.is_char_boundary(start) && text.is_char_boundary(end) {
            text.replace_range(start..end, &insert);
        }
        match Scene::parse("fuzz.toml", &text) {
            Ok(_) => {}
            Err(SceneError::At { line, column, .. }) => {
                prop_assert!(line >= 1 && line <= text.lines().count() + 1);
                prop_assert!(column >= 1);
            }
            Err(other) => prop_assert!(!other.to_string().is_empty()),
        }
    }
}

#[test]
fn runs_write_pngs_plys_previews_and_a_final_checkpoint() {
    let out = std::env::temp_dir().join(format!("mpm-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("dir");
    let text = SMALL
        .replace(
            "png = false",
            "png = true\nply = true\ngif = true\ncolor = \"speed\"\nimage_size = 64",
        )
        .replace("checkpoint_every = 2", "checkpoint_every = 0");
    let scene = out.join("small.toml");
    std::fs::write(&scene, text).expect("scene");
    let summary = commands::run(&RunOptions {
        scene: Some(scene),
        backend: Some(mpm::backend::Choice::Cpu),
        frames: Some(3),
        out: Some(out.clone()),
        resume: None,
        threads: None,
        view: false,
        energy: false,
        rebalance_every: 10,
    })
    .unwrap_or_else(|e| panic!("run failed: {e}"));
    assert_eq!(summary.frames, 3);
    assert!(summary.interrupted.is_none());
    for f in 0..3 {
        for ext in ["png", "ply"] {
            let path = out.join(format!("frame_{f:05}.{ext}"));
            assert!(path.is_file(), "{} is missing", path.display());
        }
    }
    let png = image::open(out.join("frame_00002.png")).expect("png decodes");
    assert_eq!(png.width(), 64);
    let ply = std::fs::read(out.join("frame_00002.ply")).expect("ply");
    let header = String::from_utf8_lossy(&ply[..ply.len().min(400)]).to_string();
    assert!(
        header.starts_with("ply\nformat binary_little_endian 1.0"),
        "{header}"
    );
    assert!(
        header.contains(&format!("element vertex {}", summary.particles)),
        "{header}"
    );
    assert!(out.join("preview.gif").is_file());
    // Nothing temporary is left behind.
    for entry in std::fs::read_dir(&out).expect("list") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .to_string();
        assert!(!name.contains("tmp"), "temporary file {name} left behind");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn three_d_scenes_render_splats() {
    let out = std::env::temp_dir().join(format!("mpm-3d-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("dir");
    let text = r#"
[simulation]
dimension = 3
resolution = [16, 16, 16]
dt = 1e-3
frame_time = 0.005
frames = 2
grid = { layout = "sparse", block = 4 }

[[materials]]
name = "snow"
model = "snow"

[[bodies]]
material = "snow"
shape = "sphere"
centre = [0.5, 0.5, 0.5]
radius = 0.2

[output]
image_size = 96
"#;
    let scene = out.join("ball.toml");
    std::fs::write(&scene, text).expect("scene");
    commands::run(&RunOptions {
        scene: Some(scene),
        backend: Some(mpm::backend::Choice::Cpu),
        frames: None,
        out: Some(out.clone()),
        resume: None,
        threads: None,
        view: false,
        energy: false,
        rebalance_every: 10,
    })
    .unwrap_or_else(|e| panic!("run failed: {e}"));
    let png = image::open(out.join("frame_00001.png"))
        .expect("png")
        .to_rgb8();
    // The ball covers the middle of the picture, not the background colour of the corner.
    let (corner, middle) = (*png.get_pixel(0, 0), *png.get_pixel(48, 48));
    assert_ne!(corner, middle, "the ball should be drawn in the middle");
    let _ = std::fs::remove_dir_all(&out);
}

/// A run that diverges names the material as the scene does, not only its model.
#[test]
fn a_divergence_names_the_scene_material() {
    let out = std::env::temp_dir().join(format!("mpm-diverge-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("dir");
    // Stiff jelly at a time step far above its wave-speed limit.
    let text = SMALL
        .replace("youngs = 2e4", "youngs = 1e9")
        .replace("dt = 4e-4", "dt = 1e-3")
        .replace("frame_time = 0.004", "frame_time = 0.01");
    let scene = out.join("stiff.toml");
    std::fs::write(&scene, text).expect("scene");
    let e = commands::run(&RunOptions {
        scene: Some(scene),
        backend: Some(mpm::backend::Choice::Cpu),
        frames: Some(6),
        out: Some(out.clone()),
        resume: None,
        threads: Some(1),
        view: false,
        energy: false,
        rebalance_every: 10,
    })
    .expect_err("the stiff jelly diverges")
    .to_string();
    assert!(
        e.contains("diverged") && e.contains("material `jelly`, neo-hookean"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A mesh collider from a scene file: a torus ring (`scenes/meshes/torus.obj`, lying flat,
/// its tube of radius 0.086 around y = 0.2, 0.214 from the centre) holds up a jelly block
/// dropped on its tube from 0.044 above: after 0.2 s no particle lies more than a quarter
/// cell inside the mesh (its own fine distance field, interpolated here), and nine in ten
/// are above the ring's plane (falling through, the block would reach 0.13). A mesh collider
/// in 2D, or `file` on a sphere collider, is an error that says so.
#[test]
fn mesh_colliders_hold_material_and_are_checked() {
    use mpm::core::solver::D3;
    use mpm::mesh::TriMesh;
    let text = r#"
[simulation]
dimension = 3
resolution = [32, 32, 32]
dt = 4e-4
frame_time = 0.02
frames = 10

[[materials]]
name = "jelly"
model = "neo-hookean"
youngs = 2e4

[[bodies]]
material = "jelly"
shape = "box"
min = [0.66, 0.33, 0.45]
max = [0.76, 0.43, 0.55]

[[colliders]]
shape = "mesh"
file = "scenes/meshes/torus.obj"
min = [0.2, 0.1, 0.2]
max = [0.8, 0.3, 0.8]
condition = "sticky"
"#;
    let scene = Scene::parse("test.toml", text).expect("scene");
    let backend = mpm::backend::cpu();
    let mut s = scene.build::<D3, 3>(&backend).expect("solver");
    while s.time() < 0.2 {
        s.substep().expect("substep");
    }
    let (x, _) = s.positions().expect("positions");
    let mut mesh = TriMesh::load("scenes/meshes/torus.obj").expect("mesh");
    mesh.fit_into([0.2, 0.1, 0.2], [0.8, 0.3, 0.8])
        .expect("fit");
    let dx = 1.0f32 / 32.0;
    let fine = mesh
        .signed_distance(f64::from(dx) / 8.0, f64::from(dx))
        .expect("field");
    let distance = |p: [f32; 3]| {
        let local: [f32; 3] = std::array::from_fn(|a| (p[a] - fine.origin[a]) / fine.spacing);
        let cell = local.map(|c| c.floor());
        let mut d = 0.0;
        for corner in 0..8 {
            let mut w = 1.0;
            let mut index = 0;
            let mut stride = 1;
            for a in 0..3 {
                let high = (corner >> a) & 1;
                let f = local[a] - cell[a];
                w *= if high == 1 { f } else { 1.0 - f };
                let k = (cell[a] as usize + high).min(fine.dims[a] as usize - 1);
                index += k * stride;
                stride *= fine.dims[a] as usize;
            }
            d += w * fine.values[index];
        }
        d
    };
    let deepest = x.iter().map(|&p| distance(p)).fold(f32::MAX, f32::min);
    let above = x.iter().filter(|p| p[1] > 0.2).count();
    assert!(
        deepest > -0.25 * dx && above > x.len() * 9 / 10,
        "deepest particle {} cells inside, {above} of {} above the centre",
        -deepest / dx,
        x.len()
    );
    for (edit, says) in [
        (
            text.replace("dimension = 3", "dimension = 2")
                .replace("resolution = [32, 32, 32]", "resolution = [32, 32]")
                .replace("min = [0.66, 0.33, 0.45]", "min = [0.66, 0.33]")
                .replace("max = [0.76, 0.43, 0.55]", "max = [0.76, 0.43]"),
            "mesh colliders need dimension = 3",
        ),
        (
            text.replace("shape = \"mesh\"", "shape = \"sphere\""),
            "only a mesh collider takes `file`",
        ),
    ] {
        let e = error_of(&edit);
        assert!(e.contains(says), "{e}");
    }
}

/// Surface tension in scene files: a material's key turns it on and reaches the solver;
/// mistakes name their key and line.
#[test]
fn scene_surface_tension_is_read_and_checked() {
    use mpm::core::solver::Solver2;
    let liquids = |tensions: &[&str]| -> String {
        let mut text = String::from(
            "[simulation]\ndimension = 2\nresolution = [32, 32]\ndt = 1e-4\nframe_time = 0.01\nframes = 1\n\n",
        );
        for (i, t) in tensions.iter().enumerate() {
            text += &format!(
                "[[materials]]\nname = \"liquid{i}\"\nmodel = \"water\"\nfree_surface = false\n\
                 surface_tension = {t}\n\n"
            );
        }
        text + "[[bodies]]\nmaterial = \"liquid0\"\nshape = \"box\"\nmin = [0.2, 0.2]\n\
                max = [0.4, 0.4]\n"
    };
    let text = liquids(&["2.0", "0.0", "3.0"]);
    let scene = Scene::parse("test.toml", &text).expect("scene");
    assert!(scene.settings::<2>().surface_tension);
    let solver: Solver2 = scene.build(&mpm::backend::cpu()).expect("solver");
    assert_eq!(solver.materials.tension, vec![2.0, 0.0, 3.0]);
    assert_eq!(solver.materials.tension_channels(), [2.0, 3.0, 0.0, 0.0]);
    let none = Scene::parse("test.toml", &liquids(&["0.0"])).expect("scene");
    assert!(!none.settings::<2>().surface_tension);

    for (text, key_line, says) in [
        (
            liquids(&["-1.0"]),
            "surface_tension = -1.0",
            "surface_tension = -1 must be finite and >= 0",
        ),
        (
            liquids(&["1.0", "1.0", "1.0", "1.0", "5.0"]),
            "surface_tension = 5.0",
            "at most 4 materials have a surface tension",
        ),
    ] {
        assert_refused_at(&text, key_line, says);
    }
    // 0.141 sqrt(1000 / 32^3 / 1e6) = 2.5e-5 s, below the fixed 1e-4 s: refused when the
    // solver is built, at the material.
    let text = liquids(&["1e6"]);
    let scene = Scene::parse("test.toml", &text).expect("scene");
    let e = match scene.build::<mpm::core::solver::D2, 2>(&mpm::backend::cpu()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a fixed step above the capillary step was taken"),
    };
    assert!(
        e.starts_with(&format!(
            "test.toml:{}:",
            line_starting(&text, "[[materials]]")
        )) && e.contains("exceeds the capillary step"),
        "{e}"
    );
}
