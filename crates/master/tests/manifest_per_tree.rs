//! Issue 25, session 17: a bundle's `salt://` manifest resolves its
//! sources once per tree stamp (one per job), not once per minion. The
//! long-lived compiler of a master must still give every job the
//! manifest a fresh compiler gives: a source edited in place, a source
//! shadowed by a new file in an earlier root, a source removed, a file
//! added below a `file.recurse` directory, all between two jobs; and a
//! source edited during a job still gets its current sha256.
#![allow(
    clippy::unwrap_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use halite_master::compiler::Compiler;
use halite_master::fileserver::FileServer;
use halite_proto::msg::BundleAction;
use halite_proto::testing::highstate_job;
use serde_json::json;

mod common;
use common::write_file as write;
use common::NoMinion;

type Manifest = BTreeMap<String, BTreeMap<String, String>>;

/// Two `file_roots` for `base` (the first wins) and an empty pillar tree.
fn roots(
    dir: &Path,
) -> (
    BTreeMap<String, Vec<PathBuf>>,
    BTreeMap<String, Vec<PathBuf>>,
) {
    (
        BTreeMap::from([(
            "base".to_string(),
            vec![dir.join("first"), dir.join("second")],
        )]),
        BTreeMap::from([("base".to_string(), vec![dir.join("pillar")])]),
    )
}

fn compiler(dir: &Path) -> Compiler {
    let (files, pillar) = roots(dir);
    Compiler::new(
        json!({"renderer": "jinja|yaml"}),
        Arc::new(FileServer::new(files, 1 << 20)),
        pillar,
    )
}

/// The manifest of minion `id`'s bundle for job `jid`.
fn manifest(compiler: &Compiler, id: &str, jid: &str) -> Manifest {
    let grains = json!({"id": id, "os": "Debian"});
    let bundle = compiler.bundle(id, &grains, &highstate_job(jid), Arc::new(NoMinion));
    match bundle.action {
        BundleAction::Run { files, .. } => files,
        other => panic!("{id}: not a run: {other:?}"),
    }
}

fn sha(path: &Path) -> String {
    halite_modules::exec::file::meta::sha256_file(path).unwrap()
}

/// The tree: each minion manages three sources and one directory.
fn tree(dir: &Path) {
    write(&dir.join("first/top.sls"), "base:\n  '*':\n    - files\n");
    write(
        &dir.join("first/files.sls"),
        "{% for f in ['a', 'b', 'c'] %}\n{{ f }}_{{ grains['id'] }}:\n  file.managed:\n    - name: /tmp/halite-manifest-test/{{ grains['id'] }}/{{ f }}\n    - source: salt://src/{{ f }}.txt\n{% endfor %}\n\
         tree_{{ grains['id'] }}:\n  file.recurse:\n    - name: /tmp/halite-manifest-test/{{ grains['id'] }}/tree\n    - source: salt://tree\n",
    );
    write(&dir.join("second/src/a.txt"), "a, from the second root\n");
    write(&dir.join("second/src/b.txt"), "b v1\n");
    write(&dir.join("second/src/c.txt"), "c\n");
    write(&dir.join("second/tree/one"), "one\n");
    write(&dir.join("pillar/top.sls"), "base: {}\n");
}

#[test]
fn every_job_gets_the_manifest_a_fresh_compile_gives() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tree(d);
    let master = compiler(d);
    let minions = ["web1", "web2", "db1"];

    let first: Vec<Manifest> = minions
        .iter()
        .map(|id| manifest(&master, id, "20261126000000000001"))
        .collect();
    let base = &first[0]["base"];
    assert_eq!(
        base.keys().collect::<Vec<_>>(),
        ["src/a.txt", "src/b.txt", "src/c.txt", "tree/one"]
    );
    assert_eq!(base["src/a.txt"], sha(&d.join("second/src/a.txt")));
    assert!(first.iter().all(|m| m == &first[0]));

    // Between two jobs: `a` is shadowed by a file in the first root, `b`
    // is edited in place, `c` is removed and `tree` gains a file.
    write(&d.join("first/src/a.txt"), "a, from the first root\n");
    write(&d.join("second/src/b.txt"), "b v2, longer\n");
    std::fs::remove_file(d.join("second/src/c.txt")).unwrap();
    write(&d.join("second/tree/two"), "two\n");

    for id in minions {
        let next = manifest(&master, id, "20261126000000000002");
        let fresh = manifest(&compiler(d), id, "20261126000000000002");
        assert_eq!(next, fresh, "{id}: the next job must see the edits");
        let base = &next["base"];
        assert_eq!(
            base.keys().collect::<Vec<_>>(),
            ["src/a.txt", "src/b.txt", "tree/one", "tree/two"],
            "{id}"
        );
        assert_eq!(base["src/a.txt"], sha(&d.join("first/src/a.txt")), "{id}");
        assert_eq!(base["src/b.txt"], sha(&d.join("second/src/b.txt")), "{id}");
    }
}

#[test]
fn a_source_edited_during_a_job_gets_its_current_sha256() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tree(d);
    let master = compiler(d);
    let jid = "20261126000000000003";
    let before = manifest(&master, "web1", jid);
    write(&d.join("second/src/b.txt"), "b edited while the job runs\n");
    let during = manifest(&master, "web2", jid);
    assert_ne!(before["base"]["src/b.txt"], during["base"]["src/b.txt"]);
    assert_eq!(
        during["base"]["src/b.txt"],
        sha(&d.join("second/src/b.txt")),
        "a manifest names the file as it is, not as the job found it"
    );
}

/// The IDs of minion `id`'s bundle for job `jid`, in compile order.
fn state_ids(compiler: &Compiler, id: &str, jid: &str) -> Vec<String> {
    let grains = json!({"id": id, "os": "Debian"});
    let bundle = compiler.bundle(id, &grains, &highstate_job(jid), Arc::new(NoMinion));
    match bundle.action {
        BundleAction::Run { chunks, .. } => chunks
            .iter()
            .map(|c| c["__id__"].as_str().unwrap().to_string())
            .collect(),
        other => panic!("{id}: not a run: {other:?}"),
    }
}

/// Session 18: which SLS exist (what the top file's globs and `include`s
/// are matched against) is listed once per tree stamp too. An SLS added
/// in the second root, one removed and one added below a new directory
/// between two jobs are all seen by the next job, as a fresh compiler
/// sees them.
#[test]
fn an_sls_added_or_removed_between_jobs_is_seen_by_the_next_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("first/top.sls"), "base:\n  '*':\n    - 'apps.*'\n");
    let app = |name: &str| format!("{name}_{{{{ grains['id'] }}}}:\n  test.nop: []\n");
    write(&d.join("first/apps/a.sls"), &app("a"));
    write(&d.join("second/apps/b.sls"), &app("b"));
    write(&d.join("pillar/top.sls"), "base: {}\n");
    let master = compiler(d);
    for id in ["web1", "web2"] {
        assert_eq!(
            state_ids(&master, id, "20261126000000000001"),
            [format!("a_{id}"), format!("b_{id}")]
        );
    }

    std::fs::remove_file(d.join("first/apps/a.sls")).unwrap();
    write(&d.join("second/apps/c.sls"), &app("c"));
    write(&d.join("first/apps/d/init.sls"), &app("d"));

    for id in ["web1", "web2"] {
        let next = state_ids(&master, id, "20261126000000000002");
        assert_eq!(
            next,
            [format!("b_{id}"), format!("c_{id}"), format!("d_{id}")]
        );
        assert_eq!(next, state_ids(&compiler(d), id, "20261126000000000002"));
    }
}

/// `halite-call` through the master compiles with the one jid
/// `CALLER_JID` for every call: each call still sees the tree as it is
/// (an SLS added, a source shadowed since the last call).
#[test]
fn each_halite_call_sees_the_tree_as_it_is_now() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tree(d);
    write(&d.join("first/top.sls"), "base:\n  '*':\n    - 'files*'\n");
    let master = compiler(d);
    let caller = halite_proto::jid::CALLER_JID;
    let first = manifest(&master, "web1", caller);
    assert_eq!(first["base"]["src/a.txt"], sha(&d.join("second/src/a.txt")));

    write(&d.join("first/src/a.txt"), "a, from the first root\n");
    write(&d.join("first/files_more.sls"), "more:\n  test.nop: []\n");
    let next = manifest(&master, "web1", caller);
    assert_eq!(next["base"]["src/a.txt"], sha(&d.join("first/src/a.txt")));
    assert!(state_ids(&master, "web1", caller).contains(&"more".to_string()));
}
