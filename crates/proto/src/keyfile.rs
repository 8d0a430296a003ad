//! Identity key files: created on first start, mode 0600, in `pki_dir`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::crypto::{Identity, PublicKey};

/// Why an identity could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error(
        "cannot {action} {path}: {source}; check that pki_dir exists and is writable by this user"
    )]
    /// Reading or writing a key file failed.
    Io {
        /// What was being done (`read`, `write`...).
        action: &'static str,
        /// The key file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    #[error("{path} is not a halite key ({reason}); move it away to have a new key generated")]
    /// A key file that is not a halite key.
    Malformed {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

fn io<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> KeyFileError + 'a {
    move |source| KeyFileError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The temporary file `write_private` writes before renaming onto `path`:
/// a short name (a 255-byte id still fits) that is never a valid minion id
/// (it holds `..`), unique per write, in the same directory.
fn temp_path(path: &Path) -> PathBuf {
    let tag = crate::crypto::random_u64().unwrap_or_else(|_| u64::from(std::process::id()));
    let name = format!("..tmp-{tag:016x}");
    match path.parent() {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

/// Writes `contents` to `path` with mode 0600, replacing it atomically.
pub fn write_private(path: &Path, contents: &[u8]) -> Result<(), KeyFileError> {
    write_private_with(path, contents, true)
}

/// [`write_private`] without the fsync: for writes made in a batch that
/// the caller syncs once at its end (a burst of new pending keys).
pub fn write_private_unsynced(path: &Path, contents: &[u8]) -> Result<(), KeyFileError> {
    write_private_with(path, contents, false)
}

fn write_private_with(path: &Path, contents: &[u8], sync: bool) -> Result<(), KeyFileError> {
    let tmp = temp_path(path);
    let written = write_then_rename(&tmp, path, contents, sync);
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

fn write_then_rename(
    tmp: &Path,
    path: &Path,
    contents: &[u8],
    sync: bool,
) -> Result<(), KeyFileError> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(io("create", tmp))?;
    file.write_all(contents).map_err(io("write", tmp))?;
    if sync {
        file.sync_all().map_err(io("sync", tmp))?;
    }
    fs::set_permissions(tmp, fs::Permissions::from_mode(0o600)).map_err(io("chmod", tmp))?;
    fs::rename(tmp, path).map_err(io("rename into", path))?;
    Ok(())
}

/// Creates `dir` (mode 0700) when missing.
pub fn ensure_private_dir(dir: &Path) -> Result<(), KeyFileError> {
    if !dir.exists() {
        fs::create_dir_all(dir).map_err(io("create directory", dir))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io("chmod", dir))?;
    }
    Ok(())
}

/// Loads `<dir>/<name>.pem` (hex PKCS#8), or creates it and `<name>.pub`
/// on first start.
pub fn load_or_create_identity(dir: &Path, name: &str) -> Result<Identity, KeyFileError> {
    ensure_private_dir(dir)?;
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub"));
    if private.exists() {
        let text = fs::read_to_string(&private).map_err(io("read", &private))?;
        let der = hex::decode(text.trim()).map_err(|e| KeyFileError::Malformed {
            path: private.clone(),
            reason: e.to_string(),
        })?;
        let identity = Identity::from_pkcs8(&der).map_err(|e| KeyFileError::Malformed {
            path: private.clone(),
            reason: e.to_string(),
        })?;
        if !public.exists() {
            write_private(
                &public,
                format!("{}\n", identity.public().to_hex()).as_bytes(),
            )?;
        }
        return Ok(identity);
    }
    let identity = Identity::generate().map_err(|e| KeyFileError::Malformed {
        path: private.clone(),
        reason: e.to_string(),
    })?;
    write_private(
        &private,
        format!("{}\n", hex::encode(identity.pkcs8())).as_bytes(),
    )?;
    write_private(
        &public,
        format!("{}\n", identity.public().to_hex()).as_bytes(),
    )?;
    Ok(identity)
}

/// Reads a public key file (`<name>.pub`, or an accepted minion key).
pub fn read_public(path: &Path) -> Result<PublicKey, KeyFileError> {
    let text = fs::read_to_string(path).map_err(io("read", path))?;
    PublicKey::from_hex(&text).map_err(|e| KeyFileError::Malformed {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_created_once_with_private_modes() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let first = load_or_create_identity(&pki, "minion").unwrap();
        let again = load_or_create_identity(&pki, "minion").unwrap();
        assert_eq!(first.public(), again.public());
        for f in ["minion.pem", "minion.pub"] {
            let mode = fs::metadata(pki.join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
        }
        assert_eq!(
            read_public(&pki.join("minion.pub")).unwrap(),
            first.public()
        );
        fs::write(pki.join("minion.pem"), "garbage").unwrap();
        assert!(matches!(
            load_or_create_identity(&pki, "minion"),
            Err(KeyFileError::Malformed { .. })
        ));
    }
}
