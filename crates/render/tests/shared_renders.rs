//! Issue 25: work shared between renders (compiled templates, shared
//! parses) never leaks one render's inputs into another's output.
//! Real files in temp dirs, read through a real `TemplateSource`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
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

/// Render-time functions for the memo tests: `mine.get` answers from data
/// the test changes (a lookup the host can replay), `cmd.run` counts its
/// runs (an effect on the minion: never replayed).
struct Lookups {
    mine: std::sync::Mutex<serde_json::Value>,
    runs: std::sync::atomic::AtomicUsize,
}

impl halite_render::SaltFunctions for Lookups {
    fn has(&self, fun: &str) -> bool {
        matches!(fun, "mine.get" | "cmd.run")
    }
    fn call(
        &self,
        fun: &str,
        _args: &[serde_json::Value],
        _kwargs: &halite_render::Map,
    ) -> Result<serde_json::Value, String> {
        match fun {
            "mine.get" => Ok(self.mine.lock().unwrap().clone()),
            _ => {
                let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(json!(format!("run {n}")))
            }
        }
    }
    fn replayable(&self, fun: &str) -> bool {
        fun == "mine.get"
    }
}

fn lookups() -> Arc<Lookups> {
    Arc::new(Lookups {
        mine: std::sync::Mutex::new(json!({"web1": "10.0.0.1"})),
        runs: std::sync::atomic::AtomicUsize::new(0),
    })
}

use std::sync::Arc;

/// A context for `path` with these grains and pillar.
fn context(
    tree: &Tree,
    path: &str,
    grains: serde_json::Value,
    pillar: serde_json::Value,
    salt: Arc<Lookups>,
) -> halite_render::RenderContext {
    let mut ctx = tree.context(path.trim_end_matches(".sls"), path);
    ctx.opts = json!({"id": grains["id"].clone()});
    ctx.grains = grains;
    ctx.pillar = pillar;
    ctx.salt = salt;
    ctx
}

/// A render is reused for minions whose grains and pillar agree on what
/// it read (the id is not read), and rendered anew for one that differs
/// in any of them; every minion's data is its own render's.
#[test]
fn a_render_is_reused_exactly_when_what_it_read_is_equal() {
    let text = "pkgs:\n  test.nop:\n    - name: {{ grains['os'] }} {{ salt['pillar.get']('motd:text', 'none') }}\n";
    let tree = Tree::new(&[("homog.sls", text)]);
    let salt = lookups();
    let render = |id: &str, os: &str, motd: &str| {
        let ctx = context(
            &tree,
            "homog.sls",
            json!({"id": id, "os": os, "mem": id.len()}),
            json!({"motd": {"text": motd}, "other": id}),
            salt.clone(),
        );
        halite_render::render_sls(text, &ctx).unwrap()["pkgs"]["test.nop"][0]["name"].clone()
    };
    let memo = halite_render::memo::RenderMemo::global();
    assert_eq!(render("m1", "Debian", "hi"), json!("Debian hi"));
    assert_eq!(render("m2", "Debian", "hi"), json!("Debian hi"));
    let before = memo.stats().reused;
    // Unread grains (`id`, `mem`) and pillar (`other`) differ: reused.
    assert_eq!(render("m3", "Debian", "hi"), json!("Debian hi"));
    assert!(memo.stats().reused > before, "{:?}", memo.stats());
    // A read grain or pillar key differs: its own render.
    assert_eq!(render("m4", "RedHat", "hi"), json!("RedHat hi"));
    assert_eq!(render("m5", "Debian", "bye"), json!("Debian bye"));
    assert_eq!(render("m6", "Debian", "hi"), json!("Debian hi"));
}

/// Reads of a whole dict (iteration), the mine (a replayable call whose
/// data changes between two jobs), an imported file that changes, and a
/// call that runs on the minion (never reused).
#[test]
fn whole_dicts_the_mine_imports_and_minion_calls_are_inputs() {
    let text = "{% from 'lib/v.jinja' import version %}\n\
                {% for k, v in grains | dictsort %}\ng_{{ k }}:\n  test.nop:\n    - name: {{ v }}\n{% endfor %}\n\
                {% for id, ip in salt['mine.get']('*', 'ip') | dictsort %}\nmine_{{ id }}:\n  test.nop:\n    - name: {{ ip }} {{ version }}\n{% endfor %}\n";
    let tree = Tree::new(&[
        ("all.sls", text),
        ("lib/v.jinja", "{% set version = 'v1' %}"),
    ]);
    let salt = lookups();
    let render = |grains: serde_json::Value| {
        let ctx = context(&tree, "all.sls", grains, json!({}), salt.clone());
        halite_render::render_sls(text, &ctx).unwrap()
    };
    let grains = json!({"id": "a", "os": "Debian"});
    for _ in 0..3 {
        let data = render(grains.clone());
        assert_eq!(
            data["mine_web1"]["test.nop"][0]["name"],
            json!("10.0.0.1 v1")
        );
    }
    // Another grain: the whole dict was read.
    let data = render(json!({"id": "a", "os": "Debian", "extra": 1}));
    assert_eq!(data["g_extra"]["test.nop"][0]["name"], json!(1));
    // The mine changes between two jobs.
    *salt.mine.lock().unwrap() = json!({"web1": "10.0.0.9", "web2": "10.0.0.2"});
    let data = render(grains.clone());
    assert_eq!(
        data["mine_web1"]["test.nop"][0]["name"],
        json!("10.0.0.9 v1")
    );
    assert_eq!(
        data["mine_web2"]["test.nop"][0]["name"],
        json!("10.0.0.2 v1")
    );
    // The imported file changes.
    std::fs::write(tree.root().join("lib/v.jinja"), "{% set version = 'v2' %}").unwrap();
    let data = render(grains.clone());
    assert_eq!(
        data["mine_web1"]["test.nop"][0]["name"],
        json!("10.0.0.9 v2")
    );

    // A call to the minion: rendered every time, its effect every time.
    let run = "r:\n  test.nop:\n    - name: {{ salt['cmd.run']('hostname') }}\n";
    let tree = Tree::new(&[("run.sls", run)]);
    let mut names = Vec::new();
    for _ in 0..3 {
        let ctx = context(&tree, "run.sls", grains.clone(), json!({}), salt.clone());
        let data = halite_render::render_sls(run, &ctx).unwrap();
        names.push(data["r"]["test.nop"][0]["name"].clone());
    }
    assert_eq!(salt.runs.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(names, [json!("run 0"), json!("run 1"), json!("run 2")]);
}
