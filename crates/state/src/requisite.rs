//! Requisite kinds and the references that name their targets.

use crate::value::Value;

/// A direct requisite kind, in Salt's precedence order.
///
/// The order of the variants matters: its index is the "weight" Salt uses
/// when pulling a prerequisite up to just before its earliest dependent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequisiteKind {
    /// `onfail`: run only when the target failed.
    Onfail,
    /// `onfail_any`: run when any target failed.
    OnfailAny,
    /// `onfail_all`: run when every target failed.
    OnfailAll,
    /// `require`: run after the targets, only if they succeeded.
    Require,
    /// `require_any`: run if any target succeeded.
    RequireAny,
    /// `onchanges`: run only when a target changed something.
    Onchanges,
    /// `onchanges_any`: run when any target changed something.
    OnchangesAny,
    /// `watch`: like `require`, and call `mod_watch` when a target changed.
    Watch,
    /// `watch_any`: `watch` satisfied by any target.
    WatchAny,
    /// `prereq`: run before the target, only if it would change something.
    Prereq,
    /// The reverse of `prereq`, added to the target.
    Prerequired,
    /// `listen`: call `mod_watch` at the end of the run when a target changed.
    Listen,
}

impl RequisiteKind {
    /// Every kind, in precedence order.
    pub const ALL: [RequisiteKind; 12] = [
        RequisiteKind::Onfail,
        RequisiteKind::OnfailAny,
        RequisiteKind::OnfailAll,
        RequisiteKind::Require,
        RequisiteKind::RequireAny,
        RequisiteKind::Onchanges,
        RequisiteKind::OnchangesAny,
        RequisiteKind::Watch,
        RequisiteKind::WatchAny,
        RequisiteKind::Prereq,
        RequisiteKind::Prerequired,
        RequisiteKind::Listen,
    ];

    /// The kinds that add graph edges, in the order Salt adds them.
    pub const EDGE_KINDS: [RequisiteKind; 10] = [
        RequisiteKind::Require,
        RequisiteKind::RequireAny,
        RequisiteKind::Watch,
        RequisiteKind::WatchAny,
        RequisiteKind::Prereq,
        RequisiteKind::Onfail,
        RequisiteKind::OnfailAny,
        RequisiteKind::OnfailAll,
        RequisiteKind::Onchanges,
        RequisiteKind::OnchangesAny,
    ];

    /// The keywords of [`RequisiteKind::ALL`], in its order.
    pub const KEYWORDS: [&'static str; 12] = {
        let mut keywords = [""; 12];
        let mut i = 0;
        while i < keywords.len() {
            keywords[i] = RequisiteKind::ALL[i].keyword();
            i += 1;
        }
        keywords
    };

    /// The SLS keyword (`require`, `onfail_any`...).
    pub const fn keyword(self) -> &'static str {
        match self {
            RequisiteKind::Onfail => "onfail",
            RequisiteKind::OnfailAny => "onfail_any",
            RequisiteKind::OnfailAll => "onfail_all",
            RequisiteKind::Require => "require",
            RequisiteKind::RequireAny => "require_any",
            RequisiteKind::Onchanges => "onchanges",
            RequisiteKind::OnchangesAny => "onchanges_any",
            RequisiteKind::Watch => "watch",
            RequisiteKind::WatchAny => "watch_any",
            RequisiteKind::Prereq => "prereq",
            RequisiteKind::Prerequired => "prerequired",
            RequisiteKind::Listen => "listen",
        }
    }

    /// Salt's weight (its position in the precedence order).
    pub fn weight(self) -> u8 {
        self as u8
    }

    /// The kind without its `_any`/`_all` suffix.
    pub fn base(self) -> RequisiteKind {
        match self {
            RequisiteKind::OnfailAny | RequisiteKind::OnfailAll => RequisiteKind::Onfail,
            RequisiteKind::RequireAny => RequisiteKind::Require,
            RequisiteKind::OnchangesAny => RequisiteKind::Onchanges,
            RequisiteKind::WatchAny => RequisiteKind::Watch,
            other => other,
        }
    }

    /// Whether the kind ends in `_any`.
    pub fn is_any(self) -> bool {
        matches!(
            self,
            RequisiteKind::OnfailAny
                | RequisiteKind::RequireAny
                | RequisiteKind::OnchangesAny
                | RequisiteKind::WatchAny
        )
    }
}

/// Keywords that are requisites (Salt's `STATE_REQUISITE_KEYWORDS`).
pub const REQUISITE_KEYWORDS: &[&str] = &[
    "onfail",
    "onfail_any",
    "onfail_all",
    "require",
    "require_any",
    "onchanges",
    "onchanges_any",
    "watch",
    "watch_any",
    "prereq",
    "prerequired",
    "listen",
    "onfail_stop",
];

/// The `_in` forms (Salt's `STATE_REQUISITE_IN_KEYWORDS`).
pub const REQUISITE_IN_KEYWORDS: &[&str] = &[
    "onchanges_in",
    "onfail_in",
    "prereq_in",
    "watch_in",
    "require_in",
    "listen_in",
];

/// Arguments the engine consumes itself rather than passing to the state
/// function (Salt's `STATE_RUNTIME_KEYWORDS`, plus the requisites).
pub const RUNTIME_KEYWORDS: &[&str] = &[
    "fun",
    "state",
    "check_cmd",
    "cmd_opts_exclude",
    "failhard",
    "onlyif",
    "unless",
    "creates",
    "retry",
    "order",
    "parallel",
    "prereq",
    "prereq_in",
    "reload_modules",
    "reload_grains",
    "reload_pillar",
    "runas",
    "runas_password",
    "no_log",
    "fire_event",
    "saltenv",
    "umask",
    "use",
    "use_in",
    "__env__",
    "__sls__",
    "__id__",
    "__sls_included_from__",
    "__prereq__",
    "__prerequiring__",
];

/// Whether `key` is a keyword the engine handles (never a state argument).
pub fn is_internal_keyword(key: &str) -> bool {
    REQUISITE_KEYWORDS.contains(&key)
        || REQUISITE_IN_KEYWORDS.contains(&key)
        || RUNTIME_KEYWORDS.contains(&key)
}

/// One requisite reference: `- file: /etc/foo` is (`file`, `/etc/foo`);
/// `- foo` (module omitted) is (`id`, `foo`); `- sls: bar` is (`sls`, `bar`).
#[derive(Debug, Clone, PartialEq)]
pub struct RequisiteRef {
    /// What the reference matches on: a state module name, `id`, `name` or `sls`.
    pub key: String,
    /// The id, name, sls or glob matched.
    pub value: Value,
}

impl RequisiteRef {
    /// Reads one list item of a requisite; `None` when it is not a
    /// single-key mapping or a string.
    pub fn parse(item: &Value) -> Option<RequisiteRef> {
        match item {
            Value::String(s) => Some(RequisiteRef {
                key: "id".into(),
                value: Value::String(s.clone()),
            }),
            Value::Object(m) => {
                let (k, v) = m.iter().next()?;
                // `- file.managed: foo` is trimmed to `file`.
                let key = k.split('.').next().unwrap_or(k).to_string();
                Some(RequisiteRef {
                    key,
                    value: v.clone(),
                })
            }
            _ => None,
        }
    }
}

/// The engine's `repr()`/`str()` of values in messages that quote Salt
/// (one implementation, in the leaf crate of Salt's rules).
pub use halite_salt_rules::pyfmt::{
    quoted_dict as py_dict, quoted_repr as py_repr, quoted_str as py_str,
};
