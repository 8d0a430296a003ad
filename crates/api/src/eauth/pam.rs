//! `eauth: pam`: the password checked by the host's PAM stack (service
//! `login` unless `external_auth: pam: ^service:` names another, as
//! Salt's `auth.pam.service`), through the `pam` crate over libpam.
//! halite-api must run as root for `pam_unix` to read `/etc/shadow`.

use serde_json::{Map, Value};

use super::EauthError;

/// Whether PAM accepts `username`/`password`.
pub fn authenticate(
    conf: &Map<String, Value>,
    username: &str,
    password: &str,
) -> Result<bool, EauthError> {
    let service = conf
        .get("^service")
        .and_then(Value::as_str)
        .unwrap_or("login");
    let mut auth = ::pam::Authenticator::with_password(service)
        .map_err(|e| EauthError::Misconfigured(format!("PAM service {service}: {e}")))?;
    auth.get_handler().set_credentials(username, password);
    match auth.authenticate() {
        Ok(()) => Ok(true),
        Err(e) => {
            tracing::info!(user = username, service, error = %e, "PAM refused the login");
            Ok(false)
        }
    }
}
