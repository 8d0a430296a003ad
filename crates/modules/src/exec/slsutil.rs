//! Salt's `slsutil` execution module as the CLI and `module.run` reach it:
//! `slsutil.serialize` and `slsutil.deserialize` with Salt's `json` and
//! `yaml` serializers (the same JSON and YAML writers `file.serialize`
//! uses). Templates get `slsutil.merge`/`merge_all` from the renderer.

use halite_render::yaml::{dump_with, DumpOptions, DumpStyle};
use halite_state::Value;
use serde_json::json;

use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "slsutil",
    functions: &[
        ExecFunction::new("serialize", serialize),
        ExecFunction::new("deserialize", deserialize),
    ],
};

fn not_found(name: &str) -> ExecError {
    ExecError::Execution(format!("Serializer '{name}' not found."))
}

/// Salt's `json` serializer: `json.dumps(obj, **kwargs)` (compact, data
/// order, non-ASCII kept as Salt's json wrapper does; `indent`,
/// `sort_keys` and `ensure_ascii` honoured).
fn to_json(obj: &Value, args: &Args) -> String {
    let indent = args
        .kwargs
        .get("indent")
        .and_then(Value::as_u64)
        .map(|i| i as usize);
    let sort_keys = args.get_bool(usize::MAX, "sort_keys", false);
    let ensure_ascii = args.get_bool(usize::MAX, "ensure_ascii", false);
    halite_salt_rules::pyfmt::json_dumps(obj, sort_keys, indent, ensure_ascii)
}

/// Salt's `yaml` serializer: `yaml.dump(obj, default_flow_style=None)`
/// (collections of scalars in flow style), stripped of the final newline
/// and document end marker.
fn to_yaml(obj: &Value, args: &Args) -> String {
    let style = match args.kwargs.get("default_flow_style") {
        Some(Value::Bool(true)) => DumpStyle::Flow,
        Some(Value::Bool(false)) => DumpStyle::Block,
        _ => DumpStyle::Leaves,
    };
    let out = dump_with(
        obj,
        DumpOptions {
            style,
            sort_keys: true,
        },
    );
    let out = out.strip_suffix("\n...\n").unwrap_or(&out);
    out.trim_end_matches('\n').to_string()
}

/// `slsutil.serialize <serializer> [obj] [**kwargs]`: the data as text.
fn serialize(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "serializer", "serialize")?;
    let obj = args.get(1, "obj").cloned().unwrap_or(Value::Null);
    match name.as_str() {
        "json" => Ok(json!(to_json(&obj, args))),
        "yaml" => Ok(json!(to_yaml(&obj, args))),
        _ => Err(not_found(&name)),
    }
}

/// `slsutil.deserialize <serializer> <stream_or_string>`: text as data.
fn deserialize(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "serializer", "deserialize")?;
    let text = args.get(1, "stream_or_string").map(py_str).ok_or_else(|| {
        ExecError::Invocation(
            "deserialize() missing 1 required positional argument: 'stream_or_string'".into(),
        )
    })?;
    match name.as_str() {
        "json" => serde_json::from_str(&text)
            .map_err(|e| ExecError::Execution(format!("Could not deserialize json: {e}"))),
        "yaml" => halite_render::yaml::load(&text)
            .map_err(|e| ExecError::Execution(format!("Could not deserialize yaml: {e}"))),
        _ => Err(not_found(&name)),
    }
}
