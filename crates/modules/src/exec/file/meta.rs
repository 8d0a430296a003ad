//! File metadata as Salt's `file` module reports and changes it: owner,
//! group, mode, hashes, and `file.stats`.
//!
//! Salt compares modes as zero-padded octal strings (`"0644"`) and owners by
//! name or by id; the helpers here keep those shapes so states can put them
//! straight into `changes`.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use halite_state::{Map, Value};
use serde_json::json;

use super::owner_names;

/// Why reading or changing metadata failed; the message names the path and
/// what to check.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The path does not exist (Salt: "Path not found: X").
    #[error("Path not found: {0}")]
    NotFound(String),
    /// An unknown user name.
    #[error("User {0} is not available")]
    NoUser(String),
    /// An unknown group name.
    #[error("Group {0} is not available")]
    NoGroup(String),
    /// A mode that is not octal digits.
    #[error("Invalid mode '{0}': give an octal mode such as 0644")]
    BadMode(String),
    /// A hash algorithm Salt does not know.
    #[error("Invalid hash type '{0}': use md5, sha1, sha224, sha256, sha384 or sha512")]
    BadHashType(String),
    /// The system refused the operation.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done, for the message.
        what: &'static str,
        /// The file.
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
}

impl MetaError {
    /// Wraps an I/O error with the action and the path.
    pub fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            return MetaError::NotFound(path.display().to_string());
        }
        MetaError::Io {
            what,
            path: path.display().to_string(),
            source,
        }
    }
}

/// Salt's `normalize_mode`: a string, `0o` prefix dropped, leading zeros
/// stripped then padded to four digits. YAML's `0644` arrives as the integer
/// 644 and normalizes to `"0644"` just like the string `"0644"`.
pub fn normalize_mode(mode: &Value) -> Option<String> {
    let raw = match mode {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
        other => other.to_string(),
    };
    Some(normalize_mode_str(&raw))
}

/// [`normalize_mode`] for a string.
pub fn normalize_mode_str(raw: &str) -> String {
    let s = raw.replace("0o", "0");
    let s = s
        .trim_matches('"')
        .trim_matches('\'')
        .trim_start_matches('0');
    format!("{s:0>4}")
}

/// Parses a normalized mode string into permission bits.
pub fn parse_mode(mode: &str) -> Result<u32, MetaError> {
    u32::from_str_radix(mode, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| MetaError::BadMode(mode.to_string()))
}

/// The mode of a path as Salt prints it (`"0644"`).
pub fn mode_string(bits: u32) -> String {
    format!("{:04o}", bits & 0o7777)
}

/// The name of uid `uid`, or the number as text when it has no name.
pub fn uid_to_user(uid: u32) -> String {
    owner_names::user_name(uid).unwrap_or_else(|| uid.to_string())
}

/// The name of gid `gid`, or the number as text when it has no name.
pub fn gid_to_group(gid: u32) -> String {
    owner_names::group_name(gid).unwrap_or_else(|| gid.to_string())
}

/// The uid of a user name or numeric id (Salt's `user_to_uid`).
pub fn user_to_uid(user: &str) -> Result<u32, MetaError> {
    if let Some(uid) = owner_names::user_id(user) {
        return Ok(uid);
    }
    match user.parse::<u32>() {
        Ok(uid) => Ok(uid),
        Err(_) => Err(MetaError::NoUser(user.to_string())),
    }
}

/// The gid of a group name or numeric id (Salt's `group_to_gid`).
pub fn group_to_gid(group: &str) -> Result<u32, MetaError> {
    if let Some(gid) = owner_names::group_id(group) {
        return Ok(gid);
    }
    match group.parse::<u32>() {
        Ok(gid) => Ok(gid),
        Err(_) => Err(MetaError::NoGroup(group.to_string())),
    }
}

/// Metadata of a path, optionally without following a final symlink.
pub fn metadata(path: &Path, follow_symlinks: bool) -> Result<fs::Metadata, MetaError> {
    let md = if follow_symlinks {
        fs::metadata(path)
    } else {
        fs::symlink_metadata(path)
    };
    md.map_err(|e| MetaError::io("Unable to stat", path, e))
}

/// Owner, group and mode of a path as Salt compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// The owner's name.
    pub user: String,
    /// The owner's uid.
    pub uid: u32,
    /// The group's name.
    pub group: String,
    /// The group's gid.
    pub gid: u32,
    /// The permission bits, as Salt prints them (`0644`).
    pub mode: String,
    /// Whether the path is a symbolic link.
    pub is_link: bool,
}

/// Reads [`Ownership`] of `path`.
pub fn ownership(path: &Path, follow_symlinks: bool) -> Result<Ownership, MetaError> {
    let md = metadata(path, follow_symlinks)?;
    Ok(Ownership {
        user: uid_to_user(md.uid()),
        uid: md.uid(),
        group: gid_to_group(md.gid()),
        gid: md.gid(),
        mode: mode_string(md.mode()),
        is_link: md.file_type().is_symlink(),
    })
}

/// Whether `wanted` (a name or a numeric id) names `name`/`id`.
pub fn same_owner(wanted: &str, name: &str, id: u32) -> bool {
    wanted == name || wanted == id.to_string()
}

/// Owner and group ids, mode and kind of a path from one stat: what
/// `check_perms` compares, with the names looked up only when a wanted
/// owner is compared to them (issue 25, session 22: a `file.managed`
/// without `user` or `group` looked up both names twice for nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Perms {
    /// The owner's uid.
    pub uid: u32,
    /// The group's gid.
    pub gid: u32,
    /// The permission bits (`0o7777` of `st_mode`).
    pub bits: u32,
    /// Whether the path is a symbolic link.
    pub is_link: bool,
}

impl Perms {
    /// The [`Perms`] of a stat already taken.
    pub fn of(md: &fs::Metadata) -> Self {
        Perms {
            uid: md.uid(),
            gid: md.gid(),
            bits: md.mode() & 0o7777,
            is_link: md.file_type().is_symlink(),
        }
    }

    /// Stats `path` (following a final symlink or not).
    pub fn read(path: &Path, follow_symlinks: bool) -> Result<Self, MetaError> {
        metadata(path, follow_symlinks).map(|md| Self::of(&md))
    }

    /// The mode as Salt prints it (`"0644"`).
    pub fn mode(&self) -> String {
        mode_string(self.bits)
    }

    /// Whether `wanted` (a user name or a uid) is the owner: by number
    /// first, so the name is looked up only when it is compared.
    pub fn user_is(&self, wanted: &str) -> bool {
        wanted == self.uid.to_string() || wanted == uid_to_user(self.uid)
    }

    /// Whether `wanted` (a group name or a gid) is the group, as
    /// [`Perms::user_is`].
    pub fn group_is(&self, wanted: &str) -> bool {
        wanted == self.gid.to_string() || wanted == gid_to_group(self.gid)
    }
}

/// Changes owner and group (either may be `None` to keep it); does not
/// follow a final symlink when `follow_symlinks` is false.
pub fn chown(
    path: &Path,
    user: Option<&str>,
    group: Option<&str>,
    follow_symlinks: bool,
) -> Result<(), MetaError> {
    let uid = user.map(user_to_uid).transpose()?;
    let gid = group.map(group_to_gid).transpose()?;
    let result = if follow_symlinks {
        std::os::unix::fs::chown(path, uid, gid)
    } else {
        std::os::unix::fs::lchown(path, uid, gid)
    };
    result.map_err(|e| MetaError::io("Unable to change owner of", path, e))
}

/// Sets the permission bits from a mode string (`"0644"`, `"755"`).
pub fn chmod(path: &Path, mode: &str) -> Result<(), MetaError> {
    let bits = parse_mode(&normalize_mode_str(mode))?;
    fs::set_permissions(path, fs::Permissions::from_mode(bits))
        .map_err(|e| MetaError::io("Unable to change mode of", path, e))
}

/// The process umask (read without changing it for longer than a call).
pub fn umask() -> u32 {
    // SAFETY: umask has no preconditions; it is set back immediately.
    let old = unsafe { libc::umask(0o022) };
    // SAFETY: as above, restoring the previous value.
    unsafe { libc::umask(old) };
    old as u32
}

/// The hash algorithms Salt accepts for `get_hash` and `source_hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashType {
    /// MD5 (32 hex digits).
    Md5,
    /// SHA-1 (40 hex digits).
    Sha1,
    /// SHA-224 (56 hex digits).
    Sha224,
    /// SHA-256 (64 hex digits).
    Sha256,
    /// SHA-384 (96 hex digits).
    Sha384,
    /// SHA-512 (128 hex digits).
    Sha512,
}

impl HashType {
    /// Parses a hash name (`sha256`...).
    pub fn parse(name: &str) -> Result<Self, MetaError> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "md5" => HashType::Md5,
            "sha1" => HashType::Sha1,
            "sha224" => HashType::Sha224,
            "sha256" => HashType::Sha256,
            "sha384" => HashType::Sha384,
            "sha512" => HashType::Sha512,
            _ => return Err(MetaError::BadHashType(name.to_string())),
        })
    }
    /// The hash type a bare hex digest of this length is (Salt guesses it the same way).
    pub fn from_hex_len(len: usize) -> Option<Self> {
        Some(match len {
            32 => HashType::Md5,
            40 => HashType::Sha1,
            56 => HashType::Sha224,
            64 => HashType::Sha256,
            96 => HashType::Sha384,
            128 => HashType::Sha512,
            _ => return None,
        })
    }
    /// The lowercase hex digest of `data`.
    pub fn digest(self, data: &[u8]) -> String {
        use sha2::Digest;
        match self {
            HashType::Md5 => hex::encode(md5::Md5::digest(data)),
            HashType::Sha1 => hex::encode(sha1::Sha1::digest(data)),
            HashType::Sha224 => hex::encode(sha2::Sha224::digest(data)),
            HashType::Sha256 => hex::encode(sha2::Sha256::digest(data)),
            HashType::Sha384 => hex::encode(sha2::Sha384::digest(data)),
            HashType::Sha512 => hex::encode(sha2::Sha512::digest(data)),
        }
    }
}

/// The hex digest of a file's content, read in a stream (a large file is
/// never held in memory). The one file hasher: the master's fileserver,
/// the minion's `salt://` cache and `cp.hash_file` use it too.
pub fn file_hash(path: &Path, kind: HashType) -> Result<String, MetaError> {
    fn stream<D: sha2::Digest + std::io::Write>(mut file: fs::File) -> std::io::Result<String> {
        let mut hasher = D::new();
        std::io::copy(&mut file, &mut hasher)?;
        Ok(hex::encode(hasher.finalize()))
    }
    let file = fs::File::open(path).map_err(|e| MetaError::io("Unable to read", path, e))?;
    match kind {
        HashType::Md5 => stream::<md5::Md5>(file),
        HashType::Sha1 => stream::<sha1::Sha1>(file),
        HashType::Sha224 => stream::<sha2::Sha224>(file),
        HashType::Sha256 => stream::<sha2::Sha256>(file),
        HashType::Sha384 => stream::<sha2::Sha384>(file),
        HashType::Sha512 => stream::<sha2::Sha512>(file),
    }
    .map_err(|e| MetaError::io("Unable to read", path, e))
}

/// One version of a file on disk: device, inode, size, and mtime and ctime
/// to the nanosecond. ctime cannot be set back by a process, so a file
/// written again has another stamp even when its size and mtime are put
/// back. Caches of what a file holds (owner names by `/etc/passwd`, a
/// verified `salt://` copy) keep it to know when to read the file again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp([i64; 7]);

impl FileStamp {
    /// The stamp of the file at `path` now (`None`: it cannot be read or
    /// is not a regular file).
    pub fn of(path: &Path) -> Option<Self> {
        Self::of_metadata(&fs::metadata(path).ok()?)
    }

    /// The stamp of a stat already taken (`None`: not a regular file).
    pub fn of_metadata(md: &fs::Metadata) -> Option<Self> {
        md.is_file().then(|| {
            Self([
                md.dev() as i64,
                md.ino() as i64,
                md.len() as i64,
                md.mtime(),
                md.mtime_nsec(),
                md.ctime(),
                md.ctime_nsec(),
            ])
        })
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.0[2] as u64
    }

    /// Whether the file's mtime and ctime are both strictly before
    /// `moment` (seconds and nanoseconds since the Unix epoch): a stamp
    /// that a write at or after `moment` cannot leave as it is.
    pub fn changed_before(&self, moment: (i64, i64)) -> bool {
        let [.., m_s, m_ns, c_s, c_ns] = self.0;
        (m_s, m_ns) < moment && (c_s, c_ns) < moment
    }
}

/// The sha256 of a file in hex: how `salt://` files are named between the
/// master's fileserver and the minions' caches.
pub fn sha256_file(path: &Path) -> Result<String, MetaError> {
    file_hash(path, HashType::Sha256)
}

fn unix_time(secs: i64, nanos: i64) -> Value {
    json!(secs as f64 + nanos as f64 / 1e9)
}

/// Salt's `file.stats`: inode, uid, gid, user, group, times, size, mode,
/// type and the resolved target; `sum` when a hash type is given.
pub fn stats(
    path: &Path,
    hash_type: Option<HashType>,
    follow_symlinks: bool,
) -> Result<Map, MetaError> {
    let md = metadata(path, follow_symlinks)?;
    let ft = md.file_type();
    use std::os::unix::fs::FileTypeExt;
    let kind = if ft.is_symlink() {
        "link"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_char_device() {
        "char"
    } else if ft.is_block_device() {
        "block"
    } else if ft.is_fifo() {
        "pipe"
    } else if ft.is_socket() {
        "socket"
    } else {
        "file"
    };
    let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = Map::new();
    out.insert("inode".into(), json!(md.ino()));
    out.insert("uid".into(), json!(md.uid()));
    out.insert("gid".into(), json!(md.gid()));
    out.insert("group".into(), json!(gid_to_group(md.gid())));
    out.insert("user".into(), json!(uid_to_user(md.uid())));
    out.insert("atime".into(), unix_time(md.atime(), md.atime_nsec()));
    out.insert("mtime".into(), unix_time(md.mtime(), md.mtime_nsec()));
    out.insert("ctime".into(), unix_time(md.ctime(), md.ctime_nsec()));
    out.insert("size".into(), json!(md.size()));
    out.insert("mode".into(), json!(mode_string(md.mode())));
    if let Some(h) = hash_type {
        if ft.is_file() {
            out.insert("sum".into(), json!(file_hash(path, h)?));
        }
    }
    out.insert("type".into(), json!(kind));
    out.insert("target".into(), json!(target.display().to_string()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_normalize_like_salt() {
        assert_eq!(normalize_mode(&json!(644)).as_deref(), Some("0644"));
        assert_eq!(normalize_mode(&json!("0644")).as_deref(), Some("0644"));
        assert_eq!(normalize_mode(&json!("00755")).as_deref(), Some("0755"));
        assert_eq!(normalize_mode(&json!("0o600")).as_deref(), Some("0600"));
        assert_eq!(normalize_mode(&json!("'440'")).as_deref(), Some("0440"));
        assert_eq!(normalize_mode(&Value::Null), None);
    }

    #[test]
    fn bad_mode_is_an_error() {
        assert!(parse_mode("0999").is_err());
        assert!(parse_mode("rwx").is_err());
    }
}
