//! The state engine end to end on real SLS files in temp dirs, through the
//! same `state.*` functions halite-call and the minion use.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use halite_modules::host::EventSink;
use halite_modules::{Args, Host};
use serde_json::{json, Value};

#[derive(Default)]
struct Collect(Mutex<Vec<(String, Value)>>);

impl EventSink for Collect {
    fn fire(&self, tag: &str, data: &Value) {
        self.0.lock().unwrap().push((tag.to_string(), data.clone()));
    }
}

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new(files: &[(&str, &str)]) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("salt")).unwrap();
        for (path, text) in files {
            let p = dir.path().join("salt").join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("pillar")).unwrap();
        Tree { dir }
    }

    fn pillar(self, files: &[(&str, &str)]) -> Tree {
        for (path, text) in files {
            std::fs::write(self.dir.path().join("pillar").join(path), text).unwrap();
        }
        self
    }

    fn host(&self, extra: Value, events: Arc<dyn EventSink>) -> Host {
        let mut opts = json!({
            "id": "web01",
            "file_client": "local",
            "local": true,
            "file_roots": {"base": [self.dir.path().join("salt")]},
            "pillar_roots": {"base": [self.dir.path().join("pillar")]},
            "grains": {"roles": ["web"]},
        });
        if let (Value::Object(o), Value::Object(e)) = (&mut opts, extra) {
            o.extend(e);
        }
        let (host, errors) = halite_modules::local::local_host(opts, events);
        assert!(errors.is_empty(), "pillar errors: {errors:?}");
        host
    }

    fn call(&self, fun: &str, args: &[Value], kwargs: Value) -> Value {
        self.call_with(fun, args, kwargs, json!({}), Arc::new(Collect::default()))
    }

    fn call_with(
        &self,
        fun: &str,
        args: &[Value],
        kwargs: Value,
        opts: Value,
        events: Arc<dyn EventSink>,
    ) -> Value {
        let host = self.host(opts, events);
        let args = Args {
            positional: args.to_vec(),
            kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        };
        host.call(fun, &args).unwrap()
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// (id, run_num, result, comment) of every state, in run order.
fn summary(ret: &Value) -> Vec<(String, u64, Value, String)> {
    let mut v: Vec<(String, u64, Value, String)> = ret
        .as_object()
        .unwrap_or_else(|| panic!("a state return, not errors: {ret}"))
        .values()
        .map(|r| {
            (
                r["__id__"].as_str().unwrap_or("").to_string(),
                r["__run_num__"].as_u64().unwrap(),
                r["result"].clone(),
                r["comment"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    v.sort_by_key(|x| x.1);
    v
}

fn ids(ret: &Value) -> Vec<String> {
    summary(ret).into_iter().map(|s| s.0).collect()
}

#[test]
fn include_tree_orders_included_states_first() {
    let t = Tree::new(&[
        (
            "site.sls",
            "include:\n  - lib\nsite_state:\n  test.succeed_without_changes\n",
        ),
        (
            "lib/init.sls",
            "include:\n  - .common\nlib_state:\n  test.succeed_without_changes\n",
        ),
        (
            "lib/common.sls",
            "common_state:\n  test.succeed_without_changes\n",
        ),
    ]);
    let ret = t.call("state.apply", &[json!("site")], json!({}));
    assert_eq!(ids(&ret), ["common_state", "lib_state", "site_state"]);
    let low = t.call("state.show_low_sls", &[json!("site")], json!({}));
    let first = low[0].as_object().unwrap();
    let keys: Vec<&str> = first.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "state",
            "name",
            "__sls__",
            "__env__",
            "__sls_included_from__",
            "__id__",
            "order",
            "fun"
        ]
    );
    assert_eq!(first["__sls_included_from__"], json!(["lib", "site"]));
    assert_eq!(first["order"], json!(10000));
}

#[test]
fn long_require_chain_runs_in_dependency_order() {
    // Declared in reverse: each state requires the one declared after it.
    let mut sls = String::new();
    for i in 0..200 {
        if i < 199 {
            sls.push_str(&format!(
                "s{i}:\n  test.succeed_without_changes:\n    - require:\n      - test: s{}\n",
                i + 1
            ));
        } else {
            sls.push_str(&format!("s{i}:\n  test.succeed_without_changes\n"));
        }
    }
    let t = Tree::new(&[("chain.sls", &sls)]);
    let ret = t.call("state.apply", &[json!("chain")], json!({}));
    let order = ids(&ret);
    let expected: Vec<String> = (0..200).rev().map(|i| format!("s{i}")).collect();
    assert_eq!(order, expected);
}

#[test]
fn cycles_and_missing_targets_are_salt_shaped_errors() {
    let t = Tree::new(&[(
        "bad.sls",
        "a:\n  test.nop:\n    - require:\n      - test: b\nb:\n  test.nop:\n    - watch:\n      - test: a\n",
    )]);
    let ret = t.call("state.apply", &[json!("bad")], json!({}));
    let err = ret[0].as_str().unwrap();
    assert!(
        err.starts_with("Recursive requisites were found: "),
        "{err}"
    );
    assert!(
        err.contains("'require'") && err.contains("'watch'"),
        "{err}"
    );
    assert_eq!(halite_modules::exec::retcode("state.apply", &ret), 1);

    let t = Tree::new(&[(
        "m.sls",
        "a:\n  test.nop:\n    - onfail:\n      - cmd: nothere\n",
    )]);
    let ret = t.call("state.apply", &[json!("m")], json!({}));
    assert_eq!(
        ret,
        json!(["Referenced state does not exist for requisite [onfail: (cmd: nothere)] in state [a] in SLS [m]"])
    );
}

#[test]
fn prereq_runs_only_when_the_target_would_change() {
    let t = Tree::new(&[(
        "p.sls",
        "stop:\n  test.succeed_with_changes:\n    - prereq:\n      - test: upgrade\n\
         upgrade:\n  test.succeed_with_changes\n\
         stop_quiet:\n  test.succeed_with_changes:\n    - prereq:\n      - test: nothing\n\
         nothing:\n  test.succeed_without_changes\n",
    )]);
    let ret = t.call("state.apply", &[json!("p")], json!({}));
    let s = summary(&ret);
    let get = |id: &str| s.iter().find(|x| x.0 == id).cloned().unwrap();
    assert_eq!(get("stop").3, "Success!");
    assert!(get("stop").1 < get("upgrade").1);
    assert_eq!(get("stop_quiet").3, "No changes detected");
    assert_eq!(
        ret["test_|-stop_quiet_|-stop_quiet_|-succeed_with_changes"]["__state_ran__"],
        json!(false)
    );
}

#[test]
fn listen_fires_mod_watch_after_everything_else() {
    let t = Tree::new(&[(
        "l.sls",
        "conf:\n  test.succeed_with_changes\nsvc:\n  test.succeed_without_changes:\n    - listen:\n      - test: conf\nlast:\n  test.succeed_without_changes\n",
    )]);
    let ret = t.call("state.apply", &[json!("l")], json!({}));
    assert_eq!(ids(&ret), ["conf", "svc", "last", "listener_svc"]);
    assert_eq!(
        ret["test_|-listener_svc_|-svc_|-mod_watch"]["comment"],
        json!("Watch statement fired.")
    );
}

#[test]
fn global_failhard_stops_the_run_at_the_first_failure() {
    let t = Tree::new(&[(
        "f.sls",
        "one:\n  test.succeed_without_changes\ntwo:\n  test.fail_without_changes\nthree:\n  test.succeed_without_changes\n",
    )]);
    let ret = t.call_with(
        "state.apply",
        &[json!("f")],
        json!({}),
        json!({"failhard": true}),
        Arc::new(Collect::default()),
    );
    assert_eq!(ids(&ret), ["one", "two"]);
    let ret = t.call("state.apply", &[json!("f")], json!({}));
    assert_eq!(ids(&ret), ["one", "two", "three"]);
}

#[test]
fn retry_reruns_until_the_result_matches() {
    let t = Tree::new(&[]);
    let flag = t.path().join("flag");
    let sls = format!(
        "flaky:\n  cmd.run:\n    - name: test -e {0} || {{ touch {0}; exit 1; }}\n    - retry:\n        attempts: 3\n        interval: 0\n",
        flag.display()
    );
    std::fs::write(t.path().join("salt/r.sls"), sls).unwrap();
    let ret = t.call("state.apply", &[json!("r")], json!({}));
    let s = summary(&ret);
    assert_eq!(s[0].2, json!(true));
    assert_eq!(s[0].1, 1, "the first attempt takes run number 0");
    assert!(
        s[0].3
            .starts_with("Attempt 1: Returned a result of \"False\""),
        "{}",
        s[0].3
    );
}

#[test]
fn fire_event_and_progress_events_reach_the_sink() {
    let t = Tree::new(&[(
        "e.sls",
        "plain:\n  test.succeed_without_changes:\n    - fire_event: True\ncustom:\n  test.succeed_without_changes:\n    - fire_event: my/tag\nquiet:\n  test.succeed_without_changes\n",
    )]);
    let sink = Arc::new(Collect::default());
    let ret = t.call_with(
        "state.apply",
        &[json!("e")],
        json!({"__pub_jid": "20260101000000000000"}),
        // A master's job: the minion puts its jid in the opts.
        json!({"jid": "20260101000000000000"}),
        sink.clone(),
    );
    assert_eq!(ids(&ret).len(), 3);
    let tags: Vec<String> = sink
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(t, _)| t.clone())
        .collect();
    assert!(
        tags.contains(&"salt/state_result/20260101000000000000/web01/plain".to_string()),
        "{tags:?}"
    );
    assert!(
        tags.contains(&"salt/state_result/20260101000000000000/web01/my/tag".to_string()),
        "{tags:?}"
    );
    let prog: Vec<&String> = tags.iter().filter(|t| t.contains("/prog/")).collect();
    assert_eq!(prog.len(), 3, "{tags:?}");
    assert_eq!(prog[0], "salt/job/20260101000000000000/prog/web01/0");

    // Masterless (no job from a master): no prog events unless asked for.
    for (opts, expected) in [(json!({}), 0), (json!({"state_events": true}), 3)] {
        let sink = Arc::new(Collect::default());
        t.call_with("state.apply", &[json!("e")], json!({}), opts, sink.clone());
        let prog = sink
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| t.contains("/prog/"))
            .count();
        assert_eq!(prog, expected);
    }
    // A master's job with `state_events: False`: none either.
    let sink = Arc::new(Collect::default());
    t.call_with(
        "state.apply",
        &[json!("e")],
        json!({}),
        json!({"jid": "20260101000000000001", "state_events": false}),
        sink.clone(),
    );
    assert!(!sink
        .0
        .lock()
        .unwrap()
        .iter()
        .any(|(t, _)| t.contains("/prog/")));
}

#[test]
fn render_errors_name_the_sls_and_line() {
    let t = Tree::new(&[(
        "y.sls",
        "good:\n  test.nop\nbad:\n  test.nop:\n    - name: [unclosed\n",
    )]);
    let ret = t.call("state.apply", &[json!("y")], json!({}));
    let err = ret[0].as_str().unwrap();
    assert!(err.starts_with("Rendering SLS 'base:y' failed: "), "{err}");
    assert!(err.contains("line 5"), "{err}");
    let t = Tree::new(&[("j.sls", "{% if x %}\nfoo:\n  test.nop\n")]);
    let ret = t.call("state.apply", &[json!("j")], json!({}));
    assert!(
        ret[0]
            .as_str()
            .unwrap()
            .starts_with("Rendering SLS 'base:j' failed: Jinja"),
        "{ret}"
    );
    let ret = t.call("state.apply", &[json!("nope")], json!({}));
    assert_eq!(
        ret,
        json!(["No matching sls found for 'nope' in env 'base'"])
    );
}

#[test]
fn highstate_uses_top_matching_and_pillar() {
    let t = Tree::new(&[
        ("top.sls", "base:\n  'web*':\n    - web\n  'G@roles:db':\n    - match: compound\n    - db\n  'other':\n    - other\n"),
        ("web.sls", "web_state:\n  test.succeed_without_changes:\n    - comment: {{ salt['pillar.get']('greeting:text') }}\n"),
        ("db.sls", "db_state:\n  test.nop\n"),
        ("other.sls", "other_state:\n  test.nop\n"),
    ])
    .pillar(&[("top.sls", "base:\n  '*':\n    - common\n"), ("common.sls", "greeting:\n  text: hello from pillar\n")]);
    let top = t.call("state.show_top", &[], json!({}));
    assert_eq!(top, json!({"base": ["web"]}));
    let ret = t.call("state.apply", &[], json!({}));
    let s = summary(&ret);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].3, "hello from pillar");
    let ret = t.call(
        "state.apply",
        &[],
        json!({"pillar": {"greeting": {"text": "overridden"}}}),
    );
    assert_eq!(summary(&ret)[0].3, "overridden");
    let low = t.call("state.show_lowstate", &[], json!({}));
    assert_eq!(low.as_array().unwrap().len(), 1);
}

#[test]
fn test_mode_predicts_without_running_commands() {
    let t = Tree::new(&[]);
    let marker = t.path().join("marker");
    std::fs::write(
        t.path().join("salt/c.sls"),
        format!(
            "touch:\n  cmd.run:\n    - name: touch {}\n",
            marker.display()
        ),
    )
    .unwrap();
    let ret = t.call("state.apply", &[json!("c")], json!({"test": true}));
    let s = summary(&ret);
    assert_eq!(s[0].2, Value::Null);
    assert!(!marker.exists());
    let ret = t.call("state.apply", &[json!("c")], json!({}));
    assert_eq!(summary(&ret)[0].2, json!(true));
    assert!(marker.exists());
}

#[test]
fn single_graph_and_unknown_functions() {
    let t = Tree::new(&[(
        "g.sls",
        "a:\n  test.nop\nb:\n  test.nop:\n    - require:\n      - test: a\n",
    )]);
    let ret = t.call(
        "state.single",
        &[json!("test.succeed_with_changes")],
        json!({"name": "solo"}),
    );
    assert_eq!(
        ret["test_|-solo_|-solo_|-succeed_with_changes"]["result"],
        json!(true)
    );
    let dot = t.call("state.graph", &[json!("g")], json!({}));
    let dot = dot.as_str().unwrap();
    assert!(dot.starts_with("digraph G {"));
    assert!(
        dot.contains("\"test_|-a_|-a_|-nop\" -> \"test_|-b_|-b_|-nop\" [label=\"require\"];"),
        "{dot}"
    );
    let data = t.call("state.graph", &[json!("g")], json!({"format": "json"}));
    assert_eq!(
        data["edges"],
        json!([{"source": "test_|-a_|-a_|-nop", "target": "test_|-b_|-b_|-nop", "kind": "require"}]),
        "{data}"
    );
    let ids: Vec<&str> = data["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["test_|-a_|-a_|-nop", "test_|-b_|-b_|-nop"]);
    assert_eq!(data["nodes"][1]["state_id"], json!("b"));
    assert_eq!(data["nodes"][1]["sls"], json!("g"));
    let t = Tree::new(&[("u.sls", "x:\n  test.no_such_function\n")]);
    let ret = t.call("state.apply", &[json!("u")], json!({}));
    let r = &ret["test_|-x_|-x_|-no_such_function"];
    assert_eq!(r["result"], json!(false));
    assert_eq!(
        r["comment"],
        json!("State 'test.no_such_function' was not found in SLS 'u'\nReason: 'test.no_such_function' is not available.\n")
    );
}

#[test]
fn parallel_states_run_concurrently_and_dependents_wait() {
    let t = Tree::new(&[]);
    let d = t.path().join("rendezvous");
    std::fs::create_dir_all(&d).unwrap();
    // Each state marks itself started, then waits (up to 10 s) for the other
    // two: run one after another, the first would time out and fail.
    let wait = |me: &str, a: &str, b: &str| {
        format!(
            "touch {0}/{me}; for i in $(seq 100); do [ -e {0}/{a} ] && [ -e {0}/{b} ] && exit 0; sleep 0.1; done; exit 1",
            d.display()
        )
    };
    let sls = format!(
        "p1:\n  cmd.run:\n    - name: '{}'\n    - parallel: True\n\
         p2:\n  cmd.run:\n    - name: '{}'\n    - parallel: True\n\
         p3:\n  cmd.run:\n    - name: '{}'\n    - parallel: True\n\
         after:\n  cmd.run:\n    - name: 'ls {} | wc -l'\n    - require:\n      - cmd: p1\n      - cmd: p2\n      - cmd: p3\n",
        wait("a", "b", "c"),
        wait("b", "a", "c"),
        wait("c", "a", "b"),
        d.display()
    );
    std::fs::write(t.path().join("salt/par.sls"), sls).unwrap();
    let ret = t.call("state.apply", &[json!("par")], json!({}));
    let s = summary(&ret);
    assert_eq!(
        s.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
        ["p1", "p2", "p3", "after"]
    );
    for x in &s {
        assert_eq!(x.2, json!(true), "{} failed: {}", x.0, x.3);
    }
    let after = ret
        .as_object()
        .unwrap()
        .values()
        .find(|r| r["__id__"] == "after")
        .unwrap();
    assert_eq!(
        after["changes"]["stdout"],
        json!("3"),
        "the dependent ran after all three finished"
    );
    let p1 = ret
        .as_object()
        .unwrap()
        .values()
        .find(|r| r["__id__"] == "p1")
        .unwrap();
    assert_eq!(p1["__parallel__"], json!(true));
    assert!(p1["comment"].as_str().unwrap().starts_with("Command"));
}

#[test]
fn cmd_script_runs_a_salt_url_with_template_and_args() {
    let t = Tree::new(&[
        ("scripts/hello.sh", "#!/bin/sh\necho \"hello {{ grains['id'] }} $1\"\n"),
        (
            "s.sls",
            "run_it:\n  cmd.script:\n    - name: salt://scripts/hello.sh world\n    - template: jinja\n\
             plain:\n  cmd.script:\n    - source: salt://scripts/hello.sh\n    - args: there\n\
             missing:\n  cmd.script:\n    - source: salt://scripts/nope.sh\n",
        ),
    ]);
    let ret = t.call("state.apply", &[json!("s")], json!({}));
    let get = |id: &str| {
        ret.as_object()
            .unwrap()
            .values()
            .find(|r| r["__id__"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        get("run_it")["changes"]["stdout"],
        json!("hello web01 world")
    );
    assert_eq!(
        get("plain")["changes"]["stdout"],
        json!("hello {{ grains['id'] }} there")
    );
    assert_eq!(get("missing")["result"], json!(false));
    assert!(get("missing")["comment"]
        .as_str()
        .unwrap()
        .contains("Unable to cache script salt://scripts/nope.sh"));
}

#[test]
fn cmd_script_runs_the_script_by_its_shebang() {
    // A python script: run as `/bin/sh <script>` it would fail on the
    // first line; Salt runs the script itself, so its shebang decides.
    let t = Tree::new(&[
        (
            "scripts/hello.py",
            "#!/usr/bin/env python3\nimport sys\nprint('py', sys.argv[1])\n",
        ),
        ("scripts/noshebang.sh", "echo plain $1\n"),
        (
            "s.sls",
            "py:\n  cmd.script:\n    - source: salt://scripts/hello.py\n    - args: there\n\
             bare:\n  cmd.script:\n    - source: salt://scripts/noshebang.sh\n    - args: sh\n",
        ),
    ]);
    let ret = t.call("state.apply", &[json!("s")], json!({}));
    let get = |id: &str| {
        ret.as_object()
            .unwrap()
            .values()
            .find(|r| r["__id__"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(get("py")["changes"]["stdout"], json!("py there"), "{ret}");
    assert_eq!(get("bare")["changes"]["stdout"], json!("plain sh"), "{ret}");
}

#[test]
fn malformed_requisites_and_arguments_are_clear_errors() {
    let t = Tree::new(&[(
        "w.sls",
        "a:\n  test.nop:\n    - require: b\nb:\n  test.nop:\n    - require:\n      - [not, a, mapping]\n",
    )]);
    let ret = t.call("state.apply", &[json!("w")], json!({}));
    let errs: Vec<&str> = ret
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        errs.contains(
            &"The require statement in state 'a' in SLS 'w' needs to be formed as a list"
        ),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.starts_with("Requisite declaration ['not', 'a', 'mapping'] in state b")),
        "{errs:?}"
    );
    let t = Tree::new(&[(
        "c.sls",
        "bad_env:\n  cmd.run:\n    - name: 'true'\n    - env: 5\n",
    )]);
    let ret = t.call("state.apply", &[json!("c")], json!({}));
    let r = ret.as_object().unwrap().values().next().unwrap();
    assert_eq!(r["result"], json!(false));
    assert_eq!(
        r["comment"],
        json!("Invalidly-formatted 'env' parameter. See documentation.")
    );
}
