//! `halite_proto::fnmatch(pattern, name)`: kept only so existing callers
//! (event tag patterns in [`crate::tags`], `halite-key` globs) compile. The
//! glob semantics live in one place, `halite_state::fnmatch` (Python's
//! `fnmatch.fnmatchcase`); new code should call that directly. Note the
//! argument order here is pattern first, the reverse of Python's.

/// Whether `name` matches the Salt glob `pattern` (`*`, `?`, `[seq]`,
/// `[!seq]`; case sensitive; `*` crosses `/`).
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    halite_state::fnmatch::fnmatch(name, pattern)
}

#[cfg(test)]
mod tests {
    use super::fnmatch;

    #[test]
    fn pattern_comes_first() {
        assert!(fnmatch("web*", "web01.example.com"));
        assert!(!fnmatch("web01.example.com", "web*"));
        assert!(fnmatch("salt/job/*/ret/*", "salt/job/1/ret/web"));
    }
}
