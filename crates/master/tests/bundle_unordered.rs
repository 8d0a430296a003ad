//! Issue 25, session 18: the master orders a minion's chunks only to find
//! requisite errors, and takes back what ordering wrote into them instead
//! of copying them first (`Graph::check_order`). What a minion gets must
//! stay what it was with the copy: its chunks as compiled (no `order`
//! made a number, `name_order` still there, no `__prereq__` marks), and
//! for a tree with requisite errors Salt's error list as the return.
//! Both are pinned here as the bytes the copying compile gave (recorded
//! from main at 25d5192, before the change). Since session 20 the master
//! does not order at all: the same chunks go, unordered, also for a tree
//! with requisite errors, and the minion returns those errors.
#![allow(
    clippy::unwrap_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use halite_master::compiler::Compiler;
use halite_master::fileserver::FileServer;
use halite_proto::msg::BundleAction;
use halite_proto::testing::highstate_job;
use serde_json::json;

mod common;
use common::write_file as write;
use common::NoMinion;

/// Minion `web1`'s bundle action for a tree whose one SLS is `sls`.
fn action(dir: &Path, sls: &str) -> BundleAction {
    write(&dir.join("salt/top.sls"), "base:\n  '*':\n    - one\n");
    write(&dir.join("salt/one.sls"), sls);
    write(&dir.join("pillar/top.sls"), "base: {}\n");
    let compiler = Compiler::new(
        json!({"renderer": "jinja|yaml"}),
        Arc::new(FileServer::new(
            BTreeMap::from([("base".to_string(), vec![dir.join("salt")])]),
            1 << 20,
        )),
        BTreeMap::from([("base".to_string(), vec![dir.join("pillar")])]),
    );
    let grains = json!({"id": "web1", "os": "Debian"});
    let job = highstate_job("20261126000000000001");
    compiler
        .bundle("web1", &grains, &job, Arc::new(NoMinion))
        .action
}

/// What ordering writes into chunks: `order` from `last`, `first`, a
/// negative number and none; `names` (`name_order`); a prereq's marks;
/// requisites of each kind, to IDs and names.
const ORDERED_TREE: &str = "\
many:
  test.succeed_without_changes:
    - names: [x, y, z]
    - order: last
before:
  test.succeed_without_changes:
    - prereq:
      - test: many
negative:
  test.nop:
    - order: -1
early:
  test.nop:
    - order: first
    - require:
      - test: negative
numbered:
  test.nop:
    - order: 5
    - watch:
      - early
plain:
  test.nop:
    - name: p {{ grains['id'] }}
    - onchanges:
      - test: numbered
";

/// The chunks `web1` got for [`ORDERED_TREE`] before session 18, as JSON
/// text (key order counts), one chunk a line.
const ORDERED_CHUNKS: &str = r#"{"state":"test","name":"x","__sls__":"one","__env__":"base","__id__":"many","order":"last","name_order":1,"fun":"succeed_without_changes"}
{"state":"test","name":"y","__sls__":"one","__env__":"base","__id__":"many","order":"last","name_order":2,"fun":"succeed_without_changes"}
{"state":"test","name":"z","__sls__":"one","__env__":"base","__id__":"many","order":"last","name_order":3,"fun":"succeed_without_changes"}
{"state":"test","name":"before","__sls__":"one","__env__":"base","__id__":"before","prereq":[{"test":"many"}],"order":10000,"fun":"succeed_without_changes"}
{"state":"test","name":"negative","__sls__":"one","__env__":"base","__id__":"negative","order":-1,"fun":"nop"}
{"state":"test","name":"early","__sls__":"one","__env__":"base","__id__":"early","order":"first","require":[{"test":"negative"}],"fun":"nop"}
{"state":"test","name":"numbered","__sls__":"one","__env__":"base","__id__":"numbered","order":5,"watch":["early"],"fun":"nop"}
{"state":"test","name":"p web1","__sls__":"one","__env__":"base","__id__":"plain","onchanges":[{"test":"numbered"}],"order":10001,"fun":"nop"}"#;

#[test]
fn a_bundle_carries_its_chunks_as_compiled_not_as_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let BundleAction::Run { chunks, yamlex, .. } = action(dir.path(), ORDERED_TREE) else {
        panic!("not a run")
    };
    let text: Vec<String> = chunks
        .iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .collect();
    assert_eq!(text.join("\n"), ORDERED_CHUNKS);
    assert!(yamlex.is_empty());
}

/// Salt's errors for [`ORDERED_TREE`] with a missing requisite target
/// and a cycle, as `web1`'s bundle returned them before session 18.
const REQUISITE_ERRORS: &str = r#"["Referenced state does not exist for requisite [require: (test: nowhere)] in state [lost] in SLS [one]","Recursive requisites were found: ({'SLS': 'one', 'ID': 'pong'}, 'require', {'SLS': 'one', 'ID': 'ping'}), ({'SLS': 'one', 'ID': 'ping'}, 'require', {'SLS': 'one', 'ID': 'pong'})"]"#;

/// [`ORDERED_TREE`] with a requisite to a missing target and a cycle.
fn broken_tree() -> String {
    format!(
        "{ORDERED_TREE}\
lost:
  test.nop:
    - require:
      - test: nowhere
ping:
  test.nop:
    - require:
      - pong
pong:
  test.nop:
    - require:
      - ping
"
    )
}

/// Issue 25, session 20: the master no longer orders a minion's chunks
/// (it did so only to find these errors); the minion orders what it is
/// sent, as compiled, and returns Salt's errors: the same list, the same
/// return code, through a real master and minion.
#[test]
fn a_tree_with_requisite_errors_returns_salt_s_errors_from_the_minion() {
    let dir = tempfile::tempdir().unwrap();
    let BundleAction::Run { chunks, .. } = action(dir.path(), &broken_tree()) else {
        panic!("the master found the requisite errors itself: it should not order")
    };
    let ids: Vec<&str> = chunks.iter().filter_map(|c| c["__id__"].as_str()).collect();
    assert_eq!(
        ids,
        [
            "many", "many", "many", "before", "negative", "early", "numbered", "plain", "lost",
            "ping", "pong"
        ]
    );

    if !common::can_run() {
        return;
    }
    let fleet = common::Fleet::new();
    write(&fleet.path("salt/top.sls"), "base:\n  '*':\n    - one\n");
    write(&fleet.path("salt/one.sls"), &broken_tree());
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n",
        fleet.path("salt").display()
    ));
    let _web1 = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    let (rets, code) = fleet.halite_json(&["web1", "state.apply"]);
    assert_eq!(
        serde_json::to_string(&rets["web1"]).unwrap(),
        REQUISITE_ERRORS
    );
    assert_eq!(code, 1, "{rets:?}");
}
