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
