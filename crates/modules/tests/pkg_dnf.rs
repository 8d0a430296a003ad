//! The dnf provider against the real dnf, on a private `--installroot` fed
//! by local rpm repositories built with `rpmbuild` + `createrepo_c`: the
//! host's rpm database and repos are never touched. Skips with a printed
//! reason unless it runs as root with dnf, createrepo_c and rpmbuild
//! (Debian: `apt-get install dnf createrepo-c rpm`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use halite_modules::pkg::targets::{TargetKind, Targets};
use halite_modules::pkg::yum::Yum;
use halite_modules::pkg::{InstallOptions, PkgError, PkgProvider, RepoOptions};
use serde_json::json;

const PKG: &str = "halite-test-rpm";
const DEP: &str = "halite-test-rpmdep";

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build_rpm(top: &Path, out: &Path, name: &str, version: &str, requires: Option<&str>) {
    let spec = top.join(format!("{name}-{version}.spec"));
    let requires = requires
        .map(|r| format!("Requires: {r}\n"))
        .unwrap_or_default();
    let text = format!(
        "Name: {name}\nVersion: {version}\nRelease: 1\nSummary: halite test\nLicense: MIT\nBuildArch: noarch\n{requires}\
         %description\nhalite test package\n%install\nmkdir -p %{{buildroot}}/usr/share/{name}\n\
         echo {version} > %{{buildroot}}/usr/share/{name}/version\n%files\n/usr/share/{name}/version\n"
    );
    std::fs::create_dir_all(top).unwrap_or_else(|e| panic!("mkdir: {e}"));
    std::fs::write(&spec, text).unwrap_or_else(|e| panic!("write: {e}"));
    run(Command::new("rpmbuild")
        .arg("--define")
        .arg(format!("_topdir {}", top.join("build").display()))
        .arg("-bb")
        .arg(&spec));
    let rpm = top.join(format!("build/RPMS/noarch/{name}-{version}-1.noarch.rpm"));
    std::fs::create_dir_all(out).unwrap_or_else(|e| panic!("mkdir: {e}"));
    std::fs::copy(&rpm, out.join(rpm.file_name().unwrap_or_default()))
        .unwrap_or_else(|e| panic!("copy: {e}"));
}

fn repo_targets(items: &[(&str, Option<&str>)]) -> Targets {
    Targets {
        kind: TargetKind::Repository,
        items: items
            .iter()
            .map(|(n, v)| (n.to_string(), v.map(str::to_string)))
            .collect(),
    }
}

#[test]
fn dnf_provider_on_a_private_installroot() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: dnf --installroot needs root");
        return;
    }
    for tool in ["dnf", "createrepo_c", "rpmbuild"] {
        if !have(tool) {
            eprintln!("skipped: {tool} is not installed (apt-get install dnf createrepo-c rpm)");
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let stable = tmp.path().join("stable");
    let edge = tmp.path().join("edge");
    build_rpm(tmp.path(), &stable, PKG, "1.0", None);
    build_rpm(tmp.path(), &stable, DEP, "1.0", Some(PKG));
    build_rpm(tmp.path(), &edge, PKG, "2.0", None);
    for repo in [&stable, &edge] {
        run(Command::new("createrepo_c").arg("-q").arg(repo));
    }
    let root: PathBuf = tmp.path().join("root");
    let dnf = Yum::with_installroot(&root, "1");
    let no_basedir = RepoOptions::default();

    // The repos are written by mod_repo itself, into the installroot.
    for (id, dir) in [("halite-stable", &stable), ("halite-edge", &edge)] {
        let settings = json!({"name": id, "baseurl": format!("file://{}", dir.display()), "gpgcheck": "0", "enabled": "1"});
        let ret = dnf.mod_repo(
            id,
            settings.as_object().unwrap_or(&serde_json::Map::new()),
            &no_basedir,
        );
        assert!(ret.is_ok_and(|r| r[id]["baseurl"] == json!(format!("file://{}", dir.display()))));
    }
    assert!(root.join("etc/yum.repos.d/halite-stable.repo").exists());
    dnf.refresh_db()
        .unwrap_or_else(|e| panic!("refresh_db: {e}"));

    let names = vec![PKG.to_string(), "halite-test-unknown".to_string()];
    let latest = dnf
        .latest_version(&names, None, false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(latest[PKG], json!("2.0-1"));
    assert_eq!(latest["halite-test-unknown"], json!(""));
    let stable_only = dnf
        .latest_version(&names[..1], Some("halite-stable"), false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        stable_only[PKG],
        json!("1.0-1"),
        "fromrepo limits the candidates"
    );
    assert_eq!(
        dnf.available_versions(PKG, None)
            .unwrap_or_else(|e| panic!("{e}")),
        vec!["2.0-1", "1.0-1"]
    );

    let opts = InstallOptions::default();
    let ch = dnf
        .install(&repo_targets(&[(PKG, Some("1.0-1"))]), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ch[PKG], json!({"old": "", "new": "1.0-1"}));
    assert_eq!(
        dnf.list_upgrades(false, &opts)
            .unwrap_or_else(|e| panic!("{e}"))[PKG],
        json!("2.0-1")
    );
    let ch = dnf
        .install(&repo_targets(&[(PKG, Some(">=2.0"))]), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ch[PKG],
        json!({"old": "1.0-1", "new": "2.0-1"}),
        "range resolved to the newest match"
    );
    let ch = dnf
        .install(&repo_targets(&[(PKG, Some("1.0-1"))]), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ch[PKG],
        json!({"old": "2.0-1", "new": "1.0-1"}),
        "downgrade"
    );
    let ch = dnf.upgrade(&[], &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ch[PKG], json!({"old": "1.0-1", "new": "2.0-1"}));
    assert_eq!(
        dnf.latest_version(&names[..1], None, false)
            .unwrap_or_else(|e| panic!("{e}"))[PKG],
        json!("")
    );

    let ch = dnf
        .install(&repo_targets(&[(DEP, None)]), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ch[DEP], json!({"old": "", "new": "1.0-1"}));
    let files = dnf
        .lowpkg()
        .file_list(&[DEP.to_string()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(files["files"], json!([format!("/usr/share/{DEP}/version")]));
    assert_eq!(
        dnf.lowpkg()
            .verify(&[PKG.to_string()])
            .unwrap_or_else(|e| panic!("{e}")),
        serde_json::Map::new()
    );

    match dnf.install(&repo_targets(&[("halite-test-unknown", None)]), &opts) {
        Err(PkgError::Failed { errors, .. }) => {
            assert!(
                errors.iter().any(|e| e.contains("halite-test-unknown")),
                "dnf's words: {errors:?}"
            )
        }
        other => panic!("expected a failure, got {other:?}"),
    }

    let ch = dnf
        .remove(&[PKG.to_string(), DEP.to_string()], false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ch[PKG], json!({"new": "", "old": "2.0-1"}));
    assert_eq!(ch[DEP], json!({"new": "", "old": "1.0-1"}));
    assert!(dnf
        .list_pkgs(false)
        .unwrap_or_else(|e| panic!("{e}"))
        .get(PKG)
        .is_none());

    let msg = dnf
        .del_repo("halite-edge", &no_basedir)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(msg.contains("has been removed"), "{msg}");
}
