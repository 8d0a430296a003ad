//! Issue 25: work shared between renders (compiled templates, shared
//! parses) never leaks one render's inputs into another's output.
//! Real files in temp dirs, read through a real `TemplateSource`.
#![allow(
    clippy::unwrap_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use common::Tree;
use serde_json::json;

/// One template text rendered for two minions (different grains, pillar,
/// and file roots whose imported macro differs): each gets its own, in
/// either order and repeatedly, though the template is compiled once.
#[test]
fn one_compiled_template_renders_each_minions_own_inputs() {
    let main = "{% from 'lib/macros.jinja' import greet %}\n\
                {{ grains['id'] }}_state:\n  test.nop:\n    - name: {{ greet(pillar['who']) }} on {{ grains['os'] }}\n";
    let a = Tree::new(&[
        ("app.sls", main),
        (
            "lib/macros.jinja",
            "{% macro greet(x) %}hello {{ x }}{% endmacro %}",
        ),
    ]);
    let b = Tree::new(&[
        ("app.sls", main),
        (
            "lib/macros.jinja",
            "{% macro greet(x) %}bye {{ x }}{% endmacro %}",
        ),
    ]);
    let render = |tree: &Tree, id: &str, os: &str, who: &str| {
        let mut ctx = tree.context("app", "app.sls");
        ctx.grains = json!({"id": id, "os": os});
        ctx.opts = json!({"id": id});
        ctx.pillar = json!({"who": who});
        halite_render::render_sls(main, &ctx).unwrap()
    };
    for _ in 0..3 {
        assert_eq!(
            render(&a, "web1", "Debian", "alice"),
            json!({"web1_state": {"test.nop": [{"name": "hello alice on Debian"}]}})
        );
        assert_eq!(
            render(&b, "db1", "RedHat", "bob"),
            json!({"db1_state": {"test.nop": [{"name": "bye bob on RedHat"}]}})
        );
    }
}

/// The same template name with a changed text (a file edited between two
/// jobs) renders the new text, and a syntax error is reported each time.
#[test]
fn a_changed_template_under_the_same_name_is_compiled_again() {
    let tree = Tree::new(&[]);
    let ctx = tree.context("edited", "edited.sls");
    let v1 = "a:\n  test.nop:\n    - name: {{ 'v1' }}\n";
    let v2 = "a:\n  test.nop:\n    - name: {{ 'v2' }}\n";
    for (text, want) in [(v1, "v1"), (v2, "v2"), (v1, "v1")] {
        let data = halite_render::render_sls(text, &ctx).unwrap();
        assert_eq!(data["a"]["test.nop"][0]["name"], json!(want));
    }
    for _ in 0..2 {
        let error = halite_render::render_sls("a: {{ x \n", &ctx)
            .unwrap_err()
            .to_string();
        assert!(error.contains("expected"), "{error}");
    }
}
