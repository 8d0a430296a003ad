//! Salt's `user` state: `user.present` and `user.absent`, computing the
//! difference with the account as Salt's `_changes` does and reporting it
//! with Salt's comments and change keys.

use std::collections::BTreeSet;
use std::path::Path;

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};
use nix::unistd::{Gid, Group};

use crate::exec::group as grp;
use crate::exec::shadow::{self, AGEING_ARGS};
use crate::exec::user::{self as usr, AddUser, GECOS_FIELDS};

/// The module's table: `user.present` and `user.absent`.
pub const MODULE: StateTable = StateTable {
    name: "user",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

const REDACTED: &str = "XXX-REDACTED-XXX";

/// The engine's `str()`/`repr()` of values in comments that Salt builds
/// with `"{}".format(value)` (the shared rule).
pub use halite_salt_rules::pyfmt::{quoted_repr as py_repr, quoted_str as py_str};

/// A list-of-strings argument (a YAML list or a comma-separated string).
pub fn string_list_arg(call: &StateCall<'_>, key: &str) -> Vec<String> {
    usr::string_list(call.arg(key))
}

/// Everything `user.present` is asked to ensure.
struct Wanted {
    name: String,
    /// `name` as Salt's `str()` prints it in comments (quoted when a
    /// yamlex string).
    shown: String,
    uid: Option<i64>,
    /// A group name or number, as given.
    gid: Option<String>,
    groups: Option<Vec<String>>,
    optional_groups: Vec<String>,
    remove_groups: bool,
    home: Option<String>,
    createhome: bool,
    persist_home: bool,
    password: Option<String>,
    enforce_password: bool,
    empty_password: bool,
    shell: Option<String>,
    unique: bool,
    system: bool,
    usergroup: Option<bool>,
    gecos: Vec<(&'static str, Option<String>)>,
    allow_uid_change: bool,
    allow_gid_change: bool,
    /// The password-ageing arguments given (`mindays: 7`...), in Salt's order.
    ageing: Vec<(&'static str, Value)>,
}

impl Wanted {
    fn from_call(call: &StateCall<'_>) -> Result<Self, StateError> {
        let uid = match call.arg("uid") {
            None => None,
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.trim().parse().map_err(|_| {
                StateError::BadArg(format!("Invalid uid '{s}': it must be a number"))
            })?),
            Some(other) => {
                return Err(StateError::BadArg(format!(
                    "Invalid uid: it must be a number, not {}",
                    halite_state::type_name(other)
                )))
            }
        };
        Ok(Wanted {
            name: call.name().to_string(),
            shown: call.chunk.shown_name().into_owned(),
            uid,
            gid: call.arg_str("gid")?.filter(|g| !g.is_empty()),
            groups: call.arg("groups").map(|_| string_list_arg(call, "groups")),
            optional_groups: string_list_arg(call, "optional_groups"),
            remove_groups: call.arg_bool("remove_groups", true),
            home: call.arg_str("home")?,
            createhome: call.arg_bool("createhome", true),
            persist_home: call.arg_bool("persist_home", false),
            password: match call.arg_str("password")? {
                Some(clear) if call.arg_bool("hash_password", false) => {
                    let existing = usr::shadow_hash(call.name());
                    Some(
                        usr::hash_password(&clear, existing.as_deref())
                            .map_err(|e| StateError::Other(e.to_string()))?,
                    )
                }
                other => other,
            },
            enforce_password: call.arg_bool("enforce_password", true),
            empty_password: call.arg_bool("empty_password", false),
            shell: call.arg_str("shell")?,
            unique: call.arg_bool("unique", true),
            system: call.arg_bool("system", false),
            usergroup: call.arg("usergroup").map(halite_state::truthy),
            gecos: GECOS_FIELDS
                .iter()
                .map(|f| Ok((*f, call.arg_str(f)?)))
                .collect::<Result<Vec<_>, StateError>>()?,
            allow_uid_change: call.arg_bool("allow_uid_change", false),
            allow_gid_change: call.arg_bool("allow_gid_change", false),
            ageing: AGEING_ARGS
                .iter()
                .filter_map(|(arg, ..)| {
                    call.arg(arg)
                        .filter(|v| !v.is_null())
                        .map(|v| (*arg, v.clone()))
                })
                .collect(),
        })
    }
}

/// A group name or number -> its gid.
fn group_to_gid(group: &str) -> Option<i64> {
    match group.parse::<i64>() {
        Ok(n) => Some(n),
        Err(_) => Group::from_name(group)
            .ok()
            .flatten()
            .map(|g| i64::from(g.gid.as_raw())),
    }
}

/// A group name or number -> its name (a number without a group stays a number).
fn gid_to_group(group: &str) -> String {
    match group.parse::<u32>() {
        Ok(n) => Group::from_gid(Gid::from_raw(n))
            .ok()
            .flatten()
            .map(|g| g.name)
            .unwrap_or_else(|| group.to_string()),
        Err(_) => group.to_string(),
    }
}

type Changes = Vec<(String, Value)>;

/// Salt's `_changes`: what must change for the account to match `w`;
/// `Ok(None)` when the account does not exist, `Err` (Salt's
/// CommandExecutionError) when a uid/gid change is not allowed.
fn changes(
    w: &Wanted,
    optional_present: &[String],
    allow_ids: bool,
) -> Result<Option<Changes>, String> {
    let Some(lusr) = usr::info(&w.name) else {
        return Ok(None);
    };
    let text = |k: &str| {
        lusr.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let cur_uid = lusr.get("uid").and_then(Value::as_i64);
    let cur_gid = lusr.get("gid").and_then(Value::as_i64).unwrap_or(-1);
    let mut cur_groups: Vec<String> = lusr
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut wanted: BTreeSet<String> = w
        .groups
        .iter()
        .flatten()
        .chain(optional_present)
        .cloned()
        .collect();
    if !w.remove_groups || (w.groups.is_none() && optional_present.is_empty()) {
        wanted.extend(cur_groups.iter().cloned());
    }
    let mut change = Changes::new();
    if let Some(uid) = w.uid.filter(|u| *u != 0) {
        if cur_uid != Some(uid) {
            change.push(("uid".into(), Value::from(uid)));
        }
    }
    if let Some(gid) = &w.gid {
        if group_to_gid(gid) != Some(cur_gid) {
            change.push((
                "gid".into(),
                gid.parse::<i64>()
                    .map(Value::from)
                    .unwrap_or_else(|_| Value::from(gid.clone())),
            ));
        }
    }
    let default_grp = gid_to_group(w.gid.as_deref().unwrap_or(&cur_gid.to_string()));
    let old_default_grp = gid_to_group(&cur_gid.to_string());
    cur_groups.retain(|g| *g != default_grp);
    wanted.remove(&default_grp);
    if old_default_grp != default_grp {
        cur_groups.retain(|g| *g != old_default_grp);
    }
    if cur_groups.contains(&w.name) && !wanted.contains(&w.name) {
        cur_groups.retain(|g| *g != w.name);
    }
    let cur: BTreeSet<String> = cur_groups.into_iter().collect();
    let group_change = !(cur == wanted || (!w.remove_groups && wanted.is_subset(&cur)));
    if group_change && (!wanted.is_empty() || w.remove_groups) {
        change.push((
            "groups".into(),
            Value::from(wanted.into_iter().collect::<Vec<_>>()),
        ));
    }
    if let Some(home) = &w.home {
        if text("home") != *home {
            change.push(("home".into(), Value::from(home.clone())));
        }
    }
    if w.createhome {
        let newhome = w.home.clone().unwrap_or_else(|| text("home"));
        if !Path::new(&newhome).is_dir() {
            change.push(("homeDoesNotExist".into(), Value::from(newhome)));
        }
    }
    if let Some(shell) = &w.shell {
        if text("shell") != *shell {
            change.push(("shell".into(), Value::from(shell.clone())));
        }
    }
    let current_hash = usr::shadow_hash(&w.name).unwrap_or_default();
    if let Some(password) = w.password.as_ref().filter(|_| !w.empty_password) {
        // Salt's default hash on Linux is "!" (a locked, never-set password).
        if (current_hash == "!" || w.enforce_password) && current_hash != *password {
            change.push(("passwd".into(), Value::from(password.clone())));
        }
    }
    if w.empty_password && !current_hash.is_empty() {
        change.push(("empty_password".into(), Value::Bool(true)));
    }
    change.extend(ageing_changes(w));
    for (field, value) in &w.gecos {
        if let Some(value) = value {
            if text(field) != *value {
                change.push(((*field).into(), Value::from(value.clone())));
            }
        }
    }
    if !allow_ids {
        let mut errors = Vec::new();
        if !w.allow_uid_change {
            if let Some((_, uid)) = change.iter().find(|(k, _)| k == "uid") {
                errors.push(format!(
                    "Changing uid ({} -> {}) not permitted, set allow_uid_change to True to force this change. Note that this will not change file ownership.",
                    cur_uid.map(|u| u.to_string()).unwrap_or_default(),
                    py_str(uid)
                ));
            }
        }
        if !w.allow_gid_change {
            if let Some((_, gid)) = change.iter().find(|(k, _)| k == "gid") {
                errors.push(format!(
                    "Changing gid ({cur_gid} -> {}) not permitted, set allow_gid_change to True to force this change. Note that this will not change file ownership.",
                    py_str(gid)
                ));
            }
        }
        if !errors.is_empty() {
            let info: Vec<String> = errors.iter().map(|e| format!("- {e}")).collect();
            return Err(format!(
                "Encountered error checking for needed changes. Additional info follows:\n\n{}",
                info.join("\n")
            ));
        }
    }
    Ok(Some(change))
}

/// Salt's shadow checks of `_changes`: each ageing argument given whose
/// `shadow.info` value differs (`expire` only when truthy).
fn ageing_changes(w: &Wanted) -> Changes {
    let current = shadow::info(&w.name);
    w.ageing
        .iter()
        .filter(|(arg, value)| *arg != "expire" || crate::exec::py_truth(value))
        .filter_map(|(arg, value)| {
            let key = AGEING_ARGS.iter().find(|(a, ..)| a == arg)?.1;
            (!shadow::same(current.get(key), value)).then(|| ((*arg).to_string(), value.clone()))
        })
        .collect()
}

/// Sets one ageing argument through `shadow.set_*` (chage).
fn set_ageing(name: &str, arg: &str, value: &Value) -> Result<bool, StateError> {
    let Some((_, key, flag, validate)) = AGEING_ARGS.iter().find(|(a, ..)| *a == arg) else {
        return Ok(false);
    };
    shadow::set_attrib(name, key, value, flag, *validate)
        .map_err(|e| StateError::Other(e.to_string()))
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let mut w = Wanted::from_call(call)?;
    let name = w.name.clone();
    let shown = &w.shown;
    let mut ret = StateResult::ok(&name, format!("User {shown} is present and up to date"));
    for (field, value) in &w.gecos {
        if matches!(*field, "fullname" | "roomnumber" | "workphone") {
            if let Some(v) = value.as_ref().filter(|v| v.contains(',')) {
                return Ok(StateResult::fail(
                    &name,
                    format!("Unsupported char ',' in {v}"),
                ));
            }
        }
    }
    let mut missing_groups = Vec::new();
    if let Some(groups) = &w.groups {
        missing_groups = groups
            .iter()
            .filter(|g| grp::info(g).is_none())
            .cloned()
            .collect();
        if !missing_groups.is_empty() {
            if call.test {
                w.groups = Some(
                    groups
                        .iter()
                        .filter(|g| !missing_groups.contains(g))
                        .cloned()
                        .collect(),
                );
            } else {
                return Ok(StateResult::fail(
                    &name,
                    format!(
                        "The following group(s) are not present: {}",
                        missing_groups.join(",")
                    ),
                ));
            }
        }
    }
    let optional_present: Vec<String> = w
        .optional_groups
        .iter()
        .filter(|g| grp::info(g).is_some())
        .cloned()
        .collect();
    if w.usergroup == Some(true) && group_to_gid(&name).is_some() && w.gid.is_none() {
        w.gid = Some(name.clone());
    }
    let pending = match changes(&w, &optional_present, false) {
        Ok(p) => p,
        Err(message) => return Ok(StateResult::fail(&name, message)),
    };
    match pending {
        Some(pending) if !pending.is_empty() => {
            update(call, &w, &optional_present, pending, &missing_groups, ret)
        }
        Some(_) => Ok(ret),
        None => {
            if call.test {
                ret.result = None;
                ret.comment = format!("User {shown} set to be added");
                if !missing_groups.is_empty() {
                    ret.comment
                        .push_str(&format!(" (pending groups: {})", missing_groups.join(",")));
                }
                return Ok(ret);
            }
            create(&w, &optional_present, ret)
        }
    }
}

fn update(
    call: &StateCall<'_>,
    w: &Wanted,
    optional_present: &[String],
    pending: Changes,
    missing_groups: &[String],
    mut ret: StateResult,
) -> Result<StateResult, StateError> {
    let name = &w.name;
    let shown = &w.shown;
    if call.test {
        ret.result = None;
        let mut comment = String::from("The following user attributes are set to be changed:\n");
        for (key, value) in &pending {
            let shown = if key == "passwd" {
                REDACTED.to_string()
            } else {
                py_str(value)
            };
            comment.push_str(&format!("{key}: {shown}\n"));
        }
        if !missing_groups.is_empty() {
            comment.push_str(&format!(
                "groups (pending creation): {}\n",
                missing_groups.join(",")
            ));
        }
        ret.comment = comment;
        return Ok(ret);
    }
    let err = |e: crate::ExecError| StateError::Other(e.to_string());
    let pre = usr::info(name).unwrap_or_default();
    let pre_hash = usr::shadow_hash(name).unwrap_or_default();
    let pre_shadow = shadow::info(name);
    let has = |k: &str| pending.iter().any(|(key, _)| key == k);
    let value = |k: &str| {
        pending
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    if let Some(password) = value("passwd").and_then(|v| v.as_str().map(str::to_string)) {
        usr::set_password_hash(name, &password).map_err(err)?;
    }
    if has("empty_password") {
        usr::delete_password(name).map_err(err)?;
    }
    let mut home_changed = false;
    if let Some(home) = value("home").and_then(|v| v.as_str().map(str::to_string)) {
        if !has("homeDoesNotExist") {
            usr::chhome(name, &home, w.persist_home).map_err(err)?;
            home_changed = true;
        }
    }
    if let Some(home) = value("homeDoesNotExist").and_then(|v| v.as_str().map(str::to_string)) {
        if !home_changed {
            usr::chhome(name, &home, w.persist_home).map_err(err)?;
        }
        if !Path::new(&home).is_dir() {
            make_home(&home, &pre)?;
        }
    }
    for (key, v) in &pending {
        let text = py_str(v);
        match key.as_str() {
            "uid" => {
                usr::chuid(name, v.as_i64().unwrap_or_default()).map_err(err)?;
            }
            "gid" => {
                let gid = group_to_gid(&text)
                    .ok_or_else(|| StateError::Other(format!("Group '{text}' does not exist")))?;
                usr::chgid(name, gid).map_err(err)?;
            }
            "shell" => {
                usr::chshell(name, &text).map_err(err)?;
            }
            field if GECOS_FIELDS.contains(&field) => {
                usr::set_gecos_field(name, field, &text).map_err(err)?;
            }
            _ => {}
        }
    }
    for (arg, _, _, _) in AGEING_ARGS {
        if let Some(v) = value(arg) {
            set_ageing(name, arg, &v)?;
        }
    }
    if let Some(groups) = value("groups") {
        let list = usr::string_list(Some(&groups));
        usr::chgroups(name, &list, !w.remove_groups).map_err(err)?;
    }
    let post = usr::info(name).unwrap_or_default();
    for (key, after) in &post {
        if pre.get(key) != Some(after) {
            ret.changes.insert(key.clone(), after.clone());
        }
    }
    // Salt reports the shadow fields that moved under their shadow.info
    // names (`min`, `expire`...), the hash as passwd (handled below).
    let post_shadow = shadow::info(name);
    for (key, after) in &post_shadow {
        if key != "passwd" && pre_shadow.get(key) != Some(after) {
            ret.changes.insert(key.clone(), after.clone());
        }
    }
    if w.password.is_some() && usr::shadow_hash(name).unwrap_or_default() != pre_hash {
        ret.changes.insert("passwd".into(), Value::from(REDACTED));
    }
    if !ret.changes.is_empty() {
        ret.comment = format!("Updated user {shown}");
    }
    match changes(w, optional_present, true) {
        Ok(Some(left)) if !left.is_empty() => {
            let shown: Map = left
                .into_iter()
                .map(|(k, v)| {
                    let v = if k == "passwd" {
                        Value::from(REDACTED)
                    } else {
                        v
                    };
                    (k, v)
                })
                .collect();
            ret.result = Some(false);
            ret.comment = format!(
                "These values could not be changed: {}",
                py_repr(&Value::Object(shown))
            );
        }
        Err(message) => {
            ret.result = Some(false);
            ret.comment = message;
        }
        _ => {}
    }
    Ok(ret)
}

/// Creates a missing home directory owned by the account, mode 0755.
fn make_home(home: &str, info: &Map) -> Result<(), StateError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(home)
        .map_err(|e| StateError::Other(format!("Cannot create home directory {home}: {e}")))?;
    let uid = info
        .get("uid")
        .and_then(Value::as_u64)
        .and_then(|u| u32::try_from(u).ok());
    let gid = info
        .get("gid")
        .and_then(Value::as_u64)
        .and_then(|g| u32::try_from(g).ok());
    std::os::unix::fs::chown(home, uid, gid)
        .map_err(|e| StateError::Other(format!("Cannot chown {home}: {e}")))?;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| StateError::Other(format!("Cannot chmod {home}: {e}")))
}

fn create(
    w: &Wanted,
    optional_present: &[String],
    mut ret: StateResult,
) -> Result<StateResult, StateError> {
    let name = &w.name;
    let shown = &w.shown;
    let mut groups = w.groups.clone().unwrap_or_default();
    groups.extend(optional_present.iter().cloned());
    let add = AddUser {
        name: name.clone(),
        uid: w.uid,
        gid: w.gid.clone(),
        groups,
        home: w.home.clone(),
        createhome: w.createhome,
        shell: w.shell.clone(),
        unique: w.unique,
        system: w.system,
        usergroup: w.usergroup,
        gecos: w
            .gecos
            .iter()
            .filter_map(|(f, v)| {
                v.clone()
                    .filter(|v| !v.is_empty())
                    .map(|v| (f.to_string(), v))
            })
            .collect(),
    };
    let created = usr::add(&add).map_err(|e| StateError::Other(e.to_string()))?;
    if !created {
        return Ok(StateResult::fail(
            name,
            format!("Failed to create new user {shown}"),
        ));
    }
    ret.comment = format!("New user {shown} created");
    ret.changes = usr::info(name).unwrap_or_default();
    if !w.createhome {
        ret.changes.insert("home".into(), Value::from(""));
    }
    if let Some(password) = w.password.as_ref().filter(|_| !w.empty_password) {
        let ok =
            usr::set_password_hash(name, password).map_err(|e| StateError::Other(e.to_string()))?;
        if !ok {
            ret.comment = format!("User {shown} created but failed to set password to {REDACTED}");
            ret.result = Some(false);
        }
        ret.changes.insert("password".into(), Value::from(REDACTED));
    }
    if w.empty_password && w.password.is_none() {
        usr::delete_password(name).map_err(|e| StateError::Other(e.to_string()))?;
        if usr::shadow_hash(name).unwrap_or_default() != "" {
            ret.comment = format!("User {shown} created but failed to empty password");
            ret.result = Some(false);
        }
        ret.changes.insert("password".into(), Value::from(""));
    }
    // Salt applies the ageing arguments after creating the account: `date`
    // when given, the others when truthy, each checked afterwards.
    for (arg, value) in &w.ageing {
        if *arg != "date" && !crate::exec::py_truth(value) {
            continue;
        }
        set_ageing(name, arg, value)?;
        let Some((_, key, ..)) = AGEING_ARGS.iter().find(|(a, ..)| a == arg) else {
            continue;
        };
        if !shadow::same(shadow::info(name).get(*key), value) {
            let what = match *arg {
                "date" => "last change date",
                "mindays" => "minimum days",
                "maxdays" => "maximum days",
                "inactdays" => "inactive days",
                "warndays" => "warn days",
                _ => "expire days",
            };
            ret.comment = format!(
                "User {shown} created but failed to set {what} to {}",
                py_str(value)
            );
            ret.result = Some(false);
        }
        ret.changes.insert((*arg).to_string(), value.clone());
    }
    Ok(ret)
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let shown = call.chunk.shown_name();
    if usr::info(&name).is_none() {
        return Ok(StateResult::ok(
            &name,
            format!("User {shown} is not present"),
        ));
    }
    if call.test {
        return Ok(StateResult::would_change(
            &name,
            format!("User {shown} set for removal"),
            Map::new(),
        ));
    }
    let before: Vec<String> = usr::group_list(&name);
    let removed = usr::delete(
        &name,
        call.arg_bool("purge", false),
        call.arg_bool("force", false),
    )
    .map_err(|e| StateError::Other(e.to_string()))?;
    if !removed {
        return Ok(StateResult::fail(
            &name,
            format!("Failed to remove user {shown}"),
        ));
    }
    let mut ret = StateResult::ok(&name, format!("Removed user {shown}"));
    for group in before.iter().filter(|g| grp::info(g).is_none()) {
        ret.changes
            .insert(format!("{group} group"), Value::from("removed"));
    }
    ret.changes.insert(name.clone(), Value::from("removed"));
    Ok(ret)
}
