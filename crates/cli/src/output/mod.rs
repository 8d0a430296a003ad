//! Salt's outputters: how a minion's return is printed (`--out`).
//!
//! Every outputter takes the whole `{minion_id: return}` map so that the
//! same code prints `halite-call`'s single `local` return and the many
//! returns of `halite '*' ...`.

/// Salt's terminal colours (shared with the modules' comments).
pub use halite_salt_rules::colors;
pub mod highstate;
pub mod json;
/// Salt's `nested` outputter (shared: state comments quote it too).
pub use halite_salt_rules::nested;

use serde_json::Value;

pub use colors::Colors;
pub use json::{json, write_json};

/// Which outputter to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputter {
    /// `--out json`: Salt's JSON, indented.
    Json,
    /// `--out yaml`.
    Yaml,
    /// `--out nested`: Salt's default for execution functions.
    Nested,
    /// `--out highstate`: Salt's state run summary.
    Highstate,
    /// `--out txt`: one `minion: value` line each.
    Txt,
    /// `--out raw`: Python's repr of the data.
    Raw,
}

impl Outputter {
    /// Parses an `--out` value.
    pub fn parse(s: &str) -> Option<Outputter> {
        Some(match s {
            "json" => Outputter::Json,
            "yaml" => Outputter::Yaml,
            "nested" => Outputter::Nested,
            "highstate" => Outputter::Highstate,
            "txt" => Outputter::Txt,
            "raw" => Outputter::Raw,
            _ => return None,
        })
    }

    /// The outputter Salt picks by default for a function.
    pub fn default_for(fun: &str, ret: &Value) -> Outputter {
        Outputter::default_for_shape(fun, ret.is_object() || ret.is_array())
    }

    /// The outputter Salt picks by default for a function whose return
    /// is a map or a list (`container`) or not.
    pub fn default_for_shape(fun: &str, container: bool) -> Outputter {
        let stateish = matches!(
            fun,
            "state.apply"
                | "state.sls"
                | "state.highstate"
                | "state.single"
                | "state.top"
                | "state.test"
        );
        if stateish && container {
            Outputter::Highstate
        } else {
            Outputter::Nested
        }
    }
}

/// Options the outputters read (Salt's `state_output`, `state_verbose`...).
#[derive(Debug, Clone)]
pub struct OutputOptions {
    /// Whether and how to color the output (`--no-color`, `--force-color`).
    pub colors: Colors,
    /// `state_output`: `full`, `terse`, `mixed`, `changes` (with `_id` variants).
    pub state_output: String,
    /// `state_verbose`: `False` hides states that succeeded without changes.
    pub state_verbose: bool,
    /// `state_output_profile`: show each state's duration.
    pub state_output_profile: bool,
    /// `state_output_pct`: show the summary's percentages.
    pub state_output_pct: bool,
    /// `--out-indent` for JSON (Salt's default is 4).
    pub json_indent: usize,
}

impl Default for OutputOptions {
    fn default() -> Self {
        OutputOptions {
            colors: Colors::none(),
            state_output: "full".into(),
            state_verbose: true,
            state_output_profile: true,
            state_output_pct: false,
            json_indent: 4,
        }
    }
}

/// Renders `{minion: return}` with `out`. `retcode` colours nested output red.
pub fn render(
    out: Outputter,
    data: &serde_json::Map<String, Value>,
    opts: &OutputOptions,
    retcode: i32,
) -> String {
    match out {
        Outputter::Json => {
            let mut buf = Vec::new();
            match write_json(&mut buf, data, opts.json_indent) {
                Ok(()) => String::from_utf8(buf)
                    .unwrap_or_else(|_| Value::Object(data.clone()).to_string()),
                Err(_) => Value::Object(data.clone()).to_string(),
            }
        }
        Outputter::Yaml => halite_render::yaml::dump_outputter(&Value::Object(data.clone()))
            .trim_end()
            .to_string(),
        Outputter::Nested => nested::render(&Value::Object(data.clone()), 0, &opts.colors, retcode),
        Outputter::Highstate => data
            .iter()
            .map(|(host, ret)| highstate::format_host(host, ret, opts))
            .collect::<Vec<_>>()
            .join("\n"),
        Outputter::Txt => data
            .iter()
            .map(|(host, ret)| format!("{host}: {}", txt(ret)))
            .collect::<Vec<_>>()
            .join("\n"),
        Outputter::Raw => python_repr(&Value::Object(data.clone())),
    }
}

fn txt(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

/// Python's `repr()` of data (Salt's txt/raw outputters print that).
pub fn python_repr(v: &Value) -> String {
    halite_salt_rules::pyfmt::quoted_repr(v)
}
