//! The web console: a few static pages (HTML, CSS, JavaScript modules)
//! embedded in the binary with `include_str!`, and two read-only JSON
//! views the pages need that salt-api's URLs do not give (the caller's
//! permissions, and the minions with key state, cached grains and last
//! contact). Everything that acts (running jobs, accepting keys, reading
//! job returns, the event stream) goes through the API's own URLs, so the
//! ACLs there decide; the console only hides what they would refuse.
//!
//! Security model (docs/api.md, "Web console"): every page carries a
//! Content-Security-Policy of `default-src 'self'` without inline script
//! or style, so injected markup cannot run; the pages write minion data
//! with `textContent` only; the token travels in the `X-Auth-Token`
//! header (kept in the tab's `sessionStorage`), never in an ambient
//! cookie, so another site cannot make the browser act (CSRF).

mod assets;
mod minions;
mod perms;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, Json, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::server::AppState;
use crate::service::{Identity, Service};

/// The policy every console answer carries: only this origin's own files
/// run, no inline script or style, no framing, no plugins.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Where the console lives.
pub const PREFIX: &str = "/console";

/// The console's routes, merged into the API's router by
/// [`crate::server::router`].
pub fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route(PREFIX, get(index))
        .route("/console/", get(index))
        .route("/console/assets/{file}", get(asset))
        .route("/console/api/eauth", get(eauth_list))
        .route("/console/api/session", get(session))
        .route("/console/api/minions", get(minions_view))
        .route("/console/api/allowed", post(allowed))
}

/// Adds the console's security headers to `resp`.
fn secure(mut resp: Response<Body>) -> Response<Body> {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-store, must-revalidate"),
    );
    resp
}

fn with_type(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure(resp)
}

fn json_answer(status: StatusCode, value: &Value) -> Response<Body> {
    with_type(status, "application/json", Body::from(value.to_string()))
}

fn json_error(e: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_answer(
        status,
        &json!({"status": e.status(), "return": e.to_string()}),
    )
}

async fn index() -> Response<Body> {
    with_type(
        StatusCode::OK,
        "text/html; charset=utf-8",
        Body::from(assets::INDEX),
    )
}

async fn asset(Path(file): Path<String>) -> Response<Body> {
    match assets::find(&file) {
        Some((content_type, text)) => with_type(StatusCode::OK, content_type, Body::from(text)),
        None => json_error(&ApiError::NotFound(format!(
            "the console has no file {file:?}"
        ))),
    }
}

/// `GET /console/api/eauth`: the configured `external_auth` backends, for
/// the login page's choice (names only; no users, no ACLs).
async fn eauth_list(State(st): State<Arc<AppState>>) -> Response<Body> {
    let mut names: Vec<&String> = st.svc.cfg.external_auth.keys().collect();
    names.sort();
    json_answer(StatusCode::OK, &json!({"eauth": names}))
}

/// Runs `work` for the caller of the `X-Auth-Token` header on the
/// blocking pool (the token store and the master's socket block).
async fn authed<F>(
    st: Arc<AppState>,
    addr: SocketAddr,
    headers: &HeaderMap,
    what: &'static str,
    work: F,
) -> Response<Body>
where
    F: FnOnce(&Service, &Identity) -> Result<Value, ApiError> + Send + 'static,
{
    let token = headers
        .get("x-auth-token")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string());
    let source = addr.ip().to_string();
    let result = tokio::task::spawn_blocking(move || {
        let who = st.svc.identity(token.as_deref(), what, &source)?;
        work(&st.svc, &who)
    })
    .await
    .unwrap_or_else(|e| {
        Err(ApiError::Internal(format!(
            "the console's worker failed: {e}"
        )))
    });
    match result {
        Ok(v) => json_answer(StatusCode::OK, &v),
        Err(ApiError::Internal(detail)) => {
            tracing::error!(detail, "console request failed");
            json_error(&ApiError::Internal(
                "An unexpected error occurred; the halite-api log has the details".into(),
            ))
        }
        Err(e) => json_error(&e),
    }
}

/// `GET /console/api/session`: who the token belongs to and what the
/// console may offer them ([`perms::Abilities`]).
async fn session(
    State(st): State<Arc<AppState>>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response<Body> {
    authed(
        st,
        addr,
        &headers,
        "GET /console/api/session",
        |svc, who| {
            let list = svc.auth_list(who);
            Ok(json!({
                "user": who.name,
                "eauth": who.eauth,
                "perms": crate::acl::sorted_permissions(&list),
                "can": perms::Abilities::of(&list),
            }))
        },
    )
    .await
}

/// `GET /console/api/minions`: the minions the caller may see
/// ([`minions::overview`]).
async fn minions_view(
    State(st): State<Arc<AppState>>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response<Body> {
    authed(
        st,
        addr,
        &headers,
        "GET /console/api/minions",
        |svc, who| minions::overview(svc, &svc.auth_list(who)),
    )
    .await
}

/// How many calls one `POST /console/api/allowed` may ask about: a
/// minions page asks about three buttons per minion.
const MAX_QUESTIONS: usize = 30_000;

/// `POST /console/api/allowed` with a list of lowstate chunks (as `POST /`
/// takes them): `{"allowed": [bool, ...]}`, whether the caller may run
/// each, answered by the check `POST /` applies ([`Service::may_run`])
/// without running anything. The console asks it before it draws a key
/// button or enables a run, so an ACL that grants a function for some
/// arguments only shows exactly what the API would allow.
///
/// A body that is not a JSON list gets the console's JSON error (400,
/// with its security headers) after the caller is authenticated, rather
/// than axum's plain-text rejection without them.
async fn allowed(
    State(st): State<Arc<AppState>>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Json<Vec<Value>>, JsonRejection>,
) -> Response<Body> {
    let chunks = body.map(|Json(chunks)| chunks).map_err(|e| {
        format!(
            "the body must be a JSON list of lowstate chunks ({}); send Content-Type: application/json",
            e.body_text()
        )
    });
    authed(
        st,
        addr,
        &headers,
        "POST /console/api/allowed",
        move |svc, who| {
            let chunks = chunks.map_err(ApiError::BadRequest)?;
            if chunks.len() > MAX_QUESTIONS {
                return Err(ApiError::BadRequest(format!(
                    "ask about at most {MAX_QUESTIONS} calls at once (this request has {})",
                    chunks.len()
                )));
            }
            let mut out = Vec::with_capacity(chunks.len());
            for chunk in &chunks {
                let answer = match chunk.as_object() {
                    Some(chunk) => match svc.may_run(who, chunk) {
                        Ok(yes) => yes,
                        // Input the API would refuse as invalid: not allowed.
                        Err(ApiError::BadRequest(_)) => false,
                        Err(e) => return Err(e),
                    },
                    None => false,
                };
                out.push(Value::Bool(answer));
            }
            Ok(json!({ "allowed": out }))
        },
    )
    .await
}
