//! Minion targeting as Salt defines it: glob (Python fnmatch), pcre, list,
//! grain, grain_pcre, pillar, and compound expressions (`G@ E@ L@ P@ I@
//! J@`, `and`/`or`/`not`, parentheses). Used by top files here and by the
//! master to compute a job's target set.

use regex::Regex;

use crate::fnmatch::fnmatch;
use crate::Value;

/// What a target is matched against.
#[derive(Debug, Clone, Copy)]
pub struct MinionFacts<'a> {
    pub id: &'a str,
    pub grains: &'a Value,
    pub pillar: &'a Value,
}

/// Why a target expression could not be evaluated.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TargetError {
    #[error("Invalid target type '{0}'")]
    UnknownType(String),
    #[error("Invalid regular expression '{0}': {1}")]
    BadRegex(String, String),
    #[error("Invalid compound target '{0}': {1}")]
    BadCompound(String, String),
}

fn regex_match(pattern: &str, text: &str) -> Result<bool, TargetError> {
    // Python's re.match anchors at the start only.
    let re = Regex::new(&format!("^(?:{pattern})"))
        .map_err(|e| TargetError::BadRegex(pattern.into(), e.to_string()))?;
    Ok(re.is_match(text))
}

fn value_strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().flat_map(value_strings).collect(),
        Value::String(s) => vec![s.clone()],
        Value::Bool(b) => vec![if *b { "True".into() } else { "False".into() }],
        Value::Null => vec!["None".into()],
        other => vec![other.to_string()],
    }
}

/// Salt's `subdict_match`: `a:b:c` walks nested keys; the last part is a
/// glob (or regex) on the value, or on list members.
fn subdict_match(
    data: &Value,
    expr: &str,
    delimiter: char,
    regex: bool,
) -> Result<bool, TargetError> {
    let parts: Vec<&str> = expr.split(delimiter).collect();
    // Try every split point: the key path may itself contain the delimiter.
    for i in (1..parts.len()).rev() {
        let key = &parts[..i];
        let pattern = parts[i..].join(&delimiter.to_string());
        let mut cur = Some(data);
        for k in key {
            cur = cur.and_then(|c| match c {
                Value::Object(m) => m.get(*k),
                _ => None,
            });
        }
        let Some(val) = cur else { continue };
        let check = |s: &str| -> Result<bool, TargetError> {
            if regex {
                regex_match(&pattern, s)
            } else {
                Ok(fnmatch(&s.to_lowercase(), &pattern.to_lowercase()))
            }
        };
        match val {
            Value::Object(m) => {
                // Matching a key of a dict.
                for k in m.keys() {
                    if check(k)? {
                        return Ok(true);
                    }
                }
            }
            other => {
                for s in value_strings(other) {
                    if check(&s)? {
                        return Ok(true);
                    }
                }
            }
        }
    }
    Ok(false)
}

/// Whether `facts` matches `tgt` of type `tgt_type` (`glob`, `pcre`,
/// `list`, `grain`, `grain_pcre`, `pillar`, `pillar_pcre`, `compound`).
pub fn matches(tgt: &Value, tgt_type: &str, facts: &MinionFacts<'_>) -> Result<bool, TargetError> {
    match tgt_type {
        "glob" => Ok(value_strings(tgt).iter().any(|t| fnmatch(facts.id, t))),
        "pcre" => {
            for t in value_strings(tgt) {
                if regex_match(&t, facts.id)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        "list" => {
            let items: Vec<String> = match tgt {
                Value::String(s) => s.split(',').map(|x| x.trim().to_string()).collect(),
                other => value_strings(other),
            };
            Ok(items.iter().any(|i| i == facts.id))
        }
        "grain" => subdict_match(facts.grains, &crate::requisite::py_str(tgt), ':', false),
        "grain_pcre" => subdict_match(facts.grains, &crate::requisite::py_str(tgt), ':', true),
        "pillar" => subdict_match(facts.pillar, &crate::requisite::py_str(tgt), ':', false),
        "pillar_pcre" => subdict_match(facts.pillar, &crate::requisite::py_str(tgt), ':', true),
        "compound" => compound(&crate::requisite::py_str(tgt), facts),
        other => Err(TargetError::UnknownType(other.into())),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    And,
    Or,
    Not,
    Open,
    Close,
    Term(bool),
}

/// Evaluates a compound target.
pub fn compound(expr: &str, facts: &MinionFacts<'_>) -> Result<bool, TargetError> {
    let bad = |m: &str| TargetError::BadCompound(expr.to_string(), m.to_string());
    let mut toks = Vec::new();
    for word in expr.split_whitespace() {
        let mut w = word;
        while let Some(rest) = w.strip_prefix('(') {
            toks.push(Tok::Open);
            w = rest;
        }
        let mut closes = 0;
        while let Some(rest) = w.strip_suffix(')') {
            closes += 1;
            w = rest;
        }
        if !w.is_empty() {
            toks.push(match w {
                "and" => Tok::And,
                "or" => Tok::Or,
                "not" => Tok::Not,
                term => Tok::Term(compound_term(term, facts)?),
            });
        }
        toks.extend(std::iter::repeat_n(Tok::Close, closes));
    }
    let mut pos = 0;
    let v = parse_or(&toks, &mut pos).ok_or_else(|| bad("syntax error"))?;
    if pos != toks.len() {
        return Err(bad("unbalanced expression"));
    }
    Ok(v)
}

fn compound_term(term: &str, facts: &MinionFacts<'_>) -> Result<bool, TargetError> {
    let (kind, rest) = match term.split_once('@') {
        Some((k, r)) if k.len() == 1 => (k, r),
        _ => ("", term),
    };
    let v = Value::from(rest);
    match kind {
        "" => matches(&v, "glob", facts),
        "G" => matches(&v, "grain", facts),
        "P" => matches(&v, "grain_pcre", facts),
        "E" => matches(&v, "pcre", facts),
        "L" => matches(&v, "list", facts),
        "I" => matches(&v, "pillar", facts),
        "J" => matches(&v, "pillar_pcre", facts),
        other => Err(TargetError::UnknownType(format!("{other}@"))),
    }
}

fn parse_or(t: &[Tok], pos: &mut usize) -> Option<bool> {
    let mut v = parse_and(t, pos)?;
    while t.get(*pos) == Some(&Tok::Or) {
        *pos += 1;
        let r = parse_and(t, pos)?;
        v = v || r;
    }
    Some(v)
}

fn parse_and(t: &[Tok], pos: &mut usize) -> Option<bool> {
    let mut v = parse_not(t, pos)?;
    loop {
        match t.get(*pos) {
            Some(Tok::And) => {
                *pos += 1;
                let r = parse_not(t, pos)?;
                v = v && r;
            }
            // Salt treats juxtaposed terms ("G@a not G@b") as "and".
            Some(Tok::Not) | Some(Tok::Term(_)) | Some(Tok::Open) => {
                let r = parse_not(t, pos)?;
                v = v && r;
            }
            _ => return Some(v),
        }
    }
}

fn parse_not(t: &[Tok], pos: &mut usize) -> Option<bool> {
    match t.get(*pos)? {
        Tok::Not => {
            *pos += 1;
            Some(!parse_not(t, pos)?)
        }
        Tok::Open => {
            *pos += 1;
            let v = parse_or(t, pos)?;
            if t.get(*pos) != Some(&Tok::Close) {
                return None;
            }
            *pos += 1;
            Some(v)
        }
        Tok::Term(b) => {
            *pos += 1;
            Some(*b)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn target_forms() {
        let grains = json!({"os": "Debian", "roles": ["web", "db"], "a": {"b": "c"}});
        let pillar = json!({"env": "prod"});
        let f = MinionFacts {
            id: "web01.example.com",
            grains: &grains,
            pillar: &pillar,
        };
        assert!(matches(&json!("web*"), "glob", &f).unwrap());
        assert!(!matches(&json!("db*"), "glob", &f).unwrap());
        assert!(matches(&json!("web0[0-9]"), "pcre", &f).unwrap());
        assert!(matches(&json!("a,web01.example.com"), "list", &f).unwrap());
        assert!(matches(&json!("os:Deb*"), "grain", &f).unwrap());
        assert!(matches(&json!("roles:db"), "grain", &f).unwrap());
        assert!(matches(&json!("a:b:c"), "grain", &f).unwrap());
        assert!(!matches(&json!("os:RedHat"), "grain", &f).unwrap());
        assert!(matches(&json!("G@os:Debian and web*"), "compound", &f).unwrap());
        assert!(matches(&json!("G@os:RedHat or I@env:prod"), "compound", &f).unwrap());
        assert!(!matches(&json!("web* and not G@roles:db"), "compound", &f).unwrap());
        assert!(matches(
            &json!("( G@os:RedHat or E@web.* ) and L@x,web01.example.com"),
            "compound",
            &f
        )
        .unwrap());
        assert!(compound("( web*", &f).is_err());
    }
}
