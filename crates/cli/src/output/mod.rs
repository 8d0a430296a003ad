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

/// Writes `{"local": container}` exactly as [`write_json`] would, where
/// the container's items come in `parts` (map entries when `is_map`, else
/// list items), each serializing as the map or list of its own items.
/// The first part is written by this thread while the others are
/// serialized into memory on threads of their own, then written after it:
/// at 10 000 states printing is a sixth of a run, and this spreads it
/// over the machine's cores.
pub fn write_local_parts<W: std::io::Write, P: serde::Serialize + Sync>(
    mut out: W,
    is_map: bool,
    parts: &[P],
    indent: usize,
) -> std::io::Result<()> {
    let pad = " ".repeat(indent);
    let (open, close) = if is_map { ("{", "}") } else { ("[", "]") };
    write!(out, "{{\n{pad}\"local\": {open}")?;
    let mut any = false;
    std::thread::scope(|scope| -> std::io::Result<()> {
        let workers: Vec<_> = parts
            .iter()
            .skip(1)
            .map(|part| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || part_in_memory(part, indent))
                    .map_err(|_| part)
            })
            .collect();
        if let Some(part) = parts.first() {
            any = write_items(&mut out, part, indent)?;
        }
        for worker in workers {
            // A part whose thread could not start is serialized here.
            let text = match worker {
                Ok(thread) => thread.join().unwrap_or_else(|_| {
                    Err(std::io::Error::other("a JSON writer thread failed"))
                })?,
                Err(part) => part_in_memory(part, indent)?,
            };
            if text.0.is_empty() {
                continue;
            }
            if any {
                out.write_all(b",")?;
            }
            for chunk in &text.0 {
                out.write_all(chunk)?;
            }
            any = true;
        }
        Ok(())
    })?;
    if any {
        write!(out, "\n{pad}")?;
    }
    write!(out, "{close}\n}}")
}

/// A part's items (see [`write_items`]) kept in memory.
fn part_in_memory<P: serde::Serialize>(part: &P, indent: usize) -> std::io::Result<Chunks> {
    let mut text = Chunks::default();
    write_items(&mut text, part, indent)?;
    Ok(text)
}

/// Writes a part's items as they stand inside `{"local": ...}`: the
/// part's container text without its opening bracket and its closing line
/// break and bracket. Whether it wrote anything (an empty part writes
/// nothing).
fn write_items<W: std::io::Write, P: serde::Serialize>(
    out: W,
    part: &P,
    indent: usize,
) -> std::io::Result<bool> {
    let mut items = std::io::BufWriter::with_capacity(
        1 << 16,
        Trimmed {
            out,
            skip: 1,
            hold: indent + 2,
            held: Vec::new(),
            wrote: false,
        },
    );
    let mut formatter = IndentFormatter::new(indent);
    formatter.level = 1;
    let mut ser = serde_json::Serializer::with_formatter(&mut items, formatter);
    part.serialize(&mut ser).map_err(std::io::Error::other)?;
    std::io::Write::flush(&mut items)?;
    let trimmed = items.into_inner().map_err(|e| e.into_error())?;
    Ok(trimmed.wrote)
}

/// Text kept in memory as a list of pieces: it grows without copying
/// what it holds (a part of a large return is megabytes).
#[derive(Default)]
struct Chunks(Vec<Vec<u8>>);

impl std::io::Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        const CHUNK: usize = 1 << 18;
        match self.0.last_mut() {
            Some(last) if last.capacity() - last.len() >= buf.len() => last.extend_from_slice(buf),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK.max(buf.len()));
                chunk.extend_from_slice(buf);
                self.0.push(chunk);
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Passes on what is written to it but the first `skip` bytes and the
/// last `hold` (kept back until more comes, dropped at the end).
struct Trimmed<W> {
    out: W,
    skip: usize,
    hold: usize,
    held: Vec<u8>,
    wrote: bool,
}

impl<W: std::io::Write> std::io::Write for Trimmed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let skipped = self.skip.min(buf.len());
        self.skip -= skipped;
        self.held.extend_from_slice(&buf[skipped..]);
        if self.held.len() > self.hold {
            let pass = self.held.len() - self.hold;
            self.out.write_all(&self.held[..pass])?;
            self.held.drain(..pass);
            self.wrote = true;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
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

    /// A container printed in parts on several threads is the same text
    /// as printed whole: maps and lists, any number of parts (more parts
    /// than items, empty parts, nothing at all), every indent.
    #[test]
    fn local_parts_join_to_the_whole_text() {
        let records: Vec<(String, Value)> = (0..7)
            .map(|i| {
                let rec = serde_json::json!({"result": i % 2 == 0, "changes": {}, "list": [i, {"x": []}]});
                (format!("test_|-s{i}_|-s{i}_|-nop"), rec)
            })
            .collect();
        for indent in [0, 2, 4] {
            for n in [1, 2, 3, 7, 9] {
                for len in [0, 1, 7] {
                    let items = &records[..len];
                    let size = len.div_ceil(n).max(1);
                    let map_parts: Vec<serde_json::Map<String, Value>> = items
                        .chunks(size)
                        .map(|c| c.iter().cloned().collect())
                        .collect();
                    let whole: serde_json::Map<String, Value> = items.iter().cloned().collect();
                    let mut ours = Vec::new();
                    write_local_parts(&mut ours, true, &map_parts, indent).expect("write");
                    let mut expected = Vec::new();
                    write_json(&mut expected, &serde_json::json!({"local": whole}), indent)
                        .expect("write");
                    assert_eq!(
                        String::from_utf8_lossy(&ours),
                        String::from_utf8_lossy(&expected),
                        "map: indent {indent}, {n} parts, {len} items"
                    );

                    let list_parts: Vec<Vec<Value>> = items
                        .chunks(size)
                        .map(|c| c.iter().map(|(_, v)| v.clone()).collect())
                        .collect();
                    let whole: Vec<Value> = items.iter().map(|(_, v)| v.clone()).collect();
                    let mut ours = Vec::new();
                    write_local_parts(&mut ours, false, &list_parts, indent).expect("write");
                    let mut expected = Vec::new();
                    write_json(&mut expected, &serde_json::json!({"local": whole}), indent)
                        .expect("write");
                    assert_eq!(
                        String::from_utf8_lossy(&ours),
                        String::from_utf8_lossy(&expected),
                        "list: indent {indent}, {n} parts, {len} items"
                    );
                }
            }
        }
    }
}
