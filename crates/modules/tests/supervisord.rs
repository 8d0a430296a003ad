//! `supervisord` states and execution functions against a real
//! `supervisord` the test starts with its own config in a temp dir (its
//! unix socket there too), supervising a program that sleeps.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

fn has(prog: &str) -> bool {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {prog}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn host() -> Host {
    common::host()
}

/// A supervisord of the test's own: its config, socket, logs and pid file
/// in a temp dir; shut down (and its children with it) when dropped.
struct Daemon {
    dir: tempfile::TempDir,
}

impl Daemon {
    fn start() -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let conf = format!(
            "[unix_http_server]\nfile={d}/sock\n\n\
             [supervisord]\nlogfile={d}/supervisord.log\npidfile={d}/supervisord.pid\n\
             childlogdir={d}\n\n\
             [rpcinterface:supervisor]\n\
             supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n\
             [supervisorctl]\nserverurl=unix://{d}/sock\n\n\
             [program:sleeper]\ncommand=sleep 1000\nautostart=false\nstartsecs=0\n\n\
             [program:napper]\ncommand=sleep 1000\nautostart=false\nstartsecs=0\n\n\
             [group:grp]\nprograms=napper\n"
        );
        std::fs::write(dir.path().join("supervisord.conf"), conf).unwrap();
        let status = std::process::Command::new("supervisord")
            .arg("-c")
            .arg(dir.path().join("supervisord.conf"))
            .status()
            .unwrap();
        assert!(status.success(), "supervisord did not start");
        let daemon = Daemon { dir };
        // supervisord daemonizes before its socket is up: wait for it.
        for _ in 0..100 {
            let out = std::process::Command::new("supervisorctl")
                .arg("-c")
                .arg(daemon.conf())
                .arg("pid")
                .output()
                .unwrap();
            if out.status.success() {
                return daemon;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("supervisord's socket never answered");
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("supervisord.conf")
    }

    /// Appends a program to the config (for `add`/`update`).
    fn add_program(&self, name: &str) {
        let mut text = std::fs::read_to_string(self.conf()).unwrap();
        text.push_str(&format!(
            "\n[program:{name}]\ncommand=sleep 1000\nautostart=true\nstartsecs=0\n"
        ));
        std::fs::write(self.conf(), text).unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = std::process::Command::new("supervisorctl")
            .arg("-c")
            .arg(self.conf())
            .arg("shutdown")
            .output();
        let pidfile = self.dir.path().join("supervisord.pid");
        for _ in 0..50 {
            if !Path::new(&pidfile).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    let call = common::Call {
        module: "supervisord",
        fun,
        name,
        args,
        test,
        sfun: (fun == "mod_watch").then_some("running"),
    };
    call.run(host)
        .unwrap_or_else(|e| StateResult::fail(name, e.to_string()))
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>, conf: &Path) -> Value {
    let mut kwargs = serde_json::Map::new();
    kwargs.insert("conf_file".into(), json!(conf.display().to_string()));
    host.call(fun, &Args { positional, kwargs })
        .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

/// The pid supervisord reports for `name`, `None` when it is not running.
fn pid(host: &Host, name: &str, conf: &Path) -> Option<String> {
    let status = exec(host, "supervisord.status", vec![], conf);
    let reason = status[name]["reason"].as_str()?.to_string();
    reason
        .strip_prefix("pid ")
        .and_then(|r| r.split(',').next())
        .map(str::to_string)
}

fn outcome(r: &StateResult) -> (Option<bool>, String, Value) {
    (
        r.result,
        r.comment.clone(),
        serde_json::to_value(&r.changes).unwrap(),
    )
}

/// One state call with what Salt answers: `(fun, name, test, result,
/// comment, changes)`.
type Step<'a> = (&'a str, &'a str, bool, Option<bool>, &'a str, Value);

/// Runs `steps` in order against the daemon of `args`, each checked.
fn steps(host: &Host, args: &Value, steps: &[Step<'_>]) {
    for (fun, name, test, result, comment, changes) in steps {
        let r = state(host, fun, name, args.clone(), *test);
        assert_eq!(
            outcome(&r),
            (*result, comment.to_string(), changes.clone()),
            "{fun} {name} test={test}"
        );
    }
}

#[test]
fn running_dead_and_watch_drive_a_real_supervisord() {
    if !has("supervisord") || !has("supervisorctl") {
        println!("skipped: supervisord is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let daemon = Daemon::start();
    let host = host();
    let conf = daemon.conf();
    let args = json!({"conf_file": conf.display().to_string()});

    // A stopped program: status sees it as STOPPED (not Salt's "ERROR:").
    let status = exec(&host, "supervisord.status", vec![], &conf);
    assert_eq!(status["sleeper"]["state"], "STOPPED", "{status}");
    assert_eq!(pid(&host, "sleeper", &conf), None);

    // test=True predicts, changes nothing.
    let started = json!({"sleeper": "Starting service: sleeper"});
    steps(
        &host,
        &args,
        &[(
            "running",
            "sleeper",
            true,
            None,
            "Service sleeper will be started",
            json!({}),
        )],
    );
    assert_eq!(pid(&host, "sleeper", &conf), None);
    steps(
        &host,
        &args,
        &[(
            "running",
            "sleeper",
            false,
            Some(true),
            "Starting service: sleeper",
            started,
        )],
    );
    let first = pid(&host, "sleeper", &conf).expect("sleeper runs");

    // Applied twice: nothing to do.
    steps(
        &host,
        &args,
        &[
            (
                "running",
                "sleeper",
                false,
                Some(true),
                "Not starting already running service: sleeper",
                json!({}),
            ),
            (
                "running",
                "sleeper",
                true,
                Some(true),
                "Service sleeper is already running",
                json!({}),
            ),
        ],
    );
    assert_eq!(
        pid(&host, "sleeper", &conf).as_deref(),
        Some(first.as_str())
    );

    // A watched change restarts it: a new process.
    let restarted = json!({"sleeper": "Restarting service: sleeper"});
    steps(
        &host,
        &args,
        &[(
            "mod_watch",
            "sleeper",
            false,
            Some(true),
            "Restarting service: sleeper",
            restarted,
        )],
    );
    let second = pid(&host, "sleeper", &conf).expect("sleeper runs again");
    assert_ne!(first, second, "mod_watch did not restart the program");

    // dead stops it, then has nothing to do.
    let stopped = json!({"sleeper": "Stopping service: sleeper"});
    steps(
        &host,
        &args,
        &[
            (
                "dead",
                "sleeper",
                true,
                None,
                "Service sleeper is set to be stopped",
                json!({}),
            ),
            (
                "dead",
                "sleeper",
                false,
                Some(true),
                "Stopping service: sleeper",
                stopped,
            ),
        ],
    );
    assert_eq!(pid(&host, "sleeper", &conf), None);
    steps(
        &host,
        &args,
        &[(
            "dead",
            "sleeper",
            false,
            Some(true),
            "Service sleeper is not running",
            json!({}),
        )],
    );
    let d = state(&host, "dead", "nosuch", args.clone(), false);
    assert_eq!(d.comment, "Service nosuch doesn't exist");
}

#[test]
fn groups_and_new_programs_are_started_and_added() {
    if !has("supervisord") || !has("supervisorctl") {
        println!("skipped: supervisord is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let daemon = Daemon::start();
    let host = host();
    let conf = daemon.conf();
    let args = json!({"conf_file": conf.display().to_string()});

    // A group, named with Salt's trailing `:*`.
    let started = json!({"grp:": "Starting group: grp:"});
    steps(
        &host,
        &args,
        &[
            (
                "running",
                "grp:*",
                true,
                None,
                "All services in group 'grp:' will be started",
                json!({}),
            ),
            (
                "running",
                "grp:*",
                false,
                Some(true),
                "Starting group: grp:",
                started,
            ),
        ],
    );
    assert!(pid(&host, "grp:napper", &conf).is_some());
    steps(
        &host,
        &args,
        &[(
            "running",
            "grp:",
            false,
            Some(true),
            "Not starting already running group: grp:",
            json!({}),
        )],
    );

    // A program new to the config is reread, added and started.
    daemon.add_program("fresh");
    steps(
        &host,
        &args,
        &[(
            "running",
            "fresh",
            true,
            None,
            "Service fresh will be added and started",
            json!({}),
        )],
    );
    let r = state(&host, "running", "fresh", args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        serde_json::to_value(&r.changes).unwrap(),
        json!({"fresh": "Adding service: fresh Starting: fresh"})
    );
    assert!(pid(&host, "fresh", &conf).is_some());
    let again = state(&host, "running", "fresh", args.clone(), false);
    assert_eq!(again.changes.len(), 0, "{}", again.comment);

    // The execution functions over the same daemon.
    let out = exec(&host, "supervisord.stop", vec![json!("fresh")], &conf);
    assert_eq!(out, json!("fresh: stopped"));
    let out = exec(
        &host,
        "supervisord.status_bool",
        vec![json!("fresh")],
        &conf,
    );
    assert_eq!(out, json!(true));
    let out = exec(
        &host,
        "supervisord.status_bool",
        vec![json!("fresh"), json!("RUNNING")],
        &conf,
    );
    assert_eq!(out, json!(false));
    let out = exec(&host, "supervisord.remove", vec![json!("fresh")], &conf);
    assert_eq!(out, json!("fresh: removed process group"));
    let out = exec(
        &host,
        "supervisord.custom",
        vec![json!("status fresh")],
        &conf,
    );
    assert_eq!(out, json!("fresh: ERROR (no such process)"));
    let out = exec(&host, "supervisord.options", vec![json!("sleeper")], &conf);
    assert_eq!(out["command"], "sleep 1000");
    assert_eq!(out["autostart"], false);
    assert_eq!(out["startsecs"], 0);
}

#[test]
fn an_unreachable_daemon_is_a_clear_failure() {
    if !has("supervisorctl") {
        println!("skipped: supervisorctl is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("supervisord.conf");
    std::fs::write(
        &conf,
        format!(
            "[supervisorctl]\nserverurl=unix://{}/nosock\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let host = host();
    let r = state(
        &host,
        "running",
        "sleeper",
        json!({"conf_file": conf.display().to_string()}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment
            .contains("is supervisord running with this conf_file?"),
        "{}",
        r.comment
    );
}

/// The whole engine: `state.apply` of an SLS whose program watches a
/// config file. A changed file restarts the program through `mod_watch`;
/// an unchanged one leaves it alone.
#[test]
fn a_watched_file_restarts_the_program_through_the_engine() {
    if !has("supervisord") || !has("supervisorctl") {
        println!("skipped: supervisord is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let daemon = Daemon::start();
    let conf = daemon.conf();
    let tree = tempfile::tempdir().unwrap();
    let app_conf = tree.path().join("app.conf");
    std::fs::create_dir_all(tree.path().join("salt")).unwrap();
    std::fs::write(
        tree.path().join("salt/app.sls"),
        format!(
            "app_conf:\n  file.managed:\n    - name: {}\n    - contents: v1\n\
             sleeper:\n  supervisord.running:\n    - conf_file: {}\n    - watch:\n      - file: app_conf\n",
            app_conf.display(),
            conf.display()
        ),
    )
    .unwrap();
    let opts = json!({
        "id": "sv01",
        "file_client": "local",
        "local": true,
        "file_roots": {"base": [tree.path().join("salt")]},
        "pillar_roots": {"base": [tree.path().join("pillar")]},
    });
    let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
    assert!(errors.is_empty(), "{errors:?}");
    let apply = || {
        host.call(
            "state.apply",
            &Args {
                positional: vec![json!("app")],
                kwargs: Default::default(),
            },
        )
        .unwrap()
    };
    let sleeper = |ret: &Value| {
        ret.as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.starts_with("supervisord_|-sleeper"))
            .map(|(_, v)| (v["comment"].clone(), v["changes"].clone()))
            .unwrap_or_else(|| panic!("no sleeper in {ret}"))
    };

    // First run: the file is created and the program started (its own
    // change, so no mod_watch on top).
    let ret = apply();
    assert_eq!(
        sleeper(&ret),
        (
            json!("Starting service: sleeper"),
            json!({"sleeper": "Starting service: sleeper"})
        )
    );
    let first = pid(&host, "sleeper", &conf).expect("running");

    // Second run: nothing changed, nothing restarted.
    let ret = apply();
    assert_eq!(
        sleeper(&ret),
        (
            json!("Not starting already running service: sleeper"),
            json!({})
        )
    );
    assert_eq!(
        pid(&host, "sleeper", &conf).as_deref(),
        Some(first.as_str())
    );

    // The file drifted: file.managed puts it back, the watch restarts.
    std::fs::write(&app_conf, "drifted\n").unwrap();
    let ret = apply();
    assert_eq!(
        sleeper(&ret),
        (
            json!("Restarting service: sleeper"),
            json!({"sleeper": "Restarting service: sleeper"})
        )
    );
    let second = pid(&host, "sleeper", &conf).expect("running again");
    assert_ne!(first, second, "the watch did not restart the program");
}
