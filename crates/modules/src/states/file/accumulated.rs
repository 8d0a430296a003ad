//! `file.accumulated`: charges text for a later `file.managed` (as the
//! template variable `accumulator`) or `file.blockreplace` (appended to
//! its content) of the same file in the same run.

use halite_state::{Map, StateCall, StateError, StateResult, Value};

use super::error;

/// The `require_in` and `watch_in` entries of the state, as Salt's
/// `__low__.get("require_in", []) + __low__.get("watch_in", [])`.
fn requisite_ins(call: &StateCall<'_>) -> Vec<Value> {
    let mut deps = call.arg_list("require_in");
    deps.extend(call.arg_list("watch_in"));
    deps
}

/// `file.accumulated`: see Salt's documentation (`name`, `filename`, `text`).
pub fn accumulated(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.accumulated");
    }
    let filename = call.require_str("filename")?;
    let Some(text) = call.arg("text") else {
        if call.chunk.contains("text") {
            return error(ret, "No text supplied for accumulator");
        }
        return Err(StateError::MissingArg(
            "text".into(),
            "file.accumulated".into(),
        ));
    };
    let deps = requisite_ins(call);
    // Salt's `"file" in x`: a key of a dict, a substring of a string.
    let targets_file = deps.iter().any(|d| match d {
        Value::Object(m) => m.contains_key("file"),
        Value::String(s) => s.contains("file"),
        _ => false,
    });
    if !targets_file {
        return error(
            ret,
            format!(
                "Orphaned accumulator {name} in {}:{}",
                call.chunk.sls(),
                call.chunk.id()
            ),
        );
    }
    let texts = match text {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    let dep_targets: Vec<Value> = deps
        .iter()
        .flat_map(|d| match d {
            Value::Object(m) => m.values().cloned().collect::<Vec<_>>(),
            Value::String(s) => s.chars().map(|c| Value::from(c.to_string())).collect(),
            other => vec![other.clone()],
        })
        .collect();
    let Some(store) = call.env.accumulators() else {
        tracing::warn!("file.accumulated {name} ran outside a state run: nothing to charge");
        return Ok(ret);
    };
    if store.charge(&filename, &name, &texts, &dep_targets) {
        ret.comment = format!("Accumulator {name} for file {filename} was charged by text");
    }
    Ok(ret)
}

/// The accumulators charged for `filename` as `file.managed` gives them
/// to its template: `{accumulator name: [texts]}`; `None` when none.
pub(crate) fn template_value(call: &StateCall<'_>, filename: &str) -> Option<Value> {
    let accs = call.env.accumulators()?.for_file(filename);
    if accs.is_empty() {
        return None;
    }
    let mut m = Map::new();
    for (name, acc) in accs {
        m.insert(name, Value::Array(acc.texts));
    }
    Some(Value::Object(m))
}

/// `content` with the accumulators of `filename` appended line by line,
/// as `file.blockreplace` does: only those whose `require_in`/`watch_in`
/// named this state's ID when there are such, else all of them.
pub(crate) fn extend_block_content(call: &StateCall<'_>, filename: &str, content: &mut String) {
    let Some(store) = call.env.accumulators() else {
        return;
    };
    let accs = store.for_file(filename);
    let id = Value::from(call.chunk.id());
    let mut chosen: Vec<_> = accs.values().filter(|a| a.deps.contains(&id)).collect();
    if chosen.is_empty() {
        chosen = accs.values().collect();
    }
    for acc in chosen {
        for line in &acc.texts {
            let line = halite_salt_rules::pyfmt::python_str(line);
            if content.is_empty() {
                *content = line;
            } else {
                content.push('\n');
                content.push_str(&line);
            }
        }
    }
}
