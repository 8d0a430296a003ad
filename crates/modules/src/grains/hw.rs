//! Hardware and platform grains: CPU, memory, firmware (DMI), the init
//! system and virtualisation, all read from `/proc` and `/sys` files.

use std::path::Path;

use halite_state::{Map, Value};

/// Inserts `num_cpus`, `cpu_model` and `cpu_flags` parsed from cpuinfo text
/// with the same key rules as Salt's `_linux_cpudata`.
pub fn insert_cpu_grains(grains: &mut Map, cpuinfo: &str) {
    let mut num_cpus: i64 = 0;
    let mut model: Option<String> = None;
    let mut flags: Option<Vec<Value>> = None;
    for line in cpuinfo.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(key), Some(val)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (key, val) = (key.trim(), val.trim());
        match key {
            "processor" => num_cpus += 1,
            "# processors" => num_cpus = val.parse().unwrap_or(num_cpus),
            "vendor_id" | "model name" | "cpu" => model = Some(val.to_string()),
            "flags" | "Features" => flags = Some(val.split_whitespace().map(Value::from).collect()),
            "Processor" => {
                model = Some(val.split('-').next().unwrap_or(val).to_string());
                num_cpus = 1;
            }
            _ => {}
        }
    }
    grains.insert("num_cpus".into(), Value::from(num_cpus));
    grains.insert(
        "cpu_model".into(),
        Value::from(model.unwrap_or_else(|| "Unknown".into())),
    );
    grains.insert("cpu_flags".into(), Value::Array(flags.unwrap_or_default()));
}

/// Inserts `mem_total` and `swap_total` in MiB (floor), from meminfo text.
pub fn insert_mem_grains(grains: &mut Map, meminfo: &str) {
    let mut mem = 0i64;
    let mut swap = 0i64;
    for line in meminfo.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let kib: i64 = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        match key.trim() {
            "MemTotal" => mem = kib / 1024,
            "SwapTotal" => swap = kib / 1024,
            _ => {}
        }
    }
    grains.insert("mem_total".into(), Value::from(mem));
    grains.insert("swap_total".into(), Value::from(swap));
}

/// Inserts firmware grains (`biosversion`, `productname`, `uuid`...) from
/// `/sys/class/dmi/id`, each only when readable (serial and uuid need root).
pub fn insert_dmi_grains(grains: &mut Map, dmi_dir: &Path) {
    const FILES: &[(&str, &str)] = &[
        ("biosversion", "bios_version"),
        ("biosvendor", "bios_vendor"),
        ("boardname", "board_name"),
        ("productname", "product_name"),
        ("manufacturer", "sys_vendor"),
        ("biosreleasedate", "bios_date"),
        ("uuid", "product_uuid"),
        ("serialnumber", "product_serial"),
    ];
    if !dmi_dir.is_dir() {
        return;
    }
    for (grain, file) in FILES {
        if let Ok(bytes) = std::fs::read(dmi_dir.join(file)) {
            let text = String::from_utf8_lossy(&bytes).trim().to_string();
            let text = if *grain == "uuid" {
                text.to_lowercase()
            } else {
                text
            };
            grains.insert((*grain).into(), Value::from(text));
        }
    }
}

/// Salt's `_linux_init_system`: `systemd` when `/run/systemd/system`
/// exists; otherwise, when PID 1 is a `.../bin/init`, the first of
/// `upstart`, `sysvinit`, `systemd` named inside that binary; else the
/// wrapper (`supervisord`, `dumb-init`, `tini`, `runit`) or `unknown`.
pub fn init_system() -> String {
    if Path::new("/run/systemd/system").exists() {
        return "systemd".into();
    }
    let Ok(raw) = std::fs::read("/proc/1/cmdline") else {
        return "unknown".into();
    };
    let cmdline: Vec<String> = String::from_utf8_lossy(&raw)
        .replace('\0', " ")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let Some(first) = cmdline.first() else {
        return "unknown".into();
    };
    let init_bin = which(first);
    if let Some(bin) = init_bin.as_deref().filter(|b| b.ends_with("bin/init")) {
        let Ok(content) = std::fs::read(bin) else {
            return "unknown".into();
        };
        let lower = content.to_ascii_lowercase();
        for name in ["upstart", "sysvinit", "systemd"] {
            if lower.windows(name.len()).any(|w| w == name.as_bytes()) {
                return name.into();
            }
        }
        return "unknown".into();
    }
    for wrapper in ["supervisord", "dumb-init", "tini"] {
        if let Some(path) = which(wrapper) {
            if cmdline.contains(&path) {
                return wrapper.into();
            }
        }
    }
    if cmdline == ["runit"] || cmdline.iter().any(|w| w == "/sbin/my_init") {
        return "runit".into();
    }
    "unknown".into()
}

/// The full path of `prog` on `PATH` (or `prog` itself when it has a `/`).
pub fn which(prog: &str) -> Option<String> {
    if prog.contains('/') {
        return Path::new(prog).is_file().then(|| prog.to_string());
    }
    let path = std::env::var("PATH")
        .unwrap_or_else(|_| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    path.split(':')
        .map(|dir| Path::new(dir).join(prog))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// Inserts `virtual` (and `virtual_subtype`) from files only: container
/// markers, PID 1's cgroup, DMI product names and the cpuinfo `hypervisor`
/// flag. Salt runs `systemd-detect-virt`/`virt-what` first; halite reads the
/// same evidence those tools read, so that grains need no subprocess.
pub fn insert_virtual_grains(grains: &mut Map, cpuinfo: &str) {
    let mut virtual_ = "physical".to_string();
    let mut subtype: Option<&str> = None;
    let product = std::fs::read_to_string("/sys/class/dmi/id/product_name").unwrap_or_default();
    let vendor = std::fs::read_to_string("/sys/class/dmi/id/sys_vendor").unwrap_or_default();
    let dmi = format!("{} {}", product.trim(), vendor.trim());
    if dmi.contains("VirtualBox") {
        virtual_ = "VirtualBox".into();
    } else if dmi.contains("VMware") {
        virtual_ = "VMware".into();
    } else if dmi.contains("KVM") || dmi.contains("QEMU") {
        virtual_ = "kvm".into();
    } else if dmi.contains("Virtual Machine") && dmi.contains("Microsoft") {
        virtual_ = "VirtualPC".into();
    } else if dmi.contains("HVM domU") || Path::new("/proc/xen").exists() {
        virtual_ = "xen".into();
    } else if cpuinfo
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
    {
        virtual_ = "kvm".into();
    }
    let cgroup = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    let environ = std::fs::read("/proc/1/environ")
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    if Path::new("/.dockerenv").exists()
        || [":/system.slice/docker", ":/docker/", ":/docker-ce/"]
            .iter()
            .any(|m| cgroup.contains(m))
        || environ.contains("container=docker")
    {
        virtual_ = "container".into();
        subtype = Some("Docker");
    } else if Path::new("/run/.containerenv").exists() || environ.contains("container=podman") {
        virtual_ = "container".into();
        subtype = Some("Podman");
    } else if cgroup.contains(":/lxc/") || environ.contains("container=lxc") {
        virtual_ = "container".into();
        subtype = Some("LXC");
    } else if environ.contains("container=systemd-nspawn") {
        virtual_ = "systemd-nspawn".into();
    }
    grains.insert("virtual".into(), Value::from(virtual_));
    if let Some(sub) = subtype {
        grains.insert("virtual_subtype".into(), Value::from(sub));
    }
}

/// Inserts `kernelparams` from `/proc/cmdline`: `[key, value]` pairs,
/// value `null` for bare flags.
pub fn insert_kernel_params(grains: &mut Map, cmdline: &str) {
    let params: Vec<Value> = cmdline
        .split_whitespace()
        .map(|word| match word.split_once('=') {
            Some((k, v)) => Value::from(vec![Value::from(k), Value::from(v.trim_matches('"'))]),
            None => Value::from(vec![Value::from(word), Value::Null]),
        })
        .collect();
    grains.insert("kernelparams".into(), Value::Array(params));
}

/// Inserts `disks` and `ssds` (Salt's `_linux_disks`): block devices not
/// under `devices/virtual`, split by `queue/rotational`.
pub fn insert_disk_grains(grains: &mut Map, sys_block: &Path) {
    let mut disks = Vec::new();
    let mut ssds = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(sys_block)
        .map(|rd| rd.flatten().collect())
        .unwrap_or_default();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let virtual_dev = std::fs::read_link(entry.path())
            .map(|target| target.starts_with("../devices/virtual/"))
            .unwrap_or(false);
        if virtual_dev {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        match std::fs::read_to_string(entry.path().join("queue/rotational"))
            .ok()
            .as_deref()
            .map(str::trim)
        {
            Some("0") => ssds.push(Value::from(name)),
            Some("1") => disks.push(Value::from(name)),
            _ => {}
        }
    }
    grains.insert("disks".into(), Value::Array(disks));
    grains.insert("ssds".into(), Value::Array(ssds));
}

/// Inserts `selinux` when the SELinux tools are installed (as Salt):
/// `enabled` when selinuxfs is mounted, `enforced` as `getenforce` prints it,
/// both read from `/sys/fs/selinux` instead of running the tools.
pub fn insert_selinux_grains(grains: &mut Map) {
    if which("selinuxenabled").is_none() {
        return;
    }
    let enforce = std::fs::read_to_string("/sys/fs/selinux/enforce").ok();
    let mut selinux = Map::new();
    selinux.insert("enabled".into(), Value::Bool(enforce.is_some()));
    if which("getenforce").is_some() {
        let mode = match enforce.as_deref().map(str::trim) {
            Some("1") => "Enforcing",
            Some(_) => "Permissive",
            None => "Disabled",
        };
        selinux.insert("enforced".into(), Value::from(mode));
    }
    grains.insert("selinux".into(), Value::Object(selinux));
}

/// Inserts `systemd` (`version`, `features`) when `systemctl` and
/// `localectl` are installed, as Salt. Only `systemctl --version` knows
/// them: see [`systemd_version`].
pub fn insert_systemd_grains(grains: &mut Map, cachedir: Option<&Path>) {
    static SYSTEMD: std::sync::OnceLock<Option<(String, String)>> = std::sync::OnceLock::new();
    let Some(systemctl) = which("systemctl") else {
        return;
    };
    if which("localectl").is_none() {
        return;
    }
    let found = SYSTEMD.get_or_init(|| systemd_version(Path::new(&systemctl), cachedir));
    let (version, features) = found
        .clone()
        .unwrap_or_else(|| ("UNDEFINED".into(), String::new()));
    let mut systemd = Map::new();
    systemd.insert("version".into(), Value::from(version));
    systemd.insert("features".into(), Value::from(features));
    grains.insert("systemd".into(), Value::Object(systemd));
}

/// What `systemctl --version` says: (version, features line).
///
/// Running it was most of a one-state `halite-call`'s start-up (~9 ms of
/// ~10), so the answer is kept in `<cachedir>/grains/systemd.json` with
/// the identity of the binary that gave it (path, size, mtime) and read
/// back while that binary is unchanged; an upgrade of systemd replaces
/// the binary and so runs it again. Once per process either way.
pub fn systemd_version(systemctl: &Path, cachedir: Option<&Path>) -> Option<(String, String)> {
    let stamp = std::fs::metadata(systemctl).ok().map(|m| {
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("{} {} {mtime}", systemctl.display(), m.len())
    });
    let cache = cachedir.map(|d| d.join("grains").join("systemd.json"));
    if let (Some(cache), Some(stamp)) = (&cache, &stamp) {
        let cached = std::fs::read_to_string(cache)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if let Some(c) = cached.filter(|c| c.get("binary").and_then(Value::as_str) == Some(stamp)) {
            if let (Some(v), Some(f)) = (
                c.get("version").and_then(Value::as_str),
                c.get("features").and_then(Value::as_str),
            ) {
                return Some((v.to_string(), f.to_string()));
            }
        }
    }
    let out = std::process::Command::new(systemctl)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let version = lines
        .next()?
        .strip_prefix("systemd ")?
        .split_whitespace()
        .next()?
        .to_string();
    let features = lines.next().unwrap_or("").to_string();
    if let (Some(cache), Some(stamp)) = (&cache, &stamp) {
        // Best effort: a cache that cannot be written is only slower.
        let body = serde_json::json!({"binary": stamp, "version": version, "features": features});
        if let Some(dir) = cache.parent() {
            let tmp = dir.join(format!(".systemd.json.{}", std::process::id()));
            let written = std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(&tmp, body.to_string()))
                .and_then(|()| std::fs::rename(&tmp, cache));
            if let Err(e) = written {
                tracing::debug!("cannot cache the systemd grain in {}: {e}", cache.display());
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
    Some((version, features))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_version_is_cached_for_the_binary_that_gave_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let bin = dir.path().join("systemctl");
        let cache = dir.path().join("cache");
        let write = |version: &str| {
            std::fs::write(
                &bin,
                format!(
                    "#!/bin/sh\necho 'systemd {version} ({version}.1-1)'\necho '+PAM -AUDIT'\n"
                ),
            )
            .expect("script");
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        };
        write("252");
        let first = systemd_version(&bin, Some(&cache));
        assert_eq!(first, Some(("252".into(), "+PAM -AUDIT".into())));
        assert!(cache.join("grains/systemd.json").is_file());
        // Unchanged binary, no longer runnable: the answer comes from the cache.
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(systemd_version(&bin, Some(&cache)), first);
        // A new systemd (another binary): it runs again.
        write("257.9");
        assert_eq!(
            systemd_version(&bin, Some(&cache)),
            Some(("257.9".into(), "+PAM -AUDIT".into()))
        );
        // Without a cache directory it simply runs.
        assert_eq!(
            systemd_version(&bin, None).map(|v| v.0),
            Some("257.9".into())
        );
    }

    #[test]
    fn cpuinfo_is_parsed_like_salt() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\nflags\t\t: fpu vme\n\nprocessor\t: 1\nmodel name\t: Xeon X\nflags\t\t: fpu vme\n";
        let mut g = Map::new();
        insert_cpu_grains(&mut g, text);
        assert_eq!(g["num_cpus"], 2);
        assert_eq!(g["cpu_model"], "Xeon X");
        assert_eq!(g["cpu_flags"], serde_json::json!(["fpu", "vme"]));
    }

    #[test]
    fn meminfo_is_floored_to_mib() {
        let mut g = Map::new();
        insert_mem_grains(
            &mut g,
            "MemTotal:       24684172 kB\nSwapTotal:          2047 kB\n",
        );
        assert_eq!(g["mem_total"], 24105);
        assert_eq!(g["swap_total"], 1);
    }
}
