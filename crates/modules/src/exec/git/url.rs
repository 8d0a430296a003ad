//! Salt's `salt.utils.url` rules for git remotes: `https_user` and
//! `https_pass` go into an https URL's userinfo, percent-encoded, and are
//! redacted from anything shown to the user.

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

/// The characters Python's `quote(s, safe='')` leaves alone besides
/// letters and digits.
const USERINFO: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// `url` with `user` (and `password`) as its userinfo, as Salt's
/// `add_http_basic_auth(..., https_only=True)`: nothing to add leaves the
/// URL alone, and credentials on anything but https are refused with
/// Salt's message.
pub fn add_http_basic_auth(
    url: &str,
    user: Option<&str>,
    password: Option<&str>,
) -> Result<String, String> {
    if user.is_none() && password.is_none() {
        return Ok(url.to_string());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("Basic Auth only supported for HTTPS".into());
    };
    if !scheme.eq_ignore_ascii_case("https") {
        return Err("Basic Auth only supported for HTTPS".into());
    }
    let quote = |s: &str| utf8_percent_encode(s, USERINFO).to_string();
    let userinfo = match password {
        None => quote(user.unwrap_or("None")),
        Some(p) => format!("{}:{}", quote(user.unwrap_or("None")), quote(p)),
    };
    Ok(format!(
        "{}://{userinfo}@{rest}",
        scheme.to_ascii_lowercase()
    ))
}

/// `output` with every `http(s)://...@` credential replaced by
/// `<redacted>`, as Salt's `redact_http_basic_auth` (greedy to the last
/// `@` of the text, like its regex).
pub fn redact_http_basic_auth(output: &str) -> String {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r"(?i)(https?)://.*@").ok());
    match re {
        Some(re) => re.replace_all(output, "${1}://<redacted>@").into_owned(),
        None => output.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_into_https_urls_only_and_are_redacted() {
        assert_eq!(
            add_http_basic_auth("https://h/r.git", Some("me"), Some("p@ss/w")).unwrap(),
            "https://me:p%40ss%2Fw@h/r.git"
        );
        assert_eq!(
            add_http_basic_auth("https://h/r.git", Some("me"), None).unwrap(),
            "https://me@h/r.git"
        );
        assert_eq!(
            add_http_basic_auth("file:///r", None, None).unwrap(),
            "file:///r"
        );
        assert_eq!(
            add_http_basic_auth("http://h/r", Some("u"), None).unwrap_err(),
            "Basic Auth only supported for HTTPS"
        );
        assert_eq!(
            redact_http_basic_auth("fatal: https://me:pw@h/r.git not found"),
            "fatal: https://<redacted>@h/r.git not found"
        );
    }
}
