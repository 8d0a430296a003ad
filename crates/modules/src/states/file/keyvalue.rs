//! `file.keyvalue`: sets `key<sep>value` lines in a file (sshd_config,
//! sysctl-style files...) the way Salt does, line by line, with Salt's
//! diff lines and comments.

use std::fs;

use halite_salt_rules::pyfmt::python_str;
use halite_state::{type_name, StateCall, StateError, StateResult, Value};
use serde_json::json;

use super::{error, target_name};

/// Python's `str.lstrip(chars)`; `None` strips whitespace.
fn lstrip<'a>(line: &'a str, chars: Option<&str>) -> &'a str {
    match chars {
        Some(c) => line.trim_start_matches(|ch| c.contains(ch)),
        None => line.trim_start(),
    }
}

/// A `count` argument; Salt's default is 1 and negative means every line.
fn count_arg(call: &StateCall<'_>) -> i64 {
    match call.arg("count") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(1),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(1),
        _ => 1,
    }
}

/// `file.keyvalue`: see Salt's documentation; every argument is Salt's.
pub fn keyvalue(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), None);
    if name.is_empty() {
        return error(ret, "Must provide name to file.keyvalue");
    }
    let key = call.arg("key");
    let value = call.arg("value");
    let key_values: Vec<(String, Value)> = match (key, value, call.arg("key_values")) {
        (Some(_), Some(_), Some(Value::Object(_))) => {
            return error(
                ret,
                "file.keyvalue can not combine key_values with key and value",
            )
        }
        (Some(k), Some(v), _) => vec![(python_str(k), v.clone())],
        (_, _, Some(Value::Object(m))) if !m.is_empty() => {
            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }
        (_, _, kv) => {
            let msg = if kv.is_none_or(|v| !halite_salt_rules::truth::python_bool(v)) {
                "is empty"
            } else {
                "is not a dictionary"
            };
            return error(
                ret,
                format!("file.keyvalue key and value not supplied and key_values {msg}"),
            );
        }
    };
    let separator = call.arg_str("separator")?.unwrap_or_else(|| "=".into());
    let mut append_if_not_found = call.arg_bool("append_if_not_found", false);
    let prepend_if_not_found = call.arg_bool("prepend_if_not_found", false);
    let show_changes = call.arg_bool("show_changes", true);
    let uncomment = call.arg_str("uncomment")?;
    let key_ignore_case = call.arg_bool("key_ignore_case", false);
    let value_ignore_case = call.arg_bool("value_ignore_case", false);
    let prune = call.arg_bool("prune", false);
    let count = count_arg(call);

    let file_contents: Vec<String> = match fs::read_to_string(&name) {
        Ok(text) => text.split_inclusive('\n').map(str::to_string).collect(),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && call.arg_bool("create_if_missing", false) =>
        {
            append_if_not_found = true;
            Vec::new()
        }
        Err(_) => {
            ret.comment = format!("unable to open {name}");
            ret.result = Some(call.arg_bool("ignore_if_missing", false));
            return Ok(ret);
        }
    };
    let tmpl = |k: &str, sep: &str, v: &Value| format!("{k}{sep}{}\n", python_str(v));

    let mut diff: Vec<String> = Vec::new();
    let mut content: Vec<String> = Vec::new();
    let mut not_matched: Vec<String> = Vec::new();
    let mut changes = 0usize;
    let mut diff_count: Vec<i64> = vec![count; key_values.len()];
    let lower = |s: &str| s.to_lowercase();

    'lines: for orig in &file_contents {
        let mut line = orig.clone();
        let stripped = lstrip(orig, uncomment.as_deref());
        let did_uncomment = orig.len() > stripped.len();
        let test_line = if key_ignore_case {
            lower(stripped)
        } else {
            stripped.to_string()
        };
        let working_line = if did_uncomment {
            stripped
        } else {
            orig.as_str()
        };
        let (line_key, line_sep, line_value) = match working_line.split_once(separator.as_str()) {
            Some((k, v)) => (k, separator.as_str(), v),
            None => (working_line, "", ""),
        };
        if prune
            && !key_values.iter().any(|(k, _)| {
                test_line.starts_with(&*if key_ignore_case { lower(k) } else { k.clone() })
            })
        {
            not_matched.push(orig.clone());
            continue;
        }
        for (i, (k, v)) in key_values.iter().enumerate() {
            let test_key = if key_ignore_case { lower(k) } else { k.clone() };
            if !(test_line.starts_with(&test_key) && line_sep == separator) {
                continue;
            }
            let keys_match = if key_ignore_case {
                lower(line_key) == test_key
            } else {
                line_key == test_key
            };
            if !keys_match {
                continue;
            }
            let mut lv = line_value.trim().to_string();
            let mut tv = python_str(v).trim().to_string();
            if value_ignore_case {
                lv = lower(&lv);
                tv = lower(&tv);
            }
            let mut values_match = lv == tv;
            let mut needs_changing = false;
            if did_uncomment {
                if diff_count[i] > 0 {
                    needs_changing = true;
                } else if !values_match {
                    values_match = true;
                }
            } else if diff_count[i] == 0 {
                needs_changing = true;
            }
            if !values_match || needs_changing {
                diff.push(format!("- {orig}"));
                line.clear();
                if diff_count[i] != 0 {
                    line = tmpl(line_key, line_sep, v);
                    if v.is_string() {
                        diff.push(format!("+ {line}"));
                    } else {
                        diff.push(format!(
                            "+ {} (from {} type)\n",
                            line.trim_end(),
                            type_name(v)
                        ));
                    }
                }
                changes += 1;
            }
            if diff_count[i] > 0 {
                diff_count[i] -= 1;
            }
            content.push(line);
            continue 'lines;
        }
        content.push(line);
    }

    if append_if_not_found {
        let mut tmpdiff = Vec::new();
        for (i, (k, v)) in key_values.iter().enumerate() {
            if diff_count[i] > 0 {
                let line = tmpl(k, &separator, v);
                tmpdiff.push(format!("+ {line}"));
                content.push(line);
                changes += 1;
            }
        }
        if !tmpdiff.is_empty() {
            diff.push("- <EOF>\n".into());
            diff.extend(tmpdiff);
            diff.push("+ <EOF>\n".into());
        }
    } else if prepend_if_not_found {
        let mut did_diff = false;
        for (i, (k, v)) in key_values.iter().enumerate() {
            if diff_count[i] > 0 {
                let line = tmpl(k, &separator, v);
                if !did_diff {
                    diff.insert(0, "  <SOF>\n".into());
                    did_diff = true;
                }
                diff.insert(1, format!("+ {line}"));
                content.insert(0, line);
                changes += 1;
            }
        }
    }
    let deletions = not_matched.len();
    if prune {
        for line in &not_matched {
            let at = diff.len().min(1);
            diff.insert(at, format!("- {line}"));
        }
    }
    if changes == 0 && deletions == 0 {
        ret.result = Some(true);
        return Ok(ret);
    }
    if call.test {
        ret.comment = format!(
            "File {name} is set to be changed ({changes} lines modified, {deletions} deleted)"
        );
        if show_changes {
            ret.changes.insert("diff".into(), json!(diff.concat()));
            ret.comment.push_str("\nPredicted diff:\n\r\t\t");
            ret.comment.push_str(&diff.join("\r\t\t"));
            ret.result = None;
        }
        return Ok(ret);
    }
    ret.comment = format!("Changed {changes}, deleted {deletions} lines");
    if show_changes {
        ret.changes.insert("diff".into(), json!(diff.concat()));
    }
    if fs::write(&name, content.concat()).is_err() {
        ret.comment = format!("{name} not writable");
        ret.result = Some(false);
        return Ok(ret);
    }
    ret.result = Some(true);
    Ok(ret)
}
