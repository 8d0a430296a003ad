//! The `user` execution module (Salt's `useradd`): local accounts read
//! through NSS and changed with `useradd`, `usermod` and `userdel`.

use std::process::Command;

use halite_state::{Map, Value};
use nix::unistd::{Gid, Group, User};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "user",
    functions: &[
        ExecFunction::new("info", info_fn),
        ExecFunction::new("add", add_fn),
        ExecFunction::new("delete", delete_fn),
        ExecFunction::new("chuid", |a, _| chid_fn("chuid", a)),
        ExecFunction::new("chgid", |a, _| chid_fn("chgid", a)),
        ExecFunction::new("chshell", chshell_fn),
        ExecFunction::new("chhome", chhome_fn),
        ExecFunction::new("chgroups", chgroups_fn),
        ExecFunction::new("chfullname", |a, _| gecos_fn("chfullname", a)),
        ExecFunction::new("chroomnumber", |a, _| gecos_fn("chroomnumber", a)),
        ExecFunction::new("chworkphone", |a, _| gecos_fn("chworkphone", a)),
        ExecFunction::new("chhomephone", |a, _| gecos_fn("chhomephone", a)),
        ExecFunction::new("chother", |a, _| gecos_fn("chother", a)),
        ExecFunction::new("list_users", list_users_fn),
        ExecFunction::new("list_groups", list_groups_fn),
        ExecFunction::new("getent", getent_fn),
        ExecFunction::new("primary_group", primary_group_fn),
        ExecFunction::new("rename", rename_fn),
    ],
};

/// `user.info <name>`: the account, `{}` when absent.
fn info_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(info(&args.require_str(0, "name", "info")?)
        .map(Value::Object)
        .unwrap_or_else(|| Value::Object(Map::new())))
}

/// `user.add <name> ...`.
fn add_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    add(&AddUser::from_args(args)?).map(Value::Bool)
}

/// `user.delete <name> [remove] [force]`.
fn delete_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "delete")?;
    delete(
        &name,
        args.get_bool(1, "remove", false),
        args.get_bool(2, "force", false),
    )
    .map(Value::Bool)
}

/// `user.chuid` and `user.chgid` (`fun`) `<name> <id>`.
fn chid_fn(fun: &str, args: &Args) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", fun)?;
    let id =
        int_arg(args, 1, if fun == "chuid" { "uid" } else { "gid" }, fun)?.ok_or_else(|| {
            ExecError::Invocation(format!("{fun}() missing 1 required positional argument"))
        })?;
    if fun == "chuid" {
        chuid(&name, id)
    } else {
        chgid(&name, id)
    }
    .map(Value::Bool)
}

/// `user.chshell <name> <shell>`.
fn chshell_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fun = "chshell";
    let name = args.require_str(0, "name", fun)?;
    chshell(&name, &args.require_str(1, "shell", fun)?).map(Value::Bool)
}

/// `user.chhome <name> <home> [persist]`.
fn chhome_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fun = "chhome";
    let name = args.require_str(0, "name", fun)?;
    chhome(
        &name,
        &args.require_str(1, "home", fun)?,
        args.get_bool(2, "persist", false),
    )
    .map(Value::Bool)
}

/// `user.chgroups <name> <groups> [append]`.
fn chgroups_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "chgroups")?;
    let groups = string_list(args.get(1, "groups"));
    chgroups(&name, &groups, args.get_bool(2, "append", false)).map(Value::Bool)
}

/// `user.chfullname`, `chroomnumber`, `chworkphone`, `chhomephone` and
/// `chother` (`fun`) `<name> <value>`: one GECOS field.
fn gecos_fn(fun: &str, args: &Args) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", fun)?;
    let field = &fun[2..];
    let value = args.get_str(1, field).unwrap_or_default();
    set_gecos_field(&name, field, &value).map(Value::Bool)
}

/// `user.list_users`: every account name.
fn list_users_fn(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::from(list_users()?))
}

/// `user.list_groups <name>`: the groups of an account.
fn list_groups_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::from(group_list(&args.require_str(
        0,
        "name",
        "list_groups",
    )?)))
}

/// `user.getent`: every account, as [`info`] gives it.
fn getent_fn(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut all = Vec::new();
    for name in list_users()? {
        if let Some(i) = info(&name) {
            all.push(Value::Object(i));
        }
    }
    Ok(Value::Array(all))
}

/// `user.primary_group <name>`: the name of the account's primary group.
fn primary_group_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "primary_group")?;
    Ok(User::from_name(&name)
        .ok()
        .flatten()
        .and_then(|u| Group::from_gid(u.gid).ok().flatten())
        .map(|g| Value::from(g.name))
        .unwrap_or_else(|| Value::from("")))
}

/// The five comma-separated GECOS fields, in order.
pub const GECOS_FIELDS: [&str; 5] = ["fullname", "roomnumber", "workphone", "homephone", "other"];

/// Salt's `user.info`: `gid, groups, home, name, passwd, shell, uid` and
/// the GECOS fields; `None` when the account does not exist.
pub fn info(name: &str) -> Option<Map> {
    let user = User::from_name(name).ok().flatten()?;
    let gecos = user.gecos.to_string_lossy().into_owned();
    let mut fields: Vec<String> = gecos.splitn(5, ',').map(str::to_string).collect();
    fields.resize(5, String::new());
    let mut m = Map::new();
    m.insert("gid".into(), Value::from(user.gid.as_raw()));
    m.insert("groups".into(), Value::from(group_list(name)));
    m.insert("home".into(), Value::from(user.dir.display().to_string()));
    m.insert("name".into(), Value::from(user.name.clone()));
    m.insert(
        "passwd".into(),
        Value::from(user.passwd.to_string_lossy().into_owned()),
    );
    m.insert(
        "shell".into(),
        Value::from(user.shell.display().to_string()),
    );
    m.insert("uid".into(), Value::from(user.uid.as_raw()));
    for (key, value) in GECOS_FIELDS.iter().zip(fields) {
        m.insert((*key).into(), Value::from(value));
    }
    Some(m)
}

/// Every group `name` belongs to (primary included), sorted, as Salt's
/// `get_group_list`.
pub fn group_list(name: &str) -> Vec<String> {
    let Some(user) = User::from_name(name).ok().flatten() else {
        return Vec::new();
    };
    let Ok(cname) = std::ffi::CString::new(name) else {
        return Vec::new();
    };
    let gids: Vec<Gid> =
        nix::unistd::getgrouplist(&cname, user.gid).unwrap_or_else(|_| vec![user.gid]);
    let mut names: Vec<String> = gids
        .into_iter()
        .filter_map(|g| Group::from_gid(g).ok().flatten())
        .map(|g| g.name)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Every account name in the passwd database (`getent passwd`), sorted.
pub fn list_users() -> Result<Vec<String>, ExecError> {
    let out = run(&["getent", "passwd"])?;
    let mut names: Vec<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// What `user.add` creates.
#[derive(Debug, Default, Clone)]
pub struct AddUser {
    /// The user name.
    pub name: String,
    /// The uid (`None`: the system picks).
    pub uid: Option<i64>,
    /// The primary group, a name or number (`None`: per `usergroup`).
    pub gid: Option<String>,
    /// Supplementary groups.
    pub groups: Vec<String>,
    /// The home directory (`None`: the system's default).
    pub home: Option<String>,
    /// Whether to create the home directory.
    pub createhome: bool,
    /// The login shell (`None`: the system's default).
    pub shell: Option<String>,
    /// `False` allows a duplicate uid (`useradd -o`).
    pub unique: bool,
    /// Create a system account.
    pub system: bool,
    /// Create a group named after the user (`None`: the system's default).
    pub usergroup: Option<bool>,
    /// GECOS fields by name (`fullname`...), empty ones skipped.
    pub gecos: Vec<(String, String)>,
}

impl AddUser {
    fn from_args(args: &Args) -> Result<Self, ExecError> {
        Ok(AddUser {
            name: args.require_str(0, "name", "add")?,
            uid: int_arg(args, 1, "uid", "add")?,
            gid: args.get_str(2, "gid"),
            groups: string_list(args.get(3, "groups")),
            home: args.get_str(4, "home"),
            createhome: args.get_bool(usize::MAX, "createhome", true),
            shell: args.get_str(5, "shell"),
            unique: args.get_bool(6, "unique", true),
            system: args.get_bool(7, "system", false),
            usergroup: args
                .kwargs
                .get("usergroup")
                .filter(|v| !v.is_null())
                .map(halite_state::truthy),
            gecos: GECOS_FIELDS
                .iter()
                .filter_map(|f| {
                    args.kwargs
                        .get(*f)
                        .and_then(scalar_text)
                        .map(|v| (f.to_string(), v))
                })
                .collect(),
        })
    }
}

/// Creates the account with `useradd`; GECOS fields are set afterwards as
/// Salt does. `Ok(false)` when `useradd` refuses.
pub fn add(user: &AddUser) -> Result<bool, ExecError> {
    check_account_name(&user.name)?;
    for group in &user.groups {
        check_account_name(group)?;
    }
    let mut argv: Vec<String> = vec!["useradd".into()];
    if let Some(shell) = &user.shell {
        argv.extend(["-s".into(), shell.clone()]);
    }
    if let Some(uid) = user.uid {
        argv.extend(["-u".into(), uid.to_string()]);
    }
    if let Some(gid) = user.gid.as_ref().filter(|g| !g.is_empty()) {
        argv.extend(["-g".into(), gid.clone()]);
    } else if user.usergroup == Some(true) {
        argv.push("-U".into());
    } else if user.groups.contains(&user.name) && usergroups_enabled() {
        // Salt: a user listed in a group of its own name gets it as primary.
        if let Some(group) = Group::from_name(&user.name).ok().flatten() {
            argv.extend(["-g".into(), group.gid.as_raw().to_string()]);
        }
    }
    if user.usergroup == Some(false) {
        argv.push("-N".into());
    }
    if let Some(home) = &user.home {
        argv.extend(["-d".into(), home.clone()]);
    }
    argv.push(if user.createhome { "-m" } else { "-M" }.into());
    if !user.unique {
        argv.push("-o".into());
    }
    if user.system {
        argv.push("-r".into());
    }
    argv.push(user.name.clone());
    let out = run(&argv.iter().map(String::as_str).collect::<Vec<_>>())?;
    if out.retcode != 0 {
        tracing::warn!(user = %user.name, stderr = %out.stderr, "useradd failed");
        return Ok(false);
    }
    // Supplementary groups are set afterwards, as Salt does, so that the
    // primary group is not also written into /etc/group as a member.
    if !user.groups.is_empty() {
        chgroups(&user.name, &user.groups, false)?;
    }
    for (field, value) in &user.gecos {
        set_gecos_field(&user.name, field, value)?;
    }
    Ok(true)
}

/// Refuses account and group names that the shadow tools would read as
/// options or that would corrupt `/etc/passwd` (`:`, `,`, newlines...).
pub fn check_account_name(name: &str) -> Result<(), ExecError> {
    let bad = name.is_empty()
        || name.starts_with('-')
        || name
            .chars()
            .any(|c| c == ':' || c == ',' || c == '/' || c.is_whitespace() || c.is_control());
    if bad {
        return Err(ExecError::Invocation(format!(
            "Invalid user or group name '{}': use letters, digits, '.', '_' or '-' (not first)",
            name.escape_default()
        )));
    }
    Ok(())
}

/// Whether `/etc/login.defs` has `USERGROUPS_ENAB yes`.
fn usergroups_enabled() -> bool {
    std::fs::read_to_string("/etc/login.defs")
        .map(|defs| {
            defs.lines()
                .find(|l| l.starts_with("USERGROUPS_ENAB"))
                .is_some_and(|l| l.contains("yes"))
        })
        .unwrap_or(false)
}

/// Removes the account (`userdel`, `-r` with `remove`, `-f` with `force`).
pub fn delete(name: &str, remove: bool, force: bool) -> Result<bool, ExecError> {
    check_account_name(name)?;
    let mut argv = vec!["userdel"];
    if remove {
        argv.push("-r");
    }
    if force {
        argv.push("-f");
    }
    argv.push(name);
    Ok(run(&argv)?.retcode == 0)
}

fn current(name: &str) -> Result<Map, ExecError> {
    check_account_name(name)?;
    info(name).ok_or_else(|| ExecError::Execution(format!("User '{name}' does not exist")))
}

/// `usermod -u`; true when the account then has `uid`.
pub fn chuid(name: &str, uid: i64) -> Result<bool, ExecError> {
    if current(name)?.get("uid").and_then(Value::as_i64) == Some(uid) {
        return Ok(true);
    }
    run(&["usermod", "-u", &uid.to_string(), name])?;
    Ok(info(name).and_then(|i| i.get("uid").and_then(Value::as_i64)) == Some(uid))
}

/// `usermod -g`; true when the account then has `gid`.
pub fn chgid(name: &str, gid: i64) -> Result<bool, ExecError> {
    if current(name)?.get("gid").and_then(Value::as_i64) == Some(gid) {
        return Ok(true);
    }
    run(&["usermod", "-g", &gid.to_string(), name])?;
    Ok(info(name).and_then(|i| i.get("gid").and_then(Value::as_i64)) == Some(gid))
}

/// `usermod -s`; true when the account then has `shell`.
pub fn chshell(name: &str, shell: &str) -> Result<bool, ExecError> {
    if current(name)?.get("shell").and_then(Value::as_str) == Some(shell) {
        return Ok(true);
    }
    run(&["usermod", "-s", shell, name])?;
    Ok(info(name)
        .and_then(|i| i.get("shell").and_then(Value::as_str).map(|s| s == shell))
        .unwrap_or(false))
}

/// `usermod -d` (`-m` with `persist`: move the old home's content).
pub fn chhome(name: &str, home: &str, persist: bool) -> Result<bool, ExecError> {
    if current(name)?.get("home").and_then(Value::as_str) == Some(home) {
        return Ok(true);
    }
    let mut argv = vec!["usermod", "-d", home];
    if persist {
        argv.push("-m");
    }
    argv.push(name);
    run(&argv)?;
    Ok(info(name)
        .and_then(|i| i.get("home").and_then(Value::as_str).map(|h| h == home))
        .unwrap_or(false))
}

/// `usermod -G` (with `-a` when `append`): the supplementary groups;
/// nothing is run when the account's groups already equal `groups`.
pub fn chgroups(name: &str, groups: &[String], append: bool) -> Result<bool, ExecError> {
    check_account_name(name)?;
    for group in groups {
        check_account_name(group)?;
    }
    let have: std::collections::BTreeSet<String> = group_list(name).into_iter().collect();
    let wanted: std::collections::BTreeSet<String> = groups.iter().cloned().collect();
    if have == wanted {
        return Ok(true);
    }
    let list = groups.join(",");
    let mut argv = vec!["usermod"];
    if append {
        argv.push("-a");
    }
    argv.extend(["-G", list.as_str(), name]);
    let out = run(&argv)?;
    if out.retcode != 0 {
        tracing::warn!(user = name, stderr = %out.stderr, "usermod -G failed");
    }
    Ok(out.retcode == 0)
}

/// Sets one GECOS field (`fullname`, `roomnumber`, `workphone`,
/// `homephone`, `other`) with `usermod -c`, keeping the others.
pub fn set_gecos_field(name: &str, field: &str, value: &str) -> Result<bool, ExecError> {
    let info = current(name)?;
    if info.get(field).and_then(Value::as_str) == Some(value) {
        return Ok(true);
    }
    let fields: Vec<String> = GECOS_FIELDS
        .iter()
        .map(|f| {
            if *f == field {
                value.to_string()
            } else {
                info.get(*f)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            }
        })
        .collect();
    let gecos = fields.join(",").trim_end_matches(',').to_string();
    run(&["usermod", "-c", &gecos, name])?;
    Ok(self::info(name)
        .and_then(|i| i.get(field).and_then(Value::as_str).map(|v| v == value))
        .unwrap_or(false))
}

/// The password hash of `name` from `/etc/shadow` (root only), `None` when
/// the account or the file cannot be read.
pub fn shadow_hash(name: &str) -> Option<String> {
    let text = std::fs::read_to_string("/etc/shadow").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.split(':');
        (parts.next() == Some(name)).then(|| parts.next().unwrap_or("").to_string())
    })
}

/// Sets the password hash (`usermod -p`); true when the shadow entry then holds it.
pub fn set_password_hash(name: &str, hash: &str) -> Result<bool, ExecError> {
    check_account_name(name)?;
    run(&["usermod", "-p", hash, name])?;
    Ok(shadow_hash(name).as_deref() == Some(hash))
}

/// Salt's `hash_password: True`: the SHA-512-crypt hash (`$6$salt$hash`,
/// glibc's default 5000 rounds) of a clear-text password. The salt of the
/// `existing` hash is reused when it is a `$6$` or `$5$` hash, so that the
/// same password hashes to the same string on every run (Salt does the
/// same to stay idempotent); otherwise a random 16-character salt is drawn.
pub fn hash_password(clear: &str, existing: Option<&str>) -> Result<String, ExecError> {
    let reused = existing.and_then(|h| {
        let parts: Vec<&str> = h.split('$').collect();
        match parts.as_slice() {
            ["", algo @ ("5" | "6"), salt, _hash]
                if !salt.starts_with("rounds=") && !salt.is_empty() =>
            {
                Some((algo.to_string(), salt.to_string()))
            }
            _ => None,
        }
    });
    let (algo, salt) = match reused {
        Some(found) => found,
        None => ("6".to_string(), random_salt()?),
    };
    let failed =
        |e: sha_crypt::CryptError| ExecError::Execution(format!("cannot hash the password: {e:?}"));
    let hash = if algo == "5" {
        let params = sha_crypt::Sha256Params::new(sha_crypt::ROUNDS_DEFAULT).map_err(failed)?;
        sha_crypt::sha256_crypt_b64(clear.as_bytes(), salt.as_bytes(), &params).map_err(failed)?
    } else {
        let params = sha_crypt::Sha512Params::new(sha_crypt::ROUNDS_DEFAULT).map_err(failed)?;
        sha_crypt::sha512_crypt_b64(clear.as_bytes(), salt.as_bytes(), &params).map_err(failed)?
    };
    Ok(format!("${algo}${salt}${hash}"))
}

/// 16 characters of crypt's salt alphabet from the kernel's random source.
fn random_salt() -> Result<String, ExecError> {
    use std::io::Read;
    const ALPHABET: &[u8] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| {
            ExecError::Execution(format!("cannot read /dev/urandom for a password salt: {e}"))
        })?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect())
}

/// Empties the password (`passwd -d`).
pub fn delete_password(name: &str) -> Result<bool, ExecError> {
    check_account_name(name)?;
    Ok(run(&["passwd", "-d", name])?.retcode == 0)
}

/// What a command printed and returned.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The exit code.
    pub retcode: i32,
    /// What it printed on standard output.
    pub stdout: String,
    /// What it printed on standard error.
    pub stderr: String,
}

/// Runs `argv` without a shell; an error only when it cannot be started.
pub fn run(argv: &[&str]) -> Result<Ran, ExecError> {
    let (prog, rest) = argv
        .split_first()
        .ok_or_else(|| ExecError::Invocation("empty command".into()))?;
    tracing::debug!(?argv, "running");
    let out = Command::new(prog).args(rest).output().map_err(|e| {
        ExecError::Execution(format!(
            "cannot run {prog}: {e}; is it installed and on PATH?"
        ))
    })?;
    Ok(Ran {
        retcode: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
    })
}

/// A string rendering of a scalar argument (numbers and booleans too).
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(true) => Some("True".into()),
        Value::Bool(false) => Some("False".into()),
        other => Some(other.to_string()),
    }
}

/// A list argument: a YAML list, or a comma-separated string as Salt accepts.
pub fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().filter_map(scalar_text).collect(),
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        Some(other) => scalar_text(other).into_iter().collect(),
    }
}

/// An integer argument given as a number or a numeric string.
pub fn int_arg(args: &Args, i: usize, key: &str, fun: &str) -> Result<Option<i64>, ExecError> {
    match args.get(i, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| ExecError::Invocation(format!("{fun}: {key} must be an integer"))),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| {
            ExecError::Invocation(format!("{fun}: {key} must be an integer, not '{s}'"))
        }),
        Some(other) => Err(ExecError::Invocation(format!(
            "{fun}: {key} must be an integer, not {}",
            halite_state::type_name(other)
        ))),
    }
}

/// `user.rename <name> <new_name>`: `usermod -l`. Like Salt, an error when
/// `new_name` exists or `name` does not; the return is whether `name` then
/// has the new login, which after a rename is false, as Salt answers.
fn rename_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "rename")?;
    let new_name = args.require_str(1, "new_name", "rename")?;
    check_account_name(&new_name)?;
    if info(&new_name).is_some() {
        return Err(ExecError::Execution(format!(
            "User '{new_name}' already exists"
        )));
    }
    let before = current(&name)?;
    if before.get("name").and_then(Value::as_str) == Some(new_name.as_str()) {
        return Ok(Value::Bool(true));
    }
    let out = run(&["usermod", "-l", &new_name, &name])?;
    if out.retcode != 0 {
        tracing::error!("usermod -l {new_name} {name} failed: {}", out.stderr);
    }
    Ok(Value::Bool(
        info(&name).and_then(|i| i.get("name").and_then(Value::as_str).map(|n| n == new_name))
            == Some(true),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_like_or_corrupting_names_are_refused_before_any_command() {
        for bad in ["", "-r", "--help", "a:b", "a,b", "a b", "a\nb", "../x"] {
            assert!(check_account_name(bad).is_err(), "{bad:?}");
            assert!(delete(bad, true, true).is_err(), "{bad:?}");
        }
        for good in ["www-data", "halite_t.1", "user-"] {
            assert!(check_account_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn sha512_crypt_matches_the_reference_vector() {
        // From the SHA-crypt specification (Drepper), as glibc computes it.
        let hash = hash_password("Hello world!", Some("$6$saltstring$x"));
        assert_eq!(
            hash.ok().as_deref(),
            Some("$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1")
        );
        let fresh = hash_password("pw", None).unwrap_or_default();
        assert!(
            fresh.starts_with("$6$") && fresh.split('$').nth(2).is_some_and(|s| s.len() == 16),
            "{fresh}"
        );
        assert_ne!(
            hash_password("pw", None).ok(),
            Some(fresh),
            "random salts differ"
        );
    }
}
