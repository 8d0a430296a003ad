//! `lowpkg` for Debian: dpkg's database read directly.
//!
//! `list_pkgs` parses `<admindir>/status` in one pass (no process per
//! package, not even one `dpkg-query`), file lists come from
//! `<admindir>/info/<pkg>.list`; only `verify` and `bin_pkg_info` run dpkg.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use halite_state::{Map, Value};
use serde_json::json;

use super::error::{PkgError, PkgResult};
use super::provider::{LowPkg, PkgVersions};
use super::run::{argv, run};

/// Where dpkg keeps its database unless told otherwise.
pub const DEFAULT_ADMINDIR: &str = "/var/lib/dpkg";

/// One package record of dpkg's status file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// The package name.
    pub package: String,
    /// Its installed version.
    pub version: String,
    /// Its architecture (`amd64`, `all`...).
    pub architecture: String,
    /// `Status:` words: want, error flag, state (`install ok installed`).
    pub want: String,
    /// The package's state (`installed`, `config-files`...).
    pub state: String,
}

impl StatusEntry {
    /// Installed: configured and wanted installed, held, or selected for
    /// purge but not purged yet (Salt's `purge_desired`, which its
    /// `list_pkgs` counts as installed).
    pub fn is_installed(&self) -> bool {
        matches!(self.want.as_str(), "install" | "hold" | "purge") && self.state == "installed"
    }
    /// Removed but with config files left (Salt: selection `deinstall`).
    pub fn is_removed(&self) -> bool {
        self.want == "deinstall" && self.state != "not-installed"
    }
}

/// Parses dpkg's status file (RFC 822 stanzas) in one pass over its
/// lines; continuation lines and fields other than the four needed are
/// skipped without being split.
pub fn parse_status(text: &str) -> Vec<StatusEntry> {
    let mut out = Vec::with_capacity(text.len() / 1024);
    let (mut package, mut version, mut arch, mut status) = ("", "", "", "");
    let mut flush = |package: &mut &str, version: &mut &str, arch: &mut &str, status: &mut &str| {
        if !package.is_empty() {
            let mut words = status.split_ascii_whitespace();
            let want = words.next().unwrap_or("").to_string();
            let state = words.nth(1).unwrap_or("").to_string();
            out.push(StatusEntry {
                package: package.to_string(),
                version: version.to_string(),
                architecture: arch.to_string(),
                want,
                state,
            });
        }
        *package = "";
        *version = "";
        *arch = "";
        *status = "";
    };
    for line in text.split('\n') {
        let bytes = line.as_bytes();
        match bytes.first() {
            None => flush(&mut package, &mut version, &mut arch, &mut status),
            Some(b'P') if line.starts_with("Package:") => package = line[8..].trim(),
            Some(b'V') if line.starts_with("Version:") => version = line[8..].trim(),
            Some(b'A') if line.starts_with("Architecture:") => arch = line[13..].trim(),
            Some(b'S') if line.starts_with("Status:") => status = line[7..].trim(),
            _ => {}
        }
    }
    flush(&mut package, &mut version, &mut arch, &mut status);
    out
}

/// The dpkg database of this host (or of another admin dir, for tests and
/// chroots).
#[derive(Debug, Clone)]
pub struct Dpkg {
    admindir: PathBuf,
}

impl Default for Dpkg {
    fn default() -> Self {
        Dpkg {
            admindir: PathBuf::from(DEFAULT_ADMINDIR),
        }
    }
}

/// The host's native dpkg architecture, asked once per process.
fn native_arch() -> &'static str {
    static ARCH: OnceLock<String> = OnceLock::new();
    ARCH.get_or_init(|| {
        run(&argv(["dpkg", "--print-architecture"]), &[])
            .ok()
            .filter(|o| o.success())
            .map(|o| o.stdout.trim().to_string())
            .unwrap_or_default()
    })
}

impl Dpkg {
    /// A database at `admindir` (dpkg's `--admindir`).
    pub fn with_admindir(admindir: impl Into<PathBuf>) -> Self {
        Dpkg {
            admindir: admindir.into(),
        }
    }

    /// The table's constructor: the host's database.
    pub fn boxed() -> Box<dyn LowPkg> {
        Box::new(Dpkg::default())
    }

    /// Every record of the status file.
    pub fn status(&self) -> PkgResult<Vec<StatusEntry>> {
        let path = self.admindir.join("status");
        let text = std::fs::read_to_string(&path).map_err(|e| PkgError::io(&path, e))?;
        Ok(parse_status(&text))
    }

    /// Salt's naming: foreign-architecture packages get `:arch`.
    fn display_name(entry: &StatusEntry) -> String {
        let native = native_arch();
        if entry.architecture != "all" && !native.is_empty() && entry.architecture != native {
            format!("{}:{}", entry.package, entry.architecture)
        } else {
            entry.package.clone()
        }
    }

    /// Installed (or, with `removed`, removed-not-purged) packages.
    pub fn packages(&self, removed: bool) -> PkgResult<PkgVersions> {
        let mut out = PkgVersions::new();
        for entry in self.status()? {
            let wanted = if removed {
                entry.is_removed()
            } else {
                entry.is_installed()
            };
            if wanted {
                out.entry(Self::display_name(&entry))
                    .or_default()
                    .push(entry.version.clone());
            }
        }
        out.sort_keys();
        Ok(out)
    }

    /// The files of one installed package from `info/<pkg>[:arch].list`.
    fn files_of(&self, entry: &StatusEntry) -> PkgResult<Vec<String>> {
        let info = self.admindir.join("info");
        let candidates = [
            info.join(format!("{}.list", entry.package)),
            info.join(format!("{}:{}.list", entry.package, entry.architecture)),
        ];
        for path in &candidates {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    return Ok(text
                        .lines()
                        .filter(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect())
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(PkgError::io(path, e)),
            }
        }
        Ok(Vec::new())
    }

    /// Installed entries matching `names` (all when empty), plus an error
    /// line for each name that is not installed.
    fn select(&self, names: &[String]) -> PkgResult<(Vec<StatusEntry>, Vec<String>)> {
        let installed: Vec<StatusEntry> = self
            .status()?
            .into_iter()
            .filter(StatusEntry::is_installed)
            .collect();
        if names.is_empty() {
            return Ok((installed, Vec::new()));
        }
        let mut picked = Vec::new();
        let mut errors = Vec::new();
        for name in names {
            let (base, arch) = match name.split_once(':') {
                Some((b, a)) => (b, Some(a)),
                None => (name.as_str(), None),
            };
            let found: Vec<&StatusEntry> = installed
                .iter()
                .filter(|e| e.package == base && arch.is_none_or(|a| a == e.architecture))
                .collect();
            if found.is_empty() {
                errors.push(format!("dpkg-query: no packages found matching {name}"));
            }
            picked.extend(found.into_iter().cloned());
        }
        Ok((picked, errors))
    }
}

/// Salt's names for the file-type letters of `rpm -V` / `dpkg --verify`.
fn file_type(letter: char) -> Option<&'static str> {
    match letter {
        'c' => Some("config"),
        'd' => Some("doc"),
        'g' => Some("ghost"),
        'l' => Some("license"),
        'r' => Some("readme"),
        _ => None,
    }
}

/// Parses `rpm -V` / `dpkg --verify` output (`S.5....T.  c /path`, or
/// `missing   c /path`) into Salt's `{path: {mismatch, type}}`.
pub fn parse_verify_output(out: &str) -> Map {
    const FLAGS: [(char, &str); 9] = [
        ('S', "size"),
        ('M', "mode"),
        ('5', "md5sum"),
        ('D', "device major/minor number"),
        ('L', "readlink path"),
        ('U', "user"),
        ('G', "group"),
        ('T', "mtime"),
        ('P', "capabilities"),
    ];
    let mut ret = Map::new();
    for line in out.lines() {
        let Some((flags, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start_matches(' ');
        // rest is "c /path" (type letter) or "/path".
        let (ftype, path) = match rest.split_once(' ') {
            Some((t, p)) if t.len() == 1 && !rest.starts_with('/') => {
                (t.chars().next().and_then(file_type), p)
            }
            _ => (None, rest),
        };
        if path.is_empty() {
            continue;
        }
        let mut entry = Map::new();
        if flags == "missing" {
            entry.insert("missing".into(), Value::Bool(true));
        } else {
            let chars: Vec<char> = flags.chars().collect();
            let mismatch: Vec<Value> = FLAGS
                .iter()
                .enumerate()
                .filter(|(i, (flag, _))| chars.get(*i) == Some(flag))
                .map(|(_, (_, word))| Value::from(*word))
                .collect();
            entry.insert("mismatch".into(), Value::Array(mismatch));
        }
        if let Some(t) = ftype {
            entry.insert("type".into(), Value::from(t));
        }
        ret.insert(path.to_string(), Value::Object(entry));
    }
    ret
}

impl LowPkg for Dpkg {
    fn name(&self) -> &'static str {
        "dpkg"
    }

    fn list_pkgs(&self, names: &[String]) -> PkgResult<PkgVersions> {
        let mut all = self.packages(false)?;
        if !names.is_empty() {
            all.retain(|k, _| {
                names
                    .iter()
                    .any(|n| n == k || k.split(':').next() == Some(n.as_str()))
            });
        }
        Ok(all)
    }

    fn verify(&self, names: &[String]) -> PkgResult<Map> {
        let mut cmd = argv(["dpkg", "--admindir"]);
        cmd.push(self.admindir.display().to_string());
        cmd.push("--verify".into());
        cmd.extend(names.iter().cloned());
        let out = run(&cmd, &[])?;
        if !out.success() && out.stdout.trim().is_empty() {
            return Err(PkgError::failed("dpkg --verify failed", out.message()));
        }
        Ok(parse_verify_output(&out.stdout))
    }

    fn file_list(&self, names: &[String]) -> PkgResult<Map> {
        let (entries, errors) = self.select(names)?;
        let mut files = std::collections::BTreeSet::new();
        for e in &entries {
            files.extend(self.files_of(e)?);
        }
        let mut m = Map::new();
        m.insert("errors".into(), json!(errors));
        m.insert("files".into(), json!(files.into_iter().collect::<Vec<_>>()));
        Ok(m)
    }

    fn file_dict(&self, names: &[String]) -> PkgResult<Map> {
        let (entries, errors) = self.select(names)?;
        let mut packages = Map::new();
        for e in &entries {
            let mut files = self.files_of(e)?;
            files.sort();
            files.dedup();
            packages.insert(Self::display_name(e), json!(files));
        }
        let mut m = Map::new();
        m.insert("errors".into(), json!(errors));
        m.insert("packages".into(), Value::Object(packages));
        Ok(m)
    }

    fn bin_pkg_info(&self, path: &str) -> PkgResult<Map> {
        if !Path::new(path).is_file() {
            return Err(PkgError::Invocation(format!(
                "Path {path} does not exist or is not a file"
            )));
        }
        let out = run(
            &argv(["dpkg-deb", "-f", path, "Package", "Version", "Architecture"]),
            &[],
        )?;
        if !out.success() {
            return Err(PkgError::failed(
                format!("{path} is not a valid .deb package"),
                out.message(),
            ));
        }
        let mut m = Map::new();
        for line in out.stdout.lines() {
            if let Some((k, v)) = line.split_once(':') {
                let key = match k.trim() {
                    "Package" => "name",
                    "Version" => "version",
                    "Architecture" => "arch",
                    _ => continue,
                };
                m.insert(key.into(), Value::from(v.trim()));
            }
        }
        if !m.contains_key("name") || !m.contains_key("version") {
            return Err(PkgError::Invocation(format!(
                "{path} has no Package/Version fields"
            )));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_stanzas() {
        let text = "Package: a\nStatus: install ok installed\nVersion: 1.0\nArchitecture: all\nDescription: x\n more\n\n\
                    Package: b\nStatus: deinstall ok config-files\nVersion: 2\nArchitecture: amd64\n\n\
                    Package: c\nStatus: purge ok not-installed\nArchitecture: amd64\n\n\
                    Package: d\nStatus: hold ok installed\nVersion: 3\nArchitecture: all\n";
        let entries = parse_status(text);
        assert_eq!(entries.len(), 4);
        assert!(entries[0].is_installed());
        assert!(entries[1].is_removed() && !entries[1].is_installed());
        assert!(!entries[2].is_removed() && !entries[2].is_installed());
        assert!(entries[3].is_installed());
    }

    #[test]
    fn verify_lines() {
        let out =
            "??5?????? c /etc/foo.conf\nmissing     /usr/bin/gone\nS.5....T.  d /usr/share/doc/x\n";
        let m = parse_verify_output(out);
        assert_eq!(
            m["/etc/foo.conf"],
            json!({"mismatch": ["md5sum"], "type": "config"})
        );
        assert_eq!(m["/usr/bin/gone"], json!({"missing": true}));
        assert_eq!(
            m["/usr/share/doc/x"],
            json!({"mismatch": ["size", "md5sum", "mtime"], "type": "doc"})
        );
    }
}
