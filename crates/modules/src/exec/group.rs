//! The `group` execution module (Salt's `groupadd`): local groups read
//! through NSS and changed with `groupadd`, `groupmod`, `groupdel` and
//! `gpasswd`.

use halite_state::{Map, Value};
use nix::unistd::Group;

use crate::exec::user::{check_account_name, int_arg, run, string_list};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "group",
    functions: &[
        ExecFunction::new("info", info_fn),
        ExecFunction::new("add", add_fn),
        ExecFunction::new("delete", delete_fn),
        ExecFunction::new("adduser", |a, _| adduser_fn("adduser", a)),
        ExecFunction::new("deluser", |a, _| adduser_fn("deluser", a)),
        ExecFunction::new("members", members_fn),
        ExecFunction::new("getent", getent_fn),
        ExecFunction::new("chgid", chgid_fn),
    ],
};

/// `group.info <name>`: the group, `{}` when absent.
fn info_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(
        info(&args.require_str(0, "name", "info")?).unwrap_or_default(),
    ))
}

/// `group.add <name> [gid] [system]`.
fn add_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fun = "add";
    let name = args.require_str(0, "name", fun)?;
    let gid = int_arg(args, 1, "gid", fun)?;
    add(
        &name,
        gid,
        args.get_bool(2, "system", false),
        args.get_bool(usize::MAX, "non_unique", false),
    )
    .map(Value::Bool)
}

/// `group.delete <name>`.
fn delete_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    delete(&args.require_str(0, "name", "delete")?).map(Value::Bool)
}

/// `group.adduser` and `group.deluser` (`fun`) `<name> <username>`.
fn adduser_fn(fun: &str, args: &Args) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", fun)?;
    let user = args.require_str(1, "username", fun)?;
    if fun == "adduser" {
        adduser(&name, &user)
    } else {
        deluser(&name, &user)
    }
    .map(Value::Bool)
}

/// `group.members <name> <members_list>`: sets the members.
fn members_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "members")?;
    let members = string_list(args.get(1, "members_list"));
    set_members(&name, &members).map(Value::Bool)
}

/// `group.chgid <name> <gid>`.
fn chgid_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fun = "chgid";
    let name = args.require_str(0, "name", fun)?;
    let gid = int_arg(args, 1, "gid", fun)?.ok_or_else(|| {
        ExecError::Invocation("chgid() missing 1 required positional argument: 'gid'".into())
    })?;
    chgid(&name, gid, args.get_bool(2, "non_unique", false)).map(Value::Bool)
}

/// `group.getent`: every group.
fn getent_fn(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Array(
        getent()?.into_iter().map(Value::Object).collect(),
    ))
}

/// Salt's `group.info`: `name, passwd, gid, members`; `None` when absent.
pub fn info(name: &str) -> Option<Map> {
    let group = Group::from_name(name).ok().flatten()?;
    let mut m = Map::new();
    m.insert("name".into(), Value::from(group.name));
    m.insert(
        "passwd".into(),
        Value::from(group.passwd.to_string_lossy().into_owned()),
    );
    m.insert("gid".into(), Value::from(group.gid.as_raw()));
    m.insert("members".into(), Value::from(group.mem));
    Some(m)
}

/// The members of `name` (empty when the group does not exist).
pub fn members(name: &str) -> Vec<String> {
    Group::from_name(name)
        .ok()
        .flatten()
        .map(|g| g.mem)
        .unwrap_or_default()
}

/// Every group (`getent group`), as [`info`] maps, in database order.
pub fn getent() -> Result<Vec<Map>, ExecError> {
    let out = run(&["getent", "group"])?;
    Ok(out
        .stdout
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let [name, passwd, gid, mem] = fields.as_slice() else {
                return None;
            };
            let mut m = Map::new();
            m.insert("name".into(), Value::from(*name));
            m.insert("passwd".into(), Value::from(*passwd));
            m.insert("gid".into(), Value::from(gid.parse::<u32>().ok()?));
            let mem: Vec<Value> = mem
                .split(',')
                .filter(|s| !s.is_empty())
                .map(Value::from)
                .collect();
            m.insert("members".into(), Value::Array(mem));
            Some(m)
        })
        .collect())
}

/// `groupadd [-g gid] [-r] [-o] name`.
pub fn add(
    name: &str,
    gid: Option<i64>,
    system: bool,
    non_unique: bool,
) -> Result<bool, ExecError> {
    check_account_name(name)?;
    let gid_text = gid.map(|g| g.to_string());
    let mut argv = vec!["groupadd"];
    if let Some(g) = gid_text.as_deref() {
        argv.extend(["-g", g]);
        if non_unique {
            argv.push("-o");
        }
    }
    if system {
        argv.push("-r");
    }
    argv.push(name);
    let out = run(&argv)?;
    if out.retcode != 0 {
        tracing::warn!(group = name, stderr = %out.stderr, "groupadd failed");
    }
    Ok(out.retcode == 0)
}

/// `groupdel name`.
pub fn delete(name: &str) -> Result<bool, ExecError> {
    check_account_name(name)?;
    Ok(run(&["groupdel", name])?.retcode == 0)
}

/// `groupmod -g gid [-o] name`; true when the group then has `gid`.
pub fn chgid(name: &str, gid: i64, non_unique: bool) -> Result<bool, ExecError> {
    check_account_name(name)?;
    let gid_text = gid.to_string();
    let mut argv = vec!["groupmod", "-g", gid_text.as_str()];
    if non_unique {
        argv.push("-o");
    }
    argv.push(name);
    run(&argv)?;
    Ok(info(name).and_then(|i| i.get("gid").and_then(Value::as_i64)) == Some(gid))
}

/// `gpasswd -a user group`.
pub fn adduser(name: &str, user: &str) -> Result<bool, ExecError> {
    check_account_name(name)?;
    check_account_name(user)?;
    Ok(run(&["gpasswd", "-a", user, name])?.retcode == 0)
}

/// `gpasswd -d user group`; true when `user` is then not a member.
pub fn deluser(name: &str, user: &str) -> Result<bool, ExecError> {
    check_account_name(name)?;
    check_account_name(user)?;
    if !members(name).iter().any(|m| m == user) {
        return Ok(true);
    }
    run(&["gpasswd", "-d", user, name])?;
    Ok(!members(name).iter().any(|m| m == user))
}

/// `gpasswd -M a,b group`: replaces the member list.
pub fn set_members(name: &str, users: &[String]) -> Result<bool, ExecError> {
    check_account_name(name)?;
    for user in users {
        check_account_name(user)?;
    }
    Ok(run(&["gpasswd", "-M", &users.join(","), name])?.retcode == 0)
}
