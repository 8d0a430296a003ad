//! Salt's `file.rmdir`: a directory removed when empty, or with `recurse`
//! every empty directory of a tree (bottom-up, as `os.walk(topdown=False)`),
//! optionally only those not modified for `older_than` days. `file.pruned`
//! is built on it.

use std::path::{Path, PathBuf};

use halite_state::Value;
use serde_json::json;

use crate::exec::{Args, ExecError};
use crate::Host;

/// What [`rmdir`] removed and what it could not.
#[derive(Debug, Default)]
pub struct Removal {
    /// Whether everything asked went.
    pub result: bool,
    /// The directories removed, in removal order.
    pub deleted: Vec<String>,
    /// `[path, Python's str(OSError)]` of each failure.
    pub errors: Vec<[String; 2]>,
}

/// Python's `str(OSError)` for a failed `os.rmdir(path)`.
fn os_error_text(e: &std::io::Error, path: &str) -> String {
    let text = e.to_string();
    let desc = text.split(" (os error").next().unwrap_or(&text);
    match e.raw_os_error() {
        Some(code) => format!("[Errno {code}] {desc}: '{path}'"),
        None => desc.to_string(),
    }
}

/// The subdirectories of `dir` (a symlink to a directory counts, as
/// `os.walk` lists it), `None` when it cannot be read.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

/// `os.walk(top, topdown=False)` over directories only: every directory
/// below `top` after its own subdirectories, with the list of its
/// subdirectories; symlinked directories are listed, not descended.
fn walk_bottom_up(top: &Path, out: &mut Vec<(PathBuf, Vec<PathBuf>)>) {
    let dirs = subdirs(top);
    for d in &dirs {
        let is_link = std::fs::symlink_metadata(d).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            walk_bottom_up(d, out);
        }
    }
    out.push((top.to_path_buf(), dirs));
}

/// The cut-off time of `older_than` days, `None` for none (absent, 0, or
/// not a number: Salt logs that and uses no cut-off).
fn cutoff(older_than: Option<&Value>) -> Option<std::time::SystemTime> {
    let days: i64 = match older_than? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    if days == 0 {
        return None;
    }
    let secs = u64::try_from(days.checked_mul(86_400)?).ok()?;
    std::time::SystemTime::now().checked_sub(std::time::Duration::from_secs(secs))
}

fn old_enough(path: &Path, cutoff: Option<std::time::SystemTime>) -> bool {
    match cutoff {
        None => true,
        Some(c) => std::fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|m| m < c),
    }
}

/// Salt's `file.rmdir(path, recurse, verbose=True, older_than)`.
pub fn rmdir(path: &str, recurse: bool, older_than: Option<&Value>) -> Result<Removal, ExecError> {
    let top = Path::new(path);
    if !top.is_absolute() {
        return Err(ExecError::Invocation("File path must be absolute.".into()));
    }
    if !top.is_dir() {
        return Err(ExecError::Invocation(format!(
            "A valid directory was not specified: {path}"
        )));
    }
    let cutoff = cutoff(older_than);
    let mut out = Removal::default();
    let remove = |p: &Path, out: &mut Removal| -> bool {
        let shown = p.display().to_string();
        match std::fs::remove_dir(p) {
            Ok(()) => {
                out.deleted.push(shown);
                true
            }
            Err(e) => {
                tracing::error!(path = %shown, error = %e, "Could not remove");
                out.errors.push([shown.clone(), os_error_text(&e, &shown)]);
                false
            }
        }
    };
    let mut ok = true;
    if recurse {
        let mut walk = Vec::new();
        walk_bottom_up(top, &mut walk);
        for (_, dirs) in &walk {
            for d in dirs {
                if old_enough(d, cutoff) {
                    remove(d, &mut out);
                }
            }
        }
        ok = out.errors.is_empty();
    }
    if old_enough(top, cutoff) {
        let removed = remove(top, &mut out);
        ok = removed && (ok || !recurse);
    }
    out.result = ok;
    Ok(out)
}

/// `file.rmdir <path> [recurse=False] [verbose=False] [older_than=None]`.
pub fn rmdir_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let path = crate::exec::file::expand_user(&args.require_str(0, "path", "rmdir")?);
    let recurse = args.get_bool(1, "recurse", false);
    let verbose = args.get_bool(2, "verbose", false);
    let removal = rmdir(&path, recurse, args.get(3, "older_than"))?;
    Ok(if verbose {
        json!({"deleted": removal.deleted, "errors": removal.errors, "result": removal.result})
    } else {
        Value::Bool(removal.result)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_directories_go_bottom_up_and_full_ones_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let top = dir.path().join("top");
        std::fs::create_dir_all(top.join("a/b")).expect("a/b");
        std::fs::create_dir_all(top.join("full")).expect("full");
        std::fs::write(top.join("full/f"), "x").expect("f");
        let top_s = top.display().to_string();
        let r = rmdir(&top_s, true, None).expect("rmdir");
        assert!(!r.result);
        let mut deleted = r.deleted.clone();
        deleted.sort();
        assert_eq!(deleted, vec![format!("{top_s}/a"), format!("{top_s}/a/b")]);
        assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
        assert!(r.errors.iter().any(|[p, e]| p == &format!("{top_s}/full")
            && e == &format!("[Errno 39] Directory not empty: '{top_s}/full'")));
        assert!(top.join("full/f").exists());
        // Not recursive: only the top, and it is not empty.
        let r = rmdir(&top_s, false, None).expect("rmdir");
        assert!(!r.result);
        // Old enough? Nothing was modified 3 days ago.
        std::fs::create_dir(top.join("new")).expect("new");
        let r = rmdir(&top_s, true, Some(&json!(3))).expect("rmdir");
        assert!(r.deleted.is_empty() && r.result);
        assert!(matches!(
            rmdir("rel", false, None),
            Err(ExecError::Invocation(_))
        ));
    }
}
