//! Salt's returners: where a job's return goes besides the master's job
//! cache. `halite '*' fun --return syslog`, `halite-call --return`,
//! `return:`/`returner:` of a scheduled job and the reactor's `ret:` name
//! them; the minion (or halite-call) runs the job, then hands Salt's
//! return dict (`jid`, `id`, `fun`, `fun_args`, `return`, `retcode`,
//! `success`, plus `ret_config`/`ret_kwargs`) to each named returner's
//! `returner(ret)`.
//!
//! - [`options`]: Salt's `get_returner_options` (`<name>.<attr>`, the
//!   `ret_config` profile `<profile>.<name>.<attr>`, `ret_kwargs`);
//! - [`syslog`]: the `syslog` returner;
//! - [`postgres`]: the `postgres` and `pgjsonb` returners;
//! - [`rawfile_json`]: the `rawfile_json` and `local` returners;
//! - custom Python returners from `_returners` (synced by
//!   `saltutil.sync_returners`/`sync_all`), run by the Python host
//!   (`crate::python::call_returner`), before a native one of that name.

pub mod options;
pub mod postgres;
pub mod rawfile_json;
pub mod syslog;

use halite_state::{Map, Value};

use crate::Host;

/// The keyword a job carries its returners in (Salt's load key `ret`):
/// the CLI's `--return` puts it there, the minion takes it out before the
/// function sees its arguments.
pub const RET_KEY: &str = "__ret__";
/// Salt's `ret_config` (`--return_config`): the profile the returners
/// read their options under.
pub const RET_CONFIG_KEY: &str = "__ret_config__";
/// Salt's `ret_kwargs` (`--return_kwargs`): options given with the call,
/// over the configured ones.
pub const RET_KWARGS_KEY: &str = "__ret_kwargs__";

/// Why a returner could not send a return.
#[derive(Debug, thiserror::Error)]
pub enum ReturnerError {
    /// No returner of that name (Salt's "could not be loaded").
    #[error("Returner {0}.returner could not be loaded: '{0}.returner' is not available. The returners halite has: {1}")]
    Missing(String, String),
    /// An option is wrong; the text says which and what it takes.
    #[error("{0}")]
    BadOption(String),
    /// Sending failed (the socket, the database).
    #[error("{0}")]
    Send(String),
}

/// Which returners a job asked for and with what options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReturnSpec {
    /// The returner names (`--return a,b`), each once.
    pub names: Vec<String>,
    /// `ret_config`: the options profile, if any.
    pub ret_config: Option<String>,
    /// `ret_kwargs`: options over the configured ones.
    pub ret_kwargs: Map,
}

impl ReturnSpec {
    /// A spec from names as Salt takes them: a comma separated string or
    /// a list. `None` when it names nothing.
    pub fn from_names(v: &Value) -> Option<Self> {
        let raw: Vec<String> = match v {
            Value::Array(a) => a.iter().map(halite_salt_rules::pyfmt::python_str).collect(),
            Value::Null => Vec::new(),
            other => halite_salt_rules::pyfmt::python_str(other)
                .split(',')
                .map(String::from)
                .collect(),
        };
        let mut names: Vec<String> = Vec::new();
        for n in raw.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
        (!names.is_empty()).then(|| ReturnSpec {
            names,
            ..Default::default()
        })
    }

    /// Takes the returner keys out of a job's keyword arguments (so the
    /// function never sees them); the spec they name, if any.
    pub fn take_from(kwargs: &mut Map) -> Option<Self> {
        let names = kwargs.remove(RET_KEY);
        let config = kwargs.remove(RET_CONFIG_KEY);
        let extra = kwargs.remove(RET_KWARGS_KEY);
        let mut spec = Self::from_names(names.as_ref()?)?;
        spec.ret_config = config
            .filter(|c| !c.is_null())
            .map(|c| halite_salt_rules::pyfmt::python_str(&c))
            .filter(|c| !c.is_empty());
        if let Some(Value::Object(m)) = extra {
            spec.ret_kwargs = m;
        }
        Some(spec)
    }

    /// The keyword arguments that carry this spec in a published job.
    pub fn to_kwargs(&self, kwargs: &mut Map) {
        kwargs.insert(RET_KEY.into(), Value::from(self.names.join(",")));
        if let Some(c) = &self.ret_config {
            kwargs.insert(RET_CONFIG_KEY.into(), Value::from(c.as_str()));
        }
        if !self.ret_kwargs.is_empty() {
            kwargs.insert(
                RET_KWARGS_KEY.into(),
                Value::Object(self.ret_kwargs.clone()),
            );
        }
    }
}

/// One returner: its name and its `returner(ret)`.
struct Returner {
    name: &'static str,
    send: fn(&Host, &options::Lookup<'_>, &Value) -> Result<(), ReturnerError>,
}

/// The returners halite has.
const RETURNERS: &[Returner] = &[
    Returner {
        name: "syslog",
        send: syslog::returner,
    },
    Returner {
        name: "postgres",
        send: postgres::returner,
    },
    Returner {
        name: "pgjsonb",
        send: postgres::returner_jsonb,
    },
    Returner {
        name: "rawfile_json",
        send: rawfile_json::returner,
    },
    Returner {
        name: "local",
        send: rawfile_json::local,
    },
];

/// The names of the returners halite has, for messages.
pub fn available() -> Vec<&'static str> {
    RETURNERS.iter().map(|r| r.name).collect()
}

/// Salt's return dict for a job's return: what a returner receives.
pub fn return_dict(
    jid: &str,
    id: &str,
    fun: &str,
    fun_args: &[Value],
    ret: &Value,
    retcode: i64,
    success: bool,
) -> Map {
    let mut m = Map::new();
    m.insert("fun_args".into(), Value::Array(fun_args.to_vec()));
    m.insert("jid".into(), Value::from(jid));
    m.insert("return".into(), ret.clone());
    m.insert("retcode".into(), Value::from(retcode));
    m.insert("success".into(), Value::Bool(success));
    m.insert("fun".into(), Value::from(fun));
    m.insert("id".into(), Value::from(id));
    m
}

/// `ret` (a [`return_dict`]) with the gpg-decrypted `secrets` of its
/// minion's pillar masked (`**********`) in its `return` and `fun_args`.
/// A returner is where returns are stored outside the master (a file,
/// syslog, a database), so it gets them as the master's job cache and the
/// minion's spooled returns keep them (docs/pillar.md); `None` (no
/// secrets known): `ret` as it is.
pub fn masked(mut ret: Map, secrets: Option<&halite_salt_rules::secret::Cleartexts>) -> Map {
    if let Some(secrets) = secrets.filter(|s| !s.is_empty()) {
        for key in ["return", "fun_args"] {
            if let Some(v) = ret.get_mut(key) {
                *v = secrets.mask(v);
            }
        }
    }
    ret
}

/// Hands `ret` (a [`return_dict`]) to every returner of `spec`, as Salt's
/// minion does after a job: a returner that fails or does not exist is
/// logged and the others still run; the job's own return is not touched.
/// The errors, one per returner that failed.
pub fn send(host: &Host, spec: &ReturnSpec, mut ret: Map) -> Vec<ReturnerError> {
    if let Some(c) = &spec.ret_config {
        ret.insert("ret_config".into(), Value::from(c.as_str()));
    }
    if !spec.ret_kwargs.is_empty() {
        ret.insert("ret_kwargs".into(), Value::Object(spec.ret_kwargs.clone()));
    }
    let ret = Value::Object(ret);
    let lookup = options::Lookup::new(host, spec.ret_config.as_deref(), &spec.ret_kwargs);
    let mut errors = Vec::new();
    for name in &spec.names {
        // A custom returner (`_returners`) replaces a native one of the
        // same name, as custom modules do.
        let result = match crate::python::call_returner(host, name, &ret) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(ReturnerError::Send(format!("{name}.returner: {e}"))),
            None => match RETURNERS.iter().find(|r| r.name == name) {
                Some(r) => (r.send)(host, &lookup, &ret),
                None => Err(ReturnerError::Missing(name.clone(), available().join(", "))),
            },
        };
        match result {
            Ok(()) => tracing::debug!(returner = %name, "return sent"),
            Err(e) => {
                tracing::error!(returner = %name, jid = ?ret.get("jid"), "The return failed: {e}");
                errors.push(e);
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use halite_salt_rules::secret::Cleartexts;
    use serde_json::json;

    use super::{masked, return_dict};

    #[test]
    fn masked_hides_the_secrets_in_return_and_fun_args() {
        let secret = "Returner-Secret-31";
        let dict = return_dict(
            "20261126150141689338",
            "web1",
            "cmd.run",
            &[json!(format!("echo {secret}"))],
            &json!({"stdout": format!("pw={secret}")}),
            0,
            true,
        );
        let secrets = Cleartexts::new([secret]);
        let out = masked(dict.clone(), Some(&secrets));
        assert_eq!(out["return"], json!({"stdout": "pw=**********"}));
        assert_eq!(out["fun_args"], json!(["echo **********"]));
        assert_eq!(out["id"], "web1");
        // Nothing known (or nothing to mask): the dict as it was.
        assert_eq!(masked(dict.clone(), None), dict);
        assert_eq!(masked(dict.clone(), Some(&Cleartexts::default())), dict);
    }
}
