//! Salt's `ssh` execution module: a user's `authorized_keys` (read,
//! added to, replaced in, removed from, in Salt's line format) and
//! `known_hosts` files (through the real `ssh-keygen -F/-R/-H` and
//! `ssh-keyscan`).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::LazyLock;

use base64::Engine;
use halite_state::{Map, Value};
use regex::Regex;

use crate::exec::file::meta::HashType;
use crate::exec::signature::{self, Signature};
use crate::exec::user::{scalar_text, string_list};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "ssh",
    functions: &[
        ExecFunction::new("auth_keys", auth_keys_fn),
        ExecFunction::new("check_key", check_key_fn),
        ExecFunction::new("set_auth_key", set_auth_key_fn),
        ExecFunction::new("rm_auth_key", rm_auth_key_fn),
        ExecFunction::new("check_key_file", check_key_file_fn),
        ExecFunction::new("set_auth_key_from_file", set_auth_key_from_file_fn),
        ExecFunction::new("rm_auth_key_from_file", rm_auth_key_from_file_fn),
        ExecFunction::new("get_known_host_entries", get_known_host_entries_fn),
        ExecFunction::new("recv_known_host_entries", recv_known_host_entries_fn),
        ExecFunction::new("check_known_host", check_known_host_fn),
        ExecFunction::new("set_known_host", set_known_host_fn),
        ExecFunction::new("rm_known_host", rm_known_host_fn),
        ExecFunction::new("hash_known_hosts", hash_known_hosts_fn),
    ],
};

/// The Python signatures of the functions, for Salt's argument errors.
const SIGNATURES: &[Signature] = &[
    Signature::new(
        "auth_keys",
        &[],
        &["user", "config", "fingerprint_hash_type"],
    ),
    Signature::new(
        "check_key",
        &["user", "key", "enc", "comment", "options"],
        &["config", "cache_keys", "fingerprint_hash_type"],
    ),
    Signature::new(
        "set_auth_key",
        &["user", "key"],
        &[
            "enc",
            "comment",
            "options",
            "config",
            "cache_keys",
            "fingerprint_hash_type",
        ],
    ),
    Signature::new(
        "rm_auth_key",
        &["user", "key"],
        &["config", "fingerprint_hash_type"],
    ),
    Signature::new(
        "check_key_file",
        &["user", "source"],
        &["config", "saltenv", "fingerprint_hash_type"],
    ),
    Signature::new(
        "set_auth_key_from_file",
        &["user", "source"],
        &["config", "saltenv", "fingerprint_hash_type"],
    )
    .with_kwargs(),
    Signature::new(
        "rm_auth_key_from_file",
        &["user", "source"],
        &["config", "saltenv", "fingerprint_hash_type"],
    ),
    Signature::new(
        "get_known_host_entries",
        &["user", "hostname"],
        &["config", "port", "fingerprint_hash_type"],
    ),
    Signature::new(
        "recv_known_host_entries",
        &["hostname"],
        &[
            "enc",
            "port",
            "hash_known_hosts",
            "timeout",
            "fingerprint_hash_type",
        ],
    ),
    Signature::new(
        "check_known_host",
        &[],
        &[
            "user",
            "hostname",
            "key",
            "fingerprint",
            "config",
            "port",
            "fingerprint_hash_type",
        ],
    ),
    Signature::new(
        "set_known_host",
        &[],
        &[
            "user",
            "hostname",
            "fingerprint",
            "key",
            "port",
            "enc",
            "config",
            "hash_known_hosts",
            "timeout",
            "fingerprint_hash_type",
        ],
    ),
    Signature::new(
        "rm_known_host",
        &[],
        &["user", "hostname", "config", "port"],
    ),
    Signature::new("hash_known_hosts", &[], &["user", "config"]),
];

/// The default `authorized_keys`, relative to the user's home.
pub const DEFAULT_AUTH_CONFIG: &str = ".ssh/authorized_keys";
const DEFAULT_SSH_PORT: i64 = 22;

/// A key line: options, then `<type> <base64> [comment]` (Salt's regex).
pub static KEY_LINE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(.*?)\s?((?:sk-)?(?:ssh\-|ecds)[\w@.-]+\s.+)$").ok());
static REPLACE_LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"((.*)\s)?((?:sk-)?(?:ssh|ecdsa)-[a-z0-9@.-]+)\s([a-zA-Z0-9+/]+={0,2})(\s(.*))?")
        .ok()
});

fn exec_err(msg: impl Into<String>) -> ExecError {
    ExecError::Execution(msg.into())
}

/// Salt's `_refine_enc`: a key type's canonical name.
pub fn refine_enc(enc: &str) -> Result<String, ExecError> {
    Ok(match enc {
        "r" | "rsa" | "ssh-rsa" => "ssh-rsa".into(),
        "d" | "dsa" | "dss" | "ssh-dss" => "ssh-dss".into(),
        "e" | "ecdsa" => "ecdsa-sha2-nistp256".into(),
        "ecdsa-sha2-nistp521" | "ecdsa-sha2-nistp384" | "ecdsa-sha2-nistp256" => enc.into(),
        "ed25519" | "ssh-ed25519" => "ssh-ed25519".into(),
        "rsa-sha2-512"
        | "rsa-sha2-256"
        | "rsa-sha2-512-cert-v01@openssh.com"
        | "rsa-sha2-256-cert-v01@openssh.com"
        | "ssh-rsa-cert-v01@openssh.com"
        | "ecdsa-sha2-nistp256-cert-v01@openssh.com"
        | "ecdsa-sha2-nistp384-cert-v01@openssh.com"
        | "ecdsa-sha2-nistp521-cert-v01@openssh.com"
        | "sk-ecdsa-sha2-nistp256@openssh.com"
        | "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com"
        | "ssh-ed25519-cert-v01@openssh.com"
        | "sk-ssh-ed25519@openssh.com"
        | "sk-ssh-ed25519-cert-v01@openssh.com" => enc.into(),
        _ => return Err(exec_err(format!("Incorrect encryption key type '{enc}'."))),
    })
}

/// Salt's `_format_auth_line`.
pub fn format_auth_line(key: &str, enc: &str, comment: &str, options: &[String]) -> String {
    let mut line = String::new();
    if !options.is_empty() {
        line.push_str(&options.join(","));
        line.push(' ');
    }
    line.push_str(&format!("{enc} {key} {comment}\n"));
    line
}

/// Salt's `_fingerprint`: the colon-separated hex digest of the decoded
/// key, `None` when the key is not base64.
pub fn fingerprint(key: &str, hash_type: Option<&str>) -> Result<Option<String>, ExecError> {
    let name = hash_type.unwrap_or("sha256").to_ascii_lowercase();
    let kind = HashType::parse(&name).map_err(|_| {
        exec_err(format!(
            "The fingerprint_hash_type {name} is not supported."
        ))
    })?;
    let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(key) else {
        return Ok(None);
    };
    let hex = kind.digest(&raw);
    let pairs: Vec<&str> = (0..hex.len())
        .step_by(2)
        .filter_map(|i| hex.get(i..i + 2))
        .collect();
    Ok(Some(pairs.join(":")))
}

/// A user's name, uid, gid and home.
struct Account {
    uid: u32,
    gid: u32,
    home: String,
}

fn account(user: &str) -> Option<Account> {
    let u = nix::unistd::User::from_name(user).ok().flatten()?;
    Some(Account {
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
        home: u.dir.to_string_lossy().into_owned(),
    })
}

/// Salt's `_expand_authorized_keys_path`: `%u`, `%h` and `%%`.
fn expand_path(path: &str, user: &str, home: &str) -> Result<String, ExecError> {
    let mut out = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('u') => out.push_str(user),
            Some('h') => out.push_str(home),
            Some(other) => {
                return Err(exec_err(format!(
                    "AuthorizedKeysFile path: unknown token character \"%{other}\""
                )))
            }
            None => {
                return Err(exec_err(
                    "AuthorizedKeysFile path: Last character can't be escape character",
                ))
            }
        }
    }
    Ok(out)
}

/// Salt's `_get_config_file`: the absolute authorized_keys path of `user`.
pub fn config_file(user: &str, config: &str) -> Result<String, ExecError> {
    let acct = account(user).ok_or_else(|| exec_err(format!("User '{user}' does not exist")))?;
    let config = expand_path(config, user, &acct.home)?;
    if config.starts_with('/') {
        Ok(config)
    } else {
        Ok(Path::new(&acct.home)
            .join(config)
            .to_string_lossy()
            .into_owned())
    }
}

/// One key of an authorized_keys file.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthKey {
    /// The key type (`ssh-ed25519`...).
    pub enc: String,
    /// Everything after the key.
    pub comment: String,
    /// The options before the type.
    pub options: Vec<String>,
    /// [`fingerprint`] of the key.
    pub fingerprint: String,
}

impl AuthKey {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("enc".into(), Value::from(self.enc.as_str()));
        m.insert("comment".into(), Value::from(self.comment.as_str()));
        m.insert("options".into(), Value::from(self.options.clone()));
        m.insert("fingerprint".into(), Value::from(self.fingerprint.as_str()));
        Value::Object(m)
    }
}

/// Parses one key line (Salt's regex): `(options, [type, key, comment...])`.
pub fn split_key_line(line: &str) -> Option<(String, Vec<String>)> {
    let re = KEY_LINE.as_ref()?;
    let caps = re.captures(line)?;
    let opts = caps
        .get(1)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let comps = caps
        .get(2)
        .map(|m| m.as_str().split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    Some((opts, comps))
}

/// Salt's `_validate_keys`: the keys of a key file, in file order.
pub fn validate_keys(
    path: &str,
    hash_type: Option<&str>,
) -> Result<Vec<(String, AuthKey)>, ExecError> {
    let text = std::fs::read_to_string(path)
        .map_err(|_| exec_err(format!("Problem reading ssh key file {path}")))?;
    let mut ret: Vec<(String, AuthKey)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((opts, comps)) = split_key_line(line) else {
            continue;
        };
        if comps.len() < 2 {
            continue;
        }
        let Some(fp) = fingerprint(&comps[1], hash_type)? else {
            continue;
        };
        let options = if opts.is_empty() {
            Vec::new()
        } else {
            opts.split(',').map(str::to_string).collect()
        };
        let entry = AuthKey {
            enc: comps[0].clone(),
            comment: comps[2..].join(" "),
            options,
            fingerprint: fp,
        };
        match ret.iter_mut().find(|(k, _)| *k == comps[1]) {
            Some(slot) => slot.1 = entry,
            None => ret.push((comps[1].clone(), entry)),
        }
    }
    Ok(ret)
}

/// Salt's `ssh.auth_keys` for one user: empty when the file is missing.
pub fn auth_keys(
    user: &str,
    config: &str,
    hash_type: Option<&str>,
) -> Result<Vec<(String, AuthKey)>, ExecError> {
    match config_file(user, config) {
        Ok(full) if Path::new(&full).is_file() => validate_keys(&full, hash_type),
        _ => Ok(Vec::new()),
    }
}

/// Salt's `ssh.check_key`: `add`, `update` or `exists`.
pub fn check_key(
    user: &str,
    key: &str,
    enc: &str,
    comment: &str,
    options: &[String],
    config: &str,
    hash_type: Option<&str>,
) -> Result<&'static str, ExecError> {
    let enc = refine_enc(enc)?;
    let current = auth_keys(user, config, hash_type)?;
    let nline = format_auth_line(key, &enc, comment, options);
    Ok(match current.iter().find(|(k, _)| k == key) {
        None => "add",
        Some((_, cur)) if format_auth_line(key, &cur.enc, &cur.comment, &cur.options) != nline => {
            "update"
        }
        Some(_) => "exists",
    })
}

/// Reads a key file's non-blank lines, each with its newline.
fn read_lines(full: &str) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_to_string(full)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect())
}

/// Salt's `ssh.set_auth_key`: `new`, `replace`, `no change`, `fail`,
/// `invalid` or `Invalid public key`.
#[allow(clippy::too_many_arguments)]
pub fn set_auth_key(
    user: &str,
    key: &str,
    enc: &str,
    comment: &str,
    options: &[String],
    config: &str,
    hash_type: Option<&str>,
) -> Result<&'static str, ExecError> {
    if key.split_whitespace().count() > 1 {
        return Ok("invalid");
    }
    let enc = refine_enc(enc)?;
    let Some(acct) = account(user) else {
        return Ok("fail");
    };
    if fingerprint(key, hash_type)?.is_none() {
        return Ok("Invalid public key");
    }
    let full = config_file(user, config)?;
    match check_key(user, key, &enc, comment, options, config, hash_type)? {
        "exists" => Ok("no change"),
        "update" => {
            let auth_line = format_auth_line(key, &enc, comment, options);
            let lines = read_lines(&full)
                .map_err(|e| exec_err(format!("Problem reading or writing to key file: {e}")))?;
            let re = REPLACE_LINE.as_ref();
            let out: Vec<String> = lines
                .into_iter()
                .map(|line| {
                    let same = !line.starts_with('#')
                        && re
                            .and_then(|r| r.captures(&line))
                            .and_then(|c| c.get(4))
                            .is_some_and(|m| m.as_str() == key);
                    if same {
                        auth_line.clone()
                    } else {
                        line
                    }
                })
                .collect();
            std::fs::write(&full, out.concat())
                .map_err(|e| exec_err(format!("Problem reading or writing to key file: {e}")))?;
            Ok("replace")
        }
        _ => {
            let auth_line = format_auth_line(key, &enc, comment, options);
            if full.starts_with(&acct.home) && !Path::new(&acct.home).is_dir() {
                return Ok("fail");
            }
            let fpath = Path::new(&full);
            if let Some(dir) = fpath.parent().filter(|d| !d.is_dir()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| exec_err(format!("Could not create {}: {e}", dir.display())))?;
                if nix::unistd::geteuid().is_root() {
                    let _ = std::os::unix::fs::chown(dir, Some(acct.uid), Some(acct.gid));
                }
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            }
            let new_file = !fpath.is_file();
            let mut data = String::new();
            if !new_file {
                let old = std::fs::read(fpath)
                    .map_err(|e| exec_err(format!("Could not write to key file: {e}")))?;
                if old.last().is_some_and(|b| *b != b'\n') {
                    data.push('\n');
                }
            }
            data.push_str(&auth_line);
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(fpath)
                .and_then(|mut f| f.write_all(data.as_bytes()))
                .map_err(|e| exec_err(format!("Could not write to key file: {e}")))?;
            if new_file {
                if nix::unistd::geteuid().is_root() {
                    let _ = std::os::unix::fs::chown(fpath, Some(acct.uid), Some(acct.gid));
                }
                let _ = std::fs::set_permissions(fpath, std::fs::Permissions::from_mode(0o600));
            }
            Ok("new")
        }
    }
}

/// Salt's `ssh.rm_auth_key`: `Key removed`, `Key not present`, ...
pub fn rm_auth_key(
    user: &str,
    key: &str,
    config: &str,
    hash_type: Option<&str>,
) -> Result<String, ExecError> {
    let current = auth_keys(user, config, hash_type)?;
    if !current.iter().any(|(k, _)| k == key) {
        return Ok("Key not present".into());
    }
    let full = config_file(user, config)?;
    if !Path::new(&full).is_file() {
        return Ok(format!("Authorized keys file {full} not present"));
    }
    let Ok(lines) = read_lines(&full) else {
        return Ok("Key not removed".into());
    };
    let mut out = Vec::new();
    for line in lines {
        if line.starts_with('#') {
            out.push(line);
            continue;
        }
        let Some((_, comps)) = split_key_line(line.trim_end()) else {
            continue;
        };
        if comps.len() < 2 {
            out.push(line);
            continue;
        }
        if comps[1] != key {
            out.push(line);
        }
    }
    if let Err(e) = std::fs::write(&full, out.concat()) {
        tracing::warn!("Could not read/write key file: {e}");
        return Ok("Key not removed".into());
    }
    Ok("Key removed".into())
}

fn config_arg(args: &Args, i: usize) -> String {
    args.get_str(i, "config")
        .unwrap_or_else(|| DEFAULT_AUTH_CONFIG.to_string())
}

fn hash_arg(args: &Args, i: usize) -> Option<String> {
    args.get_str(i, "fingerprint_hash_type")
}

fn keys_value(keys: &[(String, AuthKey)]) -> Value {
    Value::Object(
        keys.iter()
            .map(|(k, v)| (k.clone(), v.to_value()))
            .collect(),
    )
}

fn auth_keys_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "auth_keys", args)?;
    let config = config_arg(args, 1);
    let hash = hash_arg(args, 2);
    match args.get(0, "user") {
        Some(Value::Array(users)) => {
            let mut m = Map::new();
            for u in users.iter().filter_map(scalar_text) {
                if let Ok(full) = config_file(&u, &config) {
                    if Path::new(&full).is_file() {
                        m.insert(
                            u.clone(),
                            keys_value(&validate_keys(&full, hash.as_deref())?),
                        );
                    }
                }
            }
            Ok(Value::Object(m))
        }
        Some(v) => {
            let user = scalar_text(v).unwrap_or_default();
            Ok(keys_value(&auth_keys(&user, &config, hash.as_deref())?))
        }
        None => {
            let mut m = Map::new();
            for u in crate::exec::user::list_users()? {
                if let Ok(full) = config_file(&u, &config) {
                    if Path::new(&full).is_file() {
                        m.insert(
                            u.clone(),
                            keys_value(&validate_keys(&full, hash.as_deref())?),
                        );
                    }
                }
            }
            Ok(Value::Object(m))
        }
    }
}

fn check_key_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "check_key", args)?;
    let user = args.require_str(0, "user", "check_key")?;
    let key = args.require_str(1, "key", "check_key")?;
    let enc = args.require_str(2, "enc", "check_key")?;
    let comment = args.require_str(3, "comment", "check_key")?;
    let options = string_list(args.get(4, "options"));
    check_key(
        &user,
        &key,
        &enc,
        &comment,
        &options,
        &config_arg(args, 5),
        hash_arg(args, 7).as_deref(),
    )
    .map(Value::from)
}

fn set_auth_key_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "set_auth_key", args)?;
    let user = args.require_str(0, "user", "set_auth_key")?;
    let key = args.require_str(1, "key", "set_auth_key")?;
    set_auth_key(
        &user,
        &key,
        &args.get_str(2, "enc").unwrap_or_else(|| "ssh-rsa".into()),
        &args.get_str(3, "comment").unwrap_or_default(),
        &string_list(args.get(4, "options")),
        &config_arg(args, 5),
        hash_arg(args, 7).as_deref(),
    )
    .map(Value::from)
}

fn rm_auth_key_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "rm_auth_key", args)?;
    let user = args.require_str(0, "user", "rm_auth_key")?;
    let key = args.require_str(1, "key", "rm_auth_key")?;
    rm_auth_key(
        &user,
        &key,
        &config_arg(args, 2),
        hash_arg(args, 3).as_deref(),
    )
    .map(Value::from)
}

/// The local path of a key file `source` (`salt://` through the file
/// client, or a local path).
pub fn cache_source(host: &Host, source: &str, saltenv: &str) -> Result<Option<String>, ExecError> {
    if let Some(rest) = source.strip_prefix("salt://") {
        let (path, env) = match rest.split_once("?saltenv=") {
            Some((p, e)) => (p, e),
            None => (rest, saltenv),
        };
        return host
            .files
            .cache_file(path, env)
            .map(|p| p.map(|p| p.to_string_lossy().into_owned()))
            .map_err(|e| exec_err(e.to_string()));
    }
    let local = source.strip_prefix("file://").unwrap_or(source);
    Ok(Path::new(local).is_file().then(|| local.to_string()))
}

/// Each key of a key file with its status, or Salt's "no keys" message.
pub type KeyFileCheck = Result<Vec<(String, &'static str)>, String>;

/// Salt's `ssh.check_key_file`: each key of `source` with its
/// [`check_key`] status; `Err` with Salt's message when it holds no key.
pub fn check_key_file(
    user: &str,
    keyfile: &str,
    source: &str,
    config: &str,
    hash_type: Option<&str>,
) -> Result<KeyFileCheck, ExecError> {
    let keys = validate_keys(keyfile, hash_type)?;
    if keys.is_empty() {
        return Ok(Err(format!(
            "No keys detected in {source}. Is file properly formatted?"
        )));
    }
    let mut ret = Vec::new();
    for (key, k) in &keys {
        let status = check_key(user, key, &k.enc, &k.comment, &k.options, config, hash_type)?;
        ret.push((key.clone(), status));
    }
    Ok(Ok(ret))
}

fn check_key_file_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "check_key_file", args)?;
    let user = args.require_str(0, "user", "check_key_file")?;
    let source = args.require_str(1, "source", "check_key_file")?;
    let saltenv = args.get_str(3, "saltenv").unwrap_or_else(|| "base".into());
    let Some(file) = cache_source(host, &source, &saltenv)? else {
        return Ok(Value::Object(Map::new()));
    };
    let checked = check_key_file(
        &user,
        &file,
        &source,
        &config_arg(args, 2),
        hash_arg(args, 4).as_deref(),
    )?;
    Ok(Value::Object(
        checked
            .unwrap_or_default()
            .into_iter()
            .map(|(k, s)| (k, Value::from(s)))
            .collect(),
    ))
}

/// Salt's `ssh.set_auth_key_from_file`: `new`, `replace`, `no change`, or
/// `Err(message)` when the file holds no key.
pub fn set_auth_key_from_file(
    user: &str,
    keyfile: &str,
    source: &str,
    config: &str,
    options: Option<&[String]>,
    hash_type: Option<&str>,
) -> Result<Result<&'static str, String>, ExecError> {
    let keys = validate_keys(keyfile, hash_type)?;
    if keys.is_empty() {
        return Ok(Err(format!(
            "No keys detected in {source}. Is file properly formatted?"
        )));
    }
    let mut results = Vec::new();
    for (key, k) in &keys {
        let opts = options.filter(|o| !o.is_empty()).unwrap_or(&k.options);
        results.push(set_auth_key(
            user, key, &k.enc, &k.comment, opts, config, hash_type,
        )?);
    }
    Ok(Ok(if results.iter().any(|r| r.contains("fail")) {
        "fail"
    } else if results.contains(&"replace") {
        "replace"
    } else if results.contains(&"new") {
        "new"
    } else {
        "no change"
    }))
}

fn set_auth_key_from_file_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "set_auth_key_from_file", args)?;
    let user = args.require_str(0, "user", "set_auth_key_from_file")?;
    let source = args.require_str(1, "source", "set_auth_key_from_file")?;
    let saltenv = args.get_str(3, "saltenv").unwrap_or_else(|| "base".into());
    let file = cache_source(host, &source, &saltenv)?
        .ok_or_else(|| exec_err("Failed to pull key file from salt file server"))?;
    let options = args
        .get(usize::MAX, "options")
        .map(|v| string_list(Some(v)));
    let r = set_auth_key_from_file(
        &user,
        &file,
        &source,
        &config_arg(args, 2),
        options.as_deref(),
        hash_arg(args, 4).as_deref(),
    )?;
    Ok(Value::from(r.unwrap_or("fail")))
}

/// Salt's `ssh.rm_auth_key_from_file`.
pub fn rm_auth_key_from_file(
    user: &str,
    keyfile: &str,
    config: &str,
    hash_type: Option<&str>,
) -> Result<&'static str, ExecError> {
    let keys = validate_keys(keyfile, hash_type)?;
    if keys.is_empty() {
        return Ok("fail");
    }
    let mut rval = String::new();
    for (key, _) in &keys {
        rval.push_str(&rm_auth_key(user, key, config, hash_type)?);
    }
    Ok(if rval.contains("Key not removed") {
        "Key not removed"
    } else if rval.contains("Key removed") {
        "Key removed"
    } else {
        "Key not present"
    })
}

fn rm_auth_key_from_file_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "rm_auth_key_from_file", args)?;
    let user = args.require_str(0, "user", "rm_auth_key_from_file")?;
    let source = args.require_str(1, "source", "rm_auth_key_from_file")?;
    let saltenv = args.get_str(3, "saltenv").unwrap_or_else(|| "base".into());
    let file = cache_source(host, &source, &saltenv)?
        .ok_or_else(|| exec_err("Failed to pull key file from salt file server"))?;
    rm_auth_key_from_file(
        &user,
        &file,
        &config_arg(args, 2),
        hash_arg(args, 4).as_deref(),
    )
    .map(Value::from)
}

// ---- known_hosts ----

/// Salt's `{'status': 'error', 'error': ...}`.
pub fn status_error(msg: impl Into<String>) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), Value::from("error"));
    m.insert("error".into(), Value::from(msg.into()));
    Value::Object(m)
}

/// Salt's `_get_known_hosts_file`: the absolute path, or the error dict.
pub fn known_hosts_file(config: Option<&str>, user: Option<&str>) -> Result<String, Value> {
    let config = config
        .filter(|c| !c.is_empty())
        .unwrap_or(if user.is_some() {
            ".ssh/known_hosts"
        } else {
            "/etc/ssh/ssh_known_hosts"
        });
    if config.starts_with('/') {
        return Ok(config.to_string());
    }
    match user {
        Some(u) => match account(u) {
            Some(a) => Ok(Path::new(&a.home)
                .join(config)
                .to_string_lossy()
                .into_owned()),
            None => Err(status_error(format!("User {u} does not exist"))),
        },
        None => Err(status_error("Cannot determine absolute path to file.")),
    }
}

fn ssh_hostname(hostname: &str, port: Option<i64>) -> String {
    match port {
        None | Some(DEFAULT_SSH_PORT) => hostname.to_string(),
        Some(p) => format!("[{hostname}]:{p}"),
    }
}

fn run_tool(prog: &str, args: &[&str]) -> Result<String, ExecError> {
    tracing::debug!(prog, ?args, "running");
    let out = std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| exec_err(format!("cannot run {prog}: {e}; install openssh-client")))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(text.trim_end().to_string())
}

/// One known_hosts entry as Salt returns it.
fn parse_openssh_output(text: &str, hash_type: Option<&str>) -> Result<Vec<Value>, ExecError> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [hostname, enc, key] = parts.as_slice() else {
            continue;
        };
        let Some(fp) = fingerprint(key, hash_type)? else {
            continue;
        };
        let mut m = Map::new();
        m.insert("hostname".into(), Value::from(*hostname));
        m.insert("key".into(), Value::from(*key));
        m.insert("enc".into(), Value::from(*enc));
        m.insert("fingerprint".into(), Value::from(fp));
        out.push(Value::Object(m));
    }
    Ok(out)
}

/// Salt's `ssh.get_known_host_entries`: `Ok(None)` when none, `Err` with
/// the error dict.
pub fn get_known_host_entries(
    user: Option<&str>,
    hostname: &str,
    config: Option<&str>,
    port: Option<i64>,
    hash_type: Option<&str>,
) -> Result<Result<Option<Vec<Value>>, Value>, ExecError> {
    let full = match known_hosts_file(config, user) {
        Ok(f) => f,
        Err(e) => return Ok(Err(e)),
    };
    let text = run_tool(
        "ssh-keygen",
        &["-F", &ssh_hostname(hostname, port), "-f", &full],
    )?;
    let entries = parse_openssh_output(&text, hash_type)?;
    Ok(Ok((!entries.is_empty()).then_some(entries)))
}

/// Salt's `ssh.recv_known_host_entries`: the keys `ssh-keyscan` gets.
pub fn recv_known_host_entries(
    hostname: &str,
    enc: Option<&str>,
    port: Option<i64>,
    hash_known_hosts: bool,
    timeout: i64,
    hash_type: Option<&str>,
) -> Result<Option<Vec<Value>>, ExecError> {
    let mut args: Vec<String> = Vec::new();
    if let Some(p) = port {
        args.extend(["-p".into(), p.to_string()]);
    }
    if let Some(e) = enc {
        args.extend(["-t".into(), e.to_string()]);
    }
    if hash_known_hosts {
        args.push("-H".into());
    }
    args.extend(["-T".into(), timeout.to_string(), hostname.to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut text = String::new();
    for _ in 0..5 {
        text = run_tool("ssh-keyscan", &argv)?;
        if !text.is_empty() {
            break;
        }
    }
    let entries = parse_openssh_output(&text, hash_type)?;
    Ok((!entries.is_empty()).then_some(entries))
}

fn port_arg(args: &Args, i: usize) -> Result<Option<i64>, ExecError> {
    match args.get(i, "port") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => scalar_text(v)
            .and_then(|s| s.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| ExecError::Invocation(format!("invalid port: {v}"))),
    }
}

fn opt_str(args: &Args, i: usize, key: &str) -> Option<String> {
    args.get_str(i, key).filter(|s| !s.is_empty())
}

fn get_known_host_entries_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "get_known_host_entries", args)?;
    let user = opt_str(args, 0, "user");
    let hostname = args.require_str(1, "hostname", "get_known_host_entries")?;
    Ok(
        match get_known_host_entries(
            user.as_deref(),
            &hostname,
            opt_str(args, 2, "config").as_deref(),
            port_arg(args, 3)?,
            hash_arg(args, 4).as_deref(),
        )? {
            Ok(Some(v)) => Value::Array(v),
            Ok(None) => Value::Null,
            Err(e) => e,
        },
    )
}

fn recv_known_host_entries_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "recv_known_host_entries", args)?;
    let hostname = args.require_str(0, "hostname", "recv_known_host_entries")?;
    let timeout = args
        .get_str(4, "timeout")
        .and_then(|t| t.parse().ok())
        .unwrap_or(5);
    Ok(recv_known_host_entries(
        &hostname,
        opt_str(args, 1, "enc").as_deref(),
        port_arg(args, 2)?,
        args.get_bool(3, "hash_known_hosts", true),
        timeout,
        hash_arg(args, 5).as_deref(),
    )?
    .map(Value::Array)
    .unwrap_or(Value::Null))
}

fn entry_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Salt's `ssh.check_known_host`: `add`, `update`, `exists`, or the error dict.
pub fn check_known_host(
    user: Option<&str>,
    hostname: &str,
    key: Option<&str>,
    fp: Option<&str>,
    config: Option<&str>,
    port: Option<i64>,
    hash_type: Option<&str>,
) -> Result<Value, ExecError> {
    let config = config
        .filter(|c| !c.is_empty())
        .unwrap_or(if user.is_some() {
            ".ssh/known_hosts"
        } else {
            "/etc/ssh/ssh_known_hosts"
        });
    let entries = match get_known_host_entries(user, hostname, Some(config), port, hash_type)? {
        Err(e) => return Ok(e),
        Ok(None) => return Ok(Value::from("add")),
        Ok(Some(e)) => e,
    };
    let has = |field: &str, want: &str| entries.iter().any(|e| entry_field(e, field) == Some(want));
    Ok(Value::from(match (key, fp) {
        (Some(k), _) => {
            if has("key", k) {
                "exists"
            } else {
                "update"
            }
        }
        (None, Some(f)) => {
            if has("fingerprint", f) {
                "exists"
            } else {
                "update"
            }
        }
        _ => "exists",
    }))
}

fn check_known_host_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "check_known_host", args)?;
    let Some(hostname) = opt_str(args, 1, "hostname") else {
        return Ok(status_error("hostname argument required"));
    };
    check_known_host(
        opt_str(args, 0, "user").as_deref(),
        &hostname,
        opt_str(args, 2, "key").as_deref(),
        opt_str(args, 3, "fingerprint").as_deref(),
        opt_str(args, 4, "config").as_deref(),
        port_arg(args, 5)?,
        hash_arg(args, 6).as_deref(),
    )
}

fn chown_to(user: Option<&str>, path: &Path) {
    if let (true, Some(acct)) = (nix::unistd::geteuid().is_root(), user.and_then(account)) {
        let _ = std::os::unix::fs::chown(path, Some(acct.uid), Some(acct.gid));
    }
}

/// Salt's `ssh.rm_known_host`.
pub fn rm_known_host(
    user: Option<&str>,
    hostname: &str,
    config: Option<&str>,
    port: Option<i64>,
) -> Result<Value, ExecError> {
    let full = match known_hosts_file(config, user) {
        Ok(f) => f,
        Err(e) => return Ok(e),
    };
    if !Path::new(&full).is_file() {
        return Ok(status_error(format!(
            "Known hosts file {full} does not exist"
        )));
    }
    let out = run_tool(
        "ssh-keygen",
        &["-R", &ssh_hostname(hostname, port), "-f", &full],
    )?;
    chown_to(user, Path::new(&full));
    let mut m = Map::new();
    m.insert("status".into(), Value::from("removed"));
    m.insert("comment".into(), Value::from(out));
    Ok(Value::Object(m))
}

fn rm_known_host_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "rm_known_host", args)?;
    let Some(hostname) = opt_str(args, 1, "hostname") else {
        return Ok(status_error("hostname argument required"));
    };
    rm_known_host(
        opt_str(args, 0, "user").as_deref(),
        &hostname,
        opt_str(args, 2, "config").as_deref(),
        port_arg(args, 3)?,
    )
}

/// Salt's `ssh.hash_known_hosts`: `ssh-keygen -H` on the file.
pub fn hash_known_hosts(user: Option<&str>, config: Option<&str>) -> Result<Value, ExecError> {
    let full = match known_hosts_file(config, user) {
        Ok(f) => f,
        Err(e) => return Ok(e),
    };
    let path = Path::new(&full);
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(status_error(format!(
            "Known hosts file {full} does not exist"
        )));
    };
    let out = run_tool("ssh-keygen", &["-H", "-f", &full])?;
    let _ = std::fs::set_permissions(path, meta.permissions());
    // ssh-keygen -H leaves the unhashed copy beside it, as Salt does.
    chown_to(user, path);
    let mut m = Map::new();
    m.insert("status".into(), Value::from("updated"));
    m.insert("comment".into(), Value::from(out));
    Ok(Value::Object(m))
}

fn hash_known_hosts_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "hash_known_hosts", args)?;
    hash_known_hosts(
        opt_str(args, 0, "user").as_deref(),
        opt_str(args, 1, "config").as_deref(),
    )
}

/// What [`set_known_host`] is asked for.
#[derive(Debug, Clone, Default)]
pub struct KnownHost {
    /// `user=`: relative configs are under this user's home.
    pub user: Option<String>,
    /// The host name (or address).
    pub hostname: String,
    /// The expected fingerprint (of a key fetched with ssh-keyscan).
    pub fingerprint: Option<String>,
    /// The key itself (then nothing is fetched).
    pub key: Option<String>,
    /// A non-default port.
    pub port: Option<i64>,
    /// The key type.
    pub enc: Option<String>,
    /// The known_hosts file.
    pub config: Option<String>,
    /// Hash the host names (`ssh-keygen -H`).
    pub hash_known_hosts: bool,
    /// ssh-keyscan's timeout.
    pub timeout: i64,
    /// The fingerprint hash (`sha256` by default).
    pub fingerprint_hash_type: Option<String>,
}

/// Salt's `ssh.set_known_host`: a dict with `status` `exists`, `updated`
/// (with `old`/`new`) or `error`.
pub fn set_known_host(req: &KnownHost) -> Result<Value, ExecError> {
    let hash = req.fingerprint_hash_type.as_deref();
    if req.hostname.is_empty() {
        return Ok(status_error("hostname argument required"));
    }
    if req.port.is_some_and(|p| p != DEFAULT_SSH_PORT) && req.hash_known_hosts {
        return Ok(status_error(
            "argument port can not be used in conjunction with argument hash_known_hosts",
        ));
    }
    let stored = match get_known_host_entries(
        req.user.as_deref(),
        &req.hostname,
        req.config.as_deref(),
        req.port,
        hash,
    )? {
        Err(e) => return Ok(e),
        Ok(s) => s,
    };
    let stored_keys: Vec<String> = stored
        .iter()
        .flatten()
        .filter(|h| req.enc.is_none() || entry_field(h, "enc") == req.enc.as_deref())
        .filter_map(|h| entry_field(h, "key").map(str::to_string))
        .collect();
    let stored_fps: Vec<&str> = stored
        .iter()
        .flatten()
        .filter_map(|h| entry_field(h, "fingerprint"))
        .collect();
    let update = stored.is_none()
        || req
            .fingerprint
            .as_deref()
            .is_some_and(|f| !stored_fps.contains(&f))
        || req
            .key
            .as_deref()
            .is_some_and(|k| !stored_keys.iter().any(|s| s == k));
    let check = !update && req.key.is_none() && req.fingerprint.is_none();
    let exists = |keys: &[String]| {
        let mut m = Map::new();
        m.insert("status".into(), Value::from("exists"));
        m.insert("keys".into(), Value::from(keys.to_vec()));
        Value::Object(m)
    };
    if !update && !check {
        return Ok(exists(&stored_keys));
    }
    let remote: Vec<Value> = match &req.key {
        Some(key) => {
            let mut m = Map::new();
            m.insert("hostname".into(), Value::from(req.hostname.as_str()));
            m.insert(
                "enc".into(),
                req.enc.clone().map(Value::from).unwrap_or(Value::Null),
            );
            m.insert("key".into(), Value::from(key.as_str()));
            vec![Value::Object(m)]
        }
        None => {
            let Some(remote) = recv_known_host_entries(
                &req.hostname,
                req.enc.as_deref(),
                req.port,
                req.hash_known_hosts,
                req.timeout,
                hash,
            )?
            else {
                return Ok(status_error("Unable to receive remote host keys"));
            };
            if let Some(f) = &req.fingerprint {
                if !remote
                    .iter()
                    .any(|h| entry_field(h, "fingerprint") == Some(f))
                {
                    return Ok(status_error("Remote host public keys found but none of their fingerprints match the one you have provided"));
                }
            }
            if check {
                let known: std::collections::BTreeSet<&str> = remote
                    .iter()
                    .filter_map(|h| entry_field(h, "key"))
                    .collect();
                let have: std::collections::BTreeSet<&str> =
                    stored_keys.iter().map(String::as_str).collect();
                if known == have {
                    return Ok(exists(&stored_keys));
                }
            }
            remote
        }
    };
    let full = match known_hosts_file(req.config.as_deref(), req.user.as_deref()) {
        Ok(f) => f,
        Err(e) => return Ok(e),
    };
    let path = Path::new(&full);
    let origmode = std::fs::metadata(path).ok().map(|m| m.permissions().mode());
    if origmode.is_some() {
        let text = run_tool(
            "ssh-keygen",
            &["-F", &ssh_hostname(&req.hostname, req.port), "-f", &full],
        )?;
        // ssh-keygen -F prints "# Host <name> found: line N" above each match.
        let lines: Vec<&str> = text.lines().collect();
        let mut remove: Vec<usize> = Vec::new();
        for pair in lines.chunks(2) {
            let [head, entry] = pair else { continue };
            let Some(no) = head.split_whitespace().last().and_then(|n| n.parse().ok()) else {
                continue;
            };
            let parts: Vec<&str> = entry.split_whitespace().collect();
            let line_enc = parts.len().checked_sub(2).and_then(|i| parts.get(i));
            if req.enc.is_some() && line_enc.copied() != req.enc.as_deref() {
                continue;
            }
            remove.push(no);
        }
        if !remove.is_empty() {
            let old = std::fs::read_to_string(path).map_err(|e| {
                exec_err(format!(
                    "Couldn't remove old entry(ies) from known hosts file: '{e}'"
                ))
            })?;
            let mut kept: Vec<&str> = old.split_inclusive('\n').collect();
            remove.sort_unstable();
            for no in remove.into_iter().rev() {
                if no >= 1 && no <= kept.len() {
                    kept.remove(no - 1);
                }
            }
            std::fs::write(path, kept.concat()).map_err(|e| {
                exec_err(format!(
                    "Couldn't remove old entry(ies) from known hosts file: '{e}'"
                ))
            })?;
        }
    }
    let mut new_lines = String::new();
    for entry in &remote {
        let host = entry_field(entry, "hostname").unwrap_or_default();
        let enc = entry
            .get("enc")
            .map(crate::exec::py_str)
            .unwrap_or_default();
        let key = entry_field(entry, "key").unwrap_or_default();
        if req.hash_known_hosts
            || matches!(req.port, None | Some(DEFAULT_SSH_PORT))
            || host.contains(':')
        {
            new_lines.push_str(&format!("{host} {enc} {key}\n"));
        } else {
            new_lines.push_str(&format!(
                "[{host}]:{} {enc} {key}\n",
                req.port.unwrap_or(DEFAULT_SSH_PORT)
            ));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.exists()) {
        if std::fs::create_dir_all(dir).is_ok() && req.user.is_some() {
            chown_to(req.user.as_deref(), dir);
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .and_then(|mut f| f.write_all(new_lines.as_bytes()))
        .map_err(|e| exec_err(format!("Couldn't append to known hosts file: '{e}'")))?;
    chown_to(req.user.as_deref(), path);
    let _ = std::fs::set_permissions(
        path,
        std::fs::Permissions::from_mode(origmode.unwrap_or(0o600)),
    );
    if req.key.is_some() && req.hash_known_hosts {
        hash_known_hosts(req.user.as_deref(), Some(&full))?;
    }
    let mut m = Map::new();
    m.insert("status".into(), Value::from("updated"));
    m.insert(
        "old".into(),
        stored.map(Value::Array).unwrap_or(Value::Null),
    );
    m.insert("new".into(), Value::Array(remote));
    Ok(Value::Object(m))
}

fn set_known_host_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "set_known_host", args)?;
    let req = KnownHost {
        user: opt_str(args, 0, "user"),
        hostname: opt_str(args, 1, "hostname").unwrap_or_default(),
        fingerprint: opt_str(args, 2, "fingerprint"),
        key: opt_str(args, 3, "key"),
        port: port_arg(args, 4)?,
        enc: opt_str(args, 5, "enc"),
        config: opt_str(args, 6, "config"),
        hash_known_hosts: args.get_bool(7, "hash_known_hosts", true),
        timeout: args
            .get_str(8, "timeout")
            .and_then(|t| t.parse().ok())
            .unwrap_or(5),
        fingerprint_hash_type: hash_arg(args, 9),
    };
    set_known_host(&req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_colon_hex_of_the_decoded_key() {
        // "AAAA" is three zero bytes.
        assert_eq!(
            fingerprint("AAAA", Some("md5")).ok().flatten().as_deref(),
            Some("69:3e:9a:f8:4d:3d:fc:c7:1e:64:0e:00:5b:dc:5e:2e")
        );
        assert_eq!(fingerprint("not base64!", None).ok().flatten(), None);
        assert!(fingerprint("AAAA", Some("crc32")).is_err());
    }

    #[test]
    fn key_lines_split_options_type_key_comment() {
        let (opts, comps) =
            split_key_line("no-pty,command=\"x\" ssh-ed25519 AAAAC3 me@host").unwrap_or_default();
        assert_eq!(opts, "no-pty,command=\"x\"");
        assert_eq!(comps, vec!["ssh-ed25519", "AAAAC3", "me@host"]);
        assert_eq!(
            expand_path("%h/.ssh/%u%%", "bob", "/home/bob").ok(),
            Some("/home/bob/.ssh/bob%".into())
        );
        assert!(expand_path("%x", "bob", "/h").is_err());
    }
}
