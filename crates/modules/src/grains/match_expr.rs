//! Salt's `expr_match`: a pattern matches a name as a shell glob (Python's
//! `fnmatch`, where `*` also crosses `/`) or else as a whole-string regular
//! expression. Used for `grains_blacklist` and `grains.filter_by`.

use halite_salt_rules::fnmatch;
use regex::Regex;

/// Whether `name` matches `expr` as a glob, or else as a regular expression
/// that must match the whole name.
pub fn expr_match(name: &str, expr: &str) -> bool {
    fnmatch(name, expr) || Regex::new(&format!(r"\A(?:{expr})\z")).is_ok_and(|re| re.is_match(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_is_the_fallback() {
        assert!(expr_match("ipv4", "ipv[46]"));
        assert!(expr_match("ipv6", r"ipv\d"));
        assert!(!expr_match("ipv6x", r"ipv\d"));
        assert!(!expr_match("abc", "(unclosed"));
    }
}
