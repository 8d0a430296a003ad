//! Runs one reaction through its client, as Salt's `ReactWrap` does:
//! `local` publishes a job (as user `Reactor`, so the reactor does not
//! react to its own job events), `runner` calls halite-runners, `wheel`
//! changes keys, `caller` runs an execution function on the master host.

use std::sync::Arc;

use halite_client::local::{LocalBody, LocalReply};
use halite_modules::{Args, Host};
use serde_json::{json, Value};

use super::compile::{Form, Reaction};
use crate::config::MasterConfig;
use crate::keys::KeyStore;

/// The user Salt's reactor runs its calls as (`ReactWrap.event_user`);
/// events whose data carries it are not reacted to.
pub const REACTOR_USER: &str = "Reactor";

/// How a reaction reaches the master's state task: one local request
/// answered in-process (no socket), `None` when the master is stopping.
pub type LocalCall = Arc<dyn Fn(LocalBody) -> Option<LocalReply> + Send + Sync>;

/// What a reaction needs from the master.
pub struct Clients {
    /// The master's configuration (runners read it).
    pub cfg: MasterConfig,
    /// Publishes jobs and tells the master about key changes.
    pub local: LocalCall,
}

/// A string option of the reaction (numbers as Python's `str()`).
fn opt_str(r: &Reaction, key: &str) -> Option<String> {
    match r.opts.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(halite_salt_rules::pyfmt::python_str(other)),
    }
}

/// Runs `r`; its return, or why it failed.
pub fn run(clients: &Clients, host: &Host, r: &Reaction) -> Result<Value, String> {
    let (positional, kwargs) = r.call_args()?;
    match r.form {
        Form::Local => {
            let tgt = opt_str(r, "tgt").ok_or_else(|| {
                format!(
                    "local.{} needs tgt: the minions to run it on (e.g. - tgt: {{{{ data['id'] }}}})",
                    r.fun
                )
            })?;
            let tgt_type = opt_str(r, "tgt_type")
                .or_else(|| opt_str(r, "expr_form"))
                .unwrap_or_else(|| "glob".into());
            // `ret:` names returners the minions send the job's returns
            // to, besides the master's job cache (as `--return`).
            let mut kwargs = kwargs;
            if let Some(spec) = r
                .opts
                .get("ret")
                .and_then(halite_modules::returners::ReturnSpec::from_names)
            {
                spec.to_kwargs(&mut kwargs);
            }
            let body = LocalBody::Publish {
                tgt,
                tgt_type,
                fun: r.fun.clone(),
                arg: positional,
                kwarg: kwargs,
                user: REACTOR_USER.into(),
                watch: false,
                progress: false,
            };
            match (clients.local)(body) {
                Some(LocalReply::Started { jid, minions }) => {
                    if jid.is_empty() {
                        tracing::info!(reaction = %r.id, fun = %r.fun, "the reaction's target matched no minion; no job was published");
                    }
                    Ok(json!({"jid": jid, "minions": minions}))
                }
                Some(LocalReply::Error(e)) => Err(e),
                Some(other) => Err(format!("unexpected answer from the master: {other:?}")),
                None => Err("the master is shutting down".into()),
            }
        }
        Form::Runner => {
            // Salt's ReactWrap: the runner runs as `Reactor`, so the
            // events of what it starts (`salt/run/<jid>/new|args|ret` of
            // an orchestration) are not reacted to: no reaction loops.
            let mut kwargs = kwargs;
            kwargs.insert(halite_runners::USER_KEY.into(), Value::from(REACTOR_USER));
            halite_runners::call_runner_args(&clients.cfg, &r.fun, &positional, &kwargs)
                .map_err(|e| e.to_string())
        }
        Form::Wheel => {
            let keys = KeyStore::open(&clients.cfg.pki_dir).map_err(|e| e.to_string())?;
            let (ret, events) = super::wheel::call(&keys, &r.fun, &positional, &kwargs)?;
            if !events.is_empty() {
                match (clients.local)(LocalBody::KeysChanged { events }) {
                    Some(LocalReply::Ok) => {}
                    Some(LocalReply::Error(e)) => return Err(e),
                    _ => tracing::warn!("the master was not told of the key change; it rereads the keys on its next scan"),
                }
            }
            Ok(ret)
        }
        Form::Caller => {
            let args = Args { positional, kwargs };
            host.call(&r.fun, &args).map_err(|e| e.to_string())
        }
    }
}
