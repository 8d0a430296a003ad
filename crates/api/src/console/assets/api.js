// The API calls of the console. The token lives in this tab's
// sessionStorage and goes in the X-Auth-Token header of every call, never
// in a cookie: a request another site makes the browser send carries no
// token (CSRF), and salt-api's URLs take the header as they do for pepper.

const KEY = "halite-console-session";

/** The session ({token, user, eauth, expire}) or null. */
export function session() {
  try {
    const s = JSON.parse(sessionStorage.getItem(KEY) || "null");
    if (s && s.expire && s.expire * 1000 < Date.now()) return null;
    return s;
  } catch {
    return null;
  }
}

export function forget() {
  sessionStorage.removeItem(KEY);
}

/** An error the API answered, with its status. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Calls the API; the parsed JSON answer. A 401 ends the session. */
export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const s = session();
  if (s) headers["X-Auth-Token"] = s.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  let data = null;
  try {
    data = await resp.json();
  } catch {
    data = null;
  }
  if (!resp.ok) {
    if (resp.status === 401 && path !== "/login") {
      forget();
      window.dispatchEvent(new Event("halite-logged-out"));
    }
    const msg = data && typeof data.return === "string" ? data.return : resp.statusText;
    throw new ApiError(resp.status, msg);
  }
  return data;
}

/** Logs in; stores and returns the session. */
export async function login(username, password, eauth) {
  const data = await call("POST", "/login", { username, password, eauth });
  const doc = data.return[0];
  const s = { token: doc.token, user: doc.user, eauth: doc.eauth, expire: doc.expire };
  sessionStorage.setItem(KEY, JSON.stringify(s));
  return s;
}

export async function logout() {
  try {
    await call("POST", "/logout");
  } finally {
    forget();
  }
}

/** Runs one lowstate chunk through `POST /`; its `return` list. */
export async function lowstate(chunk) {
  const data = await call("POST", "/", [chunk]);
  return data.return;
}

/** Whether the server would run each lowstate chunk for this session: the
 * check `POST /` applies, asked without running anything. */
export async function allowed(chunks) {
  if (!chunks.length) return [];
  const data = await call("POST", "/console/api/allowed", chunks);
  return data.allowed;
}
