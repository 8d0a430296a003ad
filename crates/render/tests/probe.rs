//! Issue 25, session 24: the render's notes of its loads
//! (`halite_render::cache::notes_begin`), which the master compares
//! between minions, and the probe, whose renders must have no effect: a
//! `salt[...]` call stops it before it runs, and an id form's parse is
//! noted, not put back.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::Tree;
use halite_render::cache::{notes_begin, notes_end, notes_take, Load};
use serde_json::{json, Value};

/// Counts the calls made.
#[derive(Default)]
struct Counted(AtomicUsize);

impl halite_render::SaltFunctions for Counted {
    fn has(&self, fun: &str) -> bool {
        fun == "cmd.run"
    }
    fn call(&self, _: &str, _: &[Value], _: &halite_render::Map) -> Result<Value, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!("ran"))
    }
}

/// Renders `text` for minion `id`, noting (`probing` or not): the data,
/// and the loads noted.
fn noted(text: &str, id: &str, probing: bool, salt: Arc<Counted>) -> (Option<Value>, Vec<Load>) {
    let tree = Tree::new(&[("p.sls", text)]);
    let mut ctx = tree.context("p", "p.sls");
    ctx.grains = json!({"id": id});
    ctx.opts = json!({"id": id});
    ctx.salt = salt;
    notes_begin(probing);
    let data = halite_render::render_sls(text, &ctx).ok();
    let loads = notes_take();
    notes_end();
    (data, loads)
}

#[test]
fn a_probe_stops_before_a_call_and_a_render_notes_it_opaque() {
    let text = "c_{{ grains['id'] }}:\n  test.nop:\n    - name: {{ salt['cmd.run']('touch x') }}\n";
    let salt = Arc::new(Counted::default());
    let (data, loads) = noted(text, "web1", true, salt.clone());
    assert!(data.is_none());
    assert_eq!(salt.0.load(Ordering::SeqCst), 0, "the probe ran the call");
    assert!(matches!(loads.as_slice(), [Load::Opaque]), "{loads:?}");
    let (data, loads) = noted(text, "web1", false, salt.clone());
    assert!(data.is_some());
    assert_eq!(salt.0.load(Ordering::SeqCst), 1);
    assert!(matches!(loads.first(), Some(Load::Opaque)), "{loads:?}");
}

#[test]
fn minions_of_one_id_form_note_the_same_parse_and_a_probe_does_not_put_the_id_back() {
    let text = "probe_state:\n  test.nop:\n    - name: /srv/{{ grains['id'] }}/x\n    - comment: {{ grains.get('os', 'none') }}\n";
    let salt = Arc::new(Counted::default());
    let mut forms = Vec::new();
    for id in ["pa1", "pa2", "pa3"] {
        let (data, loads) = noted(text, id, false, salt.clone());
        assert_eq!(
            data.unwrap()["probe_state"]["test.nop"][0]["name"],
            json!(format!("/srv/{id}/x"))
        );
        forms.push(loads.last().cloned().unwrap());
    }
    // The form is parsed at its second minion, then served.
    assert!(matches!(forms[1], Load::Form(_)), "{forms:?}");
    assert!(forms[1].same(&forms[2]));
    let (data, loads) = noted(text, "pa4", true, salt.clone());
    assert_eq!(data, Some(json!({})), "a probe's data is not the minion's");
    assert!(loads.last().unwrap().same(&forms[2]), "{loads:?}");
    // Another text: another parse.
    let other = text.replace("/x", "/y");
    let (_, loads) = noted(&other, "pa5", true, salt);
    assert!(!loads.last().unwrap().same(&forms[2]));
}
