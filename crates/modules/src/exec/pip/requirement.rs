//! Reading a `pip.installed` package line (`django >= 1.6, <= 1.7`,
//! `foo[extra]==1.0`, a URL) the way Salt's `_check_pkg_version_format`
//! does through pip's own parser: the normalized project name and the
//! version specifiers, or Salt's comment for a line pip refuses.
//!
//! PEP 440 versions and specifiers come from `pep440_rs` (the parser uv
//! uses), so ordering and `~=`/`===` follow the standard, not a copy.

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};

/// The operators of a PEP 440 specifier, longest first so `==` is not read as `=`.
const OPERATORS: [&str; 8] = ["===", "~=", "==", "!=", "<=", ">=", "<", ">"];

/// A parsed package line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The normalized project name (`pip.normalize`), empty for a URL or
    /// path whose project cannot be known before installing it.
    pub prefix: String,
    /// Each specifier as Salt keeps it: (operator, version).
    pub specs: Vec<(String, String)>,
}

/// Salt's `pip.normalize`: runs of `-`, `_`, `.` become one `-`, lowercased.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_sep {
                out.push('-');
            }
            in_sep = true;
        } else {
            out.extend(c.to_lowercase());
            in_sep = false;
        }
    }
    out
}

/// Whether `line` names something to fetch rather than a project: a URL,
/// a VCS link or a local path (pip's `install_req.req` is then `None`).
fn is_location(line: &str) -> bool {
    line.contains("://")
        || line.starts_with('/')
        || line.starts_with('.')
        || line.starts_with('~')
        || [".whl", ".tar.gz", ".zip", ".tar.bz2"]
            .iter()
            .any(|ext| line.ends_with(ext))
}

/// Parses one package line of `pip.installed`'s `name`/`pkgs`.
///
/// The error is Salt's comment for the line.
pub fn parse(line: &str) -> Result<Requirement, String> {
    let trimmed = line.trim();
    if is_location(trimmed) {
        // A link naming its project (`...#egg=name`) is checked by that name.
        let prefix = trimmed
            .split_once("#egg=")
            .map(|(_, egg)| egg.split('&').next().unwrap_or_default())
            .filter(|egg| !egg.is_empty() && egg.chars().all(is_name_char))
            .map(normalize)
            .unwrap_or_default();
        return Ok(Requirement {
            prefix,
            specs: Vec::new(),
        });
    }
    let refuse = || {
        if trimmed.contains('=') && !trimmed.contains("==") {
            format!(
                "Invalid version specification in package {line}. '=' is not supported, use '==' instead."
            )
        } else {
            format!("pip raised an exception while parsing '{line}': Invalid requirement: '{line}'")
        }
    };
    let name_len = trimmed
        .char_indices()
        .find(|(_, c)| !is_name_char(*c))
        .map_or(trimmed.len(), |(i, _)| i);
    let (name, mut rest) = trimmed.split_at(name_len);
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(refuse());
    }
    rest = rest.trim_start();
    if let Some(extras) = rest.strip_prefix('[') {
        let Some((_, after)) = extras.split_once(']') else {
            return Err(refuse());
        };
        rest = after.trim_start();
    }
    // Environment markers do not change what is checked.
    let rest = rest.split(';').next().unwrap_or_default().trim();
    let rest = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or(rest)
        .trim();
    let mut specs = Vec::new();
    if !rest.is_empty() {
        if VersionSpecifiers::from_str(rest).is_err() {
            return Err(refuse());
        }
        for part in rest.split(',') {
            let part = part.trim();
            let Some(op) = OPERATORS.iter().find(|op| part.starts_with(**op)) else {
                return Err(refuse());
            };
            specs.push((op.to_string(), part[op.len()..].trim().to_string()));
        }
    }
    Ok(Requirement {
        prefix: normalize(name),
        specs,
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Salt's `_fulfills_version_spec`: whether `version` meets every
/// specifier (an unparsable version meets only an `==` of the same text).
pub fn fulfills(version: &str, specs: &[(String, String)]) -> bool {
    if specs.is_empty() {
        return true;
    }
    let joined = specs
        .iter()
        .map(|(op, v)| format!("{op}{v}"))
        .collect::<Vec<_>>()
        .join(",");
    match (
        Version::from_str(version),
        VersionSpecifiers::from_str(&joined),
    ) {
        (Ok(v), Ok(set)) => set.contains(&v),
        _ => specs.iter().all(|(op, v)| op == "==" && v == version),
    }
}

/// Salt's `_pep440_version_cmp`: the PEP 440 order of two versions,
/// `None` when either does not parse.
pub fn compare(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    Some(Version::from_str(a).ok()?.cmp(&Version::from_str(b).ok()?))
}

/// Sorts versions in PEP 440 order (unparsable ones first, by text).
pub fn sort_versions(versions: &mut [String]) {
    versions.sort_by(|a, b| match (Version::from_str(a), Version::from_str(b)) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Err(_), Ok(_)) => std::cmp::Ordering::Less,
        (Ok(_), Err(_)) => std::cmp::Ordering::Greater,
        _ => a.cmp(b),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(o, v)| (o.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_and_specifiers() {
        let r = parse("Django >= 1.6, <= 1.7").unwrap();
        assert_eq!(r.prefix, "django");
        assert_eq!(r.specs, specs(&[(">=", "1.6"), ("<=", "1.7")]));
        let r = parse("Foo_Bar.baz[extra]==2.0").unwrap();
        assert_eq!(r.prefix, "foo-bar-baz");
        assert_eq!(r.specs, specs(&[("==", "2.0")]));
        assert_eq!(parse("requests").unwrap().specs, vec![]);
    }

    #[test]
    fn urls_have_no_prefix_unless_they_name_an_egg() {
        assert_eq!(parse("/tmp/x/demo-1.0.tar.gz").unwrap().prefix, "");
        assert_eq!(
            parse("git+https://example.invalid/r.git#egg=My_Pkg")
                .unwrap()
                .prefix,
            "my-pkg"
        );
    }

    #[test]
    fn refused_lines_get_salts_comments() {
        assert_eq!(
            parse("foo=1.0").unwrap_err(),
            "Invalid version specification in package foo=1.0. '=' is not supported, use '==' instead."
        );
        assert!(parse("foo ?? 1")
            .unwrap_err()
            .starts_with("pip raised an exception"));
    }

    #[test]
    fn version_specs_follow_pep440() {
        assert!(fulfills("1.10", &specs(&[(">=", "1.9")])));
        assert!(!fulfills("1.0", &specs(&[(">=", "2.0")])));
        assert!(fulfills("2.0", &specs(&[("~=", "2.0")])));
        let mut v = vec!["1.10".to_string(), "1.9".to_string(), "1.0rc1".to_string()];
        sort_versions(&mut v);
        assert_eq!(v, ["1.0rc1", "1.9", "1.10"]);
        assert_eq!(compare("1.0", "1.0.0"), Some(std::cmp::Ordering::Equal));
    }
}
