//! Values the tests of several crates build the same way (the proto
//! `packed` checks, the master's intake and wire limits): one copy here.

use serde_json::{json, Value};

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
