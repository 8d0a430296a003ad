//! Grains: facts about the host (OS, network, hardware, the running
//! process), with Salt's names and value shapes, read from files under
//! `/etc`, `/proc` and `/sys` so that computing them spawns no process.
//!
//! [`core_grains`] is what the host reports; [`grains_for`] applies the
//! minion config on top (`grains_blacklist`, then `grains:` overrides),
//! which is what states and templates see. The `grains.*` execution module
//! lives in [`crate::exec::grains`].

pub mod custom;
pub mod hw;
pub mod match_expr;
pub mod net;
pub mod os;
pub mod process;

use std::path::Path;

use halite_state::{Map, Value};

/// The `saltversion` grain halite reports: the Salt release whose
/// behaviour it reproduces, so that SLS written against
/// `grains['saltversion']` keep working.
pub const SALT_VERSION: &str = "3008.5";
/// `saltversioninfo`, the same release as a list.
pub const SALT_VERSION_INFO: [i64; 2] = [3008, 5];

/// The grains detected on this host, before the minion config is applied.
///
/// `opts` is the minion config; only `id` and `master` are read from it.
/// Every value comes from a file or a system call; unreadable sources
/// leave their grains at Salt's defaults rather than failing.
pub fn core_grains(opts: &Value) -> Map {
    let mut g = Map::new();
    let uts = nix::sys::utsname::uname().ok();
    let text = |s: Option<&std::ffi::OsStr>| {
        s.map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let machine = text(uts.as_ref().map(|u| u.machine()));
    let nodename = text(uts.as_ref().map(|u| u.nodename()));

    g.insert(
        "cwd".into(),
        Value::from(
            std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
    );
    net::insert_dns(&mut g);
    g.insert("fibre_channel_host".into(), Value::Bool(false));
    if let Ok(id) = std::fs::read_to_string("/etc/machine-id")
        .or_else(|_| std::fs::read_to_string("/var/lib/dbus/machine-id"))
    {
        g.insert("machine_id".into(), Value::from(id.trim()));
    }
    g.insert(
        "master".into(),
        opts.get("master")
            .cloned()
            .unwrap_or_else(|| Value::from("salt")),
    );
    net::insert_name_grains(&mut g, &nodename);
    let id = match opts
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        Some(id) => id.to_string(),
        None => g
            .get("fqdn")
            .and_then(Value::as_str)
            .unwrap_or("localhost")
            .to_string(),
    };
    g.insert("server_id".into(), Value::from(server_id(&id)));
    g.insert("id".into(), Value::from(id));
    net::insert_interface_grains(&mut g);
    net::insert_fqdn_ips(&mut g);
    net::insert_gateway_grains(&mut g);
    insert_from_file(&mut g, "/proc/cmdline", hw::insert_kernel_params);
    g.insert("locale_info".into(), Value::Object(locale_info()));
    g.insert(
        "kernel".into(),
        Value::from(text(uts.as_ref().map(|u| u.sysname()))),
    );
    g.insert("nodename".into(), Value::from(nodename));
    g.insert(
        "kernelrelease".into(),
        Value::from(text(uts.as_ref().map(|u| u.release()))),
    );
    g.insert(
        "kernelversion".into(),
        Value::from(text(uts.as_ref().map(|u| u.version()))),
    );
    g.insert("cpuarch".into(), Value::from(machine.clone()));
    hw::insert_selinux_grains(&mut g);
    let cachedir = opts.get("cachedir").and_then(Value::as_str).map(Path::new);
    hw::insert_systemd_grains(&mut g, cachedir);
    g.insert("init".into(), Value::from(hw::init_system()));
    os::insert_os_grains(&mut g, &os::OsRelease::read(), &machine);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    hw::insert_cpu_grains(&mut g, &cpuinfo);
    insert_from_file(&mut g, "/proc/meminfo", hw::insert_mem_grains);
    hw::insert_virtual_grains(&mut g, &cpuinfo);
    g.insert("ps".into(), Value::from("ps -efHww"));
    let path = std::env::var("PATH").unwrap_or_default();
    g.insert(
        "systempath".into(),
        Value::from(
            path.split(':')
                .filter(|p| !p.is_empty())
                .map(Value::from)
                .collect::<Vec<_>>(),
        ),
    );
    g.insert("path".into(), Value::from(path));
    g.insert("saltversion".into(), Value::from(SALT_VERSION));
    g.insert(
        "saltversioninfo".into(),
        Value::from(SALT_VERSION_INFO.to_vec()),
    );
    hw::insert_dmi_grains(&mut g, Path::new("/sys/class/dmi/id"));
    hw::insert_disk_grains(&mut g, Path::new("/sys/block"));
    g.insert(
        "shell".into(),
        Value::from(std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())),
    );
    g.insert(
        "efi".into(),
        Value::Bool(Path::new("/sys/firmware/efi").is_dir()),
    );
    // Salt: a transactional (read-only root) system has transactional-update.
    g.insert(
        "transactional".into(),
        Value::Bool(hw::which("transactional-update").is_some()),
    );
    process::insert_process_grains(&mut g);
    g
}

/// The grains a run sees: [`core_grains`] and the config dir's `grains`
/// file, minus the `grains_blacklist`
/// patterns (globs, else regular expressions, as Salt's `expr_match`),
/// then updated with the `grains:` mapping of the minion config (deeply
/// merged when `grains_deep_merge` is set). Blacklisting applies to
/// detected grains only; configured grains always win.
pub fn grains_for(opts: &Value) -> Map {
    let mut grains = core_grains(opts);
    // The `grains` file of the config dir, a grain source over the core
    // grains as in Salt (its `config` grain).
    grains.extend(custom::file_grains(opts));
    let patterns: Vec<&str> = match opts.get("grains_blacklist") {
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(one)) => vec![one.as_str()],
        _ => Vec::new(),
    };
    if !patterns.is_empty() {
        grains.retain(|key, _| !patterns.iter().any(|p| match_expr::expr_match(key, p)));
    }
    if let Some(Value::Object(configured)) = opts.get("grains") {
        let deep = opts
            .get("grains_deep_merge")
            .is_some_and(halite_state::truthy);
        for (key, value) in configured {
            match (deep, grains.get_mut(key)) {
                (true, Some(existing)) => deep_update(existing, value),
                _ => {
                    grains.insert(key.clone(), value.clone());
                }
            }
        }
    }
    grains
}

/// Salt's `dictupdate.update`: merges mappings recursively, anything else
/// replaces.
pub fn deep_update(target: &mut Value, update: &Value) {
    match (target, update) {
        (Value::Object(dst), Value::Object(src)) => {
            for (k, v) in src {
                match dst.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        deep_update(existing, v)
                    }
                    _ => {
                        dst.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (dst, src) => *dst = src.clone(),
    }
}

/// Salt's `server_id`: the SHA-256 of the minion id as a big integer, modulo 2^31.
pub fn server_id(id: &str) -> i64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(id.as_bytes());
    let tail = [digest[28], digest[29], digest[30], digest[31]];
    i64::from(u32::from_be_bytes(tail) & 0x7fff_ffff)
}

fn insert_from_file(grains: &mut Map, path: &str, insert: fn(&mut Map, &str)) {
    if let Ok(text) = std::fs::read_to_string(path) {
        insert(grains, &text);
    }
}

/// `locale_info`: language and encoding from the locale environment
/// (`LC_ALL`, `LC_CTYPE`, `LANG`, as Python's `locale.getlocale()`), and
/// the local time zone's abbreviation.
fn locale_info() -> Map {
    let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_default();
    let (language, encoding) = match locale.as_str() {
        "" | "C" | "POSIX" => (Value::Null, Value::Null),
        other => {
            let base = other.split('@').next().unwrap_or(other);
            match base.split_once('.') {
                Some((lang, enc)) => (Value::from(lang), Value::from(normalise_encoding(enc))),
                None => (Value::from(base), Value::Null),
            }
        }
    };
    let mut m = Map::new();
    m.insert("defaultlanguage".into(), language);
    m.insert("defaultencoding".into(), encoding);
    m.insert("detectedencoding".into(), Value::from("utf-8"));
    m.insert("timezone".into(), Value::from(timezone_abbreviation()));
    m
}

/// The local time zone's abbreviation (`UTC`, `CET`...) from `localtime_r(3)`.
fn timezone_abbreviation() -> String {
    // SAFETY: `time` and `localtime_r` only write into the locals passed;
    // `tm_zone` points to static storage of the C library when non-null.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() || tm.tm_zone.is_null() {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(tm.tm_zone)
            .to_string_lossy()
            .into_owned()
    }
}

fn normalise_encoding(enc: &str) -> String {
    match enc.to_ascii_lowercase().replace('-', "").as_str() {
        "utf8" => "UTF-8".into(),
        _ => enc.to_string(),
    }
}
