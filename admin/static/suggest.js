// Suggested examples for an intent: paraphrases the node's language model writes, checked
// by its matcher against the other intents and the common requests. Only what the editor
// accepts, one line at a time, is added: each accept is the intent's PATCH, a new
// configuration version in the audit log.
"use strict";

function suggestionsCard(intent, onChanged) {
  const status = h("p", { class: "muted", id: "suggest-status" },
    "The node's language model is writing paraphrases; its matcher checks each one…");
  const err = h("p", { class: "error" });
  const list = h("ul", { class: "suggestions", id: "suggestions" });
  const card = h("div", { class: "card suggest-card" },
    h("h2", {}, `Suggested examples for ${intent.name}`), status, list, err,
    h("p", { class: "actions" }, h("button", { type: "button", class: "plain cancel",
      onclick: () => { closeEditor(); if (card.dataset.added) onChanged(); } }, "Close")));
  const accept = async (s, button, note) => {
    button.disabled = true;
    err.textContent = "";
    try {
      // The newest examples with this line added: a new version (409 if another came first).
      const path = `/config/intents/${encodeURIComponent(intent.name)}`;
      const current = await api("GET", path);
      const saved = await api("PATCH", path, { examples: [...current.examples, s.text] });
      note.textContent = `added (configuration version ${saved.config_version})`;
      button.remove();
      card.dataset.added = "1";
    } catch (e) { err.textContent = e.message; button.disabled = false; }
  };
  (async () => {
    try {
      const found = await api("POST",
        `/config/intents/${encodeURIComponent(intent.name)}/suggestions`);
      const dropped = Object.entries(found.dropped).map(([why, n]) => `${n} (${why})`).join(", ");
      status.textContent = (found.offered.length
        ? `${found.offered.length} offered: accept the ones a caller would say.`
        : "Nothing to offer this time.") + (dropped ? ` Left out: ${dropped}.` : "");
      for (const s of found.offered) {
        const note = h("span", { class: "muted" },
          `score ${s.score.toFixed(2)} · ${s.answered ? "answered" : "not yet answered"}`);
        const button = h("button", { type: "button", class: "plain accept",
          "data-text": s.text }, "Accept");
        button.addEventListener("click", () => accept(s, button, note));
        list.append(h("li", {}, h("span", { class: "suggested" }, s.text), " ", note, " ",
          button));
      }
    } catch (e) { status.textContent = ""; err.textContent = `No suggestions: ${e.message}`; }
  })();
  return card;
}
