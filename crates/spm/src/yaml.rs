//! The one door to YAML for this crate: FORMULA, the `spm` config file,
//! repository lists and `SPM-METADATA` all load through Salt's rules in
//! `halite_render::yaml`.

use serde_json::Value;

/// Loads one YAML document; the error is the loader's message.
pub fn load(text: &str) -> Result<Value, String> {
    halite_render::yaml::load(text).map_err(|e| match e.line {
        Some(line) => format!("{} (line {line})", e.message),
        None => e.message,
    })
}

/// Dumps data in block style with sorted keys, as Salt's `safe_dump` writes
/// `SPM-METADATA`.
pub fn dump(value: &Value) -> String {
    halite_render::yaml::dump(value, false)
}
