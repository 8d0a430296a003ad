//! The module registries: every function a registry lists dispatches to
//! a handler, and adding a module is one table registered by one line.
//!
//! A module declares its functions once, as rows of a table (name ->
//! handler); the registry lists the names of those rows and dispatches
//! through the same rows, so the two cannot disagree by construction.
//! What these tests still catch is a handler that answers "not
//! available" itself (a handler shared by several rows that forgets one of
//! its names), and they show a module defined in a test going through the
//! registries the way a shipped one does.
//!
//! Every probe runs in test mode, with empty arguments, an `os_family`
//! that has no package provider and file roots in a temp dir, so nothing
//! on the machine is changed: the calls fail on their arguments, which is
//! all a dispatch check needs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use halite_modules::exec::{ExecFunction, ExecTable};
use halite_modules::host::LogEvents;
use halite_modules::{table, Args, ExecError, ExecModules, Host, LocalFileClient};
use halite_state::{
    LowChunk, Map, StateCall, StateError, StateFunction, StateModules, StateResult, StateTable,
    Value,
};
use serde_json::json;

/// A host that cannot change anything: test mode, no package provider,
/// empty file roots under `root`.
fn probe_host(root: &Path, exec: ExecModules, states: StateModules) -> Host {
    let files = root.join("roots");
    std::fs::create_dir_all(&files).expect("file roots");
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![files.clone()]);
    Host {
        opts: json!({
            "test": true,
            "cachedir": root.join("cache").display().to_string(),
            "file_roots": {"base": [files.display().to_string()]},
            "pillar_roots": {"base": [root.join("pillar").display().to_string()]},
        }),
        // No provider serves this family, so pkg/lowpkg/pkgrepo stop
        // before asking the package manager anything.
        grains: json!({"os_family": "HaliteDispatchProbe", "id": "probe"}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec,
        states,
        events: Arc::new(LogEvents),
    }
}

/// The probes run on this many threads: most of a probe's time is a
/// child process failing (firewall-cmd starting Python to find no bus,
/// pip asking an index), so the file's time is the slowest probe's rather
/// than their sum.
const PROBE_THREADS: usize = 16;

/// `keep(item)` for every item, on [`PROBE_THREADS`] threads; the kept
/// items in their order.
fn probe_all<T: Sync>(items: &[T], keep: impl Fn(&T) -> Option<String> + Sync) -> Vec<String> {
    let chunk = items.len().div_ceil(PROBE_THREADS).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().filter_map(&keep).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a probe thread panicked"))
            .collect()
    })
}

/// Every listed execution function whose call answers "not available".
fn exec_not_dispatched(host: &Host) -> Vec<String> {
    let listed = host.exec.list_functions();
    probe_all(&listed, |f| {
        matches!(
            host.exec.call(f, &Args::default(), host),
            Err(ExecError::NotAvailable(_))
        )
        .then(|| f.to_string())
    })
}

/// Every listed state function whose call answers "not available" (the
/// text a table gives a name it has no row for).
fn states_not_dispatched(host: &Host, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rows = Vec::new();
    for m in host.states.names() {
        match host.states.get(m) {
            Some(module) => rows.extend(module.functions().into_iter().map(|f| (m, module, f))),
            None => out.push(format!("{m} (listed, not registered)")),
        }
    }
    out.extend(probe_all(&rows, |&(m, module, f)| {
        let mut low = Map::new();
        low.insert("state".into(), json!(m));
        low.insert("fun".into(), json!(f));
        low.insert("name".into(), json!(name));
        low.insert("__id__".into(), json!("probe"));
        low.insert("__sls__".into(), json!("probe"));
        low.insert("__env__".into(), json!("base"));
        let chunk = LowChunk::from(low);
        let call = StateCall {
            chunk: &chunk,
            test: true,
            env: host,
            sfun: None,
            reqs: None,
        };
        let text = module.call(f, &call).err()?.to_string();
        (text == format!("{m}.{f} is not available")
            || text == format!("'{m}.{f}' is not available."))
        .then(|| format!("{m}.{f}"))
    }));
    out
}

#[test]
fn every_listed_execution_function_dispatches() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let host = probe_host(tmp.path(), table::exec_modules(), table::state_modules());
    let listed = host.exec.list_functions();
    // The registry holds every shipped module, the grains one included.
    for f in [
        "cmd.run",
        "grains.get",
        "state.apply",
        "status.time",
        "test.ping",
    ] {
        assert!(listed.iter().any(|l| l == f), "{f} is not listed");
    }
    assert_eq!(exec_not_dispatched(&host), Vec::<String>::new());
}

#[test]
fn every_listed_state_function_dispatches() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let host = probe_host(tmp.path(), table::exec_modules(), table::state_modules());
    let name = tmp.path().join("absent").display().to_string();
    let names: Vec<&str> = host.states.names().collect();
    assert!(
        names.contains(&"file") && names.contains(&"group"),
        "{names:?}"
    );
    assert_eq!(states_not_dispatched(&host, &name), Vec::<String>::new());
}

/// A table whose shared handler forgets one of its names: the probes
/// must report it, or they could not catch a real one.
#[test]
fn the_probes_report_a_handler_that_is_not_available() {
    fn shared(fun: &str) -> Result<Value, ExecError> {
        match fun {
            "one" => Ok(json!(1)),
            other => Err(ExecError::NotAvailable(format!("broken.{other}"))),
        }
    }
    const BROKEN_EXEC: ExecTable = ExecTable {
        name: "broken",
        functions: &[
            ExecFunction::new("one", |_, _| shared("one")),
            ExecFunction::new("two", |_, _| shared("two")),
        ],
    };
    const BROKEN_STATE: StateTable = StateTable {
        name: "broken",
        functions: &[StateFunction::new("present", |c| {
            Err(StateError::Other(format!(
                "broken.{} is not available",
                c.chunk.fun()
            )))
        })],
    };
    let mut exec = ExecModules::default();
    exec.register(Arc::new(BROKEN_EXEC));
    let mut states = StateModules::new();
    states.register(Arc::new(BROKEN_STATE));
    let tmp = tempfile::tempdir().expect("tempdir");
    let host = probe_host(tmp.path(), exec, states);
    assert_eq!(exec_not_dispatched(&host), vec!["broken.two".to_string()]);
    assert_eq!(
        states_not_dispatched(&host, "x"),
        vec!["broken.present".to_string()]
    );
}

/// Adding a module: one table (here defined in the test) and one line
/// registering it. The registries list its functions, dispatch to them,
/// refuse the names it does not have with Salt's texts, and the state
/// engine runs it from SLS data like any shipped module.
#[test]
fn a_module_is_one_table_and_one_line() {
    /// `hello.greet <who>`: a greeting.
    fn greet(args: &Args, _host: &Host) -> Result<Value, ExecError> {
        let who = args.require_str(0, "who", "greet")?;
        Ok(Value::from(format!("hello {who}")))
    }
    const HELLO_EXEC: ExecTable = ExecTable {
        name: "hello",
        functions: &[ExecFunction::new("greet", greet)],
    };
    /// `hello.said`: writes `text` to the file `name`, reporting the
    /// change as Salt states do, and predicting it under `test=True`.
    fn said(call: &StateCall<'_>) -> Result<StateResult, StateError> {
        let path = call.name().to_string();
        let text = call.require_str("text")?;
        if std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
            return Ok(StateResult::ok(&path, "Already said"));
        }
        let mut ret = StateResult::ok(&path, "Said");
        ret.changes.insert("text".into(), Value::from(text.clone()));
        if call.test {
            ret.result = None;
            ret.comment = "Would say".into();
            return Ok(ret);
        }
        std::fs::write(&path, &text).map_err(|e| StateError::Other(e.to_string()))?;
        Ok(ret)
    }
    const HELLO_STATE: StateTable = StateTable {
        name: "hello",
        functions: &[StateFunction::new("said", said)],
    };

    let tmp = tempfile::tempdir().expect("tempdir");
    let mut exec = table::exec_modules();
    exec.register(Arc::new(HELLO_EXEC)); // the one line
    let mut states = table::state_modules();
    states.register(Arc::new(HELLO_STATE)); // the one line
    let host = probe_host(tmp.path(), exec, states);

    // Listed and dispatched, by the registry and by sys.*.
    assert!(host.exec.has("hello.greet"));
    let mut args = Args::default();
    args.positional.push(json!("world"));
    assert_eq!(
        host.call("hello.greet", &args).expect("greet"),
        json!("hello world")
    );
    let listed = host
        .call("sys.list_functions", &Args::default())
        .expect("sys.list_functions");
    assert!(listed
        .as_array()
        .is_some_and(|a| a.contains(&json!("hello.greet"))));
    let state_fns = host
        .call("sys.list_state_functions", &Args::default())
        .expect("sys.list_state_functions");
    assert!(state_fns
        .as_array()
        .is_some_and(|a| a.contains(&json!("hello.said"))));
    // A name it has no row for gets Salt's text.
    assert_eq!(
        host.call("hello.wave", &Args::default())
            .map_err(|e| e.to_string())
            .expect_err("hello.wave"),
        "'hello.wave' is not available."
    );
    assert!(host.states.has("hello", "said") && !host.states.has("hello", "wave"));

    // The engine runs it from SLS data, as any shipped module.
    let target = tmp.path().join("greeting");
    let sls = tmp.path().join("roots").join("hello.sls");
    std::fs::write(
        &sls,
        format!(
            "greeting:\n  hello.said:\n    - name: {}\n    - text: hi\n",
            target.display()
        ),
    )
    .expect("write sls");
    let mut run = Args::default();
    run.positional.push(json!("hello"));
    run.kwargs.insert("test".into(), json!(false));
    let out = host.call("state.sls", &run).expect("state.sls");
    let ret = out
        .as_object()
        .and_then(|m| m.values().next())
        .cloned()
        .expect("one state ran");
    assert_eq!(ret["result"], json!(true), "{out}");
    assert_eq!(ret["changes"], json!({"text": "hi"}), "{out}");
    assert_eq!(std::fs::read_to_string(&target).expect("said"), "hi");
}
