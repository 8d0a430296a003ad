//! Event tags, spelled as Salt spells them (see shared/reference/salt-events.txt),
//! and their grammar: the one place that says what a tag means and which
//! tags a minion may fire onto the master's bus.

use crate::id::validate_minion_id;
use crate::jid::is_jid;

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

/// The longest tag a minion may fire (Salt's own tags are far shorter; a
/// longer one is garbage or an attempt to fill the bus).
pub const MAX_MINION_TAG_BYTES: usize = 1024;

/// A tag read segment by segment. Only the shapes halite gives a meaning
/// to are named; every other `salt/...` tag is [`Tag::OtherSalt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag<'a> {
    /// `salt/job/<jid>/new`
    JobNew {
        /// The job's id.
        jid: &'a str,
    },
    /// `salt/job/<jid>/ret/<minion>`
    JobRet {
        /// The job's id.
        jid: &'a str,
        /// The minion that returned.
        minion: &'a str,
    },
    /// `salt/job/<jid>/prog/<minion>/<run_num>`
    JobProg {
        /// The job's id.
        jid: &'a str,
        /// The minion running it.
        minion: &'a str,
        /// The state's `__run_num__`.
        run_num: u64,
    },
    /// `salt/state_result/<jid>/<minion>/<name or custom tag>` (`fire_event`).
    StateResult {
        /// The job's id.
        jid: &'a str,
        /// The minion running it.
        minion: &'a str,
        /// The state's name or the custom tag, as fired.
        rest: &'a str,
    },
    /// `salt/beacon/<minion>/<beacon>/...`: a minion's beacon (Salt's tag).
    Beacon {
        /// The minion whose beacon fired.
        minion: &'a str,
    },
    /// `salt/minion/<minion>/start`
    MinionStart {
        /// The minion that started.
        minion: &'a str,
    },
    /// `salt/auth`
    Auth,
    /// `salt/key`
    Key,
    /// Any other tag in Salt's reserved `salt/` namespace.
    OtherSalt,
    /// A tag outside `salt/` (a user's `event.send`).
    User,
}

/// A minion id segment: valid as an id (no `/`, so it is one segment).
fn minion_segment(s: &str) -> Option<&str> {
    validate_minion_id(s).ok().map(|()| s)
}

/// A jid segment: 20 digits.
fn jid_segment(s: &str) -> Option<&str> {
    is_jid(s).then_some(s)
}

/// A run number: decimal digits only (no sign, no spaces).
fn run_segment(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The most segments a named shape has (`salt/job/<jid>/prog/<minion>/<n>`).
const MAX_NAMED_SEGMENTS: usize = 6;

/// Reads `tag` segment by segment; a `salt/` tag whose segments do not
/// fit one of the named shapes exactly is [`Tag::OtherSalt`]. Nothing is
/// allocated (issue 25: a fleet highstate parses a million progress tags).
pub fn parse(tag: &str) -> Tag<'_> {
    if tag != "salt" && !tag.starts_with("salt/") {
        return Tag::User;
    }
    // The first segments, and how many there are in all.
    let mut first = [""; MAX_NAMED_SEGMENTS];
    let mut count = 0;
    for seg in tag.split('/') {
        if let Some(slot) = first.get_mut(count) {
            *slot = seg;
        }
        count += 1;
    }
    // Shapes shorter than MAX_NAMED_SEGMENTS match only a tag of exactly
    // their length; the longest needs `exact`.
    let exact = count <= MAX_NAMED_SEGMENTS;
    let segs = &first[..count.min(MAX_NAMED_SEGMENTS)];
    let parsed = match segs {
        ["salt", "auth"] => Some(Tag::Auth),
        ["salt", "key"] => Some(Tag::Key),
        ["salt", "job", jid, "new"] => jid_segment(jid).map(|jid| Tag::JobNew { jid }),
        ["salt", "job", jid, "ret", minion] => jid_segment(jid)
            .zip(minion_segment(minion))
            .map(|(jid, minion)| Tag::JobRet { jid, minion }),
        ["salt", "job", jid, "prog", minion, run] if exact => {
            match (jid_segment(jid), minion_segment(minion), run_segment(run)) {
                (Some(jid), Some(minion), Some(run_num)) => Some(Tag::JobProg {
                    jid,
                    minion,
                    run_num,
                }),
                _ => None,
            }
        }
        ["salt", "beacon", minion, _, ..] => {
            minion_segment(minion).map(|minion| Tag::Beacon { minion })
        }
        ["salt", "minion", minion, "start"] => {
            minion_segment(minion).map(|minion| Tag::MinionStart { minion })
        }
        ["salt", "state_result", jid, minion, ..] if count >= 5 => {
            // The rest (a state's name or a custom tag) may hold slashes.
            let prefix = "salt/state_result/".len() + jid.len() + 1 + minion.len() + 1;
            jid_segment(jid)
                .zip(minion_segment(minion))
                .and_then(|(jid, minion)| {
                    tag.get(prefix..)
                        .map(|rest| Tag::StateResult { jid, minion, rest })
                })
        }
        _ => None,
    };
    parsed.unwrap_or(Tag::OtherSalt)
}

/// Whether `tag` is `salt/job/<jid>/prog/<own_id>/<n>`: the progress
/// event a running minion fires for each state, read without validating
/// `own_id` again (the session's id is valid). What [`parse`] says of the
/// same tag, faster: the master checks a thousand per minion per
/// highstate (issue 25).
fn is_own_progress(tag: &str, own_id: &str) -> bool {
    let Some(rest) = tag.strip_prefix("salt/job/") else {
        return false;
    };
    // A jid is 20 digits, so its segment ends at the 21st byte.
    let (Some(jid), Some(rest)) = (rest.get(..JID_BYTES), rest.get(JID_BYTES..)) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix("/prog/") else {
        return false;
    };
    let Some(run) = rest.strip_prefix(own_id).and_then(|r| r.strip_prefix('/')) else {
        return false;
    };
    jid_segment(jid).is_some() && run_segment(run).is_some()
}

/// The length of a jid.
const JID_BYTES: usize = 20;

/// Whether `tag` holds a control character (Unicode's `Cc`: C0, DEL, C1),
/// read byte by byte: C1 controls are the only ones outside ASCII, and
/// UTF-8 spells them `0xC2 0x80..=0x9F`.
fn has_control(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        b < 0x20
            || b == 0x7f
            || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)))
    })
}

/// Why the master refused an event a minion fired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagRefused {
    /// The tag is empty.
    #[error("event tag is empty")]
    Empty,
    /// The tag is longer than a minion may fire.
    #[error("event tag is longer than {max} bytes")]
    TooLong {
        /// The limit in bytes.
        max: usize,
    },
    /// The tag holds a control character.
    #[error("event tag contains a control character")]
    Control,
    /// The tag is under `salt/` and not the minion's own progress (named here).
    #[error("event tag {0:?} is in Salt's reserved salt/ namespace and is not one a minion may fire for itself (salt/job/<jid>/prog/<own id>/<n>, salt/state_result/<jid>/<own id>/..., salt/beacon/<own id>/...); use a tag outside salt/, e.g. myco/...")]
    Reserved(String),
}

/// The allow-list of what minion `own_id` may fire onto the master's bus:
/// its own job progress, state results and beacons, and any tag outside
/// `salt/`. (Salt 3008 filters only a blacklist, and only for batched
/// events; halite refuses every other `salt/` tag because the reactor acts
/// on `salt/auth`, `salt/key` and returns: a forged one would accept keys.)
/// Everything else under `salt/` (returns, auth, key, another minion's
/// progress) is the master's to fire, never a minion's.
pub fn check_minion_tag(tag: &str, own_id: &str) -> Result<(), TagRefused> {
    if tag.is_empty() {
        return Err(TagRefused::Empty);
    }
    if tag.len() > MAX_MINION_TAG_BYTES {
        return Err(TagRefused::TooLong {
            max: MAX_MINION_TAG_BYTES,
        });
    }
    // Before the scan for control characters: a progress tag of the
    // session's own (valid, so control-free) id holds none (issue 25: two
    // million in a fleet highstate; the scan was most of this check).
    if is_own_progress(tag, own_id) {
        return Ok(());
    }
    if has_control(tag) {
        return Err(TagRefused::Control);
    }
    match parse(tag) {
        Tag::User => Ok(()),
        Tag::JobProg { minion, .. } | Tag::StateResult { minion, .. } | Tag::Beacon { minion }
            if minion == own_id =>
        {
            Ok(())
        }
        _ => Err(TagRefused::Reserved(tag.to_string())),
    }
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

    const JID: &str = "20260101000000000001";

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

    #[test]
    fn tags_parse_segment_by_segment() {
        assert_eq!(
            parse(&job_ret(JID, "web")),
            Tag::JobRet {
                jid: JID,
                minion: "web"
            }
        );
        assert_eq!(
            parse(&job_prog(JID, "web", 7)),
            Tag::JobProg {
                jid: JID,
                minion: "web",
                run_num: 7
            }
        );
        assert_eq!(
            parse(&format!("salt/state_result/{JID}/web/my/tag")),
            Tag::StateResult {
                jid: JID,
                minion: "web",
                rest: "my/tag"
            }
        );
        // The forged return of the issue: neither a return nor a progress event.
        assert_eq!(
            parse(&format!("salt/job/{JID}/ret/victim/prog/me/0")),
            Tag::OtherSalt
        );
        assert_eq!(parse(&format!("salt/job/{JID}/prog/me/+1")), Tag::OtherSalt);
        assert_eq!(parse(&format!("salt/job/{JID}/prog/../1")), Tag::OtherSalt);
        assert_eq!(parse("salt/job/1/ret/web"), Tag::OtherSalt);
        assert_eq!(parse("myapp/salt/job"), Tag::User);
        // Longer than every named shape but the open-ended ones.
        assert_eq!(
            parse(&format!("salt/job/{JID}/prog/me/0/x/y")),
            Tag::OtherSalt
        );
        assert_eq!(parse(&format!("salt/job/{JID}/new/x")), Tag::OtherSalt);
        assert_eq!(
            parse("salt/beacon/me/load/a/b/c/d"),
            Tag::Beacon { minion: "me" }
        );
        assert_eq!(parse("saltish/x"), Tag::User);
    }

    #[test]
    fn control_characters_are_found_as_char_is_control_finds_them() {
        for c in ('\0'..='\u{2fff}').chain(['\u{feff}', '\u{10ffff}']) {
            let tag = format!("a{c}b");
            assert_eq!(has_control(&tag), c.is_control(), "{c:?}");
        }
    }

    #[test]
    fn a_minion_fires_only_its_own_tags() {
        let ok = [
            job_prog(JID, "me", 0),
            format!("salt/state_result/{JID}/me/pkg"),
            "salt/beacon/me/inotify//etc/motd".to_string(),
            "myapp/deploy/done".to_string(),
        ];
        for tag in &ok {
            assert_eq!(check_minion_tag(tag, "me"), Ok(()), "{tag}");
        }
        let refused = [
            format!("salt/job/{JID}/ret/victim/prog/me/0"),
            format!("salt/job/{JID}/ret/me"),
            job_prog(JID, "victim", 0),
            format!("salt/job/{JID}/prog/me/0/extra"),
            format!("salt/state_result/{JID}/victim/x"),
            "salt/beacon/victim/load/".to_string(),
            "salt/beacon/me".to_string(),
            "salt/auth".to_string(),
            "salt/key".to_string(),
            minion_start("me"),
            "salt".to_string(),
            String::new(),
            "a\nb".to_string(),
            "x".repeat(MAX_MINION_TAG_BYTES + 1),
            // The progress fast path keeps the full check's limits.
            format!("salt/job/{JID}/prog/me/"),
            format!("salt/job/{JID}/prog/me/1a"),
            format!("salt/job/{JID}/prog/me/99999999999999999999999"),
            format!("salt/job/{JID}/prog/me/0/"),
            format!("salt/job/{JID}/prog/mex/0"),
            "salt/job/2026010100000000000/prog/me/0".to_string(),
            format!("salt/job/{JID}/prog/me/0\u{85}"),
            "myapp/\u{9f}".to_string(),
            "myapp/\u{7f}".to_string(),
        ];
        for tag in &refused {
            assert!(
                check_minion_tag(tag, "me").is_err(),
                "{tag:?} must be refused"
            );
        }
    }
    /// The former check, control characters first: what a minion may fire
    /// must not change with the order of the checks.
    fn former_check(tag: &str, own_id: &str) -> bool {
        if tag.is_empty() || tag.len() > MAX_MINION_TAG_BYTES || has_control(tag) {
            return false;
        }
        match parse(tag) {
            Tag::User => true,
            Tag::JobProg { minion, .. }
            | Tag::StateResult { minion, .. }
            | Tag::Beacon { minion } => minion == own_id,
            _ => false,
        }
    }

    #[test]
    fn the_progress_fast_path_accepts_and_refuses_what_the_full_check_does() {
        let long_id = "w".repeat(crate::id::MAX_MINION_ID_BYTES);
        let ids = ["me", "wéb-1.example.com", "a.b", long_id.as_str()];
        for id in ids {
            validate_minion_id(id).expect("a valid id");
            let tags = [
                job_prog(JID, id, 0),
                job_prog(JID, id, u64::MAX),
                format!("salt/job/{JID}/prog/{id}/18446744073709551616"),
                format!("salt/job/{JID}/prog/{id}/"),
                format!("salt/job/{JID}/prog/{id}/0\u{85}"),
                format!("salt/job/{JID}/prog/{id}/0\n"),
                format!("salt/job/{JID}/prog/{id}/\u{0}1"),
                format!("salt/job/{JID}/prog/{id}x/1"),
                format!("salt/job/{JID}/prog/{id}/1/2"),
                format!("salt/job/{JID}1/prog/{id}/1"),
                format!("salt/job/{}/prog/{id}/1", &JID[1..]),
                format!("salt/job/{}a/prog/{id}/1", &JID[1..]),
                format!("salt/job/{JID}/prog//{id}/1"),
                format!("salt/job/{JID}//prog/{id}/1"),
                format!("salt/job/{JID}/ret/{id}"),
                format!("salt/job/{JID}/prog/{id}/+1"),
                format!("salt/job/{JID}/prog/{id}/ 1"),
                format!("salt/job/{JID}/prog/{id}/１"),
                format!("salt/job/ü{}/prog/{id}/1", &JID[2..]),
                format!("salt/job/{JID}ü/prog/{id}/1"),
                format!("salt/job/{}ü/prog/{id}/1", &JID[1..]),
                format!("salt/state_result/{JID}/{id}/x\ty"),
                format!("salt/beacon/{id}/load/"),
                format!(
                    "salt/job/{JID}/prog/{id}/{}",
                    "1".repeat(MAX_MINION_TAG_BYTES)
                ),
                "salt/job/".to_string(),
                "salt/job/x".to_string(),
                format!("myapp/{id}/\u{9f}"),
            ];
            for tag in &tags {
                for own in ids {
                    assert_eq!(
                        check_minion_tag(tag, own).is_ok(),
                        former_check(tag, own),
                        "{tag:?} from {own:?}"
                    );
                }
            }
        }
    }
}
