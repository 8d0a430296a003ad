//! Operating-system grains (`os`, `os_family`, `osrelease`...) from
//! `/etc/os-release`, named and shaped as Salt 3008 names them.

use halite_state::{Map, Value};

/// The parsed `KEY=value` lines of an os-release file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct OsRelease {
    pairs: Vec<(String, String)>,
}

impl OsRelease {
    /// Parses os-release text: `KEY=value`, values optionally quoted.
    pub fn parse(text: &str) -> Self {
        let pairs = text
            .lines()
            .filter_map(|line| {
                let line = line.trim();
                if line.starts_with('#') {
                    return None;
                }
                let (key, value) = line.split_once('=')?;
                let value = value.trim();
                let unquoted = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                    .unwrap_or(value);
                Some((key.trim().to_string(), unquoted.replace("\\\"", "\"")))
            })
            .collect();
        OsRelease { pairs }
    }

    /// Reads `/etc/os-release`, falling back to `/usr/lib/os-release`.
    pub fn read() -> Self {
        ["/etc/os-release", "/usr/lib/os-release"]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|t| Self::parse(&t))
            .unwrap_or_default()
    }

    /// The value of `key`, if set and not empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// Salt's `_OS_NAME_MAP`: the first ten characters (no spaces, lower case)
/// of the distribution name -> the traditional `os` grain.
const OS_NAME_MAP: &[(&str, &str)] = &[
    ("redhatente", "RedHat"),
    ("gentoobase", "Gentoo"),
    ("archarm", "Arch ARM"),
    ("arch", "Arch"),
    ("debian", "Debian"),
    ("raspbian", "Raspbian"),
    ("fedoraremi", "Fedora"),
    ("amazonami", "Amazon"),
    ("alt", "ALT"),
    ("enterprise", "OEL"),
    ("oracleserv", "OEL"),
    ("cloudserve", "CloudLinux"),
    ("cloudlinux", "CloudLinux"),
    ("virtuozzo", "Virtuozzo"),
    ("almalinux", "AlmaLinux"),
    ("almalinuxk", "AlmaLinux"),
    ("pidora", "Fedora"),
    ("scientific", "ScientificLinux"),
    ("manjaro", "Manjaro"),
    ("manjarolin", "Manjaro"),
    ("univention", "Univention"),
    ("antergos", "Antergos"),
    ("sles", "SUSE"),
    ("void", "Void"),
    ("slesexpand", "RES"),
    ("linuxmint", "Mint"),
    ("neon", "KDE neon"),
    ("pop", "Pop"),
    ("rocky", "Rocky"),
    ("alibabaclo", "Alinux"),
    ("mendel", "Mendel"),
    ("photon", "VMware Photon OS"),
];

/// Salt's `_derive_os_grain`: `os` from the os-release `NAME` (and `ID`).
pub fn derive_os(fullname: &str, id: &str) -> String {
    match (id, fullname) {
        ("astra", "Astra Linux (Orel)") => return "AstraLinuxCE".into(),
        ("astra", "Astra Linux (Smolensk)") => return "AstraLinuxSE".into(),
        ("pop", "Pop!_OS") => return "Pop".into(),
        _ => {}
    }
    // Drop " Linux" / " GNU/Linux" (any non-word character before it).
    let mut distro = String::new();
    let lower = fullname.to_ascii_lowercase();
    let mut i = 0;
    let bytes = fullname.as_bytes();
    while i < fullname.len() {
        let rest = &lower[i..];
        let sep_is_nonword =
            bytes[i] != b'_' && !(bytes[i] as char).is_alphanumeric() && bytes[i].is_ascii();
        if sep_is_nonword {
            let after = &rest[1..];
            let skip = if after.starts_with("gnu/linux") {
                Some(10)
            } else if after.starts_with("linux") {
                Some(6)
            } else {
                None
            };
            if let Some(n) = skip {
                i += n;
                continue;
            }
        }
        let ch = fullname[i..].chars().next().unwrap_or(' ');
        distro.push(ch);
        i += ch.len_utf8();
    }
    let distro = distro.trim().to_string();
    let short: String = distro
        .replace(' ', "")
        .to_lowercase()
        .chars()
        .take(10)
        .collect();
    OS_NAME_MAP
        .iter()
        .find(|(k, _)| *k == short)
        .map(|(_, v)| v.to_string())
        .unwrap_or(distro)
}

/// Salt's `_family_id` + `_prettify_os_family`: the oldest ancestor in
/// `ID_LIKE`, capitalised (`fedora` becomes `RedHat`).
pub fn os_family(id: &str, id_like: Option<&str>) -> String {
    let family_id = match id_like {
        None => id.to_string(),
        Some(like) => {
            let ids: Vec<&str> = std::iter::once(id).chain(like.split_whitespace()).collect();
            if ids.contains(&"debian") || ids.contains(&"ubuntu") {
                "debian".to_string()
            } else {
                ids.last().copied().unwrap_or(id).to_string()
            }
        }
    };
    if family_id == "fedora" {
        return "RedHat".into();
    }
    let mut chars = family_id.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().collect::<String>() + &chars.as_str().to_lowercase(),
        None => String::new(),
    }
}

/// Salt's `osarch`: the package architecture (`dpkg --print-architecture`
/// on Debian, `rpm`'s host cpu elsewhere), derived here from the machine
/// type so that no subprocess is needed.
pub fn os_arch(family: &str, machine: &str) -> String {
    if family == "Debian" {
        if let Ok(arch) = std::fs::read_to_string("/var/lib/dpkg/arch") {
            if let Some(first) = arch.lines().next().filter(|l| !l.trim().is_empty()) {
                return first.trim().to_string();
            }
        }
        let mapped = match machine {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "i686" | "i586" | "i386" => "i386",
            "armv7l" => "armhf",
            "ppc64le" => "ppc64el",
            other => other,
        };
        return mapped.to_string();
    }
    machine.to_string()
}

/// Splits `12.4` into `[12, 4]` (non-numeric parts kept as strings, as Salt does).
fn release_info(release: &str) -> Vec<Value> {
    release
        .split('.')
        .map(|part| match part.parse::<i64>() {
            Ok(n) if part.bytes().all(|b| b.is_ascii_digit()) => Value::from(n),
            _ => Value::from(part),
        })
        .collect()
}

/// The codename of distributions whose os-release lacks `VERSION_CODENAME`
/// but names it in `VERSION` ("9.3 (Blue Onyx)"), as Salt's quirks do.
fn codename_quirk(rel: &OsRelease, id: &str) -> Option<String> {
    if id == "astra" {
        return rel.get("VARIANT_ID").map(str::to_string);
    }
    if id == "almalinux" || id == "rocky" {
        let version = rel.get("VERSION")?;
        let (_, rest) = version.split_once(" (")?;
        return rest.strip_suffix(')').map(str::to_string);
    }
    None
}

/// Inserts the OS grains for the os-release data `rel` and machine type.
pub fn insert_os_grains(grains: &mut Map, rel: &OsRelease, machine: &str) {
    let id = rel.get("ID").unwrap_or("linux");
    let fullname = rel.get("NAME").unwrap_or("Linux").trim().to_string();
    let os = derive_os(&fullname, id);
    let family = os_family(id, rel.get("ID_LIKE"));
    grains.insert("os".into(), Value::from(os.clone()));
    grains.insert("os_family".into(), Value::from(family.clone()));
    if let Some(codename) = rel
        .get("VERSION_CODENAME")
        .map(str::to_string)
        .or_else(|| codename_quirk(rel, id))
    {
        grains.insert("oscodename".into(), Value::from(codename));
    }
    grains.insert("osfullname".into(), Value::from(fullname.clone()));
    for (grain, key) in [
        ("lsb_distrib_id", "NAME"),
        ("lsb_distrib_release", "VERSION_ID"),
        ("lsb_distrib_codename", "VERSION_CODENAME"),
    ] {
        if let Some(v) = rel.get(key) {
            grains.insert(grain.into(), Value::from(v));
        }
    }
    let release = rel.get("VERSION_ID").unwrap_or("").to_string();
    if !release.is_empty() {
        grains.insert("osrelease".into(), Value::from(release.clone()));
    }
    grains.insert("osarch".into(), Value::from(os_arch(&family, machine)));
    let info = release_info(&release);
    let major = info.first().and_then(Value::as_i64);
    // Salt's osfinger: "<os or osfullname>-<major>" (Ubuntu keeps the full release).
    let finger_name = match os.as_str() {
        "Debian" | "FreeBSD" | "OpenBSD" | "NetBSD" | "Mac" | "Raspbian" | "AlmaLinux" => {
            os.clone()
        }
        _ => fullname,
    };
    let finger_release = match os.as_str() {
        "Ubuntu" | "Pop" | "NixOS" => release.clone(),
        _ => info
            .first()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_default(),
    };
    grains.insert("osrelease_info".into(), Value::Array(info));
    if let Some(major) = major {
        grains.insert("osmajorrelease".into(), Value::from(major));
    }
    grains.insert(
        "osfinger".into(),
        Value::from(format!("{finger_name}-{finger_release}")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_and_bare_values() {
        let rel =
            OsRelease::parse("NAME=\"Rocky Linux\"\nID=rocky\n# c\nVERSION_ID='9.3'\nEMPTY=\n");
        assert_eq!(rel.get("NAME"), Some("Rocky Linux"));
        assert_eq!(rel.get("ID"), Some("rocky"));
        assert_eq!(rel.get("VERSION_ID"), Some("9.3"));
        assert_eq!(rel.get("EMPTY"), None);
    }

    #[test]
    fn rocky_grains_have_salt_shapes() {
        let rel = OsRelease::parse(
            "NAME=\"Rocky Linux\"\nID=\"rocky\"\nVERSION_ID=\"9.3\"\nVERSION=\"9.3 (Blue Onyx)\"\nID_LIKE=\"rhel centos fedora\"\nPRETTY_NAME=\"Rocky Linux 9.3 (Blue Onyx)\"\n",
        );
        let mut g = Map::new();
        insert_os_grains(&mut g, &rel, "x86_64");
        assert_eq!(g["os"], "Rocky");
        assert_eq!(g["os_family"], "RedHat");
        assert_eq!(g["osrelease"], "9.3");
        assert_eq!(g["osrelease_info"], serde_json::json!([9, 3]));
        assert_eq!(g["osmajorrelease"], 9);
        assert_eq!(g["osfinger"], "Rocky Linux-9");
        assert_eq!(g["oscodename"], "Blue Onyx");
        assert_eq!(g["osarch"], "x86_64");
    }
}

#[cfg(test)]
mod derive_tests {
    use super::*;

    #[test]
    fn names_follow_salts_maps() {
        assert_eq!(derive_os("Debian GNU/Linux", "debian"), "Debian");
        assert_eq!(derive_os("Ubuntu", "ubuntu"), "Ubuntu");
        assert_eq!(derive_os("Rocky Linux", "rocky"), "Rocky");
        assert_eq!(derive_os("Red Hat Enterprise Linux", "rhel"), "RedHat");
        assert_eq!(derive_os("Linux Mint", "linuxmint"), "Mint");
        assert_eq!(os_family("ubuntu", Some("debian")), "Debian");
        assert_eq!(os_family("rocky", Some("rhel centos fedora")), "RedHat");
        assert_eq!(os_family("arch", None), "Arch");
    }
}
