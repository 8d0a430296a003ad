//! `halite-call` as a user runs it: the highstate outputter's text in every
//! `--state-output` mode compared with what salt-call 3008.5 printed for
//! the same tree (timing lines removed), return codes, and errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::process::Command;

const CHAIN: &str = "broken:\n  test.fail_without_changes\n\nneeds_broken:\n  test.succeed_with_changes:\n    - require:\n      - test: broken\n\nneeds_needs_broken:\n  test.succeed_with_changes:\n    - require:\n      - test: needs_broken\n\nindependent:\n  test.succeed_with_changes\n";

fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("main.sls"), CHAIN).unwrap();
    // Its own cachedir: the state-run lock lives there (tests run at once).
    std::fs::write(
        d.path().join("minion"),
        own_cachedir(d.path(), "id: local\n"),
    )
    .unwrap();
    d
}

/// `config` with a `cachedir` inside the test's tree.
fn own_cachedir(dir: &Path, config: &str) -> String {
    format!("{config}cachedir: {}/cache\n", dir.display())
}

fn halite_call(dir: &Path, args: &[&str]) -> (String, String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_halite-call"))
        .arg("--local")
        .arg("--config-dir")
        .arg(dir)
        .arg("--file-root")
        .arg(dir)
        .args(args)
        .output()
        .expect("run halite-call");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Drops the lines whose values are timings (they differ run to run).
fn untimed(text: &str) -> String {
    text.lines()
        .map(|l| l.split(" - Started:").next().unwrap_or(l))
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("Started:")
                && !t.starts_with("Duration:")
                && !t.starts_with("Total run time")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn highstate_output_matches_salt_in_every_mode() {
    let d = tree();
    for mode in ["full", "terse", "mixed", "changes"] {
        let (out, err, _) = halite_call(
            d.path(),
            &["state.apply", "main", &format!("--state-output={mode}")],
        );
        assert_eq!(
            untimed(&out).trim_end(),
            untimed(&fixture(&format!("require_fail_chain.{mode}.txt"))).trim_end(),
            "mode {mode}; stderr: {err}"
        );
    }
}

#[test]
fn return_codes_follow_salt_call() {
    let d = tree();
    // A failed state: 2 with --retcode-passthrough, 1 without.
    assert_eq!(
        halite_call(d.path(), &["--retcode-passthrough", "state.apply", "main"]).2,
        2
    );
    assert_eq!(halite_call(d.path(), &["state.apply", "main"]).2, 1);
    // A compile error: 1, with Salt's "Data failed to compile" block.
    let (out, _, rc) = halite_call(d.path(), &["state.apply", "nope"]);
    assert_eq!(rc, 1);
    assert_eq!(
        out.trim_end(),
        fixture("sls_not_found.txt")
            .lines()
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
            .split("[ERROR")
            .next()
            .unwrap()
            .trim_end()
    );
    // Success: 0.
    std::fs::write(
        d.path().join("ok.sls"),
        "fine:\n  test.succeed_without_changes\n",
    )
    .unwrap();
    assert_eq!(
        halite_call(d.path(), &["--retcode-passthrough", "state.apply", "ok"]).2,
        0
    );
    // An unknown function: Salt's message and 255.
    let (_, err, rc) = halite_call(d.path(), &["foo.bar"]);
    assert_eq!(rc, 255);
    assert!(err.contains("'foo.bar' is not available."), "{err}");
}

#[test]
fn json_output_and_arguments() {
    let d = tree();
    let (out, _, rc) = halite_call(
        d.path(),
        &["test.arg", "1", "two", "flag=True", "--out", "json"],
    );
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["local"]["args"], serde_json::json!([1, "two"]));
    assert_eq!(v["local"]["kwargs"]["flag"], serde_json::json!(true));
    let (out, _, _) = halite_call(d.path(), &["test.echo", "hello", "--out", "txt"]);
    assert_eq!(out.trim(), "local: hello");
    let (out, _, _) = halite_call(d.path(), &["test.ping"]);
    assert_eq!(out, "local:\n    True\n");
    let (out, _, _) = halite_call(d.path(), &["state.show_low_sls", "main", "--out", "yaml"]);
    assert!(out.starts_with("local:\n- __env__: base\n"), "{out}");
    // A successful show_low_sls is a list too, but not an error: exit 0.
    assert_eq!(
        halite_call(
            d.path(),
            &["--retcode-passthrough", "state.show_low_sls", "main"]
        )
        .2,
        0
    );
    assert_eq!(
        halite_call(
            d.path(),
            &["--retcode-passthrough", "state.show_low_sls", "nope"]
        )
        .2,
        1
    );
}

#[test]
fn missing_file_root_and_bad_outputter_are_clear_errors() {
    let d = tree();
    let (_, err, rc) = halite_call(d.path(), &["--out", "bogus", "test.ping"]);
    assert_eq!(rc, 1);
    assert!(err.contains("unknown outputter 'bogus'"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_halite-call"))
        .args(["--local", "--config-dir"])
        .arg(d.path())
        .args([
            "--file-root",
            "/nonexistent/halite-root",
            "state.apply",
            "main",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("No matching sls found for 'main' in env 'base'"));
}

/// `reload_pillar: True` on a state that rewrites a pillar file: the
/// states after it see the pillar compiled again (and the `pillar=`
/// argument still merged over it); without it they see the pillar the
/// run started with, as in Salt.
#[test]
fn reload_pillar_gives_later_states_the_new_pillar() {
    let d = tempfile::tempdir().unwrap();
    let (states, pillar, out) = (
        d.path().join("states"),
        d.path().join("pillar"),
        d.path().join("out"),
    );
    for dir in [&states, &pillar, &out] {
        std::fs::create_dir(dir).unwrap();
    }
    // Its own cachedir: the state-run lock lives there (tests run at once).
    std::fs::write(
        d.path().join("minion"),
        own_cachedir(d.path(), "id: local\n"),
    )
    .unwrap();
    std::fs::write(pillar.join("top.sls"), "base:\n  '*':\n    - data\n").unwrap();
    let sls = |reload: bool| {
        format!(
            "rewrite_pillar:\n  file.managed:\n    - name: {p}/data.sls\n    - contents: 'key: new'\n    - reload_pillar: {reload}\n\n\
             after:\n  file.managed:\n    - name: {o}/after.txt\n    - contents_pillar: key\n    - require:\n      - file: rewrite_pillar\n\n\
             override_kept:\n  file.managed:\n    - name: {o}/override.txt\n    - contents_pillar: given\n    - require:\n      - file: rewrite_pillar\n",
            p = pillar.display(),
            o = out.display(),
            reload = if reload { "True" } else { "False" },
        )
    };
    for (reload, expected) in [(true, "new"), (false, "old")] {
        std::fs::write(pillar.join("data.sls"), "key: old\n").unwrap();
        std::fs::write(states.join("refresh.sls"), sls(reload)).unwrap();
        let run = Command::new(env!("CARGO_BIN_EXE_halite-call"))
            .args([
                "--local",
                "--out",
                "json",
                "--retcode-passthrough",
                "--config-dir",
            ])
            .arg(d.path())
            .arg("--file-root")
            .arg(&states)
            .arg("--pillar-root")
            .arg(&pillar)
            .args(["state.apply", "refresh", r#"pillar={"given": "by hand"}"#])
            .output()
            .expect("run halite-call");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert_eq!(run.status.code(), Some(0), "reload {reload}: {stdout}");
        let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
        assert_eq!(
            read("after.txt").trim_end(),
            expected,
            "reload_pillar: {reload}"
        );
        assert_eq!(
            read("override.txt").trim_end(),
            "by hand",
            "reload_pillar: {reload}"
        );
    }
}

/// `state_aggregate` (minion config) and `aggregate: True` (one state)
/// are not acted on: the run says so once on stderr and every state still
/// runs on its own; without either there is no warning.
#[test]
fn state_aggregation_is_announced_as_unsupported_and_states_still_run() {
    let d = tempfile::tempdir().unwrap();
    let sls = "first:\n  test.succeed_without_changes\n\nsecond:\n  test.succeed_without_changes\n";
    std::fs::write(d.path().join("agg.sls"), sls).unwrap();
    let flagged =
        format!("{sls}\nthird:\n  test.succeed_without_changes:\n    - aggregate: True\n");
    std::fs::write(d.path().join("flagged.sls"), flagged).unwrap();
    let warning = "State aggregation (state_aggregate / aggregate: True) is not supported";
    for (config, sls, states, warned) in [
        ("id: local\nstate_aggregate: True\n", "agg", 2, true),
        ("id: local\nstate_aggregate:\n  - pkg\n", "agg", 2, true),
        ("id: local\n", "flagged", 3, true),
        ("id: local\nstate_aggregate: False\n", "agg", 2, false),
    ] {
        std::fs::write(d.path().join("minion"), own_cachedir(d.path(), config)).unwrap();
        let (out, err, code) = halite_call(
            d.path(),
            &["--out", "json", "--retcode-passthrough", "state.apply", sls],
        );
        assert_eq!(code, 0, "{config}: {err}");
        assert_eq!(
            err.matches(warning).count(),
            usize::from(warned),
            "{config}: {err}"
        );
        let ret: serde_json::Value = serde_json::from_str(&out).unwrap();
        let ran = ret["local"].as_object().unwrap();
        assert_eq!(ran.len(), states, "{config}: {out}");
        assert!(ran.values().all(|r| r["result"] == true), "{out}");
    }
}

/// `mine.*` masterless, as salt-call 3008.5 --local answered each step
/// (recorded by hand against the same config): the mine lives in the
/// minion's datastore (`<cachedir>/datastore`, Salt's msgpack file).
#[test]
fn masterless_mine_is_kept_in_the_minion_datastore() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("minion"),
        own_cachedir(
            d.path(),
            "id: local\nmine_functions:\n  test.ping: []\n  ident:\n    - mine_function: test.echo\n    - mine\n",
        ),
    )
    .unwrap();
    let call = |args: &[&str]| -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["--out", "json"]);
        let (out, err, rc) = halite_call(d.path(), &all);
        assert_eq!(rc, 0, "{args:?}: {out}{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["local"].clone()
    };
    use serde_json::json;
    assert_eq!(call(&["mine.send", "grains.item", "id"]), json!(true));
    assert_eq!(
        call(&["mine.get", "local", "grains.item"]),
        json!({"local": {"id": "local"}})
    );
    assert_eq!(call(&["mine.get", "other", "grains.item"]), json!({}));
    assert_eq!(call(&["mine.update"]), json!(true));
    assert_eq!(
        call(&["mine.get", "*", "grains.item,ident"]),
        json!({"grains.item": {"local": {"id": "local"}}, "ident": {"local": "mine"}})
    );
    assert_eq!(
        call(&["mine.get", "id:local", "test.ping", "tgt_type=grain"]),
        json!({"local": true})
    );
    assert_eq!(call(&["mine.delete", "test.ping"]), json!(true));
    assert_eq!(call(&["mine.get", "local", "test.ping"]), json!({}));
    // An entry with allow_tgt is the minion's own: unwrapped locally.
    assert_eq!(
        call(&[
            "mine.send",
            "alias",
            "mine_function=test.echo",
            "text=hi",
            "allow_tgt=nobody"
        ]),
        json!(true)
    );
    assert_eq!(
        call(&["mine.get", "local", "alias"]),
        json!({"local": "hi"})
    );
    assert_eq!(call(&["mine.send", "nope.nope"]), json!(false));
    // update with clear=True replaces the whole mine.
    assert_eq!(call(&["mine.update", "clear=True"]), json!(true));
    assert_eq!(call(&["mine.get", "local", "alias"]), json!({}));
    assert!(d.path().join("cache/datastore").is_file());
    assert_eq!(call(&["mine.flush"]), json!(true));
    assert_eq!(call(&["mine.get", "local", "ident"]), json!({}));
}

/// `halite-call --local` compiles its own pillar: a `#!yaml|gpg` secret it
/// decrypts reaches the call (the user sees `pillar.get ... unmask=True`
/// return it) while the
/// `rawfile_json` returner, which keeps the return in a file, gets it
/// masked as the minion's spooled returns and the master's job cache do.
#[test]
fn a_local_calls_returner_file_has_the_decrypted_secret_masked() {
    if !halite_test_support::gpg::available() {
        return;
    }
    let secret = "Local-Call-Secret-4242";
    let d = tempfile::tempdir().unwrap();
    let keys = d.path().join("gpgkeys");
    let cipher = halite_test_support::gpg::key_and_cipher(&keys, secret);
    let pillar = d.path().join("pillar");
    std::fs::create_dir_all(&pillar).unwrap();
    std::fs::write(pillar.join("top.sls"), "base:\n  '*':\n    - secret\n").unwrap();
    let indented: String = cipher.lines().map(|l| format!("    {l}\n")).collect();
    std::fs::write(
        pillar.join("secret.sls"),
        format!("#!yaml|gpg\npassword: |\n{indented}"),
    )
    .unwrap();
    let rawfile = d.path().join("returns.json");
    std::fs::write(
        d.path().join("minion"),
        own_cachedir(
            d.path(),
            &format!(
                "id: local\npillar_roots: {{base: [{}]}}\ngpg_keydir: {}\nrawfile_json.filename: {}\n",
                pillar.display(),
                keys.display(),
                rawfile.display()
            ),
        ),
    )
    .unwrap();
    let (out, err, code) = halite_call(
        d.path(),
        &[
            "pillar.get",
            "password",
            "unmask=True",
            "--return",
            "rawfile_json",
            "--out",
            "json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    // The user who ran the call sees the return as it is.
    assert!(out.contains(secret), "{out}");
    let stored = std::fs::read_to_string(&rawfile).unwrap();
    assert!(stored.contains("\"return\": \"**********\""), "{stored}");
    assert!(!stored.contains(secret), "{stored}");
}
