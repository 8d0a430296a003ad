mod common;
use common::*;

#[test]
fn smoke() {
    for t in
        ["{% set d = {'a': 1} %}{{ d.items() }} {{ d.items()|list }} {{ (1,2) }} {{ [(1,2)] }}"]
    {
        println!("{t}\n  => {:?}", jinja(t).map_err(|e| e.to_string()));
    }
}
