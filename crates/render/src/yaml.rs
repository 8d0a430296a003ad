//! YAML as Salt loads it (YAML 1.1 booleans, decimal `0644`, duplicate keys
//! are errors, insertion order kept) and dumps it.

use crate::Value;

/// A YAML document that Salt would refuse.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    pub message: String,
    /// 1-based line of the problem, when known.
    pub line: Option<usize>,
}

/// Loads one YAML document with Salt's rules. (Stub until the loader lands.)
pub fn load(text: &str) -> Result<Value, YamlError> {
    serde_json::from_str(text).map_err(|e| YamlError { message: e.to_string(), line: Some(e.line()) })
}
