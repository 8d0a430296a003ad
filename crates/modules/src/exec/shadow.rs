//! Salt's `shadow` execution module (Linux): the `/etc/shadow` entry of an
//! account (`shadow.info`) and its password ageing, set with `chage` as
//! Salt's linux_shadow does (`set_mindays`, `set_maxdays`, `set_inactdays`,
//! `set_warndays`, `set_date`, `set_expire`), plus the password functions
//! `user.present` and formulas call (`set_password`, `del_password`,
//! `lock_password`, `unlock_password`, `gen_password`, `default_hash`,
//! `list_users`).

use halite_state::{Map, Value};

use crate::exec::user::{self as usr, run};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "shadow",
    functions: &[
        ExecFunction::new("info", info_fn),
        ExecFunction::new("default_hash", default_hash),
        ExecFunction::new("list_users", list_users),
        ExecFunction::new("set_mindays", set_mindays),
        ExecFunction::new("set_maxdays", set_maxdays),
        ExecFunction::new("set_inactdays", set_inactdays),
        ExecFunction::new("set_warndays", set_warndays),
        ExecFunction::new("set_date", set_date),
        ExecFunction::new("set_expire", set_expire),
        ExecFunction::new("set_password", set_password),
        ExecFunction::new("del_password", del_password),
        ExecFunction::new("lock_password", lock_password),
        ExecFunction::new("unlock_password", unlock_password),
        ExecFunction::new("gen_password", gen_password),
    ],
};

/// `user.present`'s password-ageing arguments: (argument, `shadow.info`
/// key, `chage` flag, whether Salt checks the value after setting it).
pub const AGEING_ARGS: [(&str, &str, &str, bool); 6] = [
    ("date", "lstchg", "-d", false),
    ("mindays", "min", "-m", true),
    ("maxdays", "max", "-M", true),
    ("inactdays", "inact", "-I", true),
    ("warndays", "warn", "-W", true),
    ("expire", "expire", "-E", false),
];

/// The shadow file Salt reads (its `_getspnam`).
const SHADOW: &str = "/etc/shadow";

/// The ageing fields of a shadow entry, in file order after the hash.
const AGEING: [&str; 6] = ["lstchg", "min", "max", "warn", "inact", "expire"];

/// Salt's `shadow.info`: `name`, `passwd` and the ageing fields as numbers
/// (an empty field reads -1); every field "" when the account has no entry.
pub fn info(name: &str) -> Map {
    let entry = std::fs::read_to_string(SHADOW).ok().and_then(|text| {
        text.lines()
            .map(|l| l.trim().split(':').map(str::to_string).collect::<Vec<_>>())
            .find(|fields| fields.first().map(String::as_str) == Some(name))
    });
    let mut out = Map::new();
    match entry {
        Some(fields) => {
            out.insert("name".into(), Value::from(fields[0].clone()));
            let passwd = fields.get(1).cloned().unwrap_or_default();
            out.insert("passwd".into(), Value::from(passwd));
            for (i, key) in AGEING.iter().enumerate() {
                let raw = fields.get(i + 2).map(String::as_str).unwrap_or("");
                let n = if raw.is_empty() {
                    -1
                } else {
                    raw.parse::<i64>().unwrap_or(-1)
                };
                out.insert((*key).into(), Value::from(n));
            }
        }
        None => {
            for key in ["name", "passwd"].iter().chain(AGEING.iter()) {
                out.insert((*key).into(), Value::from(""));
            }
        }
    }
    out
}

/// A shadow value as Salt compares it: numbers as numbers (`7` and `"7"`
/// differ, as in Python), so a date string like `2030-01-01` always reads as
/// a change, as in Salt.
pub fn same(current: Option<&Value>, wanted: &Value) -> bool {
    match (current, wanted) {
        (Some(Value::Number(a)), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Some(a), b) => a == b,
        (None, _) => false,
    }
}

/// The text `chage` takes for a value (a number or a `YYYY-MM-DD` date).
fn chage_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}

/// Salt's `_set_attrib`: `chage <flag> <value> <name>` unless the entry
/// already holds it; false for an unknown account. With `validate` the
/// entry must hold the value afterwards.
pub fn set_attrib(
    name: &str,
    key: &str,
    value: &Value,
    flag: &str,
    validate: bool,
) -> Result<bool, ExecError> {
    usr::check_account_name(name)?;
    let before = info(name);
    if before
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        return Ok(false);
    }
    if same(before.get(key), value) {
        return Ok(true);
    }
    let text = chage_text(value).ok_or_else(|| {
        ExecError::Invocation(format!(
            "shadow: {key} must be a number of days (or a YYYY-MM-DD date), not {}",
            halite_state::type_name(value)
        ))
    })?;
    let ran = run(&["chage", flag, &text, name])?;
    if ran.retcode != 0 {
        tracing::warn!(user = name, stderr = %ran.stderr, "chage failed");
    }
    if validate {
        return Ok(same(info(name).get(key), value));
    }
    Ok(ran.retcode == 0)
}

/// The user name argument.
fn user(args: &Args, fun: &str) -> Result<String, ExecError> {
    args.require_str(0, "name", fun)
}

/// The value argument (position 1) under Salt's parameter name `key`.
fn value(args: &Args, key: &str, fun: &str) -> Result<Value, ExecError> {
    args.get(1, key).cloned().ok_or_else(|| {
        ExecError::Invocation(format!(
            "{fun}() missing 1 required positional argument: '{key}'"
        ))
    })
}

fn info_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(info(&user(args, "info")?)))
}

fn default_hash(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::from("!"))
}

fn list_users(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let text = std::fs::read_to_string(SHADOW).map_err(|e| {
        ExecError::Execution(format!("cannot read {SHADOW}: {e}; shadow needs root"))
    })?;
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    Ok(Value::from(names))
}

macro_rules! ageing_setter {
    ($fn:ident, $param:literal, $key:literal, $flag:literal, $validate:expr) => {
        fn $fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
            let fun = stringify!($fn);
            let name = user(args, fun)?;
            let wanted = value(args, $param, fun)?;
            set_attrib(&name, $key, &wanted, $flag, $validate).map(Value::Bool)
        }
    };
}

ageing_setter!(set_mindays, "mindays", "min", "-m", true);
ageing_setter!(set_maxdays, "maxdays", "max", "-M", true);
ageing_setter!(set_inactdays, "inactdays", "inact", "-I", true);
ageing_setter!(set_warndays, "warndays", "warn", "-W", true);
ageing_setter!(set_date, "date", "lstchg", "-d", false);
ageing_setter!(set_expire, "expire", "expire", "-E", false);

fn set_password(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = user(args, "set_password")?;
    let hash = args.require_str(1, "password", "set_password")?;
    if info(&name).get("name").and_then(Value::as_str) == Some("") {
        return Ok(Value::Bool(false));
    }
    usr::set_password_hash(&name, &hash).map(Value::Bool)
}

fn del_password(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = user(args, "del_password")?;
    usr::delete_password(&name)?;
    Ok(Value::Bool(
        info(&name).get("passwd").and_then(Value::as_str) == Some(""),
    ))
}

/// `usermod -L`/`-U`; true when the hash then starts (or not) with `!`.
fn lock(args: &Args, fun: &str, locked: bool) -> Result<Value, ExecError> {
    let name = user(args, fun)?;
    usr::check_account_name(&name)?;
    let current = info(&name);
    let Some(hash) = current
        .get("passwd")
        .and_then(Value::as_str)
        .filter(|_| current.get("name").and_then(Value::as_str) != Some(""))
    else {
        return Ok(Value::Bool(false));
    };
    if hash.starts_with('!') != locked {
        run(&["usermod", if locked { "-L" } else { "-U" }, &name])?;
    }
    let after = info(&name);
    let hash = after.get("passwd").and_then(Value::as_str).unwrap_or("");
    Ok(Value::Bool(hash.starts_with('!') == locked))
}

fn lock_password(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    lock(args, "lock_password", true)
}

fn unlock_password(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    lock(args, "unlock_password", false)
}

fn gen_password(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let clear = args.require_str(0, "password", "gen_password")?;
    // hash_password reuses the salt of an existing `$6$salt$hash`.
    let existing = args
        .get_str(1, "crypt_salt")
        .map(|salt| format!("$6${salt}$x"));
    let algorithm = args
        .get_str(2, "algorithm")
        .unwrap_or_else(|| "sha512".into());
    if algorithm != "sha512" {
        return Err(ExecError::Invocation(format!(
            "shadow.gen_password: halite hashes with sha512 only, not {algorithm}"
        )));
    }
    usr::hash_password(&clear, existing.as_deref()).map(Value::from)
}
