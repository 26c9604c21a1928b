// The Switchboard console: a small single-page app over the REST API (/api/v1).
// Everything shown from the API goes through textContent, never innerHTML.
"use strict";

const API = "/api/v1";
const STAGES = ["eot_decided", "transcript_ready", "route_decided", "first_token",
  "first_audio_out", "response_done"];
const state = { me: null, csrf: null, timer: null, callsQuery: {}, callsOffset: 0, editor: null,
  schema: null, missedOffset: 0, usersOffset: 0, tokensOffset: 0, auditOffset: 0, rendering: 0 };

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    // Through the CSSOM: the content security policy refuses style attributes.
    else if (k === "style") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : describe(detail));
    this.status = status;
    this.detail = detail;
  }
}

function describe(detail) {
  if (Array.isArray(detail)) {
    return detail.map((d) => {
      const where = (d.loc || []).filter((p) => p !== "body").join(".");
      return where ? `${where}: ${d.msg}` : d.msg;
    }).join("\n");
  }
  return JSON.stringify(detail);
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && state.csrf) headers["X-CSRF-Token"] = state.csrf;
  const r = await fetch(API + path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (r.status === 204) return null;
  const data = await r.json().catch(() => ({}));
  if (r.status === 401 && path !== "/auth/login") { showLogin(); throw new ApiError(401, data.detail); }
  if (!r.ok) throw new ApiError(r.status, data.detail || r.statusText);
  return data;
}

function toast(text) {
  const t = document.getElementById("toast");
  t.textContent = text;
  t.classList.add("show");
  setTimeout(() => t.classList.remove("show"), 2500);
}

function fmtTime(iso) { return iso ? new Date(iso).toLocaleString() : "—"; }
function fmtMs(ms) { return ms === null || ms === undefined ? "—" : `${Math.round(ms)} ms`; }
function lines(text) { return text.split("\n").map((s) => s.trim()).filter(Boolean); }

function page(title, ...content) {
  const main = document.getElementById("main");
  main.replaceChildren(h("h1", {}, title), ...content.flat().filter((c) => c !== null));
  return main;
}

// A table; at phone width each row becomes a card of labelled cells (table.cards), so that
// no column is lost. A column without a title (buttons) is shown without a label.
function table(columns, rows, onClick) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.cls }, c.title)));
  const body = rows.map((row) => h("tr", {
    class: onClick ? "link" : null, onclick: onClick ? () => onClick(row) : null,
  }, columns.map((c) => h("td", { class: [c.cls, c.title ? null : "nolabel"].filter(Boolean)
    .join(" ") || null, "data-label": c.title }, c.value(row)))));
  return h("div", { class: "scroll" },
    h("table", { class: "cards" }, h("thead", {}, head), h("tbody", {}, body)));
}

// Newer / Older buttons for a list of `total` shown `size` at a time from `offset`.
function pager(total, offset, size, go, noun) {
  const count = h("span", { class: "muted" }, `${total} ${noun}`);
  if (total <= size && offset === 0) return h("div", { class: "pager" }, count);
  return h("div", { class: "pager" },
    h("button", { class: "plain", type: "button", disabled: offset === 0,
      onclick: () => go(Math.max(offset - size, 0)) }, "Newer"),
    h("button", { class: "plain", type: "button", disabled: offset + size >= total,
      onclick: () => go(offset + size) }, "Older"),
    count);
}

// One editor open at a time, placed right after `anchor` (a table row: in a row of its own
// below it) and scrolled into view with its first field focused.
function openEditor(anchor, form) {
  closeEditor();
  let holder = form;
  if (anchor.tagName === "TR") {
    holder = h("tr", { class: "editor-row" },
      h("td", { colspan: anchor.children.length, class: "nolabel" }, form));
  }
  anchor.after(holder);
  state.editor = { holder, anchor };
  form.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeEditor(); });
  anchor.scrollIntoView({ block: "start" });
  const first = form.querySelector("input, textarea, select");
  if (first) first.focus({ preventScroll: true });
}

function closeEditor() {
  if (!state.editor) return;
  state.editor.holder.remove();
  state.editor = null;
}

function cancelButton() {
  return h("button", { type: "button", class: "plain cancel", onclick: closeEditor }, "Cancel");
}

// -- login ------------------------------------------------------------------------------

function showLogin() {
  stopTimer();
  state.me = null; state.csrf = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  const err = h("p", { class: "error", id: "login-error" });
  const form = h("form", { class: "card login", id: "login-form" },
    h("h1", {}, "Log in"),
    h("label", { for: "login-name" }, "Name"),
    h("input", { id: "login-name", name: "name", autocomplete: "username", required: true }),
    h("label", { for: "login-password" }, "Password"),
    h("input", { id: "login-password", name: "password", type: "password",
      autocomplete: "current-password", required: true }),
    h("p", {}, h("button", { type: "submit" }, "Log in")), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const me = await api("POST", "/auth/login", {
        name: form.elements.name.value, password: form.elements.password.value });
      loggedIn(me);
      route();
    } catch (e) { err.textContent = e.message; }
  });
  document.getElementById("main").replaceChildren(form);
}

function loggedIn(me) {
  state.me = me; state.csrf = me.csrf_token;
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  document.getElementById("who").textContent = `${me.name} (${me.role})`;
  for (const a of document.querySelectorAll(".admin-only")) a.hidden = me.role !== "admin";
}

// -- live calls -------------------------------------------------------------------------

async function livePage() {
  const holder = h("div", { id: "live-calls" }, h("p", { class: "muted" }, "Loading…"));
  page("Live calls", h("p", { class: "muted" }, "Updated every 2 seconds."), holder);
  const refresh = async () => {
    const calls = await api("GET", "/calls/live");
    holder.replaceChildren(calls.length === 0
      ? h("p", { class: "muted", id: "no-live-calls" }, "No calls in progress.")
      : table([
        { title: "Caller", value: (c) => c.caller },
        { title: "Answered", value: (c) => fmtTime(c.answered_at) },
        { title: "Turns", value: (c) => c.turns },
        { title: "Last route", value: (c) => c.last_route || "—" },
        { title: "Node", value: (c) => c.node },
      ], calls, (c) => { location.hash = `#/calls/${c.id}`; }));
  };
  await refresh();
  state.timer = setInterval(() => refresh().catch(() => {}), 2000);
}

// -- the call log -----------------------------------------------------------------------

async function callsPage() {
  const q = state.callsQuery;
  const form = h("form", { class: "card row", id: "call-filters" },
    h("div", {}, h("label", { for: "f-caller" }, "Caller"),
      h("input", { id: "f-caller", name: "caller", value: q.caller || "" })),
    h("div", {}, h("label", { for: "f-route" }, "Route"),
      h("select", { id: "f-route", name: "route" }, ["", "exact", "semantic", "knowledge", "llm",
        "fallback", "none"].map((r) => h("option", { value: r, selected: q.route === r }, r || "any")))),
    h("div", {}, h("label", { for: "f-end" }, "End reason"),
      h("input", { id: "f-end", name: "end_reason", value: q.end_reason || "" })),
    h("div", {}, h("label", { for: "f-since" }, "Since"),
      h("input", { id: "f-since", name: "since", type: "datetime-local", value: q.since || "" })),
    h("div", {}, h("button", { type: "submit" }, "Filter")));
  const list = h("div", { id: "call-list" });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = form.elements;
    state.callsQuery = { caller: f.caller.value, route: f.route.value,
      end_reason: f.end_reason.value, since: f.since.value };
    state.callsOffset = 0;
    loadCalls(list);
  });
  page("Calls", form, list);
  await loadCalls(list);
}

async function loadCalls(list) {
  const params = new URLSearchParams({ limit: "25", offset: String(state.callsOffset) });
  for (const [k, v] of Object.entries(state.callsQuery)) {
    if (!v) continue;
    params.set(k, k === "since" ? new Date(v).toISOString() : v);
  }
  const data = await api("GET", `/calls?${params}`);
  list.replaceChildren(
    table([
      { title: "Answered", value: (c) => fmtTime(c.answered_at) },
      { title: "Caller", value: (c) => c.caller },
      { title: "Turns", value: (c) => c.turns },
      { title: "End", value: (c) => c.end_reason || "in progress" },
      { title: "Config", value: (c) => c.config_version.slice(0, 8) },
    ], data.items, (c) => { location.hash = `#/calls/${c.id}`; }),
    pager(data.total, state.callsOffset, 25,
      (offset) => { state.callsOffset = offset; loadCalls(list); }, "call(s)"));
}

function waterfall(turn) {
  const marks = STAGES.filter((s) => turn.stage_ms[s] !== undefined)
    .map((s) => [s, turn.stage_ms[s]]);
  if (marks.length === 0) return h("p", { class: "muted" }, "No stage times.");
  const end = Math.max(...marks.map(([, ms]) => ms), 1);
  const rows = [];
  let from = 0;
  for (const [stage, ms] of marks.sort((a, b) => a[1] - b[1])) {
    const left = (Math.min(from, ms) / end) * 100;
    const width = Math.max(((ms - Math.min(from, ms)) / end) * 100, 0.5);
    rows.push(h("span", {}, stage.replaceAll("_", " ")),
      h("div", { class: "track" }, h("div", { class: `bar stage-${stage}`,
        style: { left: `${left}%`, width: `${width}%` }, title: `${stage}: ${ms} ms` })),
      h("span", {}, fmtMs(ms)));
    from = ms;
  }
  return h("div", { class: "waterfall", "data-seq": turn.seq }, rows);
}

// A recorded call's audio (caller left, bot right); fetching it is in the audit log.
function recordingPlayer(c) {
  if (!c.recorded) return null;
  if (!canEdit()) return h("p", { class: "muted" }, "Recorded (editors and admins can play it).");
  if (c.ended_at === null) return h("p", { class: "muted" }, "Recording: when the call ends.");
  const src = `${API}/calls/${encodeURIComponent(c.id)}/recording`;
  return h("section", { class: "card recording" }, h("h2", {}, "Recording"),
    h("audio", { controls: true, preload: "none", src }),
    h("p", {}, h("a", { href: src, download: `call-${c.id}.wav` }, "Download (WAV)")));
}

async function callPage(id) {
  const c = await api("GET", `/calls/${encodeURIComponent(id)}`);
  const turns = c.turns_detail.map((t) => h("section", { class: "card turn" },
    h("h2", {}, `Turn ${t.seq} · ${t.route}${t.intent ? ` (${t.intent})` : ""}` +
      (t.outcome ? ` · ${t.outcome.replaceAll("_", " ")}` : "") +
      ` · voice-to-voice ${fmtMs(t.voice_to_voice_ms)}`),
    h("p", {}, h("b", {}, "Caller: "), t.transcript || "—"),
    h("p", {}, h("b", {}, "Bot: "), t.answer || "—"),
    t.decision ? h("p", { class: "muted" }, h("b", {}, "Why: "),
      `${t.decision.kind} · ${t.decision.why}` +
      (t.decision.heard && t.decision.heard !== "first" ? ` (${t.decision.heard} words)` : "")) : null,
    t.error ? h("p", { class: "error" }, t.error) : null,
    waterfall(t)));
  page(`Call from ${c.caller}`,
    h("p", { class: "muted" }, `${fmtTime(c.answered_at)} – ${fmtTime(c.ended_at)} · ` +
      `${c.end_reason || "in progress"} · node ${c.node} · configuration ${c.config_version}`),
    c.outcome ? h("p", { class: "outcome" }, h("b", {}, "Outcome: "),
      `${c.outcome} (${(c.outcome_reason || "").replaceAll("_", " ")})`,
      c.post_call_answer ? h("span", { class: "post-call" }, " · ", h("b", {},
        "Caller's answer to \"Did we answer your question?\": "),
      c.post_call_answer === "none" ? "no answer" : c.post_call_answer) : null) : null,
    recordingPlayer(c),
    h("h2", {}, "Turns"), turns.length ? turns : h("p", { class: "muted" }, "No turns."),
    h("h2", {}, "Events"),
    c.events.length ? table([
      { title: "At", value: (e) => fmtTime(e.at) },
      { title: "Kind", value: (e) => e.kind },
      { title: "Detail", value: (e) => e.detail || "" },
    ], c.events) : h("p", { class: "muted" }, "No events."));
}

// -- latency ----------------------------------------------------------------------------

const ROUTE_COLORS = { exact: "#067647", semantic: "#0e9384", knowledge: "#7a5af8",
  llm: "#2456c7", fallback: "#dc6803", none: "#98a2b3" };

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

function latencyChart(series) {
  if (series.points.length === 0) return h("p", { class: "muted" }, "No timed turns yet.");
  const W = 800, H = 260, L = 50, B = 24;
  const t0 = Date.parse(series.since), t1 = Date.parse(series.until);
  const top = Math.max(...series.points.map((p) => p.p95_ms)) * 1.1;
  const half = series.bucket_minutes * 30000; // a point sits in the middle of its bucket
  const x = (iso) => L + ((Date.parse(iso) + half - t0) / (t1 - t0)) * (W - L);
  const y = (ms) => H - B - (ms / top) * (H - B - 8);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
    "aria-label": "voice-to-voice P50 and P95 per route over time" });
  for (const frac of [0, 0.5, 1]) {
    const ms = Math.round(top * frac);
    chart.append(svg("line", { x1: L, x2: W, y1: y(ms), y2: y(ms), stroke: "#d9dee7" }),
      svg("text", { x: 2, y: y(ms) + 4, "font-size": 11, fill: "#667085" }, `${ms} ms`));
  }
  const routes = [...new Set(series.points.map((p) => p.route))];
  const legend = [];
  for (const route of routes) {
    const pts = series.points.filter((p) => p.route === route);
    const color = ROUTE_COLORS[route] || "#1d2330";
    for (const [key, dash] of [["p50_ms", "none"], ["p95_ms", "5 4"]]) {
      chart.append(svg("polyline", { class: `series route-${route} ${key}`, fill: "none",
        stroke: color, "stroke-width": 2, "stroke-dasharray": dash,
        points: pts.map((p) => `${x(p.start)},${y(p[key])}`).join(" ") }));
    }
    for (const p of pts) {
      chart.append(svg("circle", { cx: x(p.start), cy: y(p.p50_ms), r: 3, fill: color },
        svg("title", {}, `${route} ${fmtTime(p.start)}: P50 ${p.p50_ms} ms, ` +
          `P95 ${p.p95_ms} ms (${p.turns} turns)`)));
    }
    legend.push(h("span", { class: `legend route-${route}` }, `${route}`));
  }
  return h("div", {}, chart, h("p", { class: "muted" },
    "Solid: P50, dashed: P95, per hour. ", legend.map((l, i) => [i ? " · " : "", l])));
}

async function latencyPage() {
  const [s, series] = await Promise.all([api("GET", "/summary"), api("GET", "/summary/latency")]);
  // One bar an hour over the whole window, empty hours included.
  const counts = new Map(s.calls_per_hour.map((x) => [Date.parse(x.hour), x.calls]));
  const hours = [];
  const first = new Date(s.since);
  first.setUTCMinutes(0, 0, 0);
  for (let t = first.getTime(); t < Date.parse(s.until); t += 3600000) {
    hours.push({ hour: new Date(t).toISOString(), calls: counts.get(t) || 0 });
  }
  const most = Math.max(1, ...hours.map((x) => x.calls));
  page("Latency and volume (last 24 hours)",
    h("div", { class: "stats" },
      h("div", { class: "stat" }, h("b", {}, s.calls), "calls"),
      h("div", { class: "stat" }, h("b", {}, s.turns), "turns"),
      h("div", { class: "stat" }, h("b", {}, s.cache_hit_rate === null ? "—"
        : `${Math.round(s.cache_hit_rate * 100)} %`), "answered from the cache"),
      h("div", { class: "stat" }, h("b", {}, s.live_calls ?? "—"), "calls now")),
    h("h2", {}, "Voice-to-voice over time"),
    latencyChart(series),
    h("h2", {}, "Voice-to-voice by route"),
    table([
      { title: "Route", value: (r) => r.route },
      { title: "Turns", value: (r) => r.turns },
      { title: "P50", value: (r) => fmtMs(r.p50_ms) },
      { title: "P95", value: (r) => fmtMs(r.p95_ms) },
    ], s.voice_to_voice),
    h("h2", {}, "Calls per hour"),
    h("div", { class: "hours" }, hours.map((x) => h("div", {
      style: { height: `${(x.calls / most) * 100}%` }, title: `${fmtTime(x.hour)}: ${x.calls}` }))));
}

// -- intents and knowledge ----------------------------------------------------------------

const canEdit = () => state.me && state.me.role !== "viewer";
const isAdmin = () => state.me && state.me.role === "admin";

// The topic said in the bot's questions: the operator's, or the derived one, marked so.
const topicCell = (written, inUse) => (written ? written
  : h("span", { class: "derived", title: "derived from the name and examples" },
    inUse || "—", h("span", { class: "muted" }, " (derived)")));

function intentForm(intent, onSaved) {
  const isNew = intent === null;
  const i = intent || { name: "", examples: [], negatives: [], answer: "", action: null,
    transfer_to: null, confirm: null, topic: null, topic_in_use: null };
  const err = h("p", { class: "error" });
  const form = h("form", { class: "card intent-form" },
    h("h2", {}, isNew ? "New intent" : `Edit ${i.name}`),
    isNew ? [h("label", { for: "i-name" }, "Name (a-z, 0-9, _)"),
      h("input", { id: "i-name", name: "name", required: true, pattern: "[a-z0-9_]+",
        maxlength: 128 })] : null,
    h("label", { for: "i-examples" }, "Examples (one a line)"),
    h("textarea", { id: "i-examples", name: "examples" }, i.examples.join("\n")),
    h("label", { for: "i-negatives" }, "Negatives (one a line)"),
    h("textarea", { id: "i-negatives", name: "negatives" }, i.negatives.join("\n")),
    h("label", { for: "i-answer" }, "Answer"),
    h("textarea", { id: "i-answer", name: "answer" }, i.answer),
    h("label", { for: "i-topic" }, "Topic",
      h("span", { class: "hint" }, "What the intent is about, in at most 6 words said after " +
        "\"Is this about\" (\"your refund\"); also offered beside a near intent. Empty: " +
        (i.topic_in_use && !i.topic ? `derived: "${i.topic_in_use}".` :
          "derived from the name and examples."))),
    h("input", { id: "i-topic", name: "topic", maxlength: 80, value: i.topic || "",
      placeholder: i.topic_in_use || "your refund" }),
    h("label", { for: "i-confirm" }, "Confirmation question",
      h("span", { class: "hint" }, "Asked when the caller's words are near this intent but " +
        "not near enough to answer. Empty: \"Is this about\" and the topic.")),
    h("input", { id: "i-confirm", name: "confirm", maxlength: 300, value: i.confirm || "",
      placeholder: "Do you want to …?" }),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "i-action" }, "Then"),
        h("select", { id: "i-action", name: "action" },
          [["", "nothing"], ["transfer", "transfer"], ["hangup", "hang up"]].map(([v, t]) =>
            h("option", { value: v, selected: (i.action || "") === v }, t)))),
      h("div", {}, h("label", { for: "i-transfer" }, "Transfer to (SIP URI)"),
        h("input", { id: "i-transfer", name: "transfer_to", value: i.transfer_to || "" }))),
    h("p", { class: "actions" }, h("button", { type: "submit" }, "Save"), cancelButton()), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    const confirmText = f.confirm.value.trim() || null;
    const topicText = f.topic.value.trim().replace(/\s+/g, " ") || null;
    const body = { examples: lines(f.examples.value), negatives: lines(f.negatives.value),
      answer: f.answer.value, action: f.action.value || null,
      transfer_to: f.transfer_to.value || null };
    try {
      if (isNew) {
        await api("POST", "/config/intents", { name: f.name.value, ...body, confirm: confirmText,
          topic: topicText });
      } else {
        // The question is sent only when it changed, and what the API kept is checked.
        if (confirmText !== (i.confirm || null)) body.confirm = confirmText;
        if (topicText !== (i.topic || null)) body.topic = topicText;
        const saved = await api("PATCH", `/config/intents/${encodeURIComponent(i.name)}`, body);
        if ("confirm" in body && (saved.confirm || null) !== confirmText) {
          err.textContent = "Saved, but this API did not change the confirmation question " +
            `(it is still ${JSON.stringify(saved.confirm)}).`;
          return;
        }
        if ("topic" in body && (saved.topic || null) !== topicText) {
          err.textContent = "Saved, but this API did not change the topic " +
            `(it is still ${JSON.stringify(saved.topic)}).`;
          return;
        }
      }
      closeEditor();
      toast("Saved: nodes use it from their next call");
      onSaved();
    } catch (e) { err.textContent = e.message; }
  });
  return form;
}

// ``start``: a new entry's first fields (the Missed questions page gives the question).
function knowledgeForm(entry, onSaved, start) {
  const isNew = entry === null;
  const k = entry || { topic: "", questions: [], answer: "", keywords: [], about: null,
    about_in_use: null, ...start };
  const err = h("p", { class: "error" });
  const form = h("form", { class: "card knowledge-form" },
    h("h2", {}, isNew ? "New knowledge entry" : `Edit ${k.topic}`),
    isNew ? [h("label", { for: "k-topic" }, "Topic (a-z, 0-9, _)"),
      h("input", { id: "k-topic", name: "topic", required: true, pattern: "[a-z0-9_]+",
        maxlength: 128 })] : null,
    h("label", { for: "k-questions" }, "Questions (one a line)"),
    h("textarea", { id: "k-questions", name: "questions" }, k.questions.join("\n")),
    h("label", { for: "k-answer" }, "Answer"),
    h("textarea", { id: "k-answer", name: "answer" }, k.answer),
    h("label", { for: "k-keywords" }, "Keywords (one a line)"),
    h("textarea", { id: "k-keywords", name: "keywords" }, k.keywords.join("\n")),
    h("label", { for: "k-about" }, "About",
      h("span", { class: "hint" }, "The entry's topic as said after \"Is this about\", in at " +
        "most 6 words (\"gift cards\"). Empty: " +
        (k.about_in_use && !k.about ? `derived: "${k.about_in_use}".` :
          "derived from the topic and questions."))),
    h("input", { id: "k-about", name: "about", maxlength: 80, value: k.about || "",
      placeholder: k.about_in_use || "gift cards" }),
    h("p", { class: "actions" }, h("button", { type: "submit" }, "Save"), cancelButton()), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    const body = { questions: lines(f.questions.value), answer: f.answer.value,
      keywords: lines(f.keywords.value) };
    const aboutText = f.about.value.trim().replace(/\s+/g, " ") || null;
    try {
      if (isNew) {
        await api("POST", "/config/knowledge", { topic: f.topic.value, ...body,
          about: aboutText });
      } else {
        if (aboutText !== (k.about || null)) body.about = aboutText;
        await api("PATCH", `/config/knowledge/${encodeURIComponent(k.topic)}`, body);
      }
      closeEditor();
      toast("Saved: nodes use it from their next call");
      onSaved();
    } catch (e) { err.textContent = e.message; }
  });
  return form;
}

// The intent cache's reasons for not answering, in words.
const WHY_NOT = {
  "negative example closer": "one of its negative examples is closer",
  "exact negative": "the words are one of an intent's negative examples",
  "background closer": "a common request it does not cover is closer",
  "below threshold": "below the answer threshold",
  "margin too small": "too close to another intent",
  "no match": "no intent near",
  "no intents": "there are no intents",
};

const score3 = (x) => (x === null || x === undefined ? "—" : x.toFixed(3));

// What decided the route, from the route's own part of the result: an intent's reason is
// given for the intent routes only; on the knowledge and LLM routes the intents' verdict is
// a line of its own ("Intents"), never the route's reason.
function tryExplained(r) {
  const intentRoute = ["exact", "semantic", "confirm"].includes(r.route);
  let why;
  if (r.route === "exact") why = `the words of an example of intent ${r.intent}`;
  else if (r.route === "semantic") why = `intent ${r.intent}, score ${score3(r.score)}`;
  else if (r.route === "confirm") {
    why = `near intent ${r.intent} (score ${score3(r.score)}) but not near enough to answer ` +
      `(${WHY_NOT[r.reason] || r.reason}): the caller is asked its question`;
  } else if (r.route === "knowledge") {
    why = `knowledge entry ${r.knowledge_topic}, score ${score3(r.knowledge_score)}: ` +
      "near enough for its answer to be spoken as written";
  } else if (r.route === "llm" && r.knowledge_topic) {
    why = `knowledge entry ${r.knowledge_topic}, score ${score3(r.knowledge_score)}: given to ` +
      "the language model, which answers from it";
  } else if (r.route === "llm") {
    why = "no intent or knowledge entry near enough: the language model answers";
  } else why = r.reason;
  let intents = null;
  if (!intentRoute) {
    if (r.intent) {
      intents = `nearest ${r.intent}, score ${score3(r.score)}, not used: ` +
        `${WHY_NOT[r.reason] || r.reason}`;
    } else if (r.reason) intents = `none used: ${WHY_NOT[r.reason] || r.reason}`;
  }
  const answer = r.route === "llm" ? "(the language model answers)" : r.answer || "—";
  const rows = [["Route", r.route, "try-route"], ["Answer", answer, "try-answer"],
    ["Why", why, "try-why"]];
  if (intents) rows.push(["Intents", intents, "try-intents"]);
  return h("dl", { class: "try" }, rows.map(([t, v, id]) => [h("dt", {}, t), h("dd", { id }, v)]));
}

function tryBox() {
  const out = h("div", { id: "try-result" });
  const form = h("form", { class: "card", id: "try-form" },
    h("h2", {}, "Try an utterance"),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "try-text" }, "What a caller says"),
        h("input", { id: "try-text", name: "text", required: true, maxlength: 1000 })),
      h("div", {}, h("button", { type: "submit" }, "Try"))), out);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = form.elements.text.value;
    try {
      out.replaceChildren(tryExplained(await api("POST", "/config/try", { text })));
    } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
    out.dataset.text = text;  // which words the result is for
  });
  return form;
}

// The node's fit of the intents at load: thresholds in use and what to fix (a standalone
// admin API has no node, and answers 503: the card is left out).
function matchingCard(m) {
  if (!m) return null;
  return h("div", { class: "card", id: "matching" },
    h("h2", {}, "Matching in use"),
    h("p", { class: "muted" }, m.threshold === null ? "No intents loaded." :
      `Answer from a score of ${m.threshold.toFixed(2)}; ask the caller from ` +
      `${m.confirm_threshold.toFixed(2)}; held to ${m.background_lines} common requests.`),
    m.warnings.length ? h("ul", {}, ...m.warnings.map((w) => h("li", {}, w.message)))
      : h("p", {}, "No warnings."));
}

async function intentsPage() {
  const [intents, knowledge, matching, nodes] = await Promise.all([
    api("GET", "/config/intents?limit=200"), api("GET", "/config/knowledge?limit=200"),
    api("GET", "/config/matching").catch(() => null),
    api("GET", "/config/nodes").catch(() => null)]);
  const reload = () => redraw(intentsPage);
  const del = async (path, name) => {
    if (!confirm(`Delete ${name}?`)) return;
    try { await api("DELETE", path); toast(`Deleted ${name}`); reload(); }
    catch (e) { toast(e.message); }
  };
  // Edit opens the form in a row right below the one whose button was pressed.
  const actions = (makeForm, path, name, more) => (canEdit() ? h("span", { class: "actions" },
    h("button", { class: "plain edit", type: "button", "data-name": name, onclick: (ev) => {
      ev.stopPropagation(); openEditor(ev.target.closest("tr"), makeForm()); } }, "Edit"),
    more || null,
    h("button", { class: "danger", type: "button",
      onclick: (ev) => { ev.stopPropagation(); del(path, name); } }, "Delete")) : "");
  const newButton = (id, text, makeForm) => (canEdit() ? h("p", {}, h("button", {
    type: "button", id, onclick: (ev) => openEditor(ev.target.closest("p"), makeForm()) },
  text)) : null);
  page("Intents and knowledge",
    nodesCard(nodes),
    tryBox(),
    matchingCard(matching),
    h("h2", {}, "Intents"),
    h("div", { id: "intents" }, table([
      { title: "Name", value: (i) => i.name },
      { title: "Topic", value: (i) => topicCell(i.topic, i.topic_in_use) },
      { title: "Examples", value: (i) => i.examples.length },
      { title: "Answer", value: (i) => i.answer },
      { title: "", value: (i) => actions(() => intentForm(i, reload),
        `/config/intents/${encodeURIComponent(i.name)}`, i.name,
        h("button", { class: "plain suggest-examples", type: "button", "data-name": i.name,
          onclick: (ev) => { ev.stopPropagation();
            openEditor(ev.target.closest("tr"), suggestionsCard(i, reload)); } },
        "Suggest examples")) },
    ], intents.items)),
    newButton("new-intent", "New intent", () => intentForm(null, reload)),
    h("h2", {}, "Knowledge"),
    h("div", { id: "knowledge" }, table([
      { title: "Topic", value: (k) => k.topic },
      { title: "About", value: (k) => topicCell(k.about, k.about_in_use) },
      { title: "Answer", value: (k) => k.answer },
      { title: "", value: (k) => actions(() => knowledgeForm(k, reload),
        `/config/knowledge/${encodeURIComponent(k.topic)}`, k.topic) },
    ], knowledge.items)),
    newButton("new-knowledge", "New entry", () => knowledgeForm(null, reload)));
}

// -- audit ------------------------------------------------------------------------------

async function auditPage() {
  const size = 50;
  const data = await api("GET", `/audit?limit=${size}&offset=${state.auditOffset}`);
  const json = (v) => h("pre", {}, v === null ? "—" : JSON.stringify(v, null, 1));
  page("Audit log", h("div", { id: "audit" }, table([
    { title: "When", value: (e) => fmtTime(e.at) },
    { title: "Who", value: (e) => e.actor },
    { title: "What", value: (e) => `${e.action} ${e.target}` },
    { title: "Before", value: (e) => json(e.before) },
    { title: "After", value: (e) => json(e.after) },
  ], data.items)), pager(data.total, state.auditOffset, size,
    (offset) => { state.auditOffset = offset; redraw(auditPage); }, "entries"));
}

// -- a test call from the browser ------------------------------------------------------

const call = { pc: null, stream: null };

async function hangUp(status) {
  if (call.pc) { call.pc.close(); call.pc = null; }
  if (call.stream) { for (const t of call.stream.getTracks()) t.stop(); call.stream = null; }
  if (status) status.textContent = "Call ended.";
}

function iceGathered(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    pc.addEventListener("icegatheringstatechange", () => {
      if (pc.iceGatheringState === "complete") resolve();
    });
  });
}

async function testCallPage() {
  const status = h("p", { id: "call-status", class: "muted" }, "Not in a call.");
  const audio = h("audio", { id: "bot-audio", autoplay: true });
  const start = h("button", { type: "button", id: "start-call" }, "Call the bot");
  const stop = h("button", { type: "button", id: "end-call", class: "danger" }, "Hang up");
  start.addEventListener("click", async () => {
    await hangUp(null);
    status.textContent = "Asking for the microphone…";
    try {
      call.stream = await navigator.mediaDevices.getUserMedia({ audio: true });
      const pc = new RTCPeerConnection();
      call.pc = pc;
      for (const track of call.stream.getAudioTracks()) pc.addTrack(track, call.stream);
      pc.addEventListener("track", (ev) => {
        audio.srcObject = ev.streams[0] || new MediaStream([ev.track]);
      });
      pc.addEventListener("connectionstatechange", () => {
        if (pc.connectionState === "connected") status.textContent = "In a call: speak to the bot.";
        if (["failed", "closed"].includes(pc.connectionState)) status.textContent = "Call ended.";
      });
      await pc.setLocalDescription(await pc.createOffer());
      await iceGathered(pc);
      const answer = await api("POST", "/webrtc/offer",
        { sdp: pc.localDescription.sdp, type: "offer" });
      await pc.setRemoteDescription(answer);
      status.textContent = "Connecting…";
    } catch (e) {
      await hangUp(null);
      status.textContent = `No call: ${e.message}`;
    }
  });
  stop.addEventListener("click", () => hangUp(status));
  page("Test call",
    h("p", { class: "muted" }, "Talk to the bot from this browser: the same pipeline, models " +
      "and call log as a phone call (the call log shows it as webrtc:<you>)."),
    h("p", { class: "row" }, start, stop), status, audio);
}

// -- routing ----------------------------------------------------------------------------

function stopTimer() { if (state.timer) { clearInterval(state.timer); state.timer = null; } }

async function route() {
  stopTimer();
  state.editor = null;
  if (!location.hash.startsWith("#/call") || location.hash.startsWith("#/calls")) hangUp(null);
  if (!state.me) return;
  const parts = (location.hash || "#/live").slice(2).split("/");
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === parts[0]);
  }
  await redraw(async () => {
    if (parts[0] === "calls" && parts[1]) await callPage(parts[1]);
    else if (parts[0] === "calls") await callsPage();
    else if (parts[0] === "latency") await latencyPage();
    else if (parts[0] === "intents") await intentsPage();
    else if (parts[0] === "missed") await missedPage(parts[1] ? decodeURIComponent(parts[1]) : null);
    else if (parts[0] === "outcomes") await outcomesPage();
    else if (parts[0] === "settings") await settingsPage();
    else if (parts[0] === "audit") await auditPage();
    else if (parts[0] === "call") await testCallPage();
    else if (parts[0] === "users") await usersPage();
    else if (parts[0] === "tokens") await tokensPage();
    else if (parts[0] === "live" || parts[0] === "") await livePage();
    else page("No such page", h("p", {}, `The console has no page "${parts[0]}".`));
  });
}

// Draws a page, marking <main> busy until it lands (it replaces what is on screen then).
// A failed draw shows its error in place of the page.
async function redraw(draw) {
  const main = document.getElementById("main");
  state.rendering += 1;
  main.setAttribute("aria-busy", "true");
  try {
    await draw();
  } catch (e) {
    if (e.status !== 401) page("Error", h("p", { class: "error" }, e.message));
  } finally {
    state.rendering -= 1;
    if (state.rendering === 0) main.removeAttribute("aria-busy");
  }
}

document.getElementById("logout").addEventListener("click", async () => {
  await api("POST", "/auth/logout").catch(() => {});
  showLogin();
});
window.addEventListener("hashchange", route);
(async () => {
  try { loggedIn(await api("GET", "/auth/me")); route(); } catch { /* the login form shows */ }
})();
