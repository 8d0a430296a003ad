//! Roles (users and groups are both roles): how Salt stores a password
//! (md5 or SCRAM-SHA-256 verifiers), checks one against the server's, and
//! spells `CREATE ROLE`/`ALTER ROLE` options (`_role_cmd_args`).

use base64::Engine;
use halite_state::Value;
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use sha2::Sha256;

use crate::exec::ExecError;

/// How a role's password is stored (Salt's `encrypted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encryption {
    /// `md5` (also `True` and the default).
    Md5,
    /// `scram-sha-256`.
    Scram,
    /// `False`: stored as given.
    Plain,
}

impl Encryption {
    /// Reads Salt's `encrypted` argument (`None`, `True`, `False`, `md5`,
    /// `scram-sha-256`).
    pub fn from_value(v: Option<&Value>) -> Result<Self, ExecError> {
        match v {
            None | Some(Value::Null) | Some(Value::Bool(true)) => Ok(Encryption::Md5),
            Some(Value::Bool(false)) => Ok(Encryption::Plain),
            Some(Value::String(s)) if s == "md5" => Ok(Encryption::Md5),
            Some(Value::String(s)) if s == "scram-sha-256" => Ok(Encryption::Scram),
            Some(other) => Err(ExecError::Invocation(format!(
                "Unknown password algorithm: {}: use md5, scram-sha-256, True or False",
                crate::exec::py_str(other)
            ))),
        }
    }
}

/// Salt's `_md5_password`: `md5` + hex md5 of password then role name.
pub fn md5_password(role: &str, password: &str) -> String {
    let digest = Md5::digest(format!("{password}{role}").as_bytes());
    format!("md5{}", hex::encode(digest))
}

/// Salt's `_scram_sha_256`: a SCRAM-SHA-256 verifier of `password` with
/// `salt` (16 random bytes when `None`) and `iterations`.
pub fn scram_sha_256(
    password: &str,
    salt: Option<&[u8]>,
    iterations: u32,
) -> Result<String, ExecError> {
    let mut fresh = [0u8; 16];
    let salt = match salt {
        Some(s) => s,
        None => {
            getrandom::getrandom(&mut fresh)
                .map_err(|e| ExecError::Execution(format!("no random salt for SCRAM: {e}")))?;
            &fresh
        }
    };
    let mut salted = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut salted);
    let hmac = |key: &[u8], msg: &[u8]| -> Result<Vec<u8>, ExecError> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key)
            .map_err(|e| ExecError::Execution(format!("SCRAM key: {e}")))?;
        mac.update(msg);
        Ok(mac.finalize().into_bytes().to_vec())
    };
    let client_key = hmac(&salted, b"Client Key")?;
    let stored_key = Sha256::digest(&client_key);
    let server_key = hmac(&salted, b"Server Key")?;
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(format!(
        "SCRAM-SHA-256${iterations}:{}${}:{}",
        b64.encode(salt),
        b64.encode(stored_key),
        b64.encode(server_key)
    ))
}

/// Salt's `_maybe_encrypt_password`: the verifier to store for
/// `password` (a given verifier is kept as it is).
pub fn maybe_encrypt(role: &str, password: &str, enc: Encryption) -> Result<String, ExecError> {
    match enc {
        Encryption::Scram if !password.starts_with("SCRAM-SHA-256") => {
            scram_sha_256(password, None, 4096)
        }
        Encryption::Md5 if !password.starts_with("md5") => {
            tracing::warn!("The md5 password algorithm was deprecated in PostgreSQL 10");
            Ok(md5_password(role, password))
        }
        Encryption::Plain => {
            tracing::warn!("Unencrypted passwords were removed in PostgreSQL 10");
            Ok(password.to_string())
        }
        _ => Ok(password.to_string()),
    }
}

/// Salt's `_verify_password`: whether `password` (plain or a verifier)
/// is what the server stores as `verifier`.
pub fn verify_password(role: &str, password: &str, verifier: &str, enc: Encryption) -> bool {
    match enc {
        Encryption::Md5 => {
            let expected = if password.starts_with("md5") {
                password.to_string()
            } else {
                md5_password(role, password)
            };
            verifier == expected
        }
        Encryption::Scram => {
            if password.starts_with("SCRAM-SHA-256") {
                return verifier == password;
            }
            let Some((iterations, salt)) = scram_params(verifier) else {
                return false;
            };
            scram_sha_256(password, Some(&salt), iterations).is_ok_and(|e| e == verifier)
        }
        Encryption::Plain => verifier == password,
    }
}

/// The iterations and salt of a `SCRAM-SHA-256$<iter>:<salt>$...` verifier.
fn scram_params(verifier: &str) -> Option<(u32, Vec<u8>)> {
    let rest = verifier.strip_prefix("SCRAM-SHA-256$")?;
    let (iter, rest) = rest.split_once(':')?;
    let (salt, _) = rest.split_once('$')?;
    let salt = base64::engine::general_purpose::STANDARD
        .decode(salt)
        .ok()?;
    Some((iter.parse().ok()?, salt))
}

/// A role's password argument (`rolepassword`): Salt treats a non-empty
/// string and a boolean differently, anything else as not given.
#[derive(Debug, Clone, PartialEq)]
pub enum RolePassword {
    /// Not given (or empty): no PASSWORD clause.
    None,
    /// `True`/`False`: `PASSWORD` / `NOPASSWORD` without a value.
    Flag(bool),
    /// A password or verifier.
    Text(String),
}

impl RolePassword {
    /// Reads `rolepassword`.
    pub fn from_value(v: Option<&Value>) -> Self {
        match v {
            Some(Value::Bool(b)) => RolePassword::Flag(*b),
            Some(Value::String(s)) if !s.is_empty() => RolePassword::Text(s.clone()),
            Some(Value::Number(n)) => RolePassword::Text(n.to_string()),
            _ => RolePassword::None,
        }
    }
}

/// The options of `CREATE ROLE`/`ALTER ROLE` (`None`: leave as is).
#[derive(Debug, Clone, Default)]
pub struct RoleOptions {
    /// `INHERIT`.
    pub inherit: Option<bool>,
    /// `CREATEDB`.
    pub createdb: Option<bool>,
    /// `CREATEROLE`.
    pub createroles: Option<bool>,
    /// `SUPERUSER`.
    pub superuser: Option<bool>,
    /// `REPLICATION`.
    pub replication: Option<bool>,
    /// `LOGIN`.
    pub login: Option<bool>,
    /// `CONNECTION LIMIT n` (the text Salt puts there).
    pub connlimit: Option<Value>,
    /// `encrypted`.
    pub encrypted: Option<Value>,
    /// `rolepassword`.
    pub password: Option<Value>,
    /// `VALID UNTIL`.
    pub valid_until: Option<String>,
    /// Roles to `GRANT` this one into: a list or a comma-separated string.
    pub groups: Option<Value>,
}

/// What kind of role a create call is for: users log in by default,
/// groups don't; both inherit (Salt's `typ_`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleKind {
    /// `user_create`.
    User,
    /// `group_create`.
    Group,
    /// Updates: no defaults.
    Role,
}

/// `flag`, `NOflag` or nothing (Salt's `_add_role_flag`).
fn flag(out: &mut String, test: Option<bool>, cond: Option<bool>, name: &str, prefix: &str) {
    if let Some(t) = test {
        if cond.unwrap_or(t) {
            out.push_str(&format!(" {name}"));
        } else {
            out.push_str(&format!(" {prefix}{name}"));
        }
    }
}

/// The groups argument as names: a list, or a comma-separated string.
pub fn group_names(groups: &Value) -> Vec<String> {
    match groups {
        Value::Array(items) => items
            .iter()
            .filter_map(super::conn::text)
            .flat_map(|s| s.split(',').map(str::to_string).collect::<Vec<_>>())
            .collect(),
        Value::Null => Vec::new(),
        other => super::conn::text(other)
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

/// Salt's `_role_cmd_args`: the options after `CREATE ROLE "x" WITH`,
/// then one `; GRANT "group" TO "x"` per group. `current_superuser` is
/// the role's present flag on updates (an unchanged SUPERUSER is left
/// out, as non-superusers may not name it).
pub fn role_cmd_args(
    name: &str,
    kind: RoleKind,
    o: &RoleOptions,
    current_superuser: Option<bool>,
) -> Result<String, ExecError> {
    let inherit = o.inherit.or((kind != RoleKind::Role).then_some(true));
    let login = o.login.or(match kind {
        RoleKind::User => Some(true),
        RoleKind::Group => Some(false),
        RoleKind::Role => None,
    });
    let enc_given = o.encrypted.as_ref().filter(|v| !v.is_null());
    let enc = Encryption::from_value(enc_given)?;
    let password = RolePassword::from_value(o.password.as_ref());
    let mut out = String::new();
    flag(&mut out, inherit, None, "INHERIT", "NO");
    flag(&mut out, o.createdb, None, "CREATEDB", "NO");
    flag(&mut out, o.createroles, None, "CREATEROLE", "NO");
    let skip_superuser = current_superuser.is_some_and(|cur| o.superuser.unwrap_or(false) == cur);
    if !skip_superuser {
        flag(&mut out, o.superuser, None, "SUPERUSER", "NO");
    }
    flag(&mut out, o.replication, None, "REPLICATION", "NO");
    flag(&mut out, login, None, "LOGIN", "NO");
    if let Some(limit) = o.connlimit.as_ref().filter(|v| !v.is_null()) {
        flag(
            &mut out,
            Some(crate::exec::py_truth(limit)),
            None,
            "CONNECTION LIMIT",
            "NO",
        );
        out.push_str(&format!(" {}", crate::exec::py_str(limit)));
    }
    match &password {
        RolePassword::Text(pw) => {
            // The default is md5, so ENCRYPTED unless encrypted=False.
            flag(
                &mut out,
                Some(true),
                Some(enc != Encryption::Plain),
                "ENCRYPTED",
                "UN",
            );
            let stored = maybe_encrypt(name, &pw.replace('\'', "''"), enc)?;
            out.push_str(&format!(" PASSWORD '{stored}'"));
        }
        RolePassword::Flag(b) => flag(&mut out, Some(*b), None, "PASSWORD", "NO"),
        RolePassword::None => {}
    }
    if let Some(until) = &o.valid_until {
        flag(&mut out, Some(!until.is_empty()), None, "VALID UNTIL", "NO");
        if !until.is_empty() {
            out.push_str(&format!(" '{}'", until.replace('\'', "''")));
        }
    }
    if let Some(groups) = &o.groups {
        if crate::exec::py_truth(groups) {
            for group in group_names(groups) {
                out.push_str(&format!("; GRANT \"{group}\" TO \"{name}\""));
            }
        }
    }
    Ok(out.trim_start().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_is_postgres_own() {
        // SELECT 'md5' || md5('secret' || 'alice')
        assert_eq!(
            md5_password("alice", "secret"),
            "md54a0a68b43b6cd5cf266fa02f196e2371"
        );
    }

    #[test]
    fn scram_verifies_against_its_own_salt() {
        let v = scram_sha_256("pw", Some(b"0123456789abcdef"), 4096).unwrap();
        assert!(v.starts_with("SCRAM-SHA-256$4096:MDEyMzQ1Njc4OWFiY2RlZg==$"));
        assert!(verify_password("r", "pw", &v, Encryption::Scram));
        assert!(!verify_password("r", "other", &v, Encryption::Scram));
    }

    #[test]
    fn user_create_options_in_salt_order() {
        let o = RoleOptions {
            createdb: Some(true),
            password: Some(Value::from("pw")),
            groups: Some(Value::from("g1,g2")),
            ..RoleOptions::default()
        };
        let args = role_cmd_args("u", RoleKind::User, &o, None).unwrap();
        assert_eq!(
            args,
            format!(
                "INHERIT CREATEDB LOGIN ENCRYPTED PASSWORD '{}'; GRANT \"g1\" TO \"u\"; GRANT \"g2\" TO \"u\"",
                md5_password("u", "pw")
            )
        );
    }
}
