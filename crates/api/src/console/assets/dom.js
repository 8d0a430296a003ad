// Building the page without parsing markup: every string given here becomes
// a text node (or an attribute value), never HTML, so minion-provided data
// (grains, returns, comments) renders as text whatever it contains.

const SVG = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) {
      // Handlers are functions only: an "on…" attribute string is markup.
      if (typeof v === "function") el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** An HTML element: h("td", {class: "x"}, "text", child). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG, tag), attrs, children);
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  build(el, {}, children);
  return el;
}

/** A value as readable text: strings as they are, the rest as indented JSON. */
export function text(v) {
  if (typeof v === "string") return v;
  if (v === undefined) return "";
  return JSON.stringify(v, null, 2);
}

/** A jid (YYYYMMDDhhmmssffffff, UTC) as a Date. */
export function jidDate(jid) {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{3})/.exec(jid || "");
  if (!m) return null;
  return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6], +m[7]));
}

/** A jid's time as "YYYY-MM-DD hh:mm:ss UTC". */
export function jidTime(jid) {
  const d = jidDate(jid);
  return d ? d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "";
}
