//! Real apt/dpkg tests: tiny `.deb` packages built on the fly, published as
//! local `file:` repositories, installed into this host's dpkg database.
//!
//! apt is pointed at the test's own sources and lists through `APT_CONFIG`,
//! so nothing here touches the network or the host's apt lists. Every test
//! holds one lock (they share the dpkg database), purges every
//! `halite-test-*` package when it ends (even on failure), and skips with a
//! printed reason unless it runs as root with dpkg-deb, dpkg-scanpackages
//! and apt-get available.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};

use halite_modules::exec::Args;
use halite_modules::host::LogEvents;
use halite_modules::pkg::apt::Apt;
use halite_modules::pkg::PkgProvider;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::{LowChunk, Map, StateCall, StateResult, Value};
use serde_json::json;
use sha2::Digest;

const BASE: &str = "halite-test-base";
const DEP: &str = "halite-test-dep";
const BROKEN: &str = "halite-test-broken";
const DATA_FILE: &str = "/usr/share/halite-test-base/data.txt";
const CONF_FILE: &str = "/etc/halite-test-base.conf";

static SYSTEM: Mutex<()> = Mutex::new(());

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Every halite-test package in dpkg's database, whatever its state.
fn test_packages() -> Vec<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Package}\n", "halite-test-*"])
        .output();
    out.map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// Purges every halite-test package when dropped, so a failed assertion
/// never leaves one behind.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let pkgs = test_packages();
        if !pkgs.is_empty() {
            let _ = Command::new("apt-mark").arg("unhold").args(&pkgs).output();
            let _ = Command::new("dpkg").arg("--purge").args(&pkgs).output();
        }
    }
}

/// The test's repositories, apt configuration and host.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    host: Host,
    _cleanup: Cleanup,
    _lock: MutexGuard<'static, ()>,
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn sh(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds `name_version_all.deb` in `out_dir`.
fn build_deb(
    work: &Path,
    out_dir: &Path,
    name: &str,
    version: &str,
    depends: Option<&str>,
) -> PathBuf {
    let tree = work.join(format!("build/{name}-{version}"));
    let mut control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: halite tests <tests@example.invalid>\n\
         Description: halite test package {version}\n"
    );
    if let Some(d) = depends {
        control.push_str(&format!("Depends: {d}\n"));
    }
    write(&tree.join("DEBIAN/control"), &control);
    if name == BASE {
        write(
            &tree.join(DATA_FILE.trim_start_matches('/')),
            &format!("data of {version}\n"),
        );
        write(
            &tree.join(CONF_FILE.trim_start_matches('/')),
            "setting = 1\n",
        );
        write(&tree.join("DEBIAN/conffiles"), &format!("{CONF_FILE}\n"));
    } else {
        write(
            &tree.join(format!("usr/share/{name}/README")),
            &format!("{name} {version}\n"),
        );
    }
    std::fs::create_dir_all(out_dir).unwrap_or_else(|e| panic!("mkdir: {e}"));
    let deb = out_dir.join(format!("{name}_{version}_all.deb"));
    sh(Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&tree)
        .arg(&deb));
    deb
}

/// Writes `Packages` (dpkg-scanpackages) and a `Release` naming `suite`.
fn publish(dir: &Path, suite: &str) {
    let packages = sh(Command::new("dpkg-scanpackages")
        .args(["--multiversion", ".", "/dev/null"])
        .current_dir(dir));
    write(&dir.join("Packages"), &packages);
    let sha = hex::encode(sha2::Sha256::digest(packages.as_bytes()));
    let release = format!(
        "Origin: halite-test\nLabel: halite-test\nSuite: {suite}\nCodename: {suite}\n\
         Date: Thu, 01 Jan 2026 00:00:00 UTC\nSHA256:\n {sha} {} Packages\n",
        packages.len()
    );
    write(&dir.join("Release"), &release);
}

/// The fixture, or `None` (with the reason printed) when this machine
/// cannot run system package tests.
fn fixture() -> Option<Fixture> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to install packages into dpkg's database");
        return None;
    }
    for tool in [
        "dpkg-deb",
        "dpkg-scanpackages",
        "apt-get",
        "apt-cache",
        "apt-mark",
    ] {
        if !have(tool) {
            eprintln!("skipped: {tool} is not installed");
            return None;
        }
    }
    let lock = SYSTEM.lock().unwrap_or_else(|p| p.into_inner());
    let cleanup = Cleanup;
    drop(Cleanup); // purge leftovers of an earlier interrupted run
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let root = tmp.path().to_path_buf();
    let stable = root.join("repo-stable");
    let edge = root.join("repo-edge");
    build_deb(&root, &stable, BASE, "1.0", None);
    build_deb(
        &root,
        &stable,
        DEP,
        "1.0",
        Some(&format!("{BASE} (>= 1.0)")),
    );
    build_deb(&root, &stable, BROKEN, "1.0", Some("halite-test-nowhere"));
    build_deb(&root, &edge, BASE, "2.0", None);
    publish(&stable, "halite-stable");
    publish(&edge, "halite-edge");
    let etc = root.join("etc/apt");
    write(
        &etc.join("sources.list.d/halite-test.list"),
        &format!(
            "deb [trusted=yes] file:{} ./\ndeb [trusted=yes] file:{} ./\n",
            stable.display(),
            edge.display()
        ),
    );
    write(&etc.join("sources.list"), "");
    for d in ["lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(root.join(d)).unwrap_or_else(|e| panic!("mkdir: {e}"));
    }
    let conf = root.join("apt.conf");
    write(
        &conf,
        &format!(
            "Dir::Etc::sourcelist \"{etc}/sources.list\";\nDir::Etc::sourceparts \"{etc}/sources.list.d\";\n\
             Dir::State::lists \"{root}/lists\";\nDir::Cache \"{root}/cache\";\n",
            etc = etc.display(),
            root = root.display()
        ),
    );
    // Serialised by SYSTEM: no other thread of this binary runs meanwhile.
    std::env::set_var("APT_CONFIG", &conf);
    let files_root = root.join("srv");
    std::fs::create_dir_all(&files_root).unwrap_or_else(|e| panic!("mkdir: {e}"));
    std::fs::copy(
        stable.join(format!("{BASE}_1.0_all.deb")),
        files_root.join("base.deb"),
    )
    .unwrap_or_else(|e| panic!("copy: {e}"));
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![files_root]);
    let host = Host {
        opts: json!({"cachedir": root.join("cache").display().to_string()}),
        grains: json!({"os_family": "Debian"}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    };
    let f = Fixture {
        _tmp: tmp,
        root,
        host,
        _cleanup: cleanup,
        _lock: lock,
    };
    f.call("pkg.refresh_db", json!([]), json!({}));
    Some(f)
}

impl Fixture {
    fn call(&self, fun: &str, args: Value, kwargs: Value) -> Value {
        let args = Args {
            positional: args.as_array().cloned().unwrap_or_default(),
            kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        };
        self.host
            .call(fun, &args)
            .unwrap_or_else(|e| panic!("{fun}: {e}"))
    }

    fn state(&self, module: &str, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
        self.state_watch(module, fun, name, args, test, None)
    }

    fn state_watch(
        &self,
        module: &str,
        fun: &str,
        name: &str,
        args: Value,
        test: bool,
        sfun: Option<&str>,
    ) -> StateResult {
        let mut chunk = Map::new();
        chunk.insert("state".into(), json!(module));
        chunk.insert("name".into(), json!(name));
        chunk.insert("__sls__".into(), json!("pkgtest"));
        chunk.insert("__env__".into(), json!("base"));
        chunk.insert("__id__".into(), json!(name));
        if let Some(extra) = args.as_object() {
            chunk.extend(extra.clone());
        }
        chunk.insert("order".into(), json!(10000));
        chunk.insert("fun".into(), json!(fun));
        let chunk = LowChunk::from(chunk);
        let call = StateCall {
            chunk: &chunk,
            test,
            env: &self.host,
            sfun,
            reqs: None,
        };
        let module = self
            .host
            .states
            .get(module)
            .unwrap_or_else(|| panic!("no state module {module}"));
        module
            .call(fun, &call)
            .unwrap_or_else(|e| panic!("{fun}: {e}"))
    }

    fn installed(&self, name: &str) -> Option<String> {
        Apt::new()
            .list_pkgs(false)
            .unwrap_or_else(|e| panic!("list_pkgs: {e}"))
            .get(name)
            .map(|v| v.join(","))
    }
}

#[test]
fn install_by_name_is_idempotent_and_reports_changes() {
    let Some(f) = fixture() else { return };
    let r = f.state("pkg", "installed", BASE, json!({}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("The following packages were installed/updated: {BASE}")
    );
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": ""}));
    assert_eq!(f.installed(BASE).as_deref(), Some("2.0"));

    let again = f.state("pkg", "installed", BASE, json!({}), false);
    assert_eq!(again.result, Some(true));
    assert_eq!(
        again.comment,
        "All specified packages are already installed"
    );
    assert!(again.changes.is_empty());
}

#[test]
fn test_mode_predicts_without_touching_the_system() {
    let Some(f) = fixture() else { return };
    let r = f.state("pkg", "installed", BASE, json!({}), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!("The following packages would be installed/updated: {BASE}")
    );
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": ""}));
    assert_eq!(f.installed(BASE), None, "test=True must not install");

    let r = f.state("pkg", "installed", BASE, json!({"version": "1.0"}), true);
    assert_eq!(r.changes[BASE], json!({"new": "1.0", "old": ""}));

    f.state("pkg", "installed", BASE, json!({"version": "1.0"}), false);
    let r = f.state("pkg", "latest", BASE, json!({"refresh": false}), true);
    assert_eq!(r.result, None);
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": "1.0"}));
    // Salt's predictions: a range reads "installed", a new package its candidate.
    let pkgs = json!({"pkgs": [{BASE: ">=2.0"}, DEP]});
    let r = f.state("pkg", "installed", "bundle", pkgs, true);
    assert_eq!(
        r.comment,
        format!("The following packages would be installed/updated: {BASE}, {DEP}")
    );
    assert_eq!(r.changes[BASE], json!({"new": "installed", "old": ""}));
    assert_eq!(r.changes[DEP], json!({"new": "1.0", "old": ""}));
    let r = f.state(
        "pkg",
        "installed",
        BASE,
        json!({"version": "2.0", "reinstall": true}),
        true,
    );
    assert_eq!(
        r.comment,
        format!("The following packages would be reinstalled: {BASE}=2.0")
    );
    let r = f.state("pkg", "removed", BASE, json!({}), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!("The following packages will be removed: {BASE}.")
    );
    let r = f.state("pkg", "uptodate", "sys", json!({"pkgs": [BASE]}), true);
    assert_eq!(r.result, None, "{}", r.comment);
    assert_eq!(r.comment, "System update will be performed");
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": "1.0"}));
    assert_eq!(
        f.installed(BASE).as_deref(),
        Some("1.0"),
        "nothing changed under test=True"
    );
}

#[test]
fn version_pinning_up_and_down() {
    let Some(f) = fixture() else { return };
    let r = f.state("pkg", "installed", BASE, json!({"version": "1.0"}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    // Salt lists names only while the summary is under 20 characters.
    assert_eq!(r.comment, "1 targeted package was installed/updated.");
    assert_eq!(f.installed(BASE).as_deref(), Some("1.0"));

    let r = f.state("pkg", "installed", BASE, json!({"version": "1.0"}), false);
    assert_eq!(
        r.comment,
        "All specified packages are already installed and are at the desired version"
    );

    let r = f.state("pkg", "installed", BASE, json!({"version": ">=2.0"}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": "1.0"}));

    let r = f.state("pkg", "installed", BASE, json!({"version": "==2.0"}), false);
    assert_eq!(
        r.comment,
        "All specified packages are already installed and are at the desired version"
    );

    let r = f.state("pkg", "installed", BASE, json!({"version": "<=1.5"}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes[BASE], json!({"new": "1.0", "old": "2.0"}));

    let r = f.state("pkg", "installed", BASE, json!({"version": ">=3.0"}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    \
         - No version matching 'halite-test-base>=3.0' could be found (available: 2.0, 1.0)",
        "Salt's wording"
    );
}

#[test]
fn pkgs_with_versions_and_a_dependency() {
    let Some(f) = fixture() else { return };
    let r = f.state(
        "pkg",
        "installed",
        "both",
        json!({"pkgs": [{BASE: "1.0"}, DEP]}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes[BASE], json!({"new": "1.0", "old": ""}));
    assert_eq!(r.changes[DEP], json!({"new": "1.0", "old": ""}));
    let again = f.state(
        "pkg",
        "installed",
        "both",
        json!({"pkgs": [{BASE: "1.0"}, DEP]}),
        false,
    );
    assert_eq!(
        again.comment,
        "All specified packages are already installed and are at the desired version"
    );
}

#[test]
fn sources_from_a_path_and_from_salt_url() {
    let Some(f) = fixture() else { return };
    let r = f.state(
        "pkg",
        "installed",
        "src",
        json!({"sources": [{BASE: "salt://base.deb"}]}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes[BASE], json!({"new": "1.0", "old": ""}));
    let again = f.state(
        "pkg",
        "installed",
        "src",
        json!({"sources": [{BASE: "salt://base.deb"}]}),
        false,
    );
    assert_eq!(
        again.comment,
        "All specified packages are already installed"
    );

    let dep = f.root.join(format!("repo-stable/{DEP}_1.0_all.deb"));
    let r = f.state(
        "pkg",
        "installed",
        "src2",
        json!({"sources": [{DEP: dep.display().to_string()}]}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("The following packages were installed/updated: {DEP}")
    );

    let missing = f.state(
        "pkg",
        "installed",
        "src3",
        json!({"sources": [{DEP: "salt://nope.deb"}]}),
        false,
    );
    assert_eq!(missing.result, Some(false));
    assert!(
        missing.comment.contains("Unable to cache salt://nope.deb"),
        "{}",
        missing.comment
    );
}

#[test]
fn sources_from_an_http_url() {
    let Some(f) = fixture() else { return };
    let srv = support::Server::start(&f.root.join("repo-stable"), None);
    let url = format!("http://127.0.0.1:{}/{DEP}_1.0_all.deb", srv.port);
    let r = f.state(
        "pkg",
        "installed",
        "web",
        json!({"sources": [{DEP: url}]}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("The following packages were installed/updated: {DEP}")
    );
    assert!(f.installed(DEP).is_some());
    let missing = f.state(
        "pkg",
        "installed",
        "web2",
        json!({"sources": [{BASE: format!("http://127.0.0.1:{}/nope.deb", srv.port)}]}),
        false,
    );
    assert_eq!(missing.result, Some(false));
    assert!(
        missing
            .comment
            .contains("Unable to cache http://127.0.0.1:"),
        "{}",
        missing.comment
    );
}

#[test]
fn latest_version_honours_fromrepo_and_repo() {
    let Some(f) = fixture() else { return };
    assert_eq!(
        f.call(
            "pkg.latest_version",
            json!([BASE]),
            json!({"refresh": false})
        ),
        json!("2.0")
    );
    let stable = json!({"refresh": false, "fromrepo": "halite-stable"});
    assert_eq!(
        f.call("pkg.latest_version", json!([BASE]), stable),
        json!("1.0")
    );
    let old_name = json!({"refresh": false, "repo": "halite-stable"});
    assert_eq!(
        f.call("pkg.latest_version", json!([BASE]), old_name),
        json!("1.0")
    );
    let both = json!({"refresh": false, "repo": "halite-stable", "fromrepo": "halite-edge"});
    assert_eq!(
        f.call("pkg.latest_version", json!([BASE]), both),
        json!("2.0"),
        "fromrepo wins over repo"
    );
    let many = f.call(
        "pkg.latest_version",
        json!([BASE, DEP, "halite-test-unknown"]),
        json!({"refresh": false}),
    );
    assert_eq!(
        many,
        json!({BASE: "2.0", DEP: "1.0", "halite-test-unknown": ""})
    );

    // fromrepo in a state installs from that repository.
    let r = f.state(
        "pkg",
        "installed",
        BASE,
        json!({"fromrepo": "halite-stable"}),
        false,
    );
    assert_eq!(
        r.changes[BASE],
        json!({"new": "1.0", "old": ""}),
        "{}",
        r.comment
    );
    assert_eq!(
        f.call("pkg.version", json!([BASE]), json!({})),
        json!("1.0")
    );
    assert_eq!(f.call("pkg.version", json!([DEP]), json!({})), json!(""));
    assert_eq!(
        f.call("pkg.upgrade_available", json!([BASE]), json!({})),
        json!(true)
    );
    let ups = f.call("pkg.list_upgrades", json!([]), json!({"refresh": false}));
    assert_eq!(ups[BASE], json!("2.0"));
    assert_eq!(
        f.call(
            "pkg.latest_version",
            json!([BASE]),
            json!({"refresh": false})
        ),
        json!("2.0")
    );
}

#[test]
fn latest_and_upgrade_between_two_versions() {
    let Some(f) = fixture() else { return };
    f.state("pkg", "installed", BASE, json!({"version": "1.0"}), false);
    let r = f.state("pkg", "latest", BASE, json!({}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("The following packages were successfully installed/upgraded: {BASE}")
    );
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": "1.0"}));
    let r = f.state("pkg", "latest", BASE, json!({}), false);
    assert_eq!(r.comment, format!("Package {BASE} is already up-to-date"));

    f.state("pkg", "installed", BASE, json!({"version": "1.0"}), false);
    let r = f.state("pkg", "uptodate", "sys", json!({"pkgs": [BASE]}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, "Upgrade ran successfully");
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": "1.0"}));
    let r = f.state("pkg", "uptodate", "sys", json!({"pkgs": [BASE]}), false);
    assert_eq!(r.comment, "System is already up-to-date");

    // version: latest resolves to the candidate.
    f.state("pkg", "installed", BASE, json!({"version": "1.0"}), false);
    let r = f.state(
        "pkg",
        "installed",
        BASE,
        json!({"version": "latest", "refresh": false}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes[BASE], json!({"old": "1.0", "new": "2.0"}));
    let r = f.state(
        "pkg",
        "installed",
        BASE,
        json!({"version": "latest", "refresh": false}),
        false,
    );
    assert_eq!(
        r.comment,
        "All specified packages are already installed and are at the desired version"
    );

    let missing = f.state(
        "pkg",
        "latest",
        "halite-test-unknown",
        json!({"refresh": false}),
        false,
    );
    assert_eq!(missing.result, Some(false));
    assert_eq!(
        missing.comment,
        "No information found for 'halite-test-unknown'."
    );
}

#[test]
fn remove_then_purge() {
    let Some(f) = fixture() else { return };
    f.state("pkg", "installed", BASE, json!({}), false);
    let r = f.state("pkg", "removed", BASE, json!({}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, "All targeted packages were removed.");
    assert_eq!(r.changes[BASE], json!({"new": "", "old": "2.0"}));
    assert!(Path::new(CONF_FILE).exists(), "remove keeps conffiles");
    let removed = f.call("pkg.list_pkgs", json!([]), json!({"removed": true}));
    assert_eq!(
        removed[BASE],
        json!("2.0"),
        "config-files state is listed as removed"
    );

    let r = f.state("pkg", "removed", BASE, json!({}), false);
    assert_eq!(r.comment, "All specified packages are already absent");

    let r = f.state("pkg", "purged", BASE, json!({}), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!("The following packages will be purged: {BASE}.")
    );
    let r = f.state("pkg", "purged", BASE, json!({}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, "All targeted packages were purged.");
    assert_eq!(r.changes["removed"][BASE], json!({"new": "", "old": "2.0"}));
    assert!(!Path::new(CONF_FILE).exists(), "purge removes conffiles");
    let r = f.state("pkg", "purged", BASE, json!({}), false);
    assert_eq!(
        r.comment,
        "None of the targeted packages are installed or partially installed"
    );
}

#[test]
fn verify_file_list_and_file_dict() {
    let Some(f) = fixture() else { return };
    f.state("pkg", "installed", BASE, json!({}), false);
    assert_eq!(f.call("lowpkg.verify", json!([BASE]), json!({})), json!({}));
    std::fs::write(DATA_FILE, "edited by the test\n").unwrap_or_else(|e| panic!("edit: {e}"));
    let v = f.call("lowpkg.verify", json!([BASE]), json!({}));
    assert_eq!(v[DATA_FILE], json!({"mismatch": ["md5sum"]}));
    assert_eq!(f.call("pkg.verify", json!([BASE]), json!({})), v);

    let list = f.call(
        "lowpkg.file_list",
        json!([BASE, "halite-test-absent"]),
        json!({}),
    );
    let files: Vec<&str> = list["files"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        files.contains(&DATA_FILE) && files.contains(&CONF_FILE),
        "{files:?}"
    );
    assert_eq!(
        list["errors"],
        json!(["dpkg-query: no packages found matching halite-test-absent"])
    );
    let dict = f.call("lowpkg.file_dict", json!([BASE]), json!({}));
    assert!(
        dict["packages"][BASE]
            .as_array()
            .is_some_and(|a| a.contains(&json!(DATA_FILE))),
        "{dict}"
    );
    assert_eq!(dict["errors"], json!([]));

    let lp = f.call("lowpkg.list_pkgs", json!([BASE]), json!({}));
    assert_eq!(lp, json!({BASE: "2.0"}));
    let deb = f.root.join(format!("repo-edge/{BASE}_2.0_all.deb"));
    let info = f.call(
        "lowpkg.bin_pkg_info",
        json!([deb.display().to_string()]),
        json!({}),
    );
    assert_eq!(info, json!({"name": BASE, "version": "2.0", "arch": "all"}));
}

#[test]
fn apt_errors_come_back_as_failed_states() {
    let Some(f) = fixture() else { return };
    let r = f.state("pkg", "installed", "halite-test-unknown", json!({}), false);
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment
            .contains("Unable to locate package halite-test-unknown"),
        "{}",
        r.comment
    );

    let r = f.state("pkg", "installed", BROKEN, json!({}), false);
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment.contains("halite-test-nowhere"),
        "apt's unmet-dependency message: {}",
        r.comment
    );
    assert_eq!(f.installed(BROKEN), None);
}

#[test]
fn hold_and_reinstall() {
    let Some(f) = fixture() else { return };
    let r = f.state(
        "pkg",
        "installed",
        BASE,
        json!({"version": "1.0", "hold": true}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert!(
        r.comment
            .contains(&format!("Package {BASE} is now being held.")),
        "{}",
        r.comment
    );
    // Salt's shape: the hold is appended to the install's change.
    assert_eq!(
        r.changes[BASE],
        json!({"old": "install", "new": "1.0\nhold"})
    );
    let held = sh(Command::new("apt-mark").arg("showhold"));
    assert!(held.lines().any(|l| l == BASE), "{held}");
    let r = f.state(
        "pkg",
        "installed",
        BASE,
        json!({"version": "1.0", "hold": false}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("All specified packages are already installed and are at the desired version.\nPackage {BASE} is no longer being held.")
    );
    assert_eq!(r.changes[BASE], json!({"old": "hold", "new": "install"}));
    let r = f.call("pkg.hold", json!([BASE]), json!({}));
    assert_eq!(
        r[BASE]["comment"],
        json!(format!("Package {BASE} is now being held."))
    );
    let r = f.call("pkg.unhold", json!([BASE]), json!({}));
    assert_eq!(
        r[BASE]["comment"],
        json!(format!("Package {BASE} is no longer being held."))
    );

    std::fs::write(DATA_FILE, "broken\n").unwrap_or_else(|e| panic!("edit: {e}"));
    let r = f.state(
        "pkg",
        "installed",
        BASE,
        json!({"version": "1.0", "reinstall": true}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("Package {BASE}=1.0 was reinstalled."));
    assert_eq!(r.changes[BASE], json!({"old": "1.0", "new": "1.0"}));
    let data = std::fs::read_to_string(DATA_FILE).unwrap_or_default();
    assert_eq!(data, "data of 1.0\n", "reinstall restored the file");
}

#[test]
fn mod_watch_reruns_the_watching_function() {
    let Some(f) = fixture() else { return };
    let r = f.state_watch(
        "pkg",
        "mod_watch",
        BASE,
        json!({}),
        false,
        Some("installed"),
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes[BASE], json!({"new": "2.0", "old": ""}));
    let r = f.state_watch("pkg", "mod_watch", BASE, json!({}), false, Some("uptodate"));
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "pkg.uptodate does not work with the watch requisite"
    );
}

#[test]
fn pkgrepo_managed_refreshes_and_makes_packages_available() {
    let Some(f) = fixture() else { return };
    let basedir = f.root.join("etc/apt");
    // Start with only the stable repository configured.
    std::fs::write(
        basedir.join("sources.list.d/halite-test.list"),
        format!(
            "deb [trusted=yes] file:{} ./\n",
            f.root.join("repo-stable").display()
        ),
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    f.call("pkg.refresh_db", json!([]), json!({}));
    assert_eq!(
        f.call(
            "pkg.latest_version",
            json!([BASE]),
            json!({"refresh": false})
        ),
        json!("1.0")
    );

    let line = format!(
        "deb [trusted=yes] file:{} ./",
        f.root.join("repo-edge").display()
    );
    let file = basedir
        .join("sources.list.d/edge.list")
        .display()
        .to_string();
    let args = json!({"file": file, "basedir": basedir.display().to_string()});
    let r = f.state("pkgrepo", "managed", &line, args.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.changes,
        json!({"repo": line})
            .as_object()
            .cloned()
            .unwrap_or_default()
    );
    assert!(!Path::new(&file).exists(), "test=True writes nothing");

    let r = f.state("pkgrepo", "managed", &line, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("Configured package repo '{line}'"));
    assert_eq!(
        f.call(
            "pkg.latest_version",
            json!([BASE]),
            json!({"refresh": false})
        ),
        json!("2.0"),
        "refreshed"
    );
    let r = f.state("pkgrepo", "managed", &line, args.clone(), false);
    assert_eq!(
        r.comment,
        format!("Package repo '{line}' already configured")
    );

    let r = f.state("pkgrepo", "absent", &line, args, false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("Removed repo {line}"));
    assert!(
        !Path::new(&file).exists(),
        "the emptied sources.list.d file is deleted"
    );
}

/// Runs `state.sls pkgtest` with `sls` as the SLS text.
fn apply_sls(f: &Fixture, sls: &str, test: bool) -> Map {
    write(&f.root.join("srv/pkgtest.sls"), sls);
    let ret = f.call("state.sls", json!(["pkgtest"]), json!({"test": test}));
    match ret {
        Value::Object(m) => m,
        other => panic!("state.sls returned {other}"),
    }
}

fn by_id<'a>(ret: &'a Map, id: &str) -> &'a Value {
    ret.iter()
        .find(|(tag, _)| tag.split("_|-").nth(1) == Some(id))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no state {id} in {ret:?}"))
}

#[test]
fn prereq_and_watch_through_the_state_engine() {
    let Some(f) = fixture() else { return };
    let prereq_marker = f.root.join("prereq-ran");
    let watch_marker = f.root.join("watch-ran");
    let sls = format!(
        "before-install:\n  cmd.run:\n    - name: touch {p}\n    - prereq:\n      - pkg: {BASE}\n\
         {BASE}:\n  pkg.installed:\n    - refresh: False\n\
         after-install:\n  cmd.wait:\n    - name: touch {w}\n    - watch:\n      - pkg: {BASE}\n",
        p = prereq_marker.display(),
        w = watch_marker.display()
    );

    // test=True: the package would change, so the prereq would run; nothing happens.
    let ret = apply_sls(&f, &sls, true);
    assert_eq!(by_id(&ret, BASE)["result"], Value::Null, "{ret:?}");
    assert_eq!(
        by_id(&ret, "before-install")["result"],
        Value::Null,
        "{ret:?}"
    );
    assert!(!prereq_marker.exists() && !watch_marker.exists());
    assert_eq!(f.installed(BASE), None);

    let ret = apply_sls(&f, &sls, false);
    assert_eq!(by_id(&ret, BASE)["result"], json!(true), "{ret:?}");
    assert_eq!(
        by_id(&ret, BASE)["changes"][BASE],
        json!({"new": "2.0", "old": ""})
    );
    assert!(
        prereq_marker.exists(),
        "prereq ran because pkg.installed predicted changes"
    );
    assert!(
        watch_marker.exists(),
        "watch fired because pkg.installed changed"
    );
    let before = by_id(&ret, "before-install")["__run_num__"].as_u64();
    let pkg = by_id(&ret, BASE)["__run_num__"].as_u64();
    assert!(before < pkg, "the prereq runs before the package state");

    std::fs::remove_file(&prereq_marker).unwrap_or_else(|e| panic!("rm: {e}"));
    std::fs::remove_file(&watch_marker).unwrap_or_else(|e| panic!("rm: {e}"));
    let ret = apply_sls(&f, &sls, false);
    assert_eq!(
        by_id(&ret, BASE)["comment"],
        json!("All specified packages are already installed")
    );
    assert!(!prereq_marker.exists(), "no predicted change, no prereq");
    assert!(!watch_marker.exists(), "no change, no watch");
}

#[test]
fn pkgs_states_match_requisites_by_id_or_name_only() {
    let Some(f) = fixture() else { return };
    let bundle = format!(
        "bundle:\n  pkg.installed:\n    - refresh: False\n    - pkgs:\n      - {BASE}\n      - {DEP}\n"
    );
    // A package inside `pkgs` is not a requisite target: Salt refuses the run.
    let by_member = format!(
        "{bundle}by-member:\n  cmd.run:\n    - name: 'true'\n    - require:\n      - pkg: {DEP}\n"
    );
    write(&f.root.join("srv/pkgtest.sls"), &by_member);
    let ret = f.call("state.sls", json!(["pkgtest"]), json!({}));
    let errors = ret
        .as_array()
        .unwrap_or_else(|| panic!("expected an error list, got {ret}"));
    assert!(
        errors.iter().any(|e| e
            .as_str()
            .is_some_and(|e| e.contains(&format!("(pkg: {DEP})")))),
        "{ret}"
    );
    assert_eq!(f.installed(DEP), None, "nothing ran");

    let by_id_sls = format!(
        "{bundle}by-id:\n  cmd.run:\n    - name: 'true'\n    - require:\n      - pkg: bundle\n"
    );
    let ret = apply_sls(&f, &by_id_sls, false);
    assert_eq!(by_id(&ret, "bundle")["result"], json!(true), "{ret:?}");
    assert_eq!(by_id(&ret, "by-id")["result"], json!(true), "{ret:?}");
}

/// Kills (and reaps) a helper process this test started, even on panic.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_held_dpkg_lock_fails_the_state_instead_of_hanging() {
    let Some(mut f) = fixture() else { return };
    if !have("python3") {
        eprintln!("skipped: python3 holds the dpkg lock in this test");
        return;
    }
    use std::io::BufRead;
    let script = "import fcntl, time\nf = open('/var/lib/dpkg/lock-frontend', 'w')\n\
                  fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\nprint('locked', flush=True)\ntime.sleep(300)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let stdout = child.stdout.take();
    let mut holder = KillOnDrop(child);
    let mut line = String::new();
    if let Some(out) = stdout {
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("read: {e}"));
    }
    assert_eq!(
        line.trim(),
        "locked",
        "the helper holds dpkg's frontend lock"
    );

    f.host.opts = json!({"pkg_lock_timeout": 1});
    let r = f.state("pkg", "installed", BASE, json!({}), false);
    let _ = holder.0.kill();
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment.contains("/var/lib/dpkg/lock-frontend"),
        "apt's words: {}",
        r.comment
    );
    assert_eq!(f.installed(BASE), None);
}

#[test]
fn held_and_unheld_states_drive_apt_mark() {
    let Some(f) = fixture() else { return };
    let r = f.state("pkg", "installed", BASE, json!({}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    let showhold = || sh(Command::new("apt-mark").arg("showhold"));

    let t = f.state("pkg", "held", BASE, json!({}), true);
    assert_eq!(
        t.comment,
        format!("The following package would be held: {BASE}")
    );
    assert!(
        !showhold().lines().any(|l| l == BASE),
        "test mode holds nothing"
    );

    let r = f.state("pkg", "held", BASE, json!({}), false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("Package {BASE} is now being held"))
    );
    assert_eq!(
        r.changes[BASE]["changes"],
        json!({"old": "install", "new": "hold"})
    );
    assert!(showhold().lines().any(|l| l == BASE));

    let again = f.state("pkg", "held", BASE, json!({}), false);
    assert_eq!(
        (again.result, again.comment.as_str()),
        (Some(true), "No changes made")
    );
    assert!(again.changes.is_empty());

    let t = f.state("pkg", "unheld", BASE, json!({}), true);
    assert_eq!(
        t.comment,
        format!("The following package would be unheld: {BASE}")
    );
    assert!(
        showhold().lines().any(|l| l == BASE),
        "test mode releases nothing"
    );

    let r = f.state("pkg", "unheld", "ignored", json!({"pkgs": [BASE]}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("Package {BASE} is no longer being held.")
    );
    assert!(!showhold().lines().any(|l| l == BASE));

    // replace: holding DEP releases the other held package.
    f.call("pkg.hold", json!([BASE]), json!({}));
    let r = f.state("pkg", "installed", DEP, json!({}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    let r = f.state("pkg", "held", DEP, json!({"replace": true}), false);
    assert_eq!(
        r.comment,
        format!("Package {DEP} is now being held\nPackage {BASE} is no longer being held.")
    );
    let held = showhold();
    assert!(
        held.lines().any(|l| l == DEP) && !held.lines().any(|l| l == BASE),
        "{held}"
    );
}
