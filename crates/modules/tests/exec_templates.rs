//! The execution functions templates and `module.run` reach for (issue 19):
//! `config.*`, the newer `file.*`, `hashutil.*`, `status.*`, `disk.*`,
//! `environ.*`, `slsutil.*`, `network.*`... on the real host (temp files,
//! real /proc, loopback), through the registry as every caller reaches them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::Value;
use serde_json::json;

fn host_with(opts: Value, grains: Value, pillar: Value) -> Host {
    Host {
        opts,
        grains,
        pillar,
        files: Arc::new(LocalFileClient::new(BTreeMap::new())),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn host() -> Host {
    host_with(json!({}), json!({}), json!({}))
}

fn call(h: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Result<Value, String> {
    let kwargs = kwargs.as_object().cloned().unwrap_or_default();
    h.call(fun, &Args { positional, kwargs })
        .map_err(|e| e.to_string())
}

fn render(h: &Host, template: &str) -> String {
    let ctx = h.render_context("base", "", "", Default::default());
    halite_render::render_text(template, "jinja", &ctx).expect("renders")
}

#[test]
fn config_get_and_option_answer_from_the_cli_as_templates_do() {
    let h = host_with(
        json!({"id": "m1", "file_client": "local"}),
        json!({"os": "Debian", "id": "grain-id"}),
        json!({"users": {"alice": {"uid": 1001}}, "master": {"from_master": "yes"}}),
    );
    let get = |args: Vec<Value>, kw: Value| call(&h, "config.get", args, kw);
    assert_eq!(get(vec![json!("id")], json!({})), Ok(json!("m1")));
    assert_eq!(get(vec![json!("os")], json!({})), Ok(json!("Debian")));
    assert_eq!(
        get(vec![json!("users:alice:uid")], json!({})),
        Ok(json!(1001))
    );
    assert_eq!(get(vec![json!("from_master")], json!({})), Ok(json!("yes")));
    assert_eq!(get(vec![json!("nope")], json!({})), Ok(json!("")));
    assert_eq!(get(vec![json!("nope"), json!(7)], json!({})), Ok(json!(7)));
    assert_eq!(
        get(vec![json!("id")], json!({"omit_opts": true})),
        Ok(json!("grain-id"))
    );
    assert_eq!(
        get(vec![json!("users/alice/uid")], json!({"delimiter": "/"})),
        Ok(json!(1001))
    );
    assert_eq!(
        get(vec![], json!({})),
        Err("get() missing 1 required positional argument: 'key'".into())
    );
    assert_eq!(
        call(&h, "config.option", vec![json!("file_client")], json!({})),
        Ok(json!("local"))
    );
    // option does not traverse nested keys
    assert_eq!(
        call(&h, "config.option", vec![json!("users:alice")], json!({})),
        Ok(json!(""))
    );
    assert_eq!(
        call(&h, "config.items", vec![], json!({})),
        Ok(json!({"id": "m1", "file_client": "local"}))
    );
    // the template answers the same
    assert_eq!(
        render(
            &h,
            "{{ salt['config.get']('users:alice:uid') }} {{ salt['config.option']('id') }}"
        ),
        "1001 m1"
    );
}
