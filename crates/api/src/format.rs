//! Request and response bodies as salt-api reads and writes them: JSON,
//! YAML (`application/x-yaml`, `text/yaml`), urlencoded forms and
//! `text/plain` JSON in; JSON or YAML out by `Accept`.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// The output formats, in salt-api's order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    /// `application/json`.
    Json,
    /// `application/x-yaml`.
    Yaml,
}

impl OutFormat {
    /// The `Content-Type` of an answer.
    pub fn content_type(self) -> &'static str {
        match self {
            OutFormat::Json => "application/json",
            OutFormat::Yaml => "application/x-yaml",
        }
    }

    /// The format the `Accept` header prefers (highest `q`, then order);
    /// JSON without one; 406 when it accepts neither.
    pub fn negotiate(accept: Option<&str>) -> Result<Self, ApiError> {
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return Ok(OutFormat::Json);
        };
        let mut best: Option<(f32, OutFormat)> = None;
        for part in accept.split(',') {
            let mut pieces = part.split(';');
            let media = pieces
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let q = pieces
                .find_map(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                })
                .unwrap_or(1.0);
            let fmt = match media.as_str() {
                "application/json" | "*/*" | "application/*" => OutFormat::Json,
                "application/x-yaml" | "text/yaml" | "application/yaml" => OutFormat::Yaml,
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(bq, _)| q > bq) {
                best = Some((q, fmt));
            }
        }
        best.map(|(_, f)| f).ok_or_else(|| {
            ApiError::NotAcceptable(
                "Your client sent an Accept header halite-api cannot answer: use application/json or application/x-yaml".into(),
            )
        })
    }

    /// Serializes an answer.
    pub fn render(self, value: &Value) -> String {
        match self {
            OutFormat::Json => value.to_string(),
            OutFormat::Yaml => halite_render::yaml::dump(value, false),
        }
    }
}

/// Parses a request body by its `Content-Type`; `None` for an empty body.
pub fn parse_body(content_type: Option<&str>, body: &[u8]) -> Result<Option<Value>, ApiError> {
    if body.is_empty() {
        return Ok(None);
    }
    let media = content_type
        .unwrap_or("application/x-www-form-urlencoded")
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::BadRequest("The request body is not UTF-8".into()))?;
    match media.as_str() {
        "application/json" => serde_json::from_str(text)
            .map(Some)
            .map_err(|_| ApiError::BadRequest("Invalid JSON document".into())),
        "application/x-yaml" | "text/yaml" => halite_render::yaml::load(text)
            .map(Some)
            .map_err(|_| ApiError::BadRequest("Invalid YAML document".into())),
        "text/plain" => Ok(Some(
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())),
        )),
        "application/x-www-form-urlencoded" => Ok(Some(form(text)?)),
        _ => Err(ApiError::NotAcceptable("Content type not supported".into())),
    }
}

/// A urlencoded form as a mapping; a key given several times (`arg=a&arg=b`)
/// becomes a list, as CherryPy parses it.
pub fn form(text: &str) -> Result<Value, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(text)
        .map_err(|e| ApiError::BadRequest(format!("Invalid form data: {e}")))?;
    let mut out = Map::new();
    for (k, v) in pairs {
        match out.get_mut(&k) {
            Some(Value::Array(items)) => items.push(Value::String(v)),
            Some(existing) => {
                let first = existing.take();
                *existing = Value::Array(vec![first, Value::String(v)]);
            }
            None => {
                out.insert(k, Value::String(v));
            }
        }
    }
    Ok(Value::Object(out))
}

/// salt-api's `lowdata_fmt`: a mapping becomes a one-chunk list.
pub fn lowstate(data: Option<Value>) -> Result<Vec<Map<String, Value>>, ApiError> {
    let items = match data {
        None => return Ok(Vec::new()),
        Some(Value::Object(m)) => vec![Value::Object(m)],
        Some(Value::Array(a)) => a,
        Some(_) => return Err(ApiError::BadRequest("Lowstates must be a list".into())),
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Object(m) => Ok(m),
            _ => Err(ApiError::BadRequest(
                "Each lowstate chunk must be a mapping".into(),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    #[test]
    fn accept_negotiation() {
        assert_eq!(OutFormat::negotiate(None).unwrap(), OutFormat::Json);
        assert_eq!(
            OutFormat::negotiate(Some("application/x-yaml")).unwrap(),
            OutFormat::Yaml
        );
        assert_eq!(
            OutFormat::negotiate(Some("application/json;q=0.5, application/x-yaml")).unwrap(),
            OutFormat::Yaml
        );
        assert_eq!(OutFormat::negotiate(Some("*/*")).unwrap(), OutFormat::Json);
        assert_eq!(
            OutFormat::negotiate(Some("text/html"))
                .unwrap_err()
                .status(),
            406
        );
    }

    #[test]
    fn bodies_by_content_type() {
        let f = parse_body(
            Some("application/x-www-form-urlencoded"),
            b"fun=test.arg&arg=a&arg=b&tgt=*",
        )
        .unwrap();
        assert_eq!(
            f,
            Some(json!({"fun": "test.arg", "arg": ["a", "b"], "tgt": "*"}))
        );
        let y = parse_body(
            Some("application/x-yaml"),
            b"- client: local\n  fun: test.ping\n",
        )
        .unwrap();
        assert_eq!(y, Some(json!([{"client": "local", "fun": "test.ping"}])));
        assert_eq!(
            parse_body(Some("application/json"), b"{")
                .unwrap_err()
                .status(),
            400
        );
        assert_eq!(
            parse_body(Some("image/png"), b"x").unwrap_err().status(),
            406
        );
        assert_eq!(lowstate(Some(json!({"a": 1}))).unwrap().len(), 1);
        assert_eq!(lowstate(Some(json!("x"))).unwrap_err().status(), 400);
    }
}
