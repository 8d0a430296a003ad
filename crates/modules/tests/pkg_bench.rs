//! `list_pkgs` timing beside `dpkg-query -W`, for docs/pkg.md. Ignored by
//! default (it measures, it does not assert timings):
//! `cargo test -p halite-modules --test pkg_bench -- --ignored --nocapture`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::process::Command;
use std::time::{Duration, Instant};

use halite_modules::pkg::dpkg::Dpkg;

fn best_of<F: FnMut() -> usize>(runs: u32, mut f: F) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut count = 0;
    for _ in 0..runs {
        let start = Instant::now();
        count = f();
        best = best.min(start.elapsed());
    }
    (best, count)
}

#[test]
#[ignore = "measurement for docs/pkg.md, run with --ignored --nocapture"]
fn list_pkgs_beside_dpkg_query() {
    if !std::path::Path::new("/var/lib/dpkg/status").exists() {
        eprintln!("skipped: no dpkg database here");
        return;
    }
    let dpkg = Dpkg::default();
    let (ours, n) = best_of(20, || dpkg.packages(false).map(|p| p.len()).unwrap_or(0));
    let (query, m) = best_of(20, || {
        let out = Command::new("dpkg-query")
            .args([
                "-W",
                "-f",
                "${Status} ${Package} ${Version} ${Architecture}\n",
            ])
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default();
        String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| l.starts_with("install ok installed"))
            .count()
    });
    println!("list_pkgs (reads /var/lib/dpkg/status): {n} packages, best of 20: {ours:?}");
    println!("dpkg-query -W (Salt's list_pkgs command): {m} packages, best of 20: {query:?}");
    assert_eq!(n, m, "both see the same installed packages");
}
