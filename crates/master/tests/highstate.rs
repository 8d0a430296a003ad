//! Highstate through the master, end to end: one master compiling a
//! top file and pillar for two minions with different grains, `salt://`
//! files over the session (and not twice), requisites across the wire,
//! render-time calls on the minion, prog and fire_event events, test mode.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;

use common::{can_run, mode, Fleet};
use serde_json::{json, Map, Value};

use common::write_file as write;

/// The state tree and pillar tree of the test, under `root`; `out` is
/// where the states write on the minions' side.
fn trees(root: &Path, out: &Path) {
    let salt = root.join("salt");
    write(
        &salt.join("top.sls"),
        "base:\n  '*':\n    - common\n  'role:web':\n    - match: grain\n    - web\n  'db*':\n    - db\n",
    );
    write(
        &salt.join("common.sls"),
        r#"{{ pillar['out'] }}/{{ grains['id'] }}/motd:
  file.managed:
    - source: salt://files/motd.j2
    - template: jinja
    - mode: '0640'
    - makedirs: True

{{ pillar['out'] }}/{{ grains['id'] }}/big.bin:
  file.managed:
    - source: salt://files/big.bin

rendered_by:
  test.succeed_without_changes:
    - name: "{{ salt['cmd.run']('cat /proc/$PPID/comm') }}"
"#,
    );
    write(
        &salt.join("web.sls"),
        r#"{% set dir = pillar['out'] ~ '/web1' %}
{{ dir }}/site.conf:
  file.managed:
    - source: salt://files/site.conf
    - mode: '0600'

reload_site:
  cmd.wait:
    - name: echo reloaded >> {{ dir }}/reloads
    - watch:
      - file: {{ dir }}/site.conf

{{ dir }}/site.d:
  file.recurse:
    - source: salt://files/site.d

{{ dir }}/opt:
  archive.extracted:
    - source: salt://files/app.tar.gz
    - skip_verify: True

setup_script:
  cmd.script:
    - source: salt://files/setup.sh
    - args: {{ dir }}/script-ran
    - creates: {{ dir }}/script-ran

broken:
  cmd.run:
    - name: 'false'

recover:
  test.succeed_with_changes:
    - onfail:
      - cmd: broken

not_needed:
  test.succeed_with_changes:
    - onfail:
      - file: {{ dir }}/site.conf

announce:
  test.succeed_without_changes:
    - fire_event: custom/announce
"#,
    );
    write(
        &salt.join("db.sls"),
        "db_only:\n  test.succeed_without_changes:\n    - name: db {{ grains['role'] }}\n",
    );
    write(&salt.join("bad.sls"), "fine:\n  test.nop: []\n{% if %}\n");
    write(
        &salt.join("files/motd.j2"),
        "Hello {{ grains['id'] }} ({{ pillar['secret'] }})\n",
    );
    write(&salt.join("files/site.conf"), "listen 80;\n");
    write(&root.join("app-src/app/bin/run"), "#!/bin/sh\necho app\n");
    let tar = std::process::Command::new("tar")
        .arg("czf")
        .arg(salt.join("files/app.tar.gz"))
        .arg("-C")
        .arg(root.join("app-src"))
        .arg("app")
        .status()
        .expect("tar");
    assert!(tar.success());
    write(&salt.join("files/site.d/a.conf"), "a = 1\n");
    write(&salt.join("files/site.d/sub/b.conf"), "b = 2\n");
    write(
        &salt.join("files/setup.sh"),
        "#!/bin/sh\necho \"ran as $(id -u)\" > \"$1\"\n",
    );
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(salt.join("files/big.bin"), big).expect("big");

    let pillar = root.join("pillar");
    write(
        &pillar.join("top.sls"),
        "base:\n  '*':\n    - common\n  web1:\n    - web_secret\n  db1:\n    - db_secret\n",
    );
    write(
        &pillar.join("common.sls"),
        &format!("out: {}\n", out.display()),
    );
    write(&pillar.join("web_secret.sls"), "secret: web-only-s3cret\n");
    write(&pillar.join("db_secret.sls"), "secret: db-only-s3cret\n");
}

fn states(rets: &Map<String, Value>, id: &str) -> Map<String, Value> {
    rets.get(id)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_else(|| panic!("no state return from {id}: {rets:?}"))
}

/// The return of the state whose id is `id` (any function).
fn by_id<'a>(states: &'a Map<String, Value>, id: &str) -> &'a Value {
    states
        .values()
        .find(|r| r["__id__"] == id)
        .unwrap_or_else(|| panic!("no state {id} in {states:?}"))
}

fn fetched(log: &str) -> usize {
    log.matches("cached from the master").count()
}

#[test]
fn highstate_through_the_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let out = fleet.path("out");
    trees(&fleet.path("trees"), &out);
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_buffer_size: 65536\nfile_roots:\n  base: [{}]\npillar_roots:\n  base: [{}]\n",
        fleet.path("trees/salt").display(),
        fleet.path("trees/pillar").display()
    ));
    let web = fleet.start_minion("web1", "grains:\n  role: web\n");
    let db = fleet.start_minion("db1", "grains:\n  role: db\n");
    fleet.wait_responding("web1");
    fleet.wait_responding("db1");

    // Events of the first run, from the master's bus.
    let events = fleet.watch_events();

    // First run: each minion gets its own states and pillar.
    let (rets, code) = fleet.halite_json(&["*", "state.apply"]);
    assert_eq!(code, 1, "web1's `broken` fails the run: {rets:?}");
    let web1 = states(&rets, "web1");
    let db1 = states(&rets, "db1");
    assert!(web1.values().any(|r| r["__id__"] == "reload_site"));
    assert!(!web1.values().any(|r| r["__id__"] == "db_only"));
    assert!(db1.values().any(|r| r["__id__"] == "db_only"));
    assert!(!db1.values().any(|r| r["__id__"] == "reload_site"));
    assert_eq!(by_id(&db1, "db_only")["name"], "db db");
    assert!(db1.values().all(|r| r["result"] == true), "{db1:?}");

    for (id, secret) in [("web1", "web-only-s3cret"), ("db1", "db-only-s3cret")] {
        let motd = out.join(id).join("motd");
        let motd_ret = || {
            let all = states(&rets, id);
            let found: Vec<_> = all
                .iter()
                .filter(|(tag, _)| tag.ends_with("/motd_|-managed"))
                .map(|(tag, ret)| format!("{tag}: {ret}"))
                .collect();
            found.join("\n")
        };
        assert_eq!(
            std::fs::read_to_string(&motd)
                .unwrap_or_else(|e| panic!("{id}'s motd ({e}); its state: {}", motd_ret())),
            format!("Hello {id} ({secret})\n")
        );
        assert_eq!(mode(&motd), 0o640);
        assert_eq!(
            std::fs::read(out.join(id).join("big.bin")).expect("big.bin"),
            std::fs::read(fleet.path("trees/salt/files/big.bin")).expect("source")
        );
    }
    // The render-time call ran on the minion, not on the master.
    assert_eq!(by_id(&web1, "rendered_by")["name"], "halite-minion");

    // Requisites across the wire: watch fired mod_watch, onfail only on failure.
    let site = out.join("web1/site.conf");
    assert_eq!(
        std::fs::read_to_string(&site).expect("site"),
        "listen 80;\n"
    );
    assert_eq!(mode(&site), 0o600);
    assert_eq!(
        std::fs::read_to_string(out.join("web1/reloads")).expect("reloads"),
        "reloaded\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("web1/site.d/sub/b.conf")).expect("recursed"),
        "b = 2\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("web1/opt/app/bin/run")).expect("extracted"),
        "#!/bin/sh\necho app\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("web1/script-ran")).expect("script"),
        "ran as 0\n"
    );
    assert_eq!(by_id(&web1, "broken")["result"], false);
    assert_eq!(by_id(&web1, "recover")["result"], true);
    assert_eq!(
        by_id(&web1, "recover")["changes"],
        json!({"testing": {"old": "Unchanged", "new": "Something pretended to change"}})
    );
    let skipped = by_id(&web1, "not_needed");
    assert_eq!(skipped["result"], true);
    assert_eq!(skipped["changes"], json!({}));
    assert!(
        skipped["comment"]
            .as_str()
            .is_some_and(|c| c.contains("onfail")),
        "{skipped}"
    );

    // Prog events: one per state, in __run_num__ order, before the return;
    // the fire_event tag as configured.
    let text = events.stop();
    let tags: Vec<&str> = text.lines().filter_map(|l| l.split('\t').next()).collect();
    // The last return of web1: the watch may also see the return of the
    // `test.ping` that waited for web1, published after its CLI had it.
    let ret_at = tags
        .iter()
        .rposition(|t| t.starts_with("salt/job/") && t.ends_with("/ret/web1"))
        .unwrap_or_else(|| panic!("no return event for web1 in {tags:?}"));
    let jid = tags[ret_at].split('/').nth(2).expect("jid");
    let prog: Vec<usize> = tags
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            t.strip_prefix(&format!("salt/job/{jid}/prog/web1/"))
                .map(|n| (i, n.parse::<usize>().expect("run_num")))
        })
        .map(|(i, n)| {
            assert!(i < ret_at, "prog event {n} after the return");
            n
        })
        .collect();
    // (A watch that runs mod_watch takes two run numbers, as in Salt.)
    let mut run_nums: Vec<usize> = web1
        .values()
        .filter_map(|r| r["__run_num__"].as_u64())
        .map(|n| n as usize)
        .collect();
    run_nums.sort_unstable();
    assert_eq!(prog, run_nums, "{tags:?}");
    assert!(
        tags.contains(&format!("salt/state_result/{jid}/web1/custom/announce").as_str()),
        "{tags:?}"
    );

    // Second run: nothing changes, and no file is sent again.
    let fetched_before = fetched(&web.log_text());
    // Not top.sls: the master's bundle names the saltenvs its render of
    // the top file matched, which the minion syncs without reading it.
    assert_eq!(
        fetched_before, 7,
        "motd.j2, big.bin, site.conf, setup.sh, app.tar.gz and site.d's two files once each"
    );
    let (rets, _) = fleet.halite_json(&["*", "state.apply"]);
    let web1 = states(&rets, "web1");
    for r in web1.values() {
        if r["__id__"] != "recover" && r["__id__"] != "broken" {
            assert_eq!(r["changes"], json!({}), "{r}");
        }
    }
    assert_eq!(fetched(&web.log_text()), fetched_before);
    // db1: its two files.
    assert_eq!(fetched(&db.log_text()), 2);
    assert_eq!(
        std::fs::read_to_string(out.join("web1/reloads")).expect("reloads"),
        "reloaded\n"
    );

    // A tampered cache entry is noticed (it no longer hashes to its name),
    // fetched again, and never deployed.
    let cache = fleet.path("minion-web1/cache/files");
    let entry = std::fs::read_dir(&cache)
        .expect("cache dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::read(p).is_ok_and(|b| b == b"listen 80;\n"))
        .expect("site.conf in the cache");
    std::fs::write(&entry, "evil\n").expect("tamper");
    fleet.halite_json(&["web1", "state.apply", "web"]);
    assert_eq!(
        std::fs::read_to_string(&site).expect("site"),
        "listen 80;\n"
    );
    assert_eq!(fetched(&web.log_text()), fetched_before + 1);
    let fetched_before = fetched_before + 1;

    // A cached copy gone from the disk is fetched again (the one stat of
    // `cache_file` finds no regular file), and the target left as it is.
    std::fs::remove_file(&entry).expect("remove the cached copy");
    let (rets, _) = fleet.halite_json(&["web1", "state.apply", "web"]);
    let site_ret = by_id(&states(&rets, "web1"), &format!("{}", site.display())).clone();
    assert_eq!(site_ret["result"], json!(true), "{site_ret}");
    assert_eq!(site_ret["changes"], json!({}), "{site_ret}");
    assert_eq!(
        std::fs::read(&entry).expect("fetched back into the cache"),
        b"listen 80;\n"
    );
    assert_eq!(fetched(&web.log_text()), fetched_before + 1);
    let fetched_before = fetched_before + 1;

    // test=True through the master: the change is reported, nothing is made.
    write(&fleet.path("trees/salt/files/site.conf"), "listen 8080;\n");
    let (rets, _) = fleet.halite_json(&["web1", "state.apply", "web", "test=True"]);
    let web1 = states(&rets, "web1");
    let planned = by_id(&web1, &format!("{}", site.display()));
    assert_eq!(planned["result"], Value::Null, "{planned}");
    assert!(planned["changes"]["diff"]
        .as_str()
        .is_some_and(|d| d.contains("+listen 8080;")));
    assert_eq!(
        std::fs::read_to_string(&site).expect("site"),
        "listen 80;\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("web1/reloads")).expect("reloads"),
        "reloaded\n"
    );

    // The changed file is fetched (once) when applied for real.
    fleet.halite_json(&["web1", "state.apply", "web"]);
    assert_eq!(
        std::fs::read_to_string(&site).expect("site"),
        "listen 8080;\n"
    );
    assert_eq!(fetched(&web.log_text()), fetched_before + 1);

    // Live progress (forced on: the test has no terminal): the failure is
    // named as it happens, on stderr; stdout keeps the usual output.
    let out = fleet.cli("halite", &["web1", "state.apply", "web", "--progress"]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(progress.contains("web1: FAILED broken"), "{progress}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Summary for web1"));

    // state.single and a pillar refresh through the master.
    let (rets, code) = fleet.halite_json(&[
        "db1",
        "state.single",
        "test.succeed_with_changes",
        "name=one-off",
    ]);
    assert_eq!(code, 0);
    let single = states(&rets, "db1");
    assert_eq!(by_id(&single, "one-off")["result"], true);
    let (rets, code) = fleet.halite_json(&["db1", "saltutil.refresh_pillar"]);
    assert_eq!((rets["db1"].clone(), code), (json!(true), 0));

    // A command's own retcode is the job's (Salt's __context__["retcode"]).
    assert_eq!(fleet.halite(&["db1", "cmd.run", "exit 3"]).1, 1);
    assert_eq!(
        fleet
            .halite(&["db1", "cmd.run", "exit 3", "ignore_retcode=True"])
            .1,
        0
    );
    assert_eq!(fleet.halite(&["db1", "cmd.run", "true"]).1, 0);

    // cp.* through the fileserver.
    let (rets, _) = fleet.halite_json(&["web1", "cp.list_master"]);
    assert_eq!(
        rets["web1"],
        json!([
            "bad.sls",
            "common.sls",
            "db.sls",
            "files/app.tar.gz",
            "files/big.bin",
            "files/motd.j2",
            "files/setup.sh",
            "files/site.conf",
            "files/site.d/a.conf",
            "files/site.d/sub/b.conf",
            "top.sls",
            "web.sls"
        ])
    );
    let (rets, _) = fleet.halite_json(&["web1", "cp.hash_file", "salt://files/site.conf"]);
    assert_eq!(rets["web1"]["hash_type"], "sha256");
    assert_eq!(rets["web1"]["hsum"].as_str().map(str::len), Some(64));
    let copy = fleet.path("copies/deep/motd.j2");
    let (rets, _) = fleet.halite_json(&[
        "web1",
        "cp.get_file",
        "salt://files/motd.j2",
        &copy.display().to_string(),
        "makedirs=True",
    ]);
    assert_eq!(rets["web1"], json!(copy.display().to_string()));
    assert_eq!(
        std::fs::read(&copy).expect("copy"),
        std::fs::read(fleet.path("trees/salt/files/motd.j2")).expect("source")
    );
    let (rets, _) = fleet.halite_json(&["web1", "cp.get_file_str", "salt://nope"]);
    assert_eq!(rets["web1"], json!(false));

    // Each minion sees its own pillar only.
    let (rets, _) = fleet.halite_json(&["*", "pillar.items", "unmask=True"]);
    assert_eq!(rets["web1"]["secret"], "web-only-s3cret");
    assert_eq!(rets["db1"]["secret"], "db-only-s3cret");
    assert!(!rets["web1"].to_string().contains("db-only"));
    assert!(!rets["db1"].to_string().contains("web-only"));

    // Views are compiled on the master with the minion's grains.
    let (rets, _) = fleet.halite_json(&["db1", "state.show_top"]);
    assert_eq!(rets["db1"], json!({"base": ["common", "db"]}));
    let (rets, _) = fleet.halite_json(&["web1", "state.show_sls", "web"]);
    assert!(rets["web1"]["reload_site"]["cmd"].is_array(), "{rets:?}");
    let (rets, _) = fleet.halite_json(&["web1", "state.graph", "web"]);
    assert!(
        rets["web1"]
            .as_str()
            .is_some_and(|d| d.starts_with("digraph")),
        "{rets:?}"
    );
    let (rets, _) = fleet.halite_json(&["web1", "state.show_lowstate"]);
    let low = rets["web1"].as_array().expect("chunks");
    assert!(low.iter().any(|c| c["__id__"] == "reload_site"));

    // A render error comes back as that minion's return, naming file and line.
    let (rets, code) = fleet.halite_json(&["web1", "state.sls", "bad"]);
    assert_eq!(code, 1);
    let errors = rets["web1"].to_string();
    assert!(
        errors.contains("bad") && errors.contains("line 3"),
        "{errors}"
    );
}

#[test]
fn a_render_time_call_runs_beside_the_job_waiting_for_its_bundle() {
    // With one job slot, the job waiting for its bundle holds the slot;
    // the render-time call its compile needs must not wait behind it.
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    write(
        &salt.join("slow.sls"),
        "waited:\n  test.succeed_without_changes:\n    - name: \"{{ salt['cmd.run']('sleep 1; echo done') }}\"\n",
    );
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n",
        salt.display()
    ));
    let _m = fleet.start_minion("solo", "process_count_max: 1\n");
    fleet.wait_responding("solo");
    let (rets, code) = fleet.halite_json(&["solo", "state.apply", "slow", "-t", "20"]);
    assert_eq!(code, 0, "{rets:?}");
    let states = states(&rets, "solo");
    assert_eq!(by_id(&states, "waited")["name"], "done");
}

#[test]
fn a_file_client_local_minion_compiles_its_own_tree_and_state_events_false_is_quiet() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let own = fleet.path("own");
    write(
        &own.join("solo.sls"),
        "mine:\n  test.succeed_without_changes:\n    - name: from {{ grains['id'] }}'s own tree\n",
    );
    let _master = fleet.start_master("auto_accept: True");
    let tree = format!(
        "file_client: local\nfile_roots:\n  base: [{}]\n",
        own.display()
    );
    let _loner = fleet.start_minion("loner", &format!("{tree}state_events: False\n"));
    let _chatty = fleet.start_minion("chatty", &tree);
    fleet.wait_responding("loner");
    fleet.wait_responding("chatty");
    let events = fleet.watch_events();
    let (rets, code) = fleet.halite_json(&["-L", "loner,chatty", "state.apply", "solo"]);
    let seen = events.stop();
    assert!(seen.contains("/ret/loner"), "{seen}");
    assert!(!seen.contains("/prog/loner/"), "{seen}");
    assert!(seen.contains("/prog/chatty/0"), "{seen}");
    assert_eq!(code, 0, "{rets:?}");
    let states = states(&rets, "loner");
    assert_eq!(by_id(&states, "mine")["name"], "from loner's own tree");
}
