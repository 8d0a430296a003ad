//! Custom Python modules through a master and minion on loopback: the
//! master's `file_roots` hold `_modules`, `_states` and `_grains`;
//! `saltutil.sync_all` copies them to the minion, which then serves
//! `halite '*' mymod.fun`, SLS states `mystate.present` (compiled on the
//! master, whose registry does not know them) with requisites, `test=True`
//! and `mod_watch`, and reports the custom grains for `-G` targeting. A
//! custom state reaches halite's Rust `file.managed` through `__states__`
//! and reads `__running__` and `__low__` on the minion.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{can_run, wait_for, Fleet};
use serde_json::{json, Map, Value};

use common::write_file as write;

const MYMOD: &str = r#"
__virtualname__ = "mymod"


def __virtual__():
    return __virtualname__


def hello(who="world"):
    return "hello {} from {}".format(who, __grains__["id"])


def shell(cmd):
    return __salt__["cmd.run"](cmd, python_shell=True)


def counter():
    __context__["n"] = __context__.get("n", 0) + 1
    return __context__["n"]


def has(path):
    import os
    return os.path.exists(path)
"#;

const MYSTATE: &str = r#"
import os


def present(name, contents="x"):
    ret = {"name": name, "changes": {}, "result": True, "comment": ""}
    if os.path.exists(name) and open(name).read() == contents:
        ret["comment"] = "{} is already present".format(name)
        return ret
    if __opts__["test"]:
        ret["result"] = None
        ret["changes"] = {"new": contents}
        ret["comment"] = "{} would be written".format(name)
        return ret
    with open(name, "w") as f:
        f.write(contents)
    ret["changes"] = {"new": contents}
    ret["comment"] = "{} written".format(name)
    return ret


def mod_watch(name, sfun=None, **kwargs):
    with open(name + ".watched", "w") as f:
        f.write(str(sfun))
    return {"name": name, "changes": {"watched": sfun}, "result": True, "comment": "Watch fired"}
"#;

const MYGRAINS: &str = r#"
def team():
    return {"h21_team": "blue"}
"#;

/// The `_states` module of the conformance case `python_states_dunders`:
/// `__states__['file.managed']`, `__running__`, `__low__`.
const WRAPPER: &str =
    include_str!("../../../tests/conformance/cases/python_states_dunders/_states/wrapper.py");

/// The master's state tree: the custom modules and an SLS using them.
fn tree(salt: &Path, out: &Path) {
    write(&salt.join("_modules/mymod.py"), MYMOD);
    write(&salt.join("_states/mystate.py"), MYSTATE);
    write(&salt.join("_states/wrapper.py"), WRAPPER);
    write(&salt.join("_grains/team.py"), MYGRAINS);
    let o = out.display();
    write(
        &salt.join("custom.sls"),
        &format!(
            r#"first:
  mystate.present:
    - name: {o}/first
    - contents: {{{{ salt['mymod.hello']('sls') }}}}

second:
  mystate.present:
    - name: {o}/second
    - require:
      - mystate: first

watcher:
  mystate.present:
    - name: {o}/watcher
    - watch:
      - mystate: first

by_module_run:
  module.run:
    - mymod.shell:
      - cmd: echo ran > {o}/module_run

skipped:
  cmd.run:
    - name: echo no > {o}/skipped
    - unless:
      - fun: mymod.has
        path: {o}/first

wrapped:
  wrapper.managed:
    - name: {o}/sub/wrapped.conf
    - contents: through __states__

report:
  wrapper.report:
    - require:
      - wrapper: wrapped
"#
        ),
    );
}

/// The states of `id` in a state run's returns.
fn states(rets: &Map<String, Value>, id: &str) -> Map<String, Value> {
    rets[id]
        .as_object()
        .unwrap_or_else(|| panic!("{id} returned no states: {}", rets[id]))
        .clone()
}

/// The return of the state whose `__id__` is `id`.
fn by_id<'a>(states: &'a Map<String, Value>, id: &str) -> &'a Value {
    states
        .values()
        .find(|r| r["__id__"] == id)
        .unwrap_or_else(|| panic!("no state {id} in {states:?}"))
}

#[test]
fn custom_modules_states_and_grains_through_master_and_minion() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let out = fleet.path("out");
    std::fs::create_dir_all(&out).unwrap();
    tree(&fleet.path("salt"), &out);
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n  dev: [{}]\n",
        fleet.path("salt").display(),
        fleet.path("dev").display()
    ));
    let _minion = fleet.start_minion("py1", "");
    fleet.wait_responding("py1");

    // Before a sync the minion has no such module (Salt's text).
    let (rets, _) = fleet.halite_json(&["py1", "mymod.hello"]);
    assert_eq!(rets["py1"], json!("'mymod.hello' is not available."));

    let (rets, code) = fleet.halite_json(&["py1", "saltutil.sync_all"]);
    assert_eq!(code, 0, "{rets:?}");
    assert_eq!(rets["py1"]["modules"], json!(["modules.mymod"]));
    assert_eq!(
        rets["py1"]["states"],
        json!(["states.mystate", "states.wrapper"])
    );
    assert_eq!(rets["py1"]["grains"], json!(["grains.team"]));
    assert!(fleet
        .path("minion-py1/cache/extmods/modules/mymod.py")
        .is_file());

    let (rets, code) = fleet.halite_json(&["py1", "mymod.hello", "you"]);
    assert_eq!((code, &rets["py1"]), (0, &json!("hello you from py1")));
    let (rets, _) = fleet.halite_json(&["py1", "mymod.shell", "echo a; echo b"]);
    assert_eq!(rets["py1"], json!("a\nb"));
    // __context__ is per job: a fresh dict for each.
    for _ in 0..2 {
        let (rets, _) = fleet.halite_json(&["py1", "mymod.counter"]);
        assert_eq!(rets["py1"], json!(1));
    }

    // The custom grain reached the master: -G targets it.
    let (rets, code) = fleet.halite_json(&["-G", "h21_team:blue", "test.ping"]);
    assert_eq!((code, &rets["py1"]), (0, &json!(true)), "{rets:?}");

    // test=True first: nothing written, the custom state says so.
    let (rets, code) = fleet.halite_json(&["py1", "state.apply", "custom", "test=True"]);
    let st = states(&rets, "py1");
    assert_eq!(by_id(&st, "first")["result"], Value::Null, "{st:?}");
    assert_eq!(
        by_id(&st, "first")["comment"],
        json!(format!("{}/first would be written", out.display()))
    );
    assert!(!out.join("first").exists());
    assert_eq!(code, 0, "{rets:?}");
    // __states__ runs halite's file.managed in the calling state's test mode.
    let wrapped = by_id(&st, "wrapped");
    assert_eq!(wrapped["result"], Value::Null, "{wrapped}");
    assert!(
        wrapped["comment"].as_str().unwrap().starts_with(&format!(
            "wrapped: The file {}/sub/wrapped.conf is set to be changed",
            out.display()
        )),
        "{wrapped}"
    );
    assert!(!out.join("sub").exists());

    // The watcher's file is already right, so its own run changes nothing
    // and Salt calls its mod_watch (as for a service already running).
    std::fs::write(out.join("watcher"), "x").unwrap();
    let (rets, code) = fleet.halite_json(&["py1", "state.apply", "custom"]);
    let st = states(&rets, "py1");
    assert_eq!(code, 0, "{st:?}");
    assert_eq!(
        std::fs::read_to_string(out.join("first")).unwrap(),
        "hello sls from py1"
    );
    assert_eq!(by_id(&st, "second")["result"], json!(true));
    assert!(out.join("second").is_file());
    // `first` changed, so the watcher's mod_watch fired.
    assert_eq!(by_id(&st, "watcher")["comment"], json!("Watch fired"));
    assert_eq!(
        std::fs::read_to_string(out.join("watcher.watched")).unwrap(),
        "present"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("module_run")).unwrap(),
        "ran\n"
    );
    assert_eq!(
        by_id(&st, "skipped")["comment"],
        json!("unless condition is true")
    );
    assert!(!out.join("skipped").exists());
    // __states__['file.managed'] wrote the file (makedirs) and returned
    // its dict; __running__ held the states run before `report`, and
    // __low__ its chunk, as in the conformance case recorded from Salt.
    assert_eq!(
        std::fs::read_to_string(out.join("sub/wrapped.conf")).unwrap(),
        "through __states__\n"
    );
    let wrapped = by_id(&st, "wrapped");
    assert_eq!(
        (&wrapped["result"], &wrapped["changes"], &wrapped["comment"]),
        (
            &json!(true),
            &json!({"diff": "New file"}),
            &json!(format!(
                "wrapped: File {}/sub/wrapped.conf updated",
                out.display()
            ))
        )
    );
    let report = by_id(&st, "report")["comment"]
        .as_str()
        .unwrap()
        .to_string();
    let wrapped_tag = format!(
        "wrapper_|-wrapped_|-{}/sub/wrapped.conf_|-managed result=True run_num={} id=wrapped",
        out.display(),
        wrapped["__run_num__"]
    );
    assert!(report.contains(&wrapped_tag), "{report}");
    assert!(
        report.contains("\nlow: __env__,__id__,__sls__,fun,name,order,require,state\nlow name=report state=wrapper fun=report id=report sls=custom\ntest: False"),
        "{report}"
    );

    // A highstate syncs first, as Salt's autoload_dynamic_modules: a
    // module added to the master since is used by the same run's
    // template, without any saltutil call.
    let salt = fleet.path("salt");
    answer_module(&salt, "later", "forty-two");
    // A saltenv the top file does not use is not synced (Salt syncs the
    // saltenvs the top file matched).
    answer_module(&fleet.path("dev"), "devonly", "dev");
    highstate_tree(
        &salt,
        &format!(
            "hs:\n  mystate.present:\n    - name: {}/hs\n    - contents: {{{{ salt['later.answer']() }}}}\n",
            out.display()
        ),
    );
    let (rets, code) = fleet.halite_json(&["py1", "state.apply"]);
    assert_eq!(code, 0, "{rets:?}");
    assert_eq!(
        std::fs::read_to_string(out.join("hs")).unwrap(),
        "forty-two"
    );
    assert!(fleet
        .path("minion-py1/cache/extmods/modules/later.py")
        .is_file());
    assert!(!fleet
        .path("minion-py1/cache/extmods/modules/devonly.py")
        .exists());
}

/// Writes the custom module `<root>/_modules/<name>.py`, whose `answer()`
/// returns `value`.
fn answer_module(root: &Path, name: &str, value: &str) {
    write(
        &root.join(format!("_modules/{name}.py")),
        &format!("def answer():\n    return '{value}'\n"),
    );
}

/// Writes a top file giving every minion the SLS `hs`, and `hs.sls`.
fn highstate_tree(salt: &Path, hs_text: &str) {
    write(&salt.join("top.sls"), "base:\n  '*':\n    - hs\n");
    write(&salt.join("hs.sls"), hs_text);
}

/// How many bundles the master compiled so far (`master.stats`).
fn compiled(fleet: &Fleet) -> u64 {
    fleet.master_stats()["bundles"]["packed"]
        .as_u64()
        .expect("bundles.packed")
}

/// Waits until the master has compiled the bundle of `py1`'s start-up
/// `saltutil.refresh_pillar` (the minion's own job once it authenticates;
/// the only compile before the test's first job). It is compiled about
/// when the minion answers its first ping, so a count taken as soon as
/// `wait_responding` returns could miss it and add it to the next step's
/// (the fresh-clone CI's "2 compiles at the first highstate": the master
/// log showed the start-up pillar compiled 10 ms before the count, its
/// bundle counted just after).
fn wait_startup_compile(fleet: &Fleet) {
    assert!(
        wait_for(Duration::from_secs(30), || compiled(fleet) >= 1),
        "the minion's start-up refresh_pillar was never compiled: {}",
        fleet.master_stats()
    );
}

/// One `state.apply` of `py1`, `step` of the test: it succeeds and the
/// master compiles it exactly once (`master.stats`). Its returns.
fn highstate_compiled_once(fleet: &Fleet, step: &str) -> Map<String, Value> {
    let before = compiled(fleet);
    let (rets, code) = fleet.halite_json(&["py1", "state.apply"]);
    assert_eq!(code, 0, "{step}: {rets:?}");
    assert_eq!(compiled(fleet) - before, 1, "{step}: compiles");
    rets
}

/// A master whose `_modules` hold `gone` (answering "here") and `kept`
/// (another module stays: the master still asks the minion what it has),
/// whose highstate writes `<out>/hs` with `gone.answer()` (or "absent"),
/// and minion `py1`, up and past its start-up compile.
struct GoneAndKept {
    /// The daemons, stopped before the fleet's directory goes.
    _daemons: (common::Daemon, common::Daemon),
    fleet: Fleet,
    salt: std::path::PathBuf,
    out: std::path::PathBuf,
}

impl GoneAndKept {
    fn start() -> Self {
        let fleet = Fleet::new();
        let salt = fleet.path("salt");
        let out = fleet.path("out");
        std::fs::create_dir_all(&out).unwrap();
        answer_module(&salt, "gone", "here");
        answer_module(&salt, "kept", "kept");
        highstate_tree(
            &salt,
            &format!(
                "hs:\n  file.managed:\n    - name: {}/hs\n    - contents: {{{{ salt['gone.answer']() if 'gone.answer' in salt else 'absent' }}}}\n",
                out.display()
            ),
        );
        let master = fleet.start_master(&format!(
            "auto_accept: True\nfile_roots:\n  base: [{}]\n",
            salt.display()
        ));
        let minion = fleet.start_minion("py1", "");
        fleet.wait_responding("py1");
        wait_startup_compile(&fleet);
        GoneAndKept {
            _daemons: (minion, master),
            fleet,
            salt,
            out,
        }
    }

    /// Where the minion keeps `gone` once synced.
    fn synced(&self) -> std::path::PathBuf {
        self.fleet.path("minion-py1/cache/extmods/modules/gone.py")
    }

    /// What the last highstate wrote.
    fn hs(&self) -> String {
        std::fs::read_to_string(self.out.join("hs")).unwrap()
    }

    /// `gone`, removed from the master, is gone from the minion: synced
    /// away, unseen by the last highstate's render, not callable.
    fn assert_gone(&self) {
        assert!(!self.synced().exists());
        assert_eq!(self.hs().trim(), "absent");
        let (rets, _) = self.fleet.halite_json(&["py1", "gone.answer"]);
        assert_eq!(rets["py1"], json!("'gone.answer' is not available."));
    }
}

/// A highstate's automatic sync both ways: a module the master's
/// `_modules` holds is used by the same run's template; a run where
/// nothing the compile reads changed compiles once (a new custom state
/// too); a module changed in `_modules` is used by the next highstate,
/// compiled once (the minion syncs the saltenvs its last highstate
/// matched before asking for the bundle); a module removed from
/// `_modules` is removed from the minion by the next highstate's sync
/// (Salt's `clean_dynamic_modules`), that run, compiled once, no longer
/// sees it, and the function is gone from the minion.
#[test]
fn a_highstate_sync_adds_and_removes_custom_modules() {
    if !can_run() {
        return;
    }
    let setup = GoneAndKept::start();
    let (fleet, salt, synced) = (&setup.fleet, &setup.salt, setup.synced());
    let hs = || setup.hs();

    // The first highstate: `base` synced before the compile, so once.
    highstate_compiled_once(fleet, "the first highstate");
    assert_eq!(hs().trim(), "here");
    assert!(synced.is_file());

    highstate_compiled_once(fleet, "nothing changed since");

    // A module changed on the master: the run uses the new one.
    answer_module(salt, "gone", "changed");
    highstate_compiled_once(fleet, "a changed module");
    assert_eq!(hs().trim(), "changed");

    // A custom state added with the SLS that uses it: the sync copies it
    // before the run, and as the master's compile never reads the
    // minion's states, the run is compiled once.
    write(
        &salt.join("_states/newstate.py"),
        "def present(name):\n    return {'name': name, 'result': True, 'changes': {}, 'comment': 'new state ran'}\n",
    );
    write(
        &salt.join("hs.sls"),
        &format!(
            "{}\nnew:\n  newstate.present: []\n",
            std::fs::read_to_string(salt.join("hs.sls"))
                .unwrap()
                .trim_end()
        ),
    );
    let rets = highstate_compiled_once(fleet, "a new custom state");
    assert_eq!(
        rets["py1"]["newstate_|-new_|-new_|-present"]["comment"],
        json!("new state ran"),
        "{rets:?}"
    );

    // Removed from the master: the sync removes it, the run's template
    // does not see it, and the minion no longer has the function.
    std::fs::remove_file(salt.join("_modules/gone.py")).unwrap();
    highstate_compiled_once(fleet, "a removed module");
    setup.assert_gone();
}

/// `master.stats`' count of the minions' requests, all kinds together, and
/// of the bundle requests alone.
fn requests(stats: &Value) -> (u64, u64) {
    let by_kind = stats["requests"].as_object().cloned().unwrap_or_default();
    let total = by_kind.values().filter_map(Value::as_u64).sum();
    let bundles = by_kind.get("bundle").and_then(Value::as_u64).unwrap_or(0);
    (total, bundles)
}

/// A `bundles` counter of `master.stats`.
fn bundles(stats: &Value, key: &str) -> u64 {
    stats["bundles"][key].as_u64().unwrap_or(0)
}

/// What one highstate of `py1` cost: requests (all, bundle), compiles,
/// checks found unchanged, "sync first" answers.
#[derive(Debug, PartialEq)]
struct Cost {
    requests: u64,
    bundle_requests: u64,
    compiles: u64,
    unchanged: u64,
    sync_first: u64,
}

/// One `state.apply` of `py1`: it succeeds; what it cost the master.
fn highstate(fleet: &Fleet, step: &str) -> Cost {
    let before = fleet.master_stats();
    let (rets, code) = fleet.halite_json(&["py1", "state.apply"]);
    assert_eq!(code, 0, "{step}: {rets:?}");
    let after = fleet.master_stats();
    let (total0, bundle0) = requests(&before);
    let (total1, bundle1) = requests(&after);
    Cost {
        requests: total1 - total0,
        bundle_requests: bundle1 - bundle0,
        compiles: bundles(&after, "packed") - bundles(&before, "packed"),
        unchanged: bundles(&after, "modules_unchanged") - bundles(&before, "modules_unchanged"),
        sync_first: bundles(&after, "sync_first") - bundles(&before, "sync_first"),
    }
}

/// A warm highstate's sync of custom modules and its bundle in one round
/// trip (issue 25, session 21): the minion's bundle request says what it
/// last synced, the master checks it against its file server and answers
/// "unchanged" with the bundle, or "sync first". Salt's behaviour stays:
/// a module changed on the master is synced before the next highstate's
/// render and used by it, a module removed there is removed from the
/// minion, a module edited on the minion is synced back, and an unchanged
/// warm highstate makes one request (`master.stats`' `requests`).
#[test]
fn a_warm_highstate_syncs_in_its_bundle_request() {
    if !can_run() {
        return;
    }
    let setup = GoneAndKept::start();
    let (fleet, salt, synced) = (&setup.fleet, &setup.salt, setup.synced());
    let hs = || setup.hs();

    // The first highstate: its saltenvs are not known yet, so it syncs
    // before asking, with a listing per kind of module.
    let first = highstate(fleet, "the first highstate");
    assert_eq!(hs().trim(), "here");
    assert!(synced.is_file());
    assert_eq!(first.compiles, 1, "{first:?}");
    assert!(first.requests > 6, "{first:?}");

    // Warm, nothing changed: one request, the bundle's, found unchanged.
    let warm = highstate(fleet, "a warm highstate");
    assert_eq!(
        warm,
        Cost {
            requests: 1,
            bundle_requests: 1,
            compiles: 1,
            unchanged: 1,
            sync_first: 0,
        }
    );

    // A module changed on the master: "sync first", nothing compiled
    // before the sync; the sync, then one compile that uses the new module.
    answer_module(salt, "gone", "changed");
    let changed = highstate(fleet, "a changed module");
    assert_eq!(hs().trim(), "changed");
    assert_eq!(
        (
            changed.sync_first,
            changed.compiles,
            changed.bundle_requests
        ),
        (1, 1, 2),
        "{changed:?}"
    );
    assert!(
        std::fs::read_to_string(&synced)
            .unwrap()
            .contains("changed"),
        "the minion holds the new module"
    );
    // And the next warm one is one request again.
    let again = highstate(fleet, "warm after the sync");
    assert_eq!((again.requests, again.unchanged), (1, 1), "{again:?}");

    // Removed from the master: synced away before the render, which no
    // longer sees it, and the function is gone from the minion.
    std::fs::remove_file(salt.join("_modules/gone.py")).unwrap();
    let removed = highstate(fleet, "a removed module");
    assert_eq!(
        (removed.sync_first, removed.compiles),
        (1, 1),
        "{removed:?}"
    );
    setup.assert_gone();

    // A module changed on the minion by hand (not by a sync): the digest
    // of what it holds differs, so it syncs back the master's.
    let kept = fleet.path("minion-py1/cache/extmods/modules/kept.py");
    std::fs::write(&kept, "def answer():\n    return 'edited'\n").unwrap();
    let edited = highstate(fleet, "a module edited on the minion");
    assert_eq!(edited.sync_first, 1, "{edited:?}");
    assert!(std::fs::read_to_string(&kept).unwrap().contains("'kept'"));
}
