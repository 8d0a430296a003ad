//! Salt's `mount` execution module on Linux: the live mounts (from
//! `/proc/self/mounts` and `/proc/self/mountinfo`), the fstab (read and
//! edited in Salt's line format), `mount`/`umount`/remount through the real
//! binaries, and swap (`/proc/swaps`, `swapon`, `swapoff`).

use std::path::Path;

use halite_state::{Map, Value};

use crate::exec::signature::{self, Signature};
use crate::exec::user::{scalar_text, string_list};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "mount",
    functions: &[
        ExecFunction::new("active", active_fn),
        ExecFunction::new("fstab", fstab_fn),
        ExecFunction::new("set_fstab", set_fstab_fn),
        ExecFunction::new("rm_fstab", rm_fstab_fn),
        ExecFunction::new("mount", mount_fn),
        ExecFunction::new("umount", umount_fn),
        ExecFunction::new("remount", remount_fn),
        ExecFunction::new("is_mounted", is_mounted_fn),
        ExecFunction::new("swaps", swaps_fn),
        ExecFunction::new("swapon", swapon_fn),
        ExecFunction::new("swapoff", swapoff_fn),
    ],
};

/// The Python signatures of the functions, for Salt's argument errors.
const SIGNATURES: &[Signature] = &[
    Signature::new("active", &[], &["extended"]),
    Signature::new("fstab", &[], &["config"]),
    Signature::new(
        "set_fstab",
        &["name", "device", "fstype"],
        &[
            "opts",
            "dump",
            "pass_num",
            "config",
            "test",
            "match_on",
            "not_change",
        ],
    )
    .with_kwargs(),
    Signature::new("rm_fstab", &["name", "device"], &["config"]),
    Signature::new(
        "mount",
        &["name"],
        &["device", "mkmnt", "fstype", "opts", "user", "util"],
    ),
    Signature::new("umount", &["name"], &["device", "user", "util", "lazy"]),
    Signature::new(
        "remount",
        &["name", "device"],
        &["mkmnt", "fstype", "opts", "user"],
    ),
    Signature::new("is_mounted", &["name"], &[]),
    Signature::new("swaps", &[], &[]),
    Signature::new("swapon", &["name"], &["priority"]),
    Signature::new("swapoff", &["name"], &[]),
];

/// The default fstab.
pub const DEFAULT_FSTAB: &str = "/etc/fstab";

fn exec_err(msg: impl Into<String>) -> ExecError {
    ExecError::Execution(msg.into())
}

/// What a command printed and returned.
struct Ran {
    retcode: i32,
    stdout: String,
    stderr: String,
}

fn run(prog: &str, args: &[&str]) -> Result<Ran, ExecError> {
    tracing::debug!(prog, ?args, "running");
    let out = std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| exec_err(format!("cannot run {prog}: {e}; install util-linux/mount")))?;
    Ok(Ran {
        retcode: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
    })
}

/// Salt's `_resolve_user_group_names`: `uid=`/`gid=` names as numbers,
/// `\040` shown as `\ `.
fn resolve_opts(opts: &str) -> Vec<Value> {
    opts.split(',')
        .map(|opt| {
            let mut opt = opt.to_string();
            if let Some((key, val)) = opt.clone().split_once('=') {
                if (key == "uid" || key == "gid") && !val.chars().all(|c| c.is_ascii_digit()) {
                    let id = if key == "uid" {
                        nix::unistd::User::from_name(val)
                            .ok()
                            .flatten()
                            .map(|u| u.uid.to_string())
                    } else {
                        nix::unistd::Group::from_name(val)
                            .ok()
                            .flatten()
                            .map(|g| g.gid.to_string())
                    };
                    opt = format!("{key}={}", id.unwrap_or_else(|| val.to_string()));
                }
            }
            Value::from(opt.replace("\\040", "\\ "))
        })
        .collect()
}

/// Salt's `_list_mounts`: mount point -> device as `mount -l` shows them.
fn list_mounts() -> Map {
    let mut ret = Map::new();
    if let Ok(r) = run("mount", &["-l"]) {
        for line in r.stdout.lines() {
            let comps: Vec<&str> = line.split_whitespace().collect();
            if comps.len() >= 3 {
                ret.insert(comps[2].to_string(), Value::from(comps[0]));
            }
        }
    }
    ret
}

/// Salt's `mount.active`: mount point -> `device`, `fstype`, `opts`...
/// (`extended` adds mountinfo's ids, root and superblock options).
pub fn active(extended: bool) -> Result<Map, ExecError> {
    let alt = list_mounts();
    let mut ret = Map::new();
    if extended {
        if let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") {
            for line in text.lines() {
                let comps: Vec<&str> = line.split_whitespace().collect();
                let Some(sep) = comps.iter().position(|c| *c == "-") else {
                    continue;
                };
                if comps.len() < sep + 4 || comps.len() < 6 {
                    continue;
                }
                let (major, minor) = comps[2].split_once(':').unwrap_or((comps[2], ""));
                let device = comps[sep + 2];
                let mut m = Map::new();
                m.insert("mountid".into(), Value::from(comps[0]));
                m.insert("parentid".into(), Value::from(comps[1]));
                m.insert("major".into(), Value::from(major));
                m.insert("minor".into(), Value::from(minor));
                m.insert("root".into(), Value::from(comps[3]));
                m.insert("opts".into(), Value::Array(resolve_opts(comps[5])));
                m.insert("fstype".into(), Value::from(comps[sep + 1]));
                m.insert("device".into(), Value::from(device.replace("\\040", "\\ ")));
                m.insert(
                    "alt_device".into(),
                    alt.get(comps[4]).cloned().unwrap_or(Value::Null),
                );
                m.insert(
                    "superopts".into(),
                    Value::Array(resolve_opts(comps[sep + 3])),
                );
                m.insert("device_uuid".into(), Value::Null);
                m.insert("device_label".into(), Value::Null);
                ret.insert(comps[4].to_string(), Value::Object(m));
            }
            return Ok(ret);
        }
    }
    let text = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|_| exec_err("File not readable /proc/self/mounts"))?;
    for line in text.lines() {
        let comps: Vec<&str> = line.split_whitespace().collect();
        if comps.len() < 4 {
            continue;
        }
        let mut m = Map::new();
        m.insert("device".into(), Value::from(comps[0]));
        m.insert(
            "alt_device".into(),
            alt.get(comps[1]).cloned().unwrap_or(Value::Null),
        );
        m.insert("fstype".into(), Value::from(comps[2]));
        m.insert("opts".into(), Value::Array(resolve_opts(comps[3])));
        ret.insert(comps[1].to_string(), Value::Object(m));
    }
    Ok(ret)
}

/// Salt's `mount.is_mounted`.
pub fn is_mounted(name: &str) -> Result<bool, ExecError> {
    Ok(active(false)?.contains_key(name))
}

/// The six fields of an fstab line; `None` for comments and lines of
/// fewer than four or more than six fields (Salt's `ParseError`).
fn fstab_fields(line: &str) -> Option<[String; 6]> {
    if line.starts_with('#') {
        return None;
    }
    let comps: Vec<&str> = line.split_whitespace().collect();
    if comps.len() < 4 || comps.len() > 6 {
        return None;
    }
    let get = |i: usize| comps.get(i).copied().unwrap_or("0").to_string();
    Some([get(0), get(1), get(2), get(3), get(4), get(5)])
}

/// Salt's `mount.fstab`: mount point -> `device`, `fstype`, `opts` (a
/// list), `dump`, `pass`; a repeated mount point gets `_` appended.
pub fn fstab(config: &str) -> Map {
    let mut ret = Map::new();
    let Ok(text) = std::fs::read_to_string(config) else {
        return ret;
    };
    for line in text.lines() {
        let Some([device, name, fstype, opts, dump, pass]) = fstab_fields(line) else {
            continue;
        };
        let mut m = Map::new();
        m.insert("device".into(), Value::from(device));
        m.insert("fstype".into(), Value::from(fstype));
        m.insert(
            "opts".into(),
            Value::from(opts.split(',').map(str::to_string).collect::<Vec<_>>()),
        );
        m.insert("dump".into(), Value::from(dump));
        m.insert("pass".into(), Value::from(pass));
        let mut key = name;
        while ret.contains_key(&key) {
            key.push('_');
        }
        ret.insert(key, Value::Object(m));
    }
    ret
}

/// One fstab entry, as Salt's `_fstab_entry` criteria: only the fields
/// given take part in a match.
#[derive(Debug, Clone, Default)]
pub struct FstabEntry {
    /// The device (`/dev/sda1`, `UUID=...`, `tmpfs`).
    pub device: Option<String>,
    /// The mount point.
    pub name: Option<String>,
    /// The filesystem type.
    pub fstype: Option<String>,
    /// Comma-separated options.
    pub opts: Option<String>,
    /// The dump field.
    pub dump: Option<String>,
    /// The fsck pass field.
    pub pass_num: Option<String>,
}

impl FstabEntry {
    fn fields(&self) -> [(&'static str, &Option<String>); 6] {
        [
            ("device", &self.device),
            ("name", &self.name),
            ("fstype", &self.fstype),
            ("opts", &self.opts),
            ("dump", &self.dump),
            ("pass_num", &self.pass_num),
        ]
    }
    /// Whether `line` is this entry (options compared as sorted sets);
    /// `None` when the line is no entry at all.
    fn matches(&self, line: &str) -> Option<bool> {
        let f = fstab_fields(line)?;
        for (i, (key, want)) in self.fields().iter().enumerate() {
            let Some(want) = want else { continue };
            if *key == "opts" {
                let mut a: Vec<&str> = f[i].split(',').collect();
                let mut b: Vec<&str> = want.split(',').collect();
                a.sort_unstable();
                b.sort_unstable();
                if a != b {
                    return Some(false);
                }
            } else if f[i] != *want {
                return Some(false);
            }
        }
        Some(true)
    }
    /// The subset of fields `keys` names; `Err` with an unknown key.
    fn pick(&self, keys: &[String]) -> Result<FstabEntry, String> {
        let mut out = FstabEntry::default();
        for key in keys {
            let v = self
                .fields()
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| (*v).clone())
                .ok_or_else(|| key.clone())?;
            match key.as_str() {
                "device" => out.device = v,
                "name" => out.name = v,
                "fstype" => out.fstype = v,
                "opts" => out.opts = v,
                "dump" => out.dump = v,
                _ => out.pass_num = v,
            }
        }
        Ok(out)
    }
    /// Salt's fstab line format.
    fn line(&self) -> String {
        let f = |v: &Option<String>| v.clone().unwrap_or_default();
        format!(
            "{}\t\t{}\t{}\t{}\t{} {}\n",
            f(&self.device),
            f(&self.name),
            f(&self.fstype),
            f(&self.opts),
            f(&self.dump),
            f(&self.pass_num)
        )
    }
}

/// The filesystems Salt matches by mount point rather than by device.
const SPECIAL_FSES: &[&str] = &[
    "none",
    "tmpfs",
    "sysfs",
    "proc",
    "fusectl",
    "debugfs",
    "securityfs",
    "devtmpfs",
    "cgroup",
    "nfs",
    "nfs4",
    "glusterfs",
    "btrfs",
    "ceph",
];

/// What [`set_fstab`] should write.
#[derive(Debug, Clone)]
pub struct FstabRequest {
    /// The mount point.
    pub name: String,
    /// The device.
    pub device: String,
    /// The filesystem type.
    pub fstype: String,
    /// The options.
    pub opts: Vec<String>,
    /// The dump field.
    pub dump: String,
    /// The fsck pass.
    pub pass_num: String,
    /// The fstab file.
    pub config: String,
    /// Only predict.
    pub test: bool,
    /// The fields that identify the entry (`auto`: by mount point for
    /// special filesystems, by device otherwise).
    pub match_on: Vec<String>,
    /// Leave an existing entry as it is.
    pub not_change: bool,
}

/// Salt's `mount.set_fstab`: `present`, `new` or `change`.
pub fn set_fstab(req: &FstabRequest) -> Result<&'static str, ExecError> {
    let entry = FstabEntry {
        name: Some(req.name.clone()),
        device: Some(req.device.replace("\\ ", "\\040")),
        fstype: Some(req.fstype.clone()),
        opts: Some(req.opts.join(",").replace("\\ ", "\\040")),
        dump: Some(req.dump.clone()),
        pass_num: Some(req.pass_num.clone()),
    };
    let match_on: Vec<String> = if req.match_on.len() == 1 && req.match_on[0] == "auto" {
        if SPECIAL_FSES.contains(&req.fstype.as_str()) {
            vec!["name".into()]
        } else {
            vec!["device".into()]
        }
    } else {
        req.match_on.clone()
    };
    let criteria = entry
        .pick(&match_on)
        .map_err(|k| exec_err(format!("Unrecognized keys in match_on: \"{k}\"")))?;
    if !Path::new(&req.config).is_file() {
        return Err(exec_err(format!("Bad config file \"{}\"", req.config)));
    }
    let text = std::fs::read_to_string(&req.config)
        .map_err(|e| exec_err(format!("Couldn't read from {}: {e}", req.config)))?;
    let mut lines: Vec<String> = Vec::new();
    let mut ret: Option<&'static str> = None;
    for line in text.split_inclusive('\n') {
        if criteria.matches(line) == Some(true) {
            ret = Some("present");
            if entry.matches(line) == Some(true) || req.not_change {
                lines.push(line.to_string());
            } else {
                ret = Some("change");
                lines.push(entry.line());
            }
        } else {
            lines.push(line.to_string());
        }
    }
    let ret = match ret {
        Some(r) => r,
        None => {
            lines.push(entry.line());
            "new"
        }
    };
    if ret != "present" && !req.test {
        std::fs::write(&req.config, lines.concat())
            .map_err(|_| exec_err(format!("File not writable {}", req.config)))?;
    }
    Ok(ret)
}

/// Salt's `mount.rm_fstab`: drops the entries of `name` (and `device`).
pub fn rm_fstab(name: &str, device: Option<&str>, config: &str) -> Result<bool, ExecError> {
    let criteria = FstabEntry {
        name: Some(name.to_string()),
        device: device.map(str::to_string),
        ..Default::default()
    };
    let text = std::fs::read_to_string(config)
        .map_err(|e| exec_err(format!("Couldn't read from {config}: {e}")))?;
    let mut modified = false;
    let mut lines = String::new();
    for line in text.split_inclusive('\n') {
        if criteria.matches(line) == Some(true) {
            modified = true;
        } else {
            lines.push_str(line);
        }
    }
    if modified {
        std::fs::write(config, lines)
            .map_err(|e| exec_err(format!("Couldn't write to {config}: {e}")))?;
    }
    Ok(true)
}

/// Salt's `_convert_to` of the mount state: the fs_spec of `device` as
/// `mount_by` asks (`device`, `uuid`, `label`, `partuuid`, `partlabel`),
/// looked up with `blkid`; `None` when blkid does not find exactly one
/// device (or the device lacks that key). Without `mount_by`, or when
/// `device` already has that form, `device` itself.
pub fn convert_to(device: &str, mount_by: Option<&str>) -> Option<String> {
    let Some(by) = mount_by.filter(|b| !b.is_empty()) else {
        return Some(device.to_string());
    };
    let key = by.to_uppercase();
    if (by == "device" && device.starts_with('/')) || device.starts_with(&format!("{key}=")) {
        return Some(device.to_string());
    }
    let ran = if device.starts_with('/') {
        run("blkid", &["-o", "export", device]).ok()?
    } else {
        run("blkid", &["-o", "export", "-t", device]).ok()?
    };
    // One KEY=value block per device, blank-line separated.
    let blocks: Vec<&str> = ran
        .stdout
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .collect();
    let [block] = blocks.as_slice() else {
        return None;
    };
    let field = |k: &str| {
        block
            .lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .map(str::to_string)
    };
    if by == "device" {
        return field("DEVNAME");
    }
    field(&key).map(|v| format!("{key}={v}"))
}

/// Salt's `mount.mount`: `Ok(None)` when mounted, `Ok(Some(stderr))` when
/// `mount` failed.
pub fn mount(
    name: &str,
    device: Option<&str>,
    mkmnt: bool,
    fstype: &str,
    opts: &[String],
) -> Result<Option<String>, ExecError> {
    if mkmnt && !Path::new(name).exists() {
        std::fs::create_dir_all(name)
            .map_err(|e| exec_err(format!("Unable to create {name}: {e}")))?;
    }
    let mut args: Vec<String> = Vec::new();
    if let Some(device) = device {
        if !opts.is_empty() {
            args.extend(["-o".into(), opts.join(",")]);
        }
        if !fstype.is_empty() {
            args.extend(["-t".into(), fstype.to_string()]);
        }
        args.push(device.to_string());
    }
    args.push(name.to_string());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run("mount", &argv)?;
    Ok((r.retcode != 0).then_some(r.stderr))
}

/// Salt's `mount.umount`: `Ok(None)` when unmounted, else why not.
pub fn umount(name: &str, device: Option<&str>, lazy: bool) -> Result<Option<String>, ExecError> {
    if !active(false)?.contains_key(name) {
        return Ok(Some(format!("{name} does not have anything mounted")));
    }
    let mut args = Vec::new();
    if lazy {
        args.push("-l");
    }
    args.push(device.unwrap_or(name));
    let r = run("umount", &args)?;
    Ok((r.retcode != 0).then_some(r.stderr))
}

/// Salt's `mount.remount`: `-o remount,...` when mounted, else a mount.
pub fn remount(
    name: &str,
    device: &str,
    mkmnt: bool,
    fstype: &str,
    opts: &[String],
) -> Result<Option<String>, ExecError> {
    let mut opts = opts.to_vec();
    if !active(false)?.contains_key(name) {
        return mount(name, Some(device), mkmnt, fstype, &opts);
    }
    if !opts.iter().any(|o| o == "remount") {
        opts.push("remount".into());
    }
    let mut args: Vec<String> = vec!["-o".into(), opts.join(",")];
    if !fstype.is_empty() {
        args.extend(["-t".into(), fstype.to_string()]);
    }
    args.push(device.to_string());
    args.push(name.to_string());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run("mount", &argv)?;
    Ok((r.retcode != 0).then_some(r.stderr))
}

/// Salt's `mount.swaps`: `/proc/swaps` by file name.
pub fn swaps() -> Result<Map, ExecError> {
    let text = std::fs::read_to_string("/proc/swaps")
        .map_err(|e| exec_err(format!("Unable to read /proc/swaps: {e}")))?;
    let mut ret = Map::new();
    for line in text.lines().filter(|l| !l.starts_with("Filename")) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        if comps.len() < 5 {
            continue;
        }
        let mut m = Map::new();
        for (i, key) in ["type", "size", "used", "priority"].iter().enumerate() {
            m.insert((*key).into(), Value::from(comps[i + 1]));
        }
        ret.insert(comps[0].to_string(), Value::Object(m));
    }
    Ok(ret)
}

/// Salt's `mount.swapon`: `{stats, new}`, empty when it did not activate.
pub fn swapon(name: &str, priority: Option<&str>) -> Result<Map, ExecError> {
    let mut ret = Map::new();
    if let Some(stats) = swaps()?.get(name) {
        ret.insert("stats".into(), stats.clone());
        ret.insert("new".into(), Value::Bool(false));
        return Ok(ret);
    }
    let mut args = vec![name];
    if let Some(p) = priority {
        args.extend(["-p", p]);
    }
    let r = run("swapon", &args)?;
    if r.retcode != 0 {
        tracing::warn!("swapon {name}: {}", r.stderr);
    }
    if let Some(stats) = swaps()?.get(name) {
        ret.insert("stats".into(), stats.clone());
        ret.insert("new".into(), Value::Bool(true));
    }
    Ok(ret)
}

/// Salt's `mount.swapoff`: `None` when it was not on, else whether it went off.
pub fn swapoff(name: &str) -> Result<Option<bool>, ExecError> {
    if !swaps()?.contains_key(name) {
        return Ok(None);
    }
    let r = run("swapoff", &[name])?;
    if r.retcode != 0 {
        tracing::warn!("swapoff {name}: {}", r.stderr);
    }
    Ok(Some(!swaps()?.contains_key(name)))
}

fn opts_arg(v: Option<&Value>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => vec!["defaults".into()],
        Some(v) => string_list(Some(v)),
    }
}

fn active_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "active", args)?;
    active(args.get_bool(0, "extended", false)).map(Value::Object)
}

fn fstab_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "fstab", args)?;
    let config = args
        .get_str(0, "config")
        .unwrap_or_else(|| DEFAULT_FSTAB.into());
    Ok(Value::Object(fstab(&config)))
}

fn text(args: &Args, i: usize, key: &str, default: &str) -> String {
    args.get(i, key)
        .and_then(scalar_text)
        .unwrap_or_else(|| default.to_string())
}

fn set_fstab_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "set_fstab", args)?;
    let match_on = match args.get(usize::MAX, "match_on") {
        None => vec!["auto".to_string()],
        Some(Value::Array(a)) => a.iter().filter_map(scalar_text).collect(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(_) => {
            return Err(exec_err("match_on must be a string or list of strings"));
        }
    };
    let req = FstabRequest {
        name: args.require_str(0, "name", "set_fstab")?,
        device: args.require_str(1, "device", "set_fstab")?,
        fstype: args.require_str(2, "fstype", "set_fstab")?,
        opts: opts_arg(args.get(3, "opts")),
        dump: text(args, 4, "dump", "0"),
        pass_num: text(args, 5, "pass_num", "0"),
        config: text(args, 6, "config", DEFAULT_FSTAB),
        test: args.get_bool(7, "test", false),
        match_on,
        not_change: args.get_bool(usize::MAX, "not_change", false),
    };
    set_fstab(&req).map(Value::from)
}

fn rm_fstab_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "rm_fstab", args)?;
    let name = args.require_str(0, "name", "rm_fstab")?;
    let device = args.require_str(1, "device", "rm_fstab")?;
    rm_fstab(
        &name,
        Some(&device),
        &text(args, 2, "config", DEFAULT_FSTAB),
    )
    .map(Value::Bool)
}

fn outcome(r: Option<String>) -> Value {
    match r {
        None => Value::Bool(true),
        Some(e) => Value::from(e),
    }
}

fn mount_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "mount", args)?;
    let name = args.require_str(0, "name", "mount")?;
    let device = args.get_str(1, "device").filter(|d| d != "False");
    mount(
        &name,
        device.as_deref(),
        args.get_bool(2, "mkmnt", false),
        &text(args, 3, "fstype", ""),
        &opts_arg(args.get(4, "opts")),
    )
    .map(outcome)
}

fn umount_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "umount", args)?;
    let name = args.require_str(0, "name", "umount")?;
    umount(
        &name,
        args.get_str(1, "device").as_deref(),
        args.get_bool(4, "lazy", false),
    )
    .map(outcome)
}

fn remount_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "remount", args)?;
    let name = args.require_str(0, "name", "remount")?;
    let device = args.require_str(1, "device", "remount")?;
    remount(
        &name,
        &device,
        args.get_bool(2, "mkmnt", false),
        &text(args, 3, "fstype", ""),
        &opts_arg(args.get(4, "opts")),
    )
    .map(outcome)
}

fn is_mounted_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "is_mounted", args)?;
    is_mounted(&args.require_str(0, "name", "is_mounted")?).map(Value::Bool)
}

fn swaps_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "swaps", args)?;
    swaps().map(Value::Object)
}

fn swapon_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "swapon", args)?;
    let name = args.require_str(0, "name", "swapon")?;
    swapon(&name, args.get_str(1, "priority").as_deref()).map(Value::Object)
}

fn swapoff_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "swapoff", args)?;
    let name = args.require_str(0, "name", "swapoff")?;
    Ok(swapoff(&name)?.map(Value::Bool).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fstab_entries_match_on_the_given_fields() {
        let e = FstabEntry {
            name: Some("/mnt".into()),
            opts: Some("rw,noatime".into()),
            ..Default::default()
        };
        assert_eq!(e.matches("tmpfs /mnt tmpfs noatime,rw 0 0"), Some(true));
        assert_eq!(e.matches("tmpfs /mnt tmpfs ro 0 0"), Some(false));
        assert_eq!(e.matches("# comment"), None);
        assert_eq!(e.matches("too few"), None);
        assert!(e.pick(&["bogus".into()]).is_err());
        let full = FstabEntry {
            device: Some("tmpfs".into()),
            name: Some("/mnt".into()),
            fstype: Some("tmpfs".into()),
            opts: Some("defaults".into()),
            dump: Some("0".into()),
            pass_num: Some("0".into()),
        };
        assert_eq!(full.line(), "tmpfs\t\t/mnt\ttmpfs\tdefaults\t0 0\n");
    }
}

/// Salt's mount cache (`<cachedir>/mounts`): the options each mount was
/// last mounted with, so `mount.mounted` notices options `/proc` cannot
/// show (a tmpfs `size=` change). Kept as JSON, which YAML readers accept.
pub mod cache {
    use std::path::{Path, PathBuf};

    use halite_state::{Map, Value};

    fn file(cachedir: &str) -> PathBuf {
        Path::new(cachedir).join("mounts")
    }

    fn read(cachedir: &str) -> Map {
        std::fs::read_to_string(file(cachedir))
            .ok()
            .and_then(|t| serde_json::from_str::<Map>(&t).ok())
            .unwrap_or_default()
    }

    fn write(cachedir: &str, cache: &Map) -> Result<(), String> {
        let text = serde_json::to_string(cache).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(cachedir)
            .and_then(|_| std::fs::write(file(cachedir), text))
            .map_err(|e| format!("Unable to write mount cache: {e}"))
    }

    /// The cached entry of mount point `name` (empty when none).
    pub fn get(cachedir: &str, name: &str) -> Map {
        read(cachedir)
            .get("mounts")
            .and_then(|m| m.get(name))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    /// Records how `name` was mounted.
    pub fn put(
        cachedir: &str,
        name: &str,
        device: &str,
        mkmnt: bool,
        fstype: &str,
        opts: &[String],
    ) -> Result<(), String> {
        let mut cache = read(cachedir);
        let mounts = cache
            .entry("mounts")
            .or_insert_with(|| Value::Object(Map::new()));
        if !mounts.is_object() {
            *mounts = Value::Object(Map::new());
        }
        let mut entry = Map::new();
        entry.insert("device".into(), Value::from(device));
        entry.insert("fstype".into(), Value::from(fstype));
        entry.insert("mkmnt".into(), Value::Bool(mkmnt));
        entry.insert("opts".into(), Value::from(opts.to_vec()));
        if let Some(m) = mounts.as_object_mut() {
            m.insert(name.to_string(), Value::Object(entry));
        }
        write(cachedir, &cache)
    }

    /// Forgets `name`.
    pub fn delete(cachedir: &str, name: &str) -> Result<(), String> {
        let mut cache = read(cachedir);
        let removed = cache
            .get_mut("mounts")
            .and_then(Value::as_object_mut)
            .and_then(|m| m.remove(name))
            .is_some();
        if removed {
            write(cachedir, &cache)?;
        }
        Ok(())
    }
}
