// The Outcomes page: what the bot came to on its calls over a range of days (UTC) the
// operator picks (default the last 7): containment, transfer and abandonment rates overall,
// by day and by hour of the day; transfers by reason, abandonment by place, refusals and
// failures by reason; the average call length and the first answer's latency (P50, P95);
// the words the bot was "not sure" about, each linked to Missed questions filtered to them;
// the answers to the post-call question; each intent and knowledge entry's figures;
// two configuration versions side by side; the range's calls and turns as CSV
// (GET /outcomes/summary, /outcomes/compare, /outcomes/calls.csv, /outcomes/turns.csv).
"use strict";

const OUTCOME_DAYS = 7;
const DAY_MS = 86400000;

const pct = (r) => (r === null || r === undefined ? "—" : `${(r * 100).toFixed(1)} %`);
const secs = (s) => (s === null || s === undefined ? "—" : `${s.toFixed(1)} s`);
const ms = (v) => (v === null || v === undefined ? "—" : `${Math.round(v)} ms`);
const words = (key) => (key ? String(key).replaceAll("_", " ") : "—");
const utcDay = (t) => new Date(t).toISOString().slice(0, 10);

// The range asked for: whole UTC days, ``to`` included.
function outcomeRange() {
  if (!state.outcomesRange) {
    const today = Date.parse(`${utcDay(Date.now())}T00:00:00Z`);
    state.outcomesRange = { from: utcDay(today - (OUTCOME_DAYS - 1) * DAY_MS), to: utcDay(today) };
  }
  const { from, to } = state.outcomesRange;
  return { from, to, since: `${from}T00:00:00Z`,
    until: `${utcDay(Date.parse(`${to}T00:00:00Z`) + DAY_MS)}T00:00:00Z` };
}

// A bar as wide as its share (0..1) of the track.
function meter(share, cls) {
  return h("span", { class: `meter ${cls || ""}` },
    h("span", { style: { width: `${Math.max(0, Math.min(share || 0, 1)) * 100}%` } }));
}

// Resolved, transferred and abandoned side by side in one track.
function outcomeStack(r) {
  if (!r.calls) return h("span", { class: "stack" });
  return h("span", { class: "stack", title: `resolved ${r.resolved}, transferred ` +
    `${r.transferred}, abandoned ${r.abandoned} of ${r.calls}` },
  ["resolved", "transferred", "abandoned", "refused", "failed"].map((o) =>
    h("span", { class: `o-${o}`, style: { width: `${(r[o] / r.calls) * 100}%` } })));
}

function ratesTable(id, first, rows) {
  return h("div", { id }, table([
    first,
    { title: "Calls", cls: "num", value: (r) => r.calls },
    { title: "Containment", cls: "num", value: (r) => pct(r.containment_rate) },
    { title: "Transfers", cls: "num", value: (r) => pct(r.transfer_rate) },
    { title: "Abandonment", cls: "num", value: (r) => pct(r.abandonment_rate) },
    { title: "Share", cls: "bar-cell", value: outcomeStack },
  ], rows));
}

// Calls by reason (``counts``: {reason: calls}), each with a bar of its share of ``total``.
function reasonsTable(id, label, counts, total, empty) {
  const rows = Object.entries(counts).map(([reason, n]) => ({ reason, n }));
  if (rows.length === 0) return h("p", { class: "muted", id }, empty);
  return h("div", { id }, table([
    { title: label, value: (r) => words(r.reason) },
    { title: "Calls", cls: "num", value: (r) => r.n },
    { title: "Of all calls", cls: "bar-cell", value: (r) => h("span", { class: "share" },
      meter(total ? r.n / total : 0), pct(total ? r.n / total : null)) },
  ], rows));
}

function entriesTable(entries) {
  if (entries.length === 0) {
    return h("p", { class: "muted", id: "outcome-entries" }, "No intent or knowledge entry " +
      "was asked about in this range.");
  }
  return h("div", { id: "outcome-entries" }, table([
    { title: "Intent or entry", value: (e) => e.name },
    { title: "Asked", cls: "num", value: (e) => e.asked },
    { title: "Answered", cls: "num", value: (e) => e.answered },
    { title: "Confirmed no", cls: "num", value: (e) => e.confirmed_no },
    { title: "Then put through", cls: "num", value: (e) => e.followed_by_transfer },
    { title: "Then hung up", cls: "num", value: (e) => e.followed_by_hangup },
  ], entries));
}

// The words the bot was not sure about, each a link to Missed questions filtered to them.
function notSureTable(topics) {
  if (topics.length === 0) {
    return h("p", { class: "muted", id: "not-sure-topics" }, "The bot was sure every time.");
  }
  return h("div", { id: "not-sure-topics" }, table([
    { title: "Caller said", value: (t) => h("a", { class: "missed-link",
      href: `#/missed/${encodeURIComponent(t.normalized)}` }, t.text) },
    { title: "Calls", cls: "num", value: (t) => t.calls },
    { title: "Times", cls: "num", value: (t) => t.count },
  ], topics));
}

// The post-call question's answers ("Did we answer your question?").
function postCallView(p) {
  if (!p.asked) {
    return h("p", { class: "muted", id: "post-call" }, "Not asked in this range (the " +
      "post-call question is off, or no caller ended a call with the bot after an answer).");
  }
  return h("div", { id: "post-call" }, table([
    { title: "Answer", value: (r) => r.label },
    { title: "Calls", cls: "num", value: (r) => r.n },
  ], [{ label: "yes", n: p.yes }, { label: "no", n: p.no }, { label: "no answer", n: p.none },
    { label: "asked", n: p.asked }]),
  h("p", {}, "Said yes: ", h("b", { id: "post-call-yes" }, pct(p.yes_rate)),
    h("span", { class: "muted" }, " of the calls that answered")));
}

// Refusals and failures in one list: {"refused: queue full": 2, "failed: crashed": 1}.
function refusedFailed(s) {
  const out = {};
  for (const [k, n] of Object.entries(s.refused_by_reason)) out[`refused: ${words(k)}`] = n;
  for (const [k, n] of Object.entries(s.failed_by_reason)) out[`failed: ${words(k)}`] = n;
  return out;
}

function summaryView(s) {
  const t = s.totals;
  const hours = s.by_hour.map((r) => ({ ...r, label: `${String(r.hour).padStart(2, "0")}:00` }));
  const stat = (id, value, label, share, cls) => h("div", { class: "stat" },
    h("b", { id }, value), label, share === undefined ? null : meter(share, cls));
  return h("div", { id: "outcome-summary" },
    h("div", { class: "stats" },
      stat("outcome-calls", t.calls, "ended calls"),
      stat("rate-containment", pct(t.containment_rate), "resolved by the bot",
        t.containment_rate, "o-resolved"),
      stat("rate-transfer", pct(t.transfer_rate), "put through to a person",
        t.transfer_rate, "o-transferred"),
      stat("rate-abandonment", pct(t.abandonment_rate), "hung up by the caller",
        t.abandonment_rate, "o-abandoned"),
      stat("average-length", secs(s.average_call_s), "average call length"),
      stat("first-answer", `${ms(s.first_answer_p50_ms)} / ${ms(s.first_answer_p95_ms)}`,
        `first answer P50 / P95 (${s.first_answer_calls} calls)`)),
    h("p", { class: "legend-line muted" },
      ["resolved", "transferred", "abandoned", "refused", "failed"].map((o) =>
        h("span", { class: `key o-${o}` }, o))),
    h("h2", {}, "By day"),
    s.by_day.length ? ratesTable("outcome-days", { title: "Day", value: (r) => r.day }, s.by_day)
      : h("p", { class: "muted", id: "outcome-days" }, "No ended calls in this range."),
    h("h2", {}, "By hour of the day (UTC)"),
    hours.length ? h("div", { class: "narrow" },
      ratesTable("outcome-hours", { title: "Hour", value: (r) => r.label }, hours))
      : h("p", { class: "muted", id: "outcome-hours" }, "No ended calls in this range."),
    h("div", { class: "columns" },
      h("section", {}, h("h2", {}, "Transfers by reason"),
        reasonsTable("transfers-by-reason", "Reason", s.transfers_by_reason, t.calls,
          "No transfers.")),
      h("section", {}, h("h2", {}, "Abandonment by place"),
        reasonsTable("abandoned-by-place", "Where", s.abandoned_by_place, t.calls,
          "No abandoned calls.")),
      h("section", {}, h("h2", {}, "Refusals and failures"),
        reasonsTable("refused-failed", "Reason", refusedFailed(s), t.calls,
          "No refused or failed calls."))),
    h("div", { class: "columns" },
      h("section", {}, h("h2", {}, "Not sure about"),
        h("p", { class: "muted" }, "What callers said when the bot was not sure, the " +
          "most calls first (then the most times); each opens Missed questions on those words."),
        notSureTable(s.not_sure_topics)),
      h("section", {}, h("h2", {}, "Did we answer your question?"), postCallView(s.post_call))),
    h("h2", {}, "Intents and knowledge entries"),
    h("p", { class: "muted" }, "Asked: turns that named it. Answered: turns it answered. " +
      "Confirmed no: its confirmation question answered \"no\". Then put through / hung up: " +
      "the call was put through, or the caller hung up, within the next turn."),
    entriesTable(s.entries));
}

// -- two versions side by side ----------------------------------------------------------

function comparisonRows(a, b) {
  const rows = [];
  const section = (title) => rows.push({ section: title });
  const add = (label, x, y, kind) => rows.push({ label, a: x, b: y, kind });
  section("Calls");
  add("Ended calls", a.totals.calls, b.totals.calls, "count");
  add("Containment", a.totals.containment_rate, b.totals.containment_rate, "rate");
  add("Transfers", a.totals.transfer_rate, b.totals.transfer_rate, "rate");
  add("Abandonment", a.totals.abandonment_rate, b.totals.abandonment_rate, "rate");
  add("Average call length", a.average_call_s, b.average_call_s, "secs");
  add("First answer P50", a.first_answer_p50_ms, b.first_answer_p50_ms, "ms");
  add("First answer P95", a.first_answer_p95_ms, b.first_answer_p95_ms, "ms");
  add("Post-call: said yes", a.post_call.yes_rate, b.post_call.yes_rate, "rate");
  const counts = (title, prefix, x, y) => {
    const keys = [...new Set([...Object.keys(x), ...Object.keys(y)])].sort();
    if (keys.length === 0) return;
    section(title);
    for (const k of keys) add(`${prefix}${words(k)}`, x[k] || 0, y[k] || 0, "count");
  };
  counts("Transfers by reason", "", a.transfers_by_reason, b.transfers_by_reason);
  counts("Abandonment by place", "", a.abandoned_by_place, b.abandoned_by_place);
  counts("Refusals and failures", "", refusedFailed(a), refusedFailed(b));
  const byName = (s) => new Map(s.entries.map((e) => [e.name, e]));
  const ea = byName(a), eb = byName(b);
  const names = [...new Set([...ea.keys(), ...eb.keys()])].sort();
  const zero = { asked: 0, answered: 0, confirmed_no: 0, followed_by_transfer: 0,
    followed_by_hangup: 0 };
  for (const name of names) {
    section(name);
    const x = ea.get(name) || zero, y = eb.get(name) || zero;
    for (const [key, label] of [["asked", "Asked"], ["answered", "Answered"],
      ["confirmed_no", "Confirmed no"], ["followed_by_transfer", "Then put through"],
      ["followed_by_hangup", "Then hung up"]]) add(label, x[key], y[key], "count");
  }
  return rows;
}

function shown(x, kind) {
  if (kind === "rate") return pct(x);
  if (kind === "secs") return secs(x);
  if (kind === "ms") return ms(x);
  return x === null || x === undefined ? "—" : String(x);
}

// b minus a: percentage points for rates, seconds for lengths, calls for counts.
function difference(x, y, kind) {
  if (x === null || x === undefined || y === null || y === undefined) return "—";
  const d = kind === "rate" ? (y - x) * 100 : y - x;
  const sign = d > 0 ? "+" : d < 0 ? "−" : "±";
  const n = Math.abs(d);
  if (kind === "rate") return `${sign}${n.toFixed(1)} pt`;
  if (kind === "secs") return `${sign}${n.toFixed(1)} s`;
  if (kind === "ms") return `${sign}${Math.round(n)} ms`;
  return `${sign}${n}`;
}

function comparisonTable(c) {
  const va = `Version ${c.a.config_version}`, vb = `Version ${c.b.config_version}`;
  const rows = comparisonRows(c.a, c.b);
  const head = h("tr", {}, h("th", {}, "Figure"), h("th", { class: "num" }, va),
    h("th", { class: "num" }, vb), h("th", { class: "num" }, "Difference"));
  const body = rows.map((r) => (r.section
    ? h("tr", { class: "section" }, h("th", { colspan: 4, class: "nolabel" }, r.section))
    : h("tr", {},
      h("td", { "data-label": "Figure" }, r.label),
      h("td", { class: "num version-a", "data-label": va }, shown(r.a, r.kind)),
      h("td", { class: "num version-b", "data-label": vb }, shown(r.b, r.kind)),
      h("td", { class: "num diff", "data-label": "Difference" }, difference(r.a, r.b, r.kind)))));
  // A plain table at every width: four short columns fit a phone.
  return h("div", { class: "scroll" }, h("table", { class: "compare" },
    h("thead", {}, head), h("tbody", {}, body)));
}

function compareCard(versions, range) {
  const out = h("div", { id: "compare" });
  const names = versions.map((v) => String(v.version));
  if (!state.outcomesCompare && names.length) {
    state.outcomesCompare = { a: names[Math.min(1, names.length - 1)], b: names[0] };
  }
  const chosen = state.outcomesCompare || { a: "", b: "" };
  const select = (id, name, value) => h("select", { id, name, required: true },
    versions.map((v) => h("option", { value: String(v.version),
      selected: String(v.version) === value },
    `${v.version} · ${fmtTime(v.created_at)}${v.comment ? ` · ${v.comment}` : ""}`)));
  const form = h("form", { class: "card", id: "compare-form" },
    h("h2", {}, "Two configuration versions side by side"),
    h("p", { class: "muted" }, "The same figures over the same days, for the calls each " +
      "version answered."),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "compare-a" }, "Version"), select("compare-a", "a", chosen.a)),
      h("div", {}, h("label", { for: "compare-b" }, "against version"),
        select("compare-b", "b", chosen.b)),
      h("div", {}, h("button", { type: "submit" }, "Compare"))), out);
  const load = async () => {
    const { a, b } = state.outcomesCompare;
    const params = new URLSearchParams({ a, b, since: range.since, until: range.until });
    out.setAttribute("aria-busy", "true");
    try {
      out.replaceChildren(comparisonTable(await api("GET", `/outcomes/compare?${params}`)));
    } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
    out.removeAttribute("aria-busy");
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.outcomesCompare = { a: form.elements.a.value, b: form.elements.b.value };
    load();
  });
  if (names.length === 0) {
    out.replaceChildren(h("p", { class: "muted" }, "No configuration versions yet."));
  }
  return { form, load: names.length ? load : async () => {} };
}

// -- the page ---------------------------------------------------------------------------

async function outcomesPage() {
  const range = outcomeRange();
  const params = new URLSearchParams({ since: range.since, until: range.until });
  const [summary, versions] = await Promise.all([
    api("GET", `/outcomes/summary?${params}`).catch((e) => e),
    api("GET", "/config/versions?limit=200").catch(() => ({ items: [] }))]);
  if (summary instanceof Error && summary.status === 401) throw summary;
  const form = h("form", { class: "card row", id: "outcomes-range" },
    h("div", {}, h("label", { for: "o-from" }, "From (UTC)"),
      h("input", { id: "o-from", name: "from", type: "date", required: true, value: range.from })),
    h("div", {}, h("label", { for: "o-to" }, "To (UTC, included)"),
      h("input", { id: "o-to", name: "to", type: "date", required: true, value: range.to })),
    h("div", {}, h("button", { type: "submit" }, "Show")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.outcomesRange = { from: form.elements.from.value, to: form.elements.to.value };
    redraw(outcomesPage);
  });
  const csv = (name) => `${API}/outcomes/${name}?${params}`;
  const compare = compareCard(versions.items, range);
  page("Outcomes",
    h("p", { class: "muted" }, "What the bot's calls came to: resolved by the bot, put " +
      "through to a person, abandoned by the caller, refused by the call queue or failed " +
      "(the rules: docs/calllog.md, \"Outcomes\"). Ended calls answered on the days chosen."),
    form,
    h("p", { class: "downloads" }, "Download ",
      h("a", { id: "csv-calls", href: csv("calls.csv"), download: "calls.csv" }, "calls.csv"),
      " · ",
      h("a", { id: "csv-turns", href: csv("turns.csv"), download: "turns.csv" }, "turns.csv"),
      h("span", { class: "muted" }, ` (${range.from} to ${range.to})`)),
    summary instanceof Error ? h("p", { class: "error", id: "outcome-error" }, summary.message)
      : summaryView(summary),
    compare.form);
  if (!(summary instanceof Error)) await compare.load();
}
