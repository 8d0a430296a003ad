//! Installing into temp roots, the database rows, removal, and conflicts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::fs;

use common::{build_simple, formula_dir, no_states, simple_formula, Sandbox};
use halite_spm::db::FileKind;
use halite_spm::{install_package, read_package, remove_package, SpmError};
use sha2::{Digest, Sha256};

fn build_full(sandbox: &Sandbox) -> std::path::PathBuf {
    let dir = formula_dir(
        &sandbox.root().join("src"),
        &simple_formula("apache", "files:\n  - apache\n  - _modules\n  - pillar.example\n  - d|docs/index.rst\n  - README.rst\n"),
        &[
            ("apache/init.sls", "apache: {pkg.installed: []}\n"),
            ("apache/files/httpd.conf", "Listen 80\n"),
            ("_modules/apache_ext.py", "def f(): pass\n"),
            ("pillar.example", "apache:\n  port: 80\n"),
            ("docs/index.rst", "docs\n"),
            ("README.rst", "readme\n"),
        ],
    );
    halite_spm::build(
        &dir,
        &sandbox.config.spm_build_dir,
        &sandbox.config.spm_build_exclude,
    )
    .expect("build")
    .path
}

#[test]
fn install_puts_every_file_in_place_and_records_it() {
    let sandbox = Sandbox::new();
    let spm = build_full(&sandbox);
    let mut db = sandbox.db();
    let package = read_package(&spm).expect("package reads");
    install_package(&sandbox.config, &mut db, &package, false, &no_states()).expect("install");

    let c = &sandbox.config;
    let expect = [
        (
            c.formula_path.join("apache/init.sls"),
            "apache: {pkg.installed: []}\n",
            "",
        ),
        (
            c.formula_path.join("apache/files/httpd.conf"),
            "Listen 80\n",
            "",
        ),
        (
            c.formula_path.join("_modules/apache_ext.py"),
            "def f(): pass\n",
            "",
        ),
        (
            c.pillar_path.join("apache.sls"),
            "apache:\n  port: 80\n",
            "",
        ),
        (c.spm_share_dir.join("apache/docs/index.rst"), "docs\n", "d"),
        (c.spm_share_dir.join("apache/README.rst"), "readme\n", "r"),
    ];
    let files = db.files("apache").expect("files").expect("installed");
    for (path, content, file_type) in &expect {
        assert_eq!(
            fs::read_to_string(path).expect("installed file"),
            *content,
            "{}",
            path.display()
        );
        let row = files
            .iter()
            .find(|f| &f.path == path)
            .unwrap_or_else(|| panic!("no row for {}", path.display()));
        assert_eq!(row.kind, FileKind::File);
        assert_eq!(row.sha256, hex::encode(Sha256::digest(content.as_bytes())));
        assert_eq!(row.size, content.len() as u64);
        assert_eq!(row.mode, "0644");
        assert_eq!(row.file_type, *file_type);
        assert!(!row.owner.is_empty() && !row.group.is_empty());
    }
    assert!(files
        .iter()
        .any(|f| f.kind == FileKind::Dir && f.path == c.formula_path.join("apache/files")));
    assert!(
        !c.formula_path.join("FORMULA").exists() && !c.formula_path.join("apache/FORMULA").exists()
    );
    let info = db.package("apache").expect("query").expect("registered");
    assert_eq!(
        (info.version.as_str(), info.release.as_str()),
        ("201506", "2")
    );

    // A second install is refused; -f reinstalls.
    let again = install_package(&sandbox.config, &mut db, &package, false, &no_states());
    assert!(
        matches!(again, Err(SpmError::AlreadyInstalled(_))),
        "{again:?}"
    );
    install_package(&sandbox.config, &mut db, &package, true, &no_states())
        .expect("forced reinstall");
}

#[test]
fn remove_keeps_an_edited_file_and_removes_the_rest_and_empty_dirs() {
    let sandbox = Sandbox::new();
    let spm = build_full(&sandbox);
    let mut db = sandbox.db();
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &no_states(),
    )
    .expect("install");
    let c = &sandbox.config;
    let edited = c.formula_path.join("apache/init.sls");
    fs::write(&edited, "apache: {pkg.installed: [], edited: true}\n").expect("edit");
    // A file of the user's in a package dir keeps that dir.
    fs::write(c.formula_path.join("_modules/mine.py"), "x\n").expect("user file");

    let report = remove_package(&mut db, "apache", false).expect("remove");
    assert_eq!(report.kept_modified, vec![edited.clone()]);
    assert!(edited.exists());
    assert!(
        !c.formula_path.join("apache/files").exists(),
        "empty dir removed"
    );
    assert!(!c.formula_path.join("apache/files/httpd.conf").exists());
    assert!(!c.formula_path.join("_modules/apache_ext.py").exists());
    assert!(c.formula_path.join("_modules/mine.py").exists());
    assert!(!c.pillar_path.join("apache.sls").exists());
    assert!(
        !c.spm_share_dir.join("apache").exists(),
        "share dir of the package removed"
    );
    assert!(db.package("apache").expect("query").is_none());
    assert!(db.files("apache").expect("query").is_none());
    let again = remove_package(&mut db, "apache", false);
    assert!(matches!(again, Err(SpmError::NotInstalled(_))), "{again:?}");
}

#[test]
fn a_file_owned_by_another_package_is_a_conflict_unless_forced() {
    let sandbox = Sandbox::new();
    let mut db = sandbox.db();
    let first = build_simple(&sandbox, "shared", "");
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&first).expect("read"),
        false,
        &no_states(),
    )
    .expect("first");
    // Another package shipping the same file (top_level_dir points at the same dir).
    let dir = formula_dir(
        &sandbox.root().join("src2"),
        &simple_formula("intruder", "top_level_dir: shared\n"),
        &[("shared/init.sls", "intruder: {}\n")],
    );
    let second = halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[])
        .expect("build")
        .path;
    let package = read_package(&second).expect("read");
    let before = sandbox.snapshot();
    let err = install_package(&sandbox.config, &mut db, &package, false, &no_states())
        .expect_err("conflict");
    assert!(err.to_string().contains("owned by package shared"), "{err}");
    assert_eq!(sandbox.snapshot(), before, "nothing changed");

    install_package(&sandbox.config, &mut db, &package, true, &no_states()).expect("forced");
    let init = sandbox.config.formula_path.join("shared/init.sls");
    assert_eq!(fs::read_to_string(&init).expect("read"), "intruder: {}\n");
    assert_eq!(
        db.owner_of(&init, "").expect("query").as_deref(),
        Some("intruder")
    );
}

#[test]
fn a_file_already_on_disk_is_refused_unless_forced() {
    let sandbox = Sandbox::new();
    let spm = build_simple(&sandbox, "mysql", "");
    let existing = sandbox.config.formula_path.join("mysql/init.sls");
    common::write_tree(
        &sandbox.config.formula_path,
        &[("mysql/init.sls", "mine\n")],
    );
    let mut db = sandbox.db();
    let package = read_package(&spm).expect("read");
    let before = sandbox.snapshot();
    let err = install_package(&sandbox.config, &mut db, &package, false, &no_states())
        .expect_err("exists");
    assert!(
        err.to_string()
            .contains("Not installing mysql due to existing files"),
        "{err}"
    );
    assert!(
        err.to_string().contains(&existing.display().to_string()),
        "{err}"
    );
    assert_eq!(sandbox.snapshot(), before);
}

#[test]
fn remove_is_refused_while_another_package_depends_on_it() {
    let sandbox = Sandbox::new();
    let mut db = sandbox.db();
    for (name, extra) in [("base", ""), ("web", "dependencies: base\n")] {
        let spm = build_simple(&sandbox, name, extra);
        install_package(
            &sandbox.config,
            &mut db,
            &read_package(&spm).expect("read"),
            false,
            &no_states(),
        )
        .expect("install");
    }
    let before = sandbox.snapshot();
    let err = remove_package(&mut db, "base", false).expect_err("has dependents");
    assert!(
        matches!(&err, SpmError::HasDependents { dependents, .. } if dependents == "web"),
        "{err}"
    );
    assert_eq!(sandbox.snapshot(), before);
    remove_package(&mut db, "base", true).expect("forced");
    assert!(!sandbox.config.formula_path.join("base").exists());
}

#[test]
fn reactor_and_conf_packages_go_to_their_own_paths() {
    let sandbox = Sandbox::new();
    let mut db = sandbox.db();
    let src = sandbox.root().join("src");
    let reactor = formula_dir(
        &src,
        &simple_formula("deploy-reactor", ""),
        &[("deploy-reactor/on_start.sls", "r: {}\n")],
    );
    let conf = formula_dir(
        &src,
        &simple_formula("minion-conf", ""),
        &[("minion-conf/minion.d/halite.conf", "id: x\n")],
    );
    for dir in [reactor, conf] {
        let spm = halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[])
            .expect("build")
            .path;
        install_package(
            &sandbox.config,
            &mut db,
            &read_package(&spm).expect("read"),
            false,
            &no_states(),
        )
        .expect("install");
    }
    let c = &sandbox.config;
    assert_eq!(
        fs::read_to_string(c.reactor_path.join("deploy-reactor/on_start.sls")).expect("reactor"),
        "r: {}\n"
    );
    assert_eq!(
        fs::read_to_string(c.conf_path.join("minion.d/halite.conf")).expect("conf"),
        "id: x\n"
    );
    assert!(
        !c.formula_path.exists() || fs::read_dir(&c.formula_path).expect("ls").next().is_none()
    );
}

#[test]
fn a_newer_minimum_version_than_halite_supports_is_refused() {
    let sandbox = Sandbox::new();
    let spm = build_simple(&sandbox, "future", "minimum_version: '9999.1'\n");
    let mut db = sandbox.db();
    let err = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &no_states(),
    )
    .expect_err("too new");
    assert!(err.to_string().contains("9999.1"), "{err}");
    assert!(db.package("future").expect("query").is_none());
}

#[test]
fn a_database_failure_after_the_renames_puts_everything_back() {
    let sandbox = Sandbox::new();
    let mut db = sandbox.db();
    // An earlier package whose file the new one replaces with -f.
    let first = build_simple(&sandbox, "shared", "");
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&first).expect("read"),
        false,
        &no_states(),
    )
    .expect("first");
    let dir = formula_dir(
        &sandbox.root().join("src2"),
        &simple_formula("late", "top_level_dir: shared\n"),
        &[
            ("shared/init.sls", "late: {}\n"),
            ("shared/extra/new.sls", "new: {}\n"),
        ],
    );
    let spm = halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[])
        .expect("build")
        .path;
    // A real SQLite trigger makes the final commit fail for this package.
    let conn = rusqlite::Connection::open(&sandbox.config.spm_db).expect("open db");
    conn.execute_batch(
        "CREATE TRIGGER refuse_late BEFORE INSERT ON packages WHEN NEW.package = 'late'
         BEGIN SELECT RAISE(ABORT, 'disk full (simulated)'); END;",
    )
    .expect("trigger");
    let before = sandbox.snapshot();
    let err = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        true,
        &no_states(),
    )
    .expect_err("db commit fails");
    assert!(err.to_string().contains("disk full (simulated)"), "{err}");
    assert_eq!(
        sandbox.snapshot(),
        before,
        "replaced file restored, new files and dirs gone"
    );
    assert_eq!(
        fs::read_to_string(sandbox.config.formula_path.join("shared/init.sls")).expect("read"),
        "pkg: {}\n"
    );
    let stray: Vec<_> = fs::read_dir(sandbox.config.formula_path.join("shared"))
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".halite-spm"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[test]
fn links_are_installed_as_links_and_removed() {
    let sandbox = Sandbox::new();
    let dir = formula_dir(
        &sandbox.root().join("src"),
        &simple_formula("linked", ""),
        &[("linked/init.sls", "a: b\n")],
    );
    std::os::unix::fs::symlink("init.sls", dir.join("linked/main.sls")).expect("link");
    let spm = halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[])
        .expect("build")
        .path;
    let mut db = sandbox.db();
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &no_states(),
    )
    .expect("install");
    let link = sandbox.config.formula_path.join("linked/main.sls");
    assert_eq!(
        fs::read_link(&link).expect("is a link"),
        std::path::PathBuf::from("init.sls")
    );
    assert_eq!(fs::read_to_string(&link).expect("resolves"), "a: b\n");
    let row = db
        .files("linked")
        .expect("q")
        .expect("installed")
        .into_iter()
        .find(|f| f.path == link)
        .expect("row");
    assert_eq!(
        (row.kind, row.link_target.as_str()),
        (FileKind::Symlink, "init.sls")
    );
    remove_package(&mut db, "linked", false).expect("remove");
    assert!(fs::symlink_metadata(&link).is_err());
    assert!(!sandbox.config.formula_path.join("linked").exists());
}

#[test]
fn a_forced_reinstall_of_a_new_version_drops_the_files_it_no_longer_ships() {
    let sandbox = Sandbox::new();
    let mut db = sandbox.db();
    let v1 = formula_dir(
        &sandbox.root().join("v1"),
        &simple_formula("app", ""),
        &[
            ("app/init.sls", "v: 1\n"),
            ("app/old/gone.sls", "old\n"),
            ("app/kept.sls", "k\n"),
        ],
    );
    let v1 = halite_spm::build(&v1, &sandbox.root().join("b1"), &[])
        .expect("build v1")
        .path;
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&v1).expect("read"),
        false,
        &no_states(),
    )
    .expect("v1");
    let c = &sandbox.config;
    fs::write(c.formula_path.join("app/kept.sls"), "edited\n").expect("edit");
    let v2 = formula_dir(
        &sandbox.root().join("v2"),
        &simple_formula("app", "").replace("release: 2", "release: 3"),
        &[("app/init.sls", "v: 2\n")],
    );
    let v2 = halite_spm::build(&v2, &sandbox.root().join("b2"), &[])
        .expect("build v2")
        .path;
    let report = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&v2).expect("read"),
        true,
        &no_states(),
    )
    .expect("v2");
    assert_eq!(
        fs::read_to_string(c.formula_path.join("app/init.sls")).expect("read"),
        "v: 2\n"
    );
    assert!(
        !c.formula_path.join("app/old").exists(),
        "dropped file and its empty dir are gone"
    );
    assert!(
        c.formula_path.join("app/kept.sls").exists(),
        "an edited dropped file stays"
    );
    assert!(
        report.notes.iter().any(|n| n.contains("kept.sls")),
        "{:?}",
        report.notes
    );
    assert_eq!(
        db.package("app").expect("q").expect("installed").release,
        "3"
    );
}
