// Users (admins) and API tokens (everyone's own; an admin sees everyone's).
"use strict";

const ROLES = ["viewer", "editor", "admin"];
const PAGE_SIZE = 50;

// The nav and the "who" line follow the account's role as the API now sees it (after an
// admin changed their own role, or a token's owner lost rights).
async function refreshMe() {
  try { loggedIn(await api("GET", "/auth/me")); } catch { /* a 401 shows the login */ }
}

// -- users ------------------------------------------------------------------------------

function newUserForm(onSaved) {
  const err = h("p", { class: "error" });
  const form = h("form", { class: "card", id: "new-user-form" },
    h("h2", {}, "New user"),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "u-name" }, "Name",
        h("span", { class: "hint" }, "Letters, digits and _ . @ -")),
      h("input", { id: "u-name", name: "name", required: true, maxlength: 64,
        pattern: "[A-Za-z0-9_.@\\-]+", autocomplete: "off" })),
      h("div", {}, h("label", { for: "u-password" }, "Password",
        h("span", { class: "hint" }, "At least 12 characters")),
      h("input", { id: "u-password", name: "password", type: "password", required: true,
        minlength: 12, maxlength: 1024, autocomplete: "new-password" })),
      h("div", {}, h("label", { for: "u-role" }, "Role"),
        h("select", { id: "u-role", name: "role" },
          ROLES.map((r) => h("option", { value: r, selected: r === "viewer" }, r))))),
    h("p", {}, h("button", { type: "submit" }, "Add user")), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    try {
      await api("POST", "/users", { name: f.name.value, password: f.password.value,
        role: f.role.value });
      toast(`Added ${f.name.value}`);
      onSaved();
    } catch (e) { err.textContent = e.message; }
  });
  return form;
}

function resetPasswordForm(user) {
  const err = h("p", { class: "error" });
  const form = h("form", { class: "card reset-form" },
    h("h2", {}, `New password for ${user.name}`),
    h("p", { class: "muted" }, "Ends their console logins and revokes their API tokens."),
    h("label", { for: "r-password" }, "New password",
      h("span", { class: "hint" }, "At least 12 characters")),
    h("input", { id: "r-password", name: "password", type: "password", required: true,
      minlength: 12, maxlength: 1024, autocomplete: "new-password" }),
    h("p", { class: "actions" }, h("button", { type: "submit" }, "Set password"), cancelButton()),
    err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await api("PATCH", `/users/${encodeURIComponent(user.name)}`,
        { password: form.elements.password.value });
      closeEditor();
      toast(`New password set for ${user.name}`);
      if (user.name === state.me.name) await refreshMe();
      else redraw(usersPage);
    } catch (e) { err.textContent = e.message; }
  });
  return form;
}

async function changeUser(user, change, what) {
  const self = user.name === state.me.name;
  if (self && (change.disabled || (change.role && change.role !== "admin")) &&
      !confirm(`This is your own account: ${what} takes your admin rights away. Go on?`)) {
    redraw(usersPage);
    return;
  }
  try {
    await api("PATCH", `/users/${encodeURIComponent(user.name)}`, change);
    toast(`${user.name}: ${what}`);
    if (self) await refreshMe();
    if (state.me) route();
  } catch (e) { toast(e.message); redraw(usersPage); }
}

async function usersPage() {
  if (!isAdmin()) {
    page("Users", h("p", { id: "admins-only" }, "Only admins manage users. Your own API " +
      "tokens are on the ", h("a", { href: "#/tokens" }, "API tokens page"), "."));
    return;
  }
  const data = await api("GET", `/users?limit=${PAGE_SIZE}&offset=${state.usersOffset}`);
  page("Users",
    h("p", { class: "muted" }, "A viewer reads; an editor also changes the bot's " +
      "configuration and plays recordings; an admin also manages users, everyone's tokens " +
      "and reads the audit log. Disabling a user or setting a new password ends their " +
      "logins and revokes their tokens."),
    h("div", { id: "users" }, table([
      { title: "Name", value: (u) => u.name },
      { title: "Role", value: (u) => h("select", { class: "role", "data-user": u.name,
        "aria-label": `Role of ${u.name}`,
        onchange: (ev) => changeUser(u, { role: ev.target.value }, `role ${ev.target.value}`) },
      ROLES.map((r) => h("option", { value: r, selected: r === u.role }, r))) },
      { title: "Status", value: (u) => h("span", {
        class: u.disabled ? "status-disabled" : null }, u.disabled ? "disabled" : "active") },
      { title: "Added", value: (u) => fmtTime(u.created_at) },
      { title: "", value: (u) => h("span", { class: "actions" },
        h("button", { type: "button", class: u.disabled ? "plain enable" : "danger disable",
          onclick: () => changeUser(u, { disabled: !u.disabled },
            u.disabled ? "enabled" : "disabled") }, u.disabled ? "Enable" : "Disable"),
        h("button", { type: "button", class: "plain reset",
          onclick: (ev) => openEditor(ev.target.closest("tr"), resetPasswordForm(u)) },
        "Reset password")) },
    ], data.items)),
    pager(data.total, state.usersOffset, PAGE_SIZE,
      (offset) => { state.usersOffset = offset; redraw(usersPage); }, "user(s)"),
    newUserForm(() => redraw(usersPage)));
}

// -- API tokens -------------------------------------------------------------------------

// The secret of a new token: shown this once, with a button to copy it.
function secretCard(created) {
  const code = h("code", { id: "new-token" }, created.token);
  const copy = h("button", { type: "button", class: "plain", onclick: async () => {
    try { await navigator.clipboard.writeText(created.token); toast("Copied"); }
    catch { getSelection().selectAllChildren(code); toast("Selected: copy it now"); }
  } }, "Copy");
  return h("section", { class: "card secret", id: "token-secret" },
    h("h2", {}, `Token ${created.name} (${created.role})`),
    h("p", {}, "Copy it now: it is not shown again. Use it as ",
      h("code", {}, "Authorization: Bearer …"), "."),
    code,
    h("p", { class: "actions" }, copy, h("button", { type: "button", class: "plain",
      onclick: (ev) => ev.target.closest("section").remove() }, "Done")));
}

function newTokenForm(onCreated) {
  const err = h("p", { class: "error" });
  const allowed = ROLES.slice(0, ROLES.indexOf(state.me.role) + 1);
  const form = h("form", { class: "card", id: "new-token-form" },
    h("h2", {}, "New API token"),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "t-name" }, "Name",
        h("span", { class: "hint" }, "What it is for, e.g. nightly-report")),
      h("input", { id: "t-name", name: "name", required: true, maxlength: 64,
        autocomplete: "off" })),
      h("div", {}, h("label", { for: "t-role" }, "Role",
        h("span", { class: "hint" }, "At most your own")),
      h("select", { id: "t-role", name: "role" },
        allowed.map((r) => h("option", { value: r, selected: r === "viewer" }, r)))),
      h("div", {}, h("button", { type: "submit" }, "Create token"))), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    try {
      onCreated(await api("POST", "/tokens", { name: f.name.value, role: f.role.value }));
    } catch (e) { err.textContent = e.message; }
  });
  return form;
}

async function revokeToken(t) {
  if (!confirm(`Revoke token ${t.name} of ${t.user}? Requests with it stop at once.`)) return;
  try {
    await api("DELETE", `/tokens/${encodeURIComponent(t.id)}`);
    toast(`Revoked ${t.name}`);
    redraw(tokensPage);
  } catch (e) { toast(e.message); }
}

async function tokensPage(created) {
  const data = await api("GET", `/tokens?limit=${PAGE_SIZE}&offset=${state.tokensOffset}`);
  page("API tokens",
    h("p", { class: "muted" }, isAdmin() ? "Everyone's tokens (you are an admin)." :
      "Your tokens, for scripts and other programs that use the API."),
    created ? secretCard(created) : null,
    h("div", { id: "tokens" }, data.items.length === 0
      ? h("p", { class: "muted", id: "no-tokens" }, "No tokens yet.")
      : table([
        { title: "Name", value: (t) => t.name },
        { title: "Owner", value: (t) => t.user },
        { title: "Role", value: (t) => t.role },
        // What the token holds now: at most its owner's current role.
        { title: "Holds now", value: (t) => (t.effective_role === t.role ? t.effective_role
          : h("span", { class: "role-capped", title: `${t.user} is ${t.effective_role} now` },
            `${t.effective_role} (its owner's role now)`)) },
        { title: "Created", value: (t) => fmtTime(t.created_at) },
        { title: "Last used", value: (t) => fmtTime(t.last_used_at) },
        { title: "Status", value: (t) => h("span", {
          class: t.revoked ? "status-revoked" : null }, t.revoked ? "revoked" : "active") },
        { title: "", value: (t) => (t.revoked ? "" : h("button", { type: "button",
          class: "danger revoke", "data-token": t.id, onclick: () => revokeToken(t) },
        "Revoke")) },
      ], data.items)),
    pager(data.total, state.tokensOffset, PAGE_SIZE,
      (offset) => { state.tokensOffset = offset; redraw(tokensPage); }, "token(s)"),
    newTokenForm((c) => redraw(() => tokensPage(c))));
}
