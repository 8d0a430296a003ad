//! Custom Python modules (`_modules`, `_states`, `_grains`, `_renderers`,
//! `#!py`) run through halite as under Salt: real modules in a temp file
//! root (tests/python_fixtures, written in the style of public ones), a
//! real python3 worker, the same `local_host` halite-call uses.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{Args, ExecError, Host};
use serde_json::{json, Value};

/// A file root holding the fixtures' `_*` directories plus `files`, and a cachedir.
struct Tree {
    dir: tempfile::TempDir,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

impl Tree {
    fn new(files: &[(&str, &str)]) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python_fixtures");
        copy_dir(&fixtures, &dir.path().join("salt"));
        for (path, text) in files {
            std::fs::write(dir.path().join("salt").join(path), text).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        Tree { dir }
    }

    fn out(&self, name: &str) -> PathBuf {
        self.dir.path().join("out").join(name)
    }

    fn host(&self) -> Host {
        let opts = json!({
            "id": "py01",
            "file_client": "local",
            "local": true,
            "cachedir": self.dir.path().join("cache"),
            "file_roots": {"base": [self.dir.path().join("salt")]},
            "pillar_roots": {"base": [self.dir.path().join("pillar")]},
        });
        let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
        assert!(errors.is_empty(), "pillar errors: {errors:?}");
        host
    }

    fn call(&self, fun: &str, args: &[Value], kwargs: Value) -> Result<Value, ExecError> {
        let args = Args {
            positional: args.to_vec(),
            kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        };
        self.host().call(fun, &args)
    }
}

/// The state of `id` in a state run's return.
fn state<'a>(ret: &'a Value, id: &str) -> &'a Value {
    ret.as_object()
        .unwrap_or_else(|| panic!("a state return, not errors: {ret}"))
        .values()
        .find(|r| r["__id__"] == id)
        .unwrap_or_else(|| panic!("no state {id} in {ret}"))
}

#[test]
fn a_custom_execution_module_reaches_cmd_run_and_grains() {
    let t = Tree::new(&[]);
    let kernel = t.host().grains["kernel"].as_str().unwrap().to_string();
    assert_eq!(
        t.call("hello.greet", &[json!("you")], json!({})).unwrap(),
        json!(format!("hello you from {kernel}"))
    );
    assert_eq!(
        t.call("hello.shell", &[json!("echo hi; echo there")], json!({}))
            .unwrap(),
        json!("hi\nthere")
    );
    // __func_alias__, dict order, None/True round-trip.
    assert_eq!(
        serde_json::to_string(&t.call("hello.list", &[], json!({})).unwrap()).unwrap(),
        r#"{"b":1,"a":[1,null,true]}"#
    );
    assert!(matches!(
        t.call("hello._secret", &[], json!({})),
        Err(ExecError::NotAvailable(_))
    ));
    assert_eq!(
        t.call("sys.list_functions", &[json!("hello")], json!({}))
            .unwrap(),
        json!(["hello.greet", "hello.list", "hello.shell"])
    );
}

#[test]
fn a_declined_module_is_absent_with_its_reason() {
    let t = Tree::new(&[]);
    let host = t.host();
    assert!(matches!(
        host.call("nah.f", &Args::default()),
        Err(ExecError::NotAvailable(f)) if f == "nah.f"
    ));
    assert_eq!(
        halite_modules::python::missing_text(&host.opts, "nah.f"),
        "'nah' __virtual__ returned False: the nope binary is missing"
    );
    assert_eq!(
        t.call("sys.list_functions", &[json!("nah")], json!({}))
            .unwrap(),
        json!([])
    );
}

#[test]
fn a_custom_module_overrides_a_native_one_and_exceptions_fail_the_call() {
    let t = Tree::new(&[]);
    assert_eq!(
        t.call("test.ping", &[], json!({})).unwrap(),
        json!("custom ping")
    );
    match t.call("test.boom", &[], json!({})) {
        Err(ExecError::Execution(m)) => assert_eq!(m, "it broke, see the log"),
        other => panic!("{other:?}"),
    }
    match t.call("test.crash", &[], json!({})) {
        Err(ExecError::Execution(m)) => {
            assert!(m.starts_with("Traceback (most recent call last):"), "{m}");
            assert!(
                m.contains("in crash") && m.ends_with("KeyError: 'nope'"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Native functions of other modules are untouched.
    assert_eq!(
        t.call("cmd.run", &[json!("echo native")], json!({}))
            .unwrap(),
        json!("native")
    );
}

#[test]
fn custom_grains_merge_into_grains() {
    let t = Tree::new(&[]);
    assert_eq!(
        t.call("grains.get", &[json!("h21py_roles")], json!({}))
            .unwrap(),
        json!(["web", "db"])
    );
}

#[test]
fn a_custom_state_runs_with_test_requisites_mod_watch_module_run_and_unless() {
    let t = Tree::new(&[]);
    let a = t.out("a");
    let b = t.out("b");
    let c = t.out("c");
    let sls = format!(
        r#"{a}:
  marker.present:
    - contents: hi {{{{ salt['hello.greet']('jinja') }}}}
{b}:
  marker.present:
    - watch:
      - marker: {a}
{c}:
  marker.present:
    - unless:
      - fun: hello.list
greet:
  module.run:
    - hello.greet:
      - who: run
"#,
        a = a.display(),
        b = b.display(),
        c = c.display()
    );
    std::fs::write(t.dir.path().join("salt/m.sls"), sls).unwrap();
    let kernel = t.host().grains["kernel"].as_str().unwrap().to_string();
    let a_id = a.display().to_string();
    let b_id = b.display().to_string();

    let ret = t
        .call("state.apply", &[json!("m")], json!({"test": true}))
        .unwrap();
    let sa = state(&ret, &a_id);
    assert_eq!(sa["result"], Value::Null, "{sa}");
    assert_eq!(sa["comment"], json!(format!("{a_id} would be written")));
    assert_eq!(
        sa["changes"],
        json!({"new": format!("hi hello jinja from {kernel}")})
    );
    assert!(!a.exists());

    let ret = t.call("state.apply", &[json!("m")], json!({})).unwrap();
    assert_eq!(
        state(&ret, &a_id)["comment"],
        json!(format!("{a_id} written"))
    );
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        format!("hi hello jinja from {kernel}")
    );
    assert_eq!(state(&ret, &b_id)["changes"], json!({"new": "x"}));
    let sc = state(&ret, &c.display().to_string());
    assert_eq!(sc["result"], json!(true));
    assert!(
        !c.exists(),
        "unless: fun: hello.list is true, so c is skipped: {sc}"
    );
    let greet = state(&ret, "greet");
    assert_eq!(
        greet["changes"]["hello.greet"],
        json!(format!("hello run from {kernel}")),
        "{greet}"
    );

    // a changes again, b does not: b's mod_watch runs with sfun=present.
    std::fs::remove_file(&a).unwrap();
    let ret = t.call("state.apply", &[json!("m")], json!({})).unwrap();
    let sb = state(&ret, &b_id);
    assert_eq!(sb["comment"], json!("Watch fired"), "{sb}");
    assert_eq!(sb["changes"], json!({"watched": "present"}));
    assert_eq!(
        std::fs::read_to_string(format!("{b_id}.watched")).unwrap(),
        "present"
    );
}

#[test]
fn a_state_that_raises_fails_with_the_traceback() {
    let t = Tree::new(&[]);
    let bad = t.dir.path().join("missing-dir/x");
    std::fs::write(
        t.dir.path().join("salt/bad.sls"),
        format!("{}:\n  marker.present: []\n", bad.display()),
    )
    .unwrap();
    let ret = t.call("state.apply", &[json!("bad")], json!({})).unwrap();
    let s = state(&ret, &bad.display().to_string());
    assert_eq!(s["result"], json!(false));
    let comment = s["comment"].as_str().unwrap();
    assert!(
        comment.starts_with("An exception occurred in this state: Traceback"),
        "{comment}"
    );
    assert!(comment.contains("FileNotFoundError"), "{comment}");
}

#[test]
fn py_sls_and_a_custom_renderer_render_states() {
    let t = Tree::new(&[]);
    let py_out = t.out("py");
    let shout_out = t.out("shout");
    std::fs::write(
        t.dir.path().join("salt/pysls.sls"),
        format!(
            "#!py\ndef run():\n    who = __salt__['hello.greet']('py')\n    return {{'{}': {{'marker.present': [{{'contents': who + ' ' + __grains__['h21py_roles'][0] + ' ' + sls}}]}}}}\n",
            py_out.display()
        ),
    )
    .unwrap();
    std::fs::write(
        t.dir.path().join("salt/loud.sls"),
        format!("#!shout\n{} = quiet words\n", shout_out.display()),
    )
    .unwrap();
    let kernel = t.host().grains["kernel"].as_str().unwrap().to_string();
    let ret = t.call("state.apply", &[json!("pysls")], json!({})).unwrap();
    assert_eq!(
        state(&ret, &py_out.display().to_string())["result"],
        json!(true),
        "{ret}"
    );
    assert_eq!(
        std::fs::read_to_string(&py_out).unwrap(),
        format!("hello py from {kernel} web pysls")
    );
    let ret = t.call("state.apply", &[json!("loud")], json!({})).unwrap();
    assert_eq!(
        state(&ret, &shout_out.display().to_string())["result"],
        json!(true),
        "{ret}"
    );
    assert_eq!(std::fs::read_to_string(&shout_out).unwrap(), "QUIET WORDS");
}

#[test]
fn sync_all_copies_the_file_roots_into_extmods_with_salts_shape() {
    let t = Tree::new(&[]);
    let ret = t.call("saltutil.sync_all", &[], json!({})).unwrap();
    assert_eq!(
        ret["modules"],
        json!(["modules.hello", "modules.nope", "modules.test"])
    );
    assert_eq!(ret["states"], json!(["states.marker"]));
    assert_eq!(ret["grains"], json!(["grains.roles"]));
    assert_eq!(ret["renderers"], json!(["renderers.shout"]));
    assert_eq!(ret["utils"], json!([]));
    assert_eq!(
        ret.as_object().unwrap().len(),
        21,
        "Salt 3008's keys: {ret}"
    );
    let synced = t.dir.path().join("cache/extmods/modules/hello.py");
    assert_eq!(
        std::fs::read(&synced).unwrap(),
        std::fs::read(t.dir.path().join("salt/_modules/hello.py")).unwrap()
    );
    // Nothing changed: nothing synced; a removed module is cleaned out.
    assert_eq!(
        t.call("saltutil.sync_modules", &[], json!({})).unwrap(),
        json!([])
    );
    std::fs::remove_file(t.dir.path().join("salt/_modules/nope.py")).unwrap();
    assert_eq!(
        t.call("saltutil.sync_modules", &[], json!({})).unwrap(),
        json!([])
    );
    assert!(!t.dir.path().join("cache/extmods/modules/nope.py").exists());
    assert!(synced.exists());
}

/// A file client that holds each listing until `expected` of them wait
/// at once (or a few seconds pass), and counts the most that waited
/// together: a sync that asks one listing after the other never gets
/// past one.
struct Gathering {
    inner: Arc<dyn halite_state::FileClient>,
    expected: usize,
    waiting: std::sync::Mutex<(usize, usize)>,
    arrived: std::sync::Condvar,
}

impl halite_state::FileClient for Gathering {
    fn cache_file(
        &self,
        path: &str,
        saltenv: &str,
    ) -> Result<Option<PathBuf>, halite_state::FileClientError> {
        self.inner.cache_file(path, saltenv)
    }
    fn list_files(
        &self,
        saltenv: &str,
        prefix: &str,
    ) -> Result<Vec<String>, halite_state::FileClientError> {
        let mut w = self.waiting.lock().unwrap();
        w.0 += 1;
        w.1 = w.1.max(w.0);
        self.arrived.notify_all();
        let (mut w, _) = self
            .arrived
            .wait_timeout_while(w, std::time::Duration::from_secs(3), |w| {
                w.1 < self.expected
            })
            .unwrap();
        w.0 -= 1;
        drop(w);
        self.inner.list_files(saltenv, prefix)
    }
    fn list_dirs(
        &self,
        saltenv: &str,
        prefix: &str,
    ) -> Result<Vec<String>, halite_state::FileClientError> {
        self.inner.list_dirs(saltenv, prefix)
    }
    fn envs(&self) -> Vec<String> {
        self.inner.envs()
    }
}

/// On a minion each listing is a round trip to the master: `sync_all`
/// (before every highstate) asks for its six kinds' listings at once, and
/// syncs exactly what it synced when it asked one after the other.
#[test]
fn sync_all_asks_for_every_kinds_listing_at_once_and_syncs_the_same() {
    let t = Tree::new(&[]);
    let mut host = t.host();
    let gathering = Arc::new(Gathering {
        inner: host.files.clone(),
        expected: 6,
        waiting: Default::default(),
        arrived: Default::default(),
    });
    host.files = gathering.clone();
    let ret = host.call("saltutil.sync_all", &Args::default()).unwrap();
    assert_eq!(
        gathering.waiting.lock().unwrap().1,
        6,
        "the six kinds' listings were not asked for at once"
    );
    assert_eq!(
        ret["modules"],
        json!(["modules.hello", "modules.nope", "modules.test"])
    );
    assert_eq!(ret["states"], json!(["states.marker"]));
    assert_eq!(ret["grains"], json!(["grains.roles"]));
    assert_eq!(ret["renderers"], json!(["renderers.shout"]));
    assert_eq!(ret.as_object().unwrap().len(), 21, "{ret}");
    assert_eq!(
        std::fs::read(t.dir.path().join("cache/extmods/modules/hello.py")).unwrap(),
        std::fs::read(t.dir.path().join("salt/_modules/hello.py")).unwrap()
    );
    // A kind gone from the file roots: its modules are cleaned out, the
    // others' stay.
    std::fs::remove_dir_all(t.dir.path().join("salt/_states")).unwrap();
    let again = host.call("saltutil.sync_all", &Args::default()).unwrap();
    assert_eq!(again["states"], json!([]), "{again}");
    assert!(!t.dir.path().join("cache/extmods/states/marker.py").exists());
    assert!(t.dir.path().join("cache/extmods/modules/hello.py").exists());
}

#[test]
fn a_highstate_syncs_custom_modules_first_and_sync_mods_syncs_named_kinds() {
    let t = Tree::new(&[
        ("top.sls", "base:\n  '*':\n    - hs\n"),
        ("hs.sls", "hs:\n  test.succeed_without_changes\n"),
    ]);
    let ext = t.dir.path().join("cache/extmods");
    let ok = |ret: Value| assert_eq!(state(&ret, "hs")["result"], json!(true), "{ret}");
    // Named SLS: no sync unless asked (Salt 3008's state.sls).
    ok(t.call("state.sls", &[json!("hs")], json!({})).unwrap());
    assert!(!ext.exists());
    ok(
        t.call("state.sls", &[json!("hs")], json!({"sync_mods": "modules"}))
            .unwrap(),
    );
    assert!(ext.join("modules/hello.py").is_file());
    assert!(!ext.join("states").exists());
    // A highstate syncs every kind (autoload_dynamic_modules).
    ok(t.call("state.apply", &[], json!({})).unwrap());
    assert!(ext.join("states/marker.py").is_file());
    assert!(ext.join("grains/roles.py").is_file());
}

/// The `_states` module of the conformance case `python_states_dunders`
/// (recorded from Salt 3008.5): `__states__['file.managed']`,
/// `__running__`, `__low__`.
const WRAPPER: &str =
    include_str!("../../../tests/conformance/cases/python_states_dunders/_states/wrapper.py");

#[test]
fn states_dunder_reaches_rust_states_and_running_holds_the_run_so_far() {
    let t = Tree::new(&[("_states/wrapper.py", WRAPPER)]);
    let conf = t.out("sub/b.conf");
    std::fs::write(
        t.dir.path().join("salt/w.sls"),
        format!(
            "first:\n  test.succeed_without_changes\nwrapped-file:\n  wrapper.managed:\n    - name: {}\n    - contents: hello\nreport:\n  wrapper.report:\n    - require:\n      - wrapper: wrapped-file\n",
            conf.display()
        ),
    )
    .unwrap();
    let file_tag = format!("wrapper_|-wrapped-file_|-{}_|-managed", conf.display());

    // test=True reaches file.managed in test mode: nothing written.
    let ret = t
        .call("state.apply", &[json!("w")], json!({"test": true}))
        .unwrap();
    let w = state(&ret, "wrapped-file");
    assert_eq!(w["result"], Value::Null, "{w}");
    assert_eq!(
        w["comment"],
        json!(format!(
            "wrapped: The file {} is set to be changed\nNote: No changes made, actual changes may\nbe different due to other states.",
            conf.display()
        ))
    );
    assert!(!conf.exists());
    let report = state(&ret, "report")["comment"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(report.ends_with("test: True"), "{report}");
    assert!(
        report.contains(&format!("{file_tag} result=None run_num=1 id=wrapped-file")),
        "{report}"
    );

    let ret = t.call("state.apply", &[json!("w")], json!({})).unwrap();
    let w = state(&ret, "wrapped-file");
    assert_eq!(
        (&w["result"], &w["changes"], &w["comment"]),
        (
            &json!(true),
            &json!({"diff": "New file"}),
            &json!(format!("wrapped: File {} updated", conf.display()))
        )
    );
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "hello\n");
    // Salt's text for the same states (tests/conformance/cases/python_states_dunders).
    assert_eq!(
        state(&ret, "report")["comment"],
        json!(format!(
            "test_|-first_|-first_|-succeed_without_changes result=True run_num=0 id=first\n\
             {file_tag} result=True run_num=1 id=wrapped-file\n\
             low: __env__,__id__,__sls__,fun,name,order,require,state\n\
             low name=report state=wrapper fun=report id=report sls=w\n\
             test: False"
        ))
    );
}

#[test]
fn pyobjects_imports_objects_of_another_sls_and_builds_maps_from_grains() {
    let t = Tree::new(&[]);
    let salt = t.dir.path().join("salt");
    std::fs::create_dir_all(salt.join("app")).unwrap();
    std::fs::write(
        salt.join("app/map.sls"),
        "#!pyobjects\nclass App(Map):\n    merge = 'app:lookup'\n    class Linux:\n        __grain__ = 'kernel'\n        pkg = 'app-linux'\n    class Other:\n        __grain__ = 'kernel'\n        __match__ = 'Plan9'\n        pkg = 'app-plan9'\nTest.fail_without_changes('not-registered')\n",
    )
    .unwrap();
    std::fs::write(
        salt.join("use.sls"),
        "#!pyobjects\nfrom salt://app/map.sls import App as A\nimport salt://app/map.sls\nTest.succeed_without_changes('show', name=A.pkg + ' ' + str(getattr(A, 'port', None)) + ' ' + map.App.pkg)\n",
    )
    .unwrap();
    std::fs::write(
        salt.join("bad.sls"),
        "#!pyobjects\nfrom salt://app/missing.sls import X\n",
    )
    .unwrap();
    std::fs::write(
        salt.join("badfun.sls"),
        "#!pyobjects\nTest.no_such_function('x')\n",
    )
    .unwrap();

    let ret = t
        .call(
            "state.apply",
            &[json!("use")],
            json!({"pillar": {"app": {"lookup": {"port": 8080}}}}),
        )
        .unwrap();
    let ids: Vec<&str> = ret
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["__id__"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["show"], "the imported file's state is not registered");
    assert_eq!(
        state(&ret, "show")["name"],
        json!("app-linux 8080 app-linux")
    );

    let err = format!("{:?}", t.call("state.apply", &[json!("bad")], json!({})));
    assert!(
        err.contains("Could not find the file 'salt://app/missing.sls'"),
        "{err}"
    );
    let err = format!("{:?}", t.call("state.apply", &[json!("badfun")], json!({})));
    assert!(
        err.contains(
            "The function 'no_such_function' does not exist in the StateFactory for 'test'"
        ),
        "{err}"
    );
}

/// The digest a minion takes of its extmods after `sync_all` is the one
/// its master takes of the same saltenvs' file server (issue 25, one
/// round trip: equal digests are the master's "unchanged, no sync"), with
/// a module shadowed by the earlier saltenv and bytecode the sync skips;
/// a module changed on the master, or edited on the minion, makes them
/// differ until the next sync.
#[test]
fn the_synced_digest_is_the_served_one_until_either_side_changes() {
    use halite_modules::exec::saltutil::{served_digest, synced_digest};
    let t = Tree::new(&[]);
    let dev = t.dir.path().join("dev");
    for (path, text) in [
        ("_modules/hello.py", "def hi():\n    return 'dev'\n"),
        ("_modules/devonly.py", "def hi():\n    return 'devonly'\n"),
        ("_modules/__pycache__/devonly.cpython-311.pyc", "bytecode"),
    ] {
        let file = dev.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let opts = json!({
        "id": "py01",
        "file_client": "local",
        "local": true,
        "cachedir": t.dir.path().join("cache"),
        "file_roots": {"base": [t.dir.path().join("salt")], "dev": [dev]},
        "pillar_roots": {"base": [t.dir.path().join("pillar")]},
    });
    let host = || halite_modules::local::local_host(opts.clone(), Arc::new(LogEvents)).0;
    let envs = vec!["base".to_string(), "dev".to_string()];
    let served = |host: &Host| {
        served_digest(
            &envs,
            |env, prefix| {
                host.files
                    .list_files(env, prefix)
                    .map_err(|e| e.to_string())
            },
            |env, path| match host.files.cache_file(path, env) {
                Ok(Some(real)) => halite_modules::exec::file::meta::sha256_file(&real)
                    .map(Some)
                    .map_err(|e| e.to_string()),
                Ok(None) => Ok(None),
                Err(e) => Err(e.to_string()),
            },
        )
        .unwrap()
    };
    let sync = || {
        let args = Args {
            positional: Vec::new(),
            kwargs: json!({"saltenv": ["base", "dev"]})
                .as_object()
                .cloned()
                .unwrap(),
        };
        host().call("saltutil.sync_all", &args).unwrap()
    };
    // Nothing synced yet: they differ (the tree has modules).
    assert_ne!(synced_digest(&host()), served(&host()));
    sync();
    assert_eq!(synced_digest(&host()), served(&host()));
    // base's hello.py won over dev's, and no bytecode was copied.
    let extmods = t.dir.path().join("cache/extmods/modules");
    assert_eq!(
        std::fs::read(extmods.join("hello.py")).unwrap(),
        std::fs::read(t.dir.path().join("salt/_modules/hello.py")).unwrap()
    );
    assert!(extmods.join("devonly.py").is_file());
    assert!(!extmods.join("__pycache__").exists());

    // Changed on the master: another digest, until the sync.
    std::fs::write(
        dev.join("_modules/devonly.py"),
        "def hi():\n    return 'new'\n",
    )
    .unwrap();
    assert_ne!(synced_digest(&host()), served(&host()));
    sync();
    assert_eq!(synced_digest(&host()), served(&host()));

    // Edited on the minion: another digest, until the sync puts it back.
    std::fs::write(extmods.join("devonly.py"), "edited").unwrap();
    assert_ne!(synced_digest(&host()), served(&host()));
    sync();
    assert_eq!(synced_digest(&host()), served(&host()));
}
