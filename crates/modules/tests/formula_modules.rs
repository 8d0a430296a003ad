//! Custom modules taken unchanged from public saltstack-formulas run
//! under halite with the same results as under Salt 3008.5: nginx-formula's
//! `opm` execution and state modules (against a stand-in `opm` binary on
//! PATH) and postgres-formula's `postgres_ext`/`postgres_tablespace`,
//! written for an older Salt, which both decline the same way.
//!
//! The modules are test fixtures with their formulas' LICENSE
//! (`tests/fixtures/formula-modules`, commits in its README). halite's
//! results are compared with Salt 3008.5's recorded in
//! `salt-3008.5.json` there; where Salt is installed (`scripts/install-salt.sh`, found by `halite-salt-oracle`)
//! the test also runs it and checks the recording still holds.
//!
//! One test in this file on purpose: it sets PATH for the process (the
//! stand-in `opm` must be found by halite's cmd.run_all in-process).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{Args, ExecError, Host};
use serde_json::{json, Map, Value};

fn formula_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formula-modules")
}

fn recording() -> PathBuf {
    formula_dir().join("salt-3008.5.json")
}

/// Salt 3008.5's answers, recorded from the same calls on the same tree
/// (`SALT_ORACLE_RECORD=1` with Salt installed writes them again).
fn recorded() -> Option<Value> {
    if std::env::var_os("SALT_ORACLE_RECORD").is_some() {
        return None;
    }
    let text = std::fs::read_to_string(recording()).unwrap();
    Some(serde_json::from_str(&text).unwrap())
}

fn salt_bin() -> Option<PathBuf> {
    halite_salt_oracle::Salt::for_test("formula_modules").map(|s| s.bin().to_path_buf())
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// A stand-in `opm` keeping its packages in `db`.
const OPM: &str = r#"#!/bin/sh
db="$(dirname "$0")/../opm.db"
case "$1" in
  list) cat "$db" ;;
  get) name=${2%%[=<>]*}; echo "$name 0.9" >> "$db"; echo "* Fetching $2" ;;
  remove) grep -v "^$2 " "$db" > "$db.new"; mv "$db.new" "$db"; echo "Package $2 removed" ;;
  *) echo "unknown $1" >&2; exit 1 ;;
esac
"#;

const SLS: &str = "present_one:
  opm.installed:
    - name: lua-resty-foo
new_one:
  opm.installed:
    - name: lua-resty-new
    - version: '>=0.1'
gone:
  opm.removed:
    - name: lua-resty-bar
";

struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new(formulas: &Path) -> World {
        let dir = tempfile::tempdir().unwrap();
        let salt = dir.path().join("salt");
        for f in ["nginx-formula", "postgres-formula"] {
            for kind in ["_modules", "_states"] {
                copy_tree(&formulas.join(f).join(kind), &salt.join(kind));
            }
        }
        std::fs::write(salt.join("opm_states.sls"), SLS).unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("opm"), OPM).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("opm"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let w = World { dir };
        w.reset();
        w
    }

    fn reset(&self) {
        std::fs::write(
            self.dir.path().join("opm.db"),
            "lua-resty-foo 0.1.0\nlua-resty-bar 1.2\n",
        )
        .unwrap();
    }

    fn host(&self) -> Host {
        let d = self.dir.path();
        let opts = json!({
            "id": "fm01",
            "file_client": "local",
            "local": true,
            "cachedir": d.join("halite-cache"),
            "file_roots": {"base": [d.join("salt")]},
            "pillar_roots": {"base": [d.join("pillar")]},
        });
        let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
        assert!(errors.is_empty(), "{errors:?}");
        host
    }

    fn halite(&self, fun: &str, args: &[Value], kwargs: Value) -> Result<Value, ExecError> {
        self.host().call(
            fun,
            &Args {
                positional: args.to_vec(),
                kwargs: kwargs.as_object().cloned().unwrap_or_default(),
            },
        )
    }

    /// `salt-call --local --out json ARGS`: (the return, stderr).
    fn salt(&self, bin: &Path, args: &[&str]) -> (Value, String) {
        let d = self.dir.path();
        let conf = d.join("salt-conf");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(
            conf.join("minion"),
            format!(
                "id: fm01\nfile_client: local\nroot_dir: {d}\ncachedir: {d}/salt-cache\npki_dir: {d}/salt-pki\nlog_file: {d}/salt.log\nfile_roots:\n  base: [{d}/salt]\n",
                d = d.display()
            ),
        )
        .unwrap();
        let out = Command::new(bin.join("salt-call"))
            .arg("-c")
            .arg(&conf)
            .args(["--local", "--out", "json"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (v["local"].clone(), stderr)
    }
}

/// A state run's returns by state id: name, result, comment, changes.
fn by_id(ret: &Value) -> Map<String, Value> {
    ret.as_object()
        .unwrap_or_else(|| panic!("not a state return: {ret}"))
        .values()
        .map(|r| {
            let keep: Map<String, Value> = ["name", "result", "comment", "changes"]
                .iter()
                .map(|k| (k.to_string(), r[*k].clone()))
                .collect();
            (
                r["__id__"].as_str().unwrap().to_string(),
                Value::Object(keep),
            )
        })
        .collect()
}

/// Salt's answers for the test's calls: run live when Salt is installed,
/// else the recording (which a live run must still match).
fn salts_answers(w: &World) -> Value {
    let rec = recorded();
    let Some(bin) = salt_bin() else {
        return rec.expect("no Salt to record from (scripts/install-salt.sh installs it)");
    };
    // Salt loads file_roots' _modules only once synced.
    let (synced, err) = w.salt(&bin, &["saltutil.sync_all"]);
    assert_eq!(
        synced["modules"],
        json!(["modules.opm", "modules.postgres_ext"]),
        "{err}"
    );
    let mut live = Map::new();
    let (list, err) = w.salt(&bin, &["opm.list"]);
    assert!(list.is_object(), "{err}");
    live.insert("opm.list".into(), list);
    for (key, t) in [("test", "test=True"), ("real", "test=False")] {
        w.reset();
        let (ret, err) = w.salt(&bin, &["state.apply", "opm_states", t]);
        let states = by_id(&ret);
        assert_eq!(states.len(), 3, "{err}");
        live.insert(format!("states_{key}"), Value::Object(states));
        let db = std::fs::read_to_string(w.dir.path().join("opm.db")).unwrap();
        live.insert(format!("db_{key}"), Value::from(db));
    }
    // Salt's reason for declining, as its stderr shows it.
    let (_, salt_err) = w.salt(&bin, &["postgres_ext.tablespace_list"]);
    let reason = match &rec {
        Some(rec) => rec["postgres_ext_declined"].as_str().unwrap().to_string(),
        None => {
            halite_modules::python::missing_text(&w.host().opts, "postgres_ext.tablespace_list")
        }
    };
    assert!(salt_err.contains(&reason), "{salt_err}");
    live.insert("postgres_ext_declined".into(), Value::from(reason));
    let (modules, _) = w.salt(&bin, &["sys.list_state_modules", "postgres_t*"]);
    live.insert("state_modules_postgres_t".into(), modules);
    let live = Value::Object(live);
    match rec {
        Some(rec) => {
            assert_eq!(live, rec, "Salt no longer answers as recorded");
            rec
        }
        None => {
            let text = serde_json::to_string_pretty(&live).unwrap();
            std::fs::write(recording(), text + "\n").unwrap();
            live
        }
    }
}

#[test]
fn formula_modules_run_unchanged_with_salts_results() {
    let w = World::new(&formula_dir());
    let path = format!(
        "{}:{}",
        w.dir.path().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("PATH", &path);
    let salts = salts_answers(&w);

    // opm.list: the stand-in's packages, parsed by the module.
    w.reset();
    assert_eq!(
        w.halite("opm.list", &[], json!({})).unwrap(),
        salts["opm.list"]
    );

    // The opm states, test=True then for real, from the same starting point.
    for (key, test) in [("test", true), ("real", false)] {
        w.reset();
        let ours = w
            .halite(
                "state.apply",
                &[json!("opm_states")],
                json!({ "test": test }),
            )
            .unwrap();
        assert_eq!(
            Value::Object(by_id(&ours)),
            salts[format!("states_{key}")],
            "test={test}"
        );
        let our_db = std::fs::read_to_string(w.dir.path().join("opm.db")).unwrap();
        assert_eq!(
            Value::from(our_db),
            salts[format!("db_{key}")],
            "test={test}"
        );
    }

    // postgres_ext calls salt.utils.which, gone from Salt 3008: both
    // decline it in __virtual__, with the same reason.
    let host = w.host();
    assert!(matches!(
        host.call("postgres_ext.tablespace_list", &Args::default()),
        Err(ExecError::NotAvailable(_))
    ));
    let ours = halite_modules::python::missing_text(&host.opts, "postgres_ext.tablespace_list");
    let reason = salts["postgres_ext_declined"].as_str().unwrap();
    assert!(ours.contains(reason), "halite: {ours}\nsalt: {reason}");
    // Its state module loads only beside it: absent in both.
    assert_eq!(salts["state_modules_postgres_t"], json!([]));
    // (halite's sys.list_state_modules ignores a pattern: ask the registry.)
    assert!(w.host().states.get("postgres_tablespace").is_none());
    assert!(w.host().states.get("opm").is_some());
}
