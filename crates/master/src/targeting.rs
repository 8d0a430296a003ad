//! Salt's target forms, evaluated on the master against its cache of
//! accepted minion ids and their grains: glob (Python fnmatch), pcre
//! (`re.match`: anchored at the start only), list, grain (`a:b:c`, glob on
//! the value, case-insensitive as Salt's `subdict_match`), grain_pcre,
//! compound (`G@ E@ L@ P@ N@`, `and`/`or`/`not`, parentheses) and nodegroups.

use std::collections::{BTreeMap, HashSet};

use halite_proto::fnmatch;
use regex::Regex;
use serde_json::Value;

/// Why a target expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "unknown target type {0:?}; use glob, pcre, list, grain, grain_pcre, compound or nodegroup"
    )]
    UnknownType(String),
    #[error("invalid regular expression {pattern:?}: {reason}")]
    BadRegex { pattern: String, reason: String },
    #[error("invalid compound target {0:?}: check the and/or/not words and parentheses")]
    BadCompound(String),
    #[error("unknown nodegroup {0:?}; define it under `nodegroups` in the master config")]
    UnknownNodegroup(String),
    #[error("target engine {0}@ is not supported by halite's master (no pillar or IP cache); use G@, E@, L@, P@ or N@")]
    UnsupportedEngine(char),
}

/// What the master knows about one accepted minion for targeting.
#[derive(Debug, Clone, Copy)]
pub struct MinionFacts<'a> {
    pub id: &'a str,
    /// `None` when the minion has never reported its grains.
    pub grains: Option<&'a Value>,
}

fn python_regex(pattern: &str) -> Result<Regex, TargetError> {
    // `re.match` anchors at the start only.
    Regex::new(&format!("^(?:{pattern})")).map_err(|e| TargetError::BadRegex {
        pattern: pattern.to_string(),
        reason: e.to_string(),
    })
}

/// A compiled single-engine matcher.
enum Matcher {
    Glob(String),
    Pcre(Regex),
    List(HashSet<String>),
    Grain(String),
    GrainPcre(String),
}

impl Matcher {
    fn new(tgt_type: &str, expr: &str) -> Result<Self, TargetError> {
        Ok(match tgt_type {
            "glob" => Matcher::Glob(expr.to_string()),
            "pcre" => Matcher::Pcre(python_regex(expr)?),
            "list" => Matcher::List(
                expr.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            ),
            "grain" => Matcher::Grain(expr.to_string()),
            "grain_pcre" => Matcher::GrainPcre(expr.to_string()),
            other => return Err(TargetError::UnknownType(other.to_string())),
        })
    }

    fn matches(&self, minion: &MinionFacts) -> bool {
        match self {
            Matcher::Glob(p) => fnmatch(p, minion.id),
            Matcher::Pcre(r) => r.is_match(minion.id),
            Matcher::List(ids) => ids.contains(minion.id),
            Matcher::Grain(expr) => minion.grains.is_some_and(|g| subdict_match(g, expr, false)),
            Matcher::GrainPcre(expr) => minion.grains.is_some_and(|g| subdict_match(g, expr, true)),
        }
    }
}

/// Follows `key` (colon-separated) through dicts and lists, like Salt's
/// `traverse_dict_and_list`.
fn traverse<'v>(data: &'v Value, key: &str) -> Option<&'v Value> {
    let mut cur = data;
    for part in key.split(':') {
        cur = match cur {
            Value::Object(map) => map.get(part)?,
            Value::Array(items) => match part.parse::<usize>() {
                Ok(i) => items.get(i)?,
                Err(_) => items
                    .iter()
                    .find_map(|item| item.as_object().and_then(|m| m.get(part)))?,
            },
            _ => return None,
        };
    }
    Some(cur)
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

fn value_match(target: &Value, pattern: &str, regex: bool) -> bool {
    let target = scalar_text(target).to_lowercase();
    let pattern = pattern.to_lowercase();
    if regex {
        python_regex(&pattern)
            .map(|r| r.is_match(&target))
            .unwrap_or(false)
    } else {
        fnmatch(&pattern, &target)
    }
}

fn dict_match(map: &serde_json::Map<String, Value>, pattern: &str, regex: bool) -> bool {
    pattern == "*"
        || map.contains_key(pattern)
        || map
            .keys()
            .any(|k| value_match(&Value::String(k.clone()), pattern, regex))
        || subdict_match(&Value::Object(map.clone()), pattern, regex)
}

/// Salt's `subdict_match`: `a:b:c` matches `data[a][b] == c` (glob on the
/// value) or `data[a] == "b:c"`; deeper splits are tried first.
pub fn subdict_match(data: &Value, expr: &str, regex: bool) -> bool {
    let parts: Vec<&str> = expr.split(':').collect();
    if parts.len() < 2 {
        return false;
    }
    for idx in (1..parts.len()).rev() {
        let key = parts[..idx].join(":");
        let pattern = parts[idx..].join(":");
        let Some(found) = traverse(data, &key) else {
            continue;
        };
        match found {
            Value::Object(map) => {
                if dict_match(map, &pattern, regex) {
                    return true;
                }
            }
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(m) = item {
                        if dict_match(m, &pattern, regex) {
                            return true;
                        }
                    }
                    if value_match(item, &pattern, regex) {
                        return true;
                    }
                }
            }
            scalar => {
                if value_match(scalar, &pattern, regex) {
                    return true;
                }
            }
        }
    }
    false
}

/// A parsed compound expression.
enum Expr {
    Leaf(Matcher),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    fn eval(&self, m: &MinionFacts) -> bool {
        match self {
            Expr::Leaf(x) => x.matches(m),
            Expr::Not(e) => !e.eval(m),
            Expr::And(a, b) => a.eval(m) && b.eval(m),
            Expr::Or(a, b) => a.eval(m) || b.eval(m),
        }
    }
}

/// Splits a compound expression into words, with parentheses as words of
/// their own, expanding `N@group` from the nodegroups.
fn compound_words(
    expr: &str,
    nodegroups: &BTreeMap<String, Value>,
    seen: &mut Vec<String>,
) -> Result<Vec<String>, TargetError> {
    let mut words = Vec::new();
    for raw in expr.split_whitespace() {
        let mut word = raw;
        while let Some(rest) = word.strip_prefix('(') {
            words.push("(".to_string());
            word = rest;
        }
        let mut closers = 0;
        while let Some(rest) = word.strip_suffix(')') {
            closers += 1;
            word = rest;
        }
        if !word.is_empty() {
            if let Some(group) = word.strip_prefix("N@") {
                words.extend(expand_nodegroup(group, nodegroups, seen)?);
            } else {
                words.push(word.to_string());
            }
        }
        words.extend(std::iter::repeat_n(")".to_string(), closers));
    }
    Ok(words)
}

fn expand_nodegroup(
    group: &str,
    nodegroups: &BTreeMap<String, Value>,
    seen: &mut Vec<String>,
) -> Result<Vec<String>, TargetError> {
    if seen.iter().any(|g| g == group) {
        return Err(TargetError::BadCompound(format!(
            "nodegroup {group} includes itself"
        )));
    }
    let definition = match nodegroups.get(group) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().map(scalar_text).collect::<Vec<_>>().join(" "),
        _ => return Err(TargetError::UnknownNodegroup(group.to_string())),
    };
    seen.push(group.to_string());
    let mut inner = compound_words(&definition, nodegroups, seen)?;
    seen.pop();
    inner.insert(0, "(".into());
    inner.push(")".into());
    Ok(inner)
}

struct Parser<'w> {
    words: &'w [String],
    pos: usize,
    source: &'w str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.words.get(self.pos).map(String::as_str)
    }
    fn bad(&self) -> TargetError {
        TargetError::BadCompound(self.source.to_string())
    }
    fn or(&mut self) -> Result<Expr, TargetError> {
        let mut left = self.and()?;
        while self.peek() == Some("or") {
            self.pos += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }
    fn and(&mut self) -> Result<Expr, TargetError> {
        let mut left = self.not()?;
        loop {
            match self.peek() {
                Some("and") => {
                    self.pos += 1;
                    left = Expr::And(Box::new(left), Box::new(self.not()?));
                }
                // Salt joins two adjacent targets with "and".
                Some(w) if w != "or" && w != ")" => {
                    left = Expr::And(Box::new(left), Box::new(self.not()?));
                }
                _ => return Ok(left),
            }
        }
    }
    fn not(&mut self) -> Result<Expr, TargetError> {
        if self.peek() == Some("not") {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.atom()
    }
    fn atom(&mut self) -> Result<Expr, TargetError> {
        let word = self.peek().ok_or_else(|| self.bad())?.to_string();
        self.pos += 1;
        match word.as_str() {
            "(" => {
                let inner = self.or()?;
                if self.peek() != Some(")") {
                    return Err(self.bad());
                }
                self.pos += 1;
                Ok(inner)
            }
            ")" | "and" | "or" => Err(self.bad()),
            w => Ok(Expr::Leaf(compound_leaf(w)?)),
        }
    }
}

fn compound_leaf(word: &str) -> Result<Matcher, TargetError> {
    let bytes = word.as_bytes();
    if bytes.len() >= 2 && bytes[1] == b'@' && bytes[0].is_ascii_uppercase() {
        let rest = &word[2..];
        return match bytes[0] {
            b'G' => Matcher::new("grain", rest),
            b'P' => Matcher::new("grain_pcre", rest),
            b'E' => Matcher::new("pcre", rest),
            b'L' => Matcher::new("list", rest),
            other => Err(TargetError::UnsupportedEngine(other as char)),
        };
    }
    Matcher::new("glob", word)
}

fn compile(
    tgt: &str,
    tgt_type: &str,
    nodegroups: &BTreeMap<String, Value>,
) -> Result<Expr, TargetError> {
    let compound_source = match tgt_type {
        "compound" => tgt.to_string(),
        "nodegroup" => format!("N@{tgt}"),
        other => return Ok(Expr::Leaf(Matcher::new(other, tgt)?)),
    };
    let words = compound_words(&compound_source, nodegroups, &mut Vec::new())?;
    let mut parser = Parser {
        words: &words,
        pos: 0,
        source: tgt,
    };
    let expr = parser.or()?;
    if parser.pos != words.len() {
        return Err(parser.bad());
    }
    Ok(expr)
}

/// The ids among `minions` that `tgt` of `tgt_type` selects, sorted.
pub fn check_minions(
    tgt: &str,
    tgt_type: &str,
    minions: &[MinionFacts],
    nodegroups: &BTreeMap<String, Value>,
) -> Result<Vec<String>, TargetError> {
    let expr = compile(tgt, tgt_type, nodegroups)?;
    let mut out: Vec<String> = minions
        .iter()
        .filter(|m| expr.eval(m))
        .map(|m| m.id.to_string())
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fleet() -> Vec<(String, Value)> {
        vec![
            (
                "web1".into(),
                json!({"os": "Ubuntu", "roles": ["web", "cache"], "env": {"tier": "prod"}}),
            ),
            (
                "web2".into(),
                json!({"os": "Debian", "roles": ["web"], "env": {"tier": "dev"}}),
            ),
            (
                "db1".into(),
                json!({"os": "Ubuntu", "roles": ["db"], "env": {"tier": "prod"}, "url": "http://x"}),
            ),
        ]
    }

    fn run(tgt: &str, tgt_type: &str) -> Result<Vec<String>, TargetError> {
        let data = fleet();
        let facts: Vec<MinionFacts> = data
            .iter()
            .map(|(id, g)| MinionFacts {
                id,
                grains: Some(g),
            })
            .collect();
        let mut groups = BTreeMap::new();
        groups.insert("webs".to_string(), json!("web*"));
        groups.insert(
            "prod_webs".to_string(),
            json!(["N@webs", "and", "G@env:tier:prod"]),
        );
        groups.insert("loop".to_string(), json!("N@loop"));
        check_minions(tgt, tgt_type, &facts, &groups)
    }

    #[test]
    fn each_form_selects_its_set() {
        assert_eq!(run("web*", "glob").unwrap(), ["web1", "web2"]);
        assert_eq!(run("web[!1]", "glob").unwrap(), ["web2"]);
        assert_eq!(run("w.b", "pcre").unwrap(), ["web1", "web2"]);
        assert_eq!(run("db1,web2,nosuch", "list").unwrap(), ["db1", "web2"]);
        assert_eq!(run("os:ubuntu", "grain").unwrap(), ["db1", "web1"]);
        assert_eq!(run("roles:cache", "grain").unwrap(), ["web1"]);
        assert_eq!(run("env:tier:prod", "grain").unwrap(), ["db1", "web1"]);
        assert_eq!(run("url:http://x", "grain").unwrap(), ["db1"]);
        assert_eq!(
            run("os:(Deb|Ubu)", "grain_pcre").unwrap(),
            ["db1", "web1", "web2"]
        );
        assert_eq!(
            run("G@os:Ubuntu and not db*", "compound").unwrap(),
            ["web1"]
        );
        assert_eq!(
            run("( E@db.* or L@web2 ) and G@env:tier:*", "compound").unwrap(),
            ["db1", "web2"]
        );
        assert_eq!(run("not (web1 or web2)", "compound").unwrap(), ["db1"]);
        assert_eq!(
            run("web* or G@os:Ubuntu and G@roles:db", "compound").unwrap(),
            ["db1", "web1", "web2"]
        );
        assert_eq!(run("webs", "nodegroup").unwrap(), ["web1", "web2"]);
        assert_eq!(run("prod_webs", "nodegroup").unwrap(), ["web1"]);
        assert_eq!(
            run("N@prod_webs or db1", "compound").unwrap(),
            ["db1", "web1"]
        );
    }

    #[test]
    fn bad_expressions_are_errors() {
        assert!(matches!(
            run("(", "pcre"),
            Err(TargetError::BadRegex { .. })
        ));
        assert!(matches!(
            run("web1 and", "compound"),
            Err(TargetError::BadCompound(_))
        ));
        assert!(matches!(
            run("( web1", "compound"),
            Err(TargetError::BadCompound(_))
        ));
        assert!(matches!(
            run("nope", "nodegroup"),
            Err(TargetError::UnknownNodegroup(_))
        ));
        assert!(matches!(
            run("loop", "nodegroup"),
            Err(TargetError::BadCompound(_))
        ));
        assert!(matches!(
            run("I@role:x", "compound"),
            Err(TargetError::UnsupportedEngine('I'))
        ));
        assert!(matches!(
            run("x", "range"),
            Err(TargetError::UnknownType(_))
        ));
    }
}
