// The Settings page, drawn from the API's own schema (/api/v1/openapi.json): every field
// that PATCH /config/settings accepts gets an input, with the bounds the API checks, so a
// setting added to the API appears here without a change to this file.
"use strict";

// Groups of the top-level fields, in page order; a section of the profile (an object such
// as llm or endpointing) is a group of its own; a field in no group lands in "Other".
const SETTING_GROUPS = [
  ["The bot", ["name"]],
  ["What the bot says", ["greeting", "apology", "unsure", "decline", "system_prompt"]],
  ["Fillers", ["fillers", "filler_after_ms", "filler_every_ms"]],
  ["Transfers", ["transfer_targets", "transfer_failed", "transfer_hold", "handoff_summary",
    "transfer_timeout_s"]],
];
const SECTION_TITLES = {
  recording: "Recording", llm: "Language model", endpointing: "Turn taking (endpointing)",
  intent_matching: "Intent matching", knowledge_matching: "Knowledge matching",
  call_limits: "Call limits",
};
// [label, hint] by path; a field not listed is labelled with its schema title.
const SETTING_LABELS = {
  name: ["Bot name", "Names this bot in the console and the logs."],
  greeting: ["Greeting", "The first thing a caller hears."],
  apology: ["Apology", "When the bot did not understand or something failed."],
  unsure: ["Not sure", "Said instead of a generated answer the answer guard refuses."],
  decline: ["Decline", "To a caller who tries to change or read out the bot's instructions."],
  system_prompt: ["System prompt", "The language model's instructions."],
  fillers: ["Fillers (one a line)", "Played while a generated answer is on its way."],
  filler_after_ms: ["First filler after (ms)"],
  filler_every_ms: ["Another filler every (ms)", "0: one filler a turn."],
  transfer_failed: ["Transfer failed", "Said when a transfer fails. Empty: the apology."],
  transfer_hold: ["While a transfer connects", "Empty: nothing is said."],
  handoff_summary: ["Hand-off summary", "What the agent hears first: {caller}, {asked}."],
  transfer_timeout_s: ["Transfer timeout (s)"],
  transfer_targets: ["Transfer targets (one a line)", "A SIP or tel URI, then how: refer " +
    "(the default), bridge or warm; \"refer bridge-on-failure\" bridges when the REFER is " +
    "refused. Empty: the targets the intents and menus name, by REFER."],
  "recording.enabled": ["Record calls"],
  "recording.announcement": ["Recording announcement", "Said before the greeting."],
  "llm.max_tokens": ["Max tokens an answer"],
  "llm.temperature": ["Temperature"],
  "llm.history_turns": ["Turns of history given"],
  "endpointing.vad_threshold": ["Voice threshold"],
  "endpointing.min_speech_ms": ["Shortest speech (ms)"],
  "endpointing.end_silence_ms": ["End of turn silence (ms)"],
  "endpointing.preroll_ms": ["Audio kept before speech (ms)"],
  "endpointing.max_turn_s": ["Longest turn (s)"],
  "endpointing.barge_in_ms": ["Barge-in after (ms)"],
  "endpointing.energy_floor_dbfs": ["Silence below (dBFS)", "Empty: the voice detector only."],
  "endpointing.speculate_after_ms": ["Look ahead after (ms)", "0: never."],
  "endpointing.early_end": ["End a finished sentence early"],
  "endpointing.sentence_end_silence_ms": ["Finished sentence silence (ms)"],
  "endpointing.hit_quiet_ms": ["Quiet before a cached answer (ms)", "Under the energy floor, not only unvoiced: a fricative is not the end. 0: at once."],
  "endpointing.unfinished_silence_ms": ["Unfinished thought silence (ms)"],
  "endpointing.unsure_silence_ms": ["Unsure end silence (ms)", "Words heard again with no end to them either, or heard as two different sentences."],
  "endpointing.nowhere_silence_ms": ["Nothing-to-say end silence (ms)", "A finished sentence nothing answers (the bot would only say it is not sure): often half a request. 0: no longer wait."],
  "endpointing.question_silence_ms": ["Question end silence (ms)", "A finished sentence the bot would only ask about (\"Just to check, ...?\"): often half a request. 0: no longer wait."],
  "endpointing.fallen_silence_ms": ["Fallen voice end silence (ms)", "Replaces the nothing-to-say and question waits above when the caller's voice also fell to the bottom of its range on the last words (a finished statement). 0: the pitch is not read."],
  "endpointing.fall_semitones": ["Fallen voice: semitones under the median", "How far below the caller's own median pitch the last words must end to count as fallen."],
  "endpointing.long_sentence_silence_ms": ["Long sentence end silence (ms)", "Replaces the nothing-to-say and question waits when each recognizer heard a finished sentence of at least the words below (half a request heard as a sentence is short). 0: those waits stay."],
  "endpointing.long_sentence_words": ["Long sentence: words", "How many words a finished sentence needs for the shorter wait above."],
  "endpointing.hangup_silence_ms": ["Hang-up end silence (ms)", "Words an intent would hang up on (a goodbye): a hang-up cannot be taken back, so a caller who was only pausing may go on. 0: no longer wait."],
  "endpointing.greeting_silence_ms": ["Greeting end silence (ms)", "Words that are only a greeting (\"Hello?\"): as often the start of a request as all of it, so the bot's greeting waits for a caller who goes on. 0: no longer wait."],
  "endpointing.acknowledgement_silence_ms": ["Bare yes or okay end silence (ms)", "Words that are only a yes, no or okay with nothing asked (\"Okay.\"): a caller often goes on with a request, so the reply waits. 0: no longer wait."],
  "endpointing.continuation_ms": ["Caller going on over the bot (ms)", "Words again this soon after the caller's last turn, over the bot's answer to it: both read as one request. 0: never."],
  "endpointing.hold_silence_ms": ["After \"hold on\" (ms)"],
  "endpointing.hold_reply": ["Reply to \"hold on\"", "Empty: nothing is said."],
  "endpointing.number_min_digits": ["Digits a number needs"],
  "intent_matching.threshold": ["Answer threshold"],
  "intent_matching.action_threshold": ["Threshold for a transfer or hang-up"],
  "intent_matching.confirm_threshold": ["Ask the caller from"],
  "intent_matching.margin": ["Lead over the next intent"],
  "intent_matching.negative_margin": ["Negative example margin"],
  "intent_matching.background": ["Hold intents to common requests"],
  "intent_matching.background_margin": ["Lead over common requests"],
  "intent_matching.confirm_background_margin": ["Lead over common requests to ask"],
  "intent_matching.fit_threshold": ["Raise the threshold to fit the intents"],
  "intent_matching.stock_phrasings": ["Match stock phrasings",
    "An intent asking for a person or saying goodbye also matches the product's own " +
    "phrasings of that request."],
  "intent_matching.top_k": ["Examples scored an intent"],
  "intent_matching.calibration": ["Calibration"],
  "knowledge_matching.min_score": ["Retrieve from a score of"],
  "knowledge_matching.max_entries": ["Entries given to the model",
    "When the model words business answers."],
  "knowledge_matching.direct_score": ["Speak the entry as written from"],
  "knowledge_matching.extractive": ["Business answers only as written",
    "On (the default): entries between the two scores are asked about and spoken as " +
    "written on a yes. Off: the model words them."],
};
// Long texts get a text area.
const LONG_TEXTS = new Set(["greeting", "apology", "unsure", "decline", "system_prompt",
  "transfer_failed", "transfer_hold", "handoff_summary", "fillers", "transfer_targets"]);

// Transfer targets as lines of text: "sip:desk@pbx.example bridge" (refer when no mode).
const REFER_FALLBACK = "bridge-on-failure";
function targetLines(targets) {
  return (targets || []).map((t) => [t.uri, t.mode === "refer" && !t.bridge_on_refer_failure
    ? null : t.mode, t.bridge_on_refer_failure ? REFER_FALLBACK : null]
    .filter(Boolean).join(" ")).join("\n");
}
function readTargets(text) {
  return lines(text).map((line) => {
    const [uri, mode, ...rest] = line.split(/\s+/);
    return { uri, mode: mode || "refer", bridge_on_refer_failure: rest.includes(REFER_FALLBACK) };
  });
}

async function openapi() {
  if (!state.schema) {
    const r = await fetch(`${API}/openapi.json`, { credentials: "same-origin" });
    if (!r.ok) throw new ApiError(r.status, "the API's schema could not be read");
    state.schema = await r.json();
  }
  return state.schema;
}

// A schema with its $ref followed and null taken out of anyOf: [schema, nullable].
function resolved(doc, s) {
  const deref = (x) => (x && x.$ref ? doc.components.schemas[x.$ref.split("/").pop()] : x);
  if (s && s.anyOf) {
    const alts = s.anyOf.filter((a) => a.type !== "null");
    return [deref(alts[0]) || {}, alts.length < s.anyOf.length];
  }
  return [deref(s) || {}, false];
}

// The settings the page shows: [{path, schema, nullable, writable}], sections expanded.
function settingFields(doc) {
  const schemas = doc.components.schemas;
  const read = schemas.SettingsRead.properties;
  const update = schemas.SettingsUpdate.properties;
  const fields = [];
  const keys = [...new Set([...Object.keys(update), ...Object.keys(read)])]
    .filter((k) => k !== "config_version");
  for (const key of keys) {
    const [readSchema, nullable] = resolved(doc, read[key]);
    const writable = key in update;
    if (readSchema.type === "object" && readSchema.properties) {
      for (const [sub, subSchema] of Object.entries(readSchema.properties)) {
        const [s, subNullable] = resolved(doc, subSchema);
        fields.push({ path: `${key}.${sub}`, section: key, key: sub, schema: s,
          nullable: subNullable, writable });
      }
    } else {
      // Bounds from what the API accepts, nullability from what it stores.
      const [s] = resolved(doc, update[key] || read[key]);
      fields.push({ path: key, section: null, key, schema: s, nullable, writable });
    }
  }
  return fields;
}

function settingValue(s, f) {
  return f.section ? (s[f.section] || {})[f.key] : s[f.key];
}

function settingInput(f, value, editable) {
  const id = `s-${f.path.replaceAll(".", "-")}`;
  const [label, hint] = SETTING_LABELS[f.path] || [f.schema.title || f.key];
  const t = f.schema.type;
  const common = { id, name: f.path, "data-setting": f.path, disabled: !editable };
  const hintEl = hint ? h("span", { class: "hint" }, hint) : null;
  if (t === "boolean") {
    return h("div", {}, h("label", { class: "check", for: id },
      h("input", { ...common, type: "checkbox", checked: value === true }), label), hintEl);
  }
  let input;
  if (f.path === "transfer_targets") {
    input = h("textarea", { ...common, placeholder: "sip:desk@pbx.example refer" },
      targetLines(value));
  } else if (t === "array") {
    input = h("textarea", common, (value || []).join("\n"));
  } else if (t === "number" || t === "integer") {
    input = h("input", { ...common, type: "number", step: t === "integer" ? 1 : "any",
      min: f.schema.minimum, max: f.schema.maximum, required: !f.nullable,
      value: value === null || value === undefined ? "" : String(value) });
  } else if (f.schema.enum) {
    input = h("select", common, [f.nullable ? "" : null, ...f.schema.enum]
      .filter((v) => v !== null).map((v) => h("option", { value: v, selected: value === v }, v)));
  } else if (LONG_TEXTS.has(f.key) && !f.section) {
    input = h("textarea", { ...common, maxlength: f.schema.maxLength }, value || "");
  } else {
    input = h("input", { ...common, maxlength: f.schema.maxLength,
      required: !f.nullable && (f.schema.minLength || 0) > 0, value: value || "" });
  }
  const wide = t === "array" || (t === "string" && LONG_TEXTS.has(f.key));
  return h("div", { class: wide ? "wide" : null },
    h("label", { for: id }, label, hintEl), input);
}

function readSetting(form, f) {
  const el = form.querySelector(`[data-setting="${f.path}"]`);
  const t = f.schema.type;
  if (t === "boolean") return el.checked;
  if (f.path === "transfer_targets") return readTargets(el.value);
  if (t === "array") return lines(el.value);
  const raw = el.value;
  if (raw.trim() === "" && f.nullable) return null;
  if (t === "number" || t === "integer") return Number(raw);
  return raw;
}

// Where the configuration runs: each node's version, and a version a node could not apply
// (its check refused it: the node runs the last version it applied).
function nodesCard(report) {
  if (!report || report.nodes.length === 0) return null;
  const items = report.nodes.map((n) => {
    if (n.state === "not_applied") {
      return h("li", { class: "error node-refused", "data-node": n.node },
        `Version ${n.failed_version} not applied on node ${n.node}: ${n.failed_reason} ` +
        `(${fmtTime(n.failed_at)}). It runs version ${n.applied_version ?? "—"}.`);
    }
    return h("li", { "data-node": n.node }, n.state === "current"
      ? `Node ${n.node} runs version ${n.applied_version}.`
      : `Node ${n.node} runs version ${n.applied_version ?? "—"} (loading the newest).`);
  });
  return h("div", { class: "card", id: "config-nodes" }, h("h2", {}, "Nodes"),
    h("ul", {}, items));
}

async function settingsPage() {
  const [s, doc, nodes] = await Promise.all([api("GET", "/config/settings"), openapi(),
    api("GET", "/config/nodes").catch(() => null)]);
  const fields = settingFields(doc);
  const err = h("p", { class: "error", id: "settings-error" });
  const editable = (f) => canEdit() && f.writable;
  const placed = new Set();
  const group = (title, list) => {
    for (const f of list) placed.add(f.path);
    return list.length === 0 ? null : h("fieldset", {},
      h("legend", {}, title),
      h("div", { class: "fields" }, list.map((f) => settingInput(f, settingValue(s, f),
        editable(f)))));
  };
  const groups = SETTING_GROUPS.map(([title, keys]) => group(title,
    keys.map((k) => fields.find((f) => f.path === k)).filter(Boolean)));
  const sections = [...new Set(fields.filter((f) => f.section).map((f) => f.section))];
  for (const section of sections) {
    groups.push(group(SECTION_TITLES[section] || section,
      fields.filter((f) => f.section === section)));
  }
  groups.push(group("Other", fields.filter((f) => !placed.has(f.path))));
  // Save at the top and at the end of a long page.
  const save = (id) => (canEdit() ? h("button", { type: "submit", id }, "Save") : null);
  const form = h("form", { id: "settings-form" },
    h("p", { class: "savebar" }, h("span", { class: "muted" },
      `Configuration version ${s.config_version}`), save("settings-save-top")),
    err,
    groups,
    h("p", {}, save("settings-save")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    for (const el of form.querySelectorAll(".invalid")) el.classList.remove("invalid");
    // Only what changed, so that the audit log shows the change and nothing else.
    const changes = {};
    for (const f of fields.filter(editable)) {
      const value = readSetting(form, f);
      if (JSON.stringify(value) === JSON.stringify(settingValue(s, f) ?? null)) continue;
      if (f.section) (changes[f.section] ||= {})[f.key] = value;
      else changes[f.key] = value;
    }
    if (Object.keys(changes).length === 0) { toast("Nothing changed"); return; }
    try {
      await api("PATCH", "/config/settings", changes);
      toast("Saved: nodes use it from their next call");
      redraw(settingsPage);
    } catch (e) {
      err.textContent = e.message;
      err.scrollIntoView({ block: "nearest" });
      // Mark the fields the API named (loc: ["profile", "llm", "temperature"] or ["body", ...]).
      for (const d of Array.isArray(e.detail) ? e.detail : []) {
        const path = (d.loc || []).filter((p) => p !== "body" && p !== "profile").join(".");
        const el = path && form.querySelector(`[data-setting="${path}"]`);
        if (el) el.classList.add("invalid");
      }
    }
  });
  page("Bot settings", nodesCard(nodes), form);
}
