//! Salt's `http` execution module: `http.query` (any method, params, body,
//! headers, basic auth; the answer as Salt's dict of `body`, `status`,
//! `headers`, `text`, `dict`) and `http.wait_for_successful_query`, over the
//! fetch layer's client (system CAs or `ca_bundle`, Salt's proxy keys).

use std::time::{Duration, Instant};

use base64::Engine;
use halite_state::{truthy, Map, Value};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::json;

use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::fetch::{http, FetchConfig};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "http",
    functions: &[
        ExecFunction::new("query", query),
        ExecFunction::new("wait_for_successful_query", wait_for_successful_query),
    ],
};

/// The largest body `http.query` reads into its answer (it is returned
/// whole, as Salt's is); downloads go through `cp.get_url` instead.
const BODY_LIMIT: u64 = 64 * 1024 * 1024;

fn kw<'a>(args: &'a Args, key: &str) -> Option<&'a Value> {
    args.kwargs.get(key).filter(|v| !v.is_null())
}

fn flag(args: &Args, key: &str) -> bool {
    kw(args, key).is_some_and(truthy)
}

/// `params` as a query string appended to `url`.
fn with_params(url: &str, params: Option<&Value>) -> Result<String, ExecError> {
    let Some(params) = params else {
        return Ok(url.to_string());
    };
    let Value::Object(map) = params else {
        return Err(ExecError::Invocation(
            "http.query: params must be a dict of query parameters".into(),
        ));
    };
    if map.is_empty() {
        return Ok(url.to_string());
    }
    let pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(&py_str(v), NON_ALPHANUMERIC)
            )
        })
        .collect();
    let sep = if url.contains('?') { '&' } else { '?' };
    Ok(format!("{url}{sep}{}", pairs.join("&")))
}

/// The request headers: `header_dict`, `header_list` (`"Name: value"`),
/// basic auth from `username`/`password`.
fn headers(args: &Args) -> Result<Vec<(String, String)>, ExecError> {
    let mut out = Vec::new();
    match kw(args, "header_dict") {
        None => {}
        Some(Value::Object(m)) => out.extend(m.iter().map(|(k, v)| (k.clone(), py_str(v)))),
        Some(_) => {
            return Err(ExecError::Invocation(
                "http.query: header_dict must be a dict".into(),
            ))
        }
    }
    if let Some(Value::Array(items)) = kw(args, "header_list") {
        for item in items {
            let line = py_str(item);
            if let Some((k, v)) = line.split_once(':') {
                out.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    if let Some(user) = kw(args, "username").map(py_str) {
        let pass = kw(args, "password").map(py_str).unwrap_or_default();
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        out.push(("Authorization".into(), format!("Basic {token}")));
    }
    if !out
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
    {
        out.push((
            "User-Agent".into(),
            concat!("halite/", env!("CARGO_PKG_VERSION"), " http.query()").into(),
        ));
    }
    Ok(out)
}

/// Salt's `http.query url [method=GET] [params] [data] [header_dict]
/// [header_list] [username] [password] [status] [headers] [text] [decode]
/// [decode_type] [verify_ssl] [test] [test_url]`. An error status answers
/// `{status, error, body}`; a failure to connect `{error}`.
pub fn query(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut url = args.require_str(0, "url", "http.query")?;
    let mut out = Map::new();
    if flag(args, "test") {
        match kw(args, "test_url").map(py_str) {
            Some(t) => url = t,
            None => return Ok(Value::Object(Map::new())),
        }
        out.insert("test".into(), json!(true));
    }
    let url = with_params(&url, kw(args, "params"))?;
    let method = kw(args, "method")
        .map(py_str)
        .unwrap_or_else(|| "GET".into())
        .to_ascii_uppercase();
    let mut hdrs = headers(args)?;
    let body = match kw(args, "data") {
        None => None,
        Some(Value::String(s)) => Some(s.clone().into_bytes()),
        Some(other) => Some(other.to_string().into_bytes()),
    };
    if body.is_some()
        && !hdrs
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        hdrs.push((
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
    }
    let verify_ssl = kw(args, "verify_ssl").is_none_or(truthy);
    let cfg = FetchConfig::from_opts(&host.opts);
    let reply = match http::request(
        &cfg,
        &url,
        &method,
        &hdrs,
        body.as_deref(),
        verify_ssl,
        BODY_LIMIT,
    ) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%url, "http.query failed: {e}");
            out.insert("status".into(), json!(0));
            out.insert("error".into(), json!(e));
            return Ok(Value::Object(out));
        }
    };
    if reply.status >= 400 {
        let reason = ureq::http::StatusCode::from_u16(reply.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Unknown");
        out.insert("status".into(), json!(reply.status));
        out.insert(
            "error".into(),
            json!(format!("HTTP {}: {reason}", reply.status)),
        );
        out.insert("body".into(), json!(reply.body));
        return Ok(Value::Object(out));
    }
    out.insert("body".into(), json!(reply.body));
    if flag(args, "status") {
        out.insert("status".into(), json!(reply.status));
    }
    if flag(args, "headers") {
        let mut h = Map::new();
        for (k, v) in &reply.headers {
            h.insert(title_case(k), json!(v));
        }
        out.insert("headers".into(), Value::Object(h));
    }
    if flag(args, "text") {
        out.insert("text".into(), json!(reply.body));
    }
    if flag(args, "decode") {
        let decode_type = kw(args, "decode_type")
            .map(py_str)
            .unwrap_or_else(|| "auto".into());
        let is_json = decode_type == "json"
            || (decode_type == "auto"
                && reply
                    .headers
                    .iter()
                    .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.contains("json")));
        if is_json {
            match serde_json::from_str::<Value>(&reply.body) {
                Ok(v) => {
                    out.insert("dict".into(), v);
                }
                Err(e) => {
                    out.insert(
                        "error".into(),
                        json!(format!("cannot decode the body as JSON: {e}")),
                    );
                }
            }
        } else if decode_type != "auto" && decode_type != "plain" {
            out.insert(
                "error".into(),
                json!(format!(
                    "decode_type '{decode_type}' is not supported by halite; use json or plain"
                )),
            );
        }
    }
    Ok(Value::Object(out))
}

/// `Content-Type` from `content-type`, as Salt's header dicts spell them.
fn title_case(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut c = part.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

fn seconds(args: &Args, key: &str, default: f64) -> Duration {
    let secs = match kw(args, key) {
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

/// Salt's `http.wait_for_successful_query url [wait_for=300]
/// [request_interval]`: repeats `http.query` until it answers without an
/// error or `wait_for` seconds pass; the last answer either way.
pub fn wait_for_successful_query(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let wait_for = seconds(args, "wait_for", 300.0);
    let interval = seconds(args, "request_interval", 1.0);
    let start = Instant::now();
    loop {
        let ret = query(args, host)?;
        if ret.get("error").is_none() || start.elapsed() >= wait_for {
            return Ok(ret);
        }
        std::thread::sleep(interval.min(wait_for.saturating_sub(start.elapsed())));
    }
}
