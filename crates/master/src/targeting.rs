//! The master's side of targeting (Salt's `CkMinions.check_minions`): which
//! accepted minions a job's target selects, from the master's cache of
//! their grains and its `nodegroups`. What a target means for one minion is
//! `halite_state::target`, shared with top files; this module only adds
//! what is the master's: iterating the accepted minions, treating a minion
//! that never reported grains (or was never compiled for, so has no cached
//! pillar) as matching no grain (pillar) term, as Salt 3008 drops minions
//! without cached data.

use std::collections::BTreeMap;

use halite_state::target::Target;
use serde_json::Value;

pub use halite_state::target::TargetError;

/// What the master knows about one accepted minion for targeting.
#[derive(Debug, Clone, Copy)]
pub struct MinionFacts<'a> {
    /// The minion's id.
    pub id: &'a str,
    /// `None` when the minion has never reported its grains.
    pub grains: Option<&'a Value>,
    /// `None` when the master has never compiled a pillar for it.
    pub pillar: Option<&'a Value>,
}

/// The ids among `minions` that `tgt` of `tgt_type` selects, sorted.
pub fn check_minions(
    tgt: &str,
    tgt_type: &str,
    minions: &[MinionFacts],
    nodegroups: &BTreeMap<String, Value>,
) -> Result<Vec<String>, TargetError> {
    let target = Target::compile(tgt, tgt_type, nodegroups)?;
    let unknown = Value::Null;
    let mut out: Vec<String> = minions
        .iter()
        .filter(|m| {
            target.matches(&halite_state::target::MinionFacts {
                id: m.id,
                grains: m.grains.unwrap_or(&unknown),
                pillar: m.pillar.unwrap_or(&unknown),
            })
        })
        .map(|m| m.id.to_string())
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The pillar the master compiled for each minion (none for db1 and
    /// new1: never compiled for).
    fn pillar_of(id: &str) -> Option<Value> {
        match id {
            "web1" => Some(json!({"role": "web", "app": {"tier": "Front-End"}})),
            "web2" => Some(json!({"role": "web-canary", "app": {"tier": "front"}})),
            _ => None,
        }
    }

    fn fleet() -> Vec<(String, Option<Value>)> {
        vec![
            (
                "web1".into(),
                Some(
                    json!({"os": "Ubuntu", "roles": ["web", "cache"], "env": {"tier": "prod"}, "ipv4": ["10.0.1.5", "127.0.0.1"]}),
                ),
            ),
            (
                "web2".into(),
                Some(
                    json!({"os": "Debian", "roles": ["web"], "env": {"tier": "dev"}, "ipv4": ["10.0.2.5"], "ipv6": ["2001:db8::2"]}),
                ),
            ),
            (
                "db1".into(),
                Some(
                    json!({"os": "Ubuntu", "roles": ["db"], "env": {"tier": "prod"}, "url": "http://x", "ipv4": ["192.168.7.7"]}),
                ),
            ),
            // Accepted, but has never reported grains.
            ("new1".into(), None),
        ]
    }

    fn run(tgt: &str, tgt_type: &str) -> Result<Vec<String>, TargetError> {
        let data: Vec<(String, Option<Value>, Option<Value>)> = fleet()
            .into_iter()
            .map(|(id, g)| {
                let p = pillar_of(&id);
                (id, g, p)
            })
            .collect();
        let facts: Vec<MinionFacts> = data
            .iter()
            .map(|(id, g, p)| MinionFacts {
                id,
                grains: g.as_ref(),
                pillar: p.as_ref(),
            })
            .collect();
        let mut groups = BTreeMap::new();
        groups.insert("webs".to_string(), json!("web*"));
        groups.insert(
            "prod_webs".to_string(),
            json!(["N@webs", "and", "G@env:tier:prod"]),
        );
        groups.insert("loop".to_string(), json!("N@loop"));
        groups.insert("pair".to_string(), json!(["db1", "web2"]));
        check_minions(tgt, tgt_type, &facts, &groups)
    }

    #[test]
    fn each_form_selects_its_set() {
        assert_eq!(run("web*", "glob").unwrap(), ["web1", "web2"]);
        assert_eq!(run("web[!1]", "glob").unwrap(), ["web2"]);
        assert_eq!(run("w.b", "pcre").unwrap(), ["web1", "web2"]);
        assert_eq!(run("db1,web2,nosuch", "list").unwrap(), ["db1", "web2"]);
        assert_eq!(run("os:ubuntu", "grain").unwrap(), ["db1", "web1"]);
        assert_eq!(run("roles:cache", "grain").unwrap(), ["web1"]);
        assert_eq!(run("env:tier:prod", "grain").unwrap(), ["db1", "web1"]);
        assert_eq!(run("url:http://x", "grain").unwrap(), ["db1"]);
        assert_eq!(
            run("os:(Deb|Ubu)", "grain_pcre").unwrap(),
            ["db1", "web1", "web2"]
        );
        assert_eq!(
            run("G@os:Ubuntu and not db*", "compound").unwrap(),
            ["web1"]
        );
        assert_eq!(
            run("( E@db.* or L@web2 ) and G@env:tier:*", "compound").unwrap(),
            ["db1", "web2"]
        );
        assert_eq!(
            run("not (web1 or web2)", "compound").unwrap(),
            ["db1", "new1"]
        );
        assert_eq!(
            run("web* or G@os:Ubuntu and G@roles:db", "compound").unwrap(),
            ["db1", "web1", "web2"]
        );
        assert_eq!(run("webs", "nodegroup").unwrap(), ["web1", "web2"]);
        assert_eq!(run("prod_webs", "nodegroup").unwrap(), ["web1"]);
        assert_eq!(
            run("N@prod_webs or db1", "compound").unwrap(),
            ["db1", "web1"]
        );
        // A nodegroup of bare ids is a list (Salt's `_nodegroup_regex`).
        assert_eq!(run("pair", "nodegroup").unwrap(), ["db1", "web2"]);
    }

    #[test]
    fn pillar_targets_read_the_cached_pillar() {
        assert_eq!(run("role:web*", "pillar").unwrap(), ["web1", "web2"]);
        assert_eq!(run("role:web", "pillar").unwrap(), ["web1"]);
        assert_eq!(run("app:tier:front*", "pillar").unwrap(), ["web1", "web2"]);
        assert_eq!(run("role:web-.*", "pillar_pcre").unwrap(), ["web2"]);
        assert_eq!(run("app:tier:FRONT", "pillar_exact").unwrap(), ["web2"]);
        assert!(run("app:tier:front*", "pillar_exact").unwrap().is_empty());
        assert_eq!(
            run("I@role:web* and G@os:Ubuntu", "compound").unwrap(),
            ["web1"]
        );
        assert_eq!(
            run("J@role:.*canary or db1", "compound").unwrap(),
            ["db1", "web2"]
        );
        // Never compiled for: no pillar term matches, `not` does.
        assert_eq!(run("*:*", "pillar").unwrap(), ["web1", "web2"]);
        assert_eq!(run("not I@role:*", "compound").unwrap(), ["db1", "new1"]);
    }

    #[test]
    fn ipcidr_selects_by_the_ip_grains() {
        assert_eq!(run("10.0.0.0/8", "ipcidr").unwrap(), ["web1", "web2"]);
        assert_eq!(run("10.0.2.5", "ipcidr").unwrap(), ["web2"]);
        assert_eq!(run("0.0.0.0/0", "ipcidr").unwrap(), ["db1", "web1", "web2"]);
        assert_eq!(run("2001:db8::/32", "ipcidr").unwrap(), ["web2"]);
        assert_eq!(
            run("S@10.0.0.0/8 and G@os:Ubuntu", "compound").unwrap(),
            ["web1"]
        );
        assert_eq!(
            run("not S@10.0.0.0/8", "compound").unwrap(),
            ["db1", "new1"]
        );
        assert!(matches!(
            run("10.0.0.5/8", "ipcidr"),
            Err(TargetError::BadIpcidr { .. })
        ));
    }

    #[test]
    fn minions_without_grains_match_no_grain_term() {
        assert_eq!(run("*:*", "grain").unwrap(), ["db1", "web1", "web2"]);
        assert_eq!(run("new*", "glob").unwrap(), ["new1"]);
        assert_eq!(
            run("not G@os:Ubuntu", "compound").unwrap(),
            ["new1", "web2"]
        );
    }

    #[test]
    fn bad_expressions_are_errors() {
        assert!(matches!(
            run("(", "pcre"),
            Err(TargetError::BadRegex { .. })
        ));
        assert!(matches!(
            run("web1 and", "compound"),
            Err(TargetError::BadCompound { .. })
        ));
        assert!(matches!(
            run("( web1", "compound"),
            Err(TargetError::BadCompound { .. })
        ));
        assert!(matches!(
            run("web1 web2", "compound"),
            Err(TargetError::BadCompound { .. })
        ));
        assert!(matches!(
            run("nope", "nodegroup"),
            Err(TargetError::UnknownNodegroup(_))
        ));
        assert!(matches!(
            run("loop", "nodegroup"),
            Err(TargetError::BadCompound { .. })
        ));
        assert!(matches!(
            run("S@10.0.0.1/8", "compound"),
            Err(TargetError::BadIpcidr { .. })
        ));
        assert!(matches!(
            run("%cluster", "range"),
            Err(TargetError::RangeUnsupported)
        ));
        assert!(matches!(
            run("R@%cluster or web1", "compound"),
            Err(TargetError::RangeUnsupported)
        ));
        assert!(matches!(
            run("x", "nosuch"),
            Err(TargetError::UnknownType(_))
        ));
    }
}
