//! Values the tests of several crates build the same way (the proto
//! `packed` checks, the master's intake and wire limits, the master's
//! compile tests and profile): one copy here.

use serde_json::{json, Map, Value};

use crate::msg::Job;

/// A value nested `levels` deep as [`crate::value_depth`] counts it: `1`
/// inside `levels - 1` arrays (`nested(1)` is `1`, `nested(3)` is
/// `[[1]]`), to test the depth limits at and past [`crate::MAX_VALUE_DEPTH`].
pub fn nested(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 1..levels {
        v = json!([v]);
    }
    v
}

/// The highstate job the master's compile tests and profile give every
/// minion: `state.apply` with no arguments, targeted at `*` by root.
pub fn highstate_job(jid: &str) -> Job {
    Job {
        jid: jid.into(),
        fun: "state.apply".into(),
        arg: vec![],
        kwarg: Map::new(),
        tgt: "*".into(),
        tgt_type: "glob".into(),
        user: "root".into(),
        minions: vec![],
        progress_unwatched: false,
    }
}
