//! What one state call returns, before the executor adds run bookkeeping.

use crate::value::{Map, Value};

/// Builds Salt's return key `<state>_|-<id>_|-<name>_|-<fun>`.
pub fn state_tag(state: &str, id: &str, name: &str, fun: &str) -> String {
    let mut tag = String::with_capacity(state.len() + id.len() + name.len() + fun.len() + 9);
    for (i, part) in [state, id, name, fun].into_iter().enumerate() {
        if i > 0 {
            tag.push_str("_|-");
        }
        tag.push_str(part);
    }
    tag
}

/// The result of one state function, shaped like Salt's state return dict.
///
/// `result` is `Some(true)` on success, `Some(false)` on failure and `None`
/// when `test=True` predicts changes. `extra` carries the optional keys some
/// states add (`skip_watch`, `pchanges`, `warnings`...); the executor adds
/// `__run_num__`, `__sls__`, `__id__`, `start_time` and `duration` itself.
#[derive(Debug, Clone, PartialEq)]
pub struct StateResult {
    /// The state's `name` argument.
    pub name: String,
    /// `True`, `False`, or `None` (test mode: would change).
    pub result: Option<bool>,
    /// What changed (Salt's `changes`).
    pub changes: Map,
    /// What happened, for the user (Salt's `comment`).
    pub comment: String,
    /// Any other keys the module returns (`warnings`, `skip_watch`...).
    pub extra: Map,
}

impl StateResult {
    /// A result with no changes and an empty comment.
    pub fn new(name: impl Into<String>, result: Option<bool>) -> Self {
        StateResult {
            name: name.into(),
            result,
            changes: Map::new(),
            comment: String::new(),
            extra: Map::new(),
        }
    }
    /// Success, no changes.
    pub fn ok(name: impl Into<String>, comment: impl Into<String>) -> Self {
        let mut r = Self::new(name, Some(true));
        r.comment = comment.into();
        r
    }
    /// Failure with a comment.
    pub fn fail(name: impl Into<String>, comment: impl Into<String>) -> Self {
        let mut r = Self::new(name, Some(false));
        r.comment = comment.into();
        r
    }
    /// `test=True` prediction: result None, with the changes that would be made.
    pub fn would_change(name: impl Into<String>, comment: impl Into<String>, changes: Map) -> Self {
        let mut r = Self::new(name, None);
        r.comment = comment.into();
        r.changes = changes;
        r
    }
    /// Sets the comment (builder style).
    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = comment.into();
        self
    }
    /// Adds one key to `changes` (builder style).
    pub fn with_change(mut self, key: impl Into<String>, value: Value) -> Self {
        self.changes.insert(key.into(), value);
        self
    }
}
