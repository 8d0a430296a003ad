//! The Salt mine with real daemons on loopback: one minion's
//! `mine_functions` (config, pillar, alias form, `allow_tgt`) read by
//! another minion's SLS through `salt['mine.get']` compiled on the master,
//! `mine.send`/`get`/`delete`/`flush`/`update`/`valid` through the CLI, the
//! `cache.mine` and `mine.get` runners, mine data surviving a master
//! restart, and a deleted key losing its mine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should stop the test with its message"
)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn run_json(fleet: &Fleet, args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.extend(["--out", "json"]);
    let out = fleet.cli("halite-run", &full);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `halite <id> <fun> [args]`'s return of `id`.
fn call(fleet: &Fleet, id: &str, fun_and_args: &[&str]) -> Value {
    let mut args = vec![id];
    args.extend(fun_and_args);
    let (rets, code) = fleet.halite_json(&args);
    let ret = rets.get(id).cloned().unwrap_or(Value::Null);
    assert_eq!(code, 0, "{fun_and_args:?}: {ret}");
    ret
}

/// The JSON file a `consume` state run wrote for `id`.
fn consumed(fleet: &Fleet, id: &str) -> Value {
    let path = fleet.path(&format!("out/{id}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn one_minions_mine_reaches_anothers_sls_through_the_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    let pillar = fleet.path("pillar");
    std::fs::create_dir_all(&salt).unwrap();
    std::fs::create_dir_all(&pillar).unwrap();
    std::fs::create_dir_all(fleet.path("out")).unwrap();
    // Rendered on the master for the minion that applies it.
    std::fs::write(
        salt.join("consume.sls"),
        format!(
            "{{% set seen = {{'ips': salt['mine.get']('db1', 'network.ip_addrs'), 'role': salt['mine.get']('db*', 'role_echo'), 'secret': salt['mine.get']('db1', 'secret_echo'), 'by_grain': salt['mine.get']('id:db1', 'role_echo', tgt_type='grain')}} %}}\n{}/out/{{{{ grains['id'] }}}}.json:\n  file.managed:\n    - contents: '{{{{ seen | json }}}}'\n",
            fleet.root.path().display()
        ),
    )
    .unwrap();
    // db1's pillar adds an alias-form mine function only app1 may read.
    std::fs::write(pillar.join("top.sls"), "base:\n  db1:\n    - mine\n").unwrap();
    std::fs::write(
        pillar.join("mine.sls"),
        "mine_functions:\n  secret_echo:\n    - mine_function: test.echo\n    - s3cret\n    - allow_tgt: app1\n",
    )
    .unwrap();
    let master_cfg = format!(
        "file_roots:\n  base:\n    - {}\npillar_roots:\n  base:\n    - {}\n",
        salt.display(),
        pillar.display()
    );
    let mut master = fleet.start_master(&master_cfg);
    // db1's config: the plain form and the alias form.
    let _db1 = fleet.start_minion(
        "db1",
        "mine_functions:\n  network.ip_addrs: []\n  role_echo:\n    - mine_function: test.echo\n    - db-primary\n",
    );
    let _app1 = fleet.start_minion("app1", "");
    let _web1 = fleet.start_minion("web1", "mine_enabled: False\n");
    for id in ["db1", "app1", "web1"] {
        fleet.accept(id);
    }

    // db1 sends its mine once authenticated (Salt's run_on_start).
    assert!(
        wait_for(Duration::from_secs(30), || {
            let mine = run_json(&fleet, &["cache.mine"]);
            mine["db1"].as_object().is_some_and(|m| m.len() == 3)
        }),
        "db1's mine never reached the master: {}",
        run_json(&fleet, &["cache.mine"])
    );
    // One pillar compile at start serves the start-up refresh_pillar and
    // the first mine.update (which reads the pillar's mine_functions).
    let compiles = master
        .log_text()
        .lines()
        .filter(|l| l.contains("pillar compiled") && l.contains("db1"))
        .count();
    assert_eq!(compiles, 1, "{}", master.log_text());
    let mine = run_json(&fleet, &["cache.mine"]);
    assert_eq!(mine["db1"]["role_echo"], "db-primary", "{mine}");
    // allow_tgt entries are stored wrapped, as Salt stores them.
    assert_eq!(
        mine["db1"]["secret_echo"],
        json!({"__data__": "s3cret", "__saltmine_acl__": 1, "allow_tgt": "app1"}),
        "{mine}"
    );
    let db1_ips = call(&fleet, "db1", &["network.ip_addrs"]);
    assert_eq!(mine["db1"]["network.ip_addrs"], db1_ips, "{mine}");

    // app1's SLS, compiled on the master, sees db1's data; the allow_tgt
    // entry is given to app1 and withheld from web1.
    let ret = call(&fleet, "app1", &["state.apply", "consume"]);
    assert!(ret.to_string().contains("\"result\":true"), "{ret}");
    assert_eq!(
        consumed(&fleet, "app1"),
        json!({"ips": {"db1": db1_ips}, "role": {"db1": "db-primary"}, "secret": {"db1": "s3cret"}, "by_grain": {"db1": "db-primary"}})
    );
    call(&fleet, "web1", &["state.apply", "consume"]);
    assert_eq!(consumed(&fleet, "web1")["secret"], json!({}));

    // The exec functions through the CLI.
    assert_eq!(
        call(&fleet, "app1", &["mine.get", "db1", "role_echo"]),
        json!({"db1": "db-primary"})
    );
    assert_eq!(
        call(
            &fleet,
            "web1",
            &["mine.send", "web_echo", "mine_function=test.echo", "hello"]
        ),
        json!(true)
    );
    assert_eq!(
        call(&fleet, "app1", &["mine.get", "*", "role_echo,web_echo"]),
        json!({"role_echo": {"db1": "db-primary"}, "web_echo": {"web1": "hello"}})
    );
    assert_eq!(
        call(
            &fleet,
            "app1",
            &["mine.get", "db1,web1", "web_echo", "tgt_type=list"]
        ),
        json!({"web1": "hello"})
    );
    assert_eq!(
        call(
            &fleet,
            "app1",
            &[
                "mine.get",
                "G@id:db1 or web*",
                "role_echo",
                "tgt_type=compound"
            ]
        ),
        json!({"db1": "db-primary"})
    );
    assert_eq!(
        call(
            &fleet,
            "web1",
            &["mine.get", "web*", "web_echo", "exclude_minion=True"]
        ),
        json!({})
    );
    assert_eq!(
        call(&fleet, "db1", &["mine.valid"]),
        json!({
            "network.ip_addrs": [],
            "role_echo": {"test.echo": ["db-primary"]},
            "secret_echo": {"test.echo": ["s3cret"]},
        })
    );
    // The runners: mine.get asks as the master's id, which app1's
    // allow_tgt does not name.
    assert_eq!(
        run_json(&fleet, &["mine.get", "*", "role_echo"]),
        json!({"db1": "db-primary"})
    );
    assert_eq!(
        run_json(&fleet, &["mine.get", "db1", "secret_echo"]),
        json!({})
    );

    // A restart of the master keeps the mine: web_echo was sent once by
    // mine.send, never again by a mine.update.
    master.kill();
    let _master = fleet.start_master(&master_cfg);
    fleet.wait_responding("app1");
    assert_eq!(
        call(&fleet, "app1", &["mine.get", "web1", "web_echo"]),
        json!({"web1": "hello"})
    );

    // delete, flush, update.
    assert_eq!(
        call(&fleet, "web1", &["mine.delete", "web_echo"]),
        json!(true)
    );
    assert_eq!(
        call(&fleet, "app1", &["mine.get", "*", "web_echo"]),
        json!({})
    );
    assert_eq!(call(&fleet, "db1", &["mine.flush"]), json!(true));
    assert_eq!(run_json(&fleet, &["cache.mine", "tgt=db1"]), json!({}));
    assert_eq!(call(&fleet, "db1", &["mine.update"]), json!(true));
    assert_eq!(
        call(&fleet, "app1", &["mine.get", "db1", "role_echo"]),
        json!({"db1": "db-primary"})
    );

    // A deleted key loses its mine, as Salt clears a deleted minion's cache.
    call(
        &fleet,
        "web1",
        &["mine.send", "web_echo", "mine_function=test.echo", "again"],
    );
    assert_eq!(
        run_json(&fleet, &["cache.mine", "tgt=web1"]),
        json!({"web1": {"web_echo": "again"}})
    );
    let out = fleet.cli("halite-key", &["-d", "web1", "-y"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        call(&fleet, "app1", &["mine.get", "*", "web_echo"]),
        json!({})
    );
    // The row is gone from the job cache too, not only hidden by targeting.
    let cache =
        halite_client::jobcache::JobCache::open(&fleet.path("master-cache/jobs.sqlite")).unwrap();
    let stored: Vec<String> = cache
        .all_mine()
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(stored, ["db1"]);
}

/// Ten swarm identities each send their own `swarm_index` grain (alias
/// form over `grains.get`); a real minion's SLS reads all of them, and by
/// grain only the Debian ones (identities 1, 5, 9).
#[test]
fn every_swarm_identity_sends_its_own_mine() {
    if !can_run() {
        return;
    }
    const N: usize = 10;
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    std::fs::create_dir_all(&salt).unwrap();
    std::fs::create_dir_all(fleet.path("out")).unwrap();
    std::fs::write(
        salt.join("consume.sls"),
        format!(
            "{{% set seen = {{'all': salt['mine.get']('swarm-*', 'index'), 'debian': salt['mine.get']('os:Debian', 'index', tgt_type='grain')}} %}}\n{}/out/{{{{ grains['id'] }}}}.json:\n  file.managed:\n    - contents: '{{{{ seen | json }}}}'\n",
            fleet.root.path().display()
        ),
    )
    .unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}\n",
        salt.display()
    ));
    let dir = fleet.path("swarm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("minion"),
        format!(
            "master: 127.0.0.1\nmaster_port: {}\npublish_port: {}\nid: swarm\npki_dir: {d}/pki\ncachedir: {d}/cache\nsock_dir: {d}/sock\nlog_file: {d}/swarm.log\nlog_level: info\nmine_functions:\n  index:\n    - mine_function: grains.get\n    - swarm_index\n",
            fleet.ret_port,
            fleet.publish_port,
            d = dir.display()
        ),
    )
    .unwrap();
    let _swarm = Daemon {
        child: std::process::Command::new(bin("halite-minion"))
            .arg("-c")
            .arg(&dir)
            .args(["--swarm", &N.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
        log: dir.join("swarm.log"),
    };
    let _reader = fleet.start_minion("reader", "");
    fleet.wait_responding("reader");
    let expected: serde_json::Map<String, Value> =
        (0..N).map(|n| (format!("swarm-{n}"), json!(n))).collect();
    assert!(
        wait_for(Duration::from_secs(40), || {
            run_json(&fleet, &["mine.get", "swarm-*", "index"]) == Value::Object(expected.clone())
        }),
        "the swarm's mine never arrived: {}",
        run_json(&fleet, &["cache.mine"])
    );
    call(&fleet, "reader", &["state.apply", "consume"]);
    assert_eq!(
        consumed(&fleet, "reader"),
        json!({"all": expected, "debian": {"swarm-1": 1, "swarm-5": 5, "swarm-9": 9}})
    );
}
