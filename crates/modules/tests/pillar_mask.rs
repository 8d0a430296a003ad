//! `pillar.items`, `pillar.get`, `pillar.item` and `pillar.raw` mask their
//! return as Salt 3008.5 does (every non-empty value `**********` unless
//! `unmask=True`; `pillar.raw` the other way round; `pillar_mask_output:
//! False` for `pillar.items`), on a host whose pillar is compiled from real
//! `pillar_roots` files in a temp dir. The expected returns are what
//! `salt-call --local --out=json` gave for the same tree.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{Args, Host};
use serde_json::{json, Value};

const DATA_SLS: &str = "pw: hunter2\nn: 5\nz: 0\ne: \"\"\nt: true\nf: false\nnested:\n  a: [x, 1, \"\", {b: c}]\n  none: null\n";

fn host(dir: &Path, extra: Value) -> Host {
    host_with(dir, extra, DATA_SLS)
}

fn host_with(dir: &Path, extra: Value, data_sls: &str) -> Host {
    std::fs::create_dir_all(dir.join("pillar")).unwrap();
    std::fs::write(dir.join("pillar/top.sls"), "base:\n  '*':\n    - data\n").unwrap();
    std::fs::write(dir.join("pillar/data.sls"), data_sls).unwrap();
    let mut opts = json!({
        "id": "oracle",
        "file_client": "local",
        "file_roots": {"base": [dir.join("srv")]},
        "pillar_roots": {"base": [dir.join("pillar")]},
        "cachedir": dir.join("cache"),
    });
    for (k, v) in extra.as_object().unwrap() {
        opts[k] = v.clone();
    }
    let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
    assert!(errors.is_empty(), "{errors:?}");
    host
}

fn call(host: &Host, fun: &str, positional: &[&str], kwargs: Value) -> Value {
    let args = Args {
        positional: positional.iter().map(|s| Value::from(*s)).collect(),
        kwargs: kwargs.as_object().unwrap().clone(),
    };
    host.call(fun, &args).unwrap()
}

#[test]
fn pillar_returns_are_masked_as_salt_masks_them() {
    let dir = tempfile::tempdir().unwrap();
    let h = host(dir.path(), json!({}));
    let plain = json!({"pw": "hunter2", "n": 5, "z": 0, "e": "", "t": true, "f": false,
        "nested": {"a": ["x", 1, "", {"b": "c"}], "none": null}});
    let masked_nested =
        json!({"a": ["**********", "**********", "", {"b": "**********"}], "none": null});
    let masked = json!({"pw": "**********", "n": "**********", "z": 0, "e": "", "t": "**********",
        "f": false, "nested": masked_nested});
    // (function, positional, kwargs, what Salt 3008.5 returned)
    let cases = [
        ("pillar.items", vec![], json!({}), masked.clone()),
        ("pillar.data", vec![], json!({}), masked.clone()),
        (
            "pillar.items",
            vec![],
            json!({"unmask": true}),
            plain.clone(),
        ),
        (
            "pillar.get",
            vec!["nested"],
            json!({}),
            masked_nested.clone(),
        ),
        ("pillar.get", vec!["pw"], json!({}), json!("**********")),
        ("pillar.fetch", vec!["pw"], json!({}), json!("**********")),
        (
            "pillar.get",
            vec!["pw"],
            json!({"unmask": "True"}),
            json!("hunter2"),
        ),
        (
            "pillar.item",
            vec!["pw", "nested"],
            json!({}),
            json!({"pw": "**********", "nested": masked_nested}),
        ),
        ("pillar.raw", vec![], json!({}), plain.clone()),
        (
            "pillar.raw",
            vec![],
            json!({"unmask": false}),
            masked.clone(),
        ),
        (
            "pillar.keys",
            vec!["nested"],
            json!({}),
            json!(["a", "none"]),
        ),
        (
            "pillar.ls",
            vec![],
            json!({}),
            json!(["pw", "n", "z", "e", "t", "f", "nested"]),
        ),
    ];
    for (fun, positional, kwargs, salt) in cases {
        assert_eq!(
            call(&h, fun, &positional, kwargs.clone()),
            salt,
            "{fun} {positional:?} {kwargs}"
        );
    }
}

#[test]
fn pillar_obfuscate_shows_types_as_salt_does() {
    let sls = "pw: hunter2\nn: 5\nz: 0\nf: 1.5\nt: true\nfa: false\ne: ''\nnone: null\n\
               lst: [secret, 1, [2, 'x'], {k: v}]\n\
               nested:\n  login: somelogin\n  pwd: secret\n  empty: {}\n  el: []\n";
    let dir = tempfile::tempdir().unwrap();
    let h = host_with(dir.path(), json!({}), sls);
    // salt-call --local --out=json pillar.obfuscate (Salt 3008.5): it
    // obfuscates what pillar.items returned, masked values included.
    let masked = json!({"pw": "<str>", "n": "<str>", "z": "<int>", "f": "<str>", "t": "<str>",
        "fa": "<bool>", "e": "<str>", "none": "<NoneType>",
        "lst": ["<str>", "<str>", ["<str>", "<str>"], {"k": "<str>"}],
        "nested": {"login": "<str>", "pwd": "<str>", "empty": {}, "el": []}});
    assert_eq!(call(&h, "pillar.obfuscate", &[], json!({})), masked);
    // ... unmask=True
    let unmasked = json!({"pw": "<str>", "n": "<int>", "z": "<int>", "f": "<float>", "t": "<bool>",
        "fa": "<bool>", "e": "<str>", "none": "<NoneType>",
        "lst": ["<str>", "<int>", ["<int>", "<str>"], {"k": "<str>"}],
        "nested": {"login": "<str>", "pwd": "<str>", "empty": {}, "el": []}});
    assert_eq!(
        call(&h, "pillar.obfuscate", &[], json!({"unmask": true})),
        unmasked
    );
    // Key order is the pillar's, as Salt keeps the dict's.
    let keys: Vec<String> = call(&h, "pillar.obfuscate", &[], json!({}))
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        ["pw", "n", "z", "f", "t", "fa", "e", "none", "lst", "nested"]
    );
}

#[test]
fn pillar_mask_output_false_unmasks_items_only() {
    let dir = tempfile::tempdir().unwrap();
    let h = host(dir.path(), json!({"pillar_mask_output": false}));
    assert_eq!(call(&h, "pillar.items", &[], json!({}))["pw"], "hunter2");
    assert_eq!(call(&h, "pillar.get", &["pw"], json!({})), "**********");
}

#[test]
fn templates_see_real_values_through_salt_calls() {
    // Salt renders with masking off: an SLS's salt['pillar.*'] calls get
    // the values. The Jinja context forwards pillar.item, so the call goes
    // through the execution module.
    let dir = tempfile::tempdir().unwrap();
    let h = host(dir.path(), json!({}));
    let mut kwargs = halite_state::Map::new();
    halite_modules::exec::pillar::unmask_for_render("pillar.get", &mut kwargs);
    let args = Args {
        positional: vec![Value::from("pw")],
        kwargs,
    };
    assert_eq!(h.call("pillar.get", &args).unwrap(), "hunter2");
    // An explicit unmask=False from a template is kept.
    let mut kwargs = json!({"unmask": false}).as_object().unwrap().clone();
    halite_modules::exec::pillar::unmask_for_render("pillar.get", &mut kwargs);
    let args = Args {
        positional: vec![Value::from("pw")],
        kwargs,
    };
    assert_eq!(h.call("pillar.get", &args).unwrap(), "**********");
}
