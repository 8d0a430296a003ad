//! `eauth: file` (salt/auth/file.py): users and passwords in a file named
//! by `^filename`. `^filetype: text` (the default) splits each line on
//! `^field_separator` (`:`) and compares field `^password_field` (2) of the
//! line whose field `^username_field` (1) is the user, in plain text or
//! as the hex digest `^hashtype` names (md5, sha1, sha256, sha512...);
//! `^filetype: htpasswd` reads Apache's format: bcrypt (`$2y$`), SHA-crypt
//! (`$5$`, `$6$`), MD5-crypt (`$1$`, Apache's `$apr1$`), `{SHA}` and DES
//! crypt (passlib's htpasswd schemes).

use std::path::Path;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use md5::Md5;
use serde_json::{Map, Value};
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

use super::EauthError;

fn opt<'a>(conf: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    conf.get(&format!("^{key}"))
}

fn opt_str(conf: &Map<String, Value>, key: &str, default: &str) -> String {
    opt(conf, key)
        .map(halite_salt_rules::pyfmt::python_str)
        .unwrap_or_else(|| default.to_string())
}

/// Whether the file of `conf` accepts `username`/`password`.
pub fn authenticate(
    conf: &Map<String, Value>,
    username: &str,
    password: &str,
) -> Result<bool, EauthError> {
    let Some(filename) = opt(conf, "filename").and_then(Value::as_str) else {
        return Err(EauthError::Misconfigured(
            "external_auth:file needs ^filename: the path of the password file".into(),
        ));
    };
    let text = std::fs::read_to_string(Path::new(filename)).map_err(|e| {
        EauthError::Misconfigured(format!(
            "cannot read external_auth:file ^filename {filename}: {e}"
        ))
    })?;
    match opt_str(conf, "filetype", "text").to_lowercase().as_str() {
        "text" => text_file(conf, &text, username, password),
        "htpasswd" => Ok(htpasswd(&text, username, password)),
        other => Err(EauthError::Misconfigured(format!(
            "external_auth:file ^filetype {other} is not supported; use text or htpasswd"
        ))),
    }
}

fn field_number(conf: &Map<String, Value>, key: &str, default: usize) -> Result<usize, EauthError> {
    match opt(conf, key) {
        None => Ok(default),
        Some(v) => halite_salt_rules::pyfmt::python_str(v)
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                EauthError::Misconfigured(format!(
                    "external_auth:file ^{key} must be a number from 1"
                ))
            }),
    }
}

fn text_file(
    conf: &Map<String, Value>,
    text: &str,
    username: &str,
    password: &str,
) -> Result<bool, EauthError> {
    let sep = opt_str(conf, "field_separator", ":");
    let user_field = field_number(conf, "username_field", 1)? - 1;
    let pass_field = field_number(conf, "password_field", 2)? - 1;
    let hashtype = opt_str(conf, "hashtype", "plaintext");
    for line in text.lines() {
        let fields: Vec<&str> = line.trim().split(sep.as_str()).collect();
        let (Some(this_user), Some(this_pass)) = (fields.get(user_field), fields.get(pass_field))
        else {
            // Salt stops at the first line without the fields.
            tracing::error!("external_auth:file: a line of the password file lacks the username or password field");
            return Ok(false);
        };
        if *this_user == username {
            return if hashtype == "plaintext" {
                Ok(constant_eq(this_pass, password))
            } else {
                let digest = hex_digest(&hashtype, password)?;
                Ok(constant_eq(this_pass, &digest))
            };
        }
    }
    Ok(false)
}

/// Salt's `hashutil.digest(password, hashtype)`: the hex digest.
fn hex_digest(hashtype: &str, password: &str) -> Result<String, EauthError> {
    let p = password.as_bytes();
    Ok(match hashtype {
        "md5" => hex::encode(Md5::digest(p)),
        "sha1" => hex::encode(Sha1::digest(p)),
        "sha224" => hex::encode(Sha224::digest(p)),
        "sha256" => hex::encode(Sha256::digest(p)),
        "sha384" => hex::encode(Sha384::digest(p)),
        "sha512" => hex::encode(Sha512::digest(p)),
        other => {
            return Err(EauthError::Misconfigured(format!(
                "external_auth:file ^hashtype {other} is not supported; use plaintext, md5, sha1, sha224, sha256, sha384 or sha512"
            )))
        }
    })
}

fn constant_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Apache's htpasswd: `user:hash` lines.
fn htpasswd(text: &str, username: &str, password: &str) -> bool {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((user, hash)) = line.split_once(':') else {
            continue;
        };
        if user != username {
            continue;
        }
        return verify_htpasswd_hash(hash, password);
    }
    false
}

fn verify_htpasswd_hash(hash: &str, password: &str) -> bool {
    if let Some(b64) = hash.strip_prefix("{SHA}") {
        return constant_eq(b64, &B64.encode(Sha1::digest(password.as_bytes())));
    }
    if let Some(rest) = hash.strip_prefix("$apr1$") {
        let salt = rest.split('$').next().unwrap_or_default();
        return constant_eq(hash, &apr1(password, salt));
    }
    pwhash::unix::verify(password, hash)
}

/// Apache's `$apr1$` hash: MD5-crypt with Apache's magic (pwhash has
/// only the `$1$` magic).
fn apr1(password: &str, salt: &str) -> String {
    const MAGIC: &str = "$apr1$";
    const ITOA: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let salt: String = salt.chars().take(8).collect();
    let pw = password.as_bytes();
    let mut alt = Md5::new();
    alt.update(pw);
    alt.update(salt.as_bytes());
    alt.update(pw);
    let alt = alt.finalize();
    let mut ctx = Md5::new();
    ctx.update(pw);
    ctx.update(MAGIC.as_bytes());
    ctx.update(salt.as_bytes());
    let mut left = pw.len();
    while left > 0 {
        let n = left.min(16);
        ctx.update(&alt[..n]);
        left -= n;
    }
    let mut i = pw.len();
    while i > 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&pw[..1.min(pw.len())]);
        }
        i >>= 1;
    }
    let mut fin = ctx.finalize();
    for round in 0..1000 {
        let mut c = Md5::new();
        if round & 1 == 1 {
            c.update(pw);
        } else {
            c.update(fin);
        }
        if round % 3 != 0 {
            c.update(salt.as_bytes());
        }
        if round % 7 != 0 {
            c.update(pw);
        }
        if round & 1 == 1 {
            c.update(fin);
        } else {
            c.update(pw);
        }
        fin = c.finalize();
    }
    let mut out = format!("{MAGIC}{salt}$");
    let mut put = |a: u8, b: u8, c: u8, n: usize| {
        let mut v = (u32::from(a) << 16) | (u32::from(b) << 8) | u32::from(c);
        for _ in 0..n {
            out.push(ITOA[(v & 63) as usize] as char);
            v >>= 6;
        }
    };
    put(fin[0], fin[6], fin[12], 4);
    put(fin[1], fin[7], fin[13], 4);
    put(fin[2], fin[8], fin[14], 4);
    put(fin[3], fin[9], fin[15], 4);
    put(fin[4], fin[10], fin[5], 4);
    put(0, 0, fin[11], 2);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    fn conf(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn text_plain_and_digest() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "alice:wonder\nbob:builder\n").unwrap();
        let c = conf(json!({"^filename": plain, "alice": [".*"]}));
        assert!(authenticate(&c, "alice", "wonder").unwrap());
        assert!(!authenticate(&c, "alice", "wrong").unwrap());
        assert!(!authenticate(&c, "carol", "wonder").unwrap());
        let hashed = dir.path().join("hashed");
        std::fs::write(
            &hashed,
            format!("alice|{}\n", hex::encode(Sha256::digest(b"wonder"))),
        )
        .unwrap();
        let c = conf(json!({"^filename": hashed, "^hashtype": "sha256", "^field_separator": "|"}));
        assert!(authenticate(&c, "alice", "wonder").unwrap());
        assert!(!authenticate(&c, "alice", "wonderland").unwrap());
    }

    #[test]
    fn htpasswd_schemes_made_by_openssl() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = Vec::new();
        for (user, flag) in [
            ("apr", "-apr1"),
            ("md5", "-1"),
            ("s256", "-5"),
            ("s512", "-6"),
        ] {
            let out = std::process::Command::new("openssl")
                .args(["passwd", flag, "secret"])
                .output()
                .unwrap();
            lines.push(format!(
                "{user}:{}",
                String::from_utf8(out.stdout).unwrap().trim()
            ));
        }
        lines.push(format!(
            "sha:{{SHA}}{}",
            B64.encode(Sha1::digest(b"secret"))
        ));
        lines.push(format!(
            "bcrypt:{}",
            pwhash::bcrypt::hash("secret").unwrap()
        ));
        let path = dir.path().join("htpasswd");
        std::fs::write(&path, lines.join("\n")).unwrap();
        let c = conf(json!({"^filename": path, "^filetype": "htpasswd"}));
        for user in ["apr", "md5", "s256", "s512", "sha", "bcrypt"] {
            assert!(authenticate(&c, user, "secret").unwrap(), "{user}");
            assert!(!authenticate(&c, user, "Secret").unwrap(), "{user}");
        }
        assert!(!authenticate(&c, "nobody", "secret").unwrap());
    }

    #[test]
    fn a_missing_file_is_a_configuration_error() {
        let c = conf(json!({"^filename": "/nonexistent/halite-users"}));
        let e = authenticate(&c, "a", "b").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/halite-users"), "{e}");
    }
}
