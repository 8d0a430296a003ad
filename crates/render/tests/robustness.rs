//! Bad input is an error, never a panic: every prefix of real templates and
//! YAML documents goes through the loader and the renderer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;
use common::*;

fn prefixes(text: &str, step: usize) -> impl Iterator<Item = &str> {
    text.char_indices()
        .map(|(i, _)| i)
        .step_by(step)
        .map(move |i| &text[..i])
}

#[test]
fn every_prefix_of_yaml_loads_or_errors() {
    let document = "a: &x {k: [1, 'two', \"thr\\\"ee\"], m: {<<: *x}}\nb:\n  - |\n    block ü\n  - >-\n    folded\n  - !!str 5\n  - *x\nc: {? complex : 1}\n\"q\": 'it''s'\n";
    let mut outcomes = (0, 0);
    for prefix in prefixes(document, 1) {
        match halite_render::yaml::load(prefix) {
            Ok(_) => outcomes.0 += 1,
            Err(e) => {
                assert!(!e.message.is_empty());
                outcomes.1 += 1;
            }
        }
    }
    assert!(
        outcomes.0 > 0 && outcomes.1 > 0,
        "both outcomes seen: {outcomes:?}"
    );
}

#[test]
fn every_prefix_of_a_template_renders_or_errors() {
    let template = include_str!("fixtures/salt_checks.jinja");
    let tree = Tree::new(&[]);
    let ctx = tree.context("", "");
    let mut errors = 0;
    for prefix in prefixes(template, 3) {
        if let Err(e) = halite_render::render_text(prefix, "jinja", &ctx) {
            assert!(!e.to_string().is_empty());
            errors += 1;
        }
    }
    assert!(errors > 0, "truncated templates must fail somewhere");
}

#[test]
fn every_prefix_of_an_sls_renders_or_errors() {
    let sls = "{% set d = {'a': [1, {'b': 'c'}]} %}\n{% load_yaml as y %}\nk: [1, 2]\n{% endload %}\nid-{{ d.a[0] }}:\n  test.nop:\n    - x: {{ d|yaml }}\n    - y: {{ y|json }}\n    - z: '{{ \"%s\" % d.a[1].b }}'\n";
    let tree = Tree::new(&[]);
    let ctx = tree.context("t", "t.sls");
    let mut rendered = 0;
    for prefix in prefixes(sls, 1) {
        if halite_render::render_sls(prefix, &ctx).is_ok() {
            rendered += 1;
        }
    }
    assert!(rendered > 0);
    assert_eq!(
        halite_render::render_sls(sls, &ctx).map_err(|e| e.to_string()),
        Ok(
            serde_json::json!({"id-1": {"test.nop": [{"x": {"a": [1, {"b": "c"}]}}, {"y": {"k": [1, 2]}}, {"z": "c"}]}})
        )
    );
}
