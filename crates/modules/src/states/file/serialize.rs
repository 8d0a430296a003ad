//! `file.serialize`: a data set written as JSON or YAML in the exact text
//! Salt's serializers produce (JSON: indent 2, sorted keys; YAML: block
//! style, sorted keys), optionally merged into the file's existing data.

use halite_state::{Map, StateCall, StateError, StateResult, Value};

use super::managed::{self, ManagedArgs, NewContent};
use super::{error, opt_str, target_name};

/// Salt's JSON serializer: `json.dumps(data, indent=2, separators=(",", ": "),
/// sort_keys=True, ensure_ascii=False)`.
pub fn to_json(v: &Value) -> String {
    let mut out = String::new();
    json_value(v, 0, &mut out);
    out
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            // Salt dumps with ensure_ascii=False: only control characters
            // are escaped, other text is written as is.
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_value(v: &Value, depth: usize, out: &mut String) {
    let pad = |d: usize| "  ".repeat(d);
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => json_string(s, out),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(depth + 1));
                json_value(item, depth + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(depth));
            out.push(']');
        }
        Value::Object(m) if m.is_empty() => out.push_str("{}"),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push_str("{\n");
            for (i, k) in keys.iter().enumerate() {
                out.push_str(&pad(depth + 1));
                json_string(k, out);
                out.push_str(": ");
                json_value(&m[k.as_str()], depth + 1, out);
                out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(depth));
            out.push('}');
        }
    }
}

/// Salt's YAML serializer: PyYAML's `safe_dump(data, default_flow_style=False)`
/// (keys sorted) without the final newline or document end marker.
pub fn to_yaml(v: &Value) -> String {
    use halite_render::yaml::{dump_with, DumpOptions, DumpStyle};
    let out = dump_with(
        v,
        DumpOptions {
            style: DumpStyle::Block,
            sort_keys: true,
        },
    );
    if let Some(stripped) = out.strip_suffix("\n...\n") {
        return stripped.to_string();
    }
    out.strip_suffix('\n').map(str::to_string).unwrap_or(out)
}

/// Salt's `merge_recurse`: maps merge key by key, anything else is replaced.
fn merge(base: &Value, update: &Value) -> Value {
    match (base, update) {
        (Value::Object(b), Value::Object(u)) => {
            let mut out: Map = b.clone();
            for (k, v) in u {
                let merged = match out.get(k) {
                    Some(old) => merge(old, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (_, u) => u.clone(),
    }
}

/// The marker Salt's `recursive_diff` uses for a missing side.
const NONE_VALUE: &str = "<_null_>";

/// Salt's `RecursiveDictDiffer(old, new).diffs`: per changed key
/// `{"old": .., "new": ..}`, nested for dicts.
fn dict_diff(old: &Map, new: &Map) -> Map {
    let mut out = Map::new();
    for (k, nv) in new {
        match (old.get(k), nv) {
            (None, _) => {
                out.insert(k.clone(), serde_json::json!({"new": nv, "old": NONE_VALUE}));
            }
            (Some(Value::Object(o)), Value::Object(n)) => {
                let d = dict_diff(o, n);
                if !d.is_empty() {
                    out.insert(k.clone(), Value::Object(d));
                }
            }
            (Some(ov), _) if ov != nv => {
                out.insert(k.clone(), serde_json::json!({"new": nv, "old": ov}));
            }
            _ => {}
        }
    }
    for (k, ov) in old {
        if !new.contains_key(k) {
            out.insert(k.clone(), serde_json::json!({"new": NONE_VALUE, "old": ov}));
        }
    }
    out
}

/// `file.serialize`.
pub fn serialize(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.serialize");
    }
    let args = ManagedArgs::from_call(call)?;
    if !args.create && !std::path::Path::new(&name).is_file() {
        return Ok(ret.with_comment(format!(
            "File {name} is not present and is not set for creation"
        )));
    }
    let serializer = opt_str(call, "serializer")?;
    let formatter = opt_str(call, "formatter")?;
    if serializer.is_some() && formatter.is_some() {
        return error(ret, "Only one of serializer and formatter are allowed");
    }
    let serializer = serializer
        .or(formatter)
        .unwrap_or_else(|| "yaml".into())
        .to_lowercase();
    let dataset_pillar = opt_str(call, "dataset_pillar")?;
    if call.arg("dataset").is_some() && dataset_pillar.is_some() {
        return error(
            ret,
            "Only one of 'dataset' and 'dataset_pillar' is permitted",
        );
    }
    let mut dataset = match &dataset_pillar {
        Some(key) => managed::traverse(call.env.pillar(), key, ":").cloned(),
        None => call.arg("dataset").cloned(),
    };
    let Some(mut data) = dataset.take() else {
        return error(ret, "Neither 'dataset' nor 'dataset_pillar' was defined");
    };
    if !matches!(serializer.as_str(), "json" | "yaml") {
        return error(
            ret,
            format!("The {serializer} serializer could not be found. It either does not exist or its prerequisites are not installed."),
        );
    }
    let mut existing_data: Option<Value> = None;
    if call.arg_bool("merge_if_exists", false) && std::path::Path::new(&name).is_file() {
        let text = std::fs::read_to_string(&name)
            .map_err(|e| StateError::Other(format!("Unable to read {name}: {e}")))?;
        let existing = if serializer == "json" {
            serde_json::from_str::<Value>(&text).map_err(|e| e.to_string())
        } else {
            halite_render::yaml::load(&text).map_err(|e| e.to_string())
        };
        match existing {
            Err(e) => return error(ret, format!("Failed to deserialize existing data: {e}")),
            Ok(Value::Null) => {}
            Ok(existing) => {
                let merged = merge(&existing, &data);
                if merged == existing {
                    return Ok(ret.with_comment(format!("The file {name} is in the correct state")));
                }
                data = merged;
                existing_data = Some(existing);
            }
        }
    }
    let merged_data = data.clone();
    let mut contents = if serializer == "json" {
        to_json(&data)
    } else {
        to_yaml(&data)
    };
    contents.push('\n');
    let mut out = managed::manage(call, &name, &args, ret, move |_| {
        Ok(Ok(NewContent::Bytes {
            data: contents.into_bytes(),
            source: None,
        }))
    })?;
    // Salt reports a merge as the structural difference of the data.
    if let (Some(Value::Object(old)), Value::Object(new)) = (&existing_data, &merged_data) {
        out.changes
            .insert("diff".into(), Value::Object(dict_diff(old, new)));
    }
    if call.test && out.result.is_none() {
        out.comment = format!("Dataset will be serialized and stored into {name}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_matches_python_dumps() {
        let v = json!({"b": [1, "x"], "a": {"c": null}, "e": {}});
        assert_eq!(to_json(&v), "{\n  \"a\": {\n    \"c\": null\n  },\n  \"b\": [\n    1,\n    \"x\"\n  ],\n  \"e\": {}\n}");
    }

    #[test]
    fn json_keeps_unicode_and_escapes_controls() {
        let v = json!({"uni": "h\u{e9}llo \u{2603}", "esc": "tab\there \"q\" \u{1}"});
        assert_eq!(to_json(&v), "{\n  \"esc\": \"tab\\there \\\"q\\\" \\u0001\",\n  \"uni\": \"h\u{e9}llo \u{2603}\"\n}");
    }

    #[test]
    fn yaml_matches_pyyaml_block_style() {
        let v = json!({"name": "web", "ports": [80, 443], "opts": {"debug": false, "mode": "0644"}, "list": [{"a": 1, "b": "yes"}]});
        assert_eq!(
            to_yaml(&v),
            "list:\n- a: 1\n  b: 'yes'\nname: web\nopts:\n  debug: false\n  mode: '0644'\nports:\n- 80\n- 443"
        );
    }
}
