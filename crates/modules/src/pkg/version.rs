//! Version comparison: dpkg's and rpm's ordering rules, and Salt's version
//! specs (`>=1.0`, `<=2`, `==1.0-1`, `1.0*`, `>=1,<2`).
//!
//! Comparing in-process keeps `pkg.installed` free of one `dpkg
//! --compare-versions` process per package.

use std::cmp::Ordering;

/// Compares two Debian versions (`[epoch:]upstream[-revision]`) exactly as
/// `dpkg --compare-versions` does, `~` sorting before everything.
pub fn deb_cmp(a: &str, b: &str) -> Ordering {
    let (ea, ua, ra) = split_deb(a);
    let (eb, ub, rb) = split_deb(b);
    ea.cmp(&eb)
        .then_with(|| deb_part_cmp(ua, ub))
        .then_with(|| deb_part_cmp(ra, rb))
}

fn split_deb(v: &str) -> (u64, &str, &str) {
    let v = v.trim();
    let (epoch, rest) = match v.split_once(':') {
        Some((e, r)) if !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit()) => {
            (e.parse().unwrap_or(0), r)
        }
        _ => (0, v),
    };
    match rest.rsplit_once('-') {
        Some((u, r)) => (epoch, u, r),
        None => (epoch, rest, ""),
    }
}

/// dpkg's character order for the non-digit parts: `~` first, then the end
/// of the string, then letters, then everything else.
fn deb_char_order(c: Option<u8>) -> i32 {
    match c {
        Some(b'~') => -1,
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => c as i32,
        Some(c) => c as i32 + 256,
    }
}

fn deb_part_cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        // Non-digit prefix.
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let ac = deb_char_order(a.get(i).copied());
            let bc = deb_char_order(b.get(j).copied());
            if ac != bc {
                return ac.cmp(&bc);
            }
            i += 1;
            j += 1;
        }
        // Digit run, compared numerically.
        while i < a.len() && a[i] == b'0' {
            i += 1;
        }
        while j < b.len() && b[j] == b'0' {
            j += 1;
        }
        let si = i;
        let sj = j;
        while i < a.len() && a[i].is_ascii_digit() {
            i += 1;
        }
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let (na, nb) = (&a[si..i], &b[sj..j]);
        let ord = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// Compares two rpm versions (`[epoch:]version[-release]`) with rpm's
/// `rpmvercmp` rules (`~` before anything, `^` after the base version).
pub fn rpm_cmp(a: &str, b: &str) -> Ordering {
    let (ea, va, ra) = split_rpm(a);
    let (eb, vb, rb) = split_rpm(b);
    ea.cmp(&eb)
        .then_with(|| rpmvercmp(va, vb))
        .then_with(|| match (ra, rb) {
            (Some(x), Some(y)) => rpmvercmp(x, y),
            _ => Ordering::Equal,
        })
}

fn split_rpm(v: &str) -> (u64, &str, Option<&str>) {
    let v = v.trim();
    let (epoch, rest) = match v.split_once(':') {
        Some((e, r)) if e.bytes().all(|c| c.is_ascii_digit()) => (e.parse().unwrap_or(0), r),
        _ => (0, v),
    };
    match rest.rsplit_once('-') {
        Some((ver, rel)) => (epoch, ver, Some(rel)),
        None => (epoch, rest, None),
    }
}

fn rpmvercmp(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    loop {
        while i < a.len() && !a[i].is_ascii_alphanumeric() && a[i] != b'~' && a[i] != b'^' {
            i += 1;
        }
        while j < b.len() && !b[j].is_ascii_alphanumeric() && b[j] != b'~' && b[j] != b'^' {
            j += 1;
        }
        let (ta, tb) = (a.get(i).copied(), b.get(j).copied());
        if ta == Some(b'~') || tb == Some(b'~') {
            if ta != Some(b'~') {
                return Ordering::Greater;
            }
            if tb != Some(b'~') {
                return Ordering::Less;
            }
            i += 1;
            j += 1;
            continue;
        }
        if ta == Some(b'^') || tb == Some(b'^') {
            if i >= a.len() {
                return Ordering::Less;
            }
            if j >= b.len() {
                return Ordering::Greater;
            }
            if ta != Some(b'^') {
                return Ordering::Greater;
            }
            if tb != Some(b'^') {
                return Ordering::Less;
            }
            i += 1;
            j += 1;
            continue;
        }
        if i >= a.len() || j >= b.len() {
            break;
        }
        let numeric = a[i].is_ascii_digit();
        let (si, sj) = (i, j);
        if numeric {
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
        } else {
            while i < a.len() && a[i].is_ascii_alphabetic() {
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_alphabetic() {
                j += 1;
            }
        }
        let (mut sa, mut sb) = (&a[si..i], &b[sj..j]);
        if sb.is_empty() {
            // Segments of different kinds: numeric is newer.
            return if numeric {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        if numeric {
            while sa.first() == Some(&b'0') {
                sa = &sa[1..];
            }
            while sb.first() == Some(&b'0') {
                sb = &sb[1..];
            }
            let ord = sa.len().cmp(&sb.len());
            if ord != Ordering::Equal {
                return ord;
            }
        }
        let ord = sa.cmp(sb);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    match (i >= a.len(), j >= b.len()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        _ => Ordering::Greater,
    }
}

/// A comparison operator in a version spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oper {
    /// `==` (or no operator).
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

/// Splits `">=1.0"` into (`Ge`, `"1.0"`); no operator (or `=`) means `Eq`
/// (Salt's `_get_comparison_spec`).
pub fn split_comparison(spec: &str) -> (Oper, &str) {
    let spec = spec.trim();
    for (prefix, oper) in [
        (">=", Oper::Ge),
        ("<=", Oper::Le),
        ("==", Oper::Eq),
        ("!=", Oper::Ne),
        (">", Oper::Gt),
        ("<", Oper::Lt),
        ("=", Oper::Eq),
    ] {
        if let Some(rest) = spec.strip_prefix(prefix) {
            return (oper, rest.trim());
        }
    }
    (Oper::Eq, spec)
}

/// Whether the spec has a `<`/`>` operator, so it must be resolved against
/// the versions a repository offers before installing.
pub fn has_range(spec: &str) -> bool {
    spec.trim_start().starts_with(['<', '>'])
}

fn epoch_less(v: &str) -> &str {
    match v.split_once(':') {
        Some((e, r)) if e.bytes().all(|c| c.is_ascii_digit()) => r,
        _ => v,
    }
}

/// Whether `installed` satisfies one operator/version pair. `==` also
/// matches shell globs (`1.0*`) and ignores the epoch when the wanted
/// version has none, as Salt does.
pub fn satisfies_one(
    cmp: &dyn Fn(&str, &str) -> Ordering,
    installed: &str,
    oper: Oper,
    wanted: &str,
) -> bool {
    if oper == Oper::Eq && wanted.contains(['*', '?', '[']) {
        return glob_match(wanted, installed) || glob_match(wanted, epoch_less(installed));
    }
    let installed = if oper == Oper::Eq && !wanted.contains(':') {
        epoch_less(installed)
    } else {
        installed
    };
    let ord = cmp(installed, wanted);
    match oper {
        Oper::Eq => ord == Ordering::Equal,
        Oper::Ne => ord != Ordering::Equal,
        Oper::Lt => ord == Ordering::Less,
        Oper::Le => ord != Ordering::Greater,
        Oper::Gt => ord == Ordering::Greater,
        Oper::Ge => ord != Ordering::Less,
    }
}

/// Whether any of `installed` satisfies every comma-separated condition of
/// `spec` (Salt's `_fulfills_version_string`).
pub fn satisfies(cmp: &dyn Fn(&str, &str) -> Ordering, installed: &[String], spec: &str) -> bool {
    let conditions: Vec<(Oper, &str)> = spec
        .split(',')
        .filter(|c| !c.trim().is_empty())
        .map(split_comparison)
        .collect();
    installed
        .iter()
        .any(|v| conditions.iter().all(|(o, w)| satisfies_one(cmp, v, *o, w)))
}

/// The newest of `candidates` that satisfies `spec` (Salt's
/// `salt.utils.pkg.match_version`).
pub fn best_match(
    cmp: &dyn Fn(&str, &str) -> Ordering,
    spec: &str,
    candidates: &[String],
) -> Option<String> {
    let mut matching: Vec<&String> = candidates
        .iter()
        .filter(|c| satisfies(cmp, std::slice::from_ref(*c), spec))
        .collect();
    matching.sort_by(|a, b| cmp(a, b));
    matching.last().map(|s| s.to_string())
}

/// Shell-style glob (`*`, `?`) for version strings, with the shared
/// `fnmatch`. A `[` is taken literally (as this rule always has here, where
/// Python's fnmatch would read a set): it is written as the set `[[]`.
fn glob_match(pattern: &str, text: &str) -> bool {
    halite_salt_rules::fnmatch(text, &pattern.replace('[', "[[]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deb_order_matches_dpkg() {
        let ordered = [
            "1.0~rc1",
            "1.0",
            "1.0-1",
            "1.0-1ubuntu1",
            "1.0a",
            "1.0+b1",
            "1.1",
            "1.10",
            "1:0.1",
        ];
        for w in ordered.windows(2) {
            assert_eq!(deb_cmp(w[0], w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(
                deb_cmp(w[1], w[0]),
                Ordering::Greater,
                "{} > {}",
                w[1],
                w[0]
            );
        }
        assert_eq!(deb_cmp("1.01", "1.1"), Ordering::Equal);
        assert_eq!(deb_cmp("0:1.0", "1.0"), Ordering::Equal);
    }

    #[test]
    fn rpm_order_matches_rpmvercmp() {
        let ordered = [
            "1.0~rc1", "1.0", "1.0^git1", "1.0a", "1.0.1", "1.1", "1.10", "1:0.1",
        ];
        for w in ordered.windows(2) {
            assert_eq!(rpm_cmp(w[0], w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
        }
        assert_eq!(rpm_cmp("1.0-1.el9", "1.0-1.el9"), Ordering::Equal);
        assert_eq!(rpm_cmp("1.0-2", "1.0-10"), Ordering::Less);
        assert_eq!(
            rpm_cmp("1.0", "1.0-5"),
            Ordering::Equal,
            "no release on one side compares equal"
        );
    }

    #[test]
    fn specs_follow_salt() {
        let cmp = |a: &str, b: &str| deb_cmp(a, b);
        let v = |s: &str| vec![s.to_string()];
        assert!(satisfies(&cmp, &v("2.0-1"), ">=1.0"));
        assert!(!satisfies(&cmp, &v("1.0-1"), ">=2.0"));
        assert!(satisfies(&cmp, &v("1.0-1"), "<=1.0-1"));
        assert!(satisfies(&cmp, &v("1.0-1"), "1.0-1"));
        assert!(
            satisfies(&cmp, &v("1:1.0-1"), "==1.0-1"),
            "epoch ignored for == without epoch"
        );
        assert!(satisfies(&cmp, &v("1.0-1"), "1.0*"));
        assert!(satisfies(&cmp, &v("1.5"), ">=1.0,<2.0"));
        assert!(!satisfies(&cmp, &v("2.5"), ">=1.0,<2.0"));
        let avail = vec!["1.0-1".to_string(), "2.0-1".to_string()];
        assert_eq!(best_match(&cmp, "<=1.5", &avail).as_deref(), Some("1.0-1"));
        assert_eq!(best_match(&cmp, ">=1.0", &avail).as_deref(), Some("2.0-1"));
        assert_eq!(best_match(&cmp, ">3", &avail), None);
        assert_eq!(split_comparison("=1.0"), (Oper::Eq, "1.0"));
    }
}
