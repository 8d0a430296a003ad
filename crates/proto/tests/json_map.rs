//! The patched serde_json (`vendor/serde_json`, docs/compact-map.md) keeps
//! `Map` in a vector with a hash index only past 16 entries. Output order
//! everywhere in halite depends on that map behaving exactly as upstream's
//! `IndexMap`-backed one: these tests hold it to that, on maps small enough
//! to be scanned and large enough to be indexed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use serde_json::{json, Map, Value};

fn keys(map: &Map<String, Value>) -> Vec<&str> {
    map.keys().map(String::as_str).collect()
}

/// A plain vector of pairs, changed by hand the way `IndexMap` would be.
type Model = Vec<(String, Value)>;

fn model_keys(model: &Model) -> Vec<&str> {
    model.iter().map(|(k, _)| k.as_str()).collect()
}

fn assert_same(map: &Map<String, Value>, model: &Model, what: &str) {
    assert_eq!(keys(map), model_keys(model), "{what}: order");
    for (k, v) in model {
        assert_eq!(map.get(k), Some(v), "{what}: value of {k}");
    }
    assert_eq!(map.len(), model.len(), "{what}: len");
}

#[test]
fn map_operations_keep_indexmap_order_small_and_large() {
    for n in [5usize, 16, 17, 40] {
        let what = format!("{n} entries");
        let mut map = Map::new();
        let mut model: Model = Vec::new();
        for i in 0..n {
            assert_eq!(map.insert(format!("k{i}"), json!(i)), None);
            model.push((format!("k{i}"), json!(i)));
        }
        assert_same(&map, &model, &what);

        // an update keeps the key where it was
        assert_eq!(map.insert("k2".into(), json!("two")), Some(json!(2)));
        model[2].1 = json!("two");
        assert_same(&map, &model, &what);

        // remove is swap_remove: the last entry fills the hole
        assert_eq!(map.remove("k1"), Some(json!(1)));
        model.swap_remove(1);
        assert_same(&map, &model, &what);

        // shift_remove keeps the order of the rest
        assert_eq!(map.shift_remove("k3"), Some(json!(3)));
        let at = model.iter().position(|(k, _)| k == "k3").unwrap();
        model.remove(at);
        assert_same(&map, &model, &what);

        // shift_insert: a new key at an index, then moved
        assert_eq!(map.shift_insert(0, "new".into(), json!(7)), None);
        model.insert(0, ("new".into(), json!(7)));
        assert_same(&map, &model, &what);
        assert_eq!(map.shift_insert(2, "new".into(), json!(8)), Some(json!(7)));
        let (k, _) = model.remove(0);
        model.insert(2, (k, json!(8)));
        assert_same(&map, &model, &what);

        // the entry API
        *map.entry("k0").or_insert(json!(null)) = json!("zero");
        model.iter_mut().find(|(k, _)| k == "k0").unwrap().1 = json!("zero");
        map.entry("added").or_insert_with(|| json!([1]));
        model.push(("added".into(), json!([1])));
        assert_same(&map, &model, &what);
        match map.entry("k4") {
            serde_json::map::Entry::Occupied(e) => assert_eq!(e.shift_remove(), json!(4)),
            serde_json::map::Entry::Vacant(_) => panic!("k4 is present"),
        }
        let at = model.iter().position(|(k, _)| k == "k4").unwrap();
        model.remove(at);
        assert_same(&map, &model, &what);

        map.retain(|k, _| k != "k0");
        model.retain(|(k, _)| k != "k0");
        assert_same(&map, &model, &what);
        assert_eq!(map.get("k1"), None);
        assert_eq!(map.get("k3"), None);

        // equality ignores order, as IndexMap's
        let mut reversed: Map<String, Value> = model.iter().rev().cloned().collect();
        assert_eq!(reversed, map, "{what}: equal in another order");
        reversed.insert("extra".into(), json!(0));
        assert_ne!(reversed, map);

        // clones answer lookups as the original
        let copy = map.clone();
        assert_same(&copy, &model, &what);

        map.sort_keys();
        model.sort_by(|a, b| a.0.cmp(&b.0));
        assert_same(&map, &model, &what);

        // serialized in order, read back in order, duplicates keep the first place
        let text = serde_json::to_string(&map).unwrap();
        let back: Map<String, Value> = serde_json::from_str(&text).unwrap();
        assert_same(&back, &model, &what);
        let dup: Map<String, Value> = serde_json::from_str(r#"{"b":1,"a":2,"b":3}"#).unwrap();
        assert_eq!(keys(&dup), ["b", "a"]);
        assert_eq!(dup["b"], json!(3));
    }
}

#[test]
fn a_value_is_32_bytes_and_an_entry_56() {
    // The point of the patch: were serde_json restored to upstream, this
    // fails (72 and 104) and docs/compact-map.md says what that costs.
    assert_eq!(std::mem::size_of::<Value>(), 32);
    assert_eq!(std::mem::size_of::<(String, Value)>(), 56);
}
