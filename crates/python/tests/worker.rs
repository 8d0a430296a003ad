#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken fixture"
)]
//! The Python worker with real modules in a temp dir and a real python3.

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use halite_python::{Call, Callback, Dunders, ModuleDirs, PythonError, PythonHost};
use serde_json::{json, Map, Value};

/// Records the `__salt__` calls that came back and answers `cmd.run`.
#[derive(Default)]
struct Recorder(RefCell<Vec<String>>);

impl Callback for Recorder {
    fn salt_call(
        &self,
        fun: &str,
        args: &[Value],
        _: &Map<String, Value>,
    ) -> Result<Value, String> {
        self.0.borrow_mut().push(fun.to_string());
        match fun {
            "cmd.run" => Ok(Value::from(format!(
                "ran {}",
                args[0].as_str().unwrap_or("")
            ))),
            _ => Err(format!("'{fun}' is not available.")),
        }
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

fn host(root: &Path) -> PythonHost {
    let dirs = ModuleDirs {
        modules: vec![root.join("_modules")],
        states: vec![root.join("_states")],
        grains: vec![root.join("_grains")],
        ..Default::default()
    };
    PythonHost::new(None, dirs, vec!["cmd.run".into(), "test.ping".into()])
}

fn dunders() -> Dunders {
    Dunders {
        opts: json!({"id": "m1"}),
        grains: json!({"os": "Debian", "num": 4}),
        pillar: json!({"p": {"b": 1, "a": 2}}),
        ..Default::default()
    }
}

const MYMOD: &str = r#"
import salt.exceptions
__func_alias__ = {"list_": "list"}

def hello(who, punct="!"):
    return "hello " + who + punct + " on " + __grains__["os"]

def shell(cmd):
    return __salt__["cmd.run"](cmd)

def list_():
    return [1, 2, 3]

def types():
    return {"z": 1, "a": None, "t": True, "f": 2.5, "tuple": (1, 2), "big": 2**40, "b": b"x"}

def boom():
    raise salt.exceptions.CommandExecutionError("it broke, fix it")

def crash():
    return {}["nope"]

def hang():
    import time
    time.sleep(60)

def die():
    import os
    os._exit(3)

def ctx(n):
    __context__["n"] = __context__.get("n", 0) + n
    return __context__["n"]

def _private():
    return 1
"#;

#[test]
fn loader_lists_public_functions_with_aliases_and_declines() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("_modules"), "mymod.py", MYMOD);
    write(
        &tmp.path().join("_modules"),
        "nope.py",
        "__virtualname__ = 'nah'\ndef __virtual__():\n    return (False, 'the nope binary is missing')\ndef f():\n    return 1\n",
    );
    write(
        &tmp.path().join("_modules"),
        "renamed.py",
        "def __virtual__():\n    return 'other'\ndef f():\n    return 1\n",
    );
    let py = host(tmp.path());
    let inv = py.inventory(&dunders(), None).unwrap();
    let mut funs = inv.modules["mymod"].clone();
    funs.sort();
    assert_eq!(
        funs,
        ["boom", "crash", "ctx", "die", "hang", "hello", "list", "shell", "types"]
    );
    assert_eq!(inv.modules["other"], ["f"]);
    assert!(!inv.modules.contains_key("nah") && !inv.modules.contains_key("renamed"));
    assert_eq!(
        inv.missing("modules", "nah.f"),
        "'nah' __virtual__ returned False: the nope binary is missing"
    );
    assert_eq!(inv.missing("modules", "zz.f"), "'zz.f' is not available.");
}

#[test]
fn calls_round_trip_values_and_reach_the_callback() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("_modules"), "mymod.py", MYMOD);
    let py = host(tmp.path());
    let rec = Recorder::default();
    let call = |fun: &str, args: Vec<Value>| {
        let kwargs = Map::new();
        py.call(
            &Call::Exec {
                fun,
                args: &args,
                kwargs: &kwargs,
            },
            &dunders(),
            &rec,
            None,
        )
    };
    assert_eq!(
        call("mymod.hello", vec![json!("you")]).unwrap(),
        json!("hello you! on Debian")
    );
    assert_eq!(
        call("mymod.shell", vec![json!("id -u")]).unwrap(),
        json!("ran id -u")
    );
    assert_eq!(rec.0.borrow().as_slice(), ["cmd.run"]);
    assert_eq!(call("mymod.list", vec![]).unwrap(), json!([1, 2, 3]));
    let t = call("mymod.types", vec![]).unwrap();
    assert_eq!(
        serde_json::to_string(&t).unwrap(),
        r#"{"z":1,"a":null,"t":true,"f":2.5,"tuple":[1,2],"big":1099511627776,"b":"b'x'"}"#
    );
    // __context__ lives as long as the worker's job.
    assert_eq!(call("mymod.ctx", vec![json!(2)]).unwrap(), json!(2));
    assert_eq!(call("mymod.ctx", vec![json!(3)]).unwrap(), json!(5));
}

#[test]
fn context_is_one_dict_per_job() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("_modules"), "mymod.py", MYMOD);
    let py = host(tmp.path());
    let call = |job: &str, n: i64| {
        let d = Dunders {
            job: Some(job.to_string()),
            ..dunders()
        };
        py.call(
            &Call::Exec {
                fun: "mymod.ctx",
                args: &[json!(n)],
                kwargs: &Map::new(),
            },
            &d,
            &Recorder::default(),
            None,
        )
        .unwrap()
    };
    assert_eq!(call("j1", 2), json!(2));
    assert_eq!(call("j1", 3), json!(5));
    // A new job starts with an empty __context__ ...
    assert_eq!(call("j2", 10), json!(10));
    // ... and a job whose calls interleave with another's keeps its own.
    assert_eq!(call("j1", 1), json!(6));
    assert_eq!(call("j2", 1), json!(11));
}

#[test]
fn exceptions_come_back_with_their_traceback() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("_modules"), "mymod.py", MYMOD);
    let py = host(tmp.path());
    let call = |fun: &str| {
        py.call(
            &Call::Exec {
                fun,
                args: &[],
                kwargs: &Map::new(),
            },
            &dunders(),
            &Recorder::default(),
            None,
        )
    };
    match call("mymod.boom") {
        Err(PythonError::Raised { kind, message, .. }) => {
            assert_eq!(kind, "CommandExecutionError");
            assert_eq!(message, "it broke, fix it");
        }
        other => panic!("{other:?}"),
    }
    let err = call("mymod.crash").unwrap_err();
    let tail = err.traceback_tail().unwrap();
    assert!(
        tail.starts_with("Traceback (most recent call last):"),
        "{tail}"
    );
    assert!(
        tail.contains("in crash") && tail.ends_with("KeyError: 'nope'"),
        "{tail}"
    );
    // The worker survived the exceptions.
    assert_eq!(call("mymod.list").unwrap(), json!([1, 2, 3]));
}

#[test]
fn a_hung_call_is_killed_at_its_timeout_and_a_dead_worker_restarted() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("_modules"), "mymod.py", MYMOD);
    let py = host(tmp.path());
    let rec = Recorder::default();
    let kw = Map::new();
    let call = |fun: &str, timeout| {
        py.call(
            &Call::Exec {
                fun,
                args: &[],
                kwargs: &kw,
            },
            &dunders(),
            &rec,
            timeout,
        )
    };
    assert!(matches!(
        call("mymod.hang", Some(Duration::from_millis(300))),
        Err(PythonError::Timeout)
    ));
    assert_eq!(call("mymod.list", None).unwrap(), json!([1, 2, 3]));
    assert!(matches!(call("mymod.die", None), Err(PythonError::Died(_))));
    assert_eq!(call("mymod.list", None).unwrap(), json!([1, 2, 3]));
}

#[test]
fn states_get_test_low_and_mod_watch_and_grains_merge() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("_states"),
        "mystate.py",
        r#"
def present(name, value=1):
    ret = {"name": name, "changes": {}, "result": True, "comment": ""}
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = "would set {} to {}".format(name, value)
        return ret
    ret["changes"] = {"new": value, "low": __low__["fun"]}
    ret["comment"] = "set"
    return ret

def mod_watch(name, sfun=None, **kwargs):
    return {"name": name, "changes": {"watched": sfun}, "result": True, "comment": "restarted"}
"#,
    );
    write(&tmp.path().join("_grains"), "extra.py", "def roles():\n    return {'roles': ['web'], 'os_seen': __grains__['os']}\ndef _hidden():\n    return {'no': 1}\n");
    let py = host(tmp.path());
    let rec = Recorder::default();
    let low: Map<String, Value> = serde_json::from_value(json!({"state": "mystate", "fun": "present", "name": "x", "value": 7, "__id__": "x", "require": []})).unwrap();
    let mut d = dunders();
    d.test = true;
    let call = Call::State {
        fun: "mystate.present",
        low: &low,
        sfun: None,
        reqs: None,
    };
    let ret = py.call(&call, &d, &rec, None).unwrap();
    assert_eq!(ret["result"], Value::Null);
    assert_eq!(ret["comment"], "would set x to 7");
    d.test = false;
    let ret = py.call(&call, &d, &rec, None).unwrap();
    assert_eq!(ret["changes"], json!({"new": 7, "low": "present"}));
    let watch = Call::State {
        fun: "mystate.mod_watch",
        low: &low,
        sfun: Some("present"),
        reqs: None,
    };
    let ret = py.call(&watch, &d, &rec, None).unwrap();
    assert_eq!(ret["changes"], json!({"watched": "present"}));
    let grains = py.call(&Call::Grains, &d, &rec, None).unwrap();
    assert_eq!(grains, json!({"roles": ["web"], "os_seen": "Debian"}));
}

#[test]
fn py_renderer_runs_run_with_the_dunders() {
    let tmp = tempfile::tempdir().unwrap();
    let py = host(tmp.path());
    let text = "#!py\ndef run():\n    return {'pkg': {'pkg.installed': [{'name': __grains__['os'].lower()}]}, 'from': sls}\n";
    let call = Call::Render {
        renderer: "py",
        text,
        path: "/srv/salt/x.sls",
        sls: "x",
    };
    let ret = py
        .call(&call, &dunders(), &Recorder::default(), None)
        .unwrap();
    assert_eq!(
        ret,
        json!({"pkg": {"pkg.installed": [{"name": "debian"}]}, "from": "x"})
    );
}

#[test]
fn a_hung_virtual_obeys_the_timeout_too() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("_modules"),
        "slow.py",
        "import time\ndef __virtual__():\n    time.sleep(60)\n    return True\n",
    );
    let py = host(tmp.path());
    assert!(matches!(
        py.inventory(&dunders(), Some(Duration::from_millis(300))),
        Err(PythonError::Timeout)
    ));
}

/// Calls `fun` with `args` on `py` (its own callback: one per thread).
fn exec(py: &PythonHost, fun: &str, args: &[Value]) -> Value {
    py.call(
        &Call::Exec {
            fun,
            args,
            kwargs: &Map::new(),
        },
        &dunders(),
        &Recorder::default(),
        None,
    )
    .unwrap()
}

/// Waits (at most 60 s) until `path` exists.
fn wait_file(path: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{path:?} never appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Python that writes `started` and waits until `go` exists.
fn hold(started: &Path, go: &Path) -> String {
    format!(
        "import os, time\nopen({s:?}, 'w').close()\nwhile not os.path.exists({g:?}):\n    time.sleep(0.01)\n",
        s = started.display().to_string(),
        g = go.display().to_string()
    )
}

/// A sync rewrites a module while another job's call runs in a worker of
/// the old one: that worker finishes its call, and the next call (the job
/// that synced) runs the new module, not the old one kept idle.
#[test]
fn a_worker_busy_across_a_reload_is_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (started, go) = (tmp.path().join("started"), tmp.path().join("go"));
    let module = |version: &str| {
        format!(
            "def wait():\n{}    return '{version}'\n\ndef version():\n    return '{version}'\n",
            hold(&started, &go)
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        )
    };
    write(&tmp.path().join("_modules"), "ver.py", &module("v1"));
    let py = host(tmp.path());
    std::thread::scope(|s| {
        let busy = s.spawn(|| exec(&py, "ver.wait", &[]));
        wait_file(&started);
        write(&tmp.path().join("_modules"), "ver.py", &module("v2"));
        py.reload();
        std::fs::write(&go, "").unwrap();
        assert_eq!(busy.join().unwrap(), json!("v1"), "the call begun before");
    });
    assert_eq!(exec(&py, "ver.version", &[]), json!("v2"));
}

/// A sync adds a module while another job's worker is loading the
/// modules: what that worker found is not kept as the host's inventory,
/// so the next job lists the new module.
#[test]
fn an_inventory_loaded_across_a_reload_is_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (started, go) = (tmp.path().join("started"), tmp.path().join("go"));
    let slow = format!("{}\ndef f():\n    return 1\n", hold(&started, &go));
    write(&tmp.path().join("_modules"), "slow.py", &slow);
    let py = host(tmp.path());
    std::thread::scope(|s| {
        let loading = s.spawn(|| py.inventory(&dunders(), None).unwrap());
        wait_file(&started);
        write(
            &tmp.path().join("_modules"),
            "late.py",
            "def g():\n    return 2\n",
        );
        py.reload();
        std::fs::write(&go, "").unwrap();
        assert!(loading.join().unwrap().modules.contains_key("slow"));
    });
    let inv = py.inventory(&dunders(), None).unwrap();
    assert_eq!(inv.modules["late"], ["g"], "{:?}", inv.modules);
    assert_eq!(inv.modules["slow"], ["f"]);
}
