//! Salt's `event` execution module: a minion fires events up to its
//! master's bus (`event.send`, `event.fire_master`), where the reactor and
//! `halite-run state.event` see them. The event travels over the minion's
//! own authenticated link (the host's event sink); the master wraps it in
//! Salt's `_minion_event` envelope and refuses the `salt/` tags a minion
//! may not fire.

use halite_state::{Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "event",
    functions: &[
        ExecFunction::new("send", send),
        ExecFunction::new("fire_master", fire_master),
        ExecFunction::new("fire", fire),
    ],
};

/// The keyword arguments `event.send` takes for itself; every other
/// keyword goes into the event's data (Salt's `**kwargs`).
const SEND_PARAMS: &[&str] = &[
    "tag",
    "data",
    "preload",
    "with_env",
    "with_grains",
    "with_pillar",
    "with_env_opts",
];

/// Whether this host runs without a master (Salt's `local`,
/// `file_client: local`, `master_type: disable`, unless
/// `use_master_when_local`): its events have no master bus to reach.
fn masterless(host: &Host) -> bool {
    let opt_true = |k: &str| host.opt(k).is_some_and(halite_salt_rules::truthy);
    let local = opt_true("local")
        || host.opt("file_client").and_then(Value::as_str) == Some("local")
        || host.opt("master_type").and_then(Value::as_str) == Some("disable");
    local && !opt_true("use_master_when_local")
}

/// The subset of `source` named by `keys` (Salt's `_dict_subset`).
fn subset(keys: &[Value], source: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = source {
        for k in keys.iter().filter_map(Value::as_str) {
            if let Some(v) = m.get(k) {
                out.insert(k.to_string(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// `with_grains`/`with_pillar`/`with_env`: everything when true, the
/// named keys when a list, nothing when false.
fn included(flag: Option<&Value>, all: impl FnOnce() -> Value) -> Option<Value> {
    match flag {
        Some(Value::Array(keys)) => {
            let everything = all();
            Some(subset(keys, &everything))
        }
        Some(v) if halite_salt_rules::truthy(v) => Some(all()),
        _ => None,
    }
}

/// The process environment as a mapping (`with_env`).
fn environ() -> Value {
    Value::Object(
        std::env::vars()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
    )
}

/// The event data `event.send` builds, in Salt's order: `environ`,
/// `grains`, `pillar`, `saltenv`/`pillarenv`, the extra keywords, then
/// the `data` mapping, which overrides them all.
pub fn send_data(args: &Args, host: &Host) -> Value {
    let mut data = Map::new();
    if let Some(env) = included(args.get(usize::MAX, "with_env"), environ) {
        data.insert("environ".into(), env);
    }
    if let Some(g) = included(args.get(usize::MAX, "with_grains"), || host.grains.clone()) {
        data.insert("grains".into(), g);
    }
    if let Some(p) = included(args.get(usize::MAX, "with_pillar"), || host.pillar.clone()) {
        data.insert("pillar".into(), p);
    }
    if args.get_bool(usize::MAX, "with_env_opts", false) {
        let saltenv = host
            .opt("saltenv")
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or_else(|| Value::from("base"));
        data.insert("saltenv".into(), saltenv);
        data.insert(
            "pillarenv".into(),
            host.opt("pillarenv").cloned().unwrap_or(Value::Null),
        );
    }
    for (k, v) in &args.kwargs {
        if !SEND_PARAMS.contains(&k.as_str()) {
            data.insert(k.clone(), v.clone());
        }
    }
    if let Some(Value::Object(given)) = args.get(1, "data") {
        for (k, v) in given {
            data.insert(k.clone(), v.clone());
        }
    }
    Value::Object(data)
}

/// A tag as Salt takes it: a string (anything else as Python's `str()`);
/// an empty tag is refused as Salt's `fire_event` refuses it ("Empty tag.").
fn tag_of(v: Option<&Value>) -> Option<String> {
    let tag = match v? {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => halite_salt_rules::pyfmt::python_str(other),
    };
    (!tag.is_empty()).then_some(tag)
}

/// `event.send <tag> [data] [with_grains=...] [key=value...]`: builds the
/// data and fires it to the master (on a masterless host, to the local
/// event sink, as Salt's `event.fire` there). `True`, or `False` for an
/// empty tag, as Salt returns.
fn send(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let Some(tag) = tag_of(args.get(0, "tag")) else {
        if args.get(0, "tag").is_none() {
            return Err(ExecError::Invocation(
                "send() missing 1 required positional argument: 'tag'".into(),
            ));
        }
        tracing::warn!(
            "event.send with an empty tag: nothing fired (give it a tag, e.g. myco/deploy/done)"
        );
        return Ok(Value::Bool(false));
    };
    let data = send_data(args, host);
    host.events.fire(&tag, &data);
    Ok(Value::Bool(true))
}

/// `event.fire_master <data> <tag>`: fires `data` as given to the master.
/// Masterless, Salt logs that nothing is sent and returns `False`.
fn fire_master(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let data = args.get(0, "data").cloned().ok_or_else(|| {
        ExecError::Invocation(
            "fire_master() missing 2 required positional arguments: 'data' and 'tag'".into(),
        )
    })?;
    let raw_tag = args.get(1, "tag").ok_or_else(|| {
        ExecError::Invocation("fire_master() missing 1 required positional argument: 'tag'".into())
    })?;
    if masterless(host) {
        tracing::warn!(
            "Local mode detected. Event with tag {} will NOT be sent.",
            halite_salt_rules::pyfmt::python_str(raw_tag)
        );
        return Ok(Value::Bool(false));
    }
    let Some(tag) = tag_of(Some(raw_tag)) else {
        tracing::warn!("event.fire_master with an empty tag: nothing fired");
        return Ok(Value::Bool(false));
    };
    host.events.fire(&tag, &data);
    Ok(Value::Bool(true))
}

/// `event.fire <data> <tag>`: Salt fires on the minion's own local bus.
/// A halite minion has no local bus: masterless, the event goes to the
/// host's sink (the events file or the log of `halite-call --local`);
/// under a master it is logged and not sent up (use `event.send`).
/// `data` must be a mapping (Salt: "Dict object expected").
fn fire(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let data = args.get(0, "data").cloned().unwrap_or(Value::Null);
    let Some(tag) = tag_of(args.get(1, "tag")) else {
        return Ok(Value::Bool(false));
    };
    if !data.is_object() {
        tracing::warn!(%tag, "event.fire: Dict object expected, not '{}'", halite_salt_rules::pyfmt::python_str(&data));
        return Ok(Value::Bool(false));
    }
    if masterless(host) {
        host.events.fire(&tag, &data);
    } else {
        tracing::info!(%tag, %data, "event.fire: a halite minion has no local event bus; use event.send to reach the master");
    }
    Ok(Value::Bool(true))
}
