//! The API's errors, each with the HTTP status salt-api answers for it.

/// Why a request failed; the status and message the client sees.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: no valid token or credentials, or the ACL refused the call.
    #[error("{0}")]
    Unauthorized(String),
    /// 400: the request is malformed (Salt's SaltInvocationError).
    #[error("{0}")]
    BadRequest(String),
    /// 404: no such URL or object.
    #[error("{0}")]
    NotFound(String),
    /// 406: a content type halite-api does not speak.
    #[error("{0}")]
    NotAcceptable(String),
    /// 413: the body is larger than `max_request_body_size`.
    #[error("{0}")]
    TooLarge(String),
    /// 429: too many failed logins from this user or address.
    #[error("{0}")]
    TooManyRequests(String),
    /// 503: the master is not reachable.
    #[error("{0}")]
    Unavailable(String),
    /// 500: anything else (details only with `debug: True`).
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::Unauthorized(_) => 401,
            ApiError::BadRequest(_) => 400,
            ApiError::NotFound(_) => 404,
            ApiError::NotAcceptable(_) => 406,
            ApiError::TooLarge(_) => 413,
            ApiError::TooManyRequests(_) => 429,
            ApiError::Unavailable(_) => 503,
            ApiError::Internal(_) => 500,
        }
    }
}

impl From<halite_client::local::LocalError> for ApiError {
    fn from(e: halite_client::local::LocalError) -> Self {
        match e {
            halite_client::local::LocalError::Refused(msg) => ApiError::BadRequest(msg),
            other => ApiError::Unavailable(format!("Salt Master is not available: {other}")),
        }
    }
}

impl From<crate::tokens::TokenError> for ApiError {
    fn from(e: crate::tokens::TokenError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

impl From<halite_client::jobcache::JobCacheError> for ApiError {
    fn from(e: halite_client::jobcache::JobCacheError) -> Self {
        ApiError::Internal(e.to_string())
    }
}
