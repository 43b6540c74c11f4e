//! Output files and images: PLY round trips, the GIF preview, atomic writes and their errors,
//! the 3D splat renderer and speed colouring.

use std::path::Path;

use image::codecs::gif::GifDecoder;
use image::{AnimationDecoder, Rgb, RgbImage};
use mpm::glam::{Vec2, Vec3};
use mpm::output::{self, GifRecorder, OutputError};
use mpm::render::{self, Camera, Colouring, View3d};

mod scratch;
use scratch::Scratch;

/// Names of the files in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A deterministic stream of numbers in [0, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// One PLY vertex as read back.
#[derive(Debug, PartialEq)]
struct Vertex {
    floats: [u32; 6], // bit patterns: compare exactly, -0.0 and all
    material: i32,
}

/// Parses a binary little-endian PLY with the header `write_ply_*` promises.
fn read_ply(path: &Path) -> Vec<Vertex> {
    let bytes = std::fs::read(path).expect("read PLY");
    let end = b"end_header\n";
    let header_len = bytes
        .windows(end.len())
        .position(|w| w == end)
        .expect("end_header present")
        + end.len();
    let header = std::str::from_utf8(&bytes[..header_len]).expect("ASCII header");
    let lines: Vec<&str> = header
        .lines()
        .filter(|l| !l.starts_with("comment"))
        .collect();
    assert_eq!(lines[0], "ply");
    assert_eq!(lines[1], "format binary_little_endian 1.0");
    let n: usize = lines[2]
        .strip_prefix("element vertex ")
        .expect("vertex element")
        .parse()
        .expect("vertex count");
    let properties: Vec<&str> = lines[3..lines.len() - 1].to_vec();
    assert_eq!(
        properties,
        [
            "property float x",
            "property float y",
            "property float z",
            "property float vx",
            "property float vy",
            "property float vz",
            "property int material",
        ]
    );
    assert_eq!(lines[lines.len() - 1], "end_header");
    let body = &bytes[header_len..];
    assert_eq!(body.len(), n * 28, "body holds exactly n vertices");
    body.chunks_exact(28)
        .map(|v| {
            let word = |k: usize| [v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]];
            Vertex {
                floats: std::array::from_fn(|k| u32::from_le_bytes(word(k))),
                material: i32::from_le_bytes(word(6)),
            }
        })
        .collect()
}

#[test]
fn ply_round_trip_3d() {
    let dir = Scratch::new("output", "ply3");
    let mut rng = Rng(1);
    let n = 1000;
    let x: Vec<Vec3> = (0..n)
        .map(|_| Vec3::new(rng.next(), rng.next() * 2.0 - 1.0, -rng.next()))
        .collect();
    let mut v: Vec<Vec3> = (0..n)
        .map(|_| Vec3::new(rng.next() - 0.5, 1e-30 * rng.next(), 1e6 * rng.next()))
        .collect();
    v[0] = Vec3::new(-0.0, f32::MAX, f32::MIN_POSITIVE);
    let m: Vec<i32> = (0..n as i32).map(|i| i * 7919 - 3_000_000).collect();
    let path = dir.join("frame_0001.ply");
    output::write_ply_3d(&path, &x, &v, &m).expect("write PLY");

    let back = read_ply(&path);
    assert_eq!(back.len(), n);
    for i in 0..n {
        let (p, u) = (x[i], v[i]);
        let want = [p.x, p.y, p.z, u.x, u.y, u.z].map(f32::to_bits);
        assert_eq!(
            back[i],
            Vertex {
                floats: want,
                material: m[i]
            },
            "vertex {i}"
        );
    }
    assert_eq!(listing(&dir), ["frame_0001.ply"], "no temporary file left");
}

#[test]
fn ply_round_trip_2d_has_zero_z() {
    let dir = Scratch::new("output", "ply2");
    let x = vec![Vec2::new(0.25, 0.5), Vec2::new(1.0 / 3.0, -7.5), Vec2::ZERO];
    let v = vec![
        Vec2::new(-1.5, 2.0),
        Vec2::new(1e-7, 3e7),
        Vec2::new(0.1, 0.2),
    ];
    let m = vec![0, 2, -1];
    let path = dir.join("p.ply");
    output::write_ply_2d(&path, &x, &v, &m).expect("write PLY");
    let back = read_ply(&path);
    assert_eq!(back.len(), 3);
    for i in 0..3 {
        let want = [x[i].x, x[i].y, 0.0, v[i].x, v[i].y, 0.0].map(f32::to_bits);
        assert_eq!(back[i].floats, want, "vertex {i}");
        assert_eq!(back[i].material, m[i]);
    }

    // An empty set is still a valid file.
    output::write_ply_2d(&path, &[], &[], &[]).expect("write empty PLY");
    assert!(read_ply(&path).is_empty());
    assert_eq!(listing(&dir), ["p.ply"]);
}

#[test]
fn ply_rejects_mismatched_lengths_and_writes_nothing() {
    let dir = Scratch::new("output", "plybad");
    let path = dir.join("bad.ply");
    let err = output::write_ply_3d(&path, &[Vec3::ZERO; 3], &[Vec3::ZERO; 2], &[0; 3])
        .expect_err("lengths differ");
    assert!(matches!(err, OutputError::Invalid { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("bad.ply") && msg.contains("3 positions, 2 velocities"),
        "{msg}"
    );
    assert!(listing(&dir).is_empty());
}

#[test]
fn failing_writes_name_the_file_and_leave_nothing() {
    let dir = Scratch::new("output", "fail");
    let missing = dir.join("no-such-folder").join("frame.ply");
    let err = output::write_ply_2d(&missing, &[Vec2::ZERO], &[Vec2::ZERO], &[0])
        .expect_err("folder does not exist");
    let msg = err.to_string();
    assert!(matches!(err, OutputError::Io { .. }), "{err:?}");
    assert!(msg.contains(&missing.display().to_string()), "{msg}");
    assert!(msg.contains("creating the temporary file"), "{msg}");
    assert!(std::error::Error::source(&err).is_some());

    let mut gif = GifRecorder::new(dir.join("no-such-folder").join("a.gif"), 64, 50);
    gif.push(&RgbImage::new(8, 8)).expect("frame");
    let err = gif.write().expect_err("folder does not exist");
    assert!(err.to_string().contains("a.gif"), "{err}");

    // The target is a folder: the temporary file is written, the rename fails, and the
    // temporary file is cleaned up.
    std::fs::create_dir(dir.join("taken.ply")).expect("mkdir");
    let err = output::write_ply_2d(&dir.join("taken.ply"), &[], &[], &[])
        .expect_err("cannot rename over a folder");
    assert!(err.to_string().contains("renaming"), "{err}");
    assert_eq!(listing(&dir), ["taken.ply"], "no temporary file left");
}

/// A 512x512 frame with a white square whose position depends on `k`.
fn test_frame(k: u32) -> RgbImage {
    RgbImage::from_fn(512, 512, |x, y| {
        let inside = (x / 128 == k % 4) && (y / 128 == 1);
        if inside {
            Rgb([255, 255, 255])
        } else {
            Rgb([20, 40, 200])
        }
    })
}

#[test]
fn gif_has_every_frame_at_the_preview_size() {
    let dir = Scratch::new("output", "gif");
    let path = dir.join("preview.gif");
    let mut gif = GifRecorder::new(&path, 256, 40);
    assert!(matches!(gif.write(), Err(OutputError::Invalid { .. })));
    for k in 0..3 {
        gif.push(&test_frame(k)).expect("push");
    }
    gif.write().expect("write after 3 frames");
    let decode = |path: &Path| {
        let file = std::io::BufReader::new(std::fs::File::open(path).expect("open"));
        GifDecoder::new(file)
            .expect("GIF header")
            .into_frames()
            .collect_frames()
            .expect("frames decode")
    };
    assert_eq!(decode(&path).len(), 3);

    for k in 3..6 {
        gif.push(&test_frame(k)).expect("push");
    }
    gif.write().expect("write after 6 frames");
    let frames = decode(&path);
    assert_eq!(frames.len(), 6);
    assert_eq!(gif.frame_size(), Some((256, 256)));
    for (k, f) in frames.iter().enumerate() {
        let img = f.buffer();
        assert_eq!(img.dimensions(), (256, 256), "frame {k}");
        assert_eq!(f.delay().numer_denom_ms(), (40, 1), "frame {k}");
        // The white square (shrunk by 2) is where frame k put it; the rest stays blue.
        let white = img.get_pixel(64 * (k as u32 % 4) + 32, 96);
        let blue = img.get_pixel(64 * ((k as u32 + 2) % 4) + 32, 96);
        assert!(
            white.0[..3].iter().all(|&c| c > 230),
            "frame {k}: {white:?}"
        );
        assert!(blue[2] > 180 && blue[0] < 60, "frame {k}: {blue:?}");
    }
    assert_eq!(listing(&dir), ["preview.gif"], "no temporary file left");
}

#[test]
fn recorder_can_move_to_another_thread() {
    fn send<T: Send>() {}
    send::<GifRecorder>();
    send::<OutputError>();
}

#[test]
fn gif_keeps_aspect_and_never_enlarges() {
    let dir = Scratch::new("output", "gifaspect");
    let wide = dir.join("wide.gif");
    let mut gif = GifRecorder::new(&wide, 256, 100);
    gif.push(&RgbImage::new(600, 300)).expect("push");
    gif.push(&RgbImage::new(300, 300))
        .expect("other sizes fit the first");
    gif.write().expect("write");
    assert_eq!(gif.frame_size(), Some((256, 128)));

    let small = dir.join("small.gif");
    let mut gif = GifRecorder::new(&small, 256, 100);
    gif.push(&RgbImage::new(100, 50)).expect("push");
    gif.write().expect("write");
    let file = std::io::BufReader::new(std::fs::File::open(&small).expect("open"));
    let frames = GifDecoder::new(file)
        .expect("GIF")
        .into_frames()
        .collect_frames()
        .expect("decode");
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].buffer().dimensions(), (100, 50));
}

fn is_background(p: &Rgb<u8>, bg: &Rgb<u8>) -> bool {
    p == bg
}

fn luminance(p: &Rgb<u8>) -> f32 {
    0.2126 * p[0] as f32 + 0.7152 * p[1] as f32 + 0.0722 * p[2] as f32
}

#[test]
fn sphere_renders_as_a_centred_round_blob_brightest_in_front() {
    let mut rng = Rng(7);
    let (centre, radius) = (Vec3::splat(0.5), 0.25);
    let mut x = Vec::new();
    while x.len() < 40_000 {
        let p = Vec3::new(rng.next(), rng.next(), rng.next()) * 2.0 - 1.0;
        if p.length() <= 1.0 {
            x.push(centre + radius * p);
        }
    }
    let m = vec![2; x.len()]; // the light grey material shows shading best
    let size = 256;
    let view = View3d::unit_cube(size);
    let img = render::particles_3d(&x, &[], &m, &view);
    let bg = *img.get_pixel(0, 0);

    // Centroid of covered pixels at the image centre (the camera looks at the cube's centre).
    let covered: Vec<(f32, f32)> = img
        .enumerate_pixels()
        .filter(|(_, _, p)| !is_background(p, &bg))
        .map(|(x, y, _)| (x as f32 + 0.5, y as f32 + 0.5))
        .collect();
    let n = covered.len() as f32;
    let cx = covered.iter().map(|p| p.0).sum::<f32>() / n;
    let cy = covered.iter().map(|p| p.1).sum::<f32>() / n;
    let mid = size as f32 / 2.0;
    assert!(
        (cx - mid).abs() < 1.5 && (cy - mid).abs() < 1.5,
        "centroid ({cx}, {cy})"
    );

    // The silhouette of a sphere at distance d seen with focal length f has radius
    // f tan(asin(R / d)); splats add their own radius at the rim.
    let cam = view.camera;
    let focal = mid / (cam.fov_y / 2.0).tan();
    let expected = focal * (radius / cam.distance).asin().tan();
    let area_radius = (n / std::f32::consts::PI).sqrt();
    assert!(
        area_radius > expected * 0.95 && area_radius < expected * 1.12,
        "blob radius {area_radius} px, sphere {expected} px"
    );
    // Round: the extent along 16 directions varies little.
    for k in 0..16 {
        let a = k as f32 * std::f32::consts::TAU / 16.0;
        let (dx, dy) = (a.cos(), a.sin());
        let mut reach = 0.0;
        let mut r = 0.0;
        while r < mid {
            let (px, py) = ((mid + dx * r) as u32, (mid + dy * r) as u32);
            if !is_background(img.get_pixel(px, py), &bg) {
                reach = r;
            }
            r += 0.25;
        }
        assert!(
            (reach - area_radius).abs() < 0.08 * area_radius + 1.5,
            "direction {k}: reach {reach} px, mean radius {area_radius} px"
        );
    }

    // The front of the sphere (the middle of the disc) is nearer than its rim, so brighter.
    let mean_lum = |lo: f32, hi: f32| {
        let ring: Vec<f32> = img
            .enumerate_pixels()
            .filter(|(x, y, _)| {
                let r = ((*x as f32 + 0.5 - mid).powi(2) + (*y as f32 + 0.5 - mid).powi(2)).sqrt();
                r >= lo * area_radius && r < hi * area_radius
            })
            .map(|(_, _, p)| luminance(p))
            .collect();
        ring.iter().sum::<f32>() / ring.len() as f32
    };
    let (middle, rim) = (mean_lum(0.0, 0.3), mean_lum(0.8, 0.95));
    assert!(middle > rim * 1.05, "middle {middle}, rim {rim}");
}

/// A cube of `n^3` particles of side `side` around `c`.
fn cluster(c: Vec3, side: f32, n: usize) -> Vec<Vec3> {
    let mut out = Vec::new();
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                let f = Vec3::new(i as f32, j as f32, k as f32) / (n - 1) as f32 - 0.5;
                out.push(c + side * f);
            }
        }
    }
    out
}

/// Looks straight down -z at the unit cube's centre: +x is right on screen, +z is nearer.
fn front_view(size: u32) -> View3d {
    let mut view = View3d::unit_cube(size);
    view.camera = Camera {
        target: Vec3::splat(0.5),
        yaw: 0.0,
        pitch: 0.0,
        distance: 2.5,
        fov_y: 40f32.to_radians(),
    };
    view
}

/// The pixel where `front_view(size)` shows `p`.
fn front_pixel(size: u32, p: Vec3) -> (u32, u32) {
    let focal = size as f32 / 2.0 / 20f32.to_radians().tan();
    let s = focal / (2.5 - (p.z - 0.5));
    let x = size as f32 / 2.0 + (p.x - 0.5) * s;
    let y = size as f32 / 2.0 - (p.y - 0.5) * s;
    (x as u32, y as u32)
}

#[test]
fn nearer_particles_are_brighter_and_hide_farther_ones() {
    let size = 200;
    let view = front_view(size);

    // Same material, same size: one cluster near the camera (left), one far (right).
    let mut x = cluster(Vec3::new(0.3, 0.5, 0.85), 0.1, 12);
    x.extend(cluster(Vec3::new(0.7, 0.5, 0.15), 0.1, 12));
    let m = vec![2; x.len()];
    let img = render::particles_3d(&x, &[], &m, &view);
    let bg = *img.get_pixel(0, 0);
    let half_mean = |left: bool| {
        let lums: Vec<f32> = img
            .enumerate_pixels()
            .filter(|(x, _, p)| (*x < size / 2) == left && !is_background(p, &bg))
            .map(|(_, _, p)| luminance(p))
            .collect();
        assert!(lums.len() > 50, "cluster visible ({} px)", lums.len());
        (lums.iter().sum::<f32>() / lums.len() as f32, lums.len())
    };
    let ((near_lum, near_px), (far_lum, far_px)) = (half_mean(true), half_mean(false));
    assert!(near_lum > 1.3 * far_lum, "near {near_lum}, far {far_lum}");
    assert!(
        near_px > far_px,
        "perspective: near {near_px} px, far {far_px} px"
    );

    // Two clusters on the view axis, teal (material 0) in front of red (material 1): the
    // middle pixel is teal whichever is drawn first.
    let front = cluster(Vec3::new(0.5, 0.5, 0.7), 0.1, 10);
    let back = cluster(Vec3::new(0.5, 0.5, 0.3), 0.3, 10);
    let view = View3d {
        radius: Some(0.025), // the back cluster's splats touch: no gaps
        ..view
    };
    for front_first in [true, false] {
        let (a, b) = if front_first {
            (&front, &back)
        } else {
            (&back, &front)
        };
        let x: Vec<Vec3> = a.iter().chain(b.iter()).copied().collect();
        let m: Vec<i32> = (0..x.len())
            .map(|i| i32::from((i < a.len()) != front_first))
            .collect();
        let img = render::particles_3d(&x, &[], &m, &view);
        let p = img.get_pixel(size / 2, size / 2);
        assert!(
            p[1] > p[0] && p[2] > p[0],
            "front drawn first: {front_first}: {p:?} is not teal"
        );
        // The far cluster shows around the near one.
        let (qx, qy) = front_pixel(size, Vec3::new(0.6, 0.5, 0.45));
        let q = img.get_pixel(qx, qy);
        assert!(q[0] > q[1] && q[0] > q[2], "{q:?} is not red");
    }
}

#[test]
fn speed_colouring_separates_slow_and_fast_particles() {
    // 2D: a particle at rest and a fast one, on a fixed scale.
    let x = vec![Vec2::new(0.25, 0.5), Vec2::new(0.75, 0.5)];
    let v = [0.0, 5.0];
    let img = render::particles_2d_by(&x, &v, &[], 64, Colouring::Speed { max: Some(5.0) });
    let (slow, fast) = (img.get_pixel(16, 32).0, img.get_pixel(48, 32).0);
    assert_eq!(slow, render::colormap(0.0));
    assert_eq!(fast, render::colormap(1.0));
    assert_ne!(slow, fast);
    // The same set by material: both are material 0's colour.
    let img = render::particles_2d_by(&x, &v, &[0, 0], 64, Colouring::Material);
    assert_eq!(img.get_pixel(16, 32), img.get_pixel(48, 32));
    // The old entry point still draws by material.
    assert_eq!(
        render::particles_2d(&x, &[1, 1], 64).get_pixel(16, 32).0,
        render::material_colour(1)
    );

    // The frame's 99th percentile: one wild outlier does not crush everyone else to the
    // bottom of the map.
    let mut speeds: Vec<f32> = (0..1000).map(|i| i as f32 / 999.0).collect();
    speeds.push(1e6);
    let scale = render::speed_scale(&speeds);
    assert!((scale - 0.99).abs() < 0.01, "p99 = {scale}");
    let c = render::particle_colours(&speeds, &[], Colouring::Speed { max: None });
    assert_eq!(c[0], render::colormap(0.0));
    assert_eq!(c[500], render::colormap(speeds[500] * (1.0 / scale)));
    assert_eq!(c[1000], render::colormap(1.0));
    assert_ne!(c[0], c[500]);
    assert_ne!(c[500], c[1000]);
    // The map runs dark to light.
    let lum = |c: [u8; 3]| luminance(&Rgb(c));
    assert!(lum(render::colormap(0.0)) < lum(render::colormap(0.5)));
    assert!(lum(render::colormap(0.5)) < lum(render::colormap(1.0)));

    // 3D: a slow cluster and a fast one at the same depth get different hues.
    let view = View3d {
        colouring: Colouring::Speed { max: None },
        ..front_view(128)
    };
    let mut x = cluster(Vec3::new(0.3, 0.5, 0.5), 0.1, 8);
    let slow_n = x.len();
    x.extend(cluster(Vec3::new(0.7, 0.5, 0.5), 0.1, 8));
    let v: Vec<f32> = (0..x.len())
        .map(|i| if i < slow_n { 0.0 } else { 2.0 })
        .collect();
    let img = render::particles_3d(&x, &v, &[], &view);
    let (sx, sy) = front_pixel(128, Vec3::new(0.3, 0.5, 0.55));
    let (fx, fy) = front_pixel(128, Vec3::new(0.7, 0.5, 0.55));
    let (s, f) = (img.get_pixel(sx, sy).0, img.get_pixel(fx, fy).0);
    // Viridis: purple at rest (blue > green), yellow when fast (red and green > blue).
    assert!(s[2] > s[1], "slow {s:?}");
    assert!(f[0] > f[2] && f[1] > f[2], "fast {f:?}");
}

#[test]
fn default_camera_frames_the_domain() {
    // Particles on the 8 corners of a non-cubic box all land inside the image.
    let (min, max) = (Vec3::new(-1.0, 0.0, 2.0), Vec3::new(3.0, 1.0, 2.5));
    let mut x = Vec::new();
    for c in 0..8 {
        x.push(Vec3::new(
            if c & 1 == 0 { min.x } else { max.x },
            if c & 2 == 0 { min.y } else { max.y },
            if c & 4 == 0 { min.z } else { max.z },
        ));
    }
    for (w, h) in [(300, 200), (200, 300)] {
        let mut view = View3d::new(min, max, w, h);
        view.radius = Some(0.03);
        let img = render::particles_3d(&x, &[], &[0; 8], &view);
        let bg = *img.get_pixel(0, 0);
        let covered = img.pixels().filter(|p| **p != bg).count();
        // Eight splats of several pixels each, none clipped at the border.
        assert!(covered > 8 * 4, "{w}x{h}: {covered} px");
        for y in 0..h {
            for x in [0, w - 1] {
                assert_eq!(*img.get_pixel(x, y), bg, "{w}x{h}: border at ({x}, {y})");
            }
        }
    }
}

/// User + system CPU time of the calling thread (Linux; 0 elsewhere), 10 ms resolution.
fn thread_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/thread-self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name, from the state (field 3): utime and
    // stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}

/// `cargo test --release --test output -- --ignored --nocapture`
#[test]
fn temperature_colouring_runs_cold_to_hot() {
    let x = vec![Vec2::new(0.25, 0.5), Vec2::new(0.75, 0.5)];
    let t = [250.0, 400.0];
    let img = render::particles_2d_by(&x, &t, &[], 64, Colouring::Temperature { range: None });
    assert_eq!(img.get_pixel(16, 32).0, render::colormap(0.0));
    assert_eq!(img.get_pixel(48, 32).0, render::colormap(1.0));
    // On a given range: 325 K is half way from 250 to 400.
    let range = Some((250.0, 400.0));
    let c = render::particle_colours(&[325.0, 100.0], &[], Colouring::Temperature { range });
    assert_eq!(c, vec![render::colormap(0.5), render::colormap(0.0)]);
    // Damage runs from intact (0) to broken (1).
    let c = render::particle_colours(&[0.0, 1.0], &[], Colouring::Damage);
    assert_eq!(c, vec![render::colormap(0.0), render::colormap(1.0)]);
    // A uniform frame does not divide by zero: it sits at the cold end.
    let c = render::particle_colours(&[300.0; 3], &[], Colouring::Temperature { range: None });
    assert_eq!(c, vec![render::colormap(0.0); 3]);
}

#[test]
#[ignore = "timing; run in release"]
fn time_one_million_splats_at_512() {
    let mut rng = Rng(3);
    let n = 1_000_000;
    let x: Vec<Vec3> = (0..n)
        .map(|_| Vec3::new(rng.next(), rng.next() * 0.6, rng.next()))
        .collect();
    let v: Vec<f32> = (0..n).map(|_| rng.next()).collect();
    let m: Vec<i32> = (0..n).map(|i| i % 3).collect();
    for colouring in [Colouring::Material, Colouring::Speed { max: None }] {
        let view = View3d {
            colouring,
            ..View3d::unit_cube(512)
        };
        let _ = render::particles_3d(&x, &v, &m, &view); // warm caches and pages
        let runs = 10;
        let (start, cpu_start) = (std::time::Instant::now(), thread_cpu_seconds());
        for _ in 0..runs {
            std::hint::black_box(render::particles_3d(&x, &v, &m, &view));
        }
        let ms = start.elapsed().as_secs_f64() * 1e3 / runs as f64;
        // CPU time of this thread too: wall time on a shared machine includes waiting.
        let cpu_ms = (thread_cpu_seconds() - cpu_start) * 1e3 / runs as f64;
        println!(
            "1M particles, 512x512, {colouring:?}: {ms:.1} ms wall, {cpu_ms:.1} ms CPU per frame"
        );
        assert!(ms < 1000.0);
    }
    // Sample pictures to look at: the random block, and a ball of jelly over a pool.
    if let Ok(dir) = std::env::var("MPM_RENDER_OUT") {
        let dir = Path::new(&dir);
        let img = render::particles_3d(&x, &v, &m, &View3d::unit_cube(512));
        render::save_png(&img, &dir.join("block.png")).expect("save");
        let mut rng = Rng(5);
        let (mut x, mut v, mut m) = (Vec::new(), Vec::new(), Vec::new());
        while x.len() < 300_000 {
            let p = Vec3::new(rng.next(), rng.next() * 0.25, rng.next());
            x.push(p);
            v.push(2.0 * p.x * p.y);
            m.push(0);
        }
        while x.len() < 400_000 {
            let p = Vec3::new(rng.next(), rng.next(), rng.next()) * 2.0 - 1.0;
            if p.length() < 1.0 {
                x.push(Vec3::new(0.5, 0.55, 0.5) + 0.2 * p);
                v.push(2.0);
                m.push(1);
            }
        }
        for (name, colouring) in [
            ("pool.png", Colouring::Material),
            ("pool_speed.png", Colouring::Speed { max: None }),
        ] {
            let view = View3d {
                colouring,
                ..View3d::unit_cube(512)
            };
            let img = render::particles_3d(&x, &v, &m, &view);
            render::save_png(&img, &dir.join(name)).expect("save");
        }
    }
}
