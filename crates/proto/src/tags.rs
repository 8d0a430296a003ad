//! Event tags, spelled as Salt spells them (see shared/reference/salt-events.txt).

/// `salt/job/<jid>/new`: a job was published.
pub fn job_new(jid: &str) -> String {
    format!("salt/job/{jid}/new")
}

/// `salt/job/<jid>/ret/<minion>`: a minion's return was stored.
pub fn job_ret(jid: &str, minion: &str) -> String {
    format!("salt/job/{jid}/ret/{minion}")
}

/// `salt/job/<jid>/prog/<minion>/<run_num>`: one state finished.
pub fn job_prog(jid: &str, minion: &str, run_num: u64) -> String {
    format!("salt/job/{jid}/prog/{minion}/{run_num}")
}

/// `salt/auth`: a minion authenticated (or tried to).
pub const AUTH: &str = "salt/auth";

/// `salt/key`: a key changed state.
pub const KEY: &str = "salt/key";

/// `salt/minion/<id>/start`: a minion connected.
pub fn minion_start(minion: &str) -> String {
    format!("salt/minion/{minion}/start")
}

/// Whether `tag` matches `pattern` the way `state.event`'s tagmatch does:
/// a glob (`*`, `?`, `[...]`) when it has one, else a prefix.
pub fn tag_matches(pattern: &str, tag: &str) -> bool {
    if pattern.is_empty() || pattern == "*" {
        return true;
    }
    if pattern.contains(['*', '?', '[']) {
        halite_salt_rules::fnmatch(tag, pattern)
    } else {
        tag.starts_with(pattern)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_salts() {
        assert_eq!(job_new("1"), "salt/job/1/new");
        assert_eq!(job_ret("1", "web"), "salt/job/1/ret/web");
        assert_eq!(job_prog("1", "web", 3), "salt/job/1/prog/web/3");
        assert_eq!(minion_start("web"), "salt/minion/web/start");
        assert!(tag_matches("salt/job/*/ret/*", "salt/job/1/ret/web"));
        assert!(tag_matches("salt/auth", "salt/auth"));
        assert!(!tag_matches("salt/key", "salt/auth"));
    }
}
