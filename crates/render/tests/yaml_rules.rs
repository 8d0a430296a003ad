//! Salt's YAML rules, checked through the public loader and dumper.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use halite_render::yaml;
use serde_json::json;

fn load(text: &str) -> serde_json::Value {
    match yaml::load(text) {
        Ok(value) => value,
        Err(e) => panic!("{text:?} should load: {}", e.message),
    }
}

fn load_err(text: &str) -> yaml::YamlError {
    match yaml::load(text) {
        Ok(value) => panic!("{text:?} should fail, loaded {value}"),
        Err(e) => e,
    }
}

#[test]
fn scalars_resolve_as_salt_resolves_them() {
    let data = load(
        "a: 0644\nb: 0750\nc: yes\nd: Off\ne: ~\nf:\ng: 2024-01-02\nh: 1e5\ni: 1.5e+3\nk: 0x1F\nl: \"0644\"\n\
         m: 1_000\nt: 12:30:00\nu: -0644\nv: +12\nw: 3.\nx: NULL\ny: TRUE\nz: 0b101\nq: 'yes'\nr: !!str 12\n",
    );
    assert_eq!(
        data,
        json!({"a": 644, "b": 750, "c": true, "d": false, "e": null, "f": null, "g": "2024-01-02", "h": "1e5",
               "i": 1500.0, "k": 31, "l": "0644", "m": 1000, "t": 45000, "u": -420, "v": 12, "w": 3.0,
               "x": null, "y": true, "z": 5, "q": "yes", "r": "12"})
    );
}

#[test]
fn documents_markers_bom_crlf_and_binary() {
    // Each as Salt's loader reads it.
    assert_eq!(load("\u{feff}a: 1\n"), json!({"a": 1}));
    assert_eq!(load("a: 1\r\nb:\r\n  - x\r\n"), json!({"a": 1, "b": ["x"]}));
    assert_eq!(load("%YAML 1.1\n---\na: yes\n...\n"), json!({"a": true}));
    assert_eq!(load("a: !!binary aGk=\n"), json!({"a": "hi"}));
    assert_eq!(load("a: \"esc \\u00e9 \\x41\"\n"), json!({"a": "esc é A"}));
    assert_eq!(
        load_err("a: 1\n---\nb: 2\n").message,
        "expected a single document in the stream\n  in \"<unicode string>\", line 1, column 1\nbut found another document\n  in \"<unicode string>\", line 2, column 1"
    );
}

#[test]
fn infinity_and_nan_become_python_spellings() {
    assert_eq!(
        load("a: .inf\nb: -.INF\nc: .nan\n"),
        json!({"a": "inf", "b": "-inf", "c": "nan"})
    );
}

#[test]
fn mapping_order_is_document_order() {
    let data = load("zeta: 1\nalpha: 2\nmid: 3\n");
    let keys: Vec<&String> = data
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["zeta", "alpha", "mid"]);
}

#[test]
fn non_string_keys_are_stringified_as_python_prints_them() {
    assert_eq!(
        load("2: a\n1.5: b\nyes: c\n~: d\n"),
        json!({"2": "a", "1.5": "b", "True": "c", "None": "d"})
    );
}

#[test]
fn anchors_aliases_and_merge_keys() {
    let data = load("base: &b {x: 1, y: [a, b]}\ncopy: *b\nmerged:\n  <<: *b\n  x: 2\nmulti:\n  <<: [{p: 1}, {q: 2}]\n");
    assert_eq!(data["copy"], json!({"x": 1, "y": ["a", "b"]}));
    assert_eq!(data["merged"], json!({"y": ["a", "b"], "x": 2}));
    let merged_keys: Vec<&String> = data["merged"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        merged_keys,
        ["y", "x"],
        "merged keys come first, as Salt's flatten_mapping puts them"
    );
    assert_eq!(data["multi"], json!({"q": 2, "p": 1}));
}

#[test]
fn block_scalars_and_quoted_ids() {
    let data = load("\"id with spaces/and.dots\\\\x\":\n  lit: |\n    one\n    two\n  fold: >\n    folded\n    text\n  sq: 'it''s'\n");
    assert_eq!(
        data,
        json!({"id with spaces/and.dots\\x": {"lit": "one\ntwo\n", "fold": "folded text\n", "sq": "it's"}})
    );
}

#[test]
fn empty_document_is_null() {
    assert_eq!(load(""), serde_json::Value::Null);
    assert_eq!(load("# only a comment\n\n"), serde_json::Value::Null);
}

#[test]
fn duplicate_top_level_id_is_a_conflicting_id_error() {
    let error = load_err("a:\n  test.nop: []\na:\n  test.nop: []\n");
    assert_eq!(
        error.message,
        "while constructing a mapping\n  in \"<unicode string>\", line 1, column 1\nfound conflicting ID 'a'\n  in \"<unicode string>\", line 3, column 1"
    );
    assert_eq!(error.line, Some(3));
}

#[test]
fn keys_equal_in_python_conflict() {
    // Salt: `{True: 1, 2: 2, 1: 3}` fails because True == 1 in Python.
    let error = load_err("k: {True: 1, 2: 2, 1: 3}\n");
    assert_eq!(
        error.message,
        "while constructing a mapping\n  in \"<unicode string>\", line 1, column 4\nfound conflicting ID '1'\n  in \"<unicode string>\", line 1, column 20"
    );
}

#[test]
fn duplicate_nested_flow_key_names_both_marks() {
    let error = load_err("c:\n  test.nop:\n    - m: {k: 1, k: 2}\n");
    assert_eq!(
        error.message,
        "while constructing a mapping\n  in \"<unicode string>\", line 3, column 10\nfound conflicting ID 'k'\n  in \"<unicode string>\", line 3, column 17"
    );
}

#[test]
fn unclosed_flow_sequence_reads_like_libyaml() {
    let error = load_err("a:\n  test.nop:\n    - name: [unclosed\nb: 1\n");
    assert_eq!(
        error.message,
        "while parsing a flow sequence\n  in \"<unicode string>\", line 3, column 13\ndid not find expected ',' or ']'\n  in \"<unicode string>\", line 4, column 2"
    );
    assert_eq!(error.line, Some(4));
}

#[test]
fn non_ascii_text_keeps_columns_and_flow_context() {
    assert_eq!(load("é: {ü: [ß]}\n"), json!({"é": {"ü": ["ß"]}}));
    let error = load_err("ä: ö\nx:\n  - name: [ünclosed\nb: 1\n");
    assert!(
        error.message.starts_with(
            "while parsing a flow sequence\n  in \"<unicode string>\", line 3, column 11"
        ),
        "{}",
        error.message
    );
}

#[test]
fn unclosed_flow_mapping_reads_like_libyaml() {
    let error = load_err("a:\n  test.nop:\n    - x: {a: 1\nb: 2\n");
    assert_eq!(
        error.message,
        "while parsing a flow mapping\n  in \"<unicode string>\", line 3, column 10\ndid not find expected ',' or '}'\n  in \"<unicode string>\", line 4, column 2"
    );
}

#[test]
fn scanner_errors_are_bare_problems_like_salt_prints_them() {
    assert_eq!(
        load_err("a: b: c\n").message,
        "mapping values are not allowed in this context"
    );
    assert_eq!(
        load_err("a:\n  test.nop:\n    - x: \"unclosed\n").message,
        "found unexpected end of stream"
    );
    let tab = load_err("a:\n  test.nop:\n\t- x: 1\n");
    assert_eq!(tab.message, "found character that cannot start any token");
    assert_eq!(tab.line, Some(3));
}

#[test]
fn undefined_alias_reads_like_pyyaml() {
    assert_eq!(
        load_err("a: *nope\n").message,
        "found undefined alias\n  in \"<unicode string>\", line 1, column 4"
    );
}

#[test]
fn block_errors_match_salt() {
    // Each message is what Salt 3008.5 printed for the same document.
    assert_eq!(
        load_err("a:\n  - 1\n - 2\n").message,
        "while parsing a block mapping\n  in \"<unicode string>\", line 1, column 1\ndid not find expected key\n  in \"<unicode string>\", line 3, column 2"
    );
    assert_eq!(
        load_err("a:\n  test.nop:\n    - x: 1\n   - y: 2\n").message,
        "while parsing a block mapping\n  in \"<unicode string>\", line 2, column 3\ndid not find expected key\n  in \"<unicode string>\", line 4, column 4"
    );
    assert_eq!(
        load_err("a: [1, 2\n").message,
        "while parsing a flow sequence\n  in \"<unicode string>\", line 1, column 4\ndid not find expected ',' or ']'\n  in \"<unicode string>\", line 2, column 1"
    );
}

#[test]
fn block_mapping_without_key_names_its_start() {
    let error = load_err("a:\n  b: 1\n c: 2\n");
    assert_eq!(
        error.message,
        "while parsing a block mapping\n  in \"<unicode string>\", line 1, column 1\ndid not find expected key\n  in \"<unicode string>\", line 3, column 2"
    );
}

#[test]
fn unknown_tags_are_refused() {
    let error = load_err("a: !python/object foo\n");
    assert!(
        error
            .message
            .contains("could not determine a constructor for the tag"),
        "{}",
        error.message
    );
}

#[test]
fn pyyaml_wrapped_flow_text_loads_back() {
    // What PyYAML writes for a long `|yaml` value inside a block sequence.
    let text = "x:\n  s.r:\n    - context: {enabled: true, lookup: {service: apache2-custom}, mode: 644, modules: [ssl], pkg: apache2,\n  port: 8080, service: apache2-custom}\n    - other: 1\n";
    let data = load(text);
    assert_eq!(data["x"]["s.r"][0]["context"]["port"], json!(8080));
    assert_eq!(data["x"]["s.r"][1], json!({"other": 1}));
}

#[test]
fn dump_round_trips_salt_data() {
    let value = json!({"b": ["yes", "65", "*", "", "plain", "multi\nline", "it's"], "a": {"n": null, "t": true, "f": 1.5, "i": -3}});
    for flow in [true, false] {
        let text = yaml::dump(&value, flow);
        assert_eq!(
            load(&text),
            json!({"a": {"f": 1.5, "i": -3, "n": null, "t": true}, "b": value["b"]}),
            "{text}"
        );
    }
    assert_eq!(
        yaml::dump(&value["a"], true),
        "{f: 1.5, i: -3, n: null, t: true}\n"
    );
}

#[test]
fn outputter_dump_matches_salt_call_out_yaml() {
    // `salt-call --local --out yaml test.arg_repr zeta alpha z=1 a=2` printed exactly this.
    let value = json!({"local": {"kwargs": "{'z': 1, 'a': 2, '__pub_fun': 'test.arg_repr', '__pub_pid': 29479, '__pub_jid': '20261121214906291461', '__pub_tgt': 'salt-call'}",
                                 "args": "('zeta', 'alpha')"}});
    assert_eq!(
        yaml::dump_outputter(&value),
        "local:\n  args: ('zeta', 'alpha')\n  kwargs: '{''z'': 1, ''a'': 2, ''__pub_fun'': ''test.arg_repr'', ''__pub_pid'': 29479,\n    ''__pub_jid'': ''20261121214906291461'', ''__pub_tgt'': ''salt-call''}'\n"
    );
    assert_eq!(yaml::dump_outputter(&json!({"local": {}})), "local: {}\n");
}

#[test]
fn outputter_dump_sorts_keys() {
    let value = json!({"local": {"zeta": 1, "alpha": [1, {"k": "v"}]}});
    assert_eq!(
        yaml::dump_outputter(&value),
        "local:\n  alpha:\n  - 1\n  - k: v\n  zeta: 1\n"
    );
}
