//! Templates rendered by the real Salt 3008.5 (`salt-call --local
//! slsutil.renderer path=salt://checks.jinja default_renderer=jinja`, with an
//! empty pillar); halite must print the same text. The fixture covers
//! filters, tests, Python methods and printing, and the pure functions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;
use common::*;
use serde_json::json;

#[test]
fn salt_filter_and_method_outputs_match_byte_for_byte() {
    let template = include_str!("fixtures/salt_checks.jinja");
    let expected = include_str!("fixtures/salt_checks.expected");
    let tree = Tree::new(&[]);
    let mut ctx = tree.context("", "");
    ctx.pillar = json!({});
    ctx.opts = json!({"file_client": "local"});
    let rendered = halite_render::render_text(template, "jinja", &ctx).map_err(|e| e.to_string());
    let rendered = match rendered {
        Ok(text) => text,
        Err(e) => panic!("render failed: {e}"),
    };
    for (number, (ours, salts)) in rendered.lines().zip(expected.lines()).enumerate() {
        assert_eq!(ours, salts, "line {} differs", number + 1);
    }
    assert_eq!(rendered, expected);
}

#[test]
fn yaml_and_json_filters_match_pyyaml_byte_for_byte() {
    // Flow and block `|yaml` with quoting, wrapping at 80 columns and
    // multi-line strings; `|json(indent=2)`; scalars. Rendered by Salt 3008.5.
    let template = include_str!("fixtures/salt_dump.jinja");
    let expected = include_str!("fixtures/salt_dump.expected");
    let tree = Tree::new(&[]);
    let rendered = halite_render::render_text(template, "jinja", &tree.context("", ""))
        .map_err(|e| e.to_string());
    assert_eq!(rendered.as_deref(), Ok(expected));
}

#[test]
fn jinja_idioms_match_salt_byte_for_byte() {
    // call/caller, tuple assignment, inline if, slices, arithmetic, loop
    // helpers, raw blocks, tojson, builtin filters and tests. Rendered by Salt 3008.5.
    let template = include_str!("fixtures/salt_idioms.jinja");
    let expected = include_str!("fixtures/salt_idioms.expected");
    let tree = Tree::new(&[]);
    let rendered = halite_render::render_text(template, "jinja", &tree.context("", ""))
        .map_err(|e| e.to_string());
    assert_eq!(rendered.as_deref(), Ok(expected));
}
