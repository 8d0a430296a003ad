//! Python methods on values that are not our mutable objects: strings
//! (through minijinja-contrib's pycompat, plus the few it lacks) and
//! minijinja's own immutable maps and lists.

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, State, Value as MjValue};

use super::objects::{make_mutable, python_type_name};

/// The environment's unknown-method callback.
pub fn unknown_method(
    state: &mut State<'_, '_>,
    value: &MjValue,
    method: &str,
    args: &[MjValue],
) -> Result<MjValue, Error> {
    if let Some(text) = value.as_str().filter(|_| value.kind() == ValueKind::String) {
        if let Some(result) = extra_string_method(text, method, args)? {
            return Ok(result);
        }
    }
    if matches!(method, "copy") && matches!(value.kind(), ValueKind::Map | ValueKind::Seq) {
        return Ok(make_mutable(value.clone()));
    }
    const MUTATORS: &[&str] = &[
        "append",
        "extend",
        "insert",
        "remove",
        "update",
        "setdefault",
        "pop",
        "popitem",
        "clear",
        "sort",
        "reverse",
    ];
    if MUTATORS.contains(&method)
        && matches!(
            value.kind(),
            ValueKind::Map | ValueKind::Seq | ValueKind::Iterable
        )
    {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "cannot {method}() this {}: values made by filters or operators (`x + [y]`, `|list`, `|sort`) \
                 cannot be changed in place in halite; call .copy() on it first",
                python_type_name(value)
            ),
        ));
    }
    match minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args) {
        Err(error) if error.kind() == ErrorKind::UnknownMethod => Err(Error::new(
            ErrorKind::UnknownMethod,
            format!(
                "'{}' object has no attribute '{method}'",
                python_type_name(value)
            ),
        )),
        other => other,
    }
}

fn text_arg(args: &[MjValue], index: usize) -> Option<String> {
    args.get(index)
        .filter(|v| !v.is_none())
        .and_then(|v| v.as_str().map(str::to_string))
}

fn extra_string_method(
    text: &str,
    method: &str,
    args: &[MjValue],
) -> Result<Option<MjValue>, Error> {
    let missing = || {
        Error::new(
            ErrorKind::MissingArgument,
            format!("{method}() takes exactly one argument"),
        )
    };
    Ok(Some(match method {
        "partition" | "rpartition" => {
            let separator = text_arg(args, 0).ok_or_else(missing)?;
            let found = if method == "partition" {
                text.find(&separator)
            } else {
                text.rfind(&separator)
            };
            let parts = match found {
                Some(at) => [
                    &text[..at],
                    separator.as_str(),
                    &text[at + separator.len()..],
                ],
                None if method == "partition" => [text, "", ""],
                None => ["", "", text],
            };
            MjValue::from_object(minijinja::value::Tuple::new(
                parts.iter().map(|p| MjValue::from(*p)).collect(),
            ))
        }
        "rsplit" => {
            let separator = text_arg(args, 0);
            let limit = args.get(1).and_then(|v| v.as_i64()).filter(|n| *n >= 0);
            let mut parts: Vec<String> = match (&separator, limit) {
                (Some(sep), Some(n)) => text
                    .rsplitn(n as usize + 1, sep.as_str())
                    .map(str::to_string)
                    .collect(),
                (Some(sep), None) => text.rsplit(sep.as_str()).map(str::to_string).collect(),
                (None, _) => text.split_whitespace().rev().map(str::to_string).collect(),
            };
            parts.reverse();
            MjValue::from(parts)
        }
        "zfill" => {
            let width = args.first().and_then(|v| v.as_i64()).unwrap_or(0).max(0) as usize;
            let (sign, digits) = match text.strip_prefix(['-', '+']) {
                Some(rest) => (&text[..1], rest),
                None => ("", text),
            };
            let pad = width.saturating_sub(text.chars().count());
            MjValue::from(format!("{sign}{}{digits}", "0".repeat(pad)))
        }
        "ljust" | "rjust" | "center" => {
            let width = args.first().and_then(|v| v.as_i64()).unwrap_or(0).max(0) as usize;
            let fill = text_arg(args, 1)
                .and_then(|f| f.chars().next())
                .unwrap_or(' ');
            let pad = width.saturating_sub(text.chars().count());
            let fill_str = |n: usize| fill.to_string().repeat(n);
            MjValue::from(match method {
                "ljust" => format!("{text}{}", fill_str(pad)),
                "rjust" => format!("{}{text}", fill_str(pad)),
                _ => {
                    let left = pad / 2 + (pad & width & 1);
                    format!("{}{text}{}", fill_str(left), fill_str(pad - left))
                }
            })
        }
        "casefold" => MjValue::from(text.to_lowercase()),
        "swapcase" => MjValue::from(
            text.chars()
                .map(|c| {
                    if c.is_uppercase() {
                        c.to_lowercase().to_string()
                    } else {
                        c.to_uppercase().to_string()
                    }
                })
                .collect::<String>(),
        ),
        "index" | "rindex" => {
            let needle = text_arg(args, 0).ok_or_else(missing)?;
            let found = if method == "index" {
                text.find(&needle)
            } else {
                text.rfind(&needle)
            };
            let at = found.ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    "ValueError: substring not found",
                )
            })?;
            MjValue::from(text[..at].chars().count())
        }
        _ => return Ok(None),
    }))
}
