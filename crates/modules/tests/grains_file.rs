//! The config dir's `grains` file: read at start as a grain source, and
//! written by `grains.setval`/`setvals`/`append`/`remove`/`delval`/
//! `delkey` as Salt writes `/etc/salt/grains` (real files in a temp dir).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::sync::Arc;

use halite_modules::grains::grains_for;
use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use serde_json::{json, Value};

fn make_host(opts: Value) -> Host {
    let grains = Value::Object(grains_for(&opts));
    Host {
        opts,
        grains,
        pillar: json!({}),
        files: Arc::new(LocalFileClient::default()),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn call(host: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Value {
    let args = Args {
        positional,
        kwargs: match kwargs {
            Value::Object(m) => m,
            _ => Default::default(),
        },
    };
    host.call(fun, &args)
        .unwrap_or_else(|e| panic!("{fun} failed: {e}"))
}

#[test]
fn grains_file_is_read_at_start_and_written_by_the_exec_functions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("minion");
    let file = dir.path().join("grains");
    std::fs::write(&file, "roles:\n- web\nos: Custom\ndatacenter: east\n").expect("write grains");
    let opts = json!({
        "conf_file": conf.display().to_string(),
        "grains": {"datacenter": "from-config"},
    });
    let host = make_host(opts);
    // The file is a grain source over the core grains; the config's
    // `grains:` still wins, as in Salt.
    assert_eq!(host.grains["roles"], json!(["web"]));
    assert_eq!(host.grains["os"], json!("Custom"));
    assert_eq!(host.grains["datacenter"], json!("from-config"));

    assert_eq!(
        call(
            &host,
            "grains.setval",
            vec![json!("tier"), json!("db")],
            json!({})
        ),
        json!({"tier": "db"})
    );
    assert_eq!(
        call(&host, "grains.get", vec![json!("tier")], json!({})),
        json!("db"),
        "a later call of the same process sees the new grain"
    );
    assert_eq!(
        call(
            &host,
            "grains.append",
            vec![json!("roles"), json!("db")],
            json!({})
        ),
        json!({"roles": ["web", "db"]})
    );
    assert_eq!(
        call(
            &host,
            "grains.append",
            vec![json!("roles"), json!("db")],
            json!({})
        ),
        json!("The val db was already in the list roles")
    );
    assert_eq!(
        call(
            &host,
            "grains.append",
            vec![json!("os"), json!("x")],
            json!({})
        ),
        json!("The key os is not a valid list")
    );
    assert_eq!(
        call(
            &host,
            "grains.setvals",
            vec![json!({"a": 1, "nested": {"k": "v"}})],
            json!({})
        ),
        json!({"a": 1, "nested": {"k": "v"}})
    );
    assert_eq!(
        call(
            &host,
            "grains.remove",
            vec![json!("roles"), json!("web")],
            json!({})
        ),
        json!({"roles": ["db"]})
    );
    assert_eq!(
        call(&host, "grains.delval", vec![json!("tier")], json!({})),
        json!({"comment": "", "changes": {"tier": null}, "result": true})
    );
    assert_eq!(
        call(&host, "grains.delkey", vec![json!("a")], json!({})),
        json!({"comment": "", "changes": {"a": null}, "result": true})
    );
    assert_eq!(
        call(
            &host,
            "grains.set",
            vec![json!("nested:k2"), json!(2)],
            json!({})
        ),
        json!({"comment": "", "changes": {"nested": {"k": "v", "k2": 2}}, "result": true})
    );
    assert_eq!(
        call(
            &host,
            "grains.set",
            vec![json!("nested"), json!("flat")],
            json!({})
        ),
        json!({"comment": "The key 'nested' exists but is a dict or a list. Use 'force=True' to overwrite.", "changes": {}, "result": false})
    );
    // The file as Salt writes it: safe_dump, block style, keys sorted.
    assert_eq!(
        std::fs::read_to_string(&file).expect("read grains"),
        "datacenter: east\nnested:\n  k: v\n  k2: 2\nos: Custom\nroles:\n- db\ntier: null\n"
    );
    // A new process (a new host) reads it back.
    let again = make_host(json!({"conf_file": conf.display().to_string()}));
    assert_eq!(again.grains["roles"], json!(["db"]));
    assert_eq!(again.grains["tier"], Value::Null);
    assert!(again.grains.get("a").is_none());

    // Bad YAML: a clear error for the writers, skipped at start.
    std::fs::write(&file, "roles: [unclosed\n").expect("write");
    let broken = make_host(json!({"conf_file": conf.display().to_string()}));
    assert!(broken.grains.get("roles").is_none());
    let err = broken
        .call(
            "grains.setval",
            &Args {
                positional: vec![json!("x"), json!(1)],
                kwargs: Default::default(),
            },
        )
        .expect_err("a broken grains file is not overwritten");
    assert!(
        err.to_string()
            .contains("Unable to read existing grains file"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "roles: [unclosed\n",
        "the broken file is left as it was"
    );
}
