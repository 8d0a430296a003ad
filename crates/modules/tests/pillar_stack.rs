//! PillarStack (`ext_pillar: - stack: ...`) through the masterless pillar
//! compile (the same `pillar_render::compile_full` the master runs), over
//! the real files of tests/fixtures/pillar_stack: the three config forms
//! (a list of config files, one path, `pillar:`/`grains:`/`opts:` keyed
//! with `__env__`), globs, the four strategies on mappings and lists, at
//! the top and nested, and Jinja with `stack`, `pillar`, `minion_id`,
//! `__grains__` and `ymlpath`. The expected pillars are what Salt 3008.5's
//! `salt-call --local pillar.items unmask=True` gave for the same files.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::PathBuf;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use serde_json::{json, Value};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pillar_stack")
}

fn pillar_with(extra: Value) -> (Value, Vec<String>) {
    let f = fixtures();
    let cache = tempfile::tempdir().unwrap();
    let p = |rel: &str| f.join(rel).display().to_string();
    let mut opts = json!({
        "id": "oracle",
        "file_client": "local",
        "file_roots": {"base": [cache.path().join("srv")]},
        "pillar_roots": {"base": [p("pillar")]},
        "cachedir": cache.path(),
        "ext_pillar": [
            {"stack": [p("stack.cfg"), p("list.cfg"), p("nonexistent.cfg")]},
            {"stack": {
                "pillar:env_name": {"dev": p("dev.cfg"), "prod": p("prod.cfg")},
                "grains:id": {"oracle": [p("grain.cfg")]},
                "opts:pillarenv": {"__env__": p("env/__env__/env.cfg")},
            }},
            {"stack": p("nonexistent2.cfg")},
        ],
    });
    for (k, v) in extra.as_object().unwrap() {
        opts[k] = v.clone();
    }
    let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
    (host.pillar, errors)
}

#[test]
fn stack_configs_strategies_and_jinja_match_salt() {
    let (pillar, errors) = pillar_with(json!({}));
    assert!(errors.is_empty(), "{errors:?}");
    let ymlpath = fixtures().join("roles/extra.yml").display().to_string();
    // Salt 3008.5, salt-call --local pillar.items unmask=True
    let salt = json!({
        "role": "web",
        "env_name": "dev",
        "users": ["alice", "carol"],
        "pkgs": {"nginx": "installed"},
        "motd": "hello oracle from oracle",
        "settings": {"a": 2, "b": ["only"], "c": "scalar-now"},
        "count": 2,
        "old_keys": {"count": null},
        "seen_role": "web-hello oracle from oracle",
        "extra": {"from": "list-cfg", "path": ymlpath},
        "by_pillar": "dev",
        "by_grain": "oracle",
    });
    assert_eq!(pillar, salt);
    // Key order as Salt gives it.
    let keys: Vec<&String> = pillar.as_object().unwrap().keys().collect();
    let want: Vec<&String> = salt.as_object().unwrap().keys().collect();
    assert_eq!(keys, want);
}

#[test]
fn env_keyed_configs_and_top_level_strategies_match_salt() {
    let top = fixtures().join("top.cfg").display().to_string();
    let (pillar, errors) = pillar_with(json!({"pillarenv": "base"}));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(pillar["by_env"], "base-env");
    // A stack of its own: `__: overwrite` at the top drops what was
    // stacked, `__: remove` drops keys, the last file adds.
    let (pillar, errors) = pillar_with(json!({
        "pillarenv": "base",
        "ext_pillar": [{"stack": top}],
    }));
    assert!(errors.is_empty(), "{errors:?}");
    // Salt 3008.5 (the same stack after the others): {q: 1, b: [1]}, no a, no z.
    assert_eq!(
        pillar,
        json!({"role": "web", "env_name": "dev", "q": 1, "b": [1]})
    );
}

#[test]
fn a_bad_strategy_is_an_error_naming_the_source() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.cfg"), "a.yml\n").unwrap();
    std::fs::write(
        dir.path().join("a.yml"),
        "k:\n  __: sideways\n  secretvalue: 1\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.cfg"), "b.yml\n").unwrap();
    std::fs::write(dir.path().join("b.yml"), "k: [secretvalue\n").unwrap();
    let cfg = |n: &str| dir.path().join(n).display().to_string();
    // The first file sets k (its mark dropped); the strategy is read when
    // k is merged again, as in Salt.
    let (_, errors) = pillar_with(json!({"ext_pillar": [{"stack": cfg("s.cfg")}]}));
    assert!(errors.is_empty(), "{errors:?}");
    std::fs::write(dir.path().join("s.cfg"), "a.yml\na.yml\n").unwrap();
    let (_, errors) = pillar_with(json!({"ext_pillar": [{"stack": cfg("s.cfg")}]}));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("ext_pillar stack") && e.contains("Unknown strategy \"sideways\"")),
        "{errors:?}"
    );
    let (_, errors) = pillar_with(json!({"ext_pillar": [{"stack": cfg("b.cfg")}]}));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("Stack pillar yaml parsing error in") && e.contains("b.yml")),
        "{errors:?}"
    );
    // Salt adds the rendered file to that error; halite does not (pillar data).
    assert!(
        !errors.iter().any(|e| e.contains("k: [secretvalue")),
        "{errors:?}"
    );
}
