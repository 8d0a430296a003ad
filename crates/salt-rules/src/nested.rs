//! Salt's `nested` outputter: indented keys, `----------` between maps,
//! `|_` for lists of structures.
//!
//! Shared: the CLI prints returns with it, and states that quote their
//! changes in a comment as Salt does (`firewalld.present` in test mode)
//! render them with it too.

use serde_json::Value;

use crate::colors::Colors;

/// Renders `v` starting at `indent` spaces; `retcode` other than 0 turns
/// lists and keys red, as Salt's outputter does for a failed job.
pub fn render(v: &Value, indent: usize, colors: &Colors, retcode: i32) -> String {
    let mut out = Vec::new();
    display(v, indent, "", &mut out, colors, retcode);
    out.join("\n")
}

fn line(indent: usize, color: &str, prefix: &str, msg: &str, suffix: &str, endc: &str) -> String {
    format!("{}{color}{prefix}{msg}{endc}{suffix}", " ".repeat(indent))
}

fn display(
    v: &Value,
    indent: usize,
    prefix: &str,
    out: &mut Vec<String>,
    c: &Colors,
    retcode: i32,
) {
    match v {
        Value::Null => out.push(line(indent, c.light_yellow, prefix, "None", "", c.endc)),
        Value::Bool(b) => out.push(line(
            indent,
            c.light_yellow,
            prefix,
            if *b { "True" } else { "False" },
            "",
            c.endc,
        )),
        Value::Number(n) => out.push(line(
            indent,
            c.light_yellow,
            prefix,
            &n.to_string(),
            "",
            c.endc,
        )),
        Value::String(s) => {
            for (i, l) in s.lines().enumerate() {
                let p = if i == 0 {
                    prefix.to_string()
                } else {
                    " ".repeat(prefix.len())
                };
                out.push(line(indent, c.green, &p, l, "", c.endc));
            }
        }
        Value::Array(a) => {
            let color = if retcode != 0 { c.red } else { c.green };
            for item in a {
                if item.is_array() || item.is_object() {
                    out.push(line(indent, color, "", "|_", "", c.endc));
                    let p = if item.is_object() { "" } else { "- " };
                    display(item, indent + 2, p, out, c, retcode);
                } else {
                    display(item, indent, "- ", out, c, retcode);
                }
            }
        }
        Value::Object(m) => {
            let color = if retcode != 0 { c.red } else { c.cyan };
            if indent > 0 {
                out.push(line(indent, color, "", "----------", "", c.endc));
            }
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                out.push(line(indent, color, prefix, k, ":", c.endc));
                display(&m[k], indent + 4, "", out, c, retcode);
            }
        }
    }
}
