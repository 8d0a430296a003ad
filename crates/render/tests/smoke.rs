mod common;
use common::*;

#[test]
fn smoke() {
    for t in [
        "{{ True }} {{ none }} {{ [1,2] }} {{ {'b': 1, 'a': 'yes'} }} {{ 1.0 }}",
        "{% set d = {} %}{% do d.update({'a': 1}) %}{{ d }}",
        "{% set l = [] %}{% do l.append(3) %}{{ l }}",
        "{{ salt['pillar.get']('apache:port') }} {{ salt.pillar.get('apache:modules') }}",
        "{{ {'b': 1, 'a': 'yes', 'c': [1, '65', '*']}|yaml }}",
        "{{ {'b': 1, 'a': 'yes'}|json }}",
        "{{ grains['saltversioninfo'] >= [2018, 3, 1] }}",
        "{{ salt['x.y']|default(none) is callable }} {{ salt['test.echo'] is callable }}",
        "{{ 'a,b'.split(',') }} {{ 'a.b.c'.rpartition('.') }}",
        "{{ salt['cmd.run']('echo hi') }}",
    ] {
        println!("{t}\n  => {:?}", jinja(t).map_err(|e| e.to_string()));
    }
    for t in [
        "{{ nope }}",
        "x\n{% if %}\n",
        "{{ pillar.nope }}",
        "{{ salt['test.fail']() }}",
        "{{ nofunc() }}",
        "{% for x in nope %}{% endfor %}",
    ] {
        println!("{t:?}\n  => {}", err(t));
    }
}
