// The Missed questions page: what callers asked that the bot did not answer (the honest
// fallback, only a confirmation question, or a person), grouped by meaning when the node
// has a sentence embedder, the most calls affected first (then the most turns: one caller
// asking three times is one call). An editor adds the words as an example of
// an intent or a question of a knowledge entry, or starts a new knowledge entry from them:
// a new configuration version, audited, that every node uses from its next call.
"use strict";

const MISSED_PAGE = 25;
const MISSED_DAYS = [7, 30, 90, 365];
const MISSED_ROUTE = { fallback: "not sure", confirm: "asked to confirm",
  declined: "asked, caller said no", transfer: "put through" };

function suggestForm(q, intents, knowledge, onSaved) {
  const err = h("p", { class: "error" });
  const choose = (value) => (q.nearest && value.endsWith(`:${q.nearest}`)) || null;
  const form = h("form", { class: "card suggest-form" },
    h("h2", {}, "Suggest as an example"),
    h("label", { for: "m-text" }, "The caller's words"),
    h("input", { id: "m-text", name: "text", required: true, maxlength: 200, value: q.text }),
    h("label", { for: "m-target" }, "Add to"),
    h("select", { id: "m-target", name: "target", required: true },
      h("option", { value: "" }, "choose an intent or a knowledge entry"),
      intents.length ? h("optgroup", { label: "Intents (an example)" }, intents.map((i) =>
        h("option", { value: `intent:${i.name}`, selected: choose(`intent:${i.name}`) },
          i.name))) : null,
      knowledge.length ? h("optgroup", { label: "Knowledge (a question)" }, knowledge.map((k) =>
        h("option", { value: `knowledge:${k.topic}`, selected: choose(`knowledge:${k.topic}`) },
          k.topic))) : null),
    h("p", { class: "actions" }, h("button", { type: "submit" }, "Add"), cancelButton()), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = form.elements.text.value.trim();
    const [kind, name] = form.elements.target.value.split(/:(.*)/s);
    if (!text || !name) { err.textContent = "Give the words and where to add them."; return; }
    try {
      // Read the newest version and send its list with the words added: the API writes it
      // as a new version (409 if another change came first).
      const path = kind === "intent" ? `/config/intents/${encodeURIComponent(name)}`
        : `/config/knowledge/${encodeURIComponent(name)}`;
      const field = kind === "intent" ? "examples" : "questions";
      const current = await api("GET", path);
      const saved = await api("PATCH", path, { [field]: [...current[field], text] });
      closeEditor();
      toast(`Added to ${name} (configuration version ${saved.config_version})`);
      onSaved();
    } catch (e) { err.textContent = e.message; }
  });
  return form;
}

// ``words``: only the group of these words (a "not sure" topic on the Outcomes page).
async function missedPage(words) {
  if (state.missedWords !== (words || null)) {
    state.missedWords = words || null;
    state.missedOffset = 0;
  }
  const offset = state.missedOffset || 0;
  const days = state.missedDays || 30;
  const query = new URLSearchParams({ days, limit: MISSED_PAGE, offset });
  if (words) query.set("words", words);
  const [data, intents, knowledge] = await Promise.all([
    api("GET", `/missed-questions?${query}`),
    canEdit() ? api("GET", "/config/intents?limit=200") : { items: [] },
    canEdit() ? api("GET", "/config/knowledge?limit=200") : { items: [] }]);
  const reload = () => redraw(() => missedPage(words));
  const actions = (q) => (canEdit() ? h("span", { class: "actions" },
    h("button", { class: "plain suggest", type: "button", "data-text": q.normalized,
      onclick: (ev) => {
        ev.stopPropagation();
        openEditor(ev.target.closest("tr"),
          suggestForm(q, intents.items, knowledge.items, reload));
      } }, "Suggest as example"),
    h("button", { class: "plain new-entry", type: "button", "data-text": q.normalized,
      onclick: (ev) => {
        ev.stopPropagation();
        openEditor(ev.target.closest("tr"), knowledgeForm(null, reload, { questions: [q.text] }));
      } }, "New knowledge entry")) : "");
  const calls = (q) => `${q.calls} ${q.calls === 1 ? "call" : "calls"}`;
  const asked = (q) => Object.entries(q.routes).map(([r, n]) =>
    `${MISSED_ROUTE[r] || r} ${n}`).join(", ");
  const said = (q) => (q.variants.length ? h("span", {}, q.text,
    h("span", { class: "muted variants" }, ` also: ${q.variants.join(" · ")}`)) : q.text);
  const since = h("select", { id: "missed-days", onchange: (ev) => {
    state.missedDays = Number(ev.target.value); state.missedOffset = 0; reload(); } },
  MISSED_DAYS.map((d) => h("option", { value: d, selected: d === days }, `last ${d} days`)));
  page("Missed questions",
    h("p", { class: "muted" }, "What callers said that the bot did not answer from its " +
      "intents or knowledge (it said it was not sure, asked whether they meant something, " +
      "or put them through to a person), the most calls affected first: one caller asking " +
      "three times is one call (and three times). Words already added as an example or a " +
      "question drop out."),
    h("p", { class: "missed-since" }, h("label", { for: "missed-days" }, "Asked in the"), since,
      h("span", { class: "muted", id: "missed-grouping" }, data.grouped_by === "meaning"
        ? "grouped by meaning" : "grouped by words (no sentence embedder here)")),
    words ? h("p", { id: "missed-filter" }, "Only the words ", h("q", {}, words), " · ",
      h("a", { href: "#/missed" }, "show all")) : null,
    data.total === 0 ? h("p", { class: "muted", id: "no-missed" }, "No missed questions.")
      : h("div", { id: "missed" }, table([
        { title: "Caller said", value: said },
        { title: "Calls", cls: "missed-calls", value: calls },
        { title: "Times", value: (q) => q.count },
        { title: "Last", value: (q) => fmtTime(q.last_seen) },
        { title: "Bot", value: asked },
        { title: "Nearest", value: (q) => q.nearest || "—" },
        { title: "", value: actions },
      ], data.items)),
    pager(data.total, offset, MISSED_PAGE,
      (o) => { state.missedOffset = o; reload(); }, "question(s)"));
}
