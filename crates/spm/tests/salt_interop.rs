//! Interop with Salt's own `spm` (3008.x, installed from PyPI outside the
//! repo, found by `halite-salt-oracle`): packages and repositories made by one are
//! installed by the other. Skips, saying why, when Salt's spm is absent.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{formula_dir, no_states, simple_formula, Sandbox};

/// A config dir for Salt's spm with every path under `root/salt`.
fn salt_config(root: &Path) -> PathBuf {
    let dir = root.join("salt-etc");
    fs::create_dir_all(&dir).expect("mkdir");
    let r = root.join("salt");
    fs::write(
        dir.join("spm"),
        format!(
            "formula_path: {r}/srv/spm/salt\npillar_path: {r}/srv/spm/pillar\nreactor_path: {r}/srv/spm/reactor\n\
             spm_share_dir: {r}/share\nspm_cache_dir: {r}/cache\nspm_db: {r}/cache/packages.db\n\
             spm_build_dir: {r}/build\nspm_repos_config: {r}/etc/spm.repos\nspm_logfile: {r}/spm.log\n\
             cachedir: {r}/cache/salt\npki_dir: {r}/pki\nsock_dir: {r}/sock\nlog_file: {r}/salt.log\n\
             root_dir: {r}/root\n",
            r = r.display()
        ),
    )
    .expect("salt spm config");
    dir
}

/// Runs Salt's spm; its exit status is 0 even on errors, so stderr is checked.
fn salt_spm(config_dir: &Path, args: &[&str]) -> String {
    let spm = halite_salt_oracle::Salt::find()
        .expect("salt_available() was checked")
        .tool("spm");
    let output = Command::new(spm)
        .arg("-c")
        .arg(config_dir)
        .args(args)
        .output()
        .expect("run salt spm");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.trim().is_empty(),
        "salt spm {args:?} failed: {stderr}"
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Whether Salt (and its spm) is installed, through the one helper every
/// comparison with Salt uses; prints why not.
fn salt_available() -> bool {
    halite_salt_oracle::Salt::for_test("salt_interop (Salt's spm)").is_some()
}

/// The apache formula of Salt's SPM docs, plus files Salt packs but does not install.
fn apache_formula(parent: &Path) -> PathBuf {
    formula_dir(
        parent,
        &simple_formula("apache", ""),
        &[
            ("apache/init.sls", "apache:\n  pkg.installed: []\n"),
            ("apache/files/httpd.conf", "Listen 80\n"),
            ("_modules/apache_ext.py", "def f():\n    return 1\n"),
            ("pillar.example", "apache:\n  port: 80\n"),
            ("tests/test_apache.py", "outside the top level dir\n"),
            (".travis.yml", "outside\n"),
        ],
    )
}

#[test]
fn a_package_built_by_salt_installs_with_halite_spm() {
    if !salt_available() {
        return;
    }
    let sandbox = Sandbox::new();
    let salt_etc = salt_config(sandbox.root());
    let dir = apache_formula(&sandbox.root().join("src"));
    let out = salt_spm(&salt_etc, &["build", &dir.display().to_string()]);
    let built = sandbox.root().join("salt/build/apache-201506-2.spm");
    assert!(out.contains("Built package") && built.is_file(), "{out}");

    let mut db = sandbox.db();
    let package = halite_spm::read_package(&built).expect("Salt's package reads");
    let report =
        halite_spm::install_package(&sandbox.config, &mut db, &package, false, &no_states())
            .expect("install");
    let c = &sandbox.config;
    assert_eq!(
        fs::read_to_string(c.formula_path.join("apache/init.sls")).expect("sls"),
        "apache:\n  pkg.installed: []\n"
    );
    assert!(c.formula_path.join("apache/files/httpd.conf").is_file());
    assert!(c.formula_path.join("_modules/apache_ext.py").is_file());
    assert!(c.pillar_path.join("apache.sls").is_file());
    // Salt packs files outside top_level_dir; they are skipped at install.
    assert!(!c.formula_path.join("tests").exists() && !c.formula_path.join(".travis.yml").exists());
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("tests/test_apache.py")),
        "{:?}",
        report.notes
    );
    let removed = halite_spm::remove_package(&mut db, "apache", false).expect("remove");
    assert!(removed.kept_modified.is_empty());
    assert!(!c.formula_path.join("apache").exists());
}

#[test]
fn a_package_built_by_halite_spm_installs_with_salt() {
    if !salt_available() {
        return;
    }
    let sandbox = Sandbox::new();
    let salt_etc = salt_config(sandbox.root());
    let dir = apache_formula(&sandbox.root().join("src"));
    let built = halite_spm::build(
        &dir,
        &sandbox.config.spm_build_dir,
        &sandbox.config.spm_build_exclude,
    )
    .expect("build");
    let out = salt_spm(
        &salt_etc,
        &["-y", "local", "install", &built.path.display().to_string()],
    );
    assert!(out.contains("... installing apache"), "{out}");
    let salt_root = sandbox.root().join("salt/srv/spm");
    assert_eq!(
        fs::read_to_string(salt_root.join("salt/apache/init.sls")).expect("sls"),
        "apache:\n  pkg.installed: []\n"
    );
    assert!(salt_root.join("salt/apache/files/httpd.conf").is_file());
    assert!(salt_root.join("salt/_modules/apache_ext.py").is_file());
    assert!(
        salt_root.join("pillar/apache.sls.orig").is_file(),
        "Salt's own pillar name"
    );
    let files = salt_spm(&salt_etc, &["files", "apache"]);
    assert!(files.contains("/apache/init.sls"), "{files}");
}

#[test]
fn repositories_are_shared_both_ways() {
    if !salt_available() {
        return;
    }
    let sandbox = Sandbox::new();
    let salt_etc = salt_config(sandbox.root());
    let src = sandbox.root().join("src");
    // halite's create_repo -> Salt's install by name (dependency first).
    let halite_repo = sandbox.root().join("halite-repo");
    let base = formula_dir(
        &src,
        &simple_formula("base", ""),
        &[("base/init.sls", "base: {}\n")],
    );
    let web = formula_dir(
        &src,
        &simple_formula("web", "dependencies: base\n"),
        &[("web/init.sls", "web: {}\n")],
    );
    for dir in [&base, &web] {
        halite_spm::build(dir, &halite_repo, &[]).expect("build");
    }
    halite_spm::repo::create_repo(&halite_repo).expect("create_repo");
    // Salt 3008 only reads `<spm_repos_config>.d/*.repo` (it joins the main
    // file's absolute path onto the .d dir), so the repo goes there.
    let salt_repos_d = sandbox.root().join("salt/etc/spm.repos.d");
    fs::create_dir_all(&salt_repos_d).expect("mkdir");
    fs::write(
        salt_repos_d.join("halite.repo"),
        format!("halite:\n  url: file://{}\n", halite_repo.display()),
    )
    .expect("repos");
    salt_spm(&salt_etc, &["update_repo"]);
    let out = salt_spm(&salt_etc, &["-y", "install", "web"]);
    assert!(
        out.contains("... installing base") && out.contains("... installing web"),
        "{out}"
    );
    assert!(sandbox
        .root()
        .join("salt/srv/spm/salt/base/init.sls")
        .is_file());

    // Salt's create_repo (its YAML) -> halite's install by name.
    let salt_repo = sandbox.root().join("salt-repo");
    fs::create_dir_all(&salt_repo).expect("mkdir");
    for name in ["base-201506-2.spm", "web-201506-2.spm"] {
        fs::copy(halite_repo.join(name), salt_repo.join(name)).expect("copy");
    }
    salt_spm(
        &salt_etc,
        &["create_repo", &salt_repo.display().to_string()],
    );
    fs::write(
        &sandbox.config.spm_repos_config,
        format!("salt:\n  url: file://{}\n", salt_repo.display()),
    )
    .expect("repos");
    let mut db = sandbox.db();
    let plan =
        halite_spm::plan_install(&sandbox.config, &db, &["web".to_string()], false).expect("plan");
    let order: Vec<&str> = plan.order.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order, ["base", "web"]);
    halite_spm::execute_plan(&sandbox.config, &mut db, &plan, false, &no_states())
        .expect("install");
    assert!(sandbox.config.formula_path.join("web/init.sls").is_file());
}
