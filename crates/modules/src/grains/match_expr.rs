//! Salt's `expr_match`: a pattern matches a name as a shell glob (Python's
//! `fnmatch`, where `*` also crosses `/`) or else as a whole-string regular
//! expression. Used for `grains_blacklist` and `grains.filter_by`.

use regex::Regex;

/// Translates a Python `fnmatch` pattern into an anchored regular expression.
pub fn fnmatch_regex(pattern: &str) -> String {
    let mut out = String::from("^(?s:");
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '[' => {
                // Find the closing bracket ("]" right after "[" or "[!" is literal).
                let mut j = i;
                if j < chars.len() && chars[j] == '!' {
                    j += 1;
                }
                if j < chars.len() && chars[j] == ']' {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j >= chars.len() {
                    out.push_str("\\[");
                } else {
                    let mut class: String = chars[i..j].iter().collect();
                    i = j + 1;
                    if let Some(rest) = class.strip_prefix('!') {
                        class = format!("^{rest}");
                    } else if class.starts_with('^') {
                        class = format!("\\{class}");
                    }
                    let class = class
                        .replace('\\', "\\\\")
                        .replace('[', "\\[")
                        .replace("&&", "\\&\\&")
                        .replace("~~", "\\~\\~");
                    out.push('[');
                    out.push_str(&class);
                    out.push(']');
                }
            }
            other => out.push_str(&regex::escape(&other.to_string())),
        }
    }
    out.push_str(")$");
    out
}

/// Whether `name` matches the glob `pattern` (case-sensitive, as on POSIX).
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    Regex::new(&fnmatch_regex(pattern)).is_ok_and(|re| re.is_match(name))
}

/// Whether `name` matches `expr` as a glob, or else as a regular expression
/// that must match the whole name.
pub fn expr_match(name: &str, expr: &str) -> bool {
    fnmatch(name, expr) || Regex::new(&format!(r"\A(?:{expr})\z")).is_ok_and(|re| re.is_match(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_follow_python_fnmatch() {
        assert!(fnmatch("ip4_interfaces", "ip*"));
        assert!(fnmatch("a/b", "a*"));
        assert!(fnmatch("osfinger", "os[!a]inger"));
        assert!(!fnmatch("osainger", "os[!a]inger"));
        assert!(fnmatch("x[", "x["));
        assert!(!fnmatch("Debian", "debian"));
    }

    #[test]
    fn regex_is_the_fallback() {
        assert!(expr_match("ipv4", "ipv[46]"));
        assert!(expr_match("ipv6", r"ipv\d"));
        assert!(!expr_match("ipv6x", r"ipv\d"));
        assert!(!expr_match("abc", "(unclosed"));
    }
}
