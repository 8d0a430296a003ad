//! `publisher_acl` on the master's local socket: who is at the other end
//! of a CLI connection, and what they may ask.
//!
//! Root (or whoever holds the root key in `cachedir/.root_key`, or runs
//! as the master's own user) may ask anything, as before. A local user
//! named in `publisher_acl` may publish exactly the functions granted
//! there (Salt's ACL grammar, from `halite-acl`), never one in
//! `publisher_acl_blacklist`, and may ask nothing else (no bus stream, no
//! key change, no event).
//!
//! Salt authenticates such a user with a key file `cachedir/.<user>_key`
//! the master writes for every user named in `publisher_acl`. halite
//! asks the kernel instead: the socket's peer credentials (`SO_PEERCRED`)
//! give the connecting process's uid, which no client can forge, so there
//! is no secret file to leak and `cachedir` stays closed to other users.
//! The socket is made connectable by every local user only when
//! `publisher_acl` is configured; every refusal is logged (who, what, why)
//! and fired as a `salt/auth/publisher_acl` event.

use std::collections::{BTreeSet, HashMap};

use halite_acl::{Call, PublisherBlacklist};
use serde_json::{Map, Value};

use crate::config::MasterConfig;
use crate::local::LocalBody;

/// The tag of the event fired when a local publisher is refused.
pub const REFUSAL_TAG: &str = "salt/auth/publisher_acl";

pub use halite_acl::USER_AUTHENTICATION_ERROR;

/// Who sent a request on the local socket.
#[derive(Debug, Clone)]
pub enum Principal {
    /// Root, the master's own user, or a holder of the root key: anything.
    Root,
    /// A local user `publisher_acl` names, with the entries it grants.
    Publisher {
        /// The user's name (from the peer's uid).
        user: String,
        /// Its uid.
        uid: u32,
        /// Its auth list.
        list: Vec<Value>,
    },
}

/// Why a local request was refused: logged, fired, and `message` sent back.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The user (or `uid N` when the uid has no name).
    pub user: String,
    /// What was asked.
    pub what: String,
    /// Why it was refused (for the log and the event).
    pub reason: String,
    /// What the client is told (Salt's message).
    pub message: String,
}

impl Refusal {
    /// The event data fired on the bus for this refusal.
    pub fn event(&self, uid: Option<u32>) -> Value {
        let source = uid.map_or_else(|| "local".to_string(), |u| format!("local uid {u}"));
        halite_acl::refusal_event(&self.user, "user", &self.what, &self.reason, &source)
    }
}

/// The master's `publisher_acl` and `publisher_acl_blacklist`.
#[derive(Debug, Clone, Default)]
pub struct LocalAcl {
    publisher_acl: Map<String, Value>,
    blacklist: PublisherBlacklist,
    master_uid: u32,
}

impl LocalAcl {
    /// Reads both keys from the master's config (Salt's names and shapes).
    pub fn from_config(cfg: &MasterConfig) -> Self {
        Self {
            publisher_acl: cfg
                .extra
                .get("publisher_acl")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            blacklist: PublisherBlacklist::from_config(cfg.extra.get("publisher_acl_blacklist")),
            master_uid: nix::unistd::geteuid().as_raw(),
        }
    }

    /// Whether any local user besides root may use the socket.
    pub fn enabled(&self) -> bool {
        !self.publisher_acl.is_empty()
    }

    /// Who sent a request: root when it carries the root key (`key`:
    /// `Some(true)`), or carries none (`None`) from uid 0 or the master's
    /// own uid; else the `publisher_acl` user of the peer's uid. A wrong
    /// key (`Some(false)`) is refused whoever sends it.
    pub fn identify(&self, key: Option<bool>, uid: Option<u32>) -> Result<Principal, Refusal> {
        match key {
            Some(true) => return Ok(Principal::Root),
            Some(false) => {
                return Err(refusal(
                    &uid.map_or_else(|| "unknown".to_string(), |u| format!("uid {u}")),
                    "connect",
                    "a wrong root key",
                    "bad root key",
                ))
            }
            None if uid.is_some_and(|u| u == 0 || u == self.master_uid) => {
                return Ok(Principal::Root)
            }
            None => {}
        }
        let Some(uid) = uid else {
            return Err(refusal(
                "unknown",
                "connect",
                "no root key and no peer credentials",
                "bad root key",
            ));
        };
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map_or_else(|| format!("uid {uid}"), |u| u.name);
        if !self.enabled() {
            return Err(refusal(
                &user,
                "connect",
                "no root key and publisher_acl is not configured",
                "bad root key",
            ));
        }
        let list = halite_acl::publisher_acl_list(&self.publisher_acl, &user);
        if list.is_empty() {
            return Err(refusal(
                &user,
                "connect",
                "the user is not in publisher_acl",
                USER_AUTHENTICATION_ERROR,
            ));
        }
        Ok(Principal::Publisher { user, uid, list })
    }

    /// What a publisher may ask before any target is resolved: `Publish`
    /// of a function nobody blacklisted, by a user nobody blacklisted, and
    /// `Resolve` (batch mode); nothing else.
    pub fn precheck(&self, user: &str, body: &LocalBody) -> Result<(), Refusal> {
        let fun = match body {
            LocalBody::Publish { fun, .. } => fun,
            LocalBody::Resolve { .. } => return Ok(()),
            other => {
                return Err(refusal(
                    user,
                    request_name(other),
                    "only root may ask this of the master",
                    halite_acl::AUTHORIZATION_ERROR,
                ))
            }
        };
        if self.blacklist.user_is_blacklisted(user) || self.blacklist.cmd_is_blacklisted(fun) {
            tracing::error!(
                "{user} does not have permissions to run {fun}. Please contact your local administrator if you believe this is in error."
            );
            return Err(refusal(
                user,
                fun,
                "publisher_acl_blacklist",
                halite_acl::AUTHORIZATION_ERROR,
            ));
        }
        Ok(())
    }

    /// Whether `list` grants the publication: `targeted` are the minions
    /// the job's target selects, `resolved` the minions of each compound
    /// target the list names ([`halite_acl::targets_named`]).
    pub fn authorize_publish(
        user: &str,
        list: &[Value],
        call: &Call<'_>,
        tgt: &str,
        targeted: &BTreeSet<String>,
        resolved: &HashMap<String, BTreeSet<String>>,
    ) -> Result<(), Refusal> {
        let allowed = halite_acl::publish_check(list, call, |valid| {
            resolved.get(valid).is_some_and(|v| targeted.is_subset(v))
        });
        if allowed {
            Ok(())
        } else {
            Err(refusal(
                user,
                &format!("{} on {tgt}", call.fun),
                "publisher_acl does not grant it",
                halite_acl::AUTHORIZATION_ERROR,
            ))
        }
    }
}

fn refusal(user: &str, what: &str, reason: &str, message: &str) -> Refusal {
    Refusal {
        user: user.to_string(),
        what: what.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
    }
}

/// A request's name for logs.
fn request_name(body: &LocalBody) -> &'static str {
    match body {
        LocalBody::Publish { .. } => "publish",
        LocalBody::Events { .. } => "event stream",
        LocalBody::KeysChanged { .. } => "key change",
        LocalBody::FireEvent { .. } => "fire event",
        LocalBody::Active => "jobs.active",
        LocalBody::Resolve { .. } => "resolve",
        LocalBody::Stats => "master.stats",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    fn acl(v: Value, blacklist: Value) -> LocalAcl {
        let mut cfg = MasterConfig::default();
        cfg.extra.insert("publisher_acl".into(), v);
        cfg.extra
            .insert("publisher_acl_blacklist".into(), blacklist);
        LocalAcl::from_config(&cfg)
    }

    #[test]
    fn root_and_the_root_key_pass_unlisted_uids_do_not() {
        let a = acl(json!({"nobody": ["test.*"]}), json!({}));
        assert!(matches!(
            a.identify(Some(true), Some(4242)),
            Ok(Principal::Root)
        ));
        assert!(matches!(a.identify(None, Some(0)), Ok(Principal::Root)));
        // A wrong key is refused even from root.
        assert_eq!(
            a.identify(Some(false), Some(0)).unwrap_err().message,
            "bad root key"
        );
        // uid 65534 is `nobody` on Debian.
        match a.identify(None, Some(65534)) {
            Ok(Principal::Publisher { user, list, .. }) => {
                assert_eq!(user, "nobody");
                assert_eq!(list, [json!("test.*")]);
            }
            other => panic!("{other:?}"),
        }
        let refused = a.identify(None, Some(4242)).unwrap_err();
        assert_eq!(refused.message, USER_AUTHENTICATION_ERROR);
        let closed = LocalAcl::default().identify(None, Some(65534)).unwrap_err();
        assert_eq!(closed.message, "bad root key");
    }

    #[test]
    fn publishers_publish_and_resolve_only_and_never_blacklisted() {
        let a = acl(
            json!({"fred": [".*"]}),
            json!({"users": ["mallory"], "modules": ["cmd.*"]}),
        );
        let publish = |fun: &str| LocalBody::Publish {
            tgt: "*".into(),
            tgt_type: "glob".into(),
            fun: fun.into(),
            arg: vec![],
            kwarg: Map::new(),
            user: "x".into(),
            watch: true,
            progress: false,
        };
        assert!(a.precheck("fred", &publish("test.ping")).is_ok());
        assert!(a.precheck("fred", &publish("cmd.run")).is_err());
        assert!(a.precheck("mallory", &publish("test.ping")).is_err());
        let events = LocalBody::Events {
            tagmatch: String::new(),
        };
        assert_eq!(
            a.precheck("fred", &events).unwrap_err().message,
            "Authorization error occurred."
        );
        assert!(a
            .precheck(
                "fred",
                &LocalBody::Resolve {
                    tgt: "*".into(),
                    tgt_type: "glob".into()
                }
            )
            .is_ok());
    }

    #[test]
    fn target_entries_cover_every_targeted_minion() {
        let list = [json!({"web*": ["state.*"]})];
        let call = Call {
            fun: "state.apply",
            args: &[],
            kwargs: None,
        };
        let resolved = HashMap::from([(
            "web*".to_string(),
            BTreeSet::from(["web1".to_string(), "web2".to_string()]),
        )]);
        let web1 = BTreeSet::from(["web1".to_string()]);
        let both = BTreeSet::from(["web1".to_string(), "db1".to_string()]);
        assert!(LocalAcl::authorize_publish("u", &list, &call, "web1", &web1, &resolved).is_ok());
        assert!(LocalAcl::authorize_publish("u", &list, &call, "*", &both, &resolved).is_err());
    }
}
