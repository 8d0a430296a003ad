//! Grains set by hand: Salt's `grains` file in the config directory
//! (`/etc/salt/grains`, here `<config dir>/grains`), read at start as a
//! grain source, and its writers `grains.setval`, `setvals`, `set`,
//! `append`, `remove`, `delval`, `delkey` (salt/modules/grains.py), which
//! the `grains.*` states use.
//!
//! Salt also updates the running minion's grains when it writes the file;
//! halite keeps the values written by this process in an overlay (per
//! grains file) that [`current`] lays over the host's grains, so later
//! calls and states of the same run or daemon see them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use halite_state::{Map, Value};

use crate::exec::grains::traverse;
use crate::exec::{py_str, Args, ExecError};
use crate::Host;

/// Where grains come from: the run's options (for the grains file) and
/// the grains the run started with.
#[derive(Clone, Copy)]
pub struct Src<'a> {
    /// The run's options: where the grains file is.
    pub opts: &'a Value,
    /// The grains the run started with.
    pub grains: &'a Value,
}

impl<'a> Src<'a> {
    /// The grains and options of `host`.
    pub fn of(host: &'a Host) -> Self {
        Src {
            opts: &host.opts,
            grains: &host.grains,
        }
    }
}

/// Salt's default key delimiter.
pub const DELIMITER: &str = ":";

/// Top-level grains written by this process, per grains file: a value, or
/// [`DELETED`] for a key deleted.
static OVERLAY: Mutex<BTreeMap<PathBuf, Map>> = Mutex::new(BTreeMap::new());

/// The grains file: `grains` beside `conf_file`, else in `config_dir`,
/// else in `/etc/halite` (halite's `/etc/salt`).
pub fn grains_file(opts: &Value) -> PathBuf {
    if let Some(conf) = opts.get("conf_file").and_then(Value::as_str) {
        let conf = Path::new(conf);
        if conf.is_dir() {
            return conf.join("grains");
        }
        if let Some(dir) = conf.parent() {
            return dir.join("grains");
        }
    }
    let dir = opts
        .get("config_dir")
        .and_then(Value::as_str)
        .unwrap_or("/etc/halite");
    Path::new(dir).join("grains")
}

/// The mapping in the grains file; empty when there is none.
pub fn read(path: &Path) -> Result<Map, ExecError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => {
            return Err(ExecError::Execution(format!(
                "Unable to read existing grains file {}: {e}",
                path.display()
            )))
        }
    };
    match halite_render::yaml::load(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Ok(Map::new()),
        Err(e) => Err(ExecError::Execution(format!(
            "Unable to read existing grains file {}: {e}; fix its YAML or remove it",
            path.display()
        ))),
    }
}

/// The grains file's values as a grain source at start (Salt's `config`
/// grain): a file with bad YAML is skipped with a warning, as in Salt.
pub fn file_grains(opts: &Value) -> Map {
    let path = grains_file(opts);
    read(&path).unwrap_or_else(|e| {
        tracing::warn!("Bad syntax in grains file, skipping it: {e}");
        Map::new()
    })
}

/// Writes the grains file as Salt does (`safe_dump`, block style, keys
/// sorted) through a temp file, so a reader never sees half of it.
fn write(path: &Path, grains: &Map) -> Result<(), ExecError> {
    let text = halite_render::yaml::dump_outputter(&Value::Object(grains.clone()));
    let failed = |e: std::io::Error| {
        ExecError::Execution(format!(
            "Unable to write to grains file at {}: {e}. Check permissions.",
            path.display()
        ))
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(failed)?;
    let tmp = dir.join(format!(".grains.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)
}

/// The host's grains with what this process wrote laid over them.
pub fn current(src: Src<'_>) -> Value {
    let mut grains = src.grains.clone();
    let path = grains_file(src.opts);
    if let (Ok(overlay), Value::Object(map)) = (OVERLAY.lock(), &mut grains) {
        for (key, value) in overlay.get(&path).into_iter().flatten() {
            if value.as_str() == Some(DELETED) {
                map.remove(key);
            } else {
                map.insert(key.clone(), value.clone());
            }
        }
    }
    grains
}

/// A grain (`a:b` nested) of [`current`], or None when absent.
pub fn lookup(src: Src<'_>, key: &str, delimiter: &str) -> Option<Value> {
    traverse(&current(src), key, delimiter).cloned()
}

/// Salt's `setvals`: sets top-level grains in the grains file (a None value
/// with `destructive` deletes the key) and returns what was given.
pub fn setvals(src: Src<'_>, new: &Map, destructive: bool) -> Result<Value, ExecError> {
    let path = grains_file(src.opts);
    let mut grains = read(&path)?;
    let mut overlay = OVERLAY
        .lock()
        .map_err(|_| ExecError::Execution("grains overlay lock poisoned".into()))?;
    let written = overlay.entry(path.clone()).or_default();
    for (key, value) in new {
        if value.is_null() && destructive {
            grains.remove(key);
            written.insert(key.clone(), Value::from(DELETED));
        } else {
            grains.insert(key.clone(), value.clone());
            written.insert(key.clone(), value.clone());
        }
    }
    write(&path, &grains)?;
    Ok(Value::Object(new.clone()))
}

/// The overlay's marker of a deleted key (not a value a grain can take
/// from YAML by accident: it holds a NUL).
const DELETED: &str = "\0halite-deleted-grain";

/// Salt's `setval`.
pub fn setval(
    src: Src<'_>,
    key: &str,
    value: Value,
    destructive: bool,
) -> Result<Value, ExecError> {
    let mut one = Map::new();
    one.insert(key.to_string(), value);
    setvals(src, &one, destructive)
}

/// What `grains.set` returns: Salt's `{comment, changes, result}`.
#[derive(Debug, Clone, PartialEq)]
pub struct SetResult {
    /// Whether the grain was set.
    pub result: bool,
    /// Salt's comment (empty on success).
    pub comment: String,
    /// The grains changed, Salt's `changes`.
    pub changes: Value,
}

impl SetResult {
    fn fail(comment: String) -> Self {
        SetResult {
            result: false,
            comment,
            changes: Value::Object(Map::new()),
        }
    }

    /// As the mapping Salt returns.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("comment".into(), Value::from(self.comment.clone()));
        m.insert("changes".into(), self.changes.clone());
        m.insert("result".into(), Value::Bool(self.result));
        Value::Object(m)
    }
}

fn is_complex(v: &Value) -> bool {
    v.is_object() || v.is_array()
}

/// Salt's `grains.set`: sets a (nested) grain, refusing to overwrite a list
/// or a dict (or to put one over a value) unless `force`.
pub fn set(
    src: Src<'_>,
    key: &str,
    val: Value,
    force: bool,
    destructive: bool,
    delimiter: &str,
) -> Result<SetResult, ExecError> {
    let existing = lookup(src, key, delimiter);
    if let Some(current) = &existing {
        if *current == val && (!val.is_null() || !destructive) {
            return Ok(SetResult {
                result: true,
                comment: "Grain is already set".into(),
                changes: Value::Object(Map::new()),
            });
        }
    }
    if let Some(current) = existing.as_ref().filter(|c| !c.is_null() && !force) {
        if is_complex(current) {
            return Ok(SetResult::fail(format!(
                "The key '{key}' exists but is a dict or a list. Use 'force=True' to overwrite."
            )));
        }
        if is_complex(&val) {
            return Ok(SetResult::fail(format!(
                "The key '{key}' exists and the given value is a dict or a list. Use 'force=True' to overwrite."
            )));
        }
    }
    let mut value = val;
    let mut key = key.to_string();
    while let Some((parent, rest)) = key.rsplit_once(delimiter) {
        let parent = parent.to_string();
        let mut container = lookup(src, &parent, delimiter).unwrap_or(Value::Object(Map::new()));
        match &mut container {
            Value::Object(map) => {
                if value.is_null() && destructive {
                    map.remove(rest);
                } else {
                    map.insert(rest.to_string(), value.clone());
                }
            }
            Value::Array(list) => {
                let mut updated = false;
                for item in list.iter_mut() {
                    if item.as_str() == Some(rest) {
                        let mut m = Map::new();
                        m.insert(rest.to_string(), value.clone());
                        *item = Value::Object(m);
                        updated = true;
                    } else if let Value::Object(m) = item {
                        if m.contains_key(rest) {
                            m.insert(rest.to_string(), value.clone());
                            updated = true;
                        }
                    }
                }
                if !updated {
                    let mut m = Map::new();
                    m.insert(rest.to_string(), value.clone());
                    list.push(Value::Object(m));
                }
            }
            other if other.as_str() == Some(rest) || force => {
                let mut m = Map::new();
                m.insert(rest.to_string(), value.clone());
                *other = Value::Object(m);
            }
            other => {
                return Ok(SetResult::fail(format!(
                    "The key '{parent}' value is '{}', which is different from the provided key '{rest}'. Use 'force=True' to overwrite.",
                    py_str(other)
                )));
            }
        }
        value = container;
        key = parent;
    }
    let changes = setval(src, &key, value, destructive)?;
    Ok(SetResult {
        result: true,
        comment: String::new(),
        changes,
    })
}

/// Puts `value` at the nested `key` by rebuilding its parents, as Salt's
/// `append`/`remove` do before `setval` of the top key.
fn store_nested(
    src: Src<'_>,
    key: &str,
    mut value: Value,
    delimiter: &str,
    missing_parent: Value,
) -> Result<Value, ExecError> {
    let mut key = key.to_string();
    while let Some((parent, rest)) = key.rsplit_once(delimiter) {
        let parent = parent.to_string();
        let mut container = lookup(src, &parent, delimiter).unwrap_or(missing_parent.clone());
        if let Value::Object(map) = &mut container {
            map.insert(rest.to_string(), value);
        }
        value = container;
        key = parent;
    }
    setval(src, &key, value, false)
}

/// Salt's `grains.append`: adds `val` (each item of a list) to the list
/// grain `key`, creating it; with `convert` a scalar becomes a list.
/// Salt's refusals are returned as strings, as Salt does.
pub fn append(
    src: Src<'_>,
    key: &str,
    val: &Value,
    convert: bool,
    delimiter: &str,
) -> Result<Value, ExecError> {
    let mut grains = lookup(src, key, delimiter).unwrap_or(Value::Array(Vec::new()));
    if convert && !grains.is_array() {
        grains = if grains.is_null() {
            Value::Array(Vec::new())
        } else {
            Value::Array(vec![grains])
        };
    }
    let Value::Array(list) = &mut grains else {
        return Ok(Value::from(format!("The key {key} is not a valid list")));
    };
    if list.contains(val) {
        return Ok(Value::from(format!(
            "The val {} was already in the list {key}",
            py_str(val)
        )));
    }
    match val {
        Value::Array(items) => list.extend(items.iter().cloned()),
        other => list.push(other.clone()),
    }
    store_nested(src, key, grains, delimiter, Value::Object(Map::new()))
}

/// Salt's `grains.remove`: takes `val` out of the list grain `key`.
pub fn remove(src: Src<'_>, key: &str, val: &Value, delimiter: &str) -> Result<Value, ExecError> {
    let mut grains = lookup(src, key, delimiter).unwrap_or(Value::Array(Vec::new()));
    let Value::Array(list) = &mut grains else {
        return Ok(Value::from(format!("The key {key} is not a valid list")));
    };
    let Some(at) = list.iter().position(|v| v == val) else {
        return Ok(Value::from(format!(
            "The val {} was not in the list {key}",
            py_str(val)
        )));
    };
    list.remove(at);
    store_nested(src, key, grains, delimiter, Value::Null)
}

/// The exec functions of this file, as `grains.<fun>`; None for others.
pub fn call(fun: &str, args: &Args, host: &Host) -> Option<Result<Value, ExecError>> {
    let src = Src::of(host);
    let delimiter = || {
        args.get_str(4, "delimiter")
            .unwrap_or_else(|| DELIMITER.into())
    };
    let run = || -> Result<Value, ExecError> {
        match fun {
            "setval" => {
                let key = args.require_str(0, "key", "setval")?;
                let val = required(args, 1, "val", "setval")?;
                setval(src, &key, val, args.get_bool(2, "destructive", false))
            }
            "setvals" => match args.get(0, "grains") {
                Some(Value::Object(map)) => {
                    setvals(src, map, args.get_bool(1, "destructive", false))
                }
                _ => Err(ExecError::Invocation(
                    "setvals grains must be a dictionary.".into(),
                )),
            },
            "set" => {
                let key = args.require_str(0, "key", "set")?;
                let val = args.get(1, "val").cloned().unwrap_or(Value::from(""));
                let force = args.get_bool(2, "force", false);
                let destructive = args.get_bool(3, "destructive", false);
                set(src, &key, val, force, destructive, &delimiter()).map(|r| r.to_value())
            }
            "append" => {
                let key = args.require_str(0, "key", "append")?;
                let val = required(args, 1, "val", "append")?;
                let delim = args
                    .get_str(3, "delimiter")
                    .unwrap_or_else(|| DELIMITER.into());
                append(src, &key, &val, args.get_bool(2, "convert", false), &delim)
            }
            "remove" => {
                let key = args.require_str(0, "key", "remove")?;
                let val = required(args, 1, "val", "remove")?;
                let delim = args
                    .get_str(2, "delimiter")
                    .unwrap_or_else(|| DELIMITER.into());
                remove(src, &key, &val, &delim)
            }
            "delval" => {
                let key = args.require_str(0, "key", "delval")?;
                let destructive = args.get_bool(1, "destructive", false);
                let force = args.get_bool(2, "force", false);
                set(src, &key, Value::Null, force, destructive, DELIMITER).map(|r| r.to_value())
            }
            "delkey" => {
                let key = args.require_str(0, "key", "delkey")?;
                let force = args.get_bool(1, "force", false);
                set(src, &key, Value::Null, force, true, DELIMITER).map(|r| r.to_value())
            }
            _ => Err(ExecError::NotAvailable(format!("grains.{fun}"))),
        }
    };
    FUNCTIONS.contains(&fun).then(run)
}

/// The writer functions [`call`] answers.
pub const FUNCTIONS: [&str; 7] = [
    "setval", "setvals", "set", "append", "remove", "delval", "delkey",
];

fn required(args: &Args, i: usize, key: &str, fun: &str) -> Result<Value, ExecError> {
    args.get(i, key).cloned().ok_or_else(|| {
        ExecError::Invocation(format!(
            "{fun}() missing 1 required positional argument: '{key}'"
        ))
    })
}
