//! `scripts/install.sh` staged into a temp root (`--destdir`) with fake
//! binaries: what lands where, with which modes, that a second run keeps
//! a changed config (and writes `.new` beside it), that the shipped units
//! pass `systemd-analyze verify`, and that the example configs show the
//! daemons' real keys and defaults.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every binary the script installs when both roles are chosen.
const BINS: [&str; 7] = [
    "halite",
    "halite-call",
    "halite-key",
    "halite-run",
    "halite-spm",
    "halite-master",
    "halite-minion",
];
const UNITS: [&str; 2] = ["halite-master.service", "halite-minion.service"];
/// What `--api` adds.
const API_BIN: &str = "halite-api";
const API_UNIT: &str = "halite-api.service";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory of executable shell scripts named like the real binaries.
fn fake_binaries() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for b in BINS.into_iter().chain([API_BIN]) {
        let p = dir.path().join(b);
        std::fs::write(&p, format!("#!/bin/sh\necho fake {b}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn install(args: &[&str]) -> Output {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/install.sh"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("run bash scripts/install.sh");
    assert!(
        out.status.success(),
        "install.sh {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The `ExecStart=` line of a unit.
fn exec_start(unit: &str) -> String {
    unit.lines()
        .find(|l| l.starts_with("ExecStart="))
        .expect("unit has an ExecStart=")
        .to_string()
}

#[test]
fn stages_binaries_units_configs_and_dirs_with_safe_modes() {
    let src = fake_binaries();
    let root = tempfile::tempdir().unwrap();
    let (src_s, root_s) = (src.path().to_str().unwrap(), root.path().to_str().unwrap());
    let out = install(&[
        "--no-build",
        "--bindir-src",
        src_s,
        "--destdir",
        root_s,
        "--enable",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("--enable skipped"), "{stdout}");

    let r = root.path();
    for b in BINS {
        let p = r.join("usr/local/bin").join(b);
        assert_eq!(mode(&p), 0o755, "{}", p.display());
        assert_eq!(text(&p), text(&src.path().join(b)));
    }
    let unitdir = r.join("usr/local/lib/systemd/system");
    for u in UNITS {
        let p = unitdir.join(u);
        assert_eq!(mode(&p), 0o644, "{}", p.display());
        let daemon = u.trim_end_matches(".service");
        assert_eq!(
            exec_start(&text(&p)),
            format!("ExecStart=/usr/local/bin/{daemon} --config-dir /etc/halite")
        );
    }
    let etc = r.join("etc/halite");
    assert_eq!(mode(&etc.join("master")), 0o640);
    assert_eq!(mode(&etc.join("minion")), 0o644);
    assert_eq!(
        text(&etc.join("master")),
        text(&repo_root().join("config/master"))
    );
    assert_eq!(
        text(&etc.join("minion")),
        text(&repo_root().join("config/minion"))
    );
    for (dir, want) in [
        ("etc/halite/master.d", 0o755),
        ("etc/halite/minion.d", 0o755),
        ("etc/halite/pki/master", 0o700),
        ("etc/halite/pki/minion", 0o700),
        ("var/cache/halite/master", 0o700),
        ("var/cache/halite/minion", 0o700),
        ("var/log/halite", 0o750),
    ] {
        assert_eq!(mode(&r.join(dir)), want, "{dir}");
    }
    // Staging leaves no temporary files behind.
    let leftovers: Vec<_> = walk(r)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".install."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn a_second_run_keeps_a_changed_config_and_writes_new() {
    let src = fake_binaries();
    let root = tempfile::tempdir().unwrap();
    let args = [
        "--no-build",
        "--bindir-src",
        src.path().to_str().unwrap(),
        "--destdir",
        root.path().to_str().unwrap(),
    ];
    install(&args);
    let etc = root.path().join("etc/halite");
    let mine = "master: salt.example.com\n";
    std::fs::write(etc.join("minion"), mine).unwrap();
    // A new binary reaches the second run.
    std::fs::write(src.path().join("halite"), "#!/bin/sh\necho v2\n").unwrap();

    let out = install(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text(&etc.join("minion")),
        mine,
        "the admin's config was overwritten"
    );
    assert_eq!(
        text(&etc.join("minion.new")),
        text(&repo_root().join("config/minion"))
    );
    assert_eq!(mode(&etc.join("minion.new")), 0o644);
    assert!(stdout.contains("minion.new"), "{stdout}");
    // An unchanged config gets no .new.
    assert!(!etc.join("master.new").exists());
    assert_eq!(
        text(&root.path().join("usr/local/bin/halite")),
        "#!/bin/sh\necho v2\n"
    );
}

#[test]
fn one_role_and_another_prefix() {
    let src = fake_binaries();
    std::fs::remove_file(src.path().join("halite-master")).unwrap();
    let root = tempfile::tempdir().unwrap();
    install(&[
        "--no-build",
        "--bindir-src",
        src.path().to_str().unwrap(),
        "--destdir",
        root.path().to_str().unwrap(),
        "--prefix",
        "/opt/halite",
        "--minion",
    ]);
    let r = root.path();
    assert!(r.join("opt/halite/bin/halite-minion").is_file());
    assert!(r.join("opt/halite/bin/halite-call").is_file());
    assert!(!r.join("opt/halite/bin/halite-master").exists());
    // A prefix systemd does not search puts the units in /etc.
    let unit = text(&r.join("etc/systemd/system/halite-minion.service"));
    assert_eq!(
        exec_start(&unit),
        "ExecStart=/opt/halite/bin/halite-minion --config-dir /etc/halite"
    );
    assert!(!r.join("etc/systemd/system/halite-master.service").exists());
    assert!(!r.join("etc/halite/master").exists());
    assert!(r.join("etc/halite/minion").is_file());
}

#[test]
fn a_missing_binary_is_a_clear_error() {
    let src = fake_binaries();
    std::fs::remove_file(src.path().join("halite-spm")).unwrap();
    let root = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/install.sh"))
        .args(["--no-build", "--bindir-src"])
        .arg(src.path())
        .arg("--destdir")
        .arg(root.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("halite-spm"), "{stderr}");
    assert!(!root.path().join("usr/local/bin/halite").exists());
}

#[test]
fn units_pass_systemd_analyze_verify() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: systemd-analyze is not installed");
        return;
    }
    let src = fake_binaries();
    let root = tempfile::tempdir().unwrap();
    install(&[
        "--no-build",
        "--bindir-src",
        src.path().to_str().unwrap(),
        "--destdir",
        root.path().to_str().unwrap(),
        "--api",
    ]);
    // verify checks that ExecStart's binary exists: point the staged units
    // at the staged binaries (same file names, so the unit names hold).
    let bindir = root.path().join("usr/local/bin");
    let check = tempfile::tempdir().unwrap();
    let units: Vec<&str> = UNITS.into_iter().chain([API_UNIT]).collect();
    for u in &units {
        let unit = text(&root.path().join("usr/local/lib/systemd/system").join(u));
        let staged = unit.replace(
            "ExecStart=/usr/local/bin/",
            &format!("ExecStart={}/", bindir.display()),
        );
        assert_ne!(unit, staged);
        std::fs::write(check.path().join(u), staged).unwrap();
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(units.iter().map(|u| check.path().join(u)))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify complained:\n{stdout}{stderr}"
    );
}

/// `#key: value` lines of an example config (top-level keys only).
fn example_keys(config: &str) -> Vec<(String, String)> {
    config
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// The example with the first `#key: value` line of every key uncommented,
/// together with its `#  ` continuation lines (block values), except the
/// keys in `examples` whose block shows an example, not the default.
fn uncommented(config: &str, examples: &[&str]) -> String {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    let mut in_block = false;
    for line in config.lines() {
        let Some(body) = line.strip_prefix('#') else {
            in_block = false;
            continue;
        };
        if in_block && (body.starts_with("  ") || body.starts_with("- ")) {
            out.push_str(body);
            out.push('\n');
            continue;
        }
        in_block = false;
        let Some((key, value)) = body.split_once(':') else {
            continue;
        };
        let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if !is_key || examples.contains(&key) || !seen.insert(key.to_string()) {
            continue;
        }
        out.push_str(body);
        out.push('\n');
        in_block = value.trim().is_empty();
    }
    out
}

#[test]
fn the_master_example_shows_the_real_keys_and_defaults() {
    let example = text(&repo_root().join("config/master"));
    // Uncommented, the example must load as exactly the built-in defaults:
    // a wrong default, or a key the master does not have (it would land in
    // `extra`), shows here.
    let yaml = uncommented(
        &example,
        &["nodegroups", "publisher_acl", "publisher_acl_blacklist"],
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("master"), &yaml).unwrap();
    let loaded = halite_client::MasterConfig::load(dir.path(), &serde_json::Map::new()).unwrap();
    // The only key load adds: where it read from, as Salt's opts carry it.
    let expected = halite_client::MasterConfig {
        config_dir: dir.path().to_path_buf(),
        ..Default::default()
    };
    assert_eq!(loaded, expected, "{yaml}");
    // Every key the master reads is shown (config_dir is where it reads,
    // -c, not a key of the file).
    let documented: BTreeSet<String> = example_keys(&example).into_iter().map(|(k, _)| k).collect();
    let all = serde_json::to_value(halite_client::MasterConfig::default()).unwrap();
    for key in all
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "config_dir")
    {
        assert!(
            documented.contains(key),
            "config/master does not show {key}"
        );
    }
}

#[test]
fn the_minion_example_names_only_keys_the_minion_reads() {
    // Checked against the source of the minion's config struct, where
    // each key and its default are written out.
    let example = text(&repo_root().join("config/minion"));
    let source = text(&repo_root().join("crates/minion/src/config.rs"));
    // Read outside the struct, from the opts: the runner's file and pillar roots.
    let opts_keys = ["file_client", "file_roots", "pillar_roots"];
    for (k, v) in example_keys(&example) {
        if opts_keys.contains(&k.as_str()) {
            continue;
        }
        assert!(
            source.contains(&format!("pub {k}:")),
            "config/minion shows {k}, which MinionConfig has no field for"
        );
        if !v.is_empty() && k != "master" && k != "id" && k != "master_finger" {
            let default = source
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{k}: ")))
                .unwrap_or_else(|| panic!("no default for {k} in MinionConfig::default"));
            let default = default.trim_end_matches(',').trim_end_matches(".into()");
            let shown = v.trim_matches('\'');
            assert!(
                default.trim_matches('"').eq_ignore_ascii_case(shown),
                "config/minion shows {k}: {v}, the default is {default}"
            );
        }
    }
}

#[test]
fn the_api_installs_its_binary_unit_and_drop_in_only_when_asked() {
    let src = fake_binaries();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let base = [
        "--no-build",
        "--bindir-src",
        src.path().to_str().unwrap(),
        "--destdir",
        r.to_str().unwrap(),
    ];
    install(&base);
    assert!(!r.join("usr/local/bin/halite-api").exists());
    assert!(!r
        .join("usr/local/lib/systemd/system/halite-api.service")
        .exists());
    assert!(!r.join("etc/halite/master.d/api.conf").exists());

    let with_api: Vec<&str> = base.iter().copied().chain(["--api"]).collect();
    install(&with_api);
    let bin = r.join("usr/local/bin/halite-api");
    assert_eq!(mode(&bin), 0o755);
    let unit = r.join("usr/local/lib/systemd/system/halite-api.service");
    assert_eq!(mode(&unit), 0o644);
    assert_eq!(
        exec_start(&text(&unit)),
        "ExecStart=/usr/local/bin/halite-api --config-dir /etc/halite"
    );
    let conf = r.join("etc/halite/master.d/api.conf");
    assert_eq!(mode(&conf), 0o640, "external_auth and TLS paths are root's");
    assert_eq!(text(&conf), text(&repo_root().join("config/api")));

    // The drop-in is part of the master's config, where halite-api reads
    // it: loopback, no TLS, Salt's port.
    let loaded =
        halite_client::MasterConfig::load(&r.join("etc/halite"), &serde_json::Map::new()).unwrap();
    assert_eq!(
        loaded.extra.get("rest_cherrypy"),
        Some(&serde_json::json!({"port": 8000, "host": "127.0.0.1", "disable_ssl": true}))
    );

    // The admin's drop-in is kept; the new example lands beside it, where
    // the master does not read it (only *.conf are).
    std::fs::write(&conf, "rest_cherrypy: {port: 8443}\n").unwrap();
    let out = install(&with_api);
    assert_eq!(text(&conf), "rest_cherrypy: {port: 8443}\n");
    assert!(String::from_utf8_lossy(&out.stdout).contains("api.conf.new"));
    assert_eq!(
        text(&r.join("etc/halite/master.d/api.conf.new")),
        text(&repo_root().join("config/api"))
    );

    // --api alone (the master elsewhere on this host's config) still
    // makes the master's directories the API uses.
    let alone = tempfile::tempdir().unwrap();
    install(&[
        "--no-build",
        "--bindir-src",
        src.path().to_str().unwrap(),
        "--destdir",
        alone.path().to_str().unwrap(),
        "--minion",
        "--api",
    ]);
    assert_eq!(mode(&alone.path().join("var/cache/halite/master")), 0o700);
    assert!(alone.path().join("etc/halite/master.d/api.conf").is_file());
}

#[test]
fn the_api_example_names_only_keys_halite_api_reads() {
    let example = text(&repo_root().join("config/api"));
    let source = text(&repo_root().join("crates/api/src/config.rs"));
    // `  #key: value` lines inside rest_cherrypy are RestConfig fields.
    let mut shown = 0;
    for line in example.lines() {
        let Some(body) = line.strip_prefix("  #").or_else(|| line.strip_prefix("  ")) else {
            continue;
        };
        let Some((key, _)) = body.split_once(':') else {
            continue;
        };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            continue;
        }
        shown += 1;
        assert!(
            source.contains(&format!("pub {key}:")),
            "config/api shows rest_cherrypy {key}, which RestConfig has no field for"
        );
    }
    assert!(shown >= 10, "{shown}");
    // The top-level keys are those ApiConfig::from_master reads.
    for (key, _) in example_keys(&example) {
        assert!(
            source.contains(&format!("\"{key}\"")),
            "config/api shows {key}, which halite-api does not read"
        );
    }
}
