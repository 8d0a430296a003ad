//! Custom modules taken unchanged from public saltstack-formulas run
//! under halite with the same results as under Salt 3008.5: nginx-formula's
//! `opm` execution and state modules (against a stand-in `opm` binary on
//! PATH) and postgres-formula's `postgres_ext`/`postgres_tablespace`,
//! written for an older Salt, which both decline the same way.
//!
//! The modules are not kept in this repository: `scripts/fetch-formula-
//! modules.sh` fetches them at pinned commits with their LICENSE into
//! `target/formula-modules` (or `$HALITE_FORMULA_MODULES`). The test skips
//! with a reason when they or Salt (`~/.venvs/salt`) are absent.
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

fn formula_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("HALITE_FORMULA_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/formula-modules")
        });
    if dir.join("nginx-formula/_modules/opm.py").is_file()
        && dir
            .join("postgres-formula/_modules/postgres_ext.py")
            .is_file()
    {
        Some(dir)
    } else {
        eprintln!(
            "skipping: no formula modules in {} (run scripts/fetch-formula-modules.sh)",
            dir.display()
        );
        None
    }
}

fn salt_bin() -> Option<PathBuf> {
    let bin = PathBuf::from(std::env::var_os("HOME")?).join(".venvs/salt/bin");
    if bin.join("salt-call").is_file() {
        Some(bin)
    } else {
        eprintln!(
            "skipping: no Salt in ~/.venvs/salt (../shared/bench/install-salt.sh installs it)"
        );
        None
    }
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

#[test]
fn formula_modules_run_unchanged_with_salts_results() {
    let (Some(formulas), Some(bin)) = (formula_dir(), salt_bin()) else {
        return;
    };
    let w = World::new(&formulas);
    let path = format!(
        "{}:{}",
        w.dir.path().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("PATH", &path);

    // Salt loads file_roots' _modules only once synced; halite-call reads them.
    let (synced, err) = w.salt(&bin, &["saltutil.sync_all"]);
    assert_eq!(
        synced["modules"],
        json!(["modules.opm", "modules.postgres_ext"]),
        "{err}"
    );

    // opm.list: the stand-in's packages, parsed by the module.
    let (salts, err) = w.salt(&bin, &["opm.list"]);
    assert_eq!(
        salts,
        json!({"lua-resty-foo": "0.1.0", "lua-resty-bar": "1.2"}),
        "{err}"
    );
    assert_eq!(w.halite("opm.list", &[], json!({})).unwrap(), salts);

    // The opm states, test=True then for real, from the same starting point.
    for test in [true, false] {
        w.reset();
        let t = if test { "test=True" } else { "test=False" };
        let (salts, err) = w.salt(&bin, &["state.apply", "opm_states", t]);
        let salts = by_id(&salts);
        assert_eq!(salts.len(), 3, "{err}");
        let salt_db = std::fs::read_to_string(w.dir.path().join("opm.db")).unwrap();
        w.reset();
        let ours = w
            .halite(
                "state.apply",
                &[json!("opm_states")],
                json!({ "test": test }),
            )
            .unwrap();
        assert_eq!(by_id(&ours), salts, "test={test}");
        let our_db = std::fs::read_to_string(w.dir.path().join("opm.db")).unwrap();
        assert_eq!(our_db, salt_db, "test={test}");
    }

    // postgres_ext calls salt.utils.which, gone from Salt 3008: both
    // decline it in __virtual__, with the same reason.
    let (_, salt_err) = w.salt(&bin, &["postgres_ext.tablespace_list"]);
    let host = w.host();
    assert!(matches!(
        host.call("postgres_ext.tablespace_list", &Args::default()),
        Err(ExecError::NotAvailable(_))
    ));
    let ours = halite_modules::python::missing_text(&host.opts, "postgres_ext.tablespace_list");
    assert!(salt_err.contains(&ours), "halite: {ours}\nsalt: {salt_err}");
    // Its state module loads only beside it: absent in both.
    let (salts, _) = w.salt(&bin, &["sys.list_state_modules", "postgres_t*"]);
    assert_eq!(salts, json!([]));
    // (halite's sys.list_state_modules ignores a pattern: ask the registry.)
    assert!(w.host().states.get("postgres_tablespace").is_none());
    assert!(w.host().states.get("opm").is_some());
}
