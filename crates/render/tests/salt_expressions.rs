//! 1991 expressions rendered one by one by Salt 3008.5's `render_jinja_tmpl`
//! (grains `{'os': 'Debian'}`, empty pillar): every value kind through every
//! common filter and test, Python methods, operators, `%` formatting, loops,
//! macros and Salt's tags.
//!
//! Where Salt renders, halite must print the same text, except for the
//! reviewed list in `fixtures/salt_expressions_known_differences.json`
//! (Python internals such as `range(0, 3)`, `dict_keys([...])`, iterator
//! reprs and set ordering; see docs/renderer.md). Where Salt raises (mostly
//! Python type errors such as `1|md5`), halite may be more lenient.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;
use common::*;
use serde_json::{json, Value};

fn load(text: &str) -> Vec<Value> {
    match serde_json::from_str(text) {
        Ok(Value::Array(items)) => items,
        other => panic!("bad fixture: {other:?}"),
    }
}

#[test]
fn expressions_print_what_salt_prints() {
    let cases = load(include_str!("fixtures/salt_expressions.json"));
    let known: Vec<String> = load(include_str!(
        "fixtures/salt_expressions_known_differences.json"
    ))
    .into_iter()
    .filter_map(|v| v.as_str().map(str::to_string))
    .collect();
    let tree = Tree::new(&[]);
    let mut ctx = tree.context("", "");
    ctx.grains = json!({"os": "Debian"});
    ctx.pillar = json!({});
    ctx.opts = json!({});
    let (mut same, mut lenient, mut known_seen) = (0, 0, 0);
    let mut differ = Vec::new();
    for case in &cases {
        let template = case["template"].as_str().unwrap_or_default();
        let ours = halite_render::render_text(template, "jinja", &ctx).map_err(|e| e.to_string());
        match (case.get("output").and_then(Value::as_str), &ours) {
            (Some(expected), Ok(got)) if got == expected => same += 1,
            (None, Err(_)) => same += 1,
            (None, Ok(_)) => lenient += 1,
            _ if known.iter().any(|k| k == template) => known_seen += 1,
            (expected, got) => differ.push(format!(
                "{template}\n    salt: {expected:?}\n    ours: {got:?}"
            )),
        }
    }
    println!(
        "{same} same, {lenient} lenient where Salt raises, {known_seen} known differences, of {}",
        cases.len()
    );
    assert!(
        differ.is_empty(),
        "{} new differences:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert!(same >= 1700, "only {same} of {} match", cases.len());
}
