//! A rendered reactor SLS into the reactions it asks for, as Salt's
//! reactor compiles its high data: `<id>: {<form>.<fun>: [{key: value},
//! ...]}`, the form being `local` (`cmd`, the old name), `runner`, `wheel`
//! or `caller`; then each reaction's arguments bound as Salt's `ReactWrap`
//! binds them (`args`, or the legacy `arg`/`kwarg`, or for runners and
//! wheels the reaction's own keys).

use serde_json::{Map, Value};

/// Which client runs a reaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `local.<fun>` (and the old `cmd.<fun>`): a job published to minions.
    Local,
    /// `runner.<fun>`: a runner on the master.
    Runner,
    /// `wheel.<fun>`: a wheel function on the master (`key.*`).
    Wheel,
    /// `caller.<fun>`: an execution function run on the master host.
    Caller,
}

impl Form {
    /// The form a reactor SLS names, with Salt's `cmd` → `local` alias.
    fn parse(name: &str) -> Option<Self> {
        match name {
            "local" | "cmd" => Some(Self::Local),
            "runner" => Some(Self::Runner),
            "wheel" => Some(Self::Wheel),
            "caller" => Some(Self::Caller),
            _ => None,
        }
    }

    /// Salt's name of the form.
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Runner => "runner",
            Self::Wheel => "wheel",
            Self::Caller => "caller",
        }
    }
}

/// One reaction of a reactor SLS.
#[derive(Debug, Clone, PartialEq)]
pub struct Reaction {
    /// The reaction's ID in the SLS (Salt's `__id__`).
    pub id: String,
    /// The SLS file it came from.
    pub sls: String,
    /// Which client runs it.
    pub form: Form,
    /// The function (`state.apply`, `key.accept`, `state.orchestrate`).
    pub fun: String,
    /// Every other key of the reaction (`tgt`, `args`, `arg`, `kwarg`...).
    pub opts: Map<String, Value>,
}

/// Keys Salt's reactor keeps for itself (`REACTOR_INTERNAL_KEYWORDS`):
/// never passed to a runner or wheel function.
const INTERNAL: &[&str] = &["__id__", "__sls__", "name", "order", "fun", "key", "state"];

/// The reactions of `high` (a rendered reactor SLS from file `sls`), in
/// the file's order (an integer `order` sorts first); the errors of
/// entries that are not reactions.
pub fn reactions(high: &Value, sls: &str) -> (Vec<Reaction>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let Value::Object(ids) = high else {
        errors.push(format!(
            "the reactor SLS {sls} did not render to a mapping of reaction IDs"
        ));
        return (out, errors);
    };
    for (id, body) in ids {
        match body {
            // `id: local.test.ping` (Salt pads such a short form).
            Value::String(s) => match split(s) {
                Some((form, fun)) => out.push(Reaction {
                    id: id.clone(),
                    sls: sls.to_string(),
                    form,
                    fun,
                    opts: Map::new(),
                }),
                None => errors.push(format!(
                    "reaction {id} in {sls}: '{s}' is not <local|runner|wheel|caller>.<function>"
                )),
            },
            Value::Object(decl) => {
                for (key, val) in decl {
                    if key.starts_with('_') {
                        continue;
                    }
                    let Value::Array(items) = val else {
                        errors.push(format!("reaction {id} in {sls}: the arguments of {key} must be a list of key: value items"));
                        continue;
                    };
                    match reaction(id, sls, key, items) {
                        Ok(r) => out.push(r),
                        Err(e) => errors.push(e),
                    }
                }
            }
            other => errors.push(format!("reaction {id} in {sls} is not a mapping: {other}")),
        }
    }
    out.sort_by_key(|r| {
        r.opts
            .get("order")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MAX)
    });
    (out, errors)
}

/// `local.state.apply` as (form, function); a key without a function
/// takes it from a bare string item (`local: [state.apply, ...]`).
fn split(key: &str) -> Option<(Form, String)> {
    let (form, fun) = key.split_once('.')?;
    Some((Form::parse(form)?, fun.to_string()))
}

/// One reaction from its key (`local.state.apply`) and argument list.
fn reaction(id: &str, sls: &str, key: &str, items: &[Value]) -> Result<Reaction, String> {
    let mut opts = Map::new();
    let mut bare_fun = None;
    for item in items {
        match item {
            Value::Object(m) => {
                for (k, v) in m {
                    opts.insert(k.clone(), v.clone());
                }
            }
            Value::String(s) => bare_fun = Some(s.clone()),
            other => {
                return Err(format!(
                    "reaction {id} in {sls}: argument {other} is not a key: value item"
                ))
            }
        }
    }
    let (form, fun) = match split(key) {
        Some(found) => found,
        None => match (Form::parse(key), bare_fun) {
            (Some(form), Some(fun)) => (form, fun),
            _ => {
                return Err(format!(
                    "reaction {id} in {sls}: '{key}' is not a reactor form; use local.<fun>, runner.<fun>, wheel.<fun> or caller.<fun>"
                ))
            }
        },
    };
    Ok(Reaction {
        id: id.to_string(),
        sls: sls.to_string(),
        form,
        fun,
        opts,
    })
}

/// A list of one-key mappings as one mapping (Salt's `repack_dictlist`);
/// a mapping as itself; `None` for anything else.
fn repack(v: &Value) -> Option<Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m.clone()),
        Value::Array(items) => {
            let mut out = Map::new();
            for item in items {
                let m = item.as_object()?;
                for (k, v) in m {
                    out.insert(k.clone(), v.clone());
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// Whether every item of a list is a mapping (Salt's `is_dictlist`).
fn is_dictlist(items: &[Value]) -> bool {
    items.iter().all(Value::is_object)
}

impl Reaction {
    /// The positional and keyword arguments of the call, bound as Salt's
    /// `ReactWrap.run`: `args` (a list of `key: value`; for `caller`, a
    /// plain list is positional, the legacy shape) wins over `arg`/`kwarg`;
    /// without either, a runner or wheel takes the reaction's own keys
    /// (minus Salt's internal ones and the local form's target keys) as
    /// keywords.
    pub fn call_args(&self) -> Result<(Vec<Value>, Map<String, Value>), String> {
        if let Some(args) = self.opts.get("args") {
            for ignored in ["arg", "kwarg"] {
                if self.opts.contains_key(ignored) {
                    tracing::warn!(
                        "Reactor '{}' is ignoring '{ignored}' param due to presence of 'args' param. Check the Reactor System documentation for the correct argument format.",
                        self.id
                    );
                }
            }
            if self.form == Form::Caller {
                if let Value::Array(items) = args {
                    if !is_dictlist(items) {
                        return Ok((items.clone(), Map::new()));
                    }
                }
            }
            return match repack(args) {
                Some(kw) if !kw.is_empty() || matches!(args, Value::Array(a) if a.is_empty()) => {
                    Ok((Vec::new(), kw))
                }
                _ => Err(format!(
                    "Reactor '{}' failed to execute {} '{}': Incorrect argument format, check the Reactor System documentation for the correct format.",
                    self.id,
                    self.form.name(),
                    self.fun
                )),
            };
        }
        let arg = match self.opts.get("arg") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(one) => vec![one.clone()],
        };
        let kwarg = match self.opts.get("kwarg") {
            None | Some(Value::Null) => None,
            Some(v) => Some(repack(v).ok_or_else(|| {
                format!(
                    "Reactor '{}': kwarg must be a mapping of keyword arguments",
                    self.id
                )
            })?),
        };
        if let Some(kw) = kwarg {
            return Ok((arg, kw));
        }
        if matches!(self.form, Form::Runner | Form::Wheel) {
            let kw = self
                .opts
                .iter()
                .filter(|(k, _)| {
                    !INTERNAL.contains(&k.as_str())
                        && !k.starts_with("__")
                        && !matches!(k.as_str(), "arg" | "kwarg")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            return Ok((arg, kw));
        }
        Ok((arg, Map::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(high: Value) -> Reaction {
        let (mut rs, errors) = reactions(&high, "/srv/reactor/r.sls");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(rs.len(), 1);
        rs.remove(0)
    }

    #[test]
    fn forms_split_at_the_first_dot_and_cmd_is_local() {
        let r = one(
            json!({"apply": {"local.state.apply": [{"tgt": "web1"}, {"args": [{"mods": "site"}]}]}}),
        );
        assert_eq!((r.form, r.fun.as_str()), (Form::Local, "state.apply"));
        assert_eq!(r.opts["tgt"], "web1");
        assert_eq!(
            r.call_args().unwrap(),
            (vec![], json!({"mods": "site"}).as_object().unwrap().clone())
        );
        let r = one(json!({"old": {"cmd.state.sls": [{"tgt": "*"}, {"arg": ["site"]}]}}));
        assert_eq!((r.form, r.fun.as_str()), (Form::Local, "state.sls"));
        assert_eq!(r.call_args().unwrap(), (vec![json!("site")], Map::new()));
        let r = one(json!({"short": "local.test.ping"}));
        assert_eq!((r.form, r.fun.as_str()), (Form::Local, "test.ping"));
    }

    #[test]
    fn runner_and_wheel_take_their_own_keys_without_args() {
        let r = one(
            json!({"orch": {"runner.state.orchestrate": [{"mods": "orch.deploy"}, {"pillar": {"v": 1}}, {"name": "x"}]}}),
        );
        let (pos, kw) = r.call_args().unwrap();
        assert!(pos.is_empty());
        assert_eq!(
            Value::Object(kw),
            json!({"mods": "orch.deploy", "pillar": {"v": 1}})
        );
        let r = one(json!({"accept": {"wheel.key.accept": [{"match": "web1"}]}}));
        assert_eq!(r.form, Form::Wheel);
        assert_eq!(r.call_args().unwrap().1["match"], "web1");
    }

    #[test]
    fn caller_legacy_args_are_positional_and_bad_args_are_errors() {
        let r = one(json!({"touch": {"caller.file.touch": [{"args": ["/tmp/x"]}]}}));
        assert_eq!(r.call_args().unwrap(), (vec![json!("/tmp/x")], Map::new()));
        let r = one(json!({"bad": {"local.test.arg": [{"tgt": "*"}, {"args": "nope"}]}}));
        assert!(r
            .call_args()
            .unwrap_err()
            .contains("Incorrect argument format"));
    }

    #[test]
    fn non_reactions_are_errors_not_panics() {
        let (rs, errors) = reactions(&json!(["a list"]), "x.sls");
        assert!(rs.is_empty() && errors.len() == 1);
        let (rs, errors) = reactions(
            &json!({"a": {"file.managed": [{"name": "/x"}]}, "b": 3, "c": {"local.test.ping": "x"}}),
            "x.sls",
        );
        assert!(rs.is_empty());
        assert_eq!(errors.len(), 3, "{errors:?}");
    }

    #[test]
    fn order_sorts_first_then_file_order() {
        let (rs, _) = reactions(
            &json!({
                "b": {"local.test.ping": [{"tgt": "*"}]},
                "a": {"local.test.ping": [{"tgt": "*"}, {"order": 1}]},
                "c": {"local.test.ping": [{"tgt": "*"}]},
            }),
            "x.sls",
        );
        let ids: Vec<&str> = rs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
    }
}
