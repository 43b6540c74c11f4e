//! Dense fields of 0 to 3 dimensions of every element type upload and download unchanged on
//! every backend, and are zero when created.

mod backends;

use mpm::core::Elem;
use mpm::glam::{IVec2, IVec3, Mat2, Mat3, UVec2, UVec3, Vec2, Vec3, Vec4};
use mpm::{backend, BackendRef, Field};

per_backend! {
    every_type_and_dimension_round_trips => check_round_trips,
    a_range_upload_writes_only_its_elements => check_upload_at,
}

/// Distinct values of each type, built from an index.
trait Sample: Elem {
    fn sample(i: u32) -> Self;
}
impl Sample for f32 {
    fn sample(i: u32) -> Self {
        i as f32 * 0.5 - 3.25
    }
}
impl Sample for i32 {
    fn sample(i: u32) -> Self {
        (i as i32 - 7) * 1_000_003
    }
}
impl Sample for u32 {
    fn sample(i: u32) -> Self {
        i.wrapping_mul(2_654_435_761)
    }
}
impl Sample for bool {
    fn sample(i: u32) -> Self {
        i % 3 == 1
    }
}
impl Sample for Vec2 {
    fn sample(i: u32) -> Self {
        Vec2::new(f32::sample(i), f32::sample(i + 1))
    }
}
impl Sample for Vec3 {
    fn sample(i: u32) -> Self {
        Vec3::new(f32::sample(i), -f32::sample(i), 1.0 / (i as f32 + 1.0))
    }
}
impl Sample for Vec4 {
    fn sample(i: u32) -> Self {
        Vec4::new(f32::sample(i), 2.0, -0.0, f32::sample(i * 3))
    }
}
impl Sample for IVec2 {
    fn sample(i: u32) -> Self {
        IVec2::new(i32::sample(i), -(i as i32))
    }
}
impl Sample for IVec3 {
    fn sample(i: u32) -> Self {
        IVec3::new(i32::sample(i), i32::MIN + i as i32, i32::MAX - i as i32)
    }
}
impl Sample for UVec2 {
    fn sample(i: u32) -> Self {
        UVec2::new(u32::sample(i), u32::MAX - i)
    }
}
impl Sample for UVec3 {
    fn sample(i: u32) -> Self {
        UVec3::new(u32::sample(i), i, u32::MAX)
    }
}
impl Sample for Mat2 {
    fn sample(i: u32) -> Self {
        Mat2::from_cols(Vec2::sample(i), Vec2::sample(i + 5))
    }
}
impl Sample for Mat3 {
    fn sample(i: u32) -> Self {
        Mat3::from_cols(Vec3::sample(i), Vec3::sample(i + 1), Vec3::sample(i + 2))
    }
}

fn round_trip<T: Sample, const D: usize>(b: &BackendRef, shape: [u32; D]) {
    let mut f = Field::<T, D>::new(b, shape).expect("allocates");
    assert_eq!(
        f.download().expect("downloads"),
        vec![T::zero(); f.len()],
        "{} starts at zero",
        b.describe()
    );
    let data: Vec<T> = (0..f.len() as u32).map(T::sample).collect();
    f.upload(&data).expect("uploads");
    assert_eq!(
        f.download().expect("downloads"),
        data,
        "{} {:?} of {}",
        b.describe(),
        shape,
        std::any::type_name::<T>()
    );
    assert!(
        f.upload(&data[..data.len().saturating_sub(1)]).is_err() || data.is_empty(),
        "a short upload is refused"
    );
}

fn all_dims<T: Sample>(b: &BackendRef) {
    round_trip::<T, 0>(b, []);
    round_trip::<T, 1>(b, [37]);
    round_trip::<T, 2>(b, [5, 9]);
    round_trip::<T, 3>(b, [3, 4, 5]);
}

fn check_round_trips(b: &BackendRef) {
    all_dims::<f32>(b);
    all_dims::<i32>(b);
    all_dims::<u32>(b);
    all_dims::<bool>(b);
    all_dims::<Vec2>(b);
    all_dims::<Vec3>(b);
    all_dims::<Vec4>(b);
    all_dims::<IVec2>(b);
    all_dims::<IVec3>(b);
    all_dims::<UVec2>(b);
    all_dims::<UVec3>(b);
    all_dims::<Mat2>(b);
    all_dims::<Mat3>(b);
}

/// `upload_at` (what appending particles uses) writes its elements and leaves the rest;
/// a range past the end is refused and changes nothing.
fn check_upload_at(b: &BackendRef) {
    let mut f = Field::<Mat3>::new(b, [11]).expect("allocates");
    let data: Vec<Mat3> = (0..11).map(Mat3::sample).collect();
    f.upload(&data).expect("uploads");
    let patch: Vec<Mat3> = (100..104).map(Mat3::sample).collect();
    f.upload_at(5, &patch).expect("writes 5..9");
    let mut expected = data.clone();
    expected[5..9].copy_from_slice(&patch);
    assert_eq!(
        f.download().expect("downloads"),
        expected,
        "{}",
        b.describe()
    );
    f.upload_at(11, &[]).expect("an empty range at the end");
    assert!(f.upload_at(8, &patch).is_err(), "8 + 4 > 11 is refused");
    assert_eq!(
        f.download().expect("downloads"),
        expected,
        "{}",
        b.describe()
    );
}

#[test]
fn size_mismatch_names_the_shape() {
    let b = backend::cpu();
    let mut f = Field::<f32, 2>::new(&b, [2, 3]).expect("allocates");
    let err = f
        .upload(&[1.0; 5])
        .expect_err("5 values do not fill 2x3")
        .to_string();
    assert!(
        err.contains("[2, 3]") && err.contains('5') && err.contains('6'),
        "{err}"
    );
}
