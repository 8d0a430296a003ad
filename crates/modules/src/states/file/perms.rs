//! Ownership and mode enforcement shared by the `file` states, with the
//! change keys (`user`, `group`, `mode`) and failure comments of Salt's
//! `file.check_perms`.

use std::path::Path;

use halite_state::{Map, StateResult};
use serde_json::json;

use crate::exec::file::meta::{self, same_owner, Perms};
use crate::exec::file::owner_names;

/// Salt's `_check_user`: the error text for unknown users/groups, empty when
/// both exist. In test mode unknown owners are only logged.
pub fn check_user(user: Option<&str>, group: Option<&str>, test: bool) -> String {
    let mut err = String::new();
    if let Some(u) = user {
        if meta::user_to_uid(u).is_err() {
            err.push_str(&format!("User {u} is not available "));
        }
    }
    if let Some(g) = group {
        if meta::group_to_gid(g).is_err() {
            err.push_str(&format!("Group {g} is not available"));
        }
    }
    if !err.is_empty() && test {
        tracing::warn!("{err}");
        return String::new();
    }
    err
}

/// The desired ownership and mode of one path.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted<'a> {
    pub user: Option<&'a str>,
    pub group: Option<&'a str>,
    /// Normalized (`"0644"`).
    pub mode: Option<&'a str>,
    pub follow_symlinks: bool,
}

/// Salt's `file.check_perms`: enforces `wanted` on `path` (or, in test
/// mode, only records what would change) and adds `user`/`group`/`mode` to
/// `ret.changes`. Returns the mode the path had before.
pub fn check_perms(
    path: &Path,
    ret: &mut StateResult,
    wanted: Wanted<'_>,
    test: bool,
) -> Option<String> {
    check_perms_from(path, ret, wanted, test, None)
}

/// [`check_perms`] from a stat the caller already holds (`before`: the
/// path's, as `wanted.follow_symlinks` reads it, taken since its last
/// change), `None` to stat it here. The path is stat again only after a
/// `chown` or `chmod` (to see what they did, as Salt does); owner and
/// group names are looked up only when a wanted one is compared to them,
/// and `/etc/passwd` and `/etc/group` stamped once for the whole check.
pub fn check_perms_from(
    path: &Path,
    ret: &mut StateResult,
    wanted: Wanted<'_>,
    test: bool,
    before: Option<Perms>,
) -> Option<String> {
    let _names = owner_names::stamped_once();
    let orig_comment = std::mem::take(&mut ret.comment);
    let mut comments: Vec<String> = Vec::new();
    let cur = match before.map_or_else(|| Perms::read(path, wanted.follow_symlinks), Ok) {
        Ok(c) => c,
        Err(e) => {
            ret.result = Some(false);
            ret.comment = if orig_comment.is_empty() {
                e.to_string()
            } else {
                format!("{orig_comment}; {e}")
            };
            return None;
        }
    };
    let cur_mode = cur.mode();
    let skip_mode = cur.is_link && !wanted.follow_symlinks;
    let change_user = wanted.user.filter(|u| !cur.user_is(u));
    let change_group = wanted.group.filter(|g| !cur.group_is(g));
    let mut touched = false;
    if !test && (change_user.is_some() || change_group.is_some()) {
        touched = true;
        if let Err(e) = meta::chown(
            path,
            wanted.user,
            wanted.group,
            wanted.follow_symlinks || !cur.is_link,
        ) {
            ret.result = Some(false);
            comments.push(e.to_string());
        }
    }
    let change_mode = wanted.mode.filter(|m| !skip_mode && *m != cur_mode);
    if !test {
        if let Some(m) = change_mode {
            touched = true;
            if let Err(e) = meta::chmod(path, m) {
                ret.result = Some(false);
                comments.push(e.to_string());
            }
        }
    }
    // Nothing was changed: what the path has now is what it had.
    let post = if touched {
        Perms::read(path, wanted.follow_symlinks).unwrap_or(cur)
    } else {
        cur
    };
    if let Some(u) = wanted.user {
        let same = if touched {
            post.user_is(u)
        } else {
            change_user.is_none()
        };
        if !same {
            if test {
                ret.changes.insert("user".into(), json!(u));
            } else {
                ret.result = Some(false);
                comments.push(format!("Failed to change user to {u}"));
            }
        } else if change_user.is_some() {
            ret.changes.insert("user".into(), json!(u));
        }
    }
    if let Some(g) = wanted.group {
        let same = if touched {
            post.group_is(g)
        } else {
            change_group.is_none()
        };
        if !same {
            if test {
                ret.changes.insert("group".into(), json!(g));
            } else {
                ret.result = Some(false);
                comments.push(format!("Failed to change group to {g}"));
            }
        } else if change_group.is_some() {
            ret.changes.insert("group".into(), json!(g));
        }
    }
    if let Some(m) = wanted.mode {
        if !skip_mode {
            let post_mode = if touched {
                post.mode()
            } else {
                cur_mode.clone()
            };
            if m != post_mode {
                if test {
                    ret.changes.insert("mode".into(), json!(m));
                } else {
                    ret.result = Some(false);
                    comments.push(format!("Failed to change mode to {m}"));
                }
            } else if change_mode.is_some() {
                ret.changes.insert("mode".into(), json!(m));
            }
        }
    }
    if !orig_comment.is_empty() {
        comments.insert(0, orig_comment);
    }
    ret.comment = comments.join("; ");
    Some(cur_mode)
}

/// What would change on an existing directory (Salt's `_check_dir_meta`);
/// `{"directory": "new"}` when it does not exist.
pub fn dir_meta_changes(path: &Path, wanted: Wanted<'_>) -> Map {
    let mut changes = Map::new();
    let Ok(cur) = meta::ownership(path, wanted.follow_symlinks) else {
        changes.insert("directory".into(), json!("new"));
        return changes;
    };
    if let Some(u) = wanted.user.filter(|u| !same_owner(u, &cur.user, cur.uid)) {
        changes.insert("user".into(), json!(u));
    }
    if let Some(g) = wanted.group.filter(|g| !same_owner(g, &cur.group, cur.gid)) {
        changes.insert("group".into(), json!(g));
    }
    if let Some(m) = wanted
        .mode
        .filter(|m| *m != cur.mode && (wanted.follow_symlinks || !cur.is_link))
    {
        changes.insert("mode".into(), json!(m));
    }
    changes
}

/// Salt's `makedirs_`: creates the missing parents of `path` (not `path`
/// itself), each with the given owner and mode.
pub fn make_parent_dirs(
    path: &Path,
    user: Option<&str>,
    group: Option<&str>,
    mode: Option<&str>,
) -> Result<(), String> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    let mut missing = Vec::new();
    let mut cur = Some(parent);
    while let Some(dir) = cur {
        if dir.as_os_str().is_empty() || dir.is_dir() {
            break;
        }
        missing.push(dir.to_path_buf());
        cur = dir.parent();
    }
    for dir in missing.iter().rev() {
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            // Made meanwhile by another run on this host (two minions'
            // states, a parallel state): there now, as the parents found
            // above, and left as it is (as Salt's makedirs does).
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => continue,
            Err(e) => return Err(format!("Unable to create directory {}: {e}", dir.display())),
        }
        if user.is_some() || group.is_some() {
            meta::chown(dir, user, group, true).map_err(|e| e.to_string())?;
        }
        if let Some(m) = mode {
            meta::chmod(dir, m).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Salt's directory mode derived from a file mode for `makedirs`: every
/// non-zero digit gets its execute bit (`0644` -> `755`).
pub fn dir_mode_from_file_mode(mode: &str) -> String {
    let digits: Vec<char> = mode.chars().collect();
    let tail = &digits[digits.len().saturating_sub(3)..];
    tail.iter()
        .map(|c| match c.to_digit(8) {
            Some(0) | None => *c,
            Some(d) => char::from_digit(d | 1, 8).unwrap_or(*c),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runs on one host (two minions, `parallel: True` states) making
    /// the same missing parents at once: neither fails because the other
    /// made a directory first.
    #[test]
    fn parents_made_at_once_by_several_runs_all_succeed() {
        for _ in 0..40 {
            let root = tempfile::tempdir().expect("temp dir");
            let file = root.path().join("a/b/c/d/file");
            let barrier = std::sync::Barrier::new(8);
            let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..8)
                    .map(|_| {
                        scope.spawn(|| {
                            barrier.wait();
                            make_parent_dirs(&file, None, None, None)
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().expect("no panic"))
                    .collect()
            });
            for r in results {
                assert_eq!(r, Ok(()));
            }
            assert!(root.path().join("a/b/c/d").is_dir());
        }
    }
}
