//! Salt's `mount` state: `mounted` (the live mount and its fstab entry,
//! remounting when options changed), `unmounted`, `swap`, and `mod_watch`
//! (a watched `mounted` remounts), over [`crate::exec::mount`].

use std::path::Path;

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::mount::{self as exec, FstabRequest};
use crate::exec::user::{scalar_text, string_list};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "mount",
    functions: &[
        StateFunction::new("mounted", mounted),
        StateFunction::new("unmounted", unmounted),
        StateFunction::new("swap", swap),
        StateFunction::new("mod_watch", mod_watch),
        StateFunction::new("fstab_present", fstab_present),
        StateFunction::new("fstab_absent", fstab_absent),
    ],
};

fn err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

fn text(call: &StateCall<'_>, key: &str) -> Option<String> {
    call.arg(key)
        .and_then(scalar_text)
        .filter(|s| !s.is_empty())
}

fn opts_arg(call: &StateCall<'_>) -> Vec<String> {
    match call.arg("opts") {
        None => vec!["defaults".into()],
        Some(v) => string_list(Some(v)),
    }
}

/// Options a mount never shows in `/proc` (Salt's list).
const INVISIBLE_OPTIONS: &[&str] = &[
    "_netdev",
    "actimeo",
    "bg",
    "comment",
    "defaults",
    "delay_connect",
    "direct-io-mode",
    "intr",
    "loop",
    "nointr",
    "nobootwait",
    "nofail",
    "password",
    "reconnect",
    "retry",
    "soft",
    "auto",
    "users",
    "bind",
    "nonempty",
    "transform_symlinks",
    "port",
    "backup-volfile-servers",
];
/// `key=value` options whose value a mount never shows.
const INVISIBLE_KEYS: &[&str] = &[
    "actimeo",
    "comment",
    "credentials",
    "direct-io-mode",
    "password",
    "port",
    "retry",
    "secretfile",
];

/// Salt's `size=<n><k|m|g>` as kibibytes (`size=1m` -> `size=1024k`).
fn size_in_k(opt: &str) -> Option<String> {
    let rest = opt.strip_prefix("size=")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let unit = rest[digits.len()..].chars().next()?;
    let n: u64 = digits.parse().ok()?;
    let k = match unit {
        'k' => n,
        'm' => n * 1024,
        'g' => n * 1024 * 1024,
        _ => return None,
    };
    Some(format!("size={k}k"))
}

/// The wanted options the live mount lacks (Salt's `trigger_remount`),
/// and the last option as Salt's loop left it (its messages name it).
///
/// As in Salt, when the live mount has a `size=` superblock option every
/// wanted option is compared as that size, so on tmpfs only the mount
/// cache notices changed options.
fn remount_triggers(opts: &[String], fstype: &str, live: &Value) -> (Vec<String>, String) {
    let list = |k: &str| -> Vec<String> {
        live.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(scalar_text).collect())
            .unwrap_or_default()
    };
    let active_opts = list("opts");
    let superopts: Vec<String> = list("superopts")
        .into_iter()
        .map(|o| size_in_k(&o).unwrap_or(o))
        .collect();
    let live_size = list("superopts").iter().rev().find_map(|o| size_in_k(o));
    let ignore: &[&str] = if fstype == "ramfs" { &["size"] } else { &[] };
    let mut out = Vec::new();
    let mut last = String::new();
    for opt in opts {
        let mut opt = match opt.as_str() {
            "tcp" => "proto=tcp".to_string(),
            "udp" => "proto=udp".to_string(),
            o => o.to_string(),
        };
        let key = opt.split('=').next().unwrap_or_default().to_string();
        if INVISIBLE_KEYS.contains(&key.as_str()) || ignore.contains(&key.as_str()) {
            opt = key.clone();
        }
        if let Some(k) = size_in_k(&opt) {
            opt = k;
        }
        if fstype == "cifs" && key == "user" {
            opt = format!(
                "username={}",
                opt.split_once('=').map(|x| x.1).unwrap_or("")
            );
        }
        if (key == "uid" || key == "gid") && opt.contains('=') {
            let val = opt.split_once('=').map(|x| x.1).unwrap_or("").to_string();
            if !val.chars().all(|c| c.is_ascii_digit()) {
                let id = if key == "uid" {
                    nix::unistd::User::from_name(&val)
                        .ok()
                        .flatten()
                        .map(|u| u.uid.to_string())
                } else {
                    nix::unistd::Group::from_name(&val)
                        .ok()
                        .flatten()
                        .map(|g| g.gid.to_string())
                };
                opt = format!("{key}={}", id.unwrap_or(val));
            }
        }
        if let Some(size) = &live_size {
            opt = size.clone();
        }
        last = opt.clone();
        if !active_opts.contains(&opt)
            && !superopts.contains(&opt)
            && !INVISIBLE_OPTIONS.contains(&opt.as_str())
            && !ignore.contains(&opt.as_str())
            && !INVISIBLE_KEYS.contains(&opt.as_str())
        {
            out.push(opt);
        }
    }
    out.sort();
    (out, last)
}

/// The canonical device to compare with the live mount's.
fn real_device(device: &str) -> Result<String, String> {
    if device.starts_with('/') {
        return Ok(std::fs::canonicalize(device)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| device.to_string()));
    }
    let upper = device.to_ascii_uppercase();
    if upper.starts_with("UUID=") {
        return Ok(device
            .split_once('=')
            .map(|x| x.1)
            .unwrap_or_default()
            .trim_matches('"')
            .to_lowercase());
    }
    if upper.starts_with("LABEL=") {
        let label = device.split_once('=').map(|x| x.1).unwrap_or_default();
        let out = std::process::Command::new("blkid")
            .args(["-t", &format!("LABEL={label}")])
            .output();
        return match out {
            Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .and_then(|l| l.split(':').next())
                .unwrap_or_default()
                .to_string()),
            _ => Err(format!("Unable to find device with label {label}.")),
        };
    }
    Ok(device.to_string())
}

fn mounted(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let raw = call.name().to_string();
    let mut ret = StateResult::ok(&raw, "");
    let Some(device) = text(call, "device") else {
        return Ok(StateResult::fail(
            &raw,
            "Must provide device to mount.mounted",
        ));
    };
    let Some(fstype) = text(call, "fstype") else {
        return Ok(StateResult::fail(
            &raw,
            "Must provide fstype to mount.mounted",
        ));
    };
    if raw.is_empty() {
        return Ok(StateResult::fail(
            &raw,
            "Must provide name to mount.mounted",
        ));
    }
    let name = if raw == "/" {
        raw.clone()
    } else {
        raw.trim_end_matches('/').to_string()
    };
    let mut opts = opts_arg(call);
    let mkmnt = call.arg_bool("mkmnt", false);
    let do_mount = call.arg_bool("mount", true);
    let persist = call.arg_bool("persist", true);
    let config = text(call, "config").unwrap_or_else(|| exec::DEFAULT_FSTAB.into());
    let regexes: Vec<String> = call
        .arg("device_name_regex")
        .map(|v| string_list(Some(v)))
        .unwrap_or_default();
    let cachedir = call
        .env
        .opts()
        .get("cachedir")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut update_cache = false;
    let mut active = exec::active(true).map_err(err)?;
    let real_name = std::fs::canonicalize(&name)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| name.clone());
    let comp_real_name = real_name.replace(' ', "\\040");
    let real_device = match real_device(&device) {
        Ok(d) => d,
        Err(e) => return Ok(StateResult::fail(&raw, e)),
    };
    if let (Some(live), true) = (active.get(&comp_real_name).cloned(), do_mount) {
        let mut device_list: Vec<String> = Vec::new();
        if let Some(d) = live.get("device").and_then(Value::as_str) {
            device_list.push(d.to_string());
            let real = std::fs::canonicalize(d)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| d.to_string());
            device_list.push(real);
        }
        for key in ["alt_device", "device_uuid", "device_label"] {
            if let Some(d) = live.get(key).and_then(Value::as_str) {
                if !device_list.iter().any(|x| x == d) {
                    device_list.push(d.to_string());
                }
            }
        }
        if !opts.is_empty() {
            let (triggers, last) = remount_triggers(&opts, &fstype, &live);
            if !triggers.is_empty() {
                if call.test {
                    ret.result = None;
                    ret.comment = format!(
                        "Remount would be forced because options ({}) changed",
                        triggers.join(",")
                    );
                    return Ok(ret);
                }
                force_remount(
                    &mut ret,
                    &real_name,
                    &device,
                    mkmnt,
                    &fstype,
                    &mut opts,
                    &triggers.join(","),
                )?;
                update_cache = true;
            }
            let cached = cachedir
                .as_deref()
                .map(|c| exec::cache::get(c, &real_name))
                .unwrap_or_default();
            match cached.get("opts").and_then(Value::as_array) {
                Some(old) => {
                    let missing: Vec<String> = old
                        .iter()
                        .filter_map(scalar_text)
                        .filter(|o| !opts.contains(o))
                        .collect();
                    if !missing.is_empty() {
                        if call.test {
                            ret.result = None;
                            // Salt's wording, without the space.
                            ret.comment = format!(
                                "Remount would be forced because options ({})changed",
                                missing.join(",")
                            );
                            return Ok(ret);
                        }
                        force_remount(
                            &mut ret, &real_name, &device, mkmnt, &fstype, &mut opts, &last,
                        )?;
                        update_cache = true;
                    }
                }
                None => update_cache = true,
            }
        }
        if !device_list.contains(&real_device) {
            let ignored = device_list.iter().find(|d| {
                regexes
                    .iter()
                    .any(|r| regex::Regex::new(&format!("^(?:{r})")).is_ok_and(|re| re.is_match(d)))
            });
            if let Some(d) = ignored {
                ret.result = Some(true);
                ret.comment = format!(
                    "An umount will not be forced because device matched device_name_regex: {d}"
                );
            } else if call.test {
                ret.result = None;
                ret.comment = format!(
                    "An umount would have been forced because devices do not match.  Watched: {device}"
                );
            } else {
                let mut why =
                    format!("Forced unmount because devices don't match. Wanted: {device}");
                if real_device != device {
                    why.push_str(&format!(" ({real_device})"));
                }
                why.push_str(&format!(", current: {}", device_list.join(", ")));
                ret.changes.insert("umount".into(), Value::from(why));
                exec::umount(&real_name, None, false).map_err(err)?;
                active = exec::active(true).map_err(err)?;
                if active.contains_key(&comp_real_name) {
                    return Ok(StateResult::fail(&raw, "Unable to unmount"));
                }
                update_cache = true;
            }
        } else {
            ret.comment = "Target was already mounted".into();
        }
    }
    if !active.contains_key(&comp_real_name) {
        let exists = Path::new(&name).exists();
        if do_mount {
            if call.test {
                ret.result = None;
                ret.comment = if exists {
                    format!("{name} would be mounted")
                } else if mkmnt {
                    format!("{name} would be created and mounted")
                } else {
                    format!("{name} does not exist and would not be created")
                };
                return Ok(ret);
            }
            if !exists && !mkmnt {
                return Ok(StateResult::fail(&raw, "Mount directory is not present"));
            }
            let out = exec::mount(&name, Some(&device), mkmnt, &fstype, &opts).map_err(err)?;
            update_cache = true;
            if let Some(e) = out {
                return Ok(StateResult::fail(&raw, e));
            }
            if exec::active(true)
                .map_err(err)?
                .contains_key(&comp_real_name)
            {
                ret.comment = "Target was successfully mounted".into();
                ret.changes.insert("mount".into(), Value::Bool(true));
            }
        } else if !exists {
            if call.test {
                ret.result = None;
                ret.comment = if mkmnt {
                    format!("{name} would be created, but not mounted")
                } else {
                    format!("{name} does not exist and would neither be created nor mounted")
                };
            } else if mkmnt {
                std::fs::create_dir_all(&name)
                    .map_err(|e| StateError::Other(format!("Unable to create {name}: {e}")))?;
                ret.comment = format!("{name} was created, not mounted");
            } else {
                ret.comment = format!("{name} not present and not mounted");
            }
        } else if call.test {
            ret.comment = format!("{name} would not be mounted");
        } else {
            ret.comment = format!("{name} not mounted");
        }
    }
    if !persist {
        return Ok(ret);
    }
    let match_on = match call.arg("match_on") {
        None => vec!["auto".to_string()],
        Some(v) => string_list(Some(v)),
    };
    let req = FstabRequest {
        name: name.clone(),
        device: device.clone(),
        fstype: fstype.clone(),
        opts: opts.clone(),
        dump: text(call, "dump").unwrap_or_else(|| "0".into()),
        pass_num: text(call, "pass_num").unwrap_or_else(|| "0".into()),
        config: config.clone(),
        test: call.test,
        match_on,
        not_change: false,
    };
    let out = match exec::set_fstab(&req) {
        Ok(o) => o,
        Err(e) if e.to_string().starts_with("Bad config file") => "bad config",
        Err(e) => return Ok(StateResult::fail(&raw, e.to_string())),
    };
    if call.test && out != "present" {
        ret.result = None;
        let comment = match (out, do_mount) {
            ("new", true) => format!("{name} is mounted, but needs to be written to the fstab in order to be made persistent."),
            ("new", false) => format!("{name} needs to be written to the fstab in order to be made persistent."),
            ("change", true) => format!("{name} is mounted, but its fstab entry must be updated."),
            ("change", false) => format!("The {name} fstab entry must be updated."),
            _ => {
                ret.result = Some(false);
                format!("Unable to detect fstab status for mount point {name} due to unexpected output '{out}' from call to mount.set_fstab. This is most likely a bug.")
            }
        };
        ret.comment = format!("{}. {comment}", ret.comment);
        return Ok(ret);
    }
    if let (true, false, Some(dir)) = (update_cache, call.test, cachedir.as_deref()) {
        if let Err(e) = exec::cache::put(dir, &real_name, &device, mkmnt, &fstype, &opts) {
            tracing::warn!("{e}");
        }
    }
    match out {
        "present" => ret.comment.push_str(". Entry already exists in the fstab."),
        "new" => {
            ret.changes.insert("persist".into(), Value::from("new"));
            ret.comment.push_str(". Added new entry to the fstab.");
        }
        "change" => {
            ret.changes.insert("persist".into(), Value::from("update"));
            ret.comment.push_str(". Updated the entry in the fstab.");
        }
        _ => {
            ret.result = Some(false);
            ret.comment.push_str(". However, the fstab was not found.");
        }
    }
    Ok(ret)
}

/// Salt's forced remount of a mounted target whose options changed
/// (unmount and mount again for nfs/cvfs/fuse, `-o remount` otherwise).
fn force_remount(
    ret: &mut StateResult,
    real_name: &str,
    device: &str,
    mkmnt: bool,
    fstype: &str,
    opts: &mut Vec<String>,
    what: &str,
) -> Result<(), StateError> {
    let why = format!("options ({what}) changed");
    if fstype == "nfs" || fstype == "cvfs" || fstype.starts_with("fuse") {
        ret.changes.insert(
            "umount".into(),
            Value::from(format!("Forced unmount and mount because {why}")),
        );
        let out = match exec::umount(real_name, None, false).map_err(err)? {
            None => None,
            Some(_) => exec::umount(real_name, None, true).map_err(err)?,
        };
        if let Some(e) = out {
            ret.result = Some(false);
            ret.comment = format!("Unable to unmount {real_name}: {e}.");
            return Ok(());
        }
        if let Some(e) = exec::mount(real_name, Some(device), mkmnt, fstype, opts).map_err(err)? {
            ret.result = Some(false);
            ret.comment = e;
        }
    } else {
        ret.changes.insert(
            "umount".into(),
            Value::from(format!("Forced remount because {why}")),
        );
        if let Some(e) = exec::remount(real_name, device, mkmnt, fstype, opts).map_err(err)? {
            ret.result = Some(false);
            ret.comment = e;
        }
        opts.retain(|o| o != "remount");
    }
    Ok(())
}

fn unmounted(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    if name.is_empty() {
        return Ok(StateResult::fail(
            &name,
            "Must provide name to mount.unmounted",
        ));
    }
    let device = text(call, "device");
    let config = text(call, "config").unwrap_or_else(|| exec::DEFAULT_FSTAB.into());
    let mut ret = StateResult::ok(&name, "");
    let active = exec::active(true).map_err(err)?;
    if !active.contains_key(&name.replace(' ', "\\040")) {
        ret.comment = "Target was already unmounted".into();
    } else {
        if call.test {
            ret.result = None;
            ret.comment = format!("Mount point {name} is mounted but should not be");
            return Ok(ret);
        }
        let out = exec::umount(&name, device.as_deref(), false).map_err(err)?;
        if let Some(dir) = call.env.opts().get("cachedir").and_then(Value::as_str) {
            if let Err(e) = exec::cache::delete(dir, &name) {
                tracing::warn!("{e}");
            }
        }
        match out {
            Some(e) => {
                ret.comment = e;
                ret.result = Some(false);
            }
            None => {
                ret.comment = "Target was successfully unmounted".into();
                ret.changes.insert("umount".into(), Value::Bool(true));
            }
        }
    }
    if call.arg_bool("persist", false) {
        let data = exec::fstab(&config);
        match data.get(&name) {
            None => ret.comment.push_str(". fstab entry not found"),
            Some(entry) => {
                if let Some(d) = &device {
                    if entry.get("device").and_then(Value::as_str) != Some(d.as_str()) {
                        ret.comment
                            .push_str(&format!(". fstab entry for device {d} not found"));
                        return Ok(ret);
                    }
                }
                if call.test {
                    ret.result = None;
                    ret.comment = format!("Mount point {name} is unmounted but needs to be purged from {config} to be made persistent");
                    return Ok(ret);
                }
                match exec::rm_fstab(&name, device.as_deref(), &config) {
                    Ok(true) => {
                        ret.comment.push_str(". Removed target from fstab");
                        ret.changes.insert("persist".into(), Value::from("purged"));
                    }
                    _ => {
                        ret.result = Some(false);
                        ret.comment.push_str(". Failed to persist purge");
                    }
                }
            }
        }
    }
    Ok(ret)
}

fn swap(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["persist", "config"])?;
    let name = call.name().to_string();
    let config = text(call, "config").unwrap_or_else(|| exec::DEFAULT_FSTAB.into());
    let mut ret = StateResult::ok(&name, "");
    let mut on = exec::swaps().map_err(err)?;
    let real = match std::fs::read_link(&name) {
        Ok(target) => {
            let t = target.to_string_lossy().into_owned();
            if t.starts_with('/') {
                t
            } else {
                format!(
                    "/dev/{}",
                    target
                        .file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                        .unwrap_or(t)
                )
            }
        }
        Err(_) => name.clone(),
    };
    if on.contains_key(&real) {
        ret.comment = format!("Swap {name} already active");
    } else if call.test {
        ret.result = None;
        ret.comment = format!("Swap {name} is set to be activated");
    } else {
        exec::swapon(&real, None).map_err(err)?;
        on = exec::swaps().map_err(err)?;
        match on.get(&real) {
            Some(Value::Object(stats)) => {
                ret.comment = format!("Swap {name} activated");
                ret.changes = stats.clone();
            }
            _ => {
                ret.comment = format!("Swap {name} failed to activate");
                ret.result = Some(false);
            }
        }
    }
    if !call.arg_bool("persist", true) {
        return Ok(ret);
    }
    let data = exec::fstab(&config);
    if call.test {
        let listed = data.contains_key(&name)
            || data
                .values()
                .any(|e| e.get("device").and_then(Value::as_str) == Some(name.as_str()));
        if !listed {
            ret.result = None;
            if on.contains_key(&name) {
                ret.comment =
                    format!("Swap {name} is set to be added to the fstab and to be activated");
            }
        }
        return Ok(ret);
    }
    if let Some(none) = data.get("none") {
        if none.get("device").and_then(Value::as_str) == Some(name.as_str())
            && none.get("fstype").and_then(Value::as_str) != Some("swap")
        {
            return Ok(ret);
        }
    }
    let req = FstabRequest {
        name: "none".into(),
        device: name.clone(),
        fstype: "swap".into(),
        opts: vec!["defaults".into()],
        dump: "0".into(),
        pass_num: "0".into(),
        config,
        test: false,
        match_on: vec!["auto".into()],
        not_change: false,
    };
    match exec::set_fstab(&req) {
        Ok("present") => {}
        Ok("new") => {
            ret.changes.insert("persist".into(), Value::from("new"));
            ret.comment.push_str(". Added new entry to the fstab.");
        }
        Ok(_) => {
            ret.changes.insert("persist".into(), Value::from("update"));
            ret.comment.push_str(". Updated the entry in the fstab.");
        }
        Err(e) => {
            ret.result = Some(false);
            ret.comment
                .push_str(&format!(". However, the fstab was not found. ({e})"));
        }
    }
    Ok(ret)
}

fn mod_watch(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let sfun = call.sfun.unwrap_or_default();
    if sfun != "mounted" {
        return Ok(StateResult::ok(
            &name,
            format!("Watch not supported in {sfun} at this time"),
        ));
    }
    let device = text(call, "device").unwrap_or_default();
    let fstype = text(call, "fstype").unwrap_or_default();
    match exec::remount(&name, &device, false, &fstype, &opts_arg(call)).map_err(err)? {
        None => Ok(StateResult::ok(&name, format!("{name} remounted"))),
        // Salt tests the stderr string for truth: a non-empty error is
        // reported as remounted too.
        Some(e) if !e.is_empty() => Ok(StateResult::ok(&name, format!("{name} remounted"))),
        Some(e) => Ok(StateResult::fail(
            &name,
            format!("{name} failed to remount: {e}"),
        )),
    }
}

/// The mount point of an fstab state: `fs_file` without trailing slashes
/// (except `/`), and the fs_spec of `name` as `mount_by` asks.
fn fstab_target(call: &StateCall<'_>) -> Result<(String, Option<String>), StateError> {
    let fs_file = call.arg("fs_file").and_then(scalar_text).ok_or_else(|| {
        StateError::MissingArg(
            "fs_file".into(),
            format!("{}.{}", call.chunk.state(), call.chunk.fun()),
        )
    })?;
    let fs_file = if fs_file == "/" {
        fs_file
    } else {
        fs_file.trim_end_matches('/').to_string()
    };
    let mount_by = text(call, "mount_by");
    Ok((fs_file, exec::convert_to(call.name(), mount_by.as_deref())))
}

/// Salt's `mount.fstab_present`: the fstab entry of `name` on `fs_file`
/// (written or updated through `mount.set_fstab`), mounted when new and
/// `mount` is true. Salt's comment lines, joined as its state engine does.
fn fstab_present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(
        call,
        &[
            "fs_file",
            "fs_vfstype",
            "fs_mntops",
            "fs_freq",
            "fs_passno",
            "mount_by",
            "config",
            "mount",
            "match_on",
            "not_change",
            "fs_mount",
        ],
    )?;
    let name = call.name().to_string();
    let fs_vfstype = call
        .arg("fs_vfstype")
        .and_then(scalar_text)
        .ok_or_else(|| StateError::MissingArg("fs_vfstype".into(), "mount.fstab_present".into()))?;
    let (fs_file, fs_spec) = fstab_target(call)?;
    let mut ret = StateResult::new(&name, Some(false));
    let Some(fs_spec) = fs_spec else {
        let by = text(call, "mount_by").unwrap_or_default();
        ret.comment = format!("Device {name} cannot be converted to {by}");
        return Ok(ret);
    };
    let config = text(call, "config").unwrap_or_else(|| exec::DEFAULT_FSTAB.into());
    let opts = match call.arg("fs_mntops") {
        None => vec!["defaults".to_string()],
        Some(v) => string_list(Some(v)),
    };
    let match_on = match call.arg("match_on") {
        None => vec!["auto".to_string()],
        Some(v) => string_list(Some(v)),
    };
    let mount = call.arg_bool("mount", true);
    let req = FstabRequest {
        name: fs_file.clone(),
        device: fs_spec,
        fstype: fs_vfstype,
        opts,
        dump: call
            .arg("fs_freq")
            .and_then(scalar_text)
            .unwrap_or_else(|| "0".into()),
        pass_num: call
            .arg("fs_passno")
            .and_then(scalar_text)
            .unwrap_or_else(|| "0".into()),
        config: config.clone(),
        test: call.test,
        match_on,
        not_change: call.arg_bool("not_change", false),
    };
    let out = exec::set_fstab(&req).map_err(err)?;
    let mut lines = Vec::new();
    ret.result = Some(true);
    if call.test {
        ret.result = None;
        match out {
            "present" => {
                lines.push(format!("{fs_file} entry is already in {config}."));
                ret.result = Some(true);
            }
            "new" => {
                lines.push(format!("{fs_file} entry will be written in {config}."));
                if mount {
                    lines.push(format!("Will mount {name} on {fs_file}"));
                }
            }
            _ => lines.push(format!("{fs_file} entry will be updated in {config}.")),
        }
        ret.comment = lines.join("\n");
        return Ok(ret);
    }
    match out {
        "present" => lines.push(format!("{fs_file} entry was already in {config}.")),
        "new" => {
            ret.changes.insert("persist".into(), Value::from("new"));
            lines.push(format!("{fs_file} entry added in {config}."));
            if mount {
                match exec::mount(&fs_file, None, false, "", &[]).map_err(err)? {
                    Some(stderr) => {
                        ret.result = Some(false);
                        let why = stderr.split_once(':').map_or(stderr.as_str(), |(_, r)| r);
                        lines.push(format!("Error while mounting {why}"));
                    }
                    None => lines.push(format!("Mounted {name} on {fs_file}")),
                }
            }
        }
        _ => {
            ret.changes.insert("persist".into(), Value::from("change"));
            lines.push(format!("{fs_file} entry updated in {config}."));
        }
    }
    ret.comment = lines.join("\n");
    Ok(ret)
}

/// Salt's `mount.fstab_absent`: no fstab entry for `fs_file` (and the
/// fs_spec of `name`) in `config`.
fn fstab_absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["fs_file", "mount_by", "config"])?;
    let name = call.name().to_string();
    let (fs_file, fs_spec) = fstab_target(call)?;
    let config = text(call, "config").unwrap_or_else(|| exec::DEFAULT_FSTAB.into());
    let present = exec::fstab(&config).contains_key(&fs_file);
    let mut ret = StateResult::new(&name, Some(true));
    if call.test {
        ret.result = None;
        ret.comment = if present {
            format!("{fs_file} entry will be removed from {config}.")
        } else {
            format!("{fs_file} entry is already missing in {config}.")
        };
        return Ok(ret);
    }
    if !present {
        ret.comment = format!("{fs_file} entry is already missing in {config}.");
        return Ok(ret);
    }
    match exec::rm_fstab(&fs_file, fs_spec.as_deref(), &config) {
        Ok(true) => {
            ret.changes.insert("persist".into(), Value::from("removed"));
            ret.comment = format!("{fs_file} entry removed from {config}.");
        }
        _ => {
            ret.result = Some(false);
            ret.comment = format!("{fs_file} entry failed when removing from {config}.");
        }
    }
    Ok(ret)
}
