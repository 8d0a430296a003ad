//! Reading a `.spm` (a bzip2 tarball) safely: the whole archive is read and
//! checked in memory before anything touches the disk, so a hostile,
//! corrupt or truncated package is refused with nothing written.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use crate::error::{Result, SpmError};
use crate::formula::{Formula, REQUIRED_AT_INSTALL};
use halite_salt_rules::archive_path::{resolve_below, strict_components, Unsafe};

/// The most a package may unpack to; formulas are text, this stops bombs.
pub const MAX_UNPACKED_BYTES: u64 = 512 * 1024 * 1024;

/// What a member of the archive is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberKind {
    /// A directory.
    Dir,
    /// A regular file and its content.
    File(Vec<u8>),
    /// A symbolic link and its (relative, checked) target.
    Symlink(String),
}

/// One member, its path relative to the package's top directory
/// (`apache/init.sls` for the tar member `apache/apache/init.sls`).
#[derive(Debug, Clone)]
pub struct Member {
    /// The path below the package's top directory.
    pub path: String,
    /// What the member is.
    pub kind: MemberKind,
    /// Its permission bits.
    pub mode: u32,
    /// Its modification time, seconds since the epoch.
    pub mtime: u64,
}

/// A checked package: its FORMULA and its members, in archive order.
#[derive(Debug, Clone)]
pub struct Package {
    /// The package's FORMULA.
    pub formula: Formula,
    /// Its members, in archive order.
    pub members: Vec<Member>,
}

/// The package name Salt derives from a file name: `apache-201506-2.spm`
/// -> `apache` (everything before the last two `-`).
pub fn name_from_file_name(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let stem = file.strip_suffix(".spm").unwrap_or(file);
    let parts: Vec<&str> = stem.split('-').collect();
    (parts.len() > 2).then(|| parts[..parts.len() - 2].join("-"))
}

/// Reads and checks the package at `path`.
pub fn read_package(path: &Path) -> Result<Package> {
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SpmError::PackageFileMissing(path.to_path_buf()),
        _ => SpmError::io("cannot read", path, e),
    })?;
    parse_package(
        &bytes,
        &path.display().to_string(),
        name_from_file_name(path).as_deref(),
    )
}

/// Checks an in-memory package; `origin` names it in errors, `hinted_name`
/// is the name its file name suggests.
pub fn parse_package(bytes: &[u8], origin: &str, hinted_name: Option<&str>) -> Result<Package> {
    let refuse = |reason: String| SpmError::UnsafePackage {
        path: origin.to_string(),
        reason,
    };
    let raw = read_members(bytes).map_err(refuse)?;
    let tops: HashSet<&str> = raw.iter().map(|m| m.top.as_str()).collect();
    let name = match hinted_name {
        Some(hint) if tops.contains(hint) => hint.to_string(),
        _ if tops.len() == 1 => tops
            .iter()
            .next()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        _ => {
            let mut names: Vec<&str> = tops.into_iter().collect();
            names.sort();
            return Err(refuse(format!(
                "expected one top directory, found: {}",
                names.join(", ")
            )));
        }
    };
    let formula_text = raw
        .iter()
        .find(|m| m.top == name && m.path == "FORMULA")
        .and_then(|m| match &m.kind {
            MemberKind::File(data) => Some(data),
            _ => None,
        })
        .ok_or_else(|| refuse(format!("it has no {name}/FORMULA")))?;
    let formula_text = String::from_utf8(formula_text.clone())
        .map_err(|_| refuse("FORMULA is not UTF-8".into()))?;
    let formula = Formula::parse(
        &formula_text,
        &format!("{origin}:{name}/FORMULA"),
        &REQUIRED_AT_INSTALL,
    )?;
    if formula.name != name {
        return Err(refuse(format!(
            "its FORMULA names '{}' but its files are under '{name}/'",
            formula.name
        )));
    }
    let members = raw
        .into_iter()
        .filter(|m| m.top == name)
        .map(|m| Member {
            path: m.path,
            kind: m.kind,
            mode: m.mode,
            mtime: m.mtime,
        })
        .collect();
    Ok(Package { formula, members })
}

/// A member before the package name is known.
struct RawMember {
    top: String,
    path: String,
    kind: MemberKind,
    mode: u32,
    mtime: u64,
}

fn read_members(bytes: &[u8]) -> Result<Vec<RawMember>, String> {
    let decoder = bzip2::read::BzDecoder::new(bytes);
    let mut archive = tar::Archive::new(decoder);
    let mut members: Vec<RawMember> = Vec::new();
    let mut file_data: HashMap<String, usize> = HashMap::new();
    let mut symlinks: HashSet<String> = HashSet::new();
    let mut total: u64 = 0;
    let entries = archive
        .entries()
        .map_err(|e| format!("not a bzip2 tarball ({e})"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("corrupt or truncated archive ({e})"))?;
        let raw_path = entry.path_bytes().into_owned();
        let full =
            String::from_utf8(raw_path).map_err(|_| "a member name is not UTF-8".to_string())?;
        let parts = clean_member_path(&full)?;
        if parts.is_empty() {
            continue;
        }
        for depth in 1..parts.len() {
            if symlinks.contains(&parts[..depth].join("/")) {
                return Err(format!(
                    "member {full} goes through the symbolic link {}",
                    parts[..depth].join("/")
                ));
            }
        }
        let key = parts.join("/");
        let header = entry.header();
        let mode = header
            .mode()
            .map_err(|e| format!("member {full}: bad mode ({e})"))?
            & 0o777;
        let mtime = header.mtime().unwrap_or(0);
        let entry_type = header.entry_type();
        let kind = if entry_type.is_dir() {
            MemberKind::Dir
        } else if entry_type.is_file() {
            total = total.saturating_add(entry.size());
            if total > MAX_UNPACKED_BYTES {
                return Err(format!(
                    "it unpacks to more than {MAX_UNPACKED_BYTES} bytes"
                ));
            }
            // The header's size is not trusted for the allocation.
            let mut data =
                Vec::with_capacity(usize::try_from(entry.size().min(1 << 20)).unwrap_or(0));
            entry
                .read_to_end(&mut data)
                .map_err(|e| format!("corrupt or truncated archive at {full} ({e})"))?;
            MemberKind::File(data)
        } else if entry_type.is_symlink() {
            let target = entry
                .link_name_bytes()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .ok_or_else(|| format!("symbolic link {full} has no target"))?;
            check_link_target(&parts, &target)?;
            symlinks.insert(key.clone());
            MemberKind::Symlink(target)
        } else if entry_type.is_hard_link() {
            let target = entry
                .link_name_bytes()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .ok_or_else(|| format!("hard link {full} has no target"))?;
            let target_key = clean_member_path(&target)?.join("/");
            let index = file_data
                .get(&target_key)
                .ok_or_else(|| format!("hard link {full} points to {target}, which is not an earlier file of the package"))?;
            members[*index].kind.clone()
        } else {
            return Err(format!(
                "member {full} is a device, fifo or other special file"
            ));
        };
        if matches!(kind, MemberKind::File(_)) {
            file_data.insert(key, members.len());
        }
        let top = parts[0].clone();
        let path = parts[1..].join("/");
        members.push(RawMember {
            top,
            path,
            kind,
            mode,
            mtime,
        });
    }
    // The tar reader stops at the end-of-archive blocks; reading the rest of
    // the bzip2 stream proves it is complete (a truncated one errors here).
    let mut decoder = archive.into_inner();
    std::io::copy(&mut decoder, &mut std::io::sink())
        .map_err(|e| format!("corrupt or truncated archive ({e})"))?;
    if members.is_empty() {
        return Err("the archive is empty".to_string());
    }
    Ok(members)
}

/// Splits a member name into components, refusing absolute paths and `..`
/// (the shared rule of [`halite_salt_rules::archive_path`]).
fn clean_member_path(full: &str) -> Result<Vec<String>, String> {
    strict_components(full).map_err(|why| match why {
        Unsafe::Absolute => format!("member {full} has an absolute path"),
        Unsafe::ParentDir => format!("member {full} contains '..'"),
        Unsafe::Nul => format!("member {full} contains a NUL byte"),
    })
}

/// A link's target must be relative and, resolved from the link's own
/// directory, stay inside the package's top directory.
pub(crate) fn check_link_target(link_parts: &[String], target: &str) -> Result<(), String> {
    let link = link_parts.join("/");
    if target.starts_with('/') {
        return Err(format!(
            "symbolic link {link} points to the absolute path {target}"
        ));
    }
    if target.is_empty() {
        return Err(format!("symbolic link {link} has an empty target"));
    }
    // The link's directory, below the package's top directory; a link that
    // is itself the top directory has nowhere inside to point.
    let inside = match link_parts {
        [_top, dir @ .., _name] => resolve_below(dir, target).is_some(),
        _ => false,
    };
    if !inside {
        return Err(format!(
            "symbolic link {link} points to {target}, outside the package"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(s: &str) -> Vec<String> {
        s.split('/').map(str::to_string).collect()
    }

    #[test]
    fn link_targets_must_stay_inside_the_package() {
        assert!(check_link_target(&parts("apache/apache/a"), "b").is_ok());
        assert!(check_link_target(&parts("apache/apache/a"), "../README").is_ok());
        assert!(check_link_target(&parts("apache/apache/a"), "../../x").is_err());
        assert!(check_link_target(&parts("apache/apache/a"), "/etc/passwd").is_err());
        assert!(check_link_target(&parts("apache/a"), "x/../../y").is_err());
        // The package's top directory itself as a link points nowhere inside.
        assert!(check_link_target(&parts("apache"), "x").is_err());
    }

    #[test]
    fn member_paths_refuse_dotdot_and_absolute() {
        assert!(clean_member_path("/etc/passwd").is_err());
        assert!(clean_member_path("apache/../../x").is_err());
        assert_eq!(
            clean_member_path("./apache//init.sls").unwrap_or_default(),
            parts("apache/init.sls")
        );
    }

    #[test]
    fn package_name_comes_from_the_file_name_as_in_salt() {
        assert_eq!(
            name_from_file_name(Path::new("/x/apache-201506-2.spm")).as_deref(),
            Some("apache")
        );
        assert_eq!(
            name_from_file_name(Path::new("my-formula-1.0-1.spm")).as_deref(),
            Some("my-formula")
        );
        assert_eq!(name_from_file_name(Path::new("odd.spm")), None);
    }
}
