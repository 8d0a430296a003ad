// The master's event stream, read with fetch() so the token goes in the
// X-Auth-Token header (EventSource cannot send headers, and halite-api,
// as Salt 3008.5, refuses tokens in the query string), and the live view
// of state runs built from it: salt/job/<jid>/new, .../prog/<minion>/<n>
// (one per finished state) and .../ret/<minion>.

import { session } from "./api.js";

/** Opens /events; calls onEvent({tag, data}) per event until stop(). */
export function openEvents(onEvent, onStatus) {
  const ctrl = new AbortController();
  let stopped = false;
  async function run() {
    while (!stopped) {
      const s = session();
      if (!s) return;
      try {
        onStatus && onStatus("connecting");
        const resp = await fetch("/events", {
          headers: { "X-Auth-Token": s.token, Accept: "text/event-stream" },
          credentials: "omit",
          cache: "no-store",
          signal: ctrl.signal,
        });
        if (!resp.ok) {
          onStatus && onStatus("refused (" + resp.status + ")");
          return;
        }
        onStatus && onStatus("live");
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let at;
          while ((at = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, at);
            buf = buf.slice(at + 2);
            const data = frame
              .split("\n")
              .filter((l) => l.startsWith("data:"))
              .map((l) => l.slice(5).trimStart())
              .join("\n");
            if (!data) continue;
            try {
              onEvent(JSON.parse(data));
            } catch {
              // A frame that is not JSON is not ours to show.
            }
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      onStatus && onStatus("reconnecting");
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  run();
  return () => {
    stopped = true;
    ctrl.abort();
  };
}

/** One state result's class: failed, pending (test mode), changed or ok. */
export function resultClass(r) {
  if (r.result === false) return "failed";
  if (r.result === null || r.result === undefined) return "pending";
  if (r.changes && Object.keys(r.changes).length) return "changed";
  return "ok";
}

const RANK = { failed: 0, pending: 1, changed: 2, ok: 3 };

/** States sorted failures first, then by run order. */
export function failuresFirst(states) {
  return [...states].sort(
    (a, b) =>
      RANK[resultClass(a)] - RANK[resultClass(b)] ||
      (a.__run_num__ ?? 0) - (b.__run_num__ ?? 0),
  );
}

/** The runs seen on the stream: jid → {jid, fun, tgt, user, minions: id → run}. */
export class Runs {
  constructor() {
    this.jobs = new Map();
  }

  job(jid) {
    if (!this.jobs.has(jid)) {
      this.jobs.set(jid, { jid, fun: "", tgt: "", user: "", minions: new Map() });
    }
    return this.jobs.get(jid);
  }

  minion(jid, id) {
    const job = this.job(jid);
    if (!job.minions.has(id)) {
      job.minions.set(id, { id, states: new Map(), total: null, done: false, retcode: null, error: null });
    }
    return job.minions.get(id);
  }

  /** Takes one event; true when it concerned a state run. */
  take(ev) {
    const parts = (ev.tag || "").split("/");
    if (parts[0] !== "salt" || parts[1] !== "job" || !parts[2]) return false;
    const jid = parts[2];
    const d = ev.data || {};
    if (parts[3] === "new") {
      if (!String(d.fun || "").startsWith("state.")) return false;
      const job = this.job(jid);
      job.fun = d.fun;
      job.tgt = Array.isArray(d.tgt) ? d.tgt.join(",") : String(d.tgt ?? "");
      job.user = String(d.user ?? "");
      job.arg = d.arg;
      for (const id of d.minions || []) this.minion(jid, String(id));
      return true;
    }
    if (!this.jobs.has(jid)) return false;
    if (parts[3] === "prog" && parts[4]) {
      // Salt's bus shape nests the minion's payload under `data`
      // ({"cmd": "_minion_event", "data": {"len", "ret"}}).
      const p = d.data && typeof d.data === "object" && "ret" in d.data ? d.data : d;
      const m = this.minion(jid, parts[4]);
      if (m.done || !p.ret || typeof p.ret !== "object") return false;
      const r = p.ret;
      m.states.set(String(r.__run_num__ ?? m.states.size), r);
      if (typeof p.len === "number") m.total = p.len;
      return true;
    }
    if (parts[3] === "ret" && parts[4]) {
      const m = this.minion(jid, parts[4]);
      m.done = true;
      m.retcode = d.retcode ?? null;
      const ret = d.return;
      if (ret && typeof ret === "object" && !Array.isArray(ret)) {
        m.states = new Map();
        for (const [tag, r] of Object.entries(ret)) {
          if (r && typeof r === "object") {
            m.states.set(String(r.__run_num__ ?? m.states.size), { ...r, __tag__: tag });
          }
        }
        m.total = m.states.size;
      } else {
        m.error = ret;
      }
      return true;
    }
    return false;
  }
}

/** Counters of a minion's run: {total, done, ok, changed, failed, pending}. */
export function counters(m) {
  const c = { total: m.total, done: m.states.size, ok: 0, changed: 0, failed: 0, pending: 0 };
  for (const r of m.states.values()) c[resultClass(r)] += 1;
  return c;
}
