//! Which provider serves this host: the `os_family` grain, looked up in a
//! table with one line per provider.
//!
//! Until the grains module fills `os_family`, it is derived from
//! `/etc/os-release` (`ID` / `ID_LIKE`).

use halite_state::Value;

use super::apt::Apt;
use super::dpkg::Dpkg;
use super::error::{PkgError, PkgResult};
use super::provider::{LowPkg, PkgProvider};
use super::rpm::Rpm;
use super::yum::Yum;

/// One package manager: the `os_family` values it serves and how to build
/// its `pkg` and `lowpkg` sides.
pub struct ProviderEntry {
    /// The provider's name (`apt`, `yum`).
    pub name: &'static str,
    /// The `os_family` grain values it serves.
    pub families: &'static [&'static str],
    /// Builds the provider from the minion's options.
    pub provider: fn(&Value) -> Box<dyn PkgProvider>,
    /// Builds the low-level package database.
    pub lowpkg: fn() -> Box<dyn LowPkg>,
}

/// The providers halite ships. Adding a package manager is one line here
/// (plus its file).
pub const PROVIDERS: &[ProviderEntry] = &[
    ProviderEntry {
        name: "apt",
        families: &["Debian"],
        provider: Apt::boxed,
        lowpkg: Dpkg::boxed,
    },
    ProviderEntry {
        name: "yum",
        families: &["RedHat", "Fedora"],
        provider: Yum::boxed,
        lowpkg: Rpm::boxed,
    },
];

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

/// The table entry serving these grains.
pub fn entry_for(grains: &Value) -> PkgResult<&'static ProviderEntry> {
    let family = os_family(grains).ok_or_else(|| {
        PkgError::Unsupported(
            "Cannot tell this host's os_family (no grain, no /etc/os-release); pkg is not available".into(),
        )
    })?;
    PROVIDERS
        .iter()
        .find(|e| e.families.contains(&family.as_str()))
        .ok_or_else(|| {
            PkgError::Unsupported(format!(
                "No package provider for os_family '{family}'; halite supports: {}",
                PROVIDERS
                    .iter()
                    .flat_map(|e| e.families.iter())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The package provider for these grains and options.
pub fn provider_for(grains: &Value, opts: &Value) -> PkgResult<Box<dyn PkgProvider>> {
    Ok((entry_for(grains)?.provider)(opts))
}

/// The low-level package database for these grains.
pub fn lowpkg_for(grains: &Value) -> PkgResult<Box<dyn LowPkg>> {
    Ok((entry_for(grains)?.lowpkg)())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn name_for(grains: Value) -> Option<&'static str> {
        entry_for(&grains).ok().map(|e| e.name)
    }

    #[test]
    fn grain_then_os_release() {
        assert_eq!(name_for(json!({"os_family": "RedHat"})), Some("yum"));
        assert_eq!(name_for(json!({"os_family": "Debian"})), Some("apt"));
        assert!(entry_for(&json!({"os_family": "Windows"})).is_err());
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
