// One minion's state run drawn as Salt's highstate outputter prints it:
// a block per state (ID, Function, Name, Result, Comment, Started,
// Duration, Changes) in green (succeeded), cyan (changed), red (failed) or
// yellow (test mode: would change), then the Summary. All text nodes.

import { h } from "./dom.js";
import { resultClass } from "./live.js";

/** Salt's nested outputter: the lines of `v` indented by `indent`. */
export function nested(v, indent) {
  const pad = " ".repeat(indent);
  if (v === null || v === undefined) return [pad + "None"];
  if (Array.isArray(v)) {
    if (!v.length) return [];
    return v.flatMap((item) =>
      item !== null && typeof item === "object"
        ? [pad + "|_", ...nested(item, indent + 2)]
        : [pad + "- " + scalar(item)],
    );
  }
  if (typeof v === "object") {
    const lines = [pad + "----------"];
    for (const k of Object.keys(v).sort()) {
      const val = v[k];
      if (val !== null && typeof val === "object") {
        lines.push(pad + k + ":", ...nested(val, indent + 4));
      } else {
        lines.push(pad + k + ":", ...scalar(val).split("\n").map((l) => pad + "    " + l));
      }
    }
    return lines;
  }
  return scalar(v).split("\n").map((l) => pad + l);
}

function scalar(v) {
  if (v === true) return "True";
  if (v === false) return "False";
  if (v === null || v === undefined) return "None";
  return String(v);
}

function field(label, value, cls) {
  const lines = String(value).split("\n");
  const out = [h("span", { class: "label" }, label.padStart(12) + ": "), h("span", { class: cls }, lines[0]), "\n"];
  for (const l of lines.slice(1)) out.push(" ".repeat(14), h("span", { class: cls }, l), "\n");
  return out;
}

function idOf(r) {
  if (r.__id__) return r.__id__;
  const parts = String(r.__tag__ || "").split("_|-");
  return parts[1] || r.name || "";
}

function funOf(r) {
  const parts = String(r.__tag__ || "").split("_|-");
  return parts.length >= 4 ? parts[0] + "." + parts[3] : r.fun || "";
}

/** A state's block; `selected` marks the one the user opened. */
export function stateBlock(r, selected) {
  const cls = resultClass(r);
  const color = { ok: "green", changed: "cyan", failed: "red", pending: "yellow" }[cls];
  const changes = r.changes && Object.keys(r.changes).length ? nested(r.changes, 14).join("\n") : "";
  return h(
    "div",
    { class: ["state", cls, selected && "selected"], "data-run": r.__run_num__ },
    h("span", { class: color }, "----------"),
    "\n",
    field("ID", idOf(r), color),
    // A state seen only in a prog event has no tag, so no function yet.
    funOf(r) ? field("Function", funOf(r), color) : [],
    field("Name", scalar(r.name), color),
    field("Result", scalar(r.result), color),
    field("Comment", Array.isArray(r.comment) ? r.comment.join("\n") : scalar(r.comment ?? ""), color),
    r.start_time ? field("Started", r.start_time, color) : [],
    r.duration !== undefined ? field("Duration", r.duration + " ms", color) : [],
    h("span", { class: "label" }, "     Changes:"),
    "\n",
    changes ? [h("span", { class: "cyan" }, changes), "\n"] : [],
  );
}

/** A minion's run: its states in run order, then Salt's Summary. */
export function highstate(id, states, selectedRun) {
  const list = [...states].sort((a, b) => (a.__run_num__ ?? 0) - (b.__run_num__ ?? 0));
  let ok = 0;
  let changed = 0;
  let failed = 0;
  let ms = 0;
  for (const r of list) {
    const c = resultClass(r);
    if (c === "failed") failed += 1;
    else ok += 1;
    if (r.changes && Object.keys(r.changes).length) changed += 1;
    ms += Number(r.duration) || 0;
  }
  const line = "-".repeat(12);
  return h(
    "pre",
    { class: "highstate" },
    h("span", { class: failed ? "red" : "cyan" }, id + ":"),
    "\n",
    list.map((r) => stateBlock(r, selectedRun !== undefined && String(r.__run_num__) === String(selectedRun))),
    "\n",
    h("span", { class: "cyan" }, "Summary for " + id + "\n" + line),
    "\n",
    h("span", { class: "green" }, "Succeeded: " + ok),
    changed ? [" (", h("span", { class: "green" }, "changed="), h("span", { class: "cyan" }, String(changed)), ")"] : [],
    "\n",
    h("span", { class: failed ? "red" : "cyan" }, "Failed:    " + failed),
    "\n",
    h("span", { class: "cyan" }, line + "\nTotal states run:     " + list.length + "\nTotal run time: " + ms.toFixed(3).padStart(10) + " ms"),
    "\n",
  );
}

/** Whether a job return looks like a state run ({tag: {result, ...}}). */
export function isStateRun(ret) {
  if (!ret || typeof ret !== "object" || Array.isArray(ret)) return false;
  const vals = Object.values(ret);
  return vals.length > 0 && vals.every((r) => r && typeof r === "object" && "result" in r && "comment" in r);
}

/** A state-run return's states with their tags kept. */
export function statesOf(ret) {
  return Object.entries(ret).map(([tag, r]) => ({ ...r, __tag__: tag }));
}
