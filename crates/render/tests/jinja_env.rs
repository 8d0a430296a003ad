//! Salt's Jinja environment: variables, filters, tests, tags, Python data
//! semantics, imports through a real template tree, and error shapes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;
use common::*;
use serde_json::json;

#[test]
fn python_printing_of_values() {
    assert_eq!(ok("{{ True }} {{ none }} {{ [1, 'a'] }} {{ {'b': 1, 'a': 'yes'} }} {{ 1.0 }} {{ (1, 2) }} {{ [] }}"),
        "True None [1, 'a'] {'b': 1, 'a': 'yes'} 1.0 (1, 2) []");
    assert_eq!(
        ok("{{ {True: 'x'} }} {{ 1 / 2 }} {{ 7 // 2 }} {{ 2 ** 3 }} {{ 'x' ~ 1 }}"),
        "{True: 'x'} 0.5 3 8 x1"
    );
}

#[test]
fn trailing_newline_is_kept_and_blocks_are_not_trimmed() {
    assert_eq!(ok("a\n{% if true %}\nb\n{% endif %}\n"), "a\n\nb\n\n");
    assert_eq!(ok("a\n{%- if true %}\nb\n{%- endif %}\n"), "a\nb\n");
}

#[test]
fn final_newline_survives_a_trimming_tag_as_in_salt() {
    // Salt renders with keep_trailing_newline=False, then appends the
    // source's final newline: `-%}` before it has nothing to eat.
    assert_eq!(ok("a\n{%- if true -%}\nb\n{%- endif -%}\n"), "ab\n");
    assert_eq!(ok("x = 1\n{%- set y = 2 -%}\n"), "x = 1\n");
    assert_eq!(ok("no newline{{ '' }}"), "no newline");
    // An included template loses its own final newline, as in Jinja2.
    let tree = Tree::new(&[("inc.j2", "inc\n")]);
    let out =
        halite_render::render_text("{% include 'inc.j2' %}|\n", "jinja", &tree.context("", ""));
    assert_eq!(out.ok().as_deref(), Some("inc|\n"));
}

#[test]
fn dicts_and_lists_are_mutable_and_shared() {
    assert_eq!(
        ok("{% set d = {} %}{% do d.update({'a': 1}) %}{% do d.update(b=2) %}{{ d }}"),
        "{'a': 1, 'b': 2}"
    );
    assert_eq!(ok("{% set l = [] %}{% for i in [1, 2] %}{% do l.append(i * 10) %}{% endfor %}{% do l.extend([3]) %}{{ l }}"), "[10, 20, 3]");
    assert_eq!(
        ok("{% set d = {'a': 1} %}{% set e = d %}{% do e.update({'z': 0}) %}{{ d }}"),
        "{'a': 1, 'z': 0}"
    );
    assert_eq!(
        ok("{% macro touch(x) %}{% do x.update({'t': True}) %}{% endmacro %}{% set d = {} %}{{ touch(d) }}{{ d }}"),
        "{'t': True}",
        "a macro changes its caller's dict"
    );
    assert_eq!(ok("{% set d = {'a': 1, 'b': 2} %}{{ d.pop('a') }} {{ d.setdefault('c', 3) }} {{ d.copy() }} {{ d.get('x', 'dflt') }}"),
        "1 3 {'b': 2, 'c': 3} dflt");
    assert_eq!(ok("{% set l = [3, 1, 2] %}{{ l.pop() }} {{ l.index(1) }} {{ l.count(3) }}{% do l.insert(0, 9) %} {{ l }}"), "2 1 1 [9, 3, 1]");
}

#[test]
fn pillar_and_function_results_are_mutable() {
    assert_eq!(
        ok("{% set a = salt['pillar.get']('apache') %}{% do a.update({'x': 1}) %}{{ salt['pillar.get']('apache:x') }}"),
        "1",
        "pillar.get returns the pillar's own dict, as in Python"
    );
    assert_eq!(
        ok("{% set r = salt['test.echo']({'k': [1]}) %}{% do r.k.append(2) %}{{ r }}"),
        "{'k': [1, 2]}"
    );
}

#[test]
fn self_containing_data_does_not_recurse_forever() {
    let out = ok("{% set l = [1] %}{% do l.append(l) %}{{ l.count(1) }} {{ l|length }} {{ (l|json)[:7] }} {{ (l ~ '')[:7] }}");
    assert_eq!(out, "1 2 [1, [1, [1, [1,");
    assert_eq!(
        ok("{% set d = {} %}{% do d.update({'me': d}) %}{{ salt['defaults.deepcopy'](d)|length }}"),
        "1"
    );
}

#[test]
fn dict_methods_and_attribute_fallback() {
    assert_eq!(ok("{% set d = {'a': 1, 'items': 'x'} %}{{ d.items() }} {{ d.keys() }} {{ d.values() }} {{ d.a }} {{ d['items'] }}"),
        "[('a', 1), ('items', 'x')] ['a', 'items'] [1, 'x'] 1 x");
    assert_eq!(
        ok("{% for k, v in {'x': 1}.items() %}{{ k }}={{ v }}{% endfor %}"),
        "x=1"
    );
}

#[test]
fn string_methods_and_formatting() {
    assert_eq!(ok("{{ 'a-b-c'.split('-', 1) }} {{ '  x '.strip() }} {{ 'xxhixx'.strip('x') }} {{ 'abc'.startswith('a') }}"),
        "['a', 'b-c'] x hi True");
    assert_eq!(ok("{{ 'a.b.c'.rpartition('.') }} {{ 'k=v'.partition('=')[2] }} {{ 'a b c'.rsplit(' ', 1) }}"),
        "('a.b', '.', 'c') v ['a b', 'c']");
    assert_eq!(ok("{{ 'x' * True }}{{ 'y' * False }} {{ '%s=%s' % ('k', 'v') }} {{ 'n%d' % 5 }} {{ '{}-{}'.format('a', 1) }} {{ 'ab' * 2 }} {{ 'abcdef'[1:3] }}"),
        "x k=v n5 a-1 abab bc");
    assert_eq!(
        ok("{{ 'Hello'.upper() }} {{ 'x'.zfill(3) }} {{ 'a,b'.replace(',', ';') }}"),
        "HELLO 00x a;b"
    );
}

#[test]
fn list_comparisons_like_saltversioninfo() {
    assert_eq!(ok("{{ grains['saltversioninfo'] >= [2018, 3, 1] }} {{ grains['saltversioninfo'] < [3000] }}"), "True False");
}

#[test]
fn strict_undefined() {
    assert!(err("{{ nope }}").starts_with("Jinja variable 'nope' is undefined; line 1"));
    assert!(err("{% if nope %}x{% endif %}").starts_with("Jinja variable 'nope' is undefined"));
    assert!(
        err("{% for x in nope %}{% endfor %}").starts_with("Jinja variable 'nope' is undefined")
    );
    assert!(err("{{ pillar.nope }}")
        .starts_with("Jinja variable 'dict object' has no attribute 'nope'"));
    assert_eq!(ok("{{ nope is defined }} {{ nope|default('d') }} {{ 'k' in pillar }} {{ pillar.nope is defined }}"), "False d False False");
}

#[test]
fn salt_functions_by_item_attribute_and_dynamic_name() {
    assert_eq!(ok("{{ salt['test.echo']('a') }} {{ salt.test.echo('b') }} {% set m = 'test.echo' %}{{ salt[m]('c') }}"), "a b c");
    assert_eq!(ok("{{ salt['test.kwargs'](x=1, y='z') }} {% set o = {'q': 2} %}{{ salt['test.kwargs'](**o) }}"),
        "{'x': 1, 'y': 'z'} {'q': 2}");
    assert_eq!(ok("{{ salt['nope.nope']|default(none) is callable }} {{ salt['test.echo'] is callable }} {{ salt['nope.x'] is defined }}"),
        "False True False");
    // Formulas test for a module before using it, as Salt's loader is a mapping.
    assert_eq!(
        ok("{{ 'test.echo' in salt }} {{ 'nope.x' in salt }} {{ 'nope.x' not in salt }}"),
        "True False True"
    );
    assert_eq!(
        ok("{{ salt['cmd.run']('echo from-a-real-shell') }}"),
        "from-a-real-shell"
    );
}

/// Salt 3008.5 renders templates with pillar masking off: `pillar.*`
/// give plain values unless the call says `unmask=False` (or another false
/// value), which gives the masked value the module returns outside a
/// template, defaults included. Each answer is what Salt 3008.5's
/// `salt-call --local state.apply` printed for the same calls.
#[test]
fn pillar_functions_in_templates_mask_only_with_unmask_false() {
    assert_eq!(
        ok("{{ salt['pillar.items']()['apache'] | json }} {{ salt['pillar.items'](unmask=True)['apache'] | json }}"),
        r#"{"modules": ["ssl"], "port": 8080} {"modules": ["ssl"], "port": 8080}"#
    );
    assert_eq!(
        ok("{{ salt['pillar.items'](unmask=False)['apache'] | json }}"),
        r#"{"modules": ["**********"], "port": "**********"}"#
    );
    assert_eq!(
        ok("{{ salt['pillar.get']('apache:port', unmask=False) }} {{ salt['pillar.get']('nope', 'dflt', unmask=False) }} {{ salt['pillar.get']('apache:port', unmask=0) }} {{ salt['pillar.fetch']('apache:port', unmask=False) }} {{ salt['pillar.get']('apache:port', unmask=None) }}"),
        "********** ********** ********** ********** 8080"
    );
    assert_eq!(
        ok("{{ salt['pillar.item']('apache:port', 'nope', unmask=False) | json }}"),
        r#"{"apache:port": "**********", "nope": ""}"#
    );
    assert_eq!(
        ok("{{ salt['pillar.raw']('apache') | json }} {{ salt['pillar.raw']('apache', unmask=False) | json }} {{ salt['pillar.raw']('nope') }} {{ salt['pillar.raw']()['users'] | json }}"),
        r#"{"modules": ["ssl"], "port": 8080} {"modules": ["**********"], "port": "**********"} {} {"alice": {"uid": 1001}}"#
    );
}

#[test]
fn pure_lookups_answered_from_the_context() {
    assert_eq!(ok("{{ salt['pillar.get']('apache:port') }} {{ salt['pillar.get']('nope', 'dflt') }} {{ salt['pillar.get']('nope') == '' }}"), "8080 dflt True");
    assert_eq!(
        ok("{{ salt['pillar.get']('apache', {'port': 1, 'user': 'www'}, merge=True) }}"),
        "{'port': 8080, 'user': 'www', 'modules': ['ssl']}"
    );
    assert_eq!(
        ok("{{ salt['pillar.get']('apache:modules', ['base'], merge=True) }}"),
        "['base', 'ssl']"
    );
    assert_eq!(ok("{{ salt['pillar.item']('apache:port', 'nope') }} {{ salt['pillar.items']()['users']['alice']['uid'] }}"),
        "{'apache:port': 8080, 'nope': ''} 1001");
    assert_eq!(ok("{{ salt['grains.get']('os') }} {{ salt['grains.get']('roles:0') }} {{ salt['grains.item']('os') }} {{ grains.id }}"),
        "Debian web {'os': 'Debian'} web1");
    assert_eq!(ok("{{ salt['config.get']('file_client') }} {{ salt['config.get']('os') }} {{ salt['config.get']('users:alice:uid') }} {{ salt['config.get']('from_master') }} {{ salt['config.get']('nope', 'd') }}"),
        "local Debian 1001 m d");
    assert_eq!(
        ok("{{ salt['config.option']('id') }} {{ salt['config.option']('nope') == '' }}"),
        "web1 True"
    );
}

#[test]
fn filter_by_with_merge_default_and_base() {
    let lookup = "{'Debian': {'pkg': 'apache2', 'svc': 'apache2'}, 'RedHat': {'pkg': 'httpd'}, 'default': {'pkg': 'www'}, 'base': {'svc': 'web', 'port': 80}}";
    assert_eq!(
        ok(&format!("{{{{ salt['grains.filter_by']({lookup}) }}}}")),
        "{'pkg': 'apache2', 'svc': 'apache2'}"
    );
    assert_eq!(
        ok(&format!(
            "{{{{ salt['grains.filter_by']({lookup}, grain='os', base='base') }}}}"
        )),
        "{'svc': 'apache2', 'port': 80, 'pkg': 'apache2'}"
    );
    assert_eq!(
        ok(&format!(
            "{{{{ salt['grains.filter_by']({lookup}, grain='id') }}}}"
        )),
        "{'pkg': 'www'}"
    );
    assert_eq!(
        ok(&format!(
            "{{{{ salt['grains.filter_by']({lookup}, merge={{'pkg': 'custom'}}) }}}}"
        )),
        "{'pkg': 'custom', 'svc': 'apache2'}"
    );
    assert_eq!(
        ok("{{ salt['grains.filter_by']({'Deb*': 1, 'default': 2}, grain='os') }}"),
        "1",
        "keys are fnmatch patterns"
    );
    assert_eq!(
        ok("{{ salt['grains.filter_by']({'db': 'x', 'web': 'y'}, grain='roles') }}"),
        "y",
        "a list grain matches any item, in grain order"
    );
}

#[test]
fn merges_and_copies() {
    assert_eq!(ok("{% set a = {'x': {'y': 1}} %}{% do salt['defaults.merge'](a, {'x': {'z': 2}}) %}{{ a }}"), "{'x': {'y': 1, 'z': 2}}");
    assert_eq!(
        ok("{{ salt['defaults.merge']({'l': [1]}, {'l': [2]}, merge_lists=True) }}"),
        "{'l': [1, 2]}"
    );
    assert_eq!(
        ok("{% set a = {'x': 1} %}{% set b = salt['slsutil.merge'](a, {'y': 2}) %}{{ a }} {{ b }}"),
        "{'x': 1} {'x': 1, 'y': 2}"
    );
    assert_eq!(ok("{{ salt['slsutil.merge']({'l': [1]}, {'l': [2]}, merge_lists=True) }} {{ salt['slsutil.merge']({'l': [1]}, {'l': [2]}) }}"),
        "{'l': [1, 2]} {'l': [2]}");
    assert_eq!(
        ok("{{ salt['slsutil.merge_all']([{'a': 1}, {'b': 2}, {'a': 3}]) }}"),
        "{'a': 3, 'b': 2}"
    );
    assert_eq!(ok("{% set a = {'k': [1]} %}{% set c = salt['defaults.deepcopy'](a) %}{% do c.k.append(2) %}{{ a }} {{ c }}"), "{'k': [1]} {'k': [1, 2]}");
}

#[test]
fn log_and_file_helpers() {
    assert_eq!(ok("{% do salt['log.debug']('x') %}{{ salt['log.info']('y') }} {{ salt.log.warning('z') }}"), "True True");
    assert_eq!(ok("{{ salt['file.join']('/a', 'b', 'c') }} {{ salt.file.dirname('/a/b/c.txt') }} {{ salt['file.basename']('/a/b/c.txt') }}"),
        "/a/b/c /a/b c.txt");
}

#[test]
fn serializer_filters() {
    let data = "{'b': 1, 'a': 'yes', 'c': [1, '65', '*']}";
    assert_eq!(
        ok(&format!("{{{{ {data}|yaml }}}}")),
        "{a: 'yes', b: 1, c: [1, '65', '*']}"
    );
    assert_eq!(
        ok(&format!("{{{{ {data}|yaml(False) }}}}")),
        "a: 'yes'\nb: 1\nc:\n- 1\n- '65'\n- '*'"
    );
    assert_eq!(
        ok(&format!("{{{{ {data}|json }}}}")),
        r#"{"a": "yes", "b": 1, "c": [1, "65", "*"]}"#
    );
    assert_eq!(
        ok("{{ {'b': 1, 'a': 2}|json(sort_keys=False) }}"),
        r#"{"b": 1, "a": 2}"#
    );
    assert_eq!(
        ok("{{ {'k': 'é<'}|json }} {{ {'k': 'é<'}|tojson }}"),
        r#"{"k": "é<"} {"k": "\u00e9\u003c"}"#
    );
    assert_eq!(
        ok("{{ 'yes'|yaml }} {{ 5|yaml }} {{ 'x'|json }} {{ 'plain'|yaml }}"),
        "'yes' 5 \"x\" plain"
    );
    assert_eq!(
        ok("{{ ('a: 1\\nb: [x]'|load_yaml).b }} {{ ('{\"k\": 2}'|load_json).k }}"),
        "['x'] 2"
    );
    assert_eq!(ok("{{ \"it's\"|yaml_dquote }} {{ \"it's\"|yaml_squote }} {{ 'yes'|yaml_encode }} {{ 'x'|yaml_encode }}"),
        "\"it's\" 'it''s' \"yes\" \"x\"");
}

#[test]
fn salt_filters() {
    assert_eq!(
        ok("{{ {'a': [{'b': 'c'}]}|traverse('a:b') }} {{ {'a': 1}|traverse('x:y', 'dflt') }}"),
        "c dflt"
    );
    assert_eq!(ok("{{ 'yes'|to_bool }} {{ 'x'|to_bool }} {{ 1|to_bool }} {{ 0|to_bool }} {{ none|to_bool }} {{ [1]|to_bool }}"),
        "True False True False False True");
    assert_eq!(ok("{{ 'abc'|regex_replace('b', 'X') }} {{ 'a1b2'|regex_replace('([a-z])(\\\\d)', '\\\\2\\\\1') }}"), "aXc 1a2b");
    assert_eq!(ok("{{ 'ab12'|regex_search('([a-z]+)([0-9]+)') }} {{ 'xx'|regex_search('y') }} {{ 'zab'|regex_match('ab') }} {{ 'abz'|regex_match('(a)b') }}"),
        "('ab', '12') None None ('a',)");
    assert_eq!(ok("{{ 'abc'|md5 }} {{ 'abc'|sha256 }}"),
        "900150983cd24fb0d6963f7d28e17f72 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_eq!(
        ok("{{ 'abc'|sha1 }} {{ 'abc'|base64_encode }} {{ 'YWJj'|base64_decode }}"),
        "a9993e364706816aba3e25717850c26c9cd0d89d YWJj abc"
    );
    assert_eq!(ok("{{ [1,2,3]|difference([2]) }} {{ [1,2]|union([2,3]) }} {{ [1,2]|intersect([2,3]) }} {{ [1,2]|symmetric_difference([2,3]) }}"),
        "[1, 3] [1, 2, 3] [2] [1, 3]");
    assert_eq!(
        ok("{{ 3|sequence }} {{ [3]|sequence }} {{ [1,1,2]|unique }} {{ [1,[2,[3]]]|flatten }}"),
        "[3] [3] [1, 2] [1, 2, 3]"
    );
    assert_eq!(ok("{{ 'a'|path_join('b', 'c') }} {{ \"a b\"|quote }} {{ 'safe'|quote }} {{ [1]|is_list }} {{ 'x'|is_list }}"),
        "a/b/c 'a b' safe True False");
    assert_eq!(ok("{{ '12'|to_num + 1 }} {{ 'x'|to_num }}"), "13 x");
}

#[test]
fn builtin_filters_formulas_use() {
    assert_eq!(ok("{{ [1, none, 2]|select|list }} {{ ['a', 'b']|map('upper')|join(',') }} {{ ''|default('y', true) }} {{ 3.7|int }} {{ '4'|float }}"),
        "[1, 2] A,B y 3 4.0");
    assert_eq!(ok("{{ {'b': 1, 'a': 2}|dictsort }} {{ [1, 2]|reverse|list }} {{ 'AbC'|lower }} {{ [1,2]|length }} {{ [True]|map('string')|list }}"),
        "[('a', 2), ('b', 1)] [2, 1] abc 2 ['True']");
    assert_eq!(
        ok("{{ 'a\\nb'|indent(4) }}|{{ 'a\\nb'|indent(2, true) }}"),
        "a\n    b|  a\n  b"
    );
    assert_eq!(ok("{% filter indent(2) %}x\ny{% endfilter %}"), "x\n  y");
}

#[test]
fn dictsort_takes_positional_arguments_as_jinja2_does() {
    // Public formulas write `dictsort(true)`: Jinja2's first positional
    // argument is case_sensitive, then by, then reverse.
    assert_eq!(
        ok("{{ {'b': 1, 'A': 2, 'a': 3}|dictsort(true) }}"),
        "[('A', 2), ('a', 3), ('b', 1)]"
    );
    assert_eq!(
        ok("{{ {'x': 2, 'y': 1}|dictsort(false, 'value') }} {{ {'a': 1, 'b': 2}|dictsort(false, 'key', true) }}"),
        "[('y', 1), ('x', 2)] [('b', 2), ('a', 1)]"
    );
    assert_eq!(
        ok("{{ {'b': 1, 'a': 2}|dictsort(case_sensitive=true, reverse=true) }}"),
        "[('b', 1), ('a', 2)]"
    );
}

#[test]
fn do_accepts_any_expression() {
    // nginx-formula: `{%- do _nginx.pop('snippets') if nginx.snippets is defined %}`
    assert_eq!(ok("{% set d = {'a': 1, 'b': 2} %}{%- do d.pop('a') if d.a is defined %}{% do d.pop('zz') if d.zz is defined %}{{ d }}"), "{'b': 2}");
}

#[test]
fn default_filter_takes_keywords() {
    // libmapstack.jinja (saltstack-formulas/template-formula) writes this.
    assert_eq!(ok("{{ nope|default({'values': {}}, boolean=True) }} {{ ''|d('x', boolean=True) }} {{ 0|default(5) }}"), "{'values': {}} x 0");
}

#[test]
fn salt_tests() {
    assert_eq!(ok("{{ 'abc' is match('a.c') }} {{ 'abc' is match('c') }} {{ [1] is list }} {{ {} is mapping }} {{ 'x' is string }}"),
        "True False True True True");
    assert_eq!(
        ok("{{ [1] is iterable }} {{ 'x' is sequence }} {{ 1 is sameas 1 }} {{ 2 is equalto 2 }}"),
        "True True True True"
    );
}

#[test]
fn loop_controls_for_if_and_namespace() {
    assert_eq!(ok("{% for i in [1, 2, 3, 4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"), "13");
    assert_eq!(
        ok("{% for i in [1, 2, 3] if i > 1 %}{{ i }}{% endfor %}"),
        "23"
    );
    assert_eq!(ok("{% set ns = namespace(t=0) %}{% for i in [1, 2] %}{% set ns.t = ns.t + i %}{% endfor %}{{ ns.t }}"), "3");
    assert_eq!(ok("{% with x = 5 %}{{ x }}{% endwith %}"), "5");
}

#[test]
fn load_blocks() {
    assert_eq!(
        ok("{% load_yaml as y %}\na: 1\nb: [x, y]\n{% endload %}{{ y.b }} {{ y.a + 1 }}"),
        "['x', 'y'] 2"
    );
    assert_eq!(
        ok("{% load_json as j %}{\"k\": {{ 1 + 1 }}}{% endload %}{{ j.k }}"),
        "2"
    );
    assert_eq!(
        ok("{% load_yaml as e %}{% endload %}{{ e }}"),
        "None",
        "empty output loads as None"
    );
    assert_eq!(ok("{% load_text as t %}hello{% endload %}{{ t }}"), "hello");
    assert_eq!(
        ok("{%- load_yaml as y -%}\nk: v\n{%- endload -%}\n{{ y.k }}"),
        "v"
    );
}

#[test]
fn raise_global_fails_the_render() {
    assert!(err("{{ raise('custom failure') }}").starts_with("Jinja error: custom failure; line 1"));
}

#[test]
fn error_shapes_match_salt() {
    assert_eq!(err("a: {{ nope }}"), "Jinja variable 'nope' is undefined; line 1\n\n---\na: {{ nope }}    <======================\n---");
    assert_eq!(err("x: 1\n{% if %}\ny: 2\nz: 3\n"), "Jinja syntax error: Expected an expression, got 'end of statement block'; line 2\n\n---\nx: 1\n{% if %}    <======================\ny: 2\nz: 3\n---");
    assert_eq!(err("{{ salt['test.fail']() }}"),
        "Problem running salt function in Jinja template: the function failed on purpose; line 1\n\n---\n{{ salt['test.fail']() }}    <======================\n---");
    let long = (1..=12)
        .map(|n| {
            if n == 8 {
                "{{ nope }}".to_string()
            } else {
                format!("l{n}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(err(&long), "Jinja variable 'nope' is undefined; line 8\n\n---\n[...]\nl3\nl4\nl5\nl6\nl7\n{{ nope }}    <======================\nl9\nl10\nl11\nl12\n---");
}

#[test]
fn common_syntax_errors_use_jinja2_wording() {
    assert!(
        err("{% foo %}").starts_with("Jinja syntax error: Encountered unknown tag 'foo'.; line 1")
    );
    assert!(err("{{ x }").starts_with("Jinja syntax error: unexpected '}'; line 1"));
    assert!(err("{{ x | }}").starts_with(
        "Jinja syntax error: expected token 'name', got 'end of print statement'; line 1"
    ));
    assert!(err("a\n{% for x in y %}\nb\n").starts_with("Jinja syntax error: "));
}

#[test]
fn calling_a_missing_salt_function_reads_like_salt() {
    // Salt 3008.5: `a: {{ salt['x.y']() }}`
    assert_eq!(
        err("a: {{ salt['x.y']() }}"),
        "Jinja variable 'salt.utils.templates.AliasedLoader object' has no attribute 'x.y'; line 1\n\n---\na: {{ salt['x.y']() }}    <======================\n---"
    );
    assert!(err("a: {{ nope.x }}").starts_with("Jinja variable 'nope' is undefined; line 1"));
}

#[test]
fn extra_variables_are_visible() {
    let tree = Tree::new(&[]);
    let mut ctx = tree.context("", "");
    ctx.extra.insert("port".into(), json!(81));
    ctx.extra.insert("cfg".into(), json!({"a": [1]}));
    let out = halite_render::render_text(
        "{{ port }} {{ cfg.a }} {{ opts['__cli'] }} {{ saltenv }}",
        "jinja",
        &ctx,
    )
    .map_err(|e| e.to_string());
    assert_eq!(out.as_deref(), Ok("81 [1] salt-call base"));
}

#[test]
fn unsupported_engine_is_a_clear_error() {
    let tree = Tree::new(&[]);
    let error = halite_render::render_text("x", "mako", &tree.context("", ""))
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert_eq!(
        error,
        Err(
            "The template engine 'mako' is not supported; halite renders 'jinja' templates only"
                .to_string()
        )
    );
}
