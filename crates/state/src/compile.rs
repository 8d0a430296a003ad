//! From high data to ordered low chunks: `extend`, structural checks, the
//! `_in` requisites and `use`, `exclude`, then one chunk per state function
//! (`names` expanded), as Salt's `State.call_high` prepares them.

use std::cell::Cell;

use indexmap::IndexMap;

use crate::chunk::LowChunk;
use crate::graph::{has_requisites, ChunkKeys, Graph};
use crate::origins::StringOrigins;
use crate::requisite::{py_repr, py_str, REQUISITE_KEYWORDS};
use crate::value::{Map, Value};
use halite_perf::pipeline::{fold_on_helper, piece_count, split_vec};
use halite_salt_rules::fnmatch::fnmatch;

fn first_key(v: &Value) -> Option<&str> {
    v.as_object()
        .and_then(|m| m.keys().next())
        .map(String::as_str)
}

fn body_sls(body: &Value) -> String {
    SlsName(body).to_string()
}

/// An ID body's SLS as Salt prints it in messages (`None` when unknown).
struct SlsName<'a>(&'a Value);

impl std::fmt::Display for SlsName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.get("__sls__") {
            Some(v) => f.write_str(&py_str(v)),
            None => f.write_str("None"),
        }
    }
}

/// Salt's `find_name`: the IDs an `extend` or requisite-in names.
fn find_name(name: &str, state: &str, high: &Map, strict: bool) -> Vec<(String, String)> {
    let mut ext_id = Vec::new();
    let check2 = !strict
        || high
            .get(name)
            .and_then(Value::as_object)
            .is_some_and(|b| b.contains_key(state));
    if high.get(name).is_some() && check2 {
        ext_id.push((name.to_string(), state.to_string()));
    } else if state == "sls" {
        for (nid, item) in high {
            if item.get("__sls__").and_then(Value::as_str) == Some(name) {
                if let Some(first) = item.as_object().and_then(|m| m.keys().next()) {
                    ext_id.push((nid.clone(), first.clone()));
                }
            }
        }
    } else {
        for (nid, body) in high {
            let Some(Value::Array(args)) = body.as_object().and_then(|b| b.get(state)) else {
                continue;
            };
            for arg in args {
                if let Value::Object(m) = arg {
                    if m.len() == 1 && m.values().next().and_then(Value::as_str) == Some(name) {
                        ext_id.push((nid.clone(), state.to_string()));
                    }
                }
            }
        }
    }
    ext_id
}

/// Salt's `reconcile_extend`: applies `__extend__` to the high data,
/// noting in `origins` the names an extend sets (they are the extending
/// SLS's strings, yamlex or not).
pub fn reconcile_extend(high: &mut Map, strict: bool, origins: &mut StringOrigins) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(Value::Array(ext)) = high.shift_remove("__extend__") else {
        return errors;
    };
    let sls_excludes: Vec<String> = high
        .get("__exclude__")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| match e {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(m) => m.get("sls").and_then(Value::as_str).map(String::from),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for ext_chunk in ext {
        let Value::Object(ext_chunk) = ext_chunk else {
            continue;
        };
        for (mut name, body) in ext_chunk {
            let Value::Object(body) = body else { continue };
            let Some(state_type) = body.keys().find(|k| !k.starts_with("__")).cloned() else {
                continue;
            };
            let has = high
                .get(&name)
                .and_then(Value::as_object)
                .is_some_and(|b| b.contains_key(&state_type));
            if !has {
                let ids = find_name(&name, &state_type, high, strict);
                if ids.len() != 1 {
                    let env = body
                        .get("__env__")
                        .map(py_str)
                        .unwrap_or_else(|| "base".into());
                    let sls = body
                        .get("__sls__")
                        .map(py_str)
                        .unwrap_or_else(|| "base".into());
                    errors.push(format!(
                        "Cannot extend ID '{name}' in '{env}:{sls}'. It is not part of the high state.\n\
                         This is likely due to a missing include statement or an incorrectly typed ID.\n\
                         Ensure that a state with an ID of '{name}' is available\nin environment '{env}' and to SLS '{sls}'"
                    ));
                    continue;
                }
                name = ids[0].0.clone();
            }
            if let Some(sls) = body.get("__sls__").and_then(Value::as_str) {
                if sls_excludes.iter().any(|e| e == sls) {
                    continue;
                }
            }
            let sets_name = body.iter().any(|(k, run)| {
                !k.starts_with("__")
                    && run.as_array().is_some_and(|args| {
                        args.iter()
                            .any(|a| a.as_object().is_some_and(|m| m.contains_key("name")))
                    })
            });
            if sets_name {
                origins.note_extended_name(&name, &body);
            }
            let Some(Value::Object(target)) = high.get_mut(&name) else {
                continue;
            };
            origins.note_extended_requisites(&name, target, &body);
            for (state, run) in body {
                if state.starts_with("__") {
                    continue;
                }
                let Some(existing) = target.get_mut(&state) else {
                    target.insert(state, run);
                    continue;
                };
                let (Value::Array(existing), Value::Array(run)) = (existing, run) else {
                    continue;
                };
                for arg in run {
                    let mut update = false;
                    for slot in existing.iter_mut() {
                        if arg.is_string() && slot.is_string() {
                            *slot = arg.clone();
                            update = true;
                            continue;
                        }
                        if let (Value::Object(a), Value::Object(_)) = (&arg, &*slot) {
                            let argfirst = a.keys().next().cloned().unwrap_or_default();
                            let valfirst = first_key(slot).unwrap_or("").to_string();
                            if argfirst == valfirst {
                                if REQUISITE_KEYWORDS.contains(&argfirst.as_str()) {
                                    let add = a.get(&argfirst).cloned().unwrap_or(Value::Null);
                                    if let Some(Value::Array(list)) = slot.get_mut(&argfirst) {
                                        match add {
                                            Value::Array(items) => list.extend(items),
                                            other => list.push(other),
                                        }
                                    } else {
                                        *slot = arg.clone();
                                    }
                                } else {
                                    *slot = arg.clone();
                                }
                                update = true;
                            }
                            if argfirst == "name" && valfirst == "names" {
                                *slot = arg.clone();
                            }
                        }
                    }
                    if !update {
                        existing.push(arg);
                    }
                }
            }
        }
    }
    errors
}

/// An ID as Salt's `str()` prints it in a structure error: quoted when
/// its SLS was yamlex ([`StringOrigins`]).
struct ShownId<'a> {
    id: &'a str,
    yamlex: bool,
}

impl std::fmt::Display for ShownId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.yamlex {
            f.write_str(&halite_salt_rules::pyyaml::yamlex_str(self.id))
        } else {
            f.write_str(self.id)
        }
    }
}

/// Salt's `_verify_high`: the structural checks, every error listed
/// (`origins` says which SLS's strings print quoted in them).
pub fn verify_high(high: &Map, origins: &StringOrigins) -> Vec<String> {
    let mut errors = Vec::new();
    for (id, body) in high {
        if id.starts_with("__") {
            continue;
        }
        let Value::Object(b) = body else {
            errors.push(format!(
                "The type {id} in {} is not formatted as a dictionary",
                py_str(body)
            ));
            continue;
        };
        // Formatted only into an error message (most IDs have none).
        let sls = SlsName(body);
        // A yamlex SLS's strings print quoted (its ID, its requisite
        // keys); looked up only when an error is formatted.
        let yamlex = origins.body_is_yamlex(b);
        let shown = |text: &str| -> String {
            if yamlex {
                halite_salt_rules::pyyaml::yamlex_str(text)
            } else {
                text.to_string()
            }
        };
        let id = ShownId { id, yamlex };
        for (state, run) in b {
            if state.starts_with("__") {
                continue;
            }
            if run.is_null() {
                errors.push(format!(
                    "ID '{id}' in SLS '{sls}' contains a short declaration ({state}) with a trailing colon. When not passing any arguments to a state, the colon must be omitted."
                ));
                continue;
            }
            let Value::Array(args) = run else {
                errors.push(format!(
                    "State '{id}' in SLS '{sls}' is not formed as a list"
                ));
                continue;
            };
            let mut fun_count = 0;
            if state.contains('.') {
                fun_count += 1;
            }
            for arg in args {
                match arg {
                    Value::String(s) => {
                        fun_count += 1;
                        if s.trim().contains(' ') {
                            errors.push(format!(
                                "The function \"{s}\" in state \"{id}\" in SLS \"{sls}\" has whitespace, a function with whitespace is not supported, perhaps this is an argument that is missing a \":\""
                            ));
                        }
                    }
                    Value::Object(m) => {
                        let Some(argfirst) = m.keys().next() else {
                            continue;
                        };
                        if argfirst == "names" && !m[argfirst].is_array() {
                            errors.push(format!(
                                "The 'names' argument in state '{id}' in SLS '{sls}' needs to be formed as a list"
                            ));
                        }
                        if REQUISITE_KEYWORDS.contains(&argfirst.as_str()) {
                            match &m[argfirst] {
                                Value::Array(reqs) => {
                                    for req in reqs {
                                        // Read in place: a bare string is `{id: string}`.
                                        let (rk, rv): (&str, &Value) = match req {
                                            Value::String(_) => ("id", req),
                                            Value::Object(mm) if mm.len() == 1 => {
                                                match mm.iter().next() {
                                                    Some((k, v)) => (k.as_str(), v),
                                                    None => continue,
                                                }
                                            }
                                            other => {
                                                errors.push(format!(
                                                    "Requisite declaration {} in state {id} in SLS {sls} is not formed as a single key dictionary",
                                                    py_repr(other)
                                                ));
                                                continue;
                                            }
                                        };
                                        if let Some(dot) = rk.find('.') {
                                            // The key as the SLS gave it; Salt's
                                            // `split('.')` gives a plain string.
                                            errors.push(format!(
                                                "Invalid requisite type '{}' in state '{id}', in SLS '{sls}'. Requisite types must not contain dots, did you mean '{}'?",
                                                shown(rk),
                                                &rk[..dot]
                                            ));
                                        }
                                        if rv.is_array() || rv.is_object() {
                                            errors.push(format!(
                                                "Illegal requisite \"{}\" in SLS \"{sls}\", please check your syntax.\n",
                                                py_repr(rv)
                                            ));
                                            continue;
                                        }
                                    }
                                }
                                _ => errors.push(format!(
                                    "The {argfirst} statement in state '{id}' in SLS '{sls}' needs to be formed as a list"
                                )),
                            }
                            if m.len() != 1 {
                                errors.push(format!(
                                    "Multiple dictionaries defined in argument of state '{id}' in SLS '{sls}'"
                                ));
                            }
                        }
                    }
                    _ => {}
                }
            }
            if fun_count == 0 {
                errors.push(format!(
                    "No function declared in state '{id}' in SLS '{sls}'"
                ));
            } else if fun_count > 1 {
                let mut funs: Vec<String> = Vec::new();
                if let Some((_, f)) = state.split_once('.') {
                    funs.push(f.to_string());
                }
                funs.extend(args.iter().filter_map(|a| a.as_str().map(String::from)));
                errors.push(format!(
                    "Too many functions declared in state '{id}' in SLS '{sls}'. Please choose one of the following: {}",
                    funs.join(", ")
                ));
            }
        }
    }
    errors
}

/// The single-key argument names of a state declaration (Salt's `state_args`).
fn state_args(id: &str, state: &str, high: &Map) -> Vec<String> {
    high.get(id)
        .and_then(|b| b.get(state))
        .and_then(Value::as_array)
        .map(|args| {
            args.iter()
                .filter_map(|a| {
                    a.as_object()
                        .filter(|m| m.len() == 1)
                        .and_then(|m| m.keys().next().cloned())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Salt's `find_sls_ids`.
fn find_sls_ids(sls: &str, high: &Map) -> Vec<(String, String)> {
    let mut ret = Vec::new();
    for (nid, item) in high {
        let Value::Object(m) = item else { continue };
        if m.get("__sls__").and_then(Value::as_str) == Some(sls) {
            for st in m.keys() {
                if !st.starts_with("__") {
                    ret.push((nid.clone(), st.clone()));
                }
            }
        }
    }
    ret
}

type Extend = IndexMap<String, Map>;

fn extend_req(
    extend: &mut Extend,
    name: &str,
    state: &str,
    rkey: &str,
    src_state: &str,
    src_id: &str,
    body: &Value,
) {
    let e = extend.entry(name.to_string()).or_default();
    if !e.contains_key(state) {
        e.insert(state.to_string(), Value::Array(Vec::new()));
    }
    e.insert(
        "__env__".into(),
        body.get("__env__").cloned().unwrap_or(Value::Null),
    );
    e.insert(
        "__sls__".into(),
        body.get("__sls__").cloned().unwrap_or(Value::Null),
    );
    let mut r = Map::new();
    r.insert(src_state.to_string(), Value::from(src_id));
    let Some(Value::Array(list)) = e.get_mut(state) else {
        return;
    };
    let mut found = false;
    for item in list.iter_mut() {
        if first_key(item) == Some(rkey) {
            if let Some(Value::Array(reqs)) = item.get_mut(rkey) {
                reqs.push(Value::Object(r.clone()));
            }
            found = true;
        }
    }
    if !found {
        let mut m = Map::new();
        m.insert(rkey.to_string(), Value::Array(vec![Value::Object(r)]));
        list.push(Value::Object(m));
    }
}

/// Salt's `requisite_in`: turns `require_in`/`watch_in`/`onfail_in`/
/// `onchanges_in`/`prereq_in` into requisites on their targets and copies
/// arguments for `use`/`use_in`, then applies them like `extend`.
pub fn requisite_in(high: &mut Map, disabled: &[String]) -> Vec<String> {
    const REQ_IN: &[&str] = &[
        "require_in",
        "watch_in",
        "onfail_in",
        "onchanges_in",
        "use",
        "use_in",
        "prereq_in",
    ];
    let req_in_all: Vec<&str> = REQ_IN
        .iter()
        .copied()
        .chain([
            "require",
            "watch",
            "prereq",
            "onfail",
            "onfail_stop",
            "onchanges",
        ])
        .collect();
    let mut extend: Extend = IndexMap::new();
    let mut errors = Vec::new();
    for (id, body) in high.iter() {
        let Value::Object(b) = body else { continue };
        for (state, run) in b {
            if state.starts_with("__") {
                continue;
            }
            let Value::Array(run) = run else { continue };
            for arg in run {
                let Value::Object(arg) = arg else { continue };
                let Some(key) = arg.keys().next() else {
                    continue;
                };
                if !REQ_IN.contains(&key.as_str()) {
                    continue;
                }
                if disabled.iter().any(|d| d == key) {
                    tracing::warn!("The {key} requisite has been disabled, Ignoring.");
                    continue;
                }
                let rkey = key.split('_').next().unwrap_or(key);
                let items = &arg[key];
                if let Value::Object(items) = items {
                    for (st, name) in items {
                        let name = py_str(name);
                        let mut st = st.clone();
                        if let Some(dot) = st.find('.') {
                            errors.push(format!(
                                "Invalid requisite in {rkey}: {st} for {name} in SLS '{}'. Requisites must not contain dots, did you mean '{}'?",
                                body_sls(body),
                                &st[..dot]
                            ));
                            st.truncate(dot);
                        }
                        extend_req(&mut extend, &name, &st, rkey, state, id, body);
                    }
                }
                if let Value::Array(items) = items {
                    let mut hinges: Vec<(String, String)> = Vec::new();
                    for ind in items {
                        let ind: Map = match ind {
                            Value::Object(m) => m.clone(),
                            other => {
                                let s = py_str(other);
                                if let Some(Value::Object(target)) = high.get(&s) {
                                    let Some(first) = target.keys().find(|k| !k.starts_with("__"))
                                    else {
                                        continue;
                                    };
                                    let mut m = Map::new();
                                    m.insert(first.clone(), Value::from(s.clone()));
                                    m
                                } else {
                                    let mut found: Option<Map> = None;
                                    for (hid, hbody) in high.iter() {
                                        let Value::Object(hb) = hbody else { continue };
                                        for (st8, hrun) in hb {
                                            if st8.starts_with("__") {
                                                continue;
                                            }
                                            let Value::Array(hrun) = hrun else { continue };
                                            for j in hrun {
                                                if j.get("name").map(py_str).as_deref()
                                                    == Some(s.as_str())
                                                {
                                                    let mut m = Map::new();
                                                    m.insert(st8.clone(), Value::from(hid.clone()));
                                                    found = Some(m);
                                                }
                                            }
                                        }
                                    }
                                    match found {
                                        Some(m) => m,
                                        None => continue,
                                    }
                                }
                            }
                        };
                        let Some((pstate, pname)) = ind.iter().next() else {
                            continue;
                        };
                        let pname = py_str(pname);
                        let mut pstate = pstate.clone();
                        if pstate == "sls" {
                            hinges = find_sls_ids(&pname, high);
                        } else {
                            hinges.push((pname.clone(), pstate.clone()));
                        }
                        if let Some(dot) = pstate.find('.') {
                            errors.push(format!(
                                "Invalid requisite in {rkey}: {pstate} for {pname}, in SLS '{}'. Requisites must not contain dots, did you mean '{}'?",
                                body_sls(body),
                                &pstate[..dot]
                            ));
                            pstate.truncate(dot);
                        }
                        let _ = pstate;
                        for (name, st) in hinges.clone() {
                            if key == "use_in" || key == "use" {
                                for (ext_id, req_state) in find_name(&name, &st, high, true) {
                                    if ext_id.is_empty() {
                                        continue;
                                    }
                                    let (target_id, target_state, source_id, source_state) =
                                        if key == "use_in" {
                                            (
                                                ext_id.clone(),
                                                req_state.clone(),
                                                id.clone(),
                                                state.clone(),
                                            )
                                        } else {
                                            (
                                                id.clone(),
                                                state.clone(),
                                                ext_id.clone(),
                                                req_state.clone(),
                                            )
                                        };
                                    let own_args = state_args(
                                        &target_id,
                                        if key == "use_in" { &st } else { state },
                                        high,
                                    );
                                    let e = extend.entry(target_id.clone()).or_default();
                                    if !e.contains_key(&target_state) {
                                        e.insert(target_state.clone(), Value::Array(Vec::new()));
                                    }
                                    let src_args = high
                                        .get(&source_id)
                                        .and_then(|b| b.get(&source_state))
                                        .and_then(Value::as_array)
                                        .cloned()
                                        .unwrap_or_default();
                                    let Some(Value::Array(list)) = e.get_mut(&target_state) else {
                                        continue;
                                    };
                                    for a in src_args {
                                        let Value::Object(am) = &a else { continue };
                                        if am.len() != 1 {
                                            continue;
                                        }
                                        let k = am.keys().next().map(String::as_str).unwrap_or("");
                                        if req_in_all.contains(&k)
                                            || own_args.iter().any(|o| o == k)
                                        {
                                            continue;
                                        }
                                        if k == "name" || k == "names" {
                                            continue;
                                        }
                                        list.push(a.clone());
                                    }
                                }
                                continue;
                            }
                            extend_req(&mut extend, &name, &st, rkey, state, id, body);
                        }
                    }
                }
            }
        }
    }
    if extend.is_empty() {
        // Nothing to extend: inserting an empty `__extend__` would grow the
        // high data's map (a copy of all its entries, 1 MB at 10 000
        // states) only for `reconcile_extend` to take it out again.
        return errors;
    }
    let ext: Vec<Value> = extend
        .into_iter()
        .map(|(k, v)| {
            let mut m = Map::new();
            m.insert(k, Value::Object(v));
            Value::Object(m)
        })
        .collect();
    high.insert("__extend__".into(), Value::Array(ext));
    // These extends add requisites only (never a `name`): nothing for
    // the string origins to learn.
    errors.extend(reconcile_extend(high, true, &mut StringOrigins::new()));
    errors
}

/// Salt's `_apply_exclude`: drops excluded SLS (globs) and IDs.
pub fn apply_exclude(high: &mut Map) {
    let Some(Value::Array(exclude)) = high.shift_remove("__exclude__") else {
        return;
    };
    let mut ex_sls = Vec::new();
    let mut ex_id = Vec::new();
    for exc in exclude {
        match exc {
            Value::String(s) => ex_sls.push(s),
            Value::Object(m) if m.len() == 1 => {
                if let Some(s) = m.get("sls") {
                    ex_sls.push(py_str(s));
                } else if let Some(s) = m.get("id") {
                    ex_id.push(py_str(s));
                }
            }
            _ => {}
        }
    }
    if !ex_sls.is_empty() {
        for (name, body) in high.iter() {
            if name.starts_with("__") {
                continue;
            }
            let sls = body.get("__sls__").and_then(Value::as_str).unwrap_or("");
            if sls.is_empty() {
                continue;
            }
            if ex_sls.iter().any(|p| fnmatch(sls, p)) {
                ex_id.push(name.clone());
            }
        }
    }
    for id in ex_id {
        high.shift_remove(&id);
    }
}

/// Salt's `compile_high_data`: one chunk per state function, `names`
/// expanded (`name_order` set for the ordering). Returns the graph with
/// every chunk added, ready for [`Graph::order`]. The high data is
/// consumed: arguments move into the chunks instead of being copied.
///
/// For a large tree, the calling thread turns the IDs into chunks and
/// computes their tags and lookup keys (each ID's chunks depend on nothing
/// else) while a helper thread adds them to the graph, in definition
/// order all the same. This way round the high data is freed by the
/// thread that allocated most of it (another thread's frees cost mimalloc
/// several times as much).
pub fn compile_high_data(high: Map, origins: &StringOrigins) -> Graph {
    // At least a chunk per ID (more with `names` or several modules).
    let graph = Graph::with_capacity(high.len());
    let ids: Vec<(String, Value)> = high.into_iter().collect();
    let n = piece_count(ids.len());
    let pieces = split_vec(ids, n);
    // Requisite targets are looked up by keys computed from each chunk:
    // only from the first chunk with requisites on (the graph indexes the
    // ones before it then), so that a tree without any computes none.
    let requisites_seen = Cell::new(false);
    let build = |ids: Vec<(String, Value)>| {
        let mut keyed = Vec::with_capacity(ids.len());
        let mut chunks = Vec::new();
        for (id, body) in ids {
            id_chunks(id, body, origins, &mut chunks);
            keyed.extend(chunks.drain(..).map(|chunk| {
                if !requisites_seen.get() && has_requisites(&chunk) {
                    requisites_seen.set(true);
                }
                let keys = if requisites_seen.get() {
                    ChunkKeys::of(&chunk)
                } else {
                    ChunkKeys::tag_only(&chunk)
                };
                (chunk, keys)
            }));
        }
        keyed
    };
    fold_on_helper(pieces, build, graph, |graph, chunks| {
        for (chunk, keys) in chunks {
            graph.add_keyed_chunk(chunk, keys);
        }
    })
}

/// Salt's `compile_high_data` without the requisite graph: the chunks
/// alone, in definition order, exactly as [`compile_high_data`] adds them
/// to its graph. For a compile whose chunks are ordered where they run
/// (the master's bundle: the minion orders them and finds the requisite
/// errors), so no lookup key, tag or index is made for them here.
pub fn compile_high_chunks(high: Map, origins: &StringOrigins) -> Vec<LowChunk> {
    let mut chunks = Vec::with_capacity(high.len());
    for (id, body) in high {
        id_chunks(id, body, origins, &mut chunks);
    }
    chunks
}

/// The chunks of one ID, appended to `out` in the order Salt makes them.
fn id_chunks(id: String, body: Value, origins: &StringOrigins, out: &mut Vec<LowChunk>) {
    if id.starts_with("__") {
        return;
    }
    let Value::Object(mut b) = body else { return };
    let yamlex = origins.of_state(&id, &b);
    let other_type_requisites = origins
        .extended_requisites(&id)
        .map(|r| std::sync::Arc::new(r.to_vec()));
    // The stamps every chunk of the ID carries, in this order. A body
    // has a few keys: scanned, not looked up (three hashes per ID).
    // Taken out of the body (whose `__` keys are skipped below): the
    // last chunk of the ID gets them, the others copies.
    const META: [&str; 3] = ["__sls__", "__env__", "__sls_included_from__"];
    let mut meta: [Option<Value>; 3] = [None, None, None];
    for (k, v) in b.iter_mut().filter(|(k, _)| k.starts_with("__")) {
        if let Some(i) = META.iter().position(|m| m == k) {
            meta[i] = Some(std::mem::take(v));
        }
    }
    let meta_len = meta.iter().flatten().count();
    let mut states_left = b.keys().filter(|k| !k.starts_with("__")).count();
    for (state, run) in b {
        if state.starts_with("__") {
            continue;
        }
        states_left -= 1;
        let Value::Array(run) = run else { continue };
        // Salt keeps the first function named (later ones are ignored).
        let mut first_fun: Option<String> = None;
        let mut names: Vec<Value> = Vec::new();
        // Sized for the keys it will hold (chunks are the bulk of a run's
        // memory): state, name, __id__, the stamps, the arguments, fun,
        // and `order` when ordering has to add it.
        let mut has_order = false;
        let arg_keys: usize = run
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|m| m.keys())
            .filter(|k| {
                has_order |= *k == "order";
                !matches!(k.as_str(), "names" | "state" | "name")
            })
            .count();
        let mut chunk = LowChunk::with_capacity(4 + meta_len + arg_keys + usize::from(!has_order));
        chunk.set_yamlex(yamlex);
        chunk.set_other_type_requisites(other_type_requisites.clone());
        chunk.insert("state", Value::String(state));
        // The ID unless the arguments give a string `name` (set below).
        chunk.insert("name", Value::Null);
        for (k, v) in META.iter().zip(meta.iter_mut()) {
            if let Some(v) = v {
                let v = if states_left == 0 {
                    std::mem::take(v)
                } else {
                    v.clone()
                };
                chunk.insert(*k, v);
            }
        }
        chunk.insert("__id__", Value::from(id.clone()));
        for arg in run {
            match arg {
                Value::String(f) => {
                    first_fun.get_or_insert(f);
                }
                Value::Object(m) => {
                    for (key, val) in m {
                        if key == "names" {
                            if let Value::Array(list) = val {
                                for n in list {
                                    if !names.contains(&n) {
                                        names.push(n);
                                    }
                                }
                            }
                        } else if key == "state" {
                            continue;
                        } else if key == "name" && !val.is_string() {
                            // The ID, as if no name was given.
                            chunk.insert(key, Value::Null);
                        } else {
                            chunk.insert(key, val);
                        }
                    }
                }
                _ => {}
            }
        }
        let Some(fun) = first_fun else {
            continue;
        };
        if !matches!(chunk.get("name"), Some(Value::String(_))) {
            chunk.insert("name", Value::from(id.clone()));
        }
        if names.is_empty() {
            let mut live = chunk;
            live.insert("fun", Value::String(fun));
            out.push(live);
        } else {
            for (i, entry) in names.into_iter().enumerate() {
                let mut live = chunk.clone();
                match entry {
                    Value::Object(m) => {
                        if let Some((low_name, args)) = m.into_iter().next() {
                            live.insert("name", Value::String(low_name));
                            if let Value::Array(args) = args {
                                for a in args {
                                    if let Value::Object(am) = a {
                                        for (k, v) in am {
                                            live.insert(k, v);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    other => {
                        live.insert("name", other);
                    }
                }
                live.insert("name_order", Value::from(i as i64 + 1));
                live.insert("fun", Value::from(fun.clone()));
                out.push(live);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn high(v: Value) -> Map {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("test high data is a mapping"),
        }
    }

    /// `name` is the ID unless a string is given; the last `name`
    /// argument wins, a non-string one meaning the ID (Salt's
    /// `compile_high_data`); every chunk of an ID carries its stamps, and
    /// the keys keep Salt's order.
    /// A yamlex SLS's states print their ID, name and requisite values
    /// as Salt's `SLSString` does (recorded from Salt 3008.5: the
    /// `yamlex_*` conformance cases); other states stay plain, and the
    /// mark is hidden from what `state.show_lowstate` prints.
    #[test]
    fn yamlex_strings_print_quoted_in_tags_and_messages() {
        let mut origins = StringOrigins::new();
        origins.add_yamlex_sls("base", "s");
        let mut graph = compile_high_data(
            high(serde_json::json!({
                "greet": {"__sls__": "s", "__env__": "base",
                          "test": [{"name": "hello world"}, "nop"]},
                "orphan": {"__sls__": "s", "__env__": "base",
                           "test": [{"require": [{"test": "greet"}, {"test": "nowhere"}]}, "nop"]},
                "plain": {"__sls__": "p", "__env__": "base",
                          "test": [{"require": [{"test": "nowhere"}]}, "nop"]},
            })),
            &origins,
        );
        let tags: Vec<String> = graph.chunks.iter().map(LowChunk::tag).collect();
        assert_eq!(
            tags,
            [
                "test_|-\"greet\"_|-\"hello world\"_|-nop",
                "test_|-\"orphan\"_|-\"orphan\"_|-nop",
                "test_|-plain_|-plain_|-nop"
            ]
        );
        assert_eq!(
            graph.order(&[]).expect_err("two requisites are missing"),
            [
                "Referenced state does not exist for requisite [require: (\"test\": \"nowhere\")] in state [\"orphan\"] in SLS [s]",
                "Referenced state does not exist for requisite [require: (test: nowhere)] in state [plain] in SLS [p]"
            ]
        );
        // The chunk shows exactly Salt's keys: the origin is typed, not a key.
        let shown = serde_json::to_value(&graph.chunks[0]).expect("json");
        assert_eq!(
            shown,
            serde_json::json!({"state": "test", "name": "hello world", "__sls__": "s",
                "__env__": "base", "__id__": "greet", "fun": "nop", "order": 1})
        );
    }

    /// A name `extend` sets is the extending SLS's string: plain from a
    /// plain SLS on a yamlex state, quoted from a yamlex SLS on a plain
    /// one (recorded from Salt 3008.5: `yamlex_extend_plain`).
    #[test]
    fn a_name_set_by_extend_prints_as_the_extending_sls_string() {
        let mut origins = StringOrigins::new();
        origins.add_yamlex_sls("base", "ylx");
        let mut data = high(serde_json::json!({
            "greet": {"__sls__": "ylx", "__env__": "base", "test": [{"name": "original"}, "nop"]},
            "plainstate": {"__sls__": "plainer", "__env__": "base", "test": ["nop"]},
            "__extend__": [
                {"greet": {"__sls__": "main", "__env__": "base", "test": [{"name": "from-plain"}]}},
                {"plainstate": {"__sls__": "ylx", "__env__": "base", "test": [{"name": "from-yamlex"}]}},
            ],
        }));
        assert!(reconcile_extend(&mut data, false, &mut origins).is_empty());
        let graph = compile_high_data(data, &origins);
        let tags: Vec<String> = graph.chunks.iter().map(LowChunk::tag).collect();
        assert_eq!(
            tags,
            [
                "test_|-\"greet\"_|-from-plain_|-nop",
                "test_|-plainstate_|-\"from-yamlex\"_|-nop"
            ]
        );
    }

    /// A requisite `extend` adds is the extending SLS's string too: plain
    /// from a plain SLS on a yamlex state, quoted from a yamlex SLS on a
    /// plain one (recorded from Salt 3008.5: `yamlex_extend_requisites`).
    #[test]
    fn a_requisite_added_by_extend_prints_as_the_extending_sls_string() {
        let mut origins = StringOrigins::new();
        origins.add_yamlex_sls("base", "ylx");
        origins.add_yamlex_sls("base", "yext");
        let mut data = high(serde_json::json!({
            "present": {"__sls__": "ylx", "__env__": "base", "test": ["nop"]},
            "orphan": {"__sls__": "ylx", "__env__": "base",
                       "test": [{"name": "orphan name"}, {"require": [{"test": "present"}]}, "nop"]},
            "plainstate": {"__sls__": "main", "__env__": "base",
                           "test": [{"name": "plain name"}, {"require": [{"test": "present"}]}, "nop"]},
            "__extend__": [
                {"orphan": {"__sls__": "main", "__env__": "base",
                            "test": [{"require": [{"test": "from-plain"}]}]}},
                {"plainstate": {"__sls__": "yext", "__env__": "base",
                                "test": [{"require": [{"test": "from-yamlex"}]}]}},
            ],
        }));
        assert!(reconcile_extend(&mut data, false, &mut origins).is_empty());
        let mut graph = compile_high_data(data, &origins);
        assert_eq!(
            graph.order(&[]).expect_err("two requisites are missing"),
            [
                "Referenced state does not exist for requisite [require: (test: from-plain)] in state [\"orphan name\"] in SLS [ylx]",
                "Referenced state does not exist for requisite [require: (\"test\": \"from-yamlex\")] in state [plain name] in SLS [main]"
            ]
        );
    }

    #[test]
    fn yamlex_ids_print_quoted_in_structure_errors() {
        let mut origins = StringOrigins::new();
        origins.add_yamlex_sls("base", "s");
        let errors = verify_high(
            &high(serde_json::json!({
                "dotted": {"__sls__": "s", "__env__": "base",
                           "test": [{"require": [{"cmd.run": "x"}]}, "nop"]},
            })),
            &origins,
        );
        assert_eq!(
            errors,
            ["Invalid requisite type '\"cmd.run\"' in state '\"dotted\"', in SLS 's'. Requisite types must not contain dots, did you mean 'cmd'?"]
        );
    }

    #[test]
    fn chunks_take_name_and_stamps_as_salt_does() {
        let graph = compile_high_data(
            high(serde_json::json!({
                "plain": {"__sls__": "s", "__env__": "base", "test": ["nop", {"order": 1}]},
                "named": {"__sls__": "s", "__env__": "base",
                          "test": [{"name": "given"}, "nop", {"order": 2}]},
                "string_then_number": {"__sls__": "s", "__env__": "base",
                          "test": [{"name": "given"}, {"name": 5}, "nop", {"order": 3}]},
                "number_then_string": {"__sls__": "s", "__env__": "base",
                          "test": [{"name": 5}, {"name": "given"}, "nop", {"order": 4}]},
                "two_states": {"__sls__": "s", "__env__": "base",
                          "test": ["nop", {"order": 5}], "cmd": ["run", {"order": 5}]},
            })),
            &StringOrigins::new(),
        );
        let by_id =
            |id: &str| -> Vec<&LowChunk> { graph.chunks.iter().filter(|c| c.id() == id).collect() };
        let name = |id: &str| by_id(id)[0].get("name").cloned();
        assert_eq!(name("plain"), Some(Value::from("plain")));
        assert_eq!(name("named"), Some(Value::from("given")));
        assert_eq!(
            name("string_then_number"),
            Some(Value::from("string_then_number"))
        );
        assert_eq!(name("number_then_string"), Some(Value::from("given")));
        let two = by_id("two_states");
        assert_eq!(two.len(), 2);
        for chunk in two {
            assert_eq!(chunk.sls(), "s");
            assert_eq!(chunk.get("__env__"), Some(&Value::from("base")));
            let keys: Vec<&str> = chunk.keys().collect();
            assert_eq!(
                keys,
                ["state", "name", "__sls__", "__env__", "__id__", "order", "fun"]
            );
        }
    }

    /// A tree large enough to be compiled in pieces on a helper thread
    /// gives the chunks, in the order, that compiling each ID in turn
    /// gives: `names` expanded, several modules per ID, stamps, the
    /// graph's index of tags.
    #[test]
    fn a_large_tree_compiled_in_pieces_keeps_definition_order() {
        let n = 3 * halite_perf::options::SPLIT_MIN;
        let mut data = Map::new();
        for i in 0..n {
            let body = match i % 3 {
                0 => serde_json::json!({"__sls__": "s", "__env__": "base",
                                        "test": ["nop", {"name": format!("n{i}")}]}),
                1 => serde_json::json!({"__sls__": "s", "__env__": "base",
                                        "test": ["nop", {"names": [format!("a{i}"), format!("b{i}")]}]}),
                _ => serde_json::json!({"__sls__": "s", "__env__": "base",
                                        "test": ["nop"], "cmd": ["run", {"order": i}]}),
            };
            data.insert(format!("id{i}"), body);
        }
        let mut expected = Vec::new();
        for (id, body) in data.clone() {
            id_chunks(id, body, &StringOrigins::new(), &mut expected);
        }
        assert_eq!(expected.len(), n / 3 * 5);
        let graph = compile_high_data(data, &StringOrigins::new());
        assert_eq!(graph.chunks.len(), expected.len());
        for (ci, (got, want)) in graph.chunks.iter().zip(&expected).enumerate() {
            assert_eq!(got.to_value(), want.to_value());
            assert_eq!(graph.tag(ci), crate::graph::chunk_tag(want));
        }
    }

    /// The graph indexes requisite targets only from the first chunk with
    /// requisites on, indexing the ones before it then. Wherever that
    /// chunk comes (first, in the middle of a tree compiled in pieces,
    /// last), requisites by ID, by name, by SLS and by glob find the same
    /// targets, and the run order is the one a graph built chunk by chunk
    /// with every chunk indexed gives.
    #[test]
    fn targets_are_found_however_late_the_first_requisite_comes() {
        let n = 2 * halite_perf::options::SPLIT_MIN + 7;
        for at in [0, n / 2, n - 1] {
            let mut data = Map::new();
            for i in 0..n {
                let sls = if i % 2 == 0 { "even" } else { "odd" };
                let mut body = serde_json::json!({"__sls__": sls, "__env__": "base",
                    "test": ["nop", {"name": format!("name{i}")}]});
                if i == at {
                    body = serde_json::json!({"__sls__": "req", "__env__": "base",
                        "test": ["nop", {"require": [
                            {"test": format!("name{}", n - 2)},
                            format!("id{}", (at + 1) % n),
                            {"sls": "odd"},
                            {"id": "id1?"},
                        ]}, {"watch": [{"test": "name3"}]}]});
                }
                data.insert(format!("id{i}"), body);
            }
            let mut compiled = compile_high_data(data.clone(), &StringOrigins::new());
            let order = compiled.order(&[]).expect("every target is found");

            let mut one_by_one = Graph::new();
            for (id, body) in data {
                let mut chunks = Vec::new();
                id_chunks(id, body, &StringOrigins::new(), &mut chunks);
                for chunk in chunks {
                    one_by_one.add_chunk(chunk);
                }
            }
            let want = one_by_one.order(&[]).expect("every target is found");
            assert_eq!(order, want, "requisites in chunk {at}");
            let deps = |g: &Graph| {
                let mut d: Vec<String> = g
                    .dependencies(at)
                    .into_iter()
                    .map(|(_, c)| g.tag(c).to_string())
                    .collect();
                d.sort();
                d
            };
            let found = deps(&compiled);
            assert_eq!(found, deps(&one_by_one), "requisites in chunk {at}");
            // name{n-2}, id{at+1}, the odd half, id10 to id19, name3.
            assert!(found.len() > n / 2, "{} targets found", found.len());
            for target in [
                format!("id{}", (at + 1) % n),
                "id13".to_string(),
                "id15".to_string(),
            ] {
                assert!(
                    found.iter().any(|t| t.contains(&format!("_|-{target}_|-"))),
                    "{target}"
                );
            }
        }
    }

    /// A tree without requisites orders as Salt does without building
    /// the target index; a missing target is still reported.
    #[test]
    fn a_tree_without_requisites_still_reports_missing_targets() {
        let data = high(serde_json::json!({
            "a": {"__sls__": "s", "__env__": "base", "test": ["nop"]},
            "b": {"__sls__": "s", "__env__": "base", "test": ["nop"]},
        }));
        let mut graph = compile_high_data(data.clone(), &StringOrigins::new());
        assert_eq!(graph.order(&[]).expect("no requisites").len(), 2);

        let mut data = data;
        data.insert(
            "c".into(),
            serde_json::json!({"__sls__": "s", "__env__": "base",
                               "test": ["nop", {"require": [{"test": "a"}, "missing"]}]}),
        );
        let errors = compile_high_data(data, &StringOrigins::new())
            .order(&[])
            .expect_err("a missing target");
        assert!(
            errors[0]
                .contains("Referenced state does not exist for requisite [require: (id: missing)]"),
            "{errors:?}"
        );
    }
}
