//! The options halite-api reads, from the master's config as salt-api
//! reads them: the `rest_cherrypy` mapping, and the top-level
//! `external_auth`, `token_expire`, `token_expire_user_override`,
//! `netapi_enable_clients`, `permissive_acl`.

use serde::Deserialize;
use serde_json::{Map, Value};

use halite_client::MasterConfig;

/// `rest_cherrypy:` (Salt's names and defaults), plus halite's login limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct RestConfig {
    /// The TCP port.
    pub port: u16,
    /// The address to bind.
    pub host: String,
    /// The TLS certificate chain (PEM).
    pub ssl_crt: Option<String>,
    /// The TLS private key (PEM).
    pub ssl_key: Option<String>,
    /// Serve plain HTTP (Salt refuses to start without a certificate otherwise).
    pub disable_ssl: bool,
    /// Tracebacks (here: error chains) in 500 answers.
    pub debug: bool,
    /// `*`, one origin or a list: the CORS origins answered.
    pub cors_origin: Option<Value>,
    /// Send headers that forbid caching answers (default on, as Salt).
    pub expire_responses: bool,
    /// `/hook` needs no token.
    pub webhook_disable_auth: bool,
    /// The hook URL's prefix.
    pub webhook_url: String,
    /// `/stats` needs no token.
    pub stats_disable_auth: bool,
    /// The largest request body accepted, in bytes.
    pub max_request_body_size: usize,
    /// halite's own: failed logins allowed per user name in `login_window`
    /// seconds before further attempts are refused (429).
    pub login_attempts: u32,
    /// halite's own: failed logins allowed per source address in
    /// `login_window` (higher: many users may share a proxy or a NAT).
    pub login_attempts_per_address: u32,
    /// halite's own: the window of `login_attempts`, in seconds.
    pub login_window: u64,
    /// halite's own: seconds a `local` call waits for returns when the
    /// lowstate names no `timeout` (Salt uses the master's `timeout`).
    pub timeout: Option<u64>,
}

impl Default for RestConfig {
    fn default() -> Self {
        Self {
            port: 8000,
            host: "0.0.0.0".into(),
            ssl_crt: None,
            ssl_key: None,
            disable_ssl: false,
            debug: false,
            cors_origin: None,
            expire_responses: true,
            webhook_disable_auth: false,
            webhook_url: "/hook".into(),
            stats_disable_auth: false,
            max_request_body_size: 1_048_576,
            login_attempts: 10,
            login_attempts_per_address: 100,
            login_window: 60,
            timeout: None,
        }
    }
}

/// Everything halite-api needs from the master's config.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The master's config (sockets, cachedir, pki_dir, timeout).
    pub master: MasterConfig,
    /// `rest_cherrypy`.
    pub rest: RestConfig,
    /// `external_auth`: backend -> (user or `group%` -> auth list).
    pub external_auth: Map<String, Value>,
    /// `token_expire`: seconds a token lives (Salt: 43200).
    pub token_expire: f64,
    /// `token_expire_user_override`: `true`, or backend -> users allowed
    /// to ask for their own `token_expire` at login.
    pub token_expire_user_override: Value,
    /// `netapi_enable_clients`: the lowstate clients that may be used
    /// (Salt 3006+: none unless listed).
    pub enable_clients: Vec<String>,
    /// `permissive_acl`: `*` entries apply even when a user entry matched.
    pub permissive_acl: bool,
}

/// Why the API cannot start with this configuration.
#[derive(Debug, thiserror::Error)]
pub enum ApiConfigError {
    /// `rest_cherrypy` has a wrong value.
    #[error("invalid rest_cherrypy configuration: {0}; fix it in the master config")]
    Rest(String),
    /// TLS is on but no certificate is configured.
    #[error("rest_cherrypy needs ssl_crt and ssl_key unless disable_ssl is True (as salt-api)")]
    NoCertificate,
}

impl ApiConfig {
    /// Reads the API's options out of the master's config.
    pub fn from_master(master: MasterConfig) -> Result<Self, ApiConfigError> {
        let extra = &master.extra;
        let rest: RestConfig = match extra.get("rest_cherrypy") {
            Some(v) if !v.is_null() => serde_json::from_value(v.clone())
                .map_err(|e| ApiConfigError::Rest(e.to_string()))?,
            _ => RestConfig::default(),
        };
        if !rest.disable_ssl && (rest.ssl_crt.is_none() || rest.ssl_key.is_none()) {
            return Err(ApiConfigError::NoCertificate);
        }
        let external_auth = extra
            .get("external_auth")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let token_expire = extra
            .get("token_expire")
            .and_then(Value::as_f64)
            .unwrap_or(43200.0);
        let enable_clients = match extra.get("netapi_enable_clients") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            _ => Vec::new(),
        };
        Ok(Self {
            rest,
            external_auth,
            token_expire,
            token_expire_user_override: extra
                .get("token_expire_user_override")
                .cloned()
                .unwrap_or(Value::Bool(false)),
            enable_clients,
            permissive_acl: extra
                .get("permissive_acl")
                .is_some_and(halite_salt_rules::truthy),
            master,
        })
    }

    /// The `local` client's default wait for returns, in seconds.
    pub fn local_timeout(&self) -> u64 {
        self.rest.timeout.unwrap_or(self.master.timeout)
    }

    /// Whether `user` of `eauth` may choose the lifetime of its token.
    pub fn may_override_expire(&self, eauth: &str, user: &str) -> bool {
        match &self.token_expire_user_override {
            Value::Bool(b) => *b,
            Value::Object(m) => m
                .get(eauth)
                .and_then(Value::as_array)
                .is_some_and(|users| users.iter().any(|u| u.as_str() == Some(user))),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    fn master(extra: Value) -> MasterConfig {
        MasterConfig {
            extra: extra.as_object().unwrap().clone(),
            ..MasterConfig::default()
        }
    }

    #[test]
    fn tls_needs_a_certificate_unless_disabled() {
        let e =
            ApiConfig::from_master(master(json!({"rest_cherrypy": {"port": 8000}}))).unwrap_err();
        assert!(e.to_string().contains("ssl_crt"), "{e}");
        let c = ApiConfig::from_master(master(json!({
            "rest_cherrypy": {"port": 8001, "disable_ssl": true},
            "token_expire_user_override": {"pam": ["alice"]},
        })))
        .unwrap();
        assert_eq!(c.rest.port, 8001);
        assert_eq!(c.token_expire, 43200.0);
        assert!(
            c.enable_clients.is_empty(),
            "Salt 3006+: no client unless listed"
        );
        assert!(c.may_override_expire("pam", "alice"));
        assert!(!c.may_override_expire("file", "alice"));
        assert!(ApiConfig::from_master(master(
            json!({"rest_cherrypy": {"port": "lots", "disable_ssl": true}})
        ))
        .is_err());
    }
}
