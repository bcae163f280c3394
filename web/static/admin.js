// The merchant admin panel: login (the operator's password, or a
// merchant's email, password and code), sales list, create/edit form,
// restock, pause/resume/end, live dashboard with the sale's history and
// audit timeline, the audit log, merchants (the operator), the second
// factor (a merchant), the balance with its statement, refunds and (the
// operator) credits to a shopper's wallet. Hash routes: #/, #/new,
// #/sales/{id}, #/sales/{id}/edit, #/audit, #/merchants, #/me, #/balance,
// #/balance/{merchant id} (the operator).
import {
  $, el, userText, api, page, nav, money, duration, localTime, statusLabel, watchStock, ticker, serverNow, noteServerTime,
  setCurrency, currentCurrency, toUnits, parseUnits, requestID, statement, keepCurrent, errorText, cards, orderRef,
} from "./common.js";
import { Code, Phase, TransferKind, PayoutStatus } from "./codes.js";

const pg = page($("#app"));

// clearToasts removes what toasts still show: they told of an earlier
// action.
function clearToasts() {
  for (const t of document.querySelectorAll(".toast")) t.remove();
}

function toast(msg) {
  clearToasts(); // the newest word replaces an older one still showing
  const t = el("div", { class: "toast", role: "status" }, msg);
  document.body.append(t);
  setTimeout(() => t.remove(), 3000);
}

let me = null; // GET /admin/api/session: {role, actor, merchant_id?}

function signedIn(session) {
  me = session && session.signed_in ? session : null;
  // Logged out, the panel is its login page and nothing else.
  $("#admin-nav").hidden = !me;
  $("#nav-merchants").hidden = !me || me.role !== "operator";
  if (!me) return $("#who").replaceChildren();
  $("#who").replaceChildren(...[
    el("span", { class: "hide-narrow muted-light" }, me.role === "operator" ? "Operator" : userText(me.actor)),
    me.role === "merchant" ? el("a", { class: "button ghost small", href: "#/me", id: "second-factor" }, "2FA") : null,
    el("button", { class: "ghost small", id: "logout", onclick: logout }, "Log out"),
  ].filter(Boolean));
}

// whoAmI asks who the session is, and shows it.
async function whoAmI() {
  let s = { signed_in: false };
  try { s = await api("GET", "/admin/api/session"); } catch (e) { /* shown as logged out */ }
  signedIn(s);
  if (me) {
    try { setCurrency((await api("GET", "/admin/api/balance")).currency); } catch (e) { /* prices in the default currency */ }
  }
  return me;
}

async function logout() {
  try { await api("POST", "/admin/api/logout"); } catch (e) { /* gone anyway */ }
  signedIn(null);
  loginView();
}

// guard runs an admin call; a 401 (the session ended) sends the merchant
// to the login page, which comes back to the same page after login.
async function guard(fn) {
  try {
    return await fn();
  } catch (e) {
    if (e.code === Code.Unauthenticated) {
      const wasIn = !!me;
      signedIn(null);
      loginView(loadDraft() ? "kept" : wasIn ? "ended" : "");
      return undefined;
    }
    throw e;
  }
}

// A form's input, kept (sessionStorage) from a submit the server refused
// for an ended session until the merchant is back on the same page.
const draftKey = "seckill.admin.draft";
function saveDraft(values) {
  try {
    sessionStorage.setItem(draftKey, JSON.stringify({ hash: location.hash, actor: me ? me.actor : "", values }));
  } catch (e) { /* not kept */ }
}
// loadDraft is the input kept for this page, if whoever is signed in now
// (anyone, while nobody is) typed it.
function loadDraft() {
  try {
    const d = JSON.parse(sessionStorage.getItem(draftKey) || "null");
    return d && d.hash === location.hash && (!me || d.actor === me.actor) ? d.values : null;
  } catch (e) {
    return null;
  }
}
function dropDraft() {
  try { sessionStorage.removeItem(draftKey); } catch (e) { /* nothing kept */ }
}

// loginView is the panel's login; ended says why it shows: "ended" (the
// session ended) or "kept" (and a form's input waits for the login).
function loginView(ended = "") {
  const v = pg.begin();
  nav("");
  const email = el("input", { type: "email", id: "email", autocomplete: "username", maxlength: "254" });
  const pw = el("input", { type: "password", id: "password", autocomplete: "current-password", required: true });
  const code = el("input", { id: "totp", inputmode: "numeric", autocomplete: "one-time-code", maxlength: "6", pattern: "[0-9]{6}" });
  const err = el("span", { class: "err", id: "login-error" });
  const submit = el("button", { class: "primary", type: "submit", id: "login" }, "Log in");
  v.show(el("form", { class: "card signin", onsubmit: async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    err.textContent = "";
    try {
      const body = email.value.trim() ? { email: email.value.trim(), password: pw.value, totp: code.value.trim() } : { password: pw.value };
      await api("POST", "/admin/api/login", body);
      await whoAmI();
      route(); // back to the page asked for, its form as it was typed

    } catch (e) {
      err.textContent = e.message;
    }
    submit.disabled = false;
  } },
  el("h1", {}, "Admin login"),
  ended ? el("p", { class: "result warn", id: "session-ended", role: "status" },
    ended === "kept" ? "Your session has ended. Log in again to carry on: what you typed is kept."
      : "Your session has ended. Log in again to carry on.") : null,
  el("label", {}, "Email (merchants; empty for the operator)", email),
  el("label", {}, "Password", pw),
  el("label", {}, "Code from your authenticator app (if you enrolled one)", code),
  err,
  submit));
  email.focus();
}

// What an action's toast says once it is done.
const actionDone = { pause: "Sale paused", resume: "Sale resumed", end: "Sale ended", restock: "Units added" };

async function act(id, action, body) {
  try {
    const s = await guard(() => api("POST", `/admin/api/sales/${id}/${action}`, body));
    if (s) toast(actionDone[action]);
    return s;
  } catch (e) {
    toast(errorText(e));
    return undefined;
  }
}

// controls offers what a sale's status allows: Pause while it may sell,
// Resume while paused, End and Restock until it has ended. End cannot be
// undone, so it asks first. after runs once an action is done.
function controls(sale, after) {
  const box = el("div", { class: "actions", id: "controls", "data-status": sale.status });
  const run = async (action, body) => { if (await act(sale.id, action, body)) after(); };
  const button = (label, action, onclick = () => run(action), cls = "small") =>
    el("button", { class: cls, type: "button", "data-action": action, onclick }, label);
  const qty = el("input", { type: "number", min: "1", value: "100", style: "width:6rem", id: `restock-qty-${sale.id}` });
  const open = sale.status !== Phase.Ended;
  const draw = () => box.replaceChildren(...[
    sale.status === Phase.Active || sale.status === Phase.Scheduled || sale.status === Phase.SoldOut ? button("Pause", "pause") : null,
    sale.status === Phase.Paused ? button("Resume", "resume") : null,
    open ? button("End…", "end", confirmEnd) : null,
    open ? el("span", { class: "row" }, el("label", { class: "inline", for: qty.id }, "Units to add"), qty,
      button("Restock", "restock", () => run("restock", { qty: Number(qty.value) }))) : null,
    open ? null : el("span", { class: "muted" }, "This sale has ended: nothing more can be done with it."),
  ].filter(Boolean));
  const confirmEnd = () => {
    const yes = button("End the sale now", "end-confirmed", () => run("end"), "small danger");
    box.replaceChildren(el("div", { class: "result warn", role: "alertdialog", id: "confirm-end",
      "aria-labelledby": "confirm-end-title", "aria-describedby": "confirm-end-detail" },
    el("div", { class: "title", id: "confirm-end-title" }, "End this sale now?"),
    el("div", { class: "detail", id: "confirm-end-detail" },
      "Shoppers can no longer buy, and an ended sale cannot be resumed. Orders already taken stay as they are."),
    el("div", { class: "row", style: "margin-top:.5rem" }, yes, button("Keep it running", "end-cancel", draw))));
    yes.focus();
  };
  draw();
  return box;
}

async function salesView() {
  const v = pg.begin();
  nav("sales");
  let list;
  try {
    list = await guard(() => api("GET", "/admin/api/sales"));
  } catch (e) {
    return v.show(el("p", { class: "result bad" }, e.message));
  }
  if (!list) return;
  const sales = list.sales;
  const rows = sales.map((s) => el("tr", { "data-sale": s.id },
    el("td", {}, s.id),
    el("td", {}, el("a", { href: `#/sales/${s.id}` }, el("strong", {}, userText(s.name))), el("div", { class: "muted" }, userText(s.item))),
    el("td", {}, el("span", { class: `badge ${s.status}` }, statusLabel[s.status])),
    el("td", {}, `${s.sold} / ${s.total}`,
      me && me.role === "operator" && s.merchant_id ? el("div", { class: "muted small" }, `merchant ${s.merchant_id}`) : null),
    el("td", {}, money(s.price_cents)),
    el("td", { class: "muted" }, localTime(s.starts_at), el("br"), localTime(s.ends_at)),
    el("td", {}, el("div", { class: "actions" },
      el("a", { class: "button small", href: `#/sales/${s.id}` }, "Dashboard"),
      s.status !== Phase.Ended ? el("a", { class: "button small", href: `#/sales/${s.id}/edit` }, "Edit") : null))));
  v.show(
    el("div", { class: "row", style: "justify-content:space-between" }, el("h1", {}, me && me.role === "merchant" ? "My sales" : "Sales"),
      el("a", { class: "button primary", href: "#/new", id: "new-sale" }, "New sale")),
    sales.length ? el("div", { class: "table-wrap" }, cards(el("table", { id: "sales" },
      el("thead", {}, el("tr", {}, ["#", "Sale", "Status", "Sold", "Price", "Window", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows))))
      : el("p", { class: "empty" }, "No sales yet. Create the first one."));
}

// toLocalInput turns an RFC 3339 time into a datetime-local value.
function toLocalInput(iso) {
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// fieldMessage puts a server's message about a field in the form's
// terms: its figures written as the reader writes numbers, a price's as
// money.
function fieldMessage(field, msg) {
  if (field.endsWith("_at")) return msg; // its figures are years
  return msg.replace(/\d{4,}/g, (n) => field === "price_cents" ? money(Number(n)) : Number(n).toLocaleString());
}

async function formView(id) {
  const v = pg.begin();
  nav(id ? "" : "new");
  let sale = null;
  if (id) {
    try {
      sale = await guard(() => api("GET", `/admin/api/sales/${id}`));
    } catch (e) {
      return v.show(el("p", { class: "result bad" }, e.message));
    }
    if (!sale) return;
  }
  const start = new Date(serverNow() + 60_000);
  const started = !!sale && serverNow() >= Date.parse(sale.starts_at);
  // Each field: its label, its input's attributes, and where it goes:
  // the main part, the waiting room's (shown while the room is on), or
  // "Advanced". price_cents is typed in the currency's units.
  const fields = {
    name: ["Sale name", { value: sale ? sale.name : "", maxlength: "200" }],
    item: ["Item", { value: sale ? sale.item : "", maxlength: "200" }],
    price_cents: [`Price (${currentCurrency()})`, { inputmode: "decimal", autocomplete: "off", placeholder: toUnits(1999),
      value: sale ? toUnits(sale.price_cents) : "", "data-money": "1" }],
    total: ["Units for sale", { type: "number", min: "1", step: "1", value: sale ? sale.total : "", disabled: !!sale }],
    per_user_limit: ["Limit per customer", { type: "number", min: "1", step: "1", value: sale ? sale.per_user_limit : "1" }],
    starts_at: ["Starts", { type: "datetime-local", step: "1", value: toLocalInput(sale ? sale.starts_at : start.toISOString()) }],
    ends_at: ["Ends", { type: "datetime-local", step: "1", value: toLocalInput(sale ? sale.ends_at : new Date(start.getTime() + 3600_000).toISOString()) }],
    verified_only: ["Verified shoppers only (a verified account or the shop's provider vouching for the email)",
      { type: "checkbox", checked: !!(sale && sale.verified_only) }],
    // The room is set up before the start; its rate may change any time.
    waiting_room: ["Waiting room: shoppers queue; those who come before the start get random places",
      { type: "checkbox", checked: !!(sale && sale.waiting_room), disabled: started }],
    queue_opens_at: ["Queue opens (empty: 15 min before the start)",
      { type: "datetime-local", step: "1", value: sale ? toLocalInput(sale.queue_opens_at) : "", disabled: started, "data-optional": "1",
        "data-initial": sale ? toLocalInput(sale.queue_opens_at) : "", "data-group": "room" }],
    admit_per_second: ["Shoppers let in each second",
      { type: "number", min: "1", max: "100000", step: "1", value: sale ? sale.admit_per_second : "100", "data-group": "room" }],
    buckets: ["Stock buckets (1–64): more spread a very hot sale over the shop's Redis servers",
      { type: "number", min: "1", max: "64", step: "1", value: sale ? sale.buckets : "1", disabled: !!sale, "data-group": "advanced" }],
    require_ticket: ["Buys need a ticket (handed out once the sale opens)",
      { type: "checkbox", checked: !!(sale && sale.require_ticket), "data-group": "advanced" }],
    pow_difficulty: ["Proof of work for a ticket (0 = off; each step doubles a shopper's work)",
      { type: "number", min: "0", max: "32", step: "1", value: sale ? sale.pow_difficulty : "0", "data-group": "advanced" }],
  };
  const inputs = {}, errs = {};
  const groups = { main: [], room: [], advanced: [] };
  for (const [k, [label, attrs]] of Object.entries(fields)) {
    inputs[k] = el("input", { id: `f-${k}`, name: k, ...attrs, "aria-describedby": `err-${k}` });
    errs[k] = el("span", { class: "err", id: `err-${k}`, "aria-live": "polite" });
    groups[attrs["data-group"] || "main"].push(attrs.type === "checkbox"
      ? el("label", { class: "check" }, inputs[k], label, errs[k])
      : el("label", { class: k === "name" || k === "item" ? "full" : null }, label, inputs[k], errs[k]));
  }
  // The operator names whose sale it is (a merchant's are its own).
  if (me && me.role === "operator") {
    let list = { merchants: [] };
    try { list = (await guard(() => api("GET", "/admin/api/merchants"))) || list; } catch (e) { /* the operator's then */ }
    const current = sale ? sale.merchant_id : 0;
    inputs.merchant_id = el("select", { id: "f-merchant_id", name: "merchant_id", "aria-describedby": "err-merchant_id" },
      el("option", { value: "0", selected: current === 0 }, "The operator"),
      list.merchants.map((m) => el("option", { value: String(m.id), selected: current === m.id }, `${m.name} (${m.email})`)));
    errs.merchant_id = el("span", { class: "err", id: "err-merchant_id" });
    groups.main.push(el("label", {}, "Merchant (whose sale it is)", inputs.merchant_id, errs.merchant_id));
  }
  // What a proof of work costs each shopper (and each bot account).
  const cost = el("span", { class: "muted", id: "pow-cost" });
  const showCost = () => { cost.textContent = powCost(Number(inputs.pow_difficulty.value)); };
  inputs.pow_difficulty.addEventListener("input", showCost);
  showCost();
  errs.pow_difficulty.before(cost);
  // The room's settings show while the room is on.
  const room = el("fieldset", { class: "full sub", id: "room-fields" }, el("legend", {}, "Waiting room"), groups.room);
  const showRoom = () => { room.hidden = !inputs.waiting_room.checked; };
  inputs.waiting_room.addEventListener("change", showRoom);
  const advanced = el("details", { class: "full sub", id: "advanced" }, el("summary", {}, "Advanced: stock buckets, tickets, proof of work"),
    el("div", { class: "sub-grid" }, groups.advanced));
  // Input kept from a submit refused for an ended session.
  const kept = loadDraft();
  if (kept) {
    for (const [k, val] of Object.entries(kept)) {
      const input = inputs[k];
      if (!input || input.disabled) continue;
      if (input.type === "checkbox") input.checked = !!val; else input.value = val;
    }
    dropDraft(); // shown once: it is in the form now
  }
  showRoom();
  showCost();
  advanced.open = [inputs.buckets.value !== "1", inputs.require_ticket.checked, inputs.pow_difficulty.value !== "0"].some(Boolean);
  const snapshot = () => Object.fromEntries(Object.entries(inputs).map(([k, i]) => [k, i.type === "checkbox" ? i.checked : i.value]));
  const formErr = el("div", { id: "form-error", role: "alert" });
  const submit = el("button", { class: "primary", type: "submit", id: "save" }, sale ? "Save changes" : "Create sale");
  const fail = (k, msg) => {
    errs[k].textContent = msg;
    inputs[k].classList.add("invalid");
    inputs[k].setAttribute("aria-invalid", "true");
  };
  const onsubmit = async (ev) => {
    ev.preventDefault();
    for (const k in errs) { errs[k].textContent = ""; inputs[k].classList.remove("invalid"); inputs[k].removeAttribute("aria-invalid"); }
    formErr.replaceChildren();
    const body = {};
    for (const [k, input] of Object.entries(inputs)) {
      // A hidden room's settings are not sent: the server keeps its own.
      if (input.disabled || (input.dataset.group === "room" && room.hidden)) continue;
      const v = input.value.trim();
      if (input.type === "checkbox") {
        body[k] = input.checked;
      } else if (input.tagName === "SELECT") {
        body[k] = Number(input.value);
      } else if (input.dataset.money) {
        const n = parseUnits(v);
        if (v === "") fail(k, "required");
        else if (n === null) fail(k, `a price such as ${toUnits(1999)}`);
        else body[k] = n;
      } else if (input.type === "number") {
        if (v === "") fail(k, "required");
        else if (!Number.isInteger(Number(v))) fail(k, "a whole number");
        else body[k] = Number(v);
      } else if (input.type === "datetime-local") {
        // Left as it was, the room's opening moves with the start. Compared
        // as times: the browser writes a whole minute without its ":00".
        const d = new Date(v);
        if (input.dataset.optional && (v === input.dataset.initial || d.getTime() === new Date(input.dataset.initial).getTime())) continue;
        if (!v || Number.isNaN(d.getTime())) fail(k, "pick a date and time");
        else body[k] = d.toISOString();
      } else if (v === "") {
        fail(k, "required");
      } else {
        body[k] = v;
      }
    }
    const bad = Object.keys(errs).filter((k) => errs[k].textContent);
    if (bad.length) {
      if (inputs[bad[0]].closest("details")) advanced.open = true;
      return inputs[bad[0]].focus();
    }
    submit.disabled = true;
    saveDraft(snapshot());
    try {
      const saved = await guard(() => sale ? api("PATCH", `/admin/api/sales/${sale.id}`, body) : api("POST", "/admin/api/sales", body));
      if (saved) {
        dropDraft();
        toast(sale ? "Saved" : `Sale ${saved.id} created`);
        location.hash = `#/sales/${saved.id}`;
      }
    } catch (e) {
      dropDraft();
      const mine = (e.fields || []).filter((f) => errs[f.field]);
      for (const f of mine) fail(f.field, fieldMessage(f.field, f.message));
      if (mine.length) {
        if (inputs[mine[0].field].closest("details")) advanced.open = true;
        inputs[mine[0].field].focus();
      }
      if (mine.length < (e.fields || []).length || !mine.length) formErr.replaceChildren(el("div", { class: "result bad" }, e.message));
    }
    submit.disabled = false;
  };
  v.show(el("h1", {}, sale ? `Edit sale ${sale.id}` : "New sale"),
    kept ? el("p", { class: "result warn", id: "draft-kept" }, "This is what you typed before your session ended: check it, then save.") : null,
    el("form", { class: "card sale-form", id: "sale-form", onsubmit, novalidate: true }, groups.main, room, advanced,
      el("div", { class: "full" }, formErr),
      el("div", { class: "full row" }, submit, el("a", { href: sale ? `#/sales/${sale.id}` : "#/", class: "muted" }, "Cancel"))));
  inputs.name.focus();
}

// powCost tells what a proof of work of n bits costs a solver: 2^n
// hashes expected, and the time at the rate the browser test measured in
// headless Chromium on a shared 2-core machine (docs/guide.md, bot defence).
const browserHashesPerSecond = 130_000;
function powCost(n) {
  if (!Number.isInteger(n) || n <= 0) return "Off: a ticket costs one request.";
  const hashes = 2 ** n;
  const s = hashes / browserHashesPerSecond;
  const time = s < 1 ? `${Math.max(1, Math.round(s * 1000))} ms` : s < 120 ? `${Math.round(s)} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
  return `≈ ${hashes.toLocaleString("en-US")} hashes expected per ticket: about ${time} of a shopper's browser (and of each bot account).`;
}

// chart draws sold and remaining over time on a canvas.
function chart(canvas, points, total) {
  const dpr = devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w * dpr;
  canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#e3e6ec";
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = 8 + ((h - 24) * i) / 4;
    g.beginPath(); g.moveTo(0, y); g.lineTo(w, y); g.stroke();
  }
  g.fillStyle = "#647084";
  g.font = "11px system-ui";
  g.fillText(String(total), 4, 18);
  g.fillText("0", 4, h - 18);
  if (points.length < 2) return;
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  const x = (t) => ((t - t0) / Math.max(1, t1 - t0)) * (w - 8) + 4;
  const y = (v) => 8 + (h - 24) * (1 - v / Math.max(1, total));
  const line = (key, color) => {
    g.strokeStyle = color;
    g.lineWidth = 2.5;
    g.beginPath();
    points.forEach((p, i) => (i ? g.lineTo(x(p.t), y(p[key])) : g.moveTo(x(p.t), y(p[key]))));
    g.stroke();
  };
  line("remaining", "#9aa3b2");
  line("sold", "#e0312f");
  g.fillStyle = "#647084";
  g.fillText(`since ${new Date(t0).toLocaleTimeString()}`, w - 110, h - 4);
}

async function dashboardView(id) {
  const v = pg.begin();
  nav("");
  let sale;
  try {
    sale = await guard(() => api("GET", `/admin/api/sales/${id}`));
  } catch (e) {
    return v.show(el("p", { class: "result bad" }, e.message));
  }
  if (!sale) return;
  noteServerTime(sale.server_time);
  const cells = {}, rates = {};
  const stat = (key, label) => el("div", { class: "card stat" }, cells[key] = el("div", { class: "n", id: `stat-${key}` }, "–"), el("div", { class: "l" }, label));
  const rate = (key, label) => el("div", { class: "card stat" }, rates[key] = el("div", { class: "n", id: `rate-${key}` }, "0"), el("div", { class: "l" }, `${label} /s`));
  const badge = el("span", { class: "badge", id: "status" });
  const when = el("span", { class: "muted", id: "when" });
  const canvas = el("canvas", { class: "chart", id: "chart" });
  const ctl = el("div", {});
  // Shown only while the dead-letter queue holds messages.
  const dead = el("p", { class: "result warn", id: "dead-letters", hidden: true });
  const capped = el("div", { id: "first-capped" });
  // The waiting room's figures, for a sale with one.
  const roomBox = el("div", { id: "room-stats", hidden: true }, el("h2", {}, "Waiting room"),
    el("div", { class: "stats" }, stat("queue_size", "In the queue"), stat("queue_admitted", "Let in"),
      stat("queue_early", "Joined before the start"), stat("queue_passes", "Passes used to buy"),
      stat("queue_rate", "Let in a second / setting")));
  const timeline = el("div", { id: "timeline" }, el("span", { class: "muted" }, "Loading…"));
  // The chart starts at the sale's opening: the ledger's history, then
  // the live figures.
  const points = [];
  try {
    const h = await guard(() => api("GET", `/admin/api/sales/${id}/history`));
    for (const p of (h && h.points) || []) points.push({ t: Date.parse(p.at), sold: p.sold, remaining: Math.max(0, sale.total - p.sold) });
  } catch (e) { /* the live figures alone */ }
  let prev = null;
  let stats = null;
  // What the controls were drawn to offer: render redraws them when the
  // status changes that, whoever changed it (a poll, a live frame, an
  // action here or in another tab).
  let drawn = null;
  // Places admitted a second, as measured between two polls.
  let admitRate = 0;
  // Answers may arrive after the merchant has left this view: drop them.
  let live = true;

  const render = () => {
    if (!stats || !live) return;
    badge.className = `badge ${stats.status}`;
    badge.textContent = statusLabel[stats.status] || stats.status;
    // Redrawn when what may be done changes (not for scheduled → on sale,
    // say), so an open confirmation or a typed quantity stays.
    sale.status = stats.status;
    const offer = stats.status === Phase.Ended || stats.status === Phase.Paused ? stats.status : "open";
    if (drawn !== offer) {
      drawn = offer;
      ctl.replaceChildren(controls(sale, refresh));
    }
    const d = stats.defence || {};
    const shown = { ...stats, ticket_refusals: (d.ticket_required || 0) + (d.ticket_invalid || 0),
      challenges: `${d.challenges_solved || 0} / ${d.challenges_issued || 0}`, tickets_issued: d.tickets_issued || 0, bad_proofs: d.pow_invalid || 0 };
    const q = stats.queue;
    if (q) Object.assign(shown, { queue_size: q.size, queue_admitted: q.admitted, queue_early: q.joined_before_start,
      queue_passes: q.passes_used, queue_rate: `${admitRate} / ${q.admit_per_second}` });
    roomBox.hidden = !q;
    for (const [k, cell] of Object.entries(cells)) if (k in shown) cell.textContent = shown[k];
    const first = d.first_capped || [];
    capped.replaceChildren(first.length ? el("ol", { class: "capped" }, first.map((c) =>
      el("li", {}, el("span", { class: "mono" }, c.user_id), " ", el("span", { class: "muted" }, localTime(c.at)))))
      : el("span", { class: "muted" }, "Nobody yet."));
    dead.hidden = !(stats.dead_letters > 0);
    dead.textContent = `${stats.dead_letters} message${stats.dead_letters === 1 ? "" : "s"} in the dead-letter queue ` +
      "(all sales): orders the worker could not write. See them with `seckill deadletters list`.";
    const now = serverNow();
    const ends = Date.parse(sale.ends_at);
    when.textContent = stats.status === Phase.Ended ? (now < ends ? "ended early" : `ended ${localTime(sale.ends_at)}`)
      : now < Date.parse(sale.starts_at) ? `starts in ${duration(Date.parse(sale.starts_at) - now)}`
        : now < ends ? `ends in ${duration(ends - now)}` : `ended ${localTime(sale.ends_at)}`;
  };
  const refresh = async () => {
    let s;
    try {
      s = await guard(() => api("GET", `/admin/api/sales/${id}/stats`));
    } catch (e) {
      return;
    }
    if (!s || !live) return;
    const t = Date.parse(s.at);
    if (prev) {
      const dt = Math.max(0.001, (t - prev.t) / 1000);
      for (const k of [Code.OK, Code.SoldOut, Code.LimitExceeded, Code.RateLimited]) {
        const d = ((s.outcomes[k] || 0) - (prev.outcomes[k] || 0)) / dt;
        rates[k].textContent = Math.max(0, Math.round(d));
      }
    }
    if (prev && s.queue && prev.admitted !== undefined) {
      admitRate = Math.max(0, Math.round((s.queue.admitted - prev.admitted) / Math.max(0.001, (t - prev.t) / 1000)));
    }
    prev = { t, outcomes: s.outcomes, admitted: s.queue ? s.queue.admitted : undefined };
    stats = s;
    sale.total = s.total;
    points.push({ t, sold: s.sold, remaining: s.remaining });
    if (points.length > 600) points.shift();
    chart(canvas, points, s.total);
    render();
  };

  v.show(
    el("div", { class: "row", style: "justify-content:space-between" },
      el("div", {}, el("h1", { style: "margin-bottom:.2rem", id: "sale-name" }, userText(sale.name)),
        el("div", { class: "row" }, badge, when, el("span", { class: "muted" }, userText(sale.item),
          ` · ${money(sale.price_cents)} · limit ${sale.per_user_limit}` + (sale.buckets > 1 ? ` · ${sale.buckets} buckets` : "") +
          (sale.require_ticket ? ` · tickets${sale.pow_difficulty ? `, proof of work ${sale.pow_difficulty} bits` : ""}` : "") +
          (sale.verified_only ? " · verified shoppers only" : "") +
          (sale.waiting_room ? ` · waiting room, ${sale.admit_per_second}/s` : "")))),
      el("div", { class: "actions" }, el("a", { class: "button small", href: `#/sales/${id}/edit` }, "Edit"),
        el("a", { class: "button small", href: `/#/sales/${id}`, target: "_blank" }, "Shopper page"))),
    dead,
    el("h2", {}, "Stock and orders"),
    el("div", { class: "stats" }, stat("sold", "Sold"), stat("remaining", "Remaining"), stat("orders_persisted", "Orders persisted"),
      stat("orders_pending", "Awaiting payment"), stat("orders_paid", "Paid"), stat("orders_cancelled", "Cancelled")),
    el("h2", {}, "Buy outcomes"),
    el("div", { class: "stats" }, rate(Code.OK, "OK"), rate(Code.SoldOut, "Sold out"), rate(Code.LimitExceeded, "Limit"),
      rate(Code.RateLimited, "Rate limited")),
    roomBox,
    el("h2", {}, "Bot defence"),
    el("div", { class: "stats" }, stat("ticket_refusals", "Buys without a good ticket"), stat("challenges", "Challenges solved / issued"),
      stat("tickets_issued", "Tickets issued"), stat("bad_proofs", "Bad proofs of work")),
    el("div", { class: "card", style: "margin-top:.6rem" }, el("div", { class: "l" }, "First customers refused for their cap (many within moments: a bot farm)"),
      capped),
    el("h2", {}, "Progress"),
    el("div", { class: "card" }, canvas,
      el("div", { class: "muted" }, el("span", {}, el("span", { style: "color:#e0312f", "aria-hidden": "true" }, "■"), " sold"), "  ", el("span", {}, el("span", { style: "color:#9aa3b2", "aria-hidden": "true" }, "■"), " remaining"))),
    el("h2", {}, "Controls"),
    el("div", { class: "card" }, ctl),
    el("h2", {}, "History of changes"),
    el("div", { class: "card" }, timeline));
  loadTimeline(timeline, id);
  v.keep(() => { live = false; });
  v.keep(ticker(refresh, 1000));
  v.keep(ticker(render, 500));
  // Stock moves between stats polls: show it the moment the hub pushes it.
  v.keep(watchStock(id, (m) => {
    if (!stats) return;
    stats.remaining = m.remaining;
    stats.status = m.status;
    if (m.sold !== undefined) stats.sold = m.sold;
    render();
  }));
}

// The audit log's words: what each action is, and each field's label.
const actionLabel = {
  "sale.create": "Created the sale", "sale.patch": "Edited the sale", "sale.restock": "Restocked", "sale.pause": "Paused",
  "sale.resume": "Resumed", "sale.end": "Ended the sale", login: "Logged in", "login.failed": "Failed login",
  "merchant.create": "Added a merchant", "merchant.disable": "Disabled a merchant", "merchant.enable": "Enabled a merchant",
  "merchant.payout_account": "Set a payout account", "order.refund": "Refunded an order", "payout.create": "Paid out",
  "wallet.credit": "Credited a wallet", "totp.enrol": "Set up a second factor", "totp.reset": "Reset a second factor",
};
const fieldLabel = {
  name: "Name", item: "Item", price_cents: "Price", total: "Units for sale", per_user_limit: "Limit per customer",
  starts_at: "Starts", ends_at: "Ends", status: "Status", buckets: "Stock buckets", require_ticket: "Tickets",
  pow_difficulty: "Proof of work", verified_only: "Verified shoppers only", waiting_room: "Waiting room",
  queue_opens_at: "Queue opens", admit_per_second: "Let in a second", merchant_id: "Merchant",
};
// A new sale's row holds every field: these say nothing when off.
const quietWhenOff = (k, v, after) => (v === 0 || v === false || v === "") || (k === "buckets" && v === 1) ||
  (k === "queue_opens_at" && after && !after.waiting_room) || (k === "admit_per_second" && after && !after.waiting_room);

// fieldValue shows an audited value as the panel shows it elsewhere.
function fieldValue(k, v) {
  if (typeof v === "boolean") return v ? "on" : "off";
  if (k === "price_cents" || k === "amount_cents") return money(v);
  if (k === "status") return statusLabel[v] || v;
  if (k === "merchant_id") return v ? `merchant ${v}` : "the operator";
  if (typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v)) return localTime(v);
  return String(v);
}

// changes shows an audit row's fields: before → after of each that
// changed; a new sale's settings that are on.
function changes(r) {
  const before = r.before || {}, after = r.after || {};
  // Some rows hold a whole record (a merchant's): what did not change is
  // left out.
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((k) => r.before ? JSON.stringify(before[k]) !== JSON.stringify(after[k]) : !quietWhenOff(k, after[k], after));
  if (!keys.length) return "";
  return el("ul", { class: "changes" }, keys.map((k) => el("li", {}, el("span", { class: "muted" }, `${fieldLabel[k] || k}: `),
    k in before ? [el("s", {}, userText(fieldValue(k, before[k]))), " → "] : null,
    k in after ? el("strong", {}, userText(fieldValue(k, after[k]))) : "removed")));
}

// auditList shows audit rows: when (in the reader's time), who, what, and
// the fields that changed.
function auditList(rows, withSale) {
  if (!rows.length) return el("p", { class: "muted", id: "audit-empty" }, "Nothing recorded yet.");
  return el("div", { class: "table-wrap" }, cards(el("table", { class: "audit" },
    el("thead", {}, el("tr", {}, ["When", "Who", "What", ...(withSale ? ["Sale"] : []), "Changes", "From"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", { "data-audit": r.id },
      el("td", { class: "muted" }, localTime(r.at)), el("td", {}, userText(r.actor), el("div", { class: "muted small" }, r.role)),
      el("td", { title: r.action }, actionLabel[r.action] || r.action),
      ...(withSale ? [el("td", {}, r.sale_id ? el("a", { href: `#/sales/${r.sale_id}` }, `Sale ${r.sale_id}`) : "")] : []),
      el("td", {}, changes(r)), el("td", { class: "muted mono" }, r.ip)))))));
}

async function loadTimeline(box, id) {
  try {
    const a = await guard(() => api("GET", `/admin/api/audit?sale_id=${id}&limit=100`));
    if (a) box.replaceChildren(auditList(a.entries, false));
  } catch (e) {
    box.replaceChildren(el("p", { class: "result bad" }, e.message));
  }
}

// auditView is the whole audit log (a merchant's: its sales and logins),
// a page at a time, filtered by sale, actor, action and dates (kept in
// the route: #/audit?sale_id=…&action=…), with a CSV export.
async function auditView(query) {
  const v = pg.begin();
  nav("audit");
  const params = new URLSearchParams(query || "");
  const filter = new URLSearchParams();
  for (const k of ["sale_id", "actor", "action", "since", "until", "before_id"]) if (params.get(k)) filter.set(k, params.get(k));
  let a;
  try {
    a = await guard(() => api("GET", `/admin/api/audit?limit=50&${filter}`));
  } catch (e) {
    return v.show(el("h1", {}, "Audit log"), el("p", { class: "result bad", id: "audit-error" }, e.message),
      el("a", { class: "button small", href: "#/audit" }, "Show everything"));
  }
  if (!a) return;
  // The dates are days in the reader's time zone: from the start of
  // "from" to the end of "to".
  const day = (iso, end) => {
    if (!iso) return "";
    const d = new Date(iso);
    if (end) d.setMilliseconds(d.getMilliseconds() - 1);
    const pad = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  };
  const f = {
    sale_id: el("input", { id: "audit-sale", type: "number", min: "1", step: "1", value: params.get("sale_id") || "" }),
    actor: el("input", { id: "audit-actor", maxlength: "254", value: params.get("actor") || "" }),
    action: el("select", { id: "audit-action" }, el("option", { value: "" }, "Any"),
      Object.entries(actionLabel).map(([k, label]) => el("option", { value: k, selected: params.get("action") === k }, label))),
    since: el("input", { id: "audit-since", type: "date", value: day(params.get("since")) }),
    until: el("input", { id: "audit-until", type: "date", value: day(params.get("until"), true) }),
  };
  const apply = (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const k of ["sale_id", "actor", "action"]) if (f[k].value.trim()) q.set(k, f[k].value.trim());
    if (f.since.value) q.set("since", new Date(`${f.since.value}T00:00:00`).toISOString());
    if (f.until.value) {
      const d = new Date(`${f.until.value}T00:00:00`);
      d.setDate(d.getDate() + 1);
      q.set("until", d.toISOString());
    }
    location.hash = `#/audit?${q}`;
  };
  const newest = new URLSearchParams(filter);
  newest.delete("before_id");
  const more = new URLSearchParams(filter);
  more.set("before_id", a.next_before_id || "");
  const csv = new URLSearchParams(filter);
  csv.set("format", "csv");
  csv.set("limit", "500");
  v.show(el("div", { class: "row", style: "justify-content:space-between" }, el("h1", {}, "Audit log"),
    el("div", { class: "actions" },
      filter.has("before_id") ? el("a", { class: "button small", href: `#/audit?${newest}`, id: "audit-newest" }, "Newest") : null,
      el("a", { class: "button small", href: `/admin/api/audit?${csv}`, download: "seckill-audit.csv", id: "audit-csv" },
        "Export CSV (500 from here)"))),
  el("form", { class: "card filters", id: "audit-filters", onsubmit: apply },
    el("label", {}, "Sale number", f.sale_id), el("label", {}, "Who (email, or operator)", f.actor),
    el("label", {}, "What", f.action), el("label", {}, "From", f.since), el("label", {}, "To", f.until),
    el("div", { class: "row" }, el("button", { class: "small", type: "submit", id: "audit-apply" }, "Filter"),
      filter.toString() ? el("a", { href: "#/audit", class: "muted" }, "Clear") : null)),
  auditList(a.entries, true),
  a.next_before_id ? el("a", { class: "button small", id: "audit-more", href: `#/audit?${more}` }, "Older entries") : null);
}

// merchantsView lets the operator create, disable and enable merchants.
async function merchantsView() {
  const v = pg.begin();
  nav("merchants");
  let list;
  try {
    list = await guard(() => api("GET", "/admin/api/merchants"));
  } catch (e) {
    return v.show(el("p", { class: "result bad" }, e.message));
  }
  if (!list) return;
  const toggle = (m) => el("button", { class: "small", "data-toggle": m.id, onclick: async () => {
    try {
      await guard(() => api("POST", `/admin/api/merchants/${m.id}/${m.disabled ? "enable" : "disable"}`));
      merchantsView();
    } catch (e) { toast(e.message); }
  } }, m.disabled ? "Enable" : "Disable");
  const email = el("input", { id: "m-email", type: "email", required: true, maxlength: "254" });
  const name = el("input", { id: "m-name", required: true, maxlength: "200" });
  const password = el("input", { id: "m-password", type: "password", required: true, minlength: "10", autocomplete: "new-password" });
  const err = el("div", { id: "m-error" });
  // A refusal is shown beside its field.
  const errs = Object.fromEntries(["email", "name", "password"].map((k) =>
    [k, el("span", { class: "err", id: `err-m-${k}`, "aria-live": "polite" })]));
  const create = el("button", { class: "primary", type: "submit", id: "m-create" }, "Create merchant");
  v.show(el("h1", {}, "Merchants"),
    list.merchants.length ? el("div", { class: "table-wrap" }, cards(el("table", { id: "merchants" },
      el("thead", {}, el("tr", {}, ["#", "Merchant", "Status", "Second factor", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, list.merchants.map((m) => el("tr", { "data-merchant": m.id },
        el("td", {}, m.id), el("td", {}, el("strong", {}, userText(m.name)), el("div", { class: "muted" }, userText(m.email))),
        el("td", {}, el("span", { class: `badge ${m.disabled ? Phase.Ended : Phase.Active}` }, m.disabled ? "disabled" : "enabled")),
        el("td", {}, m.totp ? el("span", {}, "enrolled ", el("button", { class: "ghost small", "data-reset": m.id, onclick: async () => {
          if (!confirm(`Remove ${m.email}'s second factor? It logs in with its password alone until it enrols again.`)) return;
          try {
            await guard(() => api("POST", `/admin/api/merchants/${m.id}/totp/reset`));
            merchantsView();
          } catch (e) { toast(e.message); }
        } }, "Reset")) : "—"), el("td", {}, toggle(m))))))))
      : el("p", { class: "empty" }, "No merchants yet."),
    el("h2", {}, "New merchant"),
    el("form", { class: "card sale-form", id: "merchant-form", onsubmit: async (ev) => {
      ev.preventDefault();
      err.replaceChildren();
      clearToasts();
      for (const e of Object.values(errs)) e.textContent = "";
      create.disabled = true;
      try {
        const m = await guard(() => api("POST", "/admin/api/merchants", { email: email.value.trim(), name: name.value.trim(), password: password.value }));
        if (m) { toast(`Merchant ${m.email} created`); merchantsView(); }
      } catch (e) {
        if (e.code === Code.EmailTaken) errs.email.textContent = "A merchant or a shopper already uses this email: choose another.";
        const mine = (e.fields || []).filter((f) => errs[f.field]);
        for (const f of mine) errs[f.field].textContent = f.message;
        if (e.code !== Code.EmailTaken && !mine.length) err.replaceChildren(el("div", { class: "result bad" }, e.message));
      }
      create.disabled = false;
    } },
    el("label", {}, "Email", email, errs.email), el("label", {}, "Name", name, errs.name),
    el("label", {}, "First password (10 characters or more; tell them to keep it safe)", password, errs.password),
    el("div", { class: "full" }, err), el("div", { class: "full" }, create)));
}

// meView enrols a merchant's second factor: the secret for an
// authenticator app, confirmed by a code of it.
async function meView() {
  const v = pg.begin();
  nav("");
  const code = el("input", { id: "totp-code", inputmode: "numeric", maxlength: "6", autocomplete: "one-time-code" });
  const out = el("div", { id: "totp-result" });
  const start = el("button", { class: "primary", id: "totp-start", onclick: async () => {
    try {
      const e = await guard(() => api("POST", "/admin/api/me/totp"));
      if (!e) return;
      out.replaceChildren(el("p", {}, "Add this key to your authenticator app (or open the link on your phone), then type the code it shows:"),
        el("p", { class: "mono", id: "totp-secret" }, e.secret), el("p", {}, el("a", { href: e.otpauth_url }, "otpauth link")),
        el("div", { class: "row" }, code, el("button", { class: "primary", id: "totp-confirm", onclick: async () => {
          try {
            await guard(() => api("POST", "/admin/api/me/totp/confirm", { code: code.value.trim() }));
            out.replaceChildren(el("p", { class: "result ok" }, "Second factor on: log in with a code from now on."));
          } catch (err) { toast(err.message); }
        } }, "Confirm")));
    } catch (e) {
      out.replaceChildren(el("p", { class: "result bad" }, e.message));
    }
  } }, "Set up a second factor");
  v.show(el("h1", {}, "Second factor"), el("div", { class: "card" }, start, out));
}

// balanceView shows an account's balance and its statement: a merchant's
// own; the operator's choice of the platform's (merchant 0: its fees, its
// own sales, the credits it paid) or a merchant's. Beside it a refund of
// an order (a charge in the statement fills it in) and, for the operator,
// a credit to a shopper's wallet.
async function balanceView(merchant) {
  const v = pg.begin();
  nav("balance");
  const of = merchant ? `merchant_id=${merchant}` : "";
  let b, merchants = [];
  try {
    b = await guard(() => api("GET", `/admin/api/balance${of ? `?${of}` : ""}`));
    if (b && me.role === "operator") merchants = ((await guard(() => api("GET", "/admin/api/merchants"))) || { merchants: [] }).merchants;
  } catch (e) {
    return v.show(el("h1", {}, "Balance"), el("p", { class: "result bad" }, e.message));
  }
  if (!b) return;
  setCurrency(b.currency);
  const operator = me.role === "operator";
  const named = merchants.find((m) => m.id === merchant);
  const balance = el("div", { class: "n", id: "balance" }, money(b.balance_cents));
  const behind = el("p", { class: "muted", id: "statement-note", hidden: true }, "Updating: the latest movements are on their way…");
  const refunded = new Set(); // orders the lines shown were refunded: no button on their charge (a refund is newer)
  const st = statement(b.account, async (before) => (await guard(() => api("GET",
    `/admin/api/transfers?limit=20${of ? `&${of}` : ""}${before ? `&before_id=${encodeURIComponent(before)}` : ""}`))) || { transfers: [] },
  (t) => {
    if (t.kind === TransferKind.Refund) refunded.add(t.order_id);
    if (t.kind !== TransferKind.Charge || !t.order_id || refunded.has(t.order_id)) return null;
    return el("button", { class: "small", type: "button", "data-refund": t.order_id, onclick: () => {
      order.value = t.order_id;
      reason.focus();
    } }, "Refund…");
  });
  // The balance read above is the first; the view follows the account
  // from there (common.js keepCurrent).
  let first = b;
  const current = keepCurrent(v, async () => {
    const fresh = first || (await guard(() => api("GET", `/admin/api/balance${of ? `?${of}` : ""}`)));
    first = null;
    if (fresh) {
      b = fresh;
      balance.textContent = money(b.balance_cents);
    }
    return b.balance_cents;
  }, st, behind);

  // Refund an order: the server refuses what it must (another's order, a
  // refund made already, an account that paid the money out), in words.
  const order = el("input", { id: "refund-order", maxlength: "64", autocomplete: "off", spellcheck: "false" });
  const reason = el("input", { id: "refund-reason", maxlength: "200", placeholder: "e.g. damaged in transit" });
  const refundErr = el("p", { class: "err", id: "refund-error", role: "alert" });
  const refundOut = el("div", { id: "refund-result" });
  const refund = el("button", { class: "primary", type: "submit", id: "refund-submit" }, "Refund");
  const refundForm = el("form", { class: "card stack money-form", id: "refund-form", novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    refundErr.textContent = "";
    refundOut.replaceChildren();
    const id = order.value.trim(), why = reason.value.trim();
    if (!id || !why) {
      refundErr.textContent = "Type the order's id and the reason for the refund.";
      return;
    }
    refund.disabled = true;
    try {
      const o = await guard(() => api("POST", `/admin/api/orders/${encodeURIComponent(id)}/refund`, { reason: why }));
      if (o) {
        refundOut.replaceChildren(el("div", { class: "result good" }, "Order ", el("span", { class: "mono" }, o.order_id),
          ` refunded: ${money(o.amount_cents)} went back to the shopper's wallet, and its ${o.qty} unit${o.qty === 1 ? " is" : "s are"} on sale again.`));
        order.value = "";
        reason.value = "";
        current.awaiting((ts) => ts.some((t) => t.kind === TransferKind.Refund && t.order_id === o.order_id));
      }
    } catch (e) {
      refundErr.textContent = errorText(e);
    }
    refund.disabled = false;
  } },
  el("h2", {}, "Refund an order"),
  el("p", { class: "muted", style: "margin:0" }, "The whole payment goes back to the shopper's wallet, from this account and the platform's fee."),
  el("label", {}, "Order id", order), el("label", {}, "Reason (for the audit log)", reason), refundErr, refund, refundOut);

  // The operator's goodwill: from the platform's account to a wallet, once
  // per request id (kept while the same credit is retried).
  let creditForm = null;
  if (operator) {
    const user = el("input", { id: "credit-user", maxlength: "64", autocomplete: "off", spellcheck: "false", placeholder: "the shopper's id, e.g. g_…" });
    const amount = el("input", { id: "credit-amount", inputmode: "decimal", autocomplete: "off", placeholder: `e.g. ${toUnits(500)}` });
    const why = el("input", { id: "credit-reason", maxlength: "200", placeholder: "e.g. late delivery" });
    const err = el("p", { class: "err", id: "credit-error", role: "alert" });
    const out = el("div", { id: "credit-result" });
    const submit = el("button", { class: "primary", type: "submit", id: "credit-submit" }, "Credit");
    let intent = null; // {key, id}
    creditForm = el("form", { class: "card stack money-form", id: "credit-form", novalidate: true, onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = "";
      out.replaceChildren();
      const cents = parseUnits(amount.value);
      if (!user.value.trim() || !why.value.trim() || cents === null || cents < 1) {
        err.textContent = `Type the shopper's id, an amount in ${currentCurrency()} (like ${toUnits(500)}) and a reason.`;
        return;
      }
      const key = [user.value.trim(), cents, why.value.trim()].join("\n");
      if (!intent || intent.key !== key) intent = { key, id: requestID() };
      submit.disabled = true;
      try {
        const t = await guard(() => api("POST", `/admin/api/wallets/${encodeURIComponent(user.value.trim())}/credit`,
          { amount_cents: cents, reason: why.value.trim(), request_id: intent.id }));
        if (t) {
          out.replaceChildren(el("div", { class: "result good" }, `Credited ${money(t.amount_cents)} to `,
            el("span", { class: "mono" }, user.value.trim()), "'s wallet."));
          intent = null;
          user.value = amount.value = why.value = "";
          if (b.account === t.debit) current.awaiting((ts) => ts.some((x) => x.id === t.id));
        }
      } catch (e) {
        err.textContent = errorText(e);
      }
      submit.disabled = false;
    } },
    el("h2", {}, "Credit a wallet"),
    el("p", { class: "muted", style: "margin:0" }, "Goodwill from the platform's account to a shopper's wallet (the shopper's id is on their wallet page)."),
    el("label", {}, "Shopper id", user), el("label", {}, `Amount (${currentCurrency()})`, amount), el("label", {}, "Reason (for the audit log)", why),
    err, submit, out);
  }

  // A merchant's payout to its bank, once per request id (kept while the
  // same payout is retried: one the provider could not take yet is tried
  // again, never sent twice).
  let payoutForm = null;
  if (me.role === "merchant") {
    const amount = el("input", { id: "payout-amount", inputmode: "decimal", autocomplete: "off", placeholder: `e.g. ${toUnits(10000)}` });
    const code = el("input", { id: "payout-code", inputmode: "numeric", maxlength: "6", autocomplete: "one-time-code" });
    const err = el("p", { class: "err", id: "payout-error", role: "alert" });
    const out = el("div", { id: "payout-result" });
    const submit = el("button", { class: "primary", type: "submit", id: "payout-submit" }, "Pay out");
    let intent = null; // {cents, id}
    payoutForm = el("form", { class: "card stack money-form", id: "payout-form", novalidate: true, onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = "";
      out.replaceChildren();
      const cents = parseUnits(amount.value);
      if (cents === null || cents < 1) {
        err.textContent = `Type an amount in ${currentCurrency()}, like ${toUnits(10000)}.`;
        return;
      }
      if (!intent || intent.cents !== cents) intent = { cents, id: requestID() };
      submit.disabled = true;
      try {
        const p = await guard(() => api("POST", "/admin/api/payouts", { amount_cents: cents, request_id: intent.id, totp: code.value.trim() }));
        if (p) {
          out.replaceChildren(p.status === PayoutStatus.Failed
            ? el("div", { class: "result bad" }, `The provider refused the payout of ${money(p.amount_cents)}: the money is back in your account.`)
            : el("div", { class: "result good" }, `${money(p.amount_cents)} is on its way to your bank.`));
          intent = null;
          amount.value = code.value = "";
          current.awaiting((ts) => ts.some((x) => x.payout_id === p.payout_id));
        }
      } catch (e) {
        err.textContent = errorText(e);
      }
      submit.disabled = false;
    } },
    el("h2", {}, "Pay out"),
    el("p", { class: "muted", style: "margin:0" }, "From this account to your bank, through the payment provider."),
    el("label", {}, `Amount (${currentCurrency()})`, amount),
    el("label", {}, "Authenticator code (if you set one up)", code),
    err, submit, out);
  }

  const whose = operator ? el("select", { id: "balance-of", "aria-label": "Whose account", onchange: (ev) => {
    location.hash = ev.target.value === "0" ? "#/balance" : `#/balance/${ev.target.value}`;
  } }, el("option", { value: "0", selected: !merchant }, "The platform"),
  merchants.map((m) => el("option", { value: String(m.id), selected: m.id === merchant }, `${m.name} (${m.email})`))) : null;
  const title = !operator ? "Your account" : merchant ? (named ? userText(named.name) : `Merchant ${merchant}`) : "The platform's account";
  v.show(el("div", { class: "row", style: "justify-content:space-between" }, el("h1", {}, "Balance"), whose),
    el("div", { class: "money-top" },
      el("section", { class: "card balance" }, el("div", { class: "l" }, title), balance,
        el("p", { class: "muted small" }, "Account ", el("span", { class: "mono", id: "balance-account" }, b.account)),
        el("p", { class: "muted small" }, operator && !merchant
          ? "Platform fees and the operator's own sales come in; goodwill credits go out (it may go below zero)."
          : "Paid orders come in, less the platform's fee; refunds and payouts go out.")),
      payoutForm, refundForm, creditForm),
    el("h2", {}, "Statement"), behind, st.box);
}

function route() {
  const h = location.hash.replace(/^#/, "") || "/";
  let m;
  if ((m = h.match(/^\/audit(?:\?(.*))?$/))) return auditView(m[1]);
  if (h === "/merchants") return merchantsView();
  if (h === "/me") return meView();
  if (h === "/balance") return balanceView(0);
  if ((m = h.match(/^\/balance\/(\d+)$/))) return balanceView(Number(m[1]));
  if (h === "/new") return formView(null);
  if ((m = h.match(/^\/sales\/(\d+)\/edit$/))) return formView(Number(m[1]));
  if ((m = h.match(/^\/sales\/(\d+)$/))) return dashboardView(Number(m[1]));
  return salesView();
}

addEventListener("hashchange", route);
(async () => {
  if (await whoAmI()) route(); else loginView();
})();
