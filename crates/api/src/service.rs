//! What the API does, apart from HTTP: log users in, find who a token
//! belongs to, check Salt's ACLs, and run one lowstate chunk through the
//! client it names (salt/netapi/__init__.py's `NetapiClient`). Every call
//! here blocks (the master's local socket is blocking); the server runs
//! them on tokio's blocking pool.

use std::collections::BTreeSet;
use std::time::Duration;

use halite_client::job::{run_batched, run_job, JobRequest};
use halite_client::local::{LocalBody, LocalClient, LocalReply};
use serde_json::{json, Map, Value};

use crate::acl::{self, Call};
use crate::config::ApiConfig;
use crate::eauth::{self, EauthError};
use crate::error::ApiError;
use crate::ratelimit::LoginLimiter;
use crate::tokens::{now, Token, TokenStore};

/// The lowstate clients salt-api knows (the others are refused by name).
/// `ssh` is known so that it is refused as disabled, or, enabled, with
/// [`NO_SSH`]: halite has no salt-ssh.
pub const CLIENTS: [&str; 8] = [
    "local",
    "local_async",
    "local_batch",
    "runner",
    "runner_async",
    "wheel",
    "wheel_async",
    "ssh",
];

/// Why the `ssh` client is refused even when `netapi_enable_clients` lists it.
pub const NO_SSH: &str = "the 'ssh' client is not available: halite has no salt-ssh. Install halite-minion on the host and use the 'local' client, or remove 'ssh' from netapi_enable_clients";

/// The tag of the events fired for logins and refusals.
pub const AUTH_TAG: &str = "salt/auth/api";

/// A logged-in user, as a token or per-request credentials establish it.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The user name.
    pub name: String,
    /// The eauth backend.
    pub eauth: String,
    /// The user's groups at login.
    pub groups: BTreeSet<String>,
}

/// The API's state: its config, the token store and the login limiter.
pub struct Service {
    /// The configuration.
    pub cfg: ApiConfig,
    /// The eauth tokens.
    pub tokens: TokenStore,
    /// Failed-login counters.
    pub limiter: LoginLimiter,
}

fn text(v: Option<&Value>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(halite_salt_rules::pyfmt::python_str(other)),
    }
}

/// A lowstate chunk read and checked against the caller's ACL.
enum Verdict {
    /// A minion job (`local`, `local_async`, `local_batch`).
    Local {
        /// The client that runs it.
        client: String,
        /// The job.
        req: JobRequest,
    },
    /// A runner or wheel function.
    Function {
        /// `runner`, `runner_async`, `wheel` or `wheel_async`.
        client: String,
        /// `mod.fun`.
        fun: String,
        /// Positional arguments (a wheel chunk's `match` first).
        args: Vec<Value>,
        /// Keyword arguments (the chunk's other keys included).
        kwargs: Map<String, Value>,
    },
    /// The ACL refuses it; `what` names the call for the refusal's log.
    Refused {
        /// `<client> <fun>`, with ` on <tgt>` for a minion job.
        what: String,
    },
}

impl Service {
    /// The service over `cfg`, opening the token store in the master's cachedir.
    pub fn new(cfg: ApiConfig) -> Result<Self, ApiError> {
        std::fs::create_dir_all(&cfg.master.cachedir).map_err(|e| {
            ApiError::Internal(format!(
                "cannot create the master cachedir {}: {e}",
                cfg.master.cachedir.display()
            ))
        })?;
        let tokens = TokenStore::open(&cfg.master.cachedir.join("api_tokens.sqlite"))?;
        let limiter = LoginLimiter::new(
            cfg.rest.login_attempts,
            cfg.rest.login_attempts_per_address,
            Duration::from_secs(cfg.rest.login_window.max(1)),
        );
        Ok(Self {
            cfg,
            tokens,
            limiter,
        })
    }

    /// Fires an event on the master's bus; a master that is down only
    /// costs the event (logged).
    pub fn fire(&self, tag: &str, data: Value) {
        let master = &self.cfg.master;
        let sent = LocalClient::connect(&master.local_socket(), &master.root_key_path()).and_then(
            |mut c| {
                c.call(LocalBody::FireEvent {
                    tag: tag.to_string(),
                    data,
                })
            },
        );
        if let Err(e) = sent {
            tracing::warn!(tag, error = %e, "could not fire an event on the master's bus");
        }
    }

    /// Logs a refusal with who, what and why, fires it as an auth event,
    /// and returns the 401 the client sees.
    pub fn refuse(&self, who: &str, eauth: &str, what: &str, why: &str, source: &str) -> ApiError {
        tracing::warn!(
            user = who,
            eauth,
            what,
            reason = why,
            source,
            "halite-api refused a request"
        );
        self.fire(AUTH_TAG, acl::refusal_event(who, eauth, what, why, source));
        ApiError::Unauthorized(match why {
            "authorization" => acl::AUTHORIZATION_ERROR.into(),
            _ => "Authentication failure of type \"eauth\" occurred.".into(),
        })
    }

    /// Checks credentials without minting a token (`/login` and `/run`).
    pub fn authenticate(
        &self,
        creds: &Map<String, Value>,
        source: &str,
    ) -> Result<Identity, ApiError> {
        let username = text(creds.get("username")).unwrap_or_default();
        let password = text(creds.get("password")).unwrap_or_default();
        let eauth = text(creds.get("eauth")).unwrap_or_default();
        if !self.limiter.allowed(&username, source) {
            tracing::warn!(
                user = username,
                source,
                "login refused: too many failed attempts"
            );
            self.fire(
                AUTH_TAG,
                json!({"act": "throttled", "user": username, "eauth": eauth, "source": source, "_stamp": stamp()}),
            );
            return Err(ApiError::TooManyRequests(
                "Too many failed logins; wait and try again".into(),
            ));
        }
        match eauth::authenticate(&self.cfg.external_auth, &eauth, &username, &password) {
            Ok(groups) => {
                self.limiter.succeeded(&username);
                Ok(Identity {
                    name: username,
                    eauth,
                    groups,
                })
            }
            Err(e) => {
                self.limiter.failed(&username, source);
                if let EauthError::Misconfigured(detail) = &e {
                    tracing::error!(detail, "external_auth is misconfigured");
                }
                Err(self.refuse(&username, &eauth, "login", &e.to_string(), source))
            }
        }
    }

    /// `POST /login`: authenticates and mints a token; Salt's token document.
    pub fn login(
        &self,
        creds: &Map<String, Value>,
        source: &str,
    ) -> Result<(String, Value), ApiError> {
        let who = self.authenticate(creds, source)?;
        let mut lifetime = self.cfg.token_expire;
        if let Some(asked) = creds.get("token_expire").and_then(|v| {
            v.as_f64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        }) {
            if self.cfg.may_override_expire(&who.eauth, &who.name) {
                lifetime = asked;
            }
        }
        let start = now();
        let record = Token {
            name: who.name.clone(),
            eauth: who.eauth.clone(),
            start,
            expire: start + lifetime,
            groups: who.groups.clone(),
        };
        let token = self.tokens.create(&record)?;
        let perms = acl::sorted_permissions(&self.auth_list(&who));
        tracing::info!(user = who.name, eauth = who.eauth, source, "login");
        self.fire(
            AUTH_TAG,
            json!({"act": "login", "user": who.name, "eauth": who.eauth, "source": source, "_stamp": stamp()}),
        );
        let doc = json!({
            "token": token,
            "expire": record.expire,
            "start": record.start,
            "user": who.name,
            "eauth": who.eauth,
            "perms": perms,
        });
        Ok((token, doc))
    }

    /// The identity of a valid token (hex, known, not expired).
    pub fn identity(
        &self,
        token: Option<&str>,
        what: &str,
        source: &str,
    ) -> Result<Identity, ApiError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(self.refuse("", "", what, "no token", source));
        };
        if !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.refuse("", "", what, "token is not hex", source));
        }
        match self.tokens.get(token)? {
            Some(t) => Ok(Identity {
                name: t.name,
                eauth: t.eauth,
                groups: t.groups,
            }),
            None => Err(self.refuse("", "", what, "unknown or expired token", source)),
        }
    }

    /// The user's auth list under the current `external_auth` (ACL edits
    /// apply to live tokens at once, as in Salt).
    pub fn auth_list(&self, who: &Identity) -> Vec<Value> {
        let provider = self
            .cfg
            .external_auth
            .get(&who.eauth)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !k.starts_with('^'))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Map<String, Value>>()
            })
            .unwrap_or_default();
        acl::fill_auth_list(&provider, &who.name, &who.groups, self.cfg.permissive_acl)
    }

    fn resolve(&self, tgt: &str, tgt_type: &str) -> Result<Vec<String>, ApiError> {
        let master = &self.cfg.master;
        let mut client = LocalClient::connect(&master.local_socket(), &master.root_key_path())?;
        match client.call(LocalBody::Resolve {
            tgt: tgt.to_string(),
            tgt_type: tgt_type.to_string(),
        })? {
            LocalReply::Value(v) => Ok(serde_json::from_value(v).unwrap_or_default()),
            _ => Ok(Vec::new()),
        }
    }

    /// Runs one lowstate chunk for `who`; the items it yields. A call the
    /// caller's ACL refuses is logged and fired as an auth event (401).
    pub fn run_chunk(
        &self,
        who: &Identity,
        chunk: &Map<String, Value>,
        source: &str,
    ) -> Result<Vec<Value>, ApiError> {
        match self.check_chunk(who, chunk)? {
            Verdict::Refused { what } => {
                Err(self.refuse(&who.name, &who.eauth, &what, "authorization", source))
            }
            Verdict::Local { client, req } => self.run_local(&client, chunk, &req),
            Verdict::Function {
                client,
                fun,
                args,
                kwargs,
            } => match client.as_str() {
                "wheel" => Ok(vec![self.run_wheel(who, &fun, &args, &kwargs)]),
                "wheel_async" => {
                    let name = fun.clone();
                    Ok(vec![self.run_async(who, "wheel", fun, move |svc| {
                        crate::wheel::call(&svc.cfg.master, &name, &args, &kwargs)
                            .map_err(|e| e.to_string())
                    })])
                }
                "runner" => Ok(vec![self.run_runner(&fun, &args, &kwargs)?]),
                _ => {
                    let name = fun.clone();
                    Ok(vec![self.run_async(who, "run", fun, move |svc| {
                        svc.run_runner(&name, &args, &kwargs)
                            .map_err(|e| e.to_string())
                    })])
                }
            },
        }
    }

    /// Whether `who` may run `chunk`: the question [`Service::run_chunk`]
    /// asks first, answered without running anything and without logging
    /// a refusal, for the console to draw only the buttons the API would
    /// allow (`POST /console/api/allowed`). A chunk that is not valid
    /// input is an error, as it would be when run.
    pub fn may_run(&self, who: &Identity, chunk: &Map<String, Value>) -> Result<bool, ApiError> {
        Ok(!matches!(
            self.check_chunk(who, chunk)?,
            Verdict::Refused { .. }
        ))
    }

    /// Reads one lowstate chunk and checks it against `who`'s ACL (Salt's
    /// `auth_check` for minion functions on the resolved target,
    /// `spec_check` for runner and wheel functions): what to run, or what
    /// was refused.
    fn check_chunk(&self, who: &Identity, chunk: &Map<String, Value>) -> Result<Verdict, ApiError> {
        let client = text(chunk.get("client")).unwrap_or_default();
        if !CLIENTS.contains(&client.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "Invalid client specified: '{client}'"
            )));
        }
        if !self.cfg.enable_clients.contains(&client) {
            return Err(ApiError::BadRequest(format!(
                "Client disabled: '{client}'. Add to 'netapi_enable_clients' master config option to enable."
            )));
        }
        if client == "ssh" {
            return Err(ApiError::BadRequest(NO_SSH.into()));
        }
        let fun = text(chunk.get("fun"))
            .ok_or_else(|| ApiError::BadRequest(format!("the '{client}' client needs a 'fun'")))?;
        let mut args: Vec<Value> = match chunk.get("arg") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(Value::String(s)) if s.is_empty() => Vec::new(),
            Some(other) => vec![other.clone()],
        };
        let mut kwargs: Map<String, Value> = match chunk.get("kwarg") {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        let auth_list = self.auth_list(who);
        let what = format!("{client} {fun}");
        match client.as_str() {
            "local" | "local_async" | "local_batch" => {
                let tgt = text(chunk.get("tgt")).ok_or_else(|| {
                    ApiError::BadRequest(format!("the '{client}' client needs a 'tgt'"))
                })?;
                let tgt_type = text(chunk.get("tgt_type").or_else(|| chunk.get("expr_form")))
                    .unwrap_or_else(|| "glob".into());
                // The targeted minions are resolved only when an ACL entry
                // names a target (string entries hold for every minion).
                let mut minions: Option<BTreeSet<String>> = None;
                let call = Call {
                    fun: &fun,
                    args: &args,
                    kwargs: Some(&kwargs),
                };
                let mut resolve_err = None;
                let allowed = acl::auth_check(&auth_list, &call, |valid| {
                    let targeted = match &minions {
                        Some(m) => m,
                        None => match self.resolve(&tgt, &tgt_type) {
                            Ok(m) => minions.insert(m.into_iter().collect()),
                            Err(e) => {
                                resolve_err = Some(e);
                                return false;
                            }
                        },
                    };
                    match self.resolve(valid, "compound") {
                        Ok(v) => {
                            let v: BTreeSet<String> = v.into_iter().collect();
                            targeted.is_subset(&v)
                        }
                        Err(e) => {
                            resolve_err = Some(e);
                            false
                        }
                    }
                });
                if let Some(e) = resolve_err {
                    return Err(e);
                }
                if !allowed {
                    return Ok(Verdict::Refused {
                        what: format!("{what} on {tgt}"),
                    });
                }
                Ok(Verdict::Local {
                    client,
                    req: JobRequest {
                        tgt,
                        tgt_type,
                        fun,
                        arg: args,
                        kwarg: kwargs,
                        user: who.name.clone(),
                    },
                })
            }
            "runner" | "runner_async" | "wheel" | "wheel_async" => {
                let form = if client.starts_with("wheel") {
                    "wheel"
                } else {
                    "runner"
                };
                // Salt passes the chunk's other keys to the function as
                // keyword arguments (`{"fun": "jobs.lookup_jid", "jid": ...}`).
                for (k, v) in chunk {
                    if !matches!(
                        k.as_str(),
                        "client"
                            | "fun"
                            | "arg"
                            | "kwarg"
                            | "token"
                            | "username"
                            | "password"
                            | "eauth"
                            | "timeout"
                            | "full_return"
                            | "print_event"
                    ) {
                        kwargs.insert(k.clone(), v.clone());
                    }
                }
                if form == "wheel" {
                    // key.* take `match` as their first argument.
                    if let Some(m) = kwargs.remove("match") {
                        args.insert(0, m);
                    }
                }
                let call = Call {
                    fun: &fun,
                    args: &args,
                    kwargs: Some(&kwargs),
                };
                if !acl::spec_check(&auth_list, form, &call) {
                    return Ok(Verdict::Refused { what });
                }
                Ok(Verdict::Function {
                    client,
                    fun,
                    args,
                    kwargs,
                })
            }
            _ => Err(ApiError::BadRequest(format!(
                "Invalid client specified: '{client}'"
            ))),
        }
    }

    fn timeout_of(&self, chunk: &Map<String, Value>) -> Duration {
        let secs = chunk
            .get("timeout")
            .and_then(|v| {
                v.as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            })
            .filter(|t| *t > 0.0)
            .unwrap_or(self.cfg.local_timeout() as f64);
        Duration::from_secs_f64(secs.min(86400.0))
    }

    fn run_local(
        &self,
        client: &str,
        chunk: &Map<String, Value>,
        req: &JobRequest,
    ) -> Result<Vec<Value>, ApiError> {
        let master = &self.cfg.master;
        let full = chunk
            .get("full_return")
            .is_some_and(halite_salt_rules::truthy);
        let shape = |id: &str, data: &Value, jid: &str| -> Value {
            let ret = data.get("return").cloned().unwrap_or(Value::Null);
            if full {
                json!({id: {"ret": ret, "retcode": data.get("retcode").cloned().unwrap_or(json!(0)), "jid": jid}})
            } else {
                json!({id: ret})
            }
        };
        match client {
            "local_async" => {
                let mut c = LocalClient::connect(&master.local_socket(), &master.root_key_path())?;
                c.send(LocalBody::Publish {
                    tgt: req.tgt.clone(),
                    tgt_type: req.tgt_type.clone(),
                    fun: req.fun.clone(),
                    arg: req.arg.clone(),
                    kwarg: req.kwarg.clone(),
                    user: req.user.clone(),
                    watch: false,
                    progress: false,
                })?;
                match c.next(None)? {
                    Some(LocalReply::Started { minions, .. }) if minions.is_empty() => {
                        Ok(vec![json!({})])
                    }
                    Some(LocalReply::Started { jid, minions }) => {
                        Ok(vec![json!({"jid": jid, "minions": minions})])
                    }
                    Some(LocalReply::Error(e)) => Err(ApiError::BadRequest(e)),
                    _ => Err(ApiError::Unavailable(
                        "the master closed the connection without publishing".into(),
                    )),
                }
            }
            "local_batch" => {
                let batch = text(chunk.get("batch")).unwrap_or_else(|| "10%".into());
                let outcome = run_batched(master, req, &batch, self.timeout_of(chunk))?;
                let jid = outcome.jid.clone().unwrap_or_default();
                Ok(outcome
                    .returns
                    .iter()
                    .map(|(id, data)| shape(id, data, &jid))
                    .collect())
            }
            _ => {
                let outcome = run_job(master, req, self.timeout_of(chunk))?;
                let jid = outcome.jid.clone().unwrap_or_default();
                let mut all = Map::new();
                for (id, data) in &outcome.returns {
                    if let Value::Object(one) = shape(id, data, &jid) {
                        all.extend(one);
                    }
                }
                Ok(vec![Value::Object(all)])
            }
        }
    }

    /// Runs runner `fun` through halite-runners (the `jobs.*` of the job
    /// cache among them, shared with `halite-run`).
    pub fn run_runner(
        &self,
        fun: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, ApiError> {
        halite_runners::call_runner_args(&self.cfg.master, fun, args, kwargs).map_err(|e| match e {
            halite_runners::RunnerError::Local(l) => ApiError::from(l),
            other => ApiError::BadRequest(other.to_string()),
        })
    }

    /// `runner_async` and `wheel_async`: answers `{tag, jid}` at once
    /// (Salt's `AsyncClientMixin.asynchronous`) and runs `job` on a
    /// thread, firing `salt/<kind>/<jid>/new` and `.../ret` as Salt does
    /// (`kind` is `run` or `wheel`).
    fn run_async(
        &self,
        who: &Identity,
        kind: &str,
        fun: String,
        job: impl FnOnce(&Service) -> Result<Value, String> + Send + 'static,
    ) -> Value {
        let jid = halite_proto::jid::JidGenerator::new().next_jid();
        let tag = format!("salt/{kind}/{jid}");
        let fun_name = format!("{}.{fun}", if kind == "run" { "runner" } else { kind });
        let cfg = self.cfg.clone();
        let user = who.name.clone();
        let (j, t) = (jid.clone(), tag.clone());
        std::thread::spawn(move || {
            let Ok(svc) = Service::new(cfg) else { return };
            svc.fire(
                &format!("{t}/new"),
                json!({"fun": fun_name, "jid": j, "user": user, "_stamp": stamp()}),
            );
            let (ret, success) = match job(&svc) {
                Ok(v) => (v, true),
                Err(e) => (json!(e), false),
            };
            svc.fire(&format!("{t}/ret"), json!({"fun": fun_name, "jid": j, "user": user, "return": ret, "success": success, "_stamp": stamp()}));
        });
        json!({"tag": tag, "jid": jid})
    }

    fn run_wheel(
        &self,
        who: &Identity,
        fun: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Value {
        let jid = halite_proto::jid::JidGenerator::new().next_jid();
        let (ret, success) = match crate::wheel::call(&self.cfg.master, fun, args, kwargs) {
            Ok(v) => (v, true),
            Err(e) => (json!(e.to_string()), false),
        };
        let tag = format!("salt/wheel/{jid}");
        json!({
            "tag": tag,
            "data": {
                "fun": format!("wheel.{fun}"),
                "jid": jid,
                "tag": tag,
                "user": who.name,
                "return": ret,
                "success": success,
            }
        })
    }
}

/// Salt's `_stamp`: ISO 8601 UTC with microseconds.
pub fn stamp() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn an_enabled_ssh_client_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let mut master = halite_client::MasterConfig {
            cachedir: dir.path().join("cache"),
            ..Default::default()
        };
        master.extra.insert(
            "rest_cherrypy".into(),
            json!({"port": 8000, "disable_ssl": true}),
        );
        master
            .extra
            .insert("netapi_enable_clients".into(), json!(["ssh"]));
        let svc = Service::new(ApiConfig::from_master(master).unwrap()).unwrap();
        let who = Identity {
            name: "alice".into(),
            eauth: "auto".into(),
            groups: BTreeSet::new(),
        };
        let chunk = json!({"client": "ssh", "tgt": "*", "fun": "test.ping"});
        let err = svc
            .run_chunk(&who, chunk.as_object().unwrap(), "test")
            .unwrap_err();
        assert!(
            matches!(&err, ApiError::BadRequest(m) if m == NO_SSH),
            "{err}"
        );
    }
}
