//! The `salt` template variable: `salt['mod.fun'](...)` and
//! `salt.mod.fun(...)`. Salt's pure lookups (`pillar.get`, `grains.filter_by`,
//! `config.get`, `defaults.merge`, `slsutil.merge`, `log.*`, `file.join`...)
//! are answered here from the render context, so a master can render from
//! its cache; every other function goes to [`crate::SaltFunctions`].

use std::fmt;
use std::sync::{Arc, Mutex};

use minijinja::value::{Object, ObjectRepr};
use minijinja::{Error, ErrorKind, State, Value as MjValue};

use super::args::CallArgs;
use super::data::{deepcopy, fnmatch, is_list, is_mapping, lookup_key, traverse, update};
use super::objects::{from_template, pairs_of, python_str, to_template, PyDict, PyList};
use crate::memo::{Read, ReadLog};
use crate::SaltFunctions;

/// The data pure functions read: the same objects the template sees as
/// `grains`, `pillar` and `opts`, so `pillar.get` returns shared objects.
pub struct SaltData {
    pub grains: MjValue,
    pub pillar: MjValue,
    pub opts: MjValue,
    pub functions: Arc<dyn SaltFunctions>,
    /// The message of the last forwarded call that failed, so the render
    /// error can say "Problem running salt function" as Salt does.
    pub last_failure: Mutex<Option<String>>,
    /// Where the render records the functions it asks for and calls.
    pub log: Option<Arc<ReadLog>>,
}

/// Functions answered inside this crate.
const PURE_FUNCTIONS: &[&str] = &[
    "pillar.get",
    "pillar.fetch",
    "pillar.items",
    "pillar.raw",
    "pillar.item",
    "grains.get",
    "grains.items",
    "grains.item",
    "grains.filter_by",
    "grains.has_value",
    "config.get",
    "config.option",
    "defaults.merge",
    "defaults.deepcopy",
    "slsutil.merge",
    "slsutil.merge_all",
    "log.debug",
    "log.info",
    "log.warning",
    "log.error",
    "log.critical",
    "log.exception",
    "file.join",
    "file.dirname",
    "file.basename",
    "file.normpath",
];

impl SaltData {
    /// Whether `fun` exists (answered here or by the host).
    pub fn has(&self, fun: &str) -> bool {
        if PURE_FUNCTIONS.contains(&fun) {
            return true;
        }
        let has = self.functions.has(fun);
        if let Some(log) = &self.log {
            log.note(Read::Has(fun.to_string(), has));
        }
        has
    }

    /// The options `config.get`/`config.option` read: the functions'
    /// own (the minion's, on a master) or the template's `opts`.
    fn config_opts(&self) -> MjValue {
        let own = self.functions.opts();
        if let Some(log) = &self.log {
            log.note(Read::MinionOpts(own.clone()));
        }
        own.map(|o| to_template(&o))
            .unwrap_or_else(|| self.opts.clone())
    }

    /// Calls `fun` with template arguments.
    pub fn call(&self, fun: &str, args: &[MjValue]) -> Result<MjValue, Error> {
        let call = CallArgs::new(fun, args)?;
        if PURE_FUNCTIONS.contains(&fun) {
            return self.call_pure(fun, &call);
        }
        if crate::cache::note_opaque() {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                crate::PROBE_STOPPED,
            ));
        }
        let positional: Vec<crate::Value> = call.positional().iter().map(from_template).collect();
        let keywords: crate::Map = call
            .keywords()
            .iter()
            .map(|(k, v)| (k.clone(), from_template(v)))
            .collect();
        let result = self.functions.call(fun, &positional, &keywords);
        if let Some(log) = &self.log {
            match &result {
                Ok(value) if self.functions.replayable(fun) => log.note(Read::Call {
                    fun: fun.to_string(),
                    args: positional,
                    kwargs: keywords,
                    result: value.clone(),
                }),
                _ => log.volatile(),
            }
        }
        match result {
            Ok(result) => Ok(to_template(&result)),
            Err(message) => {
                if let Ok(mut slot) = self.last_failure.lock() {
                    *slot = Some(message.clone());
                }
                Err(Error::new(ErrorKind::InvalidOperation, message))
            }
        }
    }

    fn call_pure(&self, fun: &str, call: &CallArgs) -> Result<MjValue, Error> {
        match fun {
            "pillar.get" | "pillar.fetch" => {
                Ok(unmasked_or_serial(pillar_get(&self.pillar, call), call, 7))
            }
            "pillar.items" => Ok(unmasked_or_serial(self.pillar.clone(), call, usize::MAX)),
            "pillar.raw" => Ok(unmasked_or_serial(pillar_raw(&self.pillar, call), call, 1)),
            "pillar.item" => Ok(unmasked_or_serial(
                item_of(&self.pillar, call),
                call,
                usize::MAX,
            )),
            "grains.get" => {
                let key = call.text(0, "key", "");
                let default = call.get(1, "default").unwrap_or_else(|| MjValue::from(""));
                Ok(traverse(
                    &self.grains,
                    &key,
                    default,
                    &call.text(2, "delimiter", ":"),
                ))
            }
            "grains.items" => Ok(self.grains.clone()),
            "grains.item" => Ok(item_of(&self.grains, call)),
            "grains.has_value" => {
                let key = call.text(0, "key", "");
                let marker = MjValue::from("_|-");
                let found = traverse(&self.grains, &key, marker.clone(), ":");
                Ok(MjValue::from(found != marker && found.is_true()))
            }
            "grains.filter_by" => filter_by(&self.grains, call),
            "config.get" => Ok(super::config::get(
                &self.config_opts(),
                &self.grains,
                &self.pillar,
                call,
            )),
            "config.option" => Ok(super::config::option(
                &self.config_opts(),
                &self.grains,
                &self.pillar,
                call,
            )),
            "defaults.merge" => {
                let dest = call.require(0, "dest")?;
                let src = call
                    .get(1, "src")
                    .filter(|v| !v.is_none())
                    .unwrap_or_else(|| PyDict::new_value(Default::default()));
                let merge_lists = call.flag(2, "merge_lists", false);
                let in_place = call.flag(3, "in_place", true);
                if dest.is_none() {
                    if in_place {
                        return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            "Can't perform in-place merge into NoneType",
                        ));
                    }
                    return update(&PyDict::new_value(Default::default()), &src, merge_lists);
                }
                let target = if in_place { dest } else { deepcopy(&dest) };
                update(&target, &src, merge_lists)
            }
            "defaults.deepcopy" => Ok(deepcopy(&call.require(0, "source")?)),
            "slsutil.merge" => {
                let a = call.require(0, "obj_a")?;
                let b = call.require(1, "obj_b")?;
                merge_strategy(
                    &a,
                    &b,
                    &call.text(2, "strategy", "smart"),
                    call.flag(4, "merge_lists", false),
                )
            }
            "slsutil.merge_all" => {
                let list = call.require(0, "lst")?;
                let strategy = call.text(1, "strategy", "smart");
                let merge_lists = call.flag(3, "merge_lists", false);
                let mut merged = PyDict::new_value(Default::default());
                for item in list.try_iter()? {
                    merged = merge_strategy(&merged, &item, &strategy, merge_lists)?;
                }
                Ok(merged)
            }
            "file.join" => {
                let mut joined = String::new();
                for part in call.positional() {
                    let part = python_str(part);
                    if part.starts_with('/') {
                        joined = part;
                    } else if joined.is_empty() || joined.ends_with('/') {
                        joined.push_str(&part);
                    } else {
                        joined.push('/');
                        joined.push_str(&part);
                    }
                }
                Ok(MjValue::from(joined))
            }
            "file.dirname" => {
                // os.path.dirname: keep up to the last '/', then drop trailing
                // slashes unless the head is only slashes.
                let path = call.text(0, "path", "");
                let cut = path.rfind('/').map_or(0, |at| at + 1);
                let head = &path[..cut];
                let head = if head.chars().any(|c| c != '/') {
                    head.trim_end_matches('/')
                } else {
                    head
                };
                Ok(MjValue::from(head))
            }
            "file.basename" => {
                let path = call.text(0, "path", "");
                Ok(MjValue::from(path.rsplit('/').next().unwrap_or_default()))
            }
            "file.normpath" => Ok(MjValue::from(normpath(&call.text(0, "path", "")))),
            _ if fun.starts_with("log.") => {
                // A log line is an effect: a reused render would not write it.
                if let Some(log) = &self.log {
                    log.volatile();
                }
                let message = call
                    .positional()
                    .iter()
                    .map(python_str)
                    .collect::<Vec<_>>()
                    .join(" ");
                match fun {
                    "log.debug" => {
                        tracing::debug!(target: "halite_render::template", "{message}")
                    }
                    "log.info" => tracing::info!(target: "halite_render::template", "{message}"),
                    "log.warning" => {
                        tracing::warn!(target: "halite_render::template", "{message}")
                    }
                    _ => tracing::error!(target: "halite_render::template", "{message}"),
                }
                // Salt's log module returns True.
                Ok(MjValue::from(true))
            }
            _ => Err(Error::new(
                ErrorKind::UnknownFunction,
                format!("'{fun}' is not available"),
            )),
        }
    }
}

/// `os.path.normpath` for `/`-separated paths.
pub(crate) fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// `pillar.get(key, default='', merge=False, merge_nested_lists=None, delimiter=':')`.
fn pillar_get(pillar: &MjValue, call: &CallArgs) -> MjValue {
    let key = call.text(0, "key", "");
    let default = call.get(1, "default").unwrap_or_else(|| MjValue::from(""));
    let merge = call.flag(2, "merge", false);
    let merge_lists = call.flag(3, "merge_nested_lists", false);
    let delimiter = call.text(4, "delimiter", ":");
    if merge {
        if is_mapping(&default) {
            let found = traverse(
                pillar,
                &key,
                PyDict::new_value(Default::default()),
                &delimiter,
            );
            if is_mapping(&found) {
                if let Ok(merged) = update(&deepcopy(&default), &found, merge_lists) {
                    return merged;
                }
            } else {
                tracing::error!("pillar.get: Default is a dict, but the returned pillar value is not. Merge will be skipped.");
            }
        } else if is_list(&default) {
            let found = traverse(pillar, &key, PyList::new_value(Vec::new()), &delimiter);
            if is_list(&found) {
                let mut merged: Vec<MjValue> = deepcopy(&default)
                    .try_iter()
                    .map(|i| i.collect())
                    .unwrap_or_default();
                for item in found
                    .try_iter()
                    .map(|i| i.collect::<Vec<_>>())
                    .unwrap_or_default()
                {
                    if !merged.contains(&item) {
                        merged.push(item);
                    }
                }
                return PyList::new_value(merged);
            }
            tracing::error!("pillar.get: Default is a list, but the returned pillar value is not. Merge will be skipped.");
        }
    }
    traverse(pillar, &key, default, &delimiter)
}

/// What a template's `pillar.*` call returns for its `unmask` argument
/// (positional at `index`, or keyword): Salt renders templates with pillar
/// masking off, so an absent or `None` `unmask` gives the plain value, and
/// so does a true one; a false one (`unmask=False`) gives Salt's `serial`
/// of it, every truthy leaf `**********`, as the module returns outside a
/// template.
fn unmasked_or_serial(value: MjValue, call: &CallArgs, index: usize) -> MjValue {
    match call.get(index, "unmask") {
        Some(flag) if !flag.is_none() && !flag.is_undefined() && !flag.is_true() => {
            to_template(&halite_salt_rules::secret::serial(&from_template(&value)))
        }
        _ => value,
    }
}

/// `pillar.raw(key=None)`: the whole pillar, or with a `key` its
/// top-level value (`{}` when absent; no nested `a:b` lookup).
fn pillar_raw(pillar: &MjValue, call: &CallArgs) -> MjValue {
    match call.get(0, "key") {
        Some(key) if key.is_true() => {
            lookup_key(pillar, &key).unwrap_or_else(|| PyDict::new_value(Default::default()))
        }
        _ => pillar.clone(),
    }
}

/// `pillar.item` / `grains.item`: a dict of each requested key.
fn item_of(data: &MjValue, call: &CallArgs) -> MjValue {
    let default = call
        .keywords()
        .get("default")
        .cloned()
        .unwrap_or_else(|| MjValue::from(""));
    let delimiter = call
        .keywords()
        .get("delimiter")
        .map(python_str)
        .unwrap_or_else(|| ":".to_string());
    let result = PyDict::default();
    for key in call.positional() {
        let key = python_str(key);
        result.insert(
            MjValue::from(key.as_str()),
            traverse(data, &key, default.clone(), &delimiter),
        );
    }
    MjValue::from_object(result)
}

/// Salt's `grains.filter_by`.
fn filter_by(grains: &MjValue, call: &CallArgs) -> Result<MjValue, Error> {
    let lookup = call.require(0, "lookup_dict")?;
    let grain = call.text(1, "grain", "os_family");
    let merge = call.get(2, "merge").filter(|v| !v.is_none() && v.is_true());
    let default_key = call.text(3, "default", "default");
    let base = call
        .get(4, "base")
        .filter(|v| !v.is_none())
        .map(|v| python_str(&v));
    let entries = pairs_of(&lookup)?;
    let found = traverse(grains, &grain, PyList::new_value(Vec::new()), ":");
    let candidates: Vec<MjValue> = if is_list(&found) {
        found.try_iter()?.collect()
    } else {
        vec![found]
    };
    let mut result: Option<MjValue> = None;
    'outer: for each in &candidates {
        let each_text = python_str(each);
        for (key, value) in &entries {
            if fnmatch(&each_text, &python_str(key)) {
                result = Some(value.clone());
                break 'outer;
            }
        }
    }
    // Salt stops at the first match, even when its value is None.
    let mut result = result.filter(|v| !v.is_none());
    if result.is_none() {
        result = lookup_key(&lookup, &MjValue::from(default_key.as_str())).filter(|v| !v.is_none());
    }
    if let Some(base) = base {
        if let Some(base_values) = lookup_key(&lookup, &MjValue::from(base.as_str())) {
            match &result {
                None => result = Some(base_values),
                Some(current) if is_mapping(&base_values) => {
                    if !is_mapping(current) {
                        return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            "filter_by default and look-up values must both be dictionaries.",
                        ));
                    }
                    result = Some(update(&deepcopy(&base_values), current, false)?);
                }
                Some(_) => {}
            }
        }
    }
    if let Some(merge) = merge {
        if !is_mapping(&merge) {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "filter_by merge argument must be a dictionary.",
            ));
        }
        result = Some(match result {
            None => merge,
            Some(current) => update(&current, &deepcopy(&merge), false)?,
        });
    }
    Ok(result.unwrap_or_else(|| MjValue::from(())))
}

/// `salt.utils.dictupdate.merge` with its strategies.
fn merge_strategy(
    a: &MjValue,
    b: &MjValue,
    strategy: &str,
    merge_lists: bool,
) -> Result<MjValue, Error> {
    match strategy {
        "list" => {
            let result = PyDict::default();
            for (key, value) in pairs_of(a)? {
                match lookup_key(b, &key) {
                    Some(other) => result.insert(key, PyList::new_value(vec![value, other])),
                    None => result.insert(key, value),
                }
            }
            Ok(MjValue::from_object(result))
        }
        "overwrite" => {
            if let Some(dict) = a.downcast_object_ref::<PyDict>() {
                for (key, value) in pairs_of(b)? {
                    if dict.get(&key).is_some() {
                        dict.insert(key, value);
                    }
                }
            }
            update(&deepcopy(a), b, merge_lists)
        }
        "none" => update(&deepcopy(a), b, false),
        "smart" | "recurse" | "aggregate" => update(&deepcopy(a), b, merge_lists),
        other => {
            tracing::warn!("Unknown merging strategy '{other}', fallback to recurse");
            update(&deepcopy(a), b, false)
        }
    }
}

/// The `salt` variable itself.
pub struct SaltObject {
    pub data: Arc<SaltData>,
}

/// `salt.pillar`: a module namespace for attribute-style calls.
struct SaltModule {
    data: Arc<SaltData>,
    module: String,
}

/// One callable Salt function.
struct SaltFunction {
    data: Arc<SaltData>,
    name: String,
}

impl fmt::Debug for SaltObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<salt loader>")
    }
}

impl fmt::Debug for SaltModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<salt module {}>", self.module)
    }
}

impl fmt::Debug for SaltFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<function {}>", self.name)
    }
}

impl Object for SaltObject {
    /// A mapping, as Salt's loader is: `'mod.fun' in salt` asks
    /// [`SaltObject::get_value`], so a formula's test for a module that
    /// is absent here (`'postgres.user_create' in salt`) is false, as in
    /// Salt, and true for one that is present.
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    /// Printed as before (not as an empty mapping: it is not enumerated).
    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_ref(), f)
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let name = key.as_str()?;
        if name.contains('.') {
            self.data.has(name).then(|| {
                MjValue::from_object(SaltFunction {
                    data: self.data.clone(),
                    name: name.to_string(),
                })
            })
        } else {
            Some(MjValue::from_object(SaltModule {
                data: self.data.clone(),
                module: name.to_string(),
            }))
        }
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[MjValue],
    ) -> Result<MjValue, Error> {
        // `salt.get('pillar.get')` style lookups are rare; treat as item access.
        if method == "get" {
            let name = args.first().and_then(|v| v.as_str()).unwrap_or_default();
            return Ok(self
                .get_value(&MjValue::from(name))
                .unwrap_or_else(|| args.get(1).cloned().unwrap_or_default()));
        }
        Err(Error::from(ErrorKind::UnknownMethod))
    }
}

impl Object for SaltModule {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let name = format!("{}.{}", self.module, key.as_str()?);
        self.data.has(&name).then(|| {
            MjValue::from_object(SaltFunction {
                data: self.data.clone(),
                name,
            })
        })
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[MjValue],
    ) -> Result<MjValue, Error> {
        let name = format!("{}.{method}", self.module);
        if self.data.has(&name) {
            self.data.call(&name, args)
        } else {
            Err(Error::new(
                ErrorKind::UnknownMethod,
                format!("'{name}' is not available"),
            ))
        }
    }
}

impl Object for SaltFunction {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn call(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        args: &[MjValue],
    ) -> Result<MjValue, Error> {
        self.data.call(&self.name, args)
    }
}
