//! Where an archive member may be written: the lexical checks that keep
//! `archive.extracted` and SPM's package installer inside their target
//! directory (no absolute names, no `..` escapes, no links leading out).
//! Both read member names written by someone else, so both use these.

/// Resolves `path` lexically below `base` (the components of a directory
/// inside the root): `.` and empty components are dropped, `..` climbs one
/// level. `None` when `path` is absolute or climbs above the root.
pub fn resolve_below(base: &[String], path: &str) -> Option<Vec<String>> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<String> = base.to_vec();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s.to_string()),
        }
    }
    Some(parts)
}

/// Why a member name is refused by [`strict_components`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsafe {
    /// The name starts with `/` (or `\`).
    Absolute,
    /// A component is `..`.
    ParentDir,
    /// A component holds a NUL byte.
    Nul,
}

/// The components of a member name that may not climb at all (SPM's
/// packages): `.` and empty components are dropped; an absolute name, a
/// `..` or a NUL byte is refused.
pub fn strict_components(full: &str) -> Result<Vec<String>, Unsafe> {
    if full.starts_with('/') || full.starts_with('\\') {
        return Err(Unsafe::Absolute);
    }
    let mut parts = Vec::new();
    for part in full.split('/') {
        match part {
            "" | "." => continue,
            ".." => return Err(Unsafe::ParentDir),
            other if other.contains('\0') => return Err(Unsafe::Nul),
            other => parts.push(other.to_string()),
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_below_refuses_escapes() {
        assert_eq!(
            resolve_below(&[], "a/./b/../c"),
            Some(vec!["a".into(), "c".into()])
        );
        assert_eq!(resolve_below(&[], "a/../../x"), None);
        assert_eq!(resolve_below(&[], "/etc/passwd"), None);
        assert_eq!(resolve_below(&["a".into()], "../b"), Some(vec!["b".into()]));
        assert_eq!(resolve_below(&["a".into()], "../../b"), None);
        // Climbing out and back in is still out.
        assert_eq!(resolve_below(&[], "../a"), None);
    }

    #[test]
    fn strict_components_refuse_dotdot_and_absolute() {
        assert_eq!(strict_components("/etc/passwd"), Err(Unsafe::Absolute));
        assert_eq!(strict_components("\\x"), Err(Unsafe::Absolute));
        assert_eq!(strict_components("apache/../../x"), Err(Unsafe::ParentDir));
        assert_eq!(strict_components("a/b\0c"), Err(Unsafe::Nul));
        assert_eq!(
            strict_components("./apache//init.sls"),
            Ok(vec!["apache".to_string(), "init.sls".to_string()])
        );
    }
}
