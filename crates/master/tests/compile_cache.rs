//! Issue 25: the render cache must never change what a minion receives.
//! Compiles `state.apply` for minions with different ids, grains, pillar,
//! mine data (the master's own mine store, changed between the two jobs)
//! and render-time call results, with the cache on (twice, so
//! it is used) and off, and compares the encoded bundles byte for byte;
//! then changes the state and pillar trees between two jobs and compares
//! again. Ids include ones the shared id form must refuse (`123` reads
//! as an integer, `on` as a boolean).
#![allow(
    clippy::unwrap_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::sync::Arc;

use halite_master::compiler::MineFactory;
use halite_modules::exec::RemoteExec;
use halite_modules::Args;
use halite_proto::testing::highstate_job;
use halite_render::cache::RenderCache;
use halite_render::memo::RenderMemo;
use serde_json::{json, Value};

/// The minion's side of render-time calls: answers with its own id, as a
/// real minion's `cmd.run` or `mine.get` would answer with its own data.
struct Minion(String);

impl RemoteExec for Minion {
    fn call(&self, fun: &str, args: &Args) -> Result<Value, String> {
        Ok(json!(format!("{fun}{:?} on {}", args.positional, self.0)))
    }
}

mod common;
use common::compile_mine::mine;
use common::write_file as write;

/// A tree whose output differs per minion by grain, pillar and a
/// render-time call, with one SLS that is the same for every minion.
fn tree(root: &Path, version: &str) {
    write(
        &root.join("salt/top.sls"),
        "base:\n  '*':\n    - common\n    - same\n    - ids\n    - mine\n  'db*':\n    - db\n",
    );
    // The benchmark's shape: paths and IDs built from the minion's id.
    write(
        &root.join("salt/ids.sls"),
        &format!(
            "{{% set out = '/srv/' ~ grains['id'] %}}\n\
             {{{{ grains['id'] }}}}_{version}:\n  test.succeed_without_changes:\n    - name: {{{{ out }}}}/motd\n\
             opts_id:\n  test.succeed_without_changes:\n    - name: {{{{ opts['id'] }}}}\n\
             bare_id:\n  test.succeed_without_changes:\n    - name: \"{{{{ grains['id'] }}}}\"\n\
             {{% if grains['id'].startswith('web') %}}\nweb_only:\n  test.nop:\n    - name: web {{{{ grains['id'] }}}}\n{{% endif %}}\n"
        ),
    );
    write(
        &root.join("salt/mine.sls"),
        "{% for id, ips in salt['mine.get']('*', 'network.ip_addrs') | dictsort %}\n\
         peer_{{ id }}:\n  test.nop:\n    - name: {{ ips[0] }}\n{% endfor %}\n\
         {% for id, ips in salt['mine.get'](grains['id'], 'network.ip_addrs') | dictsort %}\n\
         me_{{ id }}:\n  test.nop:\n    - name: {{ ips[0] }}\n{% endfor %}\n",
    );
    write(
        &root.join("salt/common.sls"),
        &format!(
            "os_{version}:\n  test.succeed_without_changes:\n    - name: {{{{ grains['os'] }}}} {{{{ pillar['role'] }}}}\n\
             call:\n  test.succeed_without_changes:\n    - name: {{{{ salt['cmd.run']('hostname') }}}}\n"
        ),
    );
    write(
        &root.join("salt/same.sls"),
        &format!("same_{version}:\n  test.succeed_without_changes:\n    - name: same for all\n"),
    );
    write(
        &root.join("salt/db.sls"),
        "{% for u in pillar.get('users', []) %}\nuser_{{ u }}:\n  test.nop: []\n{% endfor %}\n",
    );
    write(
        &root.join("pillar/top.sls"),
        "base:\n  '*':\n    - common\n  'db*':\n    - db\n",
    );
    write(
        &root.join("pillar/common.sls"),
        &format!("role: {{{{ grains.get('role', 'none') }}}}-{version}\n"),
    );
    write(&root.join("pillar/db.sls"), "users: [alice, bob]\n");
}

fn compile_all(root: &Path, mine: &MineFactory) -> Vec<Vec<u8>> {
    let compiler = common::tree_compiler(root).with_mine(mine.clone());
    let job = highstate_job("20261126000000000001");
    let minions = [
        ("web1", json!({"os": "Debian", "role": "web"})),
        ("web2", json!({"os": "Debian", "role": "web"})),
        ("db1", json!({"os": "RedHat", "role": "db"})),
        ("db2", json!({"os": "Debian"})),
        // Ids whose id form the cache must refuse: `123` and `on` read as
        // an integer and a boolean where they stand alone.
        ("123", json!({"os": "Debian", "role": "web"})),
        ("on", json!({"os": "Debian", "role": "web"})),
        ("web-3.example.com", json!({"os": "Debian", "role": "web"})),
    ];
    minions
        .iter()
        .map(|(id, grains)| {
            let remote = Arc::new(Minion(id.to_string()));
            let bundle = compiler.bundle(id, grains, &job, remote);
            halite_proto::frame::encode(&bundle).unwrap()
        })
        .collect()
}

/// Cached twice (the second time served from the cache), then fresh.
fn cached_and_fresh(root: &Path, mine: &MineFactory) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let cache = RenderCache::global();
    cache.set_enabled(true);
    compile_all(root, mine);
    let memo = RenderMemo::global();
    let (before, memo_before) = (cache.stats(), memo.stats());
    let cached = compile_all(root, mine);
    let (after, memo_after) = (cache.stats(), memo.stats());
    assert!(
        memo_after.reused > memo_before.reused,
        "renders that read the same inputs must be reused"
    );
    assert!(
        after.id_form > before.id_form,
        "texts that differ only by the id must share a parse"
    );
    cache.set_enabled(false);
    let fresh = compile_all(root, mine);
    cache.set_enabled(true);
    (cached, fresh)
}

#[test]
fn memoised_compiles_equal_fresh_ones_per_minion_and_after_a_tree_change() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), "v1");
    let ips = [
        ("web1", "10.0.0.1"),
        ("web2", "10.0.0.2"),
        ("db1", "10.0.1.1"),
    ];
    let (cached, fresh) = cached_and_fresh(dir.path(), &mine(dir.path(), &ips));
    assert_eq!(cached, fresh);
    // The bundles really differ per minion (id, grains, pillar, call).
    for (i, a) in fresh.iter().enumerate() {
        for b in &fresh[i + 1..] {
            assert_ne!(a, b);
        }
    }
    let text = String::from_utf8_lossy(&cached[2]);
    assert!(text.contains("RedHat db-v1"), "{text}");
    // Mine data: every minion sees the fleet's, and its own under `self`.
    assert!(
        text.contains("10.0.0.2") && text.contains("me_db1"),
        "{text}"
    );
    assert!(!text.contains("me_web1"), "{text}");
    // The id in paths, IDs, opts and logic on it.
    assert!(
        text.contains("/srv/db1/motd") && text.contains("db1_v1"),
        "{text}"
    );
    assert!(!text.contains("web_only"), "{text}");
    let web = String::from_utf8_lossy(&cached[0]);
    assert!(
        web.contains("/srv/web1/motd") && web.contains("web web1"),
        "{web}"
    );
    assert!(!web.contains("db1_v1") && !web.contains("me_db1"), "{web}");
    assert!(
        text.contains("cmd.run[String(\"hostname\")] on db1"),
        "{text}"
    );
    assert!(text.contains("user_alice"), "{text}");

    // The tree changes between two jobs: the cache must not serve v1.
    tree(dir.path(), "v2");
    // So does the mine: web2 has a new address.
    let ips = [
        ("web1", "10.0.0.1"),
        ("web2", "10.0.0.22"),
        ("db1", "10.0.1.1"),
    ];
    let (cached2, fresh2) = cached_and_fresh(dir.path(), &mine(dir.path(), &ips));
    assert_eq!(cached2, fresh2);
    for (old, new) in cached.iter().zip(&cached2) {
        assert_ne!(old, new);
        let text = String::from_utf8_lossy(new);
        assert!(
            text.contains("same_v2") && !text.contains("same_v1"),
            "{text}"
        );
        assert!(text.contains("10.0.0.22"), "{text}");
    }
}
