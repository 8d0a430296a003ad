//! Salt's outputters: how a minion's return is printed (`--out`).
//!
//! Every outputter takes the whole `{minion_id: return}` map so that the
//! same code prints `halite-call`'s single `local` return and the many
//! returns of `halite '*' ...`.

pub mod colors;
pub mod highstate;
pub mod nested;

use serde_json::Value;

pub use colors::Colors;

/// Which outputter to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputter {
    Json,
    Yaml,
    Nested,
    Highstate,
    Txt,
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
        let stateish = matches!(
            fun,
            "state.apply"
                | "state.sls"
                | "state.highstate"
                | "state.single"
                | "state.top"
                | "state.test"
        );
        if stateish && (ret.is_object() || ret.is_array()) {
            Outputter::Highstate
        } else {
            Outputter::Nested
        }
    }
}

/// Options the outputters read (Salt's `state_output`, `state_verbose`...).
#[derive(Debug, Clone)]
pub struct OutputOptions {
    pub colors: Colors,
    pub state_output: String,
    pub state_verbose: bool,
    pub state_output_profile: bool,
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

/// Writes `v` as Salt's json outputter prints it (`indent`, non-ASCII
/// kept) straight to `out`, without building the text first.
pub fn write_json<W: std::io::Write, T: serde::Serialize + ?Sized>(
    out: W,
    v: &T,
    indent: usize,
) -> std::io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, IndentFormatter::new(indent));
    v.serialize(&mut ser).map_err(std::io::Error::other)
}

/// serde_json's `PrettyFormatter` output, with each line break and its
/// indentation written at once (the pretty formatter writes the indent
/// once per level: at 10 000 states those small writes were a good part
/// of printing a run).
struct IndentFormatter {
    /// `,\n` followed by the indentation of the deepest level seen so far.
    breaks: Vec<u8>,
    indent: usize,
    level: usize,
    has_value: bool,
}

impl IndentFormatter {
    fn new(indent: usize) -> Self {
        IndentFormatter {
            breaks: b",\n".to_vec(),
            indent,
            level: 0,
            has_value: false,
        }
    }

    /// `,\n` (or `\n` when `first`) and the current level's indentation.
    fn line_break(&mut self, first: bool) -> &[u8] {
        let end = 2 + self.level * self.indent;
        if self.breaks.len() < end {
            self.breaks.resize(end, b' ');
        }
        &self.breaks[usize::from(first)..end]
    }
}

impl serde_json::ser::Formatter for IndentFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            w.write_all(self.line_break(true))?;
        }
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        w.write_all(self.line_break(first))
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            w.write_all(self.line_break(true))?;
        }
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        w.write_all(self.line_break(first))
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// JSON as Salt's json outputter prints it (`indent`, non-ASCII kept).
pub fn json(v: &Value, indent: usize) -> String {
    let mut buf = Vec::new();
    if write_json(&mut buf, v, indent).is_err() {
        return v.to_string();
    }
    String::from_utf8(buf).unwrap_or_else(|_| v.to_string())
}

fn txt(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

/// Python's `repr()` of data (Salt's txt/raw outputters print that).
pub fn python_repr(v: &Value) -> String {
    halite_state::requisite::py_repr(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-write-per-line formatter prints exactly what serde_json's
    /// pretty printer prints, at every indent Salt's `--out-indent` allows.
    #[test]
    fn json_matches_serde_json_pretty_output() {
        let v = serde_json::json!({
            "local": {
                "a": {"changes": {}, "result": true, "list": [], "nested": [[1, 2], {"x": null}],
                      "comment": "quote \" backslash \\ tab \t é ✓", "duration": 0.113},
                "b": [1.5, -2, "s", false, {"deep": {"deeper": [{}]}}]
            }
        });
        for indent in [0, 1, 2, 4, 8] {
            let ind = vec![b' '; indent];
            let mut expected = Vec::new();
            let mut ser = serde_json::Serializer::with_formatter(
                &mut expected,
                serde_json::ser::PrettyFormatter::with_indent(&ind),
            );
            serde::Serialize::serialize(&v, &mut ser).expect("serialize");
            let mut ours = Vec::new();
            write_json(&mut ours, &v, indent).expect("write");
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&expected),
                "indent {indent}"
            );
        }
    }
}
