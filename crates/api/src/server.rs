//! The HTTP side: salt-api's `rest_cherrypy` URLs on axum, each handler
//! parsing the body, finding the caller's token and handing the work to
//! [`Service`] on tokio's blocking pool.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequestParts, Path, RawQuery, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use halite_client::local::{LocalBody, LocalClient, LocalReply};

use crate::error::ApiError;
use crate::format::{self, OutFormat};
use crate::service::{Identity, Service};

/// The server's shared state.
pub struct AppState {
    /// The service.
    pub svc: Service,
    /// Requests served.
    pub requests: AtomicU64,
    /// Requests being served.
    pub current: AtomicU64,
    /// Open event streams.
    pub streams: AtomicU64,
    /// When the server started (Unix time).
    pub started: f64,
}

type Shared = Arc<AppState>;

/// The router over `state`: every URL salt-api's `rest_cherrypy` has that
/// halite serves.
pub fn router(state: Shared) -> Router {
    let limit = state.svc.cfg.rest.max_request_body_size;
    let hook = format!(
        "{}/{{*tag}}",
        state.svc.cfg.rest.webhook_url.trim_end_matches('/')
    );
    let hook_root = state
        .svc
        .cfg
        .rest
        .webhook_url
        .trim_end_matches('/')
        .to_string();
    Router::new()
        .route("/", get(index).post(root_post))
        .route("/login", get(login_get).post(login))
        .route("/logout", post(logout))
        .route("/run", post(run))
        .route("/minions", get(minions).post(minions_post))
        .route("/minions/{mid}", get(minions_one))
        .route("/jobs", get(jobs))
        .route("/jobs/{jid}", get(jobs_one))
        .route("/keys", get(keys))
        .route("/keys/{mid}", get(keys_one))
        .route("/events", get(events))
        .route(&hook_root, post(hook_bare))
        .route(&hook, post(hook_tag))
        .route("/stats", get(stats))
        .merge(crate::console::router())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// One request's view: format, caller, headers.
struct Req {
    out: OutFormat,
    source: String,
    headers: HeaderMap,
}

impl Req {
    /// The request's view from its parts: the answer's format as `Accept`
    /// negotiates it, or the negotiation's error.
    fn of(parts: &Parts) -> (Self, Result<(), ApiError>) {
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        let (out, negotiated) = match OutFormat::negotiate(accept) {
            Ok(out) => (out, Ok(())),
            Err(e) => (OutFormat::Json, Err(e)),
        };
        let source = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "unknown".to_string(), |c| c.0.ip().to_string());
        let req = Self {
            out,
            source,
            headers: parts.headers.clone(),
        };
        (req, negotiated)
    }

    fn body(&self, body: &[u8]) -> Result<Option<Value>, ApiError> {
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        format::parse_body(ct, body)
    }

    /// The token of the `X-Auth-Token` header.
    fn header_token(&self) -> Option<String> {
        self.headers
            .get("x-auth-token")
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim().to_string())
    }

    /// The `session_id` cookie /login sets (for browsers' EventSource).
    fn cookie_token(&self) -> Option<String> {
        self.headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|c| c.split(';'))
            .find_map(|kv| kv.trim().strip_prefix("session_id=").map(String::from))
    }
}

fn respond(st: &AppState, out: OutFormat, status: StatusCode, value: &Value) -> Response<Body> {
    let mut resp = Response::new(Body::from(out.render(value)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(out.content_type()),
    );
    decorate(st, h);
    resp
}

/// The headers every answer carries: no caching (`expire_responses`) and CORS.
fn decorate(st: &AppState, h: &mut HeaderMap) {
    let rest = &st.svc.cfg.rest;
    if rest.expire_responses {
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, no-store, must-revalidate"),
        );
        h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
        h.insert(header::EXPIRES, HeaderValue::from_static("0"));
    }
    if let Some(origin) = &rest.cors_origin {
        let value = match origin {
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            other => halite_salt_rules::pyfmt::python_str(other),
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
            h.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static("X-Auth-Token"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }
}

fn fail(st: &AppState, out: OutFormat, e: &ApiError) -> Response<Body> {
    let msg = match e {
        ApiError::Internal(detail) if !st.svc.cfg.rest.debug => {
            tracing::error!(detail, "request failed");
            "An unexpected error occurred".to_string()
        }
        other => other.to_string(),
    };
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    respond(
        st,
        out,
        status,
        &json!({"status": e.status(), "return": msg}),
    )
}

/// Runs `work` with the service on the blocking pool and answers its value
/// (or its error) in the request's format.
async fn blocking<F>(st: Shared, out: OutFormat, status: StatusCode, work: F) -> Response<Body>
where
    F: FnOnce(&Service) -> Result<Value, ApiError> + Send + 'static,
{
    st.requests.fetch_add(1, Ordering::Relaxed);
    st.current.fetch_add(1, Ordering::Relaxed);
    let st2 = st.clone();
    let result = tokio::task::spawn_blocking(move || work(&st2.svc))
        .await
        .unwrap_or_else(|e| {
            Err(ApiError::Internal(format!(
                "the request's worker failed: {e}"
            )))
        });
    st.current.fetch_sub(1, Ordering::Relaxed);
    match result {
        Ok(v) => respond(&st, out, status, &v),
        Err(e) => fail(&st, out, &e),
    }
}

/// What every handler starts from: the shared state and the request's
/// view (format, caller's address, headers). An `Accept` the API cannot
/// answer is refused (406) before the handler runs.
struct Ctx {
    st: Shared,
    r: Req,
}

impl FromRequestParts<Shared> for Ctx {
    type Rejection = Response<Body>;

    async fn from_request_parts(parts: &mut Parts, st: &Shared) -> Result<Self, Self::Rejection> {
        let (r, negotiated) = Req::of(parts);
        match negotiated {
            Ok(()) => Ok(Self { st: st.clone(), r }),
            Err(e) => Err(fail(st, r.out, &e)),
        }
    }
}

/// [`Ctx`] for URLs that answer a stream, not a document (`/events`): an
/// `Accept` of `text/event-stream` is fine; errors come as JSON then.
struct StreamCtx(Ctx);

impl FromRequestParts<Shared> for StreamCtx {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, st: &Shared) -> Result<Self, Self::Rejection> {
        let (r, _) = Req::of(parts);
        Ok(Self(Ctx { st: st.clone(), r }))
    }
}

async fn index(Ctx { st, r }: Ctx) -> Response<Body> {
    respond(
        &st,
        r.out,
        StatusCode::OK,
        &json!({"return": "Welcome", "clients": crate::service::CLIENTS}),
    )
}

async fn login_get(Ctx { st, r }: Ctx) -> Response<Body> {
    respond(
        &st,
        r.out,
        StatusCode::OK,
        &json!({"status": null, "return": "Please log in"}),
    )
}

fn creds_of(data: Option<Value>) -> Map<String, Value> {
    match data {
        Some(Value::Object(m)) => m,
        Some(Value::Array(mut a)) if !a.is_empty() => match a.swap_remove(0) {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

async fn login(Ctx { st, r }: Ctx, body: Bytes) -> Response<Body> {
    let creds = match r.body(&body) {
        Ok(d) => creds_of(d),
        Err(e) => return fail(&st, r.out, &e),
    };
    let source = r.source.clone();
    let st2 = st.clone();
    let result = tokio::task::spawn_blocking(move || st2.svc.login(&creds, &source))
        .await
        .unwrap_or_else(|e| Err(ApiError::Internal(e.to_string())));
    match result {
        Ok((token, doc)) => {
            let expire = doc["expire"].as_f64().unwrap_or(0.0);
            let mut resp = respond(&st, r.out, StatusCode::OK, &json!({"return": [doc]}));
            let h = resp.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&token) {
                h.insert("x-auth-token", v);
            }
            let when = chrono::DateTime::from_timestamp(expire as i64, 0)
                .map(|t| t.format("%a, %d %b %Y %H:%M:%S GMT").to_string())
                .unwrap_or_default();
            if let Ok(v) = HeaderValue::from_str(&format!(
                "session_id={token}; expires={when}; Path=/; HttpOnly; SameSite=Strict"
            )) {
                h.insert(header::SET_COOKIE, v);
            }
            resp
        }
        Err(e) => fail(&st, r.out, &e),
    }
}

async fn logout(Ctx { st, r }: Ctx) -> Response<Body> {
    let token = r.header_token();
    let source = r.source.clone();
    let mut resp = blocking(st.clone(), r.out, StatusCode::OK, move |svc| {
        let who = svc.identity(token.as_deref(), "logout", &source)?;
        if let Some(t) = &token {
            svc.tokens.remove(t)?;
        }
        tracing::info!(user = who.name, source, "logout");
        Ok(json!({"return": "Your token has been cleared"}))
    })
    .await;
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("session_id=; expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/"),
    );
    resp
}

/// The lowstate of a request body, with each chunk's `arg` a list.
fn chunks(r: &Req, body: &[u8]) -> Result<Vec<Map<String, Value>>, ApiError> {
    let mut chunks = format::lowstate(r.body(body)?)?;
    for c in &mut chunks {
        if let Some(arg) = c.get_mut("arg") {
            if !arg.is_array() {
                *arg = Value::Array(vec![arg.take()]);
            }
        }
    }
    Ok(chunks)
}

/// The caller's token: the header, or the first chunk's `token`.
fn token_of(r: &Req, chunks: &[Map<String, Value>]) -> Option<String> {
    r.header_token().or_else(|| {
        chunks
            .iter()
            .find_map(|c| c.get("token").and_then(Value::as_str).map(String::from))
    })
}

fn run_all(
    svc: &Service,
    who: &Identity,
    chunks: &[Map<String, Value>],
    source: &str,
) -> Result<Value, ApiError> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend(svc.run_chunk(who, c, source)?);
    }
    Ok(json!({"return": out}))
}

async fn root_post(Ctx { st, r }: Ctx, body: Bytes) -> Response<Body> {
    let chunks = match chunks(&r, &body) {
        Ok(c) => c,
        Err(e) => return fail(&st, r.out, &e),
    };
    let token = token_of(&r, &chunks);
    let source = r.source.clone();
    blocking(st, r.out, StatusCode::OK, move |svc| {
        let who = svc.identity(token.as_deref(), "POST /", &source)?;
        run_all(svc, &who, &chunks, &source)
    })
    .await
}

/// `POST /run`: credentials (or a token) in each chunk, no session.
async fn run(Ctx { st, r }: Ctx, body: Bytes) -> Response<Body> {
    let chunks = match chunks(&r, &body) {
        Ok(c) => c,
        Err(e) => return fail(&st, r.out, &e),
    };
    let source = r.source.clone();
    blocking(st, r.out, StatusCode::OK, move |svc| {
        let mut out = Vec::new();
        for c in &chunks {
            let who = match c.get("token").and_then(Value::as_str) {
                Some(t) => svc.identity(Some(t), "POST /run", &source)?,
                None if c.contains_key("eauth") => svc.authenticate(c, &source)?,
                None => return Err(svc.refuse("", "", "POST /run", "no credentials", &source)),
            };
            out.extend(svc.run_chunk(&who, c, &source)?);
        }
        Ok(json!({"return": out}))
    })
    .await
}

async fn minions_get(st: Shared, r: Req, mid: Option<String>) -> Response<Body> {
    let token = r.header_token();
    let source = r.source.clone();
    blocking(st, r.out, StatusCode::OK, move |svc| {
        let who = svc.identity(token.as_deref(), "GET /minions", &source)?;
        let mut chunk = Map::new();
        chunk.insert("client".into(), json!("local"));
        chunk.insert("tgt".into(), json!(mid.unwrap_or_else(|| "*".into())));
        chunk.insert("fun".into(), json!("grains.items"));
        run_all(svc, &who, &[chunk], &source)
    })
    .await
}

async fn minions(Ctx { st, r }: Ctx) -> Response<Body> {
    minions_get(st, r, None).await
}

async fn minions_one(Ctx { st, r }: Ctx, Path(mid): Path<String>) -> Response<Body> {
    minions_get(st, r, Some(mid)).await
}

async fn minions_post(Ctx { st, r }: Ctx, body: Bytes) -> Response<Body> {
    let mut chunks = match chunks(&r, &body) {
        Ok(c) => c,
        Err(e) => return fail(&st, r.out, &e),
    };
    let token = token_of(&r, &chunks);
    for c in &mut chunks {
        c.insert("client".into(), json!("local_async"));
    }
    let source = r.source.clone();
    blocking(st, r.out, StatusCode::ACCEPTED, move |svc| {
        let who = svc.identity(token.as_deref(), "POST /minions", &source)?;
        let mut data = Vec::new();
        for c in &chunks {
            data.extend(svc.run_chunk(&who, c, &source)?);
        }
        let links: Vec<Value> = data
            .iter()
            .filter_map(|d| d.get("jid").and_then(Value::as_str))
            .map(|jid| json!({"href": format!("/jobs/{jid}")}))
            .collect();
        Ok(json!({"return": data, "_links": {"jobs": links}}))
    })
    .await
}

async fn jobs_get(st: Shared, r: Req, jid: Option<String>) -> Response<Body> {
    let token = r.header_token();
    let source = r.source.clone();
    blocking(st, r.out, StatusCode::OK, move |svc| {
        let who = svc.identity(token.as_deref(), "GET /jobs", &source)?;
        let mut chunk = Map::new();
        chunk.insert("client".into(), json!("runner"));
        match &jid {
            Some(j) => {
                chunk.insert("fun".into(), json!("jobs.list_job"));
                chunk.insert("jid".into(), json!(j));
            }
            None => {
                chunk.insert("fun".into(), json!("jobs.list_jobs"));
            }
        }
        let info = svc
            .run_chunk(&who, &chunk, &source)?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        if jid.is_none() {
            return Ok(json!({"return": [info]}));
        }
        let mut rets = Map::new();
        if let Some(result) = info.get("Result").and_then(Value::as_object) {
            for (id, one) in result {
                rets.insert(
                    id.clone(),
                    one.get("return").cloned().unwrap_or(Value::Null),
                );
            }
        }
        Ok(json!({"info": [info], "return": [rets]}))
    })
    .await
}

async fn jobs(Ctx { st, r }: Ctx) -> Response<Body> {
    jobs_get(st, r, None).await
}

async fn jobs_one(Ctx { st, r }: Ctx, Path(jid): Path<String>) -> Response<Body> {
    jobs_get(st, r, Some(jid)).await
}

async fn keys_get(st: Shared, r: Req, mid: Option<String>) -> Response<Body> {
    let token = r.header_token();
    let source = r.source.clone();
    blocking(st, r.out, StatusCode::OK, move |svc| {
        let who = svc.identity(token.as_deref(), "GET /keys", &source)?;
        let mut chunk = Map::new();
        chunk.insert("client".into(), json!("wheel"));
        match &mid {
            Some(m) => {
                chunk.insert("fun".into(), json!("key.finger"));
                chunk.insert("match".into(), json!(m));
            }
            None => {
                chunk.insert("fun".into(), json!("key.list_all"));
            }
        }
        let first = svc.run_chunk(&who, &chunk, &source)?.into_iter().next().unwrap_or(Value::Null);
        Ok(json!({"return": first.get("data").and_then(|d| d.get("return")).cloned().unwrap_or(json!({}))}))
    })
    .await
}

async fn keys(Ctx { st, r }: Ctx) -> Response<Body> {
    keys_get(st, r, None).await
}

async fn keys_one(Ctx { st, r }: Ctx, Path(mid): Path<String>) -> Response<Body> {
    keys_get(st, r, Some(mid)).await
}

/// `GET /events`: the master's event bus as Server-Sent Events. As Salt
/// 3008.5, the token comes in the `X-Auth-Token` header or the
/// `session_id` cookie, never the query string; the stream ends when the
/// token expires or is revoked.
async fn events(StreamCtx(Ctx { st, r }): StreamCtx, RawQuery(query): RawQuery) -> Response<Body> {
    if query.is_some_and(|q| !q.is_empty()) {
        return fail(&st, r.out, &ApiError::BadRequest(
            "The /events endpoint takes no query parameters; in particular, tokens must not be passed via the query string -- they end up in access logs and the Referer header. Use the 'X-Auth-Token' header (for non-browser clients) or the session cookie set by /login (for browser EventSource clients) instead.".into(),
        ));
    }
    let token = r
        .header_token()
        .or_else(|| r.cookie_token())
        .unwrap_or_default();
    let source = r.source.clone();
    let st2 = st.clone();
    let t2 = token.clone();
    let checked =
        tokio::task::spawn_blocking(move || st2.svc.identity(Some(&t2), "GET /events", &source))
            .await
            .unwrap_or_else(|e| Err(ApiError::Internal(e.to_string())));
    if let Err(e) = checked {
        return fail(&st, r.out, &e);
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    let st3 = st.clone();
    st.streams.fetch_add(1, Ordering::Relaxed);
    std::thread::spawn(move || {
        stream_events(&st3, &token, &tx);
        st3.streams.fetch_sub(1, Ordering::Relaxed);
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    decorate(&st, h);
    resp
}

fn stream_events(
    st: &AppState,
    token: &str,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let master = &st.svc.cfg.master;
    let mut client = match LocalClient::connect(&master.local_socket(), &master.root_key_path()) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "event stream: the master is not reachable");
            return;
        }
    };
    if client
        .send(LocalBody::Events {
            tagmatch: String::new(),
        })
        .is_err()
    {
        return;
    }
    if tx
        .blocking_send(Ok(Bytes::from_static(b"retry: 400\n")))
        .is_err()
    {
        return;
    }
    // The token is checked again at most once a second (not per event:
    // a busy bus would otherwise query the store thousands of times a
    // second per stream); a revoked or expired token ends the stream.
    let mut checked = std::time::Instant::now();
    let mut still_valid = || {
        if checked.elapsed() < Duration::from_secs(1) {
            return true;
        }
        checked = std::time::Instant::now();
        matches!(st.svc.tokens.get(token), Ok(Some(_)))
    };
    loop {
        if tx.is_closed() {
            return;
        }
        // No read timeout: a timeout in the middle of a frame would leave
        // the socket mid-frame. A client that left, or a token revoked
        // while the bus is idle, is noticed at the next event.
        match client.next(None) {
            Ok(Some(LocalReply::Event { tag, data })) => {
                if !still_valid() {
                    tracing::debug!("event stream: the token is no longer valid");
                    return;
                }
                let line = format!(
                    "tag: {tag}\ndata: {}\n\n",
                    json!({"tag": tag, "data": data})
                );
                if tx.blocking_send(Ok(Bytes::from(line))).is_err() {
                    return;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "event stream: lost the master");
                return;
            }
        }
    }
}

async fn hook_bare(ctx: Ctx, body: Bytes) -> Response<Body> {
    hook(ctx, String::new(), body).await
}

async fn hook_tag(ctx: Ctx, Path(tag): Path<String>, body: Bytes) -> Response<Body> {
    hook(ctx, tag, body).await
}

/// `POST /hook/<tag>`: fires `salt/netapi/hook/<tag>` with the body, its
/// parsed form and the headers, as salt-api.
async fn hook(Ctx { st, r }: Ctx, tag: String, body: Bytes) -> Response<Body> {
    let data = match r.body(&body) {
        Ok(d) => d.unwrap_or_else(|| json!({})),
        Err(e) => return fail(&st, r.out, &e),
    };
    let token = r.header_token();
    let source = r.source.clone();
    let open = st.svc.cfg.rest.webhook_disable_auth;
    let mut hdrs = Map::new();
    for (k, v) in &r.headers {
        if k == "x-auth-token" || k == header::COOKIE {
            continue;
        }
        if let Ok(v) = v.to_str() {
            hdrs.insert(title_case(k.as_str()), json!(v));
        }
    }
    hdrs.insert("Remote-Addr".into(), json!(source));
    let raw = String::from_utf8_lossy(&body).into_owned();
    blocking(st, r.out, StatusCode::OK, move |svc| {
        if !open {
            svc.identity(token.as_deref(), "POST /hook", &source)?;
        }
        let full = if tag.is_empty() {
            "salt/netapi/hook".to_string()
        } else {
            format!("salt/netapi/hook/{}", tag.trim_matches('/'))
        };
        svc.fire(
            &full,
            json!({"body": raw, "post": data, "headers": hdrs, "_stamp": crate::service::stamp()}),
        );
        Ok(json!({"success": true}))
    })
    .await
}

fn title_case(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// `GET /stats`: the server's counters (halite's own names; salt-api
/// dumps CherryPy's).
async fn stats(Ctx { st, r }: Ctx) -> Response<Body> {
    let token = r.header_token();
    let source = r.source.clone();
    let open = st.svc.cfg.rest.stats_disable_auth;
    let st2 = st.clone();
    blocking(st, r.out, StatusCode::OK, move |svc| {
        if !open {
            svc.identity(token.as_deref(), "GET /stats", &source)?;
        }
        let now = crate::tokens::now();
        Ok(json!({"halite-api": {
            "Start Time": st2.started,
            "Uptime": now - st2.started,
            "Requests": st2.requests.load(Ordering::Relaxed),
            "Current Requests": st2.current.load(Ordering::Relaxed),
            "Event Streams": st2.streams.load(Ordering::Relaxed),
            "Live Tokens": svc.tokens.list()?.len(),
        }}))
    })
    .await
}

async fn not_found(State(st): State<Shared>, method: Method, headers: HeaderMap) -> Response<Body> {
    let out = OutFormat::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()))
        .unwrap_or(OutFormat::Json);
    fail(
        &st,
        out,
        &ApiError::NotFound(format!("The path is not found ({method})")),
    )
}

/// Serves the API until the process is stopped: TLS with `ssl_crt` and
/// `ssl_key` unless `disable_ssl`.
pub async fn serve(svc: Service) -> anyhow::Result<()> {
    let rest = svc.cfg.rest.clone();
    let state = Arc::new(AppState {
        svc,
        requests: AtomicU64::new(0),
        current: AtomicU64::new(0),
        streams: AtomicU64::new(0),
        started: crate::tokens::now(),
    });
    let addr: SocketAddr = format!("{}:{}", rest.host, rest.port)
        .parse()
        .or_else(|_| format!("[{}]:{}", rest.host, rest.port).parse())
        .map_err(|e| {
            anyhow::anyhow!(
                "rest_cherrypy host {:?} is not an IP address: {e}",
                rest.host
            )
        })?;
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    if rest.disable_ssl {
        tracing::info!(%addr, "halite-api listening (plain HTTP: disable_ssl is set)");
        axum_server::bind(addr).serve(app).await?;
    } else {
        let (Some(crt), Some(key)) = (&rest.ssl_crt, &rest.ssl_key) else {
            anyhow::bail!(crate::config::ApiConfigError::NoCertificate);
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(crt, key)
            .await
            .map_err(|e| {
                anyhow::anyhow!("cannot load rest_cherrypy ssl_crt {crt} / ssl_key {key}: {e}")
            })?;
        tracing::info!(%addr, "halite-api listening (TLS)");
        axum_server::bind_rustls(addr, tls).serve(app).await?;
    }
    Ok(())
}
