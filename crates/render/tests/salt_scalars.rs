//! 477 plain scalars (fixed tricky ones plus random strings of digits, signs,
//! `_ : . e x b`, letters) loaded by Salt 3008.5's own `SaltYamlSafeLoader`
//! as `k: <scalar>`; halite's loader must resolve each the same way.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use serde_json::{json, Value};

#[test]
fn plain_scalars_resolve_as_salts_loader_does() {
    let cases: Vec<Value> =
        match serde_json::from_str(include_str!("fixtures/salt_scalar_cases.json")) {
            Ok(Value::Array(cases)) => cases,
            other => panic!("bad fixture: {other:?}"),
        };
    let mut mismatches = Vec::new();
    for case in &cases {
        let doc = case["doc"].as_str().unwrap_or_default();
        let ours = halite_render::yaml::load(doc);
        if case.get("error").is_some() {
            if ours.is_ok() {
                mismatches.push(format!("{doc:?}: Salt refuses it, halite loaded {ours:?}"));
            }
            continue;
        }
        let expected = match &case["value"] {
            // Salt's infinities and NaN; halite spells them as Python prints them.
            Value::Object(m) if m.contains_key("float") => json!(m["float"]),
            other => other.clone(),
        };
        match ours {
            Ok(data) if data["k"] == expected => {}
            Ok(data) if expected.is_f64() && data["k"].as_f64() == expected.as_f64() => {}
            Ok(data) => mismatches.push(format!("{doc:?}: Salt {expected}, halite {}", data["k"])),
            Err(e) => mismatches.push(format!(
                "{doc:?}: Salt {expected}, halite error {}",
                e.message
            )),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} differ:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}
