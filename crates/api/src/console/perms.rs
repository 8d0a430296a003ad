//! What the console offers a user: its buttons and pages, read from the
//! user's auth list with the same checks the API applies when the call is
//! made ([`crate::acl::auth_check`], [`crate::acl::spec_check`]). The
//! answer only decides what the pages show; the API refuses on its own.

use serde::Serialize;
use serde_json::Value;

use crate::acl::{self, Call};

/// The console's abilities of one user: which pages, forms and buttons
/// the console may draw. What the console reads without arguments (the
/// key list, grains, the jobs) must be granted without arguments; what
/// the user acts on (a key button, the run and graph forms) counts when
/// some ACL entry grants it for some target and some arguments
/// ([`acl::ignoring_arguments`]), and the page then asks the server
/// about the exact call (`POST /console/api/allowed`, the check the API
/// applies when the call is sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Abilities {
    /// `wheel key.list_all`: key states, pending/rejected/denied minions.
    pub keys: bool,
    /// `wheel key.accept`.
    pub key_accept: bool,
    /// `wheel key.reject`.
    pub key_reject: bool,
    /// `wheel key.delete`.
    pub key_delete: bool,
    /// `runner jobs.list_jobs` and `jobs.list_job`: the jobs pages.
    pub jobs: bool,
    /// `local grains.items`: grains on the minions page.
    pub grains: bool,
    /// `local state.apply`: the live page's run form.
    pub state: bool,
    /// `local state.graph`: the requisite graph page.
    pub graph: bool,
}

fn local(list: &[Value], fun: &str) -> bool {
    let call = Call {
        fun,
        args: &[],
        kwargs: None,
    };
    acl::auth_check(list, &call, |_| true)
}

fn spec(list: &[Value], form: &str, fun: &str) -> bool {
    let call = Call {
        fun,
        args: &[],
        kwargs: None,
    };
    acl::spec_check(list, form, &call)
}

impl Abilities {
    /// The abilities `list` (a user's auth list) grants.
    pub fn of(list: &[Value]) -> Self {
        let some_args = acl::ignoring_arguments(list);
        Self {
            keys: spec(list, "wheel", "key.list_all"),
            key_accept: spec(&some_args, "wheel", "key.accept"),
            key_reject: spec(&some_args, "wheel", "key.reject"),
            key_delete: spec(&some_args, "wheel", "key.delete"),
            jobs: spec(list, "runner", "jobs.list_jobs") && spec(list, "runner", "jobs.list_job"),
            grains: local(list, "grains.items"),
            state: local(&some_args, "state.apply"),
            graph: local(&some_args, "state.graph"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(list: Value) -> Abilities {
        Abilities::of(list.as_array().map(Vec::as_slice).unwrap_or_default())
    }

    #[test]
    fn a_test_only_user_gets_no_buttons() {
        let a = of(json!(["test.*"]));
        assert_eq!(
            a,
            Abilities {
                keys: false,
                key_accept: false,
                key_reject: false,
                key_delete: false,
                jobs: false,
                grains: false,
                state: false,
                graph: false,
            }
        );
    }

    #[test]
    fn wheel_and_runner_need_their_own_entries() {
        // '.*' grants execution functions only (CVE-2021-25281).
        let a = of(json!([".*"]));
        assert!(a.state && a.grains && a.graph);
        assert!(!a.keys && !a.key_accept && !a.jobs);
        let a = of(json!([".*", "@wheel", "@runner"]));
        assert!(a.keys && a.key_accept && a.key_reject && a.key_delete && a.jobs);
        let a = of(json!(["@jobs", {"@wheel": ["key.list_all", "key.accept"]}]));
        assert!(a.jobs && a.keys && a.key_accept);
        assert!(!a.key_reject && !a.key_delete && !a.state);
    }

    #[test]
    fn an_args_restricted_entry_offers_the_form_and_the_buttons() {
        let a = of(json!([
            {"web*": [{"state.apply": {"args": ["app"]}}]},
            {"@wheel": ["key.list_all", {"key.reject": {"args": ["newbie"]}}]}
        ]));
        assert!(a.state && a.keys && a.key_reject);
        assert!(!a.graph && !a.key_accept && !a.key_delete && !a.grains);
    }

    #[test]
    fn a_targeted_entry_counts() {
        let a = of(json!([{"web*": ["state.*"]}]));
        assert!(a.state && a.graph && !a.grains);
    }
}
