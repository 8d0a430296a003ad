//! `halite-run`: Salt's runners that matter for a fleet — `jobs.*` read
//! the job cache, `manage.up/down/status` ping every accepted minion,
//! `state.event` follows the master's event bus; `state.orchestrate` and
//! the other runners come from halite-runners.

use std::io::Write;

use halite_client::jobcache::JobCache;
use halite_client::local::{LocalBody, LocalReply};
use halite_client::MasterConfig;
use serde_json::{json, Value};

use crate::output::{self, OutputOptions, Outputter};

/// Python's `json.dumps`: `", "` / `": "` separators on one line, or
/// `indent` spaces per level (with `", "` replaced by `","` at line ends).
pub fn python_json(v: &Value, indent: Option<usize>, sort_keys: bool) -> String {
    fn go(v: &Value, indent: Option<usize>, sort: bool, depth: usize, out: &mut String) {
        let nl = |out: &mut String, d: usize| {
            if let Some(n) = indent {
                out.push('\n');
                out.push_str(&" ".repeat(n * d));
            }
        };
        let sep = if indent.is_some() { "," } else { ", " };
        match v {
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    nl(out, depth + 1);
                    go(item, indent, sort, depth + 1, out);
                }
                nl(out, depth);
                out.push(']');
            }
            Value::Object(map) if !map.is_empty() => {
                let mut keys: Vec<&String> = map.keys().collect();
                if sort {
                    keys.sort();
                }
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    nl(out, depth + 1);
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push_str(": ");
                    go(&map[*k], indent, sort, depth + 1, out);
                }
                nl(out, depth);
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    go(v, indent, sort_keys, 0, &mut out);
    out
}

pub use super::runner_call::RunnerCall;

fn print_data(out: &mut dyn Write, fmt: Option<&str>, data: Value) -> std::io::Result<()> {
    let outputter = fmt.and_then(Outputter::parse).unwrap_or(Outputter::Nested);
    let text = match (outputter, data) {
        (Outputter::Json, v) => output::json(&v, 4),
        (o, Value::Object(map)) => output::render(o, &map, &OutputOptions::default(), 0),
        (_, v) => crate::output::nested::render(&v, 0, &crate::output::Colors::none(), 0),
    };
    writeln!(out, "{text}")
}

fn kwarg<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
}

fn positional(args: &[String]) -> Vec<&String> {
    args.iter().filter(|a| !a.contains('=')).collect()
}

/// Runs the runner function; the exit code.
pub fn run(cfg: &MasterConfig, call: &RunnerCall, out: &mut dyn Write) -> anyhow::Result<i32> {
    let fmt = call.out.as_deref();
    if halite_runners::is_orchestrate(&call.fun) {
        return super::orch::run(cfg, call, out);
    }
    match call.fun.as_str() {
        "jobs.list_jobs" => {
            print_data(out, fmt, halite_runners::jobs::list_jobs(cfg)?)?;
        }
        "jobs.lookup_jid" => {
            let Some(jid) = positional(&call.args)
                .first()
                .map(|s| s.to_string())
                .or_else(|| kwarg(&call.args, "jid").map(String::from))
            else {
                anyhow::bail!("jobs.lookup_jid needs a jid: halite-run jobs.lookup_jid <jid>");
            };
            let Value::Object(data) = halite_runners::jobs::lookup_jid(cfg, &jid)? else {
                anyhow::bail!("jobs.lookup_jid answered something other than a mapping");
            };
            if data.is_empty() {
                // Salt prints an empty mapping.
                writeln!(out, "{}", if fmt == Some("json") { "{}" } else { "" })?;
                return Ok(0);
            }
            let fun = JobCache::open(&cfg.job_cache_path())?
                .job(&jid)?
                .and_then(|j| j.get("fun").and_then(Value::as_str).map(String::from))
                .unwrap_or_default();
            let outputter = fmt.and_then(Outputter::parse).unwrap_or_else(|| {
                Outputter::default_for(&fun, data.values().next().unwrap_or(&Value::Null))
            });
            writeln!(
                out,
                "{}",
                output::render(outputter, &data, &OutputOptions::default(), 0)
            )?;
        }
        "jobs.active" => {
            let mut client = super::connect(cfg)?;
            match client.call(LocalBody::Active)? {
                LocalReply::Value(v) => print_data(out, fmt, v)?,
                other => anyhow::bail!("unexpected answer from the master: {other:?}"),
            }
        }
        // halite's own: the master's counters (bundles sent, not sent
        // because the minion held them, compressed, in flight).
        "master.stats" => {
            let mut client = super::connect(cfg)?;
            match client.call(LocalBody::Stats)? {
                LocalReply::Value(v) => print_data(out, fmt, v)?,
                other => anyhow::bail!("unexpected answer from the master: {other:?}"),
            }
        }
        "manage.up" | "manage.down" | "manage.status" => {
            let (up, down) = halite_runners::manage::ping_all(cfg, call.timeout)?;
            let data = match call.fun.as_str() {
                "manage.up" => json!(up),
                "manage.down" => json!(down),
                _ => json!({"up": up, "down": down}),
            };
            print_data(out, fmt, data)?;
        }
        "state.event" => {
            let tagmatch = positional(&call.args)
                .first()
                .map(|s| s.to_string())
                .or_else(|| kwarg(&call.args, "tagmatch").map(String::from))
                .unwrap_or_else(|| "*".into());
            let pretty = kwarg(&call.args, "pretty")
                .is_some_and(|v| matches!(v, "True" | "true" | "1" | "yes"));
            let count: Option<u64> = kwarg(&call.args, "count")
                .and_then(|c| c.parse().ok())
                .filter(|c| *c > 0);
            let mut client = super::connect(cfg)?;
            client.send(LocalBody::Events { tagmatch })?;
            let mut seen = 0u64;
            while let Some(reply) = client.next(None)? {
                if let LocalReply::Error(e) = reply {
                    anyhow::bail!("the master refused the event stream: {e}");
                }
                if let LocalReply::Event { tag, data } = reply {
                    let body = if pretty {
                        python_json(&data, Some(4), true)
                    } else {
                        python_json(&data, None, false)
                    };
                    writeln!(out, "{tag}\t{body}")?;
                    out.flush()?;
                    seen += 1;
                    if count.is_some_and(|c| seen >= c) {
                        break;
                    }
                }
            }
        }
        other => {
            let mut parsed = crate::args::parse_args(&call.args);
            // `-t` is how long manage.* waits for the minions.
            if other.starts_with("manage.") {
                parsed
                    .kwargs
                    .entry("timeout")
                    .or_insert_with(|| Value::from(call.timeout.as_secs()));
            }
            let value = match halite_runners::call_runner_args(cfg, other, &parsed.positional, &parsed.kwargs) {
                Err(halite_runners::RunnerError::NotAvailable(_)) => anyhow::bail!(
                    "'{other}' is not available. halite-run knows jobs.list_jobs, jobs.lookup_jid, jobs.active, manage.up, manage.down, manage.status, state.event, state.orchestrate and event.send"
                ),
                r => r?,
            };
            print_data(out, fmt, value)?;
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::python_json;
    use serde_json::json;

    #[test]
    fn json_is_pythons() {
        let v = json!({"b": [1, "x"], "a": {"c": null, "d": true}, "e": {}});
        assert_eq!(
            python_json(&v, None, false),
            r#"{"b": [1, "x"], "a": {"c": null, "d": true}, "e": {}}"#
        );
        assert_eq!(
            python_json(&v, Some(4), true),
            "{\n    \"a\": {\n        \"c\": null,\n        \"d\": true\n    },\n    \"b\": [\n        1,\n        \"x\"\n    ],\n    \"e\": {}\n}"
        );
    }
}
