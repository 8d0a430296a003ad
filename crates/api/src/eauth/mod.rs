//! Salt's `external_auth` backends halite-api speaks: `pam` (the host's
//! PAM stack), `file` (salt/auth/file.py's text and htpasswd files) and
//! `auto` (any password: for tests and demos only, as in Salt).
//!
//! A backend answers whether the password is right and which groups the
//! user is in (for `group%` ACL entries): PAM and `auto` read the host's
//! groups, `file` has none of its own either, so both read them from the
//! system as Salt's `groups()` does.

pub mod file;
pub mod pam;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Why a login was refused (never which part of the credentials was wrong
/// to the client; the log has the detail).
#[derive(Debug, thiserror::Error)]
pub enum EauthError {
    /// The backend is not one halite knows.
    #[error("eauth backend '{0}' is not available; use pam, file or auto")]
    Unknown(String),
    /// The backend is not configured under `external_auth`.
    #[error("eauth backend '{0}' is not configured under external_auth in the master config")]
    NotConfigured(String),
    /// The backend's own configuration is wrong (file missing...).
    #[error("eauth backend misconfigured: {0}")]
    Misconfigured(String),
    /// The credentials are wrong.
    #[error("bad username or password")]
    Denied,
}

/// The names of the backends halite implements.
pub const BACKENDS: [&str; 3] = ["pam", "file", "auto"];

/// Checks `username`/`password` against backend `eauth` configured by
/// `external_auth`; the user's groups when accepted.
pub fn authenticate(
    external_auth: &Map<String, Value>,
    eauth: &str,
    username: &str,
    password: &str,
) -> Result<BTreeSet<String>, EauthError> {
    if !BACKENDS.contains(&eauth) {
        return Err(EauthError::Unknown(eauth.to_string()));
    }
    let Some(conf) = external_auth.get(eauth).and_then(Value::as_object) else {
        return Err(EauthError::NotConfigured(eauth.to_string()));
    };
    // CVE-2020-25592: an empty user or password never authenticates.
    if username.is_empty() || password.is_empty() {
        return Err(EauthError::Denied);
    }
    let ok = match eauth {
        "pam" => pam::authenticate(conf, username, password)?,
        "file" => file::authenticate(conf, username, password)?,
        _ => true,
    };
    if !ok {
        return Err(EauthError::Denied);
    }
    Ok(system_groups(username))
}

/// The groups of `user` on this host (primary and supplementary), as
/// Salt's `salt.utils.user.get_group_list`; empty for an unknown user.
pub fn system_groups(user: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Ok(Some(u)) = nix::unistd::User::from_name(user) else {
        return out;
    };
    let Ok(name) = std::ffi::CString::new(user) else {
        return out;
    };
    if let Ok(gids) = nix::unistd::getgrouplist(&name, u.gid) {
        for gid in gids {
            if let Ok(Some(g)) = nix::unistd::Group::from_gid(gid) {
                out.insert(g.name);
            }
        }
    }
    out
}
