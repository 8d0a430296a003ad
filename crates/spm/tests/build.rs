//! `build`: the package's name, members and their order, and refusals.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::io::Read;

use common::{formula_dir, simple_formula, Sandbox};
use halite_spm::SpmError;

/// Member names of a `.spm`, in archive order, read with the tar crate.
fn members(path: &std::path::Path) -> Vec<String> {
    let file = std::fs::File::open(path).expect("open spm");
    let mut archive = tar::Archive::new(bzip2::read::BzDecoder::new(file));
    archive
        .entries()
        .expect("entries")
        .map(|e| {
            e.expect("entry")
                .path()
                .expect("path")
                .display()
                .to_string()
        })
        .collect()
}

const EVERY_FIELD: &str = "\
name: apache
os: RedHat, Debian, Ubuntu
os_family: RedHat, Debian
version: 201506
release: 2
summary: Formula for installing Apache
description: Formula for installing Apache, with every FORMULA field set
top_level_dir: apache
dependencies: base, common
optional: php
recommended: mod_ssl, mod_security
minimum_version: '2016.3'
renderer: jinja|yaml
listen_port: 8080
files:
  - FORMULA
  - apache/init.sls
  - apache/files
  - _modules/apache_ext.py
  - pillar.example
  - d|docs/index.rst
  - r|README.rst
  - l|LICENSE
pre_local_state: |
  pre_{{ name }}:
    test.succeed_without_changes
pre_tgt_state:
  tgt: 'web*'
  tgt_type: glob
  data: |
    tgt_pre:
      test.nop
post_local_state: |
  post_{{ name }}:
    test.succeed_without_changes
post_tgt_state:
  tgt: 'web*'
  data: |
    tgt_post:
      test.nop
";

#[test]
fn every_formula_field_builds_with_the_listed_files_in_order() {
    let sandbox = Sandbox::new();
    let dir = formula_dir(
        &sandbox.root().join("src"),
        EVERY_FIELD,
        &[
            ("apache/init.sls", "apache: {pkg.installed: []}\n"),
            ("apache/files/httpd.conf", "Listen 80\n"),
            ("apache/files/site/index.html", "hi\n"),
            ("apache/unlisted.sls", "left: out\n"),
            ("_modules/apache_ext.py", "def f(): pass\n"),
            ("pillar.example", "apache: {}\n"),
            ("docs/index.rst", "docs\n"),
            ("README.rst", "readme\n"),
            ("LICENSE", "Apache-2.0\n"),
            ("tests/test_it.py", "left out\n"),
        ],
    );
    let built = halite_spm::build(
        &dir,
        &sandbox.config.spm_build_dir,
        &sandbox.config.spm_build_exclude,
    )
    .expect("build succeeds");
    assert_eq!(
        built.path,
        sandbox.config.spm_build_dir.join("apache-201506-2.spm")
    );
    let expected = [
        "apache",
        "apache/FORMULA",
        "apache/apache/init.sls",
        "apache/apache/files",
        "apache/apache/files/httpd.conf",
        "apache/apache/files/site",
        "apache/apache/files/site/index.html",
        "apache/_modules/apache_ext.py",
        "apache/pillar.example",
        "apache/docs/index.rst",
        "apache/README.rst",
        "apache/LICENSE",
    ];
    assert_eq!(members(&built.path), expected);
    assert_eq!(built.members, expected);

    // The package reads back with every field.
    let package = halite_spm::read_package(&built.path).expect("reads back");
    let formula = &package.formula;
    assert_eq!(formula.dependencies, ["base", "common"]);
    assert_eq!(formula.recommended, ["mod_ssl", "mod_security"]);
    assert_eq!(formula.optional, ["php"]);
    assert_eq!(formula.minimum_version.as_deref(), Some("2016.3"));
    assert_eq!(
        formula.variables.get("listen_port"),
        Some(&serde_json::json!(8080))
    );
    assert_eq!(
        formula.pre_tgt_state.as_ref().map(|t| t.tgt.as_str()),
        Some("web*")
    );
    assert_eq!(
        formula.post_tgt_state.as_ref().map(|t| t.tgt_type.as_str()),
        Some("glob")
    );
    assert!(formula
        .pre_local_state
        .as_deref()
        .is_some_and(|s| s.contains("pre_{{ name }}")));
}

#[test]
fn without_files_list_only_the_top_level_dir_and_the_seed_extras_go_in() {
    let sandbox = Sandbox::new();
    let dir = formula_dir(
        &sandbox.root().join("src"),
        &simple_formula("nginx", ""),
        &[
            ("nginx/init.sls", "nginx: {}\n"),
            ("nginx/.git/config", "excluded by spm_build_exclude\n"),
            ("_states/nginx_site.py", "x = 1\n"),
            ("pillar.example", "nginx: {}\n"),
            ("README.md", "readme\n"),
            ("LICENSE", "MIT\n"),
            ("docs/notes.rst", "outside top_level_dir\n"),
            (".travis.yml", "outside\n"),
        ],
    );
    let built = halite_spm::build(
        &dir,
        &sandbox.config.spm_build_dir,
        &sandbox.config.spm_build_exclude,
    )
    .expect("build succeeds");
    assert_eq!(
        members(&built.path),
        [
            "nginx",
            "nginx/FORMULA",
            "nginx/LICENSE",
            "nginx/README.md",
            "nginx/_states",
            "nginx/_states/nginx_site.py",
            "nginx/nginx",
            "nginx/nginx/init.sls",
            "nginx/pillar.example",
        ]
    );
    // The archive is bzip2 (magic "BZh").
    let mut magic = [0u8; 3];
    std::fs::File::open(&built.path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .expect("read");
    assert_eq!(&magic, b"BZh");
}

#[test]
fn a_missing_required_field_is_named_and_nothing_is_written() {
    for field in [
        "name",
        "os",
        "os_family",
        "version",
        "release",
        "summary",
        "description",
    ] {
        let sandbox = Sandbox::new();
        let formula: String = simple_formula("web", "")
            .lines()
            .filter(|l| !l.starts_with(&format!("{field}:")))
            .map(|l| format!("{l}\n"))
            .collect();
        let dir = sandbox.root().join("src/web");
        common::write_tree(&dir, &[("FORMULA", &formula), ("web/init.sls", "a: b\n")]);
        let err = halite_spm::build(
            &dir,
            &sandbox.config.spm_build_dir,
            &sandbox.config.spm_build_exclude,
        )
        .expect_err("build must fail");
        assert!(
            matches!(&err, SpmError::FormulaFieldMissing(f) if f == field),
            "{field}: {err}"
        );
        assert!(
            err.to_string()
                .contains(&format!("a {field} must be defined")),
            "{err}"
        );
        assert!(
            !sandbox.config.spm_build_dir.exists()
                || std::fs::read_dir(&sandbox.config.spm_build_dir)
                    .expect("ls")
                    .next()
                    .is_none()
        );
    }
}

#[test]
fn a_missing_formula_file_and_a_missing_listed_file_are_clear_errors() {
    let sandbox = Sandbox::new();
    let empty = sandbox.root().join("src/empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let err =
        halite_spm::build(&empty, &sandbox.config.spm_build_dir, &[]).expect_err("no FORMULA");
    assert!(err.to_string().contains("FORMULA"), "{err}");

    let dir = formula_dir(
        &sandbox.root().join("src"),
        &simple_formula("php", "files:\n  - php/init.sls\n  - php/missing.sls\n"),
        &[("php/init.sls", "a: b\n")],
    );
    let err = halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[])
        .expect_err("missing listed file");
    assert!(err.to_string().contains("php/missing.sls"), "{err}");
}

#[test]
fn links_inside_the_formula_are_kept_and_escaping_ones_refused() {
    let sandbox = Sandbox::new();
    let dir = formula_dir(
        &sandbox.root().join("src"),
        &simple_formula("links", ""),
        &[("links/init.sls", "a: b\n")],
    );
    std::os::unix::fs::symlink("init.sls", dir.join("links/main.sls")).expect("link");
    let built = halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[]).expect("build");
    let package = halite_spm::read_package(&built.path).expect("read");
    let link = package
        .members
        .iter()
        .find(|m| m.path == "links/main.sls")
        .expect("link member");
    assert_eq!(
        link.kind,
        halite_spm::archive::MemberKind::Symlink("init.sls".into())
    );

    std::os::unix::fs::symlink("/etc/passwd", dir.join("links/passwd")).expect("link");
    let err =
        halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[]).expect_err("escaping link");
    assert!(
        err.to_string().contains("absolute path /etc/passwd"),
        "{err}"
    );
}
