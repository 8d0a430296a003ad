//! Salt's `ssh_auth` state: `present`, `absent` and `manage` of keys in a
//! user's `authorized_keys`, a key given whole (`options type key
//! comment`), bare with `enc`/`comment`, or from a `source` key file.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::ssh;
use crate::exec::user::scalar_text;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "ssh_auth",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
        StateFunction::new("manage", manage),
    ],
};

/// The arguments every `ssh_auth` function shares.
#[derive(Debug, Clone)]
struct KeyArgs {
    user: String,
    enc: String,
    comment: String,
    source: String,
    options: Option<Vec<String>>,
    config: String,
    hash: Option<String>,
}

impl KeyArgs {
    fn from_call(call: &StateCall<'_>) -> Result<Self, StateError> {
        let fun = format!("ssh_auth.{}", call.chunk.fun());
        let user = call
            .arg_str("user")?
            .ok_or_else(|| StateError::MissingArg("user".into(), fun))?;
        let options = call
            .arg("options")
            .map(|v| crate::exec::user::string_list(Some(v)));
        Ok(KeyArgs {
            user,
            enc: call.arg_str("enc")?.unwrap_or_else(|| "ssh-rsa".into()),
            comment: call.arg_str("comment")?.unwrap_or_default(),
            source: call.arg_str("source")?.unwrap_or_default(),
            options,
            config: call
                .arg_str("config")?
                .unwrap_or_else(|| ssh::DEFAULT_AUTH_CONFIG.into()),
            hash: call.arg_str("fingerprint_hash_type")?,
        })
    }
}

fn err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// Splits a whole key line into its parts as Salt does; `split3` keeps
/// spaces in the comment (`split(None, 2)`) where Salt does.
fn parse_name(name: &str, a: &mut KeyArgs, split3: bool) -> String {
    match ssh::KEY_LINE.as_ref().and_then(|re| re.captures(name)) {
        None => {
            let mut parts = name.split_whitespace();
            let key = parts.next().unwrap_or_default().to_string();
            let rest: Vec<&str> = parts.collect();
            if split3 {
                if let Some(pos) = name.trim_start().find(char::is_whitespace) {
                    let comment = name.trim_start()[pos..].trim_start();
                    if !comment.is_empty() {
                        a.comment = comment.to_string();
                    }
                }
            } else if rest.len() == 1 {
                a.comment = rest[0].to_string();
            }
            key
        }
        Some(caps) => {
            if let Some(opts) = caps.get(1).filter(|m| !m.as_str().is_empty()) {
                a.options = Some(opts.as_str().split(',').map(str::to_string).collect());
            }
            let body = caps.get(2).map(|m| m.as_str()).unwrap_or_default();
            let comps: Vec<String> = if split3 {
                let mut out = Vec::new();
                let mut rest = body.trim_start();
                for _ in 0..2 {
                    match rest.find(char::is_whitespace) {
                        Some(p) => {
                            out.push(rest[..p].to_string());
                            rest = rest[p..].trim_start();
                        }
                        None => {
                            out.push(rest.to_string());
                            rest = "";
                            break;
                        }
                    }
                }
                if !rest.is_empty() {
                    out.push(rest.to_string());
                }
                out
            } else {
                body.split_whitespace().map(str::to_string).collect()
            };
            a.enc = comps.first().cloned().unwrap_or_default();
            if comps.len() == 3 {
                a.comment = comps[2].clone();
            }
            comps.get(1).cloned().unwrap_or_default()
        }
    }
}

/// The local copy of `source`, or `None` when it cannot be found.
fn source_file(call: &StateCall<'_>, source: &str) -> Option<String> {
    let saltenv = call.chunk.env().to_string();
    crate::states::file::managed::resolve_source(call, &Value::from(source), &saltenv)
        .ok()
        .map(|(_, p)| p.to_string_lossy().into_owned())
}

fn present_test(call: &StateCall<'_>, name: &str, a: &KeyArgs) -> Result<StateResult, StateError> {
    let mut ret = StateResult::new(name, None);
    let mut a = a.clone();
    let mut key = name.to_string();
    if !a.source.is_empty() {
        let checked = match source_file(call, &a.source) {
            Some(f) => ssh::check_key_file(&a.user, &f, &a.source, &a.config, a.hash.as_deref())
                .map_err(err)?,
            None => Ok(Vec::new()),
        };
        match checked {
            Ok(keys) => {
                let comment: String = keys
                    .iter()
                    .filter(|(_, s)| *s != "exists")
                    .map(|(k, s)| format!("Set to {s}: {k}\n"))
                    .collect();
                if !comment.is_empty() {
                    ret.comment = comment;
                    return Ok(ret);
                }
                ret.result = Some(true);
                ret.comment = format!("All host keys in file {} are already present", a.source);
            }
            Err(e) => {
                ret.result = Some(false);
                ret.comment = e;
            }
        }
        return Ok(ret);
    }
    if ssh::KEY_LINE
        .as_ref()
        .and_then(|re| re.captures(name))
        .is_some()
        || name.split_whitespace().count() > 1
    {
        key = parse_name(name, &mut a, false);
    }
    let options = a.options.clone().unwrap_or_default();
    let user = &a.user;
    ret.comment = match ssh::check_key(
        user,
        &key,
        &a.enc,
        &a.comment,
        &options,
        &a.config,
        a.hash.as_deref(),
    )
    .map_err(err)?
    {
        "update" => format!("Key {key} for user {user} is set to be updated"),
        "add" => format!("Key {key} for user {user} is set to be added"),
        _ => {
            ret.result = Some(true);
            format!("The authorized host key {key} is already present for user {user}")
        }
    };
    Ok(ret)
}

/// `ssh_auth.present` on one key, as `manage` calls it too.
fn present_one(
    call: &StateCall<'_>,
    raw_name: &str,
    args: &KeyArgs,
) -> Result<StateResult, StateError> {
    let mut a = args.clone();
    let mut name = raw_name.to_string();
    if a.source.is_empty() {
        name = parse_name(raw_name, &mut a, true);
    }
    if call.test {
        let mut r = present_test(call, &name, &a)?;
        r.name = raw_name.to_string();
        return Ok(r);
    }
    let mut ret = StateResult::ok(raw_name, "");
    let user = a.user.clone();
    let data: Result<&str, String> = if !a.source.is_empty() {
        match source_file(call, &a.source) {
            None => Ok("no key"),
            Some(f) => ssh::set_auth_key_from_file(
                &user,
                &f,
                &a.source,
                &a.config,
                a.options.as_deref(),
                a.hash.as_deref(),
            )
            .map_err(err)?,
        }
    } else {
        Ok(ssh::set_auth_key(
            &user,
            &name,
            &a.enc,
            &a.comment,
            a.options.as_deref().unwrap_or_default(),
            &a.config,
            a.hash.as_deref(),
        )
        .map_err(err)?)
    };
    match data {
        Ok("replace") => {
            ret.changes.insert(name.clone(), Value::from("Updated"));
            ret.comment = format!("The authorized host key {name} for user {user} was updated");
        }
        Ok("no change") => {
            ret.comment =
                format!("The authorized host key {name} is already present for user {user}");
        }
        Ok("new") => {
            ret.changes.insert(name.clone(), Value::from("New"));
            ret.comment = format!("The authorized host key {name} for user {user} was added");
        }
        Ok("no key") => {
            ret.result = Some(false);
            ret.comment = format!(
                "Failed to add the ssh key. Source file {} is missing",
                a.source
            );
        }
        Ok("fail") => {
            ret.result = Some(false);
            ret.comment = "Failed to add the ssh key. Is the home directory available, and/or does the key file exist?".into();
        }
        Err(e) => {
            ret.result = Some(false);
            ret.comment = e;
        }
        Ok(_) => {
            ret.result = Some(false);
            ret.comment = "Invalid public ssh key, most likely has spaces or invalid syntax".into();
        }
    }
    Ok(ret)
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let a = KeyArgs::from_call(call)?;
    present_one(call, call.name(), &a)
}

fn absent_test(call: &StateCall<'_>, name: &str, a: &KeyArgs) -> Result<StateResult, StateError> {
    let mut ret = StateResult::new(name, None);
    let mut a = a.clone();
    if !a.source.is_empty() {
        let checked = match source_file(call, &a.source) {
            Some(f) => ssh::check_key_file(&a.user, &f, &a.source, &a.config, a.hash.as_deref())
                .map_err(err)?,
            None => Ok(Vec::new()),
        };
        match checked {
            Ok(keys) => {
                let comment: String = keys
                    .iter()
                    .filter(|(_, s)| *s != "add")
                    .map(|(k, _)| format!("Set to remove: {k}\n"))
                    .collect();
                if !comment.is_empty() {
                    ret.comment = comment;
                    return Ok(ret);
                }
                ret.result = Some(true);
                ret.comment = format!("All host keys in file {} are already absent", a.source);
            }
            Err(e) => {
                ret.result = Some(false);
                ret.comment = e;
            }
        }
        return Ok(ret);
    }
    let key = parse_name(name, &mut a, false);
    let options = a.options.clone().unwrap_or_default();
    let user = &a.user;
    match ssh::check_key(
        user,
        &key,
        &a.enc,
        &a.comment,
        &options,
        &a.config,
        a.hash.as_deref(),
    )
    .map_err(err)?
    {
        "update" | "exists" => {
            ret.comment = format!("Key {key} for user {user} is set for removal");
        }
        _ => {
            ret.result = Some(true);
            ret.comment = "Key is already absent".into();
        }
    }
    Ok(ret)
}

/// `ssh_auth.absent` on one key, as `manage` calls it too.
fn absent_one(
    call: &StateCall<'_>,
    raw_name: &str,
    args: &KeyArgs,
) -> Result<StateResult, StateError> {
    if call.test {
        return absent_test(call, raw_name, args);
    }
    let mut a = args.clone();
    let mut ret = StateResult::ok(raw_name, "");
    let mut name = raw_name.to_string();
    if !a.source.is_empty() {
        match source_file(call, &a.source) {
            // Salt leaves the comment empty and the result True here.
            None => {}
            Some(f) => {
                ret.comment = ssh::rm_auth_key_from_file(&a.user, &f, &a.config, a.hash.as_deref())
                    .map_err(err)?
                    .to_string();
            }
        }
    } else {
        name = parse_name(raw_name, &mut a, false);
        ret.comment =
            ssh::rm_auth_key(&a.user, &name, &a.config, a.hash.as_deref()).map_err(err)?;
    }
    if ret.comment == "Key removed" {
        ret.changes.insert(name, Value::from("Removed"));
    }
    Ok(ret)
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(
        call,
        &[
            "user",
            "enc",
            "comment",
            "source",
            "options",
            "config",
            "fingerprint_hash_type",
        ],
    )?;
    let a = KeyArgs::from_call(call)?;
    absent_one(call, call.name(), &a)
}

fn manage(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let a = KeyArgs::from_call(call)?;
    let ssh_keys: Vec<String> = match call.chunk.get("ssh_keys") {
        None => {
            return Err(StateError::MissingArg(
                "ssh_keys".into(),
                "ssh_auth.manage".into(),
            ))
        }
        Some(Value::Array(items)) => items.iter().filter_map(scalar_text).collect(),
        Some(v) => scalar_text(v).into_iter().collect(),
    };
    let mut ret = StateResult::ok("", "");
    let wanted: Vec<&str> = ssh_keys.iter().flat_map(|k| k.split(' ')).collect();
    let existing = ssh::auth_keys(&a.user, &a.config, a.hash.as_deref()).map_err(err)?;
    for (key, _) in existing
        .iter()
        .filter(|(k, _)| !wanted.contains(&k.as_str()))
    {
        if call.test {
            ret.comment = format!("{key} Key set for removal");
            ret.result = None;
        } else {
            let r = absent_one(call, key, &a)?;
            ret.changes.insert(key.clone(), Value::from(r.comment));
        }
    }
    for key in &ssh_keys {
        let r = present_one(call, key, &a)?;
        if !r.changes.is_empty() {
            ret.changes.extend(r.changes);
        } else {
            ret.comment = format!("{}\n{}", ret.comment, r.comment).trim().to_string();
        }
        match r.result {
            None => ret.result = None,
            Some(false) => ret.result = Some(false),
            Some(true) => {}
        }
    }
    Ok(ret)
}
