//! YAML as Salt loads it (YAML 1.1 booleans, decimal `0644`, duplicate keys
//! are errors, insertion order kept) and dumps it (PyYAML's `safe_dump`).

mod dump;
mod fast;
mod load;
mod reindent;
pub(crate) mod scalar;
pub mod yamlex;

use crate::Value;

pub use dump::{dump_with, DumpOptions, DumpStyle};

/// A YAML document that Salt would refuse. The message is shaped like
/// PyYAML's (context, mark, problem, mark) so users recognise it.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    /// The error as PyYAML words it (with line and column).
    pub message: String,
    /// 1-based line of the problem, when known.
    pub line: Option<usize>,
}

/// Loads one YAML document with Salt's rules. An empty document is `Null`.
///
/// Text that only libyaml's leniency accepts (flow collections or quoted
/// scalars continued on less-indented lines, as PyYAML itself writes them) is
/// re-indented and loaded again, so it loads as it does in Salt.
pub fn load(text: &str) -> Result<Value, YamlError> {
    if let Some(value) = fast::load(text) {
        return Ok(value);
    }
    match load::load(text) {
        Err(error) => match reindent::reindent_continuations(text) {
            Some(fixed) => load::load(&fixed).map_err(|_| error),
            None => Err(error),
        },
        ok => ok,
    }
}

/// Dumps data as Salt's `yaml` Jinja filter does (`safe_dump` with keys
/// sorted): flow style when `flow` is true (the filter's default), block
/// style for `yaml(False)`. Ends with a newline, as PyYAML's output does.
pub fn dump(value: &Value, flow: bool) -> String {
    let style = if flow {
        DumpStyle::Flow
    } else {
        DumpStyle::Block
    };
    dump_with(
        value,
        DumpOptions {
            style,
            sort_keys: true,
        },
    )
}

/// Dumps data as Salt's `yaml` outputter does (`--out yaml`):
/// `safe_dump(data, default_flow_style=False)`, block style with keys sorted
/// (PyYAML sorts plain dicts, and Salt's return data are plain dicts).
pub fn dump_outputter(value: &Value) -> String {
    dump_with(
        value,
        DumpOptions {
            style: DumpStyle::Block,
            sort_keys: true,
        },
    )
}

/// Block style with keys in the data's order. Salt's `--out yaml` sorts keys;
/// use [`dump_outputter`] to match it. Kept for callers that want data order.
pub fn dump_block_ordered(value: &Value) -> String {
    dump_with(
        value,
        DumpOptions {
            style: DumpStyle::Block,
            sort_keys: false,
        },
    )
}
