//! `renderer: jinja|yamlex` in the master config, through a real master
//! and minion on loopback: the master compiles the state tree and the
//! pillar with it, and the states of a yamlex SLS keep their quoted tags
//! across the wire (the minion runs the chunks the master compiled). The
//! expected tags and names are what Salt 3008.5 (`salt-call --local`,
//! `renderer: jinja|yamlex`) gave for the same trees.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use common::{can_run, Fleet};

use common::write_file as write;

#[test]
fn the_masters_renderer_option_renders_states_and_pillar_as_yamlex() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("trees/salt");
    let pillar = fleet.path("trees/pillar");
    write(&salt.join("top.sls"), "base:\n  '*':\n    - web\n");
    // No shebang: the option's pipeline. A repeated key merges (plain
    // yaml refuses it) and the later `site` wins.
    write(
        &salt.join("web.sls"),
        "site:\n  test.succeed_without_changes:\n    - name: first\nsite:\n  test.succeed_with_changes:\n    - name: port {{ pillar['port'] }}\n    - require:\n      - test: other\nother:\n  test.succeed_without_changes: []\n",
    );
    write(&pillar.join("top.sls"), "base:\n  '*':\n    - p\n");
    write(&pillar.join("p.sls"), "port: 80\nport: {{ 8000 + 80 }}\n");
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nrenderer: jinja|yamlex\nfile_roots:\n  base: [{}]\npillar_roots:\n  base: [{}]\n",
        salt.display(),
        pillar.display()
    ));
    let _minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");

    let (rets, code) = fleet.halite_json(&["web1", "state.apply"]);
    assert_eq!(code, 0, "{rets:?}");
    let states = rets["web1"].as_object().expect("state returns");
    let mut tags: Vec<(&String, u64)> = states
        .iter()
        .map(|(tag, r)| (tag, r["__run_num__"].as_u64().unwrap_or(u64::MAX)))
        .collect();
    tags.sort_by_key(|(_, n)| *n);
    let tags: Vec<&str> = tags.into_iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        tags,
        [
            "test_|-\"other\"_|-\"other\"_|-succeed_without_changes",
            "test_|-\"site\"_|-\"port 8080\"_|-succeed_with_changes",
        ]
    );
    let site = &states["test_|-\"site\"_|-\"port 8080\"_|-succeed_with_changes"];
    assert_eq!(site["name"], "port 8080");
    assert_eq!(site["__id__"], "site");
}
