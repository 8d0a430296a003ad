//! `file.decode`: writes base64 data (inline or from pillar) to a file,
//! comparing by checksum first as Salt does.

use std::fs;
use std::path::Path;

use base64::Engine;
use halite_state::{StateCall, StateError, StateResult};
use serde_json::json;

use super::managed::traverse;
use crate::exec::file::meta::{self, HashType};

/// Python's `base64.decodebytes`: whitespace and newlines are ignored.
fn decode_base64(text: &str) -> Result<Vec<u8>, StateError> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| StateError::BadArg(format!("The data to decode is not valid base64: {e}")))
}

/// `file.decode`: see Salt's documentation (`encoded_data` or
/// `contents_pillar`, `encoding_type` base64, `checksum` md5).
pub fn decode(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::new(name.clone(), Some(false));
    let encoded = call
        .arg("encoded_data")
        .filter(|v| halite_salt_rules::truth::python_bool(v));
    let pillar_key = call.arg_str("contents_pillar")?.filter(|s| !s.is_empty());
    let content = match (encoded, pillar_key) {
        (None, None) => {
            return Err(StateError::BadArg(
                "Specify either the 'encoded_data' or 'contents_pillar' argument.".into(),
            ))
        }
        (Some(_), Some(_)) => {
            return Err(StateError::BadArg(
                "Specify only one 'encoded_data' or 'contents_pillar' argument.".into(),
            ))
        }
        (Some(v), None) => halite_salt_rules::pyfmt::python_str(v),
        (None, Some(key)) => match traverse(call.env.pillar(), &key, ":") {
            Some(v) if v.as_bool() != Some(false) => halite_salt_rules::pyfmt::python_str(v),
            _ => return Err(StateError::Other("Pillar data not found.".into())),
        },
    };
    let encoding = call
        .arg_str("encoding_type")?
        .unwrap_or_else(|| "base64".into());
    if encoding != "base64" {
        return Err(StateError::BadArg(format!(
            "Unsupported encoding_type '{encoding}': Salt's file.decode only supports base64"
        )));
    }
    let checksum = call.arg_str("checksum")?.unwrap_or_else(|| "md5".into());
    let kind = HashType::parse(&checksum).map_err(|e| StateError::BadArg(e.to_string()))?;
    let data = decode_base64(&content)?;
    let path = Path::new(&name);
    if path.is_file() {
        let insum = kind.digest(&data);
        let outsum = meta::file_hash(path, kind).map_err(|e| StateError::Other(e.to_string()))?;
        if insum == outsum {
            ret.comment = "File is in the correct state.".into();
            ret.result = Some(true);
            return Ok(ret);
        }
        ret.changes.insert("old".into(), json!(outsum));
        ret.changes.insert("new".into(), json!(insum));
    }
    if call.test {
        ret.comment = "File is set to be updated.".into();
        ret.result = None;
        return Ok(ret);
    }
    if let Err(e) = fs::write(path, &data) {
        ret.comment = format!("Unable to write {name}: {e}");
        return Ok(ret);
    }
    ret.result = Some(true);
    ret.comment = "File was updated.".into();
    if ret.changes.is_empty() {
        ret.changes.insert("old".into(), json!(null));
        ret.changes.insert("new".into(), json!(kind.digest(&data)));
    }
    Ok(ret)
}
