//! The `renderer` option (Salt's default pipeline for a file without a
//! shebang) through `halite-call --local`, for state files, the state top
//! file, pillar files and the pillar top file. Each expected answer is what
//! Salt 3008.5's `salt-call --local` gave for the same tree and option.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// A state tree and a pillar tree in a temp dir, with a minion config
/// naming `renderer`.
fn tree(renderer: &str, pillar_sls: &str, web_sls: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let files = [
        ("salt/top.sls", "base:\n  '*':\n    - web\n    - extra\n"),
        ("salt/web.sls", web_sls),
        // A shebang wins over the option.
        (
            "salt/extra.sls",
            "#!jinja|yaml\nextra:\n  test.succeed_without_changes:\n    - name: literal {{ 'x' }}\n",
        ),
        ("pillar/top.sls", "base:\n  '*':\n    - p\n"),
        ("pillar/p.sls", pillar_sls),
    ];
    for (path, text) in files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    let d_path = root.display();
    std::fs::write(
        root.join("minion"),
        format!(
            "id: local\nfile_client: local\nfile_roots: {{base: [{d_path}/salt]}}\npillar_roots: {{base: [{d_path}/pillar]}}\ncachedir: {d_path}/cache\nrenderer: '{renderer}'\n"
        ),
    )
    .unwrap();
    d
}

/// `halite-call --local --out=json <args>`: the `local` return and the exit code.
fn call(dir: &Path, args: &[&str]) -> (Value, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_halite-call"))
        .arg("--local")
        .arg("--config-dir")
        .arg(dir)
        .arg("--out=json")
        .args(args)
        .output()
        .expect("run halite-call");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    (json["local"].clone(), out.status.code().unwrap_or(-1))
}

/// The state tags of a run with their names, in run order.
fn tags_and_names(ret: &Value) -> Vec<(String, String)> {
    let mut states: Vec<(&String, &Value)> = ret.as_object().expect("states").iter().collect();
    states.sort_by_key(|(_, v)| v["__run_num__"].as_u64());
    states
        .into_iter()
        .map(|(k, v)| (k.clone(), v["name"].as_str().unwrap_or("").to_string()))
        .collect()
}

#[test]
fn jinja_yamlex_renders_states_tops_and_pillar_without_a_shebang() {
    let web = "{% set port = pillar.get('port', 0) %}\nsite:\n  test.succeed_without_changes:\n    - name: port {{ port }}\nsite:\n  test.succeed_without_changes:\n    - comment: ignored\n";
    // Under plain yaml the repeated key is an error; yamlex merges it.
    let d = tree("jinja|yamlex", "port: 80\nport: {{ 8000 + 80 }}\n", web);
    let (ret, code) = call(d.path(), &["state.apply"]);
    assert_eq!(code, 0, "{ret}");
    assert_eq!(
        tags_and_names(&ret),
        [
            // The later `site` wins with its list not yet filled: no name,
            // so the ID; yamlex strings print quoted in the tag.
            (
                "test_|-\"site\"_|-\"site\"_|-succeed_without_changes".to_string(),
                "site".to_string()
            ),
            (
                "test_|-extra_|-literal x_|-succeed_without_changes".to_string(),
                "literal x".to_string()
            ),
        ]
    );
    let (pillar, _) = call(d.path(), &["pillar.items", "unmask=True"]);
    assert_eq!(pillar, serde_json::json!({"port": 8080}));
}

#[test]
fn yaml_alone_leaves_jinja_unrendered() {
    let web = "site:\n  test.succeed_without_changes:\n    - name: \"port {{ pillar.get('port', 0) }}\"\n";
    let d = tree("yaml", "port: 80\n", web);
    let (ret, code) = call(d.path(), &["state.apply"]);
    assert_eq!(code, 0, "{ret}");
    assert_eq!(
        tags_and_names(&ret)[0],
        (
            "test_|-site_|-port {{ pillar.get('port', 0) }}_|-succeed_without_changes".to_string(),
            "port {{ pillar.get('port', 0) }}".to_string()
        )
    );
    let (pillar, _) = call(d.path(), &["pillar.items", "unmask=True"]);
    assert_eq!(pillar, serde_json::json!({"port": 80}));
}

/// A pillar file that only renders with Jinja fails under `yaml`: the
/// pillar lists the error under `_errors`, and a state run refuses, as
/// Salt 3008.5 does.
#[test]
fn yaml_alone_fails_a_pillar_that_needs_jinja() {
    let d = tree("yaml", "port: {{ 8000 + 80 }}\n", "site:\n  test.nop\n");
    let (pillar, _) = call(d.path(), &["pillar.items", "unmask=True"]);
    assert_eq!(
        pillar,
        serde_json::json!({"_errors": ["Rendering SLS 'p' failed. Please see master log for details."]})
    );
    let (ret, code) = call(d.path(), &["state.apply"]);
    assert_ne!(code, 0);
    assert_eq!(
        ret,
        serde_json::json!([
            "Pillar failed to render with the following messages:",
            "Rendering SLS 'p' failed. Please see master log for details."
        ])
    );
}

#[test]
fn old_style_names_are_pipelines() {
    let web = "site:\n  test.succeed_without_changes:\n    - name: \"port {{ pillar.get('port', 0) }}\"\n";
    let d = tree("yaml_jinja", "port: 80\n", web);
    let (ret, _) = call(d.path(), &["state.apply"]);
    assert_eq!(tags_and_names(&ret)[0].1, "port 80");
}

#[test]
fn an_unavailable_renderer_is_a_clear_error_naming_it() {
    let d = tree("mako|yaml", "port: 80\n", "site:\n  test.nop\n");
    let (ret, code) = call(d.path(), &["state.apply"]);
    assert_ne!(code, 0);
    let errors: Vec<&str> = ret
        .as_array()
        .expect("an error list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Salt: the pillar's top file fails first, in these words.
    assert_eq!(
        errors[0],
        "Pillar failed to render with the following messages:"
    );
    assert!(
        errors[1].starts_with("Rendering Primary Top file failed, render error:\n")
            && errors[1].contains("'mako'")
            && errors[1].contains("`renderer` option"),
        "{errors:?}"
    );
}

/// Where a yamlex SLS's strings came from is not data: the compile views
/// print chunks and high data as Salt does, with no key of halite's (the
/// key an older design hid there must not come back).
#[test]
fn show_views_of_a_yamlex_sls_hide_the_engine_mark() {
    let web = "site:\n  test.succeed_without_changes:\n    - name: a site\n";
    let d = tree("jinja|yamlex", "port: 80\n", web);
    for fun in ["state.show_low_sls", "state.show_sls"] {
        for out in ["--out=json", "--out=yaml"] {
            let output = Command::new(env!("CARGO_BIN_EXE_halite-call"))
                .arg("--local")
                .arg("--config-dir")
                .arg(d.path())
                .args([out, fun, "web"])
                .output()
                .expect("run halite-call");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(stdout.contains("a site"), "{fun} {out}: {stdout}");
            assert!(!stdout.contains("__yamlex__"), "{fun} {out}: {stdout}");
        }
    }
    let (low, _) = call(d.path(), &["state.show_lowstate"]);
    let keys: Vec<&str> = low[0]
        .as_object()
        .expect("a chunk")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["state", "name", "__sls__", "__env__", "__id__", "order", "fun"]
    );
}
