//! The minion options the fetch layer reads, under Salt's names.

use std::path::PathBuf;
use std::time::Duration;

use halite_state::Value;

/// How remote sources are fetched, read from the minion's options with
/// Salt's keys: `cachedir`, `proxy_host`/`proxy_port`/`proxy_username`/
/// `proxy_password`/`no_proxy`, `ca_bundle`, `http_connect_timeout` and
/// `http_request_timeout`.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// The minion's cache directory (remote files go to `extrn_files/`).
    pub cachedir: PathBuf,
    /// `http://[user:pass@]host:port` when a proxy is configured.
    pub proxy: Option<String>,
    /// Hosts reached without the proxy (`no_proxy`).
    pub no_proxy: Vec<String>,
    /// A PEM bundle of trusted CAs replacing the system store (`ca_bundle`).
    pub ca_bundle: Option<PathBuf>,
    /// Whether https certificates are verified (`verify_ssl`, default true).
    pub verify_ssl: bool,
    /// Time allowed to connect (`http_connect_timeout`, Salt's 20 s).
    pub connect_timeout: Duration,
    /// Time allowed for a whole request (`http_request_timeout`, Salt's 3600 s).
    pub request_timeout: Duration,
}

fn seconds(v: Option<&Value>, default: f64) -> Duration {
    let secs = match v {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(default),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(default),
        _ => default,
    };
    if secs.is_finite() && secs > 0.0 {
        Duration::from_secs_f64(secs)
    } else {
        Duration::from_secs_f64(default)
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl FetchConfig {
    /// Reads the options of `opts` (the minion config, a JSON object).
    pub fn from_opts(opts: &Value) -> Self {
        let get = |k: &str| opts.get(k);
        let proxy = text(get("proxy_host")).map(|host| {
            let (scheme, host) = match host.split_once("://") {
                Some((s, h)) => (s.to_string(), h.to_string()),
                None => ("http".to_string(), host),
            };
            let auth = match (text(get("proxy_username")), text(get("proxy_password"))) {
                (Some(u), Some(p)) => format!("{}:{}@", encode(&u), encode(&p)),
                (Some(u), None) => format!("{}@", encode(&u)),
                _ => String::new(),
            };
            match text(get("proxy_port")) {
                Some(port) => format!("{scheme}://{auth}{host}:{port}"),
                None => format!("{scheme}://{auth}{host}"),
            }
        });
        let no_proxy = match get("no_proxy") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(Value::String(s)) => s
                .split(',')
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .collect(),
            _ => Vec::new(),
        };
        FetchConfig {
            cachedir: text(get("cachedir"))
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/var/cache/halite/minion")),
            proxy,
            no_proxy,
            ca_bundle: text(get("ca_bundle")).map(PathBuf::from),
            verify_ssl: get("verify_ssl").is_none_or(halite_state::truthy),
            connect_timeout: seconds(get("http_connect_timeout"), 20.0),
            request_timeout: seconds(get("http_request_timeout"), 3600.0),
        }
    }

    /// Whether `host` bypasses the proxy (`no_proxy`: exact names, `.domain`
    /// suffixes, `*`).
    pub fn bypasses_proxy(&self, host: &str) -> bool {
        self.no_proxy.iter().any(|np| {
            let np = np.trim_start_matches('*');
            np.is_empty()
                || host.eq_ignore_ascii_case(np.trim_start_matches('.'))
                || (np.starts_with('.')
                    && host
                        .to_ascii_lowercase()
                        .ends_with(&np.to_ascii_lowercase()))
        })
    }
}

/// Percent-encodes the characters that would break a proxy URL's userinfo.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn proxy_from_salt_keys() {
        let cfg = FetchConfig::from_opts(&json!({
            "proxy_host": "proxy.example", "proxy_port": 3128,
            "proxy_username": "u", "proxy_password": "p@ss",
            "no_proxy": ["localhost", ".internal"],
        }));
        assert_eq!(
            cfg.proxy.as_deref(),
            Some("http://u:p%40ss@proxy.example:3128")
        );
        assert!(cfg.bypasses_proxy("localhost"));
        assert!(cfg.bypasses_proxy("a.internal"));
        assert!(!cfg.bypasses_proxy("example.com"));
    }

    #[test]
    fn salt_default_timeouts() {
        let cfg = FetchConfig::from_opts(&json!({}));
        assert_eq!(cfg.connect_timeout, Duration::from_secs(20));
        assert_eq!(cfg.request_timeout, Duration::from_secs(3600));
        assert!(cfg.proxy.is_none());
        assert!(cfg.verify_ssl);
    }
}
