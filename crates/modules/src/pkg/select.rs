//! Which provider serves this host: the `os_family` grain, looked up in a
//! table with one line per provider.
//!
//! Until the grains module fills `os_family`, it is derived from
//! `/etc/os-release` (`ID` / `ID_LIKE`).

use halite_state::Value;

use super::apt::Apt;
use super::dpkg::Dpkg;
use super::rpm::Rpm;
use super::yum::Yum;
use super::{LowPkg, PkgError, PkgProvider, PkgResult};

/// The providers halite ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    Apt,
    Yum,
}

/// `os_family` values -> provider. Adding a package manager is one line
/// here (plus its file).
pub const PROVIDERS: &[(&[&str], ProviderKind)] = &[
    (&["Debian"], ProviderKind::Apt),
    (&["RedHat", "Fedora", "Suse-RPM"], ProviderKind::Yum),
];

impl ProviderKind {
    /// A fresh provider of this kind, configured from the minion's
    /// options (`pkg_lock_timeout`: seconds apt waits for the dpkg lock).
    pub fn build(self, opts: &Value) -> Box<dyn PkgProvider> {
        match self {
            ProviderKind::Apt => match opts.get("pkg_lock_timeout").and_then(Value::as_u64) {
                Some(secs) => Box::new(Apt::with_lock_timeout(secs)),
                None => Box::new(Apt::new()),
            },
            ProviderKind::Yum => Box::new(Yum::detect()),
        }
    }
    /// A fresh low-level database of this kind.
    pub fn build_lowpkg(self) -> Box<dyn LowPkg> {
        match self {
            ProviderKind::Apt => Box::new(Dpkg::default()),
            ProviderKind::Yum => Box::new(Rpm::default()),
        }
    }
}

/// Salt's `os_family` from os-release's `ID` and `ID_LIKE`.
pub fn os_family_from_os_release(text: &str) -> Option<&'static str> {
    let mut ids = Vec::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            if k == "ID" || k == "ID_LIKE" {
                ids.extend(
                    v.trim_matches('"')
                        .split_whitespace()
                        .map(str::to_ascii_lowercase),
                );
            }
        }
    }
    ids.iter().find_map(|id| match id.as_str() {
        "debian" | "ubuntu" | "raspbian" | "linuxmint" | "devuan" => Some("Debian"),
        "rhel" | "centos" | "fedora" | "rocky" | "almalinux" | "ol" | "amzn" => Some("RedHat"),
        _ => None,
    })
}

/// The `os_family` of the host: the grain when set, else os-release.
pub fn os_family(grains: &Value) -> Option<String> {
    if let Some(f) = grains
        .get("os_family")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        return Some(f.to_string());
    }
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    os_family_from_os_release(&text).map(str::to_string)
}

/// The provider kind for these grains.
pub fn kind_for(grains: &Value) -> PkgResult<ProviderKind> {
    let family = os_family(grains).ok_or_else(|| {
        PkgError::Unsupported("Cannot tell this host's os_family (no grain, no /etc/os-release); pkg is not available".into())
    })?;
    PROVIDERS
        .iter()
        .find(|(families, _)| families.contains(&family.as_str()))
        .map(|(_, k)| *k)
        .ok_or_else(|| {
            PkgError::Unsupported(format!(
                "No package provider for os_family '{family}'; halite supports: {}",
                PROVIDERS
                    .iter()
                    .flat_map(|(f, _)| f.iter())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The package provider for these grains and options.
pub fn provider_for(grains: &Value, opts: &Value) -> PkgResult<Box<dyn PkgProvider>> {
    Ok(kind_for(grains)?.build(opts))
}

/// The low-level package database for these grains.
pub fn lowpkg_for(grains: &Value) -> PkgResult<Box<dyn LowPkg>> {
    Ok(kind_for(grains)?.build_lowpkg())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grain_then_os_release() {
        assert_eq!(
            kind_for(&json!({"os_family": "RedHat"})).ok(),
            Some(ProviderKind::Yum)
        );
        assert_eq!(
            kind_for(&json!({"os_family": "Debian"})).ok(),
            Some(ProviderKind::Apt)
        );
        assert!(kind_for(&json!({"os_family": "Windows"})).is_err());
        assert_eq!(
            os_family_from_os_release("ID=rocky\nID_LIKE=\"rhel centos fedora\"\n"),
            Some("RedHat")
        );
        assert_eq!(
            os_family_from_os_release("ID=ubuntu\nID_LIKE=debian\n"),
            Some("Debian")
        );
        assert_eq!(os_family_from_os_release("ID=arch\n"), None);
    }
}
