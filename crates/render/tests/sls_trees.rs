//! Whole SLS files rendered from template trees on disk: map.jinja / TOFS
//! idioms, imports with and without context, import_yaml rendered with
//! Jinja first, includes, shebangs. The `apache` tree's expected data is what
//! `salt-call --local state.show_sls apache` (Salt 3008.5) rendered for it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;
use common::*;
use serde_json::json;

const MAP_JINJA: &str = r#"{%- import_yaml tpldir ~ "/defaults.yaml" as defaults %}
{%- set os_map = salt['grains.filter_by']({
    'Debian': {'pkg': 'apache2', 'service': 'apache2'},
    'RedHat': {'pkg': 'httpd', 'service': 'httpd'},
}, grain='os_family', merge=salt['pillar.get']('apache:lookup')) %}
{%- do defaults.apache.update(os_map) %}
{%- set mapdata = salt['pillar.get']('apache', defaults.apache, merge=True) %}
"#;

const DEFAULTS_YAML: &str = "apache:\n  port: 80\n  mode: 0644\n  modules: [rewrite]\n  tpl_dir: {{ tpldir }}\n  enabled: yes\n";

const MACROS_JINJA: &str = r#"{%- macro conf_file(path, port=80, mode='0644') %}
{{ path }}:
  file.managed:
    - contents: "Listen {{ port }}"
    - mode: {{ mode }}
{%- endmacro %}
"#;

const APACHE_SLS: &str = r#"{% from tpldir ~ "/map.jinja" import mapdata with context %}
{% from "common/macros.jinja" import conf_file %}
{% set tplroot = tpldir.split('/')[0] %}
{% set users = [] %}
{% for name in ['bob', 'alice'] %}{% do users.append(name|upper) %}{% endfor %}
apache-pkg:
  pkg.installed:
    - name: {{ mapdata.pkg }}
    - version: {{ salt['pillar.get']('apache:version', 'latest') }}

{{ conf_file('/etc/apache2/ports.conf', mapdata.port) }}

apache-service:
  service.running:
    - name: {{ mapdata.service }}
    - enable: {{ mapdata.enabled }}
    - watch:
      - pkg: apache-pkg
    - context: {{ mapdata|yaml }}
    - users: {{ users|json }}
    - vars: "{{ tplroot }} {{ tpldir }} {{ tplfile }} {{ slspath }} {{ sls_path }} {{ slsdotpath }} {{ slscolonpath }} {{ sls }}"
    - cfg: {{ salt['config.get']('file_client') }} {{ salt['config.get']('from_master', 'x') }}
    - ver: {{ grains['saltversioninfo'] >= [2018, 3, 1] }}
{% load_yaml as extra %}
a: 1
b: [x, y]
{% endload %}
    - extra: {{ extra|json }}
"#;

fn apache_tree() -> Tree {
    Tree::new(&[
        ("apache/map.jinja", MAP_JINJA),
        ("apache/defaults.yaml", DEFAULTS_YAML),
        ("apache/init.sls", APACHE_SLS),
        ("common/macros.jinja", MACROS_JINJA),
    ])
}

#[test]
fn map_jinja_formula_renders_as_salt_renders_it() {
    let tree = apache_tree();
    let mut ctx = tree.context("apache", "apache/init.sls");
    ctx.pillar = json!({"apache": {"port": 8080, "modules": ["ssl"], "lookup": {"service": "apache2-custom"}},
                        "master": {"from_master": "m"}});
    let text = std::fs::read_to_string(tree.root().join("apache/init.sls")).expect("read");
    let data = halite_render::render_sls(&text, &ctx).map_err(|e| e.to_string());
    let expected = json!({
        "apache-pkg": {"pkg.installed": [{"name": "apache2"}, {"version": "latest"}]},
        "/etc/apache2/ports.conf": {"file.managed": [{"contents": "Listen 8080"}, {"mode": 644}]},
        "apache-service": {"service.running": [
            {"name": "apache2-custom"},
            {"enable": true},
            {"watch": [{"pkg": "apache-pkg"}]},
            {"context": {"enabled": true, "lookup": {"service": "apache2-custom"}, "mode": 644, "modules": ["ssl"],
                         "pkg": "apache2", "port": 8080, "service": "apache2-custom", "tpl_dir": "apache"}},
            {"users": ["BOB", "ALICE"]},
            {"vars": "apache apache apache/init.sls apache apache apache apache apache"},
            {"cfg": "local m"},
            {"ver": true},
            {"extra": {"a": 1, "b": ["x", "y"]}},
        ]},
    });
    assert_eq!(data, Ok(expected));
    let ids: Vec<String> = data
        .ok()
        .and_then(|d| d.as_object().map(|m| m.keys().cloned().collect()))
        .unwrap_or_default();
    assert_eq!(
        ids,
        ["apache-pkg", "/etc/apache2/ports.conf", "apache-service"],
        "IDs keep render order"
    );
}

#[test]
fn imports_with_and_without_context() {
    let tree = Tree::new(&[
        ("lib/vars.jinja", "{% set where = tpldir %}{% set my_sls = sls %}{% set port = pillar['apache']['port'] %}"),
        ("lib/ctx.jinja", "{% set seen = local_value %}"),
        ("app/init.sls", "{% from 'lib/vars.jinja' import where, my_sls, port %}\
{% set local_value = 'from caller' %}\
{% from 'lib/ctx.jinja' import seen with context %}\
{% import 'lib/vars.jinja' as v %}\
x:\n  test.nop:\n    - where: {{ where }}\n    - sls: {{ my_sls }}\n    - port: {{ port }}\n    - seen: {{ seen }}\n    - v: {{ v.where }}\n"),
    ]);
    let data = tree.render_sls("app/init.sls").map_err(|e| e.to_string());
    assert_eq!(
        data,
        Ok(json!({"x": {"test.nop": [{"where": "app"}, {"sls": "app"}, {"port": 8080}, {"seen": "from caller"}, {"v": "app"}]}})),
        "templates imported without context still see the globals, and tpldir is the top-level sls's"
    );
}

#[test]
fn importing_variables_from_an_sls_file() {
    let tree = Tree::new(&[
        ("app/vars.sls", "{% set shared = {'k': 'v'} %}{% set listing = [1, 2] %}\n"),
        ("app/init.sls", "{% from tpldir ~ '/vars.sls' import shared, listing with context %}x: '{{ shared|json }} {{ listing|json }}'\n"),
    ]);
    assert_eq!(
        tree.render_sls("app/init.sls").map_err(|e| e.to_string()),
        Ok(json!({"x": "{\"k\": \"v\"} [1, 2]"}))
    );
}

#[test]
fn relative_imports_and_includes() {
    let tree = Tree::new(&[
        ("app/parts/one.jinja", "{% set one = 1 %}"),
        ("app/two.txt", "two-{{ tpldir }}"),
        (
            "app/init.sls",
            "{% from './parts/one.jinja' import one %}\
{% set inc %}{% include 'app/two.txt' %}{% endset %}\
{% set gone %}{% include 'app/none.txt' ignore missing %}{% endset %}\
x: {{ one }} {{ inc }} [{{ gone }}]\n",
        ),
    ]);
    assert_eq!(
        tree.render_sls("app/init.sls").map_err(|e| e.to_string()),
        Ok(json!({"x": "1 two-app []"}))
    );
}

#[test]
fn import_yaml_and_import_json_are_rendered_with_jinja_first() {
    let tree = Tree::new(&[
        (
            "app/defaults.yaml",
            "port: {{ 40 + 2 }}\nos: {{ grains['os'] }}\n",
        ),
        (
            "app/data.json",
            "{\"sls\": \"{{ sls }}\", \"n\": {{ 1 + 1 }}}",
        ),
        ("app/empty.yaml", "{# nothing #}\n"),
        (
            "app/rel.sls",
            "{% import_yaml './defaults.yaml' as r %}x: {{ r.port }}\n",
        ),
        (
            "app/init.sls",
            "{% import_yaml 'app/defaults.yaml' as d %}{% import_json 'app/data.json' as j %}\
{% import_yaml 'app/empty.yaml' as e %}x: {{ d.port }} {{ d.os }} {{ j.sls }} {{ j.n }} {{ e }}\n",
        ),
    ]);
    assert_eq!(
        tree.render_sls("app/init.sls").map_err(|e| e.to_string()),
        Ok(json!({"x": "42 Debian app 2 None"}))
    );
    assert_eq!(
        tree.render_sls("app/rel.sls").map_err(|e| e.to_string()),
        Ok(json!({"x": 42})),
        "relative to the importing file"
    );
}

#[test]
fn tofs_style_file_lookup() {
    let tree = Tree::new(&[
        ("app/files/default/app.conf", "default"),
        ("app/init.sls", "{% set tplroot = tpldir.split('/')[0] %}\
{% set sources = [] %}\
{% for dir in ['files/' ~ grains['id'], 'files/default'] %}{% do sources.append('salt://' ~ tplroot ~ '/' ~ dir ~ '/app.conf') %}{% endfor %}\
app-conf:\n  file.managed:\n    - name: /etc/app.conf\n    - source: {{ sources|json }}\n"),
    ]);
    assert_eq!(
        tree.render_sls("app/init.sls").map_err(|e| e.to_string()),
        Ok(
            json!({"app-conf": {"file.managed": [{"name": "/etc/app.conf"},
            {"source": ["salt://app/files/web1/app.conf", "salt://app/files/default/app.conf"]}]}})
        )
    );
}

#[test]
fn shebangs_select_the_pipeline() {
    let tree = Tree::new(&[
        (
            "plain.sls",
            "#!yaml\na:\n  test.nop:\n    - x: \"{{ not_rendered }}\"\n",
        ),
        (
            "json.sls",
            "#!jinja|json\n{\"a\": {\"test.nop\": [{\"x\": {{ 1 + 1 }}}]}}\n",
        ),
        ("rawjson.sls", "#!json\n{\"a\": 1}\n"),
        (
            "empty.sls",
            "# only a comment\n{% if false %}\nx: 1\n{% endif %}\n",
        ),
        ("py.sls", "#!py\ndef run():\n    return {}\n"),
    ]);
    assert_eq!(
        tree.render_sls("plain.sls").map_err(|e| e.to_string()),
        Ok(json!({"a": {"test.nop": [{"x": "{{ not_rendered }}"}]}}))
    );
    assert_eq!(
        tree.render_sls("json.sls").map_err(|e| e.to_string()),
        Ok(json!({"a": {"test.nop": [{"x": 2}]}}))
    );
    assert_eq!(
        tree.render_sls("rawjson.sls").map_err(|e| e.to_string()),
        Ok(json!({"a": 1}))
    );
    assert_eq!(
        tree.render_sls("empty.sls").map_err(|e| e.to_string()),
        Ok(json!({})),
        "an empty render is an empty map"
    );
    let error = tree
        .render_sls("py.sls")
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert_eq!(
        error,
        // Without a host that runs Python (this test's SaltFunctions has none).
        Err("The renderer 'py' named in the shebang or the `renderer` option is not available in halite; use jinja, yaml, yamlex, json, py or a renderer of _renderers".into())
    );
}

#[test]
fn errors_carry_lines_of_the_sls() {
    let tree = Tree::new(&[
        (
            "dup.sls",
            "a:\n  test.nop: []\n{% if true %}\na:\n  test.nop: []\n{% endif %}\n",
        ),
        (
            "undef.sls",
            "a:\n  test.nop:\n    - x: {{ pillar['nope'] }}\n",
        ),
    ]);
    let dup = tree
        .render_sls("dup.sls")
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert_eq!(
        dup,
        Err("while constructing a mapping\n  in \"<unicode string>\", line 1, column 1\nfound conflicting ID 'a'\n  in \"<unicode string>\", line 4, column 1".into())
    );
    let undef = tree
        .render_sls("undef.sls")
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert_eq!(
        undef,
        Err("Jinja variable 'dict object' has no attribute 'nope'; line 3\n\n---\na:\n  test.nop:\n    - x: {{ pillar['nope'] }}    <======================\n---".into())
    );
}

#[test]
fn errors_in_imported_templates_name_the_file_as_salt_does() {
    let tree = Tree::new(&[
        (
            "m/lib.jinja",
            "{% macro bad() %}\n{{ nope }}\n{% endmacro %}\n",
        ),
        (
            "m/init.sls",
            "x: 1\n{% from \"m/lib.jinja\" import bad %}\ny: {{ bad() }}\n",
        ),
    ]);
    // Salt 3008.5 prints the cache path of the file; halite its path in the file root.
    assert_eq!(
        tree.render_sls("m/init.sls").map(|_| ()).map_err(|e| e.to_string()),
        Err("Jinja variable 'nope' is undefined\nm/lib.jinja(2):\n---\n{% macro bad() %}\n{{ nope }}    <======================\n{% endmacro %}\n---".into())
    );
}

#[test]
fn missing_import_is_a_clear_error() {
    let tree = Tree::new(&[("app.sls", "{% from 'nope/map.jinja' import x %}\n")]);
    let error = tree
        .render_sls("app.sls")
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert!(
        matches!(&error, Err(m) if m.contains("nope/map.jinja")),
        "{error:?}"
    );
}

#[test]
fn text_without_jinja_tags_loads_as_if_rendered() {
    // Braces that open no tag (flow mappings, quoted braces) skip Jinja;
    // a tag anywhere sends the text through it. Both give the same data.
    let plain = "x:\n  test.nop:\n    - a: {b: 1}\n    - c: '{ d }'\n    - e: \"}{\"\n\n";
    let tagged = format!("{{# forces jinja #}}{plain}");
    let tree = Tree::new(&[("plain.sls", plain), ("tagged.sls", &tagged)]);
    let expected = json!({"x": {"test.nop": [{"a": {"b": 1}}, {"c": "{ d }"}, {"e": "}{"}]}});
    assert_eq!(
        tree.render_sls("plain.sls").map_err(|e| e.to_string()),
        Ok(expected.clone())
    );
    assert_eq!(
        tree.render_sls("tagged.sls").map_err(|e| e.to_string()),
        Ok(expected)
    );
}
