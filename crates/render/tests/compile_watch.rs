//! Issue 25: a compile watch ([`halite_render::watch`]) learns, from every
//! render on its thread, whether the compile can be reused and which
//! `opts` values it read, both for renders that ran and for renders the
//! memo answered with another render's data.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::sync::Arc;

use common::Tree;
use halite_render::memo::RenderMemo;
use halite_render::watch::watch;
use serde_json::{json, Value};

/// `mine.get` is a lookup the host replays; `cmd.run` runs on the minion.
struct Calls;

impl halite_render::SaltFunctions for Calls {
    fn has(&self, fun: &str) -> bool {
        matches!(fun, "mine.get" | "cmd.run")
    }
    fn call(&self, fun: &str, _: &[Value], _: &halite_render::Map) -> Result<Value, String> {
        Ok(json!(format!("{fun} answer")))
    }
    fn replayable(&self, fun: &str) -> bool {
        fun == "mine.get"
    }
}

/// Renders `text` (as `path`) three times for the same context, each in a
/// watch: the first runs, the second runs and keeps its data, the third
/// is the memo's.
fn three_watched(path: &str, text: &str, opts: Value) -> Vec<halite_render::watch::CompileReads> {
    let tree = Tree::new(&[(path, text)]);
    let mut ctx = tree.context(path.trim_end_matches(".sls"), path);
    ctx.grains = json!({"id": "web1", "os": "Debian"});
    ctx.opts = opts;
    ctx.salt = Arc::new(Calls);
    let mut out = Vec::new();
    for _ in 0..3 {
        let (data, reads) = watch(|| halite_render::render_sls(text, &ctx));
        data.unwrap();
        out.push(reads);
    }
    out
}

#[test]
fn a_pure_render_is_skippable_and_names_the_opts_it_read_even_when_reused() {
    let text = "w_{{ grains['id'] }}:\n  test.nop:\n    - name: {{ opts['color'] }} {{ salt['pillar.get']('x', 1) }}\n";
    let before = RenderMemo::global().stats().reused;
    let reads = three_watched(
        "pure.sls",
        text,
        json!({"id": "web1", "color": "blue", "jid": "1"}),
    );
    assert!(
        RenderMemo::global().stats().reused > before,
        "the third render is the memo's"
    );
    for r in &reads {
        assert!(r.skippable(), "{r:?}");
        assert!(
            r.opts.contains(&("color".to_string(), Some(json!("blue")))),
            "{r:?}"
        );
        assert!(!r.opts.iter().any(|(k, _)| k == "jid"), "{r:?}");
    }
}

#[test]
fn a_render_that_called_a_lookup_is_never_skippable_even_when_reused() {
    let text = "peers:\n  test.nop:\n    - name: {{ salt['mine.get']('*', 'x') }}\n";
    let before = RenderMemo::global().stats().reused;
    let reads = three_watched("looks.sls", text, json!({"id": "web1"}));
    assert!(
        RenderMemo::global().stats().reused > before,
        "the third render is the memo's"
    );
    for r in &reads {
        assert!(!r.skippable(), "{r:?}");
    }
}

#[test]
fn a_render_that_ran_on_the_minion_or_read_all_opts_is_never_skippable() {
    let text = "host:\n  test.nop:\n    - name: {{ salt['cmd.run']('hostname') }}\n";
    for r in three_watched("minion.sls", text, json!({"id": "web1"})) {
        assert!(!r.skippable(), "{r:?}");
    }
    let text = "all:\n  test.nop:\n    - name: {{ opts | length }}\n";
    for r in three_watched("allopts.sls", text, json!({"id": "web1"})) {
        assert!(!r.skippable(), "{r:?}");
    }
}

#[test]
fn a_failed_render_is_never_skippable_and_renders_outside_a_watch_report_nowhere() {
    let tree = Tree::new(&[]);
    let ctx = tree.context("bad", "bad.sls");
    let (result, reads) = watch(|| halite_render::render_sls("a: {{ x \n", &ctx));
    assert!(result.is_err());
    assert!(!reads.skippable());
    // Outside a watch, then a fresh watch: nothing carried over.
    halite_render::render_sls("a: {{ x \n", &ctx).unwrap_err();
    let (_, reads) = watch(|| ());
    assert!(reads.skippable() && reads.opts.is_empty(), "{reads:?}");
}
