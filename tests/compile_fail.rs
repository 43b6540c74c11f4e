//! The kernel language's compile errors: each `tests/ui/fail_*.rs` is a small program that
//! `#[kernel]` or `#[func]` must reject, with a span on the offending construct and a message
//! that says what is allowed instead (snapshots in the `.stderr` files next to them; refresh
//! them with `TRYBUILD=overwrite cargo test -p mpm --test compile_fail` and review the diff).
//! `tests/ui/pass_*.rs` must compile (and run) unchanged.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail_*.rs");
    t.pass("tests/ui/pass_*.rs");
}
