//! The `pip` and `virtualenv` states and execution functions against the
//! real pip, with no network: each test builds its own wheels and sdists
//! (a dependency-free PEP 517 backend, tests/fixtures/pip_backend.py) into
//! a local `find_links` directory or a `file://` simple index, creates its
//! own virtualenv with `python3 -m venv`, and applies every state twice.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

/// Whether python3 with venv and pip is here; prints why not.
fn have_python() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("skipped: python3 with venv and ensurepip is needed (scripts/install-deps.sh installs python3-venv)");
    }
    ok
}

/// Builds `name` `version` into `out`: a wheel with `pip wheel --no-index`,
/// or an sdist with the backend itself.
fn build(work: &Path, name: &str, version: &str, out: &Path, sdist: bool) {
    let src = work.join(format!("src-{name}-{version}"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(out).unwrap();
    let backend = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pip_backend.py");
    std::fs::copy(backend, src.join("pip_backend.py")).unwrap();
    std::fs::write(
        src.join("pyproject.toml"),
        format!(
            "[build-system]\nrequires = []\nbuild-backend = \"pip_backend\"\nbackend-path = [\".\"]\n\n[project]\nname = \"{name}\"\nversion = \"{version}\"\n"
        ),
    )
    .unwrap();
    let status = if sdist {
        Command::new("python3")
            .current_dir(&src)
            .args([
                "-c",
                "import pip_backend, sys; pip_backend.build_sdist(sys.argv[1])",
            ])
            .arg(out)
            .status()
    } else {
        Command::new("python3")
            .args(["-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "-w"])
            .arg(out)
            .arg(&src)
            .env("PIP_FIND_LINKS", "")
            .status()
    }
    .unwrap();
    assert!(status.success(), "building {name} {version} failed");
}

fn host(root: Option<&Path>) -> Host {
    let mut roots = BTreeMap::new();
    if let Some(r) = root {
        roots.insert("base".to_string(), vec![r.to_path_buf()]);
    }
    Host {
        opts: json!({}),
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

/// Runs `module.fun` on `name` with `args` (test mode when `test`).
fn state(host: &Host, module: &str, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!(module));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    chunk.insert("__env__".into(), json!("base"));
    if let Value::Object(extra) = args {
        chunk.extend(extra);
    }
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    match host.states.get(module).expect("module").call(fun, &call) {
        Ok(r) => r,
        Err(e) => StateResult::fail(name, e.to_string()),
    }
}

fn exec(host: &Host, fun: &str, kwargs: Value) -> Result<Value, String> {
    let Value::Object(kwargs) = kwargs else {
        panic!("kwargs")
    };
    host.call(
        fun,
        &Args {
            positional: vec![],
            kwargs,
        },
    )
    .map_err(|e| e.to_string())
}

fn changes(r: &StateResult) -> Value {
    Value::Object(r.changes.clone())
}

/// A pip launcher as `bin_env` (Salt takes a pip path there): the venv's
/// pip with this test's package sources and nothing from the machine's
/// own pip configuration, so even `pip list --outdated` and `pip index`
/// (which the states run without `find_links`) stay offline.
fn pip_launcher(dir: &Path, venv: &Path, sources: &str) -> String {
    let path = dir.join("pip");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexport PIP_FIND_LINKS= PIP_INDEX_URL= PIP_NO_INDEX=\n{sources}\nexec {}/bin/python -m pip \"$@\"\n",
            venv.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn virtualenv_managed_then_pip_installed_and_removed_twice_each() {
    if !have_python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wheels = tmp.path().join("wheels");
    build(tmp.path(), "halite-t-demo", "1.0", &wheels, false);
    build(tmp.path(), "halite-t-demo", "2.0", &wheels, false);
    let venv = tmp.path().join("venv");
    let venv_s = venv.to_string_lossy().into_owned();
    let links = wheels.to_string_lossy().into_owned();
    let h = host(None);
    let venv_args =
        json!({"pip_pkgs": ["halite-t-demo==1.0"], "no_index": true, "find_links": links});

    // virtualenv.managed: predicted, created with its packages, then left alone.
    let r = state(
        &h,
        "virtualenv",
        "managed",
        &venv_s,
        venv_args.clone(),
        true,
    );
    assert_eq!(r.result, None, "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("Virtualenv {venv_s} is set to be created")
    );
    assert!(!venv.exists());
    let r = state(
        &h,
        "virtualenv",
        "managed",
        &venv_s,
        venv_args.clone(),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, "Created new virtualenv");
    assert_eq!(
        changes(&r),
        json!({"new": "", "packages": {"new": ["halite-t-demo==1.0"], "old": ""}})
    );
    let r = state(
        &h,
        "virtualenv",
        "managed",
        &venv_s,
        venv_args.clone(),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "virtualenv exists")
    );
    assert!(r.changes.is_empty(), "{:?}", r.changes);
    let r = state(&h, "virtualenv", "managed", &venv_s, venv_args, true);
    assert_eq!(r.result, Some(true));
    assert_eq!(r.comment, format!("Virtualenv {venv_s} is already created"));

    // pip.installed with a version specifier: predicted, installed, then already there.
    let args = json!({"bin_env": venv_s, "no_index": true, "find_links": links});
    let name = "halite-t-demo >=2.0";
    let r = state(&h, "pip", "installed", name, args.clone(), true);
    assert_eq!(r.result, None, "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("Python package {name} is set to be installed")
    );
    let r = state(&h, "pip", "installed", name, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, "All packages were successfully installed");
    assert_eq!(changes(&r), json!({"halite-t-demo==2.0": "Installed"}));
    let r = state(&h, "pip", "installed", name, args.clone(), false);
    assert_eq!(r.result, Some(true));
    assert_eq!(
        r.comment,
        format!("Python package {name} was already installed\nAll specified packages are already installed")
    );
    assert!(r.changes.is_empty());
    let r = state(&h, "pip", "installed", name, args.clone(), true);
    assert_eq!(r.result, Some(true), "test=True with nothing to do");

    // A package no source has: Salt's failure, nothing changed.
    let r = state(&h, "pip", "installed", "halite-t-nope", args.clone(), false);
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment
            .starts_with("Failed to install packages: halite-t-nope. Error: ")
            && r.comment
                .contains("No matching distribution found for halite-t-nope"),
        "{}",
        r.comment
    );
    // An '=' where '==' is meant.
    let r = state(
        &h,
        "pip",
        "installed",
        "halite-t-demo=1.0",
        args.clone(),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Invalid version specification in package halite-t-demo=1.0. '=' is not supported, use '==' instead."
    );

    // pip.removed: predicted, removed, then already gone.
    let rm = json!({"bin_env": venv_s});
    let r = state(&h, "pip", "removed", "halite-t-demo", rm.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(r.comment, "Package halite-t-demo is set to be removed");
    let r = state(&h, "pip", "removed", "halite-t-demo", rm.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(changes(&r), json!({"halite-t-demo": "Removed"}));
    assert_eq!(r.comment, "Package was successfully removed.");
    let r = state(&h, "pip", "removed", "halite-t-demo", rm, false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Package is not installed.")
    );
    let listed = exec(&h, "pip.list", json!({"bin_env": venv_s})).unwrap();
    assert!(listed.get("halite-t-demo").is_none(), "{listed}");

    // A bin_env that is not there is Salt's error.
    let r = state(
        &h,
        "pip",
        "installed",
        "x",
        json!({"bin_env": "/nonexistent/halite-t"}),
        false,
    );
    assert_eq!(
        r.comment,
        "Error installing 'x': Access denied to /nonexistent/halite-t, could not find a pip binary"
    );
    let r = state(
        &h,
        "pip",
        "installed",
        "x",
        json!({"bin_env": venv_s, "user": "halite-t-nouser"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "User halite-t-nouser does not exist")
    );
}

#[test]
fn upgrade_uptodate_and_exec_functions_through_a_pip_path() {
    if !have_python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wheels = tmp.path().join("wheels");
    build(tmp.path(), "halite-t-up", "1.0", &wheels, false);
    let venv = tmp.path().join("venv");
    let h = host(None);
    let created = exec(&h, "virtualenv.create", json!({"path": venv})).unwrap();
    assert_eq!(created["retcode"], json!(0), "{created}");
    let pip = pip_launcher(
        tmp.path(),
        &venv,
        &format!("export PIP_FIND_LINKS={} PIP_NO_INDEX=1", wheels.display()),
    );
    let args = json!({"bin_env": pip});

    // pip.install / version / list / freeze / is_installed.
    let out = exec(
        &h,
        "pip.install",
        json!({"pkgs": "halite-t-up", "bin_env": pip}),
    )
    .unwrap();
    assert_eq!(out["retcode"], json!(0), "{out}");
    let version = exec(&h, "pip.version", args.clone()).unwrap();
    assert!(
        version.as_str().is_some_and(|v| v.contains('.')),
        "{version}"
    );
    let listed = exec(
        &h,
        "pip.list",
        json!({"prefix": "Halite_T", "bin_env": pip}),
    )
    .unwrap();
    assert_eq!(listed, json!({"halite-t-up": "1.0"}));
    let frozen = exec(&h, "pip.freeze", args.clone()).unwrap();
    assert!(
        frozen
            .as_array()
            .unwrap()
            .contains(&json!("halite-t-up==1.0")),
        "{frozen}"
    );
    assert_eq!(
        exec(
            &h,
            "pip.is_installed",
            json!({"pkgname": "halite-t-up", "bin_env": pip})
        )
        .unwrap(),
        json!(true)
    );
    assert_eq!(
        exec(&h, "pip.list_upgrades", args.clone()).unwrap(),
        json!({})
    );

    // Nothing newer: upgrade=True is up to date, uptodate has nothing to do.
    let up = json!({"bin_env": pip, "upgrade": true});
    let r = state(&h, "pip", "installed", "halite-t-up", up.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        "Python package halite-t-up was already installed\nAll specified packages are already installed and up-to-date"
    );
    let r = state(&h, "pip", "uptodate", "all", args.clone(), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "System is already up-to-date.")
    );

    // A 2.0 appears: upgrade=True installs it, once.
    build(tmp.path(), "halite-t-up", "2.0", &wheels, false);
    let r = state(&h, "pip", "installed", "halite-t-up", up.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    // pip says "Requirement already satisfied" for the old version before
    // upgrading it, and Salt's report skips such packages: no changes,
    // as Salt 3008 shows it.
    assert_eq!(r.comment, "All packages were successfully installed");
    let listed = exec(
        &h,
        "pip.list",
        json!({"prefix": "halite-t-up", "bin_env": pip}),
    )
    .unwrap();
    assert_eq!(listed, json!({"halite-t-up": "2.0"}));
    let r = state(&h, "pip", "installed", "halite-t-up", up, false);
    assert!(r.changes.is_empty(), "{:?}", r.changes);

    // pip.uptodate after going back to 1.0.
    let out = exec(
        &h,
        "pip.install",
        json!({"pkgs": "halite-t-up==1.0", "bin_env": pip}),
    )
    .unwrap();
    assert_eq!(out["retcode"], json!(0), "{out}");
    assert_eq!(
        exec(&h, "pip.list_upgrades", args.clone()).unwrap(),
        json!({"halite-t-up": "2.0 [wheel]"})
    );
    let r = state(&h, "pip", "uptodate", "all", args.clone(), true);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (None, "System update will be performed")
    );
    let r = state(&h, "pip", "uptodate", "all", args.clone(), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Upgrade successful.")
    );
    assert_eq!(
        r.changes["changes"],
        json!({"halite-t-up": {"old": "1.0", "new": "2.0"}})
    );
    let r = state(&h, "pip", "uptodate", "all", args.clone(), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "System is already up-to-date.")
    );

    // pip.uninstall.
    let out = exec(
        &h,
        "pip.uninstall",
        json!({"pkgs": "halite-t-up", "bin_env": pip}),
    )
    .unwrap();
    assert_eq!(out["retcode"], json!(0), "{out}");
    assert_eq!(
        exec(
            &h,
            "pip.is_installed",
            json!({"pkgname": "halite-t-up", "bin_env": pip})
        )
        .unwrap(),
        json!(false)
    );
}

#[test]
fn requirements_from_salt_url_install_an_sdist_from_a_file_index() {
    if !have_python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dists = tmp.path().join("dists");
    build(tmp.path(), "halite-t-sdist", "1.0", &dists, true);
    // A PEP 503 simple index on file://.
    let page = tmp.path().join("simple/halite-t-sdist");
    std::fs::create_dir_all(&page).unwrap();
    std::fs::write(
        page.join("index.html"),
        "<a href=\"../../dists/halite_t_sdist-1.0.tar.gz\">halite_t_sdist-1.0.tar.gz</a>\n",
    )
    .unwrap();
    let root = tmp.path().join("srv");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("reqs.txt"), "halite-t-sdist==1.0\n").unwrap();
    let venv = tmp.path().join("venv");
    let h = host(Some(&root));
    let r = state(
        &h,
        "virtualenv",
        "managed",
        &venv.to_string_lossy(),
        json!({}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    let index = format!("file://{}/simple/", tmp.path().display());
    let pip = pip_launcher(tmp.path(), &venv, "");
    let args = json!({"bin_env": pip, "requirements": "salt://reqs.txt", "index_url": index});

    let r = state(&h, "pip", "installed", "reqs", args.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        "Requirements file 'salt://reqs.txt' will be processed."
    );
    let r = state(&h, "pip", "installed", "reqs", args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(changes(&r), json!({"requirements": true}));
    assert_eq!(
        r.comment,
        "Successfully processed requirements file salt://reqs.txt."
    );
    let r = state(&h, "pip", "installed", "reqs", args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert!(r.changes.is_empty(), "{:?}", r.changes);
    assert_eq!(r.comment, "Requirements were already installed.");
    let listed = exec(
        &h,
        "pip.list",
        json!({"prefix": "halite-t-sdist", "bin_env": pip}),
    )
    .unwrap();
    assert_eq!(listed, json!({"halite-t-sdist": "1.0"}));

    // A salt:// file that is not there.
    let missing = json!({"bin_env": pip, "requirements": "salt://nope.txt"});
    let r = state(&h, "pip", "installed", "reqs", missing, false);
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Unable to process requirements file \"salt://nope.txt\" Error: pip requirements file 'salt://nope.txt' not found"
    );
}
