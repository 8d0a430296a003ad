//! HTTP(S) through `ureq` 3: blocking (module code is synchronous, so no
//! second async runtime), rustls for TLS with the system's CA store
//! (`rustls-native-certs`, which honours `SSL_CERT_FILE`/`SSL_CERT_DIR`) or
//! Salt's `ca_bundle`, proxies from Salt's `proxy_*` keys.

use std::io::{Read, Write};
use std::sync::{Arc, OnceLock};

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
use ureq::Agent;

use super::{FetchConfig, FetchError};

/// The system's trusted CAs, loaded once per process.
fn system_roots() -> Arc<Vec<Certificate<'static>>> {
    static ROOTS: OnceLock<Arc<Vec<Certificate<'static>>>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!("reading the system CA store: {e}");
            }
            Arc::new(
                found
                    .certs
                    .iter()
                    .map(|c| Certificate::from_der(c.as_ref()).to_owned())
                    .collect(),
            )
        })
        .clone()
}

/// The CAs of a PEM bundle (`ca_bundle`).
fn bundle_roots(path: &std::path::Path) -> Result<Arc<Vec<Certificate<'static>>>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("cannot read ca_bundle {}: {e}", path.display()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => return Err(format!("ca_bundle {}: {e}", path.display())),
        }
    }
    if certs.is_empty() {
        return Err(format!(
            "ca_bundle {} holds no PEM certificate",
            path.display()
        ));
    }
    Ok(Arc::new(certs))
}

/// The host part of a URL (no credentials, no port).
pub(crate) fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let netloc = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let netloc = netloc.rsplit('@').next().unwrap_or(netloc);
    if let Some(v6) = netloc.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    netloc.split(':').next().unwrap_or(netloc)
}

/// A client for `url` under `cfg`. Status codes are returned, not raised,
/// so callers tell a 404 (try the next source) from other failures.
pub fn agent(cfg: &FetchConfig, url: &str, verify_ssl: bool) -> Result<Agent, FetchError> {
    let transport = |reason: String| transport(url, reason);
    let roots = match &cfg.ca_bundle {
        Some(p) => bundle_roots(p).map_err(transport)?,
        None => system_roots(),
    };
    let tls = TlsConfig::builder()
        .root_certs(RootCerts::Specific(roots))
        .disable_verification(!(verify_ssl && cfg.verify_ssl))
        .build();
    let mut builder = Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(cfg.connect_timeout))
        .timeout_global(Some(cfg.request_timeout))
        .user_agent(concat!("halite/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls);
    if let Some(proxy) = &cfg.proxy {
        let chosen = if cfg.bypasses_proxy(url_host(url)) {
            None
        } else {
            Some(
                ureq::Proxy::new(proxy)
                    .map_err(|e| transport(format!("invalid proxy {proxy}: {e}")))?,
            )
        };
        builder = builder.proxy(chosen);
    }
    Ok(builder.build().into())
}

/// The path part of a URL, as Salt names it in its errors.
pub(crate) fn url_path(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    path.split(['?', '#']).next().unwrap_or(path)
}

/// A failure to talk to the server, worded as Salt's fileclient words it
/// (`Error: Timeout during request reading /path`).
fn transport(url: &str, e: impl std::fmt::Display) -> FetchError {
    let reason = e.to_string();
    FetchError::Failed {
        url: url.to_string(),
        message: format!("Error: {reason} reading {}", url_path(url)),
    }
}

/// An error status, worded as Salt's (`Error: HTTP 404: Not Found reading /x`).
fn status_error(url: &str, status: ureq::http::StatusCode) -> FetchError {
    let message = format!(
        "Error: HTTP {}: {} reading {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Unknown"),
        url_path(url)
    );
    let url = url.to_string();
    if matches!(status.as_u16(), 404 | 410) {
        FetchError::NotFound { url, message }
    } else {
        FetchError::Failed { url, message }
    }
}

/// Streams the body of a GET of `url` into `out` (redirects followed).
pub(super) fn download(
    cfg: &FetchConfig,
    url: &str,
    out: &mut dyn Write,
) -> Result<u64, FetchError> {
    let agent = agent(cfg, url, true)?;
    let resp = agent
        .get(url)
        .call()
        .map_err(|e| transport(url, python_error(&e)))?;
    if !resp.status().is_success() {
        return Err(status_error(url, resp.status()));
    }
    let mut reader = resp.into_body().into_reader();
    copy(&mut reader, out).map_err(|e| transport(url, e))
}

fn copy(reader: &mut dyn Read, out: &mut dyn Write) -> std::io::Result<u64> {
    std::io::copy(reader, out)
}

/// Whether a HEAD of `url` answers a success status.
pub(super) fn exists(cfg: &FetchConfig, url: &str) -> bool {
    let Ok(agent) = agent(cfg, url, true) else {
        return false;
    };
    match agent.head(url).call() {
        Ok(resp) => resp.status().is_success(),
        Err(e) => {
            tracing::debug!(%url, "HEAD failed: {e}");
            false
        }
    }
}

/// What a request answered, for `http.query`.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The response headers, names lowercased as received.
    pub headers: Vec<(String, String)>,
    /// The body, decoded as UTF-8 (lossy).
    pub body: String,
}

/// Python's wording of a failed request, as Salt's `http.query` puts it
/// in `error`: `[Errno 111] Connection refused` for an OS error.
fn python_error(e: &ureq::Error) -> String {
    if let ureq::Error::Io(io) = e {
        if let Some(code) = io.raw_os_error() {
            let text = io.to_string();
            let text = text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text)
                .to_string();
            return format!("[Errno {code}] {text}");
        }
    }
    match e {
        ureq::Error::Timeout(_) => "Timeout during request".to_string(),
        other => other.to_string(),
    }
}

/// One request of `http.query`: `method` to `url` with `headers` and
/// `body`. The body is read whole, so it is capped at `limit` bytes. The
/// error is worded as Python's (Salt's `error` entry).
pub fn request(
    cfg: &FetchConfig,
    url: &str,
    method: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    verify_ssl: bool,
    limit: u64,
) -> Result<Reply, String> {
    let agent = agent(cfg, url, verify_ssl).map_err(|e| e.to_string())?;
    let mut req = ureq::http::Request::builder()
        .method(method.to_ascii_uppercase().as_str())
        .uri(url);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req
        .body(body.map(<[u8]>::to_vec).unwrap_or_default())
        .map_err(|e| e.to_string())?;
    let mut resp = agent.run(req).map_err(|e| python_error(&e))?;
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let bytes = resp
        .body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| python_error(&e))?;
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_urls() {
        assert_eq!(url_host("https://u:p@example.com:8443/a?b"), "example.com");
        assert_eq!(url_host("http://[::1]:80/x"), "::1");
        assert_eq!(url_host("ftp://h/x"), "h");
    }
}
