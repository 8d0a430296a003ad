// The console's pages: login, minions (keys, grains, last seen), jobs
// (filters, returns), live state runs, one run in the highstate view, and
// the requisite graph. Routes are the URL's hash (#/minions, #/jobs/<jid>,
// #/live, #/run/<jid>/<minion>/<n>, #/graph). Buttons the user's ACL
// would refuse are not drawn, and a form's submit is enabled only while
// the server says it would run the call (POST /console/api/allowed, the
// API's own check); the API refuses them anyway.

import { h, fill, text, jidTime, jidDate } from "./dom.js";
import * as api from "./api.js";
import { openEvents, Runs, counters, failuresFirst, resultClass } from "./live.js";
import { highstate, isStateRun, statesOf } from "./highstate.js";
import { drawGraph } from "./graph.js";

const view = () => document.getElementById("view");
const state = { can: null, runs: new Runs(), stop: null, stream: "off", focusJid: null, redraw: null };

function message(cls, ...parts) {
  return h("p", { class: ["msg", cls] }, ...parts);
}

function failure(e) {
  return message("error", e instanceof api.ApiError ? `${e.message} (HTTP ${e.status})` : String(e));
}

// ---- session -------------------------------------------------------------

async function start() {
  window.addEventListener("hashchange", route);
  window.addEventListener("halite-logged-out", () => {
    stopStream();
    state.can = null;
    location.hash = "#/login";
    route();
  });
  route();
}

async function ensureSession() {
  if (!api.session()) return false;
  if (!state.can) {
    try {
      const s = await api.call("GET", "/console/api/session");
      state.can = s.can;
      state.user = s.user;
      state.eauth = s.eauth;
    } catch {
      api.forget();
      return false;
    }
  }
  if (!state.stop) startStream();
  return true;
}

function startStream() {
  state.stop = openEvents(
    (ev) => {
      if (state.runs.take(ev) && state.redraw) scheduleRedraw();
    },
    (status) => {
      state.stream = status;
      const el = document.getElementById("stream-status");
      if (el) fill(el, "event stream: " + status);
      if (el) el.setAttribute("data-status", status);
    },
  );
}

function stopStream() {
  if (state.stop) state.stop();
  state.stop = null;
  state.runs = new Runs();
}

let pending = false;
function scheduleRedraw() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    if (state.redraw) state.redraw();
  });
}

function drawNav() {
  const nav = document.getElementById("nav");
  const who = document.getElementById("who");
  if (!state.can) {
    fill(nav);
    fill(who);
    return;
  }
  const link = (href, label) =>
    h("a", { href, class: location.hash.startsWith(href) ? "active" : "" }, label);
  fill(
    nav,
    link("#/minions", "Minions"),
    state.can.jobs && link("#/jobs", "Jobs"),
    link("#/live", "Live"),
    state.can.graph && link("#/graph", "Graph"),
  );
  fill(
    who,
    h("span", { id: "user" }, `${state.user} (${state.eauth})`),
    " ",
    h("button", {
      id: "logout",
      type: "button",
      onclick: async () => {
        await api.logout().catch(() => {});
        window.dispatchEvent(new Event("halite-logged-out"));
      },
    }, "Log out"),
  );
}

async function route() {
  state.redraw = null;
  const parts = (location.hash || "#/minions").slice(2).split("/").map(decodeURIComponent);
  if (parts[0] !== "login" && !(await ensureSession())) {
    location.hash = "#/login";
    return;
  }
  drawNav();
  const page = {
    login: loginPage,
    minions: minionsPage,
    jobs: parts[1] ? () => jobPage(parts[1]) : jobsPage,
    live: livePage,
    run: () => runPage(parts[1], parts[2], parts[3]),
    graph: graphPage,
  }[parts[0]] || minionsPage;
  try {
    await page();
  } catch (e) {
    fill(view(), failure(e));
  }
}

// ---- login ---------------------------------------------------------------

async function loginPage() {
  stopStream();
  state.can = null;
  drawNav();
  let backends = [];
  try {
    backends = (await api.call("GET", "/console/api/eauth")).eauth;
  } catch (e) {
    backends = [];
  }
  const err = h("p", { id: "login-error", class: "msg error", hidden: true });
  const form = h(
    "form",
    { id: "login", class: "card" },
    h("h1", {}, "Log in"),
    h("label", {}, "User", h("input", { id: "login-user", name: "username", autocomplete: "username", required: true })),
    h("label", {}, "Password", h("input", { id: "login-pass", name: "password", type: "password", autocomplete: "current-password" })),
    h("label", {}, "Authentication",
      h("select", { id: "login-eauth", name: "eauth" }, backends.map((b) => h("option", { value: b }, b)))),
    h("button", { id: "login-submit", type: "submit" }, "Log in"),
    err,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.hidden = true;
    try {
      await api.login(
        document.getElementById("login-user").value,
        document.getElementById("login-pass").value,
        document.getElementById("login-eauth").value,
      );
      location.hash = "#/minions";
    } catch (e) {
      fill(err, e instanceof api.ApiError && e.status === 401 ? "Wrong user, password or authentication." : e.message);
      err.hidden = false;
    }
  });
  fill(view(), form);
}

// ---- minions -------------------------------------------------------------

// Reject and delete cannot be undone from here (a deleted minion must
// send its key again): the page asks first.
const CONFIRM = {
  "key.reject": (id) => [`Reject the key of ${id}? It cannot connect until its key is accepted again.`, "Reject"],
  "key.delete": (id) => [`Delete the key of ${id}? It must send its key again to be accepted.`, "Delete"],
};

/** Asks `question` in a modal dialog; whether the user chose `yes`. */
function confirmDialog(question, yes) {
  return new Promise((resolve) => {
    document.getElementById("confirm")?.remove();
    const dialog = h("dialog", { id: "confirm" },
      h("p", { class: "question" }, question),
      h("form", { method: "dialog" },
        h("button", { id: "confirm-no", value: "no", class: "cancel" }, "Cancel"), " ",
        h("button", { id: "confirm-yes", value: "yes", class: "danger" }, yes)));
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "yes");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

async function keyAction(fun, m) {
  if (CONFIRM[fun] && !(await confirmDialog(...CONFIRM[fun](m.id)))) return false;
  await api.lowstate(keyChunk(fun, m));
  await minionsPage();
  return true;
}

const KEY_BUTTONS = {
  pending: [["key.accept", "Accept", "accept"], ["key.reject", "Reject", "reject"], ["key.delete", "Delete", "delete"]],
  accepted: [["key.reject", "Reject", "reject"], ["key.delete", "Delete", "delete"]],
  rejected: [["key.accept", "Accept", "accept"], ["key.delete", "Delete", "delete"]],
  denied: [["key.delete", "Delete", "delete"]],
};

/** The key buttons of minion `m` the session's ACL may allow at all. */
function keyCandidates(m) {
  return (KEY_BUTTONS[m.key] || []).filter(([fun]) => state.can[fun.replace(".", "_")]);
}

// Salt's key.accept and key.reject act on pending keys unless told to
// take a key from another state too (include_rejected, include_accepted,
// include_denied).
const KEY_FROM = {
  "key.accept": { rejected: "include_rejected", denied: "include_denied" },
  "key.reject": { accepted: "include_accepted", denied: "include_denied" },
};

/** The wheel call of button `fun` on minion `m` (in key state `m.key`). */
function keyChunk(fun, m) {
  const chunk = { client: "wheel", fun, match: m.id };
  const flag = (KEY_FROM[fun] || {})[m.key];
  if (flag) chunk[flag] = true;
  return chunk;
}

/** The key buttons of `m` the server said it would run (`allowed`:
 * a set of "fun id"). */
function keyButtons(m, allowed) {
  return keyCandidates(m)
    .filter(([fun]) => allowed.has(`${fun} ${m.id}`))
    .map(([fun, label, cls]) =>
      h("button", { type: "button", class: ["key-action", cls], "data-fun": fun, "data-id": m.id,
        onclick: (ev) => {
          ev.target.disabled = true;
          keyAction(fun, m)
            .then((done) => { if (!done) ev.target.disabled = false; })
            .catch((e) => { ev.target.disabled = false; view().prepend(failure(e)); });
        } }, label));
}

/** Asks the server which key buttons of `minions` it would allow: the
 * same check as when the button is pressed (an ACL may allow a key
 * function for some minions only). */
async function allowedKeyButtons(minions) {
  const asked = minions.flatMap((m) => keyCandidates(m).map(([fun]) => [fun, m]));
  const answers = await api.allowed(asked.map(([fun, m]) => keyChunk(fun, m)));
  return new Set(asked.filter((_, i) => answers[i]).map(([fun, m]) => `${fun} ${m.id}`));
}

/** Enables `submit` only while the server would run the call `chunkOf()`
 * gives (the ACL may allow it for some targets or arguments only); says
 * why in `note` otherwise. */
function guardForm(form, submit, note, chunkOf) {
  let asked = 0;
  const check = async () => {
    const mine = ++asked;
    let ok = false;
    try {
      [ok] = await api.allowed([chunkOf()]);
    } catch {
      ok = false;
    }
    if (mine !== asked) return;
    submit.disabled = !ok;
    note.hidden = ok;
  };
  let timer = null;
  form.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(check, 150);
  });
  check();
}

async function minionsPage() {
  const data = await api.call("GET", "/console/api/minions");
  const allowed = await allowedKeyButtons(data.minions);
  const rows = data.minions.map((m) =>
    h("tr", { "data-minion": m.id, class: "key-" + (m.key || "unknown") },
      h("td", { class: "id" }, m.id),
      h("td", { class: "key" }, m.key ? h("span", { class: ["badge", m.key] }, m.key) : "—"),
      h("td", { class: "seen" }, m.last_seen ? jidTime(m.last_seen) : "never"),
      h("td", { class: "grains" },
        m.grains
          ? h("details", {}, h("summary", {}, `grains (${Object.keys(m.grains).length})`),
              h("pre", { class: "json" }, text(m.grains)))
          : h("span", { class: "muted" }, state.can.grains ? "not cached" : "—")),
      h("td", { class: "actions" }, keyButtons(m, allowed))),
  );
  fill(
    view(),
    h("h1", {}, "Minions"),
    rows.length
      ? h("table", { id: "minions" },
          h("thead", {}, h("tr", {}, ["Minion", "Key", "Last seen", "Grains", ""].map((t) => h("th", {}, t)))),
          h("tbody", {}, rows))
      : message("muted", "No minion you may see."),
  );
}

// ---- jobs ----------------------------------------------------------------

function glob(pattern, value) {
  if (!pattern) return true;
  if (!/[*?[]/.test(pattern)) return String(value).includes(pattern);
  const re = pattern.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp("^" + re + "$").test(String(value));
}

async function jobsPage() {
  const data = await api.call("GET", "/jobs");
  const jobs = Object.entries(data.return[0] || {}).sort((a, b) => (a[0] < b[0] ? 1 : -1));
  const input = (id, label, type) => h("label", {}, label, h("input", { id, type: type || "text" }));
  const filters = h("form", { id: "job-filters", class: "filters" },
    input("f-fun", "Function"), input("f-tgt", "Target"), input("f-user", "User"),
    input("f-from", "From (UTC)", "datetime-local"), input("f-to", "To (UTC)", "datetime-local"));
  const body = h("tbody");
  const draw = () => {
    const v = (id) => document.getElementById(id).value;
    // The times are UTC, as the jids and the table are.
    const from = v("f-from") ? new Date(v("f-from") + "Z") : null;
    const to = v("f-to") ? new Date(v("f-to") + "Z") : null;
    const shown = jobs.filter(([jid, j]) => {
      const when = jidDate(jid);
      return glob(v("f-fun"), j.Function) && glob(v("f-tgt"), text(j.Target)) && glob(v("f-user"), j.User) &&
        (!from || (when && when >= from)) && (!to || (when && when <= to));
    });
    fill(body, shown.map(([jid, j]) =>
      h("tr", { "data-jid": jid },
        h("td", {}, h("a", { href: "#/jobs/" + encodeURIComponent(jid) }, jid)),
        h("td", {}, jidTime(jid)),
        h("td", { class: "fun" }, String(j.Function)),
        h("td", {}, text(j.Target)),
        h("td", {}, String(j.User)),
        h("td", { class: "args" }, text(j.Arguments)))));
  };
  filters.addEventListener("input", draw);
  filters.addEventListener("submit", (e) => e.preventDefault());
  fill(view(), h("h1", {}, "Jobs"), filters,
    h("table", { id: "jobs" },
      h("thead", {}, h("tr", {}, ["Job", "Started", "Function", "Target", "User", "Arguments"].map((t) => h("th", {}, t)))),
      body));
  draw();
}

async function jobPage(jid) {
  const data = await api.call("GET", "/jobs/" + encodeURIComponent(jid));
  const info = data.info[0] || {};
  const rets = data.return[0] || {};
  fill(
    view(),
    h("h1", {}, "Job " + jid),
    h("dl", { class: "info" },
      ["Function", "Target", "User", "Arguments"].map((k) => [h("dt", {}, k), h("dd", {}, text(info[k]))]),
      h("dt", {}, "Started"), h("dd", {}, jidTime(jid))),
    Object.keys(rets).length ? [] : message("muted", "No minion has returned yet."),
    Object.entries(rets).sort().map(([id, ret]) =>
      h("section", { class: "return", "data-minion": id },
        h("h2", {}, id),
        isStateRun(ret) ? highstate(id, statesOf(ret)) : h("pre", { class: "json" }, text(ret)))),
  );
}

// ---- live ----------------------------------------------------------------

function counterLine(c) {
  return h("span", { class: "counters" },
    h("span", { class: "done" }, `${c.done}/${c.total ?? "?"} done`), " · ",
    h("span", { class: "c-ok" }, `${c.ok} ok`), " · ",
    h("span", { class: "c-changed" }, `${c.changed} changed`), " · ",
    h("span", { class: "c-failed" }, `${c.failed} failed`),
    c.pending ? [" · ", h("span", { class: "c-pending" }, `${c.pending} would change`)] : []);
}

function minionCard(job, m) {
  const c = counters(m);
  const status = m.done ? (c.failed || m.error ? "failed" : "done") : "running";
  return h("div", { class: ["minion-run", status], "data-minion": m.id, "data-status": status },
    h("h3", {}, h("span", { class: "mid" }, m.id), " ", h("span", { class: ["badge", status] }, status), " ", counterLine(c)),
    m.error !== null && m.error !== undefined ? h("pre", { class: "json error" }, text(m.error)) : [],
    h("ul", { class: "states" },
      failuresFirst([...m.states.values()]).map((r) =>
        h("li", { class: ["state-row", resultClass(r)], "data-run": r.__run_num__ },
          h("a", { href: `#/run/${encodeURIComponent(job.jid)}/${encodeURIComponent(m.id)}/${r.__run_num__}` },
            h("span", { class: "result" }, { failed: "✗", ok: "✓", changed: "✓", pending: "?" }[resultClass(r)]), " ",
            h("span", { class: "sid" }, String(r.__id__ ?? r.name ?? "")), " ",
            h("span", { class: "comment" }, Array.isArray(r.comment) ? r.comment.join(" ") : String(r.comment ?? "")))))));
}

function jobCard(job) {
  const minions = [...job.minions.values()];
  const totals = minions.reduce((t, m) => {
    const c = counters(m);
    t.failed += c.failed;
    t.ok += c.ok;
    t.changed += c.changed;
    t.done += m.done ? 1 : 0;
    return t;
  }, { failed: 0, ok: 0, changed: 0, done: 0 });
  const rank = (m) => (counters(m).failed || m.error ? 0 : m.done ? 2 : 1);
  minions.sort((a, b) => rank(a) - rank(b) || a.id.localeCompare(b.id));
  return h("section", { class: "job-run", "data-jid": job.jid },
    h("h2", {}, `${job.fun} ${job.arg && job.arg.length ? text(job.arg[0]) : ""} on ${job.tgt}`,
      h("span", { class: "muted" }, ` · ${job.jid} · ${job.user}`)),
    h("p", { class: "totals" },
      h("span", { class: "minions-done" }, `${totals.done}/${minions.length} minions finished`), " · ",
      h("span", { class: "c-ok" }, `${totals.ok} states ok`), " · ",
      h("span", { class: "c-changed" }, `${totals.changed} changed`), " · ",
      h("span", { class: "c-failed" }, `${totals.failed} failed`)),
    minions.map((m) => minionCard(job, m)));
}

async function livePage() {
  const can = state.can;
  const out = h("div", { id: "runs" });
  const form = can.state &&
    h("form", { id: "run-form", class: "filters" },
      h("label", {}, "Target", h("input", { id: "run-tgt", value: "*" })),
      h("label", {}, "SLS", h("input", { id: "run-sls", placeholder: "(highstate)" })),
      h("label", { class: "check" }, h("input", { id: "run-test", type: "checkbox" }), "test=True"),
      h("button", { id: "run-submit", type: "submit", disabled: true }, "state.apply"));
  const err = h("div", { id: "run-error" });
  const denied = message("muted", "Your permissions do not allow this target and SLS.");
  denied.id = "run-denied";
  denied.hidden = true;
  const runChunk = () => {
    const sls = document.getElementById("run-sls").value.trim();
    const chunk = { client: "local_async", tgt: document.getElementById("run-tgt").value, fun: "state.apply", arg: sls ? [sls] : [] };
    if (document.getElementById("run-test").checked) chunk.kwarg = { test: true };
    return chunk;
  };
  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      fill(err);
      const chunk = runChunk();
      try {
        const ret = await api.lowstate(chunk);
        if (!ret[0] || !ret[0].jid) fill(err, message("error", "No minion matched the target."));
        else {
          const job = state.runs.job(ret[0].jid);
          job.fun ||= "state.apply";
          job.tgt ||= chunk.tgt;
          job.arg ||= chunk.arg;
          for (const id of ret[0].minions || []) state.runs.minion(ret[0].jid, id);
          state.focusJid = ret[0].jid;
          scheduleRedraw();
        }
      } catch (e) {
        fill(err, failure(e));
      }
    });
  }
  fill(view(), h("h1", {}, "Live state runs"),
    h("p", { id: "stream-status", class: "muted", "data-status": state.stream }, "event stream: " + state.stream),
    form || message("muted", "You may watch state runs; running them is not in your permissions."),
    form ? denied : [], err, out);
  if (form) guardForm(form, document.getElementById("run-submit"), denied, runChunk);
  state.redraw = () => {
    const jobs = [...state.runs.jobs.values()].filter((j) => j.fun).sort((a, b) => (a.jid < b.jid ? 1 : -1));
    fill(out, jobs.length ? jobs.map(jobCard) : message("muted", "No state run seen since this page opened."));
  };
  state.redraw();
}

async function runPage(jid, id, run) {
  let states = null;
  const live = state.runs.jobs.get(jid)?.minions.get(id);
  if (live && live.done) states = [...live.states.values()];
  if (!states && state.can.jobs) {
    const data = await api.call("GET", "/jobs/" + encodeURIComponent(jid));
    const ret = (data.return[0] || {})[id];
    if (isStateRun(ret)) states = statesOf(ret);
  }
  if (!states && live) states = [...live.states.values()];
  if (!states) {
    fill(view(), message("error", `No state run of ${id} in job ${jid}.`));
    return;
  }
  fill(view(), h("p", {}, h("a", { href: "#/live" }, "← live runs")), h("h1", {}, `${id} · job ${jid}`), highstate(id, states, run));
  const sel = view().querySelector(".state.selected");
  if (sel) sel.scrollIntoView({ block: "center" });
}

// ---- graph ---------------------------------------------------------------

async function graphPage() {
  const out = h("div", { id: "graph-out" });
  const form = h("form", { id: "graph-form", class: "filters" },
    h("label", {}, "Minion", h("input", { id: "g-tgt", required: true })),
    h("label", {}, "SLS", h("input", { id: "g-sls", placeholder: "(highstate)" })),
    h("button", { id: "g-submit", type: "submit", disabled: true }, "Draw"));
  const denied = message("muted", "Your permissions do not allow this minion and SLS.");
  denied.id = "g-denied";
  denied.hidden = true;
  const graphChunk = () => {
    const tgt = document.getElementById("g-tgt").value.trim();
    const sls = document.getElementById("g-sls").value.trim();
    return { client: "local", tgt, fun: "state.graph", arg: sls ? [sls] : [], kwarg: { format: "json" } };
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    fill(out, message("muted", "Compiling…"));
    const chunk = graphChunk();
    const tgt = chunk.tgt;
    try {
      const ret = await api.lowstate(chunk);
      const g = (ret[0] || {})[tgt];
      if (g && typeof g === "object" && Array.isArray(g.nodes)) {
        fill(out, h("p", { class: "muted" }, `${g.nodes.length} states, ${g.edges.length} requisites`), drawGraph(g));
      } else if (g === undefined) {
        fill(out, message("error", `${tgt} did not answer.`));
      } else {
        fill(out, message("error", "The SLS did not compile:"), h("pre", { class: "json error" }, text(g)));
      }
    } catch (e) {
      fill(out, failure(e));
    }
  });
  fill(view(), h("h1", {}, "Requisite graph"), form, denied, out);
  guardForm(form, document.getElementById("g-submit"), denied, graphChunk);
}

start();
