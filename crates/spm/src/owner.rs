//! Who owns installed files: `spm_uid`/`spm_gid` from the config, else the
//! running user, as Salt does; names are looked up in /etc/passwd and
//! /etc/group for the database.

use std::path::{Path, PathBuf};

use crate::config::SpmConfig;
use crate::db::{FileKind, InstalledFile};
use crate::error::{Result, SpmError};

/// The owner applied to and recorded for every installed file.
#[derive(Debug, Clone)]
pub struct Ownership {
    /// Set when the config asks for an owner other than the running user.
    chown_to: Option<(Option<u32>, Option<u32>)>,
    user: String,
    group: String,
}

impl Ownership {
    /// The ownership an install under `config` gives its files.
    pub fn for_install(config: &SpmConfig) -> Self {
        // SAFETY: geteuid/getegid cannot fail and touch no memory.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let uid = config.spm_uid.unwrap_or(euid);
        let gid = config.spm_gid.unwrap_or(egid);
        let chown_to = (config.spm_uid.is_some() || config.spm_gid.is_some())
            .then_some((config.spm_uid, config.spm_gid));
        Ownership {
            chown_to,
            user: name_of("/etc/passwd", uid).unwrap_or_else(|| uid.to_string()),
            group: name_of("/etc/group", gid).unwrap_or_else(|| gid.to_string()),
        }
    }

    /// Gives `path` (not following links) the configured owner, if any.
    pub fn apply(&self, path: &Path) -> Result<()> {
        if let Some((uid, gid)) = self.chown_to {
            std::os::unix::fs::lchown(path, uid, gid)
                .map_err(|e| SpmError::io("cannot chown", path, e))?;
        }
        Ok(())
    }

    /// A database row for `path` with this owner and no content yet.
    pub fn record(&self, path: PathBuf, kind: FileKind, mode: u32) -> InstalledFile {
        InstalledFile {
            path,
            kind,
            size: 0,
            mode: format!("{mode:04o}"),
            sha256: String::new(),
            owner: self.user.clone(),
            group: self.group.clone(),
            file_type: String::new(),
            link_target: String::new(),
            mtime: 0,
        }
    }
}

/// The name of id `id` in a passwd-format file (`name:x:id:...`).
fn name_of(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let found: u32 = fields.nth(1)?.parse().ok()?;
        (found == id).then(|| name.to_string())
    })
}
