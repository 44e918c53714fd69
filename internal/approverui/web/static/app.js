// exechost web approver. Plain DOM, no dependencies. Every value that came
// from an agent or a file is inserted with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

const app = {
  secret: "",       // from the URL fragment, kept in sessionStorage (never a cookie)
  csrf: "",         // per-session token from POST api/session
  stale: "",        // "", "restarted", "unreachable" or "nosecret": the page cannot be trusted

  state: null,      // GET api/state
  hash: "",         // hash of the approvals file this page loaded
  agent: "*",       // selected agent in the editor
  pending: [],
  skewMs: 0,        // server clock minus browser clock
  nodes: null,
};

// ---------- helpers ----------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

function showBanner(text, reload) {
  $("banner-text").textContent = text;
  $("banner-reload").hidden = !reload;
  $("banner").hidden = false;
  $("banner").classList.toggle("stale", !!reload);
}

function hideBanner() { $("banner").hidden = true; }

// The secret arrives in the URL fragment (#k=…), which browsers never send
// to a server. It is kept in sessionStorage — per tab and per origin, so no
// other local port can read it — and sent in a header that browsers never
// attach by themselves. The fragment is removed from the address bar.
const SECRET_KEY = "exechost-approver-secret";

function takeSecret() {
  const m = /(?:^#|&)k=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(SECRET_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem(SECRET_KEY) || "";
}

async function rawApi(method, path, body) {
  const opts = { method, credentials: "omit", cache: "no-store", headers: { "X-Exechost-Secret": app.secret } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.headers["X-CSRF-Token"] = app.csrf;
    opts.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, opts);
  } catch (e) {
    const err = new Error("cannot reach the approver");
    err.status = 0;
    throw err;
  }
  let data = null;
  const text = await res.text();
  try { data = JSON.parse(text); } catch (_) { /* not JSON */ }
  if (!res.ok) {
    const err = new Error((data && data.error) || text.trim() || res.status + " " + res.statusText);
    err.status = res.status;
    throw err;
  }
  return data;
}

async function newSession() {
  const s = await rawApi("POST", "api/session");
  app.csrf = s.csrf;
}

async function api(method, path, body) {
  try {
    return await rawApi(method, path, body);
  } catch (e) {
    if (e.status === 403 && /CSRF/.test(e.message)) { // session forgotten: mint a new one, retry once
      await newSession();
      return await rawApi(method, path, body);
    }
    if (e.status === 403 && /secret/.test(e.message)) setStale("restarted");
    throw e;
  }
}

// setStale makes it impossible to miss that the page no longer knows the
// truth: a loud banner, the pending list marked stale and its buttons
// disabled, and never "No pending approvals".
const staleText = {
  restarted: "The approver restarted (or this page's secret is no longer valid). This page can no longer see or answer prompts — open the new URL the approver printed.",
  unreachable: "Cannot reach the approver — reconnecting… Pending prompts are unknown until it is back.",
  nosecret: "This page was opened without its secret. Open the full URL the approver printed (it ends in #k=…).",
};

function setStale(kind) {
  app.stale = kind;
  document.body.dataset.stale = kind;
  $("stale-text").textContent = kind ? staleText[kind] : "";
  $("stale").hidden = !kind;
  $("pending-list").classList.toggle("stale", !!kind);
  for (const b of $("pending-list").querySelectorAll("button")) b.disabled = !!kind;
  if (kind) { $("live").textContent = kind === "unreachable" ? "reconnecting…" : "disconnected"; $("live").className = "live off"; }
  renderPending();
}

function fmtTime(ms) {
  if (!ms) return "never";
  // lastUsedAt may be seconds or milliseconds; values below 1e12 are seconds.
  const d = new Date(ms < 1e12 ? ms * 1000 : ms);
  return d.toLocaleString();
}

function fmtLeft(ms) {
  if (ms <= 0) return "0:00";
  const s = Math.ceil(ms / 1000);
  return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
}

const decisionLabel = {
  "allow-once": "Allow once",
  "allow-always": "Allow always",
  "deny": "Deny",
};

// ---------- tabs ----------

function showView(name) {
  for (const b of document.querySelectorAll(".tabs button")) {
    b.setAttribute("aria-selected", String(b.dataset.view === name));
  }
  for (const v of ["pending", "policy", "nodes"]) {
    $("view-" + v).hidden = v !== name;
  }
  if (name === "nodes") loadNodes();
}

// ---------- pending ----------

function renderPending() {
  const list = $("pending-list");
  const tpl = $("prompt-template");
  const keep = new Set(app.pending.map((p) => p.id));
  for (const card of [...list.children]) {
    if (!keep.has(card.dataset.id)) card.remove();
  }
  for (const p of app.pending) {
    if (list.querySelector(`[data-id="${CSS.escape(p.id)}"]`)) continue;
    const card = tpl.content.firstElementChild.cloneNode(true);
    card.dataset.id = p.id;
    card.querySelector(".agent").textContent = "agent " + (p.agentId || "(none)");
    card.querySelector(".why").textContent = whyText(p.reason);
    card.querySelector(".cmd").textContent = p.command;
    // The parsed form the approval binds, when it reads differently.
    const canon = card.querySelector(".canonical");
    canon.textContent = p.canonical || "";
    canon.hidden = !p.canonical;
    card.querySelector(".canonical-title").hidden = canon.hidden;
    card.querySelector(".runs-as").textContent = p.runsAs || "—";
    card.querySelector(".confinement").textContent = p.confinement || "—";
    const starts = card.querySelector(".starts");
    for (const x of p.starts || []) starts.append(el("li", {}, el("code", {}, x)));
    card.querySelector(".session").textContent = p.sessionKey || "—";
    card.querySelector(".host").textContent = p.host + (p.nodeId ? " (node " + p.nodeId + ")" : "");
    card.querySelector(".cwd").textContent = p.cwd || "—";
    card.querySelector(".policy").textContent = "security=" + p.security + " ask=" + p.ask + " askFallback=" + p.askFallback;
    card.querySelector(".peer").textContent = (p.peer || "—") + " · id " + p.id;
    const ul = card.querySelector(".paths");
    if (p.paths.length === 0) ul.append(el("li", { class: "muted" }, "no executable could be resolved"));
    for (const x of p.paths) {
      const badge = !x.known ? el("span", { class: "badge unknown" }, "unknown")
        : x.allowlisted ? el("span", { class: "badge ok" }, "allowlisted")
        : el("span", { class: "badge miss" }, "not allowlisted");
      ul.append(el("li", {}, el("code", {}, x.path), " ", badge));
    }
    // What allow-always would write, before the button that writes it.
    const always = card.querySelector(".always");
    for (const l of p.allowAlways) {
      const li = el("li", { "data-kind": l.kind },
        l.kind === "add" ? "adds " : l.kind === "skip" ? "not added: " : "",
        l.kind === "add" ? el("code", {}, l.text) : l.text);
      if (l.warning) li.append(" ", el("span", { class: "badge miss runs-anything" }, l.warning));
      always.append(li);
    }
    always.hidden = p.allowAlways.length === 0;
    card.querySelector(".always-title").hidden = always.hidden;
    const actions = card.querySelector(".actions");
    for (const d of ["allow-once", "allow-always", "deny"]) {
      if (!p.choices.includes(d)) continue;
      const b = el("button", { type: "button", class: "decide " + d, "data-decision": d }, decisionLabel[d]);
      b.addEventListener("click", () => decide(p.id, d, card));
      actions.append(b);
    }
    list.append(card);
  }
  $("pending-empty").hidden = app.pending.length > 0 || !!app.stale;
  $("pending-count").textContent = String(app.pending.length);
  $("pending-count").classList.toggle("hot", app.pending.length > 0);
  document.title = (app.pending.length ? "(" + app.pending.length + ") " : "") + "exechost approver";
  tick();
}

function whyText(reason) {
  if (!reason) return "approval required";
  if (reason.startsWith("ask=always")) return "asks every time (ask=always)";
  if (reason.startsWith("allowlist-miss")) return "not in the allowlist";
  if (reason.startsWith("analysis-failed")) return "cannot be analysed: " + reason.replace(/^analysis-failed:?\s*/, "");
  return reason;
}

function tick() {
  const now = Date.now() + app.skewMs;
  for (const p of app.pending) {
    const card = $("pending-list").querySelector(`[data-id="${CSS.escape(p.id)}"]`);
    if (!card) continue;
    const c = card.querySelector(".countdown");
    if (!p.expiresAtMs) { c.textContent = "no timeout"; continue; }
    const left = p.expiresAtMs - now;
    c.textContent = left > 0 ? "falls back to " + p.askFallback + " in " + fmtLeft(left) : "falling back to " + p.askFallback + "…";
    c.classList.toggle("urgent", left < 15000);
  }
}

async function decide(id, decision, card) {
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    await api("POST", "api/decide", { id, decision });
  } catch (e) {
    showBanner("Could not answer: " + e.message, false);
    for (const b of card.querySelectorAll("button")) b.disabled = false;
  }
}

function addActivity(c) {
  const what = c.kind === "resolved" ? (decisionLabel[c.decision] || c.decision) + (c.by ? " by " + c.by : "")
    : c.kind === "expired" ? "expired (askFallback applied)" : "asked";
  const li = el("li", { "data-kind": c.kind }, el("time", {}, new Date().toLocaleTimeString()), " ",
    el("strong", {}, what), " · agent " + (c.agentId || "—") + " · ", el("code", {}, c.command));
  const ol = $("activity");
  ol.prepend(li);
  while (ol.children.length > 20) ol.lastChild.remove();
}

function applyPending(data) {
  app.skewMs = data.nowMs - Date.now();
  app.pending = data.pending;
  renderPending();
}

// streamEvents reads the server-sent event stream with fetch (EventSource
// cannot send the secret header) until it ends or fails.
async function streamEvents() {
  let res;
  try {
    res = await fetch("api/events", { credentials: "omit", cache: "no-store", headers: { "X-Exechost-Secret": app.secret } });
  } catch (_) {
    const err = new Error("cannot reach the approver");
    err.status = 0;
    throw err;
  }
  if (!res.ok) {
    const err = new Error((await res.text()).trim());
    err.status = res.status;
    throw err;
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let first = true;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw Object.assign(new Error("event stream ended"), { status: 0 });
    buf += value;
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let ev = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) ev = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length === 0) continue;
      const d = JSON.parse(data.join("\n"));
      if (ev === "pending") {
        if (first) { first = false; setStale(""); $("live").textContent = "live"; $("live").className = "live on"; }
        applyPending(d);
      } else if (ev === "change") addActivity(d);
    }
  }
}

// connectEvents keeps the stream up. A refused secret means the approver
// restarted with a new one: nothing this page holds can work again, so it
// says so and stops. A network failure retries with backoff, stale meanwhile.
async function connectEvents() {
  let delay = 250;
  for (;;) {
    try {
      await streamEvents();
      delay = 250;
    } catch (e) {
      if (e.status === 403) { setStale("restarted"); return; }
      setStale("unreachable");
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

// ---------- policy editor ----------

async function loadState() {
  const s = await api("GET", "api/state");
  app.state = s;
  app.hash = s.hash;
  $("tab-nodes").hidden = !s.gateway;
  $("no-editor").hidden = s.editor;
  $("editor").hidden = !s.editor;
  if (!s.editor) return;
  if (!s.agents.some((a) => a.id === app.agent)) app.agent = "*";
  renderEditor();
}

function currentAgent() {
  return app.state.agents.find((a) => a.id === app.agent) ||
    { id: app.agent, exists: false, security: "", ask: "", askFallback: "", effective: {}, sources: {}, skipped: [], warnings: [], allowlist: [], inherited: [] };
}

function fillSelect(sel, values, current, inheritLabel) {
  sel.replaceChildren(el("option", { value: "" }, inheritLabel));
  for (const v of values) sel.append(el("option", { value: v }, v));
  if (current && !values.includes(current)) {
    sel.append(el("option", { value: current, disabled: true }, current + " (invalid: ignored)"));
  }
  sel.value = current || "";
}

function renderEditor() {
  const s = app.state;
  const sel = $("agent-select");
  sel.replaceChildren();
  for (const a of s.agents) {
    const label = a.id === "*" ? "* (every agent)" : a.id + (a.exists ? "" : " (no entry yet)");
    sel.append(el("option", { value: a.id }, label));
  }
  sel.value = app.agent;
  const a = currentAgent();
  $("agent-hint").textContent = a.id === "*"
    ? "Settings and patterns of * apply to every agent; an agent's own values win."
    : a.exists ? "Empty settings inherit from *, then from the file's defaults."
    : "This agent has no entry yet; saving settings or adding a pattern creates it.";
  const inherit = a.id === "*" ? "(defaults)" : "(inherit)";
  fillSelect($("sel-security"), s.securities, a.security, inherit);
  fillSelect($("sel-ask"), s.asks, a.ask, inherit);
  fillSelect($("sel-fallback"), s.fallbacks, a.askFallback, inherit);
  const e = a.effective || {};
  const src = (k) => a.sources[k] ? " (" + a.sources[k] + ")" : "";
  $("effective").textContent = "security=" + e.security + src("security") + ", ask=" + e.ask + src("ask") +
    ", askFallback=" + e.askFallback + src("askFallback");
  $("agent-warnings").replaceChildren(...a.skipped.concat(a.warnings).map((w) => el("li", {}, w)));

  const body = $("allowlist-body");
  body.replaceChildren();
  for (const entry of a.allowlist) body.append(entryRow(a.id, entry));
  $("allowlist-empty").hidden = a.allowlist.length > 0;
  $("inherited-title").hidden = a.inherited.length === 0;
  $("inherited").replaceChildren(...a.inherited.map((x) =>
    el("li", {}, el("code", {}, x.pattern), " from " + x.agent + (x.lint ? " — " + x.lint : ""))));
}

function entryRow(agent, entry) {
  const pat = el("td", { class: "pattern" }, el("code", {}, entry.pattern));
  if (entry.lint) pat.append(el("div", { class: "lint" }, entry.lint));
  const edit = el("button", { type: "button", class: "edit" }, "Edit");
  const remove = el("button", { type: "button", class: "remove danger" }, "Remove");
  const tr = el("tr", { "data-pattern": entry.pattern },
    pat,
    el("td", {}, fmtTime(entry.lastUsedAt)),
    el("td", {}, entry.lastUsedCommand ? el("code", {}, entry.lastUsedCommand) : "—"),
    el("td", {}, entry.lastResolvedPath ? el("code", {}, entry.lastResolvedPath) : "—"),
    el("td", { class: "row-actions" }, edit, remove));
  remove.addEventListener("click", () => mutate("api/allowlist", { agent, op: "remove", pattern: entry.pattern }));
  edit.addEventListener("click", () => {
    const input = el("input", { class: "edit-input", value: entry.pattern, spellcheck: false, autocomplete: "off" });
    const save = el("button", { type: "button", class: "save-edit primary" }, "Save");
    const cancel = el("button", { type: "button", class: "cancel-edit" }, "Cancel");
    pat.replaceChildren(input);
    tr.lastChild.replaceChildren(save, cancel);
    input.focus();
    save.addEventListener("click", () => mutate("api/allowlist", { agent, op: "edit", old: entry.pattern, pattern: input.value }));
    cancel.addEventListener("click", renderEditor);
  });
  return tr;
}

// markSaved counts applied edits on the body element, for humans debugging
// and for the tests, which wait for the count.
function markSaved() {
  document.body.dataset.saved = String(Number(document.body.dataset.saved || 0) + 1);
}

// mutate posts an edit carrying the hash this page loaded; on success the
// page reloads the file, on 409 it says the file changed underneath.
async function mutate(path, body) {
  hideBanner();
  try {
    await api("POST", path, { hash: app.hash, ...body });
    await loadState();
    markSaved();
    return true;
  } catch (e) {
    showBanner(e.message, e.status === 409);
    return false;
  }
}

function setupEditor() {
  $("agent-select").addEventListener("change", (ev) => { app.agent = ev.target.value; hideBanner(); renderEditor(); });
  $("new-agent-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const id = $("new-agent").value.trim();
    if (!id) return;
    app.agent = id;
    if (await mutate("api/agent", { agent: id, security: "", ask: "", askFallback: "" })) $("new-agent").value = "";
  });
  $("settings-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    mutate("api/agent", { agent: app.agent, security: $("sel-security").value, ask: $("sel-ask").value, askFallback: $("sel-fallback").value });
  });
  $("add-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const pattern = $("add-pattern").value.trim();
    if (!pattern) return;
    if (await mutate("api/allowlist", { agent: app.agent, op: "add", pattern })) $("add-pattern").value = "";
  });
}

// ---------- nodes ----------

async function loadNodes() {
  try {
    app.nodes = await api("GET", "api/nodes");
  } catch (e) {
    showBanner("Nodes: " + e.message, false);
    return;
  }
  const nb = $("nodes-body");
  nb.replaceChildren(...app.nodes.nodes.map((n) => el("tr", {},
    el("td", {}, el("code", {}, n.id)), el("td", {}, n.displayName || "—"), el("td", {}, n.remoteIp || "—"),
    el("td", {}, el("span", { class: "badge " + (n.connected ? "ok" : "unknown") }, n.connected ? "connected" : "offline")))));
  const agents = [""].concat((app.state ? app.state.agents : []).map((a) => a.id).filter((id) => id !== "*"));
  for (const id of Object.keys(app.nodes.bindings)) if (!agents.includes(id)) agents.push(id);
  const bb = $("bindings-body");
  bb.replaceChildren();
  for (const id of agents) {
    const sel = el("select", { "data-agent": id }, el("option", { value: "" }, id === "" ? "(none)" : "(global default)"));
    for (const n of app.nodes.nodes) sel.append(el("option", { value: n.id }, (n.displayName || n.id) + (n.connected ? "" : " (offline)")));
    const cur = app.nodes.bindings[id] || "";
    if (cur && ![...sel.options].some((o) => o.value === cur)) sel.append(el("option", { value: cur }, cur + " (unknown)"));
    sel.value = cur;
    const save = el("button", { type: "button", class: "bind" }, "Bind");
    save.addEventListener("click", async () => {
      try {
        await api("POST", "api/binding", { agent: id, node: sel.value });
        hideBanner();
        await loadNodes();
        markSaved();
      } catch (e) { showBanner(e.message, false); }
    });
    bb.append(el("tr", {}, el("td", {}, id === "" ? "all agents (tools.exec.node)" : id), el("td", {}, sel), el("td", {}, save)));
  }
}

// ---------- start ----------

async function main() {
  for (const b of document.querySelectorAll(".tabs button")) b.addEventListener("click", () => showView(b.dataset.view));
  $("banner-close").addEventListener("click", hideBanner);
  $("banner-reload").addEventListener("click", async () => { hideBanner(); try { await loadState(); } catch (e) { showBanner(e.message, false); } });
  setupEditor();
  app.secret = takeSecret();
  if (!app.secret) {
    setStale("nosecret");
    document.body.dataset.ready = "true";
    return;
  }
  try {
    await newSession();
    await loadState();
  } catch (e) {
    if (e.status === 403) setStale("restarted");
    else if (e.status === 0) setStale("unreachable");
    else showBanner("Could not load: " + e.message, false);
  }
  connectEvents();
  setInterval(tick, 1000);
  document.body.dataset.ready = "true";
}

// Pasting the new URL into this tab after a restart changes only the
// fragment, which does not reload the page: take the new secret and reload.
window.addEventListener("hashchange", () => {
  if (/(?:^#|&)k=/.test(location.hash)) {
    takeSecret();
    location.reload();
  }
});

document.addEventListener("DOMContentLoaded", main);
