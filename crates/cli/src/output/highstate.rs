//! Salt's `highstate` outputter: a block per state (`ID`, `Function`,
//! `Result`, `Comment`, `Started`, `Duration`, `Changes`), the terse forms
//! of `--state-output`, and the summary with Succeeded / Failed / changed
//! counts and the total run time.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use halite_proto::cursor::{Cursor, Token};

use super::json::NotTranscoded;
use super::{nested, OutputOptions};
use halite_salt_rules::pyfmt::quoted_str as py_str;

/// A state's return as the outputter reads it: only [`PRINTED`]'s keys
/// are asked for. A decoded return's map is one; a return printed from
/// its bytes picks those keys alone ([`format_host_packed`]), so
/// both print through the same code.
pub trait StateReturn {
    /// The value of `key` (one of [`PRINTED`]).
    fn get(&self, key: &str) -> Option<&Value>;

    /// Whether the return has `key`.
    fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

/// The keys of a state's return the outputter reads.
pub const PRINTED: [&str; 7] = [
    "result",
    "changes",
    "comment",
    "start_time",
    "duration",
    "warnings",
    "__run_num__",
];

impl StateReturn for Map<String, Value> {
    fn get(&self, key: &str) -> Option<&Value> {
        Map::get(self, key)
    }
}

fn py_result(v: Option<&Value>) -> &'static str {
    match v {
        Some(Value::Bool(true)) => "True",
        Some(Value::Bool(false)) => "False",
        _ => "None",
    }
}

/// `f` of `str()` of `v` as Salt prints it (a string as it is, without a
/// copy; absent: empty).
fn with_py_str<R>(v: Option<&Value>, f: impl FnOnce(&str) -> R) -> R {
    match v {
        Some(Value::String(s)) => f(s),
        Some(other) => f(&py_str(other)),
        None => f(""),
    }
}

/// What a line break in a state's comment becomes: the next line under
/// the first, past the `Comment: ` label.
const COMMENT_BREAK: &str = "\n              ";

/// Changes formatted the way Salt prints them: nested, indented by 14.
fn format_changes(changes: Option<&Value>, opts: &OutputOptions) -> (bool, String) {
    match changes {
        None => (false, String::new()),
        Some(c) if !halite_state::truthy(c) => (false, String::new()),
        // An orchestration step's minions (`salt.state`): each one's
        // highstate, indented under the step.
        Some(Value::Object(m))
            if m.get("out").and_then(Value::as_str) == Some("highstate")
                && m.get("ret").is_some_and(|r| !r.is_null()) =>
        {
            let mut text = String::new();
            if let Some(Value::Object(hosts)) = m.get("ret") {
                for (host, data) in hosts {
                    for line in format_host(host, data, opts).lines() {
                        text.push('\n');
                        text.push_str(&" ".repeat(14));
                        text.push_str(line);
                    }
                }
            }
            (true, text)
        }
        Some(Value::Object(m)) => (
            true,
            format!(
                "\n{}",
                nested::render(&Value::Object(m.clone()), 14, &opts.colors, 0)
            ),
        ),
        Some(other) => (true, format!("Invalid Changes data: {}", py_str(other))),
    }
}

fn terse(tcolor: &str, comps: &[&str], ret: &impl StateReturn, opts: &OutputOptions) -> String {
    let mut result = if ret.get("changes").is_some_and(halite_state::truthy) {
        "Changed"
    } else {
        "Clean"
    };
    match ret.get("result") {
        Some(Value::Bool(false)) => result = "Failed",
        Some(Value::Null) | None => result = "Differs",
        _ => {}
    }
    let mut s = String::new();
    if let Some(Value::Array(w)) = ret.get("warnings") {
        let w: Vec<String> = w.iter().map(py_str).collect();
        s.push_str(&format!(
            "{}Warnings:\n{}{}",
            opts.colors.light_red,
            w.join("\n"),
            opts.colors.endc
        ));
    }
    s.push_str(&format!(
        " {tcolor} Name: {} - Function: {}.{} - Result: {result}",
        comps[2],
        comps[0],
        comps[comps.len() - 1]
    ));
    if opts.state_output_profile && ret.contains_key("start_time") {
        s.push_str(&format!(
            " - Started: {} - Duration: {} ms",
            ret.get("start_time").map(py_str).unwrap_or_default(),
            ret.get("duration").map(py_str).unwrap_or_default()
        ));
    }
    s.push_str(opts.colors.endc);
    s
}

/// Salt's `_format_host`: one minion's return.
pub fn format_host(host: &str, data: &Value, opts: &OutputOptions) -> String {
    let c = &opts.colors;
    let mut hcolor = c.green;
    let mut hstrs: Vec<String> = Vec::new();
    match data {
        Value::Number(n) => {
            hstrs.push(format!("{hcolor}    {n}{}", c.endc));
            hcolor = c.cyan;
        }
        Value::String(s) => {
            for l in s.lines() {
                hstrs.push(format!("{hcolor}    {l}{}", c.endc));
            }
            hcolor = c.cyan;
        }
        Value::Array(errors) => {
            hcolor = c.light_red;
            hstrs.push(format!("    {hcolor}Data failed to compile:{}", c.endc));
            for e in errors {
                hstrs.push(format!("{hcolor}----------\n    {}{}", py_str(e), c.endc));
            }
        }
        Value::Object(states) => {
            let entries: Vec<(&str, &Map<String, Value>)> = states
                .iter()
                .filter_map(|(k, v)| {
                    v.as_object()
                        .filter(|m| m.contains_key("result"))
                        .map(|m| (k.as_str(), m))
                })
                .collect();
            format_states(host, entries, opts, &mut hcolor, &mut hstrs);
        }
        other => hstrs.push(format!("    {}", py_str(other))),
    }
    hstrs.insert(0, format!("{hcolor}{host}:{}", c.endc));
    hstrs.join("\n")
}

/// The states of one minion's return (each one's key and return, in the
/// return's order), sorted by `__run_num__` and printed into `hstrs`,
/// then the summary; `hcolor` becomes the host line's colour.
pub(crate) fn format_states<'a, S: StateReturn>(
    host: &str,
    mut entries: Vec<(&'a str, &'a S)>,
    opts: &OutputOptions,
    hcolor: &mut &'static str,
    hstrs: &mut Vec<String>,
) {
    let c = &opts.colors;
    entries.sort_by_key(|(_, m)| m.get("__run_num__").and_then(Value::as_u64).unwrap_or(0));
    let mut succeeded = 0usize;
    let mut failed = 0usize;
    let mut not_run = 0usize;
    let mut warnings = 0usize;
    let mut nchanges = 0usize;
    let mut total_ms = 0.0f64;
    let state_output = opts.state_output.to_lowercase();
    for (tname, ret) in entries {
        match ret.get("result") {
            Some(Value::Bool(true)) => succeeded += 1,
            Some(Value::Bool(false)) => failed += 1,
            _ => not_run += 1,
        }
        total_ms += ret.get("duration").and_then(Value::as_f64).unwrap_or(0.0);
        let (schanged, ctext) = format_changes(ret.get("changes"), opts);
        if schanged {
            nchanges += 1;
        }
        let ok = ret.get("result") == Some(&Value::Bool(true));
        if !opts.state_verbose && ok && !schanged {
            continue;
        }
        let mut tcolor = c.green;
        if schanged {
            tcolor = c.cyan;
        }
        match ret.get("result") {
            Some(Value::Bool(false)) => {
                *hcolor = c.red;
                tcolor = c.red;
            }
            Some(Value::Bool(true)) => {}
            _ => {
                *hcolor = c.light_yellow;
                tcolor = c.light_yellow;
            }
        }
        let mut comps: Vec<&str> = tname.split("_|-").collect();
        while comps.len() < 4 {
            comps.push("");
        }
        let owned_id;
        if state_output.ends_with("_id") {
            owned_id = comps[1].to_string();
            comps[2] = &owned_id;
        }
        let result_false = ret.get("result") == Some(&Value::Bool(false));
        if state_output.starts_with("terse")
            || (state_output.starts_with("mixed") && !result_false)
            || (state_output.starts_with("changes") && ok && !schanged)
        {
            hstrs.push(terse(tcolor, &comps, ret, opts));
            continue;
        }
        // One text per state, its lines joined as `hstrs` joins them
        // (issue 25: a line a `String` was most of printing a fleet's
        // 1,000-state returns).
        let e = c.endc;
        let mut block = String::with_capacity(256);
        let _ = write!(
            block,
            "{tcolor}----------{e}\n    {tcolor}      ID: {}{e}\n    {tcolor}Function: {}.{}{e}",
            comps[1], comps[0], comps[3]
        );
        if comps[1] != comps[2] {
            let _ = write!(block, "\n    {tcolor}    Name: {}{e}", comps[2]);
        }
        let _ = write!(
            block,
            "\n    {tcolor}  Result: {}{e}\n    {tcolor} Comment: ",
            py_result(ret.get("result"))
        );
        with_py_str(ret.get("comment"), |comment| {
            for (i, line) in comment.trim().split('\n').enumerate() {
                if i > 0 {
                    block.push_str(COMMENT_BREAK);
                }
                block.push_str(line);
            }
        });
        block.push_str(e);
        if opts.state_output_profile && ret.contains_key("start_time") {
            let _ = write!(block, "\n    {tcolor} Started: ");
            with_py_str(ret.get("start_time"), |start| block.push_str(start));
            let _ = write!(block, "{e}\n    {tcolor}Duration: ");
            if let Some(d) = ret.get("duration") {
                with_py_str(Some(d), |d| block.push_str(d));
                block.push_str(" ms");
            }
            block.push_str(e);
        }
        let _ = write!(block, "\n{tcolor}     Changes:   {ctext}{e}");
        if let Some(Value::Array(w)) = ret.get("warnings") {
            warnings += 1;
            let w: Vec<String> = w.iter().map(py_str).collect();
            let _ = write!(
                block,
                "\n   {} Warnings: {}{e}",
                c.light_red,
                w.join("\n").replace('\n', "\n              ")
            );
        }
        hstrs.push(block);
    }
    // Salt sizes the column from the counts it saw (results present only).
    let present = [succeeded, failed, not_run, warnings];
    let count_max = present
        .iter()
        .filter(|n| **n > 0)
        .map(|n| n.to_string().len())
        .max()
        .unwrap_or(0);
    let label_max = "Succeeded".len();
    let line_max = label_max + count_max + 2;
    let fmt_count =
        |label: &str, n: String| format!("{label}: {n:>w$}", w = line_max - (label.len() + 2));
    hstrs.push(format!(
        "{}\nSummary for {host}\n{}{}",
        c.cyan,
        "-".repeat(line_max),
        c.endc
    ));
    let mut stats = Vec::new();
    if not_run > 0 {
        stats.push(format!("{}unchanged={not_run}{}", c.light_yellow, c.endc));
    }
    if nchanges > 0 {
        stats.push(format!("{}changed={nchanges}{}", c.green, c.endc));
    }
    let stats = if stats.is_empty() {
        String::new()
    } else {
        format!(" ({})", stats.join(", "))
    };
    hstrs.push(format!(
        "{}{}{}{stats}",
        c.green,
        fmt_count("Succeeded", (succeeded + not_run).to_string()),
        c.endc
    ));
    hstrs.push(format!(
        "{}{}{}",
        if failed > 0 { c.red } else { c.cyan },
        fmt_count("Failed", failed.to_string()),
        c.endc
    ));
    let total = succeeded + failed + not_run;
    if opts.state_output_pct && total > 0 {
        let pct = |n: usize| {
            let v = (n as f64 / total as f64 * 10000.0).round() / 100.0;
            format!("{v:?}")
        };
        hstrs.push(format!(
            "{}{}{}",
            c.green,
            fmt_count("Success %", pct(succeeded + not_run)),
            c.endc
        ));
        hstrs.push(format!(
            "{}{}{}",
            if failed > 0 { c.red } else { c.cyan },
            fmt_count("Failure %", pct(failed)),
            c.endc
        ));
    }
    if warnings > 0 {
        hstrs.push(format!(
            "{}{}{}",
            c.light_red,
            fmt_count("Warnings", warnings.to_string()),
            c.endc
        ));
    }
    hstrs.push(format!(
        "{}{}\nTotal states run: {total:>w$}{}",
        c.cyan,
        "-".repeat(line_max),
        c.endc,
        w = line_max - 7
    ));
    if opts.state_output_profile {
        let (v, unit) = if total_ms > 999.0 {
            (total_ms / 1000.0, "s")
        } else {
            (total_ms, "ms")
        };
        hstrs.push(format!(
            "{}Total run time: {:>w$} {unit}{}",
            c.cyan,
            format!("{v:.3}"),
            c.endc,
            w = line_max - 5
        ));
    }
}

/// [`PRINTED`]'s keys of one state's return, decoded from its bytes
/// (the others are stepped over).
#[derive(Default)]
struct Picked([Option<Value>; PRINTED.len()]);

impl StateReturn for Picked {
    fn get(&self, key: &str) -> Option<&Value> {
        PRINTED
            .iter()
            .position(|k| *k == key)
            .and_then(|i| self.0[i].as_ref())
    }
}

/// The value at `cur` (nested `depth` levels), as a decode gives it:
/// scalars built from their token, containers decoded.
fn picked_value(cur: &mut Cursor<'_>, depth: usize) -> Result<Value, NotTranscoded> {
    let mut ahead = *cur;
    let value = match ahead.token()? {
        Token::Nil => Value::Null,
        Token::Bool(b) => Value::Bool(b),
        Token::Uint(n) => Value::from(n),
        Token::Int(n) => Value::from(n),
        // A decode widens an f32, and holds a float that is not finite as null.
        Token::F32(v) => {
            serde_json::Number::from_f64(f64::from(v)).map_or(Value::Null, Value::Number)
        }
        Token::F64(v) => serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        Token::Str(s) => Value::String(
            std::str::from_utf8(s)
                .map_err(|_| NotTranscoded("a string is not UTF-8"))?
                .to_string(),
        ),
        Token::Bin(_) | Token::Ext(_) => return Err(NotTranscoded("binary or extension data")),
        Token::Array(_) | Token::Map(_) => {
            let bytes = cur.skip(depth)?;
            return halite_proto::decode(bytes)
                .map_err(|_| NotTranscoded("a value that does not decode"));
        }
    };
    *cur = ahead;
    Ok(value)
}

/// Salt's `_format_host` for a return whose value is still the msgpack
/// `packed` (issue 25: a 1,000-state return decoded into a `Value` only
/// to be printed was most of `halite '*' state.apply`'s CPU): the text
/// [`format_host`] prints for the value `packed` decodes to, byte for
/// byte, with only [`PRINTED`]'s keys of each state decoded. A return
/// that is not a map of states, or that a `Value` would hold otherwise
/// (a key twice where it matters, binary data, invalid UTF-8, nesting
/// past [`halite_proto::MAX_VALUE_DEPTH`]), is refused: the caller prints
/// the decoded value instead.
pub fn format_host_packed(
    host: &str,
    packed: &[u8],
    opts: &OutputOptions,
) -> Result<String, NotTranscoded> {
    let mut cur = Cursor::new(packed);
    let Token::Map(n) = cur.token()? else {
        return Err(NotTranscoded("not a map of states"));
    };
    let mut keys: Vec<&str> = Vec::with_capacity(n.min(1 << 16));
    let mut states: Vec<(&str, Picked)> = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let key = cur.key()?;
        keys.push(key);
        let mut ahead = cur;
        let Token::Map(fields) = ahead.token()? else {
            // Not a state's return: not printed, but it must decode.
            cur.skip(2)?;
            continue;
        };
        cur = ahead;
        let mut state = Picked::default();
        for _ in 0..fields {
            let field = cur.key()?;
            match PRINTED.iter().position(|k| *k == field) {
                Some(i) if state.0[i].is_some() => {
                    return Err(NotTranscoded("a key twice in a map"))
                }
                Some(i) => state.0[i] = Some(picked_value(&mut cur, 3)?),
                None => {
                    cur.skip(3)?;
                }
            }
        }
        if state.contains_key("result") {
            states.push((key, state));
        }
    }
    if !cur.is_empty() {
        return Err(NotTranscoded("bytes after the value"));
    }
    // A state twice: a `Value` keeps its last return at its first place.
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err(NotTranscoded("a key twice in a map"));
    }
    let c = &opts.colors;
    let mut hcolor = c.green;
    let mut hstrs = Vec::new();
    let entries = states.iter().map(|(k, s)| (*k, s)).collect();
    format_states(host, entries, opts, &mut hcolor, &mut hstrs);
    hstrs.insert(0, format!("{hcolor}{host}:{}", c.endc));
    Ok(hstrs.join("\n"))
}
