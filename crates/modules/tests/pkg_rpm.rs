//! The rpm side of the RedHat-family provider, against the real `rpm`:
//! packages built with `rpmbuild` and installed into a private `--root`,
//! never into the host. Also checks halite's version ordering against
//! `rpm` and `dpkg` themselves, and the yum `.repo` functions on a temp
//! directory. dnf/yum are not installable here; see docs/pkg.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use halite_modules::pkg::rpm::Rpm;
use halite_modules::pkg::version::{deb_cmp, rpm_cmp};
use halite_modules::pkg::yum::Yum;
use halite_modules::pkg::{LowPkg, PkgProvider, RepoOptions};
use serde_json::json;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds halite-test-rpm-`version`-1.noarch.rpm under `top`.
fn build_rpm(top: &Path, version: &str) -> PathBuf {
    let spec = top.join(format!("SPECS/t-{version}.spec"));
    std::fs::create_dir_all(top.join("SPECS")).unwrap_or_else(|e| panic!("mkdir: {e}"));
    let text = format!(
        "Name: halite-test-rpm\nVersion: {version}\nRelease: 1\nSummary: halite test\nLicense: MIT\nBuildArch: noarch\n\
         %description\nhalite test package\n%install\n\
         mkdir -p %{{buildroot}}/usr/share/halite-test-rpm %{{buildroot}}/etc\n\
         echo data {version} > %{{buildroot}}/usr/share/halite-test-rpm/data.txt\n\
         echo conf > %{{buildroot}}/etc/halite-test-rpm.conf\n\
         %files\n/usr/share/halite-test-rpm/data.txt\n%config /etc/halite-test-rpm.conf\n"
    );
    std::fs::write(&spec, text).unwrap_or_else(|e| panic!("write spec: {e}"));
    run(Command::new("rpmbuild")
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg("-bb")
        .arg(&spec));
    top.join(format!(
        "RPMS/noarch/halite-test-rpm-{version}-1.noarch.rpm"
    ))
}

#[test]
fn rpm_lowpkg_on_a_private_root() {
    if !have("rpm") || !have("rpmbuild") {
        eprintln!("skipped: rpm and rpmbuild are not installed (apt-get install rpm)");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: installing into an rpm --root needs root (file ownership)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let top = tmp.path().join("build");
    let root = tmp.path().join("root");
    let v1 = build_rpm(&top, "1.0");
    let v2 = build_rpm(&top, "2.0");
    run(Command::new("rpm").arg("--root").arg(&root).arg("--initdb"));
    run(Command::new("rpm")
        .arg("--root")
        .arg(&root)
        .args(["-i", "--nodeps", "--noscripts"])
        .arg(&v1));

    let rpm = Rpm::with_root(&root);
    let names = vec!["halite-test-rpm".to_string()];
    let listed = rpm.list_pkgs(&[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        listed.get("halite-test-rpm"),
        Some(&vec!["1.0".to_string()])
    );
    let full = rpm.packages_full().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        full.get("halite-test-rpm"),
        Some(&vec!["1.0-1".to_string()])
    );

    assert_eq!(
        rpm.verify(&names).unwrap_or_else(|e| panic!("{e}")),
        serde_json::Map::new()
    );
    std::fs::write(
        root.join("usr/share/halite-test-rpm/data.txt"),
        "edited, longer than before\n",
    )
    .unwrap_or_else(|e| panic!("edit: {e}"));
    std::fs::write(root.join("etc/halite-test-rpm.conf"), "changed\n")
        .unwrap_or_else(|e| panic!("edit: {e}"));
    let v = rpm.verify(&names).unwrap_or_else(|e| panic!("{e}"));
    let data = &v["/usr/share/halite-test-rpm/data.txt"];
    assert!(
        data["mismatch"]
            .as_array()
            .is_some_and(|m| m.contains(&json!("md5sum")) && m.contains(&json!("size"))),
        "{v:?}"
    );
    assert_eq!(
        v["/etc/halite-test-rpm.conf"]["type"],
        json!("config"),
        "{v:?}"
    );

    let list = rpm
        .file_list(&["halite-test-rpm".into(), "halite-test-absent".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        list["files"],
        json!([
            "/etc/halite-test-rpm.conf",
            "/usr/share/halite-test-rpm/data.txt"
        ])
    );
    assert_eq!(
        list["errors"],
        json!(["package halite-test-absent is not installed"])
    );
    let dict = rpm.file_dict(&names).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        dict["packages"]["halite-test-rpm"].as_array().map(Vec::len),
        Some(2),
        "{dict:?}"
    );

    let info = rpm
        .bin_pkg_info(&v2.display().to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        info,
        *json!({"name": "halite-test-rpm", "version": "2.0-1", "arch": "noarch"})
            .as_object()
            .unwrap_or(&serde_json::Map::new())
    );
    assert!(rpm
        .bin_pkg_info(&tmp.path().join("nope.rpm").display().to_string())
        .is_err());
}

const PAIRS: &[(&str, &str)] = &[
    ("1.0", "1.0"),
    ("1.0", "1.1"),
    ("1.10", "1.9"),
    ("1.0~rc1", "1.0"),
    ("1.0a", "1.0"),
    ("1.0.1", "1.0a"),
    ("2:1.0", "1:9.9"),
    ("1.0-1", "1.0-10"),
    ("1.0-2.el9", "1.0-10.el9"),
    ("1.0+b1", "1.0"),
    ("1.01", "1.1"),
    ("0.9^git1", "0.9"),
];

#[test]
fn version_order_matches_rpm_itself() {
    if !have("rpm") {
        eprintln!("skipped: rpm is not installed");
        return;
    }
    for (a, b) in PAIRS {
        let out = run(Command::new("rpm")
            .arg("--eval")
            .arg(format!("%{{lua: print(rpm.vercmp('{a}','{b}'))}}")));
        let want: i32 = out
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("rpm said {out:?}: {e}"));
        assert_eq!(rpm_cmp(a, b) as i32, want.signum(), "rpm_cmp({a}, {b})");
    }
}

#[test]
fn version_order_matches_dpkg_itself() {
    if !have("dpkg") {
        eprintln!("skipped: dpkg is not installed");
        return;
    }
    for (a, b) in PAIRS
        .iter()
        .filter(|(a, b)| !a.contains('^') && !b.contains('^'))
    {
        let lt = Command::new("dpkg")
            .args(["--compare-versions", a, "lt", b])
            .status()
            .map(|s| s.success());
        let eq = Command::new("dpkg")
            .args(["--compare-versions", a, "eq", b])
            .status()
            .map(|s| s.success());
        let want = match (lt, eq) {
            (Ok(true), _) => std::cmp::Ordering::Less,
            (_, Ok(true)) => std::cmp::Ordering::Equal,
            _ => std::cmp::Ordering::Greater,
        };
        assert_eq!(deb_cmp(a, b), want, "deb_cmp({a}, {b})");
    }
}

#[test]
fn yum_repo_files_on_a_temp_basedir() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let opts = RepoOptions {
        basedir: Some(tmp.path().display().to_string()),
    };
    let yum = Yum::detect();
    assert!(yum
        .get_repo("halite", &opts)
        .unwrap_or_else(|e| panic!("{e}"))
        .is_empty());
    let settings = json!({"name": "halite test repo", "baseurl": "file:///srv/repo", "enabled": true, "gpgcheck": 0});
    let settings = settings.as_object().cloned().unwrap_or_default();
    let ret = yum
        .mod_repo("halite", &settings, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ret["halite"]["baseurl"], json!("file:///srv/repo"));
    let text = std::fs::read_to_string(tmp.path().join("halite.repo"))
        .unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(
        text,
        "[halite]\nname=halite test repo\nbaseurl=file:///srv/repo\nenabled=1\ngpgcheck=0\n\n"
    );

    let change = json!({"enabled": false})
        .as_object()
        .cloned()
        .unwrap_or_default();
    yum.mod_repo("halite", &change, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        yum.get_repo("halite", &opts)
            .unwrap_or_else(|e| panic!("{e}"))["enabled"],
        json!("0")
    );
    let all = yum.list_repos(&opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(all.len(), 1);
    let msg = yum
        .del_repo("halite", &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(msg.contains("has been removed"), "{msg}");
    assert!(!tmp.path().join("halite.repo").exists());
    assert!(yum.del_repo("halite", &opts).is_err());
}
