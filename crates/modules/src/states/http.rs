//! Salt's `http` state: `http.query` (a request whose answer must match a
//! text or pattern and/or a status) and `http.wait_for_successful_query`
//! (the same, repeated until it passes or `wait_for` seconds pass), over
//! the `http.query` execution function.

use std::time::{Duration, Instant};

use halite_state::requisite::{is_internal_keyword, py_repr, py_str};
use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};
use regex::Regex;
use serde_json::json;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "http",
    functions: &[
        StateFunction::new("query", query),
        StateFunction::new("wait_for_successful_query", wait_for_successful_query),
    ],
};

/// The state's own arguments; every other one goes to `http.query`.
const OWN: &[&str] = &[
    "name",
    "match",
    "match_type",
    "status",
    "status_type",
    "wait_for",
    "request_interval",
];

/// Whether `pattern` is found in `text` (Python's `re.search`); a bad
/// pattern is an error the user can fix.
fn search(pattern: &str, text: &str) -> Result<bool, StateError> {
    Regex::new(pattern)
        .map(|re| re.is_match(text))
        .map_err(|e| StateError::Other(format!("Invalid pattern '{pattern}': {e}")))
}

/// `http.query`: Salt's checks and comments, the answer under `data`.
fn query(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::new(name.clone(), None);
    let wanted_match = call.arg("match").filter(|v| !v.is_null());
    let wanted_status = call.arg("status").filter(|v| !v.is_null());
    if wanted_match.is_none() && wanted_status.is_none() {
        ret.result = Some(false);
        ret.comment =
            " Either match text (match) or a status code (status) is required.".to_string();
        ret.extra.insert("data".into(), json!({}));
        return Ok(ret);
    }
    let mut kwargs = Map::new();
    for (k, v) in call.chunk.iter() {
        if !is_internal_keyword(k) && !OWN.contains(&k) {
            kwargs.insert(k.to_string(), v.clone());
        }
    }
    kwargs.entry("decode").or_insert(json!(false));
    kwargs.insert("text".into(), json!(true));
    kwargs.insert("status".into(), json!(true));
    if call.test {
        kwargs.insert("test".into(), json!(true));
    }
    let data = call
        .env
        .call_function("http.query", &[json!(name)], &kwargs)
        .map_err(StateError::Other)?;
    let text = data.get("text").map(py_str).unwrap_or_default();
    let status = data.get("status").map(py_str).unwrap_or_default();
    let mut comment = String::new();
    if let Some(m) = wanted_match {
        let m = py_str(m);
        let regex = call.arg_str("match_type")?.as_deref() == Some("pcre");
        let (found, what) = if regex {
            (search(&m, &text)?, "Match pattern")
        } else {
            (text.contains(&m), "Match text")
        };
        let verb = if found { "was found" } else { "was not found" };
        comment.push_str(&format!(" {what} \"{m}\" {verb}."));
        ret.result = Some(found);
    }
    if let Some(s) = wanted_status {
        match call.arg_str("status_type")?.as_deref().unwrap_or("string") {
            "list" => {
                let items = match s {
                    Value::Array(a) => a.clone(),
                    other => vec![other.clone()],
                };
                for stat in &items {
                    if status == py_str(stat) {
                        comment.push_str(&format!(" Status {} was found.", py_str(stat)));
                        if ret.result.is_none() {
                            ret.result = Some(true);
                        }
                    }
                }
                if ret.result != Some(true) {
                    comment.push_str(&format!(" Statuses {} were not found.", py_repr(s)));
                    ret.result = Some(false);
                }
            }
            "pcre" => {
                let pat = py_str(s);
                if search(&pat, &status)? {
                    comment.push_str(&format!(" Status pattern \"{pat}\" was found."));
                    if ret.result.is_none() {
                        ret.result = Some(true);
                    }
                } else {
                    comment.push_str(&format!(" Status pattern \"{pat}\" was not found."));
                    ret.result = Some(false);
                }
            }
            _ => {
                let want = py_str(s);
                if status == want {
                    comment.push_str(&format!(" Status {want} was found."));
                    if ret.result.is_none() {
                        ret.result = Some(true);
                    }
                } else {
                    comment.push_str(&format!(" Status {want} was not found."));
                    ret.result = Some(false);
                }
            }
        }
    }
    ret.comment = comment.trim().to_string();
    if call.test {
        ret.result = None;
        ret.comment.push_str(" (TEST MODE");
        if let Some(t) = call.arg("test_url") {
            ret.comment
                .push_str(&format!(", TEST URL WAS: {}", py_str(t)));
        }
        ret.comment.push(')');
    }
    ret.extra.insert("data".into(), data);
    Ok(ret)
}

fn seconds(call: &StateCall<'_>, key: &str, default: f64) -> Duration {
    let secs = match call.arg(key) {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(default),
        Some(Value::String(s)) => s.parse().unwrap_or(default),
        _ => default,
    };
    Duration::from_secs_f64(if secs.is_finite() && secs >= 0.0 {
        secs
    } else {
        default
    })
}

/// `http.wait_for_successful_query`: `http.query` until it passes or
/// `wait_for` (300) seconds pass, `request_interval` apart; the last
/// result either way.
fn wait_for_successful_query(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let wait_for = seconds(call, "wait_for", 300.0);
    let interval = call
        .arg("request_interval")
        .map(|_| seconds(call, "request_interval", 0.0));
    if call.test {
        // A test run never succeeds, so Salt would spin for wait_for:
        // one prediction is the answer.
        return query(call);
    }
    let start = Instant::now();
    loop {
        let ret = query(call)?;
        if ret.result == Some(true) || start.elapsed() > wait_for {
            return Ok(ret);
        }
        // Salt loops without a pause unless request_interval is given;
        // a short one keeps a down server from being hammered.
        let pause = interval.unwrap_or(Duration::from_millis(200));
        std::thread::sleep(pause.min(wait_for.saturating_sub(start.elapsed())));
    }
}
