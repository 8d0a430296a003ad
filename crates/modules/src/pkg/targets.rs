//! Salt's `pkg_resource.parse_targets`: turns `name` / `pkgs` / `sources`
//! into one ordered map of targets and says whether they come from a
//! repository or from package files.

use halite_state::Value;
use indexmap::IndexMap;

use super::error::{PkgError, PkgResult};

/// Where the targets come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// Names (with optional version specs) resolved by the package manager.
    Repository,
    /// Package files (`sources`): local paths, `salt://` or `file://` URLs.
    File,
}

impl TargetKind {
    /// Salt's word for it: `repository` or `file`.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Repository => "repository",
            TargetKind::File => "file",
        }
    }
}

/// Parsed targets: name -> version spec (repository) or name -> source
/// (file), in the order they were given.
#[derive(Debug, Clone, PartialEq)]
pub struct Targets {
    /// What the names are (repository packages, files, or sources).
    pub kind: TargetKind,
    /// Each name with the version asked for (`None`: any).
    pub items: IndexMap<String, Option<String>>,
}

impl Targets {
    /// The target names.
    pub fn names(&self) -> Vec<String> {
        self.items.keys().cloned().collect()
    }
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        _ => None,
    }
}

/// Reads a `pkgs` / `sources` list: each element a name or a one-key map
/// `{name: version-or-source}`.
fn pack_list(
    param: &str,
    list: &Value,
    need_value: bool,
) -> PkgResult<IndexMap<String, Option<String>>> {
    let invalid = || {
        PkgError::Invocation(format!(
            "Invalidly formatted '{param}' parameter. See minion log."
        ))
    };
    let items: Vec<Value> = match list {
        Value::Array(a) => a.clone(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(a)) => a,
            _ => return Err(invalid()),
        },
        _ => return Err(invalid()),
    };
    let mut out = IndexMap::new();
    for item in items {
        match item {
            Value::Object(m) if m.len() == 1 => {
                for (k, v) in m {
                    let v = if v.is_null() {
                        None
                    } else {
                        Some(scalar_string(&v).ok_or_else(invalid)?)
                    };
                    if need_value && v.is_none() {
                        return Err(invalid());
                    }
                    out.insert(k, v);
                }
            }
            other if !need_value => {
                let name = scalar_string(&other).ok_or_else(invalid)?;
                out.insert(name, None);
            }
            _ => return Err(invalid()),
        }
    }
    if out.is_empty() {
        return Err(invalid());
    }
    Ok(out)
}

/// Salt's `pkg_resource.parse_targets(name, pkgs, sources, version)`.
///
/// `pkgs` wins over `name`; `pkgs` and `sources` together are an error. A
/// `name` may be a comma-separated list; `version` applies to a single name.
pub fn parse_targets(
    name: Option<&str>,
    pkgs: Option<&Value>,
    sources: Option<&Value>,
    version: Option<&str>,
) -> PkgResult<Targets> {
    let pkgs = pkgs.filter(|v| !v.is_null());
    let sources = sources.filter(|v| !v.is_null());
    if pkgs.is_some() && sources.is_some() {
        return Err(PkgError::Invocation(
            "Only one of pkgs or sources can be used.".into(),
        ));
    }
    if let Some(p) = pkgs {
        return Ok(Targets {
            kind: TargetKind::Repository,
            items: pack_list("pkgs", p, false)?,
        });
    }
    if let Some(s) = sources {
        return Ok(Targets {
            kind: TargetKind::File,
            items: pack_list("sources", s, true)?,
        });
    }
    let mut items = IndexMap::new();
    if let Some(name) = name.filter(|n| !n.trim().is_empty()) {
        let names: Vec<&str> = name
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        let version = version.filter(|v| !v.is_empty()).map(str::to_string);
        let one = names.len() == 1;
        for n in names {
            items.insert(n.to_string(), if one { version.clone() } else { None });
        }
    }
    Ok(Targets {
        kind: TargetKind::Repository,
        items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn name_pkgs_sources() {
        let t =
            parse_targets(Some("vim"), None, None, Some("2:9.0")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.kind, TargetKind::Repository);
        assert_eq!(t.items.get("vim"), Some(&Some("2:9.0".to_string())));

        let pkgs = json!(["a", {"b": ">=1.0"}, {"c": 2}]);
        let t = parse_targets(Some("ignored"), Some(&pkgs), None, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.names(), vec!["a", "b", "c"]);
        assert_eq!(t.items["c"].as_deref(), Some("2"));

        let sources = json!([{"foo": "salt://foo.deb"}]);
        let t =
            parse_targets(Some("x"), None, Some(&sources), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.kind, TargetKind::File);

        assert!(parse_targets(None, Some(&pkgs), Some(&sources), None).is_err());
        assert!(parse_targets(None, None, Some(&json!(["nosource"])), None).is_err());
        assert!(parse_targets(None, Some(&json!({"a": 1})), None, None).is_err());
        let t = parse_targets(Some("a,b"), None, None, Some("1")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.items["a"], None, "version applies only to a single name");
    }
}
