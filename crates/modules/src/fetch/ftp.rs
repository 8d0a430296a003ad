//! `ftp://` through `suppaftp` (sync, no TLS features: plain FTP as Salt's
//! `ftplib` fetch does): anonymous unless the URL carries credentials,
//! passive mode, binary transfer streamed to the caller's writer.

use std::io::Write;
use std::net::ToSocketAddrs;

use suppaftp::types::FileType;
use suppaftp::{FtpError, FtpStream, Status};

use super::{FetchConfig, FetchError};

/// The parts of an `ftp://` URL.
#[derive(Debug, PartialEq)]
pub(crate) struct FtpUrl {
    pub user: String,
    pub password: String,
    pub host: String,
    pub port: u16,
    pub path: String,
}

fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `ftp://[user[:password]@]host[:port]/path`.
pub(crate) fn parse(url: &str) -> Result<FtpUrl, FetchError> {
    let bad = || FetchError::BadUrl(url.to_string());
    let rest = url
        .get(6..)
        .filter(|_| url[..6].eq_ignore_ascii_case("ftp://"))
        .ok_or_else(bad)?;
    let (netloc, path) = rest.split_once('/').ok_or_else(bad)?;
    let (auth, hostport) = match netloc.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, netloc),
    };
    let (user, password) = match auth {
        Some(a) => match a.split_once(':') {
            Some((u, p)) => (unescape(u), unescape(p)),
            None => (unescape(a), String::new()),
        },
        None => ("anonymous".to_string(), "anonymous@".to_string()),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => {
            (h.to_string(), p.parse().map_err(|_| bad())?)
        }
        _ => (hostport.to_string(), 21),
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    if host.is_empty() || path.is_empty() {
        return Err(bad());
    }
    Ok(FtpUrl {
        user,
        password,
        host,
        port,
        path: unescape(path.split(['?', '#']).next().unwrap_or(path)),
    })
}

fn error(url: &str, e: FtpError) -> FetchError {
    match e {
        FtpError::UnexpectedResponse(r) if r.status == Status::FileUnavailable => {
            FetchError::NotFound {
                url: url.to_string(),
                message: format!("Could not retrieve {url} from FTP server: file unavailable"),
            }
        }
        other => FetchError::Failed {
            url: url.to_string(),
            message: format!("Could not retrieve {url} from FTP server: {other}"),
        },
    }
}

fn connect(cfg: &FetchConfig, url: &str, parts: &FtpUrl) -> Result<FtpStream, FetchError> {
    let addr = (parts.host.as_str(), parts.port)
        .to_socket_addrs()
        .map_err(|e| FetchError::Failed {
            url: url.to_string(),
            message: format!("Could not connect to {}: {e}", parts.host),
        })?
        .next()
        .ok_or_else(|| FetchError::Failed {
            url: url.to_string(),
            message: format!("Could not connect to {}: it has no address", parts.host),
        })?;
    let mut ftp =
        FtpStream::connect_timeout(addr, cfg.connect_timeout).map_err(|e| error(url, e))?;
    ftp.get_ref()
        .set_read_timeout(Some(cfg.request_timeout))
        .map_err(|e| error(url, FtpError::ConnectionError(e)))?;
    ftp.login(parts.user.as_str(), parts.password.as_str())
        .map_err(|e| error(url, e))?;
    ftp.transfer_type(FileType::Binary)
        .map_err(|e| error(url, e))?;
    Ok(ftp)
}

/// Streams `url` into `out`.
pub(super) fn download(
    cfg: &FetchConfig,
    url: &str,
    out: &mut dyn Write,
) -> Result<u64, FetchError> {
    let parts = parse(url)?;
    let mut ftp = connect(cfg, url, &parts)?;
    let mut copied = Ok(0);
    let result = ftp.retr(&parts.path, |reader| {
        copied = std::io::copy(reader, out);
        Ok(())
    });
    let _ = ftp.quit();
    result.map_err(|e| error(url, e))?;
    copied.map_err(|e| FetchError::Failed {
        url: url.to_string(),
        message: format!("Could not retrieve {url} from FTP server: {e}"),
    })
}

/// Whether the server knows `url` (`SIZE`).
pub(super) fn exists(cfg: &FetchConfig, url: &str) -> bool {
    let Ok(parts) = parse(url) else { return false };
    let Ok(mut ftp) = connect(cfg, url, &parts) else {
        return false;
    };
    let found = ftp.size(&parts.path).is_ok();
    let _ = ftp.quit();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ftp_urls() {
        let u = parse("ftp://bob:s%40cret@files.example:2121/pub/a.tar.gz").unwrap();
        assert_eq!(
            u,
            FtpUrl {
                user: "bob".into(),
                password: "s@cret".into(),
                host: "files.example".into(),
                port: 2121,
                path: "pub/a.tar.gz".into()
            }
        );
        let anon = parse("ftp://127.0.0.1/x").unwrap();
        assert_eq!((anon.user.as_str(), anon.port), ("anonymous", 21));
        assert!(parse("ftp://host").is_err());
    }
}
