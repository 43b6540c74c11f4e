//! PNG frames of 2D particle sets.

use std::path::Path;

use image::{Rgb, RgbImage};
use mpm_core::glam::Vec2;

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

/// Draws particles of the unit square (y up) as 2x2-pixel dots coloured by material.
pub fn particles_2d(positions: &[Vec2], materials: &[i32], size: u32) -> RgbImage {
    let mut img = RgbImage::from_pixel(size, size, Rgb(BACKGROUND));
    for (p, m) in positions.iter().zip(materials) {
        let colour = Rgb(PALETTE[m.rem_euclid(PALETTE.len() as i32) as usize]);
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

/// Writes a PNG atomically: to a temporary file, then renamed into place.
pub fn save_png(img: &RgbImage, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("png.tmp");
    img.save_with_format(&tmp, image::ImageFormat::Png)
        .map_err(std::io::Error::other)?;
    std::fs::rename(&tmp, path)
}
