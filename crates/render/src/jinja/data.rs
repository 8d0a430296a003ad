//! Salt's data helpers on template values: `traverse_dict_and_list`,
//! `dictupdate.update` (deep merge), `deepcopy`, and `fnmatch`. Shared by the
//! render-time functions and the filters.

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value as MjValue};

use super::objects::{make_mutable, pairs_of, PyDict, PyList};

/// Whether a value is a mapping (dict-like).
pub fn is_mapping(value: &MjValue) -> bool {
    value.kind() == ValueKind::Map && !value.is_kwargs()
}

/// Whether a value is a list (not a string, not a mapping).
pub fn is_list(value: &MjValue) -> bool {
    value.kind() == ValueKind::Seq
}

/// Looks a value up by key in a mapping, by Python equality.
pub fn lookup_key(container: &MjValue, key: &MjValue) -> Option<MjValue> {
    if let Some(dict) = container.downcast_object_ref::<PyDict>() {
        return dict.get(key);
    }
    if is_mapping(container) {
        return container.get_item(key).ok().filter(|v| !v.is_undefined());
    }
    None
}

/// Salt's `traverse_dict_and_list`: walks `a:b:0:c` through dicts and lists.
pub fn traverse(data: &MjValue, key: &str, default: MjValue, delimiter: &str) -> MjValue {
    let mut pointer = data.clone();
    for segment in key.split(delimiter) {
        if is_list(&pointer) {
            let items: Vec<MjValue> = pointer.try_iter().map(|i| i.collect()).unwrap_or_default();
            let as_index = segment.parse::<i64>().ok();
            let key_value = match as_index {
                Some(i) => MjValue::from(i),
                None => MjValue::from(segment),
            };
            let embedded = items
                .iter()
                .filter(|x| is_mapping(x))
                .find_map(|x| lookup_key(x, &key_value));
            match (embedded, as_index) {
                (Some(found), _) => pointer = found,
                (None, Some(i)) => {
                    let len = items.len() as i64;
                    let at = if i < 0 { len + i } else { i };
                    match usize::try_from(at).ok().and_then(|a| items.get(a)) {
                        Some(item) => pointer = item.clone(),
                        None => return default,
                    }
                }
                (None, None) => return default,
            }
        } else if is_mapping(&pointer) {
            match lookup_key(&pointer, &MjValue::from(segment)) {
                Some(found) => pointer = found,
                None => match yamlify_key(segment).and_then(|k| lookup_key(&pointer, &k)) {
                    Some(found) => pointer = found,
                    None => return default,
                },
            }
        } else {
            return default;
        }
    }
    pointer
}

/// Salt retries a missing key as YAML (`"1"` -> 1, `"true"` -> True).
fn yamlify_key(segment: &str) -> Option<MjValue> {
    let loaded = crate::yaml::load(segment).ok()?;
    match loaded {
        crate::Value::String(_) | crate::Value::Null => None,
        other => Some(super::objects::to_template(&other)),
    }
}

/// Python's `copy.deepcopy` of dicts and lists (scalars are shared).
pub fn deepcopy(value: &MjValue) -> MjValue {
    copy_at(value, 0)
}

fn copy_at(value: &MjValue, depth: usize) -> MjValue {
    if depth > super::objects::MAX_DEPTH {
        return MjValue::from(());
    }
    if is_mapping(value) {
        let pairs = pairs_of(value).unwrap_or_default();
        return PyDict::new_value(
            pairs
                .into_iter()
                .map(|(k, v)| (k, copy_at(&v, depth + 1)))
                .collect(),
        );
    }
    if is_list(value) {
        let items: Vec<MjValue> = value
            .try_iter()
            .map(|i| i.map(|v| copy_at(&v, depth + 1)).collect())
            .unwrap_or_default();
        return PyList::new_value(items);
    }
    value.clone()
}

/// Salt's `dictupdate.update(dest, upd, merge_lists=...)`: a deep merge that
/// changes `dest` in place (when it is one of our dicts) and returns it.
pub fn update(dest: &MjValue, upd: &MjValue, merge_lists: bool) -> Result<MjValue, Error> {
    if !is_mapping(dest) || !is_mapping(upd) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "Cannot update using non-dict types in dictupdate.update()",
        ));
    }
    let dest = make_mutable(dest.clone());
    let Some(dict) = dest.downcast_object_ref::<PyDict>() else {
        return Ok(dest);
    };
    for (key, value) in pairs_of(upd)? {
        let existing = dict.get(&key);
        match existing {
            Some(current) if is_mapping(&current) && is_mapping(&value) => {
                let merged = update(&current, &value, merge_lists)?;
                dict.insert(key, merged);
            }
            Some(current) if is_list(&current) && is_list(&value) && merge_lists => {
                let mut merged: Vec<MjValue> = current
                    .try_iter()
                    .map(|i| i.map(|v| deepcopy(&v)).collect())
                    .unwrap_or_default();
                for item in value.try_iter()? {
                    if !merged.contains(&item) {
                        merged.push(item);
                    }
                }
                dict.insert(key, PyList::new_value(merged));
            }
            _ => dict.insert(key, value),
        }
    }
    Ok(dest)
}

/// Python's `fnmatch.fnmatchcase(name, pattern)` (the one implementation,
/// in the leaf crate of Salt's rules).
pub use halite_salt_rules::fnmatch;
