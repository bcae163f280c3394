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
  setCurrency, currentCurrency, toUnits, parseUnits, requestID, statement, keepCurrent, cards, sendFile,
  loadLanguage, t, tx, number, currentLang,
} from "./common.js";
import { Code, Phase, TransferKind, PayoutStatus } from "./codes.js";

const pg = page($("#app"));

// clearToasts removes what toasts still show: they told of an earlier
// action.
function clearToasts() {
  for (const old of document.querySelectorAll(".toast")) old.remove();
}

function toast(msg) {
  clearToasts(); // the newest word replaces an older one still showing
  const box = el("div", { class: "toast", role: "status" }, msg);
  document.body.append(box);
  setTimeout(() => box.remove(), 3000);
}

let me = null; // GET /admin/api/session: {role, actor, merchant_id?}

function signedIn(session) {
  me = session && session.signed_in ? session : null;
  // Logged out, the panel is its login page and nothing else.
  $("#admin-nav").hidden = !me;
  $("#nav-merchants").hidden = !me || me.role !== "operator";
  if (!me) return $("#who").replaceChildren();
  $("#who").replaceChildren(...[
    el("span", { class: "hide-narrow muted-light" }, me.role === "operator" ? t("admin.who.operator") : userText(me.actor)),
    me.role === "merchant" ? el("a", { class: "button ghost small", href: "#/me", id: "second-factor" }, t("admin.who.twoFactor")) : null,
    el("button", { class: "ghost small", id: "logout", onclick: logout }, t("admin.who.logout")),
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
      loginView(loadDraft() ? "kept" : wasIn ? "expired" : "");
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

// loginView is the panel's login; ended says why it shows: "expired" (the
// session ended) or "kept" (and a form's input waits for the login).
function loginView(ended = "") {
  const v = pg.begin();
  nav("");
  const email = el("input", { type: "email", id: "email", autocomplete: "username", maxlength: "254" });
  const pw = el("input", { type: "password", id: "password", autocomplete: "current-password", required: true });
  const code = el("input", { id: "totp", inputmode: "numeric", autocomplete: "one-time-code", maxlength: "6", pattern: "[0-9]{6}" });
  const err = el("span", { class: "err", id: "login-error" });
  const submit = el("button", { class: "primary", type: "submit", id: "login" }, t("admin.login.submit"));
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
  el("h1", {}, t("admin.login.title")),
  ended ? el("p", { class: "result warn", id: "session-ended", role: "status" },
    ended === "kept" ? t("admin.login.endedKept") : t("admin.login.ended")) : null,
  el("label", {}, t("admin.login.email"), email),
  el("label", {}, t("admin.login.password"), pw),
  el("label", {}, t("admin.login.code"), code),
  err,
  submit));
  email.focus();
}

// What an action's toast says once it is done (its catalogue key).
const actionDone = { pause: "admin.toast.paused", resume: "admin.toast.resumed", end: "admin.toast.ended", restock: "admin.toast.restocked" };

async function act(id, action, body) {
  try {
    const s = await guard(() => api("POST", `/admin/api/sales/${id}/${action}`, body));
    if (s) toast(t(actionDone[action]));
    return s;
  } catch (e) {
    toast(e.message);
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
    sale.status === Phase.Active || sale.status === Phase.Scheduled || sale.status === Phase.SoldOut ? button(t("admin.controls.pause"), "pause") : null,
    sale.status === Phase.Paused ? button(t("admin.controls.resume"), "resume") : null,
    open ? button(t("admin.controls.end"), "end", confirmEnd) : null,
    open ? el("span", { class: "row" }, el("label", { class: "inline", for: qty.id }, t("admin.controls.unitsToAdd")), qty,
      button(t("admin.controls.restock"), "restock", () => run("restock", { qty: Number(qty.value) }))) : null,
    open ? null : el("span", { class: "muted" }, t("admin.controls.ended")),
  ].filter(Boolean));
  const confirmEnd = () => {
    const yes = button(t("admin.controls.endConfirm"), "end-confirmed", () => run("end"), "small danger");
    box.replaceChildren(el("div", { class: "result warn", role: "alertdialog", id: "confirm-end",
      "aria-labelledby": "confirm-end-title", "aria-describedby": "confirm-end-detail" },
    el("div", { class: "title", id: "confirm-end-title" }, t("admin.controls.endTitle")),
    el("div", { class: "detail", id: "confirm-end-detail" }, t("admin.controls.endDetail")),
    el("div", { class: "row", style: "margin-top:.5rem" }, yes, button(t("admin.controls.keepRunning"), "end-cancel", draw))));
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
      me && me.role === "operator" && s.merchant_id ? el("div", { class: "muted small" }, t("admin.sales.merchant", { id: s.merchant_id })) : null),
    el("td", {}, money(s.price_cents)),
    el("td", { class: "muted" }, localTime(s.starts_at), el("br"), localTime(s.ends_at)),
    el("td", {}, el("div", { class: "actions" },
      el("a", { class: "button small", href: `#/sales/${s.id}` }, t("admin.sales.dashboard")),
      s.status !== Phase.Ended ? el("a", { class: "button small", href: `#/sales/${s.id}/edit` }, t("admin.common.edit")) : null))));
  v.show(
    el("div", { class: "row", style: "justify-content:space-between" }, el("h1", {}, me && me.role === "merchant" ? t("admin.sales.titleMine") : t("admin.sales.title")),
      el("a", { class: "button primary", href: "#/new", id: "new-sale" }, t("admin.sales.new"))),
    sales.length ? el("div", { class: "table-wrap" }, cards(el("table", { id: "sales" },
      el("thead", {}, el("tr", {}, ["#", t("admin.sales.col.sale"), t("admin.sales.col.status"), t("admin.sales.col.sold"), t("admin.sales.col.price"),
        t("admin.sales.col.window"), ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows))))
      : el("p", { class: "empty" }, t("admin.sales.empty")));
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
  return msg.replace(/\d{4,}/g, (n) => field === "price_cents" ? money(Number(n)) : number(n));
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
    setCurrency(sale.currency); // its price is typed in the sale's currency
  }
  const start = new Date(serverNow() + 60_000);
  const started = !!sale && serverNow() >= Date.parse(sale.starts_at);
  // Each field: its label, its input's attributes, and where it goes:
  // the main part, the waiting room's (shown while the room is on), or
  // "Advanced". price_cents is typed in the currency's units.
  const fields = {
    name: [t("admin.form.name"), { value: sale ? sale.name : "", maxlength: "200" }],
    item: [t("admin.form.item"), { value: sale ? sale.item : "", maxlength: "200" }],
    description: [t("admin.form.description"), { tag: "textarea", rows: "3", maxlength: "2000", value: sale ? sale.description : "",
      "data-may-be-empty": "1" }],
    price_cents: [t("admin.form.price", { currency: currentCurrency() }), { inputmode: "decimal", autocomplete: "off", placeholder: toUnits(1999),
      value: sale ? toUnits(sale.price_cents) : "", "data-money": "1" }],
    total: [t("admin.form.total"), { type: "number", min: "1", step: "1", value: sale ? sale.total : "", disabled: !!sale }],
    per_user_limit: [t("admin.form.perUserLimit"), { type: "number", min: "1", step: "1", value: sale ? sale.per_user_limit : "1" }],
    starts_at: [t("admin.form.startsAt"), { type: "datetime-local", step: "1", value: toLocalInput(sale ? sale.starts_at : start.toISOString()) }],
    ends_at: [t("admin.form.endsAt"), { type: "datetime-local", step: "1", value: toLocalInput(sale ? sale.ends_at : new Date(start.getTime() + 3600_000).toISOString()) }],
    verified_only: [t("admin.form.verifiedOnly"),
      { type: "checkbox", checked: !!(sale && sale.verified_only) }],
    // Chosen at creation: buys charge the wallet, orders are born paid.
    instant_checkout: [t("admin.form.instantCheckout"),
      { type: "checkbox", checked: !!(sale && sale.instant_checkout), disabled: !!sale }],
    // The room is set up before the start; its rate may change any time.
    waiting_room: [t("admin.form.waitingRoom"),
      { type: "checkbox", checked: !!(sale && sale.waiting_room), disabled: started }],
    queue_opens_at: [t("admin.form.queueOpensAt"),
      { type: "datetime-local", step: "1", value: sale ? toLocalInput(sale.queue_opens_at) : "", disabled: started, "data-optional": "1",
        "data-initial": sale ? toLocalInput(sale.queue_opens_at) : "", "data-group": "room" }],
    admit_per_second: [t("admin.form.admitPerSecond"),
      { type: "number", min: "1", max: "100000", step: "1", value: sale ? sale.admit_per_second : "100", "data-group": "room" }],
    buckets: [t("admin.form.buckets"),
      { type: "number", min: "1", max: "64", step: "1", value: sale ? sale.buckets : "1", disabled: !!sale, "data-group": "advanced" }],
    require_ticket: [t("admin.form.requireTicket"),
      { type: "checkbox", checked: !!(sale && sale.require_ticket), "data-group": "advanced" }],
    pow_difficulty: [t("admin.form.powDifficulty"),
      { type: "number", min: "0", max: "32", step: "1", value: sale ? sale.pow_difficulty : "0", "data-group": "advanced" }],
  };
  const inputs = {}, errs = {};
  const groups = { main: [], room: [], advanced: [] };
  for (const [k, [label, { tag = "input", value, ...attrs }]] of Object.entries(fields)) {
    inputs[k] = el(tag, { id: `f-${k}`, name: k, ...attrs, "aria-describedby": `err-${k}` });
    inputs[k].value = value ?? ""; // a textarea's value is no attribute
    errs[k] = el("span", { class: "err", id: `err-${k}`, "aria-live": "polite" });
    groups[attrs["data-group"] || "main"].push(attrs.type === "checkbox"
      ? el("label", { class: "check" }, inputs[k], label, errs[k])
      : el("label", { class: ["name", "item", "description"].includes(k) ? "full" : null }, label, inputs[k], errs[k]));
  }
  // The product image: chosen here, sent once the sale is saved (PUT
  // …/image: the server checks it and stores it re-encoded); the current
  // one shown, with a way to remove it.
  const image = el("input", { type: "file", id: "f-image", accept: "image/jpeg,image/png,image/webp", "aria-describedby": "err-image" });
  const imageErr = el("span", { class: "err", id: "err-image", "aria-live": "polite" });
  const preview = el("div", { class: "row", id: "image-preview" });
  const showPreview = (url) => preview.replaceChildren(...(url ? [
    el("img", { class: "thumb", src: url, alt: t("admin.form.imageAlt") }),
    el("button", { type: "button", class: "small ghost-dark", id: "image-remove", onclick: async () => {
      try {
        const s2 = await guard(() => api("DELETE", `/admin/api/sales/${sale.id}/image`));
        if (s2) { toast(t("admin.toast.imageRemoved")); showPreview(""); }
      } catch (e) { imageErr.textContent = e.message; }
    } }, t("admin.form.imageRemove")),
  ] : []));
  showPreview(sale ? sale.image_url : "");
  groups.main.push(el("label", { class: "full" }, t("admin.form.image"), preview, image,
    el("span", { class: "muted small" }, t("admin.form.imageHint")), imageErr));
  // The operator names whose sale it is (a merchant's are its own).
  if (me && me.role === "operator") {
    let list = { merchants: [] };
    try { list = (await guard(() => api("GET", "/admin/api/merchants"))) || list; } catch (e) { /* the operator's then */ }
    const current = sale ? sale.merchant_id : 0;
    inputs.merchant_id = el("select", { id: "f-merchant_id", name: "merchant_id", "aria-describedby": "err-merchant_id" },
      el("option", { value: "0", selected: current === 0 }, t("admin.form.merchantOperator")),
      list.merchants.map((m) => el("option", { value: String(m.id), selected: current === m.id }, t("admin.common.merchantOption", { name: m.name, email: m.email }))));
    errs.merchant_id = el("span", { class: "err", id: "err-merchant_id" });
    groups.main.push(el("label", {}, t("admin.form.merchant"), inputs.merchant_id, errs.merchant_id));
  }
  // What a proof of work costs each shopper (and each bot account).
  const cost = el("span", { class: "muted", id: "pow-cost" });
  const showCost = () => { cost.textContent = powCost(Number(inputs.pow_difficulty.value)); };
  inputs.pow_difficulty.addEventListener("input", showCost);
  showCost();
  errs.pow_difficulty.before(cost);
  // The room's settings show while the room is on.
  const room = el("fieldset", { class: "full sub", id: "room-fields" }, el("legend", {}, t("admin.form.roomLegend")), groups.room);
  const showRoom = () => { room.hidden = !inputs.waiting_room.checked; };
  inputs.waiting_room.addEventListener("change", showRoom);
  const advanced = el("details", { class: "full sub", id: "advanced" }, el("summary", {}, t("admin.form.advanced")),
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
  const submit = el("button", { class: "primary", type: "submit", id: "save" }, sale ? t("admin.form.save") : t("admin.form.create"));
  const fail = (k, msg) => {
    errs[k].textContent = msg;
    inputs[k].classList.add("invalid");
    inputs[k].setAttribute("aria-invalid", "true");
  };
  // uploadImage sends the chosen image for saved; false (the refusal shown
  // beside the field) when it was refused.
  const uploadImage = async (saved) => {
    imageErr.textContent = "";
    try {
      const s2 = await guard(() => sendFile("PUT", `/admin/api/sales/${saved.id}/image`, image.files[0]));
      if (!s2) return false;
      showPreview(s2.image_url);
      image.value = "";
      return true;
    } catch (e) {
      const f = (e.fields || []).find((x) => x.field === "image");
      imageErr.textContent = t("admin.form.imageRefused", { reason: f ? f.message : e.message });
      image.focus();
      return false;
    }
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
        if (v === "") fail(k, t("admin.form.err.required"));
        else if (n === null) fail(k, t("admin.form.err.price", { example: toUnits(1999) }));
        else body[k] = n;
      } else if (input.type === "number") {
        if (v === "") fail(k, t("admin.form.err.required"));
        else if (!Number.isInteger(Number(v))) fail(k, t("admin.form.err.whole"));
        else body[k] = Number(v);
      } else if (input.type === "datetime-local") {
        // Left as it was, the room's opening moves with the start. Compared
        // as times: the browser writes a whole minute without its ":00".
        const d = new Date(v);
        if (input.dataset.optional && (v === input.dataset.initial || d.getTime() === new Date(input.dataset.initial).getTime())) continue;
        if (!v || Number.isNaN(d.getTime())) fail(k, t("admin.form.err.dateTime"));
        else body[k] = d.toISOString();
      } else if (v === "" && !input.dataset.mayBeEmpty) {
        fail(k, t("admin.form.err.required"));
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
        const created = !sale;
        sale = saved;
        if (image.files[0] && !(await uploadImage(saved))) {
          // Saved, but its image was refused: the form stays, now the
          // sale's edit form, to choose another.
          if (created) history.replaceState(null, "", `#/sales/${saved.id}/edit`);
          submit.textContent = t("admin.form.save");
          submit.disabled = false;
          return;
        }
        toast(created ? t("admin.toast.created", { id: saved.id }) : t("admin.toast.saved"));
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
  v.show(el("h1", {}, sale ? t("admin.form.titleEdit", { id: sale.id }) : t("admin.form.titleNew")),
    kept ? el("p", { class: "result warn", id: "draft-kept" }, t("admin.form.draftKept")) : null,
    el("form", { class: "card sale-form", id: "sale-form", onsubmit, novalidate: true }, groups.main, room, advanced,
      el("div", { class: "full" }, formErr),
      el("div", { class: "full row" }, submit, el("a", { href: sale ? `#/sales/${sale.id}` : "#/", class: "muted" }, t("admin.form.cancel")))));
  inputs.name.focus();
}

// powCost tells what a proof of work of n bits costs a solver: 2^n
// hashes expected, and the time at the rate the browser test measured in
// headless Chromium on a shared 2-core machine (docs/guide.md, bot defence).
const browserHashesPerSecond = 130_000;
function powCost(n) {
  if (!Number.isInteger(n) || n <= 0) return t("admin.form.pow.off");
  const hashes = 2 ** n;
  const s = hashes / browserHashesPerSecond;
  const time = s < 1 ? t("admin.form.pow.ms", { count: Math.max(1, Math.round(s * 1000)) })
    : s < 120 ? t("admin.form.pow.s", { count: Math.round(s) })
    : s < 7200 ? t("admin.form.pow.min", { count: Math.round(s / 60) }) : t("admin.form.pow.h", { count: Math.round(s / 3600) });
  return t("admin.form.pow.cost", { hashes: number(hashes), time });
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
  g.textAlign = "right"; // as long as the language's words make it
  g.fillText(t("admin.chart.since", { time: new Date(t0).toLocaleTimeString(currentLang()) }), w - 4, h - 4);
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
  const rate = (key, label) => el("div", { class: "card stat" }, rates[key] = el("div", { class: "n", id: `rate-${key}` }, "0"), el("div", { class: "l" }, t("admin.dashboard.perSecond", { label })));
  const badge = el("span", { class: "badge", id: "status" });
  const when = el("span", { class: "muted", id: "when" });
  const canvas = el("canvas", { class: "chart", id: "chart" });
  const ctl = el("div", {});
  // Shown only while the dead-letter queue holds messages.
  const dead = el("p", { class: "result warn", id: "dead-letters", hidden: true });
  const capped = el("div", { id: "first-capped" });
  // The waiting room's figures, for a sale with one.
  const roomBox = el("div", { id: "room-stats", hidden: true }, el("h2", {}, t("admin.dashboard.room")),
    el("div", { class: "stats" }, stat("queue_size", t("admin.dashboard.stat.queueSize")), stat("queue_admitted", t("admin.dashboard.stat.queueAdmitted")),
      stat("queue_early", t("admin.dashboard.stat.queueEarly")), stat("queue_passes", t("admin.dashboard.stat.queuePasses")),
      stat("queue_rate", t("admin.dashboard.stat.queueRate"))));
  const timeline = el("div", { id: "timeline" }, el("span", { class: "muted" }, t("admin.loading")));
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
    // An instant checkout's accepted buys are its charges.
    Object.assign(shown, { charged: stats.outcomes[Code.OK] || 0, refused_funds: stats.outcomes[Code.InsufficientFunds] || 0 });
    const q = stats.queue;
    if (q) Object.assign(shown, { queue_size: q.size, queue_admitted: q.admitted, queue_early: q.joined_before_start,
      queue_passes: q.passes_used, queue_rate: `${admitRate} / ${q.admit_per_second}` });
    roomBox.hidden = !q;
    for (const [k, cell] of Object.entries(cells)) if (k in shown) cell.textContent = shown[k];
    const first = d.first_capped || [];
    capped.replaceChildren(first.length ? el("ol", { class: "capped" }, first.map((c) =>
      el("li", {}, el("span", { class: "mono" }, c.user_id), " ", el("span", { class: "muted" }, localTime(c.at)))))
      : el("span", { class: "muted" }, t("admin.dashboard.cappedNobody")));
    dead.hidden = !(stats.dead_letters > 0);
    dead.textContent = t("admin.dashboard.dead", { n: stats.dead_letters, cmd: "seckill deadletters list" });
    const now = serverNow();
    const ends = Date.parse(sale.ends_at);
    const endedAt = t("admin.dashboard.when.ended", { time: localTime(sale.ends_at) });
    when.textContent = stats.status === Phase.Ended ? (now < ends ? t("admin.dashboard.when.endedEarly") : endedAt)
      : now < Date.parse(sale.starts_at) ? t("admin.dashboard.when.startsIn", { time: duration(Date.parse(sale.starts_at) - now) })
        : now < ends ? t("admin.dashboard.when.endsIn", { time: duration(ends - now) }) : endedAt;
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
        el("div", { class: "row" }, badge, when, el("span", { class: "muted" }, userText(sale.item), [
          money(sale.price_cents),
          t("admin.dashboard.info.limit", { limit: sale.per_user_limit }),
          sale.buckets > 1 ? t("admin.dashboard.info.buckets", { n: sale.buckets }) : null,
          sale.require_ticket ? (sale.pow_difficulty ? t("admin.dashboard.info.ticketsPow", { n: sale.pow_difficulty })
            : t("admin.dashboard.info.tickets")) : null,
          sale.verified_only ? t("admin.dashboard.info.verifiedOnly") : null,
          sale.instant_checkout ? t("admin.dashboard.info.instant") : null,
          sale.waiting_room ? t("admin.dashboard.info.room", { rate: sale.admit_per_second }) : null,
        ].filter(Boolean).map((part) => ` · ${part}`).join("")))),
      el("div", { class: "actions" }, el("a", { class: "button small", href: `#/sales/${id}/edit` }, t("admin.common.edit")),
        el("a", { class: "button small", href: `/#/sales/${id}`, target: "_blank" }, t("admin.dashboard.shopperPage")))),
    dead,
    el("h2", {}, t("admin.dashboard.stock")),
    el("div", { class: "stats" }, stat("sold", t("admin.dashboard.stat.sold")), stat("remaining", t("admin.dashboard.stat.remaining")),
      stat("orders_persisted", t("admin.dashboard.stat.ordersPersisted")), stat("orders_pending", t("admin.dashboard.stat.ordersPending")),
      stat("orders_paid", t("admin.dashboard.stat.ordersPaid")), stat("orders_cancelled", t("admin.dashboard.stat.ordersCancelled"))),
    sale.instant_checkout ? el("div", { class: "stats", id: "instant-stats" }, stat("charged", t("admin.dashboard.stat.charged")),
      stat("refused_funds", t("admin.dashboard.stat.refusedFunds"))) : null,
    el("h2", {}, t("admin.dashboard.outcomes")),
    el("div", { class: "stats" }, rate(Code.OK, t("admin.dashboard.rate.ok")), rate(Code.SoldOut, t("admin.dashboard.rate.soldOut")),
      rate(Code.LimitExceeded, t("admin.dashboard.rate.limit")), rate(Code.RateLimited, t("admin.dashboard.rate.rateLimited"))),
    roomBox,
    el("h2", {}, t("admin.dashboard.defence")),
    el("div", { class: "stats" }, stat("ticket_refusals", t("admin.dashboard.stat.ticketRefusals")),
      stat("challenges", t("admin.dashboard.stat.challenges")), stat("tickets_issued", t("admin.dashboard.stat.ticketsIssued")),
      stat("bad_proofs", t("admin.dashboard.stat.badProofs"))),
    el("div", { class: "card", style: "margin-top:.6rem" }, el("div", { class: "l" }, t("admin.dashboard.capped")),
      capped),
    el("h2", {}, t("admin.dashboard.progress")),
    el("div", { class: "card" }, canvas,
      el("div", { class: "muted" }, el("span", {}, el("span", { style: "color:#e0312f", "aria-hidden": "true" }, "■"), " ", t("admin.dashboard.legend.sold")), "  ",
        el("span", {}, el("span", { style: "color:#9aa3b2", "aria-hidden": "true" }, "■"), " ", t("admin.dashboard.legend.remaining")))),
    el("h2", {}, t("admin.dashboard.controls")),
    el("div", { class: "card" }, ctl),
    el("h2", {}, t("admin.dashboard.history")),
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

// The audit log's words: what each action is (admin.audit.action.<action>),
// each field's label (admin.audit.field.<field>) and each role's
// (admin.audit.role.<role>); one the catalogue lacks shows as it is.
const auditActions = [
  "sale.create", "sale.patch", "sale.image", "sale.restock", "sale.pause", "sale.resume", "sale.end", "login", "login.failed",
  "merchant.create", "merchant.disable", "merchant.enable", "merchant.payout_account", "order.refund", "payout.create",
  "wallet.credit", "totp.enrol", "totp.reset",
];
const known = (prefix, name) => {
  if (name === undefined || name === null || name === "") return name;
  const key = prefix + name;
  const s = t(key);
  return s === key ? String(name) : s;
};
const actionLabel = (action) => known("admin.audit.action.", action);
const fieldLabel = (field) => known("admin.audit.field.", field);
const roleLabel = (role) => known("admin.audit.role.", role);
// A new sale's row holds every field: these say nothing when off.
const quietWhenOff = (k, v, after) => (v === 0 || v === false || v === "") || (k === "buckets" && v === 1) ||
  (k === "queue_opens_at" && after && !after.waiting_room) || (k === "admit_per_second" && after && !after.waiting_room);

// fieldValue shows an audited value as the panel shows it elsewhere.
function fieldValue(k, v) {
  if (typeof v === "boolean") return v ? t("admin.audit.on") : t("admin.audit.off");
  if (k === "price_cents" || k === "amount_cents") return money(v);
  if (k === "status") return statusLabel[v] || v;
  if (k === "merchant_id") return v ? t("admin.audit.merchant", { id: v }) : t("admin.audit.operator");
  if (k === "image_etag") return v ? t("admin.audit.image", { id: v.slice(0, 8) }) : t("admin.audit.noImage");
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
  return el("ul", { class: "changes" }, keys.map((k) => el("li", {}, el("span", { class: "muted" }, t("admin.audit.fieldName", { field: fieldLabel(k) })),
    k in before ? [el("s", {}, userText(fieldValue(k, before[k]))), " → "] : null,
    k in after ? el("strong", {}, userText(fieldValue(k, after[k]))) : t("admin.audit.removed"))));
}

// auditList shows audit rows: when (in the reader's time), who, what, and
// the fields that changed.
function auditList(rows, withSale) {
  if (!rows.length) return el("p", { class: "muted", id: "audit-empty" }, t("admin.audit.empty"));
  return el("div", { class: "table-wrap" }, cards(el("table", { class: "audit" },
    el("thead", {}, el("tr", {}, [t("admin.audit.col.when"), t("admin.audit.col.who"), t("admin.audit.col.what"), ...(withSale ? [t("admin.audit.col.sale")] : []),
      t("admin.audit.col.changes"), t("admin.audit.col.from")].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", { "data-audit": r.id },
      el("td", { class: "muted" }, localTime(r.at)), el("td", {}, userText(r.actor), el("div", { class: "muted small" }, roleLabel(r.role))),
      el("td", { title: r.action }, actionLabel(r.action)),
      ...(withSale ? [el("td", {}, r.sale_id ? el("a", { href: `#/sales/${r.sale_id}` }, t("admin.audit.saleLink", { id: r.sale_id })) : "")] : []),
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
    return v.show(el("h1", {}, t("admin.audit.title")), el("p", { class: "result bad", id: "audit-error" }, e.message),
      el("a", { class: "button small", href: "#/audit" }, t("admin.audit.showAll")));
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
    action: el("select", { id: "audit-action" }, el("option", { value: "" }, t("admin.audit.filter.any")),
      auditActions.map((k) => el("option", { value: k, selected: params.get("action") === k }, actionLabel(k)))),
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
  v.show(el("div", { class: "row", style: "justify-content:space-between" }, el("h1", {}, t("admin.audit.title")),
    el("div", { class: "actions" },
      filter.has("before_id") ? el("a", { class: "button small", href: `#/audit?${newest}`, id: "audit-newest" }, t("admin.audit.newest")) : null,
      el("a", { class: "button small", href: `/admin/api/audit?${csv}`, download: "seckill-audit.csv", id: "audit-csv" },
        t("admin.audit.csv", { limit: csv.get("limit") })))),
  el("form", { class: "card filters", id: "audit-filters", onsubmit: apply },
    el("label", {}, t("admin.audit.filter.sale"), f.sale_id), el("label", {}, t("admin.audit.filter.actor"), f.actor),
    el("label", {}, t("admin.audit.filter.action"), f.action), el("label", {}, t("admin.audit.filter.since"), f.since),
    el("label", {}, t("admin.audit.filter.until"), f.until),
    el("div", { class: "row" }, el("button", { class: "small", type: "submit", id: "audit-apply" }, t("admin.audit.filter.apply")),
      filter.toString() ? el("a", { href: "#/audit", class: "muted" }, t("admin.audit.filter.clear")) : null)),
  auditList(a.entries, true),
  a.next_before_id ? el("a", { class: "button small", id: "audit-more", href: `#/audit?${more}` }, t("admin.audit.older")) : null);
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
  } }, m.disabled ? t("admin.merchants.enable") : t("admin.merchants.disable"));
  const email = el("input", { id: "m-email", type: "email", required: true, maxlength: "254" });
  const name = el("input", { id: "m-name", required: true, maxlength: "200" });
  const password = el("input", { id: "m-password", type: "password", required: true, minlength: "10", autocomplete: "new-password" });
  const err = el("div", { id: "m-error" });
  // A refusal is shown beside its field.
  const errs = Object.fromEntries(["email", "name", "password"].map((k) =>
    [k, el("span", { class: "err", id: `err-m-${k}`, "aria-live": "polite" })]));
  const create = el("button", { class: "primary", type: "submit", id: "m-create" }, t("admin.merchants.create"));
  v.show(el("h1", {}, t("admin.merchants.title")),
    list.merchants.length ? el("div", { class: "table-wrap" }, cards(el("table", { id: "merchants" },
      el("thead", {}, el("tr", {}, ["#", t("admin.merchants.col.merchant"), t("admin.merchants.col.status"), t("admin.merchants.col.totp"), ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, list.merchants.map((m) => el("tr", { "data-merchant": m.id },
        el("td", {}, m.id), el("td", {}, el("strong", {}, userText(m.name)), el("div", { class: "muted" }, userText(m.email))),
        el("td", {}, el("span", { class: `badge ${m.disabled ? Phase.Ended : Phase.Active}` }, m.disabled ? t("admin.merchants.disabled") : t("admin.merchants.enabled"))),
        el("td", {}, m.totp ? el("span", {}, t("admin.merchants.enrolled"), " ", el("button", { class: "ghost small", "data-reset": m.id, onclick: async () => {
          if (!confirm(t("admin.merchants.resetConfirm", { email: m.email }))) return;
          try {
            await guard(() => api("POST", `/admin/api/merchants/${m.id}/totp/reset`));
            merchantsView();
          } catch (e) { toast(e.message); }
        } }, t("admin.merchants.reset"))) : "—"), el("td", {}, toggle(m))))))))
      : el("p", { class: "empty" }, t("admin.merchants.empty")),
    el("h2", {}, t("admin.merchants.new")),
    el("form", { class: "card sale-form", id: "merchant-form", onsubmit: async (ev) => {
      ev.preventDefault();
      err.replaceChildren();
      clearToasts();
      for (const e of Object.values(errs)) e.textContent = "";
      create.disabled = true;
      try {
        const m = await guard(() => api("POST", "/admin/api/merchants", { email: email.value.trim(), name: name.value.trim(), password: password.value }));
        if (m) { toast(t("admin.toast.merchantCreated", { email: m.email })); merchantsView(); }
      } catch (e) {
        if (e.code === Code.EmailTaken) errs.email.textContent = t("admin.merchants.emailTaken");
        const mine = (e.fields || []).filter((f) => errs[f.field]);
        for (const f of mine) errs[f.field].textContent = f.message;
        if (e.code !== Code.EmailTaken && !mine.length) err.replaceChildren(el("div", { class: "result bad" }, e.message));
      }
      create.disabled = false;
    } },
    el("label", {}, t("admin.merchants.email"), email, errs.email), el("label", {}, t("admin.merchants.name"), name, errs.name),
    el("label", {}, t("admin.merchants.password"), password, errs.password),
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
      out.replaceChildren(el("p", {}, t("admin.totp.instructions")),
        el("p", { class: "mono", id: "totp-secret" }, e.secret), el("p", {}, el("a", { href: e.otpauth_url }, t("admin.totp.link"))),
        el("div", { class: "row" }, code, el("button", { class: "primary", id: "totp-confirm", onclick: async () => {
          try {
            await guard(() => api("POST", "/admin/api/me/totp/confirm", { code: code.value.trim() }));
            out.replaceChildren(el("p", { class: "result ok" }, t("admin.totp.done")));
          } catch (err) { toast(err.message); }
        } }, t("admin.totp.confirm"))));
    } catch (e) {
      out.replaceChildren(el("p", { class: "result bad" }, e.message));
    }
  } }, t("admin.totp.start"));
  v.show(el("h1", {}, t("admin.totp.title")), el("div", { class: "card" }, start, out));
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
    return v.show(el("h1", {}, t("admin.balance.title")), el("p", { class: "result bad" }, e.message));
  }
  if (!b) return;
  setCurrency(b.currency);
  const operator = me.role === "operator";
  const named = merchants.find((m) => m.id === merchant);
  const balance = el("div", { class: "n", id: "balance" }, money(b.balance_cents));
  const behind = el("p", { class: "muted", id: "statement-note", hidden: true }, t("admin.balance.updating"));
  const refunded = new Set(); // orders the lines shown were refunded: no button on their charge (a refund is newer)
  const st = statement(b.account, async (before) => (await guard(() => api("GET",
    `/admin/api/transfers?limit=20${of ? `&${of}` : ""}${before ? `&before_id=${encodeURIComponent(before)}` : ""}`))) || { transfers: [] },
  (line) => {
    if (line.kind === TransferKind.Refund) refunded.add(line.order_id);
    if (line.kind !== TransferKind.Charge || !line.order_id || refunded.has(line.order_id)) return null;
    return el("button", { class: "small", type: "button", "data-refund": line.order_id, onclick: () => {
      order.value = line.order_id;
      reason.focus();
    } }, t("admin.balance.refundLine"));
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
  const reason = el("input", { id: "refund-reason", maxlength: "200", placeholder: t("admin.balance.refundReasonExample") });
  const refundErr = el("p", { class: "err", id: "refund-error", role: "alert" });
  const refundOut = el("div", { id: "refund-result" });
  const refund = el("button", { class: "primary", type: "submit", id: "refund-submit" }, t("admin.balance.refundSubmit"));
  const refundForm = el("form", { class: "card stack money-form", id: "refund-form", novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    refundErr.textContent = "";
    refundOut.replaceChildren();
    const id = order.value.trim(), why = reason.value.trim();
    if (!id || !why) {
      refundErr.textContent = t("admin.balance.refundMissing");
      return;
    }
    refund.disabled = true;
    try {
      const o = await guard(() => api("POST", `/admin/api/orders/${encodeURIComponent(id)}/refund`, { reason: why }));
      if (o) {
        refundOut.replaceChildren(el("div", { class: "result good" }, tx("admin.balance.refunded",
          { order: el("span", { class: "mono" }, o.order_id), amount: money(o.amount_cents), n: o.qty })));
        order.value = "";
        reason.value = "";
        current.awaiting((ts) => ts.some((x) => x.kind === TransferKind.Refund && x.order_id === o.order_id));
      }
    } catch (e) {
      refundErr.textContent = e.message;
    }
    refund.disabled = false;
  } },
  el("h2", {}, t("admin.balance.refundTitle")),
  el("p", { class: "muted", style: "margin:0" }, t("admin.balance.refundIntro")),
  el("label", {}, t("admin.balance.orderId"), order), el("label", {}, t("admin.balance.reason"), reason), refundErr, refund, refundOut);

  // The operator's goodwill: from the platform's account to a wallet, once
  // per request id (kept while the same credit is retried).
  let creditForm = null;
  if (operator) {
    const user = el("input", { id: "credit-user", maxlength: "64", autocomplete: "off", spellcheck: "false", placeholder: t("admin.balance.creditUserExample", { example: "g_…" }) });
    const amount = el("input", { id: "credit-amount", inputmode: "decimal", autocomplete: "off",
      placeholder: t("admin.balance.amountExample", { example: toUnits(500) }) });
    const why = el("input", { id: "credit-reason", maxlength: "200", placeholder: t("admin.balance.creditReasonExample") });
    const err = el("p", { class: "err", id: "credit-error", role: "alert" });
    const out = el("div", { id: "credit-result" });
    const submit = el("button", { class: "primary", type: "submit", id: "credit-submit" }, t("admin.balance.creditSubmit"));
    let intent = null; // {key, id}
    creditForm = el("form", { class: "card stack money-form", id: "credit-form", novalidate: true, onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = "";
      out.replaceChildren();
      const cents = parseUnits(amount.value);
      if (!user.value.trim() || !why.value.trim() || cents === null || cents < 1) {
        err.textContent = t("admin.balance.creditMissing", { currency: currentCurrency(), example: toUnits(500) });
        return;
      }
      const key = [user.value.trim(), cents, why.value.trim()].join("\n");
      if (!intent || intent.key !== key) intent = { key, id: requestID() };
      submit.disabled = true;
      try {
        const tr = await guard(() => api("POST", `/admin/api/wallets/${encodeURIComponent(user.value.trim())}/credit`,
          { amount_cents: cents, reason: why.value.trim(), request_id: intent.id }));
        if (tr) {
          out.replaceChildren(el("div", { class: "result good" }, tx("admin.balance.credited",
            { amount: money(tr.amount_cents), user: el("span", { class: "mono" }, user.value.trim()) })));
          intent = null;
          user.value = amount.value = why.value = "";
          if (b.account === tr.debit) current.awaiting((ts) => ts.some((x) => x.id === tr.id));
        }
      } catch (e) {
        err.textContent = e.message;
      }
      submit.disabled = false;
    } },
    el("h2", {}, t("admin.balance.creditTitle")),
    el("p", { class: "muted", style: "margin:0" }, t("admin.balance.creditIntro")),
    el("label", {}, t("admin.balance.shopperId"), user), el("label", {}, t("admin.balance.amount", { currency: currentCurrency() }), amount),
    el("label", {}, t("admin.balance.reason"), why),
    err, submit, out);
  }

  // A merchant's payout to its bank, once per request id (kept while the
  // same payout is retried: one the provider could not take yet is tried
  // again, never sent twice).
  let payoutForm = null;
  if (me.role === "merchant") {
    const amount = el("input", { id: "payout-amount", inputmode: "decimal", autocomplete: "off", placeholder: t("admin.balance.amountExample", { example: toUnits(10000) }) });
    const code = el("input", { id: "payout-code", inputmode: "numeric", maxlength: "6", autocomplete: "one-time-code" });
    const err = el("p", { class: "err", id: "payout-error", role: "alert" });
    const out = el("div", { id: "payout-result" });
    const submit = el("button", { class: "primary", type: "submit", id: "payout-submit" }, t("admin.balance.payoutSubmit"));
    let intent = null; // {cents, id}
    payoutForm = el("form", { class: "card stack money-form", id: "payout-form", novalidate: true, onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = "";
      out.replaceChildren();
      const cents = parseUnits(amount.value);
      if (cents === null || cents < 1) {
        err.textContent = t("admin.balance.payoutMissing", { currency: currentCurrency(), example: toUnits(10000) });
        return;
      }
      if (!intent || intent.cents !== cents) intent = { cents, id: requestID() };
      submit.disabled = true;
      try {
        const p = await guard(() => api("POST", "/admin/api/payouts", { amount_cents: cents, request_id: intent.id, totp: code.value.trim() }));
        if (p) {
          out.replaceChildren(p.status === PayoutStatus.Failed
            ? el("div", { class: "result bad" }, t("admin.balance.payoutFailed", { amount: money(p.amount_cents) }))
            : el("div", { class: "result good" }, t("admin.balance.payoutSent", { amount: money(p.amount_cents) })));
          intent = null;
          amount.value = code.value = "";
          current.awaiting((ts) => ts.some((x) => x.payout_id === p.payout_id));
        }
      } catch (e) {
        err.textContent = e.message;
      }
      submit.disabled = false;
    } },
    el("h2", {}, t("admin.balance.payoutTitle")),
    el("p", { class: "muted", style: "margin:0" }, t("admin.balance.payoutIntro")),
    el("label", {}, t("admin.balance.amount", { currency: currentCurrency() }), amount),
    el("label", {}, t("admin.balance.payoutCode"), code),
    err, submit, out);
  }

  const whose = operator ? el("select", { id: "balance-of", "aria-label": t("admin.balance.whose"), onchange: (ev) => {
    location.hash = ev.target.value === "0" ? "#/balance" : `#/balance/${ev.target.value}`;
  } }, el("option", { value: "0", selected: !merchant }, t("admin.balance.platform")),
  merchants.map((m) => el("option", { value: String(m.id), selected: m.id === merchant }, t("admin.common.merchantOption", { name: m.name, email: m.email })))) : null;
  const title = !operator ? t("admin.balance.yourAccount") : merchant ? (named ? userText(named.name) : t("admin.balance.merchantAccount", { id: merchant }))
    : t("admin.balance.platformAccount");
  v.show(el("div", { class: "row", style: "justify-content:space-between" }, el("h1", {}, t("admin.balance.title")), whose),
    el("div", { class: "money-top" },
      el("section", { class: "card balance" }, el("div", { class: "l" }, title), balance,
        el("p", { class: "muted small" }, tx("admin.balance.account", { account: el("span", { class: "mono", id: "balance-account" }, b.account) })),
        el("p", { class: "muted small" }, operator && !merchant ? t("admin.balance.platformNote") : t("admin.balance.merchantNote"))),
      payoutForm, refundForm, creditForm),
    el("h2", {}, t("admin.balance.statement")), behind, st.box);
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

// Start: the language and the session, then the page the address names;
// hash changes route from then on (as in shop.js).
(async () => {
  await loadLanguage();
  const signed = await whoAmI();
  addEventListener("hashchange", route);
  if (signed) route(); else loginView();
})();
