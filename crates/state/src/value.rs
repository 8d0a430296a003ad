//! The JSON value types the engine passes around, named once in a leaf
//! file every other file imports (the crate root only re-exports them, so
//! no file reaches back through `lib.rs`).

/// Salt data: JSON-like values whose maps keep insertion order.
pub type Value = serde_json::Value;
/// An insertion-ordered map of Salt data.
pub type Map = serde_json::Map<String, Value>;
