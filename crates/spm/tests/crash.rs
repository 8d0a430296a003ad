//! An install killed midway (a real abort of the real binary at a
//! failpoint) is undone, or finished, by the next halite-spm run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{formula_dir, simple_formula, Sandbox};
use halite_spm::transaction::{journal_path, FAILPOINT_ENV};

fn halite_spm(sandbox: &Sandbox, args: &[&str], failpoint: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_halite-spm"));
    command.arg("-c").arg(sandbox.config_dir()).args(args);
    match failpoint {
        Some(point) => command.env(FAILPOINT_ENV, point),
        None => command.env_remove(FAILPOINT_ENV),
    };
    command.output().expect("run halite-spm")
}

/// v1 ships init.sls and old.sls; v2 changes init.sls, drops old.sls, adds extra/new.sls.
fn two_versions(sandbox: &Sandbox) -> (PathBuf, PathBuf) {
    let v1 = formula_dir(
        &sandbox.root().join("v1"),
        &simple_formula("app", ""),
        &[("app/init.sls", "v: 1\n"), ("app/old.sls", "old\n")],
    );
    let v2 = formula_dir(
        &sandbox.root().join("v2"),
        &simple_formula("app", "").replace("release: 2", "release: 3"),
        &[("app/init.sls", "v: 2\n"), ("app/extra/new.sls", "new\n")],
    );
    let build = |dir: &Path, out: &str| {
        halite_spm::build(dir, &sandbox.root().join(out), &[])
            .expect("build")
            .path
    };
    (build(&v1, "b1"), build(&v2, "b2"))
}

fn stray_temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.to_string_lossy().contains(".halite-spm") {
                out.push(path.clone());
            }
            out.extend(stray_temporaries(&path));
        }
    }
    out
}

#[test]
fn an_install_killed_after_the_renames_is_undone_by_the_next_run() {
    let sandbox = Sandbox::new();
    let (v1, v2) = two_versions(&sandbox);
    let out = halite_spm(
        &sandbox,
        &["-y", "local", "install", &v1.display().to_string()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = sandbox.snapshot();

    let out = halite_spm(
        &sandbox,
        &["-y", "-f", "local", "install", &v2.display().to_string()],
        Some("after-renames"),
    );
    assert!(!out.status.success(), "the failpoint aborts the process");
    let init = sandbox.config.formula_path.join("app/init.sls");
    assert_eq!(
        fs::read_to_string(&init).expect("read"),
        "v: 2\n",
        "killed with the new files in place"
    );
    assert!(journal_path(&sandbox.config).is_file());

    let out = halite_spm(&sandbox, &["list"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("undid the interrupted install of app"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "app\n");
    assert_eq!(sandbox.snapshot(), before, "disk and db are back to v1");
    assert!(!journal_path(&sandbox.config).exists());
    assert!(
        stray_temporaries(sandbox.root()).is_empty(),
        "{:?}",
        stray_temporaries(sandbox.root())
    );
}

#[test]
fn an_install_killed_after_the_commit_is_finished_by_the_next_run() {
    let sandbox = Sandbox::new();
    let (v1, v2) = two_versions(&sandbox);
    let out = halite_spm(
        &sandbox,
        &["-y", "local", "install", &v1.display().to_string()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = halite_spm(
        &sandbox,
        &["-y", "-f", "local", "install", &v2.display().to_string()],
        Some("after-commit"),
    );
    assert!(!out.status.success());

    let out = halite_spm(&sandbox, &["-v", "list"], None);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("finished the interrupted install of app")
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "app,201506,3\n");
    assert_eq!(
        fs::read_to_string(sandbox.config.formula_path.join("app/init.sls")).expect("read"),
        "v: 2\n"
    );
    assert!(sandbox
        .config
        .formula_path
        .join("app/extra/new.sls")
        .is_file());
    assert!(!journal_path(&sandbox.config).exists());
    assert!(
        stray_temporaries(sandbox.root()).is_empty(),
        "{:?}",
        stray_temporaries(sandbox.root())
    );
}
