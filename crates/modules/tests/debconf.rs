//! `debconf.set` and the debconf execution functions through the real
//! `debconf-set-selections`/`debconf-get-selections`, on a throwaway
//! debconf database: `DEBCONF_SYSTEMRC` points debconf at a config whose
//! databases live in a temp dir, so the host's database is never touched.
//! The expected returns are what Salt 3008.5 gave with the same database.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use halite_modules::{Args, Host};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

fn host() -> Host {
    common::host_with(json!({}), json!({"os_family": "Debian"}))
}

fn set_state(host: &Host, name: &str, data: Value, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!("debconf"));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    chunk.insert("data".into(), data);
    chunk.insert("fun".into(), json!("set"));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    host.states
        .get("debconf")
        .expect("debconf states")
        .call("set", &call)
        .unwrap_or_else(|e| panic!("debconf.set: {e}"))
}

#[test]
fn debconf_set_preseeds_answers_like_salt() {
    if halite_modules::grains::hw::which("debconf-set-selections").is_none()
        || halite_modules::grains::hw::which("debconf-get-selections").is_none()
    {
        println!("skipped: needs debconf-utils (apt-get install debconf-utils)");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("debconf.conf");
    std::fs::write(
        &conf,
        format!(
            "Config: configdb\nTemplates: templatedb\n\nName: configdb\nDriver: File\nFilename: {0}/config.dat\n\nName: templatedb\nDriver: File\nMode: 644\nFilename: {0}/templates.dat\n",
            dir.path().display()
        ),
    )
    .expect("write debconf.conf");
    // This test binary holds this one test: no other thread reads the env.
    std::env::set_var("DEBCONF_SYSTEMRC", &conf);
    let host = host();
    let pkg = "halite-t-pkg";
    let data = json!({
        "halite-t-pkg/color": {"type": "string", "value": "blue"},
        "halite-t-pkg/enable": {"type": "boolean", "value": true},
        "halite-t-pkg/secret": {"type": "password", "value": "hunter2"},
    });
    let r = set_state(&host, pkg, data.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(
        Value::Object(r.changes),
        json!({"halite-t-pkg/color": "New value: blue", "halite-t-pkg/enable": "New value: true", "halite-t-pkg/secret": "New value: hunter2"})
    );
    let r = set_state(&host, pkg, data.clone(), false);
    assert_eq!((r.result, r.comment.as_str()), (Some(true), ""));
    assert_eq!(
        Value::Object(r.changes),
        json!({"halite-t-pkg/color": "blue", "halite-t-pkg/enable": "true", "halite-t-pkg/secret": "(password hidden)"})
    );
    let r = set_state(&host, pkg, data, false);
    assert_eq!(r.comment, "All specified answers are already set");
    assert!(r.changes.is_empty());
    let shown = host
        .call(
            "debconf.show",
            &Args {
                positional: vec![json!(pkg)],
                kwargs: Default::default(),
            },
        )
        .expect("debconf.show");
    assert_eq!(
        shown,
        json!([
            ["halite-t-pkg/color", "string", "blue"],
            ["halite-t-pkg/enable", "boolean", "true"],
            ["halite-t-pkg/secret", "password", "hunter2"]
        ])
    );
    let r = set_state(
        &host,
        pkg,
        json!({"halite-t-pkg/color": {"type": "string", "value": "red"}}),
        false,
    );
    assert_eq!(
        Value::Object(r.changes),
        json!({"halite-t-pkg/color": "red"})
    );
    assert!(std::fs::read_to_string(dir.path().join("config.dat"))
        .expect("the temp database")
        .contains("Value: red"));

    // set_file: a selections template rendered, then fed to debconf.
    let sel = dir.path().join("sel.j2");
    std::fs::write(&sel, "halite-t-pkg halite-t-pkg/color string {{ color }}\n").expect("write");
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!("debconf"));
    chunk.insert("name".into(), json!("preseed"));
    chunk.insert("__id__".into(), json!("preseed"));
    chunk.insert("source".into(), json!(sel.display().to_string()));
    chunk.insert("template".into(), json!("jinja"));
    chunk.insert("context".into(), json!({"color": "green"}));
    chunk.insert("fun".into(), json!("set_file"));
    let chunk = LowChunk::from(chunk);
    for (test, result, comment) in [
        (true, None, "Debconf selections would have been set."),
        (false, Some(true), "Debconf selections were set."),
    ] {
        let call = StateCall {
            chunk: &chunk,
            test,
            env: &host,
            sfun: None,
            reqs: None,
        };
        let r = host
            .states
            .get("debconf")
            .expect("debconf states")
            .call("set_file", &call)
            .expect("debconf.set_file");
        assert_eq!((r.result, r.comment.as_str()), (result, comment));
    }
    assert!(std::fs::read_to_string(dir.path().join("config.dat"))
        .expect("the temp database")
        .contains("Value: green"));
}
