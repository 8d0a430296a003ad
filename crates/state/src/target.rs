//! Minion targeting as Salt 3008 defines it, in one place for the whole
//! workspace: glob (Python fnmatch), pcre (`re.match`), list, grain,
//! grain_pcre, pillar, pillar_pcre, pillar_exact, ipcidr, compound
//! expressions (`G@ P@ I@ J@ S@ E@ L@ N@`, `and`/`or`/`not`, parentheses)
//! and nodegroups. Range (`-R`, `R@`) is refused with its own error.
//!
//! Top files use [`matches`] for one minion (its own facts); the master
//! compiles a [`Target`] once and matches it against every accepted minion
//! (crates/master/src/targeting.rs). The per-minion semantics are Salt's
//! minion-side matchers (`salt/matchers/*.py`) and `salt.utils.data.
//! subdict_match`; nodegroup expansion is `salt.utils.minions.
//! nodegroup_comp`.

use std::collections::BTreeMap;

use regex::Regex;

mod ipcidr;

use crate::requisite::py_str;
use crate::value::{Map, Value};
use halite_salt_rules::fnmatch::Glob;
use ipcidr::IpTarget;

/// What a target is matched against: one minion's id, grains and pillar.
/// A minion whose grains (or pillar) are unknown is given `Value::Null`,
/// which no grain (pillar) term matches, as Salt's master drops minions
/// without cached data.
#[derive(Debug, Clone, Copy)]
pub struct MinionFacts<'a> {
    /// The minion's id.
    pub id: &'a str,
    /// Its grains.
    pub grains: &'a Value,
    /// Its pillar.
    pub pillar: &'a Value,
}

/// Named compound targets (`nodegroups` in the config), as `N@name` and
/// `-N name` expand them: each a string of words or a list of words.
pub type Nodegroups = BTreeMap<String, Value>;

/// Why a target expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "unknown target type {0:?}; use glob, pcre, list, grain, grain_pcre, pillar, pillar_pcre, pillar_exact, ipcidr, compound or nodegroup"
    )]
    /// A `tgt_type` halite does not know.
    UnknownType(String),
    #[error("invalid regular expression {pattern:?}: {reason}")]
    /// A pattern that is not a valid regular expression.
    BadRegex {
        /// The pattern.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },
    #[error("invalid compound target {target:?}: {reason}")]
    /// A compound expression that does not parse.
    BadCompound {
        /// The expression.
        target: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A nodegroup the config does not define.
    #[error("unknown nodegroup {0:?}; define it under `nodegroups` in the config")]
    UnknownNodegroup(String),
    /// A compound engine letter halite does not support.
    #[error("target engine {0}@ is not supported by halite; use G@, P@, I@, J@, S@, E@, L@ or N@")]
    UnsupportedEngine(char),
    /// An ipcidr target (`-S`, `S@`) that is neither an address nor a
    /// network, as Python's `ipaddress` reads them.
    #[error(
        "invalid IP/CIDR target {target:?}: {reason}; give an address (10.0.0.1, 2001:db8::1) or a network (10.0.0.0/8, 10.0.0.0/255.0.0.0, 2001:db8::/32)"
    )]
    BadIpcidr {
        /// The target as written.
        target: String,
        /// Why it is neither.
        reason: String,
    },
    /// Range targeting (`-R`, `R@`), which needs a seco.range server.
    #[error(
        "range targeting (-R, R@) is not supported by halite: it needs a seco.range server, which Salt 3008 only reaches through the optional seco.range Python module (without it Salt answers \"Range matcher unavailable\"); target by glob, list (-L), grain (-G), pillar (-I), ipcidr (-S) or nodegroup (-N) instead"
    )]
    RangeUnsupported,
}

/// Salt's default `delimiter` for grain and pillar targets.
const DEFAULT_DELIMITER: char = ':';

/// Which of a minion's data a `subdict_match` term reads.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Data {
    Grains,
    Pillar,
}

/// How a grain or pillar term compares values: fnmatch (`G@`, `I@`),
/// `re.match` (`P@`, `J@`) or lowercase equality (`pillar_exact`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum ValueMode {
    Glob,
    Regex,
    Exact,
}

/// One engine's matcher, compiled once.
enum Leaf {
    Glob(Glob),
    Pcre(Regex),
    List(Vec<String>),
    Subdict(SubdictPattern),
    Ipcidr(IpTarget),
}

impl Leaf {
    fn new(tgt_type: &str, expr: &str, delimiter: char) -> Result<Self, TargetError> {
        let subdict = |data, mode| Leaf::Subdict(SubdictPattern::new(data, expr, delimiter, mode));
        Ok(match tgt_type {
            "glob" => Leaf::Glob(Glob::new(expr)),
            "pcre" => Leaf::Pcre(python_regex(expr)?),
            "list" => Leaf::List(
                expr.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            ),
            "grain" => subdict(Data::Grains, ValueMode::Glob),
            "grain_pcre" => subdict(Data::Grains, ValueMode::Regex),
            "pillar" => subdict(Data::Pillar, ValueMode::Glob),
            "pillar_pcre" => subdict(Data::Pillar, ValueMode::Regex),
            "pillar_exact" => subdict(Data::Pillar, ValueMode::Exact),
            "ipcidr" => {
                Leaf::Ipcidr(
                    IpTarget::parse(expr).map_err(|reason| TargetError::BadIpcidr {
                        target: expr.to_string(),
                        reason,
                    })?,
                )
            }
            "range" => return Err(TargetError::RangeUnsupported),
            other => return Err(TargetError::UnknownType(other.to_string())),
        })
    }

    fn matches(&self, facts: &MinionFacts<'_>) -> bool {
        match self {
            Leaf::Glob(g) => g.matches(facts.id),
            Leaf::Pcre(r) => r.is_match(facts.id),
            Leaf::List(ids) => ids.iter().any(|i| i == facts.id),
            Leaf::Subdict(p) => p.matches(match p.data {
                Data::Grains => facts.grains,
                Data::Pillar => facts.pillar,
            }),
            Leaf::Ipcidr(t) => t.matches(facts.grains),
        }
    }
}

/// `re.match` semantics: anchored at the start only.
fn python_regex(pattern: &str) -> Result<Regex, TargetError> {
    Regex::new(&format!("^(?:{pattern})")).map_err(|e| TargetError::BadRegex {
        pattern: pattern.to_string(),
        reason: e.to_string(),
    })
}

/// A grain or pillar expression (`a:b:c`) with its value patterns compiled
/// up front: every pattern `subdict_match` can try is a suffix of the
/// expression at a delimiter, or the whole expression.
struct SubdictPattern {
    data: Data,
    expr: String,
    delimiter: char,
    mode: ValueMode,
    /// (pattern as written, compiled lowercase form); `None` is an invalid
    /// regex, which Salt logs and treats as no match.
    compiled: Vec<(String, Option<ValuePattern>)>,
}

enum ValuePattern {
    Glob(Glob),
    Regex(Regex),
    Exact(String),
}

impl SubdictPattern {
    fn new(data: Data, expr: &str, delimiter: char, mode: ValueMode) -> Self {
        let mut suffixes = vec![expr];
        for (i, c) in expr.char_indices() {
            if c == delimiter || c == DEFAULT_DELIMITER {
                suffixes.push(&expr[i + c.len_utf8()..]);
            }
        }
        let compiled = suffixes
            .into_iter()
            .map(|s| (s.to_string(), compile_value_pattern(s, mode)))
            .collect();
        SubdictPattern {
            data,
            expr: expr.to_string(),
            delimiter,
            mode,
            compiled,
        }
    }

    fn matches(&self, data: &Value) -> bool {
        self.subdict_match(Node::Value(data), &self.expr, self.delimiter)
    }

    /// `salt.utils.data.subdict_match`: `a:b:c` matches `data[a][b]` against
    /// `c` or `data[a]` against `b:c`, deeper keys first; lists match when
    /// a member does; dicts when a key does.
    fn subdict_match(&self, data: Node<'_>, expr: &str, delimiter: char) -> bool {
        let splits: Vec<&str> = expr.split(delimiter).collect();
        if splits.len() < 2 {
            // No delimiter: this can't possibly be a match.
            return false;
        }
        let delim = delimiter.to_string();
        for idx in (1..splits.len()).rev() {
            let key = splits[..idx].join(&delim);
            let (matchstr, found) = if key == "*" {
                // Everything under the top level.
                (expr.to_string(), Some(data))
            } else {
                (
                    splits[idx..].join(&delim),
                    traverse_dict_and_list(data, &key, delimiter),
                )
            };
            let Some(found) = found else { continue };
            if let Some(m) = found.as_map() {
                // Salt's `match == {}`: a missing key and an empty dict are
                // the same to it.
                if !m.is_empty() && self.dict_match(m, &matchstr) {
                    return true;
                }
                continue;
            }
            let Node::Value(found) = found else { continue };
            match found {
                Value::Array(members) => {
                    for member in members {
                        if let Value::Object(m) = member {
                            if self.dict_match(m, &matchstr) {
                                return true;
                            }
                        }
                        if self.value_match(member, &matchstr) {
                            return true;
                        }
                    }
                }
                scalar => {
                    if self.value_match(scalar, &matchstr) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// `subdict_match`'s `_dict_match`.
    fn dict_match(&self, target: &Map, pattern: &str) -> bool {
        let (wildcard, pattern) = match pattern.strip_prefix("*:") {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        if pattern == "*" || target.contains_key(pattern) {
            return true;
        }
        if target
            .keys()
            .any(|k| self.str_match(&k.to_lowercase(), pattern))
        {
            return true;
        }
        // Salt recurses with the default delimiter here, whatever the
        // caller's was.
        if self.subdict_match(Node::Map(target), pattern, DEFAULT_DELIMITER) {
            return true;
        }
        if wildcard {
            for v in target.values() {
                let hit = match v {
                    Value::Object(m) => self.dict_match(m, pattern),
                    Value::Array(items) => items.iter().any(|i| self.value_match(i, pattern)),
                    other => self.value_match(other, pattern),
                };
                if hit {
                    return true;
                }
            }
        }
        false
    }

    /// `subdict_match`'s `_match`: `str(target).lower()` against the
    /// lowercased pattern.
    fn value_match(&self, target: &Value, pattern: &str) -> bool {
        self.str_match(&py_str(target).to_lowercase(), pattern)
    }

    fn str_match(&self, target_lower: &str, pattern: &str) -> bool {
        let found = self.compiled.iter().find(|(p, _)| p == pattern);
        let owned;
        let compiled = match found {
            Some((_, c)) => c.as_ref(),
            None => {
                owned = compile_value_pattern(pattern, self.mode);
                owned.as_ref()
            }
        };
        match compiled {
            Some(ValuePattern::Glob(g)) => g.matches(target_lower),
            Some(ValuePattern::Regex(r)) => r.is_match(target_lower),
            Some(ValuePattern::Exact(e)) => target_lower == e,
            None => false,
        }
    }
}

fn compile_value_pattern(pattern: &str, mode: ValueMode) -> Option<ValuePattern> {
    let lower = pattern.to_lowercase();
    match mode {
        ValueMode::Regex => python_regex(&lower).ok().map(ValuePattern::Regex),
        ValueMode::Glob => Some(ValuePattern::Glob(Glob::new(&lower))),
        ValueMode::Exact => Some(ValuePattern::Exact(lower)),
    }
}

/// `salt.utils.data.traverse_dict_and_list`: follows `key` through dicts
/// and lists (a number indexes a list, anything else looks into the dicts
/// in it). `None` when the path does not exist.
fn traverse_dict_and_list<'v>(data: Node<'v>, key: &str, delimiter: char) -> Option<Node<'v>> {
    let mut ptr = data;
    for each in key.split(delimiter) {
        ptr = Node::Value(match ptr {
            Node::Value(Value::Array(items)) => {
                let embedded = items
                    .iter()
                    .filter_map(Value::as_object)
                    .find_map(|m| m.get(each));
                match (embedded, each.trim().parse::<i64>()) {
                    (Some(v), _) => v,
                    (None, Ok(i)) => {
                        // Python indexes from the end with negative numbers.
                        let idx = if i < 0 { items.len() as i64 + i } else { i };
                        usize::try_from(idx).ok().and_then(|i| items.get(i))?
                    }
                    (None, Err(_)) => return None,
                }
            }
            other => other.as_map()?.get(each)?,
        });
    }
    Some(ptr)
}

/// Where `subdict_match` looks: any value, or a dict it recurses into
/// (borrowed, so recursion never copies the minion's data).
#[derive(Clone, Copy)]
enum Node<'v> {
    Value(&'v Value),
    Map(&'v Map),
}

impl<'v> Node<'v> {
    fn as_map(self) -> Option<&'v Map> {
        match self {
            Node::Map(m) | Node::Value(Value::Object(m)) => Some(m),
            Node::Value(_) => None,
        }
    }
}

/// A parsed target expression.
enum Expr {
    Leaf(Leaf),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    fn eval(&self, facts: &MinionFacts<'_>) -> bool {
        match self {
            Expr::Leaf(l) => l.matches(facts),
            Expr::Not(e) => !e.eval(facts),
            Expr::And(a, b) => a.eval(facts) && b.eval(facts),
            Expr::Or(a, b) => a.eval(facts) || b.eval(facts),
        }
    }
}

/// A target compiled once and matched against any number of minions.
pub struct Target {
    expr: Expr,
}

impl Target {
    /// Compiles `tgt` of `tgt_type` (`glob`, `pcre`, `list`, `grain`,
    /// `grain_pcre`, `pillar`, `pillar_pcre`, `pillar_exact`, `ipcidr`,
    /// `compound`, `nodegroup`);
    /// `N@` words and `nodegroup` targets expand from `nodegroups`.
    pub fn compile(
        tgt: &str,
        tgt_type: &str,
        nodegroups: &Nodegroups,
    ) -> Result<Self, TargetError> {
        let words = match tgt_type {
            "compound" => compound_words(tgt.split_whitespace().map(String::from), nodegroups)?,
            "nodegroup" => {
                let words = nodegroup_comp(tgt, nodegroups, &mut Vec::new())?;
                compound_words(words.into_iter(), nodegroups)?
            }
            other => {
                return Ok(Target {
                    expr: Expr::Leaf(Leaf::new(other, tgt, DEFAULT_DELIMITER)?),
                })
            }
        };
        Ok(Target {
            expr: parse_compound(tgt, &words)?,
        })
    }

    /// Whether the minion described by `facts` is selected.
    pub fn matches(&self, facts: &MinionFacts<'_>) -> bool {
        self.expr.eval(facts)
    }
}

/// Whether `facts` matches `tgt` of type `tgt_type` (a top file's target:
/// no nodegroups are known on the minion). A list value is any of its
/// members for `glob` and `pcre`, its members for `list`.
pub fn matches(tgt: &Value, tgt_type: &str, facts: &MinionFacts<'_>) -> Result<bool, TargetError> {
    if let Value::Array(items) = tgt {
        match tgt_type {
            "glob" | "pcre" => {
                for item in items {
                    if matches(item, tgt_type, facts)? {
                        return Ok(true);
                    }
                }
                return Ok(false);
            }
            "list" => return Ok(items.iter().any(|i| py_str(i) == facts.id)),
            _ => {}
        }
    }
    Ok(Target::compile(&py_str(tgt), tgt_type, &Nodegroups::new())?.matches(facts))
}

/// Evaluates a compound target for one minion (no nodegroups known).
pub fn compound(expr: &str, facts: &MinionFacts<'_>) -> Result<bool, TargetError> {
    Ok(Target::compile(expr, "compound", &Nodegroups::new())?.matches(facts))
}

const OPERATORS: [&str; 5] = ["and", "or", "not", "(", ")"];

/// `salt.utils.minions.nodegroup_comp`: the words of nodegroup `name`,
/// with nested `N@` groups expanded in parentheses. A group of plain words
/// (no operators, engines or `*`) is a list of ids (`L@a,b`), or a regex
/// (`E@...`) when a word has regex characters.
fn nodegroup_comp(
    name: &str,
    nodegroups: &Nodegroups,
    seen: &mut Vec<String>,
) -> Result<Vec<String>, TargetError> {
    if seen.iter().any(|g| g == name) {
        return Err(TargetError::BadCompound {
            target: format!("N@{name}"),
            reason: format!("nodegroup {name:?} includes itself"),
        });
    }
    let words: Vec<String> = match nodegroups.get(name) {
        Some(Value::String(s)) => s.split_whitespace().map(String::from).collect(),
        Some(Value::Array(items)) => items.iter().map(py_str).collect(),
        Some(other) => {
            return Err(TargetError::BadCompound {
                target: format!("N@{name}"),
                reason: format!(
                    "nodegroup {name:?} is {}, not a string or a list of words",
                    py_str(other)
                ),
            })
        }
        None => return Err(TargetError::UnknownNodegroup(name.to_string())),
    };
    seen.push(name.to_string());
    let mut expanded_nested = false;
    let mut out = Vec::new();
    for word in &words {
        match word.strip_prefix("N@") {
            Some(inner) if !inner.is_empty() => {
                expanded_nested = true;
                out.extend(nodegroup_comp(inner, nodegroups, seen)?);
            }
            _ => out.push(word.clone()),
        }
    }
    seen.pop();
    if !expanded_nested {
        if let Some(joined) = nodegroup_as_list(&words) {
            return Ok(vec![joined]);
        }
    }
    // Parentheses always: `N@g and x` keeps `g` together. (Salt drops them
    // for a top-level group without nested groups, so there `g`'s `or`
    // would bind looser than the `and`.)
    if !out.is_empty() {
        out.insert(0, "(".into());
        out.push(")".into());
    }
    Ok(out)
}

/// `salt.utils.minions._nodegroup_regex`.
fn nodegroup_as_list(words: &[String]) -> Option<String> {
    if words.iter().any(|w| OPERATORS.contains(&w.as_str())) {
        return None;
    }
    let engine = |w: &str| {
        let b = w.as_bytes();
        b.len() >= 2 && b[0].is_ascii_uppercase() && b[1] == b'@'
    };
    if words.iter().any(|w| w.contains('*') || engine(w)) {
        return None;
    }
    let regex_chars = ['(', '[', '{', '\\', '?', '}', ']', ')'];
    let prefix = if words.iter().any(|w| w.contains(regex_chars)) {
        "E@"
    } else {
        "L@"
    };
    Some(format!("{prefix}{}", words.join(",")))
}

/// Expands `N@` words in place (Salt's compound matcher does the same
/// as it reads them).
fn compound_words(
    words: impl Iterator<Item = String>,
    nodegroups: &Nodegroups,
) -> Result<Vec<String>, TargetError> {
    let mut out = Vec::new();
    for word in words {
        let (lead, core, trail) = peel_parens(&word);
        out.extend(std::iter::repeat_n("(".to_string(), lead));
        match parse_target(core) {
            (Some('N'), _, group) => {
                let expanded = nodegroup_comp(group, nodegroups, &mut Vec::new())?;
                out.extend(compound_words(expanded.into_iter(), nodegroups)?);
            }
            _ if !core.is_empty() => out.push(core.to_string()),
            _ => {}
        }
        out.extend(std::iter::repeat_n(")".to_string(), trail));
    }
    Ok(out)
}

/// Salt needs parentheses as words of their own; halite also accepts them
/// glued to a word (`(web*`, `G@os:Debian)`). A trailing `)` is only peeled
/// while the word has more `)` than `(`, so `E@web(1|2)` stays whole.
fn peel_parens(word: &str) -> (usize, &str, usize) {
    if word.len() == 1 {
        return match word {
            "(" => (1, "", 0),
            ")" => (0, "", 1),
            _ => (0, word, 0),
        };
    }
    let mut core = word;
    let mut lead = 0;
    while let Some(rest) = core.strip_prefix('(') {
        lead += 1;
        core = rest;
    }
    let mut trail = 0;
    while core.ends_with(')') && core.matches(')').count() > core.matches('(').count() {
        trail += 1;
        core = &core[..core.len() - 1];
    }
    (lead, core, trail)
}

/// Salt's `TARGET_REX`: an engine letter, for `G P I J` an optional
/// delimiter character, then `@` and a non-empty pattern. Anything else is
/// a glob on the id.
fn parse_target(word: &str) -> (Option<char>, Option<char>, &str) {
    let mut chars = word.chars();
    let Some(engine) = chars.next().filter(|c| "GPIJLNSERTM".contains(*c)) else {
        return (None, None, word);
    };
    let rest = chars.as_str();
    if "GPIJ".contains(engine) {
        let mut r = rest.chars();
        if let (Some(delim), Some('@')) = (r.next(), r.next()) {
            let pattern = r.as_str();
            if !pattern.is_empty() {
                return (Some(engine), Some(delim), pattern);
            }
        }
    }
    match rest.strip_prefix('@') {
        Some(pattern) if !pattern.is_empty() => (Some(engine), None, pattern),
        _ => (None, None, word),
    }
}

/// One compound word as a matcher.
fn compound_leaf(word: &str) -> Result<Leaf, TargetError> {
    let (engine, delimiter, pattern) = parse_target(word);
    let delimiter = delimiter.unwrap_or(DEFAULT_DELIMITER);
    match engine {
        None => Leaf::new("glob", word, delimiter),
        Some('G') => Leaf::new("grain", pattern, delimiter),
        Some('P') => Leaf::new("grain_pcre", pattern, delimiter),
        Some('I') => Leaf::new("pillar", pattern, delimiter),
        Some('J') => Leaf::new("pillar_pcre", pattern, delimiter),
        Some('E') => Leaf::new("pcre", pattern, delimiter),
        Some('L') => Leaf::new("list", pattern, delimiter),
        Some('S') => Leaf::new("ipcidr", pattern, delimiter),
        Some('R') => Err(TargetError::RangeUnsupported),
        Some(other) => Err(TargetError::UnsupportedEngine(other)),
    }
}

/// Parses compound words: `not` binds tightest, then `and`, then `or`, as
/// in Python. A `not` right after a target means `and not`; two targets
/// side by side are an error (Salt's eval fails on them).
fn parse_compound(source: &str, words: &[String]) -> Result<Expr, TargetError> {
    let mut p = Parser {
        words,
        pos: 0,
        source,
    };
    if words.is_empty() {
        return Err(p.bad("it is empty"));
    }
    let expr = p.or()?;
    match p.peek() {
        None => Ok(expr),
        Some(")") => Err(p.bad("a `)` has no matching `(`")),
        Some(_) => Err(p.bad("two targets side by side; join them with `and` or `or`")),
    }
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

    fn bad(&self, reason: &str) -> TargetError {
        TargetError::BadCompound {
            target: self.source.to_string(),
            reason: reason.to_string(),
        }
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
                // Salt inserts `and` before a `not` that follows a target.
                Some("not") => left = Expr::And(Box::new(left), Box::new(self.not()?)),
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
        let Some(word) = self.peek().map(str::to_string) else {
            return Err(self.bad("it ends where a target is expected"));
        };
        self.pos += 1;
        match word.as_str() {
            "(" => {
                let inner = self.or()?;
                if self.peek() != Some(")") {
                    return Err(self.bad("a `(` is never closed"));
                }
                self.pos += 1;
                Ok(inner)
            }
            ")" | "and" | "or" => Err(self.bad(&format!("`{word}` where a target is expected"))),
            w => Ok(Expr::Leaf(compound_leaf(w)?)),
        }
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

    #[test]
    fn list_values_and_pillar_pcre() {
        let grains = json!({"os": "Debian"});
        let pillar = json!({"env": "prod"});
        let f = MinionFacts {
            id: "web1",
            grains: &grains,
            pillar: &pillar,
        };
        assert!(matches(&json!(["db*", "web?"]), "glob", &f).unwrap());
        assert!(matches(&json!(["x", "web1"]), "list", &f).unwrap());
        assert!(matches(&json!("env:PR.*"), "pillar_pcre", &f).unwrap());
        assert!(matches(&json!("J@env:p.od"), "compound", &f).unwrap());
        assert!(!matches(&json!("G@os:Debian"), "glob", &f).unwrap());
        assert!(matches!(
            matches(&json!("x"), "range", &f),
            Err(TargetError::RangeUnsupported)
        ));
        assert!(matches!(
            matches(&json!("x"), "nosuch", &f),
            Err(TargetError::UnknownType(_))
        ));
    }

    #[test]
    fn ipcidr_and_pillar_exact_in_compounds_and_tops() {
        let grains = json!({"os": "Debian", "ipv4": ["10.1.2.3", "127.0.0.1"], "ipv6": ["::1"]});
        let pillar = json!({"role": "Web", "tier": "web-prod"});
        let f = MinionFacts {
            id: "web1",
            grains: &grains,
            pillar: &pillar,
        };
        assert!(matches(&json!("10.0.0.0/8"), "ipcidr", &f).unwrap());
        assert!(matches(&json!("127.0.0.1"), "ipcidr", &f).unwrap());
        assert!(!matches(&json!("192.168.0.0/16"), "ipcidr", &f).unwrap());
        assert!(compound("S@10.1.2.0/24 and G@os:Debian", &f).unwrap());
        assert!(!compound("S@10.1.2.0/24 and not G@os:Debian", &f).unwrap());
        assert!(compound("S@::1 or S@192.168.0.1", &f).unwrap());
        assert!(matches!(
            compound("S@10.0.0.1/8 and web1", &f),
            Err(TargetError::BadIpcidr { .. })
        ));
        // pillar_exact: case-insensitive equality, no globbing.
        assert!(matches(&json!("role:web"), "pillar_exact", &f).unwrap());
        assert!(!matches(&json!("tier:web*"), "pillar_exact", &f).unwrap());
        assert!(matches(&json!("tier:web*"), "pillar", &f).unwrap());
    }

    /// `salt.utils.data.subdict_match` corner cases, as Salt 3008 has them.
    #[test]
    fn subdict_match_follows_salt() {
        let grains = json!({
            "os": "Ubuntu",
            "url": "http://x",
            "virtual": true,
            "ip": ["10.0.0.1", {"eth0": "10.0.0.2"}],
            "env": {"tier": "prod", "site": {"dc": "lon"}},
            "empty": {},
            "nested": [["a", "b"]],
        });
        let m = |expr: &str, regex: bool| {
            let mode = if regex {
                ValueMode::Regex
            } else {
                ValueMode::Glob
            };
            SubdictPattern::new(Data::Grains, expr, ':', mode).matches(&grains)
        };
        // Case-insensitive on both sides, glob and regex.
        assert!(m("os:ubuntu", false));
        assert!(m("os:UBU*", false) && m("os:(DEB|UBU)", true));
        // Keys are not case-folded.
        assert!(!m("OS:ubuntu", false));
        // The value may contain the delimiter.
        assert!(m("url:http://x", false));
        // Python's str(): True.
        assert!(m("virtual:true", false));
        // List members, dicts inside lists, numeric indexes.
        assert!(m("ip:10.0.0.1", false));
        assert!(m("ip:eth0:10.0.0.2", false));
        assert!(m("ip:0:10.0.0.1", false) && m("ip:-2:10.0.0.1", false));
        assert!(!m("ip:5:10.0.0.1", false));
        // A dict matches by key (exact or glob), or deeper.
        assert!(m("env:tier", false) && m("env:ti*", false) && m("env:*", false));
        assert!(m("env:site:dc:lon", false));
        // `*:` descends one level into every key.
        assert!(m("env:*:prod", false) && !m("env:*:lon", false));
        assert!(m("*:ubuntu", false) && !m("*:lon", false));
        // An empty dict is a missing key to Salt.
        assert!(!m("empty:*", false));
        // A list inside a list is matched as Python prints it.
        assert!(m("nested:*'a', 'b'*", false));
        // No delimiter, no match; an invalid regex is no match, not an error.
        assert!(!m("os", false));
        assert!(!m("os:(", true));
        // Unknown grains (Null) never match.
        assert!(
            !SubdictPattern::new(Data::Grains, "*:*", ':', ValueMode::Glob).matches(&Value::Null)
        );
        assert!(
            !SubdictPattern::new(Data::Grains, "os:*", ':', ValueMode::Glob).matches(&Value::Null)
        );
    }

    #[test]
    fn custom_delimiter_and_engines() {
        let grains = json!({"a": {"b": "c:d"}});
        let f = MinionFacts {
            id: "web1",
            grains: &grains,
            pillar: &Value::Null,
        };
        assert!(compound("G|@a|b|c:d", &f).unwrap());
        assert!(compound("G@a:b:c:d", &f).unwrap());
        // Not an engine: a glob on the id.
        assert!(!compound("X@web1", &f).unwrap());
        assert!(compound("web1", &f).unwrap());
        assert!(matches!(
            compound("T@x", &f),
            Err(TargetError::UnsupportedEngine('T'))
        ));
        assert!(matches!(
            compound("R@%cluster", &f),
            Err(TargetError::RangeUnsupported)
        ));
        assert_eq!(parse_target("G@"), (None, None, "G@"));
        assert_eq!(parse_target("E@web(1|2)"), (Some('E'), None, "web(1|2)"));
    }

    #[test]
    fn compound_grammar_follows_salt() {
        let g = json!({});
        let f = MinionFacts {
            id: "web1",
            grains: &g,
            pillar: &g,
        };
        // `not` after a target is `and not`.
        assert!(compound("web* not db*", &f).unwrap());
        assert!(!compound("web* not web1", &f).unwrap());
        // `and` binds tighter than `or`; `not` tighter than both.
        assert!(compound("web1 or db1 and db2", &f).unwrap());
        assert!(!compound("not web1 or db1", &f).unwrap());
        // Parentheses glued to words, and regexes with parentheses.
        assert!(compound("(web1 or db1) and E@web(1|2)", &f).unwrap());
        assert!(compound("((web1))", &f).unwrap());
        for bad in [
            "web1 db1",
            "( web1",
            "web1 )",
            "and web1",
            "web1 or",
            "",
            "( and web1 )",
        ] {
            assert!(
                matches!(compound(bad, &f), Err(TargetError::BadCompound { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            compound("N@x", &f),
            Err(TargetError::UnknownNodegroup(_))
        ));
    }

    #[test]
    fn nodegroups_expand_like_salt() {
        let mut groups = Nodegroups::new();
        groups.insert("ids".into(), json!(["web1", "db1"]));
        groups.insert("ids_str".into(), json!("web2 db2"));
        groups.insert("re".into(), json!("web(1|2)"));
        groups.insert("globs".into(), json!("web*"));
        groups.insert("either".into(), json!("web1 or db1"));
        groups.insert("empty".into(), json!(""));
        groups.insert("bad".into(), json!(3));
        let g = json!({});
        let hit = |tgt: &str, tgt_type: &str, id: &str| {
            let f = MinionFacts {
                id,
                grains: &g,
                pillar: &g,
            };
            Target::compile(tgt, tgt_type, &groups).unwrap().matches(&f)
        };
        assert!(hit("ids", "nodegroup", "db1") && !hit("ids", "nodegroup", "web2"));
        assert!(hit("ids_str", "nodegroup", "db2"));
        assert!(hit("re", "nodegroup", "web2"));
        assert!(hit("globs", "nodegroup", "web9"));
        assert!(!hit("empty", "nodegroup", "web1"));
        // A group keeps its own precedence inside a compound.
        assert!(!hit("N@either and web*", "compound", "db1"));
        assert!(matches!(
            Target::compile("bad", "nodegroup", &groups),
            Err(TargetError::BadCompound { .. })
        ));
    }
}
