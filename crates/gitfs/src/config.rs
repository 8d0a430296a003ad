//! The master's git keys as Salt 3008 reads them: the global
//! `gitfs_*` / `git_pillar_*` options, and each remote as a plain URL or
//! a one-key mapping `URL: [ {param: value}, ... ]` whose params override
//! the globals for that remote alone (`root`, `mountpoint`, `base`,
//! `name`, `saltenv`, `ref_types`, `all_saltenvs`,
//! `disable_saltenv_mapping`, `update_interval`, and the credentials).

use std::collections::BTreeMap;

use halite_salt_rules::pyfmt::python_str;
use halite_salt_rules::truthy;
use serde_json::{Map, Value};

/// A remote that cannot be used as configured; the text names the remote
/// and the key to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Credentials of one remote. Never printed: `Debug` hides the secrets.
#[derive(Clone, Default, PartialEq)]
pub struct Auth {
    /// https user (`gitfs_user`).
    pub user: String,
    /// https password (`gitfs_password`).
    pub password: String,
    /// Allow user/password over plain http (`gitfs_insecure_auth`).
    pub insecure_auth: bool,
    /// ssh public key file (`gitfs_pubkey`); ssh derives it from the private key.
    pub pubkey: String,
    /// ssh private key file (`gitfs_privkey`).
    pub privkey: String,
    /// Passphrase of the private key (`gitfs_passphrase`).
    pub passphrase: String,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("user", &self.user)
            .field(
                "password",
                &if self.password.is_empty() { "" } else { "***" },
            )
            .field("insecure_auth", &self.insecure_auth)
            .field("pubkey", &self.pubkey)
            .field("privkey", &self.privkey)
            .field(
                "passphrase",
                &if self.passphrase.is_empty() {
                    ""
                } else {
                    "***"
                },
            )
            .finish()
    }
}

impl Auth {
    /// The secrets that must never appear in a log line or an error.
    pub fn secrets(&self) -> Vec<&str> {
        [self.password.as_str(), self.passphrase.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// A saltenv's own overrides in a remote (`saltenv: - dev: - ref: x`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SaltenvParams {
    /// The branch, tag or commit serving the saltenv.
    pub git_ref: Option<String>,
    /// The directory of the repository served as the saltenv's root.
    pub root: Option<String>,
    /// The `salt://` prefix the saltenv's files are served under.
    pub mountpoint: Option<String>,
}

/// One git remote with its effective options (globals overridden by its own).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteConfig {
    /// The URL fetched.
    pub url: String,
    /// What the remote is called in logs, errors and `fileserver.update`
    /// (its `name`, else its URL; git_pillar: `branch URL`). The cache
    /// directory is a hash of it, as in Salt.
    pub id: String,
    /// Directory of the repository served as the root (`root`).
    pub root: String,
    /// `salt://` prefix the files are served under (`mountpoint`).
    pub mountpoint: String,
    /// The branch or tag served as `base` (`base`, `gitfs_base`).
    pub base: String,
    /// Which refs become saltenvs: `branch`, `tag`, `sha` (`ref_types`).
    pub ref_types: Vec<String>,
    /// A ref served for every saltenv (`all_saltenvs`).
    pub all_saltenvs: Option<String>,
    /// Only `base` and the saltenvs mapped explicitly are served.
    pub disable_saltenv_mapping: bool,
    /// saltenv -> its own ref/root/mountpoint (`saltenv`).
    pub saltenv: BTreeMap<String, SaltenvParams>,
    /// Seconds between background fetches (`update_interval`).
    pub update_interval: u64,
    /// Verify TLS certificates (`ssl_verify`).
    pub ssl_verify: bool,
    /// Credentials.
    pub auth: Auth,
    /// git_pillar: the branch (`__env__` maps it from the pillarenv).
    pub branch: String,
    /// git_pillar: the pillar environment the branch is (`env`).
    pub env: Option<String>,
}

/// Params a gitfs remote may carry.
const GITFS_PARAMS: &[&str] = &[
    "name",
    "root",
    "mountpoint",
    "base",
    "saltenv",
    "ref_types",
    "all_saltenvs",
    "disable_saltenv_mapping",
    "update_interval",
    "ssl_verify",
    "refspecs",
    "fallback",
    "user",
    "password",
    "insecure_auth",
    "pubkey",
    "privkey",
    "passphrase",
];

/// Params a git_pillar remote may carry.
const PILLAR_PARAMS: &[&str] = &[
    "name",
    "root",
    "mountpoint",
    "base",
    "branch",
    "env",
    "all_saltenvs",
    "update_interval",
    "ssl_verify",
    "refspecs",
    "fallback",
    "user",
    "password",
    "insecure_auth",
    "pubkey",
    "privkey",
    "passphrase",
];

/// The valid ref types (Salt's `gitfs_ref_types` values).
const REF_TYPES: &[&str] = &["branch", "tag", "sha"];

/// A scalar option as Python's `str()` of it.
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        other => python_str(other),
    }
}

/// The global `<prefix>_<key>`, or `default`.
fn global(opts: &Value, prefix: &str, key: &str, default: &str) -> String {
    opts.get(format!("{prefix}_{key}"))
        .map(text)
        .filter(|s| !s.is_empty() || key == "root" || key == "mountpoint")
        .unwrap_or_else(|| default.to_string())
}

/// A list of single-key mappings (or one mapping) as one mapping.
fn params_of(value: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    match value {
        Value::Array(items) => {
            for item in items {
                if let Value::Object(m) = item {
                    out.extend(m.clone());
                }
            }
        }
        Value::Object(m) => out.extend(m.clone()),
        _ => {}
    }
    out
}

/// A remote entry: its key (URL, or `branch URL`) and its params.
fn entry(item: &Value) -> Result<(String, Map<String, Value>), ConfigError> {
    match item {
        Value::String(s) => Ok((s.trim().to_string(), Map::new())),
        Value::Object(m) if m.len() == 1 => {
            let (k, v) = m
                .iter()
                .next()
                .map(|(k, v)| (k.clone(), v))
                .ok_or_else(|| ConfigError("an empty mapping is not a git remote".to_string()))?;
            Ok((k.trim().to_string(), params_of(v)))
        }
        other => Err(ConfigError(format!(
            "a git remote must be a URL or a mapping of one URL to its options, not {}",
            halite_salt_rules::pyfmt::python_repr(other)
        ))),
    }
}

/// The saltenv mapping of a `saltenv` option: `[ {env: [ {ref: x}, ... ]} ]`.
fn saltenv_map(
    value: &Value,
    remote: &str,
) -> Result<BTreeMap<String, SaltenvParams>, ConfigError> {
    let mut out = BTreeMap::new();
    for (env, params) in params_of(value) {
        let mut p = SaltenvParams::default();
        for (k, v) in params_of(&params) {
            match k.as_str() {
                "ref" => p.git_ref = Some(text(&v)),
                "root" => p.root = Some(text(&v)),
                "mountpoint" => p.mountpoint = Some(text(&v)),
                other => {
                    return Err(ConfigError(format!(
                        "Invalid per-saltenv configuration parameter '{other}' for saltenv '{env}' in remote {remote}; valid ones are ref, root, mountpoint"
                    )))
                }
            }
        }
        out.insert(env, p);
    }
    Ok(out)
}

/// A list option given as a list or a comma-separated string.
fn list_of(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(text).collect(),
        other => text(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    }
}

/// Reads one remote's effective options for `prefix` (`gitfs` or `git_pillar`).
fn remote(
    opts: &Value,
    prefix: &str,
    key: String,
    params: Map<String, Value>,
) -> Result<RemoteConfig, ConfigError> {
    let pillar = prefix == "git_pillar";
    let valid = if pillar { PILLAR_PARAMS } else { GITFS_PARAMS };
    if let Some(bad) = params.keys().find(|k| !valid.contains(&k.as_str())) {
        return Err(ConfigError(format!(
            "Invalid {prefix} configuration parameter '{bad}' in remote {key}; valid parameters are: {}",
            valid.join(", ")
        )));
    }
    let get = |k: &str, default: &str| -> String {
        params
            .get(k)
            .map(text)
            .unwrap_or_else(|| global(opts, prefix, k, default))
    };
    let flag = |k: &str| -> bool {
        params
            .get(k)
            .or_else(|| opts.get(format!("{prefix}_{k}")))
            .is_some_and(truthy)
    };
    // git_pillar: "branch URL" (or a lone URL on git_pillar_branch).
    let (branch, url) = if pillar {
        match key.split_once(char::is_whitespace) {
            Some((b, u)) => (b.trim().to_string(), u.trim().to_string()),
            None => (get("branch", "master"), key.clone()),
        }
    } else {
        (String::new(), key.clone())
    };
    let branch = params.get("branch").map(text).unwrap_or(branch);
    if url.is_empty() {
        return Err(ConfigError(format!("{prefix} remote '{key}' has no URL")));
    }
    let name = params.get("name").map(text).filter(|n| !n.is_empty());
    let ref_types = params
        .get("ref_types")
        .or_else(|| opts.get(format!("{prefix}_ref_types")))
        .map(list_of)
        .unwrap_or_else(|| REF_TYPES.iter().map(|s| s.to_string()).collect());
    if let Some(bad) = ref_types.iter().find(|t| !REF_TYPES.contains(&t.as_str())) {
        return Err(ConfigError(format!(
            "Invalid ref_types '{bad}' in {prefix} remote {key}; valid ones are branch, tag, sha"
        )));
    }
    let mut saltenv = match opts.get(format!("{prefix}_saltenv")) {
        Some(v) => saltenv_map(v, &key)?,
        None => BTreeMap::new(),
    };
    if let Some(v) = params.get("saltenv") {
        saltenv.extend(saltenv_map(v, &key)?);
    }
    let update_interval = params
        .get("update_interval")
        .or_else(|| opts.get(format!("{prefix}_update_interval")))
        .map(|v| match v {
            Value::Number(n) => n.as_u64().unwrap_or(60),
            other => text(other).trim().parse().unwrap_or(60),
        })
        .unwrap_or(60);
    let ssl_verify = params
        .get("ssl_verify")
        .or_else(|| opts.get(format!("{prefix}_ssl_verify")))
        .is_none_or(truthy);
    let auth = Auth {
        user: get("user", ""),
        password: get("password", ""),
        insecure_auth: flag("insecure_auth"),
        pubkey: get("pubkey", ""),
        privkey: get("privkey", ""),
        passphrase: get("passphrase", ""),
    };
    check_auth(&url, &auth, &key, prefix)?;
    Ok(RemoteConfig {
        id: name.clone().unwrap_or_else(|| key.clone()),
        url,
        root: get("root", "").trim_matches('/').to_string(),
        mountpoint: get("mountpoint", "")
            .trim_start_matches("salt://")
            .trim_matches('/')
            .to_string(),
        base: get("base", "master"),
        ref_types,
        all_saltenvs: Some(get("all_saltenvs", "")).filter(|s| !s.is_empty()),
        disable_saltenv_mapping: flag("disable_saltenv_mapping"),
        saltenv,
        update_interval,
        ssl_verify,
        auth,
        branch,
        env: params.get("env").map(text).filter(|e| !e.is_empty()),
    })
}

/// Salt's checks of a remote's credentials: user and password together,
/// not over plain http unless `insecure_auth`, ssh keys in pairs.
fn check_auth(url: &str, auth: &Auth, key: &str, prefix: &str) -> Result<(), ConfigError> {
    if auth.user.is_empty() != auth.password.is_empty() {
        return Err(ConfigError(format!(
            "{prefix} remote {key}: set both {prefix}_user and {prefix}_password (or neither)"
        )));
    }
    if !auth.password.is_empty() && url.starts_with("http://") && !auth.insecure_auth {
        return Err(ConfigError(format!(
            "{prefix} remote {key}: refusing to send a password over plain http; use https, or set {prefix}_insecure_auth: True"
        )));
    }
    if !auth.privkey.is_empty() && !std::path::Path::new(&auth.privkey).is_file() {
        return Err(ConfigError(format!(
            "{prefix} remote {key}: the private key {} does not exist ({prefix}_privkey)",
            auth.privkey
        )));
    }
    Ok(())
}

/// The `gitfs_remotes` of the master's options, and the remotes that are
/// misconfigured (left out, each error naming its remote).
pub fn gitfs_remotes(opts: &Value) -> (Vec<RemoteConfig>, Vec<ConfigError>) {
    let items = match opts.get("gitfs_remotes") {
        Some(Value::Array(items)) => items.clone(),
        Some(Value::Null) | None => Vec::new(),
        Some(other) => vec![other.clone()],
    };
    read_all(opts, "gitfs", &items)
}

/// The remotes of one `ext_pillar: - git: [...]` entry (`items` is the
/// list under `git`).
pub fn git_pillar_remotes(opts: &Value, items: &Value) -> (Vec<RemoteConfig>, Vec<ConfigError>) {
    let items = match items {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    read_all(opts, "git_pillar", &items)
}

fn read_all(opts: &Value, prefix: &str, items: &[Value]) -> (Vec<RemoteConfig>, Vec<ConfigError>) {
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for item in items {
        match entry(item).and_then(|(key, params)| remote(opts, prefix, key, params)) {
            Ok(r) => ok.push(r),
            Err(e) => errors.push(e),
        }
    }
    (ok, errors)
}

/// Whether `saltenv` is served under `gitfs_saltenv_whitelist` /
/// `gitfs_saltenv_blacklist` (Salt's `check_whitelist_blacklist`: each
/// entry a glob or a whole-string regex; an empty whitelist allows all).
pub fn saltenv_allowed(opts: &Value, prefix: &str, saltenv: &str) -> bool {
    let matches = |key: &str| -> Option<bool> {
        let list = opts.get(format!("{prefix}_saltenv_{key}")).map(list_of)?;
        if list.is_empty() {
            return None;
        }
        Some(
            list.iter()
                .any(|expr| halite_modules::grains::match_expr::expr_match(saltenv, expr)),
        )
    };
    if matches("blacklist") == Some(true) {
        return false;
    }
    matches("whitelist") != Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn per_remote_params_override_the_globals() {
        let opts = json!({
            "gitfs_root": "states", "gitfs_base": "main",
            "gitfs_remotes": [
                "file:///srv/a.git",
                {"https://example.invalid/b.git": [
                    {"root": "salt/"}, {"mountpoint": "salt://web"}, {"name": "b"},
                    {"saltenv": [{"dev": [{"ref": "develop"}, {"root": "dev"}]}]},
                    {"ref_types": ["branch"]}, {"update_interval": 5}
                ]},
                {"file:///srv/c.git": [{"rooot": "x"}]}
            ]
        });
        let (remotes, errors) = gitfs_remotes(&opts);
        assert_eq!(remotes.len(), 2);
        assert_eq!(remotes[0].root, "states");
        assert_eq!(remotes[0].base, "main");
        assert_eq!(remotes[0].id, "file:///srv/a.git");
        assert_eq!(remotes[1].id, "b");
        assert_eq!(remotes[1].root, "salt");
        assert_eq!(remotes[1].mountpoint, "web");
        assert_eq!(remotes[1].ref_types, vec!["branch"]);
        assert_eq!(remotes[1].update_interval, 5);
        assert_eq!(
            remotes[1].saltenv["dev"],
            SaltenvParams {
                git_ref: Some("develop".into()),
                root: Some("dev".into()),
                mountpoint: None
            }
        );
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].0.contains("'rooot'") && errors[0].0.contains("c.git"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn git_pillar_entries_name_branch_and_url() {
        let opts = json!({"git_pillar_root": "pillar"});
        let (remotes, errors) = git_pillar_remotes(
            &opts,
            &json!([
                "dev file:///srv/p.git",
                {"__env__ file:///srv/q.git": [{"root": "p"}, {"env": "prod"}]}
            ]),
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (remotes[0].branch.as_str(), remotes[0].url.as_str()),
            ("dev", "file:///srv/p.git")
        );
        assert_eq!(remotes[0].root, "pillar");
        assert_eq!(remotes[0].id, "dev file:///srv/p.git");
        assert_eq!(remotes[1].branch, "__env__");
        assert_eq!(remotes[1].env.as_deref(), Some("prod"));
    }

    #[test]
    fn passwords_need_https_and_stay_hidden() {
        let opts = json!({"gitfs_user": "u", "gitfs_password": "s3cret",
            "gitfs_remotes": ["http://127.0.0.1:1/r.git"]});
        let (remotes, errors) = gitfs_remotes(&opts);
        assert!(remotes.is_empty());
        assert!(errors[0].0.contains("insecure_auth"), "{}", errors[0]);
        assert!(!errors[0].0.contains("s3cret"));
        let opts = json!({"gitfs_user": "u", "gitfs_password": "s3cret", "gitfs_insecure_auth": true,
            "gitfs_remotes": ["http://127.0.0.1:1/r.git"]});
        let (remotes, _) = gitfs_remotes(&opts);
        assert!(!format!("{remotes:?}").contains("s3cret"));
    }

    #[test]
    fn whitelist_and_blacklist_take_globs_and_regexes() {
        let opts = json!({"gitfs_saltenv_whitelist": ["base", "v1.*", "dev"],
            "gitfs_saltenv_blacklist": "v1.0"});
        assert!(saltenv_allowed(&opts, "gitfs", "base"));
        assert!(saltenv_allowed(&opts, "gitfs", "v1.2"));
        assert!(!saltenv_allowed(&opts, "gitfs", "v1.0"));
        assert!(!saltenv_allowed(&opts, "gitfs", "feature"));
        assert!(saltenv_allowed(&json!({}), "gitfs", "anything"));
    }
}
