//! Issue 25: a warm run skips the compile when nothing it read changed
//! (`compile_record.rs`). Each test compiles a highstate for a minion
//! through the master's own compile path (`Compiler::answer`, as the
//! compile threads run it), with real state and pillar trees in a temp
//! dir, then changes one input between two jobs and checks that the
//! second job is compiled again, gives a bundle other than the first, and
//! gives exactly the bundle a fresh master (no records) compiles for it.
//! An unchanged job is answered "you have it" without a compile.
#![allow(
    clippy::unwrap_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use halite_master::bundles::{BundleAnswer, BundleStats};
use halite_master::compiler::{Compiler, MineFactory};
use halite_master::fileserver::FileServer;
use halite_modules::exec::RemoteExec;
use halite_modules::Args;
use halite_proto::msg::{Job, ReplyBody};
use serde_json::{json, Value};

mod common;
use common::compile_mine::{mine_with_store, set_ip};
use common::write_file as write;

/// The minion's side of render-time calls: `cmd.run` answers what the
/// test sets, as a real minion's command output would change.
#[derive(Default)]
struct Minion(Mutex<String>);

impl RemoteExec for Minion {
    fn call(&self, fun: &str, _args: &Args) -> Result<Value, String> {
        Ok(json!(format!("{fun} says {}", self.0.lock().unwrap())))
    }
}

/// A state tree with an include, a Jinja import, a `salt://` source, the
/// minion's grains and pillar; `salt-dev` is a second saltenv, empty.
fn tree(root: &Path) {
    write(&root.join("salt/top.sls"), "base:\n  '*':\n    - web\n");
    write(
        &root.join("salt/web/init.sls"),
        "{% from 'web/map.jinja' import port %}\n\
         include:\n  - web.conf\n\
         web_{{ grains['id'] }}:\n  test.succeed_without_changes:\n    - name: {{ grains['os'] }} {{ pillar['role'] }} {{ port }}\n\
         motd:\n  file.managed:\n    - name: /tmp/halite-compile-skip/{{ grains['id'] }}/motd\n    - source: salt://web/motd\n",
    );
    write(&root.join("salt/web/map.jinja"), "{% set port = 80 %}\n");
    write(
        &root.join("salt/web/conf.sls"),
        "conf:\n  test.nop:\n    - name: conf v1\n",
    );
    write(&root.join("salt/web/motd"), "hello\n");
    std::fs::create_dir_all(root.join("salt-dev")).unwrap();
    write(
        &root.join("pillar/top.sls"),
        "base:\n  '*':\n    - common\n",
    );
    write(&root.join("pillar/common.sls"), "role: web\n");
}

/// A master's compiler over the tree at `root`.
fn compiler(root: &Path, mine: Option<&MineFactory>, opts: Value) -> Compiler {
    let roots = BTreeMap::from([
        ("base".to_string(), vec![root.join("salt")]),
        ("dev".to_string(), vec![root.join("salt-dev")]),
    ]);
    let pillar_roots = BTreeMap::from([("base".to_string(), vec![root.join("pillar")])]);
    let sources = halite_modules::ext_pillar::sources_from_opts(&opts);
    let compiler = Compiler::new(
        opts,
        Arc::new(FileServer::new(roots, 1 << 20)),
        pillar_roots,
    )
    .with_pillar_sources(sources);
    match mine {
        Some(mine) => compiler.with_mine(mine.clone()),
        None => compiler,
    }
}

fn default_opts() -> Value {
    json!({"renderer": "jinja|yaml"})
}

static JID: AtomicU64 = AtomicU64::new(1);

/// A new job of `fun` with `kwarg` (each job has its own id).
fn job(fun: &str, kwarg: Value) -> Job {
    Job {
        jid: format!("2026112600000{:07}", JID.fetch_add(1, Ordering::Relaxed)),
        fun: fun.into(),
        arg: vec![],
        kwarg: kwarg.as_object().cloned().unwrap_or_default(),
        tgt: "*".into(),
        tgt_type: "glob".into(),
        user: "root".into(),
        minions: vec![],
        progress_unwatched: false,
    }
}

/// One master (its compiler and bundle counters) and one minion.
struct Setup {
    root: PathBuf,
    compiler: Compiler,
    stats: BundleStats,
    minion: Arc<Minion>,
    mine: Option<MineFactory>,
    opts: Value,
}

/// What one job answered the minion.
#[derive(Debug)]
struct Answer {
    digest: String,
    /// The compile was skipped (its record showed no input changed).
    skipped: bool,
    /// The bundle's bytes when it was sent.
    bytes: Option<Vec<u8>>,
}

impl Setup {
    fn new(root: &Path) -> Self {
        Self::with(root, None, default_opts())
    }

    fn with(root: &Path, mine: Option<MineFactory>, opts: Value) -> Self {
        Self {
            root: root.to_path_buf(),
            compiler: compiler(root, mine.as_ref(), opts.clone()),
            stats: BundleStats::default(),
            minion: Arc::default(),
            mine,
            opts,
        }
    }

    /// The answer to a minion holding `have` for `job`.
    fn apply(&self, id: &str, grains: &Value, job: &Job, have: Option<&str>) -> Answer {
        answer(
            &self.compiler,
            &self.stats,
            self.minion.clone(),
            id,
            grains,
            job,
            have,
        )
    }

    /// The digest a fresh master, with no record, compiles for `job`.
    fn fresh(&self, id: &str, grains: &Value, job: &Job) -> String {
        let fresh = compiler(&self.root, self.mine.as_ref(), self.opts.clone());
        let stats = BundleStats::default();
        let answer = answer(&fresh, &stats, self.minion.clone(), id, grains, job, None);
        assert!(!answer.skipped);
        answer.digest
    }

    /// Job `job` after a change that must be seen: compiled again, another
    /// bundle than `old`, the one a fresh master compiles. Returns the
    /// new answer's digest.
    fn assert_recompiled(&self, id: &str, grains: &Value, job: &Job, old: &str) -> String {
        let answer = self.apply(id, grains, job, Some(old));
        assert!(
            !answer.skipped,
            "an input changed: the compile must run again"
        );
        assert_ne!(answer.digest, old, "the change must show in the bundle");
        assert_eq!(
            answer.digest,
            self.fresh(id, grains, job),
            "the bundle must be the one a fresh compile gives"
        );
        answer.digest
    }

    /// The first job (the minion holds nothing), then the same job again:
    /// skipped, same bundle. Returns the digest.
    fn warm(&self, id: &str, grains: &Value) -> String {
        let first = self.apply(id, grains, &job("state.apply", json!({})), None);
        assert!(!first.skipped && first.bytes.is_some());
        let again = self.apply(
            id,
            grains,
            &job("state.apply", json!({})),
            Some(&first.digest),
        );
        assert!(
            again.skipped,
            "nothing changed: the compile must be skipped"
        );
        assert_eq!(again.digest, first.digest);
        first.digest
    }
}

fn answer(
    compiler: &Compiler,
    stats: &BundleStats,
    minion: Arc<Minion>,
    id: &str,
    grains: &Value,
    job: &Job,
    have: Option<&str>,
) -> Answer {
    let skipped_before = stats.snapshot(1)["compile_skipped"].as_u64().unwrap();
    let answer = BundleAnswer {
        have: have.map(str::to_string),
        packed: true,
        compress_above: usize::MAX,
    };
    let reply = compiler.answer(id, grains, job, minion, &answer, stats);
    let skipped = stats.snapshot(1)["compile_skipped"].as_u64().unwrap() > skipped_before;
    match reply {
        ReplyBody::PackedBundle { digest, bytes, .. } => Answer {
            digest,
            skipped,
            bytes: Some(bytes),
        },
        ReplyBody::SameBundle { digest, .. } => Answer {
            digest,
            skipped,
            bytes: None,
        },
        other => panic!("not a bundle: {other:?}"),
    }
}

fn web1() -> Value {
    json!({"os": "Debian", "id": "web1"})
}

/// Rewrites `path` (keeping its size when `same_size`: only the content
/// and timestamps tell the change).
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{}: {text}", path.display());
    write(path, &text.replace(from, to));
}

/// `web1` warmed on the standard tree, then `change` made to the tree
/// (its root given): the next `state.apply` must be compiled again, give
/// another bundle, and give exactly what a fresh master compiles.
fn recompiled_after(change: impl FnOnce(&Path)) {
    recompiled_when(
        |_| default_opts(),
        |root| {
            change(root);
            web1()
        },
    );
}

/// The general shape of [`recompiled_after`]: `setup` adds to the standard
/// tree (its root given) and returns the master's options; `web1` is
/// warmed; `change` changes what the compile reads (a file, a command's
/// output) and returns the grains the minion has now. The next
/// `state.apply` must be compiled again, give another bundle, and give
/// exactly what a fresh master compiles.
fn recompiled_when(setup: impl FnOnce(&Path) -> Value, change: impl FnOnce(&Path) -> Value) {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let opts = setup(dir.path());
    let setup = Setup::with(dir.path(), None, opts);
    let old = setup.warm("web1", &web1());
    let grains = change(dir.path());
    setup.assert_recompiled("web1", &grains, &job("state.apply", json!({})), &old);
}

#[test]
fn an_unchanged_job_is_not_compiled_and_its_bundle_is_the_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let setup = Setup::new(dir.path());
    let digest = setup.warm("web1", &web1());
    let job3 = job("state.apply", json!({}));
    assert_eq!(digest, setup.fresh("web1", &web1(), &job3));
    // Many jobs later, still skipped.
    for _ in 0..3 {
        let again = setup.apply(
            "web1",
            &web1(),
            &job("state.apply", json!({})),
            Some(&digest),
        );
        assert!(again.skipped);
    }
    // A minion that lost its bundle gets it compiled and sent.
    let lost = setup.apply("web1", &web1(), &job("state.apply", json!({})), None);
    assert!(!lost.skipped && lost.bytes.is_some());
    assert_eq!(lost.digest, digest);
    // Another minion has its own record.
    let other = setup.apply("web2", &json!({"os": "Debian"}), &job3, Some(&digest));
    assert!(!other.skipped);
    assert_eq!(setup.stats.snapshot(1)["compile_skipped"], json!(4));
}

#[test]
fn a_changed_grain_is_compiled_again() {
    recompiled_when(
        |_| default_opts(),
        |_| json!({"os": "RedHat", "id": "web1"}),
    );
}

#[test]
fn a_changed_pillar_sls_is_compiled_again() {
    recompiled_after(|root| {
        edit(&root.join("pillar/common.sls"), "role: web", "role: dbs");
    });
}

#[test]
fn a_changed_ext_pillar_command_output_is_compiled_again() {
    recompiled_when(
        |root| {
            let out = root.join("role.json");
            std::fs::write(&out, r#"{"role": "web"}"#).unwrap();
            json!({
                "renderer": "jinja|yaml",
                "ext_pillar": [{"cmd_json": format!("cat {}", out.display())}],
            })
        },
        |root| {
            // The command's output changes; no file of the trees does.
            std::fs::write(root.join("role.json"), r#"{"role": "dbs"}"#).unwrap();
            web1()
        },
    );
}

#[test]
fn a_changed_sls_file_is_compiled_again() {
    recompiled_after(|root| {
        edit(&root.join("salt/web/init.sls"), "{{ port }}", "{{ port }}!");
    });
}

#[test]
fn a_changed_included_file_is_compiled_again() {
    recompiled_after(|root| {
        // Same size: the content and the timestamps change.
        edit(&root.join("salt/web/conf.sls"), "conf v1", "conf v2");
    });
}

#[test]
fn a_changed_salt_source_file_is_compiled_again() {
    recompiled_after(|root| {
        // The bundle's manifest names the file's sha256.
        edit(&root.join("salt/web/motd"), "hello", "howdy");
    });
}

#[test]
fn a_changed_jinja_import_is_compiled_again() {
    recompiled_after(|root| {
        edit(&root.join("salt/web/map.jinja"), "80", "81");
    });
}

#[test]
fn a_new_top_file_that_matches_the_minion_is_compiled_again() {
    recompiled_after(|root| {
        // A top file of another saltenv whose glob now matches web1.
        write(
            &root.join("salt-dev/top.sls"),
            "dev:\n  'web*':\n    - devapp\n",
        );
        write(
            &root.join("salt-dev/devapp.sls"),
            "devapp:\n  test.nop: []\n",
        );
    });
}

#[test]
fn a_new_sls_file_the_top_file_names_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        &dir.path().join("salt/top.sls"),
        "base:\n  '*':\n    - web\n  'web*':\n    - extra\n",
    );
    let setup = Setup::new(dir.path());
    // extra.sls does not exist yet: the compile's answer is an error,
    // itself recorded.
    let old = setup.warm("web1", &web1());
    write(
        &dir.path().join("salt/extra.sls"),
        "extra:\n  test.nop: []\n",
    );
    setup.assert_recompiled("web1", &web1(), &job("state.apply", json!({})), &old);
}

#[test]
fn a_changed_mine_value_read_by_a_template_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        &dir.path().join("salt/top.sls"),
        "base:\n  '*':\n    - web\n    - peers\n",
    );
    write(
        &dir.path().join("salt/peers.sls"),
        "{% for id, ips in salt['mine.get']('*', 'network.ip_addrs') | dictsort %}\n\
         peer_{{ id }}:\n  test.nop:\n    - name: {{ ips[0] }}\n{% endfor %}\n",
    );
    let (mine, store) = mine_with_store(dir.path(), &[("web1", "10.0.0.1"), ("db1", "10.0.1.1")]);
    let setup = Setup::with(dir.path(), Some(mine), default_opts());
    let first = setup.apply("web1", &web1(), &job("state.apply", json!({})), None);
    // A compile that read the mine is never skipped: its data can change
    // at any time.
    let again = setup.apply(
        "web1",
        &web1(),
        &job("state.apply", json!({})),
        Some(&first.digest),
    );
    assert!(!again.skipped);
    assert_eq!(again.digest, first.digest);
    set_ip(&store, "db1", "10.0.1.2");
    let new = setup.assert_recompiled(
        "web1",
        &web1(),
        &job("state.apply", json!({})),
        &first.digest,
    );
    assert_ne!(new, first.digest);
}

#[test]
fn a_render_time_call_whose_answer_changes_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        &dir.path().join("salt/top.sls"),
        "base:\n  '*':\n    - web\n    - host\n",
    );
    write(
        &dir.path().join("salt/host.sls"),
        "host:\n  test.nop:\n    - name: {{ salt['cmd.run']('hostname') }}\n",
    );
    let setup = Setup::new(dir.path());
    *setup.minion.0.lock().unwrap() = "one".into();
    let first = setup.apply("web1", &web1(), &job("state.apply", json!({})), None);
    let again = setup.apply(
        "web1",
        &web1(),
        &job("state.apply", json!({})),
        Some(&first.digest),
    );
    assert!(
        !again.skipped,
        "a compile that ran cmd.run is never skipped"
    );
    *setup.minion.0.lock().unwrap() = "two".into();
    setup.assert_recompiled(
        "web1",
        &web1(),
        &job("state.apply", json!({})),
        &first.digest,
    );
}

#[test]
fn another_argument_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        &dir.path().join("salt-dev/top.sls"),
        "dev:\n  'web*':\n    - devapp\n",
    );
    write(
        &dir.path().join("salt-dev/devapp.sls"),
        "devapp:\n  test.nop: []\n",
    );
    let setup = Setup::new(dir.path());
    let old = setup.warm("web1", &web1());
    // test=True is read by the minion from the job, not from the bundle:
    // compiled again (the job differs), to the same bundle.
    let test = setup.apply(
        "web1",
        &web1(),
        &job("state.apply", json!({"test": true})),
        Some(&old),
    );
    assert!(!test.skipped);
    assert_eq!(
        test.digest,
        setup.fresh("web1", &web1(), &job("state.apply", json!({"test": true})))
    );
    for kwarg in [
        json!({"pillar": {"role": "override"}}),
        json!({"saltenv": "dev"}),
    ] {
        setup.assert_recompiled("web1", &web1(), &job("state.apply", kwarg.clone()), &old);
    }
    // Another function over the same tree.
    setup.assert_recompiled(
        "web1",
        &web1(),
        &job("state.sls", json!({"mods": "web.conf"})),
        &old,
    );
    // And back: the original job is compiled again (the record is the
    // last compile's), then skipped.
    let back = setup.apply("web1", &web1(), &job("state.apply", json!({})), Some(&old));
    assert!(!back.skipped);
    assert_eq!(back.digest, old);
    let warm = setup.apply("web1", &web1(), &job("state.apply", json!({})), Some(&old));
    assert!(warm.skipped);
}

#[test]
fn a_template_reading_the_job_id_is_compiled_every_time() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        &dir.path().join("salt/top.sls"),
        "base:\n  '*':\n    - web\n    - jid\n",
    );
    write(
        &dir.path().join("salt/jid.sls"),
        "jid:\n  test.nop:\n    - name: job {{ opts['jid'] }}\n",
    );
    let setup = Setup::new(dir.path());
    let first = setup.apply("web1", &web1(), &job("state.apply", json!({})), None);
    setup.assert_recompiled(
        "web1",
        &web1(),
        &job("state.apply", json!({})),
        &first.digest,
    );
}

// The pillar record (pillar_record.rs): a warm job reuses the minion's
// last `pillar_roots` compile when nothing it read changed; every change
// below must give the pillar (and bundle) a fresh master compiles.

#[test]
fn an_unchanged_pillar_is_reused_and_gives_the_fresh_bundle() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let setup = Setup::new(dir.path());
    let digest = setup.warm("web1", &web1());
    let records = setup.compiler.pillar_records();
    assert_eq!(records.len(), 1);
    assert!(
        records.reused() >= 1,
        "the warm job must reuse the pillar compile"
    );
    assert_eq!(
        digest,
        setup.fresh("web1", &web1(), &job("state.apply", json!({})))
    );
}

#[test]
fn a_changed_pillar_top_file_is_compiled_again() {
    recompiled_after(|root| {
        write(&root.join("pillar/extra.sls"), "extra: yes\n");
        write(
            &root.join("pillar/top.sls"),
            "base:\n  '*':\n    - common\n    - extra\n",
        );
    });
}

#[test]
fn a_grain_the_pillar_top_file_matches_on_is_compiled_again() {
    recompiled_when(
        |root| {
            write(
                &root.join("pillar/top.sls"),
                "base:\n  '*':\n    - common\n  'tier:gold':\n    - match: grain\n    - gold\n",
            );
            write(&root.join("pillar/gold.sls"), "gold: yes\n");
            default_opts()
        },
        |_| json!({"os": "Debian", "id": "web1", "tier": "gold"}),
    );
}

#[test]
fn a_pillar_render_time_call_whose_answer_changes_is_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        &dir.path().join("pillar/common.sls"),
        "role: web\nhost: {{ salt['cmd.run']('hostname') }}\n",
    );
    let setup = Setup::new(dir.path());
    *setup.minion.0.lock().unwrap() = "one".into();
    let first = setup.apply("web1", &web1(), &job("state.apply", json!({})), None);
    assert_eq!(
        setup.compiler.pillar_records().len(),
        0,
        "a pillar that ran cmd.run is never recorded"
    );
    *setup.minion.0.lock().unwrap() = "two".into();
    setup.assert_recompiled(
        "web1",
        &web1(),
        &job("state.apply", json!({})),
        &first.digest,
    );
}

#[test]
fn an_ext_pillar_first_output_a_pillar_sls_reads_is_compiled_again() {
    recompiled_when(
        |root| {
            write(
                &root.join("pillar/common.sls"),
                "role: web-{{ pillar.get('tier', 'none') }}\n",
            );
            let out = root.join("tier.json");
            std::fs::write(&out, r#"{"tier": "silver"}"#).unwrap();
            json!({
                "renderer": "jinja|yaml",
                "ext_pillar_first": true,
                "ext_pillar": [{"cmd_json": format!("cat {}", out.display())}],
            })
        },
        |root| {
            std::fs::write(root.join("tier.json"), r#"{"tier": "gold"}"#).unwrap();
            web1()
        },
    );
}
