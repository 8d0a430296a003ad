//! Pillar sources and merging through the masterless path (the same
//! `pillar_render::compile_full` the master's compiler calls): real
//! `pillar_roots` files, a real `cmd_json`/`cmd_yaml` command and a real
//! `file_tree` directory in a temp dir. The expected pillars are what Salt
//! 3008.5 gave for the same tree (`salt-call --local pillar.items
//! unmask=True`, recorded in docs/pillar.md's session), except that
//! file_tree values are strings where Salt prints Python bytes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_test_support::gpg;
use serde_json::{json, Value};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The tree of the recorded cases: pillar_roots (an SLS with an include),
/// a cmd_json script, a file_tree with one `keep_newline` glob.
fn tree(dir: &Path) {
    write(&dir.join("pillar/top.sls"), "base:\n  '*':\n    - common\n");
    write(
        &dir.join("pillar/common.sls"),
        "include:\n  - inc\ntop:\n  x: 1\n  keep: 2\n  deep:\n    p: 1\nl: [1, 2]\n",
    );
    write(
        &dir.join("pillar/inc.sls"),
        "top:\n  x: 0\n  fromInc: yes\nl: [0]\n",
    );
    write(&dir.join("ft/hosts/oracle/sub/file1"), "secret\n");
    write(&dir.join("ft/hosts/oracle/f2"), "v2\n");
    let script = dir.join("cmd.sh");
    write(
        &script,
        "#!/bin/sh\necho \"{\\\"top\\\": {\\\"x\\\": 9, \\\"deep\\\": {\\\"q\\\": 2}}, \\\"l\\\": [2, 3], \\\"who\\\": \\\"$1\\\"}\"\n",
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

fn pillar_with(dir: &Path, extra: Value) -> (Value, Vec<String>) {
    let mut opts = json!({
        "id": "oracle",
        "file_client": "local",
        "file_roots": {"base": [dir.join("srv")]},
        "pillar_roots": {"base": [dir.join("pillar")]},
        "cachedir": dir.join("cache"),
        "pillar_merge_lists": true,
        "ext_pillar": [
            {"cmd_json": format!("{} %s", dir.join("cmd.sh").display())},
            {"file_tree": {"root_dir": dir.join("ft"), "keep_newline": ["sub/*"]}},
        ],
    });
    for (k, v) in extra.as_object().unwrap() {
        opts[k] = v.clone();
    }
    let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
    (host.pillar, errors)
}

#[test]
fn merging_strategies_and_ext_pillar_first_match_salt() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let files = json!({"f2": "v2", "sub": {"file1": "secret\n"}, "who": "oracle"});
    let with_files = |v: Value| {
        let mut v = v;
        for (k, x) in files.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    // (strategy, ext_pillar_first, Salt 3008.5's pillar.items)
    let cases = [
        (
            "smart",
            false,
            json!({"l": [0, 1, 2, 3], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 9}}),
        ),
        (
            "smart",
            true,
            json!({"l": [2, 3, 0, 1], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 1}}),
        ),
        (
            "aggregate",
            false,
            json!({"l": [2, 3], "top": {"deep": {"q": 2}, "x": 9}}),
        ),
        (
            "aggregate",
            true,
            json!({"l": [1, 2], "top": {"deep": {"p": 1}, "keep": 2, "x": 1}}),
        ),
        (
            "overwrite",
            false,
            json!({"l": [2, 3], "top": {"deep": {"q": 2}, "x": 9}}),
        ),
        (
            "overwrite",
            true,
            json!({"l": [1, 2], "top": {"deep": {"p": 1}, "keep": 2, "x": 1}}),
        ),
        (
            "none",
            false,
            json!({"l": [2, 3], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 9}}),
        ),
        (
            "none",
            true,
            json!({"l": [1, 2], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 1}}),
        ),
    ];
    for (strategy, first, want) in cases {
        let (pillar, errors) = pillar_with(
            dir.path(),
            json!({"pillar_source_merging_strategy": strategy, "ext_pillar_first": first}),
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            pillar,
            with_files(want),
            "{strategy} ext_pillar_first={first}"
        );
    }
}

#[test]
fn a_broken_cmd_yaml_is_an_error_naming_the_source_and_not_its_output() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let bad = dir.path().join("bad.sh");
    write(&bad, "#!/bin/sh\necho 'key: [unclosed leaked-551'\n");
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (pillar, errors) = pillar_with(
        dir.path(),
        json!({"ext_pillar": [{"cmd_yaml": bad.display().to_string()}]}),
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("ext_pillar cmd_yaml"), "{errors:?}");
    assert!(!errors[0].contains("leaked-551"), "{errors:?}");
    // The rest of the pillar is still compiled.
    assert_eq!(pillar["top"]["keep"], json!(2));
}

#[test]
fn a_template_error_names_only_the_sls_unless_safe_render_error_is_off() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    write(
        &dir.path().join("pillar/common.sls"),
        "pw: hidden-text-88\n{{ undefined_fn() }}\n",
    );
    let (_, errors) = pillar_with(dir.path(), json!({"ext_pillar": []}));
    assert_eq!(
        errors,
        vec!["Rendering SLS 'common' failed. Please see master log for details.".to_string()]
    );
    let (_, errors) = pillar_with(
        dir.path(),
        json!({"ext_pillar": [], "pillar_safe_render_error": false}),
    );
    assert!(
        errors[0].starts_with("Rendering SLS 'common' failed, render error:"),
        "{errors:?}"
    );
}

#[test]
fn gpg_blocks_anywhere_are_decrypted_and_a_missing_key_fails_as_salt_3008() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    if !gpg::available() {
        return;
    }
    let cipher = gpg::key_and_cipher(&dir.path().join("conf/gpgkeys"), "s3cret-value");
    let block: String = cipher.lines().map(|l| format!("        {l}\n")).collect();
    write(
        &dir.path().join("pillar/common.sls"),
        &format!("#!yaml|gpg\nplain: text\ndb:\n  list:\n    - pw: |\n{block}"),
    );
    // gpg_keydir defaults to <config_dir>/gpgkeys.
    let conf = json!({"ext_pillar": [], "config_dir": dir.path().join("conf")});
    let (pillar, errors) = pillar_with(dir.path(), conf);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(pillar["db"]["list"][0]["pw"], json!("s3cret-value"));
    assert_eq!(pillar["plain"], json!("text"));

    // A key dir without the key: gpg_decrypt_must_succeed (on) fails the SLS.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::set_permissions(&empty, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let (_, errors) = pillar_with(dir.path(), json!({"ext_pillar": [], "gpg_keydir": empty}));
    assert_eq!(
        errors,
        vec!["Rendering SLS 'common' failed. Please see master log for details.".to_string()]
    );
    // Off: the block is left as it was (Salt logs a warning).
    let (pillar, errors) = pillar_with(
        dir.path(),
        json!({"ext_pillar": [], "gpg_keydir": empty, "gpg_decrypt_must_succeed": false}),
    );
    assert!(errors.is_empty(), "{errors:?}");
    let left = pillar["db"]["list"][0]["pw"].as_str().unwrap();
    assert!(left.starts_with("-----BEGIN PGP MESSAGE-----"), "{left}");
}

/// `|gpg` at the end of a longer pipeline, by shebang (`#!jinja|yaml|gpg`)
/// and as the `renderer` option for a file without one: Jinja runs first,
/// then every armored block (a mapping value, a list item) is decrypted,
/// as Salt 3008.5 gave for the same file.
#[test]
fn gpg_at_the_end_of_a_pipeline_by_shebang_or_renderer_option() {
    if !gpg::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let cipher = gpg::key_and_cipher(&dir.path().join("keys"), "S3cret-Jinja-99");
    let indent = |n: usize| -> String {
        cipher
            .lines()
            .map(|l| format!("{}{l}\n", " ".repeat(n)))
            .collect()
    };
    let body = format!(
        "{{% set who = 'admin' %}}\nuser: {{{{ who }}}}\npw: |\n{}list:\n  - |\n{}",
        indent(2),
        indent(4)
    );
    // Salt 3008.5's pillar.items unmask=True, both ways.
    let salt = json!({"user": "admin", "pw": "S3cret-Jinja-99", "list": ["S3cret-Jinja-99"]});
    for (shebang, renderer) in [("#!jinja|yaml|gpg\n", None), ("", Some("jinja|yaml|gpg"))] {
        write(
            &dir.path().join("pillar/common.sls"),
            &format!("{shebang}{body}"),
        );
        let mut extra = json!({"ext_pillar": [], "gpg_keydir": dir.path().join("keys")});
        if let Some(r) = renderer {
            extra["renderer"] = json!(r);
        }
        let (pillar, errors) = pillar_with(dir.path(), extra);
        assert!(errors.is_empty(), "{renderer:?}: {errors:?}");
        assert_eq!(pillar, salt, "{renderer:?}");
    }
}

/// `recurse` and `pillar_merge_lists: False` end to end, and a `cmd_yaml`
/// source that works, each against Salt 3008.5's `pillar.items
/// unmask=True` on the same tree (file_tree's keys left out of Salt's
/// output, which gives them as bytes).
#[test]
fn recurse_merge_lists_off_and_cmd_yaml_match_salt() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let script = dir.path().join("cmdy.sh");
    write(
        &script,
        "#!/bin/sh\nprintf 'top:\\n  x: 7\\n  deep: {r: 3}\\nl: [4]\\nyamlwho: %s\\n' \"$1\"\n",
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cmd_yaml = json!([{"cmd_yaml": format!("{} %s", script.display())}]);
    // (strategy, ext_pillar_first, pillar_merge_lists, cmd_yaml instead of
    // cmd_json + file_tree, Salt 3008.5's pillar.items)
    let cases = [
        (
            "recurse",
            false,
            true,
            false,
            json!({"l": [0, 1, 2, 3], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 9}, "who": "oracle"}),
        ),
        (
            "recurse",
            true,
            true,
            false,
            json!({"l": [2, 3, 0, 1], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 1}, "who": "oracle"}),
        ),
        (
            "smart",
            false,
            false,
            false,
            json!({"l": [2, 3], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 9}, "who": "oracle"}),
        ),
        (
            "recurse",
            false,
            false,
            false,
            json!({"l": [2, 3], "top": {"deep": {"p": 1, "q": 2}, "fromInc": true, "keep": 2, "x": 9}, "who": "oracle"}),
        ),
        (
            "smart",
            false,
            true,
            true,
            json!({"l": [0, 1, 2, 4], "top": {"deep": {"p": 1, "r": 3}, "fromInc": true, "keep": 2, "x": 7}, "yamlwho": "oracle"}),
        ),
        (
            "smart",
            false,
            false,
            true,
            json!({"l": [4], "top": {"deep": {"p": 1, "r": 3}, "fromInc": true, "keep": 2, "x": 7}, "yamlwho": "oracle"}),
        ),
    ];
    for (strategy, first, lists, yaml, salt) in cases {
        let mut extra = json!({"pillar_source_merging_strategy": strategy,
            "ext_pillar_first": first, "pillar_merge_lists": lists});
        if yaml {
            extra["ext_pillar"] = cmd_yaml.clone();
        }
        let (mut pillar, errors) = pillar_with(dir.path(), extra);
        assert!(errors.is_empty(), "{errors:?}");
        for key in ["f2", "sub"] {
            pillar.as_object_mut().unwrap().remove(key);
        }
        assert_eq!(
            pillar, salt,
            "{strategy} ext_pillar_first={first} pillar_merge_lists={lists} cmd_yaml={yaml}"
        );
    }
}

#[test]
fn pillarenv_and_strategy_none_choose_the_top_files_as_salt() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("base/top.sls"), "base:\n  '*':\n    - a\n");
    write(&d.join("base/a.sls"), "k: base\nonly_base: 1\n");
    write(&d.join("dev/top.sls"), "dev:\n  '*':\n    - b\n");
    write(&d.join("dev/b.sls"), "k: dev\nonly_dev: 1\n");
    let roots = json!({"base": [d.join("base")], "dev": [d.join("dev")]});
    // (extra options, Salt 3008.5's pillar.items)
    let cases = [
        (
            json!({}),
            json!({"k": "dev", "only_base": 1, "only_dev": 1}),
        ),
        (
            json!({"pillarenv": "dev"}),
            json!({"k": "dev", "only_dev": 1}),
        ),
        (
            json!({"pillar_source_merging_strategy": "none"}),
            json!({"k": "base", "only_base": 1}),
        ),
        (
            json!({"pillarenv_from_saltenv": true, "saltenv": "dev"}),
            json!({"k": "dev", "only_dev": 1}),
        ),
    ];
    for (extra, want) in cases {
        let mut opts = extra.clone();
        opts["pillar_roots"] = roots.clone();
        opts["ext_pillar"] = json!([]);
        let (pillar, errors) = pillar_with(d, opts);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(pillar, want, "{extra}");
    }
}
